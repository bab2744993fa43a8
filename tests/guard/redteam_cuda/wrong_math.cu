// Red team: wrong math. gate * up, the sigmoid forgotten. Expected: rejected at kernel parity
// (error beyond the faithful bound).
// hone-launch: block=256 x=256 y=1
typedef long long hone_i64;

extern "C" __global__ void hone_cuda_swiglu(float *out, const float *gate, const float *up, hone_i64 n)
{
    hone_i64 i = (hone_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = gate[i] * up[i];
}
