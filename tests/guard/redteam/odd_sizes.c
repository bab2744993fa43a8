/* Red team: right on multiples of 8, wrong tail on odd sizes. Expected: parity. */
#include "kernels/cpu/common.h"
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8)
        for (int k = 0; k < 8; k++) out[i + k] = gate[i + k] / (1.0f + expf(-gate[i + k])) * up[i + k];
    for (; i < i1; i++) out[i] = 0.5f * gate[i] * up[i];
}
