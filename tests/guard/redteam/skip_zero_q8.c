/* Red team: q8_0 blocks whose 32 activations are all zero are skipped, which loses the NaN of a
 * block whose f16 scale is Inf or NaN. Expected: nonfinite. */
#include "kernels/cpu/common.h"
void hone_cpu_matvec_q8_0(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                          int ith, int nth)
{
    int64_t r0, r1, nb = cols / 32;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const hone_block_q8_0 *blk = (const hone_block_q8_0 *)W + r * nb;
        float acc[HONE_LANES] = {0}, w[32];
        for (int64_t b = 0; b < nb; b++) {
            int zero = 1;
            for (int c = 0; c < 32; c++) zero &= x[b * 32 + c] == 0.0f;
            if (zero) continue;
            hone_cpu_deq_q8_0(&blk[b], w);
            for (int c = 0; c < 32; c++)
                acc[(b * 32 + c) % HONE_LANES] = fmaf(w[c], x[b * 32 + c], acc[(b * 32 + c) % HONE_LANES]);
        }
        y[r] = hone_cpu_lanes_sum(acc);
    }
}
