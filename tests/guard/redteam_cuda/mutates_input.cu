// Red team: mutates its input. Correct results, then the gate it read is zeroed (const cast
// away). Expected: rejected, the inputs' hash changed.
// hone-launch: block=256 x=256 y=1
#include "common.cuh"

extern "C" __global__ void hone_cuda_swiglu(float *out, const float *gate, const float *up, hone_i64 n)
{
    hone_i64 i = (hone_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = gate[i], u = up[i];
    out[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, hone_expf(-g))), u);
    ((float *)gate)[i] = 0.0f;
}
