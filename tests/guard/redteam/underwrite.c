/* Red team: right everywhere, but share 0 also writes the float before its output. Expected:
 * canary ("wrote before its output"). */
#include "kernels/cpu/common.h"
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
    if (ith == 0) out[-1] = 1.0f;
}
