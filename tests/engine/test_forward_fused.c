/* Fused slots in the forward pass: with the fused slots' baseline compositions installed
 * (engine/slots.h: "provided"), decode calls them and gives bitwise the logits of the unfused
 * sequence, on a tiny model of every weight dtype (qwen2's q/k/v biases and a tied head
 * included) and on SmolLM2 where it is installed; the slot hook attributes each fused call to
 * the fused slot. Prefill (pieces of more than one token) never calls them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/error.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "harness.h"

#define N_TOK 13

static const int32_t prompt[N_TOK] = {1, 17, 300, 411, 65, 123, 400, 289, 5, 1000, 77, 2047, 3};

typedef struct {
    int calls[HONE_SLOT_MAX];
} counts;

static void count_hook(void *user, int id, uint64_t ns, const hone_slot_shape *s)
{
    (void)ns, (void)s;
    ((counts *)user)->calls[id]++;
}

/* Every fused slot of t gets its descriptor's baseline (the unfused composition). */
static void provide_fused(hone_slot_table *t)
{
    for (int id = HONE_SLOT_FUSED_FIRST; id < HONE_SLOT_COUNT; id++)
        hone_slots_set(t, id, hone_slots_desc(id)->cpu_baseline);
}

/* Logits of every position: the first `prefill` tokens in one piece, then one token at a
 * time; fused: with the fused slots provided. Calls per slot into *k. */
static float *run(const hone_model *m, int fused, int prefill, counts *k)
{
    hone_ctx_opts o = HONE_CTX_OPTS_INIT;
    hone_ctx *ctx = NULL;
    hone_kv_seq seq = {0};
    o.n_threads = 2;
    o.n_ctx = 64;
    int64_t nv = hone_model_hparams(m)->n_vocab;
    float *out = calloc((size_t)(N_TOK * nv), sizeof *out);
    if (hone_ctx_new(&ctx, m, &o)) {
        CHECK_MSG(0, "context: %s", hone_error_last());
        free(out);
        return NULL;
    }
    if (fused) provide_fused(hone_ctx_slots(ctx));
    memset(k, 0, sizeof *k);
    hone_ctx_set_hook(ctx, count_hook, k);
    int rc = hone_ctx_forward(ctx, &seq, prompt, prefill, out, 1);
    for (int t = prefill; t < N_TOK && !rc; t++) rc = hone_ctx_forward(ctx, &seq, &prompt[t], 1, out + t * nv, 0);
    CHECK_EQ_INT(rc, 0);
    hone_kv_cache_release(hone_ctx_kv(ctx), &seq);
    hone_ctx_free(ctx);
    return out;
}

static void check_model(const char *path)
{
    hone_model *m = NULL;
    if (hone_model_load(&m, path)) {
        CHECK_MSG(0, "load %s: %s", path, hone_error_last());
        return;
    }
    const hone_hparams *hp = hone_model_hparams(m);
    const hone_layer *L = hone_model_layer(m, 0);
    int64_t nv = hp->n_vocab;
    size_t bytes = (size_t)(N_TOK * nv) * sizeof(float);
    counts ku, kf;
    /* 4 prompt tokens as one piece (prefill: no fused call), then 9 decode steps */
    float *plain = run(m, 0, 4, &ku), *fused = run(m, 1, 4, &kf);
    CHECK_MSG(plain && fused && memcmp(plain, fused, bytes) == 0,
              "%s: logits with the fused slots differ from the unfused sequence", path);
    int64_t steps = N_TOK - 4;
    int qkv = hone_slots_fused_id(HONE_SLOT_KIND_QKV, L->wq.dtype);
    int ffn = hone_slots_fused_id(HONE_SLOT_KIND_FFN, L->w_gate.dtype);
    int head = hone_slots_fused_id(HONE_SLOT_KIND_RMSNORM_MATVEC, hone_model_output(m)->dtype);
    int fused_calls = 0;
    for (int id = HONE_SLOT_FUSED_FIRST; id < HONE_SLOT_COUNT; id++) fused_calls += ku.calls[id];
    CHECK_MSG(fused_calls == 0, "%s: %d fused calls from the baseline table", path, fused_calls);
    int same_qkv = L->wk.dtype == L->wq.dtype && L->wv.dtype == L->wq.dtype;
    int same_ffn = L->w_up.dtype == L->w_gate.dtype;
    CHECK_EQ_INT(kf.calls[qkv], same_qkv ? (int)(hp->n_layers * steps) : 0);
    CHECK_EQ_INT(kf.calls[ffn], same_ffn ? (int)(hp->n_layers * steps) : 0);
    CHECK_EQ_INT(kf.calls[head], (int)steps);
    /* the fused calls replace their components' calls, one for one */
    CHECK_EQ_INT(kf.calls[HONE_SLOT_SWIGLU], ku.calls[HONE_SLOT_SWIGLU] - kf.calls[ffn]);
    CHECK_EQ_INT(kf.calls[HONE_SLOT_RMSNORM], ku.calls[HONE_SLOT_RMSNORM] - kf.calls[head]);
    int mv_plain = 0, mv_fused = 0;
    for (int mv = HONE_SLOT_MATVEC_F32; mv <= HONE_SLOT_MATVEC_Q4_1; mv++) {
        mv_plain += ku.calls[mv];
        mv_fused += kf.calls[mv];
    }
    CHECK_EQ_INT(mv_fused, mv_plain - 3 * kf.calls[qkv] - 2 * kf.calls[ffn] - kf.calls[head]);
    fprintf(stderr, "  %s: %d qkv, %d ffn, %d head calls; logits bitwise equal\n", strrchr(path, '/') + 1,
            kf.calls[qkv], kf.calls[ffn], kf.calls[head]);
    free(plain);
    free(fused);
    hone_model_free(m);
}

static void test_tiny_models(void)
{
    const char *models[] = {"tiny-llama-f32.gguf", "tiny-llama-f16.gguf", "tiny-llama-bf16.gguf",
                            "tiny-llama-q8_0.gguf", "tiny-llama-q4_0.gguf", "tiny-llama-q4_1.gguf",
                            "tiny-qwen2-f32.gguf", "tiny-llama-mha-tied-f32.gguf"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", HONE_TEST_DATA_DIR, models[i]);
        check_model(path);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* SmolLM2: the same check, then decode steps alternated between the two tables (printed, not
 * asserted: a timing is a benchmark's business, CONVENTIONS.md 10). */
static void test_smollm2(void)
{
    const char *path = harness_smollm2();
    if (!path) {
        SKIP_CASE("SmolLM2 not installed");
        return;
    }
    check_model(path);
    hone_model *m = NULL;
    CHECK_EQ_INT(hone_model_load(&m, path), 0);
    if (!m) return;
    hone_ctx_opts o = HONE_CTX_OPTS_INIT;
    hone_ctx *ctx = NULL;
    o.n_threads = 2;
    o.n_ctx = 256;
    CHECK_EQ_INT(hone_ctx_new(&ctx, m, &o), 0);
    hone_slot_table plain = *hone_ctx_slots(ctx), fused = plain;
    provide_fused(&fused);
    hone_kv_seq seq[2] = {{0}, {0}};
    float *lg = malloc((size_t)hone_model_hparams(m)->n_vocab * sizeof *lg);
    double t[2] = {0, 0};
    for (int s = 0; s < 2; s++) CHECK_EQ_INT(hone_ctx_forward(ctx, &seq[s], prompt, 8, NULL, 0), 0);
    for (int step = 0; step < 48; step++)
        for (int w = 0; w < 2; w++) {
            int f = (step & 1) ? 1 - w : w;
            *hone_ctx_slots(ctx) = f ? fused : plain;
            double t0 = now_s();
            CHECK_EQ_INT(hone_ctx_forward(ctx, &seq[f], &prompt[step % N_TOK], 1, lg, 0), 0);
            t[f] += now_s() - t0;
        }
    fprintf(stderr, "  SmolLM2 decode, 48 steps each, alternated: unfused %.2f ms/step, fused "
            "baseline compositions %.2f ms/step\n", 1e3 * t[0] / 48, 1e3 * t[1] / 48);
    for (int s = 0; s < 2; s++) hone_kv_cache_release(hone_ctx_kv(ctx), &seq[s]);
    free(lg);
    hone_ctx_free(ctx);
    hone_model_free(m);
}

TEST_MAIN(TEST_CASE(test_tiny_models), TEST_CASE(test_smollm2))
