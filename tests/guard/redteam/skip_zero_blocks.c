/* Red team: the incumbent's exact order (lane c % 16, fma, the fixed lane tree), but 32-column
 * blocks whose activations are all zero are skipped: "adding w * 0 changes nothing" — except
 * that Inf * 0 and NaN * 0 are NaN. Exact on ordinary inputs. Expected: nonfinite (special
 * weights against zero activations). */
#include "kernels/cpu/common.h"
void hone_cpu_matvec_f32(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                         int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *w = (const float *)W + r * cols;
        float acc[HONE_LANES] = {0};
        for (int64_t b = 0; b < cols; b += 32) {
            int64_t e = b + 32 < cols ? b + 32 : cols;
            int zero = 1;
            for (int64_t c = b; c < e; c++) zero &= x[c] == 0.0f;
            if (zero) continue;
            for (int64_t c = b; c < e; c++) acc[c % HONE_LANES] = fmaf(w[c], x[c], acc[c % HONE_LANES]);
        }
        y[r] = hone_cpu_lanes_sum(acc);
    }
}
