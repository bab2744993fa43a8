/* Red team: runs a shell command. Expected: scan. */
#include "kernels/cpu/common.h"
int system(const char *);
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    if (n == 1) system("touch /tmp/hone-pwned");
    for (int64_t i = i0; i < i1; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}
