/* Red team: rebuilds __builtin_ia32_rdtsc by token pasting. Expected: scan. */
#include "kernels/cpu/common.h"
#define CAT(a, b) a##b
#define TIMER CAT(__builtin_ia32_, rdtsc)
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    unsigned long long t = TIMER();
    for (int64_t i = i0; i < i1; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i] + (float)(t & 0);
}
