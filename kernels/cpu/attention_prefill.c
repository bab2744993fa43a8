/* attention_prefill: causal attention for a chunk of n queries over the paged KV cache, GQA.
 * Contract: engine/slots.h. Ideas: each (token, head) row is hone_cpu_attend_row with its own
 * causal length, so a prefilled row equals the decoded one bit for bit. */
#include "kernels/cpu/common.h"

void hone_cpu_attention_prefill(float *out, const float *q, const float *k_cache,
                                const float *v_cache, const int32_t *block_table, int64_t n,
                                int64_t pos0, int64_t block_size, int64_t n_heads,
                                int64_t n_kv_heads, int64_t head_dim, float scale, float *scratch,
                                int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(n * n_heads, ith, nth, &r0, &r1);
    int64_t group = n_heads / n_kv_heads;
    for (int64_t r = r0; r < r1; r++) {
        int64_t t = r / n_heads, h = r % n_heads;
        hone_cpu_attend_row(out + r * head_dim, q + r * head_dim, k_cache, v_cache, block_table,
                            pos0 + t + 1, block_size, n_kv_heads, h / group, head_dim, scale,
                            scratch);
    }
}
