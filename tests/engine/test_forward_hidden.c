/* The forward pass's final hidden states (hone_batch.hidden_rows, what /v1/embeddings pools):
 * asking for them leaves every logit bitwise unchanged; a row's hidden state does not depend
 * on the batch it ran in; and the head applied to it in double gives the logits. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/dtype.h"
#include "engine/error.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "harness.h"

#define N 19

static const int32_t toks[N] = {1, 17, 300, 411, 65, 123, 400, 289, 5, 1000, 77, 2047, 3, 512, 640, 12, 99, 1500, 18};

/* Runs toks through a fresh context as one batch of two sequences (the first 7 tokens of
 * toks again as sequence 2, interleaved), with logits for every row and, when hidden,
 * hidden states too. */
static void run(const hone_model *m, int hidden, float *logits, float *hid, float *logits2, float *hid2)
{
    hone_ctx_opts o = HONE_CTX_OPTS_INIT;
    o.n_ctx = 64;
    o.chunk = 8; /* several pieces */
    o.n_threads = 2;
    hone_ctx *ctx = NULL;
    CHECK_EQ_INT(hone_ctx_new(&ctx, m, &o), 0);
    if (!ctx) return;
    const hone_hparams *hp = hone_model_hparams(m);
    hone_kv_seq a = {0}, b = {0};
    int32_t t[N + 7], pos[N + 7];
    hone_kv_seq *seqs[N + 7];
    float *out[N + 7], *hout[N + 7];
    int64_t n = 0;
    for (int i = 0; i < N; i++) {
        t[n] = toks[i]; pos[n] = i; seqs[n] = &a;
        out[n] = logits + (int64_t)i * hp->n_vocab;
        hout[n++] = hidden ? hid + (int64_t)i * hp->dim : NULL;
        if (i < 7) {
            t[n] = toks[i]; pos[n] = i; seqs[n] = &b;
            out[n] = logits2 + (int64_t)i * hp->n_vocab;
            hout[n++] = hidden ? hid2 + (int64_t)i * hp->dim : NULL;
        }
    }
    hone_batch bt = {n, t, seqs, pos, out, hidden ? hout : NULL};
    CHECK_EQ_INT(hone_ctx_forward_batch(ctx, &bt), 0);
    hone_kv_cache_release(hone_ctx_kv(ctx), &a);
    hone_kv_cache_release(hone_ctx_kv(ctx), &b);
    hone_ctx_free(ctx);
}

static void check_model(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", HONE_TEST_DATA_DIR, name);
    hone_model *m = NULL;
    if (hone_model_load(&m, path)) {
        CHECK_MSG(0, "load %s: %s", name, hone_error_last());
        return;
    }
    const hone_hparams *hp = hone_model_hparams(m);
    int64_t nv = hp->n_vocab, dim = hp->dim;
    float *l0 = calloc((size_t)(N * nv), 4), *l1 = calloc((size_t)(N * nv), 4);
    float *m0 = calloc((size_t)(7 * nv), 4), *m1 = calloc((size_t)(7 * nv), 4);
    float *h = calloc((size_t)(N * dim), 4), *h2 = calloc((size_t)(7 * dim), 4);
    run(m, 0, l0, NULL, m0, NULL);
    run(m, 1, l1, h, m1, h2);
    CHECK_MSG(memcmp(l0, l1, (size_t)(N * nv) * 4) == 0 && memcmp(m0, m1, (size_t)(7 * nv) * 4) == 0,
              "%s: logits change when hidden states are asked for", name);
    /* the second sequence repeats the first 7 tokens: the same hidden states, bitwise */
    CHECK_MSG(memcmp(h, h2, (size_t)(7 * dim) * 4) == 0, "%s: hidden states depend on the batch", name);
    /* logits = W_out . hidden (f32 heads only: the tiny f32 models) */
    const hone_weight *w = hone_model_output(m);
    if (w->dtype == HONE_DTYPE_F32) {
        const float *W = w->data;
        double worst = 0.0, scale = 0.0;
        for (int i = 0; i < N; i++)
            for (int64_t v = 0; v < nv; v += 7) {
                double acc = 0.0;
                for (int64_t d = 0; d < dim; d++) acc += (double)W[v * dim + d] * h[(int64_t)i * dim + d];
                double diff = fabs(acc - l1[(int64_t)i * nv + v]);
                worst = diff > worst ? diff : worst;
                scale = fabs(acc) > scale ? fabs(acc) : scale;
            }
        CHECK_MSG(worst <= 1e-5 * (scale > 1 ? scale : 1), "%s: head(hidden) vs logits: %g (scale %g)", name,
                  worst, scale);
    }
    for (int64_t i = 0; i < N * dim; i++) CHECK(isfinite(h[i]));
    free(l0); free(l1); free(m0); free(m1); free(h); free(h2);
    hone_model_free(m);
}

static void test_hidden_states(void)
{
    check_model("tiny-llama-f32.gguf");
    check_model("tiny-llama-mha-tied-f32.gguf");
    check_model("tiny-qwen2-f32.gguf");
    check_model("tiny-llama-q4_1.gguf");
}

TEST_MAIN(TEST_CASE(test_hidden_states))
