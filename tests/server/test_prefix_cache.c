/* Prefix caching (engine/prefix_cache.c with hone_kv_cache_share): a sequence that starts
 * from cached blocks computes bitwise the logits of one that recomputes everything; keys are
 * exact chains; reference counts and eviction give every block back. */
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "engine/forward.h"
#include "engine/kv_cache.h"
#include "engine/model.h"
#include "engine/prefix_cache.h"
#include "harness.h"

#define BS 16

static hone_model *model;
static hone_ctx *ctx;
static int64_t n_vocab;

static int setup(void)
{
    if (ctx) return 0;
    const char *path = HONE_TEST_DATA_DIR "/tiny-llama-f32.gguf";
    if (hone_model_load(&model, path)) {
        fprintf(stderr, "cannot load %s: %s\n", path, hone_error_last());
        return -1;
    }
    hone_ctx_opts o = HONE_CTX_OPTS_INIT;
    o.n_threads = 2;
    o.n_ctx = 256;
    o.kv_block_size = BS;
    o.kv_blocks = 64;
    o.chunk = 16; /* several pieces per prompt */
    if (hone_ctx_new(&ctx, model, &o)) {
        fprintf(stderr, "ctx: %s\n", hone_error_last());
        return -1;
    }
    n_vocab = hone_model_hparams(model)->n_vocab;
    return 0;
}

static void fill(int32_t *t, int n, int seed)
{
    for (int i = 0; i < n; i++) t[i] = (int32_t)((i * 37 + seed * 101 + 5) % (n_vocab - 10) + 3);
}

/* Caches seq's full blocks as a chain; returns how many. */
static int64_t register_all(hone_prefix_cache *pc, const hone_kv_seq *seq, const int32_t *toks,
                            int32_t *chain)
{
    int64_t n = 0;
    for (int64_t j = 0; (j + 1) * BS <= seq->n_tokens; j++) {
        int32_t e;
        if (hone_prefix_cache_insert(pc, j ? chain[j - 1] : -1, toks + j * BS, seq->blocks[j], &e))
            break;
        chain[n++] = e;
    }
    return n;
}

static void test_reuse_is_bitwise(void)
{
    if (setup()) { CHECK(0); return; }
    hone_kv_cache *kv = hone_ctx_kv(ctx);
    hone_prefix_cache *pc = NULL;
    CHECK_EQ_INT(hone_prefix_cache_new(&pc, kv), 0);
    int64_t free0 = hone_kv_cache_n_free(kv);

    int32_t a[40], b[45];
    fill(a, 40, 1);
    memcpy(b, a, 32 * sizeof *a); /* two full blocks shared */
    fill(b + 32, 13, 2);
    hone_kv_seq sa = {0}, sb = {0}, sc = {0};
    int32_t chain_a[8], match[8];
    CHECK_EQ_INT(hone_ctx_forward(ctx, &sa, a, 40, NULL, 0), 0);
    int64_t na = register_all(pc, &sa, a, chain_a);
    CHECK_EQ_INT(na, 2);
    CHECK_EQ_INT(hone_prefix_cache_n_entries(pc), 2);

    /* b finds a's two blocks (it may use at most (45 - 1) / 16 = 2) and computes the rest */
    int64_t m = hone_prefix_cache_match(pc, b, (45 - 1) / BS, match);
    CHECK_EQ_INT(m, 2);
    CHECK_EQ_INT(match[0], chain_a[0]);
    CHECK_EQ_INT(hone_prefix_cache_attach(pc, &sb, match, m), 0);
    CHECK_EQ_INT(sb.n_tokens, 32);
    CHECK_EQ_INT(sb.blocks[0], sa.blocks[0]);
    float *lb = malloc((size_t)(13 * n_vocab) * sizeof *lb);
    float *lc = malloc((size_t)(45 * n_vocab) * sizeof *lc);
    CHECK_EQ_INT(hone_ctx_forward(ctx, &sb, b + 32, 13, lb, 1), 0);
    CHECK_EQ_INT(hone_ctx_forward(ctx, &sc, b, 45, lc, 1), 0);
    CHECK_MSG(memcmp(lb, lc + 32 * n_vocab, (size_t)(13 * n_vocab) * sizeof *lb) == 0,
              "logits after a prefix-cache hit differ from recomputing");
    /* a's own blocks were not written by b */
    hone_kv_seq sa2 = {0};
    float *la = malloc((size_t)n_vocab * sizeof *la), *la2 = malloc((size_t)n_vocab * sizeof *la2);
    int32_t next = 7;
    CHECK_EQ_INT(hone_ctx_forward(ctx, &sa, &next, 1, la, 0), 0);
    CHECK_EQ_INT(hone_ctx_forward(ctx, &sa2, a, 40, NULL, 0), 0);
    CHECK_EQ_INT(hone_ctx_forward(ctx, &sa2, &next, 1, la2, 0), 0);
    CHECK(memcmp(la, la2, (size_t)n_vocab * sizeof *la) == 0);

    /* the same through the batched forward: b's decode row beside another sequence's rows */
    hone_kv_seq sd = {0};
    CHECK_EQ_INT(hone_prefix_cache_attach(pc, &sd, match, 2), 0);
    int32_t toks[14];
    int32_t pos[14];
    hone_kv_seq *seqs[14];
    float *out[14];
    for (int i = 0; i < 13; i++) {
        toks[i] = b[32 + i];
        pos[i] = 32 + i;
        seqs[i] = &sd;
        out[i] = i == 12 ? lb : NULL;
    }
    toks[13] = 9;
    pos[13] = (int32_t)sa2.n_tokens;
    seqs[13] = &sa2;
    out[13] = NULL;
    hone_batch batch = {14, toks, seqs, pos, out, NULL};
    CHECK_EQ_INT(hone_ctx_forward_batch(ctx, &batch), 0);
    CHECK(memcmp(lb, lc + 44 * n_vocab, (size_t)n_vocab * sizeof *lb) == 0);

    /* every block comes back: sequences first, then the cache's own references */
    hone_prefix_cache_unuse(pc, chain_a, na);
    hone_prefix_cache_unuse(pc, match, m);
    hone_prefix_cache_unuse(pc, match, 2);
    hone_kv_cache_release(kv, &sa);
    hone_kv_cache_release(kv, &sa2);
    hone_kv_cache_release(kv, &sb);
    hone_kv_cache_release(kv, &sc);
    hone_kv_cache_release(kv, &sd);
    CHECK_EQ_INT(hone_prefix_cache_n_idle(pc), 2);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), free0 - 2);
    CHECK_EQ_INT(hone_prefix_cache_evict(pc, free0), 2);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), free0);
    CHECK_EQ_INT(hone_prefix_cache_n_entries(pc), 0);
    free(la);
    free(la2);
    free(lb);
    free(lc);
    hone_prefix_cache_free(pc);
}

static void test_keys_are_exact_chains(void)
{
    if (setup()) { CHECK(0); return; }
    hone_kv_cache *kv = hone_ctx_kv(ctx);
    hone_prefix_cache *pc = NULL;
    CHECK_EQ_INT(hone_prefix_cache_new(&pc, kv), 0);
    int64_t free0 = hone_kv_cache_n_free(kv);
    int32_t a[48], x[48], chain[8], match[8];
    fill(a, 48, 3);
    memcpy(x, a, sizeof a);
    x[3] ^= 1; /* block 0 differs, blocks 1 and 2 are the same tokens */
    hone_kv_seq sa = {0}, sx = {0};
    CHECK_EQ_INT(hone_ctx_forward(ctx, &sa, a, 48, NULL, 0), 0);
    CHECK_EQ_INT(register_all(pc, &sa, a, chain), 3);
    CHECK_EQ_INT(hone_prefix_cache_match(pc, x, 2, match), 0); /* same block 1, other parent */
    CHECK_EQ_INT(hone_prefix_cache_match(pc, a, 2, match), 2);
    CHECK_EQ_INT(hone_prefix_cache_match(pc, a, 3, match), 3);
    /* inserting an equal block again is refused (the caller's chain stops) */
    int32_t e = 0;
    CHECK_EQ_INT(hone_prefix_cache_insert(pc, -1, a, sa.blocks[0], &e), 1);
    CHECK_EQ_INT(e, -1);
    /* an unaligned sequence cannot take a shared block; a free block cannot be shared */
    CHECK_EQ_INT(hone_ctx_forward(ctx, &sx, x, 5, NULL, 0), 0);
    CHECK(hone_kv_cache_share(kv, &sx, sa.blocks[0]) == HONE_EINVAL);
    CHECK_EQ_INT(sx.n_tokens, 5);
    hone_kv_cache_release(kv, &sx);
    int32_t some_free = -1;
    for (int32_t id = 0; id < 64 && some_free < 0; id++) {
        int used = 0;
        for (int64_t j = 0; j < sa.n_blocks; j++) used |= sa.blocks[j] == id;
        if (!used) some_free = id;
    }
    CHECK(hone_kv_cache_share(kv, &sx, some_free) == HONE_EINVAL);

    /* entries in use are never evicted; idle ones go leaves first */
    hone_prefix_cache_unuse(pc, chain, 3);
    hone_kv_seq sy = {0};
    CHECK_EQ_INT(hone_prefix_cache_attach(pc, &sy, chain, 1), 0);
    hone_kv_cache_release(kv, &sa);
    CHECK_EQ_INT(hone_prefix_cache_n_idle(pc), 2);
    CHECK_EQ_INT(hone_prefix_cache_evict(pc, free0), 2);
    CHECK_EQ_INT(hone_prefix_cache_n_entries(pc), 1);
    CHECK_EQ_INT(hone_prefix_cache_match(pc, a, 3, match), 1);
    hone_prefix_cache_unuse(pc, chain, 1);
    hone_kv_cache_release(kv, &sy);
    hone_prefix_cache_free(pc); /* drops the last reference */
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), free0);
}

static void teardown(void)
{
    hone_ctx_free(ctx);
    hone_model_free(model);
    ctx = NULL;
    model = NULL;
}

int main(int argc, char **argv)
{
    static const harness_case cases[] = {TEST_CASE(test_reuse_is_bitwise), TEST_CASE(test_keys_are_exact_chains)};
    int rc = harness_run(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
    teardown();
    return rc;
}
