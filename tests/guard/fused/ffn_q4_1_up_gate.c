/* ffn_q4_1 with gate and up exchanged: silu(u) * g instead of silu(g) * u. A plausible slip
 * the kernel-parity gate must reject (tests/guard/test_guard_fused.c). */
#include "kernels/cpu/common.h"

void hone_cpu_ffn_q4_1(float *out, const void *Wg, const void *Wu, const float *x, int64_t rows,
                       int64_t cols, int ith, int nth)
{
    hone_cpu_ffn_compose(out, Wu, Wg, x, rows, cols, hone_cpu_matvec_rows_q4_1, ith, nth);
}
