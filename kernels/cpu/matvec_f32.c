/* matvec_f32: y[rows] = W[rows][cols] x[cols] (decode). Contract: engine/slots.h.
 * Ideas: f32 weights: used as stored;
 * AVX-512: one row at a time, one zmm of 16 lanes (portable C elsewhere);
 * f32 activations; 16 fused multiply-add lanes in the fixed order of kernels/cpu/common.h. */
#include "kernels/cpu/common.h"

static void deq(const void *row, int64_t c0, int n, float *out)
{
    memcpy(out, (const float *)row + c0, (size_t)n * sizeof(float));
}

void hone_cpu_matvec_f32(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                         int ith, int nth)
{
#ifdef HONE_CPU_SIMD
    hone_cpu_matvec_simd(y, W, x, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_F32, cols), hone_cpu_deqv_f32, deq, ith,
                         nth);
#else
    hone_cpu_matvec_portable(y, W, x, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_F32, cols), f32, deq, ith, nth);
#endif
}
