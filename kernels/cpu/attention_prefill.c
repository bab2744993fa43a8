/* attention_prefill: causal attention for a chunk of n queries over the paged KV cache, GQA.
 * Contract: engine/slots.h. Ideas: the (token, head) rows of one kv head, tokens then its query
 * heads, go through hone_cpu_attend_rows (kernels/cpu/common.h) 32 at a time, each with its own
 * causal length pos0 + t + 1, so they share every K and V read and a prefilled row equals the
 * decoded one bit for bit. Those tiles are wide: each 16-key step's K is transposed once for
 * all of the tile's rows, so a row's 16 scores come from vertical fmas and adds (no shuffle
 * tree per row), and the rows' double normalisers advance side by side in one register.
 * Tiles are dealt to the threads in turn (later tokens cost more). */
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
    /* a tile keeps its rows' scores from pass 1 (a segment's at most HONE_ATT_SEG keys a row, on
     * the stack), so K is read once; rows of longer context go a segment at a time for the whole
     * tile (hone_cpu_attend_rows), each segment's K and V read once for its 32 rows */
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
