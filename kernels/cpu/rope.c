/* rope: rotary position embedding in place, normal and NeoX layouts. Contract: engine/slots.h.
 * Ideas: the frequencies once per call, angles and their cos/sin in double, rounded to f32 once
 * per (token, pair) and reused across the heads of a token (hone_cpu_rope_share, shared with
 * rope_freqs). */
#include "kernels/cpu/common.h"

void hone_cpu_rope(float *x, const int32_t *pos, int64_t n, int64_t n_heads, int64_t head_dim,
                   int64_t n_rot, float freq_base, int32_t neox, int ith, int nth)
{
    hone_cpu_rope_share(x, pos, NULL, n, n_heads, head_dim, n_rot, freq_base, neox, ith, nth);
}
