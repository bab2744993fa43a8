/* Red team: exits the process. Expected: scan; with the scans off, a crash (seccomp). */
#include <stdlib.h>
#include "kernels/cpu/common.h"
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    (void)out, (void)gate, (void)up, (void)n, (void)ith, (void)nth;
    exit(0);
}
