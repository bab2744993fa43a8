/* geglu: out = gelu_tanh(gate) * up (Gemma's gated FFN). Contract: engine/slots.h.
 * Ideas: the tanh-approximated GELU in f32 with tanh taken in double and rounded once
 * (hone_cpu_gelu_mul), elementwise. */
#include "kernels/cpu/common.h"

void hone_cpu_geglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) out[i] = hone_cpu_gelu_mul(gate[i], up[i]);
}
