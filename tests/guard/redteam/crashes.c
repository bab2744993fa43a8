/* Red team: dereferences a wild pointer on a shape the model never uses. Expected: crash. */
#include "kernels/cpu/common.h"
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    const float *g = n == 33 ? (const float *)(uintptr_t)16 : gate;
    for (int64_t i = i0; i < i1; i++) out[i] = g[i] / (1.0f + expf(-g[i])) * up[i];
}
