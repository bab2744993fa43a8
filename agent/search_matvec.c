/* Search family "matvec": the CPU matvec_<dtype> kernels with rows in flight (independent
 * fma chains over interleaved weight rows) and a software-prefetch distance. Every point keeps
 * each row's fixed 16-lane order (kernels/cpu/common.h): the exact tier. */
#include "agent/search.h"
#include "agent/search_linear.h"

static int is_matvec(hone_slot_id s) { return s >= HONE_SLOT_MATVEC_F32 && s <= HONE_SLOT_MATVEC_LAST; }

/* The shipped schedule (kernels/cpu/common.h): one row at a time with the share prefetched
 * 16 KiB ahead into L2 (hone_cpu_matvec_simd), which this family renders as the point (1, 16384). The
 * legacy block formats ship hone_cpu_matvec_staged instead (scales converted ahead, 4 rows),
 * which no point here renders: for them every point, (1, 16384) included, is a rival, and the
 * point named as theirs is the old one-row schedule without prefetch, slower than both. */
static hone_search_point incumbent(hone_slot_id slot)
{
    static const int block_formats[] = {HONE_DTYPE_Q8_0, HONE_DTYPE_Q4_0, HONE_DTYPE_Q4_1, HONE_DTYPE_Q5_0,
                                        HONE_DTYPE_Q5_1};
    int staged = 0;
    for (size_t i = 0; i < sizeof block_formats / sizeof block_formats[0]; i++)
        staged |= (int)slot == hone_slots_matvec_id(block_formats[i]);
    hone_search_point p = {{1, staged ? 0 : 16384}};
    return p;
}

static int space(hone_slot_id slot, hone_search_point *pts, int cap)
{
    int n = 0;
    hone_search_point inc = incumbent(slot);
    /* most promising first (measured on a 2-core AMD EPYC and a 2-core Sapphire Rapids): far
     * prefetch keeps more DRAM requests in flight per core than the hardware prefetcher does */
    static const int first[][2] = {{2, 16384}, {4, 16384}, {2, 8192}, {4, 8192}, {1, 32768}, {1, 8192}, {8, 8192}};
    for (size_t i = 0; i < sizeof first / sizeof first[0]; i++)
        hone_search_space_add(pts, &n, cap, (hone_search_point){{first[i][0], first[i][1]}}, inc);
    static const int pf[] = {32768, 16384, 8192, 4096, 2048, 1024, 0};
    static const int rows[] = {4, 8, 2, 1};
    for (size_t j = 0; j < sizeof pf / sizeof pf[0]; j++)
        for (size_t i = 0; i < 4; i++)
            hone_search_space_add(pts, &n, cap, (hone_search_point){{rows[i], pf[j]}}, inc);
    if (n < cap) pts[n++] = inc;
    return n;
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
    "                if (PREFETCH) _mm_prefetch((const char *)row[i] + b * bb + PREFETCH, _MM_HINT_T1);\n"
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
    "    hone_cpu_matvec_portable(y, W, x, rows, cols, row_bytes, %1$s, deq, ith, nth);\n"
    "#endif\n"
    "}\n";

static int render(hone_slot_id slot, hone_search_point p, char **out_src)
{
    return hone_search_linear_render(matvec_tmpl, slot, p, out_src);
}

const hone_search_family hone_search_family_matvec = {
    .name = "matvec",
    .params = {"rows", "prefetch", NULL},
    .supports = is_matvec,
    .incumbent = incumbent,
    .space = space,
    .render = render,
};
