/* Search family "rmsnorm": y = x / sqrt(mean(x^2) + eps) * w per row, with ROWS rows in
 * flight (their sums of squares are independent double chains interleaved: prefill), UPFRONT
 * (1: every line of the rows and of w requested at entry, overlapping the misses a short row
 * waits on) and LANES, the double partial sums of each row's squares. LANES 1 is the baseline's
 * sequential double sum (exact tier); LANES 2, 4 or 8 put element i into partial i % LANES and
 * add the partials as a tree: that reorders the sum, so those points target the faithful tier
 * (the guard decides which tier they reach). */
#include <stdio.h>
#include <stdlib.h>

#include "agent/search.h"
#include "engine/error.h"

static int supports(hone_slot_id s) { return s == HONE_SLOT_RMSNORM; }

static hone_search_point incumbent(hone_slot_id slot)
{
    (void)slot;
    hone_search_point p = {{1, 0, 1}};
    return p;
}

static int space(hone_slot_id slot, hone_search_point *pts, int cap)
{
    int n = 0;
    hone_search_point inc = incumbent(slot);
    /* exact points first, then the reordering (faithful) ones */
    static const int rows[] = {4, 2, 1, 8}, up[] = {1, 0};
    for (size_t j = 0; j < 2; j++)
        for (size_t i = 0; i < 4; i++)
            hone_search_space_add(pts, &n, cap, (hone_search_point){{rows[i], up[j], 1}}, inc);
    static const int lanes[] = {4, 8, 2};
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < 2; i++)
            hone_search_space_add(pts, &n, cap, (hone_search_point){{rows[i], 1, lanes[k]}}, inc);
    if (n < cap) pts[n++] = inc;
    return n;
}

static const char tmpl[] =
    "/* rmsnorm: y = x / sqrt(mean(x^2) + eps) * w per row. Contract: engine/slots.h.\n"
    " * Search proposer point: %1$d rows in flight, rows and w requested at entry: %2$d, %3$d\n"
    " * double partial sums of the squares (1: the baseline's sequential sum, exact tier; more:\n"
    " * element i into partial i %% LANES, partials added as a tree: reordered, faithful tier).\n"
    " * Then one f32 scale per row and (x * scale) * w as the baseline. */\n"
    "#include \"kernels/cpu/common.h\"\n"
    "\n"
    "#define ROWS %1$d\n"
    "#define UPFRONT %2$d\n"
    "#define LANES %3$d\n"
    "\n"
    "void hone_cpu_rmsnorm(float *y, const float *x, const float *w, int64_t n, int64_t dim, float eps,\n"
    "                      int ith, int nth)\n"
    "{\n"
    "    int64_t r0, r1;\n"
    "    hone_cpu_share(n, ith, nth, &r0, &r1);\n"
    "#ifdef HONE_CPU_SIMD\n"
    "    if (UPFRONT && r0 < r1) {\n"
    "        for (int64_t i = 0; i < dim; i += 16) _mm_prefetch((const char *)(w + i), _MM_HINT_T0);\n"
    "        int64_t re = r0 + ROWS < r1 ? r0 + ROWS : r1;\n"
    "        for (int64_t i = 0; i < (re - r0) * dim; i += 16) _mm_prefetch((const char *)(x + r0 * dim + i), _MM_HINT_T0);\n"
    "    }\n"
    "#endif\n"
    "    for (int64_t r = r0; r < r1; r += ROWS) {\n"
    "        int nr = r1 - r < ROWS ? (int)(r1 - r) : ROWS;\n"
    "#ifdef HONE_CPU_SIMD\n"
    "        if (UPFRONT && r + ROWS < r1) {\n"
    "            int64_t re = r + 2 * ROWS < r1 ? r + 2 * ROWS : r1;\n"
    "            for (int64_t i = 0; i < (re - r - ROWS) * dim; i += 16)\n"
    "                _mm_prefetch((const char *)(x + (r + ROWS) * dim + i), _MM_HINT_T0);\n"
    "        }\n"
    "#endif\n"
    "        double ss[ROWS][LANES];\n"
    "        for (int k = 0; k < ROWS; k++)\n"
    "            for (int l = 0; l < LANES; l++) ss[k][l] = 0.0;\n"
    "        int64_t i = 0;\n"
    "        if (nr == ROWS) {\n"
    "            for (; i + LANES <= dim; i += LANES)\n"
    "                for (int k = 0; k < ROWS; k++)\n"
    "                    for (int l = 0; l < LANES; l++) {\n"
    "                        double v = (double)x[(r + k) * dim + i + l];\n"
    "                        ss[k][l] += v * v;\n"
    "                    }\n"
    "        }\n"
    "        for (int k = 0; k < nr; k++)\n"
    "            for (int64_t j = i; j < dim; j++) {\n"
    "                double v = (double)x[(r + k) * dim + j];\n"
    "                ss[k][j %% LANES] += v * v;\n"
    "            }\n"
    "        for (int k = 0; k < nr; k++) {\n"
    "            for (int h = LANES / 2; h >= 1; h /= 2)\n"
    "                for (int l = 0; l < h; l++) ss[k][l] += ss[k][l + h];\n"
    "            const float *xr = x + (r + k) * dim;\n"
    "            float *yr = y + (r + k) * dim;\n"
    "            float scale = (float)(1.0 / sqrt(ss[k][0] / (double)dim + (double)eps));\n"
    "            for (int64_t j = 0; j < dim; j++) yr[j] = xr[j] * scale * w[j];\n"
    "        }\n"
    "    }\n"
    "}\n";

static int render(hone_slot_id slot, hone_search_point p, char **out_src)
{
    (void)slot;
    *out_src = NULL;
    static const int lo[] = {1, 0, 1}, hi[] = {8, 1, 8};
    int rc = hone_search_check_range(p, lo, hi, 3);
    if (rc) return rc;
    if (p.v[2] & (p.v[2] - 1)) return hone_error_set(HONE_EINVAL, "search point out of range (lanes %d)", p.v[2]);
    *out_src = hone_search_format(tmpl, p.v[0], p.v[1], p.v[2]);
    return *out_src ? 0 : HONE_ENOMEM;
}

const hone_search_family hone_search_family_rmsnorm = {
    .name = "rmsnorm",
    .params = {"rows", "upfront", "lanes", NULL},
    .supports = supports,
    .incumbent = incumbent,
    .space = space,
    .render = render,
};
