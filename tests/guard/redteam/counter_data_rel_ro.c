/* Red team: a call counter in a writable section named .data.rel.ro, a name the linker also uses.
 * Expected: verifier (elf), by content: the section holds the candidate's bytes. */
#include "kernels/cpu/common.h"
__attribute__((section(".data.rel.ro"))) int calls;
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    float k = ++calls > 3 ? 0.5f : 1.0f;
    for (int64_t i = i0; i < i1; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i] * k;
}
