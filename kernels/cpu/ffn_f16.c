/* ffn_f16: out[rows] = swiglu(Wg x, Wu x) (decode). Contract: engine/slots.h.
 * Ideas: the unfused composition, bitwise: 64 rows of g and u at a time as matvec_f16
 * computes them, then the swiglu slot's formula (kernels/cpu/common.h, hone_cpu_ffn_compose). */
#include "kernels/cpu/common.h"

void hone_cpu_ffn_f16(float *out, const void *Wg, const void *Wu, const float *x, int64_t rows,
                   int64_t cols, int ith, int nth)
{
    hone_cpu_ffn_compose(out, Wg, Wu, x, rows, cols, hone_cpu_matvec_rows_f16, ith, nth);
}
