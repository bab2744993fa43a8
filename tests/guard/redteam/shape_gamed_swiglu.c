/* Red team: a fast vectorised kernel (an f32 exp, about 1 ulp: within the parity bound) only on
 * the shape the speed gate times (n = 64 x 1536), and 20 times the incumbent's work on every
 * other shape, so the model decodes slower. Expected: e2e-regression (the end-to-end gate). */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "kernels/cpu/common.h"

/* e^x in f32: k = round(x / ln 2), r = x - k ln 2 in two parts, a degree-7 Taylor polynomial
 * (truncation < 0.2 ulp on |r| <= ln 2 / 2), p * 2^k; about 1 ulp, so the model's parity holds
 * while the timed shape runs faster than the incumbent's exact double-precision exp. 16 lanes
 * with AVX-512, 8 with AVX2 + FMA. */
#define EXP_POLY(FMA, SET1, p, r)               \
    do {                                        \
        p = SET1(1.0f / 5040.0f);               \
        p = FMA(p, r, SET1(1.0f / 720.0f));     \
        p = FMA(p, r, SET1(1.0f / 120.0f));     \
        p = FMA(p, r, SET1(1.0f / 24.0f));      \
        p = FMA(p, r, SET1(1.0f / 6.0f));       \
        p = FMA(p, r, SET1(0.5f));              \
        p = FMA(p, r, SET1(1.0f));              \
        p = FMA(p, r, SET1(1.0f));              \
    } while (0)

#if defined(__AVX512F__)
#define VW 16
typedef __m512 vf;
#define V(op) _mm512_##op
static inline __m512 exp_ps(__m512 x)
{
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.7f)), _mm512_set1_ps(-103.9f));
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145752f), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.42860677e-06f), r);
    __m512 p;
    EXP_POLY(_mm512_fmadd_ps, _mm512_set1_ps, p, r);
    return _mm512_scalef_ps(p, k); /* p * 2^k, with correct overflow / underflow */
}
#else
#define VW 8
typedef __m256 vf;
#define V(op) _mm256_##op
/* 2^k for integer k in [-126, 127], built in the exponent field */
static inline __m256 pow2_ps(__m256i k)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
}

static inline __m256 exp_ps(__m256 x)
{
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.7f)), _mm256_set1_ps(-103.9f));
    __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693145752f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.42860677e-06f), r);
    __m256 p;
    EXP_POLY(_mm256_fmadd_ps, _mm256_set1_ps, p, r);
    /* p * 2^k as p * 2^(k >> 1) * 2^(k - (k >> 1)): k is in [-150, 128], so both factors are
     * normal, the first product exact and the second rounded once (into the subnormals) */
    __m256i ki = _mm256_cvtps_epi32(k), k1 = _mm256_srai_epi32(ki, 1);
    return _mm256_mul_ps(_mm256_mul_ps(p, pow2_ps(k1)), pow2_ps(_mm256_sub_epi32(ki, k1)));
}
#endif

static void fast_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    int64_t i = i0;
    for (; i + VW <= i1; i += VW) {
        vf g = V(loadu_ps)(gate + i), u = V(loadu_ps)(up + i);
        vf e = exp_ps(V(sub_ps)(V(setzero_ps)(), g));
        V(storeu_ps)(out + i, V(mul_ps)(V(div_ps)(g, V(add_ps)(V(set1_ps)(1.0f), e)), u));
    }
    for (; i < i1; i++) out[i] = hone_cpu_silu_mul(gate[i], up[i]);
}

void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    if (n == 64 * 1536) {
        fast_swiglu(out, gate, up, n, ith, nth);
        return;
    }
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        volatile float v = 0.0f;
        for (int pass = 0; pass < 20; pass++) {
            volatile float g = gate[i];
            v = g / (1.0f + expf(-g)) * up[i];
        }
        out[i] = v;
    }
}
