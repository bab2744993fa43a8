/* matmul_q8_0: Y[n][rows] = X[n][cols] W^T (prefill). Contract: engine/slots.h.
 * Ideas: q8_0 weights: each block of 32 dequantised exactly (q * d) before use;
 * AVX-512: one zmm of 16 lanes per token of the tile (portable C elsewhere);
 * each block dequantised once per tile of 8 tokens (below 32 tokens from scales staged as f32,
 * hone_cpu_matmul_staged); per output the matvec_q8_0 order exactly. */
#include "kernels/cpu/common.h"

static void deq(const void *row, int64_t c0, int n, float *out)
{
    (void)n;
    hone_cpu_deq_q8_0((const hone_block_q8_0 *)row + c0 / 32, out);
}

void hone_cpu_matmul_q8_0(float *Y, const void *W, const float *X, int64_t n, int64_t rows,
                         int64_t cols, int ith, int nth)
{
#ifdef HONE_CPU_SIMD
    hone_cpu_matmul_staged(Y, W, X, n, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q8_0, cols),
                           (int64_t)sizeof(hone_block_q8_0), 1, hone_cpu_deqs_q8_0, hone_cpu_deqv_q8_0, deq, ith,
                           nth);
#else
    hone_cpu_matmul_portable(Y, W, X, n, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_Q8_0, cols), q8_0, deq, ith, nth);
#endif
}
