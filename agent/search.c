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

char *hone_search_expf_text(void)
{
    static const char text[] =
        "/* e[i] = expf(x[i]) for 16 values: the kernels' own hone_cpu_expf_n (kernels/cpu/common.h:\n"
        " * one hone_cpu_expf16 with AVX-512, the scalar hone_cpu_expf elsewhere), glibc's expf\n"
        " * algorithm, bitwise libm's where libm is glibc's FMA build */\n"
        "static inline void hone_search_expf16(float *e, const float *x)\n"
        "{\n"
        "    hone_cpu_expf_n(e, x, 16);\n"
        "}\n";
    char *s = strdup(text);
    if (!s) hone_error_set(HONE_ENOMEM, "out of memory");
    return s;
}
