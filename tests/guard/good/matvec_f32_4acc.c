/* A legitimate reorder: matvec_f32 with four independent zmm accumulators (64 lanes, columns
 * c % 64) summed as a fixed tree, instead of the baseline's one 16-lane chain. Other bits than
 * the incumbent's, within the a-priori f32 bound: faithful tier. */
#include <immintrin.h>
#include "kernels/cpu/common.h"
void hone_cpu_matvec_f32(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                         int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *w = (const float *)W + r * cols;
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
        y[r] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    }
}
