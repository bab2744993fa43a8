/* swiglu (naive incumbent): silu(g) * up with libm's expf per element, the vectoriser off:
 * the shipped kernel's operations in its order, bitwise. */
#pragma GCC optimize("no-tree-vectorize")
#include "kernels/cpu/common.h"

void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        float e = expf(-gate[i]);
        float s = gate[i] / (1.0f + e);
        out[i] = s * up[i];
    }
}
