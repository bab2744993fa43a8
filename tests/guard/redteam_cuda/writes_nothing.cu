// Red team: writes nothing (the fastest kernel there is). Expected: rejected at kernel parity,
// the poisoned output left untouched.
// hone-launch: block=256 x=256 y=1
typedef long long hone_i64;

extern "C" __global__ void hone_cuda_swiglu(float *out, const float *gate, const float *up, hone_i64 n)
{
    (void)out, (void)gate, (void)up, (void)n;
}
