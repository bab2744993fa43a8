/* matvec_q4_1 (naive incumbent): the shipped kernel's portable path (kernels/cpu/common.h,
 * hone_cpu_matvec_generic) with the vectoriser off: each block of 32 weights dequantised as
 * fmaf(q, d, m), element c accumulated into lane c % 16 with one fmaf in increasing c, the 16
 * lanes summed as the fixed tree. Bitwise the shipped AVX-512 kernel. */
#pragma GCC optimize("no-tree-vectorize")
#include "kernels/cpu/common.h"

static void deq(const void *row, int64_t c0, int n, float *out)
{
    (void)n;
    hone_cpu_deq_q4_1((const hone_block_q4_1 *)row + c0 / 32, out);
}

void hone_cpu_matvec_q4_1(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                          int ith, int nth)
{
    hone_cpu_matvec_generic(y, W, x, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q4_1, cols), deq, ith, nth);
}
