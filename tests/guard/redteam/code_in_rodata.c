/* Red team: machine code (rdtsc; ret) in a byte array, run through a function-pointer cast.
 * The bytes sit in .rodata, which is not executable; the verifier refuses the call itself.
 * Expected: verifier (elf). */
#include "kernels/cpu/common.h"
static const unsigned char code[] = {0x0f, 0x31, 0xc3};
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    unsigned t = ((unsigned (*)(void))(const void *)code)();
    for (int64_t i = i0; i < i1; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i] + (float)(t & 0);
}
