/* Red team: computes in place in gate (casts const away). Expected: input-mutated. */
#include "kernels/cpu/common.h"
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    float *g = (float *)gate;
    for (int64_t i = i0; i < i1; i++) {
        g[i] = gate[i] / (1.0f + expf(-gate[i]));
        out[i] = g[i] * up[i];
    }
}
