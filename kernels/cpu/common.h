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
#include "engine/kv_layout.h"

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

/* ---- expf: glibc's algorithm, in the kernels' own code -----------------------------------
 * glibc's expf (sysdeps/ieee754/flt-32/e_expf.c as x86-64's FMA build runs it): x * 32 / ln 2 =
 * k + r, 2^(k/32) from a 32-entry table with k's high bits added to the exponent field, a cubic
 * in r, all in double, rounded once to float. Written here so that every path (the vector one
 * below, the scalar one, any libm) gives the same bits; tests/kernels/test_expf.c checks both
 * against libm's expf on every float where libm is glibc's FMA build. */
static const uint64_t hone_cpu_exp2f_tab[32] = {
    0x3ff0000000000000ull, 0x3fefd9b0d3158574ull, 0x3fefb5586cf9890full, 0x3fef9301d0125b51ull,
    0x3fef72b83c7d517bull, 0x3fef54873168b9aaull, 0x3fef387a6e756238ull, 0x3fef1e9df51fdee1ull,
    0x3fef06fe0a31b715ull, 0x3feef1a7373aa9cbull, 0x3feedea64c123422ull, 0x3feece086061892dull,
    0x3feebfdad5362a27ull, 0x3feeb42b569d4f82ull, 0x3feeab07dd485429ull, 0x3feea47eb03a5585ull,
    0x3feea09e667f3bcdull, 0x3fee9f75e8ec5f74ull, 0x3feea11473eb0187ull, 0x3feea589994cce13ull,
    0x3feeace5422aa0dbull, 0x3feeb737b0cdc5e5ull, 0x3feec49182a3f090ull, 0x3feed503b23e255dull,
    0x3feee89f995ad3adull, 0x3feeff76f2fb5e47ull, 0x3fef199bdd85529cull, 0x3fef3720dcef9069ull,
    0x3fef5818dcfba487ull, 0x3fef7c97337b9b5full, 0x3fefa4afa2a490daull, 0x3fefd0765b6e4540ull,
};
#define HONE_CPU_EXPF_INVLN2N (0x1.71547652b82fep+0 * 32)
#define HONE_CPU_EXPF_SHIFT 0x1.8p+52
#define HONE_CPU_EXPF_C0 (0x1.c6af84b912394p-5 / 32 / 32 / 32)
#define HONE_CPU_EXPF_C1 (0x1.ebfce50fac4f3p-3 / 32 / 32)
#define HONE_CPU_EXPF_C2 (0x1.62e42ff0c52d6p-1 / 32)

static inline float hone_cpu_expf(float x)
{
    uint32_t ux;
    memcpy(&ux, &x, 4);
    uint32_t abstop = (ux >> 20) & 0x7ff;
    if (abstop >= 0x42b) {                          /* |x| >= 88 (top 12 bits of 88.0f), or NaN */
        if (ux == 0xff800000u) return 0.0f;         /* -inf */
        if (abstop >= 0x7f8) return x + x;          /* inf, NaN */
        if (x > 0x1.62e42ep6f) return (float)INFINITY;
        if (x < -0x1.9fe368p6f) return 0.0f;
    }
    double xd = (double)x, z = HONE_CPU_EXPF_INVLN2N * xd, kd = z + HONE_CPU_EXPF_SHIFT;
    uint64_t ki, t;
    memcpy(&ki, &kd, 8);
    kd -= HONE_CPU_EXPF_SHIFT;
    double r = fma(HONE_CPU_EXPF_INVLN2N, xd, -kd);
    t = hone_cpu_exp2f_tab[ki % 32] + (ki << 47);
    double sc;
    memcpy(&sc, &t, 8);
    double zz = fma(HONE_CPU_EXPF_C0, r, HONE_CPU_EXPF_C1), r2 = r * r;
    double y = fma(HONE_CPU_EXPF_C2, r, 1.0);
    y = fma(zz, r2, y);
    return (float)(y * sc);
}

/* A segment's softmax state: its maximum score and its normaliser (the sum of exp(score - m)
 * in key order, in double). */
typedef struct {
    float m;
    double l;
} hone_cpu_att_ml;

/* The item a decode share takes after this tile (kv head kvh, keys k0 .. k0 + n - 1; n = 0: none):
 * its first HONE_CPU_ATT_FAR K steps are prefetched into L2 during this tile's last V steps, so a
 * segment's first steps no longer wait for memory. Zen 5, SmolLM2 q4_0 at 4k keys, 2 threads,
 * `hone profile --prompt 4000 --tokens 48`, old / new alternated (4 pairs): attention_decode
 * 232-243 -> 212-230 ms (ratios 0.88-0.95); one thread over 30 layers' cold K/V (6 pairs):
 * 0.93-1.03, median 0.95. */
typedef struct {
    int64_t kvh, k0, n;
} hone_cpu_att_next;

/* Folds a segment into a row's running state (the row's unnormalised output A and its (m, l)),
 * segments in key order: M = the larger maximum (a NaN does not replace it, as in the row's
 * own maximum), a = exp(m_row - M), b = exp(m_seg - M); l_row = l_row a + l_seg b in double,
 * A[d] = fma(o[d], b, A[d] a). The first segment is the state itself; after the last,
 * out = A * (float)(1.0 / l), as for a row of one segment. */
static inline void hone_cpu_att_fold(float *restrict A, hone_cpu_att_ml *acc, const float *restrict o,
                                     hone_cpu_att_ml seg, int64_t head_dim)
{
    float M = acc->m;
    if (seg.m > M) M = seg.m;
    float a = hone_cpu_expf(acc->m - M), b = hone_cpu_expf(seg.m - M);
    double la = acc->l * (double)a, lb = seg.l * (double)b;
    acc->l = la + lb;
    acc->m = M;
    for (int64_t d = 0; d < head_dim; d++) {
        float t = A[d] * a;
        A[d] = fmaf(o[d], b, t);
    }
}

/* The end of a row: out = A * (float)(1.0 / l), the one reciprocal of every path. */
static inline void hone_cpu_att_normalise(float *out, double l, int64_t head_dim)
{
    float inv = (float)(1.0 / l);
    for (int64_t d = 0; d < head_dim; d++) out[d] *= inv;
}

/* The keys of segment j of a row of n_kv keys (0 past its last). */
static inline int64_t hone_cpu_att_seg_len(int64_t n_kv, int64_t j)
{
    int64_t n = n_kv - j * HONE_ATT_SEG;
    return n <= 0 ? 0 : n < HONE_ATT_SEG ? n : HONE_ATT_SEG;
}

/* One segment of a row (keys k0 .. k0 + n_kv - 1) in plain C: out gets its unnormalised
 * output, the return its (m, l). */
static inline hone_cpu_att_ml hone_cpu_attend_seg_generic(float *restrict out, const float *restrict q,
                                       const float *k_cache, const float *v_cache,
                                       const int32_t *block_table, int64_t k0, int64_t n_kv,
                                       int64_t block_size, int64_t n_kv_heads, int64_t kvh,
                                       int64_t head_dim, float scale, float *restrict scores)
{
    int64_t full = head_dim / 32 * 32;
    float mx = -INFINITY;
    for (int64_t j = 0; j < n_kv; j++) {
        const float *k = k_cache + hone_kv_offset(block_table, k0 + j, block_size, n_kv_heads, kvh, head_dim);
        float acc[HONE_LANES] = {0};
        for (int64_t c = 0; c < full; c += 32) hone_cpu_dot32(acc, k + c, q + c);
        if (full < head_dim) hone_cpu_dot_tail(acc, k + full, q, full, head_dim);
        float s = hone_cpu_lanes_sum(acc) * scale;
        scores[j] = s;
        if (s > mx) mx = s;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n_kv; j++) {
        scores[j] = hone_cpu_expf(scores[j] - mx);
        sum += scores[j];
    }
    for (int64_t d = 0; d < head_dim; d++) out[d] = 0.0f;
    for (int64_t j = 0; j < n_kv; j++) {
        const float *v = v_cache + hone_kv_offset(block_table, k0 + j, block_size, n_kv_heads, kvh, head_dim);
        float p = scores[j];
        for (int64_t d = 0; d < head_dim; d++) out[d] = fmaf(p, v[d], out[d]);
    }
    return (hone_cpu_att_ml){mx, sum};
}

/* A segment function: the generic one above, or a vector one of the same bits. */
typedef hone_cpu_att_ml (*hone_cpu_att_seg_fn)(float *restrict out, const float *restrict q, const float *k_cache,
                                               const float *v_cache, const int32_t *block_table, int64_t k0,
                                               int64_t n_kv, int64_t block_size, int64_t n_kv_heads, int64_t kvh,
                                               int64_t head_dim, float scale, float *restrict scores);

/* A row from its segments: the first into out, each further one into a stack row and folded
 * in, then the normalisation. scores: >= min(n_kv, HONE_ATT_SEG) floats. */
static inline __attribute__((always_inline)) void
hone_cpu_attend_row_segs(hone_cpu_att_seg_fn seg, float *restrict out, const float *restrict q,
                         const float *k_cache, const float *v_cache, const int32_t *block_table, int64_t n_kv,
                         int64_t block_size, int64_t n_kv_heads, int64_t kvh, int64_t head_dim, float scale,
                         float *restrict scores)
{
    hone_cpu_att_ml acc = seg(out, q, k_cache, v_cache, block_table, 0, hone_cpu_att_seg_len(n_kv, 0), block_size,
                              n_kv_heads, kvh, head_dim, scale, scores);
    for (int64_t j = 1; j * HONE_ATT_SEG < n_kv; j++) {
        float o[head_dim];
        hone_cpu_att_ml p = seg(o, q, k_cache, v_cache, block_table, j * HONE_ATT_SEG, hone_cpu_att_seg_len(n_kv, j),
                                block_size, n_kv_heads, kvh, head_dim, scale, scores);
        hone_cpu_att_fold(out, &acc, o, p, head_dim);
    }
    hone_cpu_att_normalise(out, acc.l, head_dim);
}

/* One attention row: out[d] = sum_j softmax_j(scale * q . K_j) V_j[d] over keys j < n_kv of
 * the paged cache (kv head kvh), in plain C (every head dim). Scores are dot products in the
 * lane order above; the softmax normaliser is summed in double; V is accumulated in key order;
 * past HONE_ATT_SEG keys a segment at a time, folded. Shared by attention_decode and
 * attention_prefill so that both give the same bits for the same row. */
static inline void hone_cpu_attend_row_generic(float *restrict out, const float *restrict q,
                                               const float *k_cache, const float *v_cache,
                                               const int32_t *block_table, int64_t n_kv,
                                               int64_t block_size, int64_t n_kv_heads, int64_t kvh,
                                               int64_t head_dim, float scale, float *restrict scores)
{
    hone_cpu_attend_row_segs(hone_cpu_attend_seg_generic, out, q, k_cache, v_cache, block_table, n_kv, block_size,
                             n_kv_heads, kvh, head_dim, scale, scores);
}

#ifdef __AVX__
/* Prefetch and fixed-arithmetic helpers of both SIMD paths (the AVX-512 and the AVX2 ones; the
 * measurements behind the distance are at hone_cpu_matvec_simd and HONE_CPU_AVX2_ROWS). */
#define HONE_CPU_MATVEC_PREFETCH 16384 /* bytes ahead of the blocks being read */

/* The arithmetic where two operands may be NaN, as fixed instructions: a compiler may commute
 * the operands of an add or pick another fma form per call site, and x86 keeps the first
 * source's NaN, so a NaN's sign would depend on the instance that computed the row (the R x T
 * tile, the matvec's row group, the share). With these every instance gives the same bits.
 * c + a b (the accumulator first): */
static inline __m256 hone_cpu_v8_fma(__m256 a, __m256 b, __m256 c)
{
    __asm__("vfmadd231ps %2, %1, %0" : "+v"(c) : "v"(a), "vm"(b));
    return c;
}
static inline __m256 hone_cpu_v8_add(__m256 a, __m256 b)
{
    __m256 r;
    __asm__("vaddps %2, %1, %0" : "=v"(r) : "v"(a), "vm"(b));
    return r;
}
static inline __m128 hone_cpu_v4_add(__m128 a, __m128 b)
{
    __m128 r;
    __asm__("vaddps %2, %1, %0" : "=v"(r) : "v"(a), "vm"(b));
    return r;
}
static inline __m128 hone_cpu_v4_add_ss(__m128 a, __m128 b)
{
    __m128 r;
    __asm__("vaddss %2, %1, %0" : "=v"(r) : "v"(a), "vm"(b));
    return r;
}

/* Prefetches the cache lines of [p, p + n) that lie before end (the share's last byte + 1). */
static inline __attribute__((always_inline)) void hone_cpu_prefetch_span(const uint8_t *p, int64_t n,
                                                                         const uint8_t *end)
{
    for (const uint8_t *e = p + n; p < e && p < end; p += 64) _mm_prefetch((const char *)p, _MM_HINT_T0);
}

/* The group-ahead prefetch of the matvecs that read R contiguous rows side by side (the staged
 * block formats, the K formats): at block b of the group at rw, the R blocks' worth of bytes
 * that lie a group (R rows of row_bytes) plus HONE_CPU_MATVEC_PREFETCH ahead, so over the
 * group's blocks the next group's rows are brought in while this one's run. */
static inline __attribute__((always_inline)) void hone_cpu_prefetch_group(const uint8_t *rw, int R, int64_t row_bytes,
                                                                          int64_t b, int64_t block_bytes,
                                                                          const uint8_t *end)
{
    hone_cpu_prefetch_span(rw + R * row_bytes + HONE_CPU_MATVEC_PREFETCH + b * R * block_bytes, R * block_bytes, end);
}

/* The same into L2 (the float formats' stream: see hone_cpu_matvec_simd). */
static inline __attribute__((always_inline)) void hone_cpu_prefetch_span_l2(const uint8_t *p, int64_t n,
                                                                            const uint8_t *end)
{
    for (const uint8_t *e = p + n; p < e && p < end; p += 64) _mm_prefetch((const char *)p, _MM_HINT_T1);
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
/* AVX-512 paths: one zmm holds the 16 lanes, so the lane order is the generic one exactly
 * (the low 16 values of a block, then the high 16, fused into the same lanes); the tree sum
 * below is hone_cpu_lanes_sum. Tokens (matmul) are interleaved so their independent fma chains
 * hide latency; each output's own order is unchanged. */
#define HONE_CPU_SIMD 1

/* The two halves (values 0..15 and 16..31) of block `blk` of a row, dequantised exactly. */
typedef void (*hone_cpu_deqv_fn)(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi);

/* The fixed-instruction add (hone_cpu_v8_add) at 512 bits, for the tree sums below (one row's,
 * eight rows' at once): every path that sums a row gives the same bits, NaNs included. */
static inline __m512 hone_cpu_v16_add(__m512 a, __m512 b)
{
    __m512 r;
    __asm__("vaddps %2, %1, %0" : "=v"(r) : "v"(a), "vm"(b));
    return r;
}

static inline float hone_cpu_zmm_sum(__m512 acc)
{
    __m256 s8 = hone_cpu_v8_add(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
    __m128 s4 = hone_cpu_v4_add(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = hone_cpu_v4_add(s4, _mm_movehl_ps(s4, s4));    /* [s4_0 + s4_2, s4_1 + s4_3] */
    __m128 s1 = hone_cpu_v4_add_ss(s2, _mm_movehdup_ps(s2));    /* s2_0 + s2_1 */
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
 * 1-3 KiB long, decoded f32 at 94 tok/s, one row at a time at 107-110 (same bits). The share's
 * weights 4 KiB ahead are prefetched as the blocks go (the hardware prefetcher alone keeps too
 * few lines in flight for one core: SmolLM2 decode on one Ice Lake core, old vs new interleaved
 * x3, f16 28-30 -> 32-35 tok/s, bf16 25-27 -> 33-37, f32 17.1-17.6 -> 17.6-18.7). 16 KiB ahead,
 * not 4: on the 2-core Sapphire Rapids two cores streaming a layer's seven matrices (5-25 us a
 * call) kept too few lines in flight at 4 KiB (SmolLM2 decode, 2 threads, 3 interleaved pairs:
 * q8_0 127-129 -> 148-151 tok/s, q4_1 171-173 -> 198-222, q4_0 219-230 -> 239-245, f16 101-102
 * -> 106-108; f32 unchanged; 8 and 32 KiB measured between and equal in a harness). The float
 * formats' one-row stream (hone_cpu_matvec_simd) prefetches into L2, the staged block formats'
 * into L1: an L1 prefetch holds one of 16 fill buffers until its line arrives (3 interleaved
 * pairs, L2 against L1: f16 102-104 -> 106-116 tok/s, bf16 99-102 -> 104-111, f32 51-53 -> 54;
 * q4_0 / q4_1 measured 3-7% slower into L2 in a harness of a layer's shapes). The distance is
 * HONE_CPU_MATVEC_PREFETCH, above. */

static inline __attribute__((always_inline)) void
hone_cpu_matvec_simd(float *restrict y, const void *W, const float *restrict x, int64_t rows,
                     int64_t cols, int64_t row_bytes, hone_cpu_deqv_fn deqv, hone_cpu_deq_fn deq,
                     int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    int64_t nb = cols / 32, full = nb * 32, step = nb > 0 ? row_bytes / nb : 0;
    const uint8_t *end = (const uint8_t *)W + r1 * row_bytes;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *rw = (const uint8_t *)W + r * row_bytes;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            __m512 lo, hi;
            hone_cpu_prefetch_span_l2(rw + HONE_CPU_MATVEC_PREFETCH + b * step, step, end);
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

/* out[k] = hone_cpu_zmm_sum(a[k]) for k < 8, bit for bit, in 24 vector operations instead of
 * 64: each level of the fixed tree (l + 8, + 4, + 2, + 1) adds the same two values of every
 * accumulator, with the same one first (so NaN payloads too), with two accumulators' halves
 * side by side in one register. After the four levels lane 4k holds a[k], lane 4k + 1 a[k + 4]. */
static inline __attribute__((always_inline)) void hone_cpu_zmm_sum8(const __m512 a[8], float out[8])
{
    __m512 s8[4], s4[2];
    for (int k = 0; k < 4; k++) /* [a[2k] l + a[2k] l+8 (l < 8), a[2k+1] likewise] */
        s8[k] = hone_cpu_v16_add(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0x44),
                                 _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0xee));
    for (int k = 0; k < 2; k++) /* 128-bit lane j: accumulator 4k + j, l + (l + 4) */
        s4[k] = hone_cpu_v16_add(_mm512_shuffle_f32x4(s8[2 * k], s8[2 * k + 1], 0x88),
                                 _mm512_shuffle_f32x4(s8[2 * k], s8[2 * k + 1], 0xdd));
    /* lane j: [s4_0 + s4_2, s4_1 + s4_3] of accumulator j, then of accumulator j + 4 */
    __m512 s2 = hone_cpu_v16_add(_mm512_shuffle_ps(s4[0], s4[1], 0x44), _mm512_shuffle_ps(s4[0], s4[1], 0xee));
    __m512 s1 = hone_cpu_v16_add(_mm512_shuffle_ps(s2, s2, 0x88), _mm512_shuffle_ps(s2, s2, 0xdd));
    float v[16];
    _mm512_storeu_ps(v, s1);
    for (int k = 0; k < 4; k++) {
        out[k] = v[4 * k];
        out[k + 4] = v[4 * k + 1];
    }
}

/* Block blk of a row from its staged f32 scale sc[0] (and min sc[1]). The wrappers stay written out
 * (not generated by a macro): the LLM prompt quotes each helper the incumbent uses by its definition. */
typedef void (*hone_cpu_deqs_fn)(const uint8_t *row, int64_t blk, const float *sc, __m512 *lo, __m512 *hi);

/* Blocks of scales staged per group of rows (two groups in flight). */
#define HONE_CPU_STAGE_MAX 1024
#define HONE_CPU_STAGE_ROWS 8
#define HONE_CPU_STAGE_ROWS_MIN 4 /* rows too long for 8 rows' scales */
#define HONE_CPU_KSPLIT_ROWS 96 /* the most rows of a chunk whose pieces are carried */

/* The f16 scale fields (fields words at the start of each block) of the nblk consecutive blocks at
 * p, converted to f32 in block order into sc, as many blocks at a time as one 128-byte window (64
 * words) holds: the window's two vectors and one two-source word permute gather their fields
 * (q4_0's 18-byte blocks: 8 blocks a window, q4_1's 20: 7, q8_0's 34: 4), which are converted
 * together (F16C, as hone_cpu_half: the same values) and stored under a mask. The last window
 * loads only the words up to its last field (masked), so nothing past the blocks is read. */
static inline __attribute__((always_inline)) void hone_cpu_stage_fields(const uint8_t *p, int64_t nblk,
                                                                        int64_t block_bytes, int fields,
                                                                        float *restrict sc)
{
    int sw = (int)(block_bytes / 2), k = (64 - fields) / sw + 1;
    if (k * fields > 16) k = 16 / fields;
    uint16_t ix[32] __attribute__((aligned(64))) = {0};
    for (int i = 0; i < k * fields; i++) ix[i] = (uint16_t)((i / fields) * sw + i % fields);
    __m512i idx = _mm512_load_si512((const void *)ix);
    __mmask16 full = (__mmask16)((1u << (k * fields)) - 1);
    for (int64_t b = 0; b < nblk; b += k, p += k * block_bytes, sc += k * fields) {
        __m512i a, c;
        __mmask16 st = full;
        if (nblk - b > k || (nblk - b == k && k * block_bytes >= 128)) {
            a = _mm512_loadu_si512((const void *)p);
            c = _mm512_loadu_si512((const void *)(p + 64));
        } else {
            int last = (int)(nblk - b - 1) * sw + fields; /* words to load */
            __mmask64 m = last >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << last) - 1);
            a = _mm512_maskz_loadu_epi16((__mmask32)m, p);
            c = _mm512_maskz_loadu_epi16((__mmask32)(m >> 32), p + 64);
            st = (__mmask16)((1u << ((nblk - b) * fields)) - 1);
        }
        __m256i h = _mm512_castsi512_si256(_mm512_permutex2var_epi16(a, idx, c));
        _mm512_mask_storeu_ps(sc, st, _mm512_cvtph_ps(h));
    }
}

/* The f16 scale fields (fields = 1: d at offset 0; 2: d and m at offsets 0 and 2) of every block
 * of rows r .. r + nr - 1, converted to f32 into sc (fields per block, in block order): the rows'
 * blocks are one run, as the rows are whole blocks (engine/dtype.h), gathered and converted a
 * window at a time (hone_cpu_stage_fields). The scalar copy it replaced (a load and a store a
 * field, which gcc turned into word inserts, then a conversion pass) was 22% of a q4_0 matvec's
 * cycles on SmolLM2's 576-long rows (Zen 5). */
static inline __attribute__((always_inline)) void
hone_cpu_stage_scales(const uint8_t *W, int64_t r, int64_t nr, int64_t nb, int64_t block_bytes, int fields,
                      float *restrict sc)
{
    hone_cpu_stage_fields(W + r * nb * block_bytes, nr * nb, block_bytes, fields, sc);
}

/* R weight rows against a full tile of T tokens: each block of each row is dequantised once
 * and meets T tokens, and each token's X vector meets R rows, so R*T independent fma chains
 * run per block on 2R + 2T vector loads (R = 4, T = 4: 16 loads for 32 fmas, where one row
 * against 8 tokens needed 18 for 16). Each (token, row) chain is still the matvec order. */
#define HONE_CPU_MATMUL_RXT(R, T) HONE_CPU_MATMUL_RXT_S(R, T, 0)

/* The same with STG = 1: each row's blocks from the scales staged in sc (row i of the group
 * at sc[i * nb * fields]: hone_cpu_stage_scales, the values deqv converts), through deqs. */
#define HONE_CPU_MATMUL_RXT_S(R, T, STG)                                                        \
    do {                                                                                       \
        __m512 acc[R][T];                                                                      \
        __m512 *kacc = ks ? ks + (r - c0) * 8 : NULL;                                          \
        _Pragma("GCC unroll 16") for (int i = 0; i < R; i++)                                   \
            _Pragma("GCC unroll 16") for (int t = 0; t < T; t++)                               \
                acc[i][t] = kb0 > 0 ? kacc[i * 8 + t] : _mm512_setzero_ps();                   \
        for (int64_t b = kb0; b < kb1; b++) {                                                  \
            __m512 lo[R], hi[R];                                                               \
            _Pragma("GCC unroll 16") for (int i = 0; i < R; i++) {                             \
                if (STG)                                                                       \
                    deqs((const uint8_t *)W + (r + i) * row_bytes, b, sc + (i * nb + b) * fields, \
                         &lo[i], &hi[i]);                                                      \
                else                                                                           \
                    deqv((const uint8_t *)W + (r + i) * row_bytes, b, &lo[i], &hi[i]);         \
            }                                                                                  \
            _Pragma("GCC unroll 16") for (int t = 0; t < T; t++) {                             \
                const float *xt = X + (t0 + t) * cols + b * 32;                                \
                __m512 xl = _mm512_loadu_ps(xt), xh = _mm512_loadu_ps(xt + 16);                \
                __asm__("" : "+v"(xl), "+v"(xh)); /* one load each, not one per row */         \
                _Pragma("GCC unroll 16") for (int i = 0; i < R; i++) {                         \
                    acc[i][t] = _mm512_fmadd_ps(lo[i], xl, acc[i][t]);                         \
                    acc[i][t] = _mm512_fmadd_ps(hi[i], xh, acc[i][t]);                         \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        if (kb1 < nb) {                                                                        \
            HONE_CPU_EPI_UNROLL for (int i = 0; i < R; i++)                                    \
                HONE_CPU_EPI_UNROLL for (int t = 0; t < T; t++) kacc[i * 8 + t] = acc[i][t];   \
        } else if ((T) == 8 && full == cols) {                                                 \
            HONE_CPU_EPI_UNROLL for (int i = 0; i < R; i++) {                                  \
                float s8[8];                                                                   \
                hone_cpu_zmm_sum8(acc[i], s8);                                                 \
                HONE_CPU_EPI_UNROLL for (int t = 0; t < 8; t++) Y[(t0 + t) * rows + r + i] = s8[t]; \
            }                                                                                  \
        } else { /* rows with a tail: copied out (constant indices), finished in a loop */     \
            __m512 fin[R][T];                                                                  \
            HONE_CPU_EPI_UNROLL for (int i = 0; i < R; i++)                                    \
                HONE_CPU_EPI_UNROLL for (int t = 0; t < T; t++) fin[i][t] = acc[i][t];         \
            for (int i = 0; i < R; i++)                                                        \
                for (int t = 0; t < T; t++)                                                    \
                    Y[(t0 + t) * rows + r + i] = hone_cpu_zmm_finish(                          \
                        fin[i][t], (const uint8_t *)W + (r + i) * row_bytes,                   \
                        X + (t0 + t) * cols, full, cols, deq);                                 \
        }                                                                                      \
    } while (0)

/* The tile's epilogue (the accumulators into kacc, the trees, the copy of a tail's rows) with
 * its loops over the accumulators unrolled, so that each accumulator is a constant index and
 * gcc keeps the R x T accumulators in registers to the trees instead of storing all of them and
 * reloading them (24 stores and loads a 3 x 8 tile beside its 864 fmas). Rows with a tail (cols
 * not a multiple of 32) copy theirs out first and finish in a loop: with that loop unrolled too,
 * 24 inlined tails made gcc keep 16 of f32's accumulators on the stack inside the fma loop (76%
 * -> 56% of the peak). Zen 5, one core, bench/matmul n = 64 with weights from memory,
 * alternated: f16 / bf16 / q8_0 / q4_0 / q4_1 +3-6% (e.g. q4_0 1536 x 576 76.9 -> 80.0% of the
 * FMA peak, bf16 79.6 -> 82.8%); a version with the whole tail branch rolled kept little of it. */
#define HONE_CPU_EPI_UNROLL _Pragma("GCC unroll 16")

/* The share's rows go in chunks of 128 KiB of weights: each chunk is read from memory once and
 * then meets every token from L2, while the next chunk is prefetched into L2 (with 512 KiB
 * chunks the chunk being read and the one prefetched, beside X, overflowed a 2 MiB L2: weights
 * fresh from memory, one Sapphire Rapids core, f32 1536 x 576 at n = 64 131 -> 153 GFLOP/s,
 * 576 x 1536 108 -> 117). Inside a chunk, tiles of 8 tokens go
 * outside (8 rows of X stay in L1) and groups of rows inside: 3 rows (24 accumulators) for the
 * float dtypes, 2 for the quantised ones, whose dequantisation needs registers of its own
 * (measured on SmolLM2's 1536 x 576, one core: f32 3.2x the one-row kernel with 3 rows, 2.5x
 * with 2; q8_0 3.0x with 2, 2.6x with 3). Rows and tokens left over go one row at a time
 * against tiles of up to 8 tokens. Every (token, row) is the matvec order, so the result does
 * not depend on the blocking. */
#define HONE_CPU_MATMUL_CHUNK(R, STG)                                                           \
    do {                                                                                       \
        int64_t cr = c0 + (c1 - c0) / (R) * (R);                                               \
        for (int64_t t0 = 0; t0 < n8; t0 += 8)                                                 \
            for (int64_t kb0 = 0, kb1;; kb0 = kb1) { /* at least one piece, even of no block */ \
                kb1 = nb - kb0 > kpiece ? kb0 + kpiece : nb;                                   \
                for (int64_t r = c0; r < cr; r += (R)) {                                       \
                    for (int64_t k = 0; k < pf_lines && pf < pf_end; k++, pf += 64)            \
                        _mm_prefetch(pf, _MM_HINT_T1);                                         \
                    if (STG) hone_cpu_stage_scales((const uint8_t *)W, r, R, nb, block_bytes, fields, sc); \
                    HONE_CPU_MATMUL_RXT_S(R, 8, STG);                                          \
                }                                                                              \
                if (kb1 >= nb) break;                                                          \
            }                                                                                  \
        for (int64_t t0 = n8; t0 < n; t0 += 8) { /* tokens left over, every row */             \
            int nt = (int)(n - t0);                                                            \
            for (int64_t r = c0; r < cr; r++) {                                                \
                const uint8_t *rw = (const uint8_t *)W + r * row_bytes;                        \
                HONE_CPU_MATMUL_ROW();                                                         \
            }                                                                                  \
        }                                                                                      \
        for (int64_t r = cr; r < c1; r++) { /* rows left over, every token */                  \
            const uint8_t *rw = (const uint8_t *)W + r * row_bytes;                            \
            for (int64_t t0 = 0; t0 < n; t0 += 8) {                                            \
                int nt = n - t0 < 8 ? (int)(n - t0) : 8;                                       \
                HONE_CPU_MATMUL_ROW();                                                         \
            }                                                                                  \
        }                                                                                      \
    } while (0)

/* Rows c0 .. c1 - 1 of W (row_bytes apart) against all n tokens, R x 8 register tiles. The
 * next bytes [next, next + next_bytes) (the weights the caller reads after these) are
 * prefetched into L2 a slice before each tile, so that reading them from memory overlaps this
 * chunk's fma chains instead of stalling the next chunk's first tile. */
static inline __attribute__((always_inline)) void
hone_cpu_matmul_rows(float *restrict Y, const void *W, const float *restrict X, int64_t n,
                     int64_t rows, int64_t cols, int64_t row_bytes, hone_cpu_deqv_fn deqv,
                     hone_cpu_deq_fn deq, hone_cpu_deqs_fn deqs, int64_t block_bytes, int fields,
                     int64_t c0, int64_t c1, int R, const char *next, int64_t next_bytes)
{
    int64_t nb = cols / 32, full = nb * 32, n8 = n / 8 * 8;
    /* f32 rows (f32 weights, the quantised formats' dequantised buffer) longer than 768 values
     * go through in pieces of 24 blocks, so a tile's 8 rows of X (24 KiB a piece, where a whole
     * 1536-long row of 8 tokens filled a 48 KiB L1) stay in L1 while the chunk's rows meet them;
     * the accumulators wait in ks between pieces, so every chain is the same fmas in the same
     * order (one Sapphire Rapids core, 576 x 1536 at n = 64, weights from memory, with the
     * 128 KiB chunks: f32 117 -> 143 GFLOP/s, q4_1 133 -> 145; f16 measured no faster, its
     * rows are half the bytes). */
    int64_t kpiece = row_bytes >= 4 * cols && nb > 24 && (c1 - c0) <= HONE_CPU_KSPLIT_ROWS ? 24 : nb;
    __m512 ksbuf[HONE_CPU_KSPLIT_ROWS * 8]; /* 48 KiB, touched only when pieces are carried */
    __m512 *ks = kpiece < nb ? ksbuf : NULL;
    int64_t pieces = kpiece > 0 ? (nb + kpiece - 1) / kpiece : 1;
    int64_t tiles = n8 / 8 * ((c1 - c0) / R) * pieces;
    const char *pf = next, *pf_end = next + next_bytes;
    int64_t pf_lines = tiles > 0 ? (next_bytes / 64 + tiles) / tiles : 0;
    float sc[HONE_CPU_STAGE_MAX] __attribute__((aligned(64)));
    if (R == 3)
        HONE_CPU_MATMUL_CHUNK(3, 0);
    else if (deqs && nb > 0 && 2 * nb * fields <= HONE_CPU_STAGE_MAX)
        HONE_CPU_MATMUL_CHUNK(2, 1);
    else
        HONE_CPU_MATMUL_CHUNK(2, 0);
}

/* The f32 dequantisers (defined below), for the rows of the prefill buffer. */
static inline void hone_cpu_deqv_f32(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi);
static inline void hone_cpu_deqr_f32(const void *row, int64_t c0, int n, float *out);

/* Stack floats for the dequantised rows of a chunk (96 KiB: L2 resident, and small beside the
 * 8 MiB stacks of the engine's threads). */
#define HONE_CPU_MATMUL_BUF 24576
#define HONE_CPU_MATMUL_BUF_MIN_N 32
/* The sub-byte formats (fewer bytes a row than values: all but q8_0), whose dequantisation
 * costs the most, on rows of at most 1024 values take the buffer from 16 tokens. Zen 5, one
 * core, SmolLM2's shapes, old/new alternated (bench/matmul, medians of 3 reps, twice): n = 24
 * q4_0 1.13-1.17x, q4_1 1.18-1.20x, n = 16 q4_0 1.04-1.08x, q4_1 1.12-1.16x on the 576-long rows;
 * the 1536-long rows measured 0.92-1.02x (n = 16, 24) and q8_0 0.94-1.03x, so they keep the
 * tiles below 32 tokens. */
#define HONE_CPU_MATMUL_BUF_MIN_N_SUBBYTE 16
#define HONE_CPU_MATMUL_BUF_SUBBYTE_COLS 1024

/* Y[t][r] = W[r] . X[t] for this share's rows. The float dtypes, and the quantised ones against
 * fewer than 32 tokens (batched decode, verification), go straight from the weights: chunks of
 * 128 KiB of rows (each chunk read from memory once, then meeting every token from L2), 3 x 8
 * tiles for the float dtypes, 2 x 8 for the quantised ones, whose dequantisation needs
 * registers of its own. Quantised weights against 32 tokens or more (prefill) are
 * dequantised a chunk of rows at a time into a stack buffer of f32 (the exact values deqv
 * gives) that the f32 tiles then read, so each weight is dequantised once per call rather than
 * once per 8-token tile and the vector ports go to the fma chains (one core, n = 64, SmolLM2's
 * shapes: 1.2-1.3x; below about 24 tokens the buffer's stores cost more than they save, and
 * f16 / bf16 measured no faster through it, 0.8x on 1536-long rows). Every (token, row) is the
 * matvec order either way, so neither the path, the chunk, the tile nor the share changes a bit. */
static inline __attribute__((always_inline)) void
hone_cpu_matmul_any(float *restrict Y, const void *W, const float *restrict X, int64_t n, int64_t rows,
                    int64_t cols, int64_t row_bytes, hone_cpu_deqv_fn deqv, hone_cpu_deq_fn deq,
                    hone_cpu_deqs_fn deqs, int64_t block_bytes, int fields, int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    int float_weights = row_bytes >= 2 * cols;
    int64_t nb = cols / 32, full = nb * 32;
    int few = n < HONE_CPU_MATMUL_BUF_MIN_N &&
              (n < HONE_CPU_MATMUL_BUF_MIN_N_SUBBYTE || row_bytes >= cols || cols > HONE_CPU_MATMUL_BUF_SUBBYTE_COLS);
    if (float_weights || few || 3 * cols > HONE_CPU_MATMUL_BUF) {
        int64_t chunk = (128 * 1024) / (row_bytes > 0 ? row_bytes : 1);
        chunk = chunk < 6 ? 6 : chunk / 6 * 6;
        for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
            int64_t c1 = c0 + chunk < r1 ? c0 + chunk : r1, c2 = c1 + chunk < r1 ? c1 + chunk : r1;
            hone_cpu_matmul_rows(Y, W, X, n, rows, cols, row_bytes, deqv, deq, deqs, block_bytes, fields, c0, c1,
                                 float_weights ? 3 : 2,
                                 (const char *)W + c1 * row_bytes, (c2 - c1) * row_bytes);
        }
        return;
    }
    float buf[HONE_CPU_MATMUL_BUF] __attribute__((aligned(64)));
    int64_t chunk = HONE_CPU_MATMUL_BUF / cols / 3 * 3;
    for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
        int64_t c1 = c0 + chunk < r1 ? c0 + chunk : r1;
        for (int64_t r = c0; r < c1; r++) {
            const uint8_t *rw = (const uint8_t *)W + r * row_bytes;
            float *o = buf + (r - c0) * cols;
            for (int64_t b = 0; b < nb; b++) {
                __m512 lo, hi;
                deqv(rw, b, &lo, &hi);
                _mm512_storeu_ps(o + b * 32, lo);
                _mm512_storeu_ps(o + b * 32 + 16, hi);
            }
            if (full < cols) deq(rw, full, (int)(cols - full), o + full);
        }
        int64_t c2 = c1 + chunk < r1 ? c1 + chunk : r1;
        hone_cpu_matmul_rows(Y + c0, buf, X, n, rows, cols, cols * (int64_t)sizeof(float),
                             hone_cpu_deqv_f32, hone_cpu_deqr_f32, NULL, 0, 0, 0, c1 - c0, 3,
                             (const char *)W + c1 * row_bytes, (c2 - c1) * row_bytes);
    }
}

/* The matmul of the float, K and MX formats (their scales converted per block). */
static inline __attribute__((always_inline)) void
hone_cpu_matmul_simd(float *restrict Y, const void *W, const float *restrict X, int64_t n,
                     int64_t rows, int64_t cols, int64_t row_bytes, hone_cpu_deqv_fn deqv,
                     hone_cpu_deq_fn deq, int ith, int nth)
{
    hone_cpu_matmul_any(Y, W, X, n, rows, cols, row_bytes, deqv, deq, NULL, 0, 0, ith, nth);
}

/* The matmul of the legacy block formats (q8_0, q4_0, q4_1, q5_0, q5_1): against fewer than
 * HONE_CPU_MATMUL_BUF_MIN_N tokens (batched decode, verification) each 2 x 8 tile's rows take
 * their blocks from scales staged as f32 (hone_cpu_stage_scales, as the staged matvec does),
 * which halves the vector work a block's dequantisation costs there; the same values, so the
 * same bits. */
static inline __attribute__((always_inline)) void
hone_cpu_matmul_staged(float *restrict Y, const void *W, const float *restrict X, int64_t n, int64_t rows,
                       int64_t cols, int64_t row_bytes, int64_t block_bytes, int fields, hone_cpu_deqs_fn deqs,
                       hone_cpu_deqv_fn deqv, hone_cpu_deq_fn deq, int ith, int nth)
{
    hone_cpu_matmul_any(Y, W, X, n, rows, cols, row_bytes, deqv, deq, deqs, block_bytes, fields, ith, nth);
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

/* The legacy block formats' values from the block's scale (and min) as f32: the one body that
 * hone_cpu_deqv_<dt> (the scale converted from the block's f16) and hone_cpu_deqs_<dt> (the scale
 * staged as f32 by hone_cpu_matvec_staged, the same value) share. q * d is exact in f32 for q8_0
 * and q4_0, so a plain multiply is the exact value. */
static inline __attribute__((always_inline)) void hone_cpu_vals_q8_0(const hone_block_q8_0 *b, float d,
                                                                     __m512 *lo, __m512 *hi)
{
    __m512 dv = _mm512_set1_ps(d);
    __m128i q0 = _mm_loadu_si128((const __m128i *)b->qs);
    __m128i q1 = _mm_loadu_si128((const __m128i *)(b->qs + 16));
    *lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), dv);
    *hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), dv);
}

/* q4: the 16 possible values of a block form a table (one vector op), and each nibble picks
 * its value with a permute that reads only the index's low 4 bits, so no masking is needed.
 * The table entries are computed exactly as the scalar path computes each weight. */
static inline __attribute__((always_inline)) void hone_cpu_vals_q4_0(const hone_block_q4_0 *b, float d,
                                                                     __m512 *lo, __m512 *hi)
{
    const __m512 iota_m8 = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    __m512 table = _mm512_mul_ps(iota_m8, _mm512_set1_ps(d));
    __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->qs));
    *lo = _mm512_permutexvar_ps(q, table);
    *hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), table);
}

/* 0, 1, .. 15 as floats: the table index of the 4- and 5-bit formats' values. */
static inline __m512 hone_cpu_iota16_ps(void)
{
    return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

static inline __attribute__((always_inline)) void hone_cpu_vals_q4_1(const hone_block_q4_1 *b, float d, float m,
                                                                     __m512 *lo, __m512 *hi)
{
    __m512 table = _mm512_fmadd_ps(hone_cpu_iota16_ps(), _mm512_set1_ps(d), _mm512_set1_ps(m));
    __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->qs));
    *lo = _mm512_permutexvar_ps(q, table);
    *hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), table);
}

static inline void hone_cpu_deqv_q8_0(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const hone_block_q8_0 *b = (const hone_block_q8_0 *)row + blk;
    hone_cpu_vals_q8_0(b, hone_cpu_half(b->d), lo, hi);
}

static inline void hone_cpu_deqv_q4_0(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const hone_block_q4_0 *b = (const hone_block_q4_0 *)row + blk;
    hone_cpu_vals_q4_0(b, hone_cpu_half(b->d), lo, hi);
}

static inline void hone_cpu_deqv_q4_1(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const hone_block_q4_1 *b = (const hone_block_q4_1 *)row + blk;
    hone_cpu_vals_q4_1(b, hone_cpu_half(b->d), hone_cpu_half(b->m), lo, hi);
}


static inline void hone_cpu_deqs_q8_0(const uint8_t *row, int64_t blk, const float *sc, __m512 *lo, __m512 *hi)
{
    hone_cpu_vals_q8_0((const hone_block_q8_0 *)row + blk, sc[0], lo, hi);
}

static inline void hone_cpu_deqs_q4_0(const uint8_t *row, int64_t blk, const float *sc, __m512 *lo, __m512 *hi)
{
    hone_cpu_vals_q4_0((const hone_block_q4_0 *)row + blk, sc[0], lo, hi);
}

static inline void hone_cpu_deqs_q4_1(const uint8_t *row, int64_t blk, const float *sc, __m512 *lo, __m512 *hi)
{
    hone_cpu_vals_q4_1((const hone_block_q4_1 *)row + blk, sc[0], sc[1], lo, hi);
}

/* R contiguous rows from rw of hone_cpu_matvec_staged against x, side by side, their scales
 * staged in s (row i's block b at s[(i * nb + b) * fields]): a group of 8 (4 on rows too long
 * for 8 rows' scales), or R = 1 for the rows left over. Each row's one chain, then the fixed
 * tree: for 8 whole rows all 8 at once (hone_cpu_zmm_sum8, the same bits as
 * hone_cpu_zmm_finish). The prefetch runs a group's bytes plus HONE_CPU_MATVEC_PREFETCH ahead
 * of the group, so the next group's 8 rows are in flight while this one's run. */
static inline __attribute__((always_inline)) void
hone_cpu_staged_rows(const int R, float *restrict y, const uint8_t *rw, const float *restrict x, const float *s,
                     int64_t row_bytes, int64_t block_bytes, int fields, int64_t nb, int64_t full, int64_t cols,
                     const uint8_t *end, hone_cpu_deqs_fn deqs, hone_cpu_deq_fn deq)
{
    __m512 acc[HONE_CPU_STAGE_ROWS];
    for (int i = 0; i < R; i++) acc[i] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512 xl = _mm512_loadu_ps(x + b * 32), xh = _mm512_loadu_ps(x + b * 32 + 16);
        __m512 lo[HONE_CPU_STAGE_ROWS], hi[HONE_CPU_STAGE_ROWS];
        hone_cpu_prefetch_group(rw, R, row_bytes, b, block_bytes, end);
        _Pragma("GCC unroll 8") for (int i = 0; i < R; i++)
            deqs(rw + i * row_bytes, b, s + (i * nb + b) * fields, &lo[i], &hi[i]);
        _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) acc[i] = _mm512_fmadd_ps(lo[i], xl, acc[i]);
        _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) acc[i] = _mm512_fmadd_ps(hi[i], xh, acc[i]);
    }
    if (R == 8 && full == cols) {
        hone_cpu_zmm_sum8(acc, y);
        return;
    }
    for (int i = 0; i < R; i++) y[i] = hone_cpu_zmm_finish(acc[i], rw + i * row_bytes, x, full, cols, deq);
}

/* hone_cpu_matvec_simd for the legacy block formats (q8_0, q4_0, q4_1), with the same bits: each
 * row's one fma chain over its blocks, low half then high half, then the fixed tree. Two changes
 * of schedule only. The blocks' f16 scales are converted to f32 ahead, a group of rows at a
 * time (hone_cpu_stage_scales, the next group's while this one's rows run), so a block's table
 * costs one vector op instead of four (an insert, a conversion and a broadcast before the
 * multiply). And 8 rows go through the blocks side by side, so 8 independent fma chains hide
 * the fma latency, which one row's chain of 2 dependent fmas a block exposed (measured on
 * SmolLM2's shapes from L2, one Ice Lake core, 4 rows: q4_0 2.1 -> 1.6 ns a block). 8 rows
 * rather than 4 share each block's two X loads among twice the rows and finish in one
 * 8-accumulator tree (on SmolLM2's 576-long rows the per-row tree and the staging took 45% of
 * a call); Zen 5, one core, 1536 x 576 from L2 / from memory: q4_1 33.6 -> 21.7 us (1.55x),
 * q4_0 25.7 -> 21.9 (1.17x), q8_0 29.2 -> 27.3 (1.07x); 4096 x 4096 from memory q4_0 585 -> 457,
 * q4_1 1125 -> 426, q8_0 1016 -> 789 (with the prefetch a group ahead: 8 rows of 4096 values
 * are 18 KiB, beyond the 16 KiB that was ahead of the group's start). The rows of a group are
 * contiguous, so the read is still one stream, prefetched as the blocks go (the hardware
 * prefetcher alone left one core's stream at 5.5 GB/s where the probe reads 11; with it
 * 7.5-8.7, q4_0 1536 x 576 from memory). Rows longer than the staging buffer holds for 4 rows
 * take hone_cpu_matvec_simd. */
static inline __attribute__((always_inline)) void
hone_cpu_matvec_staged_r(const int R, float *restrict y, const void *W, const float *restrict x, int64_t cols,
                         int64_t row_bytes, int64_t block_bytes, int fields, hone_cpu_deqs_fn deqs,
                         hone_cpu_deq_fn deq, int64_t r0, int64_t r1)
{
    int64_t nb = cols / 32, full = nb * 32;
    const uint8_t *w8 = (const uint8_t *)W, *end = w8 + r1 * row_bytes;
    float sc[2][HONE_CPU_STAGE_MAX] __attribute__((aligned(64)));
    int cur = 0;
    if (r0 < r1) hone_cpu_stage_scales(w8, r0, r1 - r0 < R ? r1 - r0 : R, nb, block_bytes, fields, sc[0]);
    for (int64_t r = r0; r < r1; cur ^= 1) {
        int64_t n = r1 - r < R ? r1 - r : R, rn = r + n, nn = r1 - rn < R ? r1 - rn : R;
        if (nn > 0) hone_cpu_stage_scales(w8, rn, nn, nb, block_bytes, fields, sc[cur ^ 1]);
        const float *s = sc[cur];
        const uint8_t *rw = w8 + r * row_bytes;
        if (n == R)
            hone_cpu_staged_rows(R, y + r, rw, x, s, row_bytes, block_bytes, fields, nb, full, cols, end, deqs, deq);
        else
            for (int64_t i = 0; i < n; i++)
                hone_cpu_staged_rows(1, y + r + i, rw + i * row_bytes, x, s + i * nb * fields, row_bytes, block_bytes,
                                     fields, nb, full, cols, end, deqs, deq);
        r = rn;
    }
}

static inline __attribute__((always_inline)) void
hone_cpu_matvec_staged(float *restrict y, const void *W, const float *restrict x, int64_t rows,
                       int64_t cols, int64_t row_bytes, int64_t block_bytes, int fields,
                       hone_cpu_deqs_fn deqs, hone_cpu_deqv_fn deqv, hone_cpu_deq_fn deq, int ith, int nth)
{
    int64_t nb = cols / 32;
    if (nb == 0 || HONE_CPU_STAGE_ROWS_MIN * nb * fields > HONE_CPU_STAGE_MAX) {
        hone_cpu_matvec_simd(y, W, x, rows, cols, row_bytes, deqv, deq, ith, nth);
        return;
    }
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    if (HONE_CPU_STAGE_ROWS * nb * fields <= HONE_CPU_STAGE_MAX)
        hone_cpu_matvec_staged_r(HONE_CPU_STAGE_ROWS, y, W, x, cols, row_bytes, block_bytes, fields, deqs, deq, r0, r1);
    else
        hone_cpu_matvec_staged_r(HONE_CPU_STAGE_ROWS_MIN, y, W, x, cols, row_bytes, block_bytes, fields, deqs, deq,
                                 r0, r1);
}

/* The decode matvec of each of the six dtypes with fused slots (qkv, ffn, rmsnorm_matvec):
 * the float formats straight through hone_cpu_matvec_simd, the block formats staged. */
#define HONE_CPU_MV_FLOAT(dt)                                                                     \
    static inline void hone_cpu_mv_##dt(float *y, const void *W, const float *x, int64_t rows,    \
                                        int64_t cols, int64_t rb, hone_cpu_deq_fn deq, int ith,   \
                                        int nth)                                                  \
    {                                                                                             \
        hone_cpu_matvec_simd(y, W, x, rows, cols, rb, hone_cpu_deqv_##dt, deq, ith, nth);         \
    }
#define HONE_CPU_MV_BLOCKS(dt, fields)                                                            \
    static inline void hone_cpu_mv_##dt(float *y, const void *W, const float *x, int64_t rows,    \
                                        int64_t cols, int64_t rb, hone_cpu_deq_fn deq, int ith,   \
                                        int nth)                                                  \
    {                                                                                             \
        hone_cpu_matvec_staged(y, W, x, rows, cols, rb, (int64_t)sizeof(hone_block_##dt), fields, \
                               hone_cpu_deqs_##dt, hone_cpu_deqv_##dt, deq, ith, nth);            \
    }
HONE_CPU_MV_FLOAT(f32)
HONE_CPU_MV_FLOAT(f16)
HONE_CPU_MV_FLOAT(bf16)
HONE_CPU_MV_BLOCKS(q8_0, 1)
HONE_CPU_MV_BLOCKS(q4_0, 1)
HONE_CPU_MV_BLOCKS(q4_1, 2)
#undef HONE_CPU_MV_FLOAT
#undef HONE_CPU_MV_BLOCKS

/* The further formats, 16 lanes per half of a 32-value chunk. Each lane computes the scalar
 * path's operations on the same operands (the scales as the same f32 scalars, the same fused
 * multiply-adds), so the bits are the scalar ones. blk is the 32-value chunk of the row; the
 * K formats' block is blk / 8, its chunk blk % 8. */
/* 16 bytes at p widened to 16 u32 lanes. */
static inline __m512i hone_cpu_v_u8x16(const uint8_t *p)
{
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
}

/* The 5-bit values of a q5_0 / q5_1 block as table indices: the nibbles of qs, with 16 added
 * where bit j of qh is set (qh's low 16 bits are a mask for values 0..15, its high 16 bits for
 * 16..31: one masked op each, where the bit had taken a variable shift, an and, a shift and
 * an or). */
static inline __attribute__((always_inline)) void hone_cpu_v_q5(const uint8_t *qs, const uint8_t *qhp, __m512i *lo,
                                                                __m512i *hi)
{
    uint32_t qh;
    memcpy(&qh, qhp, 4);
    __m512i q = hone_cpu_v_u8x16(qs), s16 = _mm512_set1_epi32(16);
    __m512i l = _mm512_and_si512(q, _mm512_set1_epi32(0xF)), h = _mm512_srli_epi32(q, 4);
    *lo = _mm512_mask_or_epi32(l, (__mmask16)(qh & 0xFFFF), l, s16);
    *hi = _mm512_mask_or_epi32(h, (__mmask16)(qh >> 16), h, s16);
}

/* q5: as for q4, the 32 possible values of a block form two tables of 16 (each entry the
 * scalar path's own operation on it: (q - 16) * d, or q * d + m in one fma), and each 5-bit
 * value picks its entry with one two-table permute (bit 4 chooses the table). The bodies are
 * shared by deqv (the scale converted from the block's f16) and deqs (staged as f32). */
static inline __attribute__((always_inline)) void hone_cpu_vals_q5_0(const hone_block_q5_0 *b, float d,
                                                                     __m512 *lo, __m512 *hi)
{
    const __m512 iota_m16 = _mm512_setr_ps(-16, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1);
    __m512 dv = _mm512_set1_ps(d), t0 = _mm512_mul_ps(iota_m16, dv), t1 = _mm512_mul_ps(hone_cpu_iota16_ps(), dv);
    __m512i l, h;
    hone_cpu_v_q5(b->qs, b->qh, &l, &h);
    *lo = _mm512_permutex2var_ps(t0, l, t1);
    *hi = _mm512_permutex2var_ps(t0, h, t1);
}

static inline __attribute__((always_inline)) void hone_cpu_vals_q5_1(const hone_block_q5_1 *b, float d, float m,
                                                                     __m512 *lo, __m512 *hi)
{
    const __m512 iota_16 = _mm512_setr_ps(16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
    __m512 dv = _mm512_set1_ps(d), mv = _mm512_set1_ps(m);
    __m512 t0 = _mm512_fmadd_ps(hone_cpu_iota16_ps(), dv, mv), t1 = _mm512_fmadd_ps(iota_16, dv, mv);
    __m512i l, h;
    hone_cpu_v_q5(b->qs, b->qh, &l, &h);
    *lo = _mm512_permutex2var_ps(t0, l, t1);
    *hi = _mm512_permutex2var_ps(t0, h, t1);
}

static inline void hone_cpu_deqv_q5_0(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const hone_block_q5_0 *b = (const hone_block_q5_0 *)row + blk;
    hone_cpu_vals_q5_0(b, hone_cpu_half(b->d), lo, hi);
}

static inline void hone_cpu_deqv_q5_1(const uint8_t *row, int64_t blk, __m512 *lo, __m512 *hi)
{
    const hone_block_q5_1 *b = (const hone_block_q5_1 *)row + blk;
    hone_cpu_vals_q5_1(b, hone_cpu_half(b->d), hone_cpu_half(b->m), lo, hi);
}

static inline void hone_cpu_deqs_q5_0(const uint8_t *row, int64_t blk, const float *sc, __m512 *lo, __m512 *hi)
{
    hone_cpu_vals_q5_0((const hone_block_q5_0 *)row + blk, sc[0], lo, hi);
}

static inline void hone_cpu_deqs_q5_1(const uint8_t *row, int64_t blk, const float *sc, __m512 *lo, __m512 *hi)
{
    hone_cpu_vals_q5_1((const hone_block_q5_1 *)row + blk, sc[0], sc[1], lo, hi);
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
    /* the 8 scales and 8 mins (hone_cpu_scale_min_k4's 6-bit fields) a byte each, from the 12
     * bytes as three words, then d * sc and dmin * m in one multiply (lanes 0..7, 8..15): the
     * products the scalar path forms, without 16 scalar conversions and multiplies a block */
    uint32_t a[3], sm[4];
    memcpy(a, b->scales, 12);
    sm[0] = a[0] & 0x3f3f3f3fu;
    sm[1] = (a[2] & 0x0f0f0f0fu) | ((a[0] >> 6 & 0x03030303u) << 4);
    sm[2] = a[1] & 0x3f3f3f3fu;
    sm[3] = (a[2] >> 4 & 0x0f0f0f0fu) | ((a[1] >> 6 & 0x03030303u) << 4);
    __m512 dm = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)sm))),
                              _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(d), _mm512_set1_ps(dmin)));
    for (int k = 0; k < 8; k += 2) {
        __m512 d0 = _mm512_permutexvar_ps(_mm512_set1_epi32(k), dm);
        __m512 n0 = _mm512_permutexvar_ps(_mm512_set1_epi32(k + 8), dm);
        __m512 d1 = _mm512_permutexvar_ps(_mm512_set1_epi32(k + 1), dm);
        __m512 n1 = _mm512_permutexvar_ps(_mm512_set1_epi32(k + 9), dm);
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
    /* d * scale for the 16 scales at once (the products the scalar path forms) */
    __m512 ds16 = _mm512_mul_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                                       _mm_loadu_si128((const __m128i *)b->scales))));
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
                __m512 ds = _mm512_permutexvar_ps(_mm512_set1_epi32(8 * h + 2 * p + g), ds16);
                w[2 * (4 * h + p) + g] = _mm512_mul_ps(ds, _mm512_cvtepi32_ps(q));
            }
        }
}

/* y[r] = W[r] . x, block by block: the 16 vectors of a block against x in element order. A
 * row's one chain takes 16 dependent fmas a block, so R rows go side by side (each one's block
 * dequantised, then the R chains a vector at a time), and as in the staged matvec the group's
 * bytes plus HONE_CPU_MATVEC_PREFETCH ahead are prefetched as the blocks go (R rows read at
 * once are R strided streams, which the hardware prefetcher alone left 2.5x slower). */
#define HONE_CPU_K_ROWS 4

static inline __attribute__((always_inline)) void
hone_cpu_matvec_k_rows(const int R, float *restrict y, const uint8_t *rw, const float *restrict x, int64_t nb,
                       int64_t block_bytes, const uint8_t *end, hone_cpu_deqv256_fn deqv256)
{
    __m512 acc[HONE_CPU_K_ROWS];
    for (int i = 0; i < R; i++) acc[i] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512 w[HONE_CPU_K_ROWS][16];
        hone_cpu_prefetch_group(rw, R, nb * block_bytes, b, block_bytes, end);
        for (int i = 0; i < R; i++) deqv256(rw + (i * nb + b) * block_bytes, w[i]);
        const float *xb = x + b * 256;
        for (int k = 0; k < 16; k++) {
            __m512 xk = _mm512_loadu_ps(xb + 16 * k);
            for (int i = 0; i < R; i++) acc[i] = _mm512_fmadd_ps(w[i][k], xk, acc[i]);
        }
    }
    for (int i = 0; i < R; i++) y[i] = hone_cpu_zmm_sum(acc[i]);
}

static inline __attribute__((always_inline)) void
hone_cpu_matvec_simd_k(float *restrict y, const void *W, const float *restrict x, int64_t rows,
                       int64_t cols, int64_t block_bytes, hone_cpu_deqv256_fn deqv256, int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    int64_t nb = cols / 256, r = r0;
    const uint8_t *w8 = (const uint8_t *)W, *end = w8 + r1 * nb * block_bytes;
    for (; r + HONE_CPU_K_ROWS <= r1; r += HONE_CPU_K_ROWS)
        hone_cpu_matvec_k_rows(HONE_CPU_K_ROWS, y + r, w8 + r * nb * block_bytes, x, nb, block_bytes, end, deqv256);
    for (; r < r1; r++) hone_cpu_matvec_k_rows(1, y + r, w8 + r * nb * block_bytes, x, nb, block_bytes, end, deqv256);
}
#endif

#if !defined(HONE_CPU_SIMD) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
/* AVX2 paths (x86 without AVX-512) for the formats the shipped models use (f32, f16, bf16,
 * q8_0, q4_0, q4_1): the 16 lanes of the fixed order as two ymm, lanes 0..7 and 8..15, so a
 * block's values 0..7 go into the first, 8..15 into the second, then 16..23 and 24..31, one
 * fused multiply-add each: the generic order exactly, and hone_cpu_ymm2_sum is
 * hone_cpu_lanes_sum. One weight row against one token is two fma chains of two links per
 * block, so it waits on the fma latency; here R rows meet T tokens at once (2 R T independent
 * chains, 8 to 12), and each block of weights is dequantised in registers (no store and
 * reload: a 256-bit load of 128-bit stores stalls on store forwarding) once for the T tokens
 * of a tile; from 8 tokens on, f32 and the block formats go through row panels instead. Every (token, row) is still the matvec order, so neither R, T nor the share
 * changes a bit. Measured: docs/architecture.md, "Small-n matmul on AVX2". */
#define HONE_CPU_AVX2 1


/* The 32 values of block blk of a row, dequantised exactly as the scalar deq: v[k] = values
 * 8 k .. 8 k + 7. One call a block: the scales are converted once, and the 4-bit formats widen
 * their 16 bytes in two loads whose low nibbles are values 0..15 and high ones 16..31 (a
 * half-block version converted the scales and split the nibbles twice a block). */
typedef void (*hone_cpu_deqb_fn)(const uint8_t *row, int64_t blk, __m256 v[4]);

static inline void hone_cpu_deqb_f32(const uint8_t *row, int64_t blk, __m256 v[4])
{
    const float *w = (const float *)row + blk * 32;
    for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(w + 8 * k);
}

static inline void hone_cpu_deqb_f16(const uint8_t *row, int64_t blk, __m256 v[4])
{
    const uint16_t *h = (const uint16_t *)row + blk * 32;
    for (int k = 0; k < 4; k++) v[k] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 8 * k)));
}

static inline void hone_cpu_deqb_bf16(const uint8_t *row, int64_t blk, __m256 v[4])
{
    const uint16_t *h = (const uint16_t *)row + blk * 32;
    for (int k = 0; k < 4; k++)
        v[k] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(h + 8 * k))), 16));
}

/* q * d is exact in f32 for q8_0 and q4_0, so a plain multiply is the exact value. */
static inline void hone_cpu_deqb_q8_0(const uint8_t *row, int64_t blk, __m256 v[4])
{
    const hone_block_q8_0 *bl = (const hone_block_q8_0 *)row + blk;
    __m256 d = _mm256_set1_ps(hone_cpu_half(bl->d));
    for (int k = 0; k < 4; k++)
        v[k] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(bl->qs + 8 * k)))), d);
}

/* The bytes qs[0..7] and qs[8..15] widened to 32 bits: & 15 gives values 0..7 and 8..15, >> 4
 * values 16..23 and 24..31. */
static inline void hone_cpu_nibbles4(const uint8_t *qs, __m256i q[4])
{
    __m256i a0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)qs));
    __m256i a1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + 8)));
    __m256i f = _mm256_set1_epi32(0xF);
    q[0] = _mm256_and_si256(a0, f);
    q[1] = _mm256_and_si256(a1, f);
    q[2] = _mm256_srli_epi32(a0, 4);
    q[3] = _mm256_srli_epi32(a1, 4);
}

static inline void hone_cpu_deqb_q4_0(const uint8_t *row, int64_t blk, __m256 v[4])
{
    const hone_block_q4_0 *bl = (const hone_block_q4_0 *)row + blk;
    __m256 d = _mm256_set1_ps(hone_cpu_half(bl->d));
    __m256i q[4], m8 = _mm256_set1_epi32(8);
    hone_cpu_nibbles4(bl->qs, q);
    for (int k = 0; k < 4; k++) v[k] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q[k], m8)), d);
}

/* fmaf(q, d, m) as the scalar deq: q * d is exact, one rounding. */
static inline void hone_cpu_deqb_q4_1(const uint8_t *row, int64_t blk, __m256 v[4])
{
    const hone_block_q4_1 *bl = (const hone_block_q4_1 *)row + blk;
    __m256 d = _mm256_set1_ps(hone_cpu_half(bl->d)), m = _mm256_set1_ps(hone_cpu_half(bl->m));
    __m256i q[4];
    hone_cpu_nibbles4(bl->qs, q);
    for (int k = 0; k < 4; k++) v[k] = hone_cpu_v8_fma(_mm256_cvtepi32_ps(q[k]), d, m);
}

static inline float hone_cpu_ymm2_sum(__m256 lo, __m256 hi)
{
    __m256 s8 = hone_cpu_v8_add(lo, hi);                                                  /* l, l + 8 */
    __m128 s4 = hone_cpu_v4_add(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1)); /* l, l + 4 */
    __m128 s2 = hone_cpu_v4_add(s4, _mm_movehl_ps(s4, s4)); /* [s4_0 + s4_2, s4_1 + s4_3] */
    __m128 s1 = hone_cpu_v4_add_ss(s2, _mm_movehdup_ps(s2)); /* s2_0 + s2_1 */
    return _mm_cvtss_f32(s1);
}

/* Finishes a row whose length is not a multiple of 32 with the generic tail, then sums. */
static inline float hone_cpu_ymm2_finish(__m256 lo, __m256 hi, const uint8_t *row, const float *x,
                                         int64_t full, int64_t cols, hone_cpu_deq_fn deq)
{
    if (full == cols) return hone_cpu_ymm2_sum(lo, hi);
    float a[HONE_LANES], w[32];
    _mm256_storeu_ps(a, lo);
    _mm256_storeu_ps(a + 8, hi);
    deq(row, full, (int)(cols - full), w);
    hone_cpu_dot_tail(a, w, x, full, cols);
    return hone_cpu_lanes_sum(a);
}

/* Rows yr .. yr + R - 1 (weights: row i at wrow + i rb, dequantised by dq) against tokens
 * t0 .. t0 + T - 1 (constant R, T: the accumulators stay in registers); Y[t][rows]. */
#define HONE_CPU_AVX2_RXT(R, T, wrow, rb, dq, yr)                                               \
    do {                                                                                       \
        __m256 acc[R][T][2];                                                                   \
        _Pragma("GCC unroll 8") for (int i = 0; i < R; i++)                                    \
            _Pragma("GCC unroll 8") for (int t = 0; t < T; t++)                                \
                acc[i][t][0] = acc[i][t][1] = _mm256_setzero_ps();                             \
        for (int64_t b = 0; b < nb; b++)                                                       \
            _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) {                              \
                __m256 w[4];                                                                   \
                dq((const uint8_t *)(wrow) + i * (rb), b, w);                                  \
                _Pragma("GCC unroll 2") for (int hf = 0; hf < 2; hf++)                         \
                    _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) {                      \
                        const float *xt = X + (t0 + t) * cols + b * 32 + 16 * hf;              \
                        acc[i][t][0] = hone_cpu_v8_fma(w[2 * hf], _mm256_loadu_ps(xt), acc[i][t][0]); \
                        acc[i][t][1] = hone_cpu_v8_fma(w[2 * hf + 1], _mm256_loadu_ps(xt + 8), acc[i][t][1]); \
                    }                                                                          \
            }                                                                                  \
        for (int i = 0; i < R; i++)                                                            \
            for (int t = 0; t < T; t++)                                                        \
                Y[(t0 + t) * rows + (yr) + i] = hone_cpu_ymm2_finish(                          \
                    acc[i][t][0], acc[i][t][1], (const uint8_t *)W + ((yr) + i) * row_bytes,   \
                    X + (t0 + t) * cols, full, cols, deq);                                     \
    } while (0)

/* The share's rows r0 .. r1 - 1 against a tile of T tokens from t0: groups of R rows (8 to 12
 * chains), the rows left over one at a time. The matvec (T = 1) of q8_0, and of the 4-bit
 * formats on rows longer than 1024 values, prefetches the weights HONE_CPU_MATVEC_PREFETCH bytes
 * ahead of each group: one Zen 3 core's streamers kept too few lines in flight (q8_0 read 6.4
 * GB/s where f32 read 15). With it, one core, weights from memory, old/new alternated: q8_0
 * 1.04-1.94x, q4_0 / q4_1 1.13-1.22x on 1536-long rows; on 576-long ones the 4-bit formats,
 * bound by their dequantisation, measured 0.88-0.96x with it (into L1 or L2), and f32 / f16 /
 * bf16 0.95-1.08x, so those go without. */
#define HONE_CPU_AVX2_ROWS(T)                                                                   \
    do {                                                                                       \
        enum { R_ = (T) == 1 ? 4 : (T) <= 3 ? 2 : 1 };                                         \
        int64_t r = r0;                                                                        \
        const uint8_t *wend = (const uint8_t *)W + r1 * row_bytes;                             \
        for (; r + R_ <= r1; r += R_) {                                                        \
            const uint8_t *g = (const uint8_t *)W + r * row_bytes;                             \
            if ((T) == 1 && row_bytes < 2 * cols && (row_bytes >= cols || cols > 1024))       \
                hone_cpu_prefetch_span(g + HONE_CPU_MATVEC_PREFETCH, R_ * row_bytes, wend);    \
            HONE_CPU_AVX2_RXT(R_, T, g, row_bytes, deqb, r);                                   \
        }                                                                                      \
        for (; r < r1; r++) HONE_CPU_AVX2_RXT(1, T, (const uint8_t *)W + r * row_bytes, row_bytes, deqb, r); \
    } while (0)

#define HONE_CPU_AVX2_TMAX 6

/* Every balanced tile of the n tokens through BODY(T), T a constant 1 .. HONE_CPU_AVX2_TMAX. */
#define HONE_CPU_AVX2_TILES(BODY)                                                               \
    for (int64_t k = 0; k < tiles; k++) {                                                      \
        int64_t t0 = n * k / tiles, nt = n * (k + 1) / tiles - t0;                             \
        switch (nt) {                                                                          \
        case 1: BODY(1); break;                                                                \
        case 2: BODY(2); break;                                                                \
        case 3: BODY(3); break;                                                                \
        case 4: BODY(4); break;                                                                \
        case 5: BODY(5); break;                                                                \
        default: BODY(6); break;                                                               \
        }                                                                                      \
    }

/* Prefill on AVX2: a panel of up to 3 weight rows, dequantised once into f32 (the values deqb
 * gives; f32 rows are read in place), meets the tokens of a block three at a time. The lanes
 * 0..7 and 8..15 of the fixed order are independent chains, so they go in two sweeps over the
 * row: in each, 3 x 3 accumulators, 3 token vectors and a weight vector (13 ymm, none
 * spilled), 6 loads for 9 fmas, where a 1 x 6 tile loaded 7 for 6 and dequantised each block
 * again for every 6 tokens. The rows are read from memory once per token block instead of
 * once per tile (the share of a 1536 x 576 f32 matrix, 1.8 MiB, went through the 512 KiB L2
 * of Zen 3 eleven times for 64 tokens); a token block holds HONE_CPU_AVX2_XBLOCK bytes of X,
 * so it stays in L2 while the panels pass, and a sweep takes HONE_CPU_AVX2_PIECE values of the
 * row before the next (the accumulators wait in memory between pieces), so that 3 rows and 3
 * tokens of a piece stay in the 32 KiB L1. Every (token, row) chain is the same fmas, weight
 * first, in the same order: the same bits as the tiles (tests/kernels/test_cpu_slots.c). */
#define HONE_CPU_AVX2_PANEL 12288            /* floats of dequantised rows: 3 rows of 4096 */
#define HONE_CPU_AVX2_PANEL_MIN_N 8          /* fewer tokens go through the tiles above */
#define HONE_CPU_AVX2_PANEL_COLS 1024        /* longest rows of the block formats' panels */
#define HONE_CPU_AVX2_XBLOCK (256 * 1024)    /* bytes of X in one token block */
#define HONE_CPU_AVX2_PIECE 768              /* values of a row a sweep takes before the next */

/* Rows r .. r + R - 1, dequantised at p[0 .. R - 1] (full values each), against tokens t0 ..
 * t0 + T - 1; the tail past full from the weights themselves (hone_cpu_ymm2_finish). */
#define HONE_CPU_AVX2_PANEL_RXT(R, T)                                                          \
    do {                                                                                       \
        __m256 part[2][R][T];                                                                  \
        for (int64_t k0 = 0; k0 < full || k0 == 0; k0 += HONE_CPU_AVX2_PIECE) {               \
            int64_t k1 = full - k0 > HONE_CPU_AVX2_PIECE ? k0 + HONE_CPU_AVX2_PIECE : full;    \
            _Pragma("GCC unroll 2") for (int l = 0; l < 2; l++) {                              \
                __m256 acc[R][T];                                                              \
                _Pragma("GCC unroll 4") for (int i = 0; i < R; i++)                            \
                    _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                        \
                        acc[i][t] = k0 ? part[l][i][t] : _mm256_setzero_ps();                  \
                for (int64_t c = k0 + 8 * l; c < k1; c += 16) {                                \
                    __m256 xv[T];                                                              \
                    _Pragma("GCC unroll 4") for (int t = 0; t < T; t++) {                      \
                        xv[t] = _mm256_loadu_ps(X + (t0 + t) * cols + c);                      \
                        __asm__("" : "+x"(xv[t])); /* one load a token, not one a row */      \
                    }                                                                          \
                    _Pragma("GCC unroll 4") for (int i = 0; i < R; i++) {                      \
                        __m256 w = _mm256_loadu_ps(p[i] + c);                                  \
                        _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                    \
                            acc[i][t] = hone_cpu_v8_fma(w, xv[t], acc[i][t]);                  \
                    }                                                                          \
                }                                                                              \
                _Pragma("GCC unroll 4") for (int i = 0; i < R; i++)                            \
                    _Pragma("GCC unroll 4") for (int t = 0; t < T; t++) part[l][i][t] = acc[i][t]; \
            }                                                                                  \
        }                                                                                      \
        for (int i = 0; i < R; i++)                                                            \
            for (int t = 0; t < T; t++)                                                        \
                Y[(t0 + t) * rows + r + i] = hone_cpu_ymm2_finish(                             \
                    part[0][i][t], part[1][i][t], (const uint8_t *)W + (r + i) * row_bytes,    \
                    X + (t0 + t) * cols, full, cols, deq);                                     \
    } while (0)

/* A panel of R rows against the tokens tb0 .. tb1 - 1: threes, then the one or two left; the
 * next panel's weights are prefetched into L2 a slice before each three. */
#define HONE_CPU_AVX2_PANEL_TOKENS(R)                                                          \
    do {                                                                                       \
        int64_t t0 = tb0;                                                                      \
        for (; t0 + 3 <= tb1; t0 += 3) {                                                       \
            for (int64_t k = 0; k < pf_lines && pf < pf_end; k++, pf += 64)                    \
                _mm_prefetch(pf, _MM_HINT_T1);                                                 \
            HONE_CPU_AVX2_PANEL_RXT(R, 3);                                                     \
        }                                                                                      \
        if (tb1 - t0 == 2) HONE_CPU_AVX2_PANEL_RXT(R, 2);                                      \
        else if (tb1 - t0 == 1) HONE_CPU_AVX2_PANEL_RXT(R, 1);                                 \
    } while (0)

static inline __attribute__((always_inline)) void
hone_cpu_matmul_avx2_panels(float *restrict Y, const void *W, const float *restrict X, int64_t n,
                            int64_t rows, int64_t cols, int64_t row_bytes, hone_cpu_deqb_fn deqb,
                            hone_cpu_deq_fn deq, int64_t r0, int64_t r1)
{
    int64_t nb = cols / 32, full = nb * 32;
    int in_place = deqb == hone_cpu_deqb_f32;
    float buf[HONE_CPU_AVX2_PANEL] __attribute__((aligned(32)));
    int64_t tb = HONE_CPU_AVX2_XBLOCK / (cols * (int64_t)sizeof(float)) / 3 * 3;
    if (tb < 3) tb = 3;
    for (int64_t tb0 = 0; tb0 < n; tb0 += tb) {
        int64_t tb1 = tb0 + tb < n ? tb0 + tb : n;
        for (int64_t r = r0; r < r1; r += 3) {
            int R = r1 - r < 3 ? (int)(r1 - r) : 3;
            const float *p[3];
            for (int i = 0; i < R; i++) {
                const uint8_t *rw = (const uint8_t *)W + (r + i) * row_bytes;
                if (in_place) {
                    p[i] = (const float *)rw;
                    continue;
                }
                float *o = buf + i * full;
                for (int64_t b = 0; b < nb; b++) {
                    __m256 v[4];
                    deqb(rw, b, v);
                    for (int k = 0; k < 4; k++) _mm256_store_ps(o + 32 * b + 8 * k, v[k]);
                }
                p[i] = o;
            }
            /* the next panel's weights into L2, spread over this panel's token tiles */
            int64_t rn = r + 3 < r1 ? r + 3 : r1, rn1 = rn + 3 < r1 ? rn + 3 : r1;
            const char *pf = (const char *)W + rn * row_bytes, *pf_end = (const char *)W + rn1 * row_bytes;
            int64_t threes = (tb1 - tb0) / 3 > 0 ? (tb1 - tb0) / 3 : 1;
            int64_t pf_lines = ((pf_end - pf) / 64 + threes) / threes;
            if (R == 3)
                HONE_CPU_AVX2_PANEL_TOKENS(3);
            else if (R == 2)
                HONE_CPU_AVX2_PANEL_TOKENS(2);
            else
                HONE_CPU_AVX2_PANEL_TOKENS(1);
        }
    }
}

/* Y[t][r] = W[r] . X[t] for this share's rows; n = 1 is the matvec. Below
 * HONE_CPU_AVX2_PANEL_MIN_N tokens they go in balanced tiles of at most HONE_CPU_AVX2_TMAX (12
 * chains with one row), each tile dequantising the rows again; from there on through the
 * panels above, which dequantise each row once per token block. */
static inline __attribute__((always_inline)) void
hone_cpu_matmul_avx2(float *restrict Y, const void *W, const float *restrict X, int64_t n,
                     int64_t rows, int64_t cols, int64_t row_bytes, hone_cpu_deqb_fn deqb,
                     hone_cpu_deq_fn deq, int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    int64_t nb = cols / 32, full = nb * 32;
    /* the panels where they measured faster (Zen 3, one core, SmolLM2's shapes at n = 64,
     * weights from memory): f32 1.04-1.15x, the block formats 1.2-1.5x on 576-long rows but
     * 0.9x on 1536-long ones; f16 and bf16 0.8-1.0x (their tiles convert a half block in one
     * instruction, so the tiles' 12 chains win). From 8 tokens (16 for f32: 0.9-1.0x at 8). */
    int panels = deqb == hone_cpu_deqb_f32 ||
                 (deqb != hone_cpu_deqb_f16 && deqb != hone_cpu_deqb_bf16 && cols <= HONE_CPU_AVX2_PANEL_COLS);
    if (panels && n >= (deqb == hone_cpu_deqb_f32 ? 2 : 1) * HONE_CPU_AVX2_PANEL_MIN_N &&
        3 * full <= HONE_CPU_AVX2_PANEL) {
        hone_cpu_matmul_avx2_panels(Y, W, X, n, rows, cols, row_bytes, deqb, deq, r0, r1);
        return;
    }
    int64_t tiles = (n + HONE_CPU_AVX2_TMAX - 1) / HONE_CPU_AVX2_TMAX;
    HONE_CPU_AVX2_TILES(HONE_CPU_AVX2_ROWS);
}
#endif

/* The shipped kernels' path where AVX-512 is not built in (and the search templates' there):
 * AVX2 for the formats with a hone_cpu_deqb_<dt> (HONE_CPU_AVX2_HAS_<dt>), else the generic C,
 * which stays the portable reference and the naive incumbents' code in tests/agent. dt: the
 * dtype's suffix. */
#ifdef HONE_CPU_AVX2
/* q5: the nibbles of hone_cpu_nibbles4 with bit j of qh as their fifth bit (value j). */
static inline void hone_cpu_nibbles4_q5(const uint8_t *qs, const uint8_t *qhp, __m256i q[4])
{
    uint32_t qh;
    memcpy(&qh, qhp, 4);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), one = _mm256_set1_epi32(1);
    hone_cpu_nibbles4(qs, q);
    for (int k = 0; k < 4; k++) {
        __m256i h = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)(qh >> (8 * k))), iota), one);
        q[k] = _mm256_or_si256(q[k], _mm256_slli_epi32(h, 4));
    }
}
static inline void hone_cpu_deqb_q5_0(const uint8_t *row, int64_t blk, __m256 v[4])
{
    const hone_block_q5_0 *bl = (const hone_block_q5_0 *)row + blk;
    __m256 d = _mm256_set1_ps(hone_cpu_half(bl->d));
    __m256i q[4], m16 = _mm256_set1_epi32(16);
    hone_cpu_nibbles4_q5(bl->qs, bl->qh, q);
    for (int k = 0; k < 4; k++) v[k] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q[k], m16)), d);
}
static inline void hone_cpu_deqb_q5_1(const uint8_t *row, int64_t blk, __m256 v[4])
{
    const hone_block_q5_1 *bl = (const hone_block_q5_1 *)row + blk;
    __m256 d = _mm256_set1_ps(hone_cpu_half(bl->d)), m = _mm256_set1_ps(hone_cpu_half(bl->m));
    __m256i q[4];
    hone_cpu_nibbles4_q5(bl->qs, bl->qh, q);
    for (int k = 0; k < 4; k++) v[k] = hone_cpu_v8_fma(_mm256_cvtepi32_ps(q[k]), d, m);
}
#define HONE_CPU_AVX2_HAS_f32 1
#define HONE_CPU_AVX2_HAS_f16 1
#define HONE_CPU_AVX2_HAS_bf16 1
#define HONE_CPU_AVX2_HAS_q8_0 1
#define HONE_CPU_AVX2_HAS_q4_0 1
#define HONE_CPU_AVX2_HAS_q4_1 1
#define HONE_CPU_AVX2_HAS_q5_0 1
#define HONE_CPU_AVX2_HAS_q5_1 1
#define HONE_CPU_AVX2_NONE(dt)                                                                  \
    enum { HONE_CPU_AVX2_HAS_##dt = 0 };                                                       \
    static const hone_cpu_deqb_fn hone_cpu_deqb_##dt = NULL;
HONE_CPU_AVX2_NONE(mxfp4)
HONE_CPU_AVX2_NONE(q2_k)
HONE_CPU_AVX2_NONE(q3_k)
HONE_CPU_AVX2_NONE(q4_k)
HONE_CPU_AVX2_NONE(q5_k)
HONE_CPU_AVX2_NONE(q6_k)
#undef HONE_CPU_AVX2_NONE
#define hone_cpu_matmul_portable(Y, W, X, n, rows, cols, rb, dt, deq, ith, nth)                  \
    do {                                                                                       \
        if (HONE_CPU_AVX2_HAS_##dt)                                                            \
            hone_cpu_matmul_avx2(Y, W, X, n, rows, cols, rb, hone_cpu_deqb_##dt, deq, ith, nth); \
        else                                                                                   \
            hone_cpu_matmul_generic(Y, W, X, n, rows, cols, rb, deq, ith, nth);                \
    } while (0)
#define hone_cpu_matvec_portable(y, W, x, rows, cols, rb, dt, deq, ith, nth)                     \
    do {                                                                                       \
        if (HONE_CPU_AVX2_HAS_##dt)                                                            \
            hone_cpu_matmul_avx2(y, W, x, 1, rows, cols, rb, hone_cpu_deqb_##dt, deq, ith, nth); \
        else                                                                                   \
            hone_cpu_matvec_generic(y, W, x, rows, cols, rb, deq, ith, nth);                   \
    } while (0)
#else
#define hone_cpu_matvec_portable(y, W, x, rows, cols, rb, dt, deq, ith, nth)                     \
    hone_cpu_matvec_generic(y, W, x, rows, cols, rb, deq, ith, nth)
#define hone_cpu_matmul_portable(Y, W, X, n, rows, cols, rb, dt, deq, ith, nth)                  \
    hone_cpu_matmul_generic(Y, W, X, n, rows, cols, rb, deq, ith, nth)
#endif


#ifdef HONE_CPU_SIMD
/* hone_cpu_expf on 8 doubles (the formula only: |x| < 88). */
static inline __m512d hone_cpu_expf8_pd(__m512d xd)
{
    const __m512d invln2n = _mm512_set1_pd(HONE_CPU_EXPF_INVLN2N), shift = _mm512_set1_pd(HONE_CPU_EXPF_SHIFT);
    __m512d kd = _mm512_add_pd(_mm512_mul_pd(invln2n, xd), shift);
    __m512i ki = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, shift);
    __m512d r = _mm512_fmadd_pd(invln2n, xd, _mm512_sub_pd(_mm512_setzero_pd(), kd));
    /* the table entry ki % 32 from registers: two 16-entry permutes (bits 0..3 of the index)
     * and bit 4 choosing between them; a gather reads the same entry, but costs ~10x more on
     * CPUs with the gather-data-sampling mitigation (Ice Lake, Tiger Lake: microcode) */
    const __m512i t0 = _mm512_loadu_si512((const void *)hone_cpu_exp2f_tab),
                  t1 = _mm512_loadu_si512((const void *)(hone_cpu_exp2f_tab + 8)),
                  t2 = _mm512_loadu_si512((const void *)(hone_cpu_exp2f_tab + 16)),
                  t3 = _mm512_loadu_si512((const void *)(hone_cpu_exp2f_tab + 24));
    __mmask8 upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
    __m512i t = _mm512_mask_blend_epi64(upper, _mm512_permutex2var_epi64(t0, ki, t1),
                                        _mm512_permutex2var_epi64(t2, ki, t3));
    t = _mm512_add_epi64(t, _mm512_slli_epi64(ki, 47));
    __m512d zz = _mm512_fmadd_pd(_mm512_set1_pd(HONE_CPU_EXPF_C0), r, _mm512_set1_pd(HONE_CPU_EXPF_C1));
    __m512d y = _mm512_fmadd_pd(_mm512_set1_pd(HONE_CPU_EXPF_C2), r, _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(zz, _mm512_mul_pd(r, r), y);
    return _mm512_mul_pd(y, _mm512_castsi512_pd(t));
}

/* hone_cpu_expf of 16 floats; lanes with |x| >= 88 or NaN go through the scalar function. */
static inline __m512 hone_cpu_expf16(__m512 v)
{
    __m512d lo = hone_cpu_expf8_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    __m512d hi = hone_cpu_expf8_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
    __m512 e = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
    __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(88.0f), _CMP_NLT_UQ);
    if (big) {
        float x[16], r[16];
        _mm512_storeu_ps(x, v);
        _mm512_storeu_ps(r, e);
        for (int i = 0; i < 16; i++)
            if (big >> i & 1) r[i] = hone_cpu_expf(x[i]);
        e = _mm512_loadu_ps(r);
    }
    return e;
}
#endif

/* e[i] = hone_cpu_expf(x[i]) for n values (16 at a time where AVX-512 is built in). */
static inline void hone_cpu_expf_n(float *e, const float *x, int64_t n)
{
    int64_t i = 0;
#ifdef HONE_CPU_SIMD
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(e + i, hone_cpu_expf16(_mm512_loadu_ps(x + i)));
#endif
    for (; i < n; i++) e[i] = hone_cpu_expf(x[i]);
}

#ifdef HONE_CPU_SIMD
/* The attention row with the head in zmm registers: each score is the same lane-order dot
 * product (dims l, l+16, l+32, ... into lane l, then the tree), four keys at a time for
 * independent chains; the exps 16 at a time (hone_cpu_expf16, the scalar hone_cpu_expf's bits)
 * and the double normaliser in key order as in the generic row; V is
 * accumulated per dimension in key order with one fma each. Same bits as the generic row. */
static inline hone_cpu_att_ml hone_cpu_attend_seg_simd(float *restrict out, const float *restrict q,
                                            const float *k_cache, const float *v_cache,
                                            const int32_t *block_table, int64_t k0, int64_t n_kv,
                                            int64_t block_size, int64_t n_kv_heads, int64_t kvh,
                                            int64_t head_dim, float scale, float *restrict scores)
{
    enum { MAXV = 16 };
    int nv = (int)(head_dim / 16);
    __m512 qv[MAXV], o[MAXV];
    for (int i = 0; i < nv; i++) qv[i] = _mm512_loadu_ps(q + 16 * i);
    /* keys walked block by block of the paged cache (one table lookup a block, no division a
     * key); a key's score and its place in the sums do not depend on the walk */
#define HONE_KV_BLOCK(cache, b0)                                                                   \
    ((cache) + hone_kv_block_offset(block_table[(k0 + (b0)) / block_size], block_size, n_kv_heads, kvh, head_dim) + \
     (k0 + (b0)) % block_size * head_dim)
#define HONE_KV_RUN(b0) (n_kv - (b0) < block_size - (k0 + (b0)) % block_size ? n_kv - (b0) : block_size - (k0 + (b0)) % block_size)
    float mx = -INFINITY;
    int64_t j;
    for (int64_t b0 = 0, nk; b0 < n_kv; b0 += nk) { /* a run of keys within one block */
        const float *kb = HONE_KV_BLOCK(k_cache, b0);
        int64_t s = 0;
        nk = HONE_KV_RUN(b0);
        float *sc = scores + b0;
        for (; s + 4 <= nk; s += 4) {
            /* a kv head's consecutive keys in a block are head_dim apart (engine/kv_layout.h) */
            const float *ka = kb + s * head_dim, *k1 = ka + head_dim, *k2 = k1 + head_dim, *k3 = k2 + head_dim;
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int i = 0; i < nv; i++) {
                a0 = _mm512_fmadd_ps(_mm512_loadu_ps(ka + 16 * i), qv[i], a0);
                a1 = _mm512_fmadd_ps(_mm512_loadu_ps(k1 + 16 * i), qv[i], a1);
                a2 = _mm512_fmadd_ps(_mm512_loadu_ps(k2 + 16 * i), qv[i], a2);
                a3 = _mm512_fmadd_ps(_mm512_loadu_ps(k3 + 16 * i), qv[i], a3);
            }
            sc[s] = hone_cpu_zmm_sum(a0) * scale;
            sc[s + 1] = hone_cpu_zmm_sum(a1) * scale;
            sc[s + 2] = hone_cpu_zmm_sum(a2) * scale;
            sc[s + 3] = hone_cpu_zmm_sum(a3) * scale;
        }
        for (; s < nk; s++) {
            const float *k = kb + s * head_dim;
            __m512 a = _mm512_setzero_ps();
            for (int i = 0; i < nv; i++) a = _mm512_fmadd_ps(_mm512_loadu_ps(k + 16 * i), qv[i], a);
            sc[s] = hone_cpu_zmm_sum(a) * scale;
        }
    }
    /* the max (exact in any order; max_ps(x, m) keeps m for a NaN x, as the scalar test does),
     * the exps 16 at a time, the normaliser in double in key order */
    __m512 mv = _mm512_set1_ps(-INFINITY);
    for (j = 0; j + 16 <= n_kv; j += 16) mv = _mm512_max_ps(_mm512_loadu_ps(scores + j), mv);
    float ml[16];
    _mm512_storeu_ps(ml, mv);
    for (int l = 0; l < 16; l++)
        if (ml[l] > mx) mx = ml[l];
    for (; j < n_kv; j++)
        if (scores[j] > mx) mx = scores[j];
    __m512 mxv = _mm512_set1_ps(mx);
    for (j = 0; j + 16 <= n_kv; j += 16)
        _mm512_storeu_ps(scores + j, hone_cpu_expf16(_mm512_sub_ps(_mm512_loadu_ps(scores + j), mxv)));
    for (; j < n_kv; j++) scores[j] = hone_cpu_expf(scores[j] - mx);
    double sum = 0.0;
    for (j = 0; j < n_kv; j++) sum += scores[j];
    for (int i = 0; i < nv; i++) o[i] = _mm512_setzero_ps();
    for (int64_t b0 = 0, nk; b0 < n_kv; b0 += nk) {
        const float *vb = HONE_KV_BLOCK(v_cache, b0);
        nk = HONE_KV_RUN(b0);
        for (int64_t s = 0; s < nk; s++) {
            const float *v = vb + s * head_dim;
            __m512 p = _mm512_set1_ps(scores[b0 + s]);
            for (int i = 0; i < nv; i++) o[i] = _mm512_fmadd_ps(p, _mm512_loadu_ps(v + 16 * i), o[i]);
        }
    }
#undef HONE_KV_BLOCK
#undef HONE_KV_RUN
    for (int i = 0; i < nv; i++) _mm512_storeu_ps(out + 16 * i, o[i]);
    return (hone_cpu_att_ml){mx, sum};
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
        hone_cpu_attend_row_segs(hone_cpu_attend_seg_simd, out, q, k_cache, v_cache, block_table, n_kv, block_size,
                                 n_kv_heads, kvh, head_dim, scale, scores);
        return;
    }
#endif
    hone_cpu_attend_row_generic(out, q, k_cache, v_cache, block_table, n_kv, block_size,
                                n_kv_heads, kvh, head_dim, scale, scores);
}

/* ---- attention tiles: up to 64 query rows of one kv head at once ---------------------------
 * hone_cpu_attend_rows gives each row the bits of hone_cpu_attend_row (hence of the generic
 * row): it changes the schedule only. The rows (GQA: the query heads of one kv head, and in
 * prefill the tokens of a chunk) walk the keys together, 16 at a time, so each K and V row is
 * read once from memory for all of them and stays in L1 while R rows (R = 4, 4, 2, 1 for head
 * dims 32, 64, 128, 256) use it from registers; R rows give R independent chains where one row
 * waits on fma and double-add latency. Two passes over the keys: the first computes every
 * score (the same lane-order dot product and tree) and keeps the running max; the second
 * takes each score back (kept from pass 1 on the stack, at most a segment's HONE_ATT_SEG keys a
 * row: pass 2 reads V alone, and K once in all),
 * exp(score - max) 16 at a time (hone_cpu_expf16 / hone_cpu_expf8x2, the
 * scalar hone_cpu_expf's bits), adds each exp to the row's double normaliser in key order and
 * accumulates V per dimension in key order with one fma each (the accumulators live in the
 * output row between 16-key steps; storing and reloading a float changes no bit). A row never
 * touches a key at or past its own n_kv. A remainder of rows short of R goes as one smaller
 * group (3 GQA rows on R = 4 share each load), and each step prefetches the K (pass 2: V) rows
 * HONE_CPU_ATT_AHEAD steps on: at 4k keys decode is bound by memory (SmolLM2-135M's 30 layers,
 * 2 threads: the slot alone went from ~53 to ~40 ms a token on a loaded 2-core machine, the
 * K/V rows' first loads stalling before). Tested: tests/kernels/test_attend_tiles.c. */
#define HONE_CPU_ATT_ROWS 64 /* rows of one tile */
#define HONE_CPU_ATT_WIDE_ROWS 16 /* a wide tile (prefill): see hone_cpu_att_scores_kt */
#define HONE_CPU_ATT_KEYS 16 /* keys a step */
#define HONE_CPU_ATT_AHEAD 2 /* steps a prefetch runs ahead */
/* The cache level the K/V prefetch fills (__builtin_prefetch's locality) for a tile of at most
 * HONE_CPU_ATT_L1_ROWS rows (decode: a GQA group; each line serves so few rows that the tile
 * runs at the speed of memory): L1 (3) on AMD Zen with AVX-512, which gcc names with
 * -march=native (a Zen 5 is __znver3__ to gcc 12), else L2 (2), as wider tiles everywhere (see
 * the prefetch below). Zen 5 (family 26), SmolLM2 q4_0 at 4k context, 2 threads, 5 interleaved
 * pairs of bench/decode with L1 for every tile: decode 1.10x (median; 0.95-1.31), the prompt
 * 0.96x (0.85-0.99), hence wide tiles keep L2; one thread over 30 layers' K/V (cold) at 4k keys,
 * decode: 31-34 -> 26-29 ns a (kv head, key). Zen 3 (AVX2) was not measured: it keeps L2. */
#define HONE_CPU_ATT_L1_ROWS 8
/* Those tiles also prefetch the step HONE_CPU_ATT_FAR on into L2: one thread over 30 layers'
 * cold K/V, 3 rows a kv head, old (L2, 2 ahead) / L1 2 ahead / both with L2 6 ahead: 4k keys
 * 29-31 / 26-28 / 22-23 ns a (kv head, key) (4 and 8 ahead within 1 ns of 6, 16 ahead 24.5);
 * 1k keys 26 / - / 20; 2 threads at 4k (wall time) 18 / - / 16-18 ns a (kv head, key). */
#define HONE_CPU_ATT_FAR 6
#if defined(HONE_CPU_SIMD) && (defined(__znver1__) || defined(__znver2__) || defined(__znver3__) ||  \
                               defined(__znver4__) || defined(__znver5__))
#define HONE_CPU_ATT_PREFETCH_L1 1
#else
#define HONE_CPU_ATT_PREFETCH_L1 0
#endif

#if defined(HONE_CPU_SIMD) || defined(HONE_CPU_AVX2)
#define HONE_CPU_ATT_VEC 1
#ifdef HONE_CPU_SIMD
/* 16 lanes of the fixed order: one zmm. */
typedef __m512 hone_cpu_av;
static inline hone_cpu_av hone_cpu_av_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void hone_cpu_av_store(float *p, hone_cpu_av a) { _mm512_storeu_ps(p, a); }
static inline hone_cpu_av hone_cpu_av_zero(void) { return _mm512_setzero_ps(); }
static inline hone_cpu_av hone_cpu_av_set1(float x) { return _mm512_set1_ps(x); }
static inline hone_cpu_av hone_cpu_av_fma(hone_cpu_av a, hone_cpu_av b, hone_cpu_av c) { return _mm512_fmadd_ps(a, b, c); }
static inline hone_cpu_av hone_cpu_av_mul(hone_cpu_av a, hone_cpu_av b) { return _mm512_mul_ps(a, b); }
static inline hone_cpu_av hone_cpu_av_sub(hone_cpu_av a, hone_cpu_av b) { return _mm512_sub_ps(a, b); }
static inline float hone_cpu_av_sum(hone_cpu_av a) { return hone_cpu_zmm_sum(a); }
static inline void hone_cpu_av_exp(float *x) { _mm512_storeu_ps(x, hone_cpu_expf16(_mm512_loadu_ps(x))); }
#else
/* 16 lanes of the fixed order: two ymm (lanes 0..7, 8..15), as the AVX2 matmul. */
typedef struct { __m256 lo, hi; } hone_cpu_av;
static inline hone_cpu_av hone_cpu_av_load(const float *p) { return (hone_cpu_av){_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
static inline void hone_cpu_av_store(float *p, hone_cpu_av a) { _mm256_storeu_ps(p, a.lo); _mm256_storeu_ps(p + 8, a.hi); }
static inline hone_cpu_av hone_cpu_av_zero(void) { return (hone_cpu_av){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
static inline hone_cpu_av hone_cpu_av_set1(float x) { return (hone_cpu_av){_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
static inline hone_cpu_av hone_cpu_av_fma(hone_cpu_av a, hone_cpu_av b, hone_cpu_av c)
{
    return (hone_cpu_av){hone_cpu_v8_fma(a.lo, b.lo, c.lo), hone_cpu_v8_fma(a.hi, b.hi, c.hi)};
}
static inline hone_cpu_av hone_cpu_av_mul(hone_cpu_av a, hone_cpu_av b)
{
    return (hone_cpu_av){_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
}
static inline hone_cpu_av hone_cpu_av_sub(hone_cpu_av a, hone_cpu_av b)
{
    return (hone_cpu_av){_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)};
}
static inline float hone_cpu_av_sum(hone_cpu_av a) { return hone_cpu_ymm2_sum(a.lo, a.hi); }

/* hone_cpu_expf on 4 doubles (the formula only: |x| < 88), hone_cpu_expf8_pd's steps. */
static inline __m256d hone_cpu_expf4_pd(__m256d xd)
{
    const __m256d invln2n = _mm256_set1_pd(HONE_CPU_EXPF_INVLN2N), shift = _mm256_set1_pd(HONE_CPU_EXPF_SHIFT);
    __m256d kd = _mm256_add_pd(_mm256_mul_pd(invln2n, xd), shift);
    __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, shift);
    __m256d r = _mm256_fmadd_pd(invln2n, xd, _mm256_sub_pd(_mm256_setzero_pd(), kd));
    __m256i t = _mm256_i64gather_epi64((const long long *)hone_cpu_exp2f_tab,
                                       _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    t = _mm256_add_epi64(t, _mm256_slli_epi64(ki, 47));
    __m256d zz = _mm256_fmadd_pd(_mm256_set1_pd(HONE_CPU_EXPF_C0), r, _mm256_set1_pd(HONE_CPU_EXPF_C1));
    __m256d y = _mm256_fmadd_pd(_mm256_set1_pd(HONE_CPU_EXPF_C2), r, _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(zz, _mm256_mul_pd(r, r), y);
    return _mm256_mul_pd(y, _mm256_castsi256_pd(t));
}

/* hone_cpu_expf of 8 floats; lanes with |x| >= 88 or NaN go through the scalar function. */
static inline __m256 hone_cpu_expf8(__m256 v)
{
    __m128 lo = _mm256_cvtpd_ps(hone_cpu_expf4_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v))));
    __m128 hi = _mm256_cvtpd_ps(hone_cpu_expf4_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))));
    __m256 e = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
    __m256 av = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
    int big = _mm256_movemask_ps(_mm256_cmp_ps(av, _mm256_set1_ps(88.0f), _CMP_NLT_UQ));
    if (big) {
        float x[8], r[8];
        _mm256_storeu_ps(x, v);
        _mm256_storeu_ps(r, e);
        for (int i = 0; i < 8; i++)
            if (big >> i & 1) r[i] = hone_cpu_expf(x[i]);
        e = _mm256_loadu_ps(r);
    }
    return e;
}
static inline void hone_cpu_av_exp(float *x)
{
    _mm256_storeu_ps(x, hone_cpu_expf8(_mm256_loadu_ps(x)));
    _mm256_storeu_ps(x + 8, hone_cpu_expf8(_mm256_loadu_ps(x + 8)));
}
#endif

/* The keys j0 .. j0 + nk - 1 of one 16-key step: their K and V rows in the paged cache. */
typedef struct {
    const float *k[HONE_CPU_ATT_KEYS], *v[HONE_CPU_ATT_KEYS];
    int64_t j0;
    int nk;
    const float *pf; /* a whole step's run (16 rows of pf_row floats) to prefetch into L1 a slice a
                      * key as the step goes, or NULL */
    int64_t pf_row;
} hone_cpu_att_step;

/* Slice i of n (n divides HONE_CPU_ATT_KEYS) of the step's spread L1 prefetch (see
 * hone_cpu_att_tile): the lines of keys i * 16 / n .. (i + 1) * 16 / n - 1 of the run. */
static inline __attribute__((always_inline)) void hone_cpu_att_pf_slice(const hone_cpu_att_step *st, int i, int n)
{
    if (!st->pf) return;
    int64_t len = HONE_CPU_ATT_KEYS / n * st->pf_row;
    const float *p = st->pf + i * len;
    for (int64_t c = 0; c < len; c += 16) __builtin_prefetch(p + c, 0, 3);
}

#ifdef HONE_CPU_SIMD
/* The tree of hone_cpu_zmm_sum for 16 keys at once, two keys' adds in one instruction: each
 * step adds the same lane pairs in the same operand order as the one-key tree (l + 8, l + 4,
 * then [0] + [2], [1] + [3], then [0] + [1]); only where the partial sums sit differs. */
static inline __m512 hone_cpu_att_t1(__m512 a, __m512 b) /* [a.s8 | b.s8] */
{
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
}
static inline __m512 hone_cpu_att_t2(__m512 a, __m512 b) /* 128-bit chunks: a1.s4 a2.s4 b1.s4 b2.s4 */
{
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
}
static inline __m512 hone_cpu_att_t3(__m512 a, __m512 b) /* per chunk: a.s2a a.s2b b.s2a b.s2b */
{
    return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x44), _mm512_shuffle_ps(a, b, 0xEE));
}
static inline __m512 hone_cpu_att_t4(__m512 a, __m512 b) /* per chunk: totals a.0 a.1 b.0 b.1 */
{
    return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD));
}
#endif

#ifndef HONE_CPU_SIMD
/* The tree of hone_cpu_ymm2_sum (after its first add, lo + hi) for 8 keys at once: each step
 * adds the same lane pairs in the same operand order as the one-key tree (l + 4, then [0] +
 * [2], [1] + [3], then [0] + [1]), two to four keys an instruction. */
static inline __m256 hone_cpu_att_y1(__m256 a, __m256 b) /* [a.s4 | b.s4] */
{
    return hone_cpu_v8_add(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}
static inline __m256 hone_cpu_att_y2(__m256 a, __m256 b) /* per half: x.s2a x.s2b y.s2a y.s2b */
{
    return hone_cpu_v8_add(_mm256_shuffle_ps(a, b, 0x44), _mm256_shuffle_ps(a, b, 0xEE));
}
static inline __m256 hone_cpu_att_y3(__m256 a, __m256 b) /* totals: [a.0 a.1 b.0 b.1 | ...] */
{
    return hone_cpu_v8_add(_mm256_shuffle_ps(a, b, 0x88), _mm256_shuffle_ps(a, b, 0xDD));
}

/* s8 = lo + hi of key k's lane-order dot product with each of the R rows: the first add of
 * hone_cpu_ymm2_sum. K comes from registers, q from memory (16 ymm hold no 4 rows of q). */
static inline __attribute__((always_inline)) void
hone_cpu_att_s8(const int NV, const int R, const float *const *q, const float *k, __m256 *s8)
{
    __m256 lo[4], hi[4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) lo[r] = hi[r] = _mm256_setzero_ps();
#pragma GCC unroll 16
    for (int i = 0; i < NV; i++) {
        __m256 kl = _mm256_loadu_ps(k + 16 * i), kh = _mm256_loadu_ps(k + 16 * i + 8);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            lo[r] = hone_cpu_v8_fma(kl, _mm256_loadu_ps(q[r] + 16 * i), lo[r]);
            hi[r] = hone_cpu_v8_fma(kh, _mm256_loadu_ps(q[r] + 16 * i + 8), hi[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) s8[r] = hone_cpu_v8_add(lo[r], hi[r]);
}
#endif

/* p[r][s] = the score of row r and key s of the step (hone_cpu_zmm_sum of its lane-order dot
 * product, times scale), for all 16 keys (keys past the step's count repeat its first key). */
static inline __attribute__((always_inline)) void
hone_cpu_att_scores(const int NV, const int R, const float *const *q, const hone_cpu_att_step *st,
                    float scale, float (*p)[HONE_CPU_ATT_KEYS])
{
#ifdef HONE_CPU_SIMD
    hone_cpu_av qv[4][16];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 16
        for (int i = 0; i < NV; i++) qv[r][i] = hone_cpu_av_load(q[r] + 16 * i);
    /* keys g, g + 4, g + 8, g + 12 reduce to c (their chunks in that order); c of g = 0, 1 and
     * 2, 3 to d; the last step leaves key s in lane s */
    __m512 d[2][4], c[2][4];
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        hone_cpu_att_pf_slice(st, g, 4);
        __m512 a[4][4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) a[k][r] = _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int i = 0; i < NV; i++)
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                __m512 kv = _mm512_loadu_ps(st->k[g + 4 * k] + 16 * i);
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) a[k][r] = _mm512_fmadd_ps(kv, qv[r][i], a[k][r]);
            }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            c[g & 1][r] = hone_cpu_att_t2(hone_cpu_att_t1(a[0][r], a[1][r]), hone_cpu_att_t1(a[2][r], a[3][r]));
            if (g & 1) d[g >> 1][r] = hone_cpu_att_t3(c[0][r], c[1][r]);
        }
    }
    __m512 sv = _mm512_set1_ps(scale);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) _mm512_storeu_ps(p[r], _mm512_mul_ps(hone_cpu_att_t4(d[0][r], d[1][r]), sv));
#else
    /* keys h, h + 1, h + 2, h + 3 pair with h + 4 .. h + 7 (y1), then meet (y2, y3) so that
     * key h + s lands in lane s */
    __m256 sv = _mm256_set1_ps(scale);
#pragma GCC unroll 2
    for (int h = 0; h < HONE_CPU_ATT_KEYS; h += 8) {
        __m256 u[2][4];
#pragma GCC unroll 2
        for (int g = 0; g < 2; g++) {
            __m256 t[2][4];
#pragma GCC unroll 2
            for (int e = 0; e < 2; e++) {
                __m256 a[4], b[4];
                hone_cpu_att_s8(NV, R, q, st->k[h + 2 * g + e], a);
                hone_cpu_att_s8(NV, R, q, st->k[h + 2 * g + e + 4], b);
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) t[e][r] = hone_cpu_att_y1(a[r], b[r]);
            }
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) u[g][r] = hone_cpu_att_y2(t[0][r], t[1][r]);
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            _mm256_storeu_ps(p[r] + h, _mm256_mul_ps(hone_cpu_att_y3(u[0][r], u[1][r]), sv));
    }
#endif
}

#ifdef HONE_CPU_SIMD
/* Wide tiles (at least HONE_CPU_ATT_WIDE_ROWS rows: prefill) score a step from K transposed:
 * kt[d] holds dimension d of the step's 16 keys, key s in lane s (one 16 x 16 transpose per 16
 * dimensions, 4 for head dim 64, shared by all of the tile's rows). Row r's lane l chain (dims
 * l, l + 16, ... from 0, one fma each) then runs for the 16 keys at once in one register, and
 * the tree's levels (l + 8, + 4, then [0] + [2], [1] + [3], then [0] + [1]) become adds of
 * whole registers in the same operand order: the fmas and adds of hone_cpu_att_scores, each
 * key's in its own lane, with no shuffle per row (its tree cost 30 shuffles a row and step),
 * and R rows share each kt load (one row at a time, two loads an fma bound it). Zen 5, one
 * core, attention_prefill of SmolLM2's 64-token chunk (9 heads on 3 kv heads of 64) at 2k keys,
 * alternated: 3.21-3.31 -> 2.65-2.70 ms (1.22x); at 0 / 100 / 500 / 4000 keys 1.16 / 1.17 /
 * 1.21 / 1.21x. Narrow tiles (decode's GQA group) keep the shuffle tree: the transpose would
 * cost more than it saves on 3 rows. */
/* The 4 x 4 transposes within each 128-bit chunk of 4 rows: u[j] chunk c holds element 4c + j
 * of rows 0 .. 3 (the first two stages of the 16 x 16 transpose, and all of the row sums'). */
static inline __attribute__((always_inline)) void hone_cpu_att_tr4(const __m512 a[4], __m512 u[4])
{
    __m512 t0 = _mm512_unpacklo_ps(a[0], a[1]), t1 = _mm512_unpackhi_ps(a[0], a[1]);
    __m512 t2 = _mm512_unpacklo_ps(a[2], a[3]), t3 = _mm512_unpackhi_ps(a[2], a[3]);
    u[0] = _mm512_shuffle_ps(t0, t2, 0x44), u[1] = _mm512_shuffle_ps(t0, t2, 0xEE);
    u[2] = _mm512_shuffle_ps(t1, t3, 0x44), u[3] = _mm512_shuffle_ps(t1, t3, 0xEE);
}

static inline __attribute__((always_inline)) void hone_cpu_att_tr16(__m512 r[16])
{
    __m512 t[16];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        __m512 u[4];
        hone_cpu_att_tr4(r + 4 * k, u);
        for (int j = 0; j < 4; j++) r[4 * k + j] = u[j];
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        t[k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88);
        t[k + 4] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xDD);
        t[k + 8] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88);
        t[k + 12] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xDD);
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        r[k] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0x88);
        r[k + 8] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0xDD);
        r[k + 4] = _mm512_shuffle_f32x4(t[k + 4], t[k + 12], 0x88);
        r[k + 12] = _mm512_shuffle_f32x4(t[k + 4], t[k + 12], 0xDD);
    }
}

static inline __attribute__((always_inline)) void hone_cpu_att_kt(const int NV, const hone_cpu_att_step *st,
                                                                  __m512 *kt)
{
    for (int i = 0; i < NV; i++) {
        __m512 r[16];
#pragma GCC unroll 16
        for (int s = 0; s < HONE_CPU_ATT_KEYS; s++) r[s] = _mm512_loadu_ps(st->k[s] + 16 * i);
        hone_cpu_att_tr16(r);
#pragma GCC unroll 16
        for (int l = 0; l < 16; l++) kt[16 * i + l] = r[l];
    }
}

/* R rows at once, each kt vector loaded once for all of them: lanes l, l + 8, l + 4, l + 12
 * (a quad, the four chains whose sums make s4_l), quads 0 and 2 then 1 and 3, so that only s2
 * of the tree waits in registers between quads. */
static inline __attribute__((always_inline)) void
hone_cpu_att_scores_kt(const int NV, const int R, const float *const *q, const __m512 *kt, float scale,
                       float (*p)[HONE_CPU_ATT_KEYS])
{
    static const int quad_order[4] = {0, 2, 1, 3}, lane_of[4] = {0, 8, 4, 12};
    __m512 s4[4][4], s2[2][4];
#pragma GCC unroll 4
    for (int qi = 0; qi < 4; qi++) {
        const int l = quad_order[qi];
        __m512 a[4][4];
#pragma GCC unroll 4
        for (int e = 0; e < 4; e++)
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) a[e][r] = _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int i = 0; i < NV; i++)
#pragma GCC unroll 4
            for (int e = 0; e < 4; e++) {
                const int d = 16 * i + l + lane_of[e];
                __m512 k = kt[d];
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) a[e][r] = _mm512_fmadd_ps(k, _mm512_set1_ps(q[r][d]), a[e][r]);
            }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) /* s4_l = (s8_l = A_l + A_l+8) + (s8_l+4 = A_l+4 + A_l+12) */
            s4[l][r] = hone_cpu_v16_add(hone_cpu_v16_add(a[0][r], a[1][r]), hone_cpu_v16_add(a[2][r], a[3][r]));
        if (qi == 1) /* s2_0 = s4_0 + s4_2 */
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) s2[0][r] = hone_cpu_v16_add(s4[0][r], s4[2][r]);
    }
    const __m512 sv = _mm512_set1_ps(scale);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        s2[1][r] = hone_cpu_v16_add(s4[1][r], s4[3][r]);
        _mm512_storeu_ps(p[r], _mm512_mul_ps(hone_cpu_v16_add(s2[0][r], s2[1][r]), sv));
    }
}
#endif

/* n <= 16 scores: a whole step as one vector move (gcc makes a memcpy, of a runtime length or
 * of 64 bytes, a rep movs on Zen 3: ~8% of a decode step), a short one float by float. */
static inline void hone_cpu_att_copy(float *dst, const float *src, int n)
{
    if (n == HONE_CPU_ATT_KEYS) {
        hone_cpu_av_store(dst, hone_cpu_av_load(src));
        return;
    }
    for (int s = 0; s < n; s++) dst[s] = src[s];
}

#ifdef HONE_CPU_SIMD
/* sm[r] += p[r][s] for s = 0 .. 15 in key order, in double, for R (2 .. 4) rows of a tile at
 * once (decode's 3-row tiles first measured 8% slower with it, their steps waiting on memory;
 * once their bookkeeping and prefetch bursts were gone, one Zen 5 thread, 30 layers at 4k keys,
 * alternated x4: cold K/V 19.3-20.5 -> 18.6-19.4 ns a (kv head, key), hot 12.1-12.5 ->
 * 10.7-11.0): row r in lane r of one register, so the 16 adds of the 4 rows
 * are 16 vector adds (each lane the scalar chain's adds in its order, sm first) where the
 * scalar loop issued 64 conversions, adds and tests (the same harness: 2.65-2.70 -> 2.57-2.58
 * ms).
 * hone_cpu_att_tr4 puts key 4c + j's rows in chunk c of u[j]. */
static inline __m256d hone_cpu_v4d_add(__m256d a, __m256d b)
{
    __m256d r;
    __asm__("vaddpd %2, %1, %0" : "=v"(r) : "v"(a), "vm"(b));
    return r;
}

static inline __attribute__((always_inline)) void hone_cpu_att_sums4(const int R, float (*p)[HONE_CPU_ATT_KEYS],
                                                                     double *sm)
{
    __m512 pr[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) pr[r] = r < R ? _mm512_loadu_ps(p[r]) : _mm512_setzero_ps();
    __m512 u[4];
    hone_cpu_att_tr4(pr, u);
    __m256d acc = _mm256_loadu_pd(sm);
#define HONE_CPU_ATT_SUM4(c)                                                                       \
    for (int j = 0; j < 4; j++)                                                                    \
        acc = hone_cpu_v4d_add(acc, _mm256_cvtps_pd(_mm512_extractf32x4_ps(u[j], c)));
#pragma GCC unroll 4
    HONE_CPU_ATT_SUM4(0)
#pragma GCC unroll 4
    HONE_CPU_ATT_SUM4(1)
#pragma GCC unroll 4
    HONE_CPU_ATT_SUM4(2)
#pragma GCC unroll 4
    HONE_CPU_ATT_SUM4(3)
#undef HONE_CPU_ATT_SUM4
    _mm256_storeu_pd(sm, acc);
}
#endif

/* R rows (R <= 4) of a tile through one step of pass 1 (scores, max) or pass 2 (exp, sum, V).
 * NV = head_dim / 16. Constant NV and R (the callers below) let the compiler keep the rows in
 * registers. kt: a wide tile's step K transposed (hone_cpu_att_kt; filled for pass 1, where the
 * scores come from it), NULL for a narrow tile; a wide tile's pass 2 sums its rows side by side. */
static inline __attribute__((always_inline)) void
hone_cpu_att_group(const int NV, const int R, int pass, float *const *out, const float *const *q,
                   const int64_t *n_kv, const hone_cpu_att_step *st, float scale, float *mx,
                   double *sum, float *const *keep, const void *kt)
{
    int nr[4], nk = 0;
    (void)kt;
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        int64_t n = n_kv[r] - st->j0;
        nr[r] = n <= 0 ? 0 : n >= HONE_CPU_ATT_KEYS ? HONE_CPU_ATT_KEYS : (int)n;
        if (nr[r] > nk) nk = nr[r];
    }
    if (nk == 0) return;
    float p[4][HONE_CPU_ATT_KEYS];
    if (pass == 2) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) hone_cpu_att_copy(p[r], keep[r] + st->j0, nr[r]);
    } else {
#ifdef HONE_CPU_SIMD
        if (kt)
            hone_cpu_att_scores_kt(NV, R, q, (const __m512 *)kt, scale, p);
        else
#endif
            hone_cpu_att_scores(NV, R, q, st, scale, p);
    }
    if (pass == 1) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            hone_cpu_att_copy(keep[r] + st->j0, p[r], nr[r]);
            float m = mx[r];
#ifdef HONE_CPU_SIMD
            /* a whole step's maximum in one vector: max_ps(score, m) keeps m for a NaN score as
             * the test below does, so every lane is m or a number and the reduction's order does
             * not change the value (a zero's sign could differ, which score - max does not see);
             * prefill attention at 1k-4k keys, 2 threads: 0.96-0.98x the time */
            if (nr[r] == HONE_CPU_ATT_KEYS)
                m = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_loadu_ps(p[r]), _mm512_set1_ps(m)));
            else
#endif
                for (int s = 0; s < nr[r]; s++)
                    if (p[r][s] > m) m = p[r][s];
            mx[r] = m;
        }
        return;
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        if (!nr[r]) continue;
        if (nr[r] == HONE_CPU_ATT_KEYS) /* the same subtractions, 16 at once */
            hone_cpu_av_store(p[r], hone_cpu_av_sub(hone_cpu_av_load(p[r]), hone_cpu_av_set1(mx[r])));
        else
            for (int s = 0; s < HONE_CPU_ATT_KEYS; s++) p[r][s] = s < nr[r] ? p[r][s] - mx[r] : 0.0f;
        hone_cpu_av_exp(p[r]);
    }
    double sm[4] = {0.0, 0.0, 0.0, 0.0};
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) sm[r] = sum[r];
#ifdef HONE_CPU_SIMD
    int whole = R > 1;
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) whole &= nr[r] == HONE_CPU_ATT_KEYS;
    if (whole)
        hone_cpu_att_sums4(R, p, sm);
    else
#endif
        for (int s = 0; s < nk; s++)
#pragma GCC unroll 4
            for (int r = 0; r < R; r++)
                if (s < nr[r]) sm[r] += p[r][s];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) sum[r] = sm[r];
#ifdef HONE_CPU_SIMD
    hone_cpu_av o[4][16];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 16
        for (int i = 0; i < NV; i++)
            o[r][i] = st->j0 ? hone_cpu_av_load(out[r] + 16 * i) : hone_cpu_av_zero();
    for (int s = 0; s < nk; s++) {
        const float *v = st->v[s];
        hone_cpu_att_pf_slice(st, s, HONE_CPU_ATT_KEYS);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            if (s >= nr[r]) continue;
            hone_cpu_av pv = hone_cpu_av_set1(p[r][s]);
#pragma GCC unroll 16
            for (int i = 0; i < NV; i++) o[r][i] = hone_cpu_av_fma(pv, hone_cpu_av_load(v + 16 * i), o[r][i]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        if (nr[r])
#pragma GCC unroll 16
            for (int i = 0; i < NV; i++) hone_cpu_av_store(out[r] + 16 * i, o[r][i]);
#else
    /* 16 ymm hold no R rows' accumulators: one row and 64 dimensions (8 chains) at a time, the
     * same fmas per (row, dimension) in the same key order */
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        if (!nr[r]) continue;
        for (int i0 = 0; i0 < NV; i0 += 4) {
            const int n = NV - i0 < 4 ? NV - i0 : 4;
            hone_cpu_av o[4];
#pragma GCC unroll 4
            for (int i = 0; i < n; i++)
                o[i] = st->j0 ? hone_cpu_av_load(out[r] + 16 * (i0 + i)) : hone_cpu_av_zero();
            for (int s = 0; s < nr[r]; s++) {
                const float *v = st->v[s] + 16 * i0;
                hone_cpu_av pv = hone_cpu_av_set1(p[r][s]);
#pragma GCC unroll 4
                for (int i = 0; i < n; i++) o[i] = hone_cpu_av_fma(pv, hone_cpu_av_load(v + 16 * i), o[i]);
            }
#pragma GCC unroll 4
            for (int i = 0; i < n; i++) hone_cpu_av_store(out[r] + 16 * (i0 + i), o[i]);
        }
    }
#endif
}

/* The cache offsets (in floats) of kv head kvh's rows for keys j0 .. j0 + n - 1: one division
 * for the step, then a key's row a stride on from the last, and the block table read again only
 * where the step enters the next paging block (a division per key cost ~15% of the step). */
/* Key j's paging block (its index in the block table) and slot: by a shift where block_size is
 * a power of two (a 64-bit division cost ~40 cycles, and a decode step took three). */
static inline void hone_cpu_att_block_slot(int64_t j, int64_t block_size, int64_t *b, int64_t *slot)
{
    if ((block_size & (block_size - 1)) == 0) {
        int sh = __builtin_ctzll((unsigned long long)block_size);
        *b = j >> sh, *slot = j & (block_size - 1);
    } else {
        *b = j / block_size, *slot = j - *b * block_size;
    }
}

static inline void hone_cpu_att_offsets(int64_t *off, int64_t j0, int n, const int32_t *block_table,
                                        int64_t block_size, int64_t n_kv_heads, int64_t kvh,
                                        int64_t head_dim)
{
    if (n <= 0) return;
    int64_t b, slot;
    hone_cpu_att_block_slot(j0, block_size, &b, &slot);
    int64_t o = hone_kv_block_offset(block_table[b], block_size, n_kv_heads, kvh, head_dim) + slot * head_dim;
    if (slot + n <= block_size) { /* one run (every step at block size 16 from an aligned start) */
        for (int s = 0; s < n; s++) off[s] = o + s * head_dim;
        return;
    }
    for (int s = 0; s < n; s++) {
        off[s] = o;
        o += head_dim;
        if (++slot == block_size && s + 1 < n) /* (past the step's last key no block is read) */
            slot = 0, o = hone_kv_block_offset(block_table[++b], block_size, n_kv_heads, kvh, head_dim);
    }
}

/* Prefetches the K rows (k, unless NULL) and V rows (v, unless NULL) at off[0 .. n - 1], a
 * cache line at a time, to cache level LEVEL (a constant: __builtin_prefetch's locality). */
#define hone_cpu_att_prefetch(k, v, off, n, head_dim, LEVEL)                                       \
    do {                                                                                           \
        for (int s_ = 0; s_ < (n); s_++)                                                           \
            for (int64_t c_ = 0; c_ < (head_dim); c_ += 16) {                                      \
                if (k) __builtin_prefetch((k) + (off)[s_] + c_, 0, LEVEL);                         \
                if (v) __builtin_prefetch((v) + (off)[s_] + c_, 0, LEVEL);                         \
            }                                                                                      \
    } while (0)

/* Keys j .. j + n - 1 of kv head kvh as one run: the offset of key j's row when all n lie in one
 * paging block (a kv head's rows of a block are contiguous, engine/kv_layout.h), else -1. */
static inline int64_t hone_cpu_att_run(int64_t j, int n, const int32_t *block_table, int64_t block_size,
                                       int64_t n_kv_heads, int64_t kvh, int64_t head_dim)
{
    int64_t b, slot;
    hone_cpu_att_block_slot(j, block_size, &b, &slot);
    if (slot + n > block_size) return -1;
    return hone_kv_block_offset(block_table[b], block_size, n_kv_heads, kvh, head_dim) + slot * head_dim;
}

/* hone_cpu_att_prefetch of keys j .. j + n - 1 (n <= HONE_CPU_ATT_KEYS): the lines of their run
 * in one loop where the keys are one run, else key by key. The same lines either way. The loops
 * stay rolled: unrolled (the step's 64 lines issued back to back) the hot tile ran 1.2x faster
 * but over cold K/V (30 layers at 4k keys, one Zen 5 thread) 22-24 -> 25 ns a (kv head, key)
 * with the L1 or the L2 loop unrolled and 32 ns with both; prefetching every other line into L1
 * measured 28-30 ns. */
#define hone_cpu_att_prefetch_keys(k, v, j, n, block_table, block_size, n_kv_heads, kvh, head_dim, LEVEL)    \
    do {                                                                                           \
        if ((n) <= 0) break;                                                                       \
        int64_t r_ = hone_cpu_att_run(j, n, block_table, block_size, n_kv_heads, kvh, head_dim);   \
        if (r_ >= 0) {                                                                             \
            const float *pk_ = (k), *pv_ = (v);                                                    \
            int64_t e_ = (int64_t)(n) * (head_dim);                                                \
            if (pk_)                                                                               \
                _Pragma("GCC unroll 1") for (int64_t c_ = 0; c_ < e_; c_ += 16)                    \
                    __builtin_prefetch(pk_ + r_ + c_, 0, LEVEL);                                   \
            if (pv_)                                                                               \
                _Pragma("GCC unroll 1") for (int64_t c_ = 0; c_ < e_; c_ += 16)                    \
                    __builtin_prefetch(pv_ + r_ + c_, 0, LEVEL);                                   \
        } else {                                                                                   \
            int64_t o_[HONE_CPU_ATT_KEYS];                                                         \
            hone_cpu_att_offsets(o_, j, n, block_table, block_size, n_kv_heads, kvh, head_dim);    \
            hone_cpu_att_prefetch(k, v, o_, n, head_dim, LEVEL);                                   \
        }                                                                                          \
    } while (0)

static inline __attribute__((always_inline)) void
hone_cpu_att_tile(const int NV, const int R, float *const *out, const float *const *q,
                  const int64_t *n_kv, int n_rows, const float *k_cache, const float *v_cache,
                  const int32_t *block_table, int64_t block_size, int64_t n_kv_heads, int64_t kvh,
                  float scale, float *const *keep, int64_t k0, hone_cpu_att_ml *ml, const hone_cpu_att_next *nx)
{
    float mx[HONE_CPU_ATT_ROWS];
    double sum[HONE_CPU_ATT_ROWS];
    int64_t nmax = 0, head_dim = 16 * NV;
    for (int r = 0; r < n_rows; r++) {
        mx[r] = -INFINITY;
        sum[r] = 0.0;
        if (n_kv[r] > nmax) nmax = n_kv[r];
    }
    for (int pass = 1; pass <= 2; pass++)
        for (int64_t j0 = 0; j0 < nmax; j0 += HONE_CPU_ATT_KEYS) {
            hone_cpu_att_step st;
            st.j0 = j0;
            st.nk = nmax - j0 < HONE_CPU_ATT_KEYS ? (int)(nmax - j0) : HONE_CPU_ATT_KEYS;
            int64_t off[HONE_CPU_ATT_KEYS];
            hone_cpu_att_offsets(off, k0 + j0, st.nk, block_table, block_size, n_kv_heads, kvh, head_dim);
            st.k[0] = k_cache, st.v[0] = v_cache; /* (nk >= 1: set again below) */
            for (int s = 0; s < st.nk; s++) {
                st.k[s] = k_cache + off[s];
                st.v[s] = v_cache + off[s];
            }
            for (int s = st.nk; s < HONE_CPU_ATT_KEYS; s++) st.k[s] = st.k[0], st.v[s] = st.v[0];
            /* the K (and in pass 2 V) rows of the step HONE_CPU_ATT_AHEAD steps on, a cache line
             * at a time: a kv head's rows of a paging block are contiguous (engine/kv_layout.h),
             * but the blocks lie anywhere, and the hardware streamers start again at each one
             * (Zen 3, 4k keys: without these prefetches decode is 1.15x slower; 1, 2, 4 or 8
             * steps ahead are within 5% of each other). Into L2 (decode tiles into L1 on Zen: see
             * HONE_CPU_ATT_PREFETCH_L1), not L1: on Sapphire Rapids an
             * L1 prefetch holds a fill buffer until its line arrives, and a step's 64 of them
             * queued behind 16 buffers (SmolLM2 q4_0, 2 threads, interleaved pairs: decode at
             * 4k context 50-54 -> 55-59 tok/s (3), at 1k 129-132 -> 140-142 (2); 4 and 8 ahead
             * into L1 were slower still) */
            int64_t ja = j0 + HONE_CPU_ATT_AHEAD * HONE_CPU_ATT_KEYS;
            int na = ja < nmax ? (nmax - ja < HONE_CPU_ATT_KEYS ? (int)(nmax - ja) : HONE_CPU_ATT_KEYS) : 0;
            const float *pf = pass == 1 ? k_cache : NULL, *pv = pass == 2 ? v_cache : NULL;
            st.pf = NULL, st.pf_row = 0;
            if (HONE_CPU_ATT_PREFETCH_L1 && n_rows <= HONE_CPU_ATT_L1_ROWS) {
                /* a whole step ahead that is one run: its lines go into L1 a slice a key (pass 1:
                 * a quarter a group of 4 keys' scores, pass 2: a sixteenth a key's V row) by the
                 * tile's first group, not as one burst before the step (one Zen 5 thread, 30
                 * layers' cold K/V at 4k keys, alternated x4: 23.5-24.7 -> 22.4-23.4 ns a (kv head,
                 * key); K/V hot in L2 13.6-14.0 -> 12.3-12.9; spreading the L2 prefetch as well
                 * measured no better) */
                int64_t ra = na == HONE_CPU_ATT_KEYS ? hone_cpu_att_run(k0 + ja, na, block_table, block_size, n_kv_heads,
                                                                        kvh, head_dim)
                                                     : -1;
                if (ra >= 0)
                    st.pf = (pass == 1 ? k_cache : v_cache) + ra, st.pf_row = head_dim;
                else
                    hone_cpu_att_prefetch_keys(pf, pv, k0 + ja, na, block_table, block_size, n_kv_heads, kvh, head_dim,
                                               3);
                /* and the step HONE_CPU_ATT_FAR on into L2; past pass 1's last step, pass 2's
                 * first V steps, and at the tile's start K's first steps */
                int64_t pass_keys = (nmax + HONE_CPU_ATT_KEYS - 1) / HONE_CPU_ATT_KEYS * HONE_CPU_ATT_KEYS;
                for (int64_t jf = j0 ? j0 + HONE_CPU_ATT_FAR * HONE_CPU_ATT_KEYS : 0;
                     jf <= j0 + HONE_CPU_ATT_FAR * HONE_CPU_ATT_KEYS; jf += HONE_CPU_ATT_KEYS) {
                    const float *fk = pf, *fv = pv;
                    int64_t jt = jf, fk0 = k0, fkvh = kvh, fn = nmax;
                    if (jt >= pass_keys && pass == 1) /* pass 2 (V alone) */
                        jt -= pass_keys, fk = NULL, fv = v_cache;
                    else if (jt >= pass_keys && nx) /* the next item's K */
                        jt -= pass_keys, fk = k_cache, fv = NULL, fk0 = nx->k0, fkvh = nx->kvh, fn = nx->n;
                    int nf = jt < fn ? (fn - jt < HONE_CPU_ATT_KEYS ? (int)(fn - jt) : HONE_CPU_ATT_KEYS) : 0;
                    hone_cpu_att_prefetch_keys(fk, fv, fk0 + jt, nf, block_table, block_size, n_kv_heads, fkvh, head_dim,
                                               2);
                }
            } else
                hone_cpu_att_prefetch_keys(pf, pv, k0 + ja, na, block_table, block_size, n_kv_heads, kvh, head_dim, 2);
            /* groups of R rows, then the rest as one group of fewer (a GQA group of 3 on R = 4
             * shares each K and V load three ways); a row's bits do not depend on its group */
#define HONE_CPU_ATT_GROUP(RR)                                                                     \
    hone_cpu_att_group(NV, RR, pass, out + r, q + r, n_kv + r, &st, scale, mx + r, sum + r,       \
                       keep + r, ktp),                                                            \
        st.pf = NULL /* (the spread prefetch goes with the first group) */
            const void *ktp = NULL;
#ifdef HONE_CPU_SIMD
            __m512 kt[16 * 16];
            if (n_rows >= HONE_CPU_ATT_WIDE_ROWS) {
                if (pass == 1) hone_cpu_att_kt(NV, &st, kt);
                ktp = kt;
            }
#endif
            int r = 0;
            for (; r + R <= n_rows; r += R) HONE_CPU_ATT_GROUP(R);
            if (R > 3 && n_rows - r == 3) HONE_CPU_ATT_GROUP(3);
            else if (R > 2 && n_rows - r == 2) HONE_CPU_ATT_GROUP(2);
            else
                for (; r < n_rows; r++) HONE_CPU_ATT_GROUP(1);
#undef HONE_CPU_ATT_GROUP
        }
    for (int r = 0; r < n_rows; r++) {
        if (ml) { /* a segment of the rows: its state, the output unnormalised */
            ml[r] = (hone_cpu_att_ml){mx[r], sum[r]};
            continue;
        }
        hone_cpu_av inv = hone_cpu_av_set1((float)(1.0 / sum[r]));
        if (n_kv[r] <= 0)
            for (int i = 0; i < NV; i++) hone_cpu_av_store(out[r] + 16 * i, hone_cpu_av_zero());
        for (int i = 0; i < NV; i++)
            hone_cpu_av_store(out[r] + 16 * i, hone_cpu_av_mul(hone_cpu_av_load(out[r] + 16 * i), inv));
    }
}
#endif

/* One segment (keys k0 .. k0 + n_kv[r] - 1, at most HONE_ATT_SEG) of n_rows (<= HONE_CPU_ATT_ROWS)
 * attention rows of kv head kvh: with ml, out[r] gets row r's unnormalised output and ml[r] its
 * (m, l) (rows of no keys untouched); without, the normalised rows. Each row's bits are those of
 * hone_cpu_attend_row's segment. scratch: >= HONE_ATT_SEG floats (the generic path's scores; the
 * vector paths keep theirs on the stack). */
static inline void hone_cpu_attend_rows_seg(float *const *out, const float *const *q, const int64_t *n_kv,
                                            int n_rows, const float *k_cache, const float *v_cache,
                                            const int32_t *block_table, int64_t block_size,
                                            int64_t n_kv_heads, int64_t kvh, int64_t head_dim,
                                            float scale, float *scratch, int64_t k0, hone_cpu_att_ml *ml,
                                            const hone_cpu_att_next *nx)
{
#ifdef HONE_CPU_ATT_VEC
#define HONE_CPU_ATT_TILE(NV, R)                                                                   \
    hone_cpu_att_tile(NV, R, out, q, n_kv, n_rows, k_cache, v_cache, block_table, block_size,      \
                      n_kv_heads, kvh, scale, kr, k0, ml, nx)
    if (head_dim % 32 == 0 && head_dim <= 256) {
        /* each row's scores kept from pass 1, so that pass 2 reads V alone (64 rows of a
         * segment's 512 keys: 128 KiB) */
        float keep[HONE_CPU_ATT_ROWS * HONE_ATT_SEG], *kr[HONE_CPU_ATT_ROWS];
        int64_t used = 0;
        for (int r = 0; r < n_rows; r++) {
            kr[r] = keep + used;
            used += n_kv[r] > 0 ? n_kv[r] : 0;
        }
        switch (head_dim) {
        case 32: HONE_CPU_ATT_TILE(2, 4); break;
        case 64: HONE_CPU_ATT_TILE(4, 4); break;
        case 128: HONE_CPU_ATT_TILE(8, 2); break;
        case 256: HONE_CPU_ATT_TILE(16, 1); break;
        case 96: HONE_CPU_ATT_TILE(6, 2); break;
        case 160: HONE_CPU_ATT_TILE(10, 1); break;
        case 192: HONE_CPU_ATT_TILE(12, 1); break;
        default: HONE_CPU_ATT_TILE(14, 1); break; /* 224 */
        }
        return;
    }
#undef HONE_CPU_ATT_TILE
#endif
    for (int r = 0; r < n_rows; r++) {
        if (ml && n_kv[r] <= 0) continue;
        hone_cpu_att_ml p = hone_cpu_attend_seg_generic(out[r], q[r], k_cache, v_cache, block_table, k0, n_kv[r],
                                                        block_size, n_kv_heads, kvh, head_dim, scale, scratch);
        if (ml) ml[r] = p;
        else hone_cpu_att_normalise(out[r], p.l, head_dim);
    }
}

/* attention_decode's partial of (head h, segment j) in its scratch (engine/kv_layout.h). */
static inline float *hone_cpu_att_part(float *scratch, int64_t h, int64_t j, int64_t nseg, int64_t head_dim)
{
    return scratch + (h * nseg + j) * (head_dim + HONE_ATT_PART_ML);
}

static inline void hone_cpu_att_put_ml(float *rec, int64_t head_dim, hone_cpu_att_ml ml)
{
    memcpy(rec + head_dim, &ml.m, sizeof ml.m);
    memcpy(rec + head_dim + 2, &ml.l, sizeof ml.l);
}

static inline hone_cpu_att_ml hone_cpu_att_get_ml(const float *rec, int64_t head_dim)
{
    hone_cpu_att_ml ml;
    memcpy(&ml.m, rec + head_dim, sizeof ml.m);
    memcpy(&ml.l, rec + head_dim + 2, sizeof ml.l);
    return ml;
}

/* Row r of a segmented computation gets segment j's partial (dst, p): the first is the state,
 * each further one is folded in. */
static inline void hone_cpu_att_take(float *restrict out, hone_cpu_att_ml *acc, const float *restrict o,
                                     hone_cpu_att_ml p, int64_t j, int64_t head_dim)
{
    if (j == 0) {
        if (o != out) memcpy(out, o, (size_t)head_dim * sizeof *out);
        *acc = p;
    } else {
        hone_cpu_att_fold(out, acc, o, p, head_dim);
    }
}

/* n_rows (<= HONE_CPU_ATT_ROWS) attention rows of kv head kvh: row r is
 * hone_cpu_attend_row(out[r], q[r], ..., n_kv[r], ...) bit for bit. Rows of more than
 * HONE_ATT_SEG keys go a segment at a time for all the rows, folded in order. scratch: >=
 * HONE_ATT_SEG floats (the generic path's scores; the vector paths need none). */
static inline void hone_cpu_attend_rows(float *const *out, const float *const *q, const int64_t *n_kv,
                                        int n_rows, const float *k_cache, const float *v_cache,
                                        const int32_t *block_table, int64_t block_size,
                                        int64_t n_kv_heads, int64_t kvh, int64_t head_dim,
                                        float scale, float *scratch)
{
    int64_t nmax = 0;
    for (int r = 0; r < n_rows; r++)
        if (n_kv[r] > nmax) nmax = n_kv[r];
    if (nmax <= HONE_ATT_SEG) {
        hone_cpu_attend_rows_seg(out, q, n_kv, n_rows, k_cache, v_cache, block_table, block_size, n_kv_heads, kvh,
                                 head_dim, scale, scratch, 0, NULL, NULL);
        return;
    }
    float tmp[n_rows * head_dim]; /* a further segment's rows, before they are folded in */
    float *dst[HONE_CPU_ATT_ROWS];
    int64_t len[HONE_CPU_ATT_ROWS];
    hone_cpu_att_ml acc[HONE_CPU_ATT_ROWS] = {{0.0f, 0.0}}, p[HONE_CPU_ATT_ROWS];
    for (int64_t j = 0; j * HONE_ATT_SEG < nmax; j++) {
        for (int r = 0; r < n_rows; r++) {
            len[r] = hone_cpu_att_seg_len(n_kv[r], j);
            dst[r] = j == 0 ? out[r] : tmp + r * head_dim;
        }
        hone_cpu_attend_rows_seg(dst, q, len, n_rows, k_cache, v_cache, block_table, block_size, n_kv_heads, kvh,
                                 head_dim, scale, scratch, j * HONE_ATT_SEG, p, NULL);
        for (int r = 0; r < n_rows; r++)
            if (len[r]) hone_cpu_att_take(out[r], &acc[r], dst[r], p[r], j, head_dim);
    }
    for (int r = 0; r < n_rows; r++) {
        if (n_kv[r] <= 0) {
            memset(out[r], 0, (size_t)head_dim * sizeof *out[r]);
            continue;
        }
        hone_cpu_att_normalise(out[r], acc[r].l, head_dim);
    }
}

/* ---- the fused slots' baselines: the unfused composition, bitwise ------------------------
 * kernels/cpu/qkv_<dt>.c, ffn_<dt>.c and rmsnorm_matvec_<dt>.c compute each output with the
 * exact operations of their components' baselines: matvec rows as matvec_<dt> computes them
 * (a row's value does not depend on the share that computes it), the rmsnorm slot's row and
 * the swiglu slot's formula. */

/* The rmsnorm slot's f32 scale of a row's sum of squares ss, and the row times it and w. */
static inline float hone_cpu_rmsnorm_scale(double ss, int64_t dim, float eps)
{
    return (float)(1.0 / sqrt(ss / (double)dim + (double)eps));
}

static inline void hone_cpu_rmsnorm_apply(float *y, const float *x, const float *restrict w, int64_t dim,
                                          float scale)
{
    for (int64_t i = 0; i < dim; i++) y[i] = x[i] * scale * w[i];
}

/* One row of the rmsnorm slot: y = x / sqrt(mean(x^2) + eps) * w, the sum of squares in
 * double (sequential), one f32 scale. y may equal x. */
static inline void hone_cpu_rmsnorm_row(float *y, const float *x, const float *restrict w,
                                        int64_t dim, float eps)
{
    double ss = 0.0;
    for (int64_t i = 0; i < dim; i++) ss += (double)x[i] * x[i];
    hone_cpu_rmsnorm_apply(y, x, w, dim, hone_cpu_rmsnorm_scale(ss, dim, eps));
}

/* Rows 0 .. n - 1 of the rmsnorm slot (row r at r * dim), 8 at a time: the 8 rows' sequential
 * double sums advance side by side, 8 independent chains where one row's chain waits on each
 * add, every row's products and additions those of hone_cpu_rmsnorm_row in its order, so every
 * row has its bits (a 64-token prefill's norms on 2 threads, `hone profile`, 3 alternated
 * pairs: 0.84-0.91 -> 0.76-0.79 ms). The rows left over go one at a time. y may equal x. */
static inline void hone_cpu_rmsnorm_rows(float *y, const float *x, const float *restrict w, int64_t n,
                                         int64_t dim, float eps)
{
    int64_t r = 0;
    for (; r + 8 <= n; r += 8) {
        const float *xr = x + r * dim;
        double ss[8] = {0};
        for (int64_t i = 0; i < dim; i++)
            for (int k = 0; k < 8; k++) ss[k] += (double)xr[k * dim + i] * xr[k * dim + i];
        for (int k = 0; k < 8; k++)
            hone_cpu_rmsnorm_apply(y + (r + k) * dim, xr + k * dim, w, dim, hone_cpu_rmsnorm_scale(ss[k], dim, eps));
    }
    for (; r < n; r++) hone_cpu_rmsnorm_row(y + r * dim, x + r * dim, w, dim, eps);
}

/* The swiglu slot's element: silu(g) * u = g / (1 + expf(-g)) * u in f32. */
static inline float hone_cpu_silu_mul(float g, float u) { return g / (1.0f + hone_cpu_expf(-g)) * u; }

/* One vector of silu(g) * u: -g as a sign flip, as C forms it (0 - g would keep a NaN's sign). */
#ifdef HONE_CPU_SIMD
static inline __m512 hone_cpu_silu_mul16(__m512 gv, __m512 uv)
{
    __m512 e = hone_cpu_expf16(_mm512_xor_ps(gv, _mm512_set1_ps(-0.0f)));
    return _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), uv);
}
#endif

/* out[i] = silu(g[i]) * u[i] for n values: where AVX-512 is built in, all of them 16 at a time
 * (the tail through a zero-padded copy), so an element's bits do not depend on where a share
 * starts, NaN payloads included (C lets a compiler commute a scalar product, and x86 keeps the
 * first operand's NaN); elsewhere hone_cpu_silu_mul each. The same three f32 operations on the
 * same exp either way. out may alias g or u. */
static inline void hone_cpu_silu_mul_n(float *out, const float *g, const float *u, int64_t n)
{
    int64_t i = 0;
#ifdef HONE_CPU_SIMD
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i, hone_cpu_silu_mul16(_mm512_loadu_ps(g + i), _mm512_loadu_ps(u + i)));
    if (i < n) {
        float gt[16] = {0}, ut[16] = {0}, ot[16];
        memcpy(gt, g + i, (size_t)(n - i) * sizeof *gt);
        memcpy(ut, u + i, (size_t)(n - i) * sizeof *ut);
        _mm512_storeu_ps(ot, hone_cpu_silu_mul16(_mm512_loadu_ps(gt), _mm512_loadu_ps(ut)));
        memcpy(out + i, ot, (size_t)(n - i) * sizeof *ot);
        return;
    }
#endif
    for (; i < n; i++) out[i] = hone_cpu_silu_mul(g[i], u[i]);
}

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
    hone_cpu_mv_##dt(y, (const uint8_t *)W + r0 * rb, x, r1 - r0, cols, rb, hone_cpu_deqr_##dt, 0, 1)
#else
#define HONE_CPU_ROWS_BODY(dt, rb)                                                                \
    hone_cpu_matvec_portable(y, (const uint8_t *)W + r0 * rb, x, r1 - r0, cols, rb, dt, hone_cpu_deqr_##dt, 0, 1)
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
        hone_cpu_silu_mul_n(out + r, g, u, e - r);
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
