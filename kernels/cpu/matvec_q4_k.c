/* matvec_q4_k: y[rows] = W[rows][cols] x[cols] (decode). Contract: engine/slots.h.
 * Ideas: q4_K weights: each 32-value chunk of a 256-value block dequantised ((d sc) q - dmin m, one rounding) before use;
 * AVX-512: 4 rows side by side, one zmm of 16 lanes a row, a whole 256-value block decoded at once
 * (its scales unpacked and scaled in one vector op, not per 32 values; portable C elsewhere);
 * f32 activations; 16 fused multiply-add lanes in the fixed order of kernels/cpu/common.h. */
#include "kernels/cpu/common.h"

void hone_cpu_matvec_q4_k(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                         int ith, int nth)
{
#ifdef HONE_CPU_SIMD
    hone_cpu_matvec_simd_k(y, W, x, rows, cols, (int64_t)sizeof(hone_block_q4_k), hone_cpu_deqv256_q4_k, ith,
                           nth);
#else
    hone_cpu_matvec_generic(y, W, x, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q4_K, cols), hone_cpu_deqr_q4_k, ith,
                            nth);
#endif
}
