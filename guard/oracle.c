/* The f64 oracle of every kernel slot and the error metrics the guard reports against it.
 * Plain loops in double on purpose: this file is the reference a reader checks by eye.
 * Contract: guard/oracle.h; the slots' math: engine/slots.h. */
#include "guard/oracle.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "engine/dtype.h"
#include "engine/kv_layout.h"

static double half_to_double(uint16_t h) { return (double)hone_fp16_to_f32(h); }

/* The further GGML formats, written as ggml's dequantize_row_* loops (whole blocks, not the
 * kernels' 32-value chunks), in double: every value exact (the products of small integers and
 * f16 scales fit in 53 bits; the min's subtraction is exact to 2^-53 relative). 1 if dtype is
 * one of them. */
static int dequant_more(double *y, int32_t dtype, const uint8_t *p, int64_t cols)
{
    static const int kv_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    int64_t bs = hone_dtype_block_size(dtype);
    if (bs <= 0) return 0;
    int64_t nb = cols / bs;
    switch (dtype) {
    case HONE_DTYPE_Q5_0:
    case HONE_DTYPE_Q5_1:
        for (int64_t i = 0; i < nb; i++, y += 32) {
            const uint8_t *qs, *qhp;
            double d, m = 0.0;
            if (dtype == HONE_DTYPE_Q5_0) {
                const hone_block_q5_0 *x = (const hone_block_q5_0 *)p + i;
                d = half_to_double(x->d), qs = x->qs, qhp = x->qh;
            } else {
                const hone_block_q5_1 *x = (const hone_block_q5_1 *)p + i;
                d = half_to_double(x->d), m = half_to_double(x->m), qs = x->qs, qhp = x->qh;
            }
            uint32_t qh = (uint32_t)qhp[0] | (uint32_t)qhp[1] << 8 | (uint32_t)qhp[2] << 16 | (uint32_t)qhp[3] << 24;
            int off = dtype == HONE_DTYPE_Q5_0 ? 16 : 0;
            for (int j = 0; j < 16; j++) {
                int x0 = (int)((qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10)) - off;
                int x1 = (int)((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)) - off;
                y[j] = x0 * d + m;
                y[j + 16] = x1 * d + m;
            }
        }
        return 1;
    case HONE_DTYPE_MXFP4:
        for (int64_t i = 0; i < nb; i++, y += 32) {
            const hone_block_mxfp4 *x = (const hone_block_mxfp4 *)p + i;
            double d = ldexp(1.0, (int)x->e - 128);
            for (int j = 0; j < 16; j++) {
                y[j] = kv_mxfp4[x->qs[j] & 0x0F] * d;
                y[j + 16] = kv_mxfp4[x->qs[j] >> 4] * d;
            }
        }
        return 1;
    case HONE_DTYPE_Q4_K:
    case HONE_DTYPE_Q5_K:
        for (int64_t i = 0; i < nb; i++) {
            const uint8_t *sc6, *q, *qh = NULL;
            double d, dmin;
            if (dtype == HONE_DTYPE_Q4_K) {
                const hone_block_q4_k *x = (const hone_block_q4_k *)p + i;
                d = half_to_double(x->d), dmin = half_to_double(x->dmin), sc6 = x->scales, q = x->qs;
            } else {
                const hone_block_q5_k *x = (const hone_block_q5_k *)p + i;
                d = half_to_double(x->d), dmin = half_to_double(x->dmin), sc6 = x->scales, q = x->qs;
                qh = x->qh;
            }
            int is = 0, u1 = 1, u2 = 2;
            for (int j = 0; j < 256; j += 64) {
                double dd[2], mm[2];
                for (int t = 0; t < 2; t++) {
                    int jj = is + t, sc, mn;
                    if (jj < 4) {
                        sc = sc6[jj] & 63, mn = sc6[jj + 4] & 63;
                    } else {
                        sc = (sc6[jj + 4] & 0xF) | ((sc6[jj - 4] >> 6) << 4);
                        mn = (sc6[jj + 4] >> 4) | ((sc6[jj] >> 6) << 4);
                    }
                    dd[t] = d * sc, mm[t] = dmin * mn;
                }
                for (int l = 0; l < 32; l++)
                    *y++ = dd[0] * ((q[l] & 0xF) + (qh && (qh[l] & u1) ? 16 : 0)) - mm[0];
                for (int l = 0; l < 32; l++)
                    *y++ = dd[1] * ((q[l] >> 4) + (qh && (qh[l] & u2) ? 16 : 0)) - mm[1];
                q += 32, is += 2, u1 <<= 2, u2 <<= 2;
            }
        }
        return 1;
    case HONE_DTYPE_Q6_K:
        for (int64_t i = 0; i < nb; i++) {
            const hone_block_q6_k *x = (const hone_block_q6_k *)p + i;
            double d = half_to_double(x->d);
            const uint8_t *ql = x->ql, *qh = x->qh;
            const int8_t *sc = x->scales;
            for (int n = 0; n < 256; n += 128) {
                for (int l = 0; l < 32; l++) {
                    int is = l / 16;
                    int q1 = (int)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                    int q2 = (int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                    int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                    int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                    y[l] = d * sc[is] * q1;
                    y[l + 32] = d * sc[is + 2] * q2;
                    y[l + 64] = d * sc[is + 4] * q3;
                    y[l + 96] = d * sc[is + 6] * q4;
                }
                y += 128, ql += 64, qh += 32, sc += 8;
            }
        }
        return 1;
    case HONE_DTYPE_Q3_K:
        for (int64_t i = 0; i < nb; i++) {
            const hone_block_q3_k *x = (const hone_block_q3_k *)p + i;
            double d = half_to_double(x->d);
            int scales[16];
            for (int s = 0; s < 16; s++) { /* ggml's kmask unpacking, one scale at a time */
                int lo = s < 8 ? x->scales[s] & 0xF : x->scales[s - 8] >> 4;
                int hi = (x->scales[8 + s % 4] >> (2 * (s / 4))) & 3;
                scales[s] = (lo | hi << 4) - 32;
            }
            const uint8_t *q = x->qs, *hm = x->hmask;
            int is = 0, m = 1;
            for (int n = 0; n < 256; n += 128) {
                int shift = 0;
                for (int j = 0; j < 4; j++) {
                    for (int half = 0; half < 2; half++) {
                        double dl = d * scales[is++];
                        for (int l = 16 * half; l < 16 * half + 16; l++)
                            *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                    }
                    shift += 2, m <<= 1;
                }
                q += 32;
            }
        }
        return 1;
    case HONE_DTYPE_Q2_K:
        for (int64_t i = 0; i < nb; i++) {
            const hone_block_q2_k *x = (const hone_block_q2_k *)p + i;
            double d = half_to_double(x->d), dmin = half_to_double(x->dmin);
            const uint8_t *q = x->qs;
            int is = 0;
            for (int n = 0; n < 256; n += 128) {
                int shift = 0;
                for (int j = 0; j < 4; j++) {
                    for (int half = 0; half < 2; half++) {
                        int sc = x->scales[is++];
                        double dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
                        for (int l = 16 * half; l < 16 * half + 16; l++)
                            *y++ = dl * ((q[l] >> shift) & 3) - ml;
                    }
                    shift += 2;
                }
                q += 32;
            }
        }
        return 1;
    default:
        return 0;
    }
}

void hone_oracle_dequant_row(double *out, int32_t dtype, const void *W, int64_t row, int64_t cols)
{
    int64_t rb = hone_dtype_supported(dtype) ? hone_dtype_row_bytes(dtype, cols) : 0;
    const uint8_t *p = (const uint8_t *)W + row * rb;
    switch (dtype) {
    case HONE_DTYPE_F32:
        for (int64_t c = 0; c < cols; c++) out[c] = (double)((const float *)p)[c];
        break;
    case HONE_DTYPE_F16:
        for (int64_t c = 0; c < cols; c++) out[c] = half_to_double(((const uint16_t *)p)[c]);
        break;
    case HONE_DTYPE_BF16:
        for (int64_t c = 0; c < cols; c++) out[c] = (double)hone_bf16_to_f32(((const uint16_t *)p)[c]);
        break;
    case HONE_DTYPE_Q8_0:
        for (int64_t b = 0; b < cols / HONE_QK; b++) {
            const hone_block_q8_0 *blk = (const hone_block_q8_0 *)p + b;
            double d = half_to_double(blk->d);
            for (int j = 0; j < HONE_QK; j++) out[b * HONE_QK + j] = (double)blk->qs[j] * d;
        }
        break;
    case HONE_DTYPE_Q4_0:
        for (int64_t b = 0; b < cols / HONE_QK; b++) {
            const hone_block_q4_0 *blk = (const hone_block_q4_0 *)p + b;
            double d = half_to_double(blk->d);
            for (int j = 0; j < 16; j++) {
                out[b * HONE_QK + j] = (double)((int)(blk->qs[j] & 0xF) - 8) * d;
                out[b * HONE_QK + j + 16] = (double)((int)(blk->qs[j] >> 4) - 8) * d;
            }
        }
        break;
    case HONE_DTYPE_Q4_1:
        for (int64_t b = 0; b < cols / HONE_QK; b++) {
            const hone_block_q4_1 *blk = (const hone_block_q4_1 *)p + b;
            double d = half_to_double(blk->d), m = half_to_double(blk->m);
            for (int j = 0; j < 16; j++) {
                out[b * HONE_QK + j] = (double)(blk->qs[j] & 0xF) * d + m;
                out[b * HONE_QK + j + 16] = (double)(blk->qs[j] >> 4) * d + m;
            }
        }
        break;
    default:
        if (!dequant_more(out, dtype, p, cols))
            for (int64_t c = 0; c < cols; c++) out[c] = NAN;
        break;
    }
}

void hone_oracle_embed(double *out, const void *table, int32_t dtype, const int32_t *ids,
                       int64_t n, int64_t dim)
{
    for (int64_t i = 0; i < n; i++) hone_oracle_dequant_row(out + i * dim, dtype, table, ids[i], dim);
}

void hone_oracle_rmsnorm(double *y, const float *x, const float *w, int64_t n, int64_t dim,
                         float eps)
{
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + r * dim;
        double ss = 0.0;
        for (int64_t i = 0; i < dim; i++) ss += (double)xr[i] * (double)xr[i];
        double rms = sqrt(ss / (double)dim + (double)eps);
        for (int64_t i = 0; i < dim; i++) y[r * dim + i] = (double)xr[i] / rms * (double)w[i];
    }
}

/* Y[t][r] = sum_c f(W[r][c]) * g(X[t][c]) with f = g = identity or |.|: one row of W is
 * dequantised once and used for every token. */
static void matmul_any(double *Y, int32_t dtype, const void *W, const float *X, int64_t n,
                       int64_t rows, int64_t cols, int absolute)
{
    double *w = malloc((size_t)(cols > 0 ? cols : 1) * sizeof(double));
    if (!w) abort(); /* an oracle without memory has no answer to give */
    for (int64_t r = 0; r < rows; r++) {
        hone_oracle_dequant_row(w, dtype, W, r, cols);
        for (int64_t t = 0; t < n; t++) {
            const float *x = X + t * cols;
            double s = 0.0;
            if (absolute)
                for (int64_t c = 0; c < cols; c++) s += fabs(w[c]) * fabs((double)x[c]);
            else
                for (int64_t c = 0; c < cols; c++) s += w[c] * (double)x[c];
            Y[t * rows + r] = s;
        }
    }
    free(w);
}

void hone_oracle_matvec(double *y, int32_t dtype, const void *W, const float *x, int64_t rows,
                        int64_t cols)
{
    matmul_any(y, dtype, W, x, 1, rows, cols, 0);
}

void hone_oracle_matvec_abs(double *y, int32_t dtype, const void *W, const float *x, int64_t rows,
                            int64_t cols)
{
    matmul_any(y, dtype, W, x, 1, rows, cols, 1);
}

void hone_oracle_matmul(double *Y, int32_t dtype, const void *W, const float *X, int64_t n,
                        int64_t rows, int64_t cols)
{
    matmul_any(Y, dtype, W, X, n, rows, cols, 0);
}

void hone_oracle_rope(double *y, const float *x, const int32_t *pos, int64_t n, int64_t n_heads,
                      int64_t head_dim, int64_t n_rot, float freq_base, int32_t neox)
{
    hone_oracle_rope_freqs(y, x, pos, NULL, n, n_heads, head_dim, n_rot, freq_base, neox);
}

/* theta_i = pos * base^(-2i/n_rot), divided by freqs[i] when freqs is not NULL. */
static double rope_theta(int32_t pos, const float *freqs, int64_t i, int64_t n_rot, float freq_base)
{
    double inv = pow((double)freq_base, -2.0 * (double)i / (double)n_rot);
    if (freqs) inv /= (double)freqs[i];
    return (double)pos * inv;
}

void hone_oracle_rope_freqs(double *y, const float *x, const int32_t *pos, const float *freqs,
                            int64_t n, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                            float freq_base, int32_t neox)
{
    int64_t half = n_rot / 2;
    for (int64_t t = 0; t < n; t++) {
        for (int64_t h = 0; h < n_heads; h++) {
            const float *v = x + (t * n_heads + h) * head_dim;
            double *o = y + (t * n_heads + h) * head_dim;
            for (int64_t d = 0; d < head_dim; d++) o[d] = (double)v[d];
            for (int64_t i = 0; i < half; i++) {
                double theta = rope_theta(pos[t], freqs, i, n_rot, freq_base);
                double c = cos(theta), s = sin(theta);
                int64_t ia = neox ? i : 2 * i, ib = neox ? i + half : 2 * i + 1;
                double a = (double)v[ia], b = (double)v[ib];
                o[ia] = a * c - b * s;
                o[ib] = a * s + b * c;
            }
        }
    }
}

/* One attention row in double: out[head_dim] for query q against keys j < n_kv of kv head
 * kvh; w is a workspace of n_kv doubles. */
static void attend_row(double *out, const float *q, const float *k_cache, const float *v_cache,
                       const int32_t *block_table, int64_t n_kv, int64_t block_size,
                       int64_t n_kv_heads, int64_t kvh, int64_t head_dim, float scale, double *w)
{
    double mx = -INFINITY;
    for (int64_t j = 0; j < n_kv; j++) {
        const float *k = k_cache + hone_kv_offset(block_table, j, block_size, n_kv_heads, kvh, head_dim);
        double s = 0.0;
        for (int64_t d = 0; d < head_dim; d++) s += (double)q[d] * (double)k[d];
        w[j] = s * (double)scale;
        if (w[j] > mx) mx = w[j];
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n_kv; j++) {
        w[j] = exp(w[j] - mx);
        sum += w[j];
    }
    for (int64_t d = 0; d < head_dim; d++) out[d] = 0.0;
    for (int64_t j = 0; j < n_kv; j++) {
        const float *v = v_cache + hone_kv_offset(block_table, j, block_size, n_kv_heads, kvh, head_dim);
        double p = w[j] / sum;
        for (int64_t d = 0; d < head_dim; d++) out[d] += p * (double)v[d];
    }
}

void hone_oracle_attention_decode(double *out, const float *q, const float *k_cache,
                                  const float *v_cache, const int32_t *block_table, int64_t n_kv,
                                  int64_t block_size, int64_t n_heads, int64_t n_kv_heads,
                                  int64_t head_dim, float scale)
{
    hone_oracle_attention_prefill(out, q, k_cache, v_cache, block_table, 1, n_kv - 1, block_size,
                                  n_heads, n_kv_heads, head_dim, scale);
}

void hone_oracle_attention_prefill(double *out, const float *q, const float *k_cache,
                                   const float *v_cache, const int32_t *block_table, int64_t n,
                                   int64_t pos0, int64_t block_size, int64_t n_heads,
                                   int64_t n_kv_heads, int64_t head_dim, float scale)
{
    double *w = malloc((size_t)(pos0 + n > 0 ? pos0 + n : 1) * sizeof(double));
    if (!w) abort();
    int64_t group = n_heads / n_kv_heads;
    for (int64_t t = 0; t < n; t++)
        for (int64_t h = 0; h < n_heads; h++) {
            int64_t r = t * n_heads + h;
            attend_row(out + r * head_dim, q + r * head_dim, k_cache, v_cache, block_table,
                       pos0 + t + 1, block_size, n_kv_heads, h / group, head_dim, scale, w);
        }
    free(w);
}

void hone_oracle_swiglu(double *out, const float *gate, const float *up, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        double g = (double)gate[i];
        out[i] = g / (1.0 + exp(-g)) * (double)up[i];
    }
}

void hone_oracle_geglu(double *out, const float *gate, const float *up, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        double g = (double)gate[i];
        out[i] = 0.5 * g * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (g + 0.044715 * g * g * g))) * (double)up[i];
    }
}

void hone_oracle_add(double *y, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = (double)a[i] + (double)b[i];
}

void hone_oracle_qkv(double *y, int32_t dtype, const void *Wq, const void *Wk, const void *Wv,
                     const float *x, int64_t rq, int64_t rk, int64_t rv, int64_t cols)
{
    hone_oracle_matvec(y, dtype, Wq, x, rq, cols);
    hone_oracle_matvec(y + rq, dtype, Wk, x, rk, cols);
    hone_oracle_matvec(y + rq + rk, dtype, Wv, x, rv, cols);
}

static double silu(double g) { return g / (1.0 + exp(-g)); }

/* A buffer the oracle cannot go without. */
static double *oracle_alloc(int64_t n)
{
    double *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    if (!p) abort(); /* an oracle without memory has no answer to give */
    return p;
}

void hone_oracle_ffn(double *out, int32_t dtype, const void *Wg, const void *Wu, const float *x,
                     int64_t rows, int64_t cols)
{
    double *u = oracle_alloc(rows);
    hone_oracle_matvec(out, dtype, Wg, x, rows, cols);
    hone_oracle_matvec(u, dtype, Wu, x, rows, cols);
    for (int64_t r = 0; r < rows; r++) out[r] = silu(out[r]) * u[r];
    free(u);
}

/* y[rows] = sum_c f(W[r][c]) * f(h[c]) with h = rmsnorm(x, g, eps) in double (f = identity
 * or |.|). */
static void norm_matvec_any(double *y, int32_t dtype, const void *W, const float *x,
                            const float *g, int64_t rows, int64_t cols, float eps, int absolute)
{
    double *w = oracle_alloc(cols), *h = oracle_alloc(cols);
    hone_oracle_rmsnorm(h, x, g, 1, cols, eps);
    for (int64_t r = 0; r < rows; r++) {
        hone_oracle_dequant_row(w, dtype, W, r, cols);
        double s = 0.0;
        for (int64_t c = 0; c < cols; c++) s += absolute ? fabs(w[c]) * fabs(h[c]) : w[c] * h[c];
        y[r] = s;
    }
    free(h);
    free(w);
}

void hone_oracle_rmsnorm_matvec(double *y, int32_t dtype, const void *W, const float *x,
                                const float *g, int64_t rows, int64_t cols, float eps)
{
    norm_matvec_any(y, dtype, W, x, g, rows, cols, eps, 0);
}

/* ---- a-priori error bounds ---------------------------------------------------------------- */

#define U HONE_ORACLE_U

double hone_oracle_gamma(int64_t k)
{
    double ku = (double)k * U;
    return ku < 1 ? ku / (1 - ku) : INFINITY;
}

static double floor_of(double b) { return b + (double)FLT_MIN; }

/* b[i] = rel |ref[i]|, floored */
static void relative(double *b, const double *ref, int64_t n, double rel)
{
    for (int64_t i = 0; i < n; i++) b[i] = floor_of(rel * fabs(ref[i]));
}

void hone_oracle_bound_embed(double *b, const double *ref, int64_t n) { relative(b, ref, n, U); }

void hone_oracle_bound_rmsnorm(double *b, const double *ref, int64_t n, int64_t dim)
{
    relative(b, ref, n * dim, hone_oracle_gamma(dim) / 2 + 6 * U);
}

void hone_oracle_bound_matmul(double *b, int32_t dtype, const void *W, const float *X, int64_t n,
                              int64_t rows, int64_t cols)
{
    matmul_any(b, dtype, W, X, n, rows, cols, 1);
    double g = hone_oracle_gamma(cols + 1);
    for (int64_t i = 0; i < n * rows; i++) b[i] = floor_of(g * b[i]);
}

/* a cos - b sin (and a sin + b cos) with cos and sin rounded to f32: two products and a sum of
 * two terms, plus the rounding of cos and sin themselves. Dims >= n_rot are copied exactly. */
void hone_oracle_bound_rope(double *b, const float *x, const int32_t *pos, int64_t n,
                            int64_t n_heads, int64_t head_dim, int64_t n_rot, float freq_base,
                            int32_t neox)
{
    hone_oracle_bound_rope_freqs(b, x, pos, NULL, n, n_heads, head_dim, n_rot, freq_base, neox);
}

void hone_oracle_bound_rope_freqs(double *b, const float *x, const int32_t *pos, const float *freqs,
                                  int64_t n, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                                  float freq_base, int32_t neox)
{
    int64_t half = n_rot / 2;
    double g = hone_oracle_gamma(4);
    for (int64_t t = 0; t < n; t++)
        for (int64_t h = 0; h < n_heads; h++) {
            const float *v = x + (t * n_heads + h) * head_dim;
            double *o = b + (t * n_heads + h) * head_dim;
            for (int64_t d = 0; d < head_dim; d++) o[d] = 0.0;
            for (int64_t i = 0; i < half; i++) {
                double theta = rope_theta(pos[t], freqs, i, n_rot, freq_base);
                double c = fabs(cos(theta)), sn = fabs(sin(theta));
                int64_t ia = neox ? i : 2 * i, ib = neox ? i + half : 2 * i + 1;
                double a = fabs((double)v[ia]), bb = fabs((double)v[ib]);
                o[ia] = floor_of(g * (a * c + bb * sn));
                o[ib] = floor_of(g * (a * sn + bb * c));
            }
        }
}

void hone_oracle_bound_attention(double *b, const float *q, const float *k_cache,
                                 const float *v_cache, const int32_t *block_table, int64_t n,
                                 int64_t pos0, int64_t block_size, int64_t n_heads,
                                 int64_t n_kv_heads, int64_t head_dim, float scale)
{
    int64_t nk = pos0 + n > 0 ? pos0 + n : 1, group = n_heads / n_kv_heads;
    double *s = malloc((size_t)nk * sizeof(double)), *dj = malloc((size_t)nk * sizeof(double));
    if (!s || !dj) abort();
    double gq = hone_oracle_gamma(head_dim + 2);
    for (int64_t t = 0; t < n; t++)
        for (int64_t h = 0; h < n_heads; h++) {
            int64_t r = t * n_heads + h, kvh = h / group, n_kv = pos0 + t + 1;
            const float *qr = q + r * head_dim;
            double mx = -INFINITY, sum = 0.0, dmax = 0.0;
            for (int64_t j = 0; j < n_kv; j++) {
                const float *k = k_cache + hone_kv_offset(block_table, j, block_size, n_kv_heads, kvh, head_dim);
                double dot = 0.0, mag = 0.0;
                for (int64_t d = 0; d < head_dim; d++) {
                    dot += (double)qr[d] * (double)k[d];
                    mag += fabs((double)qr[d] * (double)k[d]);
                }
                s[j] = dot * (double)scale;
                dj[j] = gq * fabs((double)scale) * mag;
                if (s[j] > mx) mx = s[j];
            }
            for (int64_t j = 0; j < n_kv; j++) {
                dj[j] += U * (fabs(s[j]) + fabs(mx));
                if (dj[j] > dmax) dmax = dj[j];
                s[j] = exp(s[j] - mx);
                sum += s[j];
            }
            double common = dmax + HONE_ORACLE_EXP_ULPS * U + 3 * hone_oracle_gamma(n_kv + 2);
            double *o = b + r * head_dim;
            for (int64_t d = 0; d < head_dim; d++) o[d] = 0.0;
            for (int64_t j = 0; j < n_kv; j++) {
                const float *v = v_cache + hone_kv_offset(block_table, j, block_size, n_kv_heads, kvh, head_dim);
                double p = s[j] / sum;
                for (int64_t d = 0; d < head_dim; d++) o[d] += p * fabs((double)v[d]) * (dj[j] + common);
            }
            for (int64_t d = 0; d < head_dim; d++) o[d] = floor_of(o[d]);
        }
    free(s);
    free(dj);
}

/* g / (1 + e) * up with e = exp(-g) within EXP_ULPS: d silu / silu = -e / (1 + e) de / e, at
 * most the relative error of e; then the sum, the quotient and the product. */
void hone_oracle_bound_swiglu(double *b, const double *ref, const float *gate, int64_t n)
{
    relative(b, ref, n, HONE_ORACLE_EXP_ULPS * U + hone_oracle_gamma(3));
    /* gate < -88.7: expf(-gate) overflows f32 to inf and g / inf is 0 where the exact value is
     * below 2.7e-37 |up|, so 0 must pass there */
    for (int64_t i = 0; i < n; i++)
        if (gate[i] < -87.0f) b[i] += fabs(ref[i]);
}

void hone_oracle_bound_add(double *b, const double *ref, int64_t n) { relative(b, ref, n, U); }

void hone_oracle_bound_geglu(double *b, const float *gate, const float *up, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        double g = (double)gate[i], y = sqrt(2.0 / 3.14159265358979323846) * (g + 0.044715 * g * g * g), t = tanh(y);
        double e = (1.0 - t * t) * fabs(y) * hone_oracle_gamma(6) + 2 * U * fabs(t) +
                   hone_oracle_gamma(3) * fabs(1.0 + t);
        b[i] = floor_of(fabs(0.5 * g * (double)up[i]) * e);
    }
}

void hone_oracle_bound_qkv(double *b, int32_t dtype, const void *Wq, const void *Wk,
                           const void *Wv, const float *x, int64_t rq, int64_t rk, int64_t rv,
                           int64_t cols)
{
    hone_oracle_bound_matmul(b, dtype, Wq, x, 1, rq, cols);
    hone_oracle_bound_matmul(b + rq, dtype, Wk, x, 1, rk, cols);
    hone_oracle_bound_matmul(b + rq + rk, dtype, Wv, x, 1, rv, cols);
}

void hone_oracle_bound_ffn(double *b, int32_t dtype, const void *Wg, const void *Wu,
                           const float *x, int64_t rows, int64_t cols)
{
    double *g = oracle_alloc(rows), *u = oracle_alloc(rows), *eu = oracle_alloc(rows);
    hone_oracle_matvec(g, dtype, Wg, x, rows, cols);
    hone_oracle_matvec(u, dtype, Wu, x, rows, cols);
    hone_oracle_bound_matmul(b, dtype, Wg, x, 1, rows, cols); /* e_g, then the result */
    hone_oracle_bound_matmul(eu, dtype, Wu, x, 1, rows, cols);
    double s = HONE_ORACLE_EXP_ULPS * U + hone_oracle_gamma(3);
    for (int64_t r = 0; r < rows; r++) {
        double eg = b[r], sg = fabs(silu(g[r])), ua = fabs(u[r]) + eu[r];
        b[r] = floor_of(1.1 * eg * ua + sg * eu[r] + s * (sg + 1.1 * eg) * ua);
    }
    free(g);
    free(u);
    free(eu);
}

void hone_oracle_bound_rmsnorm_matvec(double *b, int32_t dtype, const void *W, const float *x,
                                      const float *g, int64_t rows, int64_t cols, float eps)
{
    norm_matvec_any(b, dtype, W, x, g, rows, cols, eps, 1);
    double r = hone_oracle_gamma(cols) / 2 + 6 * U, k = hone_oracle_gamma(cols + 1) * (1 + r) + r;
    for (int64_t i = 0; i < rows; i++) b[i] = floor_of(k * b[i]);
}

/* ---- error metrics ---------------------------------------------------------------------- */

double hone_oracle_ulp_f32(double x)
{
    double a = fabs(x);
    if (isnan(a)) return NAN;
    if (a < (double)FLT_MIN) return ldexp(1.0, -149);
    if (a > (double)FLT_MAX) a = (double)FLT_MAX;
    int e;
    frexp(a, &e); /* a = m * 2^e, m in [0.5, 1): floor(log2 a) = e - 1 */
    return ldexp(1.0, e - 1 - 23);
}

/* 0 finite, 1 NaN, 2 +Inf, 3 -Inf. */
static int fclass(double v)
{
    if (isnan(v)) return 1;
    if (isinf(v)) return v > 0 ? 2 : 3;
    return 0;
}

void hone_oracle_compare_rows(const float *got, const double *ref, int64_t rows, int64_t row_len,
                              hone_oracle_err *out)
{
    hone_oracle_err e = {0};
    e.worst = -1;
    double sum_abs = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        double row_err = 0.0, row_ref = 0.0;
        for (int64_t i = 0; i < row_len; i++) {
            int64_t k = r * row_len + i;
            double g = (double)got[k], f = ref[k];
            int cg = fclass(g), cf = fclass((double)(float)f);
            e.n++;
            if (cg != cf) {
                e.n_nonfinite_mismatch++;
                continue;
            }
            if (cg != 0) continue;
            double d = fabs(g - f);
            e.n_compared++;
            sum_abs += d;
            if (d > e.max_abs || e.worst < 0) {
                e.max_abs = d;
                e.worst = k;
            }
            if (d > row_err) row_err = d;
            if (fabs(f) > row_ref) row_ref = fabs(f);
            if (fabs(f) > e.ref_max_abs) e.ref_max_abs = fabs(f);
            double u = d / hone_oracle_ulp_f32(f);
            if (u > e.max_ulp) e.max_ulp = u;
        }
        double rel = row_err == 0.0 ? 0.0 : row_ref == 0.0 ? INFINITY : row_err / row_ref;
        if (rel > e.max_rel) e.max_rel = rel;
    }
    e.mean_abs = e.n_compared ? sum_abs / (double)e.n_compared : 0.0;
    *out = e;
}

void hone_oracle_compare(const float *got, const double *ref, int64_t n, hone_oracle_err *out)
{
    hone_oracle_compare_rows(got, ref, 1, n, out);
}
