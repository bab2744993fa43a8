/* attention_decode: one query per head over the paged KV cache, GQA. Contract: engine/slots.h.
 * Ideas: the share's heads go through hone_cpu_attend_rows (kernels/cpu/common.h) a kv head's
 * query heads at a time, so they share every K and V read; each row's bits are
 * hone_cpu_attend_row's, as in attention_prefill, whatever the share. At long context the
 * slot is bound by memory: the tiles keep each row's scores from pass 1 so K is read once, and
 * prefetch the paged K/V rows a step or two ahead (the hardware streamers lose a 256-byte head
 * at a 768-byte stride at every page). A kv head split between two shares is read by both
 * at once (even shares walk theirs backwards), so the second read mostly hits L3. Left: its
 * V columns could be split between the two instead (1/8 of the bytes at 9 heads, 2 threads). */
#include "kernels/cpu/common.h"

void hone_cpu_attention_decode(float *out, const float *q, const float *k_cache,
                               const float *v_cache, const int32_t *block_table, int64_t n_kv,
                               int64_t block_size, int64_t n_heads, int64_t n_kv_heads,
                               int64_t head_dim, float scale, float *scratch, int ith, int nth)
{
    int64_t h0, h1;
    hone_cpu_share(n_heads, ith, nth, &h0, &h1);
    int64_t group = n_heads / n_kv_heads;
    float *o[HONE_CPU_ATT_ROWS];
    const float *qr[HONE_CPU_ATT_ROWS];
    int64_t nk[HONE_CPU_ATT_ROWS];
    /* even shares walk their kv heads last to first: a kv head split between shares ith and
     * ith + 1 is then the first both read (or the last both read), at the same time, so one
     * share's misses bring it into the shared L3 for the other (9 heads on 2 threads: kv head
     * 1 is read by both). The order of the calls changes no row's bits. */
    int back = ith % 2 == 0 && nth > 1;
    for (int64_t h = back ? h1 - 1 : h0; back ? h >= h0 : h < h1;) {
        if (back) { /* the last call's first row: its kv head's first, or h0, or a 64-row tile's */
            int64_t b = h / group * group;
            if (b < h0) b = h0;
            if (h - b >= HONE_CPU_ATT_ROWS) b = h - (h - b) % HONE_CPU_ATT_ROWS;
            h = b;
        }
        int64_t kvh = h / group, e = (kvh + 1) * group;
        if (e > h1) e = h1;
        if (e > h + HONE_CPU_ATT_ROWS) e = h + HONE_CPU_ATT_ROWS;
        int n = (int)(e - h);
        for (int r = 0; r < n; r++) {
            o[r] = out + (h + r) * head_dim;
            qr[r] = q + (h + r) * head_dim;
            nk[r] = n_kv;
        }
        hone_cpu_attend_rows(o, qr, nk, n, k_cache, v_cache, block_table, block_size, n_kv_heads,
                             kvh, head_dim, scale, scratch);
        h = back ? h - 1 : e;
    }
}
