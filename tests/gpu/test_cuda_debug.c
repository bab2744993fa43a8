/* The CUDA backend's debugging and fault paths: HONE_CUDA_SYNC=1 (a check after every launch,
 * graphs off) decodes bitwise what the plain backend decodes; a decode step whose graph capture
 * fails falls back to uncaptured decode (HONE_CUDA_CAPTURE_FAULT=1 makes every capture fail)
 * with bitwise the same logits and says why in its description, instead of failing every step;
 * hone_cuda_sync_check names what it checked when a launch failed. Exits 77 without a GPU. */
#include "harness.h"

#ifndef HONE_HAVE_CUDA
int main(void)
{
    fprintf(stderr, "skipped: this build has no CUDA support\n");
    return 77;
}
#else

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend_impl.h"
#include "engine/cuda.h"
#include "engine/error.h"
#include "engine/model.h"

#define MODEL HONE_TEST_DATA_DIR "/tiny-llama-q4_1.gguf"
#define PROMPT 5
#define STEPS 12

static hone_model *model;

/* Opens a CUDA backend with the given environment, prefills a fixed prompt and decodes STEPS
 * greedy tokens; out gets the logits of every decode step ([STEPS][n_vocab]), desc the
 * backend's description. Returns the number of calls that failed. */
static int decode(float *out, char *desc, size_t cap, const char *graphs, const char *sync, const char *fault)
{
    setenv("HONE_CUDA_GRAPHS", graphs, 1);
    setenv("HONE_CUDA_SYNC", sync, 1);
    setenv("HONE_CUDA_CAPTURE_FAULT", fault, 1);
    hone_ctx_opts o = HONE_CTX_OPTS_INIT;
    o.n_ctx = 64;
    hone_backend_i be;
    void *ctx = NULL;
    int failed = 0;
    if (hone_cuda_backend_new(&be, &ctx, model, &o)) {
        CHECK_MSG(0, "CUDA backend: %s", hone_error_last());
        return 1;
    }
    int64_t V = hone_model_hparams(model)->n_vocab;
    int32_t toks[PROMPT] = {1, 17, 42, 99, 7};
    hone_kv_seq seq = {0};
    float *row = malloc((size_t)V * sizeof *row);
    if (be.forward(ctx, &seq, toks, PROMPT, row, 0)) failed++;
    for (int s = 0; s < STEPS; s++) {
        int32_t next = 0;
        for (int64_t i = 1; i < V; i++)
            if (row[i] > row[next]) next = (int32_t)i;
        if (be.forward(ctx, &seq, &next, 1, row, 0)) {
            fprintf(stderr, "  step %d: %s\n", s, hone_error_last());
            failed++;
        }
        memcpy(out + (int64_t)s * V, row, (size_t)V * sizeof *row);
    }
    CHECK_EQ_INT(seq.n_tokens, PROMPT + STEPS - failed);
    snprintf(desc, cap, "%s", be.describe(ctx));
    fprintf(stderr, "  %s\n", desc);
    be.release(ctx, &seq);
    be.free(ctx);
    free(row);
    return failed;
}

static void test_sync_and_capture_fallback(void)
{
    int64_t V = hone_model_hparams(model)->n_vocab;
    size_t bytes = (size_t)(STEPS * V) * sizeof(float);
    float *ref = malloc(bytes), *got = malloc(bytes);
    char desc[1024];

    CHECK_EQ_INT(decode(ref, desc, sizeof desc, "0", "0", "0"), 0);
    CHECK(strstr(desc, "graphs off") != NULL);

    CHECK_EQ_INT(decode(got, desc, sizeof desc, "1", "0", "0"), 0);
    CHECK(strstr(desc, "graphs on") != NULL);
    CHECK_MSG(memcmp(got, ref, bytes) == 0, "graph decode differs from uncaptured decode");

    /* every capture fails: every step still succeeds, uncaptured, bitwise the same */
    CHECK_EQ_INT(decode(got, desc, sizeof desc, "1", "0", "1"), 0);
    CHECK_MSG(strstr(desc, "capture failed") != NULL, "description: %s", desc);
    CHECK_MSG(memcmp(got, ref, bytes) == 0, "decode after a failed capture differs");

    /* a check after every launch changes nothing but the time */
    CHECK_EQ_INT(decode(got, desc, sizeof desc, "1", "1", "0"), 0);
    CHECK_MSG(strstr(desc, "HONE_CUDA_SYNC") != NULL && strstr(desc, "graphs off") != NULL, "description: %s", desc);
    CHECK_MSG(memcmp(got, ref, bytes) == 0, "HONE_CUDA_SYNC decode differs");
    setenv("HONE_CUDA_SYNC", "0", 1);
    setenv("HONE_CUDA_CAPTURE_FAULT", "0", 1);
    free(ref);
    free(got);
}

static void test_sync_check_names_the_launch(void)
{
    cudaStream_t s;
    CHECK_EQ_INT(cudaStreamCreate(&s), cudaSuccess);
    CHECK_EQ_INT(hone_cuda_sync_check(s, "hone_cuda_add over 8 x 1 items", __FILE__, __LINE__), 0);
    /* a failed launch-like call leaves its error for cudaGetLastError, as a bad launch does */
    CHECK(cudaMemcpyAsync(NULL, NULL, 16, cudaMemcpyDeviceToDevice, s) != cudaSuccess);
    int rc = hone_cuda_sync_check(s, "hone_cuda_add over 8 x 1 items", __FILE__, __LINE__);
    CHECK(rc < 0);
    CHECK_MSG(strstr(hone_error_last(), "launch of hone_cuda_add over 8 x 1 items") != NULL, "%s", hone_error_last());
    /* the error was taken: the next check is clean */
    CHECK_EQ_INT(hone_cuda_sync_check(s, "hone_cuda_add", __FILE__, __LINE__), 0);
    cudaStreamDestroy(s);
}

int main(int argc, char **argv)
{
    int n_dev = 0;
    char why[256];
    hone_cuda_probe(&n_dev, why, sizeof why);
    if (n_dev <= 0) {
        fprintf(stderr, "skipped: no GPU (%s)\n", why);
        return 77;
    }
    if (hone_model_load(&model, MODEL)) {
        fprintf(stderr, "%s: %s\n", MODEL, hone_error_last());
        return 1;
    }
    static const harness_case cases[] = {TEST_CASE(test_sync_and_capture_fallback),
                                         TEST_CASE(test_sync_check_names_the_launch)};
    int rc = harness_run(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
    hone_model_free(model);
    return rc;
}
#endif
