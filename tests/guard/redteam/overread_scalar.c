/* Red team: reads one element past the end of its activations (x[cols]) and folds it in with a
 * zero weight, so the result is right whenever that stray float is finite. Expected: canary (a
 * fault on the guard page after input 'x'). */
#include "kernels/cpu/common.h"
void hone_cpu_matvec_f32(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                         int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *w = (const float *)W + r * cols;
        float acc[HONE_LANES] = {0};
        for (int64_t c = 0; c < cols; c++) acc[c % HONE_LANES] = fmaf(w[c], x[c], acc[c % HONE_LANES]);
        float stray = x[cols];
        y[r] = hone_cpu_lanes_sum(acc) + (stray == stray ? 0.0f : stray);
    }
}
