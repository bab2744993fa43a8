/* attention_prefill: causal attention for a chunk of n queries over the paged KV cache, GQA.
 * Contract: engine/slots.h. Ideas: the (token, head) rows of one kv head, tokens then its query
 * heads, go through hone_cpu_attend_rows (kernels/cpu/common.h) 32 at a time (fewer at long
 * context, so that the tile keeps their scores; see below), each with its own
 * causal length pos0 + t + 1, so they share every K and V read and a prefilled row equals the
 * decoded one bit for bit. Tiles are dealt to the threads in turn (later tokens cost more). */
#include "kernels/cpu/common.h"

void hone_cpu_attention_prefill(float *out, const float *q, const float *k_cache,
                                const float *v_cache, const int32_t *block_table, int64_t n,
                                int64_t pos0, int64_t block_size, int64_t n_heads,
                                int64_t n_kv_heads, int64_t head_dim, float scale, float *scratch,
                                int ith, int nth)
{
    /* 32 rows a tile: a 64-token chunk of 9 heads on 3 kv heads makes 18 tiles, which 2
     * threads share evenly (64-row tiles made 9: 5 against 4), and up to 2k keys a tile's K and
     * V stay in a 2 MiB L2 whatever its rows (2 threads, Sapphire Rapids, 64 tokens x 4 layers:
     * 0.92-1.0x the time of 64-row tiles at 128 .. 2k keys) */
    int64_t group = n_heads / n_kv_heads, rows = n * group, tile = 32;
    /* a tile keeps its rows' scores from pass 1 only where they fit (HONE_CPU_ATT_KEEP floats
     * beside row 0's in scratch), else pass 2 computes them again: half again the fmas and a
     * second read of K. At long context fewer rows a tile that keep theirs cost less than the
     * K and V reads the bigger tile shares (those come from L3 at these sizes), and the more
     * rows keep theirs the fewer times K and V are read: with 512 KiB of scores (was 128) a
     * tile holds 32 rows at 4k keys (was 8) and 16 at 8k (was 4); 64 tokens x 4 layers,
     * 2 threads: 30.7 -> 22.8 ms at 4k, 104 -> 57 ms at 8k, same bits. */
    int64_t keep_rows = 1 + HONE_CPU_ATT_KEEP / (pos0 + n);
    if (keep_rows < tile && keep_rows >= 4) tile = keep_rows / 4 * 4;
    int64_t per = (rows + tile - 1) / tile;
    float *o[HONE_CPU_ATT_ROWS];
    const float *qr[HONE_CPU_ATT_ROWS];
    int64_t nk[HONE_CPU_ATT_ROWS];
    for (int64_t it = ith; it < n_kv_heads * per; it += nth) {
        int64_t kvh = it / per, i0 = it % per * tile;
        int64_t i1 = i0 + tile < rows ? i0 + tile : rows;
        int m = (int)(i1 - i0);
        for (int r = 0; r < m; r++) {
            int64_t t = (i0 + r) / group, h = kvh * group + (i0 + r) % group;
            o[r] = out + (t * n_heads + h) * head_dim;
            qr[r] = q + (t * n_heads + h) * head_dim;
            nk[r] = pos0 + t + 1;
        }
        hone_cpu_attend_rows(o, qr, nk, m, k_cache, v_cache, block_table, block_size, n_kv_heads,
                             kvh, head_dim, scale, scratch);
    }
}
