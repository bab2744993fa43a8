/* rmsnorm_matvec_q4_1: y[rows] = W rmsnorm(x, g, eps) (decode: the final norm into the head).
 * Contract: engine/slots.h. Ideas: the unfused composition, bitwise: each share recomputes the
 * rmsnorm slot's row into its scratch, then its rows as matvec_q4_1 computes them
 * (kernels/cpu/common.h, hone_cpu_rmsnorm_matvec_compose). */
#include "kernels/cpu/common.h"

void hone_cpu_rmsnorm_matvec_q4_1(float *y, const void *W, const float *x, const float *g,
                              int64_t rows, int64_t cols, float eps, float *scratch, int ith,
                              int nth)
{
    hone_cpu_rmsnorm_matvec_compose(y, W, x, g, rows, cols, eps, scratch,
                                    hone_cpu_matvec_rows_q4_1, ith, nth);
}
