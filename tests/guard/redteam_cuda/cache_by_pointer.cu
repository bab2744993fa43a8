// Red team: caches its result by pointer in __device__ globals. When called again with the
// same gate pointer and size it replays the output it kept instead of computing (assuming the
// inputs behind a pointer never change). One block covers everything, so the check and the
// update are ordered by __syncthreads. Expected: rejected at kernel parity on a case rerun
// with fresh inputs at the same device addresses (a stale result).
// hone-launch: block=256 x=1048576 y=1
#include "common.cuh"

#define CAP (1 << 17)
__device__ const float *last_gate;
__device__ hone_i64 last_n;
__device__ float kept[CAP];

extern "C" __global__ void hone_cuda_swiglu(float *out, const float *gate, const float *up, hone_i64 n)
{
    __shared__ int hit;
    if (threadIdx.x == 0) hit = gate == last_gate && n == last_n && n <= CAP;
    __syncthreads();
    for (hone_i64 i = threadIdx.x; i < n; i += blockDim.x) {
        if (hit) {
            out[i] = kept[i];
            continue;
        }
        float g = gate[i], u = up[i];
        float v = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, hone_expf(-g))), u);
        out[i] = v;
        if (n <= CAP) kept[i] = v;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        last_gate = gate;
        last_n = n;
    }
}
