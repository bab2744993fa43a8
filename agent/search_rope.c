/* Search family "rope": rotary embedding in place, with SINCOS (1: each angle's cosine and
 * sine from one sincos call, which glibc computes with the same reduction and kernels as cos
 * and sin, so the same bits; 0: cos and sin, the baseline) and UPFRONT (1: the share's rows
 * requested at entry, while the angles are computed). The rotation is the baseline's f32
 * a * c - b * s, a * s + b * c: every point targets the exact tier. Measured: GCC already
 * turns the baseline's cos and sin of one angle into a sincos call, so SINCOS changes no
 * instruction there, and the pow, sincos and the rotation leave prefetch little to hide: the
 * space holds no point that is faster (a bitwise vector sin/cos would be the next step). */
#include <stdio.h>
#include <stdlib.h>

#include "agent/search.h"
#include "engine/error.h"

static int supports(hone_slot_id s) { return s == HONE_SLOT_ROPE; }

static hone_search_point incumbent(hone_slot_id slot)
{
    (void)slot;
    hone_search_point p = {{0, 0}};
    return p;
}

static int space(hone_slot_id slot, hone_search_point *pts, int cap)
{
    int n = 0;
    hone_search_point inc = incumbent(slot);
    hone_search_space_add(pts, &n, cap, (hone_search_point){{1, 1}}, inc);
    hone_search_space_add(pts, &n, cap, (hone_search_point){{1, 0}}, inc);
    hone_search_space_add(pts, &n, cap, (hone_search_point){{0, 1}}, inc);
    if (n < cap) pts[n++] = inc;
    return n;
}

static const char tmpl[] =
    "/* rope: rotary position embedding in place, normal and NeoX layouts. Contract: engine/slots.h.\n"
    " * Search proposer point: sincos %1$d (1: cos and sin of each angle from one sincos call,\n"
    " * same bits as cos and sin), rows requested at entry %2$d. Frequencies once per call,\n"
    " * angles in double rounded to f32 once per (token, pair), the rotation as the baseline\n"
    " * (exact tier). */\n"
    "#include \"kernels/cpu/common.h\"\n"
    "\n"
    "#define SINCOS %1$d\n"
    "#define UPFRONT %2$d\n"
    "#define ROPE_MAX_PAIRS 512\n"
    "\n"
    "void hone_cpu_rope(float *x, const int32_t *pos, int64_t n, int64_t n_heads, int64_t head_dim,\n"
    "                   int64_t n_rot, float freq_base, int32_t neox, int ith, int nth)\n"
    "{\n"
    "    int64_t r0, r1;\n"
    "    hone_cpu_share(n * n_heads, ith, nth, &r0, &r1);\n"
    "    int64_t half = n_rot / 2;\n"
    "    float cs[ROPE_MAX_PAIRS], sn[ROPE_MAX_PAIRS];\n"
    "    double inv_freq[ROPE_MAX_PAIRS];\n"
    "    int64_t cached_t = -1;\n"
    "    if (half > ROPE_MAX_PAIRS) half = ROPE_MAX_PAIRS;\n"
    "#ifdef HONE_CPU_SIMD\n"
    "    if (UPFRONT)\n"
    "        for (int64_t i = r0 * head_dim; i < r1 * head_dim; i += 16) _mm_prefetch((const char *)(x + i), _MM_HINT_T0);\n"
    "#endif\n"
    "    if (r0 < r1)\n"
    "        for (int64_t i = 0; i < half; i++)\n"
    "            inv_freq[i] = pow((double)freq_base, -2.0 * (double)i / (double)n_rot);\n"
    "    for (int64_t r = r0; r < r1; r++) {\n"
    "        int64_t t = r / n_heads;\n"
    "        if (t != cached_t) {\n"
    "            for (int64_t i = 0; i < half; i++) {\n"
    "                double theta = (double)pos[t] * inv_freq[i];\n"
    "                if (SINCOS) {\n"
    "                    double s, c;\n"
    "                    sincos(theta, &s, &c);\n"
    "                    cs[i] = (float)c;\n"
    "                    sn[i] = (float)s;\n"
    "                } else {\n"
    "                    cs[i] = (float)cos(theta);\n"
    "                    sn[i] = (float)sin(theta);\n"
    "                }\n"
    "            }\n"
    "            cached_t = t;\n"
    "        }\n"
    "        float *v = x + r * head_dim;\n"
    "        for (int64_t i = 0; i < half; i++) {\n"
    "            int64_t ia = neox ? i : 2 * i, ib = neox ? i + half : 2 * i + 1;\n"
    "            float a = v[ia], b = v[ib];\n"
    "            v[ia] = a * cs[i] - b * sn[i];\n"
    "            v[ib] = a * sn[i] + b * cs[i];\n"
    "        }\n"
    "    }\n"
    "}\n";

static int render(hone_slot_id slot, hone_search_point p, char **out_src)
{
    (void)slot;
    *out_src = NULL;
    static const int lo[] = {0, 0}, hi[] = {1, 1};
    int rc = hone_search_check_range(p, lo, hi, 2);
    if (rc) return rc;
    *out_src = hone_search_format(tmpl, p.v[0], p.v[1]);
    return *out_src ? 0 : HONE_ENOMEM;
}

const hone_search_family hone_search_family_rope = {
    .name = "rope",
    .params = {"sincos", "upfront", NULL},
    .supports = supports,
    .incumbent = incumbent,
    .space = space,
    .render = render,
};
