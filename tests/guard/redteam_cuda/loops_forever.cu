// Red team: never returns (a volatile spin the compiler must keep). Expected: the worker's
// watchdog kills it; rejected as a timeout, the guard itself unharmed.
// hone-launch: block=256 x=256 y=1
typedef long long hone_i64;

extern "C" __global__ void hone_cuda_swiglu(float *out, const float *gate, const float *up, hone_i64 n)
{
    volatile int spin = 1;
    while (spin) {
    }
    hone_i64 i = (hone_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = gate[i] * up[i];
}
