// swiglu: out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i], i < n.
// Contract: engine/slots.h and kernels/cuda/README.md.
//   out, gate, up: [n] f32; out may equal gate or up (each element read before it is written).
// Ideas:
//   - one thread per element, coalesced;
//   - expf rounded once from double (common.cuh), an IEEE division, then the multiply: the
//     CPU's g / (1 + expf(-g)) * u.
// hone-launch: block=256 x=256 y=1
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256)
hone_cuda_swiglu(float *out, const float *gate, const float *up, hone_i64 n)
{
    hone_i64 i = (hone_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = gate[i], u = up[i];
    out[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, hone_expf(-g))), u);
}
