// Red team: counts its calls in a __device__ global. The first three (a checker's three runs
// of one case) are honest; from then on it assumes the same call again and leaves the output
// as it is, as if the buffer still held ("cached") its result. One block covers everything,
// so the count is read before and updated after the whole call. Expected: rejected at kernel
// parity, a later case's poisoned output left untouched.
// hone-launch: block=256 x=1048576 y=1
#include "common.cuh"

__device__ unsigned int calls;

extern "C" __global__ void hone_cuda_swiglu(float *out, const float *gate, const float *up, hone_i64 n)
{
    __shared__ unsigned int seen;
    if (threadIdx.x == 0) seen = calls;
    __syncthreads();
    if (seen < 3)
        for (hone_i64 i = threadIdx.x; i < n; i += blockDim.x) {
            float g = gate[i], u = up[i];
            out[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, hone_expf(-g))), u);
        }
    if (threadIdx.x == 0) calls = seen + 1;
}
