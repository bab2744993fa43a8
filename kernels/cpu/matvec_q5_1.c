/* matvec_q5_1: y[rows] = W[rows][cols] x[cols] (decode). Contract: engine/slots.h.
 * Ideas: q5_1 weights: each block of 32 dequantised (q * d + m, one rounding) before use;
 * AVX-512: 8 rows side by side (4 on long rows), their f16 scales converted ahead (hone_cpu_matvec_staged),
 * one zmm of 16 lanes per row; AVX2: hone_cpu_matmul_avx2 (portable C elsewhere);
 * f32 activations; 16 fused multiply-add lanes in the fixed order of kernels/cpu/common.h. */
#include "kernels/cpu/common.h"

void hone_cpu_matvec_q5_1(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                         int ith, int nth)
{
#ifdef HONE_CPU_SIMD
    hone_cpu_matvec_staged(y, W, x, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q5_1, cols),
                           (int64_t)sizeof(hone_block_q5_1), 2, hone_cpu_deqs_q5_1, hone_cpu_deqv_q5_1,
                           hone_cpu_deqr_q5_1, ith, nth);
#else
    hone_cpu_matvec_portable(y, W, x, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q5_1, cols), q5_1, hone_cpu_deqr_q5_1,
                             ith, nth);
#endif
}
