/* Red team: the algebraically equal g e^g / (1 + e^g), which gives inf/inf = NaN for g > 88.
 * Expected: nonfinite. */
#include "kernels/cpu/common.h"
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        float e = expf(gate[i]);
        out[i] = gate[i] * e / (1.0f + e) * up[i];
    }
}
