/* rope: rotary position embedding in place, normal and NeoX layouts. Contract: engine/slots.h.
 * Ideas: the frequencies once per call, angles and their cos/sin in double, rounded to f32 once
 * per (token, pair) and reused across the heads of a token. */
#include "kernels/cpu/common.h"

#define ROPE_MAX_PAIRS 512

void hone_cpu_rope(float *x, const int32_t *pos, int64_t n, int64_t n_heads, int64_t head_dim,
                   int64_t n_rot, float freq_base, int32_t neox, int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(n * n_heads, ith, nth, &r0, &r1);
    int64_t half = n_rot / 2;
    float cs[ROPE_MAX_PAIRS], sn[ROPE_MAX_PAIRS];
    double inv_freq[ROPE_MAX_PAIRS];
    int64_t cached_t = -1;
    if (half > ROPE_MAX_PAIRS) half = ROPE_MAX_PAIRS; /* the engine refuses such models */
    if (r0 < r1)
        for (int64_t i = 0; i < half; i++)
            inv_freq[i] = pow((double)freq_base, -2.0 * (double)i / (double)n_rot);
    for (int64_t r = r0; r < r1; r++) {
        int64_t t = r / n_heads;
        if (t != cached_t) {
            for (int64_t i = 0; i < half; i++) {
                double theta = (double)pos[t] * inv_freq[i];
                cs[i] = (float)cos(theta);
                sn[i] = (float)sin(theta);
            }
            cached_t = t;
        }
        float *v = x + r * head_dim;
        for (int64_t i = 0; i < half; i++) {
            int64_t ia = neox ? i : 2 * i, ib = neox ? i + half : 2 * i + 1;
            float a = v[ia], b = v[ib];
            v[ia] = a * cs[i] - b * sn[i];
            v[ib] = a * sn[i] + b * cs[i];
        }
    }
}
