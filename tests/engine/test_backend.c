/* The opaque backend (engine/backend.h) on the CPU: every wrapper answers what the CPU context
 * under it says; a forward and a two-sequence forward_batch through the backend give bitwise
 * the logits of the context called directly; the slot hook set through the backend sees every
 * slot call and unsets cleanly; --device cuda without a GPU fails and says why. */
#include "harness.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/backend_impl.h"
#include "engine/error.h"
#include "engine/forward.h"
#include "engine/model.h"

#define N_TOK 9
static const int32_t prompt[N_TOK] = {1, 17, 300, 411, 65, 123, 400, 289, 5};

static hone_model *load(void)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", HONE_TEST_DATA_DIR, "tiny-llama-f32.gguf");
    hone_model *m = NULL;
    CHECK_MSG(hone_model_load(&m, path) == 0, "%s", hone_error_last());
    return m;
}

static hone_ctx_opts opts(void)
{
    hone_ctx_opts o = HONE_CTX_OPTS_INIT;
    o.n_threads = 2;
    o.n_ctx = 64;
    o.kv_blocks = 32;
    return o;
}

static void count_hook(void *user, int id, uint64_t ns, const hone_slot_shape *shape)
{
    (void)id; (void)ns; (void)shape;
    (*(int64_t *)user)++;
}

static void test_cpu_wrappers(void)
{
    hone_model *m = load();
    if (!m) return;
    hone_ctx_opts o = opts();
    hone_backend *b = NULL;
    CHECK_EQ_INT(hone_backend_new(&b, m, HONE_DEVICE_CPU, &o), 0);
    hone_ctx *cpu = b->cpu; /* white box: the context behind the wrappers */
    CHECK(cpu != NULL);
    CHECK_EQ_INT(hone_backend_device(b), HONE_DEVICE_CPU);
    CHECK(hone_backend_model(b) == m);
    CHECK_EQ_INT(hone_backend_n_ctx(b), 64);
    CHECK_EQ_INT(hone_backend_n_vocab(b), hone_model_hparams(m)->n_vocab);
    CHECK_EQ_INT(hone_backend_n_threads(b), 2);
    CHECK_STR_CONTAINS(hone_backend_describe(b), "cpu (2 threads)");
    CHECK(hone_backend_slots(b) == hone_ctx_slots(cpu));
    CHECK(hone_backend_kv(b) == hone_ctx_kv(cpu));

    /* forward through the backend == the context's own forward, bit for bit */
    int64_t V = hone_backend_n_vocab(b);
    size_t row = (size_t)V * sizeof(float);
    float *direct = malloc((size_t)N_TOK * row), *via = malloc((size_t)N_TOK * row);
    float *batch = malloc(2 * (size_t)N_TOK * row);
    hone_ctx *ref = NULL;
    CHECK_EQ_INT(hone_ctx_new(&ref, m, &o), 0);
    hone_kv_seq s0 = {0}, s1 = {0}, s2 = {0};
    CHECK_EQ_INT(hone_ctx_forward(ref, &s0, prompt, N_TOK, direct, 1), 0);
    hone_kv_cache_release(hone_ctx_kv(ref), &s0);
    int64_t calls = 0;
    CHECK_EQ_INT(hone_backend_set_slot_hook(b, count_hook, &calls), 0);
    CHECK_EQ_INT(hone_backend_forward(b, &s1, prompt, N_TOK, via, 1), 0);
    CHECK(calls > 0);
    CHECK(memcmp(direct, via, (size_t)N_TOK * row) == 0);
    hone_backend_release(b, &s1);
    CHECK_EQ_INT(s1.n_blocks, 0);

    /* forward_batch: the prompt for two sequences at once, row by row interleaved */
    CHECK_EQ_INT(hone_backend_set_slot_hook(b, NULL, NULL), 0);
    int64_t before = calls;
    int32_t toks[2 * N_TOK], pos[2 * N_TOK];
    hone_kv_seq *seqs[2 * N_TOK];
    float *outs[2 * N_TOK];
    for (int t = 0; t < N_TOK; t++)
        for (int q = 0; q < 2; q++) {
            toks[2 * t + q] = prompt[t];
            pos[2 * t + q] = t;
            seqs[2 * t + q] = q ? &s2 : &s1;
            outs[2 * t + q] = batch + ((int64_t)q * N_TOK + t) * V;
        }
    hone_batch bt = {2 * N_TOK, toks, seqs, pos, outs, NULL};
    CHECK_EQ_INT(hone_backend_forward_batch(b, &bt), 0);
    CHECK_EQ_INT(calls, before); /* the hook is off */
    CHECK(memcmp(batch, direct, (size_t)N_TOK * row) == 0);
    CHECK(memcmp(batch + (int64_t)N_TOK * V, direct, (size_t)N_TOK * row) == 0);
    hone_backend_release(b, &s1);
    hone_backend_release(b, &s2);
    free(direct);
    free(via);
    free(batch);
    hone_ctx_free(ref);
    hone_backend_free(b);
    hone_backend_free(NULL);
    hone_model_free(m);
}

static void test_cuda_without_gpu(void)
{
    int avail = 0;
    char why[256] = "";
    hone_cuda_backend_probe(&avail, why, sizeof why);
    if (avail) {
        fprintf(stderr, "  (a GPU is present: the no-GPU error is not exercised here)\n");
        return;
    }
    hone_model *m = load();
    if (!m) return;
    hone_ctx_opts o = opts();
    hone_backend *b = (hone_backend *)1;
    CHECK_EQ_INT(hone_backend_new(&b, m, HONE_DEVICE_CUDA, &o), HONE_EUNSUPPORTED);
    CHECK(b == NULL);
    CHECK_STR_CONTAINS(hone_error_last(), "--device cuda: no usable GPU (");
    /* auto falls back to the CPU */
    CHECK_EQ_INT(hone_backend_new(&b, m, HONE_DEVICE_AUTO, &o), 0);
    CHECK(b && hone_backend_device(b) == HONE_DEVICE_CPU);
    hone_backend_free(b);
    hone_model_free(m);
}

TEST_MAIN(TEST_CASE(test_cpu_wrappers), TEST_CASE(test_cuda_without_gpu))
