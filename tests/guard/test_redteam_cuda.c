/* The guard's CUDA path without a GPU (runs in CI): every file of tests/guard/redteam_cuda/ is
 * rejected by the scan or compile gates for its stated reason, or passes them and is "not
 * evaluated" (HONE_CUDA_DEVICE names a device that does not exist, so this holds on a machine
 * with a GPU too); the scan admits "common.cuh" and no other header; a candidate's kernels root
 * holds it and links the rest, and compiles for sm_90 with the engine's options; the CUDA
 * launch arguments of a case follow kernels/cuda/README.md; GPU workers keep their other limits;
 * the CLI exits 1 with "not evaluated". The execution gates are tests/gpu/test_guard_cuda.c. */
#include "harness.h"

#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "candidates/compile.h"
#include "candidates/worker.h"
#include "engine/cuda_kernels.h"
#include "engine/error.h"
#include "engine/file.h"
#include "guard/cases.h"
#include "guard/cuda_exec.h"
#include "guard/guard.h"
#include "guard/scan.h"
#include "guard_test.h"

#define SRC HONE_SOURCE_DIR "/tests/guard/"
#define NO_GPU "HONE_CUDA_DEVICE=999999"

static char STATE[256];

static void setup(void)
{
    if (STATE[0]) return;
    snprintf(STATE, sizeof STATE, "/tmp/hone-guard-cuda-test-XXXXXX");
    if (!mkdtemp(STATE)) {
        perror("mkdtemp");
        exit(1);
    }
    setenv("HONE_CUDA_DEVICE", "999999", 1);
}

static void test_scan_includes(void)
{
    char why[256];
    const char *k = "\nextern \"C\" __global__ void hone_cuda_add(float *y) { y[0] = 1.0f; }\n";
    char src[512];
    snprintf(src, sizeof src, "#include \"common.cuh\"  // the helpers%s", k);
    CHECK_MSG(hone_scan_cuda_source(src, why, sizeof why) == 0, "%s", why);
    snprintf(src, sizeof src, "# include \"common.cuh\"%s", k);
    CHECK_MSG(hone_scan_cuda_source(src, why, sizeof why) == 0, "%s", why);
    snprintf(src, sizeof src, "#include <stdio.h>%s", k);
    CHECK(hone_scan_cuda_source(src, why, sizeof why) != 0);
    CHECK_STR_CONTAINS(why, "only \"common.cuh\"");
    snprintf(src, sizeof src, "#include \"common.cuh\" \"other.h\"%s", k);
    CHECK(hone_scan_cuda_source(src, why, sizeof why) != 0);
    snprintf(src, sizeof src, "#include \"../common.cuh\"%s", k);
    CHECK(hone_scan_cuda_source(src, why, sizeof why) != 0);
}

/* Without a GPU: what the scan and compile gates make of each file. */
static const guard_test_expect RT[] = {
    {"redteam_cuda/wrong_math.cu", "swiglu", HONE_GUARD_NOT_EVALUATED, "no GPU (compile gates passed)"},
    {"redteam_cuda/writes_nothing.cu", "swiglu", HONE_GUARD_NOT_EVALUATED, "no GPU (compile gates passed)"},
    {"redteam_cuda/oob_write.cu", "swiglu", HONE_GUARD_NOT_EVALUATED, "no GPU (compile gates passed)"},
    {"redteam_cuda/mutates_input.cu", "swiglu", HONE_GUARD_NOT_EVALUATED, "no GPU (compile gates passed)"},
    {"redteam_cuda/cache_by_pointer.cu", "swiglu", HONE_GUARD_NOT_EVALUATED, "no GPU (compile gates passed)"},
    {"redteam_cuda/cache_by_count.cu", "swiglu", HONE_GUARD_NOT_EVALUATED, "no GPU (compile gates passed)"},
    {"redteam_cuda/loops_forever.cu", "swiglu", HONE_GUARD_NOT_EVALUATED, "no GPU (compile gates passed)"},
    {"redteam_cuda/illegal_address.cu", "swiglu", HONE_GUARD_NOT_EVALUATED, "no GPU (compile gates passed)"},
    {"redteam_cuda/reads_clock.cu", "swiglu", HONE_GUARD_SCAN, "'clock64' (clock reads)"},
    {"redteam_cuda/includes_header.cu", "swiglu", HONE_GUARD_SCAN, "#include not allowed"},
    {"redteam_cuda/compile_error.cu", "swiglu", HONE_GUARD_COMPILE, "undefined_identifier"},
    {"redteam_cuda/no_launch_line.cu", "swiglu", HONE_GUARD_COMPILE, "hone-launch"},
#ifdef HONE_HAVE_CUDA /* the cubin's symbol table is read by engine/cuda_nvrtc.c's CUDA half */
    {"redteam_cuda/wrong_entry.cu", "swiglu", HONE_GUARD_COMPILE, "hone_cuda_swiglu"},
#endif
    /* a correct rewrite that includes common.cuh: the header reaches NVRTC */
    {"good_cuda/swiglu_x2.cu", "swiglu", HONE_GUARD_NOT_EVALUATED, "no GPU (compile gates passed)"},
};

static void run_guard(hone_guard_result *res, const char *path, const char *slot, const char *ev)
{
    hone_guard_opts o = guard_test_opts("cuda", slot, path, STATE);
    o.evidence_path = ev;
    int rc = guard_test_run(res, &o, stderr);
    CHECK_MSG(rc == 0, "guard could not run %s: %s", path, hone_error_last());
}

static void test_redteam_without_gpu(void)
{
    setup();
    char ev[512];
    snprintf(ev, sizeof ev, "%s/ev.json", STATE);
    for (size_t i = 0; i < sizeof RT / sizeof RT[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, SRC "%s", RT[i].file);
        hone_guard_result res;
        run_guard(&res, path, RT[i].slot, ev);
        guard_test_check(&res, &RT[i]);
        char *txt = NULL;
        CHECK(hone_file_read(ev, &txt, NULL) == 0);
        if (RT[i].code == HONE_GUARD_NOT_EVALUATED) {
            CHECK_STR_CONTAINS(txt, "\"verdict\":\t\"not evaluated\"");
            CHECK_STR_CONTAINS(txt, "hone-launch block=");          /* the compile gate passed */
            CHECK_STR_CONTAINS(txt, "--fmad=false");                /* the engine's options */
        } else {
            CHECK_STR_CONTAINS(txt, "\"verdict\":\t\"rejected\"");
        }
        free(txt);
    }
}

/* The candidate's kernels root: its file, every other one linked, compiled with the engine's
 * options through hone_cuda_kernels_compile (the guard's step before any GPU worker). */
static void test_kernels_root(void)
{
    char root[4200], path[4400], inc[4096], *src = NULL, *got = NULL;
    size_t len = 0;
    CHECK(hone_file_read(SRC "good_cuda/swiglu_x2.cu", &src, &len) == 0);
    CHECK_MSG(hone_cuda_exec_kernels_new(root, sizeof root, "swiglu", src, len) == 0, "%s", hone_error_last());
    CHECK(hone_cuda_kernels_dir(inc, sizeof inc) == 0);
    snprintf(path, sizeof path, "%s/cuda/swiglu.cu", root);
    CHECK(hone_file_read(path, &got, NULL) == 0);
    CHECK(got && src && strcmp(got, src) == 0);
    free(got);
    struct stat st;
    for (int k = 0; k < HONE_CUDA_KERNEL_COUNT; k++) {
        if (k == HONE_SLOT_SWIGLU) continue;
        snprintf(path, sizeof path, "%s/cuda/%s.cu", root, hone_cuda_kernels_name(k));
        CHECK_MSG(lstat(path, &st) == 0 && S_ISLNK(st.st_mode), "%s is not a link", path);
    }
    snprintf(path, sizeof path, "%s/cuda/common.cuh", root);
    CHECK(lstat(path, &st) == 0 && S_ISLNK(st.st_mode));
#ifdef HONE_HAVE_CUDA
    snprintf(path, sizeof path, "%s/cuda", root);
    CHECK_MSG(hone_cuda_kernels_compile(path, 90) == 0, "%s", hone_error_last());
#endif
    hone_cuda_exec_kernels_free(root);
    CHECK(stat(root, &st) != 0);
    snprintf(path, sizeof path, "%s/add.cu", inc);
    CHECK_MSG(stat(path, &st) == 0, "removing the root removed the incumbent %s", path);
#ifdef HONE_HAVE_CUDA
    /* a candidate the engine's NVRTC refuses: the error names the slot's file */
    const char *bad = "// hone-launch: block=32 x=32 y=1\nextern \"C\" __global__ void hone_cuda_swiglu() { nope; }\n";
    CHECK(hone_cuda_exec_kernels_new(root, sizeof root, "swiglu", bad, strlen(bad)) == 0);
    snprintf(path, sizeof path, "%s/cuda", root);
    CHECK(hone_cuda_kernels_compile(path, 90) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "swiglu.cu");
    hone_cuda_exec_kernels_free(root);
#endif
    free(src);
}

/* hone_cases_cuda_args against the README's argument table, on a fake device address. */
static void test_cuda_args(void)
{
    uint8_t *dev = (uint8_t *)(uintptr_t)0x7f0000000000ull;
    float *out = (float *)(uintptr_t)0x7e0000000000ull, *scr = (float *)(uintptr_t)0x7d0000000000ull;
    int32_t *nkv = (int32_t *)(uintptr_t)0x7c0000000000ull;
    static const struct { hone_slot_id slot; int n_args; } S[] = {
        {HONE_SLOT_SWIGLU, 4}, {HONE_SLOT_ATTENTION_DECODE, 13}, {HONE_SLOT_ATTENTION_PREFILL, 14},
        {HONE_SLOT_MATMUL_Q4_1, 6}, {HONE_SLOT_MATVEC_F16, 5}, {HONE_SLOT_EMBED, 6}, {HONE_SLOT_ROPE, 8},
        {HONE_SLOT_RMSNORM, 6}};
    for (size_t k = 0; k < sizeof S / sizeof S[0]; k++) {
        hone_case_set cs;
        CHECK(hone_cases_new(&cs, S[k].slot, NULL, 7) == 0);
        size_t prev_hi = 0;
        for (int i = 0; i < cs.n; i++) {
            const hone_case *c = &cs.c[i];
            size_t lo, hi;
            hone_cases_span(c, &lo, &hi);
            CHECK(lo < c->out_off[0] && lo >= prev_hi && hi <= cs.bytes && hi >= c->scratch_off);
            prev_hi = hi;
            hone_cases_cuda_launch L;
            hone_cases_cuda_args(&L, c, dev, lo, out, scr, nkv);
            CHECK_MSG(L.n_args == S[k].n_args, "%s: %d arguments", c->desc, L.n_args);
            CHECK(*(float **)L.args[0] == out);
            const int64_t *D = c->shape.d;
#define IN(a) (dev + (c->in_off[a] - lo))
            switch (S[k].slot) {
            case HONE_SLOT_SWIGLU:
                CHECK(*(const uint8_t **)L.args[1] == IN(1) && *(const uint8_t **)L.args[2] == IN(2));
                CHECK(*(int64_t *)L.args[3] == D[0] && L.items_x == D[0] && L.items_y == 1);
                break;
            case HONE_SLOT_ATTENTION_DECODE: /* dims: n, pos0, n_kv, block_size, heads, ... */
                CHECK(*(int32_t **)L.args[5] == nkv && *(float **)L.args[11] == scr);
                CHECK(*(int64_t *)L.args[12] == c->n_kv && *(float *)L.args[10] == c->shape.f[0]);
                CHECK(c->n_kv == D[2] && L.items_x == D[4] && L.items_y == 1);
                CHECK(hone_cases_cuda_scratch_len(c) == D[4] * c->n_kv);
                break;
            case HONE_SLOT_ATTENTION_PREFILL:
                CHECK(*(int64_t *)L.args[5] == D[0] && *(int64_t *)L.args[6] == D[1]);
                CHECK(*(int64_t *)L.args[13] == D[1] + D[0] && L.items_y == D[0]);
                CHECK(*(const uint8_t **)L.args[4] == IN(4));
                break;
            case HONE_SLOT_MATMUL_Q4_1: /* n, rows, cols */
                CHECK(*(int64_t *)L.args[3] == D[0] && *(int64_t *)L.args[4] == D[1]);
                CHECK(L.items_x == D[1] && L.items_y == D[0]);
                break;
            case HONE_SLOT_MATVEC_F16: /* rows, cols */
                CHECK(*(int64_t *)L.args[3] == D[0] && *(int64_t *)L.args[4] == D[1]);
                CHECK(hone_cases_cuda_scratch_len(c) == 0);
                break;
            case HONE_SLOT_EMBED: /* n, dim, vocab */
                CHECK(*(int32_t *)L.args[2] == c->shape.dtype && *(const uint8_t **)L.args[3] == IN(3));
                CHECK(L.items_x == D[1] && L.items_y == D[0]);
                break;
            case HONE_SLOT_ROPE: /* in place on out; pos is argument 1 */
                CHECK(*(const uint8_t **)L.args[1] == IN(1) && *(float *)L.args[6] == c->shape.f[0]);
                CHECK(*(int32_t *)L.args[7] == c->shape.flag && L.items_x == D[0] * D[1]);
                break;
            default:
                CHECK(*(float *)L.args[5] == c->shape.f[0] && L.items_x == D[0]);
                break;
            }
#undef IN
        }
        hone_cases_free(&cs);
    }
}

static int w_alloc(void *arg)
{
    size_t n = *(size_t *)arg;
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    memset(p, 1, n);
    return p[n - 1] == 1 ? 0 : 2;
}

/* A GPU worker is left without RLIMIT_AS (the driver's address reservations) and keeps the rest. */
static void test_worker_gpu_limits(void)
{
    hone_worker_opts o = HONE_WORKER_OPTS_INIT;
    hone_worker_result r;
    size_t big = (size_t)512 << 20;
    o.as_extra = (size_t)64 << 20;
    CHECK(hone_worker_run(&r, &o, w_alloc, &big) == 0);
    CHECK_MSG(!r.ok, "512 MiB allocated under a 64 MiB address-space allowance");
    o.gpu = 1;
    CHECK(hone_worker_run(&r, &o, w_alloc, &big) == 0);
    CHECK_MSG(r.ok, "a GPU worker could not allocate: %s", r.reason);
}

static void test_cli(void)
{
    setup();
    char cmd[2048], ev[512], *txt = NULL;
    snprintf(ev, sizeof ev, "%s/cli.json", STATE);
    snprintf(cmd, sizeof cmd, NO_GPU " %s guard --slot swiglu --backend cuda %sredteam_cuda/wrong_math.cu "
             "--state-dir %s --evidence %s > %s/cli.out 2>&1", HONE_BIN, SRC, STATE, ev, STATE);
    CHECK_EQ_INT(WEXITSTATUS(system(cmd)), 1);
    snprintf(cmd, sizeof cmd, "%s/cli.out", STATE);
    CHECK(hone_file_read(cmd, &txt, NULL) == 0);
    CHECK_STR_CONTAINS(txt, "verdict: NOT EVALUATED (not-evaluated) - not evaluated: no GPU (compile gates passed)");
    free(txt);
    txt = NULL;
    CHECK(hone_file_read(ev, &txt, NULL) == 0);
    CHECK_STR_CONTAINS(txt, "\"code\":\t\"not-evaluated\"");
    free(txt);
    snprintf(cmd, sizeof cmd, NO_GPU " %s guard --slot swiglu --backend cuda %sredteam_cuda/compile_error.cu "
             "--state-dir %s >/dev/null 2>&1", HONE_BIN, SRC, STATE);
    CHECK_EQ_INT(WEXITSTATUS(system(cmd)), 1);
}

int main(int argc, char **argv)
{
    char why[256];
    if (!hone_compile_nvrtc_available(why, sizeof why)) {
        fprintf(stderr, "skipped: %s\n", why);
        return 77;
    }
    static const harness_case cases[] = {
        TEST_CASE(test_scan_includes), TEST_CASE(test_redteam_without_gpu), TEST_CASE(test_kernels_root),
        TEST_CASE(test_cuda_args), TEST_CASE(test_worker_gpu_limits), TEST_CASE(test_cli)};
    int rc = harness_run(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
    if (STATE[0]) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", STATE);
        if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", STATE);
    }
    return rc;
}
