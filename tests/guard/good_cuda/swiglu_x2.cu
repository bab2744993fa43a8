// swiglu, rewritten: each thread computes two elements, i and i + half the block's span, with
// the incumbent's operations (hone_expf, IEEE division, the multiply) in the same order, so
// every output is bitwise the incumbent's (exact tier). Whether it is faster is the speed
// gate's question, not this file's.
// hone-launch: block=128 x=256 y=1
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(128)
hone_cuda_swiglu(float *out, const float *gate, const float *up, hone_i64 n)
{
    hone_i64 i = (hone_i64)blockIdx.x * 256 + threadIdx.x;
    for (int k = 0; k < 2; k++, i += 128) {
        if (i >= n) return;
        float g = gate[i], u = up[i];
        out[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, hone_expf(-g))), u);
    }
}
