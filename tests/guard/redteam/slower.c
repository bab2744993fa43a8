/* Red team: correct (the incumbent's math, safe when out == gate) but slower: it computes
 * every element three times. Expected: slower. */
#include "kernels/cpu/common.h"
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        volatile float v = 0.0f;
        for (int pass = 0; pass < 3; pass++) {
            volatile float g = gate[i];
            v = g / (1.0f + expf(-g)) * up[i];
        }
        out[i] = v;
    }
}
