/* Search proposer: one template per kind (matvec, matmul), instantiated per dtype. */
#include "search.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"

static int is_matvec(hone_slot_id s) { return s >= HONE_SLOT_MATVEC_F32 && s <= HONE_SLOT_MATVEC_Q4_1; }
static int is_matmul(hone_slot_id s) { return s >= HONE_SLOT_MATMUL_F32 && s <= HONE_SLOT_MATMUL_Q4_1; }

int hone_search_supports(hone_slot_id slot) { return is_matvec(slot) || is_matmul(slot); }

hone_search_point hone_search_incumbent(hone_slot_id slot)
{
    /* matvec: one row at a time, no prefetch; matmul: tiles of 8 tokens (4 for rows over
     * 768 floats), rows that stream from memory prefetched 8 KiB ahead */
    hone_search_point p = {1, is_matmul(slot) ? 8192 : 0, 8};
    return p;
}

int hone_search_space(hone_slot_id slot, hone_search_point *pts, int cap)
{
    int n = 0;
    hone_search_point inc = hone_search_incumbent(slot);
    if (is_matvec(slot)) {
        /* most promising first (measured on a 2-core AMD EPYC): far prefetch keeps more DRAM
         * requests in flight per core than the hardware prefetcher does */
        static const hone_search_point first[] = {{2, 8192, 0}, {4, 8192, 0}, {1, 8192, 0}, {8, 8192, 0}};
        for (size_t i = 0; i < sizeof first / sizeof first[0]; i++) {
            hone_search_point p = {first[i].rows, first[i].prefetch, inc.tile};
            if (n < cap && !(p.rows == inc.rows && p.prefetch == inc.prefetch)) pts[n++] = p;
        }
        static const int pf[] = {8192, 4096, 2048, 1024, 0};
        static const int rows[] = {4, 8, 2, 1};
        for (size_t j = 0; j < 5; j++)
            for (size_t i = 0; i < 4; i++) {
                hone_search_point p = {rows[i], pf[j], inc.tile};
                int seen = p.rows == inc.rows && p.prefetch == inc.prefetch;
                for (int k = 0; k < n; k++) seen |= pts[k].rows == p.rows && pts[k].prefetch == p.prefetch;
                if (!seen && n < cap) pts[n++] = p;
            }
    } else if (is_matmul(slot)) {
        static const int tile[] = {12, 16, 4, 8};
        static const int pf[] = {8192, 4096, 0};
        for (size_t j = 0; j < 3; j++)
            for (size_t i = 0; i < 4; i++) {
                hone_search_point p = {inc.rows, pf[j], tile[i]};
                if (p.tile == inc.tile && p.prefetch == inc.prefetch) continue;
                if (n < cap) pts[n++] = p;
            }
    } else {
        return 0;
    }
    if (n < cap) pts[n++] = inc;
    return n;
}

void hone_search_describe(hone_slot_id slot, hone_search_point p, char *buf, int cap)
{
    if (is_matmul(slot)) snprintf(buf, (size_t)cap, "tile=%d prefetch=%d", p.tile, p.prefetch);
    else snprintf(buf, (size_t)cap, "rows=%d prefetch=%d", p.rows, p.prefetch);
}

static const char *dt_of(hone_slot_id slot)
{
    const char *name = hone_slots_name(slot);
    return strchr(name, '_') + 1; /* "matvec_q4_1" -> "q4_1" */
}

static const char *deq_body(const char *dt)
{
    if (!strcmp(dt, "f32")) return "memcpy(out, (const float *)row + c0, (size_t)n * sizeof(float));";
    if (!strcmp(dt, "f16")) return "hone_cpu_deq_f16((const uint16_t *)row + c0, out, n);";
    if (!strcmp(dt, "bf16")) return "hone_cpu_deq_bf16((const uint16_t *)row + c0, out, n);";
    if (!strcmp(dt, "q8_0")) return "(void)n;\n    hone_cpu_deq_q8_0((const hone_block_q8_0 *)row + c0 / 32, out);";
    if (!strcmp(dt, "q4_0")) return "(void)n;\n    hone_cpu_deq_q4_0((const hone_block_q4_0 *)row + c0 / 32, out);";
    return "(void)n;\n    hone_cpu_deq_q4_1((const hone_block_q4_1 *)row + c0 / 32, out);";
}

static void upper(const char *s, char *out, size_t cap)
{
    size_t i = 0;
    for (; s[i] && i + 1 < cap; i++) out[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 32 : s[i]);
    out[i] = 0;
}

static const char matvec_tmpl[] =
    "/* matvec_%1$s: y[rows] = W[rows][cols] x[cols] (decode). Contract: engine/slots.h.\n"
    " * Search proposer point: %2$d rows in flight, software prefetch %3$d bytes ahead.\n"
    " * Each row keeps the fixed 16-lane order of kernels/cpu/common.h (exact tier). */\n"
    "#include \"kernels/cpu/common.h\"\n"
    "\n"
    "#define ROWS %2$d\n"
    "#define PREFETCH %3$d\n"
    "\n"
    "static void deq(const void *row, int64_t c0, int n, float *out)\n"
    "{\n"
    "    %4$s\n"
    "}\n"
    "\n"
    "void hone_cpu_matvec_%1$s(float *y, const void *W, const float *x, int64_t rows, int64_t cols,\n"
    "                         int ith, int nth)\n"
    "{\n"
    "    int64_t row_bytes = hone_dtype_row_bytes(HONE_DTYPE_%5$s, cols);\n"
    "#ifdef HONE_CPU_SIMD\n"
    "    int64_t r0, r1;\n"
    "    hone_cpu_share(rows, ith, nth, &r0, &r1);\n"
    "    int64_t nb = cols / 32, full = nb * 32, bb = nb ? row_bytes / nb : 0;\n"
    "    int64_t r = r0;\n"
    "    for (; r + ROWS <= r1; r += ROWS) {\n"
    "        const uint8_t *row[ROWS];\n"
    "        __m512 acc[ROWS];\n"
    "        for (int i = 0; i < ROWS; i++) {\n"
    "            row[i] = (const uint8_t *)W + (r + i) * row_bytes;\n"
    "            acc[i] = _mm512_setzero_ps();\n"
    "        }\n"
    "        for (int64_t b = 0; b < nb; b++) {\n"
    "            __m512 xlo = _mm512_loadu_ps(x + b * 32), xhi = _mm512_loadu_ps(x + b * 32 + 16);\n"
    "            for (int i = 0; i < ROWS; i++) {\n"
    "                __m512 lo, hi;\n"
    "                if (PREFETCH) _mm_prefetch((const char *)row[i] + b * bb + PREFETCH, _MM_HINT_T0);\n"
    "                hone_cpu_deqv_%1$s(row[i], b, &lo, &hi);\n"
    "                acc[i] = _mm512_fmadd_ps(lo, xlo, acc[i]);\n"
    "                acc[i] = _mm512_fmadd_ps(hi, xhi, acc[i]);\n"
    "            }\n"
    "        }\n"
    "        for (int i = 0; i < ROWS; i++) y[r + i] = hone_cpu_zmm_finish(acc[i], row[i], x, full, cols, deq);\n"
    "    }\n"
    "    for (; r < r1; r++) {\n"
    "        const uint8_t *rw = (const uint8_t *)W + r * row_bytes;\n"
    "        __m512 acc = _mm512_setzero_ps();\n"
    "        for (int64_t b = 0; b < nb; b++) {\n"
    "            __m512 lo, hi;\n"
    "            hone_cpu_deqv_%1$s(rw, b, &lo, &hi);\n"
    "            acc = _mm512_fmadd_ps(lo, _mm512_loadu_ps(x + b * 32), acc);\n"
    "            acc = _mm512_fmadd_ps(hi, _mm512_loadu_ps(x + b * 32 + 16), acc);\n"
    "        }\n"
    "        y[r] = hone_cpu_zmm_finish(acc, rw, x, full, cols, deq);\n"
    "    }\n"
    "#else\n"
    "    hone_cpu_matvec_generic(y, W, x, rows, cols, row_bytes, deq, ith, nth);\n"
    "#endif\n"
    "}\n";

/* The baseline's structure (kernels/cpu/common.h, hone_cpu_matmul_simd) with the tile and the
 * prefetch distance as parameters: tokens in tiles outside when the thread's weights stay in
 * L2, rows outside (prefetched) when they stream from memory. */
static const char matmul_tmpl[] =
    "/* matmul_%1$s: Y[n][rows] = X[n][cols] W^T (prefill). Contract: engine/slots.h.\n"
    " * Search proposer point: tiles of %2$d tokens share each dequantised block, prefetch %3$d\n"
    " * bytes ahead of rows that stream from memory. Each (token, row) keeps the matvec_%1$s\n"
    " * order exactly (exact tier). */\n"
    "#include \"kernels/cpu/common.h\"\n"
    "\n"
    "#define TILE %2$d\n"
    "#define PREFETCH %3$d\n"
    "\n"
    "static void deq(const void *row, int64_t c0, int n, float *out)\n"
    "{\n"
    "    %4$s\n"
    "}\n"
    "\n"
    "#ifdef HONE_CPU_SIMD\n"
    "#define deqv hone_cpu_deqv_%1$s\n"
    "/* One weight row against the tokens t0 .. t0 + nt - 1 (nt <= TILE). */\n"
    "static inline __attribute__((always_inline)) void tile_row(float *Y, const uint8_t *rw, const float *X, int64_t t0,\n"
    "                                                           int nt, int64_t r, int64_t rows, int64_t cols)\n"
    "{\n"
    "    int64_t nb = cols / 32, full = nb * 32;\n"
    "    if (nt == TILE) {\n"
    "        HONE_CPU_MATMUL_FULL_TILE(TILE);\n"
    "        return;\n"
    "    }\n"
    "    __m512 acc[TILE];\n"
    "    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();\n"
    "    for (int64_t b = 0; b < nb; b++) {\n"
    "        __m512 lo, hi;\n"
    "        deqv(rw, b, &lo, &hi);\n"
    "        for (int t = 0; t < nt; t++) {\n"
    "            const float *xt = X + (t0 + t) * cols + b * 32;\n"
    "            acc[t] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(xt), acc[t]);\n"
    "            acc[t] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(xt + 16), acc[t]);\n"
    "        }\n"
    "    }\n"
    "    for (int t = 0; t < nt; t++)\n"
    "        Y[(t0 + t) * rows + r] = hone_cpu_zmm_finish(acc[t], rw, X + (t0 + t) * cols, full, cols, deq);\n"
    "}\n"
    "#endif\n"
    "\n"
    "void hone_cpu_matmul_%1$s(float *Y, const void *W, const float *X, int64_t n, int64_t rows,\n"
    "                         int64_t cols, int ith, int nth)\n"
    "{\n"
    "    int64_t row_bytes = hone_dtype_row_bytes(HONE_DTYPE_%5$s, cols);\n"
    "#ifdef HONE_CPU_SIMD\n"
    "    int64_t r0, r1;\n"
    "    hone_cpu_share(rows, ith, nth, &r0, &r1);\n"
    "    if ((r1 - r0) * row_bytes <= 768 * 1024) {\n"
    "        for (int64_t t0 = 0; t0 < n; t0 += TILE) {\n"
    "            int nt = n - t0 < TILE ? (int)(n - t0) : TILE;\n"
    "            for (int64_t r = r0; r < r1; r++)\n"
    "                tile_row(Y, (const uint8_t *)W + r * row_bytes, X, t0, nt, r, rows, cols);\n"
    "        }\n"
    "        return;\n"
    "    }\n"
    "    for (int64_t r = r0; r < r1; r++) {\n"
    "        const uint8_t *rw = (const uint8_t *)W + r * row_bytes;\n"
    "        if (PREFETCH)\n"
    "            for (int64_t o = 0; o < row_bytes; o += 64) _mm_prefetch((const char *)rw + PREFETCH + o, _MM_HINT_T0);\n"
    "        for (int64_t t0 = 0; t0 < n; t0 += TILE) {\n"
    "            int nt = n - t0 < TILE ? (int)(n - t0) : TILE;\n"
    "            tile_row(Y, rw, X, t0, nt, r, rows, cols);\n"
    "        }\n"
    "    }\n"
    "#else\n"
    "    hone_cpu_matmul_generic(Y, W, X, n, rows, cols, row_bytes, deq, ith, nth);\n"
    "#endif\n"
    "}\n";

int hone_search_render(hone_slot_id slot, hone_search_point p, char **out_src)
{
    *out_src = NULL;
    if (!hone_search_supports(slot))
        return hone_error_set(HONE_EUNSUPPORTED, "the search proposer has no template for %s",
                              hone_slots_name(slot));
    if (p.rows < 1 || p.rows > 16 || p.tile < 1 || p.tile > 16 || p.prefetch < 0 || p.prefetch > 8192)
        return hone_error_set(HONE_EINVAL, "search point out of range");
    const char *dt = dt_of(slot);
    char up[16];
    upper(dt, up, sizeof up);
    const char *tmpl = is_matvec(slot) ? matvec_tmpl : matmul_tmpl;
    int a = is_matvec(slot) ? p.rows : p.tile;
    int n = snprintf(NULL, 0, tmpl, dt, a, p.prefetch, deq_body(dt), up);
    char *s = malloc((size_t)n + 1);
    if (!s) return hone_error_set(HONE_ENOMEM, "out of memory");
    snprintf(s, (size_t)n + 1, tmpl, dt, a, p.prefetch, deq_body(dt), up);
    *out_src = s;
    return 0;
}
