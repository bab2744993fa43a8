/* rope (naive incumbent): each (token, head) row computes its own frequencies and angles
 * (pow, cos and sin per pair, again for every head of a token), the rotation as the shipped
 * kernel: bitwise it, heads times the transcendental calls. */
#include "kernels/cpu/common.h"

void hone_cpu_rope(float *x, const int32_t *pos, int64_t n, int64_t n_heads, int64_t head_dim,
                   int64_t n_rot, float freq_base, int32_t neox, int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(n * n_heads, ith, nth, &r0, &r1);
    int64_t half = n_rot / 2;
    if (half > 512) half = 512;
    for (int64_t r = r0; r < r1; r++) {
        int64_t t = r / n_heads;
        float *v = x + r * head_dim;
        for (int64_t i = 0; i < half; i++) {
            double inv_freq = pow((double)freq_base, -2.0 * (double)i / (double)n_rot);
            double theta = (double)pos[t] * inv_freq;
            float c = (float)cos(theta), s = (float)sin(theta);
            int64_t ia = neox ? i : 2 * i, ib = neox ? i + half : 2 * i + 1;
            float a = v[ia], b = v[ib];
            v[ia] = a * c - b * s;
            v[ib] = a * s + b * c;
        }
    }
}
