/* swiglu: out = silu(gate) * up. Contract: engine/slots.h.
 * Ideas: silu(g) = g / (1 + expf(-g)) in f32, elementwise (hone_cpu_silu_mul, shared with the
 * fused ffn slots). */
#include "kernels/cpu/common.h"

void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) out[i] = hone_cpu_silu_mul(gate[i], up[i]);
}
