/* Red team: writes zeros everywhere. Expected: constant. */
#include "kernels/cpu/common.h"
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    (void)gate, (void)up;
    for (int64_t i = i0; i < i1; i++) out[i] = 0.0f;
}
