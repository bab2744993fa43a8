/* Red team: sets flush-to-zero and denormals-are-zero for speed and leaves them set, so every
 * later kernel of the process computes with other semantics. Expected: the object verifier
 * (ldmxcsr); with the scans off, fp-state (MXCSR checked after every call). */
#include <immintrin.h>
#include "kernels/cpu/common.h"
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    _mm_setcsr(_mm_getcsr() | 0x8040u);
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}
