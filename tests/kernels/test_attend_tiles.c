/* The attention tiles (kernels/cpu/common.h, hone_cpu_attend_rows) and the two attention
 * baselines built on them give every row the bits of the generic single-row path
 * (hone_cpu_attend_row_generic): over head dims 32, 64, 128, 256 (the register
 * specialisations), 96 (the vector path at a runtime width) and 48 (the generic fallback),
 * GQA ratios 1, 3, 4 and 8, key counts that are not multiples of the 16-key step or of the
 * paging block, rows of one tile with different causal lengths, thread counts 1 to 3, and
 * scores far apart (the exps' scalar path past |x| >= 88). Built a second time without
 * AVX-512 (kernels_test_attend_tiles_avx2, tests/CMakeLists.txt), where the header's AVX2 path
 * is the one under test. Keys past n_kv hold NaN, so a row that reads one fails. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels/cpu/common.h"

void hone_cpu_attention_decode(float *out, const float *q, const float *k_cache,
                               const float *v_cache, const int32_t *block_table, int64_t n_kv,
                               int64_t block_size, int64_t n_heads, int64_t n_kv_heads,
                               int64_t head_dim, float scale, float *scratch, int ith, int nth);
void hone_cpu_attention_prefill(float *out, const float *q, const float *k_cache,
                                const float *v_cache, const int32_t *block_table, int64_t n,
                                int64_t pos0, int64_t block_size, int64_t n_heads,
                                int64_t n_kv_heads, int64_t head_dim, float scale, float *scratch,
                                int ith, int nth);
void hone_cpu_attention_decode_fold(float *out, const float *scratch, int64_t n_heads, int64_t head_dim,
                                    int64_t n_kv);

static uint64_t rng = 0x7a11e5eedf00dull;
static float frand(void) /* [-1, 1) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}

typedef struct {
    float *k, *v;
    int32_t *bt;
    int64_t n_kv, bs, nkvh, hd;
} cache;

/* n_kv keys in shuffled blocks of bs; every other slot NaN. */
static cache make_cache(int64_t n_kv, int64_t bs, int64_t nkvh, int64_t hd, float spread)
{
    cache c = {0};
    int64_t nb = (n_kv + bs - 1) / bs + 2, row = nkvh * hd;
    c.n_kv = n_kv, c.bs = bs, c.nkvh = nkvh, c.hd = hd;
    c.k = malloc((size_t)(nb * bs * row) * sizeof(float));
    c.v = malloc((size_t)(nb * bs * row) * sizeof(float));
    c.bt = malloc((size_t)nb * sizeof(int32_t));
    for (int64_t i = 0; i < nb * bs * row; i++) c.k[i] = c.v[i] = NAN;
    for (int64_t b = 0; b < nb; b++) c.bt[b] = (int32_t)((b * 5 + 1) % nb); /* a permutation (collisions moved on) */
    int *used = calloc((size_t)nb, sizeof(int));
    for (int64_t b = 0; b < nb; b++) {
        while (used[c.bt[b]]) c.bt[b] = (c.bt[b] + 1) % (int32_t)nb;
        used[c.bt[b]] = 1;
    }
    free(used);
    for (int64_t j = 0; j < n_kv; j++)
        for (int64_t h = 0; h < nkvh; h++) {
            float *k = c.k + hone_kv_offset(c.bt, j, bs, nkvh, h, hd), *v = c.v + hone_kv_offset(c.bt, j, bs, nkvh, h, hd);
            for (int64_t i = 0; i < hd; i++) {
                k[i] = frand() * (j % 7 == 3 ? spread : 1.0f);
                v[i] = frand();
            }
        }
    return c;
}

static void free_cache(cache *c) { free(c->k), free(c->v), free(c->bt); }

static int bits_equal(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof(float)) == 0;
}

/* n rows of kv head 1 of c, of lengths nk, queries q (n * hd): the tile
 * (hone_cpu_attend_rows) into got and the generic row of each into want. */
static void tile_and_rows(const cache *c, int n, const int64_t *nk, const float *q, float *got, float *want)
{
    int64_t hd = c->hd;
    float *scr = malloc((size_t)c->n_kv * sizeof(float));
    float *o[HONE_CPU_ATT_ROWS];
    const float *qr[HONE_CPU_ATT_ROWS];
    for (int r = 0; r < n; r++) {
        o[r] = got + r * hd, qr[r] = q + r * hd;
        hone_cpu_attend_row_generic(want + r * hd, qr[r], c->k, c->v, c->bt, nk[r], c->bs, c->nkvh, 1, hd, 0.125f,
                                    scr);
    }
    hone_cpu_attend_rows(o, qr, nk, n, c->k, c->v, c->bt, c->bs, c->nkvh, 1, hd, 0.125f, scr);
    free(scr);
}

/* Tiles straight from the header: n_rows rows of one kv head with their own lengths. */
static void test_tiles_match_rows(void)
{
#if defined(HONE_CPU_SIMD)
    fprintf(stderr, "attention tiles: the AVX-512 path\n");
#elif defined(HONE_CPU_AVX2)
    fprintf(stderr, "attention tiles: the AVX2 path\n");
#else
    fprintf(stderr, "attention tiles: the generic path\n");
#endif
    static const int64_t hds[] = {32, 64, 128, 256, 96, 48};
    static const int64_t nkvs[] = {1, 7, 16, 17, 33, 100, 257, 300}; /* 300: 64 rows' scores overflow the kept ones */
    static const int nrows[] = {1, 3, 4, 5, 9, 64};
    for (size_t a = 0; a < sizeof hds / sizeof hds[0]; a++)
        for (size_t b = 0; b < sizeof nkvs / sizeof nkvs[0]; b++)
            for (size_t c2 = 0; c2 < sizeof nrows / sizeof nrows[0]; c2++) {
                int64_t hd = hds[a], n_kv = nkvs[b], nkvh = 2, bs = b % 2 ? 16 : 5;
                int n = nrows[c2];
                float spread = (b + c2) % 3 == 0 ? 400.0f : 1.0f;
                cache c = make_cache(n_kv, bs, nkvh, hd, spread);
                float *q = malloc((size_t)(n * hd) * sizeof(float));
                float *got = malloc((size_t)(n * hd) * sizeof(float));
                float *want = malloc((size_t)(n * hd) * sizeof(float));
                float *scr = malloc((size_t)n_kv * sizeof(float));
                for (int64_t i = 0; i < n * hd; i++) q[i] = frand();
                int64_t nk[HONE_CPU_ATT_ROWS];
                for (int r = 0; r < n; r++) nk[r] = n_kv - (r * 7) % (n_kv < 20 ? n_kv : 20); /* lengths differ within a tile */
                tile_and_rows(&c, n, nk, q, got, want);
                int ok = bits_equal(got, want, n * hd);
                for (int64_t i = 0; i < n * hd; i++) ok = ok && isfinite(got[i]);
                CHECK_MSG(ok, "hd %lld n_kv %lld rows %d", (long long)hd, (long long)n_kv, n);
                /* and the single-row entry (the register row where it applies) */
                hone_cpu_attend_row(got, q, c.k, c.v, c.bt, nk[0], bs, nkvh, 1, hd, 0.125f, scr);
                CHECK_MSG(bits_equal(got, want, hd), "row: hd %lld n_kv %lld", (long long)hd, (long long)n_kv);
                free(q), free(got), free(want), free(scr);
                free_cache(&c);
            }
}

/* The slots: every (token, head) row of a prefill chunk against the generic row, and the last
 * token decoded alone against its prefilled row, for every thread count. */
static void check_slots(int64_t hd, int64_t nkvh, int64_t group, int64_t n, int64_t pos0, float spread,
                        float scale)
{
    int64_t nh = nkvh * group, bs = 16, n_kv = pos0 + n;
    cache c = make_cache(n_kv, bs, nkvh, hd, spread);
    size_t sz = (size_t)(n * nh * hd);
    float *q = malloc(sz * sizeof(float)), *want = malloc(sz * sizeof(float));
    float *got = malloc(sz * sizeof(float)), *scr = malloc((size_t)n_kv * 3 * sizeof(float));
    for (size_t i = 0; i < sz; i++) q[i] = frand();
    for (int64_t t = 0; t < n; t++)
        for (int64_t h = 0; h < nh; h++)
            hone_cpu_attend_row_generic(want + (t * nh + h) * hd, q + (t * nh + h) * hd, c.k, c.v, c.bt,
                                        pos0 + t + 1, bs, nkvh, h / group, hd, scale, scr);
    for (int nth = 1; nth <= 3; nth++) {
        for (size_t i = 0; i < sz; i++) got[i] = NAN;
        for (int ith = 0; ith < nth; ith++)
            hone_cpu_attention_prefill(got, q, c.k, c.v, c.bt, n, pos0, bs, nh, nkvh, hd, scale,
                                       scr + ith * n_kv, ith, nth);
        CHECK_MSG(bits_equal(got, want, (int64_t)sz), "prefill hd %lld group %lld pos0 %lld nth %d",
                  (long long)hd, (long long)group, (long long)pos0, nth);
        float *d = got, *dscr = malloc((size_t)hone_att_decode_scratch_floats(nh, hd, n_kv) * sizeof(float));
        for (int ith = 0; ith < nth; ith++) /* the shares of one call share its scratch */
            hone_cpu_attention_decode(d, q + (n - 1) * nh * hd, c.k, c.v, c.bt, n_kv, bs, nh, nkvh, hd,
                                      scale, dscr, ith, nth);
        hone_cpu_attention_decode_fold(d, dscr, nh, hd, n_kv); /* the caller's part */
        free(dscr);
        CHECK_MSG(bits_equal(d, want + (n - 1) * nh * hd, nh * hd), "decode hd %lld group %lld pos0 %lld nth %d",
                  (long long)hd, (long long)group, (long long)pos0, nth);
    }
    free(q), free(want), free(got), free(scr);
    free_cache(&c);
}

static void test_slots_match_rows(void)
{
    static const int64_t hds[] = {64, 128, 32, 256, 48};
    static const int64_t groups[] = {3, 1, 4, 8};
    for (size_t a = 0; a < sizeof hds / sizeof hds[0]; a++)
        for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
            check_slots(hds[a], g % 2 ? 3 : 2, groups[g], 23 + (int64_t)g * 19, 37 + (int64_t)a * 11,
                        g == 2 ? 300.0f : 1.0f, 0.0883f);
}

/* Decode at long context (SmolLM2-135M's heads: 9 query heads on 3 kv heads of 64): rows of
 * one segment (HONE_ATT_SEG keys), of one key more, of segments that end mid-block, and of
 * 4096 + 5 keys, every head against the generic row, for 1 to 3 threads: past one segment the
 * shares take (kv head, segment) items into the scratch they share, and the caller folds them
 * (hone_cpu_attention_decode_fold), so a row's segments come from different shares. */
static void test_decode_long_context(void)
{
    static const int64_t nkvs[] = {4096 + 5, HONE_ATT_SEG, HONE_ATT_SEG + 1, 3 * HONE_ATT_SEG + 7};
    for (size_t b = 0; b < sizeof nkvs / sizeof nkvs[0]; b++) {
        int64_t n_kv = nkvs[b], nh = 9, nkvh = 3, hd = 64, bs = b == 3 ? 7 : 16;
        cache c = make_cache(n_kv, bs, nkvh, hd, b == 1 ? 300.0f : 1.0f);
        size_t sz = (size_t)(nh * hd);
        float *q = malloc(sz * sizeof(float)), *want = malloc(sz * sizeof(float));
        float *got = malloc(sz * sizeof(float)), *scr = malloc((size_t)n_kv * sizeof(float));
        float *dscr = malloc((size_t)hone_att_decode_scratch_floats(nh, hd, n_kv) * sizeof(float));
        for (size_t i = 0; i < sz; i++) q[i] = frand();
        for (int64_t h = 0; h < nh; h++)
            hone_cpu_attend_row_generic(want + h * hd, q + h * hd, c.k, c.v, c.bt, n_kv, bs, nkvh,
                                        h / 3, hd, 0.125f, scr);
        for (int nth = 1; nth <= 3; nth++) {
            for (size_t i = 0; i < sz; i++) got[i] = NAN;
            for (int ith = 0; ith < nth; ith++)
                hone_cpu_attention_decode(got, q, c.k, c.v, c.bt, n_kv, bs, nh, nkvh, hd, 0.125f, dscr, ith, nth);
            hone_cpu_attention_decode_fold(got, dscr, nh, hd, n_kv);
            CHECK_MSG(bits_equal(got, want, (int64_t)sz), "decode n_kv %lld nth %d", (long long)n_kv, nth);
        }
        free(q), free(want), free(got), free(scr), free(dscr);
        free_cache(&c);
    }
}

/* The segmented row itself: a row of at most HONE_ATT_SEG keys is the one softmax (max, exps,
 * double normaliser, V in key order, one reciprocal), and a longer one is its segments' softmaxes
 * folded as hone_cpu_att_fold says, written out here in scalar C from the segments' own scalar
 * sums; and the folded row stays within 1e-6 of the one softmax computed in double. */
static void test_segmented_row(void)
{
    int64_t hd = 32, bs = 16, nkvh = 1;
    static const int64_t nkvs[] = {HONE_ATT_SEG, 2 * HONE_ATT_SEG + 100};
    for (size_t b = 0; b < 2; b++) {
        int64_t n_kv = nkvs[b], nseg = (n_kv + HONE_ATT_SEG - 1) / HONE_ATT_SEG;
        cache c = make_cache(n_kv, bs, nkvh, hd, 1.0f);
        float q[32], got[32], want[32], scr[4 * HONE_ATT_SEG], sc[3 * HONE_ATT_SEG];
        for (int i = 0; i < 32; i++) q[i] = frand();
        hone_cpu_attend_row_generic(got, q, c.k, c.v, c.bt, n_kv, bs, nkvh, 0, hd, 0.3f, scr);
        float A[32] = {0}, M = -INFINITY;
        double L = 0.0, exact[32] = {0}, den = 0.0, smax = -INFINITY;
        for (int64_t j = 0; j < n_kv; j++) {
            const float *k = c.k + hone_kv_offset(c.bt, j, bs, nkvh, 0, hd);
            float acc[16] = {0};
            for (int64_t d = 0; d < hd; d++) acc[d % 16] = fmaf(k[d], q[d], acc[d % 16]);
            sc[j] = hone_cpu_lanes_sum(acc) * 0.3f;
            if (sc[j] > smax) smax = sc[j];
        }
        for (int64_t s = 0; s < nseg; s++) {
            int64_t j0 = s * HONE_ATT_SEG, j1 = j0 + HONE_ATT_SEG < n_kv ? j0 + HONE_ATT_SEG : n_kv;
            float m = -INFINITY, o[32] = {0};
            double l = 0.0;
            for (int64_t j = j0; j < j1; j++)
                if (sc[j] > m) m = sc[j];
            for (int64_t j = j0; j < j1; j++) {
                float p = hone_cpu_expf(sc[j] - m);
                const float *v = c.v + hone_kv_offset(c.bt, j, bs, nkvh, 0, hd);
                l += p;
                for (int64_t d = 0; d < hd; d++) o[d] = fmaf(p, v[d], o[d]);
            }
            if (s == 0) {
                memcpy(A, o, sizeof A), M = m, L = l;
                continue;
            }
            float M2 = m > M ? m : M, a = hone_cpu_expf(M - M2), e = hone_cpu_expf(m - M2);
            L = L * (double)a + l * (double)e;
            for (int64_t d = 0; d < hd; d++) A[d] = fmaf(o[d], e, A[d] * a);
            M = M2;
        }
        for (int64_t d = 0; d < hd; d++) want[d] = A[d] * (float)(1.0 / L);
        CHECK_MSG(bits_equal(got, want, hd), "segmented row, n_kv %lld", (long long)n_kv);
        for (int64_t j = 0; j < n_kv; j++) {
            double p = exp((double)sc[j] - smax);
            const float *v = c.v + hone_kv_offset(c.bt, j, bs, nkvh, 0, hd);
            den += p;
            for (int64_t d = 0; d < hd; d++) exact[d] += p * v[d];
        }
        for (int64_t d = 0; d < hd; d++) CHECK(fabs(got[d] - exact[d] / den) < 1e-6);
        free_cache(&c);
    }
}

/* Prefill at long context: 32-row tiles walk the segments together, the chunk's rows ending in
 * different segments (600 .. 45k keys): SmolLM2's heads (9 on 3 kv heads of 64), the chunk's
 * tokens straddling tile boundaries; and a head dim of 48 (the generic path) at 1k keys. */
static void test_prefill_long_context(void)
{
    static const int64_t pos0s[] = {600, 1000, 4100, 9000, 17000, 45000};
    for (size_t b = 0; b < sizeof pos0s / sizeof pos0s[0]; b++)
        check_slots(64, 3, 3, 21, pos0s[b], b == 2 ? 300.0f : 1.0f, 0.125f);
    check_slots(48, 2, 4, 19, 1000, 1.0f, 0.125f); /* the generic path's rows, segment by segment */
}

/* NaNs of different payloads and infinities inside the keys the rows read: the wide tiles'
 * transposed scores and row-parallel sums (HONE_CPU_ATT_WIDE_ROWS rows and more) and the narrow
 * ones keep every bit of the generic row, the NaN that comes out included. */
static void test_tiles_nan_payloads(void)
{
    static const int nrows[] = {3, 4, 16, 32, 64};
    static const int64_t hds[] = {64, 128};
    for (size_t a = 0; a < sizeof hds / sizeof hds[0]; a++)
        for (size_t b = 0; b < sizeof nrows / sizeof nrows[0]; b++) {
            int64_t hd = hds[a], n_kv = 150, nkvh = 2, bs = 16;
            int n = nrows[b];
            cache c = make_cache(n_kv, bs, nkvh, hd, 1.0f);
            /* K: quiet NaNs of payloads 1 and 2 in keys 20 and 21 (the same step), +inf in key 40;
             * V: a NaN of payload 3 in key 90 */
            uint32_t nan1 = 0x7fc00001u, nan2 = 0x7fc00002u, nan3 = 0xffc00003u;
            memcpy(c.k + hone_kv_offset(c.bt, 20, bs, nkvh, 1, hd) + 5, &nan1, 4);
            memcpy(c.k + hone_kv_offset(c.bt, 21, bs, nkvh, 1, hd) + 37, &nan2, 4);
            c.k[hone_kv_offset(c.bt, 40, bs, nkvh, 1, hd) + 3] = INFINITY;
            memcpy(c.v + hone_kv_offset(c.bt, 90, bs, nkvh, 1, hd) + 7, &nan3, 4);
            float *q = malloc((size_t)(n * hd) * sizeof(float));
            float *got = malloc((size_t)(n * hd) * sizeof(float));
            float *want = malloc((size_t)(n * hd) * sizeof(float));
            for (int64_t i = 0; i < n * hd; i++) q[i] = frand();
            int64_t nk[HONE_CPU_ATT_ROWS];
            for (int r = 0; r < n; r++) /* before, at and past the NaNs */
                nk[r] = r % 4 == 0 ? 19 : r % 4 == 1 ? 22 : r % 4 == 2 ? 64 : n_kv - r % 5;
            tile_and_rows(&c, n, nk, q, got, want);
            int nan_rows = 0;
            for (int r = 0; r < n; r++) nan_rows += isnan(want[r * hd + 7]);
            CHECK_MSG(nan_rows > 0, "the NaNs reach some rows (%d rows)", n);
            CHECK_MSG(bits_equal(got, want, n * hd), "NaN payloads: hd %lld rows %d", (long long)hd, n);
            free(q), free(got), free(want);
            free_cache(&c);
        }
}

TEST_MAIN(TEST_CASE(test_tiles_match_rows), TEST_CASE(test_tiles_nan_payloads), TEST_CASE(test_slots_match_rows), TEST_CASE(test_decode_long_context),
          TEST_CASE(test_segmented_row), TEST_CASE(test_prefill_long_context))
