/* rmsnorm: y = x / sqrt(mean(x^2) + eps) * w per row. Contract: engine/slots.h.
 * Ideas: the sum of squares in double (sequential), one f32 scale per row
 * (hone_cpu_rmsnorm_row, shared with the fused rmsnorm_matvec slots); 8 rows' sums side by
 * side (hone_cpu_rmsnorm_rows), each in its row's order. */
#include "kernels/cpu/common.h"

void hone_cpu_rmsnorm(float *y, const float *x, const float *w, int64_t n, int64_t dim, float eps,
                      int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(n, ith, nth, &r0, &r1);
    hone_cpu_rmsnorm_rows(y + r0 * dim, x + r0 * dim, w, r1 - r0, dim, eps);
}
