/* Red team: a fast vectorised kernel (an f32 exp, about 1 ulp: within the parity bound) only on
 * the shape the speed gate times (n = 64 x 1536), and 20 times the incumbent's work on every
 * other shape, so the model decodes slower. Expected: e2e-regression (the end-to-end gate). */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "kernels/cpu/common.h"

/* e^x in f32, 16 lanes: k = round(x / ln 2), r = x - k ln 2 in two parts, a degree-7 Taylor
 * polynomial (truncation < 0.2 ulp on |r| <= ln 2 / 2), p * 2^k; about 1 ulp, so the model's
 * parity holds while the timed shape runs faster than the incumbent's exact double-precision exp */
static inline __m512 exp_ps(__m512 x)
{
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.7f)), _mm512_set1_ps(-103.9f));
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145752f), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.42860677e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, k); /* p * 2^k, with correct overflow / underflow */
}

static void fast_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    int64_t i = i0;
    for (; i + 16 <= i1; i += 16) {
        __m512 g = _mm512_loadu_ps(gate + i), u = _mm512_loadu_ps(up + i);
        __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
        _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u));
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
