/* qkv_f32: y[rq + rk + rv] = concat(Wq x, Wk x, Wv x) (decode). Contract: engine/slots.h.
 * Ideas: the unfused composition, bitwise: this share's rows of the concatenation, each
 * computed as matvec_f32 computes it (kernels/cpu/common.h, hone_cpu_qkv_compose). */
#include "kernels/cpu/common.h"

void hone_cpu_qkv_f32(float *y, const void *Wq, const void *Wk, const void *Wv, const float *x,
                   int64_t rq, int64_t rk, int64_t rv, int64_t cols, int ith, int nth)
{
    hone_cpu_qkv_compose(y, Wq, Wk, Wv, x, rq, rk, rv, cols, hone_cpu_matvec_rows_f32, ith, nth);
}
