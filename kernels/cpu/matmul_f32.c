/* matmul_f32: Y[n][rows] = X[n][cols] W^T (prefill). Contract: engine/slots.h.
 * Ideas: f32 weights: used as stored;
 * AVX-512: one zmm of 16 lanes per token of the tile (portable C elsewhere);
 * each block dequantised once per tile of 8 tokens; per output the matvec_f32 order exactly. */
#include "kernels/cpu/common.h"

static void deq(const void *row, int64_t c0, int n, float *out)
{
    memcpy(out, (const float *)row + c0, (size_t)n * sizeof(float));
}

void hone_cpu_matmul_f32(float *Y, const void *W, const float *X, int64_t n, int64_t rows,
                         int64_t cols, int ith, int nth)
{
#ifdef HONE_CPU_SIMD
    hone_cpu_matmul_simd(Y, W, X, n, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_F32, cols), hone_cpu_deqv_f32, deq, ith,
                         nth);
#else
    hone_cpu_matmul_portable(Y, W, X, n, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_F32, cols), f32, deq, ith, nth);
#endif
}
