/* matvec_bf16: y[rows] = W[rows][cols] x[cols] (decode). Contract: engine/slots.h.
 * Ideas: bf16 weights: converted exactly by a 16-bit shift;
 * AVX-512: one row at a time, one zmm of 16 lanes (portable C elsewhere);
 * f32 activations; 16 fused multiply-add lanes in the fixed order of kernels/cpu/common.h. */
#include "kernels/cpu/common.h"

static void deq(const void *row, int64_t c0, int n, float *out)
{
    hone_cpu_deq_bf16((const uint16_t *)row + c0, out, n);
}

void hone_cpu_matvec_bf16(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                         int ith, int nth)
{
#ifdef HONE_CPU_SIMD
    hone_cpu_matvec_simd(y, W, x, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_BF16, cols), hone_cpu_deqv_bf16, deq, ith,
                         nth);
#else
    hone_cpu_matvec_portable(y, W, x, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_BF16, cols), bf16, deq, ith, nth);
#endif
}
