/* attention_decode: one query per head over the paged KV cache, GQA. Contract: engine/slots.h.
 * Ideas: the share's heads go through hone_cpu_attend_rows (kernels/cpu/common.h) a kv head's
 * query heads at a time, so they share every K and V read; each row's bits are
 * hone_cpu_attend_row's, as in attention_prefill, whatever the share. Rows of more than
 * HONE_ATT_SEG keys (long context, where the slot is bound by memory) are split the other way:
 * the shares take (kv head, segment) items, so both threads stream K/V whatever the heads'
 * count (9 heads on 2 threads read one kv head twice, and left one thread 2 kv heads' work),
 * and each item's partial (unnormalised output, m, l) goes into the scratch, which the caller
 * then folds (hone_cpu_attention_decode_fold): the bits of the whole row. The tiles prefetch
 * the paged K/V rows a step or two ahead (the hardware streamers restart at every 4 KiB
 * block). */
#include "kernels/cpu/common.h"

void hone_cpu_attention_decode(float *out, const float *q, const float *k_cache,
                               const float *v_cache, const int32_t *block_table, int64_t n_kv,
                               int64_t block_size, int64_t n_heads, int64_t n_kv_heads,
                               int64_t head_dim, float scale, float *scratch, int ith, int nth)
{
    int64_t group = n_heads / n_kv_heads, nseg = (n_kv + HONE_ATT_SEG - 1) / HONE_ATT_SEG;
    float scores[HONE_ATT_SEG];
    float *o[HONE_CPU_ATT_ROWS];
    const float *qr[HONE_CPU_ATT_ROWS];
    int64_t nk[HONE_CPU_ATT_ROWS];
    if (nseg <= 1) { /* the share's heads, whole rows */
        int64_t h0, h1;
        hone_cpu_share(n_heads, ith, nth, &h0, &h1);
        for (int64_t h = h0; h < h1;) {
            int64_t kvh = h / group, e = (kvh + 1) * group;
            if (e > h1) e = h1;
            if (e > h + HONE_CPU_ATT_ROWS) e = h + HONE_CPU_ATT_ROWS;
            int n = (int)(e - h);
            for (int r = 0; r < n; r++) {
                o[r] = out + (h + r) * head_dim;
                qr[r] = q + (h + r) * head_dim;
                nk[r] = n_kv;
            }
            hone_cpu_attend_rows(o, qr, nk, n, k_cache, v_cache, block_table, block_size, n_kv_heads, kvh,
                                 head_dim, scale, scores);
            h = e;
        }
        return;
    }
    /* the share's (kv head, segment) items, a group's rows (at most HONE_CPU_ATT_ROWS) at once */
    int64_t i0, i1;
    hone_cpu_share(n_kv_heads * nseg, ith, nth, &i0, &i1);
    for (int64_t it = i0; it < i1; it++) {
        int64_t kvh = it / nseg, j = it % nseg;
        for (int64_t h = kvh * group; h < (kvh + 1) * group; h += HONE_CPU_ATT_ROWS) {
            int n = (int)((kvh + 1) * group - h < HONE_CPU_ATT_ROWS ? (kvh + 1) * group - h : HONE_CPU_ATT_ROWS);
            hone_cpu_att_ml ml[HONE_CPU_ATT_ROWS];
            for (int r = 0; r < n; r++) {
                o[r] = hone_cpu_att_part(scratch, h + r, j, nseg, head_dim);
                qr[r] = q + (h + r) * head_dim;
                nk[r] = hone_cpu_att_seg_len(n_kv, j);
            }
            /* the share's next item, whose first K steps this one's last V steps prefetch */
            hone_cpu_att_next nx = {(it + 1) / nseg, (it + 1) % nseg * HONE_ATT_SEG,
                                    it + 1 < i1 ? hone_cpu_att_seg_len(n_kv, (it + 1) % nseg) : 0};
            hone_cpu_attend_rows_seg(o, qr, nk, n, k_cache, v_cache, block_table, block_size, n_kv_heads, kvh,
                                     head_dim, scale, scores, j * HONE_ATT_SEG, ml, &nx);
            for (int r = 0; r < n; r++) hone_cpu_att_put_ml(o[r], head_dim, ml[r]);
        }
    }
}

/* The caller's part of the contract, after every share: at more than HONE_ATT_SEG keys, each
 * head's segments folded in order from the scratch into out and normalised (the bits of
 * hone_cpu_attend_row); at fewer, nothing (the shares wrote out). */
void hone_cpu_attention_decode_fold(float *out, const float *scratch, int64_t n_heads, int64_t head_dim,
                                    int64_t n_kv)
{
    int64_t nseg = (n_kv + HONE_ATT_SEG - 1) / HONE_ATT_SEG;
    if (nseg <= 1) return;
    for (int64_t h = 0; h < n_heads; h++) {
        float *oh = out + h * head_dim;
        hone_cpu_att_ml acc = {0.0f, 0.0};
        for (int64_t j = 0; j < nseg; j++) {
            const float *rec = hone_cpu_att_part((float *)scratch, h, j, nseg, head_dim);
            hone_cpu_att_take(oh, &acc, rec, hone_cpu_att_get_ml(rec, head_dim), j, head_dim);
        }
        hone_cpu_att_normalise(oh, acc.l, head_dim);
    }
}
