/* Tests for engine/sampler: greedy and tie rules, seeding, empirical frequencies against
 * softmax(l / T), each filter's kept set, the repetition penalty, NaN/inf logits, parameter
 * validation, and an exact token-for-token match with a simple full-sort reference. */
#include "harness.h"

#include "engine/error.h"
#include "engine/sampler.h"

#include <math.h>
#include <stdint.h>

static hone_sampler *make(hone_sampler_params p, int32_t n_vocab)
{
    hone_sampler *s = NULL;
    int rc = hone_sampler_new(&s, &p, n_vocab);
    CHECK_MSG(rc == 0 && s, "hone_sampler_new: %d %s", rc, hone_error_last());
    return s;
}

/* Deterministic pseudo-random logits in [-scale, scale). */
static void fill_logits(float *l, int32_t n, uint64_t seed, float scale)
{
    uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (int32_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        l[i] = scale * (float)((double)(x >> 11) * 0x1.0p-53 * 2.0 - 1.0);
    }
}

/* Draws n_draws tokens and counts them into counts[n_vocab]; returns draws out of range. */
static int count_draws(hone_sampler *s, const float *logits, int32_t n_vocab, int n_draws, int *counts)
{
    int bad = 0;
    memset(counts, 0, sizeof(int) * (size_t)n_vocab);
    for (int i = 0; i < n_draws; i++) {
        int32_t t = hone_sampler_sample(s, logits);
        if (t < 0 || t >= n_vocab) bad++;
        else counts[t]++;
    }
    return bad;
}

/* Checks empirical frequencies against probabilities within 5 binomial sigmas + 1e-3. */
static void check_freqs(const int *counts, const double *probs, int32_t n, int n_draws)
{
    for (int32_t i = 0; i < n; i++) {
        double f = (double)counts[i] / n_draws, p = probs[i];
        double tol = 5.0 * sqrt(p * (1.0 - p) / n_draws) + 1e-3;
        CHECK_MSG(fabs(f - p) <= tol, "token %d: freq %.4f vs p %.4f (tol %.4f)", (int)i, f, p, tol);
    }
}

static void softmax(const float *l, int32_t n, double t, double *out)
{
    double mx = -INFINITY, z = 0.0;
    for (int32_t i = 0; i < n; i++) mx = fmax(mx, l[i]);
    for (int32_t i = 0; i < n; i++) z += out[i] = exp((l[i] - mx) / t);
    for (int32_t i = 0; i < n; i++) out[i] /= z;
}

static void test_defaults(void)
{
    hone_sampler_params p = HONE_SAMPLER_PARAMS_INIT;
    CHECK(p.temperature == 1.0f);
    CHECK_EQ_INT(p.top_k, 0);
    CHECK(p.top_p == 1.0f);
    CHECK(p.min_p == 0.0f);
    CHECK(p.repeat_penalty == 1.0f);
    CHECK_EQ_INT(p.repeat_last_n, 64);
    CHECK_EQ_INT(p.seed, 0);
}

static void test_greedy(void)
{
    hone_sampler_params p = HONE_SAMPLER_PARAMS_INIT;
    p.temperature = 0.0f;
    hone_sampler *s = make(p, 6);
    float l[6] = {0.1f, 2.0f, -3.0f, 5.0f, 4.9f, 5.0f};
    float copy[6];
    memcpy(copy, l, sizeof l);
    CHECK_EQ_INT(hone_sampler_sample(s, l), 3); /* tie 3 vs 5: lowest id */
    CHECK(memcmp(copy, l, sizeof l) == 0);       /* logits untouched */
    float flat[6] = {1, 1, 1, 1, 1, 1};
    CHECK_EQ_INT(hone_sampler_sample(s, flat), 0);
    hone_sampler_free(s);

    p.temperature = -1.0f; /* negative temperature is documented as greedy */
    s = make(p, 6);
    CHECK_EQ_INT(hone_sampler_sample(s, l), 3);
    hone_sampler_free(s);
}

static void test_seed_determinism(void)
{
    enum { N = 1000, DRAWS = 64 };
    static float l[N];
    fill_logits(l, N, 7, 3.0f);
    hone_sampler_params p = HONE_SAMPLER_PARAMS_INIT;
    p.seed = 1234;
    hone_sampler *a = make(p, N), *b = make(p, N);
    p.seed = 1235;
    hone_sampler *c = make(p, N);
    int32_t sa[DRAWS], same_ab = 1, same_ac = 1;
    for (int i = 0; i < DRAWS; i++) {
        sa[i] = hone_sampler_sample(a, l);
        int32_t tb = hone_sampler_sample(b, l), tc = hone_sampler_sample(c, l);
        same_ab &= sa[i] == tb;
        same_ac &= sa[i] == tc;
    }
    CHECK(same_ab);
    CHECK(!same_ac);
    hone_sampler_reset(a, 1234); /* reset replays the sequence */
    int replay = 1;
    for (int i = 0; i < DRAWS; i++) replay &= hone_sampler_sample(a, l) == sa[i];
    CHECK(replay);
    /* Known answer for seed 1234 (the same on every machine: xoshiro256** + splitmix64,
     * inverse CDF in double) so that a change of PRNG or draw rule is noticed. */
    static const int32_t known[8] = {43, 837, 701, 856, 104, 869, 473, 212};
    for (int i = 0; i < 8; i++) CHECK_EQ_INT(sa[i], known[i]);
    hone_sampler_free(a);
    hone_sampler_free(b);
    hone_sampler_free(c);
}

static void test_frequencies(void)
{
    enum { N = 8, DRAWS = 20000 };
    float l[N] = {1.0f, 2.0f, 0.5f, 3.0f, -1.0f, 0.0f, 2.5f, 1.5f};
    double temps[3] = {1.0, 0.7, 2.0};
    int counts[N];
    double probs[N];
    for (int t = 0; t < 3; t++) {
        hone_sampler_params p = HONE_SAMPLER_PARAMS_INIT;
        p.temperature = (float)temps[t];
        p.seed = 42 + (uint64_t)t;
        hone_sampler *s = make(p, N);
        CHECK_EQ_INT(count_draws(s, l, N, DRAWS, counts), 0);
        softmax(l, N, (double)p.temperature, probs);
        check_freqs(counts, probs, N, DRAWS);
        hone_sampler_free(s);
    }
}

static void test_top_k(void)
{
    enum { N = 49152 };
    static float l[N];
    fill_logits(l, N, 3, 4.0f);
    l[100] = l[200] = 9.0f; /* a tie at the top: top_k = 1 must pick 100, as greedy does */
    hone_sampler_params p = HONE_SAMPLER_PARAMS_INIT;
    p.top_k = 1;
    hone_sampler *s = make(p, N);
    int all = 1;
    for (int i = 0; i < 50; i++) all &= hone_sampler_sample(s, l) == 100;
    CHECK(all);
    hone_sampler_free(s);

    /* top_k = 3 on a small vocab: only the 3 largest, with renormalised softmax frequencies. */
    enum { M = 8, DRAWS = 20000 };
    float m[M] = {1.0f, 2.0f, 0.5f, 3.0f, -1.0f, 0.0f, 2.5f, 1.5f};
    p.top_k = 3;
    p.temperature = 1.3f;
    s = make(p, M);
    int counts[M];
    CHECK_EQ_INT(count_draws(s, m, M, DRAWS, counts), 0);
    float kept[3] = {m[3], m[6], m[1]};
    double pk[3], probs[M] = {0};
    softmax(kept, 3, 1.3, pk);
    probs[3] = pk[0];
    probs[6] = pk[1];
    probs[1] = pk[2];
    check_freqs(counts, probs, M, DRAWS);
    hone_sampler_free(s);
}

/* Logits log(p) for given probabilities, placed at scattered ids of a vocab of n. */
static void logits_from_probs(float *l, int32_t n, const double *probs, const int32_t *ids, int k)
{
    for (int32_t i = 0; i < n; i++) l[i] = -INFINITY;
    for (int i = 0; i < k; i++) l[ids[i]] = (float)log(probs[i]);
}

/* Samples many times and checks the set of drawn tokens is exactly ids[0, n_expect). */
static void check_kept_set(hone_sampler *s, const float *l, int32_t n, const int32_t *ids, int n_expect)
{
    static int counts[64];
    CHECK_EQ_INT(count_draws(s, l, n, 5000, counts), 0);
    for (int32_t i = 0; i < n; i++) {
        int expected = 0;
        for (int j = 0; j < n_expect; j++) expected |= ids[j] == i;
        if (expected) CHECK_MSG(counts[i] > 0, "token %d should be kept", (int)i);
        else CHECK_MSG(counts[i] == 0, "token %d should be dropped (drawn %d times)", (int)i, counts[i]);
    }
}

static void test_top_p(void)
{
    enum { N = 16 };
    double probs[5] = {0.5, 0.2, 0.15, 0.1, 0.05};
    static const int32_t ids[5] = {9, 2, 14, 0, 5};
    float l[N];
    logits_from_probs(l, N, probs, ids, 5);
    struct { float top_p; int n_keep; } cases[] = {
        {0.4f, 1}, {0.65f, 2}, {0.8f, 3}, {0.9f, 4}, {0.97f, 5}, {1.0f, 5},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        hone_sampler_params p = HONE_SAMPLER_PARAMS_INIT;
        p.top_p = cases[c].top_p;
        p.seed = c;
        hone_sampler *s = make(p, N);
        check_kept_set(s, l, N, ids, cases[c].n_keep);
        hone_sampler_free(s);
    }
}

static void test_min_p(void)
{
    enum { N = 16 };
    double probs[5] = {0.4, 0.3, 0.2, 0.06, 0.04};
    static const int32_t ids[5] = {3, 11, 7, 1, 15};
    float l[N];
    logits_from_probs(l, N, probs, ids, 5);
    struct { float min_p; int n_keep; } cases[] = {
        {0.9f, 1}, {0.5f, 2}, {0.2f, 3}, {0.12f, 4}, {0.05f, 5}, {1.0f, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        hone_sampler_params p = HONE_SAMPLER_PARAMS_INIT;
        p.min_p = cases[c].min_p;
        p.seed = 100 + c;
        hone_sampler *s = make(p, N);
        check_kept_set(s, l, N, ids, cases[c].n_keep);
        hone_sampler_free(s);
    }
}

static void test_repeat_penalty(void)
{
    hone_sampler_params p = HONE_SAMPLER_PARAMS_INIT;
    p.temperature = 0.0f;
    p.repeat_penalty = 1.5f;
    p.repeat_last_n = 2;
    hone_sampler *s = make(p, 4);
    float pos[4] = {2.0f, 1.3f, -0.5f, -0.6f};
    CHECK_EQ_INT(hone_sampler_sample(s, pos), 0);
    hone_sampler_accept(s, 0);
    hone_sampler_accept(s, 0); /* repeated: still penalised once (2 / 1.5 = 1.33 > 1.3) */
    CHECK_EQ_INT(hone_sampler_sample(s, pos), 0);
    float pos2[4] = {2.0f, 1.4f, -0.5f, -0.6f};
    CHECK_EQ_INT(hone_sampler_sample(s, pos2), 1); /* 1.33 < 1.4 */
    hone_sampler_accept(s, 3);
    hone_sampler_accept(s, 3); /* 0 leaves the window of 2 */
    CHECK_EQ_INT(hone_sampler_sample(s, pos2), 0);

    float neg[4] = {-1.0f, -1.2f, -5.0f, -6.0f}, copy[4];
    memcpy(copy, neg, sizeof neg);
    hone_sampler_reset(s, 0);
    CHECK_EQ_INT(hone_sampler_sample(s, neg), 0);
    hone_sampler_accept(s, 0); /* negative logits are multiplied: -1.5 < -1.2 */
    CHECK_EQ_INT(hone_sampler_sample(s, neg), 1);
    hone_sampler_accept(s, 99); /* out of range: ignored */
    hone_sampler_accept(s, -1);
    CHECK_EQ_INT(hone_sampler_sample(s, neg), 1);
    CHECK(memcmp(copy, neg, sizeof neg) == 0); /* the penalty works on scratch, not on logits */
    hone_sampler_free(s);

    p.repeat_last_n = 0; /* off */
    s = make(p, 4);
    hone_sampler_accept(s, 0);
    CHECK_EQ_INT(hone_sampler_sample(s, pos2), 0);
    hone_sampler_free(s);
}

static void test_nan_inf(void)
{
    enum { N = 8 };
    float l[N] = {1.0f, NAN, 0.5f, -INFINITY, NAN, 0.7f, -INFINITY, 0.2f};
    l[1] = NAN;
    hone_sampler_params p = HONE_SAMPLER_PARAMS_INIT;
    p.temperature = 0.0f;
    hone_sampler *g = make(p, N);
    CHECK_EQ_INT(hone_sampler_sample(g, l), 0);
    float nan_first[N] = {NAN, NAN, 0.5f, -1.0f, 3.0f, NAN, -INFINITY, 0.0f};
    CHECK_EQ_INT(hone_sampler_sample(g, nan_first), 4);

    p.temperature = 1.0f;
    p.top_p = 0.99f;
    hone_sampler *s = make(p, N);
    int counts[N];
    CHECK_EQ_INT(count_draws(s, l, N, 4000, counts), 0);
    CHECK(counts[1] == 0 && counts[3] == 0 && counts[4] == 0 && counts[6] == 0);
    CHECK(counts[0] > 0 && counts[2] > 0 && counts[5] > 0 && counts[7] > 0);

    /* All -inf: the lowest id whose logit is -inf (here 0; NaN ids skipped). */
    float all_neg[N], all_nan[N];
    for (int i = 0; i < N; i++) all_neg[i] = -INFINITY, all_nan[i] = NAN;
    CHECK_EQ_INT(hone_sampler_sample(s, all_neg), 0);
    CHECK_EQ_INT(hone_sampler_sample(g, all_neg), 0);
    all_neg[0] = NAN;
    CHECK_EQ_INT(hone_sampler_sample(s, all_neg), 1);
    /* All NaN: -1 with a message. */
    CHECK_EQ_INT(hone_sampler_sample(s, all_nan), -1);
    CHECK_STR_CONTAINS(hone_error_last(), "NaN");
    CHECK_EQ_INT(hone_sampler_sample(g, all_nan), -1);

    /* +inf: greedy takes the lowest +inf id; sampling is uniform among the +inf ids. */
    float pinf[N] = {0.0f, INFINITY, 50.0f, INFINITY, NAN, -INFINITY, 1.0f, 2.0f};
    CHECK_EQ_INT(hone_sampler_sample(g, pinf), 1);
    CHECK_EQ_INT(count_draws(s, pinf, N, 4000, counts), 0);
    CHECK(counts[1] + counts[3] == 4000);
    CHECK(counts[1] > 1700 && counts[3] > 1700);
    hone_sampler_free(g);
    hone_sampler_free(s);
}

static void test_invalid_params(void)
{
    struct { const char *field; hone_sampler_params p; int32_t n_vocab; int rc; } cases[] = {
        {"temperature", {NAN, 0, 1.0f, 0.0f, 1.0f, 64, 0, 0.0f, 0.0f, NULL, NULL, 0}, 10, HONE_EINVAL},
        {"temperature", {INFINITY, 0, 1.0f, 0.0f, 1.0f, 64, 0, 0.0f, 0.0f, NULL, NULL, 0}, 10, HONE_EINVAL},
        {"top_k", {1.0f, -1, 1.0f, 0.0f, 1.0f, 64, 0, 0.0f, 0.0f, NULL, NULL, 0}, 10, HONE_EINVAL},
        {"top_p", {1.0f, 0, 0.0f, 0.0f, 1.0f, 64, 0, 0.0f, 0.0f, NULL, NULL, 0}, 10, HONE_EINVAL},
        {"top_p", {1.0f, 0, 1.5f, 0.0f, 1.0f, 64, 0, 0.0f, 0.0f, NULL, NULL, 0}, 10, HONE_EINVAL},
        {"top_p", {1.0f, 0, NAN, 0.0f, 1.0f, 64, 0, 0.0f, 0.0f, NULL, NULL, 0}, 10, HONE_EINVAL},
        {"min_p", {1.0f, 0, 1.0f, -0.1f, 1.0f, 64, 0, 0.0f, 0.0f, NULL, NULL, 0}, 10, HONE_EINVAL},
        {"min_p", {1.0f, 0, 1.0f, 1.1f, 1.0f, 64, 0, 0.0f, 0.0f, NULL, NULL, 0}, 10, HONE_EINVAL},
        {"min_p", {1.0f, 0, 1.0f, NAN, 1.0f, 64, 0, 0.0f, 0.0f, NULL, NULL, 0}, 10, HONE_EINVAL},
        {"repeat_penalty", {1.0f, 0, 1.0f, 0.0f, 0.0f, 64, 0, 0.0f, 0.0f, NULL, NULL, 0}, 10, HONE_EINVAL},
        {"repeat_penalty", {1.0f, 0, 1.0f, 0.0f, -1.0f, 64, 0, 0.0f, 0.0f, NULL, NULL, 0}, 10, HONE_EINVAL},
        {"repeat_penalty", {1.0f, 0, 1.0f, 0.0f, NAN, 64, 0, 0.0f, 0.0f, NULL, NULL, 0}, 10, HONE_EINVAL},
        {"repeat_last_n", {1.0f, 0, 1.0f, 0.0f, 1.0f, -1, 0, 0.0f, 0.0f, NULL, NULL, 0}, 10, HONE_EINVAL},
        {"repeat_last_n", {1.0f, 0, 1.0f, 0.0f, 1.0f, (1 << 24) + 1, 0, 0.0f, 0.0f, NULL, NULL, 0}, 10, HONE_ERANGE},
        {"n_vocab", {1.0f, 0, 1.0f, 0.0f, 1.0f, 64, 0, 0.0f, 0.0f, NULL, NULL, 0}, 0, HONE_EINVAL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        hone_sampler *s = (hone_sampler *)&cases[c]; /* must be reset to NULL */
        int rc = hone_sampler_new(&s, &cases[c].p, cases[c].n_vocab);
        CHECK_EQ_INT(rc, cases[c].rc);
        CHECK(s == NULL);
        CHECK_STR_CONTAINS(hone_error_last(), cases[c].field);
    }
    hone_sampler_free(NULL);
}

/* ---- reference: the documented algorithm with a full sort, and the same PRNG ---- */

typedef struct { float l; int32_t id; } ref_cand;

static int ref_cmp(const void *pa, const void *pb)
{
    const ref_cand *a = pa, *b = pb;
    if (a->l != b->l) return a->l > b->l ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static uint64_t ref_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t ref_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static double ref_uniform(uint64_t s[4])
{
    uint64_t r = ref_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = ref_rotl(s[3], 45);
    return (double)(r >> 11) * 0x1.0p-53;
}

/* Finite logits only; penalised[] already has the penalty applied. */
static int32_t ref_sample(const float *pen, int32_t n, const hone_sampler_params *p, uint64_t rng[4],
                          ref_cand *sorted)
{
    for (int32_t i = 0; i < n; i++) sorted[i] = (ref_cand){pen[i], i};
    qsort(sorted, (size_t)n, sizeof *sorted, ref_cmp);
    double lmax = sorted[0].l;
    int32_t m = n;
    if (p->top_k > 0 && p->top_k < m) m = p->top_k;
    if (p->top_p < 1.0f) {
        double tot = 0.0, cum = 0.0;
        for (int32_t i = 0; i < m; i++) tot += exp(sorted[i].l - lmax);
        int32_t k = m;
        for (int32_t i = 0; i < m; i++) {
            cum += exp(sorted[i].l - lmax);
            if (cum >= p->top_p * tot) { k = i + 1; break; }
        }
        m = k;
    }
    if (p->min_p > 0.0f) {
        int32_t k = 0;
        while (k < m && exp(sorted[k].l - lmax) >= (double)p->min_p) k++;
        m = k;
    }
    ref_cand cut = sorted[m - 1];
    double total = 0.0, inv_t = 1.0 / p->temperature;
    for (int32_t i = 0; i < n; i++)
        if (pen[i] > cut.l || (pen[i] == cut.l && i <= cut.id)) total += exp((pen[i] - lmax) * inv_t);
    double target = ref_uniform(rng) * total, cum = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < n; i++) {
        if (!(pen[i] > cut.l || (pen[i] == cut.l && i <= cut.id))) continue;
        double w = exp((pen[i] - lmax) * inv_t);
        if (w <= 0.0) continue;
        cum += w;
        last = i;
        if (cum > target) return i;
    }
    return last;
}

static void test_matches_reference(void)
{
    enum { N = 49152, DRAWS = 25 };
    static float l[N], pen[N];
    static ref_cand sorted[N];
    struct { float t; int32_t k; float top_p; float min_p; float rp; } cases[] = {
        {1.0f, 0, 1.0f, 0.0f, 1.0f},   {0.8f, 40, 0.95f, 0.05f, 1.1f}, {1.0f, 0, 0.9f, 0.0f, 1.0f},
        {0.5f, 0, 0.5f, 0.0f, 1.3f},   {1.5f, 0, 1.0f, 0.1f, 1.0f},    {1.0f, 1000, 0.99f, 0.0f, 1.0f},
        {0.7f, 5, 1.0f, 0.0f, 0.8f},   {2.0f, 0, 0.999f, 0.001f, 1.0f}, {1.0f, 5000, 0.97f, 0.0f, 1.0f},
        {1.0f, 20000, 1.0f, 0.0f, 1.0f}, {0.9f, 0, 1.0f, 0.002f, 1.2f},
    };
    /* These cover both top-k paths (heap for k <= 1024, quickselect above), the top-p
     * bucket prefilter (more than 4096 candidates), the min-p floor, and both draw paths
     * (few survivors sorted by id, many found by a scan). */
    fill_logits(l, N, 11, 8.0f);
    for (int i = 0; i < 300; i++) l[(i * 7919) % N] = 9.0f + (float)(i % 5) * 0.25f; /* ties at the top */
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        hone_sampler_params p = HONE_SAMPLER_PARAMS_INIT;
        p.temperature = cases[c].t;
        p.top_k = cases[c].k;
        p.top_p = cases[c].top_p;
        p.min_p = cases[c].min_p;
        p.repeat_penalty = cases[c].rp;
        p.repeat_last_n = 8;
        p.seed = 9000 + c;
        hone_sampler *s = make(p, N);
        uint64_t rng[4], x = p.seed;
        for (int i = 0; i < 4; i++) rng[i] = ref_splitmix(&x);
        int32_t hist[8];
        int n_hist = 0, mismatches = 0;
        for (int d = 0; d < DRAWS; d++) {
            memcpy(pen, l, sizeof l);
            static uint8_t seen[N];
            for (int j = 0; j < n_hist; j++) {
                int32_t t = hist[j];
                if (seen[t]) continue;
                seen[t] = 1;
                pen[t] = pen[t] > 0.0f ? pen[t] / p.repeat_penalty : pen[t] * p.repeat_penalty;
            }
            for (int j = 0; j < n_hist; j++) seen[hist[j]] = 0;
            int32_t want = ref_sample(pen, N, &p, rng, sorted);
            int32_t got = hone_sampler_sample(s, l);
            mismatches += want != got;
            hone_sampler_accept(s, got);
            if (n_hist < 8) hist[n_hist++] = got;
            else { memmove(hist, hist + 1, 7 * sizeof *hist); hist[7] = got; }
        }
        CHECK_MSG(mismatches == 0, "case %zu: %d of %d draws differ from the reference", c, mismatches, DRAWS);
        hone_sampler_free(s);
    }
}


/* OpenAI's penalties on accepted-token counts: l[j] -= c[j] * frequency + (c[j] > 0) * presence. */
static void test_openai_penalties(void)
{
    float l[8] = {0, 0, 0, 1.0f, 0, 0, 0, 0};
    hone_sampler_params p = HONE_SAMPLER_PARAMS_INIT;
    p.temperature = 0.0f;
    p.presence_penalty = 2.0f; /* 1 - 2 < 0: token 3 loses to token 0 after one use */
    hone_sampler *s = make(p, 8);
    CHECK_EQ_INT(hone_sampler_sample(s, l), 3);
    hone_sampler_accept(s, 3);
    CHECK_EQ_INT(hone_sampler_sample(s, l), 0);
    hone_sampler_reset(s, 0); /* forgets the counts */
    CHECK_EQ_INT(hone_sampler_sample(s, l), 3);
    hone_sampler_free(s);

    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.4f; /* 1 - 0.4 c: still the best at c = 2 (0.2), not at c = 3 (-0.2) */
    s = make(p, 8);
    for (int c = 0; c < 2; c++) {
        hone_sampler_accept(s, 3);
        CHECK_EQ_INT(hone_sampler_sample(s, l), 3);
    }
    hone_sampler_accept(s, 3);
    CHECK_EQ_INT(hone_sampler_sample(s, l), 0);
    hone_sampler_free(s);

    p.frequency_penalty = -0.5f; /* a negative penalty favours repeats */
    float l2[4] = {1.0f, 0.8f, 0, 0};
    s = make(p, 4);
    CHECK_EQ_INT(hone_sampler_sample(s, l2), 0);
    hone_sampler_accept(s, 1);
    CHECK_EQ_INT(hone_sampler_sample(s, l2), 1); /* 0.8 + 0.5 > 1 */
    hone_sampler_free(s);

    /* at temperature 1 the draw follows softmax of the penalised logits: token 3 (logit ln 3,
     * used once, presence ln 3) ends at 0, the same weight as every other token */
    float flat[4] = {0, 0, 0, (float)log(3.0)};
    hone_sampler_params q = HONE_SAMPLER_PARAMS_INIT;
    q.presence_penalty = (float)log(3.0);
    s = make(q, 4);
    hone_sampler_accept(s, 3);
    int counts[4];
    CHECK_EQ_INT(count_draws(s, flat, 4, 40000, counts), 0);
    for (int i = 0; i < 4; i++) CHECK_NEAR(counts[i] / 40000.0, 0.25, 0.015);
    hone_sampler_free(s);

    q.presence_penalty = 2.5f;
    hone_sampler *bad = NULL;
    CHECK_EQ_INT(hone_sampler_new(&bad, &q, 4), HONE_EINVAL);
    CHECK(bad == NULL);
}

/* logit_bias is added to the logits first: +100 forces, -100 bans, small values shift. */
static void test_logit_bias(void)
{
    float l[6] = {0, 0, 0, 0, 0, 2.0f};
    int32_t ids[2] = {1, 5};
    float vals[2] = {3.0f, -100.0f};
    hone_sampler_params p = HONE_SAMPLER_PARAMS_INIT;
    p.temperature = 0.0f;
    p.bias_ids = ids;
    p.bias_vals = vals;
    p.n_bias = 2;
    hone_sampler *s = make(p, 6);
    ids[0] = 4; /* the sampler keeps its own copy */
    CHECK_EQ_INT(hone_sampler_sample(s, l), 1);
    hone_sampler_free(s);
    ids[0] = 1;
    p.temperature = 1.0f;
    s = make(p, 6);
    int counts[6];
    CHECK_EQ_INT(count_draws(s, l, 6, 20000, counts), 0);
    CHECK_EQ_INT(counts[5], 0); /* banned: e^-98 against e^3 */
    double w1 = exp(3.0), total = w1 + 4.0;
    CHECK_NEAR(counts[1] / 20000.0, w1 / total, 0.015);
    hone_sampler_free(s);
    int32_t out_of_range[1] = {6};
    p.bias_ids = out_of_range;
    p.n_bias = 1;
    hone_sampler *bad = NULL;
    CHECK_EQ_INT(hone_sampler_new(&bad, &p, 6), HONE_EINVAL);
}

/* hone_sampler_logprobs: log softmax of the raw logits, and the top k in order. */
static void test_logprobs(void)
{
    float two[2] = {0.0f, (float)log(3.0)};
    hone_token_logprob e;
    hone_sampler_logprobs(two, 2, 0, 2, &e);
    CHECK_NEAR(e.logprob, log(0.25), 1e-6);
    CHECK_EQ_INT(e.token, 0);
    CHECK_EQ_INT(e.n_top, 2);
    CHECK_EQ_INT(e.top_ids[0], 1);
    CHECK_NEAR(e.top_lps[0], log(0.75), 1e-6);
    CHECK_EQ_INT(e.top_ids[1], 0);

    enum { N = 1000 };
    static float l[N];
    fill_logits(l, N, 11, 8.0f);
    l[17] = NAN;
    l[40] = l[41] = 9.0f; /* a tie: the lower id first */
    double mx = -INFINITY, sum = 0.0;
    for (int i = 0; i < N; i++) if (!isnan(l[i]) && l[i] > mx) mx = l[i];
    for (int i = 0; i < N; i++) if (!isnan(l[i])) sum += exp((double)l[i] - mx);
    double logz = mx + log(sum);
    hone_sampler_logprobs(l, N, 123, 50, &e); /* k is clamped to 20 */
    CHECK_EQ_INT(e.n_top, HONE_SAMPLER_TOP_LOGPROBS_MAX);
    CHECK_NEAR(e.logprob, (double)l[123] - logz, 1e-5);
    CHECK_EQ_INT(e.top_ids[0], 40);
    CHECK_EQ_INT(e.top_ids[1], 41);
    for (int k = 1; k < e.n_top; k++) CHECK(e.top_lps[k] <= e.top_lps[k - 1]);
    for (int k = 0; k < e.n_top; k++) CHECK_NEAR(e.top_lps[k], (double)l[e.top_ids[k]] - logz, 1e-5);
    int better = 0; /* nothing outside the top 20 beats its last entry */
    for (int i = 0; i < N; i++) better += !isnan(l[i]) && l[i] > l[e.top_ids[e.n_top - 1]];
    CHECK_EQ_INT(better, e.n_top - 1);
    hone_sampler_logprobs(l, N, 17, 0, &e);
    CHECK_EQ_INT(e.n_top, 0);
    CHECK(isinf(e.logprob) && e.logprob < 0);
}

TEST_MAIN(TEST_CASE(test_defaults), TEST_CASE(test_greedy), TEST_CASE(test_seed_determinism),
          TEST_CASE(test_frequencies), TEST_CASE(test_top_k), TEST_CASE(test_top_p), TEST_CASE(test_min_p),
          TEST_CASE(test_repeat_penalty), TEST_CASE(test_nan_inf), TEST_CASE(test_invalid_params),
          TEST_CASE(test_matches_reference), TEST_CASE(test_openai_penalties), TEST_CASE(test_logit_bias),
          TEST_CASE(test_logprobs))
