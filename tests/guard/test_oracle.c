/* Tests for guard/oracle: every oracle function against small cases computed by hand (values
 * in closed form), the exact dequantisation of each block format built byte by byte, the paged
 * cache addressing, causality, and the error metrics on known differences. */
#include "harness.h"

#include <float.h>
#include <stdint.h>

#include "engine/dtype.h"
#include "engine/slots.h"
#include "guard/oracle.h"

#define TOL 1e-15

static void test_matvec_2x3(void)
{
    const float W[6] = {1, 2, 3, 4, 5, 6};
    const float x[3] = {1, 0.5f, -1};
    double y[2];
    hone_oracle_matvec(y, HONE_DTYPE_F32, W, x, 2, 3);
    CHECK(y[0] == -1.0);
    CHECK(y[1] == 0.5);
    /* The same values as f16 and bf16 (all exact in both). */
    uint16_t h[6], b[6];
    for (int i = 0; i < 6; i++) {
        h[i] = hone_f32_to_fp16(W[i]);
        b[i] = hone_f32_to_bf16(W[i]);
    }
    hone_oracle_matvec(y, HONE_DTYPE_F16, h, x, 2, 3);
    CHECK(y[0] == -1.0 && y[1] == 0.5);
    hone_oracle_matvec(y, HONE_DTYPE_BF16, b, x, 2, 3);
    CHECK(y[0] == -1.0 && y[1] == 0.5);
    double a[2];
    hone_oracle_matvec_abs(a, HONE_DTYPE_F32, W, x, 2, 3);
    CHECK(a[0] == 1 + 1 + 3 && a[1] == 4 + 2.5 + 6);
    /* matmul: row t is the matvec of X[t]. */
    const float X[6] = {1, 0.5f, -1, 0, 0, 2};
    double Y[4];
    hone_oracle_matmul(Y, HONE_DTYPE_F32, W, X, 2, 2, 3);
    CHECK(Y[0] == -1.0 && Y[1] == 0.5 && Y[2] == 6.0 && Y[3] == 12.0);
}

/* A value no f32 product of small numbers gives, to show the double path keeps all bits. */
static void test_matvec_double_precision(void)
{
    const float W[2] = {1.0f + 0x1p-23f, 1.0f + 0x1p-23f};
    const float x[2] = {1.0f + 0x1p-23f, -1.0f};
    double y;
    hone_oracle_matvec(&y, HONE_DTYPE_F32, W, x, 1, 2);
    /* (1 + e)^2 - (1 + e) = e + e^2 with e = 2^-23: not representable in f32. */
    CHECK(y == 0x1p-23 + 0x1p-46);
}

static void test_dequant_blocks(void)
{
    double out[32];
    /* q8_0: d = 0.25, q = -16 .. 15. */
    hone_block_q8_0 b8;
    b8.d = hone_f32_to_fp16(0.25f);
    for (int j = 0; j < 32; j++) b8.qs[j] = (int8_t)(j - 16);
    hone_oracle_dequant_row(out, HONE_DTYPE_Q8_0, &b8, 0, 32);
    int ok = 1;
    for (int j = 0; j < 32; j++) ok &= out[j] == (j - 16) * 0.25;
    CHECK(ok);
    /* q4_0: d = 2, low nibble j, high nibble 15 - j: w[j] = (j - 8) * 2, w[j+16] = (7 - j) * 2. */
    hone_block_q4_0 b40;
    b40.d = hone_f32_to_fp16(2.0f);
    for (int j = 0; j < 16; j++) b40.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    hone_oracle_dequant_row(out, HONE_DTYPE_Q4_0, &b40, 0, 32);
    ok = 1;
    for (int j = 0; j < 16; j++) ok &= out[j] == (j - 8) * 2.0 && out[j + 16] == (7 - j) * 2.0;
    CHECK(ok);
    /* q4_1: d = 0.5, m = -1: w[j] = j * .5 - 1, w[j+16] = (15 - j) * .5 - 1. */
    hone_block_q4_1 b41;
    b41.d = hone_f32_to_fp16(0.5f);
    b41.m = hone_f32_to_fp16(-1.0f);
    for (int j = 0; j < 16; j++) b41.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    hone_oracle_dequant_row(out, HONE_DTYPE_Q4_1, &b41, 0, 32);
    ok = 1;
    for (int j = 0; j < 16; j++) ok &= out[j] == j * 0.5 - 1 && out[j + 16] == (15 - j) * 0.5 - 1;
    CHECK(ok);
    /* q4_1 where f32 would round: d = 2^-14, m = 2048 (f32 ulp 2^-12 there): 15 * 2^-14 + 2048
     * is not an f32, but the oracle keeps it exactly. */
    b41.d = hone_f32_to_fp16(0x1p-14f);
    b41.m = hone_f32_to_fp16(2048.0f);
    memset(b41.qs, 0xFF, sizeof b41.qs);
    hone_oracle_dequant_row(out, HONE_DTYPE_Q4_1, &b41, 0, 32);
    CHECK(out[0] == 2048.0 + 15 * 0x1p-14);
    CHECK((double)(float)out[0] != out[0]);
    /* The row index selects row `row` of the matrix: two q8_0 blocks per row, row 1. */
    hone_block_q8_0 m8[4];
    for (int b = 0; b < 4; b++) {
        m8[b].d = hone_f32_to_fp16((float)(b + 1));
        for (int j = 0; j < 32; j++) m8[b].qs[j] = 1;
    }
    double row[64];
    hone_oracle_dequant_row(row, HONE_DTYPE_Q8_0, m8, 1, 64);
    CHECK(row[0] == 3.0 && row[31] == 3.0 && row[32] == 4.0 && row[63] == 4.0);
    /* A matvec over the q4_1 block above with x = 1: sum = 44 + 44 (d = .5, m = -1). */
    b41.d = hone_f32_to_fp16(0.5f);
    b41.m = hone_f32_to_fp16(-1.0f);
    for (int j = 0; j < 16; j++) b41.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    float ones[32];
    for (int j = 0; j < 32; j++) ones[j] = 1.0f;
    double y;
    hone_oracle_matvec(&y, HONE_DTYPE_Q4_1, &b41, ones, 1, 32);
    CHECK(y == 88.0);
    hone_oracle_matvec(&y, HONE_DTYPE_Q8_0, &b8, ones, 1, 32);
    CHECK(y == -4.0);
    /* bf16: 1.5 is 0x3FC0, -2 is 0xC000. */
    uint16_t bf[2] = {0x3FC0, 0xC000};
    hone_oracle_dequant_row(out, HONE_DTYPE_BF16, bf, 0, 2);
    CHECK(out[0] == 1.5 && out[1] == -2.0);
    /* f16 subnormal: 0x0001 = 2^-24. */
    uint16_t h1 = 0x0001;
    hone_oracle_dequant_row(out, HONE_DTYPE_F16, &h1, 0, 1);
    CHECK(out[0] == 0x1p-24);
    /* Unsupported dtype: NaN. */
    hone_oracle_dequant_row(out, 99, bf, 0, 2);
    CHECK(isnan(out[0]) && isnan(out[1]));
}

/* The further formats: the oracle (ggml's loops over whole blocks, in double) against the
 * engine's f32 dequantisation (32-value chunks, engine/dtype.c) on random blocks of
 * hone_slots_fill_weight: equal where the f32 value is exact (q5_0, q3_K, mxfp4), else within
 * the one rounding (2^-24 relative). And one hand-made q4_K block. */
static void test_dequant_more(void)
{
    static const int dts[] = {HONE_DTYPE_Q5_0, HONE_DTYPE_Q5_1, HONE_DTYPE_Q4_K, HONE_DTYPE_Q5_K,
                              HONE_DTYPE_Q6_K, HONE_DTYPE_Q3_K, HONE_DTYPE_Q2_K, HONE_DTYPE_MXFP4};
    uint64_t st = 42;
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        int dt = dts[i];
        int64_t cols = 512, rows = 3;
        void *w = malloc((size_t)(hone_dtype_row_bytes(dt, cols) * rows));
        hone_slots_fill_weight(w, dt, rows, cols, &st);
        int exact = dt == HONE_DTYPE_Q5_0 || dt == HONE_DTYPE_Q3_K || dt == HONE_DTYPE_MXFP4;
        double worst = 0;
        for (int64_t r = 0; r < rows; r++) {
            double o[512];
            float f[512];
            hone_oracle_dequant_row(o, dt, w, r, cols);
            hone_dtype_dequant_row(dt, w, r, cols, f);
            for (int64_t c = 0; c < cols; c++) {
                double e = fabs((double)f[c] - o[c]) / (fabs(o[c]) + 1e-300);
                if (e > worst) worst = e;
            }
        }
        CHECK_MSG(exact ? worst == 0 : worst <= 0x1p-24, "%s: oracle vs f32 dequant %.3g",
                  hone_dtype_name(dt), worst);
        free(w);
    }
    /* q4_K: d = 0.5, dmin = 0.25, chunk 0 scale 3 min 2, chunk 5 (j >= 4 packing) scale 17 min 33:
     * w = 0.5 * 3 * q - 0.25 * 2 in chunk 0 (low nibbles), 0.5 * 17 * q - 0.25 * 33 in chunk 5 */
    hone_block_q4_k b;
    memset(&b, 0, sizeof b);
    b.d = hone_f32_to_fp16(0.5f);
    b.dmin = hone_f32_to_fp16(0.25f);
    b.scales[0] = 3;
    b.scales[4] = 2;
    b.scales[9] = (uint8_t)((17 & 0xF) | ((33 & 0xF) << 4)); /* chunk 5: scales[j + 4] = [9] */
    b.scales[1] |= (uint8_t)((17 >> 4) << 6);                 /* high bits in [j - 4] = [1] */
    b.scales[5] |= (uint8_t)((33 >> 4) << 6);                 /* and [j] = [5] */
    for (int l = 0; l < 32; l++) b.qs[l] = (uint8_t)(l & 0xF);
    for (int l = 0; l < 32; l++) b.qs[64 + l] = (uint8_t)((15 - (l & 0xF)) << 4);
    double o[256];
    hone_oracle_dequant_row(o, HONE_DTYPE_Q4_K, &b, 0, 256);
    CHECK_NEAR(o[7], 0.5 * 3 * 7 - 0.25 * 2, 0);
    CHECK_NEAR(o[5 * 32 + 2], 0.5 * 17 * 13 - 0.25 * 33, 0);
    float f[256];
    hone_dtype_dequant_row(HONE_DTYPE_Q4_K, &b, 0, 256, f);
    CHECK_NEAR(f[7], 10.0, 0);
    CHECK_NEAR(f[5 * 32 + 2], 102.25, 0);
}

static void test_embed(void)
{
    uint16_t table[3 * 2];
    const float v[6] = {1, 2, 3, 4, 5, 6};
    for (int i = 0; i < 6; i++) table[i] = hone_f32_to_fp16(v[i]);
    const int32_t ids[3] = {2, 0, 2};
    double out[6];
    hone_oracle_embed(out, table, HONE_DTYPE_F16, ids, 3, 2);
    CHECK(out[0] == 5 && out[1] == 6 && out[2] == 1 && out[3] == 2 && out[4] == 5 && out[5] == 6);
}

static void test_rmsnorm(void)
{
    const float x[4] = {3, 4, -1, 0};
    const float w[2] = {1, 1};
    double y[4];
    /* mean(9, 16) = 12.5, sqrt = 5 / sqrt(2): y = (3 sqrt 2 / 5, 4 sqrt 2 / 5). */
    hone_oracle_rmsnorm(y, x, w, 2, 2, 0.0f);
    CHECK_NEAR(y[0], 3.0 * sqrt(2.0) / 5.0, TOL);
    CHECK_NEAR(y[1], 4.0 * sqrt(2.0) / 5.0, TOL);
    /* Row 2: mean(1, 0) = .5: y = (-sqrt 2, 0). */
    CHECK_NEAR(y[2], -sqrt(2.0), TOL);
    CHECK(y[3] == 0.0);
    /* With weights and eps: x = (3, 4), w = (2, .5), eps = .5: rms = sqrt(13). */
    const float w2[2] = {2, 0.5f};
    hone_oracle_rmsnorm(y, x, w2, 1, 2, 0.5f);
    CHECK_NEAR(y[0], 6.0 / sqrt(13.0), TOL);
    CHECK_NEAR(y[1], 2.0 / sqrt(13.0), TOL);
}

static void test_rope(void)
{
    /* pos 0: identity for any layout. */
    const float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    double y[8];
    const int32_t p0 = 0;
    for (int neox = 0; neox < 2; neox++) {
        hone_oracle_rope(y, x, &p0, 1, 2, 4, 4, 10000.0f, neox);
        int ok = 1;
        for (int i = 0; i < 8; i++) ok &= y[i] == x[i];
        CHECK(ok);
    }
    /* head_dim = n_rot = 2, pos 1: theta = 1 rad. */
    const float e0[2] = {1, 0};
    const int32_t p1 = 1;
    hone_oracle_rope(y, e0, &p1, 1, 1, 2, 2, 10000.0f, 0);
    CHECK_NEAR(y[0], cos(1.0), TOL);
    CHECK_NEAR(y[1], sin(1.0), TOL);
    /* head_dim 4, pos 1, base 10000: theta_0 = 1, theta_1 = 10000^(-1/2) = .01.
     * Normal pairs (0,1), (2,3); NeoX pairs (0,2), (1,3). x = (1, 2, 3, 4). */
    const float v[4] = {1, 2, 3, 4};
    double c1 = cos(1.0), s1 = sin(1.0), c2 = cos(0.01), s2 = sin(0.01);
    hone_oracle_rope(y, v, &p1, 1, 1, 4, 4, 10000.0f, 0);
    CHECK_NEAR(y[0], 1 * c1 - 2 * s1, TOL);
    CHECK_NEAR(y[1], 1 * s1 + 2 * c1, TOL);
    CHECK_NEAR(y[2], 3 * c2 - 4 * s2, TOL);
    CHECK_NEAR(y[3], 3 * s2 + 4 * c2, TOL);
    hone_oracle_rope(y, v, &p1, 1, 1, 4, 4, 10000.0f, 1);
    CHECK_NEAR(y[0], 1 * c1 - 3 * s1, TOL);
    CHECK_NEAR(y[2], 1 * s1 + 3 * c1, TOL);
    CHECK_NEAR(y[1], 2 * c2 - 4 * s2, TOL);
    CHECK_NEAR(y[3], 2 * s2 + 4 * c2, TOL);
    /* n_rot = 2 < head_dim = 4, pos 3: only (0,1) rotates, by theta = 3; dims 2, 3 copied.
     * Second token at pos 0 stays put; two heads rotate alike. */
    const int32_t pos[2] = {3, 0};
    hone_oracle_rope(y, x, pos, 2, 1, 4, 2, 500000.0f, 0);
    CHECK_NEAR(y[0], 1 * cos(3.0) - 2 * sin(3.0), TOL);
    CHECK_NEAR(y[1], 1 * sin(3.0) + 2 * cos(3.0), TOL);
    CHECK(y[2] == 3 && y[3] == 4);
    CHECK(y[4] == 5 && y[5] == 6 && y[6] == 7 && y[7] == 8);
    hone_oracle_rope(y, x, &pos[0], 1, 2, 4, 2, 10000.0f, 1);
    CHECK_NEAR(y[4], 5 * cos(3.0) - 6 * sin(3.0), TOL);
    CHECK_NEAR(y[5], 5 * sin(3.0) + 6 * cos(3.0), TOL);
    CHECK(y[6] == 7 && y[7] == 8);
}

static void test_attention(void)
{
    /* Equal scores (q = 0): out = the mean of V over the keys. Paged: block_size 2, three
     * keys, block_table {1, 0}: keys 0, 1 in block 1, key 2 in block 0 slot 0.
     * One kv head, head_dim 2, two query heads (GQA group 2). */
    float k[2 * 2 * 2] = {0}, vc[2 * 2 * 2];
    /* block 0: slot 0 = key 2, slot 1 = unused (NaN: must not be read). */
    vc[0] = 30; vc[1] = 300; vc[2] = NAN; vc[3] = NAN;
    k[2] = NAN; k[3] = NAN;
    /* block 1: slot 0 = key 0, slot 1 = key 1. */
    vc[4] = 0; vc[5] = 0; vc[6] = 3; vc[7] = 30;
    const int32_t bt[2] = {1, 0};
    const float q[4] = {0, 0, 0, 0};
    double out[4];
    hone_oracle_attention_decode(out, q, k, vc, bt, 3, 2, 2, 1, 2, 0.7f);
    CHECK_NEAR(out[0], 11.0, 1e-13);
    CHECK_NEAR(out[1], 110.0, 1e-12);
    CHECK_NEAR(out[2], 11.0, 1e-13);
    CHECK_NEAR(out[3], 110.0, 1e-12);
    /* n_kv = 1: the single value, whatever the score. */
    hone_oracle_attention_decode(out, q, k, vc, bt, 1, 2, 2, 1, 2, 0.7f);
    CHECK(out[0] == 0 && out[1] == 0);

    /* Known weights: head_dim 1, scale 1, q = 1, keys 0 and ln 3: weights 1/4, 3/4;
     * V = 4, 8: out = 7. block_size 1, block_table {0, 1}. */
    const float kk[2] = {0, (float)log(3.0)};
    const float vv[2] = {4, 8};
    const int32_t bt2[2] = {0, 1};
    const float q1 = 1;
    double o;
    hone_oracle_attention_decode(&o, &q1, kk, vv, bt2, 2, 1, 1, 1, 1, 1.0f);
    double w3 = exp((double)kk[1]) / (1 + exp((double)kk[1])); /* ~3/4 (ln 3 rounded to f32) */
    CHECK_NEAR(o, 4 * (1 - w3) + 8 * w3, 1e-14);
    CHECK_NEAR(o, 7.0, 1e-6);
    /* Causal prefill of the same two keys, pos0 = 0, n = 2: token 0 sees key 0 only (out 4),
     * token 1 sees both (out as decode). */
    const float q2[2] = {1, 1};
    double o2[2];
    hone_oracle_attention_prefill(o2, q2, kk, vv, bt2, 2, 0, 1, 1, 1, 1, 1.0f);
    CHECK(o2[0] == 4.0);
    CHECK(o2[1] == o);
    /* Large scores do not overflow (max-shifted softmax): keys 1000 and 1000 + ln 3. */
    const float kb[2] = {1000.0f, 1000.0f + (float)log(3.0)};
    hone_oracle_attention_decode(&o, &q1, kb, vv, bt2, 2, 1, 1, 1, 1, 1.0f);
    double d = (double)kb[1] - (double)kb[0];
    CHECK_NEAR(o, 4 / (1 + exp(d)) + 8 * exp(d) / (1 + exp(d)), 1e-13);
    /* GQA: 2 kv heads, 4 query heads: heads 0, 1 read kv head 0, heads 2, 3 kv head 1.
     * One key, so out = V of that kv head; at block_size 16 kv head 1's rows of block 0 start
     * 16 x head_dim floats in (engine/kv_layout.h: [n_kv_heads][block_size][head_dim]). */
    float kg[32] = {0}, vg[32] = {0};
    vg[0] = 5, vg[16] = -7;
    const float qg[4] = {1, 2, 3, 4};
    const int32_t bt0 = 0;
    double og[4];
    hone_oracle_attention_decode(og, qg, kg, vg, &bt0, 1, 16, 4, 2, 1, 1.0f);
    CHECK(og[0] == 5 && og[1] == 5 && og[2] == -7 && og[3] == -7);
}

static void test_swiglu_add(void)
{
    const float g[4] = {0, 1, -1, (float)log(3.0)};
    const float u[4] = {5, 2, 2, 1};
    double o[4];
    hone_oracle_swiglu(o, g, u, 4);
    CHECK(o[0] == 0.0);
    CHECK_NEAR(o[1], 2.0 / (1.0 + exp(-1.0)), TOL);
    CHECK_NEAR(o[2], -2.0 / (1.0 + exp(1.0)), TOL);
    CHECK_NEAR(o[3], 0.75 * log(3.0), 1e-7); /* ln 3 / (1 + 1/3), up to ln 3 in f32 */
    const float a[2] = {1.0f, 0x1p-24f}, b[2] = {0x1p-24f, -3.0f};
    hone_oracle_add(o, a, b, 2);
    CHECK(o[0] == 1.0 + 0x1p-24); /* exact: f32 would round this to 1 */
    CHECK(o[1] == -3.0 + 0x1p-24);
}

static void test_compare(void)
{
    hone_oracle_err e;
    const float got[3] = {1, 2, NAN};
    const double ref[3] = {1.5, 2, NAN};
    hone_oracle_compare(got, ref, 3, &e);
    CHECK(e.n == 3 && e.n_compared == 2 && e.n_nonfinite_mismatch == 0);
    CHECK(e.max_abs == 0.5 && e.mean_abs == 0.25 && e.max_rel == 0.25);
    CHECK(e.worst == 0 && e.ref_max_abs == 2.0);
    CHECK(e.max_ulp == 0.5 / 0x1p-23);
    /* NaN against a number, Inf against a number, opposite Infs: three mismatches. */
    const float g2[4] = {NAN, INFINITY, -INFINITY, 1};
    const double r2[4] = {0, 1, INFINITY, 1};
    hone_oracle_compare(g2, r2, 4, &e);
    CHECK_EQ_INT(e.n_nonfinite_mismatch, 3);
    CHECK(e.n_compared == 1 && e.max_abs == 0);
    /* A ref beyond FLT_MAX is Inf in f32: Inf there is right. */
    const float g3[1] = {INFINITY};
    const double r3[1] = {1e39};
    hone_oracle_compare(g3, r3, 1, &e);
    CHECK_EQ_INT(e.n_nonfinite_mismatch, 0);
    /* One ulp at 1. */
    const float g4[2] = {1.0f + 0x1p-23f, 3.0f};
    const double r4[2] = {1.0, 3.0};
    hone_oracle_compare(g4, r4, 2, &e);
    CHECK(e.max_ulp == 1.0 && e.worst == 0);
    /* Row-relative: rows {100, 1} and {1, 0.5}; errors .1 in each row's first element.
     * Whole-output relative: .1 / 100; row relative: .1 / 1 in the second row. */
    const float g5[4] = {100.1f, 1, 1.1f, 0.5f};
    const double r5[4] = {100, 1, 1, 0.5};
    hone_oracle_compare(g5, r5, 4, &e);
    CHECK_NEAR(e.max_rel, 0.1 / 100, 1e-7);
    hone_oracle_compare_rows(g5, r5, 2, 2, &e);
    CHECK_NEAR(e.max_rel, 0.1, 1e-7);
    /* An all-zero ref row with an error: relative error +Inf. */
    const float g6[2] = {0, 1e-3f};
    const double r6[2] = {0, 0};
    hone_oracle_compare(g6, r6, 2, &e);
    CHECK(isinf(e.max_rel));
    /* ulp helper. */
    CHECK(hone_oracle_ulp_f32(1.0) == 0x1p-23);
    CHECK(hone_oracle_ulp_f32(1.5) == 0x1p-23);
    CHECK(hone_oracle_ulp_f32(-2.0) == 0x1p-22);
    CHECK(hone_oracle_ulp_f32(0.0) == 0x1p-149);
    CHECK(hone_oracle_ulp_f32(1e-40) == 0x1p-149);
    CHECK(hone_oracle_ulp_f32(1e300) == 0x1p104);
}

TEST_MAIN(TEST_CASE(test_matvec_2x3), TEST_CASE(test_matvec_double_precision), TEST_CASE(test_dequant_more),
          TEST_CASE(test_dequant_blocks), TEST_CASE(test_embed), TEST_CASE(test_rmsnorm),
          TEST_CASE(test_rope), TEST_CASE(test_attention), TEST_CASE(test_swiglu_add),
          TEST_CASE(test_compare))
