/* Red team: the slot function is a GNU ifunc: its resolver runs when the worker loads the
 * object, before the seccomp filter. Expected: verifier (elf). */
#include "kernels/cpu/common.h"
static void impl(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}
static void *resolve(void) { return (void *)impl; }
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth) __attribute__((ifunc("resolve")));
