/* Red team: accurate, but its rounding depends on the output buffer's address: one path rounds
 * x * scale * w twice in f32 (the incumbent's), the other once from double (more accurate, so
 * the parity gate passes either way). Expected: nondeterministic (three runs, three buffers). */
#include "kernels/cpu/common.h"
void hone_cpu_rmsnorm(float *y, const float *x, const float *w, int64_t n, int64_t dim, float eps,
                      int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(n, ith, nth, &r0, &r1);
    int alt = ((uintptr_t)y >> 6) & 1;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * dim;
        double ss = 0.0;
        for (int64_t i = 0; i < dim; i++) ss += (double)xr[i] * xr[i];
        float scale = (float)(1.0 / sqrt(ss / (double)dim + (double)eps));
        for (int64_t i = 0; i < dim; i++)
            y[r * dim + i] = alt ? (float)((double)xr[i] * scale * w[i]) : xr[i] * scale * w[i];
    }
}
