/* rmsnorm (naive incumbent): the shipped kernel's sequential double sum of squares and f32
 * scale, scalar (the vectoriser off), w read through a second pass over the row. Bitwise the
 * shipped kernel. */
#pragma GCC optimize("no-tree-vectorize")
#include "kernels/cpu/common.h"

void hone_cpu_rmsnorm(float *y, const float *x, const float *w, int64_t n, int64_t dim, float eps,
                      int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(n, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        double ss = 0.0;
        for (int64_t i = 0; i < dim; i++) ss += (double)x[r * dim + i] * (double)x[r * dim + i];
        float scale = (float)(1.0 / sqrt(ss / (double)dim + (double)eps));
        for (int64_t i = 0; i < dim; i++) y[r * dim + i] = x[r * dim + i] * scale;
        for (int64_t i = 0; i < dim; i++) y[r * dim + i] = y[r * dim + i] * w[i];
    }
}
