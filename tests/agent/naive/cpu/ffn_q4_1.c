/* ffn_q4_1 (naive incumbent): the fused gate + up + swiglu slot as the unfused composition, but
 * each row through the shipped kernel's portable path (kernels/cpu/common.h,
 * hone_cpu_matvec_generic) with the vectoriser off, as tests/agent/naive/cpu/matvec_q4_1.c:
 * element c into lane c % 16 with one fmaf in increasing c, the lanes summed as the fixed tree,
 * then the swiglu slot's formula. Bitwise the shipped composition on finite inputs. */
#pragma GCC optimize("no-tree-vectorize")
#include "kernels/cpu/common.h"

static inline void naive_rows(float *y, const void *W, const float *x, int64_t r0, int64_t r1, int64_t cols)
{
    int64_t rb = hone_dtype_row_bytes(HONE_DTYPE_Q4_1, cols);
    hone_cpu_matvec_generic(y, (const uint8_t *)W + r0 * rb, x, r1 - r0, cols, rb, hone_cpu_deqr_q4_1, 0, 1);
}

void hone_cpu_ffn_q4_1(float *out, const void *Wg, const void *Wu, const float *x, int64_t rows,
                       int64_t cols, int ith, int nth)
{
    hone_cpu_ffn_compose(out, Wg, Wu, x, rows, cols, naive_rows, ith, nth);
}
