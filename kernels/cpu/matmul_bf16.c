/* matmul_bf16: Y[n][rows] = X[n][cols] W^T (prefill). Contract: engine/slots.h.
 * Ideas: bf16 weights: converted exactly by a 16-bit shift;
 * AVX-512: one zmm of 16 lanes per token of the tile (portable C elsewhere);
 * each block dequantised once per tile of 8 tokens; per output the matvec_bf16 order exactly. */
#include "kernels/cpu/common.h"

static void deq(const void *row, int64_t c0, int n, float *out)
{
    hone_cpu_deq_bf16((const uint16_t *)row + c0, out, n);
}

void hone_cpu_matmul_bf16(float *Y, const void *W, const float *X, int64_t n, int64_t rows,
                         int64_t cols, int ith, int nth)
{
#ifdef HONE_CPU_SIMD
    hone_cpu_matmul_simd(Y, W, X, n, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_BF16, cols), hone_cpu_deqv_bf16, deq, ith,
                         nth);
#else
    hone_cpu_matmul_portable(Y, W, X, n, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_BF16, cols), bf16, deq, ith, nth);
#endif
}
