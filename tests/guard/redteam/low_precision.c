/* Red team: matvec accumulating in _Float16. Expected: nonfinite (its accumulator overflows on
 * the edge values, where f32 does not; low_precision_bf16.c is the variant within range). */
#include "kernels/cpu/common.h"
void hone_cpu_matvec_f32(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                         int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *w = (const float *)W + r * cols;
        _Float16 acc = 0;
        for (int64_t c = 0; c < cols; c++) acc += (_Float16)(w[c] * x[c]);
        y[r] = (float)acc;
    }
}
