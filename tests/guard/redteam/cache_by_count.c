/* Red team: after the first few calls, returns whatever the first call computed. Expected: elf;
 * with the scans off, a dynamic gate. */
#include "kernels/cpu/common.h"
static int calls;
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    if (++calls > 3) {
        for (int64_t i = i0; i < i1; i++) out[i] = 0.5f * gate[i] * up[i];
        return;
    }
    for (int64_t i = i0; i < i1; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}
