/* Red team: the fast vectorised kernel (good/swiglu_vexp.c) only on the shape the speed gate
 * times (n = 64 x 1536), and 20 times the incumbent's work on every other shape, so the model
 * decodes slower. Expected: e2e-regression (the end-to-end gate). */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "kernels/cpu/common.h"

static inline __m512d exp_pd(__m512d x)
{
    /* clamp: e^-745 underflows to 0, e^709 is finite; beyond, the scaling below saturates */
    x = _mm512_max_pd(_mm512_min_pd(x, _mm512_set1_pd(709.0)), _mm512_set1_pd(-745.0));
    __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(1.4426950408889634)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(6.93147180369123816490e-01), x);
    r = _mm512_fnmadd_pd(k, _mm512_set1_pd(1.90821492927058770002e-10), r);
    __m512d p = _mm512_set1_pd(1.0 / 39916800.0);
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 3628800.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 362880.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 40320.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 5040.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 720.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 120.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 24.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 6.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0.5));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
    return _mm512_scalef_pd(p, k); /* p * 2^k, with correct overflow / underflow */
}

static void fast_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8) {
        __m512d g = _mm512_cvtps_pd(_mm256_loadu_ps(gate + i));
        __m512d u = _mm512_cvtps_pd(_mm256_loadu_ps(up + i));
        __m512d e = exp_pd(_mm512_sub_pd(_mm512_setzero_pd(), g));
        __m512d s = _mm512_div_pd(g, _mm512_add_pd(_mm512_set1_pd(1.0), e));
        _mm256_storeu_ps(out + i, _mm512_cvtpd_ps(_mm512_mul_pd(s, u)));
    }
    for (; i < i1; i++) {
        double g = gate[i];
        out[i] = (float)(g / (1.0 + exp(-g)) * (double)up[i]);
    }
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
