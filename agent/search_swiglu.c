/* Search family "swiglu": out = silu(gate) * up = gate / (1 + expf(-gate)) * up, with the exps
 * of 16 values at a time from the vector expf of agent/search.c (VEXP 1; 0: libm's expf per
 * element, the baseline), UNROLL such vectors a step, and UPFRONT KiB of each input requested
 * at entry. The division and the product are the baseline's f32 operations in its order, and
 * the vector expf is bitwise glibc's where the guard finds it so: the exact tier. */
#include <stdio.h>
#include <stdlib.h>

#include "agent/search.h"
#include "engine/error.h"

static int supports(hone_slot_id s) { return s == HONE_SLOT_SWIGLU; }

static hone_search_point incumbent(hone_slot_id slot)
{
    (void)slot;
    hone_search_point p = {{0, 1, 0}};
    return p;
}

static int space(hone_slot_id slot, hone_search_point *pts, int cap)
{
    int n = 0;
    hone_search_point inc = incumbent(slot);
    static const int unroll[] = {2, 1, 4}, up[] = {16, 0, 4};
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < 3; i++)
            hone_search_space_add(pts, &n, cap, (hone_search_point){{1, unroll[i], up[k]}}, inc);
    hone_search_space_add(pts, &n, cap, (hone_search_point){{0, 1, 16}}, inc);
    if (n < cap) pts[n++] = inc;
    return n;
}

static const char tmpl[] =
    "/* swiglu: out = silu(gate) * up. Contract: engine/slots.h.\n"
    " * Search proposer point: vector expf %1$d (1: 16 exps at a time, bitwise glibc's expf;\n"
    " * 0: libm's expf per element), %2$d vectors a step, %3$d KiB of each input requested at\n"
    " * entry. g / (1 + e) * up in the baseline's f32 order (exact tier). */\n"
    "#include \"kernels/cpu/common.h\"\n"
    "\n"
    "#define VEXP %1$d\n"
    "#define UNROLL %2$d\n"
    "#define UPFRONT %3$d\n"
    "\n"
    "#ifdef HONE_CPU_SIMD\n"
    "%4$s"
    "#endif\n"
    "\n"
    "void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)\n"
    "{\n"
    "    int64_t i0, i1;\n"
    "    hone_cpu_share(n, ith, nth, &i0, &i1);\n"
    "    int64_t i = i0;\n"
    "#ifdef HONE_CPU_SIMD\n"
    "    if (UPFRONT) {\n"
    "        int64_t e = i0 + (int64_t)UPFRONT * 256 < i1 ? i0 + (int64_t)UPFRONT * 256 : i1;\n"
    "        for (int64_t k = i0; k < e; k += 16) {\n"
    "            _mm_prefetch((const char *)(gate + k), _MM_HINT_T0);\n"
    "            _mm_prefetch((const char *)(up + k), _MM_HINT_T0);\n"
    "        }\n"
    "    }\n"
    "    if (VEXP)\n"
    "        for (; i + 16 * UNROLL <= i1; i += 16 * UNROLL) {\n"
    "            float ng[16 * UNROLL], e[16 * UNROLL];\n"
    "            for (int u = 0; u < UNROLL; u++) {\n"
    "                __m512i g = _mm512_castps_si512(_mm512_loadu_ps(gate + i + 16 * u));\n"
    "                _mm512_storeu_ps(ng + 16 * u, _mm512_castsi512_ps(_mm512_xor_si512(g, _mm512_set1_epi32((int)0x80000000u))));\n"
    "            }\n"
    "            for (int u = 0; u < UNROLL; u++) hone_search_expf16(e + 16 * u, ng + 16 * u);\n"
    "            for (int u = 0; u < UNROLL; u++) {\n"
    "                __m512 g = _mm512_loadu_ps(gate + i + 16 * u);\n"
    "                __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_loadu_ps(e + 16 * u));\n"
    "                _mm512_storeu_ps(out + i + 16 * u, _mm512_mul_ps(_mm512_div_ps(g, d), _mm512_loadu_ps(up + i + 16 * u)));\n"
    "            }\n"
    "        }\n"
    "#endif\n"
    "    for (; i < i1; i++) {\n"
    "        float g = gate[i];\n"
    "        out[i] = g / (1.0f + expf(-g)) * up[i];\n"
    "    }\n"
    "}\n";

static int render(hone_slot_id slot, hone_search_point p, char **out_src)
{
    (void)slot;
    *out_src = NULL;
    static const int lo[] = {0, 1, 0}, hi[] = {1, 4, 64};
    int rc = hone_search_check_range(p, lo, hi, 3);
    if (rc) return rc;
    char *ex = hone_search_expf_text();
    if (!ex) return HONE_ENOMEM;
    *out_src = hone_search_format(tmpl, p.v[0], p.v[1], p.v[2], ex);
    free(ex);
    return *out_src ? 0 : HONE_ENOMEM;
}

const hone_search_family hone_search_family_swiglu = {
    .name = "swiglu",
    .params = {"vexp", "unroll", "upfront", NULL},
    .supports = supports,
    .incumbent = incumbent,
    .space = space,
    .render = render,
};
