/* matmul_q5_1: Y[n][rows] = X[n][cols] W^T (prefill). Contract: engine/slots.h.
 * Ideas: q5_1 weights: each block of 32 dequantised (q * d + m, one rounding) before use;
 * AVX-512: one zmm of 16 lanes per token of the tile; AVX2: hone_cpu_matmul_avx2 (portable C elsewhere);
 * each block dequantised once per tile of 8 tokens (below 32 tokens from scales staged as f32,
 * hone_cpu_matmul_staged); per output the matvec_q5_1 order exactly. */
#include "kernels/cpu/common.h"

void hone_cpu_matmul_q5_1(float *Y, const void *W, const float *X, int64_t n, int64_t rows,
                         int64_t cols, int ith, int nth)
{
#ifdef HONE_CPU_SIMD
    hone_cpu_matmul_staged(Y, W, X, n, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q5_1, cols),
                           (int64_t)sizeof(hone_block_q5_1), 2, hone_cpu_deqs_q5_1, hone_cpu_deqv_q5_1, hone_cpu_deqr_q5_1, ith,
                           nth);
#else
    hone_cpu_matmul_portable(Y, W, X, n, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q5_1, cols), q5_1, hone_cpu_deqr_q5_1,
                             ith, nth);
#endif
}
