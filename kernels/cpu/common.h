/* Helpers shared by the CPU baseline kernels (and allowed in CPU candidates):
 * the share of a range a thread owns, the fixed 16-lane dot-product order, and exact
 * dequantisation of one 32-value block of each weight format.
 *
 * The dot-product order (the promise behind "threads and batching change no bit"): element c
 * of a row is accumulated into lane c % 16 with one fused multiply-add, in increasing c; the
 * 16 lanes are then summed as a fixed tree (l + 8, then + 4, + 2, + 1). */
#ifndef HONE_KERNELS_CPU_COMMON_H
#define HONE_KERNELS_CPU_COMMON_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/dtype.h"

#if defined(__F16C__) || defined(__AVX__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#define HONE_LANES 16

/* [*b, *e): the part of 0..n that share ith of nth owns (contiguous, balanced). */
static inline void hone_cpu_share(int64_t n, int ith, int nth, int64_t *b, int64_t *e)
{
    *b = n * ith / nth;
    *e = n * (ith + 1) / nth;
}

static inline float hone_cpu_lanes_sum(const float acc[HONE_LANES])
{
    float s8[8], s4[4];
    for (int l = 0; l < 8; l++) s8[l] = acc[l] + acc[l + 8];
    for (int l = 0; l < 4; l++) s4[l] = s8[l] + s8[l + 4];
    float s2a = s4[0] + s4[2], s2b = s4[1] + s4[3];
    return s2a + s2b;
}

/* acc[l] += w[l] * x[l]; then acc[l] += w[l + 16] * x[l + 16] (one block of 32, in order). */
static inline void hone_cpu_dot32(float *restrict acc, const float *restrict w,
                                  const float *restrict x)
{
    for (int l = 0; l < HONE_LANES; l++) acc[l] = fmaf(w[l], x[l], acc[l]);
    for (int l = 0; l < HONE_LANES; l++) acc[l] = fmaf(w[l + 16], x[l + 16], acc[l]);
}

/* The tail of a row whose length is not a multiple of 32 (plain float formats only):
 * elements c0 .. n-1, with c0 a multiple of 32. */
static inline void hone_cpu_dot_tail(float *restrict acc, const float *restrict w,
                                     const float *restrict x, int64_t c0, int64_t n)
{
    for (int64_t c = c0; c < n; c++) acc[c % HONE_LANES] = fmaf(w[c - c0], x[c], acc[c % HONE_LANES]);
}

static inline void hone_cpu_deq_f16(const uint16_t *restrict h, float *restrict out, int n)
{
#if defined(__F16C__) && defined(__AVX__)
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) out[i] = hone_fp16_to_f32(h[i]);
#else
    for (int i = 0; i < n; i++) out[i] = hone_fp16_to_f32(h[i]);
#endif
}

static inline void hone_cpu_deq_bf16(const uint16_t *restrict h, float *restrict out, int n)
{
    for (int i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)h[i] << 16;
        memcpy(&out[i], &bits, 4);
    }
}

static inline float hone_cpu_half(uint16_t h)
{
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return hone_fp16_to_f32(h);
#endif
}

static inline void hone_cpu_deq_q8_0(const hone_block_q8_0 *restrict b, float *restrict out)
{
    float d = hone_cpu_half(b->d);
    for (int j = 0; j < 32; j++) out[j] = (float)b->qs[j] * d;
}

static inline void hone_cpu_deq_q4_0(const hone_block_q4_0 *restrict b, float *restrict out)
{
    float d = hone_cpu_half(b->d);
    for (int j = 0; j < 16; j++) {
        out[j] = (float)((int)(b->qs[j] & 0xF) - 8) * d;
        out[j + 16] = (float)((int)(b->qs[j] >> 4) - 8) * d;
    }
}

/* q * d is exact in f32 (4-bit times an 11-bit mantissa), so fmaf(q, d, m) equals q * d + m
 * rounded once, the exact dequantised value rounded to f32. */
static inline void hone_cpu_deq_q4_1(const hone_block_q4_1 *restrict b, float *restrict out)
{
    float d = hone_cpu_half(b->d), m = hone_cpu_half(b->m);
    for (int j = 0; j < 16; j++) {
        out[j] = fmaf((float)(b->qs[j] & 0xF), d, m);
        out[j + 16] = fmaf((float)(b->qs[j] >> 4), d, m);
    }
}


/* Dequantises the n <= 32 values of a weight row starting at column c0 (a multiple of 32). */
typedef void (*hone_cpu_deq_fn)(const void *row, int64_t c0, int n, float *out);

/* y[r] = W[r] . x for the rows of this share, in the fixed lane order above. Inlined into each
 * dtype's kernel with its own deq, so the compiler specialises it. */
static inline __attribute__((always_inline)) void
hone_cpu_matvec_generic(float *restrict y, const void *W, const float *restrict x, int64_t rows,
                        int64_t cols, int64_t row_bytes, hone_cpu_deq_fn deq, int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    int64_t full = cols / 32 * 32;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)W + r * row_bytes;
        float acc[HONE_LANES] = {0};
        float w[32];
        for (int64_t c = 0; c < full; c += 32) {
            deq(row, c, 32, w);
            hone_cpu_dot32(acc, w, x + c);
        }
        if (full < cols) {
            deq(row, full, (int)(cols - full), w);
            hone_cpu_dot_tail(acc, w, x, full, cols);
        }
        y[r] = hone_cpu_lanes_sum(acc);
    }
}

#define HONE_CPU_MATMUL_TILE 8

/* Y[t][r] = W[r] . X[t]: each weight block is dequantised once per tile of tokens, and every
 * (t, r) follows exactly the matvec order, so Y[t] is bitwise the matvec of X[t]. */
static inline __attribute__((always_inline)) void
hone_cpu_matmul_generic(float *restrict Y, const void *W, const float *restrict X, int64_t n,
                        int64_t rows, int64_t cols, int64_t row_bytes, hone_cpu_deq_fn deq,
                        int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    int64_t full = cols / 32 * 32;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)W + r * row_bytes;
        for (int64_t t0 = 0; t0 < n; t0 += HONE_CPU_MATMUL_TILE) {
            int nt = n - t0 < HONE_CPU_MATMUL_TILE ? (int)(n - t0) : HONE_CPU_MATMUL_TILE;
            float acc[HONE_CPU_MATMUL_TILE][HONE_LANES] = {{0}};
            float w[32];
            for (int64_t c = 0; c < full; c += 32) {
                deq(row, c, 32, w);
                for (int t = 0; t < nt; t++) hone_cpu_dot32(acc[t], w, X + (t0 + t) * cols + c);
            }
            if (full < cols) {
                deq(row, full, (int)(cols - full), w);
                for (int t = 0; t < nt; t++)
                    hone_cpu_dot_tail(acc[t], w, X + (t0 + t) * cols, full, cols);
            }
            for (int t = 0; t < nt; t++) Y[(t0 + t) * rows + r] = hone_cpu_lanes_sum(acc[t]);
        }
    }
}

/* One attention row: out[d] = sum_j softmax_j(scale * q . K_j) V_j[d] over keys j < n_kv of
 * the paged cache (kv head kvh). Scores are dot products in the lane order above; the softmax
 * normaliser is summed in double; V is accumulated in key order. Shared by attention_decode
 * and attention_prefill so that both give the same bits for the same row. */
static inline void hone_cpu_attend_row_generic(float *restrict out, const float *restrict q,
                                       const float *k_cache, const float *v_cache,
                                       const int32_t *block_table, int64_t n_kv,
                                       int64_t block_size, int64_t n_kv_heads, int64_t kvh,
                                       int64_t head_dim, float scale, float *restrict scores)
{
    int64_t full = head_dim / 32 * 32;
    float mx = -INFINITY;
    for (int64_t j = 0; j < n_kv; j++) {
        int64_t blk = block_table[j / block_size], slot = j % block_size;
        const float *k = k_cache + ((blk * block_size + slot) * n_kv_heads + kvh) * head_dim;
        float acc[HONE_LANES] = {0};
        for (int64_t c = 0; c < full; c += 32) hone_cpu_dot32(acc, k + c, q + c);
        if (full < head_dim) hone_cpu_dot_tail(acc, k + full, q, full, head_dim);
        float s = hone_cpu_lanes_sum(acc) * scale;
        scores[j] = s;
        if (s > mx) mx = s;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n_kv; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += scores[j];
    }
    for (int64_t d = 0; d < head_dim; d++) out[d] = 0.0f;
    for (int64_t j = 0; j < n_kv; j++) {
        int64_t blk = block_table[j / block_size], slot = j % block_size;
        const float *v = v_cache + ((blk * block_size + slot) * n_kv_heads + kvh) * head_dim;
        float p = scores[j];
        for (int64_t d = 0; d < head_dim; d++) out[d] = fmaf(p, v[d], out[d]);
    }
    float inv = (float)(1.0 / sum);
    for (int64_t d = 0; d < head_dim; d++) out[d] *= inv;
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
/* AVX-512 paths: one zmm holds the 16 lanes, so the lane order is the generic one exactly
 * (the low 16 values of a block, then the high 16, fused into the same lanes); the tree sum
 * below is hone_cpu_lanes_sum. Tokens (matmul) are interleaved so their independent fma chains
 * hide latency; each output's own order is unchanged. */
#define HONE_CPU_SIMD 1

/* The two halves (values 0..15 and 16..31) of block `blk` of a row, dequantised exactly. */
typedef void (*hone_cpu_deqv_fn)(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi);

static inline float hone_cpu_zmm_sum(__m512 acc)
{
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));       /* [s4_0 + s4_2, s4_1 + s4_3] */
    __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));          /* s2_0 + s2_1 */
    return _mm_cvtss_f32(s1);
}

/* Finishes a row whose length is not a multiple of 32 with the generic tail, then sums. */
static inline float hone_cpu_zmm_finish(__m512 acc, const uint8_t *row, const float *x,
                                        int64_t full, int64_t cols, hone_cpu_deq_fn deq)
{
    if (full == cols) return hone_cpu_zmm_sum(acc);
    float a[HONE_LANES], w[32];
    _mm512_storeu_ps(a, acc);
    deq(row, full, (int)(cols - full), w);
    hone_cpu_dot_tail(a, w, x, full, cols);
    return hone_cpu_lanes_sum(a);
}

/* matvec streams its share of the rows one at a time, in address order: one contiguous read
 * that the hardware prefetcher follows, while out-of-order execution overlaps the fma chains of
 * consecutive rows. Measured on SmolLM2-135M (2-core EPYC): 4 interleaved rows, i.e. 4 streams
 * 1-3 KiB long, decoded f32 at 94 tok/s, one row at a time at 107-110 (same bits). */
static inline __attribute__((always_inline)) void
hone_cpu_matvec_simd(float *restrict y, const void *W, const float *restrict x, int64_t rows,
                     int64_t cols, int64_t row_bytes, hone_cpu_deqv_fn deqv, hone_cpu_deq_fn deq,
                     int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    int64_t nb = cols / 32, full = nb * 32;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *rw = (const uint8_t *)W + r * row_bytes;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            __m512 lo, hi;
            deqv(rw, b, &lo, &hi);
            acc = _mm512_fmadd_ps(lo, _mm512_loadu_ps(x + b * 32), acc);
            acc = _mm512_fmadd_ps(hi, _mm512_loadu_ps(x + b * 32 + 16), acc);
        }
        y[r] = hone_cpu_zmm_finish(acc, rw, x, full, cols, deq);
    }
}

/* One weight row against a full tile of TILE tokens (constant bounds keep acc in registers). */
#define HONE_CPU_MATMUL_FULL_TILE(TILE)                                                         \
    do {                                                                                       \
        __m512 acc[TILE];                                                                      \
        for (int t = 0; t < TILE; t++) acc[t] = _mm512_setzero_ps();                           \
        for (int64_t b = 0; b < nb; b++) {                                                     \
            __m512 lo, hi;                                                                     \
            deqv(rw, b, &lo, &hi);                                                             \
            _Pragma("GCC unroll 16") for (int t = 0; t < TILE; t++) {                          \
                const float *xt = X + (t0 + t) * cols + b * 32;                                \
                acc[t] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(xt), acc[t]);                     \
                acc[t] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(xt + 16), acc[t]);                \
            }                                                                                  \
        }                                                                                      \
        for (int t = 0; t < TILE; t++)                                                         \
            Y[(t0 + t) * rows + r] = hone_cpu_zmm_finish(acc[t], rw, X + (t0 + t) * cols,      \
                                                         full, cols, deq);                     \
    } while (0)

/* One weight row against the tokens t0 .. t0 + nt - 1 (any nt <= 8). */
#define HONE_CPU_MATMUL_ROW()                                                                  \
    do {                                                                                       \
        if (nt == 8) {                                                                         \
            HONE_CPU_MATMUL_FULL_TILE(8);                                                      \
        } else if (nt == 4) {                                                                  \
            HONE_CPU_MATMUL_FULL_TILE(4);                                                      \
        } else {                                                                               \
            __m512 acc[8];                                                                     \
            for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();                         \
            for (int64_t b = 0; b < nb; b++) {                                                 \
                __m512 lo, hi;                                                                 \
                deqv(rw, b, &lo, &hi);                                                         \
                for (int t = 0; t < nt; t++) {                                                 \
                    const float *xt = X + (t0 + t) * cols + b * 32;                            \
                    acc[t] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(xt), acc[t]);                 \
                    acc[t] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(xt + 16), acc[t]);            \
                }                                                                              \
            }                                                                                  \
            for (int t = 0; t < nt; t++)                                                       \
                Y[(t0 + t) * rows + r] = hone_cpu_zmm_finish(acc[t], rw, X + (t0 + t) * cols,  \
                                                             full, cols, deq);                 \
        }                                                                                      \
    } while (0)

/* The tile is 8 tokens when 8 rows of X fit in 24 KiB, else 4. When this share's weights fit
 * in L2, token tiles go outside and weight rows inside (a tile of X stays in L1 while the rows
 * stream past it); when they do not (the output projection), rows go outside so that the
 * weights are read from memory once. Every (token, row) is the matvec order either way. */
static inline __attribute__((always_inline)) void
hone_cpu_matmul_simd(float *restrict Y, const void *W, const float *restrict X, int64_t n,
                     int64_t rows, int64_t cols, int64_t row_bytes, hone_cpu_deqv_fn deqv,
                     hone_cpu_deq_fn deq, int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    int64_t nb = cols / 32, full = nb * 32;
    int tile = cols * (int64_t)sizeof(float) * 8 <= 24 * 1024 ? 8 : 4;
    if ((r1 - r0) * row_bytes <= 768 * 1024) {
        for (int64_t t0 = 0; t0 < n; t0 += tile) {
            int nt = n - t0 < tile ? (int)(n - t0) : tile;
            for (int64_t r = r0; r < r1; r++) {
                const uint8_t *rw = (const uint8_t *)W + r * row_bytes;
                HONE_CPU_MATMUL_ROW();
            }
        }
    } else {
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *rw = (const uint8_t *)W + r * row_bytes;
            /* weights streamed from memory once: ask for the rows a few KiB ahead */
            for (int64_t o = 0; o < row_bytes; o += 64) _mm_prefetch((const char *)rw + 8192 + o, _MM_HINT_T0);
            for (int64_t t0 = 0; t0 < n; t0 += tile) {
                int nt = n - t0 < tile ? (int)(n - t0) : tile;
                HONE_CPU_MATMUL_ROW();
            }
        }
    }
}

static inline void hone_cpu_deqv_f32(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const float *w = (const float *)row + blk * 32;
    *lo = _mm512_loadu_ps(w);
    *hi = _mm512_loadu_ps(w + 16);
}

static inline void hone_cpu_deqv_f16(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const uint16_t *h = (const uint16_t *)row + blk * 32;
    *lo = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h));
    *hi = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + 16)));
}

static inline void hone_cpu_deqv_bf16(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const uint16_t *h = (const uint16_t *)row + blk * 32;
    __m512i a = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)h));
    __m512i b = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(h + 16)));
    *lo = _mm512_castsi512_ps(_mm512_slli_epi32(a, 16));
    *hi = _mm512_castsi512_ps(_mm512_slli_epi32(b, 16));
}

/* q * d is exact in f32 for q8_0 and q4_0, so a plain multiply is the exact value. */
static inline void hone_cpu_deqv_q8_0(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const hone_block_q8_0 *b = (const hone_block_q8_0 *)row + blk;
    __m512 d = _mm512_set1_ps(hone_cpu_half(b->d));
    __m128i q0 = _mm_loadu_si128((const __m128i *)b->qs);
    __m128i q1 = _mm_loadu_si128((const __m128i *)(b->qs + 16));
    *lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), d);
    *hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), d);
}

/* q4: the 16 possible values of a block form a table (one vector op), and each nibble picks
 * its value with a permute that reads only the index's low 4 bits, so no masking is needed.
 * The table entries are computed exactly as the scalar path computes each weight. */
static inline void hone_cpu_deqv_q4_0(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const hone_block_q4_0 *b = (const hone_block_q4_0 *)row + blk;
    const __m512 iota_m8 = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    __m512 table = _mm512_mul_ps(iota_m8, _mm512_set1_ps(hone_cpu_half(b->d)));
    __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->qs));
    *lo = _mm512_permutexvar_ps(q, table);
    *hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), table);
}

static inline void hone_cpu_deqv_q4_1(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const hone_block_q4_1 *b = (const hone_block_q4_1 *)row + blk;
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 table = _mm512_fmadd_ps(iota, _mm512_set1_ps(hone_cpu_half(b->d)),
                                   _mm512_set1_ps(hone_cpu_half(b->m)));
    __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->qs));
    *lo = _mm512_permutexvar_ps(q, table);
    *hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), table);
}
#endif


#ifdef HONE_CPU_SIMD
/* The attention row with the head in zmm registers: each score is the same lane-order dot
 * product (dims l, l+16, l+32, ... into lane l, then the tree), four keys at a time for
 * independent chains; expf per key and the double normaliser as in the generic row; V is
 * accumulated per dimension in key order with one fma each. Same bits as the generic row. */
static inline void hone_cpu_attend_row_simd(float *restrict out, const float *restrict q,
                                            const float *k_cache, const float *v_cache,
                                            const int32_t *block_table, int64_t n_kv,
                                            int64_t block_size, int64_t n_kv_heads, int64_t kvh,
                                            int64_t head_dim, float scale, float *restrict scores)
{
    enum { MAXV = 16 };
    int nv = (int)(head_dim / 16);
    __m512 qv[MAXV], o[MAXV];
    for (int i = 0; i < nv; i++) qv[i] = _mm512_loadu_ps(q + 16 * i);
    int64_t row = n_kv_heads * head_dim;
#define HONE_KV_PTR(cache, j)                                                                 \
    ((cache) + ((int64_t)block_table[(j) / block_size] * block_size + (j) % block_size) * row + \
     kvh * head_dim)
    float mx = -INFINITY;
    int64_t j = 0;
    for (; j + 4 <= n_kv; j += 4) {
        const float *k0 = HONE_KV_PTR(k_cache, j), *k1 = HONE_KV_PTR(k_cache, j + 1);
        const float *k2 = HONE_KV_PTR(k_cache, j + 2), *k3 = HONE_KV_PTR(k_cache, j + 3);
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int i = 0; i < nv; i++) {
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(k0 + 16 * i), qv[i], a0);
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(k1 + 16 * i), qv[i], a1);
            a2 = _mm512_fmadd_ps(_mm512_loadu_ps(k2 + 16 * i), qv[i], a2);
            a3 = _mm512_fmadd_ps(_mm512_loadu_ps(k3 + 16 * i), qv[i], a3);
        }
        scores[j] = hone_cpu_zmm_sum(a0) * scale;
        scores[j + 1] = hone_cpu_zmm_sum(a1) * scale;
        scores[j + 2] = hone_cpu_zmm_sum(a2) * scale;
        scores[j + 3] = hone_cpu_zmm_sum(a3) * scale;
    }
    for (; j < n_kv; j++) {
        const float *k = HONE_KV_PTR(k_cache, j);
        __m512 a = _mm512_setzero_ps();
        for (int i = 0; i < nv; i++) a = _mm512_fmadd_ps(_mm512_loadu_ps(k + 16 * i), qv[i], a);
        scores[j] = hone_cpu_zmm_sum(a) * scale;
    }
    for (j = 0; j < n_kv; j++)
        if (scores[j] > mx) mx = scores[j];
    double sum = 0.0;
    for (j = 0; j < n_kv; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += scores[j];
    }
    for (int i = 0; i < nv; i++) o[i] = _mm512_setzero_ps();
    for (j = 0; j < n_kv; j++) {
        const float *v = HONE_KV_PTR(v_cache, j);
        __m512 p = _mm512_set1_ps(scores[j]);
        for (int i = 0; i < nv; i++) o[i] = _mm512_fmadd_ps(p, _mm512_loadu_ps(v + 16 * i), o[i]);
    }
#undef HONE_KV_PTR
    __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
    for (int i = 0; i < nv; i++) _mm512_storeu_ps(out + 16 * i, _mm512_mul_ps(o[i], inv));
}
#endif

/* The attention row of both attention slots: the register path where the head fits it. */
static inline void hone_cpu_attend_row(float *restrict out, const float *restrict q,
                                       const float *k_cache, const float *v_cache,
                                       const int32_t *block_table, int64_t n_kv,
                                       int64_t block_size, int64_t n_kv_heads, int64_t kvh,
                                       int64_t head_dim, float scale, float *restrict scores)
{
#ifdef HONE_CPU_SIMD
    if (head_dim % 32 == 0 && head_dim <= 256) {
        hone_cpu_attend_row_simd(out, q, k_cache, v_cache, block_table, n_kv, block_size,
                                 n_kv_heads, kvh, head_dim, scale, scores);
        return;
    }
#endif
    hone_cpu_attend_row_generic(out, q, k_cache, v_cache, block_table, n_kv, block_size,
                                n_kv_heads, kvh, head_dim, scale, scores);
}

/* ---- the fused slots' baselines: the unfused composition, bitwise ------------------------
 * kernels/cpu/qkv_<dt>.c, ffn_<dt>.c and rmsnorm_matvec_<dt>.c compute each output with the
 * exact operations of their components' baselines: matvec rows as matvec_<dt> computes them
 * (a row's value does not depend on the share that computes it), the rmsnorm slot's row and
 * the swiglu slot's formula. */

/* One row of the rmsnorm slot: y = x / sqrt(mean(x^2) + eps) * w, the sum of squares in
 * double (sequential), one f32 scale. y may equal x. */
static inline void hone_cpu_rmsnorm_row(float *y, const float *x, const float *restrict w,
                                        int64_t dim, float eps)
{
    double ss = 0.0;
    for (int64_t i = 0; i < dim; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / (double)dim + (double)eps));
    for (int64_t i = 0; i < dim; i++) y[i] = x[i] * scale * w[i];
}

/* The swiglu slot's element: silu(g) * u = g / (1 + expf(-g)) * u in f32. */
static inline float hone_cpu_silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

/* This share's (token, head) rows of the rope slot, or of rope_freqs when freqs is not NULL
 * (theta_i divided by freqs[i]: the inverse frequency base^(-2i/n_rot) / freqs[i] in double).
 * The frequencies once per call, angles and their cos/sin in double, rounded to f32 once per
 * (token, pair) and reused across the heads of a token. */
#define HONE_CPU_ROPE_MAX_PAIRS 512
static inline void hone_cpu_rope_share(float *x, const int32_t *pos, const float *freqs, int64_t n,
                                       int64_t n_heads, int64_t head_dim, int64_t n_rot,
                                       float freq_base, int32_t neox, int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(n * n_heads, ith, nth, &r0, &r1);
    int64_t half = n_rot / 2;
    float cs[HONE_CPU_ROPE_MAX_PAIRS], sn[HONE_CPU_ROPE_MAX_PAIRS];
    double inv_freq[HONE_CPU_ROPE_MAX_PAIRS];
    int64_t cached_t = -1;
    if (half > HONE_CPU_ROPE_MAX_PAIRS) half = HONE_CPU_ROPE_MAX_PAIRS; /* the engine refuses such models */
    if (r0 < r1)
        for (int64_t i = 0; i < half; i++) {
            inv_freq[i] = pow((double)freq_base, -2.0 * (double)i / (double)n_rot);
            if (freqs) inv_freq[i] /= (double)freqs[i];
        }
    for (int64_t r = r0; r < r1; r++) {
        int64_t t = r / n_heads;
        if (t != cached_t) {
            for (int64_t i = 0; i < half; i++) {
                double theta = (double)pos[t] * inv_freq[i];
                cs[i] = (float)cos(theta);
                sn[i] = (float)sin(theta);
            }
            cached_t = t;
        }
        float *v = x + r * head_dim;
        for (int64_t i = 0; i < half; i++) {
            int64_t ia = neox ? i : 2 * i, ib = neox ? i + half : 2 * i + 1;
            float a = v[ia], b = v[ib];
            v[ia] = a * cs[i] - b * sn[i];
            v[ib] = a * sn[i] + b * cs[i];
        }
    }
}

/* The geglu slot's element: gelu_tanh(g) * u in f32, tanh in double rounded once (the
 * contract in engine/slots.h). */
static inline float hone_cpu_gelu_mul(float g, float u)
{
    float y = 0.7978845608028654f * g * (1.0f + 0.044715f * g * g);
    float t = (float)tanh((double)y);
    return 0.5f * g * (1.0f + t) * u;
}

/* y[0 .. r1 - r0) = rows r0 .. r1 - 1 of W[.][cols] against x, as matvec_<dt> computes them. */
typedef void (*hone_cpu_rows_fn)(float *y, const void *W, const float *x, int64_t r0, int64_t r1,
                                 int64_t cols);

/* The dequantisation of each dtype with the hone_cpu_deq_fn signature (matvec_<dt>.c's deq),
 * and its rows function. */
static inline void hone_cpu_deqr_f32(const void *row, int64_t c0, int n, float *out)
{
    memcpy(out, (const float *)row + c0, (size_t)n * sizeof(float));
}
static inline void hone_cpu_deqr_f16(const void *row, int64_t c0, int n, float *out)
{
    hone_cpu_deq_f16((const uint16_t *)row + c0, out, n);
}
static inline void hone_cpu_deqr_bf16(const void *row, int64_t c0, int n, float *out)
{
    hone_cpu_deq_bf16((const uint16_t *)row + c0, out, n);
}
#define HONE_CPU_DEQR_BLOCK(dt)                                                                   \
    static inline void hone_cpu_deqr_##dt(const void *row, int64_t c0, int n, float *out)         \
    {                                                                                             \
        (void)n;                                                                                  \
        hone_cpu_deq_##dt((const hone_block_##dt *)row + c0 / 32, out);                           \
    }
HONE_CPU_DEQR_BLOCK(q8_0)
HONE_CPU_DEQR_BLOCK(q4_0)
HONE_CPU_DEQR_BLOCK(q4_1)
#undef HONE_CPU_DEQR_BLOCK

#ifdef HONE_CPU_SIMD
#define HONE_CPU_ROWS_BODY(dt, rb)                                                                \
    hone_cpu_matvec_simd(y, (const uint8_t *)W + r0 * rb, x, r1 - r0, cols, rb, hone_cpu_deqv_##dt, \
                         hone_cpu_deqr_##dt, 0, 1)
#else
#define HONE_CPU_ROWS_BODY(dt, rb)                                                                \
    hone_cpu_matvec_generic(y, (const uint8_t *)W + r0 * rb, x, r1 - r0, cols, rb, hone_cpu_deqr_##dt, 0, 1)
#endif
#define HONE_CPU_ROWS(dt, DT)                                                                     \
    static inline void hone_cpu_matvec_rows_##dt(float *y, const void *W, const float *x,         \
                                                 int64_t r0, int64_t r1, int64_t cols)            \
    {                                                                                             \
        int64_t rb = hone_dtype_row_bytes(DT, cols);                                              \
        HONE_CPU_ROWS_BODY(dt, rb);                                                               \
    }
HONE_CPU_ROWS(f32, HONE_DTYPE_F32)
HONE_CPU_ROWS(f16, HONE_DTYPE_F16)
HONE_CPU_ROWS(bf16, HONE_DTYPE_BF16)
HONE_CPU_ROWS(q8_0, HONE_DTYPE_Q8_0)
HONE_CPU_ROWS(q4_0, HONE_DTYPE_Q4_0)
HONE_CPU_ROWS(q4_1, HONE_DTYPE_Q4_1)
#undef HONE_CPU_ROWS
#undef HONE_CPU_ROWS_BODY

/* qkv: this share's rows of y = concat(Wq x, Wk x, Wv x), each matrix's part by rows(). */
static inline __attribute__((always_inline)) void
hone_cpu_qkv_compose(float *y, const void *Wq, const void *Wk, const void *Wv, const float *x,
                     int64_t rq, int64_t rk, int64_t rv, int64_t cols, hone_cpu_rows_fn rows,
                     int ith, int nth)
{
    int64_t r0, r1, off = 0;
    hone_cpu_share(rq + rk + rv, ith, nth, &r0, &r1);
    const void *W[3] = {Wq, Wk, Wv};
    int64_t n[3] = {rq, rk, rv};
    for (int m = 0; m < 3; m++) {
        int64_t a = r0 > off ? r0 - off : 0, b = r1 - off < n[m] ? r1 - off : n[m];
        if (a < b) rows(y + off + a, W[m], x, a, b, cols);
        off += n[m];
    }
}

/* ffn: this share's rows of out = swiglu(Wg x, Wu x), 64 rows of g and u at a time. */
static inline __attribute__((always_inline)) void
hone_cpu_ffn_compose(float *out, const void *Wg, const void *Wu, const float *x, int64_t n,
                     int64_t cols, hone_cpu_rows_fn rows, int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(n, ith, nth, &r0, &r1);
    float g[64], u[64];
    for (int64_t r = r0; r < r1; r += 64) {
        int64_t e = r1 - r < 64 ? r1 : r + 64;
        rows(g, Wg, x, r, e, cols);
        rows(u, Wu, x, r, e, cols);
        for (int64_t i = 0; i < e - r; i++) out[r + i] = hone_cpu_silu_mul(g[i], u[i]);
    }
}

/* rmsnorm_matvec: the norm of x into this share's scratch[cols], then its rows of W h. */
static inline __attribute__((always_inline)) void
hone_cpu_rmsnorm_matvec_compose(float *y, const void *W, const float *x, const float *g,
                                int64_t n, int64_t cols, float eps, float *scratch,
                                hone_cpu_rows_fn rows, int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(n, ith, nth, &r0, &r1);
    if (r0 == r1) return;
    hone_cpu_rmsnorm_row(scratch, x, g, cols, eps);
    rows(y + r0, W, scratch, r0, r1, cols);
}

#endif
