/* Red team: switches the SSE rounding mode to round-down and does not switch it back.
 * Expected: the object verifier (ldmxcsr); with the scans off, fp-state. */
#include <immintrin.h>
#include "kernels/cpu/common.h"
void hone_cpu_add(float *y, const float *a, const float *b, int64_t n, int ith, int nth)
{
    _MM_SET_ROUNDING_MODE(_MM_ROUND_DOWN);
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) y[i] = a[i] + b[i];
}
