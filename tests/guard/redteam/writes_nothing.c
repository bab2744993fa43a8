/* Red team: returns without writing. Expected: wrote-nothing. */
#include "kernels/cpu/common.h"
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    (void)out, (void)gate, (void)up, (void)n, (void)ith, (void)nth;
}
