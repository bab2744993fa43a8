/* matmul_q3_k: Y[n][rows] = X[n][cols] W^T (prefill). Contract: engine/slots.h.
 * Ideas: q3_K weights: each 32-value chunk of a 256-value block dequantised ((d sc) q, exact in f32) before use;
 * AVX-512: one zmm of 16 lanes per token of the tile (portable C elsewhere);
 * each chunk dequantised once per tile of 8 tokens; per output the matvec_q3_k order exactly. */
#include "kernels/cpu/common.h"

void hone_cpu_matmul_q3_k(float *Y, const void *W, const float *X, int64_t n, int64_t rows,
                         int64_t cols, int ith, int nth)
{
#ifdef HONE_CPU_SIMD
    hone_cpu_matmul_simd(Y, W, X, n, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q3_K, cols), hone_cpu_deqv_q3_k,
                         hone_cpu_deqr_q3_k, ith, nth);
#else
    hone_cpu_matmul_generic(Y, W, X, n, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q3_K, cols), hone_cpu_deqr_q3_k, ith,
                            nth);
#endif
}
