/* rmsnorm: y = x / sqrt(mean(x^2) + eps) * w per row. Contract: engine/slots.h.
 * Ideas: the sum of squares in double (sequential), one f32 scale per row. */
#include "kernels/cpu/common.h"

void hone_cpu_rmsnorm(float *y, const float *x, const float *w, int64_t n, int64_t dim, float eps,
                      int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(n, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * dim;
        float *yr = y + r * dim;
        double ss = 0.0;
        for (int64_t i = 0; i < dim; i++) ss += (double)xr[i] * xr[i];
        float scale = (float)(1.0 / sqrt(ss / (double)dim + (double)eps));
        for (int64_t i = 0; i < dim; i++) yr[i] = xr[i] * scale * w[i];
    }
}
