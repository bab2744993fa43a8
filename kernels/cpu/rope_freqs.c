/* rope_freqs: rotary position embedding in place with per-pair frequency factors (llama3's
 * rope_freqs.weight), normal and NeoX layouts. Contract: engine/slots.h.
 * Ideas: rope's (hone_cpu_rope_share): the inverse frequencies base^(-2i/n_rot) / freqs[i] once
 * per call in double, angles and their cos/sin in double rounded to f32 once per (token, pair),
 * reused across the heads of a token. */
#include "kernels/cpu/common.h"

void hone_cpu_rope_freqs(float *x, const int32_t *pos, const float *freqs, int64_t n,
                         int64_t n_heads, int64_t head_dim, int64_t n_rot, float freq_base,
                         int32_t neox, int ith, int nth)
{
    hone_cpu_rope_share(x, pos, freqs, n, n_heads, head_dim, n_rot, freq_base, neox, ith, nth);
}
