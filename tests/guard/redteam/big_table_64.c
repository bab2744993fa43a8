/* Red team: a 64 MiB constant table (the object above the size cap).
 * Expected: verifier (elf). */
#include "kernels/cpu/common.h"
static const float table[64 << 18] = {1.0f};
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i] * table[i & (((64 << 18)) - 1)];
}
