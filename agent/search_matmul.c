/* Search family "matmul": the CPU matmul_<dtype> kernels with the token tile (tokens sharing
 * one dequantised block) and the prefetch distance of rows that stream from memory. Every
 * (token, row) keeps the matvec order exactly: the exact tier. */
#include "agent/search.h"
#include "agent/search_linear.h"

static int is_matmul(hone_slot_id s) { return s >= HONE_SLOT_MATMUL_F32 && s <= HONE_SLOT_MATMUL_LAST; }

/* Tiles of 8 tokens, rows that stream from memory prefetched 8 KiB ahead (the baseline). */
static hone_search_point incumbent(hone_slot_id slot)
{
    (void)slot;
    hone_search_point p = {{8, 8192}};
    return p;
}

static int space(hone_slot_id slot, hone_search_point *pts, int cap)
{
    int n = 0;
    hone_search_point inc = incumbent(slot);
    static const int tile[] = {12, 16, 4, 8};
    static const int pf[] = {8192, 4096, 0};
    for (size_t j = 0; j < 3; j++)
        for (size_t i = 0; i < 4; i++)
            hone_search_space_add(pts, &n, cap, (hone_search_point){{tile[i], pf[j]}}, inc);
    if (n < cap) pts[n++] = inc;
    return n;
}

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
    "    hone_cpu_matmul_portable(Y, W, X, n, rows, cols, row_bytes, %1$s, deq, ith, nth);\n"
    "#endif\n"
    "}\n";

static int render(hone_slot_id slot, hone_search_point p, char **out_src)
{
    return hone_search_linear_render(matmul_tmpl, slot, p, out_src);
}

const hone_search_family hone_search_family_matmul = {
    .name = "matmul",
    .params = {"tile", "prefetch", NULL},
    .supports = is_matmul,
    .incumbent = incumbent,
    .space = space,
    .render = render,
};
