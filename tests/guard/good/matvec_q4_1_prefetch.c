/* matvec_q4_1 with software prefetch 8 KiB ahead of each of 2 rows in flight: more DRAM
 * requests outstanding per core than the hardware prefetcher keeps, the same per-row order as
 * the incumbent (so the exact tier). Rendered by the search proposer (agent/search.c, point
 * rows=2 prefetch=8192). Where the engine has no SIMD path (AVX2 without AVX-512) the 16 lanes
 * are two ymm halves (lanes 0-7 and 8-15), each lane the generic path's fused multiply-adds on
 * the same operands, so the bits are the incumbent's there too. */
#include "kernels/cpu/common.h"

#define ROWS 2
#define PREFETCH 8192

static void deq(const void *row, int64_t c0, int n, float *out)
{
    (void)n;
    hone_cpu_deq_q4_1((const hone_block_q4_1 *)row + c0 / 32, out);
}

#if !defined(HONE_CPU_SIMD) && defined(__AVX2__) && defined(__FMA__)
/* Block b of a row into the 16 lanes acc[0] (0-7), acc[1] (8-15): values 0..15 (the low nibbles,
 * q * d + m in one rounding as hone_cpu_deq_q4_1), then values 16..31 (the high nibbles). */
static inline void dot_block(__m256 acc[2], const uint8_t *row, int64_t b, __m256 x0, __m256 x1, __m256 x2,
                             __m256 x3)
{
    const hone_block_q4_1 *blk = (const hone_block_q4_1 *)row + b;
    __m256 d = _mm256_set1_ps(hone_cpu_half(blk->d)), m = _mm256_set1_ps(hone_cpu_half(blk->m));
    __m256i q0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)blk->qs));
    __m256i q1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk->qs + 8)));
    const __m256i lo = _mm256_set1_epi32(0xF);
    acc[0] = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(q0, lo)), d, m), x0, acc[0]);
    acc[1] = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(q1, lo)), d, m), x1, acc[1]);
    acc[0] = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(q0, 4)), d, m), x2, acc[0]);
    acc[1] = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(q1, 4)), d, m), x3, acc[1]);
}

/* The generic tail (a row whose length is not a multiple of 32) and lane tree. */
static inline float finish(const __m256 acc[2], const uint8_t *row, const float *x, int64_t full, int64_t cols)
{
    float a[HONE_LANES], w[32];
    _mm256_storeu_ps(a, acc[0]);
    _mm256_storeu_ps(a + 8, acc[1]);
    if (full < cols) {
        deq(row, full, (int)(cols - full), w);
        hone_cpu_dot_tail(a, w, x, full, cols);
    }
    return hone_cpu_lanes_sum(a);
}
#endif

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
#elif defined(__AVX2__) && defined(__FMA__)
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    int64_t nb = cols / 32, full = nb * 32, bb = nb ? row_bytes / nb : 0;
    int64_t r = r0;
    for (; r + ROWS <= r1; r += ROWS) {
        const uint8_t *row[ROWS];
        __m256 acc[ROWS][2];
        for (int i = 0; i < ROWS; i++) {
            row[i] = (const uint8_t *)W + (r + i) * row_bytes;
            acc[i][0] = acc[i][1] = _mm256_setzero_ps();
        }
        for (int64_t b = 0; b < nb; b++) {
            const float *xb = x + b * 32;
            __m256 x0 = _mm256_loadu_ps(xb), x1 = _mm256_loadu_ps(xb + 8);
            __m256 x2 = _mm256_loadu_ps(xb + 16), x3 = _mm256_loadu_ps(xb + 24);
            for (int i = 0; i < ROWS; i++) {
                if (PREFETCH) _mm_prefetch((const char *)row[i] + b * bb + PREFETCH, _MM_HINT_T0);
                dot_block(acc[i], row[i], b, x0, x1, x2, x3);
            }
        }
        for (int i = 0; i < ROWS; i++) y[r + i] = finish(acc[i], row[i], x, full, cols);
    }
    for (; r < r1; r++) {
        const uint8_t *rw = (const uint8_t *)W + r * row_bytes;
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int64_t b = 0; b < nb; b++) {
            const float *xb = x + b * 32;
            dot_block(acc, rw, b, _mm256_loadu_ps(xb), _mm256_loadu_ps(xb + 8), _mm256_loadu_ps(xb + 16),
                      _mm256_loadu_ps(xb + 24));
        }
        y[r] = finish(acc, rw, x, full, cols);
    }
#else
    hone_cpu_matvec_portable(y, W, x, rows, cols, row_bytes, q4_1, deq, ith, nth);
#endif
}
