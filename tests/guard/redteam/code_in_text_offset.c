/* Red team: bytes in .text that decode as one harmless mov, but hide syscall (0f 05) one byte
 * in; the candidate calls code + 1. Expected: verifier (elf): the branch does not land on an
 * instruction the sweep decoded, or is indirect. */
#include "kernels/cpu/common.h"
__attribute__((section(".text"))) static const unsigned char code[] = {0xb8, 0x0f, 0x05, 0x90, 0x90, 0xc3};
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    ((void (*)(void))(const void *)(code + 1))();
    for (int64_t i = i0; i < i1; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}
