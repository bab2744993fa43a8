/* matvec_q2_k: y[rows] = W[rows][cols] x[cols] (decode). Contract: engine/slots.h.
 * Ideas: q2_K weights: each 32-value chunk of a 256-value block dequantised ((d sc) q - dmin m, one rounding) before use;
 * AVX-512: one row at a time, one zmm of 16 lanes (portable C elsewhere);
 * f32 activations; 16 fused multiply-add lanes in the fixed order of kernels/cpu/common.h. */
#include "kernels/cpu/common.h"

void hone_cpu_matvec_q2_k(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                         int ith, int nth)
{
#ifdef HONE_CPU_SIMD
    hone_cpu_matvec_simd(y, W, x, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q2_K, cols), hone_cpu_deqv_q2_k,
                         hone_cpu_deqr_q2_k, ith, nth);
#else
    hone_cpu_matvec_generic(y, W, x, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q2_K, cols), hone_cpu_deqr_q2_k, ith,
                            nth);
#endif
}
