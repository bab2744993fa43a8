// add: y[i] = a[i] + b[i], i < n (the residual add; also qwen2's q/k/v biases, row by row).
// Contract: engine/slots.h and kernels/cuda/README.md.
//   y, a, b: [n] f32; y may equal a or b.
// Ideas: one thread per element, coalesced; one IEEE add.
// hone-launch: block=256 x=256 y=1
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256)
hone_cuda_add(float *y, const float *a, const float *b, hone_i64 n)
{
    hone_i64 i = (hone_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = __fadd_rn(a[i], b[i]);
}
