/* matmul_q5_0: Y[n][rows] = X[n][cols] W^T (prefill). Contract: engine/slots.h.
 * Ideas: q5_0 weights: each block of 32 dequantised ((q - 16) * d, exact in f32) before use;
 * AVX-512: one zmm of 16 lanes per token of the tile; AVX2: hone_cpu_matmul_avx2 (portable C elsewhere);
 * each block dequantised once per tile of 8 tokens (below 32 tokens from scales staged as f32,
 * hone_cpu_matmul_staged); per output the matvec_q5_0 order exactly. */
#include "kernels/cpu/common.h"

void hone_cpu_matmul_q5_0(float *Y, const void *W, const float *X, int64_t n, int64_t rows,
                         int64_t cols, int ith, int nth)
{
#ifdef HONE_CPU_SIMD
    hone_cpu_matmul_staged(Y, W, X, n, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q5_0, cols),
                           (int64_t)sizeof(hone_block_q5_0), 1, hone_cpu_deqs_q5_0, hone_cpu_deqv_q5_0, hone_cpu_deqr_q5_0, ith,
                           nth);
#else
    hone_cpu_matmul_portable(Y, W, X, n, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q5_0, cols), q5_0, hone_cpu_deqr_q5_0,
                             ith, nth);
#endif
}
