/* matvec_q4_1 (naive incumbent): scalar C, one row at a time: each weight dequantised as
 * fmaf(q, d, m) when it is used, element c accumulated into lane c % 16 with one fmaf in
 * increasing c, the 16 lanes summed as the fixed tree of kernels/cpu/common.h. Bitwise the
 * shipped kernel (q4_1 rows are whole blocks of 32). */
#pragma GCC optimize("no-tree-vectorize")
#include "kernels/cpu/common.h"

void hone_cpu_matvec_q4_1(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                          int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    int64_t nb = cols / 32;
    for (int64_t r = r0; r < r1; r++) {
        const hone_block_q4_1 *row = (const hone_block_q4_1 *)W + r * nb;
        float acc[16] = {0};
        for (int64_t c = 0; c < nb * 32; c++) {
            const hone_block_q4_1 *b = &row[c / 32];
            int j = (int)(c % 32);
            int q = j < 16 ? (b->qs[j] & 0xF) : (b->qs[j - 16] >> 4);
            float wv = fmaf((float)q, hone_fp16_to_f32(b->d), hone_fp16_to_f32(b->m));
            acc[c % 16] = fmaf(wv, x[c], acc[c % 16]);
        }
        float s8[8], s4[4];
        for (int l = 0; l < 8; l++) s8[l] = acc[l] + acc[l + 8];
        for (int l = 0; l < 4; l++) s4[l] = s8[l] + s8[l + 4];
        y[r] = (s4[0] + s4[2]) + (s4[1] + s4[3]);
    }
}
