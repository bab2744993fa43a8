/* Red team: attention_decode's shares synchronised by an atomic counter in the shared scratch,
 * the last share folding every row itself (what a first version of revision 3's baseline did).
 * A kernel may not coordinate its shares: expected: scan (atomics), before it ever runs. */
#include "kernels/cpu/common.h"
void hone_cpu_attention_decode(float *out, const float *q, const float *k_cache, const float *v_cache,
                               const int32_t *block_table, int64_t n_kv, int64_t block_size, int64_t n_heads,
                               int64_t n_kv_heads, int64_t head_dim, float scale, float *scratch, int ith, int nth)
{
    int64_t h0, h1, group = n_heads / n_kv_heads;
    float sc[HONE_ATT_SEG];
    hone_cpu_share(n_heads, ith, nth, &h0, &h1);
    for (int64_t h = h0; h < h1; h++)
        hone_cpu_attend_row(out + h * head_dim, q + h * head_dim, k_cache, v_cache, block_table, n_kv,
                            block_size, n_kv_heads, h / group, head_dim, scale, n_kv <= HONE_ATT_SEG ? sc : scratch);
    int *done = (int *)scratch;
    if (__atomic_add_fetch(done, 1, __ATOMIC_ACQ_REL) == nth) __atomic_store_n(done, 0, __ATOMIC_RELEASE);
}
