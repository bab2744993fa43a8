// Red team: writes out of bounds. Correct results, and the last thread also writes one float
// past the end of the output. Expected: rejected, the canary after the output broken.
// hone-launch: block=256 x=256 y=1
#include "common.cuh"

extern "C" __global__ void hone_cuda_swiglu(float *out, const float *gate, const float *up, hone_i64 n)
{
    hone_i64 i = (hone_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = gate[i], u = up[i];
    out[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, hone_expf(-g))), u);
    if (i == n - 1) out[n] = 1.0f;
}
