// geglu: out[i] = gelu_tanh(gate[i]) * up[i], i < n (Gemma's gated FFN).
// Contract: engine/slots.h and kernels/cuda/README.md.
//   out, gate, up: [n] f32; out may equal gate or up (each element read before it is written).
// Ideas:
//   - one thread per element, coalesced;
//   - the CPU's f32 sequence with explicit roundings (no contraction): y = c g (1 + a g g),
//     tanh in double rounded once, then 0.5 g (1 + t) u.
// hone-launch: block=256 x=256 y=1
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256)
hone_cuda_geglu(float *out, const float *gate, const float *up, hone_i64 n)
{
    hone_i64 i = (hone_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = gate[i], u = up[i];
    float y = __fmul_rn(__fmul_rn(0.7978845608028654f, g),
                        __fadd_rn(1.0f, __fmul_rn(__fmul_rn(0.044715f, g), g)));
    float t = (float)tanh((double)y);
    out[i] = __fmul_rn(__fmul_rn(__fmul_rn(0.5f, g), __fadd_rn(1.0f, t)), u);
}
