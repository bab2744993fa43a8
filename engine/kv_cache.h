/* The paged KV cache: per layer, a pool of fixed-size blocks of K and V rows; a sequence owns
 * a block table mapping its token positions to blocks. Blocks are reference-counted so that
 * sequences can share prefix blocks. */
#ifndef HONE_KV_CACHE_H
#define HONE_KV_CACHE_H

#include <stdint.h>

typedef struct hone_kv_cache hone_kv_cache;

/* A sequence's view of the cache: token j lives in blocks[j / block_size]. */
typedef struct {
    int32_t *blocks;      /* [cap] block ids */
    int64_t n_blocks;     /* blocks held */
    int64_t cap;
    int64_t n_tokens;     /* tokens whose K/V are stored */
} hone_kv_seq;

/* n_blocks blocks of block_size tokens, for n_layers layers of [n_kv_heads][head_dim] f32. */
int hone_kv_cache_new(hone_kv_cache **out, int64_t n_layers, int64_t n_kv_heads, int64_t head_dim,
                      int64_t block_size, int64_t n_blocks);
void hone_kv_cache_free(hone_kv_cache *kv);
/* Bytes of K and V that one token takes over n_layers layers of [n_kv_heads][head_dim] f32
 * (2 x 4 x n_layers x n_kv_heads x head_dim): the unit of every KV memory figure (hone info,
 * serve's pool plan, /metrics).
 *   hone_kv_cache_token_bytes(30, 3, 64) == 46080  // SmolLM2-135M: 360 MiB at 8192 tokens */
int64_t hone_kv_cache_token_bytes(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim);

int64_t hone_kv_cache_block_size(const hone_kv_cache *kv);
int64_t hone_kv_cache_n_blocks(const hone_kv_cache *kv);
int64_t hone_kv_cache_n_free(const hone_kv_cache *kv);
/* Layer pools: [n_blocks][n_kv_heads][block_size][head_dim] (engine/kv_layout.h). */
float *hone_kv_cache_k(hone_kv_cache *kv, int64_t layer);
float *hone_kv_cache_v(hone_kv_cache *kv, int64_t layer);

/* Makes seq hold blocks for at least n_tokens tokens; HONE_ERANGE ("KV cache full") if the
 * pool runs out, leaving seq as it was. */
int hone_kv_cache_reserve(hone_kv_cache *kv, hone_kv_seq *seq, int64_t n_tokens);
/* Drops seq's blocks (a block returns to the pool when no sequence holds it) and empties seq. */
void hone_kv_cache_release(hone_kv_cache *kv, hone_kv_seq *seq);
/* Keeps the first n_tokens of seq, releasing blocks past them. */
void hone_kv_cache_truncate(hone_kv_cache *kv, hone_kv_seq *seq, int64_t n_tokens);
/* Prefix caching: appends block, already held by another sequence (its block_size tokens
 * stored), to seq with one more reference, and counts its tokens as stored in seq. seq must
 * end on a block boundary (n_tokens == n_blocks * block_size). HONE_EINVAL for a free or
 * out-of-range block or an unaligned seq, leaving seq as it was.
 *   hone_kv_cache_share(kv, &b, a.blocks[0]);  // b now starts with a's first block_size tokens */
int hone_kv_cache_share(hone_kv_cache *kv, hone_kv_seq *seq, int32_t block);

#endif
