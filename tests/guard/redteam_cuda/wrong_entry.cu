// Red team: compiles, but its entry point is another slot's (hone_cuda_add), so the engine could
// never launch it as swiglu. Expected: rejected by the compile gate.
// hone-launch: block=256 x=256 y=1
typedef long long hone_i64;

extern "C" __global__ void hone_cuda_add(float *y, const float *a, const float *b, hone_i64 n)
{
    hone_i64 i = (hone_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a[i] + b[i];
}
