/* The paged KV cache's bookkeeping, which must never leak a block: reserve (and its refusal),
 * release, truncate, share and the reference counts behind them; a pool resident from the
 * start; and the forward pass's multi-sequence reserve, whose failure must leave every
 * sequence and the free count exactly as they were (the rollback in hone_ctx_forward_batch). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "engine/forward.h"
#include "engine/hugemem.h"
#include "engine/kv_cache.h"
#include "engine/model.h"
#include "harness.h"

/* A copy of a sequence's visible state, to compare after a refused call. */
typedef struct {
    int64_t n_blocks, n_tokens;
    int32_t blocks[64];
} seq_snap;

static seq_snap snap(const hone_kv_seq *s)
{
    seq_snap x;
    memset(&x, 0, sizeof x);
    x.n_blocks = s->n_blocks;
    x.n_tokens = s->n_tokens;
    for (int64_t i = 0; i < s->n_blocks && i < 64; i++) x.blocks[i] = s->blocks[i];
    return x;
}

static int same(const hone_kv_seq *s, const seq_snap *x)
{
    if (s->n_blocks != x->n_blocks || s->n_tokens != x->n_tokens) return 0;
    for (int64_t i = 0; i < s->n_blocks; i++)
        if (s->blocks[i] != x->blocks[i]) return 0;
    return 1;
}

static void test_reserve_release(void)
{
    hone_kv_cache *kv = NULL;
    CHECK_EQ_INT(hone_kv_cache_new(&kv, 2, 1, 4, 4, 8), 0);
    if (!kv) return;
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 8);
    hone_kv_seq a = {0};
    CHECK_EQ_INT(hone_kv_cache_reserve(kv, &a, 5), 0); /* 5 tokens: 2 blocks of 4 */
    CHECK_EQ_INT(a.n_blocks, 2);
    CHECK_EQ_INT(a.n_tokens, 0); /* reserving stores nothing */
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 6);
    CHECK_EQ_INT(hone_kv_cache_reserve(kv, &a, 8), 0); /* still 2 blocks */
    CHECK_EQ_INT(a.n_blocks, 2);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 6);
    CHECK_EQ_INT(hone_kv_cache_reserve(kv, &a, 9), 0);
    CHECK_EQ_INT(a.n_blocks, 3);
    CHECK(a.blocks[0] != a.blocks[1] && a.blocks[1] != a.blocks[2] && a.blocks[0] != a.blocks[2]);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 5);
    /* too many: refused with seq and the pool untouched */
    seq_snap before = snap(&a);
    CHECK_EQ_INT(hone_kv_cache_reserve(kv, &a, 4 * 9), HONE_ERANGE);
    CHECK_STR_CONTAINS(hone_error_last(), "KV cache full");
    CHECK(same(&a, &before));
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 5);
    /* exactly the rest fits */
    CHECK_EQ_INT(hone_kv_cache_reserve(kv, &a, 4 * 8), 0);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 0);
    hone_kv_cache_release(kv, &a);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 8);
    CHECK(a.blocks == NULL && a.n_blocks == 0 && a.n_tokens == 0 && a.cap == 0);
    hone_kv_cache_release(kv, &a); /* an empty sequence: nothing to give back */
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 8);
    hone_kv_cache_free(kv);
}

static void test_truncate(void)
{
    hone_kv_cache *kv = NULL;
    CHECK_EQ_INT(hone_kv_cache_new(&kv, 1, 1, 2, 4, 6), 0);
    if (!kv) return;
    hone_kv_seq a = {0};
    CHECK_EQ_INT(hone_kv_cache_reserve(kv, &a, 10), 0);
    a.n_tokens = 10; /* as a forward pass leaves it */
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 3);
    int32_t b0 = a.blocks[0], b1 = a.blocks[1];
    hone_kv_cache_truncate(kv, &a, 5); /* keeps 2 blocks: tokens 0-3 and 4 */
    CHECK_EQ_INT(a.n_blocks, 2);
    CHECK_EQ_INT(a.n_tokens, 5);
    CHECK(a.blocks[0] == b0 && a.blocks[1] == b1);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 4);
    hone_kv_cache_truncate(kv, &a, 5); /* idempotent */
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 4);
    hone_kv_cache_truncate(kv, &a, 8); /* never grows */
    CHECK_EQ_INT(a.n_blocks, 2);
    CHECK_EQ_INT(a.n_tokens, 5);
    hone_kv_cache_truncate(kv, &a, 4); /* on the boundary: one block */
    CHECK_EQ_INT(a.n_blocks, 1);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 5);
    hone_kv_cache_truncate(kv, &a, 0);
    CHECK_EQ_INT(a.n_blocks, 0);
    CHECK_EQ_INT(a.n_tokens, 0);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 6);
    /* the freed blocks are handed out again, each once */
    hone_kv_seq b = {0};
    CHECK_EQ_INT(hone_kv_cache_reserve(kv, &b, 24), 0);
    int seen[6] = {0}, dup = 0;
    for (int64_t i = 0; i < b.n_blocks; i++) dup += seen[b.blocks[i]]++ > 0;
    CHECK_EQ_INT(dup, 0);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 0);
    hone_kv_cache_release(kv, &b);
    hone_kv_cache_release(kv, &a);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 6);
    hone_kv_cache_free(kv);
}

static void test_share_refcounts(void)
{
    hone_kv_cache *kv = NULL;
    CHECK_EQ_INT(hone_kv_cache_new(&kv, 1, 1, 2, 4, 6), 0);
    if (!kv) return;
    hone_kv_seq a = {0}, b = {0}, c = {0};
    CHECK_EQ_INT(hone_kv_cache_reserve(kv, &a, 8), 0);
    a.n_tokens = 8;
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 4);
    /* b and c take a's two blocks: no new block, three references each */
    for (int k = 0; k < 2; k++) {
        CHECK_EQ_INT(hone_kv_cache_share(kv, &b, a.blocks[k]), 0);
        CHECK_EQ_INT(hone_kv_cache_share(kv, &c, a.blocks[k]), 0);
    }
    CHECK(b.n_blocks == 2 && b.n_tokens == 8 && b.blocks[0] == a.blocks[0] && b.blocks[1] == a.blocks[1]);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 4);
    /* a block shared is one memory: what a wrote there b reads */
    float *k0 = hone_kv_cache_k(kv, 0);
    k0[(size_t)a.blocks[1] * 4 * 2 + 3] = 42.0f;
    CHECK(k0[(size_t)b.blocks[1] * 4 * 2 + 3] == 42.0f);
    /* b grows on its own: a fresh block after the shared ones */
    CHECK_EQ_INT(hone_kv_cache_reserve(kv, &b, 9), 0);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 3);
    CHECK(b.blocks[2] != a.blocks[0] && b.blocks[2] != a.blocks[1]);
    /* releasing the owner frees nothing while others hold the blocks */
    hone_kv_cache_release(kv, &a);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 3);
    /* truncating c below its second block drops one reference, not the block */
    hone_kv_cache_truncate(kv, &c, 4);
    CHECK_EQ_INT(c.n_blocks, 1);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 3);
    /* refused shares change nothing: a free block, an id out of range, an unaligned sequence */
    hone_kv_seq d = {0};
    CHECK_EQ_INT(hone_kv_cache_reserve(kv, &d, 1), 0);
    int32_t free_id = -1;
    {
        hone_kv_seq probe = {0};
        CHECK_EQ_INT(hone_kv_cache_reserve(kv, &probe, 1), 0);
        free_id = probe.blocks[0];
        hone_kv_cache_release(kv, &probe);
    }
    int64_t n_free = hone_kv_cache_n_free(kv);
    seq_snap c0 = snap(&c), d0 = snap(&d);
    CHECK_EQ_INT(hone_kv_cache_share(kv, &c, free_id), HONE_EINVAL);
    CHECK_EQ_INT(hone_kv_cache_share(kv, &c, 6), HONE_EINVAL);
    CHECK_EQ_INT(hone_kv_cache_share(kv, &c, -1), HONE_EINVAL);
    d.n_tokens = 1; /* one token in a 4-token block: not on a boundary */
    d0.n_tokens = 1;
    CHECK_EQ_INT(hone_kv_cache_share(kv, &d, b.blocks[0]), HONE_EINVAL);
    CHECK_STR_CONTAINS(hone_error_last(), "block boundary");
    CHECK(same(&c, &c0) && same(&d, &d0));
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), n_free);
    /* the last references go: every block is back */
    hone_kv_cache_release(kv, &b);
    hone_kv_cache_release(kv, &c);
    hone_kv_cache_release(kv, &d);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 6);
    hone_kv_cache_free(kv);
}

static long rss_anon_kib(void)
{
    char line[256];
    long v = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "RssAnon:", 8) == 0) v = atol(line + 8);
    if (f) fclose(f);
    return v;
}

/* The pool is resident once made (touched at allocation, not as blocks are first used), so a
 * server's RSS after warm-up already holds it: 2 x 32 MiB of K and V here. */
static void test_pool_resident(void)
{
    long before = rss_anon_kib();
    hone_kv_cache *kv = NULL;
    CHECK_EQ_INT(hone_kv_cache_new(&kv, 1, 1, 1024, 16, 512), 0);
    long after = rss_anon_kib();
    CHECK_MSG(before >= 0 && after - before >= 60 * 1024, "RssAnon %ld -> %ld KiB", before, after);
    if (kv) CHECK(hone_kv_cache_k(kv, 0)[16 * 1024 * 511] == 0.0f);
    hone_kv_cache_free(kv);
}

/* The THPeligible flag of the mapping holding p in /proc/self/smaps (1: the kernel may back it
 * with huge pages), or -1 when it cannot be read. */
static int thp_eligible(const void *p)
{
    char line[512];
    int in = 0, v = -1;
    FILE *f = fopen("/proc/self/smaps", "r");
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (in && strncmp(line, "THPeligible:", 12) == 0)
            v = atoi(line + 12), in = 0;
    }
    if (f) fclose(f);
    return v;
}

/* The pool in huge pages where they are on (engine/hugemem.h): K and V start on a 2 MiB
 * boundary of a mapping the kernel may back with huge pages, zeroed, and free unmaps them;
 * HONE_HUGEPAGES=0 and a request under 2 MiB get no mapping (the caller's malloc serves). */
static void test_pool_huge_pages(void)
{
    hone_huge_map m;
    CHECK(hone_huge_alloc(HONE_HUGE_PAGE - 64, &m) == NULL && m.base == NULL);
    setenv("HONE_HUGEPAGES", "0", 1);
    CHECK(!hone_huge_enabled());
    CHECK(hone_huge_alloc(8 * HONE_HUGE_PAGE, &m) == NULL && m.base == NULL);
    hone_kv_cache *kv = NULL;
    CHECK_EQ_INT(hone_kv_cache_new(&kv, 2, 1, 1024, 16, 256), 0); /* 2 x 16 MiB of K, of V */
    if (kv) CHECK(hone_kv_cache_k(kv, 1)[16 * 1024 * 255] == 0.0f && hone_kv_cache_v(kv, 1)[0] == 0.0f);
    hone_kv_cache_free(kv);
    unsetenv("HONE_HUGEPAGES");
    if (!hone_huge_enabled()) {
        fprintf(stderr, "(transparent huge pages are off here: the huge-page pool is not checked)\n");
        return;
    }
    kv = NULL;
    CHECK_EQ_INT(hone_kv_cache_new(&kv, 2, 1, 1024, 16, 256), 0);
    if (!kv) return;
    float *k = hone_kv_cache_k(kv, 0), *v = hone_kv_cache_v(kv, 0);
    CHECK((uintptr_t)k % HONE_HUGE_PAGE == 0 && (uintptr_t)v % HONE_HUGE_PAGE == 0);
    CHECK_EQ_INT(thp_eligible(k), 1);
    CHECK_EQ_INT(thp_eligible(v), 1);
    float *k1 = hone_kv_cache_k(kv, 1), *v1 = hone_kv_cache_v(kv, 1);
    CHECK(k1[16 * 1024 * 255 + 1023] == 0.0f && v1[16 * 1024 * 255 + 1023] == 0.0f);
    k1[16 * 1024 * 255 + 1023] = 1.5f, v1[0] = -2.0f;
    CHECK(k1[16 * 1024 * 255 + 1023] == 1.5f && v1[0] == -2.0f);
    hone_kv_cache_free(kv);
    CHECK(thp_eligible(k) == -1); /* unmapped */
}

/* A batch of two sequences whose second cannot get its blocks: the first one's reserve had
 * succeeded, and the rollback must give its new block back. Without the rollback in
 * hone_ctx_forward_batch, a has 2 blocks and the pool one block fewer afterwards. */
static void test_batch_reserve_rollback(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tiny-llama-f32.gguf", HONE_TEST_DATA_DIR);
    hone_model *m = NULL;
    CHECK_MSG(hone_model_load(&m, path) == 0, "the tiny model (a test fixture): %s", hone_error_last());
    if (!m) return;
    hone_ctx_opts o = HONE_CTX_OPTS_INIT;
    o.n_threads = 1;
    o.n_ctx = 64;
    o.kv_block_size = 4;
    o.kv_blocks = 6;
    hone_ctx *c = NULL;
    CHECK_EQ_INT(hone_ctx_new(&c, m, &o), 0);
    if (!c) {
        hone_model_free(m);
        return;
    }
    hone_kv_cache *kv = hone_ctx_kv(c);
    hone_kv_seq a = {0}, b = {0};
    int32_t toks[32];
    for (int i = 0; i < 32; i++) toks[i] = 1 + i % 7;
    CHECK_EQ_INT(hone_ctx_forward(c, &a, toks, 4, NULL, 0), 0); /* one full block each */
    CHECK_EQ_INT(hone_ctx_forward(c, &b, toks, 4, NULL, 0), 0);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 4);
    seq_snap a0 = snap(&a), b0 = snap(&b);
    /* rows: a's next token (a new block: fits), then 17 of b's (positions 4..20: 5 more blocks,
     * 3 left once a took one) */
    enum { N = 18 };
    int32_t tk[N], pos[N];
    hone_kv_seq *seqs[N];
    tk[0] = 3, pos[0] = 4, seqs[0] = &a;
    for (int i = 1; i < N; i++) tk[i] = toks[i], pos[i] = 4 + (i - 1), seqs[i] = &b;
    hone_batch bt = {.n = N, .tokens = tk, .seqs = seqs, .pos = pos};
    CHECK_EQ_INT(hone_ctx_forward_batch(c, &bt), HONE_ERANGE);
    CHECK_STR_CONTAINS(hone_error_last(), "KV cache full");
    CHECK_MSG(same(&a, &a0), "a: %lld blocks, %lld tokens after the refused batch (before: %lld, %lld)",
              (long long)a.n_blocks, (long long)a.n_tokens, (long long)a0.n_blocks, (long long)a0.n_tokens);
    CHECK(same(&b, &b0));
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 4);
    /* b first, then a: the failing sequence comes first, nothing was taken before it */
    hone_kv_seq *seqs2[N];
    int32_t pos2[N], tk2[N];
    for (int i = 0; i < N - 1; i++) tk2[i] = toks[i], pos2[i] = 4 + i, seqs2[i] = &b;
    tk2[N - 1] = 3, pos2[N - 1] = 4, seqs2[N - 1] = &a;
    hone_batch bt2 = {.n = N, .tokens = tk2, .seqs = seqs2, .pos = pos2};
    CHECK_EQ_INT(hone_ctx_forward_batch(c, &bt2), HONE_ERANGE);
    CHECK(same(&a, &a0) && same(&b, &b0));
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 4);
    /* a batch that fits runs, and takes exactly the blocks it needs */
    hone_batch ok = {.n = 5, .tokens = tk, .seqs = seqs, .pos = pos}; /* a: 1 row, b: 4 rows */
    CHECK_EQ_INT(hone_ctx_forward_batch(c, &ok), 0);
    CHECK(a.n_tokens == 5 && a.n_blocks == 2 && b.n_tokens == 8 && b.n_blocks == 2);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 2);
    hone_kv_cache_release(kv, &a);
    hone_kv_cache_release(kv, &b);
    CHECK_EQ_INT(hone_kv_cache_n_free(kv), 6);
    hone_ctx_free(c);
    hone_model_free(m);
}

TEST_MAIN(TEST_CASE(test_reserve_release), TEST_CASE(test_truncate), TEST_CASE(test_share_refcounts),
          TEST_CASE(test_pool_resident), TEST_CASE(test_pool_huge_pages), TEST_CASE(test_batch_reserve_rollback))
