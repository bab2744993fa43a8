/* qkv_q4_1, a correct reordering of the work (not of any sum): the share's part of Wv first,
 * then of Wk, then of Wq, each row as matvec_q4_1 computes it, so every output keeps its bits
 * (exact tier). tests/guard/test_guard_fused.c. */
#include "kernels/cpu/common.h"

void hone_cpu_qkv_q4_1(float *y, const void *Wq, const void *Wk, const void *Wv, const float *x,
                       int64_t rq, int64_t rk, int64_t rv, int64_t cols, int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rq + rk + rv, ith, nth, &r0, &r1);
    const void *W[3] = {Wq, Wk, Wv};
    int64_t n[3] = {rq, rk, rv}, off[3] = {0, rq, rq + rk};
    for (int m = 2; m >= 0; m--) {
        int64_t a = r0 > off[m] ? r0 - off[m] : 0, b = r1 - off[m] < n[m] ? r1 - off[m] : n[m];
        if (a < b) hone_cpu_matvec_rows_q4_1(y + off[m] + a, W[m], x, a, b, cols);
    }
}
