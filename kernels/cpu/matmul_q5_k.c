/* matmul_q5_k: Y[n][rows] = X[n][cols] W^T (prefill). Contract: engine/slots.h.
 * Ideas: q5_K weights: each 32-value chunk of a 256-value block dequantised ((d sc) q - dmin m, one rounding) before use;
 * AVX-512: one zmm of 16 lanes per token of the tile (portable C elsewhere);
 * each chunk dequantised once per tile of 8 tokens; per output the matvec_q5_k order exactly. */
#include "kernels/cpu/common.h"

void hone_cpu_matmul_q5_k(float *Y, const void *W, const float *X, int64_t n, int64_t rows,
                         int64_t cols, int ith, int nth)
{
#ifdef HONE_CPU_SIMD
    hone_cpu_matmul_simd(Y, W, X, n, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q5_K, cols), hone_cpu_deqv_q5_k,
                         hone_cpu_deqr_q5_k, ith, nth);
#else
    hone_cpu_matmul_generic(Y, W, X, n, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q5_K, cols), hone_cpu_deqr_q5_k, ith,
                            nth);
#endif
}
