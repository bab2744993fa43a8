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

/* ---- the further GGML formats: 32 values (chunk k of a block) at a time -------------------
 * Each value is computed as ggml's dequantize_row_<dt> computes it in f32 (and gguf-py's
 * dequantizer, bit for bit): every scale product (f16 d times a small integer scale) is exact
 * in f32, and so is d * q in q5_0, q5_1, q2_K, q3_K, q4_K, q5_K and mxfp4; the one rounding is
 * then the subtraction of the min (q5_1: the addition of m), written as a fused multiply-add,
 * which equals the separate multiply and add exactly because the product is exact. q6_K alone
 * rounds the product (d * sc) * q, with d * sc exact: as ggml, one rounding. */

static inline void hone_cpu_deq_q5_0(const hone_block_q5_0 *restrict b, float *restrict out)
{
    float d = hone_cpu_half(b->d);
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    for (int j = 0; j < 16; j++) {
        int lo = (b->qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
        int hi = (b->qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
        out[j] = (float)(lo - 16) * d;
        out[j + 16] = (float)(hi - 16) * d;
    }
}

static inline void hone_cpu_deq_q5_1(const hone_block_q5_1 *restrict b, float *restrict out)
{
    float d = hone_cpu_half(b->d), m = hone_cpu_half(b->m);
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    for (int j = 0; j < 16; j++) {
        int lo = (b->qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
        int hi = (b->qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
        out[j] = fmaf((float)lo, d, m);
        out[j + 16] = fmaf((float)hi, d, m);
    }
}

/* e2m1 values doubled (ggml's kvalues_mxfp4), scaled by 2^(e - 128). */
static const int8_t hone_cpu_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static inline void hone_cpu_deq_mxfp4(const hone_block_mxfp4 *restrict b, float *restrict out)
{
    float d = hone_e8m0_half_to_f32(b->e);
    for (int j = 0; j < 16; j++) {
        out[j] = (float)hone_cpu_kvalues_mxfp4[b->qs[j] & 0xF] * d;
        out[j + 16] = (float)hone_cpu_kvalues_mxfp4[b->qs[j] >> 4] * d;
    }
}

/* q4_K / q5_K: scale and min of chunk j (0..7) from the 12 packed bytes (ggml's
 * get_scale_min_k4). */
static inline void hone_cpu_scale_min_k4(const uint8_t *q, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* chunk k: the low (k even) or high nibbles of qs[32 (k / 2) ..]; w = (d sc) q - dmin m. */
static inline void hone_cpu_deq_q4_k(const hone_block_q4_k *restrict b, int k, float *restrict out)
{
    int sc, m;
    hone_cpu_scale_min_k4(b->scales, k, &sc, &m);
    float d1 = hone_cpu_half(b->d) * (float)sc, m1 = hone_cpu_half(b->dmin) * (float)m;
    const uint8_t *q = b->qs + (k >> 1) * 32;
    int sh = (k & 1) * 4;
    for (int l = 0; l < 32; l++) out[l] = fmaf((float)((q[l] >> sh) & 0xF), d1, -m1);
}

/* chunk k: as q4_K, the 5th bit being bit k of qh[l]. */
static inline void hone_cpu_deq_q5_k(const hone_block_q5_k *restrict b, int k, float *restrict out)
{
    int sc, m;
    hone_cpu_scale_min_k4(b->scales, k, &sc, &m);
    float d1 = hone_cpu_half(b->d) * (float)sc, m1 = hone_cpu_half(b->dmin) * (float)m;
    const uint8_t *q = b->qs + (k >> 1) * 32;
    int sh = (k & 1) * 4;
    for (int l = 0; l < 32; l++) {
        int v = ((q[l] >> sh) & 0xF) | (((b->qh[l] >> k) & 1) << 4);
        out[l] = fmaf((float)v, d1, -m1);
    }
}

/* chunk k = 4 h + p (h: which 128-value half): low (p < 2) or high nibbles of
 * ql[64 h + 32 (p & 1) + l], 2 bits of qh[32 h + l] at 2 p; 16-value groups scaled by
 * scales[8 h + 2 p + l / 16]; w = (d sc) (q - 32). */
static inline void hone_cpu_deq_q6_k(const hone_block_q6_k *restrict b, int k, float *restrict out)
{
    int h = k >> 2, p = k & 3;
    const uint8_t *ql = b->ql + 64 * h + 32 * (p & 1), *qh = b->qh + 32 * h;
    int ns = (p >> 1) * 4, hs = 2 * p;
    float d = hone_cpu_half(b->d);
    for (int g = 0; g < 2; g++) {
        float ds = d * (float)b->scales[8 * h + 2 * p + g];
        for (int l = 16 * g; l < 16 * g + 16; l++) {
            int q = (((ql[l] >> ns) & 0xF) | (((qh[l] >> hs) & 3) << 4)) - 32;
            out[l] = ds * (float)q;
        }
    }
}

/* q3_K's 16 6-bit scales: low 4 bits in bytes 0..7 (s < 8: low nibble of byte s, else high
 * nibble of byte s - 8), high 2 bits in byte 8 + s % 4 at bit 2 (s / 4); stored + 32. */
static inline int hone_cpu_scale_q3_k(const uint8_t *sc, int s)
{
    int lo = s < 8 ? sc[s] & 0xF : sc[s - 8] >> 4;
    int hi = (sc[8 + (s & 3)] >> (2 * (s >> 2))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* chunk k = 4 h + j: 2 bits of qs[32 h + l] at 2 j, minus 4 where bit 4 h + j of hmask[l] is
 * clear; 16-value groups scaled by scale 8 h + 2 j + l / 16; w = (d sc) q. */
static inline void hone_cpu_deq_q3_k(const hone_block_q3_k *restrict b, int k, float *restrict out)
{
    int h = k >> 2, j = k & 3;
    const uint8_t *q = b->qs + 32 * h;
    int sh = 2 * j, mb = 4 * h + j;
    float d = hone_cpu_half(b->d);
    for (int g = 0; g < 2; g++) {
        float dl = d * (float)hone_cpu_scale_q3_k(b->scales, 8 * h + 2 * j + g);
        for (int l = 16 * g; l < 16 * g + 16; l++) {
            int v = ((q[l] >> sh) & 3) - (((b->hmask[l] >> mb) & 1) ? 0 : 4);
            out[l] = dl * (float)v;
        }
    }
}

/* chunk k = 4 h + j: 2 bits of qs[32 h + l] at 2 j; 16-value groups with scale byte
 * scales[8 h + 2 j + l / 16] (low nibble: scale, high: min); w = (d sc) q - dmin m. */
static inline void hone_cpu_deq_q2_k(const hone_block_q2_k *restrict b, int k, float *restrict out)
{
    int h = k >> 2, j = k & 3;
    const uint8_t *q = b->qs + 32 * h;
    int sh = 2 * j;
    float d = hone_cpu_half(b->d), dmin = hone_cpu_half(b->dmin);
    for (int g = 0; g < 2; g++) {
        int s = b->scales[8 * h + 2 * j + g];
        float dl = d * (float)(s & 0xF), ml = dmin * (float)(s >> 4);
        for (int l = 16 * g; l < 16 * g + 16; l++) out[l] = fmaf((float)((q[l] >> sh) & 3), dl, -ml);
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

/* The further formats, 16 lanes per half of a 32-value chunk. Each lane computes the scalar
 * path's operations on the same operands (the scales as the same f32 scalars, the same fused
 * multiply-adds), so the bits are the scalar ones. blk is the 32-value chunk of the row; the
 * K formats' block is blk / 8, its chunk blk % 8. */
static inline __m512 hone_cpu_v_iota16(void)
{
    return _mm512_castsi512_ps(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

/* 16 bytes at p widened to 16 u32 lanes. */
static inline __m512i hone_cpu_v_u8x16(const uint8_t *p)
{
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
}

/* The 5-bit values of a q5_0 / q5_1 block: nibbles of qs and bit j of qh. */
static inline void hone_cpu_v_q5(const uint8_t *qs, const uint8_t *qhp, __m512i *lo, __m512i *hi)
{
    uint32_t qh;
    memcpy(&qh, qhp, 4);
    __m512i iota = _mm512_castps_si512(hone_cpu_v_iota16()), one = _mm512_set1_epi32(1);
    __m512i h = _mm512_set1_epi32((int)qh), nib = _mm512_set1_epi32(0xF);
    __m512i q = hone_cpu_v_u8x16(qs);
    __m512i hl = _mm512_slli_epi32(_mm512_and_si512(_mm512_srlv_epi32(h, iota), one), 4);
    __m512i hh = _mm512_slli_epi32(_mm512_and_si512(_mm512_srlv_epi32(_mm512_srli_epi32(h, 16), iota), one), 4);
    *lo = _mm512_or_si512(_mm512_and_si512(q, nib), hl);
    *hi = _mm512_or_si512(_mm512_srli_epi32(q, 4), hh);
}

static inline void hone_cpu_deqv_q5_0(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const hone_block_q5_0 *b = (const hone_block_q5_0 *)row + blk;
    __m512 d = _mm512_set1_ps(hone_cpu_half(b->d));
    __m512i l, h, s16 = _mm512_set1_epi32(16);
    hone_cpu_v_q5(b->qs, b->qh, &l, &h);
    *lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(l, s16)), d);
    *hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(h, s16)), d);
}

static inline void hone_cpu_deqv_q5_1(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const hone_block_q5_1 *b = (const hone_block_q5_1 *)row + blk;
    __m512 d = _mm512_set1_ps(hone_cpu_half(b->d)), m = _mm512_set1_ps(hone_cpu_half(b->m));
    __m512i l, h;
    hone_cpu_v_q5(b->qs, b->qh, &l, &h);
    *lo = _mm512_fmadd_ps(_mm512_cvtepi32_ps(l), d, m);
    *hi = _mm512_fmadd_ps(_mm512_cvtepi32_ps(h), d, m);
}

/* mxfp4: a 16-entry table (kvalue * d, each the scalar product) picked by nibble, as q4_0. */
static inline void hone_cpu_deqv_mxfp4(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const hone_block_mxfp4 *b = (const hone_block_mxfp4 *)row + blk;
    const __m512 kv = _mm512_setr_ps(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    __m512 table = _mm512_mul_ps(kv, _mm512_set1_ps(hone_e8m0_half_to_f32(b->e)));
    __m512i q = hone_cpu_v_u8x16(b->qs);
    *lo = _mm512_permutexvar_ps(q, table);
    *hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), table);
}

static inline void hone_cpu_deqv_q4_k(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const hone_block_q4_k *b = (const hone_block_q4_k *)row + (blk >> 3);
    int k = (int)(blk & 7), sc, m;
    hone_cpu_scale_min_k4(b->scales, k, &sc, &m);
    __m512 d1 = _mm512_set1_ps(hone_cpu_half(b->d) * (float)sc);
    __m512 m1 = _mm512_set1_ps(hone_cpu_half(b->dmin) * (float)m);
    const uint8_t *q = b->qs + (k >> 1) * 32;
    __m128i sh = _mm_cvtsi32_si128((k & 1) * 4);
    __m512i nib = _mm512_set1_epi32(0xF);
    __m512i a = _mm512_and_si512(_mm512_srl_epi32(hone_cpu_v_u8x16(q), sh), nib);
    __m512i c = _mm512_and_si512(_mm512_srl_epi32(hone_cpu_v_u8x16(q + 16), sh), nib);
    *lo = _mm512_fmsub_ps(_mm512_cvtepi32_ps(a), d1, m1);
    *hi = _mm512_fmsub_ps(_mm512_cvtepi32_ps(c), d1, m1);
}

static inline void hone_cpu_deqv_q5_k(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const hone_block_q5_k *b = (const hone_block_q5_k *)row + (blk >> 3);
    int k = (int)(blk & 7), sc, m;
    hone_cpu_scale_min_k4(b->scales, k, &sc, &m);
    __m512 d1 = _mm512_set1_ps(hone_cpu_half(b->d) * (float)sc);
    __m512 m1 = _mm512_set1_ps(hone_cpu_half(b->dmin) * (float)m);
    const uint8_t *q = b->qs + (k >> 1) * 32;
    __m128i sh = _mm_cvtsi32_si128((k & 1) * 4), hb = _mm_cvtsi32_si128(k);
    __m512i nib = _mm512_set1_epi32(0xF), one = _mm512_set1_epi32(1);
    __m512i a = _mm512_and_si512(_mm512_srl_epi32(hone_cpu_v_u8x16(q), sh), nib);
    __m512i c = _mm512_and_si512(_mm512_srl_epi32(hone_cpu_v_u8x16(q + 16), sh), nib);
    a = _mm512_or_si512(a, _mm512_slli_epi32(_mm512_and_si512(_mm512_srl_epi32(hone_cpu_v_u8x16(b->qh), hb), one), 4));
    c = _mm512_or_si512(c, _mm512_slli_epi32(_mm512_and_si512(_mm512_srl_epi32(hone_cpu_v_u8x16(b->qh + 16), hb), one), 4));
    *lo = _mm512_fmsub_ps(_mm512_cvtepi32_ps(a), d1, m1);
    *hi = _mm512_fmsub_ps(_mm512_cvtepi32_ps(c), d1, m1);
}

static inline void hone_cpu_deqv_q6_k(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const hone_block_q6_k *b = (const hone_block_q6_k *)row + (blk >> 3);
    int k = (int)(blk & 7), h = k >> 2, p = k & 3;
    const uint8_t *ql = b->ql + 64 * h + 32 * (p & 1), *qh = b->qh + 32 * h;
    __m128i ns = _mm_cvtsi32_si128((p >> 1) * 4), hs = _mm_cvtsi32_si128(2 * p);
    float d = hone_cpu_half(b->d);
    __m512i nib = _mm512_set1_epi32(0xF), three = _mm512_set1_epi32(3), s32 = _mm512_set1_epi32(32);
    __m512 out[2];
    for (int g = 0; g < 2; g++) {
        __m512i a = _mm512_and_si512(_mm512_srl_epi32(hone_cpu_v_u8x16(ql + 16 * g), ns), nib);
        __m512i e = _mm512_and_si512(_mm512_srl_epi32(hone_cpu_v_u8x16(qh + 16 * g), hs), three);
        __m512i q = _mm512_sub_epi32(_mm512_or_si512(a, _mm512_slli_epi32(e, 4)), s32);
        out[g] = _mm512_mul_ps(_mm512_set1_ps(d * (float)b->scales[8 * h + 2 * p + g]), _mm512_cvtepi32_ps(q));
    }
    *lo = out[0];
    *hi = out[1];
}

static inline void hone_cpu_deqv_q3_k(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const hone_block_q3_k *b = (const hone_block_q3_k *)row + (blk >> 3);
    int k = (int)(blk & 7), h = k >> 2, j = k & 3;
    const uint8_t *q = b->qs + 32 * h;
    __m128i sh = _mm_cvtsi32_si128(2 * j), mb = _mm_cvtsi32_si128(4 * h + j);
    float d = hone_cpu_half(b->d);
    __m512i three = _mm512_set1_epi32(3), one = _mm512_set1_epi32(1);
    __m512 out[2];
    for (int g = 0; g < 2; g++) {
        __m512i a = _mm512_and_si512(_mm512_srl_epi32(hone_cpu_v_u8x16(q + 16 * g), sh), three);
        __m512i m = _mm512_and_si512(_mm512_srl_epi32(hone_cpu_v_u8x16(b->hmask + 16 * g), mb), one);
        __m512i v = _mm512_sub_epi32(a, _mm512_slli_epi32(_mm512_xor_si512(m, one), 2));
        float dl = d * (float)hone_cpu_scale_q3_k(b->scales, 8 * h + 2 * j + g);
        out[g] = _mm512_mul_ps(_mm512_set1_ps(dl), _mm512_cvtepi32_ps(v));
    }
    *lo = out[0];
    *hi = out[1];
}

static inline void hone_cpu_deqv_q2_k(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const hone_block_q2_k *b = (const hone_block_q2_k *)row + (blk >> 3);
    int k = (int)(blk & 7), h = k >> 2, j = k & 3;
    const uint8_t *q = b->qs + 32 * h;
    __m128i sh = _mm_cvtsi32_si128(2 * j);
    float d = hone_cpu_half(b->d), dmin = hone_cpu_half(b->dmin);
    __m512i three = _mm512_set1_epi32(3);
    __m512 out[2];
    for (int g = 0; g < 2; g++) {
        int s = b->scales[8 * h + 2 * j + g];
        __m512i a = _mm512_and_si512(_mm512_srl_epi32(hone_cpu_v_u8x16(q + 16 * g), sh), three);
        out[g] = _mm512_fmsub_ps(_mm512_cvtepi32_ps(a), _mm512_set1_ps(d * (float)(s & 0xF)),
                                 _mm512_set1_ps(dmin * (float)(s >> 4)));
    }
    *lo = out[0];
    *hi = out[1];
}

/* K formats, decode: a whole 256-value block at a time, its scales unpacked once (the per-chunk
 * deqv above unpacks them for every 32 values). Each value is the same operations on the same
 * operands as hone_cpu_deqv_<dt> (so as the scalar path), and the fmas run in the same element
 * order into the same 16 lanes: the bits of hone_cpu_matvec_simd. */
typedef void (*hone_cpu_deqv256_fn)(const uint8_t *blk, __m512 w[16]);

static inline __attribute__((always_inline)) void hone_cpu_deqv256_q4_k(const uint8_t *blk, __m512 w[16])
{
    const hone_block_q4_k *b = (const hone_block_q4_k *)blk;
    float d = hone_cpu_half(b->d), dmin = hone_cpu_half(b->dmin);
    __m512i nib = _mm512_set1_epi32(0xF);
    for (int k = 0; k < 8; k += 2) {
        int sc0, m0, sc1, m1;
        hone_cpu_scale_min_k4(b->scales, k, &sc0, &m0);
        hone_cpu_scale_min_k4(b->scales, k + 1, &sc1, &m1);
        __m512 d0 = _mm512_set1_ps(d * (float)sc0), n0 = _mm512_set1_ps(dmin * (float)m0);
        __m512 d1 = _mm512_set1_ps(d * (float)sc1), n1 = _mm512_set1_ps(dmin * (float)m1);
        const uint8_t *q = b->qs + (k >> 1) * 32;
        for (int g = 0; g < 2; g++) {
            __m512i v = hone_cpu_v_u8x16(q + 16 * g);
            w[2 * k + g] = _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_and_si512(v, nib)), d0, n0);
            w[2 * k + 2 + g] = _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4)), d1, n1);
        }
    }
}

static inline __attribute__((always_inline)) void hone_cpu_deqv256_q6_k(const uint8_t *blk, __m512 w[16])
{
    const hone_block_q6_k *b = (const hone_block_q6_k *)blk;
    float d = hone_cpu_half(b->d);
    __m512i nib = _mm512_set1_epi32(0xF), three = _mm512_set1_epi32(3), s32 = _mm512_set1_epi32(32);
    for (int h = 0; h < 2; h++)
        for (int g = 0; g < 2; g++) {
            __m512i qh = hone_cpu_v_u8x16(b->qh + 32 * h + 16 * g);
            __m512i l0 = hone_cpu_v_u8x16(b->ql + 64 * h + 16 * g);
            __m512i l1 = hone_cpu_v_u8x16(b->ql + 64 * h + 32 + 16 * g);
            __m512i lo[4] = {_mm512_and_si512(l0, nib), _mm512_and_si512(l1, nib),
                             _mm512_srli_epi32(l0, 4), _mm512_srli_epi32(l1, 4)};
            for (int p = 0; p < 4; p++) {
                __m512i e = _mm512_and_si512(_mm512_srli_epi32(qh, 2 * p), three);
                __m512i q = _mm512_sub_epi32(_mm512_or_si512(lo[p], _mm512_slli_epi32(e, 4)), s32);
                float ds = d * (float)b->scales[8 * h + 2 * p + g];
                w[2 * (4 * h + p) + g] = _mm512_mul_ps(_mm512_set1_ps(ds), _mm512_cvtepi32_ps(q));
            }
        }
}

/* y[r] = W[r] . x, block by block: the 16 vectors of a block against x in element order. */
static inline __attribute__((always_inline)) void
hone_cpu_matvec_simd_k(float *restrict y, const void *W, const float *restrict x, int64_t rows,
                       int64_t cols, int64_t block_bytes, hone_cpu_deqv256_fn deqv256, int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    int64_t nb = cols / 256;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *rw = (const uint8_t *)W + r * nb * block_bytes;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            __m512 w[16];
            deqv256(rw + b * block_bytes, w);
            const float *xb = x + b * 256;
            for (int i = 0; i < 16; i++) acc = _mm512_fmadd_ps(w[i], _mm512_loadu_ps(xb + 16 * i), acc);
        }
        y[r] = hone_cpu_zmm_sum(acc);
    }
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
HONE_CPU_DEQR_BLOCK(q5_0)
HONE_CPU_DEQR_BLOCK(q5_1)
HONE_CPU_DEQR_BLOCK(mxfp4)
#undef HONE_CPU_DEQR_BLOCK
/* The K formats: chunk c0 / 32 of the row, i.e. chunk (c0 / 32) % 8 of block c0 / 256. */
#define HONE_CPU_DEQR_KBLOCK(dt)                                                                  \
    static inline void hone_cpu_deqr_##dt(const void *row, int64_t c0, int n, float *out)         \
    {                                                                                             \
        (void)n;                                                                                  \
        hone_cpu_deq_##dt((const hone_block_##dt *)row + c0 / 256, (int)((c0 / 32) & 7), out);    \
    }
HONE_CPU_DEQR_KBLOCK(q2_k)
HONE_CPU_DEQR_KBLOCK(q3_k)
HONE_CPU_DEQR_KBLOCK(q4_k)
HONE_CPU_DEQR_KBLOCK(q5_k)
HONE_CPU_DEQR_KBLOCK(q6_k)
#undef HONE_CPU_DEQR_KBLOCK

/* The deqr of the formats without a hand-written case in embed and hone_dtype_dequant_row
 * (q5_0 .. mxfp4); NULL for the others. */
static inline hone_cpu_deq_fn hone_cpu_deqr_for(int dt)
{
    switch (dt) {
    case HONE_DTYPE_Q5_0: return hone_cpu_deqr_q5_0;
    case HONE_DTYPE_Q5_1: return hone_cpu_deqr_q5_1;
    case HONE_DTYPE_MXFP4: return hone_cpu_deqr_mxfp4;
    case HONE_DTYPE_Q2_K: return hone_cpu_deqr_q2_k;
    case HONE_DTYPE_Q3_K: return hone_cpu_deqr_q3_k;
    case HONE_DTYPE_Q4_K: return hone_cpu_deqr_q4_k;
    case HONE_DTYPE_Q5_K: return hone_cpu_deqr_q5_k;
    case HONE_DTYPE_Q6_K: return hone_cpu_deqr_q6_k;
    default: return NULL;
    }
}

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
