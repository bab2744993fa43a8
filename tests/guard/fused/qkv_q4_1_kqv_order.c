/* qkv_q4_1 with the wrong row order: the rows of Wk first, then Wq, then Wv. Every value is a
 * correctly computed dot product, in the wrong place: the kernel-parity gate must reject it.
 * tests/guard/test_guard_fused.c. */
#include "kernels/cpu/common.h"

void hone_cpu_qkv_q4_1(float *y, const void *Wq, const void *Wk, const void *Wv, const float *x,
                       int64_t rq, int64_t rk, int64_t rv, int64_t cols, int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rq + rk + rv, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const void *W = r < rk ? Wk : r < rk + rq ? Wq : Wv;
        int64_t i = r < rk ? r : r < rk + rq ? r - rk : r - rq - rk;
        hone_cpu_matvec_rows_q4_1(y + r, W, x, i, i + 1, cols);
    }
}
