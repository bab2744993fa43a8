/* The CPU half of a test-backend-ops: every slot of the CPU baseline table on random inputs from
 * a fixed seed, over the SmolLM2 shapes and edge shapes, checked for
 *  - accuracy: each element within a stated error bound of the f64 oracle (guard/oracle.h);
 *  - determinism: the same bits for nth = 1, 2, 3, 7 (shares run one after another here);
 *  - batching: matmul row t == matvec of X[t]; attention_prefill row (t, h) == attention_decode
 *    with n_kv = pos0 + t + 1 (bitwise);
 *  - the AVX-512 matvec / matmul == the portable generic path of kernels/cpu/common.h (bitwise);
 *  - hygiene: inputs unchanged (hashed), each share alone writes only its own rows (outputs
 *    poisoned with a NaN sentinel), the KV cache is not read past n_kv (NaN there);
 *  - aliasing: rmsnorm and rope in place, swiglu / add with out == an input;
 *  - fused slots (qkv, ffn, rmsnorm_matvec): their baseline is bitwise the unfused composition
 *    of the table's matvec, rmsnorm and swiglu, within guard/oracle.h's composed bounds.
 *
 * The error bounds (u = 2^-24, gamma_k = k u / (1 - k u), all rigorous for the baseline's
 * operation order, ignoring underflow, then multiplied by MARGIN):
 *  - matvec / matmul: every product w*x passes through at most m = ceil(cols / 16) fused
 *    multiply-adds in its lane and 4 additions of the lane tree, so
 *    |y - ref| <= gamma_{m+4} * sum|w x|  (gamma_{m+5} for q4_1, whose f32 weight is q*d + m
 *    rounded once; the other formats dequantise exactly).
 *  - embed: exact (0), except q4_1: u |ref|.
 *  - rmsnorm: the sum of squares in double (~2^-53 relative), then three f32 roundings
 *    (the scale, x * scale, * w): gamma_3 |ref| (+ 1e-12 |ref| for the double part).
 *  - rope: cos and sin rounded to f32, two products and a sum: gamma_3 (|a cos| + |b sin|);
 *    the angle is computed in double exactly as the oracle does (+ 1e-10 (|a| + |b|) slack).
 *    Dims >= n_rot: exact.
 *  - swiglu: expf within 2 u (glibc: < 1 ulp), then 1 + e, the division and the product:
 *    gamma_5 |ref| (+ 1e-37 |up| for expf overflow at gate < -88).
 *  - add: one rounding: u |ref|.
 *  - attention (per row, per d): a score s_j = scale q.k_j is off by
 *    D_j = |scale| gamma_{m+5} sum|q k_j| + u |s_j| + u (|s_j - max s| + 2 max D), after which
 *    expf adds 2 u; the shared shift by the max cancels in the normalisation, so each weight
 *    p_j is off by a factor within eta = expm1(max D_j + 2.5 u), and each normalised weight by
 *    2 eta / (1 - eta). V is summed by n_kv fma, then 1 / sum (double sum, f32 inverse) and
 *    one product: |out - ref| <= (2e + gamma_{n_kv+3} (1 + 2e)) sum_j pi_j |v_jd|, with
 *    e = eta / (1 - eta) and pi the exact softmax weights.
 * The worst-case bounds are far above typical errors (those grow like sqrt(m), not m); the
 * ratio measured / bound is printed per slot at the end. */
#include "harness.h"

#include <float.h>
#include <stdint.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/dtype.h"
#include "engine/slots.h"
#include "guard/cases.h"
#include "guard/oracle.h"
#include "kernels/cpu/common.h"

#define U 0x1p-24
#define MARGIN 1.25
#define SENTINEL_BITS 0x7fedcba9u /* a quiet NaN with a payload no kernel computes */

static const int NTHS[] = {2, 3, 7};
static const int ISO_NTHS[] = {3, 7};

static hone_slot_table TAB;
static double T0;
static int TESTS_RUN;
static double now_s(void);

/* Called first by every test (the harness may run any subset). */
static void setup(void)
{
    if (T0 == 0.0) {
        T0 = now_s();
        hone_slots_cpu_baseline(&TAB);
    }
    TESTS_RUN++;
}

/* ---- small utilities ------------------------------------------------------------------ */

static uint64_t rng = 0x5eed0f0a11ce5eedull;

static uint64_t rnd_u64(void) /* splitmix64 */
{
    return hone_slots_rand(&rng);
}

static double rnd_unit(void) { return (double)(rnd_u64() >> 11) * 0x1p-53; }
static float rnd_f(double lo, double hi) { return (float)(lo + (hi - lo) * rnd_unit()); }

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

static float *rnd_vec(int64_t n, double lo, double hi)
{
    float *v = xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) v[i] = rnd_f(lo, hi);
    return v;
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) /* FNV-1a */
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define HASH0 0xcbf29ce484222325ull

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static double gamma_k(int64_t k) { return (double)k * U / (1.0 - (double)k * U); }

/* gamma of a dot of length len in the 16-lane fma order plus the 4-level tree, plus extra. */
static double dot_gamma(int64_t len, int extra) { return gamma_k((len + 15) / 16 + 4 + extra); }

/* Index of the first bitwise difference of a[n] and b[n], or -1. */
static int64_t first_diff(const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (fbits(a[i]) != fbits(b[i])) return i;
    return -1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- per-slot statistics ---------------------------------------------------------------- */

typedef struct {
    int cases;
    double max_abs, max_rel, max_ulp, max_ratio;
} slot_stats;

static slot_stats STATS[HONE_SLOT_COUNT];

/* Checks got against ref within bound (per element), records the figures for the slot. */
static void check_accuracy(int slot, const char *what, const float *got, const double *ref,
                           const double *bound, int64_t rows, int64_t row_len)
{
    hone_oracle_err e;
    hone_oracle_compare_rows(got, ref, rows, row_len, &e);
    CHECK_MSG(e.n_nonfinite_mismatch == 0, "%s: %lld NaN/Inf mismatches", what,
              (long long)e.n_nonfinite_mismatch);
    int64_t n = rows * row_len, bad = 0, worst = -1;
    double ratio = 0.0;
    for (int64_t k = 0; k < n; k++) {
        double d = fabs((double)got[k] - ref[k]);
        if (!isfinite(ref[k]) && fbits(got[k]) == fbits((float)ref[k])) continue;
        double r = bound[k] > 0 ? d / bound[k] : (d == 0 ? 0.0 : INFINITY);
        if (!(r <= 1.0)) bad++;
        if (!(r <= ratio)) {
            ratio = r;
            worst = k;
        }
    }
    CHECK_MSG(bad == 0, "%s: %lld of %lld elements beyond the bound; worst [%lld] got %.9g ref %.17g "
              "bound %.3g", what, (long long)bad, (long long)n, (long long)worst,
              worst >= 0 ? (double)got[worst] : 0.0, worst >= 0 ? ref[worst] : 0.0,
              worst >= 0 ? bound[worst] : 0.0);
    slot_stats *s = &STATS[slot];
    s->cases++;
    if (e.max_abs > s->max_abs) s->max_abs = e.max_abs;
    if (e.max_rel > s->max_rel) s->max_rel = e.max_rel;
    if (e.max_ulp > s->max_ulp) s->max_ulp = e.max_ulp;
    if (ratio > s->max_ratio) s->max_ratio = ratio;
}

/* ---- the share checks, common to every slot ----------------------------------------------- */

/* One slot call with its inputs bound: run(ctx, out, ith, nth) computes share ith of nth. */
typedef struct {
    const char *what;
    void (*run)(const void *ctx, float *out, int ith, int nth);
    const void *ctx;
    int64_t len;           /* floats of output */
    int64_t key_div, key_mod; /* the share unit of element k: (k / key_div) % key_mod
                            * (key_mod 0: no modulus) - a share owns whole units */
    const float *init;     /* in-place slots: the content out starts with; NULL: sentinel */
} job;

static void prepare(const job *j, float *out)
{
    if (j->init) {
        memcpy(out, j->init, (size_t)j->len * sizeof(float));
    } else {
        uint32_t s = SENTINEL_BITS;
        for (int64_t k = 0; k < j->len; k++) memcpy(&out[k], &s, 4);
    }
}

static uint32_t init_bits(const job *j, int64_t k)
{
    return j->init ? fbits(j->init[k]) : SENTINEL_BITS;
}

/* Runs j with nth = 1 into full, then checks: nth = 2, 3, 7 give the same bits; each share of
 * nth = 3 and 7 run alone writes only elements no other share writes, in whole units, with the
 * nth = 1 bits, and together the shares write every element (those equal to their initial
 * content in the result may be left alone). */
static void check_job(const job *j, float *full)
{
    prepare(j, full);
    j->run(j->ctx, full, 0, 1);
    float *tmp = xmalloc((size_t)j->len * sizeof(float));
    for (size_t a = 0; a < sizeof NTHS / sizeof NTHS[0]; a++) {
        int nth = NTHS[a];
        prepare(j, tmp);
        for (int ith = 0; ith < nth; ith++) j->run(j->ctx, tmp, ith, nth);
        int64_t d = first_diff(full, tmp, j->len);
        CHECK_MSG(d < 0, "%s: nth=%d differs from nth=1 at [%lld]: %.9g vs %.9g", j->what, nth,
                  (long long)d, d >= 0 ? (double)tmp[d] : 0.0, d >= 0 ? (double)full[d] : 0.0);
    }
    int8_t *owner = xmalloc((size_t)j->len);
    int64_t nkeys = j->key_mod ? j->key_mod : (j->len + j->key_div - 1) / j->key_div;
    int8_t *key_owner = xmalloc((size_t)nkeys);
    for (size_t a = 0; a < sizeof ISO_NTHS / sizeof ISO_NTHS[0]; a++) {
        int nth = ISO_NTHS[a];
        memset(owner, -1, (size_t)j->len);
        memset(key_owner, -1, (size_t)nkeys);
        int64_t twice = 0, wrong = 0, split = 0, missed = 0;
        for (int ith = 0; ith < nth; ith++) {
            prepare(j, tmp);
            j->run(j->ctx, tmp, ith, nth);
            for (int64_t k = 0; k < j->len; k++) {
                if (fbits(tmp[k]) == init_bits(j, k)) continue;
                if (owner[k] >= 0) twice++;
                owner[k] = (int8_t)ith;
                if (fbits(tmp[k]) != fbits(full[k])) wrong++;
                int64_t key = k / j->key_div;
                if (j->key_mod) key %= j->key_mod;
                if (key_owner[key] < 0) key_owner[key] = (int8_t)ith;
                else if (key_owner[key] != ith) split++;
            }
        }
        for (int64_t k = 0; k < j->len; k++)
            if (owner[k] < 0 && fbits(full[k]) != init_bits(j, k)) missed++;
        CHECK_MSG(twice == 0 && wrong == 0 && split == 0 && missed == 0,
                  "%s: shares of nth=%d: %lld written twice, %lld with other bits, %lld units "
                  "split, %lld never written", j->what, nth, (long long)twice, (long long)wrong,
                  (long long)split, (long long)missed);
    }
    free(owner);
    free(key_owner);
    free(tmp);
}

/* ---- weights ------------------------------------------------------------------------------ */

static const int DTYPES[6] = {HONE_DTYPE_F32, HONE_DTYPE_F16, HONE_DTYPE_BF16,
                              HONE_DTYPE_Q8_0, HONE_DTYPE_Q4_0, HONE_DTYPE_Q4_1};

static int is_block(int dt) { return hone_dtype_block_size(dt) == HONE_QK; }

/* A random weight W[rows][cols] of dtype: values in about [-1, 1], finite f16 scales. */
static void *make_weight(int dt, int64_t rows, int64_t cols, size_t *bytes)
{
    int64_t rb = hone_dtype_row_bytes(dt, cols);
    *bytes = (size_t)(rb * rows);
    void *w = xmalloc(*bytes);
    hone_slots_fill_weight(w, dt, rows, cols, &rng);
    return w;
}

/* ---- the portable generic matvec / matmul, for the SIMD-equals-generic check -------------- */

static void gdeq_f32(const void *row, int64_t c0, int n, float *out)
{
    memcpy(out, (const float *)row + c0, (size_t)n * sizeof(float));
}
static void gdeq_f16(const void *row, int64_t c0, int n, float *out)
{
    hone_cpu_deq_f16((const uint16_t *)row + c0, out, n);
}
static void gdeq_bf16(const void *row, int64_t c0, int n, float *out)
{
    hone_cpu_deq_bf16((const uint16_t *)row + c0, out, n);
}
static void gdeq_q8_0(const void *row, int64_t c0, int n, float *out)
{
    (void)n;
    hone_cpu_deq_q8_0((const hone_block_q8_0 *)row + c0 / 32, out);
}
static void gdeq_q4_0(const void *row, int64_t c0, int n, float *out)
{
    (void)n;
    hone_cpu_deq_q4_0((const hone_block_q4_0 *)row + c0 / 32, out);
}
static void gdeq_q4_1(const void *row, int64_t c0, int n, float *out)
{
    (void)n;
    hone_cpu_deq_q4_1((const hone_block_q4_1 *)row + c0 / 32, out);
}

static hone_cpu_deq_fn gdeq(int dt)
{
    switch (dt) {
    case HONE_DTYPE_F32: return gdeq_f32;
    case HONE_DTYPE_F16: return gdeq_f16;
    case HONE_DTYPE_BF16: return gdeq_bf16;
    case HONE_DTYPE_Q8_0: return gdeq_q8_0;
    case HONE_DTYPE_Q4_0: return gdeq_q4_0;
    case HONE_DTYPE_Q4_1: return gdeq_q4_1;
    default: return hone_cpu_deqr_for(dt); /* q5_0 .. mxfp4: the portable per-chunk dequantiser */
    }
}

/* 1 for the formats whose f32 weight is rounded once (q4_1's q * d + m, q5_1 likewise, the K
 * formats' subtraction of the min and q6_K's second product); the others dequantise exactly. */
static int rounds_weight(int dt)
{
    return dt == HONE_DTYPE_Q4_1 || dt == HONE_DTYPE_Q5_1 || dt == HONE_DTYPE_Q4_K ||
           dt == HONE_DTYPE_Q5_K || dt == HONE_DTYPE_Q6_K || dt == HONE_DTYPE_Q2_K;
}

static void generic_matmul(float *Y, int dt, const void *W, const float *X, int64_t n,
                           int64_t rows, int64_t cols)
{
    hone_cpu_matmul_generic(Y, W, X, n, rows, cols, hone_dtype_row_bytes(dt, cols), gdeq(dt), 0, 1);
}

static void generic_matvec(float *y, int dt, const void *W, const float *x, int64_t rows,
                           int64_t cols)
{
    hone_cpu_matvec_generic(y, W, x, rows, cols, hone_dtype_row_bytes(dt, cols), gdeq(dt), 0, 1);
}

/* ---- matvec / matmul ---------------------------------------------------------------------- */

typedef struct {
    int dt;
    const void *W;
    const float *x;
    int64_t n, rows, cols;
} mm_ctx;

static void run_matvec(const void *c, float *out, int ith, int nth)
{
    const mm_ctx *m = c;
    hone_slots_matvec(&TAB, m->dt)(out, m->W, m->x, m->rows, m->cols, ith, nth);
}

static void run_matmul(const void *c, float *out, int ith, int nth)
{
    const mm_ctx *m = c;
    hone_slots_matmul(&TAB, m->dt)(out, m->W, m->x, m->n, m->rows, m->cols, ith, nth);
}

/* One matvec (n == 0) or matmul (n >= 1) case of dtype dt. */
static void mat_case(int dt, int64_t n, int64_t rows, int64_t cols)
{
    int is_mv = n == 0;
    int64_t nt = is_mv ? 1 : n;
    int slot = is_mv ? hone_slots_matvec_id(dt) : hone_slots_matmul_id(dt);
    char what[128];
    snprintf(what, sizeof what, "%s n=%lld rows=%lld cols=%lld", hone_slots_name((hone_slot_id)slot),
             (long long)n, (long long)rows, (long long)cols);
    size_t wbytes;
    void *W = make_weight(dt, rows, cols, &wbytes);
    float *X = rnd_vec(nt * cols, -1, 1);
    uint64_t h0 = hash_bytes(hash_bytes(HASH0, W, wbytes), X, (size_t)(nt * cols) * sizeof(float));

    mm_ctx ctx = {dt, W, X, n, rows, cols};
    job j = {what, is_mv ? run_matvec : run_matmul, &ctx, nt * rows, 1, is_mv ? 0 : rows, NULL};
    float *Y = xmalloc((size_t)(nt * rows) * sizeof(float));
    check_job(&j, Y);

    /* Accuracy against the oracle. */
    double *ref = xmalloc((size_t)(nt * rows) * sizeof(double));
    double *bound = xmalloc((size_t)(nt * rows) * sizeof(double));
    hone_oracle_matmul(ref, dt, W, X, nt, rows, cols);
    double g = MARGIN * dot_gamma(cols, rounds_weight(dt));
    for (int64_t t = 0; t < nt; t++) {
        hone_oracle_matvec_abs(bound + t * rows, dt, W, X + t * cols, rows, cols);
        for (int64_t r = 0; r < rows; r++) bound[t * rows + r] = g * bound[t * rows + r] + 1e-37;
    }
    check_accuracy(slot, what, Y, ref, bound, nt, rows);

    /* The portable generic path gives the same bits as the table's (AVX-512 where built). */
    float *G = xmalloc((size_t)(nt * rows) * sizeof(float));
    if (is_mv) generic_matvec(G, dt, W, X, rows, cols);
    else generic_matmul(G, dt, W, X, n, rows, cols);
    int64_t d = first_diff(Y, G, nt * rows);
    CHECK_MSG(d < 0, "%s: differs from the generic path at [%lld]: %.9g vs %.9g", what,
              (long long)d, d >= 0 ? (double)Y[d] : 0.0, d >= 0 ? (double)G[d] : 0.0);

    /* matmul row t is bitwise the matvec of X[t]. */
    if (!is_mv) {
        int64_t bad_t = -1;
        for (int64_t t = 0; t < n && bad_t < 0; t++) {
            hone_slots_matvec(&TAB, dt)(G, W, X + t * cols, rows, cols, 0, 1);
            if (first_diff(G, Y + t * rows, rows) >= 0) bad_t = t;
        }
        CHECK_MSG(bad_t < 0, "%s: row %lld differs from matvec", what, (long long)bad_t);
    }

    uint64_t h1 = hash_bytes(hash_bytes(HASH0, W, wbytes), X, (size_t)(nt * cols) * sizeof(float));
    CHECK_MSG(h0 == h1, "%s: inputs modified", what);
    free(G);
    free(bound);
    free(ref);
    free(Y);
    free(X);
    free(W);
}

static void test_matvec(void)
{
    setup();
    static const int64_t edge_rows[] = {1, 3, 17};
    static const int64_t block_cols[] = {32, 96};
    static const int64_t odd_cols[] = {1, 7, 33, 100};
    static const int64_t smol[][2] = {{576, 576}, {192, 576}, {1536, 576}, {576, 1536}};
    for (int di = 0; di < 6; di++) {
        int dt = DTYPES[di];
        for (int r = 0; r < 3; r++) {
            for (int c = 0; c < 2; c++) mat_case(dt, 0, edge_rows[r], block_cols[c]);
            if (!is_block(dt))
                for (int c = 0; c < 4; c++) mat_case(dt, 0, edge_rows[r], odd_cols[c]);
        }
        for (int s = 0; s < 4; s++) mat_case(dt, 0, smol[s][0], smol[s][1]);
    }
    /* The output projection over the SmolLM2 vocabulary (tied embeddings are q8_0 or f16). */
    mat_case(HONE_DTYPE_Q8_0, 0, 49152, 576);
    mat_case(HONE_DTYPE_F16, 0, 49152, 576);
    /* The block formats' staged path (scales of 4 rows converted ahead) at its buffer's edge
     * (HONE_CPU_STAGE_MAX = 1024 scale fields: q4_1 has 2 a block) and past it, where rows
     * take the unstaged path: the same bits either way. */
    mat_case(HONE_DTYPE_Q4_0, 0, 7, 8192);
    mat_case(HONE_DTYPE_Q4_0, 0, 7, 8224);
    mat_case(HONE_DTYPE_Q4_1, 0, 6, 4096);
    mat_case(HONE_DTYPE_Q4_1, 0, 6, 4128);
    mat_case(HONE_DTYPE_Q8_0, 0, 9, 8224);
}

static void test_matmul(void)
{
    setup();
    static const int64_t ns[] = {1, 2, 5, 13};
    static const int64_t edge_rows[] = {1, 3, 17};
    static const int64_t block_cols[] = {32, 96};
    static const int64_t odd_cols[] = {1, 7, 33, 100};
    for (int di = 0; di < 6; di++) {
        int dt = DTYPES[di];
        for (int ni = 0; ni < 4; ni++)
            for (int r = 0; r < 3; r++) {
                for (int c = 0; c < 2; c++) mat_case(dt, ns[ni], edge_rows[r], block_cols[c]);
                if (!is_block(dt))
                    for (int c = 0; c < 4; c++) mat_case(dt, ns[ni], edge_rows[r], odd_cols[c]);
            }
        mat_case(dt, 13, 576, 576);
        mat_case(dt, 5, 1536, 576);
        mat_case(dt, 5, 576, 1536);
        mat_case(dt, 13, 192, 576);
        /* prefill batches (n >= 32: quantised rows dequantised once into the f32 buffer): token
         * tiles and leftover tokens, several row chunks with leftover rows, long rows */
        mat_case(dt, 37, 100, 576);
        mat_case(dt, 32, 17, 1536);
        /* rows longer than 768 values go through in pieces of 24 blocks, the accumulators
         * carried between pieces: four pieces (the last of 4 blocks) over several row chunks
         * with a leftover group; a piece count that leaves a tail not a multiple of 32 */
        mat_case(dt, 24, 45, 2432);
        if (!is_block(dt)) mat_case(dt, 16, 40, 1000);
    }
    mat_case(HONE_DTYPE_Q8_0, 2, 49152, 576);
    /* batched decode (n < 32) of the block formats: each 2 x 8 tile's scales staged as f32 while
     * 2 rows' scales fit the staging buffer (2 x blocks x fields <= 1024), at that bound and just
     * past it (the per-block conversion), two full tiles and a leftover row */
    mat_case(HONE_DTYPE_Q4_1, 16, 7, 576);
    mat_case(HONE_DTYPE_Q4_1, 9, 3, 8192);
    mat_case(HONE_DTYPE_Q4_1, 9, 3, 8224);
    mat_case(HONE_DTYPE_Q4_0, 8, 2, 16384);
    mat_case(HONE_DTYPE_Q8_0, 8, 2, 16416);
    mat_case(HONE_DTYPE_Q5_1, 24, 5, 576);
}

/* The further formats (q5_0 .. mxfp4): matvec and matmul over whole blocks (32 or 256 values),
 * one and odd row counts, several blocks per row and the SmolLM2 shapes the blocks divide. */
static void test_mat_more(void)
{
    setup();
    static const int MORE[] = {HONE_DTYPE_Q5_0, HONE_DTYPE_Q5_1, HONE_DTYPE_Q4_K, HONE_DTYPE_Q5_K,
                               HONE_DTYPE_Q6_K, HONE_DTYPE_Q3_K, HONE_DTYPE_Q2_K, HONE_DTYPE_MXFP4};
    static const int64_t ns[] = {0, 1, 2, 5, 13};
    static const int64_t edge_rows[] = {1, 3, 17};
    for (size_t di = 0; di < sizeof MORE / sizeof MORE[0]; di++) {
        int dt = MORE[di];
        int64_t bs = hone_dtype_block_size(dt);
        for (int ni = 0; ni < 5; ni++)
            for (int r = 0; r < 3; r++) {
                mat_case(dt, ns[ni], edge_rows[r], bs);
                mat_case(dt, ns[ni], edge_rows[r], 3 * bs);
            }
        mat_case(dt, 0, 576, 1536);
        mat_case(dt, 5, 576, 1536);
        mat_case(dt, 0, 1536, bs == 32 ? 576 : 512);
        mat_case(dt, 13, 192, bs == 32 ? 576 : 768);
        mat_case(dt, 37, 100, bs == 32 ? 576 : 512); /* prefill: the f32 buffer path */
    }
}

/* ---- embed -------------------------------------------------------------------------------- */

typedef struct {
    const void *table;
    int dt;
    const int32_t *ids;
    int64_t n, dim;
} embed_ctx;

static void run_embed(const void *c, float *out, int ith, int nth)
{
    const embed_ctx *e = c;
    HONE_SLOTS_FN(&TAB, HONE_SLOT_EMBED, hone_slot_embed_fn)(out, e->table, e->dt, e->ids, e->n, e->dim, ith, nth);
}

static void test_embed(void)
{
    setup();
    static const int64_t ns[] = {1, 2, 5, 13};
    static const int64_t block_dims[] = {32, 64, 576};
    static const int64_t odd_dims[] = {1, 7, 33};
    const int64_t vocab = 50;
    static const int MORE[] = {HONE_DTYPE_Q5_0, HONE_DTYPE_Q5_1, HONE_DTYPE_Q4_K, HONE_DTYPE_Q5_K,
                               HONE_DTYPE_Q6_K, HONE_DTYPE_Q3_K, HONE_DTYPE_Q2_K, HONE_DTYPE_MXFP4};
    for (int di = 0; di < 6 + 8; di++) {
        int dt = di < 6 ? DTYPES[di] : MORE[di - 6];
        for (int k = 0; k < 6; k++) {
            if (k >= 3 && hone_dtype_block_size(dt) > 1) break;
            int64_t dim = k < 3 ? block_dims[k] : odd_dims[k - 3];
            if (di >= 6) dim = hone_dtype_block_size(dt) * (k + 1); /* whole blocks */
            for (int ni = 0; ni < 4; ni++) {
                int64_t n = ns[ni];
                char what[96];
                snprintf(what, sizeof what, "embed %s n=%lld dim=%lld", hone_dtype_name(dt),
                         (long long)n, (long long)dim);
                size_t bytes;
                void *T = make_weight(dt, vocab, dim, &bytes);
                int32_t ids[13];
                for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)(rnd_u64() % (uint64_t)vocab);
                if (n > 1) ids[n - 1] = ids[0]; /* a repeated id */
                uint64_t h0 = hash_bytes(hash_bytes(HASH0, T, bytes), ids, sizeof ids);
                embed_ctx ctx = {T, dt, ids, n, dim};
                job j = {what, run_embed, &ctx, n * dim, dim, 0, NULL};
                float *out = xmalloc((size_t)(n * dim) * sizeof(float));
                check_job(&j, out);
                double *ref = xmalloc((size_t)(n * dim) * sizeof(double));
                double *bound = xmalloc((size_t)(n * dim) * sizeof(double));
                hone_oracle_embed(ref, T, dt, ids, n, dim);
                for (int64_t i = 0; i < n * dim; i++)
                    bound[i] = rounds_weight(dt) ? MARGIN * U * fabs(ref[i]) : 0.0;
                check_accuracy(HONE_SLOT_EMBED, what, out, ref, bound, n, dim);
                uint64_t h1 = hash_bytes(hash_bytes(HASH0, T, bytes), ids, sizeof ids);
                CHECK_MSG(h0 == h1, "%s: inputs modified", what);
                free(bound);
                free(ref);
                free(out);
                free(T);
            }
        }
    }
}

/* ---- rmsnorm ------------------------------------------------------------------------------ */

typedef struct {
    const float *x, *w;
    int64_t n, dim;
    float eps;
    int in_place; /* out is x's copy */
} rms_ctx;

static void run_rmsnorm(const void *c, float *out, int ith, int nth)
{
    const rms_ctx *r = c;
    HONE_SLOTS_FN(&TAB, HONE_SLOT_RMSNORM, hone_slot_rmsnorm_fn)(out, r->in_place ? out : r->x, r->w, r->n, r->dim, r->eps, ith, nth);
}

static void test_rmsnorm(void)
{
    setup();
    static const int64_t ns[] = {1, 2, 5, 13};
    static const int64_t dims[] = {576, 64, 1, 7, 33, 100};
    for (int di = 0; di < 6; di++)
        for (int ni = 0; ni < 4; ni++) {
            int64_t n = ns[ni], dim = dims[di];
            float eps = (ni & 1) ? 1e-5f : 1e-6f;
            double xs = (di & 1) ? 100.0 : 1.0;
            char what[96];
            snprintf(what, sizeof what, "rmsnorm n=%lld dim=%lld", (long long)n, (long long)dim);
            float *x = rnd_vec(n * dim, -xs, xs), *w = rnd_vec(dim, -2, 2);
            uint64_t h0 = hash_bytes(hash_bytes(HASH0, x, (size_t)(n * dim) * 4), w, (size_t)dim * 4);
            rms_ctx ctx = {x, w, n, dim, eps, 0};
            job j = {what, run_rmsnorm, &ctx, n * dim, dim, 0, NULL};
            float *y = xmalloc((size_t)(n * dim) * sizeof(float));
            check_job(&j, y);
            double *ref = xmalloc((size_t)(n * dim) * sizeof(double));
            double *bound = xmalloc((size_t)(n * dim) * sizeof(double));
            hone_oracle_rmsnorm(ref, x, w, n, dim, eps);
            for (int64_t i = 0; i < n * dim; i++)
                bound[i] = MARGIN * (gamma_k(3) + 1e-12) * fabs(ref[i]);
            check_accuracy(HONE_SLOT_RMSNORM, what, y, ref, bound, n, dim);
            uint64_t h1 = hash_bytes(hash_bytes(HASH0, x, (size_t)(n * dim) * 4), w, (size_t)dim * 4);
            CHECK_MSG(h0 == h1, "%s: inputs modified", what);
            /* In place (y == x): the same bits, also run share by share. */
            char what2[128];
            snprintf(what2, sizeof what2, "%s in place", what);
            rms_ctx ctx2 = {x, w, n, dim, eps, 1};
            job j2 = {what2, run_rmsnorm, &ctx2, n * dim, dim, 0, x};
            float *y2 = xmalloc((size_t)(n * dim) * sizeof(float));
            check_job(&j2, y2);
            int64_t d = first_diff(y, y2, n * dim);
            CHECK_MSG(d < 0, "%s: differs from out of place at [%lld]", what2, (long long)d);
            free(y2);
            free(bound);
            free(ref);
            free(y);
            free(w);
            free(x);
        }
}

/* Rows normed together (8 side by side, then one at a time) are each the row normed alone, bit
 * for bit: rows of wide magnitudes, a zero row, rows with an infinity, a NaN, squares beyond f32's range
 * (1e30) and subnormals, at 19 rows (two groups of 8 and 3 left over) on 1 to 3 shares. */
static void test_rmsnorm_rows_alone(void)
{
    setup();
    const int64_t n = 19, dim = 100;
    float *x = rnd_vec(n * dim, -3, 3), *w = rnd_vec(dim, -2, 2);
    /* magnitudes 2^-40 .. 2^40 (the double sums round; the f32 scale mostly hides their order) */
    for (int64_t i = 0; i < n * dim; i++) x[i] = ldexpf(x[i], (int)((i * 37) % 81) - 40);
    for (int64_t i = 0; i < dim; i++) x[2 * dim + i] = 0.0f;
    x[4 * dim + 7] = INFINITY;
    x[9 * dim + 50] = NAN;
    for (int64_t i = 0; i < dim; i += 3) x[11 * dim + i] = 1e30f;
    for (int64_t i = 0; i < dim; i++) x[17 * dim + i] = 1e-41f * (float)(i + 1);
    float *y = xmalloc((size_t)(n * dim) * sizeof(float)), *alone = xmalloc((size_t)dim * sizeof(float));
    hone_slot_rmsnorm_fn f = HONE_SLOTS_FN(&TAB, HONE_SLOT_RMSNORM, hone_slot_rmsnorm_fn);
    for (int nth = 1; nth <= 3; nth++) {
        for (int ith = 0; ith < nth; ith++) f(y, x, w, n, dim, 1e-5f, ith, nth);
        for (int64_t r = 0; r < n; r++) {
            f(alone, x + r * dim, w, 1, dim, 1e-5f, 0, 1);
            CHECK_MSG(memcmp(alone, y + r * dim, (size_t)dim * sizeof(float)) == 0,
                      "rmsnorm row %lld of 19 on %d shares differs from the row alone", (long long)r, nth);
        }
    }
    free(alone);
    free(y);
    free(w);
    free(x);
}

/* ---- rope --------------------------------------------------------------------------------- */

typedef struct {
    const int32_t *pos;
    int64_t n, n_heads, head_dim, n_rot;
    float freq_base;
    int32_t neox;
} rope_ctx;

static void run_rope(const void *c, float *out, int ith, int nth)
{
    const rope_ctx *r = c;
    HONE_SLOTS_FN(&TAB, HONE_SLOT_ROPE, hone_slot_rope_fn)(out, r->pos, r->n, r->n_heads, r->head_dim, r->n_rot, r->freq_base, r->neox, ith, nth);
}

typedef struct {
    rope_ctx r;
    const float *freqs;
} rope_freqs_ctx;

static void run_rope_freqs(const void *c, float *out, int ith, int nth)
{
    const rope_freqs_ctx *f = c;
    const rope_ctx *r = &f->r;
    HONE_SLOTS_FN(&TAB, HONE_SLOT_ROPE_FREQS, hone_slot_rope_freqs_fn)(out, r->pos, f->freqs, r->n, r->n_heads, r->head_dim, r->n_rot, r->freq_base, r->neox, ith, nth);
}

/* rope_freqs: within the guard's bound of its oracle on llama3-like factors (1 .. 8), and
 * with every factor 1 bitwise the rope slot. */
static void test_rope_freqs(void)
{
    setup();
    /* n, n_heads, head_dim, n_rot */
    static const int64_t cfg[][4] = {{1, 9, 64, 64}, {5, 3, 64, 64}, {13, 2, 16, 8}, {2, 4, 128, 128}};
    for (int ci = 0; ci < 4; ci++)
        for (int neox = 0; neox < 2; neox++) {
            int64_t n = cfg[ci][0], nh = cfg[ci][1], hd = cfg[ci][2], nr = cfg[ci][3], len = n * nh * hd;
            char what[128];
            snprintf(what, sizeof what, "rope_freqs n=%lld heads=%lld hd=%lld n_rot=%lld neox=%d",
                     (long long)n, (long long)nh, (long long)hd, (long long)nr, neox);
            int32_t pos[13];
            for (int64_t t = 0; t < n; t++) pos[t] = (int32_t)(rnd_u64() % 8192);
            float *x = rnd_vec(len, -2, 2), *freqs = rnd_vec(nr / 2, 1, 8), ones[64];
            for (int i = 0; i < 64; i++) ones[i] = 1.0f;
            rope_freqs_ctx ctx = {{pos, n, nh, hd, nr, 500000.0f, neox}, freqs};
            job j = {what, run_rope_freqs, &ctx, len, hd, 0, x};
            float *y = xmalloc((size_t)len * sizeof(float)), *y1 = xmalloc((size_t)len * sizeof(float));
            float *y0 = xmalloc((size_t)len * sizeof(float));
            check_job(&j, y);
            double *ref = xmalloc((size_t)len * sizeof(double)), *bound = xmalloc((size_t)len * sizeof(double));
            hone_oracle_rope_freqs(ref, x, pos, freqs, n, nh, hd, nr, 500000.0f, neox);
            hone_oracle_bound_rope_freqs(bound, x, pos, freqs, n, nh, hd, nr, 500000.0f, neox);
            for (int64_t k = 0; k < len; k++) bound[k] = MARGIN * bound[k] + 1e-10 * fabs((double)x[k]);
            check_accuracy(HONE_SLOT_ROPE_FREQS, what, y, ref, bound, n * nh, hd);
            ctx.freqs = ones;
            job j1 = {what, run_rope_freqs, &ctx, len, hd, 0, x};
            check_job(&j1, y1);
            rope_ctx plain = ctx.r;
            job j0 = {what, run_rope, &plain, len, hd, 0, x};
            check_job(&j0, y0);
            CHECK_MSG(first_diff(y0, y1, len) < 0, "%s: factors of 1 differ from rope", what);
            free(ref); free(bound); free(y); free(y0); free(y1); free(x); free(freqs);
        }
}

static void test_rope(void)
{
    setup();
    static const int64_t ns[] = {1, 2, 5, 13};
    /* n_heads, head_dim, n_rot */
    static const int64_t cfg[][3] = {{9, 64, 64}, {3, 64, 64}, {3, 16, 16}, {9, 64, 32},
                                     {2, 16, 8}, {4, 128, 128}};
    static const float bases[] = {10000.0f, 100000.0f};
    for (int ci = 0; ci < 6; ci++)
        for (int ni = 0; ni < 4; ni++)
            for (int neox = 0; neox < 2; neox++) {
                int64_t n = ns[ni], nh = cfg[ci][0], hd = cfg[ci][1], nr = cfg[ci][2];
                float base = bases[(ci + ni) & 1];
                int64_t len = n * nh * hd;
                char what[128];
                snprintf(what, sizeof what, "rope n=%lld heads=%lld hd=%lld n_rot=%lld neox=%d",
                         (long long)n, (long long)nh, (long long)hd, (long long)nr, neox);
                int32_t pos[13];
                for (int64_t t = 0; t < n; t++) pos[t] = (int32_t)(rnd_u64() % 8192);
                pos[0] = ni == 2 ? 0 : pos[0]; /* position 0 (identity) in some cases */
                if (n > 1) pos[n - 1] = 300;
                float *x = rnd_vec(len, -2, 2);
                uint64_t h0 = hash_bytes(hash_bytes(HASH0, x, (size_t)len * 4), pos, sizeof pos);
                rope_ctx ctx = {pos, n, nh, hd, nr, base, neox};
                job j = {what, run_rope, &ctx, len, hd, 0, x};
                float *y = xmalloc((size_t)len * sizeof(float));
                check_job(&j, y);
                double *ref = xmalloc((size_t)len * sizeof(double));
                double *bound = xmalloc((size_t)len * sizeof(double));
                hone_oracle_rope(ref, x, pos, n, nh, hd, nr, base, neox);
                for (int64_t k = 0; k < len; k++) bound[k] = 0.0;
                int64_t half = nr / 2;
                for (int64_t t = 0; t < n; t++)
                    for (int64_t i = 0; i < half; i++) {
                        double th = (double)pos[t] * pow((double)base, -2.0 * (double)i / (double)nr);
                        double c = fabs(cos(th)), s = fabs(sin(th));
                        for (int64_t h = 0; h < nh; h++) {
                            const float *v = x + (t * nh + h) * hd;
                            int64_t ia = neox ? i : 2 * i, ib = neox ? i + half : 2 * i + 1;
                            double a = fabs((double)v[ia]), b = fabs((double)v[ib]);
                            double ba = gamma_k(3) * (a * c + b * s), bb = gamma_k(3) * (a * s + b * c);
                            bound[(t * nh + h) * hd + ia] = MARGIN * ba + 1e-10 * (a + b);
                            bound[(t * nh + h) * hd + ib] = MARGIN * bb + 1e-10 * (a + b);
                        }
                    }
                check_accuracy(HONE_SLOT_ROPE, what, y, ref, bound, n * nh, hd);
                uint64_t h1 = hash_bytes(hash_bytes(HASH0, x, (size_t)len * 4), pos, sizeof pos);
                CHECK_MSG(h0 == h1, "%s: inputs modified", what);
                free(bound);
                free(ref);
                free(y);
                free(x);
            }
}

/* ---- attention ---------------------------------------------------------------------------- */

typedef struct {
    const float *q, *k, *v;
    const int32_t *bt;
    int64_t n, pos0, n_kv, block_size, n_heads, n_kv_heads, head_dim;
    float scale;
    float *scratch; /* pos0 + n (or n_kv) floats, poisoned before each share */
} attn_ctx;

static void poison(float *p, int64_t n)
{
    uint32_t s = SENTINEL_BITS;
    for (int64_t i = 0; i < n; i++) memcpy(&p[i], &s, 4);
}

static void run_decode(const void *c, float *out, int ith, int nth)
{
    const attn_ctx *a = c;
    poison(a->scratch, a->n_kv);
    HONE_SLOTS_FN(&TAB, HONE_SLOT_ATTENTION_DECODE, hone_slot_attention_decode_fn)(out, a->q, a->k, a->v, a->bt, a->n_kv, a->block_size, a->n_heads,
                         a->n_kv_heads, a->head_dim, a->scale, a->scratch, ith, nth);
}

static void run_prefill(const void *c, float *out, int ith, int nth)
{
    const attn_ctx *a = c;
    poison(a->scratch, a->pos0 + a->n);
    HONE_SLOTS_FN(&TAB, HONE_SLOT_ATTENTION_PREFILL, hone_slot_attention_prefill_fn)(out, a->q, a->k, a->v, a->bt, a->n, a->pos0, a->block_size, a->n_heads,
                          a->n_kv_heads, a->head_dim, a->scale, a->scratch, ith, nth);
}

/* A paged cache holding n_kv keys: the blocks in shuffled order, two spare blocks, and NaN in
 * every slot that is not one of the n_kv keys (a kernel reading past n_kv gets NaN). */
typedef struct {
    float *k, *v;
    int32_t *bt;
    size_t bytes;   /* of k (and of v) */
    int64_t n_blocks;
} paged_kv;

static paged_kv make_cache(int64_t n_kv, int64_t bs, int64_t n_kv_heads, int64_t hd)
{
    paged_kv c;
    int64_t used = (n_kv + bs - 1) / bs;
    c.n_blocks = used + 2;
    int64_t per_block = bs * n_kv_heads * hd;
    c.bytes = (size_t)(c.n_blocks * per_block) * sizeof(float);
    c.k = xmalloc(c.bytes);
    c.v = xmalloc(c.bytes);
    c.bt = xmalloc((size_t)c.n_blocks * sizeof(int32_t));
    for (int64_t b = 0; b < c.n_blocks; b++) c.bt[b] = (int32_t)b;
    for (int64_t b = c.n_blocks - 1; b > 0; b--) { /* Fisher-Yates */
        int64_t o = (int64_t)(rnd_u64() % (uint64_t)(b + 1));
        int32_t t = c.bt[b];
        c.bt[b] = c.bt[o];
        c.bt[o] = t;
    }
    poison(c.k, c.n_blocks * per_block);
    poison(c.v, c.n_blocks * per_block);
    for (int64_t j = 0; j < n_kv; j++)
        for (int64_t h = 0; h < n_kv_heads; h++) {
            int64_t off = hone_kv_offset(c.bt, j, bs, n_kv_heads, h, hd);
            for (int64_t i = 0; i < hd; i++) {
                c.k[off + i] = rnd_f(-1, 1);
                c.v[off + i] = rnd_f(-1, 1);
            }
        }
    return c;
}

static void free_cache(paged_kv *c)
{
    free(c->k);
    free(c->v);
    free(c->bt);
}

static uint64_t hash_attn(const paged_kv *c, const float *q, int64_t qlen)
{
    uint64_t h = hash_bytes(HASH0, c->k, c->bytes);
    h = hash_bytes(h, c->v, c->bytes);
    h = hash_bytes(h, c->bt, (size_t)c->n_blocks * sizeof(int32_t));
    return hash_bytes(h, q, (size_t)qlen * sizeof(float));
}

/* The bound of the header comment for the rows of an attention of n queries at pos0. */
static void attn_bound(double *bound, const float *q, const paged_kv *c, int64_t n, int64_t pos0,
                       int64_t bs, int64_t nh, int64_t nkvh, int64_t hd, float scale)
{
    int64_t group = nh / nkvh, nkv_max = pos0 + n;
    double *s = xmalloc((size_t)nkv_max * sizeof(double));
    double *D = xmalloc((size_t)nkv_max * sizeof(double));
    double gs = dot_gamma(hd, 1), sc = fabs((double)scale);
    for (int64_t t = 0; t < n; t++)
        for (int64_t h = 0; h < nh; h++) {
            int64_t nkv = pos0 + t + 1, kvh = h / group;
            const float *qr = q + (t * nh + h) * hd;
            double mx = -INFINITY, dmax = 0.0;
            for (int64_t j = 0; j < nkv; j++) {
                const float *k = c->k + hone_kv_offset(c->bt, j, bs, nkvh, kvh, hd);
                double dot = 0.0, a = 0.0;
                for (int64_t d = 0; d < hd; d++) {
                    dot += (double)qr[d] * k[d];
                    a += fabs((double)qr[d] * k[d]);
                }
                s[j] = dot * (double)scale;
                D[j] = sc * gs * a + U * fabs(s[j]) * 1.001;
                if (s[j] > mx) mx = s[j];
                if (D[j] > dmax) dmax = D[j];
            }
            double dm = 0.0, sum = 0.0;
            for (int64_t j = 0; j < nkv; j++) {
                double dj = D[j] + U * (fabs(s[j] - mx) + 2 * dmax);
                if (dj > dm) dm = dj;
                s[j] = exp(s[j] - mx);
                sum += s[j];
            }
            double eta = expm1(dm + 2.5 * U), e = eta / (1 - eta);
            double fac = 2 * e + gamma_k(nkv + 3) * (1 + 2 * e);
            double *b = bound + (t * nh + h) * hd;
            for (int64_t d = 0; d < hd; d++) b[d] = 0.0;
            double vmax = 0.0;
            for (int64_t j = 0; j < nkv; j++) {
                const float *v = c->v + hone_kv_offset(c->bt, j, bs, nkvh, kvh, hd);
                double p = s[j] / sum;
                for (int64_t d = 0; d < hd; d++) {
                    b[d] += p * fabs((double)v[d]);
                    if (fabs((double)v[d]) > vmax) vmax = fabs((double)v[d]);
                }
            }
            for (int64_t d = 0; d < hd; d++) b[d] = MARGIN * fac * b[d] + 1e-30 * vmax;
        }
    free(D);
    free(s);
}

/* attention_prefill of n queries at pos0 (n == 0: attention_decode of one query, n_kv = pos0 + 1). */
static void attn_case(int64_t n, int64_t pos0, int64_t bs, int64_t nh, int64_t nkvh, int64_t hd,
                      double qmag)
{
    int is_dec = n == 0;
    int64_t nq = is_dec ? 1 : n, n_kv = pos0 + nq;
    int slot = is_dec ? HONE_SLOT_ATTENTION_DECODE : HONE_SLOT_ATTENTION_PREFILL;
    char what[160];
    snprintf(what, sizeof what, "%s n=%lld pos0=%lld n_kv=%lld bs=%lld heads=%lld/%lld hd=%lld",
             hone_slots_name((hone_slot_id)slot), (long long)n, (long long)pos0, (long long)n_kv,
             (long long)bs, (long long)nh, (long long)nkvh, (long long)hd);
    paged_kv c = make_cache(n_kv, bs, nkvh, hd);
    int64_t qlen = nq * nh * hd;
    float *q = rnd_vec(qlen, -qmag, qmag);
    float scale = (float)(1.0 / sqrt((double)hd));
    uint64_t h0 = hash_attn(&c, q, qlen);
    float *scratch = xmalloc((size_t)n_kv * sizeof(float));
    attn_ctx ctx = {q, c.k, c.v, c.bt, nq, pos0, n_kv, bs, nh, nkvh, hd, scale, scratch};
    job j = {what, is_dec ? run_decode : run_prefill, &ctx, qlen, hd, 0, NULL};
    float *out = xmalloc((size_t)qlen * sizeof(float));
    check_job(&j, out);

    double *ref = xmalloc((size_t)qlen * sizeof(double));
    double *bound = xmalloc((size_t)qlen * sizeof(double));
    hone_oracle_attention_prefill(ref, q, c.k, c.v, c.bt, nq, pos0, bs, nh, nkvh, hd, scale);
    if (is_dec) { /* the decode oracle is the prefill one at n = 1; check that it says so */
        double *r2 = xmalloc((size_t)qlen * sizeof(double));
        hone_oracle_attention_decode(r2, q, c.k, c.v, c.bt, n_kv, bs, nh, nkvh, hd, scale);
        CHECK(memcmp(r2, ref, (size_t)qlen * sizeof(double)) == 0);
        free(r2);
    }
    attn_bound(bound, q, &c, nq, pos0, bs, nh, nkvh, hd, scale);
    check_accuracy(slot, what, out, ref, bound, nq * nh, hd);

    /* Row (t, h) of the prefill is bitwise the decode with n_kv = pos0 + t + 1. */
    if (!is_dec) {
        float *o1 = xmalloc((size_t)(nh * hd) * sizeof(float));
        int64_t bad_t = -1;
        for (int64_t t = 0; t < n && bad_t < 0; t++) {
            HONE_SLOTS_FN(&TAB, HONE_SLOT_ATTENTION_DECODE, hone_slot_attention_decode_fn)(o1, q + t * nh * hd, c.k, c.v, c.bt, pos0 + t + 1, bs, nh, nkvh,
                                 hd, scale, scratch, 0, 1);
            if (first_diff(o1, out + t * nh * hd, nh * hd) >= 0) bad_t = t;
        }
        CHECK_MSG(bad_t < 0, "%s: token %lld differs from attention_decode", what, (long long)bad_t);
        free(o1);
    }
    CHECK_MSG(h0 == hash_attn(&c, q, qlen), "%s: inputs modified", what);
    free(bound);
    free(ref);
    free(out);
    free(scratch);
    free(q);
    free_cache(&c);
}

/* n_heads, n_kv_heads, head_dim: SmolLM2, GQA groups 1 and 3, head_dim 16 / 64 / 40 (a tail). */
static const int64_t ATT_CFG[][3] = {{9, 3, 64}, {3, 3, 16}, {6, 2, 16}, {4, 4, 64}, {3, 1, 40}};

static void test_attention_decode(void)
{
    setup();
    static const int64_t nkvs[] = {1, 17, 300};
    for (int ci = 0; ci < 5; ci++)
        for (int k = 0; k < 3; k++)
            attn_case(0, nkvs[k] - 1, 16, ATT_CFG[ci][0], ATT_CFG[ci][1], ATT_CFG[ci][2],
                      k == 1 ? 4.0 : 1.0);
    /* Block sizes 1 and 5 (not a power of two). */
    attn_case(0, 16, 1, 9, 3, 64, 1.0);
    attn_case(0, 22, 5, 6, 2, 16, 4.0);
}

static void test_attention_prefill(void)
{
    setup();
    static const int64_t ns[] = {1, 2, 5, 13};
    for (int ci = 0; ci < 5; ci++)
        for (int k = 0; k < 4; k++) {
            attn_case(ns[k], 0, 16, ATT_CFG[ci][0], ATT_CFG[ci][1], ATT_CFG[ci][2], 1.0);
            attn_case(ns[k], k == 3 ? 287 : 12, 16, ATT_CFG[ci][0], ATT_CFG[ci][1],
                      ATT_CFG[ci][2], k == 2 ? 4.0 : 1.0);
        }
    attn_case(13, 4, 5, 9, 3, 64, 1.0);
}

/* ---- swiglu and add ----------------------------------------------------------------------- */

typedef struct {
    const float *a, *b;
    int64_t n;
    int alias; /* 0: out of place; 1: out == a (gate); 2: out == b (up) */
    int is_add;     /* 1: add; 2: geglu; 0: swiglu */
} ew_ctx;

static void run_ew(const void *c, float *out, int ith, int nth)
{
    const ew_ctx *e = c;
    const float *a = e->alias == 1 ? out : e->a, *b = e->alias == 2 ? out : e->b;
    if (e->is_add == 2) HONE_SLOTS_FN(&TAB, HONE_SLOT_GEGLU, hone_slot_geglu_fn)(out, a, b, e->n, ith, nth);
    else if (e->is_add) HONE_SLOTS_FN(&TAB, HONE_SLOT_ADD, hone_slot_add_fn)(out, a, b, e->n, ith, nth);
    else HONE_SLOTS_FN(&TAB, HONE_SLOT_SWIGLU, hone_slot_swiglu_fn)(out, a, b, e->n, ith, nth);
}

static void ew_case(int is_add, int64_t n)
{
    int geglu = is_add == 2;
    int slot = geglu ? HONE_SLOT_GEGLU : is_add ? HONE_SLOT_ADD : HONE_SLOT_SWIGLU;
    if (geglu) is_add = 0;
    char what[96];
    snprintf(what, sizeof what, "%s n=%lld", hone_slots_name((hone_slot_id)slot), (long long)n);
    float *a = rnd_vec(n, is_add ? -4 : -12, is_add ? 4 : 12), *b = rnd_vec(n, -3, 3);
    if (!is_add && n >= 7) { /* gates where expf(-g) overflows or e^g is tiny */
        a[0] = -100.0f;
        a[1] = -88.0f;
        a[2] = 90.0f;
        a[3] = 0.0f;
        a[4] = -0.0f;
    }
    uint64_t h0 = hash_bytes(hash_bytes(HASH0, a, (size_t)n * 4), b, (size_t)n * 4);
    ew_ctx ctx = {a, b, n, 0, geglu ? 2 : is_add};
    job j = {what, run_ew, &ctx, n, 1, 0, NULL};
    float *out = xmalloc((size_t)n * sizeof(float));
    check_job(&j, out);
    double *ref = xmalloc((size_t)n * sizeof(double));
    double *bound = xmalloc((size_t)n * sizeof(double));
    if (is_add) hone_oracle_add(ref, a, b, n);
    else if (geglu) hone_oracle_geglu(ref, a, b, n);
    else hone_oracle_swiglu(ref, a, b, n);
    if (geglu) { /* the guard's bound (tanh's absolute rounding near 1 + t = 0) */
        hone_oracle_bound_geglu(bound, a, b, n);
        for (int64_t i = 0; i < n; i++) bound[i] *= MARGIN;
    } else
        for (int64_t i = 0; i < n; i++)
            bound[i] = is_add ? MARGIN * U * fabs(ref[i])
                              : MARGIN * gamma_k(5) * fabs(ref[i]) + 1e-37 * fabs((double)b[i]);
    check_accuracy(slot, what, out, ref, bound, 1, n);
    CHECK_MSG(h0 == hash_bytes(hash_bytes(HASH0, a, (size_t)n * 4), b, (size_t)n * 4),
              "%s: inputs modified", what);
    /* out == a, out == b: the same bits. */
    for (int alias = 1; alias <= 2; alias++) {
        char what2[128];
        snprintf(what2, sizeof what2, "%s out == %s", what, alias == 1 ? "first input" : "second input");
        ew_ctx c2 = {a, b, n, alias, geglu ? 2 : is_add};
        job j2 = {what2, run_ew, &c2, n, 1, 0, alias == 1 ? a : b};
        float *o2 = xmalloc((size_t)n * sizeof(float));
        check_job(&j2, o2);
        int64_t d = first_diff(out, o2, n);
        CHECK_MSG(d < 0, "%s: differs from out of place at [%lld]", what2, (long long)d);
        free(o2);
    }
    free(bound);
    free(ref);
    free(out);
    free(b);
    free(a);
}

/* The staged matvec's scale gather (hone_cpu_stage_scales: a window of blocks' f16 fields per
 * two-source permute) against hone_cpu_half of each field, for the block sizes and field counts
 * of q4_0, q4_1, q8_0, q5_0 and q5_1 and every run length up to 60 blocks (full windows, a
 * masked last window of each size). The run ends at a page whose next page is not readable, so
 * a window that loaded a byte past the last block would fault. No setup(): it checks no slot. */
static void test_stage_scales(void)
{
#ifdef HONE_CPU_SIMD
    static const int fmt[][2] = {{18, 1}, {20, 2}, {34, 1}, {22, 1}, {24, 2}};
    long pg = sysconf(_SC_PAGESIZE);
    uint8_t *map = mmap(NULL, (size_t)(3 * pg), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(map != MAP_FAILED);
    if (map == MAP_FAILED) return;
    CHECK(mprotect(map + 2 * pg, (size_t)pg, PROT_NONE) == 0);
    uint64_t st = 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < 2 * pg; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        map[i] = (uint8_t)(st >> 56);
    }
    float sc[HONE_CPU_STAGE_MAX];
    for (int f = 0; f < 5; f++) {
        int bb = fmt[f][0], fields = fmt[f][1];
        for (int64_t nblk = 1; nblk <= 60; nblk++) {
            /* nr rows of nb blocks from row r: the run's last byte is the page's last */
            int64_t nb = nblk % 3 == 0 ? nblk / 3 : nblk, nr = nblk / nb, r = 2;
            const uint8_t *W = map + 2 * pg - (r + nr) * nb * bb;
            hone_cpu_stage_scales(W, r, nr, nb, bb, fields, sc);
            int bad = -1;
            for (int64_t k = 0; k < nblk * fields && bad < 0; k++) {
                uint16_t h;
                memcpy(&h, W + (r * nb + k / fields) * bb + 2 * (k % fields), 2);
                float want = hone_cpu_half(h);
                if (memcmp(&want, &sc[k], sizeof want) != 0) bad = (int)k;
            }
            CHECK_MSG(bad < 0, "block %d bytes, %d fields, %lld blocks: field %d differs", bb, fields,
                      (long long)nblk, bad);
        }
    }
    munmap(map, (size_t)(3 * pg));
#endif
}

static void test_swiglu_add(void)
{
    setup();
    static const int64_t ns[] = {1, 7, 33, 100, 1536, 1536 * 13};
    for (int is_add = 0; is_add < 3; is_add++) /* swiglu, add, geglu */
        for (int i = 0; i < 6; i++) ew_case(is_add, ns[i]);
}

/* ---- fused slots ---------------------------------------------------------------------------- */

typedef struct {
    const hone_case_set *s;
    const hone_case *c;
    float *scratch;
} fused_ctx;

static void run_fused(const void *p, float *out, int ith, int nth)
{
    const fused_ctx *f = p;
    hone_cases_call(f->c->d->cpu_baseline, f->c, f->s->base, out, f->scratch, ith, nth);
}

/* The unfused sequence the forward pass runs without the fused slot, from the table's own
 * kernels: out[out_len]. */
static void unfused(const hone_case_set *s, const hone_case *c, float *out)
{
    const hone_slot_desc *d = c->d;
    const int64_t *D = c->shape.d;
#define IN(a) ((const void *)(s->base + c->in_off[a]))
    hone_slot_matvec_fn mv = hone_slots_matvec(&TAB, d->dtype);
    if (d->kind == HONE_SLOT_KIND_QKV) {
        mv(out, IN(1), IN(4), D[0], D[3], 0, 1);
        mv(out + D[0], IN(2), IN(4), D[1], D[3], 0, 1);
        mv(out + D[0] + D[1], IN(3), IN(4), D[2], D[3], 0, 1);
    } else if (d->kind == HONE_SLOT_KIND_FFN) {
        float *u = xmalloc((size_t)D[0] * sizeof(float));
        mv(out, IN(1), IN(3), D[0], D[1], 0, 1);
        mv(u, IN(2), IN(3), D[0], D[1], 0, 1);
        HONE_SLOTS_FN(&TAB, HONE_SLOT_SWIGLU, hone_slot_swiglu_fn)(out, out, u, D[0], 0, 1);
        free(u);
    } else {
        float *h = xmalloc((size_t)D[1] * sizeof(float));
        HONE_SLOTS_FN(&TAB, HONE_SLOT_RMSNORM, hone_slot_rmsnorm_fn)(h, IN(2), IN(3), 1, D[1], c->shape.f[0], 0, 1);
        mv(out, IN(1), h, D[0], D[1], 0, 1);
        free(h);
    }
#undef IN
}

static void test_fused(void)
{
    setup();
    for (int id = HONE_SLOT_FUSED_FIRST; id < HONE_SLOT_COUNT; id++) {
        hone_case_set s;
        CHECK_EQ_INT(hone_cases_new(&s, id, NULL, 77 + (uint64_t)id), 0);
        for (int i = 0; i < s.n; i++) {
            const hone_case *c = &s.c[i];
            float *scratch = xmalloc((size_t)(c->scratch_len + 1) * sizeof(float));
            fused_ctx f = {&s, c, scratch};
            job j = {c->desc, run_fused, &f, c->out_len, 1, 0, NULL};
            float *y = xmalloc((size_t)c->out_len * sizeof(float));
            float *u = xmalloc((size_t)c->out_len * sizeof(float));
            uint64_t h0 = hone_cases_hash_inputs(&s, c);
            check_job(&j, y);
            unfused(&s, c, u);
            int64_t d = first_diff(y, u, c->out_len);
            CHECK_MSG(d < 0, "%s: differs from the unfused sequence at [%lld]: %.9g vs %.9g", c->desc,
                      (long long)d, d >= 0 ? (double)y[d] : 0.0, d >= 0 ? (double)u[d] : 0.0);
            double *ref = xmalloc((size_t)c->out_len * sizeof(double));
            double *bound = xmalloc((size_t)c->out_len * sizeof(double));
            hone_cases_oracle(c, s.base, ref);
            CHECK(hone_cases_bound(c, s.base, ref, bound) == 1);
            /* edge cases: a NaN where the oracle has one (check_accuracy counts a mismatched
             * pattern), whatever its sign bit */
            for (int64_t k = 0; k < c->out_len; k++)
                if (isnan(ref[k]) && isnan(y[k])) ref[k] = (double)y[k];
            check_accuracy(id, c->desc, y, ref, bound, 1, c->out_len);
            CHECK_MSG(hone_cases_hash_inputs(&s, c) == h0, "%s: inputs modified", c->desc);
            free(bound);
            free(ref);
            free(u);
            free(y);
            free(scratch);
        }
        hone_cases_free(&s);
    }
}

/* ---- the table is complete, and the report ------------------------------------------------ */

static void test_table_complete(void)
{
    setup();
    for (int id = 0; id < HONE_SLOT_COUNT; id++) {
        const hone_slot_desc *d = hone_slots_desc(id);
        CHECK_MSG(d->cpu_baseline != NULL, "slot %s has no baseline", d->name);
        /* a fused slot is not provided by the baseline table: the forward runs its sequence */
        if (hone_slots_is_fused(id))
            CHECK_MSG(hone_slots_get(&TAB, id) == NULL, "fused slot %s is in the baseline table", d->name);
        else
            CHECK_MSG(hone_slots_get(&TAB, id) == d->cpu_baseline, "slot %s: the table's is not its baseline", d->name);
    }
#ifdef HONE_CPU_SIMD
    fprintf(stderr, "(AVX-512 paths compiled in: SIMD == generic is a real check)\n");
#else
    fprintf(stderr, "(portable build: SIMD == generic compares the generic path with itself)\n");
#endif
}

/* Every slot must have been checked, unless a filter argument ran only some of the tests. */
static void report(void)
{
    fprintf(stderr, "%-18s %5s %10s %10s %8s %12s\n", "slot", "cases", "max_abs", "max_rel",
            "max_ulp", "err/bound");
    for (int id = 0; id < HONE_SLOT_COUNT; id++) {
        const slot_stats *s = &STATS[id];
        if (TESTS_RUN == 11) CHECK_MSG(s->cases > 0, "slot %s was not tested", hone_slots_name((hone_slot_id)id));
        fprintf(stderr, "%-18s %5d %10.3g %10.3g %8.2f %12.3g\n", hone_slots_name((hone_slot_id)id),
                s->cases, s->max_abs, s->max_rel, s->max_ulp, s->max_ratio);
    }
}

int main(int argc, char **argv)
{
    static const harness_case cases[] = {
        TEST_CASE(test_table_complete), TEST_CASE(test_matvec), TEST_CASE(test_matmul), TEST_CASE(test_mat_more),
        TEST_CASE(test_embed), TEST_CASE(test_rmsnorm), TEST_CASE(test_rmsnorm_rows_alone), TEST_CASE(test_stage_scales), TEST_CASE(test_rope), TEST_CASE(test_rope_freqs),
        TEST_CASE(test_attention_decode), TEST_CASE(test_attention_prefill), TEST_CASE(test_swiglu_add),
        TEST_CASE(test_fused)};
    int rc = harness_run(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
    report(); /* the error table of what ran: a report, not a case (it checks nothing) */
    fprintf(stderr, "elapsed %.2f s\n", now_s() - T0);
    return rc;
}
