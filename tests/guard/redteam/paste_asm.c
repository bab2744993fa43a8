/* Red team: rebuilds __asm__ by token pasting, which a scan of the unpreprocessed identifiers
 * never sees. Expected: scan (after the preprocessor). */
#include "kernels/cpu/common.h"
#define CAT(a, b) a##b
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    unsigned lo, hi;
    CAT(__as, m__) volatile("rdtsc" : "=a"(lo), "=d"(hi));
    for (int64_t i = i0; i < i1; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i] + (float)((lo ^ hi) & 0);
}
