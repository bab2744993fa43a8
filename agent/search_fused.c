/* The fused slots' search templates (search_fused.h): one template per fused kind, rendered per
 * weight dtype. The kernels keep the baselines' structure (kernels/cpu/common.h: the 16-lane
 * zmm order of hone_cpu_matvec_simd, hone_cpu_zmm_finish, hone_cpu_rmsnorm_row,
 * hone_cpu_silu_mul) and change only how many weight rows stream at once and how far ahead
 * they are prefetched. */
#include "search_fused.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"

enum { P_ROWS, P_PREFETCH };

static int fused_supports(hone_slot_id slot) { return hone_slots_is_fused(slot); }

/* The baseline composition: one row at a time (matvec_<dt>'s own loop), no prefetch. */
static hone_search_point fused_incumbent(hone_slot_id slot)
{
    (void)slot;
    hone_search_point p = {{1, 0}};
    return p;
}

static int fused_space(hone_slot_id slot, hone_search_point *pts, int cap)
{
    if (!fused_supports(slot)) return 0;
    /* most promising first, as for matvec (measured on a 2-core AMD EPYC: far prefetch keeps
     * more DRAM requests in flight than the hardware prefetcher), then the rest */
    static const int first[][2] = {{2, 8192}, {4, 8192}, {1, 8192}, {8, 8192}};
    static const int rows[] = {2, 4, 8, 1}, pf[] = {2048, 0};
    hone_search_point inc = fused_incumbent(slot);
    int n = 0;
    for (size_t i = 0; i < sizeof first / sizeof first[0] && n < cap; i++)
        pts[n++] = (hone_search_point){{first[i][0], first[i][1]}};
    for (size_t j = 0; j < sizeof pf / sizeof pf[0]; j++)
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            hone_search_point p = {{rows[i], pf[j]}};
            if (p.v[P_ROWS] == inc.v[P_ROWS] && p.v[P_PREFETCH] == inc.v[P_PREFETCH]) continue;
            if (n < cap) pts[n++] = p;
        }
    if (n < cap) pts[n++] = inc;
    return n;
}

/* The prelude: %1$s dtype, %2$d rows, %3$d prefetch, %4$s DTYPE, %5$d GROUP (rows in one
 * dot_group), %6$s the slot's name. The bodies: %1$s dtype, %2$s DTYPE. */
static const char prelude[] =
    "/* %6$s (decode). Contract: engine/slots.h. Search proposer point: %2$d rows in flight\n"
    " * across the fused matrices, software prefetch %3$d bytes ahead. Each row keeps\n"
    " * matvec_%1$s's fixed 16-lane order of kernels/cpu/common.h (exact tier). */\n"
    "#include \"kernels/cpu/common.h\"\n"
    "\n"
    "#define ROWS %2$d\n"
    "#define PREFETCH %3$d\n"
    "#define GROUP %5$d\n"
    "\n"
    "#ifdef HONE_CPU_SIMD\n"
    "/* GROUP weight rows row[i] against x into y[i], every block of the rows in flight. */\n"
    "static inline __attribute__((always_inline)) void dot_group(float *y, const uint8_t *const *row,\n"
    "                                                            const float *x, int64_t cols)\n"
    "{\n"
    "    int64_t nb = cols / 32, full = nb * 32, bb = nb ? hone_dtype_row_bytes(HONE_DTYPE_%4$s, cols) / nb : 0;\n"
    "    __m512 acc[GROUP];\n"
    "    for (int i = 0; i < GROUP; i++) acc[i] = _mm512_setzero_ps();\n"
    "    for (int64_t b = 0; b < nb; b++) {\n"
    "        __m512 xlo = _mm512_loadu_ps(x + b * 32), xhi = _mm512_loadu_ps(x + b * 32 + 16);\n"
    "        for (int i = 0; i < GROUP; i++) {\n"
    "            __m512 lo, hi;\n"
    "            if (PREFETCH) _mm_prefetch((const char *)row[i] + b * bb + PREFETCH, _MM_HINT_T0);\n"
    "            hone_cpu_deqv_%1$s(row[i], b, &lo, &hi);\n"
    "            acc[i] = _mm512_fmadd_ps(lo, xlo, acc[i]);\n"
    "            acc[i] = _mm512_fmadd_ps(hi, xhi, acc[i]);\n"
    "        }\n"
    "    }\n"
    "    for (int i = 0; i < GROUP; i++) y[i] = hone_cpu_zmm_finish(acc[i], row[i], x, full, cols, hone_cpu_deqr_%1$s);\n"
    "}\n"
    "\n"
    "/* One row, as matvec_%1$s computes it. */\n"
    "static inline float dot_one(const uint8_t *rw, const float *x, int64_t cols)\n"
    "{\n"
    "    int64_t nb = cols / 32, full = nb * 32;\n"
    "    __m512 acc = _mm512_setzero_ps();\n"
    "    for (int64_t b = 0; b < nb; b++) {\n"
    "        __m512 lo, hi;\n"
    "        hone_cpu_deqv_%1$s(rw, b, &lo, &hi);\n"
    "        acc = _mm512_fmadd_ps(lo, _mm512_loadu_ps(x + b * 32), acc);\n"
    "        acc = _mm512_fmadd_ps(hi, _mm512_loadu_ps(x + b * 32 + 16), acc);\n"
    "    }\n"
    "    return hone_cpu_zmm_finish(acc, rw, x, full, cols, hone_cpu_deqr_%1$s);\n"
    "}\n"
    "#endif\n"
    "\n";

static const char qkv_body[] =
    "/* Row r of the concatenation [Wq; Wk; Wv]. */\n"
    "static inline const uint8_t *qkv_row(int64_t r, const void *Wq, const void *Wk, const void *Wv,\n"
    "                                     int64_t rq, int64_t rk, int64_t rb)\n"
    "{\n"
    "    if (r < rq) return (const uint8_t *)Wq + r * rb;\n"
    "    if (r < rq + rk) return (const uint8_t *)Wk + (r - rq) * rb;\n"
    "    return (const uint8_t *)Wv + (r - rq - rk) * rb;\n"
    "}\n"
    "\n"
    "void hone_cpu_qkv_%1$s(float *y, const void *Wq, const void *Wk, const void *Wv, const float *x,\n"
    "                      int64_t rq, int64_t rk, int64_t rv, int64_t cols, int ith, int nth)\n"
    "{\n"
    "#ifdef HONE_CPU_SIMD\n"
    "    int64_t rb = hone_dtype_row_bytes(HONE_DTYPE_%2$s, cols), r0, r1;\n"
    "    hone_cpu_share(rq + rk + rv, ith, nth, &r0, &r1);\n"
    "    int64_t r = r0;\n"
    "    for (; r + GROUP <= r1; r += GROUP) {\n"
    "        const uint8_t *row[GROUP];\n"
    "        for (int i = 0; i < GROUP; i++) row[i] = qkv_row(r + i, Wq, Wk, Wv, rq, rk, rb);\n"
    "        dot_group(y + r, row, x, cols);\n"
    "    }\n"
    "    for (; r < r1; r++) y[r] = dot_one(qkv_row(r, Wq, Wk, Wv, rq, rk, rb), x, cols);\n"
    "#else\n"
    "    hone_cpu_qkv_compose(y, Wq, Wk, Wv, x, rq, rk, rv, cols, hone_cpu_matvec_rows_%1$s, ith, nth);\n"
    "#endif\n"
    "}\n";

static const char ffn_body[] =
    "/* ROWS gate rows and the same ROWS up rows in flight (GROUP = 2 ROWS), then swiglu. */\n"
    "void hone_cpu_ffn_%1$s(float *out, const void *Wg, const void *Wu, const float *x, int64_t rows,\n"
    "                      int64_t cols, int ith, int nth)\n"
    "{\n"
    "#ifdef HONE_CPU_SIMD\n"
    "    int64_t rb = hone_dtype_row_bytes(HONE_DTYPE_%2$s, cols), r0, r1;\n"
    "    hone_cpu_share(rows, ith, nth, &r0, &r1);\n"
    "    int64_t r = r0;\n"
    "    for (; r + ROWS <= r1; r += ROWS) {\n"
    "        const uint8_t *row[GROUP];\n"
    "        float gu[GROUP];\n"
    "        for (int i = 0; i < ROWS; i++) {\n"
    "            row[i] = (const uint8_t *)Wg + (r + i) * rb;\n"
    "            row[ROWS + i] = (const uint8_t *)Wu + (r + i) * rb;\n"
    "        }\n"
    "        dot_group(gu, row, x, cols);\n"
    "        for (int i = 0; i < ROWS; i++) out[r + i] = hone_cpu_silu_mul(gu[i], gu[ROWS + i]);\n"
    "    }\n"
    "    for (; r < r1; r++)\n"
    "        out[r] = hone_cpu_silu_mul(dot_one((const uint8_t *)Wg + r * rb, x, cols),\n"
    "                                   dot_one((const uint8_t *)Wu + r * rb, x, cols));\n"
    "#else\n"
    "    hone_cpu_ffn_compose(out, Wg, Wu, x, rows, cols, hone_cpu_matvec_rows_%1$s, ith, nth);\n"
    "#endif\n"
    "}\n";

static const char rmsnorm_matvec_body[] =
    "/* The norm into this share's scratch, then ROWS rows of W at a time against it. */\n"
    "void hone_cpu_rmsnorm_matvec_%1$s(float *y, const void *W, const float *x, const float *g,\n"
    "                                 int64_t rows, int64_t cols, float eps, float *scratch, int ith,\n"
    "                                 int nth)\n"
    "{\n"
    "#ifdef HONE_CPU_SIMD\n"
    "    int64_t rb = hone_dtype_row_bytes(HONE_DTYPE_%2$s, cols), r0, r1;\n"
    "    hone_cpu_share(rows, ith, nth, &r0, &r1);\n"
    "    if (r0 == r1) return;\n"
    "    hone_cpu_rmsnorm_row(scratch, x, g, cols, eps);\n"
    "    int64_t r = r0;\n"
    "    for (; r + GROUP <= r1; r += GROUP) {\n"
    "        const uint8_t *row[GROUP];\n"
    "        for (int i = 0; i < GROUP; i++) row[i] = (const uint8_t *)W + (r + i) * rb;\n"
    "        dot_group(y + r, row, scratch, cols);\n"
    "    }\n"
    "    for (; r < r1; r++) y[r] = dot_one((const uint8_t *)W + r * rb, scratch, cols);\n"
    "#else\n"
    "    hone_cpu_rmsnorm_matvec_compose(y, W, x, g, rows, cols, eps, scratch, hone_cpu_matvec_rows_%1$s,\n"
    "                                    ith, nth);\n"
    "#endif\n"
    "}\n";

static int fused_render(hone_slot_id slot, hone_search_point p, char **out_src)
{
    *out_src = NULL;
    if (!fused_supports(slot))
        return hone_error_set(HONE_EUNSUPPORTED, "the fused search family has no template for %s",
                              hone_slots_name(slot));
    int rows = p.v[P_ROWS], prefetch = p.v[P_PREFETCH];
    if (rows < 1 || rows > 8 || prefetch < 0 || prefetch > 8192)
        return hone_error_set(HONE_EINVAL, "search point out of range (rows 1..8, prefetch 0..8192)");
    const hone_slot_desc *d = hone_slots_desc(slot);
    const char *dt = hone_dtype_name(d->dtype);
    char up[16];
    size_t i = 0;
    for (; dt[i] && i + 1 < sizeof up; i++) up[i] = (char)(dt[i] >= 'a' && dt[i] <= 'z' ? dt[i] - 32 : dt[i]);
    up[i] = 0;
    const char *body = d->kind == HONE_SLOT_KIND_QKV ? qkv_body
                     : d->kind == HONE_SLOT_KIND_FFN ? ffn_body : rmsnorm_matvec_body;
    int group = d->kind == HONE_SLOT_KIND_FFN ? 2 * rows : rows;
    int n1 = snprintf(NULL, 0, prelude, dt, rows, prefetch, up, group, d->name);
    int n2 = snprintf(NULL, 0, body, dt, up);
    char *s = malloc((size_t)n1 + (size_t)n2 + 1);
    if (!s) return hone_error_set(HONE_ENOMEM, "out of memory");
    snprintf(s, (size_t)n1 + 1, prelude, dt, rows, prefetch, up, group, d->name);
    snprintf(s + n1, (size_t)n2 + 1, body, dt, up);
    *out_src = s;
    return 0;
}

const hone_search_family hone_search_fused_family = {
    .name = "fused",
    .params = {"rows", "prefetch", NULL},
    .supports = fused_supports,
    .incumbent = fused_incumbent,
    .space = fused_space,
    .render = fused_render,
};
