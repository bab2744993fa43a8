/* The guard's CUDA execution gates on a GPU, with the tiny q4_1 model:
 *  - the incumbent kernel of a slot of each argument list, as a candidate, passes kernel parity
 *    (exact tier) and model parity, and so does a correct rewrite of swiglu (good_cuda/);
 *  - the speed gate judges a copy of the incumbent "not faster";
 *  - every execution red-team candidate of tests/guard/redteam_cuda/ is rejected for its reason
 *    (wrong math, writes nothing, out of bounds, mutated input, results cached by pointer or by
 *    call count in __device__ globals, an endless loop, an illegal address);
 *  - the CLI's exit status and evidence; and this process never initialised CUDA (every
 *    worker could, and a last probe still can).
 * Exits 77 without a GPU. */
#include "harness.h"

#include <stdint.h>
#include <unistd.h>

#include "engine/error.h"
#include "engine/file.h"
#include "guard/cuda_exec.h"
#include "guard/guard.h"
#include "guard_test.h"

#define SRC HONE_SOURCE_DIR "/tests/guard/"
#define MODEL HONE_TEST_DATA_DIR "/tiny-llama-q4_1.gguf"
#define TIMEOUT_S 30.0  /* a kernel-parity worker, CUDA start-up included */
#define HANG_TIMEOUT_S 5.0 /* for the endless loop, which times out whatever the start-up */

static char STATE[256];

static int run_guard(hone_guard_result *res, const char *path, const char *slot, int skip_speed)
{
    hone_guard_opts o = guard_test_opts("cuda", slot, path, STATE);
    o.kernel_timeout_s = strstr(path, "loops_forever") ? HANG_TIMEOUT_S : TIMEOUT_S;
    o.skip_speed = skip_speed;
    int rc = guard_test_run(res, &o, stderr);
    CHECK_MSG(rc == 0, "guard could not run %s: %s", path, hone_error_last());
    return rc;
}

/* The incumbent, as a candidate, of a slot of every argument list: the marshalling of each,
 * the attention scratch and n_kv, rope in place, and the model run with a kernels root. */
static void test_incumbents_pass_parity(void)
{
    static const char *const SLOTS[] = {"embed", "rmsnorm", "matvec_q4_1", "matmul_q4_1", "rope",
                                        "attention_decode", "attention_prefill", "swiglu", "add"};
    for (size_t k = 0; k < sizeof SLOTS / sizeof SLOTS[0]; k++) {
        const char *slot = SLOTS[k];
        char path[512];
        snprintf(path, sizeof path, HONE_SOURCE_DIR "/kernels/cuda/%s.cu", slot);
        hone_guard_result res;
        if (run_guard(&res, path, slot, 1)) continue;
        fprintf(stderr, "  %-18s -> %s, %s tier (%.1f s)\n", slot, res.accepted ? "parity passed" : res.reason,
                res.tier, res.seconds);
        CHECK_MSG(res.accepted && res.evaluated, "incumbent %s: %s", slot, res.reason);
        CHECK_MSG(strcmp(res.tier, "exact") == 0, "incumbent %s: tier %s", slot, res.tier);
        CHECK_STR_CONTAINS(res.ev.device, "cuda: ");
    }
}

static void test_rewrite_passes_parity(void)
{
    hone_guard_result res;
    if (run_guard(&res, SRC "good_cuda/swiglu_x2.cu", "swiglu", 1)) return;
    fprintf(stderr, "  swiglu_x2.cu -> %s, %s tier; max |dlogit| %.3g\n", res.accepted ? "parity passed" : res.reason,
            res.tier, res.ev.model_max_abs_dlogit);
    CHECK_MSG(res.accepted, "%s", res.reason);
    CHECK_STR_CONTAINS(res.tier, "exact");
    CHECK(res.ev.model_prompts == 3 && res.ev.model_max_abs_dlogit == 0.0);
    /* the store followed the gates */
    char meta[1024], *txt = NULL;
    snprintf(meta, sizeof meta, "%s/candidates/%s/meta.json", STATE, res.hash);
    CHECK(hone_file_read(meta, &txt, NULL) == 0);
    CHECK_STR_CONTAINS(txt, "\"model-parity\"");
    CHECK_STR_CONTAINS(txt, "\"state\":\t\"accepted\"");
    free(txt);
}

static void test_copy_is_not_faster(void)
{
    hone_guard_result res;
    if (run_guard(&res, HONE_SOURCE_DIR "/kernels/cuda/swiglu.cu", "swiglu", 0)) return;
    fprintf(stderr, "  copy of the incumbent -> %s (%.3fx [%.3f, %.3f])\n", res.reason, res.speedup, res.ci_low,
            res.ci_high);
    CHECK_MSG(!res.accepted && res.code == HONE_GUARD_SLOWER, "%s: %s", hone_guard_code_name(res.code), res.reason);
    CHECK_STR_CONTAINS(res.reason, "not faster");
    CHECK(res.ev.reps >= 30 && res.speedup > 0.5 && res.speedup < 1.5);
}

static const guard_test_expect RT[] = {
    {"redteam_cuda/wrong_math.cu", "swiglu", HONE_GUARD_PARITY, "faithful bound"},
    {"redteam_cuda/writes_nothing.cu", "swiglu", HONE_GUARD_WROTE_NOTHING, "wrote nothing"},
    {"redteam_cuda/oob_write.cu", "swiglu", HONE_GUARD_CANARY, "past the end of its output"},
    {"redteam_cuda/mutates_input.cu", "swiglu", HONE_GUARD_INPUT_MUTATED, "mutates its input"},
    {"redteam_cuda/cache_by_pointer.cu", "swiglu", HONE_GUARD_PARITY, "[fresh inputs, same addresses]"},
    {"redteam_cuda/cache_by_count.cu", "swiglu", HONE_GUARD_WROTE_NOTHING, "wrote nothing"},
    {"redteam_cuda/loops_forever.cu", "swiglu", HONE_GUARD_TIMEOUT, "timed out after 5 s"},
    {"redteam_cuda/illegal_address.cu", "swiglu", HONE_GUARD_CRASH, "CUDA error"},
};

static void test_redteam(void)
{
    for (size_t i = 0; i < sizeof RT / sizeof RT[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, SRC "%s", RT[i].file);
        hone_guard_result res;
        if (run_guard(&res, path, RT[i].slot, 0) == 0) guard_test_check(&res, &RT[i]);
    }
}

static void test_cli(void)
{
    char cmd[2048], ev[512], *txt = NULL;
    snprintf(ev, sizeof ev, "%s/ev.json", STATE);
    snprintf(cmd, sizeof cmd, "%s guard -m %s --slot swiglu --backend cuda %sredteam_cuda/wrong_math.cu "
             "--state-dir %s --evidence %s >/dev/null 2>&1", HONE_BIN, MODEL, SRC, STATE, ev);
    CHECK_EQ_INT(WEXITSTATUS(system(cmd)), 1);
    CHECK(hone_file_read(ev, &txt, NULL) == 0);
    CHECK_STR_CONTAINS(txt, "\"verdict\":\t\"rejected\"");
    CHECK_STR_CONTAINS(txt, "\"code\":\t\"parity\"");
    CHECK_STR_CONTAINS(txt, "\"device\":\t\"cuda: ");
    free(txt);
}

/* Were CUDA initialised in this process, no worker forked from it could use the GPU. */
static void test_parent_never_initialised_cuda(void)
{
    hone_cuda_exec_device d;
    hone_cuda_exec_probe(&d);
    CHECK_MSG(d.available, "a last probe failed: %s", d.why);
}

int main(int argc, char **argv)
{
    hone_cuda_exec_device d;
    hone_cuda_exec_probe(&d); /* in a worker: this process must not initialise CUDA */
    if (!d.available) {
        fprintf(stderr, "skipped: no GPU (%s)\n", d.why);
        return 77;
    }
    fprintf(stderr, "device: %s (sm_%d, %.0f GB/s)\n", d.dev.name, d.dev.sm, d.dev.peak_gbps);
    snprintf(STATE, sizeof STATE, "/tmp/hone-guard-gpu-test-XXXXXX");
    if (!mkdtemp(STATE)) {
        perror("mkdtemp");
        return 1;
    }
    static const harness_case cases[] = {
        TEST_CASE(test_incumbents_pass_parity), TEST_CASE(test_rewrite_passes_parity),
        TEST_CASE(test_copy_is_not_faster), TEST_CASE(test_redteam), TEST_CASE(test_cli),
        TEST_CASE(test_parent_never_initialised_cuda)};
    int rc = harness_run(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", STATE);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", STATE);
    return rc;
}
