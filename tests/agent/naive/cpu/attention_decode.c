/* attention_decode (naive incumbent): one head at a time in scalar C, emulating the shipped
 * order: each score accumulates dimension d into lane d % 16 with one fmaf in increasing d, the
 * 16 lanes summed as the fixed tree (l + 8, + 4, + 2, + 1); the maximum, expf per key, the
 * double normaliser in key order; V accumulated per dimension in key order with one fmaf each;
 * then the f32 reciprocal; rows of more than HONE_ATT_SEG keys a segment at a time, each
 * segment's partial left in the scratch for the caller's fold (engine/kv_layout.h). Bitwise
 * the shipped kernel. */
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
    /* the scratch is shared by the shares: the scores stay on the stack; past one segment each
     * (head, segment) partial goes there, for the caller's fold */
    int64_t nseg = (n_kv + HONE_ATT_SEG - 1) / HONE_ATT_SEG;
    int64_t h0, h1;
    hone_cpu_share(n_heads, ith, nth, &h0, &h1);
    int64_t group = n_heads / n_kv_heads;
    float sc[HONE_ATT_SEG], o[256];
    for (int64_t h = h0; h < h1; h++) {
        const float *qh = q + h * head_dim;
        float *oh = out + h * head_dim;
        int64_t kvh = h / group;
        float M = 0.0f;
        double L = 0.0;
        /* segments of HONE_ATT_SEG keys, each its own softmax, folded in order */
        for (int64_t k0 = 0; k0 == 0 || k0 < n_kv; k0 += HONE_ATT_SEG) {
            int64_t n = n_kv - k0 < HONE_ATT_SEG ? n_kv - k0 : HONE_ATT_SEG;
            float mx = -INFINITY;
            for (int64_t j = 0; j < n; j++) {
                int64_t jj = k0 + j;
                int64_t at = ((int64_t)block_table[jj / block_size] * n_kv_heads + kvh) * block_size + jj % block_size;
                const float *k = k_cache + at * head_dim;
                float acc[16] = {0};
                for (int64_t d = 0; d < head_dim; d++) acc[d % 16] = fmaf(k[d], qh[d], acc[d % 16]);
                sc[j] = lanes_sum(acc) * scale;
                if (sc[j] > mx) mx = sc[j];
            }
            double sum = 0.0;
            for (int64_t j = 0; j < n; j++) {
                sc[j] = expf(sc[j] - mx);
                sum += sc[j];
            }
            for (int64_t d = 0; d < head_dim; d++) {
                float acc = 0.0f;
                for (int64_t j = 0; j < n; j++) {
                    int64_t jj = k0 + j;
                    int64_t at = ((int64_t)block_table[jj / block_size] * n_kv_heads + kvh) * block_size + jj % block_size;
                    acc = fmaf(sc[j], v_cache[at * head_dim + d], acc);
                }
                o[d] = acc;
            }
            if (nseg > 1) {
                float *rec = hone_cpu_att_part(scratch, h, k0 / HONE_ATT_SEG, nseg, head_dim);
                for (int64_t d = 0; d < head_dim; d++) rec[d] = o[d];
                hone_cpu_att_put_ml(rec, head_dim, (hone_cpu_att_ml){mx, sum});
                continue;
            }
            if (k0 == 0) {
                for (int64_t d = 0; d < head_dim; d++) oh[d] = o[d];
                M = mx, L = sum;
                continue;
            }
            float M2 = M;
            if (mx > M2) M2 = mx;
            float a = expf(M - M2), b = expf(mx - M2);
            double la = L * (double)a, lb = sum * (double)b;
            L = la + lb;
            M = M2;
            for (int64_t d = 0; d < head_dim; d++) {
                float t = oh[d] * a;
                oh[d] = fmaf(o[d], b, t);
            }
        }
        if (nseg > 1) continue;
        float inv = (float)(1.0 / L);
        for (int64_t d = 0; d < head_dim; d++) oh[d] *= inv;
    }
}
