/* rmsnorm, accepted candidate: the sum of squares in double with AVX-512 (8 lanes x 4
 * independent accumulators instead of one sequential chain), then the incumbent's f32 scaling
 * (x * scale * w, same association). Faithful: the double sum is reordered (differences of
 * ~2^-50 relative, almost never visible after the f32 rounding of the scale). */
#include <immintrin.h>

#include "kernels/cpu/common.h"

void hone_cpu_rmsnorm(float *y, const float *x, const float *w, int64_t n, int64_t dim, float eps,
                      int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(n, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * dim;
        float *yr = y + r * dim;
        __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
        int64_t i = 0;
        for (; i + 32 <= dim; i += 32) {
            __m512d v0 = _mm512_cvtps_pd(_mm256_loadu_ps(xr + i));
            __m512d v1 = _mm512_cvtps_pd(_mm256_loadu_ps(xr + i + 8));
            __m512d v2 = _mm512_cvtps_pd(_mm256_loadu_ps(xr + i + 16));
            __m512d v3 = _mm512_cvtps_pd(_mm256_loadu_ps(xr + i + 24));
            a0 = _mm512_fmadd_pd(v0, v0, a0);
            a1 = _mm512_fmadd_pd(v1, v1, a1);
            a2 = _mm512_fmadd_pd(v2, v2, a2);
            a3 = _mm512_fmadd_pd(v3, v3, a3);
        }
        for (; i + 8 <= dim; i += 8) {
            __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(xr + i));
            a0 = _mm512_fmadd_pd(v, v, a0);
        }
        double ss = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
        for (; i < dim; i++) ss += (double)xr[i] * xr[i];
        float scale = (float)(1.0 / sqrt(ss / (double)dim + (double)eps));
        __m512 s = _mm512_set1_ps(scale);
        int64_t k = 0;
        for (; k + 16 <= dim; k += 16)
            _mm512_storeu_ps(yr + k, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(xr + k), s),
                                                   _mm512_loadu_ps(w + k)));
        for (; k < dim; k++) yr[k] = xr[k] * scale * w[k];
    }
}
