/* Red team: int $0x80; ret as bytes placed in .text by a section attribute (no asm keyword:
 * a naked function with .byte needs asm, so this is the route without it). The linear sweep
 * decodes the array like any code. Expected: verifier (elf). */
#include "kernels/cpu/common.h"
__attribute__((section(".text"))) static const unsigned char code[] = {0xcd, 0x80, 0xc3};
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    ((void (*)(void))(const void *)code)();
    for (int64_t i = i0; i < i1; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}
