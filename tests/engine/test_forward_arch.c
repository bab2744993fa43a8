/* The architecture variants (tools/make_tiny_model.py's gemma3, qwen3 and mistral-swa models):
 * their hyperparameters and per-layer features as engine/model reads them, and the refusal of
 * what an executor does not serve, by name. Their bitwise invariance (chunks, decode, threads,
 * past the sliding windows) is tests/engine/test_forward.c's; their accuracy against the float64
 * reference tests/reference/test_logits.py's. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "engine/forward.h"
#include "engine/layers.h"
#include "engine/model.h"
#include "harness.h"

static hone_model *load(const char *name)
{
    char path[4096];
    hone_model *m = NULL;
    snprintf(path, sizeof path, "%s/%s", HONE_TEST_DATA_DIR, name);
    if (hone_model_load(&m, path)) {
        CHECK_MSG(0, "load %s: %s", name, hone_error_last());
        return NULL;
    }
    return m;
}

static void test_gemma3_hparams(void)
{
    hone_model *m = load("tiny-gemma3-f32.gguf");
    if (!m) return;
    const hone_hparams *hp = hone_model_hparams(m);
    CHECK_EQ_INT(hp->dim, 64);
    CHECK_EQ_INT(hp->head_dim, 32); /* attention.key_length, not dim / heads */
    CHECK(hp->qk_norm && hp->post_norms && hp->geglu && hp->rope_neox && hp->tied);
    CHECK_NEAR(hp->embd_scale, 8.0, 0);
    CHECK_NEAR(hp->attn_scale, 1.0 / sqrt(32.0), 1e-7);
    CHECK_EQ_INT(hp->swa, 6);
    CHECK_EQ_INT(hp->swa_pattern, 6);
    CHECK(hp->final_softcap == 0 && !hp->rope_freqs);
    for (int64_t l = 0; l < hp->n_layers; l++) {
        int global = l == 5;
        CHECK_EQ_INT(hone_model_layer_window(m, l), global ? 0 : 6);
        CHECK_NEAR(hone_model_layer_rope_base(m, l), global ? 1e6 : 1e4, 0);
        const hone_layer *L = hone_model_layer(m, l);
        CHECK(L->q_norm.data && L->k_norm.data && L->post_attn_norm.data && L->post_ffn_norm.data);
        CHECK_EQ_INT(L->q_norm.cols, 32);
        CHECK_EQ_INT(L->wq.rows, 128);
        CHECK_EQ_INT(L->wo.cols, 128);
    }
    hone_model_free(m);
}

static void test_other_hparams(void)
{
    hone_model *m = load("tiny-qwen3-f32.gguf");
    if (m) {
        const hone_hparams *hp = hone_model_hparams(m);
        CHECK(hp->qk_norm && hp->rope_neox && !hp->post_norms && !hp->geglu && !hp->swa);
        CHECK(hone_model_layer(m, 0)->q_norm.data && !hone_model_layer(m, 0)->post_attn_norm.data);
        hone_model_free(m);
    }
    m = load("tiny-mistral-swa-f32.gguf");
    if (m) {
        const hone_hparams *hp = hone_model_hparams(m);
        CHECK(!hp->qk_norm && !hp->rope_neox && hp->swa == 5 && hp->swa_pattern == 0);
        for (int64_t l = 0; l < hp->n_layers; l++) {
            CHECK_EQ_INT(hone_model_layer_window(m, l), 5);
            CHECK_NEAR(hone_model_layer_rope_base(m, l), hp->rope_base, 0);
        }
        CHECK(!hone_model_layer(m, 0)->q_norm.data);
        hone_model_free(m);
    }
    m = load("tiny-llama3-f32.gguf");
    if (m) {
        const hone_weight *f = hone_model_rope_freqs(m);
        CHECK(hone_model_hparams(m)->rope_freqs && f->data && f->cols == 8);
        CHECK_NEAR(((const float *)f->data)[0], 1.0, 0);
        CHECK_NEAR(((const float *)f->data)[7], 8.0, 0);
        hone_layer_ops rope_only = {.rope_layer = NULL};
        CHECK_EQ_INT(hone_layers_check(m, &rope_only, "the test executor"), HONE_EUNSUPPORTED);
        CHECK_STR_CONTAINS(hone_error_last(), "llama3 RoPE frequency factors (rope_freqs.weight)");
        CHECK(strstr(hone_error_last(), "per-layer RoPE bases") == NULL);
        hone_model_free(m);
    }
    m = load("tiny-llama-f32.gguf");
    if (m) {
        const hone_hparams *hp = hone_model_hparams(m);
        CHECK(!hp->rope_freqs && !hone_model_rope_freqs(m)->data);
        CHECK(!hp->qk_norm && !hp->swa && hp->embd_scale == 0 && !hp->geglu);
        CHECK_EQ_INT(hone_model_layer_window(m, 0), 0);
        hone_model_free(m);
    }
}

/* An executor without the architecture operations (the CUDA backend's case) is refused with
 * every missing operation named; the CPU's serves the model. */
static void test_check_names_missing(void)
{
    hone_model *m = load("tiny-gemma3-f32.gguf");
    if (!m) return;
    hone_layer_ops none = {0};
    CHECK_EQ_INT(hone_layers_check(m, &none, "the test executor"), HONE_EUNSUPPORTED);
    const char *msg = hone_error_last();
    CHECK_STR_CONTAINS(msg, "the test executor does not serve gemma3");
    CHECK_STR_CONTAINS(msg, "embedding scale");
    CHECK_STR_CONTAINS(msg, "QK norm");
    CHECK_STR_CONTAINS(msg, "geglu");
    CHECK_STR_CONTAINS(msg, "per-layer RoPE bases");
    CHECK_STR_CONTAINS(msg, "sliding-window attention");
    hone_model_free(m);
    m = load("tiny-llama-f32.gguf");
    if (m) {
        CHECK_EQ_INT(hone_layers_check(m, &none, "the test executor"), 0);
        hone_model_free(m);
    }
}

TEST_MAIN(TEST_CASE(test_gemma3_hparams), TEST_CASE(test_other_hparams),
          TEST_CASE(test_check_names_missing))
