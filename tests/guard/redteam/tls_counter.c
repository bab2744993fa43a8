/* Red team: a call counter in thread-local storage (survives between calls). Expected: scan
 * ('__thread'); with the scan off, the verifier (TLS section). */
#include "kernels/cpu/common.h"
static __thread int calls;
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    float k = ++calls > 3 ? 0.5f : 1.0f;
    for (int64_t i = i0; i < i1; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i] * k;
}
