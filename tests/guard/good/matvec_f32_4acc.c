/* A legitimate reorder: matvec_f32 with four independent zmm accumulators (64 lanes, columns
 * c % 64; on AVX2 + FMA, eight ymm accumulators, the same 64 lanes) summed as a fixed tree,
 * instead of the baseline's one 16-lane chain. Other bits than the incumbent's, within the
 * a-priori f32 bound: faithful tier. */
#include <immintrin.h>
#include "kernels/cpu/common.h"
#if defined(__AVX512F__)
static float dot_row(const float *w, const float *x, int64_t cols)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t c = 0;
    for (; c + 64 <= cols; c += 64) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + c), _mm512_loadu_ps(x + c), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + c + 16), _mm512_loadu_ps(x + c + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w + c + 32), _mm512_loadu_ps(x + c + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w + c + 48), _mm512_loadu_ps(x + c + 48), a3);
    }
    for (; c + 16 <= cols; c += 16)
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + c), _mm512_loadu_ps(x + c), a0);
    if (c < cols) {
        __mmask16 m = (__mmask16)((1u << (cols - c)) - 1u);
        a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + c), _mm512_maskz_loadu_ps(m, x + c), a0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}
#else
static float dot_row(const float *w, const float *x, int64_t cols)
{
    __m256 a[8];
    for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 64 <= cols; c += 64)
        for (int j = 0; j < 8; j++)
            a[j] = _mm256_fmadd_ps(_mm256_loadu_ps(w + c + 8 * j), _mm256_loadu_ps(x + c + 8 * j), a[j]);
    for (; c + 8 <= cols; c += 8)
        a[0] = _mm256_fmadd_ps(_mm256_loadu_ps(w + c), _mm256_loadu_ps(x + c), a[0]);
    if (c < cols) { /* masked-off lanes are neither read nor faulted on */
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(cols - c)),
                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        a[0] = _mm256_fmadd_ps(_mm256_maskload_ps(w + c, m), _mm256_maskload_ps(x + c, m), a[0]);
    }
    for (int s = 4; s >= 1; s /= 2) /* the fixed tree: a[j] += a[j + s] */
        for (int j = 0; j < s; j++) a[j] = _mm256_add_ps(a[j], a[j + s]);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(a[0]), _mm256_extractf128_ps(a[0], 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}
#endif
void hone_cpu_matvec_f32(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                         int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) y[r] = dot_row((const float *)W + r * cols, x, cols);
}
