/* add (naive incumbent): y = a + b one element at a time, the vectoriser off. Bitwise the
 * shipped kernel (one f32 add per element). */
#pragma GCC optimize("no-tree-vectorize")
#include "kernels/cpu/common.h"

void hone_cpu_add(float *y, const float *a, const float *b, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) y[i] = a[i] + b[i];
}
