/* Red team: does not compile. Expected: compile (with the compiler's log). */
#include "kernels/cpu/common.h"
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    out[0] = undefined_identifier;
}
