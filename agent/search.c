/* Search proposer: the table of template families and what they share (describe, the space
 * helper, the exact vector expf). Each family lives in agent/search_<kind>.c. */
#include "search.h"
#include "search_fused.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"

/* The families (agent/search_<kind>.c), first match wins: a slot may be handled by one only. */
extern const hone_search_family hone_search_family_matvec, hone_search_family_matmul,
    hone_search_family_rmsnorm, hone_search_family_swiglu, hone_search_family_add,
    hone_search_family_rope, hone_search_family_attention, hone_search_family_embed;

static const hone_search_family *const families[] = {
    &hone_search_family_matvec,
    &hone_search_family_matmul,
    &hone_search_family_rmsnorm,
    &hone_search_family_swiglu,
    &hone_search_family_add,
    &hone_search_family_rope,
    &hone_search_family_attention,
    &hone_search_family_embed,
    &hone_search_fused_family,   /* agent/search_fused.c: qkv, ffn, rmsnorm_matvec */
};

const hone_search_family *hone_search_family_of(hone_slot_id slot)
{
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (families[i]->supports(slot)) return families[i];
    return NULL;
}

int hone_search_supports(hone_slot_id slot) { return hone_search_family_of(slot) != NULL; }

hone_search_point hone_search_incumbent(hone_slot_id slot)
{
    const hone_search_family *f = hone_search_family_of(slot);
    hone_search_point z = {{0}};
    return f ? f->incumbent(slot) : z;
}

int hone_search_space(hone_slot_id slot, hone_search_point *pts, int cap)
{
    const hone_search_family *f = hone_search_family_of(slot);
    return f ? f->space(slot, pts, cap) : 0;
}

int hone_search_render(hone_slot_id slot, hone_search_point p, char **out_src)
{
    *out_src = NULL;
    const hone_search_family *f = hone_search_family_of(slot);
    if (!f)
        return hone_error_set(HONE_EUNSUPPORTED, "the search proposer has no template for %s",
                              hone_slots_name(slot));
    return f->render(slot, p, out_src);
}

void hone_search_describe(hone_slot_id slot, hone_search_point p, char *buf, int cap)
{
    const hone_search_family *f = hone_search_family_of(slot);
    int o = 0;
    buf[0] = 0;
    if (!f) return;
    for (int i = 0; f->params[i] && i < HONE_SEARCH_MAX_PARAMS && o < cap; i++)
        o += snprintf(buf + o, (size_t)(cap - o), "%s%s=%d", i ? " " : "", f->params[i], p.v[i]);
}

int hone_search_point_eq(hone_search_point a, hone_search_point b)
{
    return memcmp(a.v, b.v, sizeof a.v) == 0;
}

int hone_search_space_add(hone_search_point *pts, int *n, int cap, hone_search_point p,
                          hone_search_point skip)
{
    if (hone_search_point_eq(p, skip) || *n >= cap) return *n;
    for (int k = 0; k < *n; k++)
        if (hone_search_point_eq(pts[k], p)) return *n;
    pts[(*n)++] = p;
    return *n;
}

int hone_search_check_range(hone_search_point p, const int *lo, const int *hi, int n)
{
    for (int i = 0; i < n; i++)
        if (p.v[i] < lo[i] || p.v[i] > hi[i])
            return hone_error_set(HONE_EINVAL, "search point out of range (%d outside %d..%d)", p.v[i], lo[i], hi[i]);
    return 0;
}

char *hone_search_format(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s) {
        hone_error_set(HONE_ENOMEM, "out of memory");
        return NULL;
    }
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* glibc's expf (sysdeps/ieee754/flt-32/e_expf.c, the FMA build x86-64 selects): x N / ln 2 =
 * k + r, 2^(k/N) from a 32-entry table with k's high bits added to the exponent, a cubic in
 * r; r = fma(InvLn2N, x, -kd) and the cubic's three fmas are what the FMA build's contraction
 * gives. Checked against glibc over a dense sample of |x| < 88 (tests/agent/test_search.c). */
static const char expf_tmpl[] =
    "/* glibc's expf, 8 doubles at a time (bitwise for |x| < 88 where libm is glibc's FMA build) */\n"
    "static const uint64_t hone_expf_tab[32] = {\n%s};\n"
    "static inline __m512d hone_search_expf8(__m512d xd)\n"
    "{\n"
    "    const __m512d invln2n = _mm512_set1_pd(0x1.71547652b82fep+0 * 32), shift = _mm512_set1_pd(0x1.8p+52);\n"
    "    __m512d z = _mm512_mul_pd(invln2n, xd);\n"
    "    __m512d kd = _mm512_add_pd(z, shift);\n"
    "    __m512i ki = _mm512_castpd_si512(kd);\n"
    "    kd = _mm512_sub_pd(kd, shift);\n"
    "    __m512d r = _mm512_fmadd_pd(invln2n, xd, _mm512_sub_pd(_mm512_setzero_pd(), kd));\n"
    "    __m512i t = _mm512_i64gather_epi64(_mm512_and_si512(ki, _mm512_set1_epi64(31)), (const void *)hone_expf_tab, 8);\n"
    "    t = _mm512_add_epi64(t, _mm512_slli_epi64(ki, 47));\n"
    "    __m512d s = _mm512_castsi512_pd(t);\n"
    "    __m512d c0 = _mm512_set1_pd(0x1.c6af84b912394p-5 / 32 / 32 / 32), c1 = _mm512_set1_pd(0x1.ebfce50fac4f3p-3 / 32 / 32);\n"
    "    __m512d c2 = _mm512_set1_pd(0x1.62e42ff0c52d6p-1 / 32);\n"
    "    __m512d zz = _mm512_fmadd_pd(c0, r, c1);\n"
    "    __m512d r2 = _mm512_mul_pd(r, r);\n"
    "    __m512d y = _mm512_fmadd_pd(c2, r, _mm512_set1_pd(1.0));\n"
    "    y = _mm512_fmadd_pd(zz, r2, y);\n"
    "    return _mm512_mul_pd(y, s);\n"
    "}\n"
    "\n"
    "/* e[i] = expf(x[i]) for 16 values, bitwise libm's. */\n"
    "static inline void hone_search_expf16(float *e, const float *x)\n"
    "{\n"
    "    __m512 v = _mm512_loadu_ps(x);\n"
    "    __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(88.0f), _CMP_NLT_UQ);\n"
    "    if (big) {\n"
    "        for (int i = 0; i < 16; i++) e[i] = expf(x[i]);\n"
    "        return;\n"
    "    }\n"
    "    __m512d lo = hone_search_expf8(_mm512_cvtps_pd(_mm512_castps512_ps256(v)));\n"
    "    __m512d hi = hone_search_expf8(_mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));\n"
    "    _mm256_storeu_ps(e, _mm512_cvtpd_ps(lo));\n"
    "    _mm256_storeu_ps(e + 8, _mm512_cvtpd_ps(hi));\n"
    "}\n";

char *hone_search_expf_text(void)
{
    char tab[32 * 32 + 64]; /* 27 bytes an entry */
    int o = 0;
    for (int i = 0; i < 32; i++) {
        /* 2^(i/32) rounded to double, less i/32 in the exponent field (glibc's __exp2f_data) */
        double d = (double)exp2l((long double)i / 32);
        uint64_t u;
        memcpy(&u, &d, 8);
        u -= ((uint64_t)i << 52) / 32;
        o += snprintf(tab + o, sizeof tab - (size_t)o, "    0x%016llxull,%s", (unsigned long long)u,
                      i % 4 == 3 ? "\n" : "");
    }
    return hone_search_format(expf_tmpl, tab);
}
