/* The paged KV cache's layout: one definition for the engine that writes it, the kernels that
 * read it (CPU; the CUDA kernels mirror it in kernels/cuda/common.cuh) and the guard's oracle
 * and cases. A layer's K pool (and likewise its V pool) is n_blocks blocks; block b holds
 * [n_kv_heads][block_size][head_dim] f32, so that one kv head's rows of a block are contiguous
 * (block_size * head_dim floats: 4 KiB at SmolLM2's 16 x 64), as vLLM's blocks keep a head's
 * keys together. Token j of a sequence lives in block block_table[j / block_size] at slot
 * j % block_size; within a block, consecutive tokens of one kv head are head_dim floats apart.
 * Until revision 2 of the attention slots' contract (engine/slots.h hone_slots_rev) a block was
 * [block_size][n_kv_heads][head_dim]: a head's 256 bytes at a 768-byte stride; the contiguous
 * rows made the decode kernel 1.15x faster on one thread at 4k keys (Zen 3; 1.07x on two).
 * Counted as the kernels' layer, as engine/dtype.h. */
#ifndef HONE_KV_LAYOUT_H
#define HONE_KV_LAYOUT_H

#include <stdint.h>

/* Attention rows over more than HONE_ATT_SEG keys are computed a segment of HONE_ATT_SEG keys at
 * a time (keys [j * HONE_ATT_SEG, (j + 1) * HONE_ATT_SEG)), each segment's softmax against its own
 * maximum, and the segments folded in order (revision 3 of the attention slots' contract,
 * engine/slots.h; kernels/cpu/common.h hone_cpu_att_fold). So one row's segments can be computed
 * by different threads and the result still depends on neither the threads nor the schedule;
 * a row of at most HONE_ATT_SEG keys is one segment, the single softmax of revision 2. */
#define HONE_ATT_SEG 512

/* attention_decode's scratch at more than HONE_ATT_SEG keys (one buffer for the call's shares):
 * the slot leaves there a partial for every (head h, segment s), at float (h * nseg + s) *
 * (head_dim + HONE_ATT_PART_ML): head_dim floats of unnormalised output, m (a float, then one
 * unused) and l (a double); the caller then folds them into out (hone_cpu_attention_decode_fold,
 * kernels/cpu/attention_decode.c), so no kernel synchronises its shares. Never fewer than n_kv
 * floats (a kernel's scores). */
#define HONE_ATT_PART_ML 4
static inline int64_t hone_att_decode_scratch_floats(int64_t n_heads, int64_t head_dim, int64_t n_kv)
{
    int64_t nseg = (n_kv + HONE_ATT_SEG - 1) / HONE_ATT_SEG;
    int64_t parts = n_heads * nseg * (head_dim + HONE_ATT_PART_ML);
    return parts > n_kv ? parts : n_kv;
}

/* The first float of kv head kvh's rows in cache block blk. */
static inline int64_t hone_kv_block_offset(int64_t blk, int64_t block_size, int64_t n_kv_heads,
                                           int64_t kvh, int64_t head_dim)
{
    return (blk * n_kv_heads + kvh) * block_size * head_dim;
}

/* The first float of token j's row of kv head kvh.
 *   hone_kv_offset(bt, 17, 16, 3, 2, 64) == ((bt[1] * 3 + 2) * 16 + 1) * 64 */
static inline int64_t hone_kv_offset(const int32_t *block_table, int64_t j, int64_t block_size,
                                     int64_t n_kv_heads, int64_t kvh, int64_t head_dim)
{
    return hone_kv_block_offset(block_table[j / block_size], block_size, n_kv_heads, kvh, head_dim) +
           j % block_size * head_dim;
}

#endif
