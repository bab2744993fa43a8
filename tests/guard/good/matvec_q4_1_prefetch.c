/* matvec_q4_1 with software prefetch 8 KiB ahead of each of 2 rows in flight: more DRAM
 * requests outstanding per core than the hardware prefetcher keeps, the same per-row order as
 * the incumbent (so the exact tier). Rendered by the search proposer (agent/search.c, point
 * rows=2 prefetch=8192). */
#include "kernels/cpu/common.h"

#define ROWS 2
#define PREFETCH 8192

static void deq(const void *row, int64_t c0, int n, float *out)
{
    (void)n;
    hone_cpu_deq_q4_1((const hone_block_q4_1 *)row + c0 / 32, out);
}

void hone_cpu_matvec_q4_1(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                         int ith, int nth)
{
    int64_t row_bytes = hone_dtype_row_bytes(HONE_DTYPE_Q4_1, cols);
#ifdef HONE_CPU_SIMD
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    int64_t nb = cols / 32, full = nb * 32, bb = nb ? row_bytes / nb : 0;
    int64_t r = r0;
    for (; r + ROWS <= r1; r += ROWS) {
        const uint8_t *row[ROWS];
        __m512 acc[ROWS];
        for (int i = 0; i < ROWS; i++) {
            row[i] = (const uint8_t *)W + (r + i) * row_bytes;
            acc[i] = _mm512_setzero_ps();
        }
        for (int64_t b = 0; b < nb; b++) {
            __m512 xlo = _mm512_loadu_ps(x + b * 32), xhi = _mm512_loadu_ps(x + b * 32 + 16);
            for (int i = 0; i < ROWS; i++) {
                __m512 lo, hi;
                if (PREFETCH) _mm_prefetch((const char *)row[i] + b * bb + PREFETCH, _MM_HINT_T0);
                hone_cpu_deqv_q4_1(row[i], b, &lo, &hi);
                acc[i] = _mm512_fmadd_ps(lo, xlo, acc[i]);
                acc[i] = _mm512_fmadd_ps(hi, xhi, acc[i]);
            }
        }
        for (int i = 0; i < ROWS; i++) y[r + i] = hone_cpu_zmm_finish(acc[i], row[i], x, full, cols, deq);
    }
    for (; r < r1; r++) {
        const uint8_t *rw = (const uint8_t *)W + r * row_bytes;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            __m512 lo, hi;
            hone_cpu_deqv_q4_1(rw, b, &lo, &hi);
            acc = _mm512_fmadd_ps(lo, _mm512_loadu_ps(x + b * 32), acc);
            acc = _mm512_fmadd_ps(hi, _mm512_loadu_ps(x + b * 32 + 16), acc);
        }
        y[r] = hone_cpu_zmm_finish(acc, rw, x, full, cols, deq);
    }
#else
    hone_cpu_matvec_portable(y, W, x, rows, cols, row_bytes, q4_1, deq, ith, nth);
#endif
}
