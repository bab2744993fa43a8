/* Paged KV cache: a free list of block ids plus a reference count per block. */
#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "hugemem.h"

struct hone_kv_cache {
    int64_t n_layers, row;        /* row = n_kv_heads * head_dim floats per token */
    int64_t block_size, n_blocks;
    float *k, *v;                 /* [n_layers][n_blocks][n_kv_heads][block_size][head_dim] */
    hone_huge_map k_map, v_map;   /* their huge-page mappings (base NULL: k, v are malloc'd) */
    int32_t *free_list;           /* [n_blocks] */
    int64_t n_free;
    int32_t *refs;                /* [n_blocks] */
};

int64_t hone_kv_cache_token_bytes(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim)
{
    return 2 * (int64_t)sizeof(float) * n_layers * n_kv_heads * head_dim;
}

int hone_kv_cache_new(hone_kv_cache **out, int64_t n_layers, int64_t n_kv_heads, int64_t head_dim,
                      int64_t block_size, int64_t n_blocks)
{
    *out = NULL;
    if (n_layers < 1 || n_kv_heads < 1 || head_dim < 1 || block_size < 1 || n_blocks < 1 ||
        n_blocks > INT32_MAX)
        return hone_error_set(HONE_EINVAL, "invalid KV cache geometry");
    hone_kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) return hone_error_set(HONE_ENOMEM, "out of memory");
    kv->n_layers = n_layers;
    kv->row = n_kv_heads * head_dim;
    kv->block_size = block_size;
    kv->n_blocks = n_blocks;
    size_t floats = (size_t)(n_layers * n_blocks * block_size * kv->row);
    /* in huge pages where they are on (HONE_HUGEPAGES, engine/hugemem.h): a decode step at
     * long context reads a 4 KiB run of each kv head's paging block, a new page every run, so
     * 4 KiB pages cost a TLB miss a run (SmolLM2 q4_0 at 4k keys, 2 threads, `hone profile`,
     * 8 alternated pairs: attention_decode 254-286 -> 246-263 ms, 164-171 when the neighbours
     * left the memory free) */
    size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    kv->k = hone_huge_alloc(bytes, &kv->k_map);
    kv->v = hone_huge_alloc(bytes, &kv->v_map);
    if (!kv->k) kv->k = aligned_alloc(64, bytes);
    if (!kv->v) kv->v = aligned_alloc(64, bytes);
    kv->free_list = malloc((size_t)n_blocks * sizeof(int32_t));
    kv->refs = calloc((size_t)n_blocks, sizeof(int32_t));
    if (!kv->k || !kv->v || !kv->free_list || !kv->refs) {
        hone_kv_cache_free(kv);
        return hone_error_set(HONE_ENOMEM, "out of memory for a KV cache of %zu MiB",
                              (size_t)(n_blocks * block_size *
                                       hone_kv_cache_token_bytes(n_layers, n_kv_heads, head_dim)) >> 20);
    }
    /* resident from the start: the pool is touched once here, not page by page as blocks are
     * first used (page faults in the decode step, and an RSS that climbs for as long as the
     * high-water mark of the cache does, which looks like a leak to an operator and to
     * bench/soak.py; a pool that does not fit fails at start, not under traffic) */
    memset(kv->k, 0, floats * sizeof(float));
    memset(kv->v, 0, floats * sizeof(float));
    /* hand out low ids first */
    for (int64_t i = 0; i < n_blocks; i++) kv->free_list[i] = (int32_t)(n_blocks - 1 - i);
    kv->n_free = n_blocks;
    *out = kv;
    return 0;
}

void hone_kv_cache_free(hone_kv_cache *kv)
{
    if (!kv) return;
    if (kv->k_map.base) hone_huge_free(&kv->k_map);
    else free(kv->k);
    if (kv->v_map.base) hone_huge_free(&kv->v_map);
    else free(kv->v);
    free(kv->free_list);
    free(kv->refs);
    free(kv);
}

int64_t hone_kv_cache_block_size(const hone_kv_cache *kv) { return kv->block_size; }
int64_t hone_kv_cache_n_blocks(const hone_kv_cache *kv) { return kv->n_blocks; }
int64_t hone_kv_cache_n_free(const hone_kv_cache *kv) { return kv->n_free; }

float *hone_kv_cache_k(hone_kv_cache *kv, int64_t layer)
{
    return kv->k + layer * kv->n_blocks * kv->block_size * kv->row;
}

float *hone_kv_cache_v(hone_kv_cache *kv, int64_t layer)
{
    return kv->v + layer * kv->n_blocks * kv->block_size * kv->row;
}

int hone_kv_cache_reserve(hone_kv_cache *kv, hone_kv_seq *seq, int64_t n_tokens)
{
    int64_t need = (n_tokens + kv->block_size - 1) / kv->block_size;
    if (need <= seq->n_blocks) return 0;
    if (need - seq->n_blocks > kv->n_free)
        return hone_error_set(HONE_ERANGE, "KV cache full: %lld tokens need %lld more blocks, %lld free",
                              (long long)n_tokens, (long long)(need - seq->n_blocks),
                              (long long)kv->n_free);
    if (need > seq->cap) {
        int64_t cap = seq->cap ? seq->cap : 8;
        while (cap < need) cap *= 2;
        int32_t *b = realloc(seq->blocks, (size_t)cap * sizeof *b);
        if (!b) return hone_error_set(HONE_ENOMEM, "out of memory");
        seq->blocks = b;
        seq->cap = cap;
    }
    while (seq->n_blocks < need) {
        int32_t id = kv->free_list[--kv->n_free];
        kv->refs[id] = 1;
        seq->blocks[seq->n_blocks++] = id;
    }
    return 0;
}

static void unref(hone_kv_cache *kv, int32_t id)
{
    if (--kv->refs[id] == 0) kv->free_list[kv->n_free++] = id;
}

void hone_kv_cache_truncate(hone_kv_cache *kv, hone_kv_seq *seq, int64_t n_tokens)
{
    int64_t keep = (n_tokens + kv->block_size - 1) / kv->block_size;
    while (seq->n_blocks > keep) unref(kv, seq->blocks[--seq->n_blocks]);
    if (seq->n_tokens > n_tokens) seq->n_tokens = n_tokens;
}

void hone_kv_cache_release(hone_kv_cache *kv, hone_kv_seq *seq)
{
    hone_kv_cache_truncate(kv, seq, 0);
    free(seq->blocks);
    memset(seq, 0, sizeof *seq);
}

int hone_kv_cache_share(hone_kv_cache *kv, hone_kv_seq *seq, int32_t block)
{
    if (block < 0 || block >= kv->n_blocks || kv->refs[block] == 0)
        return hone_error_set(HONE_EINVAL, "KV block %d is not held by any sequence", block);
    if (seq->n_tokens != seq->n_blocks * kv->block_size)
        return hone_error_set(HONE_EINVAL, "sharing a KV block needs a sequence that ends on a "
                              "block boundary (%lld tokens in %lld blocks)",
                              (long long)seq->n_tokens, (long long)seq->n_blocks);
    if (seq->n_blocks == seq->cap) {
        int64_t cap = seq->cap ? seq->cap * 2 : 8;
        int32_t *b = realloc(seq->blocks, (size_t)cap * sizeof *b);
        if (!b) return hone_error_set(HONE_ENOMEM, "out of memory");
        seq->blocks = b;
        seq->cap = cap;
    }
    kv->refs[block]++;
    seq->blocks[seq->n_blocks++] = block;
    seq->n_tokens += kv->block_size;
    return 0;
}
