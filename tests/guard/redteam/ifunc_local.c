/* Red team: a file-local ifunc called by the slot function: an R_X86_64_IRELATIVE
 * relocation, whose resolver the loader runs. Expected: verifier (elf). */
#include "kernels/cpu/common.h"
static float silu(float x) { return x / (1.0f + expf(-x)); }
static void *pick(void) { return (void *)silu; }
static float act(float x) __attribute__((ifunc("pick")));
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) out[i] = act(gate[i]) * up[i];
}
