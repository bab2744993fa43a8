/* The f64 oracle of every kernel slot: the truth behind every accuracy figure the guard
 * reports. Each function takes a slot's inputs (the same f32 / weight buffers the kernels
 * read) and computes the whole output in double, with no share (ith/nth) and no f32 rounding
 * anywhere: weights dequantised exactly in double, dot products and softmax in double, rope
 * angles and their cos/sin in double. The contracts (math, shapes, layouts) are engine/slots.h.
 *
 * Accuracy of the oracle itself: every f32 x f32 product is exact in double; the only roundings
 * are double ones (relative 2^-53 per operation), some 2^29 times smaller than the f32 unit
 * roundoff the kernels are measured in. The oracle is slow and plain on purpose: it is read,
 * not tuned. */
#ifndef HONE_GUARD_ORACLE_H
#define HONE_GUARD_ORACLE_H

#include <stdint.h>

/* out[cols] = row `row` of the weight W[rows][cols] of dtype (engine/dtype.h), in double:
 * f32 / f16 / bf16 widened exactly; q8_0 = q * d, q4_0 = (q - 8) * d, q4_1 = q * d + m, with d
 * and m the block's f16 scales widened exactly. All exact in double (q4_1: q * d is exact and
 * the sum with m is exact unless d and m differ by more than 2^38 in magnitude, which no real
 * model has; then it is rounded once in double); q5_0, q5_1, mxfp4, q2_K .. q6_K as ggml's
 * dequantize_row_* in double (each exact but for q5_1's and the K formats' min, as q4_1's).
 * Block dtypes need cols % 32 == 0 (K formats: cols % 256 == 0).
 * An unsupported dtype gives NaN everywhere. */
void hone_oracle_dequant_row(double *out, int32_t dtype, const void *W, int64_t row, int64_t cols);

/* embed: out[n][dim] = table[ids[i]][:] in double (as hone_oracle_dequant_row).
 * Same argument order as the slot, minus ith/nth. */
void hone_oracle_embed(double *out, const void *table, int32_t dtype, const int32_t *ids,
                       int64_t n, int64_t dim);

/* rmsnorm: y[r][i] = x[r][i] / sqrt(mean_j x[r][j]^2 + eps) * w[i], r < n, i < dim, in double
 * (eps widened from f32). x[n][dim], w[dim], y[n][dim]. */
void hone_oracle_rmsnorm(double *y, const float *x, const float *w, int64_t n, int64_t dim,
                         float eps);

/* matvec: y[r] = sum_c W[r][c] * x[c] in double. W[rows][cols] of dtype, x[cols], y[rows].
 * Example: W = {{1,2,3},{4,5,6}} (f32), x = {1, .5, -1} gives y = {-1, .5}. */
void hone_oracle_matvec(double *y, int32_t dtype, const void *W, const float *x, int64_t rows,
                        int64_t cols);

/* The magnitude of the same sums: y[r] = sum_c |W[r][c]| * |x[c]|. It scales the rounding error
 * of any f32 evaluation of the dot (for an f32 fma chain: |err| <= gamma_k * this). */
void hone_oracle_matvec_abs(double *y, int32_t dtype, const void *W, const float *x, int64_t rows,
                            int64_t cols);

/* matmul: Y[t][r] = sum_c W[r][c] * X[t][c] in double. X[n][cols], Y[n][rows]. */
void hone_oracle_matmul(double *Y, int32_t dtype, const void *W, const float *X, int64_t n,
                        int64_t rows, int64_t cols);

/* rope, out of place: y = x rotated as the slot rotates it in place, in double. x and y are
 * [n][n_heads][head_dim]; theta_i = pos[t] * freq_base^(-2i/n_rot) for i < n_rot/2;
 * normal layout (neox == 0) rotates the pairs (2i, 2i+1), NeoX the pairs (i, i + n_rot/2):
 * (a, b) -> (a cos - b sin, a sin + b cos); dims >= n_rot are copied unchanged.
 * Example: head_dim = n_rot = 2, pos = 1, x = {1, 0} gives y = {cos 1, sin 1}. */
void hone_oracle_rope(double *y, const float *x, const int32_t *pos, int64_t n, int64_t n_heads,
                      int64_t head_dim, int64_t n_rot, float freq_base, int32_t neox);
/* rope_freqs: as rope with theta_i divided by freqs[i] (freqs[n_rot / 2]). */
void hone_oracle_rope_freqs(double *y, const float *x, const int32_t *pos, const float *freqs,
                            int64_t n, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                            float freq_base, int32_t neox);

/* attention_decode: out[h][d] = sum_j softmax_j(scale * q[h] . K[j][kvh]) V[j][kvh][d] over
 * j < n_kv, kvh = h / (n_heads / n_kv_heads), all in double (max-shifted softmax), reading the
 * paged cache of engine/slots.h: key j in block block_table[j / block_size], slot
 * j % block_size, each block [block_size][n_kv_heads][head_dim] f32. q[n_heads][head_dim],
 * out[n_heads][head_dim]. n_kv >= 1. */
void hone_oracle_attention_decode(double *out, const float *q, const float *k_cache,
                                  const float *v_cache, const int32_t *block_table, int64_t n_kv,
                                  int64_t block_size, int64_t n_heads, int64_t n_kv_heads,
                                  int64_t head_dim, float scale);

/* attention_prefill: causal attention of n queries at positions pos0 .. pos0 + n - 1: row
 * (t, h) is attention_decode of q[t][h] with n_kv = pos0 + t + 1. q, out [n][n_heads][head_dim]. */
void hone_oracle_attention_prefill(double *out, const float *q, const float *k_cache,
                                   const float *v_cache, const int32_t *block_table, int64_t n,
                                   int64_t pos0, int64_t block_size, int64_t n_heads,
                                   int64_t n_kv_heads, int64_t head_dim, float scale);

/* swiglu: out[i] = gate[i] / (1 + exp(-gate[i])) * up[i] in double, i < n. */
void hone_oracle_swiglu(double *out, const float *gate, const float *up, int64_t n);
/* geglu: out[i] = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) up[i] in double, g = gate[i]. */
void hone_oracle_geglu(double *out, const float *gate, const float *up, int64_t n);

/* add: y[i] = a[i] + b[i] in double (exact for any two f32 whose exponents differ by < 29). */
void hone_oracle_add(double *y, const float *a, const float *b, int64_t n);

/* The fused slots, composed from the oracles above (the exact math, no f32 intermediate).
 * qkv: y[rq + rk + rv] = concat(Wq x, Wk x, Wv x); ffn: out[rows] = swiglu(Wg x, Wu x);
 * rmsnorm_matvec: y[rows] = W rmsnorm(x, g, eps) (x, g [cols]). */
void hone_oracle_qkv(double *y, int32_t dtype, const void *Wq, const void *Wk, const void *Wv,
                     const float *x, int64_t rq, int64_t rk, int64_t rv, int64_t cols);
void hone_oracle_ffn(double *out, int32_t dtype, const void *Wg, const void *Wu, const float *x,
                     int64_t rows, int64_t cols);
void hone_oracle_rmsnorm_matvec(double *y, int32_t dtype, const void *W, const float *x,
                                const float *g, int64_t rows, int64_t cols, float eps);

/* ---- a-priori error bounds ----------------------------------------------------------------
 * For each output element, a bound on |f32 result - exact| that every evaluation of the slot's
 * math in f32 meets, whatever its order of operations (sums in any tree order, with or without
 * fma), from the standard model of floating point: each operation rounds with relative error
 * <= u = 2^-24, and a sum or dot product of k terms in any order is within
 * gamma_k = k u / (1 - k u) of the exact value times the sum of the terms' magnitudes
 * (Higham, Accuracy and Stability of Numerical Algorithms, 3.1 and 4.2). exp may be an
 * approximation within HONE_ORACLE_EXP_ULPS ulps. Every bound also gets an absolute floor of
 * FLT_MIN (a result in the subnormal range is rounded to the subnormal spacing).
 * The faithful tier accepts an output whose error is within a small multiple of these bounds,
 * element by element. Same argument order as the oracles; out[] has the output's shape. */
#define HONE_ORACLE_U 0x1p-24
#define HONE_ORACLE_EXP_ULPS 8.0

double hone_oracle_gamma(int64_t k);
/* The bounds relative to the result itself take the oracle's result ref (n elements; rmsnorm
 * n rows of dim): embed one rounding (q4_1's q d + m), rmsnorm gamma_dim / 2 + 6 u (the sum of
 * squares, the mean, eps, the square root, the reciprocal and two products), swiglu EXP_ULPS u +
 * gamma_3, add one rounding. */
void hone_oracle_bound_embed(double *b, const double *ref, int64_t n);
void hone_oracle_bound_rmsnorm(double *b, const double *ref, int64_t n, int64_t dim);
/* matvec (n = 1) and matmul: gamma_{cols+1} * sum_c |W[r][c]| |X[t][c]| (the +1: q4_1's one
 * rounding of q * d + m). */
void hone_oracle_bound_matmul(double *b, int32_t dtype, const void *W, const float *X, int64_t n,
                              int64_t rows, int64_t cols);
void hone_oracle_bound_rope(double *b, const float *x, const int32_t *pos, int64_t n,
                            int64_t n_heads, int64_t head_dim, int64_t n_rot, float freq_base,
                            int32_t neox);
void hone_oracle_bound_rope_freqs(double *b, const float *x, const int32_t *pos, const float *freqs,
                                  int64_t n, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                                  float freq_base, int32_t neox);
/* attention (decode: n = 1, pos0 = n_kv - 1): for out[t][h][d] = sum_j p_j v_jd,
 * sum_j p_j |v_jd| (d_j + max_k d_k + EXP_ULPS u + 3 gamma_{n_kv + 2}), where d_j bounds the
 * error of score j: gamma_{head_dim + 2} scale sum_i |q_i k_ji| plus u (|s_j| + max_k s_k) for
 * the max-shift. */
void hone_oracle_bound_attention(double *b, const float *q, const float *k_cache,
                                 const float *v_cache, const int32_t *block_table, int64_t n,
                                 int64_t pos0, int64_t block_size, int64_t n_heads,
                                 int64_t n_kv_heads, int64_t head_dim, float scale);
/* swiglu: the relative bound above, plus |ref| where gate < -87 (expf's f32 overflow). */
void hone_oracle_bound_swiglu(double *b, const double *ref, const float *gate, int64_t n);
/* geglu: with y the tanh argument and t = tanh(y): the argument's gamma_6 relative error (four
 * roundings and the two f32 constants) moves t by (1 - t^2) |y| gamma_6, the tanh's own
 * rounding by u |t|, the rest gamma_3 relative:
 *   |0.5 g u| ((1 - t^2) |y| gamma_6 + 2 u |t| + gamma_3 |1 + t|). */
void hone_oracle_bound_geglu(double *b, const float *gate, const float *up, int64_t n);
void hone_oracle_bound_add(double *b, const double *ref, int64_t n);
/* The fused slots, from their components' bounds: qkv is the three matvec bounds side by side.
 * ffn: with g, u the exact projections and e_g, e_u their matvec bounds, |silu'| <= 1.1 and
 * s = EXP_ULPS u + gamma_3 swiglu's own relative bound:
 *   1.1 e_g (|u| + e_u) + |silu(g)| e_u + s (|silu(g)| + 1.1 e_g)(|u| + e_u).
 * rmsnorm_matvec: h = rmsnorm(x) carries a relative error r = gamma_cols / 2 + 6 u (the rmsnorm
 * bound) into the dot: (gamma_{cols+1} (1 + r) + r) sum_c |W[r][c]| |h_c|. */
void hone_oracle_bound_qkv(double *b, int32_t dtype, const void *Wq, const void *Wk,
                           const void *Wv, const float *x, int64_t rq, int64_t rk, int64_t rv,
                           int64_t cols);
void hone_oracle_bound_ffn(double *b, int32_t dtype, const void *Wg, const void *Wu,
                           const float *x, int64_t rows, int64_t cols);
void hone_oracle_bound_rmsnorm_matvec(double *b, int32_t dtype, const void *W, const float *x,
                                      const float *g, int64_t rows, int64_t cols, float eps);

/* ---- error metrics ---------------------------------------------------------------------- */

/* How far an f32 output is from the oracle. The non-finite pattern is judged against the
 * oracle rounded to f32 ((float)ref: a ref beyond FLT_MAX counts as Inf): an element is a
 * mismatch when exactly one side is NaN, or exactly one side is Inf, or both are Inf of
 * opposite signs. Every other figure is over the elements where got and (float)ref are both
 * finite ("compared"). */
typedef struct {
    int64_t n;               /* elements looked at */
    int64_t n_compared;      /* both finite */
    int64_t n_nonfinite_mismatch; /* must be 0 to accept anything */
    double max_abs;          /* max |got - ref| */
    double mean_abs;         /* mean |got - ref| over the compared elements */
    double max_rel;          /* max over rows of (max |got - ref| in the row) / (max |ref| in
                              * the row): the error relative to the row's scale, so small
                              * elements of a large row do not blow it up; 0 / 0 counts as 0,
                              * x / 0 as +Inf. hone_oracle_compare treats the output as one row. */
    double max_ulp;          /* max |got - ref| / ulp_f32(ref): rounding a ref to f32 costs
                              * <= 0.5 of these; see hone_oracle_ulp_f32 */
    double ref_max_abs;      /* max |ref| over the compared elements (the scale of max_rel) */
    int64_t worst;           /* index of the element with the largest |got - ref|; -1 if none */
} hone_oracle_err;

/* The spacing of f32 at |x|: 2^(floor(log2 |x|) - 23) for normal |x|, 2^-149 below FLT_MIN
 * (and for 0), and the spacing at FLT_MAX above it. Example: hone_oracle_ulp_f32(1.0) = 2^-23. */
double hone_oracle_ulp_f32(double x);

/* Compares got[n] with ref[n] as one row (max_rel relative to max |ref| of the whole output).
 * Example: got = {1, 2, NaN}, ref = {1.5, 2, NaN}: max_abs .5, mean_abs .25, max_rel .25,
 * no mismatch. */
void hone_oracle_compare(const float *got, const double *ref, int64_t n, hone_oracle_err *out);

/* The same over rows[rows][row_len], max_rel taken row by row (each row against its own
 * max |ref|): use it for outputs made of independent rows (tokens of a matmul, heads of an
 * attention, rows of an rmsnorm). */
void hone_oracle_compare_rows(const float *got, const double *ref, int64_t rows, int64_t row_len,
                              hone_oracle_err *out);

#endif
