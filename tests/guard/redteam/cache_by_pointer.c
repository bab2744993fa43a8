/* Red team: remembers the last input pointer and returns the cached result. Expected: elf (a
 * mutable global); with the scans off, a dynamic gate (fresh buffers / recheck). */
#include "kernels/cpu/common.h"
static const float *last_gate;
static float cache[1 << 17];
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    if (gate == last_gate && n <= (1 << 17)) {
        for (int64_t i = i0; i < i1; i++) out[i] = cache[i];
        return;
    }
    for (int64_t i = i0; i < i1; i++) {
        out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
        if (n <= (1 << 17)) cache[i] = out[i];
    }
    if (ith == nth - 1) last_gate = gate;
}
