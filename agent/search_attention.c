/* Search family "attention": attention_decode and attention_prefill from one template of the
 * AVX-512 attention row (kernels/cpu/common.h, hone_cpu_attend_row_simd) with HEADS query
 * heads of one GQA group in flight (their scores and V sums share each K and V row read, and
 * their chains are independent), KEYS keys a step in the score loop, K and V rows prefetched
 * PREFETCH keys ahead, and VEXP (1: the softmax's exps 16 at a time from the vector expf of
 * agent/search.c, bitwise glibc's). Every (head, dim) keeps the baseline's order: each score
 * the lane-order dot product, the double normaliser summed in key order, V accumulated in key
 * order, rows of more than HONE_ATT_SEG keys in segments folded as the baseline folds them:
 * the exact tier. Rows the register path does not fit fall back to the baseline row. */
#include <stdio.h>
#include <stdlib.h>

#include "agent/search.h"
#include "engine/error.h"

static int supports(hone_slot_id s) { return s == HONE_SLOT_ATTENTION_DECODE || s == HONE_SLOT_ATTENTION_PREFILL; }

static hone_search_point incumbent(hone_slot_id slot)
{
    (void)slot;
    hone_search_point p = {{1, 4, 0, 0}};
    return p;
}

static int space(hone_slot_id slot, hone_search_point *pts, int cap)
{
    int n = 0;
    hone_search_point inc = incumbent(slot);
    static const int first[][4] = {{3, 4, 0, 1}, {2, 4, 0, 1}, {3, 4, 8, 1}, {1, 4, 0, 1}};
    for (size_t i = 0; i < sizeof first / sizeof first[0]; i++)
        hone_search_space_add(pts, &n, cap, (hone_search_point){{first[i][0], first[i][1], first[i][2], first[i][3]}}, inc);
    static const int heads[] = {3, 2, 4, 1}, keys[] = {4, 8, 2}, pf[] = {0, 8}, vexp[] = {1, 0};
    for (size_t e = 0; e < 2; e++)
        for (size_t k = 0; k < 3; k++)
            for (size_t j = 0; j < 2; j++)
                for (size_t i = 0; i < 4; i++)
                    hone_search_space_add(pts, &n, cap, (hone_search_point){{heads[i], keys[k], pf[j], vexp[e]}}, inc);
    if (n < cap) pts[n++] = inc;
    return n;
}

/* The rows of nh heads (one kv head), then the two slot entry points. */
static const char tmpl[] =
    "/* %1$s over the paged KV cache, GQA. Contract: engine/slots.h.\n"
    " * Search proposer point: %2$d heads of a group in flight, %3$d keys a step in the scores,\n"
    " * K/V rows prefetched %4$d keys ahead, vector expf %5$d. Each (head, dim) keeps the order of\n"
    " * hone_cpu_attend_row_simd (kernels/cpu/common.h): exact tier. */\n"
    "#include \"kernels/cpu/common.h\"\n"
    "\n"
    "#define HEADS %2$d\n"
    "#define KEYS %3$d\n"
    "#define PREFETCH %4$d\n"
    "#define VEXP %5$d\n"
    "\n"
    "#ifdef HONE_CPU_SIMD\n"
    "%6$s"
    "\n"
    "#define KV_PTR(cache, j) ((cache) + hone_kv_offset(block_table, k0 + (j), block_size, n_kv_heads, kvh, head_dim))\n"
    "\n"
    "/* One segment (keys k0 .. k0 + n_kv - 1) of nh <= HEADS rows: out[h] (unnormalised) and q[h],\n"
    " * rows head_dim apart; ml[h] the segment's (max, normaliser); scores[h]: n_kv floats each. */\n"
    "static inline __attribute__((always_inline)) void\n"
    "attend_heads(int nh, float *out, const float *q, const float *k_cache, const float *v_cache,\n"
    "             const int32_t *block_table, int64_t k0, int64_t n_kv, int64_t block_size, int64_t n_kv_heads,\n"
    "             int64_t kvh, int64_t head_dim, float scale, float *const *scores, hone_cpu_att_ml *ml)\n"
    "{\n"
    "    enum { MAXV = 16 };\n"
    "    int nv = (int)(head_dim / 16);\n"
    "    __m512 qv[HEADS][MAXV];\n"
    "    for (int h = 0; h < nh; h++)\n"
    "        for (int i = 0; i < nv; i++) qv[h][i] = _mm512_loadu_ps(q + h * head_dim + 16 * i);\n"
    "    int64_t j = 0;\n"
    "    for (; j + KEYS <= n_kv; j += KEYS) {\n"
    "        const float *k[KEYS];\n"
    "        for (int u = 0; u < KEYS; u++) k[u] = KV_PTR(k_cache, j + u);\n"
    "        if (PREFETCH && j + PREFETCH + KEYS <= n_kv)\n"
    "            for (int u = 0; u < KEYS; u++) {\n"
    "                const float *p = KV_PTR(k_cache, j + PREFETCH + u);\n"
    "                for (int i = 0; i < nv; i++) _mm_prefetch((const char *)(p + 16 * i), _MM_HINT_T0);\n"
    "            }\n"
    "        __m512 a[HEADS][KEYS];\n"
    "        for (int h = 0; h < HEADS; h++)\n"
    "            for (int u = 0; u < KEYS; u++) a[h][u] = _mm512_setzero_ps();\n"
    "        for (int i = 0; i < nv; i++)\n"
    "            for (int u = 0; u < KEYS; u++) {\n"
    "                __m512 kk = _mm512_loadu_ps(k[u] + 16 * i);\n"
    "                for (int h = 0; h < nh; h++) a[h][u] = _mm512_fmadd_ps(kk, qv[h][i], a[h][u]);\n"
    "            }\n"
    "        for (int h = 0; h < nh; h++)\n"
    "            for (int u = 0; u < KEYS; u++) scores[h][j + u] = hone_cpu_zmm_sum(a[h][u]) * scale;\n"
    "    }\n"
    "    for (; j < n_kv; j++) {\n"
    "        const float *k = KV_PTR(k_cache, j);\n"
    "        for (int h = 0; h < nh; h++) {\n"
    "            __m512 a = _mm512_setzero_ps();\n"
    "            for (int i = 0; i < nv; i++) a = _mm512_fmadd_ps(_mm512_loadu_ps(k + 16 * i), qv[h][i], a);\n"
    "            scores[h][j] = hone_cpu_zmm_sum(a) * scale;\n"
    "        }\n"
    "    }\n"
    "    double sum[HEADS];\n"
    "    float mxs[HEADS];\n"
    "    for (int h = 0; h < nh; h++) {\n"
    "        float *sc = scores[h];\n"
    "        float mx = -INFINITY;\n"
    "        for (j = 0; j < n_kv; j++)\n"
    "            if (sc[j] > mx) mx = sc[j];\n"
    "        j = 0;\n"
    "        if (VEXP) {\n"
    "            __m512 m = _mm512_set1_ps(mx);\n"
    "            for (; j + 16 <= n_kv; j += 16) {\n"
    "                float d[16];\n"
    "                _mm512_storeu_ps(d, _mm512_sub_ps(_mm512_loadu_ps(sc + j), m));\n"
    "                hone_search_expf16(sc + j, d);\n"
    "            }\n"
    "        }\n"
    "        for (; j < n_kv; j++) sc[j] = expf(sc[j] - mx);\n"
    "        double s = 0.0;\n"
    "        for (j = 0; j < n_kv; j++) s += sc[j];\n"
    "        sum[h] = s;\n"
    "        mxs[h] = mx;\n"
    "    }\n"
    "    __m512 o[HEADS][MAXV];\n"
    "    for (int h = 0; h < nh; h++)\n"
    "        for (int i = 0; i < nv; i++) o[h][i] = _mm512_setzero_ps();\n"
    "    for (j = 0; j < n_kv; j++) {\n"
    "        const float *v = KV_PTR(v_cache, j);\n"
    "        if (PREFETCH && j + PREFETCH < n_kv) {\n"
    "            const float *p = KV_PTR(v_cache, j + PREFETCH);\n"
    "            for (int i = 0; i < nv; i++) _mm_prefetch((const char *)(p + 16 * i), _MM_HINT_T0);\n"
    "        }\n"
    "        for (int i = 0; i < nv; i++) {\n"
    "            __m512 vv = _mm512_loadu_ps(v + 16 * i);\n"
    "            for (int h = 0; h < nh; h++) o[h][i] = _mm512_fmadd_ps(_mm512_set1_ps(scores[h][j]), vv, o[h][i]);\n"
    "        }\n"
    "    }\n"
    "    for (int h = 0; h < nh; h++) {\n"
    "        for (int i = 0; i < nv; i++) _mm512_storeu_ps(out + h * head_dim + 16 * i, o[h][i]);\n"
    "        ml[h] = (hone_cpu_att_ml){mxs[h], sum[h]};\n"
    "    }\n"
    "}\n"
    "#undef KV_PTR\n"
    "\n"
    "/* Rows r .. r1 - 1 of (token, head) order with n_kv(t) keys: consecutive heads of one group\n"
    " * and one token go together, up to HEADS, a segment of HONE_ATT_SEG keys at a time, the\n"
    " * segments folded in order (hone_cpu_att_take); with part (decode past one segment), each\n"
    " * segment's partial goes into the scratch instead, for the caller's fold. Scores stay on the\n"
    " * stack (the decode slot's scratch is shared by its shares). */\n"
    "static inline __attribute__((always_inline)) void\n"
    "attend_rows(float *out, const float *q, const float *k_cache, const float *v_cache,\n"
    "            const int32_t *block_table, int64_t r, int64_t r1, int64_t n_heads, int64_t pos0,\n"
    "            int prefill, int64_t block_size, int64_t n_kv_heads, int64_t head_dim, float scale,\n"
    "            float *part)\n"
    "{\n"
    "    int64_t group = n_heads / n_kv_heads;\n"
    "    float sbuf[HEADS][HONE_ATT_SEG], tmp[HEADS * 256];\n"
    "    while (r < r1) {\n"
    "        int64_t t = r / n_heads, h = r %% n_heads, kvh = h / group;\n"
    "        int64_t n_kv = prefill ? pos0 + t + 1 : pos0;\n"
    "        int nh = 1;\n"
    "        while (nh < HEADS && r + nh < r1 && (h + nh) %% n_heads != 0 && (h + nh) / group == kvh) nh++;\n"
    "        float *sc[HEADS];\n"
    "        for (int k = 0; k < nh; k++) sc[k] = sbuf[k];\n"
    "        hone_cpu_att_ml acc[HEADS] = {{0.0f, 0.0}}, ml[HEADS];\n"
    "        int64_t nseg = (n_kv + HONE_ATT_SEG - 1) / HONE_ATT_SEG;\n"
    "        for (int64_t j = 0; j == 0 || j < nseg; j++) {\n"
    "            float *dst = j == 0 && !part ? out + r * head_dim : tmp;\n"
    "            attend_heads(nh, dst, q + r * head_dim, k_cache, v_cache, block_table, j * HONE_ATT_SEG,\n"
    "                         hone_cpu_att_seg_len(n_kv, j), block_size, n_kv_heads, kvh, head_dim, scale, sc, ml);\n"
    "            for (int k = 0; k < nh; k++) {\n"
    "                if (part) { /* the partial of (head h + k, segment j) */\n"
    "                    float *rec = hone_cpu_att_part(part, h + k, j, nseg, head_dim);\n"
    "                    memcpy(rec, dst + k * head_dim, (size_t)head_dim * sizeof(float));\n"
    "                    hone_cpu_att_put_ml(rec, head_dim, ml[k]);\n"
    "                } else {\n"
    "                    hone_cpu_att_take(out + (r + k) * head_dim, &acc[k], dst + k * head_dim, ml[k], j, head_dim);\n"
    "                }\n"
    "            }\n"
    "        }\n"
    "        if (part) {\n"
    "            r += nh;\n"
    "            continue;\n"
    "        }\n"
    "        for (int k = 0; k < nh; k++) hone_cpu_att_normalise(out + (r + k) * head_dim, acc[k].l, head_dim);\n"
    "        r += nh;\n"
    "    }\n"
    "}\n"
    "#endif\n"
    "\n"
    "%7$s";

static const char decode_entry[] =
    "void hone_cpu_attention_decode(float *out, const float *q, const float *k_cache,\n"
    "                               const float *v_cache, const int32_t *block_table, int64_t n_kv,\n"
    "                               int64_t block_size, int64_t n_heads, int64_t n_kv_heads,\n"
    "                               int64_t head_dim, float scale, float *scratch, int ith, int nth)\n"
    "{\n"
    "    int64_t h0, h1;\n"
    "    hone_cpu_share(n_heads, ith, nth, &h0, &h1);\n"
    "#ifdef HONE_CPU_SIMD\n"
    "    if (head_dim % 32 == 0 && head_dim <= 256) {\n"
    "        attend_rows(out, q, k_cache, v_cache, block_table, h0, h1, n_heads, n_kv, 0, block_size,\n"
    "                    n_kv_heads, head_dim, scale, n_kv > HONE_ATT_SEG ? scratch : NULL);\n"
    "        return;\n"
    "    }\n"
    "#endif\n"
    "    int64_t group = n_heads / n_kv_heads, nseg = (n_kv + HONE_ATT_SEG - 1) / HONE_ATT_SEG;\n"
    "    float sc[HONE_ATT_SEG];\n"
    "    for (int64_t h = h0; h < h1; h++) {\n"
    "        if (nseg <= 1) {\n"
    "            hone_cpu_attend_row(out + h * head_dim, q + h * head_dim, k_cache, v_cache, block_table,\n"
    "                                n_kv, block_size, n_kv_heads, h / group, head_dim, scale, sc);\n"
    "            continue;\n"
    "        }\n"
    "        for (int64_t j = 0; j < nseg; j++) { /* the partials, for the caller's fold */\n"
    "            float *rec = hone_cpu_att_part(scratch, h, j, nseg, head_dim);\n"
    "            hone_cpu_att_put_ml(rec, head_dim, hone_cpu_attend_seg_generic(rec, q + h * head_dim, k_cache, v_cache,\n"
    "                block_table, j * HONE_ATT_SEG, hone_cpu_att_seg_len(n_kv, j), block_size, n_kv_heads, h / group,\n"
    "                head_dim, scale, sc));\n"
    "        }\n"
    "    }\n"
    "}\n";

static const char prefill_entry[] =
    "void hone_cpu_attention_prefill(float *out, const float *q, const float *k_cache,\n"
    "                                const float *v_cache, const int32_t *block_table, int64_t n,\n"
    "                                int64_t pos0, int64_t block_size, int64_t n_heads,\n"
    "                                int64_t n_kv_heads, int64_t head_dim, float scale, float *scratch,\n"
    "                                int ith, int nth)\n"
    "{\n"
    "    int64_t r0, r1;\n"
    "    hone_cpu_share(n * n_heads, ith, nth, &r0, &r1);\n"
    "#ifdef HONE_CPU_SIMD\n"
    "    if (head_dim % 32 == 0 && head_dim <= 256) {\n"
    "        attend_rows(out, q, k_cache, v_cache, block_table, r0, r1, n_heads, pos0, 1, block_size,\n"
    "                    n_kv_heads, head_dim, scale, NULL);\n"
    "        return;\n"
    "    }\n"
    "#endif\n"
    "    int64_t group = n_heads / n_kv_heads;\n"
    "    for (int64_t r = r0; r < r1; r++) {\n"
    "        int64_t t = r / n_heads, h = r % n_heads;\n"
    "        hone_cpu_attend_row(out + r * head_dim, q + r * head_dim, k_cache, v_cache, block_table,\n"
    "                            pos0 + t + 1, block_size, n_kv_heads, h / group, head_dim, scale,\n"
    "                            scratch);\n"
    "    }\n"
    "}\n";

static int render(hone_slot_id slot, hone_search_point p, char **out_src)
{
    *out_src = NULL;
    static const int lo[] = {1, 1, 0, 0}, hi[] = {4, 8, 32, 1};
    int rc = hone_search_check_range(p, lo, hi, 4);
    if (rc) return rc;
    char *ex = hone_search_expf_text();
    if (!ex) return HONE_ENOMEM;
    int dec = slot == HONE_SLOT_ATTENTION_DECODE;
    *out_src = hone_search_format(tmpl, hone_slots_name(slot), p.v[0], p.v[1], p.v[2], p.v[3], ex,
                                  dec ? decode_entry : prefill_entry);
    free(ex);
    return *out_src ? 0 : HONE_ENOMEM;
}

const hone_search_family hone_search_family_attention = {
    .name = "attention",
    .params = {"heads", "keys", "prefetch", "vexp", NULL},
    .supports = supports,
    .incumbent = incumbent,
    .space = space,
    .render = render,
};
