/* app/kv_plan: the trained context by default, serve's pool rule (2 contexts or 512 tokens a
 * batch slot), generate's one-request pool, and the cut to half the free memory (the context
 * too when one request does not fit, an error when the context was asked for). */
#include "harness.h"

#include "app/kv_plan.h"
#include "engine/error.h"
#include "engine/kv_cache.h"
#include "engine/model.h"

static hone_model *load(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", HONE_TEST_DATA_DIR, name);
    hone_model *m = NULL;
    CHECK_EQ_INT(hone_model_load(&m, path), 0);
    return m;
}

static void test_plans(void)
{
    hone_model *m = load("tiny-llama-long-f32.gguf");
    if (!m) return;
    const hone_hparams *hp = hone_model_hparams(m);
    int64_t tb = 2 * 4 * hp->n_layers * hp->n_kv_heads * hp->head_dim, ctx = hp->n_ctx_train, bs = 16;
    CHECK(hone_kv_cache_token_bytes(hp->n_layers, hp->n_kv_heads, hp->head_dim) == tb);
    CHECK(ctx > 4096);
    hone_kv_plan p;
    hone_kv_plan_opts o = HONE_KV_PLAN_OPTS_INIT;
    o.free_bytes = (int64_t)1 << 40;
    /* serve's default: the trained context, room for two of them */
    CHECK_EQ_INT(hone_kv_plan_make(&p, m, &o), 0);
    CHECK(p.n_ctx == ctx && p.n_ctx_train == ctx && p.token_bytes == tb && !p.cut && !p.note[0]);
    CHECK(p.kv_blocks == 2 * ctx / bs && p.pool_bytes == p.kv_blocks * bs * tb && p.ctx_bytes == ctx * tb);
    CHECK(p.ctx_swa_bytes == p.ctx_bytes); /* no windows */
    /* 512 tokens a batch slot once that is more */
    o.max_batch = (int)(4 * ctx / 512);
    CHECK_EQ_INT(hone_kv_plan_make(&p, m, &o), 0);
    CHECK(p.kv_blocks == 4 * ctx / bs);
    o.max_batch = 1;
    /* half the free memory holds 1.5 contexts: the pool is cut, the context kept */
    int64_t block = bs * tb, per_seq = ctx / bs + 1;
    o.free_bytes = 2 * (3 * ctx / 2 / bs) * block;
    CHECK_EQ_INT(hone_kv_plan_make(&p, m, &o), 0);
    CHECK(p.cut && p.n_ctx == ctx && p.kv_blocks == 3 * ctx / 2 / bs && p.pool_bytes <= o.free_bytes / 2);
    CHECK_STR_CONTAINS(p.note, "KV pool cut from");
    /* not even one context: the context is cut to what the pool holds */
    o.free_bytes = 2 * (per_seq - 10) * block;
    CHECK_EQ_INT(hone_kv_plan_make(&p, m, &o), 0);
    CHECK(p.cut && p.kv_blocks == per_seq - 10 && p.n_ctx == (per_seq - 11) * bs && p.n_ctx < ctx);
    CHECK_STR_CONTAINS(p.note, "context cut from");
    /* ... unless --ctx asked for it */
    o.n_ctx = ctx;
    CHECK(hone_kv_plan_make(&p, m, &o) == HONE_EINVAL);
    CHECK_STR_CONTAINS(hone_error_last(), "--ctx");
    /* --kv-blocks is taken as it is, when it holds one full context */
    o.free_bytes = (int64_t)1 << 40;
    o.kv_blocks = per_seq - 1;
    CHECK(hone_kv_plan_make(&p, m, &o) == HONE_EINVAL);
    CHECK_STR_CONTAINS(hone_error_last(), "too few");
    o.kv_blocks = per_seq + 3;
    CHECK_EQ_INT(hone_kv_plan_make(&p, m, &o), 0);
    CHECK(p.kv_blocks == per_seq + 3 && !p.cut);
    /* generate: one request of 100 tokens, within a full context */
    o.kv_blocks = 0;
    o.tokens = 100;
    CHECK_EQ_INT(hone_kv_plan_make(&p, m, &o), 0);
    CHECK(p.n_ctx == ctx && p.kv_blocks == (100 + bs - 1) / bs + 1);
    o.free_bytes = block; /* half a block free: refused, naming -n */
    CHECK(hone_kv_plan_make(&p, m, &o) == HONE_EINVAL);
    CHECK_STR_CONTAINS(hone_error_last(), "-n");
    CHECK(hone_kv_plan_free_bytes() > 0);
    hone_model_free(m);
}

static void test_swa_bytes(void)
{
    hone_model *m = load("tiny-mistral-swa-long-f32.gguf");
    if (!m) return;
    const hone_hparams *hp = hone_model_hparams(m);
    int64_t layer = 2 * 4 * hp->n_kv_heads * hp->head_dim, sum = 0, n = hp->n_ctx_train;
    int windowed = 0;
    for (int64_t l = 0; l < hp->n_layers; l++) {
        int64_t w = hone_model_layer_window(m, l);
        windowed += w > 0;
        sum += layer * (w > 0 && w < n ? w : n);
    }
    CHECK(windowed > 0);
    CHECK(hone_kv_plan_swa_bytes(m, n) == sum && sum < n * layer * hp->n_layers);
    CHECK(hone_kv_plan_swa_bytes(m, 7) == 7 * layer * hp->n_layers); /* shorter than the window */
    hone_kv_plan p;
    hone_kv_plan_opts o = HONE_KV_PLAN_OPTS_INIT;
    o.free_bytes = (int64_t)1 << 40;
    CHECK_EQ_INT(hone_kv_plan_make(&p, m, &o), 0);
    CHECK(p.ctx_swa_bytes == sum);
    hone_model_free(m);
}

TEST_MAIN(TEST_CASE(test_plans), TEST_CASE(test_swa_bytes))
