/* The guard end to end: the red-team corpus (each candidate rejected for the right reason), the
 * accepted candidates, the dynamic gates with the static scans switched off, the parent's
 * survival of every crash, and the CLI's exit codes. Uses the tiny q4_1 model. */
#include "harness.h"

#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/file.h"
#include "engine/slots.h"
#include "guard/guard.h"
#include "guard/oracle.h"
#include "guard_test.h"
#include "kernels/cpu/common.h"

#define SRC HONE_SOURCE_DIR "/tests/guard/"
#define MODEL HONE_TEST_DATA_DIR "/tiny-llama-q4_1.gguf"

static char STATE[256];
static volatile uint64_t PARENT_CANARY = 0x1234567890abcdefull;

static void setup(void)
{
    if (STATE[0]) return;
    snprintf(STATE, sizeof STATE, "/tmp/hone-guard-test-XXXXXX");
    if (!mkdtemp(STATE)) {
        perror("mkdtemp");
        exit(1);
    }
    unlink("/tmp/hone-pwned");
}

static int run_guard_on(hone_guard_result *res, const char *model, const char *file, const char *slot,
                        int skip_scan)
{
    hone_guard_opts o = guard_test_opts("cpu", slot, file, STATE);
    o.model_path = model;
    o.kernel_timeout_s = 3;
    o.skip_scan = skip_scan;
    int rc = guard_test_run(res, &o, stderr);
    CHECK_MSG(rc == 0, "guard could not run %s: %d", file, rc);
    return rc;
}

static int run_guard(hone_guard_result *res, const char *file, const char *slot, int skip_scan)
{
    return run_guard_on(res, MODEL, file, slot, skip_scan);
}

static const guard_test_expect RT[] = {
    {"wrong_math.c", "swiglu", HONE_GUARD_PARITY, "a-priori error bound"},
    {"odd_sizes.c", "swiglu", HONE_GUARD_PARITY, "n="},
    {"writes_nothing.c", "swiglu", HONE_GUARD_WROTE_NOTHING, "wrote nothing"},
    {"constant_zero.c", "swiglu", HONE_GUARD_CONSTANT, "constant output"},
    {"cache_by_pointer.c", "swiglu", HONE_GUARD_ELF, "mutable global 'last_gate'"},
    {"cache_by_count.c", "swiglu", HONE_GUARD_ELF, "mutable global 'calls'"},
    {"mutates_input.c", "swiglu", HONE_GUARD_INPUT_MUTATED, "mutates its input"},
    {"oob_write.c", "swiglu", HONE_GUARD_CANARY, "past the end of output 0"},
    {"underwrite.c", "swiglu", HONE_GUARD_CANARY, "wrote before its output"},
    {"overread_scalar.c", "matvec_f32", HONE_GUARD_CANARY, "past the end of input 'x'"},
    {"overread_tail512.c", "swiglu", HONE_GUARD_CANARY, "past the end of input"},
    {"skip_zero_blocks.c", "matvec_f32", HONE_GUARD_NONFINITE, "NaN/Inf mismatch"},
    {"skip_zero_q8.c", "matvec_q8_0", HONE_GUARD_NONFINITE, "NaN/Inf mismatch"},
    {"loops_forever.c", "swiglu", HONE_GUARD_TIMEOUT, "timed out after 3 s"},
    {"crashes.c", "swiglu", HONE_GUARD_CRASH, "killed by SIGSEGV"},
    {"calls_exit.c", "swiglu", HONE_GUARD_SCAN, "<stdlib.h> not allowed"},
    {"calls_fork.c", "swiglu", HONE_GUARD_SCAN, "'fork' (processes)"},
    {"calls_system.c", "swiglu", HONE_GUARD_SCAN, "'system' (processes)"},
    {"opens_file.c", "swiglu", HONE_GUARD_SCAN, "<stdio.h> not allowed"},
    {"reads_clock.c", "swiglu", HONE_GUARD_SCAN, "'__rdtsc' (clocks)"},
    {"nan_edge.c", "swiglu", HONE_GUARD_NONFINITE, "NaN/Inf mismatch"},
    {"low_precision.c", "matvec_f32", HONE_GUARD_NONFINITE, "NaN/Inf mismatch"}, /* f16 overflows */
    {"low_precision_bf16.c", "matvec_f32", HONE_GUARD_PARITY, "a-priori error bound"},
    {"shape_special.c", "matvec_f32", HONE_GUARD_PARITY, "cols="},
    {"share_violation.c", "swiglu", HONE_GUARD_SHARE, "share contract"},
    {"address_dependent.c", "rmsnorm", HONE_GUARD_NONDETERMINISTIC, "not bitwise identical"},
    {"compile_error.c", "swiglu", HONE_GUARD_COMPILE, "undefined_identifier"},
    /* source tricks: the scan reads the preprocessed tokens */
    {"paste_asm.c", "swiglu", HONE_GUARD_SCAN, "'__asm__' (inline assembly)"},
    {"paste_rdtsc.c", "swiglu", HONE_GUARD_SCAN, "'__builtin_ia32_rdtsc' (clocks)"},
    {"dunder_constructor.c", "swiglu", HONE_GUARD_SCAN, "'__constructor__' (load-time code)"},
    {"trigraph_include.c", "swiglu", HONE_GUARD_SCAN, "trigraph"},
    {"tls_counter.c", "swiglu", HONE_GUARD_SCAN, "'__thread' (threads)"},
    /* object tricks: the object verifier (the ELF gate) */
    {"ifunc_resolver.c", "swiglu", HONE_GUARD_ELF, "ifunc symbol 'hone_cpu_swiglu'"},
    {"ifunc_local.c", "swiglu", HONE_GUARD_ELF, "ifunc symbol 'act'"},
    {"init_array.c", "swiglu", HONE_GUARD_ELF, "runs code at load time (section .init_array"},
    {"init_function.c", "swiglu", HONE_GUARD_ELF, "runs code at load time (DT_INIT)"},
    {"counter_tm_clone_table.c", "swiglu", HONE_GUARD_ELF, "mutable global 'calls' in .tm_clone_table"},
    {"counter_data_rel_ro.c", "swiglu", HONE_GUARD_ELF, "mutable global 'calls' in .data.rel.ro"},
    {"counter_got.c", "swiglu", HONE_GUARD_ELF, "mutable global 'calls' in .got"},
    {"big_table_64.c", "swiglu", HONE_GUARD_COMPILE, "over the cap of 16777216"}, /* the compile path's cap */
    {"leaves_ftz.c", "swiglu", HONE_GUARD_ELF, "'vldmxcsr'"},
    {"forge_verdict.c", "swiglu", HONE_GUARD_SCAN, "'write'"},
    {"forge_verdict_fd.c", "swiglu", HONE_GUARD_SCAN, "'write'"},
    {"shape_gamed_swiglu.c", "swiglu", HONE_GUARD_E2E_REGRESSION, "end to end"},
    {"shape_gamed_rmsnorm.c", "rmsnorm", HONE_GUARD_E2E_REGRESSION, "end to end"},
    {"rounds_down.c", "add", HONE_GUARD_ELF, "(floating-point control)"},
    {"big_table_12.c", "swiglu", HONE_GUARD_ELF, "section .rodata is 125829"},
    {"code_in_rodata.c", "swiglu", HONE_GUARD_ELF, "outside executable code"},
    {"code_in_text.c", "swiglu", HONE_GUARD_ELF, "data object 'code' placed in executable section .text"},
    {"code_in_text_offset.c", "swiglu", HONE_GUARD_ELF, "data object 'code' placed in executable section .text"},
    {"fnptr_call.c", "swiglu", HONE_GUARD_ELF, "indirect call at 0x"},
    {"slower.c", "swiglu", HONE_GUARD_SLOWER, "not faster"},
    /* attention_decode's revision 3: shares that synchronise, and shares that leave the caller's
     * fold no partials (the scratch is poisoned before each call, so no earlier call's count) */
    {"atomic_last_share.c", "attention_decode", HONE_GUARD_SCAN, "'__atomic_add_fetch' (atomics)"},
    {"decode_whole_rows.c", "attention_decode", HONE_GUARD_WROTE_NOTHING, "n_kv=1024"},
};

static void test_redteam(void)
{
    setup();
    for (size_t i = 0; i < sizeof RT / sizeof RT[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, SRC "redteam/%s", RT[i].file);
        hone_guard_result res;
        if (run_guard(&res, path, RT[i].slot, 0) == 0) guard_test_check(&res, &RT[i]);
    }
}

/* With the static scans off, the dynamic gates still refuse what the scans would have. */
static void test_dynamic_without_scan(void)
{
    setup();
    static const struct { const char *file; hone_guard_code code; const char *text; const char *slot; } D[] = {
        /* each case is called once more with fresh inputs at the same addresses: the cache
         * keyed by the input's address returns the first inputs' result */
        {"cache_by_pointer.c", HONE_GUARD_PARITY, "[fresh inputs, same addresses]", NULL},
        /* the fourth call on changes its results: nth = 2 (calls 4 and 5) differs */
        {"cache_by_count.c", HONE_GUARD_SHARE, "other bits", NULL},
        {"calls_exit.c", HONE_GUARD_CRASH, "SIGKILL", NULL},
        {"calls_system.c", HONE_GUARD_CRASH, "killed by", NULL},
        /* MXCSR and the x87 control word are checked after every call */
        {"leaves_ftz.c", HONE_GUARD_FP_STATE, "(FTZ/DAZ)", NULL},
        {"rounds_down.c", HONE_GUARD_FP_STATE, "MXCSR 0x1f80 -> 0x3f80", "add"},
    };
    for (size_t i = 0; i < sizeof D / sizeof D[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, SRC "redteam/%s", D[i].file);
        hone_guard_result res;
        if (run_guard(&res, path, D[i].slot ? D[i].slot : "swiglu", 1)) continue;
        fprintf(stderr, "  %-22s (no scan) -> %-16s %s\n", D[i].file, hone_guard_code_name(res.code), res.reason);
        CHECK_MSG(!res.accepted && res.code == D[i].code, "%s without scan: expected %s, got %s (%s)",
                  D[i].file, hone_guard_code_name(D[i].code), hone_guard_code_name(res.code), res.reason);
        CHECK_STR_CONTAINS(res.reason, D[i].text);
    }
    struct stat st;
    CHECK_MSG(stat("/tmp/hone-pwned", &st) != 0, "a candidate ran a shell command");
}

static void test_good(void)
{
    setup();
    /* Correct candidates: each must pass every correctness gate and reach the speed gate. The
     * rmsnorm one must be accepted (its incumbent is scalar). The other two race incumbents that
     * already do what they do, so whether they win depends on the machine, and the test asks
     * only that the verdict agree with the gate's own figures: swiglu_vexp's 8 lanes of f64 exp
     * against the AVX-512 incumbent's 16 lanes of f32 (0.85x measured on Sapphire Rapids, above
     * 1.05x on Ice Lake), and matvec_q4_1_prefetch against the staged baseline, which since
     * 2026-12-03 prefetches too, with 4 rows in flight (0.54-0.65x on Ice Lake). The matvec
     * candidate is judged on SmolLM2, whose weights stream from memory. */
    static const char *const G[][4] = {{"swiglu_vexp.c", "swiglu", MODEL, "race"},
                                       {"rmsnorm_vec.c", "rmsnorm", MODEL, "win"},
                                       {"matvec_q4_1_prefetch.c", "matvec_q4_1", NULL, "race"}};
    for (size_t i = 0; i < sizeof G / sizeof G[0]; i++) {
        char path[512];
        const char *model = G[i][2] ? G[i][2] : harness_smollm2();
        if (!model) {
            fprintf(stderr, "  %-22s -> skipped: SmolLM2 is not installed\n", G[i][0]);
            continue;
        }
        snprintf(path, sizeof path, SRC "good/%s", G[i][0]);
        hone_guard_result res;
        for (int attempt = 0; attempt < 2; attempt++) { /* the speed gate once more if noisy */
            if (run_guard_on(&res, model, path, G[i][1], 0)) break;
            if (res.accepted || (res.code != HONE_GUARD_SLOWER && res.code != HONE_GUARD_E2E_REGRESSION &&
                                 res.code != HONE_GUARD_SUSPECT && res.code != HONE_GUARD_INCONCLUSIVE))
                break;
        }
        fprintf(stderr, "  %-22s -> %s, %s tier, %.2fx [%.2f, %.2f]\n", G[i][0],
                res.accepted ? "accepted" : res.reason, res.tier, res.speedup, res.ci_low, res.ci_high);
        if (strcmp(G[i][3], "race") == 0 && !res.accepted) {
            CHECK_MSG(res.code == HONE_GUARD_SLOWER || res.code == HONE_GUARD_INCONCLUSIVE ||
                          res.code == HONE_GUARD_E2E_REGRESSION,
                      "%s: refused before the speed gate: %s", G[i][0], res.reason);
            CHECK_MSG(res.code != HONE_GUARD_SLOWER || res.speedup < 1.05 || res.ci_low <= 1.0,
                      "%s: called slower at %.2fx [%.2f, %.2f]", G[i][0], res.speedup, res.ci_low, res.ci_high);
            continue;
        }
        CHECK_MSG(res.accepted, "%s: %s", G[i][0], res.reason);
        CHECK(res.speedup >= 1.05);
        CHECK(res.ev.model_prompts == 3 && res.ev.reps >= 30);
        /* the store recorded the verdict */
        char meta[1024];
        snprintf(meta, sizeof meta, "%s/candidates/%s/meta.json", STATE, res.hash);
        FILE *f = fopen(meta, "r");
        CHECK(f != NULL);
        if (f) {
            char buf[1 << 16];
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            buf[n] = 0;
            fclose(f);
            CHECK_STR_CONTAINS(buf, "\"state\":\t\"accepted\"");
            CHECK_STR_CONTAINS(buf, "kernel-parity");
        }
    }
}

/* Every crash above happened in a worker: this process still computes correctly. */
static void test_parent_unaffected(void)
{
    setup();
    hone_guard_result res;
    run_guard(&res, SRC "redteam/crashes.c", "swiglu", 0);
    CHECK_EQ_INT(res.code, HONE_GUARD_CRASH);
    CHECK(PARENT_CANARY == 0x1234567890abcdefull);
    hone_slot_table t;
    hone_slots_cpu_baseline(&t);
    float g[33], u[33], o[33];
    double ref[33];
    for (int i = 0; i < 33; i++) {
        g[i] = (float)(i - 16) * 0.25f;
        u[i] = 1.0f + (float)i / 64;
    }
    HONE_SLOTS_FN(&t, HONE_SLOT_SWIGLU, hone_slot_swiglu_fn)(o, g, u, 33, 0, 1);
    hone_oracle_swiglu(ref, g, u, 33);
    for (int i = 0; i < 33; i++) CHECK_NEAR(o[i], ref[i], 1e-6);
}

static void test_cli(void)
{
    setup();
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s guard >/dev/null 2>&1", HONE_BIN);
    CHECK_EQ_INT(WEXITSTATUS(system(cmd)), 2);
    snprintf(cmd, sizeof cmd,
             "%s guard -m %s --slot swiglu --backend cpu %sredteam/wrong_math.c --state-dir %s "
             "--evidence %s/ev.json >/dev/null 2>&1", HONE_BIN, MODEL, SRC, STATE, STATE);
    CHECK_EQ_INT(WEXITSTATUS(system(cmd)), 1);
    char ev[512];
    snprintf(ev, sizeof ev, "%s/ev.json", STATE);
    FILE *f = fopen(ev, "r");
    CHECK(f != NULL);
    if (f) {
        char buf[1 << 15];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
        CHECK_STR_CONTAINS(buf, "\"verdict\":\t\"rejected\"");
        CHECK_STR_CONTAINS(buf, "\"code\":\t\"parity\"");
    }
}

/* Forged verdicts: with the scans off, candidates that write "verdict: ACCEPTED" on fds 0-2 and
 * on 3..63 run under strict seccomp (where write is allowed), but a worker has /dev/null on 0-2
 * and nothing else open: the guard's report, on this process's stderr (here a file) and the
 * file's own descriptor, holds the real verdict and no forged line. */
static void test_forged_verdicts(void)
{
    setup();
    char cap[300];
    snprintf(cap, sizeof cap, "%s/stderr.txt", STATE);
    fflush(stderr);
    int saved = dup(2), fd = open(cap, O_CREAT | O_TRUNC | O_RDWR, 0600);
    CHECK(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    const char *files[] = {"forge_verdict.c", "forge_verdict_fd.c"};
    hone_guard_result res[2];
    for (int i = 0; i < 2; i++) {
        char path[512];
        snprintf(path, sizeof path, SRC "redteam/%s", files[i]);
        hone_guard_opts o = guard_test_opts("cpu", "swiglu", path, STATE);
        o.skip_scan = 1;
        o.quiet = 0; /* the report goes to stderr, the captured file */
        o.kernel_timeout_s = 3;
        CHECK_EQ_INT(guard_test_run(&res[i], &o, stderr), 0);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char *text = NULL;
    size_t len = 0;
    CHECK_EQ_INT(hone_file_read(cap, &text, &len), 0);
    close(fd);
    for (int i = 0; i < 2; i++) {
        fprintf(stderr, "  %-22s (no scan) -> %-16s %s\n", files[i], hone_guard_code_name(res[i].code), res[i].reason);
        CHECK(!res[i].accepted && res[i].code == HONE_GUARD_PARITY);
    }
    CHECK_STR_CONTAINS(text, "verdict: REJECTED (parity)");
    CHECK_MSG(text && !strstr(text, "FORGED-VERDICT"), "a forged line reached the guard's report");
    free(text);
}

/* A legitimate reorder (four accumulators instead of the baseline's sixteen-lane chain): other
 * bits, within the a-priori bound, so the parity gates accept it as faithful. Its speed depends on
 * whether the timed shape streams from DRAM (1.0-1.1x here), so only parity is asserted. */
static void test_reorder_faithful(void)
{
    setup();
    hone_guard_opts o = guard_test_opts("cpu", "matvec_f32", SRC "good/matvec_f32_4acc.c", STATE);
    o.skip_speed = 1;
    hone_guard_result res;
    CHECK_EQ_INT(guard_test_run(&res, &o, o.quiet ? NULL : stderr), 0);
    fprintf(stderr, "  matvec_f32_4acc.c      -> %s, %s tier\n", res.accepted ? "parity passed" : res.reason, res.tier);
    CHECK_MSG(res.accepted, "%s", res.reason);
    CHECK(!strcmp(res.tier, "faithful"));
}

TEST_MAIN(TEST_CASE(test_forged_verdicts), TEST_CASE(test_reorder_faithful), TEST_CASE(test_redteam), TEST_CASE(test_dynamic_without_scan), TEST_CASE(test_good),
          TEST_CASE(test_parent_unaffected), TEST_CASE(test_cli))
