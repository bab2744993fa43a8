/* matvec_q4_0: y[rows] = W[rows][cols] x[cols] (decode). Contract: engine/slots.h.
 * Ideas: q4_0 weights: each block of 32 dequantised exactly ((q - 8) * d) before use;
 * AVX-512: 8 rows side by side (4 on long rows), their f16 scales converted ahead (hone_cpu_matvec_staged),
 * one zmm of 16 lanes per row (portable C elsewhere);
 * f32 activations; 16 fused multiply-add lanes in the fixed order of kernels/cpu/common.h. */
#include "kernels/cpu/common.h"

static void deq(const void *row, int64_t c0, int n, float *out)
{
    (void)n;
    hone_cpu_deq_q4_0((const hone_block_q4_0 *)row + c0 / 32, out);
}

void hone_cpu_matvec_q4_0(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                         int ith, int nth)
{
#ifdef HONE_CPU_SIMD
    hone_cpu_matvec_staged(y, W, x, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q4_0, cols),
                           (int64_t)sizeof(hone_block_q4_0), 1, hone_cpu_deqs_q4_0, hone_cpu_deqv_q4_0, deq, ith, nth);
#else
    hone_cpu_matvec_portable(y, W, x, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q4_0, cols), q4_0, deq, ith, nth);
#endif
}
