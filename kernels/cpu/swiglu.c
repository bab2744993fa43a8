/* swiglu: out = silu(gate) * up. Contract: engine/slots.h.
 * Ideas: silu(g) = g / (1 + expf(-g)) in f32, elementwise, 16 at a time (hone_cpu_silu_mul_n,
 * shared with the fused ffn slots). */
#include "kernels/cpu/common.h"

void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    hone_cpu_silu_mul_n(out + i0, gate + i0, up + i0, i1 - i0);
}
