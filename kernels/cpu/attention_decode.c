/* attention_decode: one query per head over the paged KV cache, GQA. Contract: engine/slots.h.
 * Ideas: scores, softmax and V accumulation per head in one pass over the keys each
 * (hone_cpu_attend_row, shared with attention_prefill so both give the same bits). */
#include "kernels/cpu/common.h"

void hone_cpu_attention_decode(float *out, const float *q, const float *k_cache,
                               const float *v_cache, const int32_t *block_table, int64_t n_kv,
                               int64_t block_size, int64_t n_heads, int64_t n_kv_heads,
                               int64_t head_dim, float scale, float *scratch, int ith, int nth)
{
    int64_t h0, h1;
    hone_cpu_share(n_heads, ith, nth, &h0, &h1);
    int64_t group = n_heads / n_kv_heads;
    for (int64_t h = h0; h < h1; h++)
        hone_cpu_attend_row(out + h * head_dim, q + h * head_dim, k_cache, v_cache, block_table,
                            n_kv, block_size, n_kv_heads, h / group, head_dim, scale, scratch);
}
