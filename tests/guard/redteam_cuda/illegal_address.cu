// Red team: writes through a wild pointer (address 16, never mapped). Expected: the launch
// faults with an illegal address in the worker; rejected with the CUDA error as its reason.
// hone-launch: block=256 x=256 y=1
typedef long long hone_i64;

extern "C" __global__ void hone_cuda_swiglu(float *out, const float *gate, const float *up, hone_i64 n)
{
    hone_i64 i = (hone_i64)blockIdx.x * blockDim.x + threadIdx.x;
    float *wild = (float *)(hone_i64)16;
    if (i < n) wild[i] = gate[i] * up[i];
    (void)out;
}
