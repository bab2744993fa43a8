/* Red team: attention_decode of revision 2's kind at every length: each share writes its heads'
 * whole rows (one softmax over all the keys) into out and leaves the scratch alone. Past 512 keys
 * the contract has the shares leave (head, segment) partials in the scratch for the caller's
 * fold, which then overwrites out from whatever the scratch held: the guard poisons the scratch
 * before each call, so the fold gives back the poison. Expected: wrote-nothing on the first case
 * past 512 keys (and never a pass on an earlier call's partials). */
#include "kernels/cpu/common.h"
void hone_cpu_attention_decode(float *out, const float *q, const float *k_cache, const float *v_cache,
                               const int32_t *block_table, int64_t n_kv, int64_t block_size, int64_t n_heads,
                               int64_t n_kv_heads, int64_t head_dim, float scale, float *scratch, int ith, int nth)
{
    (void)scratch;
    int64_t h0, h1, group = n_heads / n_kv_heads;
    hone_cpu_share(n_heads, ith, nth, &h0, &h1);
    for (int64_t h = h0; h < h1; h++) {
        const float *qh = q + h * head_dim;
        float *oh = out + h * head_dim, mx = -INFINITY;
        double sum = 0.0;
        for (int64_t d = 0; d < head_dim; d++) oh[d] = 0.0f;
        for (int pass = 0; pass < 2; pass++)
            for (int64_t j = 0; j < n_kv; j++) {
                const float *k = k_cache + hone_kv_offset(block_table, j, block_size, n_kv_heads, h / group, head_dim);
                const float *v = v_cache + hone_kv_offset(block_table, j, block_size, n_kv_heads, h / group, head_dim);
                float acc[16] = {0};
                for (int64_t d = 0; d < head_dim; d++) acc[d % 16] = fmaf(k[d], qh[d], acc[d % 16]);
                float s = hone_cpu_lanes_sum(acc) * scale;
                if (pass == 0) {
                    if (s > mx) mx = s;
                    continue;
                }
                float p = hone_cpu_expf(s - mx);
                sum += p;
                for (int64_t d = 0; d < head_dim; d++) oh[d] = fmaf(p, v[d], oh[d]);
            }
        float inv = (float)(1.0 / sum);
        for (int64_t d = 0; d < head_dim; d++) oh[d] *= inv;
    }
}
