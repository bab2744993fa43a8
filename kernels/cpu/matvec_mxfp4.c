/* matvec_mxfp4: y[rows] = W[rows][cols] x[cols] (decode). Contract: engine/slots.h.
 * Ideas: mxfp4 weights: each block of 32 dequantised (e2m1 value * 2^(e - 128), exact in f32) before use;
 * AVX-512: one row at a time, one zmm of 16 lanes (portable C elsewhere);
 * f32 activations; 16 fused multiply-add lanes in the fixed order of kernels/cpu/common.h. */
#include "kernels/cpu/common.h"

void hone_cpu_matvec_mxfp4(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                         int ith, int nth)
{
#ifdef HONE_CPU_SIMD
    hone_cpu_matvec_simd(y, W, x, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_MXFP4, cols), hone_cpu_deqv_mxfp4,
                         hone_cpu_deqr_mxfp4, ith, nth);
#else
    hone_cpu_matvec_generic(y, W, x, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_MXFP4, cols), hone_cpu_deqr_mxfp4, ith,
                            nth);
#endif
}
