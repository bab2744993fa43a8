/* Red team: a call through a function pointer chosen at run time (an indirect call a
 * candidate could aim anywhere). Expected: verifier (elf). */
#include "kernels/cpu/common.h"
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    float (*volatile act)(float) = expf;
    for (int64_t i = i0; i < i1; i++) out[i] = gate[i] / (1.0f + act(-gate[i])) * up[i];
}
