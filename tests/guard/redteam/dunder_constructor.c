/* Red team: load-time code spelt __constructor__ (GCC reads it as constructor), named through
 * a pasted macro. Expected: scan. */
#include "kernels/cpu/common.h"
#define CAT(a, b) a##b
static int ready;
__attribute__((CAT(__constr, uctor__))) static void at_load(void) { ready = 1; }
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i] * (float)ready;
}
