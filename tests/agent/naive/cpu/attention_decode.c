/* attention_decode (naive incumbent): one head at a time in scalar C, emulating the shipped
 * order: each score accumulates dimension d into lane d % 16 with one fmaf in increasing d, the
 * 16 lanes summed as the fixed tree (l + 8, + 4, + 2, + 1); the maximum, expf per key, the
 * double normaliser in key order; V accumulated per dimension in key order with one fmaf each;
 * then the f32 reciprocal. Bitwise the shipped kernel. */
#pragma GCC optimize("no-tree-vectorize")
#include "kernels/cpu/common.h"

static float lanes_sum(const float *acc)
{
    float s8[8], s4[4];
    for (int l = 0; l < 8; l++) s8[l] = acc[l] + acc[l + 8];
    for (int l = 0; l < 4; l++) s4[l] = s8[l] + s8[l + 4];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

void hone_cpu_attention_decode(float *out, const float *q, const float *k_cache,
                               const float *v_cache, const int32_t *block_table, int64_t n_kv,
                               int64_t block_size, int64_t n_heads, int64_t n_kv_heads,
                               int64_t head_dim, float scale, float *scratch, int ith, int nth)
{
    int64_t h0, h1;
    hone_cpu_share(n_heads, ith, nth, &h0, &h1);
    int64_t group = n_heads / n_kv_heads;
    for (int64_t h = h0; h < h1; h++) {
        const float *qh = q + h * head_dim;
        float *oh = out + h * head_dim;
        int64_t kvh = h / group;
        float mx = -INFINITY;
        for (int64_t j = 0; j < n_kv; j++) {
            int64_t at = ((int64_t)block_table[j / block_size] * n_kv_heads + kvh) * block_size + j % block_size;
            const float *k = k_cache + at * head_dim;
            float acc[16] = {0};
            for (int64_t d = 0; d < head_dim; d++) acc[d % 16] = fmaf(k[d], qh[d], acc[d % 16]);
            scratch[j] = lanes_sum(acc) * scale;
            if (scratch[j] > mx) mx = scratch[j];
        }
        double sum = 0.0;
        for (int64_t j = 0; j < n_kv; j++) {
            scratch[j] = expf(scratch[j] - mx);
            sum += scratch[j];
        }
        for (int64_t d = 0; d < head_dim; d++) {
            float o = 0.0f;
            for (int64_t j = 0; j < n_kv; j++) {
                int64_t at = ((int64_t)block_table[j / block_size] * n_kv_heads + kvh) * block_size + j % block_size;
                o = fmaf(scratch[j], v_cache[at * head_dim + d], o);
            }
            oh[d] = o;
        }
        float inv = (float)(1.0 / sum);
        for (int64_t d = 0; d < head_dim; d++) oh[d] *= inv;
    }
}
