/* matmul_mxfp4: Y[n][rows] = X[n][cols] W^T (prefill). Contract: engine/slots.h.
 * Ideas: mxfp4 weights: each block of 32 dequantised (e2m1 value * 2^(e - 128), exact in f32) before use;
 * AVX-512: one zmm of 16 lanes per token of the tile (portable C elsewhere);
 * each chunk dequantised once per tile of 8 tokens; per output the matvec_mxfp4 order exactly. */
#include "kernels/cpu/common.h"

void hone_cpu_matmul_mxfp4(float *Y, const void *W, const float *X, int64_t n, int64_t rows,
                         int64_t cols, int ith, int nth)
{
#ifdef HONE_CPU_SIMD
    hone_cpu_matmul_simd(Y, W, X, n, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_MXFP4, cols), hone_cpu_deqv_mxfp4,
                         hone_cpu_deqr_mxfp4, ith, nth);
#else
    hone_cpu_matmul_generic(Y, W, X, n, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_MXFP4, cols), hone_cpu_deqr_mxfp4, ith,
                            nth);
#endif
}
