/* Search family "add": the residual add y = a + b with the loop in zmm vectors (UNROLL of them
 * a step; 0: the baseline's plain loop, which the compiler vectorises), a software-prefetch
 * distance, and UPFRONT KiB of each input requested at entry (after the guard's cache flush,
 * and in the engine after the matvec that evicted them, a short add waits on memory latency:
 * asking for all its lines at once overlaps the misses). Each element is one f32 add, so every
 * point is the exact tier. */
#include <stdio.h>
#include <stdlib.h>

#include "agent/search.h"
#include "engine/error.h"

static int supports(hone_slot_id s) { return s == HONE_SLOT_ADD; }

static hone_search_point incumbent(hone_slot_id slot)
{
    (void)slot;
    hone_search_point p = {{0, 0, 0}};
    return p;
}

static int space(hone_slot_id slot, hone_search_point *pts, int cap)
{
    int n = 0;
    hone_search_point inc = incumbent(slot);
    static const int first[][3] = {{2, 0, 16}, {4, 0, 16}, {2, 1024, 4}, {1, 0, 4}};
    for (size_t i = 0; i < sizeof first / sizeof first[0]; i++)
        hone_search_space_add(pts, &n, cap, (hone_search_point){{first[i][0], first[i][1], first[i][2]}}, inc);
    static const int unroll[] = {2, 4, 1, 0}, pf[] = {0, 1024, 4096}, up[] = {16, 4, 0};
    for (size_t k = 0; k < 3; k++)
        for (size_t j = 0; j < 3; j++)
            for (size_t i = 0; i < 4; i++)
                hone_search_space_add(pts, &n, cap, (hone_search_point){{unroll[i], pf[j], up[k]}}, inc);
    if (n < cap) pts[n++] = inc;
    return n;
}

static const char tmpl[] =
    "/* add: y = a + b, the residual add. Contract: engine/slots.h.\n"
    " * Search proposer point: %1$d zmm vectors a step (0: the plain loop), software prefetch %2$d\n"
    " * bytes ahead, %3$d KiB of each input requested at entry. One f32 add per element (exact tier). */\n"
    "#include \"kernels/cpu/common.h\"\n"
    "\n"
    "#define UNROLL %1$d\n"
    "#define PREFETCH %2$d\n"
    "#define UPFRONT %3$d\n"
    "\n"
    "void hone_cpu_add(float *y, const float *a, const float *b, int64_t n, int ith, int nth)\n"
    "{\n"
    "    int64_t i0, i1;\n"
    "    hone_cpu_share(n, ith, nth, &i0, &i1);\n"
    "    int64_t i = i0;\n"
    "#ifdef HONE_CPU_SIMD\n"
    "    if (UPFRONT) {\n"
    "        int64_t e = i0 + (int64_t)UPFRONT * 256 < i1 ? i0 + (int64_t)UPFRONT * 256 : i1;\n"
    "        for (int64_t k = i0; k < e; k += 16) {\n"
    "            _mm_prefetch((const char *)(a + k), _MM_HINT_T0);\n"
    "            _mm_prefetch((const char *)(b + k), _MM_HINT_T0);\n"
    "        }\n"
    "    }\n"
    "    if (UNROLL)\n"
    "        for (; i + 16 * UNROLL <= i1; i += 16 * UNROLL) {\n"
    "            if (PREFETCH)\n"
    "                for (int u = 0; u < UNROLL; u++) {\n"
    "                    _mm_prefetch((const char *)(a + i + 16 * u) + PREFETCH, _MM_HINT_T0);\n"
    "                    _mm_prefetch((const char *)(b + i + 16 * u) + PREFETCH, _MM_HINT_T0);\n"
    "                }\n"
    "            for (int u = 0; u < UNROLL; u++)\n"
    "                _mm512_storeu_ps(y + i + 16 * u, _mm512_add_ps(_mm512_loadu_ps(a + i + 16 * u),\n"
    "                                                              _mm512_loadu_ps(b + i + 16 * u)));\n"
    "        }\n"
    "#endif\n"
    "    for (; i < i1; i++) y[i] = a[i] + b[i];\n"
    "}\n";

static int render(hone_slot_id slot, hone_search_point p, char **out_src)
{
    (void)slot;
    *out_src = NULL;
    static const int lo[] = {0, 0, 0}, hi[] = {8, 8192, 64};
    int rc = hone_search_check_range(p, lo, hi, 3);
    if (rc) return rc;
    *out_src = hone_search_format(tmpl, p.v[0], p.v[1], p.v[2]);
    return *out_src ? 0 : HONE_ENOMEM;
}

const hone_search_family hone_search_family_add = {
    .name = "add",
    .params = {"unroll", "prefetch", "upfront", NULL},
    .supports = supports,
    .incumbent = incumbent,
    .space = space,
    .render = render,
};
