/* matvec_f32: y[rows] = W[rows][cols] x[cols] (decode). Contract: engine/slots.h.
 * Ideas: f32 weights: used as stored;
 * f32 activations; 16 fused multiply-add lanes in the fixed order of kernels/cpu/common.h. */
#include "kernels/cpu/common.h"

static void deq(const void *row, int64_t c0, int n, float *out)
{
    memcpy(out, (const float *)row + c0, (size_t)n * sizeof(float));
}

void hone_cpu_matvec_f32(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                         int ith, int nth)
{
    hone_cpu_matvec_generic(y, W, x, rows, cols, hone_dtype_row_bytes(HONE_DTYPE_F32, cols), deq, ith,
                            nth);
}
