/* Red team: load-time code without the word constructor: a function pointer placed in
 * .init_array by a section attribute. Expected: verifier (elf). */
#include "kernels/cpu/common.h"
static int ready;
static void at_load(void) { ready = 1; }
__attribute__((section(".init_array"), used)) static void (*const hook)(void) = at_load;
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i] * (float)(ready | 1);
}
