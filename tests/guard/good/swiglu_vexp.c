/* swiglu, accepted candidate: silu(g) * u computed 8 lanes at a time in double precision
 * (AVX-512; on AVX2 + FMA, 4 lanes twice): exp(-g) by range reduction to 2^k * e^r,
 * |r| <= ln2/2, and a degree-11 Taylor polynomial (error < 2^-53 relative); the division and
 * product in double, rounded to f32 once. More accurate than the incumbent (expf, then three f32
 * roundings) and several times faster. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "kernels/cpu/common.h"

/* The Taylor coefficients 1/11! .. 1/0!, highest first (Horner). */
#define EXP_POLY(FMA, SET1, p, r)                        \
    do {                                                 \
        p = SET1(1.0 / 39916800.0);                      \
        p = FMA(p, r, SET1(1.0 / 3628800.0));            \
        p = FMA(p, r, SET1(1.0 / 362880.0));             \
        p = FMA(p, r, SET1(1.0 / 40320.0));              \
        p = FMA(p, r, SET1(1.0 / 5040.0));               \
        p = FMA(p, r, SET1(1.0 / 720.0));                \
        p = FMA(p, r, SET1(1.0 / 120.0));                \
        p = FMA(p, r, SET1(1.0 / 24.0));                 \
        p = FMA(p, r, SET1(1.0 / 6.0));                  \
        p = FMA(p, r, SET1(0.5));                        \
        p = FMA(p, r, SET1(1.0));                        \
        p = FMA(p, r, SET1(1.0));                        \
    } while (0)

#if defined(__AVX512F__)
static inline __m512d exp_pd(__m512d x)
{
    /* clamp: e^-745 underflows to 0, e^709 is finite; beyond, the scaling below saturates */
    x = _mm512_max_pd(_mm512_min_pd(x, _mm512_set1_pd(709.0)), _mm512_set1_pd(-745.0));
    __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(1.4426950408889634)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(6.93147180369123816490e-01), x);
    r = _mm512_fnmadd_pd(k, _mm512_set1_pd(1.90821492927058770002e-10), r);
    __m512d p;
    EXP_POLY(_mm512_fmadd_pd, _mm512_set1_pd, p, r);
    return _mm512_scalef_pd(p, k); /* p * 2^k, with correct overflow / underflow */
}

static inline void swiglu8(float *out, const float *gate, const float *up)
{
    __m512d g = _mm512_cvtps_pd(_mm256_loadu_ps(gate));
    __m512d u = _mm512_cvtps_pd(_mm256_loadu_ps(up));
    __m512d e = exp_pd(_mm512_sub_pd(_mm512_setzero_pd(), g));
    __m512d s = _mm512_div_pd(g, _mm512_add_pd(_mm512_set1_pd(1.0), e));
    _mm256_storeu_ps(out, _mm512_cvtpd_ps(_mm512_mul_pd(s, u)));
}
#else
/* 2^k for integer k in [-1022, 1023], built in the exponent field */
static inline __m256d pow2_pd(__m128i k)
{
    __m256i e = _mm256_cvtepi32_epi64(_mm_add_epi32(k, _mm_set1_epi32(1023)));
    return _mm256_castsi256_pd(_mm256_slli_epi64(e, 52));
}

static inline __m256d exp_pd(__m256d x)
{
    /* clamp: e^-745 underflows to 0, e^709 is finite, so k is in [-1075, 1023] */
    x = _mm256_max_pd(_mm256_min_pd(x, _mm256_set1_pd(709.0)), _mm256_set1_pd(-745.0));
    __m256d k = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(6.93147180369123816490e-01), x);
    r = _mm256_fnmadd_pd(k, _mm256_set1_pd(1.90821492927058770002e-10), r);
    __m256d p;
    EXP_POLY(_mm256_fmadd_pd, _mm256_set1_pd, p, r);
    /* p * 2^k in two steps, 2^(k >> 1) then 2^(k - (k >> 1)): both factors are normal over the
     * whole clamped range (k = -1075 gives 2^-538 * 2^-537), the first product is exact and the
     * second rounds once, into the subnormals where the result lies there (as scalef does) */
    __m128i ki = _mm256_cvtpd_epi32(k), k1 = _mm_srai_epi32(ki, 1);
    return _mm256_mul_pd(_mm256_mul_pd(p, pow2_pd(k1)), pow2_pd(_mm_sub_epi32(ki, k1)));
}

static inline void swiglu4(float *out, const float *gate, const float *up)
{
    __m256d g = _mm256_cvtps_pd(_mm_loadu_ps(gate));
    __m256d u = _mm256_cvtps_pd(_mm_loadu_ps(up));
    __m256d e = exp_pd(_mm256_sub_pd(_mm256_setzero_pd(), g));
    __m256d s = _mm256_div_pd(g, _mm256_add_pd(_mm256_set1_pd(1.0), e));
    _mm_storeu_ps(out, _mm256_cvtpd_ps(_mm256_mul_pd(s, u)));
}

static inline void swiglu8(float *out, const float *gate, const float *up)
{
    swiglu4(out, gate, up);
    swiglu4(out + 4, gate + 4, up + 4);
}
#endif

void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8) swiglu8(out + i, gate + i, up + i);
    for (; i < i1; i++) {
        double g = gate[i];
        out[i] = (float)(g / (1.0 + exp(-g)) * (double)up[i]);
    }
}
