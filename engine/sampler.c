/* Token sampler: repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw.
 * Each filter keeps a prefix of the candidates in one total order (logit descending, id
 * ascending), so the surviving set is "every token at or before a cutoff" and is found by
 * partial selection (quickselect), never a full sort of the vocabulary. */
#include "sampler.h"

#include "error.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLER_BUCKETS 1024 /* bins of the top-p prefilter */

/* One candidate token: its (penalised) logit and, once computed, a weight exp(l - l_max). */
typedef struct {
    float logit;
    int32_t id;
    double w;
} cand;

struct hone_sampler {
    hone_sampler_params p;
    int32_t n_vocab;
    float *pen;       /* (n_vocab) penalised logits of the current call; NaN -> -inf */
    uint8_t *seen;    /* (n_vocab) all zero between calls; dedupes the penalty history */
    cand *work;       /* (n_vocab) candidates for the filters, then the draw list */
    int32_t *hist;    /* (repeat_last_n) ring of accepted tokens */
    int32_t hist_len; /* how many of hist are valid */
    int32_t hist_head;/* next slot to write */
    int32_t *counts;  /* (n_vocab) times each token was accepted (presence/frequency penalty) */
    int32_t *seen_ids;/* (n_vocab) the distinct accepted tokens, n_seen of them */
    int32_t n_seen;
    int32_t *bias_ids;/* (n_bias) logit_bias, owned copies */
    float *bias_vals;
    uint64_t rng[4];  /* xoshiro256** state */
    uint64_t seed;    /* the seed of the last reset: the positional draws' key */
    double mass[SAMPLER_BUCKETS]; /* top-p prefilter histogram */
};

/* ---- PRNG: splitmix64 seeds xoshiro256** (Blackman & Vigna, public domain) ---- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4])
{
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform double in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t s[4]) { return (double)(xoshiro_next(s) >> 11) * 0x1.0p-53; }

static void rng_seed(uint64_t s[4], uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s[i] = splitmix64(&x);
}

/* ---- selection in the total order (logit desc, id asc) ---- */

static int before(const cand *a, const cand *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static void swap_cand(cand *a, cand *b)
{
    cand t = *a;
    *a = *b;
    *b = t;
}

static void insertion_sort(cand *a, int32_t lo, int32_t hi)
{
    for (int32_t i = lo + 1; i < hi; i++) {
        cand x = a[i];
        int32_t j = i;
        while (j > lo && before(&x, &a[j - 1])) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
}

/* Partitions a[lo, hi) (hi - lo >= 3) around a median-of-three pivot; returns the pivot's
 * final index p: a[lo, p) come before it, a(p, hi) after it. Deterministic. */
static int32_t partition(cand *a, int32_t lo, int32_t hi)
{
    int32_t mid = lo + (hi - lo) / 2, last = hi - 1;
    if (before(&a[mid], &a[lo])) swap_cand(&a[mid], &a[lo]);
    if (before(&a[last], &a[lo])) swap_cand(&a[last], &a[lo]);
    if (before(&a[last], &a[mid])) swap_cand(&a[last], &a[mid]);
    swap_cand(&a[mid], &a[last]); /* the median is the pivot, parked at the end */
    cand pivot = a[last];
    int32_t i = lo;
    for (int32_t j = lo; j < last; j++)
        if (before(&a[j], &pivot)) swap_cand(&a[i++], &a[j]);
    swap_cand(&a[i], &a[last]);
    return i;
}

/* Reorders a[0, n) so that a[0, k) are the k first in the order (in no particular order). */
static void select_top_k(cand *a, int32_t n, int32_t k)
{
    int32_t lo = 0, hi = n;
    for (;;) {
        if (k <= lo || k >= hi) return;
        if (hi - lo <= 16) {
            insertion_sort(a, lo, hi);
            return;
        }
        int32_t p = partition(a, lo, hi);
        if (p == k || p + 1 == k) return;
        if (p < k) lo = p + 1;
        else hi = p;
    }
}

/* Top-p: returns the smallest m such that the first m candidates in the order carry
 * weight >= target, and reorders a so that those are a[0, m) (all of a if none does).
 * Expected O(n): each partition step discards the side that cannot hold the cutoff. */
static int32_t select_top_p(cand *a, int32_t n, double target)
{
    double above = 0.0; /* weight of a[0, lo), all of which are kept */
    int32_t lo = 0, hi = n; /* invariant: lo < m <= hi */
    while (hi - lo > 16) {
        int32_t p = partition(a, lo, hi);
        double mb = 0.0;
        for (int32_t i = lo; i < p; i++) mb += a[i].w;
        if (above + mb >= target) {
            hi = p;
        } else if (above + mb + a[p].w >= target) {
            return p + 1;
        } else {
            above += mb + a[p].w;
            lo = p + 1;
        }
    }
    insertion_sort(a, lo, hi);
    for (int32_t i = lo; i < hi; i++) {
        above += a[i].w;
        if (above >= target) return i + 1;
    }
    return hi; /* rounding kept the sum a hair below target: keep the whole range */
}

/* Top-p prefilter for large sets: buckets the logits of a[0, n) by value into
 * SAMPLER_BUCKETS bins below lmax, finds the bin where the mass crosses target, and moves
 * every candidate of that bin, the bin after it (a margin for rounding) and all higher
 * bins to the front. Returns how many were moved; a[0, result) hold the top-p prefix. */
static int32_t prefilter_top_p(cand *a, int32_t n, double target, double *mass)
{
    float lmin = a[0].logit, lmax = a[0].logit;
    for (int32_t i = 1; i < n; i++) {
        lmin = a[i].logit < lmin ? a[i].logit : lmin;
        lmax = a[i].logit > lmax ? a[i].logit : lmax;
    }
    if (!(lmax > lmin)) return n;
    double scale = (SAMPLER_BUCKETS - 1) / ((double)lmax - (double)lmin);
    memset(mass, 0, SAMPLER_BUCKETS * sizeof *mass);
    for (int32_t i = 0; i < n; i++) mass[(int)(((double)lmax - a[i].logit) * scale)] += a[i].w;
    int b = 0;
    double cum = 0.0;
    for (; b < SAMPLER_BUCKETS; b++) {
        cum += mass[b];
        if (cum >= target) break;
    }
    if (b >= SAMPLER_BUCKETS - 2) return n;
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++)
        if ((int)(((double)lmax - a[i].logit) * scale) <= b + 1) swap_cand(&a[k++], &a[i]);
    return k;
}

/* Sifts a[0] down the heap a[0, k) whose root is the candidate that comes last. */
static void heap_sift_down(cand *a, int32_t k)
{
    int32_t c = 0;
    for (;;) {
        int32_t l = 2 * c + 1, r = l + 1, worst = c;
        if (l < k && before(&a[worst], &a[l])) worst = l;
        if (r < k && before(&a[worst], &a[r])) worst = r;
        if (worst == c) return;
        swap_cand(&a[c], &a[worst]);
        c = worst;
    }
}

/* Top-k straight from the logits for small k: a bounded heap in out[0, k) whose root is
 * the candidate that comes last, so one comparison with the root rejects most tokens.
 * Skips logits below floor (and -inf). Returns how many it kept (< k if too few pass). */
static int32_t top_k_from_logits(const float *pen, int32_t n, int32_t k, double floor, cand *out)
{
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        float l = pen[i];
        if (l == -INFINITY || (double)l < floor) continue;
        cand x = {l, i, 0.0};
        if (m < k) { /* sift up */
            int32_t c = m++;
            out[c] = x;
            while (c > 0 && before(&out[(c - 1) / 2], &out[c])) {
                swap_cand(&out[(c - 1) / 2], &out[c]);
                c = (c - 1) / 2;
            }
        } else if (l >= out[0].logit && before(&x, &out[0])) {
            out[0] = x;
            heap_sift_down(out, k);
        }
    }
    return m;
}

static int cmp_id(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    return (a->id > b->id) - (a->id < b->id);
}

/* ---- OpenAI's terms: logit_bias, presence and frequency penalties ---- */

/* Validates and copies params' OpenAI terms into s (counts are kept only when a penalty is
 * on). The copies make the caller's bias arrays free to go after hone_sampler_new. */
static int openai_terms_init(hone_sampler *s, const hone_sampler_params *p)
{
    static const char *const names[2] = {"presence_penalty", "frequency_penalty"};
    const float vals[2] = {p->presence_penalty, p->frequency_penalty};
    for (int i = 0; i < 2; i++)
        if (!(vals[i] >= -2.0f && vals[i] <= 2.0f))
            return hone_error_set(HONE_EINVAL, "sampler: %s %g must be in [-2, 2] (0 = off)", names[i],
                                  (double)vals[i]);
    if (p->n_bias < 0 || (p->n_bias > 0 && (!p->bias_ids || !p->bias_vals)))
        return hone_error_set(HONE_EINVAL, "sampler: logit_bias needs ids and values");
    for (int32_t j = 0; j < p->n_bias; j++) {
        if (p->bias_ids[j] < 0 || p->bias_ids[j] >= s->n_vocab)
            return hone_error_set(HONE_EINVAL, "sampler: logit_bias token %d outside [0, %d)",
                                  (int)p->bias_ids[j], (int)s->n_vocab);
        if (!isfinite(p->bias_vals[j]))
            return hone_error_set(HONE_EINVAL, "sampler: logit_bias of token %d must be finite",
                                  (int)p->bias_ids[j]);
    }
    if (p->n_bias) {
        s->bias_ids = malloc((size_t)p->n_bias * sizeof *s->bias_ids);
        s->bias_vals = malloc((size_t)p->n_bias * sizeof *s->bias_vals);
        if (!s->bias_ids || !s->bias_vals) return hone_error_set(HONE_ENOMEM, "sampler: out of memory");
        memcpy(s->bias_ids, p->bias_ids, (size_t)p->n_bias * sizeof *s->bias_ids);
        memcpy(s->bias_vals, p->bias_vals, (size_t)p->n_bias * sizeof *s->bias_vals);
    }
    s->p.bias_ids = s->bias_ids;
    s->p.bias_vals = s->bias_vals;
    if (p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f) {
        s->counts = calloc((size_t)s->n_vocab, sizeof *s->counts);
        s->seen_ids = malloc((size_t)s->n_vocab * sizeof *s->seen_ids);
        if (!s->counts || !s->seen_ids) return hone_error_set(HONE_ENOMEM, "sampler: out of memory");
    }
    return 0;
}

/* l[j] -= c[j] * frequency + (c[j] > 0) * presence over the accepted tokens (-inf stays). */
static void openai_penalties(const hone_sampler *s, float *pen)
{
    if (!s->counts) return;
    for (int32_t i = 0; i < s->n_seen; i++) {
        int32_t t = s->seen_ids[i];
        pen[t] -= (float)s->counts[t] * s->p.frequency_penalty + s->p.presence_penalty;
    }
}

/* ---- public API ---- */

int hone_sampler_new(hone_sampler **out, const hone_sampler_params *params, int32_t n_vocab)
{
    int rc = 0;
    hone_sampler *s = NULL;
    assert(out && params);
    *out = NULL;
    const hone_sampler_params *p = params;
    if (n_vocab <= 0) return hone_error_set(HONE_EINVAL, "sampler: n_vocab %d must be > 0", (int)n_vocab);
    if (!isfinite(p->temperature))
        return hone_error_set(HONE_EINVAL, "sampler: temperature %g must be finite (<= 0 means greedy)",
                              (double)p->temperature);
    if (p->top_k < 0) return hone_error_set(HONE_EINVAL, "sampler: top_k %d must be >= 0 (0 = off)", (int)p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return hone_error_set(HONE_EINVAL, "sampler: top_p %g must be in (0, 1] (1 = off)", (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return hone_error_set(HONE_EINVAL, "sampler: min_p %g must be in [0, 1] (0 = off)", (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f && isfinite(p->repeat_penalty)))
        return hone_error_set(HONE_EINVAL, "sampler: repeat_penalty %g must be finite and > 0 (1 = off)",
                              (double)p->repeat_penalty);
    if (p->repeat_last_n < 0)
        return hone_error_set(HONE_EINVAL, "sampler: repeat_last_n %d must be >= 0 (0 = off)", (int)p->repeat_last_n);
    if (p->repeat_last_n > (1 << 24))
        return hone_error_set(HONE_ERANGE, "sampler: repeat_last_n %d exceeds %d", (int)p->repeat_last_n, 1 << 24);

    s = calloc(1, sizeof *s);
    if (!s) {
        rc = hone_error_set(HONE_ENOMEM, "sampler: out of memory");
        goto done;
    }
    s->p = *p;
    s->n_vocab = n_vocab;
    s->pen = malloc((size_t)n_vocab * sizeof *s->pen);
    s->seen = calloc((size_t)n_vocab, 1);
    s->work = malloc((size_t)n_vocab * sizeof *s->work);
    s->hist = malloc(((size_t)p->repeat_last_n + 1) * sizeof *s->hist);
    if (s->pen && s->seen && s->work && s->hist && (rc = openai_terms_init(s, p)) != 0) goto done;
    if (!s->pen || !s->seen || !s->work || !s->hist) {
        rc = hone_error_set(HONE_ENOMEM, "sampler: out of memory for a vocabulary of %d", (int)n_vocab);
        goto done;
    }
    hone_sampler_reset(s, p->seed);
    *out = s;
    s = NULL;
done:
    hone_sampler_free(s);
    return rc;
}

void hone_sampler_free(hone_sampler *s)
{
    if (!s) return;
    free(s->pen);
    free(s->seen);
    free(s->work);
    free(s->hist);
    free(s->counts);
    free(s->seen_ids);
    free(s->bias_ids);
    free(s->bias_vals);
    free(s);
}

void hone_sampler_reset(hone_sampler *s, uint64_t seed)
{
    s->hist_len = 0;
    s->hist_head = 0;
    for (int32_t i = 0; s->counts && i < s->n_seen; i++) s->counts[s->seen_ids[i]] = 0;
    s->n_seen = 0;
    s->seed = seed;
    rng_seed(s->rng, seed);
}

void hone_sampler_accept(hone_sampler *s, int32_t token)
{
    int32_t cap = s->p.repeat_last_n;
    if (token < 0 || token >= s->n_vocab) return;
    if (s->counts && s->counts[token]++ == 0) s->seen_ids[s->n_seen++] = token;
    if (cap == 0) return;
    s->hist[s->hist_head] = token;
    s->hist_head = (s->hist_head + 1) % cap;
    if (s->hist_len < cap) s->hist_len++;
}

/* Fills s->pen with the penalised logits (NaN -> -inf) and returns their maximum; stores
 * in *n_valid how many are > -inf and in *n_posinf how many are +inf. The penalty hits
 * each recent token once. The scan keeps SAMPLER_LANES independent maxima and counts so
 * that it vectorises (a single running maximum is one long dependency chain). */
#define SAMPLER_LANES 16
static float build_penalised(hone_sampler *s, const float *logits, int32_t *n_valid, int32_t *n_posinf)
{
    int32_t n = s->n_vocab;
    float *pen = s->pen;
    for (int32_t i = 0; i < n; i++) pen[i] = isnan(logits[i]) ? -INFINITY : logits[i];
    for (int32_t j = 0; j < s->p.n_bias; j++) pen[s->bias_ids[j]] += s->bias_vals[j];
    float rp = s->p.repeat_penalty;
    if (rp != 1.0f) {
        for (int32_t j = 0; j < s->hist_len; j++) {
            int32_t t = s->hist[j];
            if (s->seen[t]) continue;
            s->seen[t] = 1;
            pen[t] = pen[t] > 0.0f ? pen[t] / rp : pen[t] * rp;
        }
        for (int32_t j = 0; j < s->hist_len; j++) s->seen[s->hist[j]] = 0;
    }
    openai_penalties(s, pen);
    float mx[SAMPLER_LANES];
    int32_t valid[SAMPLER_LANES] = {0}, posinf[SAMPLER_LANES] = {0};
    for (int j = 0; j < SAMPLER_LANES; j++) mx[j] = -INFINITY;
    int32_t i = 0;
    for (; i + SAMPLER_LANES <= n; i += SAMPLER_LANES) {
        for (int j = 0; j < SAMPLER_LANES; j++) {
            float v = pen[i + j];
            mx[j] = v > mx[j] ? v : mx[j];
            valid[j] += v > -INFINITY;
            posinf[j] += v == INFINITY;
        }
    }
    for (; i < n; i++) {
        mx[0] = pen[i] > mx[0] ? pen[i] : mx[0];
        valid[0] += pen[i] > -INFINITY;
        posinf[0] += pen[i] == INFINITY;
    }
    float lmax = mx[0];
    *n_valid = valid[0];
    *n_posinf = posinf[0];
    for (int j = 1; j < SAMPLER_LANES; j++) {
        lmax = mx[j] > lmax ? mx[j] : lmax;
        *n_valid += valid[j];
        *n_posinf += posinf[j];
    }
    return lmax;
}

/* The one sampling path. It ends in one of three ways: a draw with *u_given (or, when NULL,
 * with the PRNG stream's next uniform), or, when probs is set, writing the distribution that
 * draw would sample from into probs[n_vocab] (returning 0) without drawing. */
static int32_t sample_core(hone_sampler *s, const float *logits, const double *u_given, double *probs)
{
    assert(s && logits);
    const hone_sampler_params *p = &s->p;
    int32_t n = s->n_vocab, n_valid = 0, n_posinf = 0;
    float *pen = s->pen;
    float lmax = build_penalised(s, logits, &n_valid, &n_posinf);

    if (probs) memset(probs, 0, (size_t)n * sizeof *probs);
    if (n_valid == 0) { /* nothing possible: the lowest -inf id, or -1 if all NaN */
        for (int32_t i = 0; i < n; i++)
            if (!isnan(logits[i])) {
                if (probs) probs[i] = 1.0;
                return probs ? 0 : i;
            }
        hone_error_set(HONE_EINVAL, "sampler: all %d logits are NaN", (int)n);
        return -1;
    }

    if (p->temperature <= 0.0f) { /* greedy: the first maximum, so ties go to the lowest id */
        int32_t i = 0;
        while (pen[i] != lmax) i++; /* lmax is one of pen[], so this stops */
        if (probs) probs[i] = 1.0;
        return probs ? 0 : i;
    }

    if (n_posinf > 0) { /* +inf dominates everything: uniform among those tokens */
        for (int32_t i = 0; i < n; i++) pen[i] = pen[i] == INFINITY ? 0.0f : -INFINITY;
        n_valid = n_posinf;
        lmax = 0.0f;
    }

    /* Filters. Each keeps a prefix of the order, so the result is a cutoff candidate:
     * token i survives iff (pen[i], i) is at or before (cut.logit, cut.id). */
    int filtering = (p->top_k > 0 && p->top_k < n_valid) || p->top_p < 1.0f || p->min_p > 0.0f;
    cand cut = {-INFINITY, -1, 0.0}; /* no filter: everything > -inf survives */
    int32_t n_kept = n_valid;
    cand *w = s->work;
    if (filtering) {
        /* With top-p off, tokens with p / p_max < min_p / e are surely cut by min-p: skip
         * them now (top-p needs them, for its normalisation). */
        double floor_l = p->min_p > 0.0f && p->top_p >= 1.0f ? log((double)p->min_p) - 1.0 + lmax : -INFINITY;
        int32_t m = 0;
        if (p->top_k > 0 && p->top_k <= 1024 && p->top_k < n_valid) {
            m = top_k_from_logits(pen, n, p->top_k, floor_l, w);
        } else {
            for (int32_t i = 0; i < n; i++) { /* branch-free compaction: write, then advance */
                w[m].logit = pen[i];
                w[m].id = i;
                m += pen[i] > -INFINITY && (double)pen[i] >= floor_l;
            }
            if (p->top_k > 0 && p->top_k < m) {
                select_top_k(w, m, p->top_k);
                m = p->top_k;
            }
        }
        for (int32_t i = 0; i < m; i++) w[i].w = exp((double)w[i].logit - (double)lmax); /* p_i / p_max */
        if (p->top_p < 1.0f && m > 1) {
            double total = 0.0;
            for (int32_t i = 0; i < m; i++) total += w[i].w;
            double target = (double)p->top_p * total;
            int32_t pre = m > 4096 ? prefilter_top_p(w, m, target, s->mass) : m;
            m = select_top_p(w, pre, target);
        }
        if (p->min_p > 0.0f) { /* the maximum has w == 1 and stays */
            int32_t k = 0;
            for (int32_t i = 0; i < m; i++)
                if (w[i].w >= (double)p->min_p) w[k++] = w[i];
            m = k;
        }
        assert(m > 0);
        n_kept = m;
        cut = w[0];
        for (int32_t i = 1; i < m; i++)
            if (before(&cut, &w[i])) cut = w[i];
    }

    /* Draw: survivors in id order with weights exp((l - l_max) / T), inverse CDF in double.
     * Few survivors are sorted by id; many are found by a scan against the cutoff. */
    double inv_t = 1.0 / (double)p->temperature, total = 0.0;
    int32_t m = 0;
    if (filtering && n_kept <= n / 32) {
        m = n_kept;
        qsort(w, (size_t)m, sizeof *w, cmp_id);
        for (int32_t j = 0; j < m; j++) {
            w[j].w = exp(((double)w[j].logit - (double)lmax) * inv_t);
            total += w[j].w;
        }
    } else {
        for (int32_t i = 0; i < n; i++) { /* branch-free compaction, as above */
            float l = pen[i];
            w[m].logit = l;
            w[m].id = i;
            m += l > cut.logit || (l == cut.logit && i <= cut.id);
        }
        for (int32_t j = 0; j < m; j++) {
            w[j].w = exp(((double)w[j].logit - (double)lmax) * inv_t);
            total += w[j].w;
        }
    }
    if (probs) {
        for (int32_t j = 0; j < m; j++) probs[w[j].id] = w[j].w / total;
        return 0;
    }
    double target = (u_given ? *u_given : rng_uniform(s->rng)) * total, cum = 0.0;
    int32_t last_positive = w[0].id;
    for (int32_t j = 0; j < m; j++) {
        if (w[j].w <= 0.0) continue;
        cum += w[j].w;
        last_positive = w[j].id;
        if (cum > target) return w[j].id;
    }
    return last_positive; /* rounding: the sum fell a hair short of target */
}

/* ---- log-probabilities ---- */

void hone_sampler_logprobs(const float *logits, int32_t n_vocab, int32_t token, int32_t k,
                           hone_token_logprob *out)
{
    k = k < 0 ? 0 : k > HONE_SAMPLER_TOP_LOGPROBS_MAX ? HONE_SAMPLER_TOP_LOGPROBS_MAX : k;
    if (k > n_vocab) k = n_vocab;
    double lmax = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++)
        if (logits[i] > lmax) lmax = logits[i];
    double sum = 0.0;
    if (isfinite(lmax))
        for (int32_t i = 0; i < n_vocab; i++)
            if (logits[i] > -INFINITY) sum += exp((double)logits[i] - lmax);
    double logz = lmax + log(sum);
    float tl[HONE_SAMPLER_TOP_LOGPROBS_MAX]; /* the top k so far, in order (logit desc, id asc) */
    int32_t m = 0;
    for (int32_t i = 0; i < n_vocab && k > 0; i++) {
        float l = isnan(logits[i]) ? -INFINITY : logits[i];
        if (m == k && !(l > tl[m - 1])) continue;
        int32_t j = m < k ? m++ : k - 1;
        while (j > 0 && l > tl[j - 1]) {
            out->top_ids[j] = out->top_ids[j - 1];
            tl[j] = tl[j - 1];
            j--;
        }
        out->top_ids[j] = i;
        tl[j] = l;
    }
    out->n_top = m;
    for (int32_t j = 0; j < m; j++) out->top_lps[j] = (float)((double)tl[j] - logz);
    out->token = token;
    out->logprob = token >= 0 && token < n_vocab && !isnan(logits[token])
                       ? (float)((double)logits[token] - logz) : -INFINITY;
}

int32_t hone_sampler_sample(hone_sampler *s, const float *logits) { return sample_core(s, logits, NULL, NULL); }

/* ---- positional draws (speculative decoding: engine/spec.h) ---- */

double hone_sampler_uniform_at(uint64_t seed, int64_t pos, uint32_t stream)
{
    uint64_t x = seed;
    uint64_t key = splitmix64(&x); /* the seed, mixed, so that nearby seeds share no draws */
    uint64_t y = key ^ ((uint64_t)pos * 0xd1b54a32d192ed03ull) ^ ((uint64_t)stream * 0x8cb92ba72f3d8dd7ull);
    splitmix64(&y);
    return (double)(splitmix64(&y) >> 11) * 0x1.0p-53;
}

uint64_t hone_sampler_seed(const hone_sampler *s) { return s->seed; }

int64_t hone_sampler_n_vocab(const hone_sampler *s) { return s->n_vocab; }

int32_t hone_sampler_sample_u(hone_sampler *s, const float *logits, double u)
{
    return sample_core(s, logits, &u, NULL);
}

int32_t hone_sampler_sample_at(hone_sampler *s, const float *logits, int64_t pos)
{
    return hone_sampler_sample_u(s, logits, hone_sampler_uniform_at(s->seed, pos, 0));
}

int hone_sampler_probs(hone_sampler *s, const float *logits, double *probs)
{
    return sample_core(s, logits, NULL, probs) < 0 ? HONE_EINVAL : 0;
}

int32_t hone_sampler_argmax(const float *x, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}
