/* Red team: specialised to the model's shapes: right when cols is a multiple of 32, and on other
 * shapes it looks only at the first element of the tail. Expected: parity (on an odd shape). */
#include "kernels/cpu/common.h"
void hone_cpu_matvec_f32(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                         int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    int64_t full = cols / 32 * 32;
    for (int64_t r = r0; r < r1; r++) {
        const float *w = (const float *)W + r * cols;
        float acc[HONE_LANES] = {0};
        for (int64_t c = 0; c < full; c += 32) hone_cpu_dot32(acc, w + c, x + c);
        if (full < cols) acc[0] = fmaf(w[full], x[full], acc[0]);
        y[r] = hone_cpu_lanes_sum(acc);
    }
}
