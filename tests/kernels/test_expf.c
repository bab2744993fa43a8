/* The kernels' expf (kernels/cpu/common.h: hone_cpu_expf and the 16-wide hone_cpu_expf16) is
 * bitwise libm's expf on every one of the 2^32 floats (NaNs: both NaN), where libm is glibc's
 * FMA build, which x86-64 glibc selects on any CPU that has FMA, as every CPU the AVX-512 path
 * runs on does. So the attention and swiglu baselines give the bits they gave with libm's expf,
 * and the portable path the same bits as the vector one. CI checks every 5th float (every
 * 61st under a sanitizer); HONE_EXPF_STRIDE=1 checks all 2^32 (about a minute). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "kernels/cpu/common.h"

#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
#define DEFAULT_STRIDE 61u
#else
#define DEFAULT_STRIDE 5u
#endif

static int same(float a, float b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    uint32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return x == y;
}

static float f_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_expf_every_float(void)
{
    const char *env = getenv("HONE_EXPF_STRIDE");
    uint64_t STRIDE = env && atoi(env) > 0 ? (uint64_t)atoi(env) : DEFAULT_STRIDE;
    uint64_t checked = 0, bad_scalar = 0, bad_vector = 0;
    uint32_t first_bad = 0;
    float x[16], e[16];
    int n = 0;
    for (uint64_t u = 0; u <= 0xffffffffull; u += STRIDE) {
        float v = f_of((uint32_t)u);
        float want = expf(v);
        if (!same(hone_cpu_expf(v), want)) {
            if (!bad_scalar && !bad_vector) first_bad = (uint32_t)u;
            bad_scalar++;
        }
        x[n++] = v;
        if (n == 16) {
            hone_cpu_expf_n(e, x, 16);
            for (int i = 0; i < 16; i++)
                if (!same(e[i], expf(x[i]))) {
                    if (!bad_scalar && !bad_vector) memcpy(&first_bad, &x[i], 4);
                    bad_vector++;
                }
            n = 0;
        }
        checked++;
    }
    if (bad_scalar || bad_vector)
        fprintf(stderr, "first mismatch at 0x%08x: libm %a, hone %a\n", first_bad, expf(f_of(first_bad)),
                hone_cpu_expf(f_of(first_bad)));
    fprintf(stderr, "%llu floats checked\n", (unsigned long long)checked);
    CHECK(checked >= 0xffffffffull / STRIDE);
    CHECK(bad_scalar == 0);
    CHECK(bad_vector == 0);
}

static void test_expf_special(void)
{
    CHECK(same(hone_cpu_expf(0.0f), 1.0f));
    CHECK(same(hone_cpu_expf(-0.0f), 1.0f));
    CHECK(same(hone_cpu_expf(-INFINITY), 0.0f));
    CHECK(isinf(hone_cpu_expf(INFINITY)));
    CHECK(isnan(hone_cpu_expf(NAN)));
    CHECK(isinf(hone_cpu_expf(89.0f)));
    CHECK(same(hone_cpu_expf(-104.0f), 0.0f));
    CHECK(hone_cpu_expf(-100.0f) > 0.0f); /* a subnormal result, rounded once */
    float x[16] = {0, -1, 1, 88.5f, -88.5f, -103.9f, NAN, INFINITY, -INFINITY, 2.5f, -7, 80, -80, 1e-30f, -1e-30f, 50};
    float e[16];
    hone_cpu_expf_n(e, x, 16);
    for (int i = 0; i < 16; i++) CHECK(same(e[i], expf(x[i])));
}

TEST_MAIN(TEST_CASE(test_expf_special), TEST_CASE(test_expf_every_float))
