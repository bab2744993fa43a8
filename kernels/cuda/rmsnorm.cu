// rmsnorm: y[r][i] = x[r][i] / sqrt(mean_j x[r][j]^2 + eps) * w[i]. Contract: engine/slots.h and
// kernels/cuda/README.md.
//   y, x: [n][dim] f32 (y == x allowed: every thread reads its elements before the barrier
//   that precedes its writes); w: [dim] f32.
// Ideas:
//   - one block per row; the sum of squares in double (each square exact), a block tree;
//   - the scale (float)(1 / sqrt(ss / dim + eps)) in double, rounded once, as on the CPU;
//   - y = (x * scale) * w in f32, the CPU's two roundings.
// hone-launch: block=256 x=1 y=1
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256)
hone_cuda_rmsnorm(float *y, const float *x, const float *__restrict__ w, hone_i64 n,
                  hone_i64 dim, float eps)
{
    hone_i64 r = blockIdx.x;
    if (r >= n) return; /* whole block leaves together: the barriers below stay uniform */
    const float *xr = x + r * dim;
    float *yr = y + r * dim;
    double ss = 0.0;
    for (hone_i64 i = threadIdx.x; i < dim; i += blockDim.x) ss += (double)xr[i] * (double)xr[i];
    ss = hone_block_sum_f64(ss);
    float scale = (float)(1.0 / sqrt(ss / (double)dim + (double)eps));
    for (hone_i64 i = threadIdx.x; i < dim; i += blockDim.x)
        yr[i] = __fmul_rn(__fmul_rn(xr[i], scale), w[i]);
}
