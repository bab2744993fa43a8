/* Speculative decoding (see spec.h): draft, verify in one batched forward of the target, accept,
 * roll the KV cache back, and choose the next draft length from what was measured. */
#include "spec.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dtype.h"
#include "error.h"
#include "model.h"

#define SPEC_K_LIMIT 64
#define SPEC_EWMA 0.15     /* weight of a new observation in the running estimates */
#define SPEC_ROW_PRIOR 0.1 /* until measured: a pass of r rows costs 1 + 0.1 (r - 1) passes of one */

struct hone_spec {
    hone_spec_opts o;
    hone_backend *be;
    hone_sampler *smp;
    hone_kv_seq *seq;
    int64_t n_vocab;
    int32_t *hist;          /* [hist_cap] the prompt and every emitted token */
    int64_t hist_n, hist_cap;
    float *logits;          /* [k_max + 1][n_vocab] the rows of the last pass */
    int64_t *emit_row;      /* [k_max + 1] emitted token j of the last call came from this row */
    double *probs;          /* [n_vocab] distribution mode: the target's distribution */
    double *q;              /* [k_max][n_vocab] distribution mode with a draft model: its distributions */
    int32_t *draft;         /* [k_max] */
    int32_t *rows;          /* [k_max + 1] tokens of the verifying batch */
    int32_t *pos;           /* [k_max + 1] */
    hone_kv_seq **seqs;     /* [k_max + 1] */
    float **outs;           /* [k_max + 1] */
    /* the draft model */
    hone_kv_seq dseq;
    float *dlogits;         /* [n_vocab] */
    /* adaptive draft length */
    double alpha;           /* estimated probability that a draft token is accepted */
    double pass_ns[SPEC_K_LIMIT + 2]; /* running time of a target pass of r rows */
    int pass_seen[SPEC_K_LIMIT + 2];
    double draft_ns;        /* running time of one draft forward (model drafts; 0: not measured) */
    int32_t shadow;         /* a lookup draft token not verified (k = 0 was chosen), or -1 */
    int idle;               /* passes in a row a draft model or self-speculation chose k = 0 */
    hone_spec_stats st;
};

int hone_spec_parse_kind(const char *s, int *out)
{
    if (!strcmp(s, "none") || !strcmp(s, "off")) *out = HONE_SPEC_NONE;
    else if (!strcmp(s, "lookup")) *out = HONE_SPEC_LOOKUP;
    else if (!strcmp(s, "draft")) *out = HONE_SPEC_DRAFT;
    else if (!strcmp(s, "self")) *out = HONE_SPEC_SELF;
    else return hone_error_set(HONE_EINVAL, "--speculate must be none, lookup, self or draft, got '%s'", s);
    return 0;
}

int hone_spec_parse_mode(const char *s, int *out)
{
    if (!strcmp(s, "exact")) *out = HONE_SPEC_EXACT;
    else if (!strcmp(s, "distribution")) *out = HONE_SPEC_DISTRIBUTION;
    else return hone_error_set(HONE_EINVAL, "--spec-mode must be exact or distribution, got '%s'", s);
    return 0;
}

struct hone_spec_draft {
    hone_model *m;
    hone_backend *be;
};

void hone_spec_draft_free(hone_spec_draft *d)
{
    if (!d) return;
    hone_backend_free(d->be);
    hone_model_free(d->m);
    free(d);
}

hone_backend *hone_spec_draft_backend(const hone_spec_draft *d) { return d->be; }

int hone_spec_draft_open(hone_spec_draft **out, const char *path, const hone_tokenizer *target_tok, int device,
                         const hone_ctx_opts *co)
{
    hone_tokenizer *tok = NULL;
    char why[160];
    int rc;
    *out = NULL;
    hone_spec_draft *d = calloc(1, sizeof *d);
    if (!d) return hone_error_set(HONE_ENOMEM, "out of memory");
    if ((rc = hone_model_load(&d->m, path)) || (rc = hone_tokenizer_new(&tok, hone_model_gguf(d->m)))) goto done;
    if (!hone_tokenizer_same_vocab(target_tok, tok, why, sizeof why)) {
        rc = hone_error_set(HONE_EINVAL, "the draft model %s does not share the target's vocabulary: %s", path, why);
        goto done;
    }
    if ((rc = hone_backend_new(&d->be, d->m, (hone_device)device, co))) goto done;
    *out = d;
    d = NULL;
done:
    hone_tokenizer_free(tok);
    hone_spec_draft_free(d);
    return rc;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t hone_spec_lookup(const int32_t *hist, int64_t n, int ngram_min, int ngram_max, int64_t k,
                         int32_t *out)
{
    if (ngram_min < 1) ngram_min = 1;
    for (int64_t L = ngram_max; L >= ngram_min; L--) {
        if (L >= n) continue;
        const int32_t *suf = hist + n - L;
        /* the most recent earlier start j (j + L <= n - 1, so at least one token follows) */
        for (int64_t j = n - L - 1; j >= 0; j--) {
            if (hist[j] != suf[0] || memcmp(hist + j, suf, (size_t)L * sizeof *hist)) continue;
            int64_t m = 0;
            for (int64_t t = j + L; t < n && m < k; t++) out[m++] = hist[t];
            return m;
        }
    }
    return 0;
}

void hone_spec_free(hone_spec *sp)
{
    if (!sp) return;
    if (sp->o.draft) hone_backend_release(sp->o.draft, &sp->dseq);
    free(sp->hist);
    free(sp->logits);
    free(sp->emit_row);
    free(sp->probs);
    free(sp->q);
    free(sp->draft);
    free(sp->rows);
    free(sp->pos);
    free(sp->seqs);
    free(sp->outs);
    free(sp->dlogits);
    free(sp);
}

int hone_spec_new(hone_spec **out, const hone_spec_opts *opts, hone_backend *be, hone_sampler *smp,
                  hone_kv_seq *seq)
{
    hone_spec_opts dflt = HONE_SPEC_OPTS_INIT;
    const hone_spec_opts *o = opts ? opts : &dflt;
    int rc = 0;
    *out = NULL;
    if (o->kind < HONE_SPEC_NONE || o->kind > HONE_SPEC_SELF)
        return hone_error_set(HONE_EINVAL, "spec: unknown draft kind %d", o->kind);
    if (o->mode != HONE_SPEC_EXACT && o->mode != HONE_SPEC_DISTRIBUTION)
        return hone_error_set(HONE_EINVAL, "spec: unknown mode %d", o->mode);
    if (o->k_max < 1 || o->k_max > SPEC_K_LIMIT)
        return hone_error_set(HONE_EINVAL, "spec: k %d must be in [1, %d]", o->k_max, SPEC_K_LIMIT);
    if (o->kind == HONE_SPEC_LOOKUP && (o->ngram_min < 1 || o->ngram_max < o->ngram_min))
        return hone_error_set(HONE_EINVAL, "spec: n-gram lengths %d..%d", o->ngram_min, o->ngram_max);
    if (o->kind == HONE_SPEC_DRAFT && !o->draft)
        return hone_error_set(HONE_EINVAL, "spec: a draft model is needed (--draft MODEL)");
    if (o->kind == HONE_SPEC_SELF && hone_backend_device(be) != HONE_DEVICE_CPU)
        return hone_error_set(HONE_EUNSUPPORTED, "spec: self-speculation runs on the CPU backend only");
    int64_t nv = hone_backend_n_vocab(be);
    if (o->kind == HONE_SPEC_DRAFT && hone_backend_n_vocab(o->draft) != nv)
        return hone_error_set(HONE_EINVAL, "spec: the draft's vocabulary (%lld) is not the target's (%lld)",
                              (long long)hone_backend_n_vocab(o->draft), (long long)nv);
    hone_spec *sp = calloc(1, sizeof *sp);
    if (!sp) return hone_error_set(HONE_ENOMEM, "out of memory");
    sp->o = *o;
    if (sp->o.kind != HONE_SPEC_DRAFT) sp->o.draft = NULL;
    sp->be = be;
    sp->smp = smp;
    sp->seq = seq;
    sp->n_vocab = nv;
    sp->alpha = HONE_SPEC_ALPHA_INIT;
    sp->shadow = -1;
    int64_t k1 = o->k_max + 1;
    sp->hist_cap = 256;
    sp->hist = malloc((size_t)sp->hist_cap * sizeof *sp->hist);
    sp->logits = malloc((size_t)(k1 * nv) * sizeof *sp->logits);
    sp->emit_row = malloc((size_t)k1 * sizeof *sp->emit_row);
    sp->probs = malloc((size_t)nv * sizeof *sp->probs);
    sp->draft = malloc((size_t)k1 * sizeof *sp->draft);
    sp->rows = malloc((size_t)k1 * sizeof *sp->rows);
    sp->pos = malloc((size_t)k1 * sizeof *sp->pos);
    sp->seqs = malloc((size_t)k1 * sizeof *sp->seqs);
    sp->outs = malloc((size_t)k1 * sizeof *sp->outs);
    if (!sp->hist || !sp->logits || !sp->emit_row || !sp->probs || !sp->draft || !sp->rows ||
        !sp->pos || !sp->seqs || !sp->outs) {
        rc = hone_error_set(HONE_ENOMEM, "spec: out of memory for %lld rows of logits", (long long)k1);
        goto done;
    }
    if (sp->o.draft || sp->o.kind == HONE_SPEC_SELF) {
        sp->dlogits = malloc((size_t)nv * sizeof *sp->dlogits);
        if (o->mode == HONE_SPEC_DISTRIBUTION) sp->q = malloc((size_t)(o->k_max * nv) * sizeof *sp->q);
        if (!sp->dlogits || (o->mode == HONE_SPEC_DISTRIBUTION && !sp->q)) {
            rc = hone_error_set(HONE_ENOMEM, "spec: out of memory");
            goto done;
        }
    }
    *out = sp;
    sp = NULL;
done:
    hone_spec_free(sp);
    return rc;
}

static int hist_push(hone_spec *sp, int32_t t)
{
    if (sp->hist_n == sp->hist_cap) {
        int64_t cap = sp->hist_cap * 2;
        int32_t *h = realloc(sp->hist, (size_t)cap * sizeof *h);
        if (!h) return hone_error_set(HONE_ENOMEM, "out of memory");
        sp->hist = h;
        sp->hist_cap = cap;
    }
    sp->hist[sp->hist_n++] = t;
    return 0;
}

/* Emits token t, decided from logits row `row`, into out[*n]. */
static int emit(hone_spec *sp, int32_t t, int64_t row, int32_t *out, int64_t *n)
{
    int rc = hist_push(sp, t);
    if (rc) return rc;
    hone_sampler_accept(sp->smp, t);
    sp->emit_row[*n] = row;
    out[(*n)++] = t;
    return 0;
}

static int self_measure(hone_spec *sp, const int32_t *prompt, int64_t n);

int hone_spec_start(hone_spec *sp, const int32_t *prompt, int64_t n, int32_t *out, int64_t *n_out)
{
    int rc;
    *n_out = 0;
    if (n < 1) return hone_error_set(HONE_EINVAL, "spec: an empty prompt");
    if (sp->seq->n_tokens) return hone_error_set(HONE_EINVAL, "spec: the sequence must start empty");
    int64_t p0 = 0;
    if (sp->o.kind == HONE_SPEC_SELF && sp->o.self_layers == 0) rc = self_measure(sp, prompt, n);
    else rc = hone_backend_forward(sp->be, sp->seq, prompt, n, sp->logits, 0);
    if (rc) return rc;
    /* the draft model's prefill here, not in the first pass (whose time would count it) */
    if (sp->o.draft && (rc = hone_backend_forward(sp->o.draft, &sp->dseq, prompt, n, NULL, 0))) return rc;
    if (sp->o.kind == HONE_SPEC_SELF) sp->st.self_layers = sp->o.self_layers > 0 ? sp->o.self_layers : 0;
    sp->hist_n = 0;
    for (int64_t i = 0; i < n; i++)
        if ((rc = hist_push(sp, prompt[i]))) return rc;
    int32_t t = hone_sampler_sample_at(sp->smp, sp->logits, p0 + n);
    if (t < 0) return HONE_EINVAL;
    return emit(sp, t, 0, out, n_out);
}

/* The time a target pass of r rows is expected to take (relative units until measured). */
/* Until r is measured: the prior row cost scaled from the first measured pass, plus r - 1 draft
 * forwards at their measured time (a model draft's k tokens take about k forwards; the
 * verifying part of a measured pass is its time less its drafts'). */
static double pass_cost(const hone_spec *sp, int64_t r)
{
    if (sp->pass_seen[r]) return sp->pass_ns[r];
    double base = 1.0, d = sp->draft_ns;
    for (int64_t s = 1; s <= sp->o.k_max + 1; s++)
        if (sp->pass_seen[s]) {
            double verify = sp->pass_ns[s] - (double)(s - 1) * d;
            if (verify < 0.5 * sp->pass_ns[s]) verify = 0.5 * sp->pass_ns[s];
            base = verify / (1.0 + SPEC_ROW_PRIOR * (double)(s - 1));
            break;
        }
    return base * (1.0 + SPEC_ROW_PRIOR * (double)(r - 1)) + (double)(r - 1) * d;
}

int64_t hone_spec_choose_k(double alpha, int64_t avail, const double *cost)
{
    int64_t best = 0;
    double c0 = cost ? cost[0] : 1.0, best_rate = 1.0 / c0, tokens = 1.0, a = 1.0;
    for (int64_t k = 1; k <= avail; k++) {
        a *= alpha;
        tokens += a;
        double rate = tokens / (cost ? cost[k] : 1.0 + SPEC_ROW_PRIOR * (double)k);
        if (rate > best_rate) {
            best_rate = rate;
            best = k;
        }
    }
    return best;
}

double hone_spec_observe(double alpha, int accepted) { return alpha + SPEC_EWMA * ((accepted ? 1.0 : 0.0) - alpha); }

/* The draft length for this pass: hone_spec_choose_k with the pass times measured so far. */
static int64_t choose_k(const hone_spec *sp, int64_t avail)
{
    if (!sp->o.adaptive) return avail;
    double cost[SPEC_K_LIMIT + 1];
    for (int64_t k = 0; k <= avail; k++) cost[k] = pass_cost(sp, k + 1);
    return hone_spec_choose_k(sp->alpha, avail, cost);
}

/* A model draft's length: choose_k's, or after HONE_SPEC_PROBE_AFTER passes of none, one token
 * (only drafting updates alpha: without probing, k = 0 would be for good). */
static int64_t choose_k_probe(hone_spec *sp, int64_t avail)
{
    int64_t k = choose_k(sp, avail);
    if (k > 0 || avail < 1 || ++sp->idle >= HONE_SPEC_PROBE_AFTER) {
        sp->idle = 0;
        return k > 0 ? k : avail > 0;
    }
    return 0;
}

/* The time of one draft forward, from the n forwards since t0 (none: nothing to learn). */
static void observe_draft_time(hone_spec *sp, uint64_t t0, int64_t n)
{
    if (n <= 0) return;
    double per = (double)(now_ns() - t0) / (double)n;
    sp->draft_ns = sp->draft_ns > 0.0 ? sp->draft_ns + SPEC_EWMA * (per - sp->draft_ns) : per;
}

static void observe_accept(hone_spec *sp, int accepted) { sp->alpha = hone_spec_observe(sp->alpha, accepted); }

/* The draft's token at position P (its i-th draft) from its logits: exact mode, the target
 * sampler's rule with the position's own draw (a draft that agrees with the target proposes the
 * very token the target will sample); distribution mode, a sample of the draft's distribution
 * q (kept for the acceptance test) with an independent stream. */
static int32_t propose(hone_spec *sp, const float *logits, int64_t P, int64_t i)
{
    if (sp->o.mode != HONE_SPEC_DISTRIBUTION) return hone_sampler_sample_at(sp->smp, logits, P);
    return hone_spec_propose_distribution(sp->smp, logits, P, sp->q + i * sp->n_vocab);
}

int32_t hone_spec_propose_distribution(hone_sampler *smp, const float *logits, int64_t P, double *q)
{
    if (hone_sampler_probs(smp, logits, q)) return -1;
    double u = hone_sampler_uniform_at(hone_sampler_seed(smp), P, 3), cum = 0.0;
    int32_t t = -1;
    for (int64_t v = 0; v < hone_sampler_n_vocab(smp); v++)
        if (q[v] > 0.0) {
            t = (int32_t)v;
            cum += q[v];
            if (cum > u) break;
        }
    return t;
}

/* Self-speculation's layer count by measurement: the prompt is prefilled with full logits for its
 * last rows; each candidate L (1/6 .. 2/3 of the layers) reruns those rows through its first L
 * layers (storing the same K/V for those layers) and its argmax is compared with the target's.
 * A draft token costs about (L / N) (1 - h) + h target passes, h the head's share of the weights
 * read; the L with the best expected tokens per time (hone_spec_choose_k over the prior pass
 * costs plus k draft tokens) wins, or none (self_layers = -1: no drafting) if none beats plain.
 * Leaves seq holding the prompt and sp->logits[0] the last row's target logits. */
static int self_measure(hone_spec *sp, const int32_t *prompt, int64_t n)
{
    enum { ROWS = 24 };
    int64_t nv = sp->n_vocab, m = n - 1 < ROWS ? n - 1 : ROWS, rc;
    const hone_model *model = hone_backend_model(sp->be);
    int64_t N = hone_model_hparams(model)->n_layers;
    sp->o.self_layers = -1;
    if (m < 4 || N < 2) return hone_backend_forward(sp->be, sp->seq, prompt, n, sp->logits, 0);
    float *full = malloc((size_t)(m * nv) * sizeof *full);
    int32_t *target = malloc((size_t)m * sizeof *target), pos[ROWS];
    hone_kv_seq *seqs[ROWS];
    float *outs[ROWS];
    if (!full || !target) {
        free(full);
        free(target);
        return hone_error_set(HONE_ENOMEM, "out of memory");
    }
    if ((rc = hone_backend_forward(sp->be, sp->seq, prompt, n - m, NULL, 0))) goto done;
    for (int64_t i = 0; i < m; i++) {
        pos[i] = (int32_t)(n - m + i);
        seqs[i] = sp->seq;
        outs[i] = full + i * nv;
    }
    hone_batch b = {m, prompt + n - m, seqs, pos, outs, NULL};
    if ((rc = hone_backend_forward_batch(sp->be, &b))) goto done;
    for (int64_t i = 0; i < m; i++) target[i] = hone_sampler_argmax(full + i * nv, nv);
    memcpy(sp->logits, full + (m - 1) * nv, (size_t)nv * sizeof *full);
    const hone_weight *head = hone_model_output(model);
    double h = (double)(head->rows * (head->cols / hone_dtype_block_size(head->dtype)) *
                        hone_dtype_type_size(head->dtype)) / (double)hone_model_weight_bytes(model);
    if (h > 1.0) h = 1.0;
    const int num[5] = {1, 1, 1, 1, 2}, den[5] = {6, 4, 3, 2, 3};
    double best_rate = 1.0, cost[SPEC_K_LIMIT + 1];
    for (int c = 0; c < 5; c++) {
        int64_t L = N * num[c] / den[c];
        if (L < 1 || L >= N || (c && L == N * num[c - 1] / den[c - 1])) continue;
        hone_kv_cache_truncate(hone_backend_kv(sp->be), sp->seq, n - m);
        outs[0] = sp->dlogits;
        int64_t agree = 0;
        for (int64_t i = 0; i < m; i++) { /* one row at a time, as drafting runs */
            hone_batch one = {1, prompt + n - m + i, seqs, pos + i, outs, NULL};
            if ((rc = hone_backend_forward_batch_layers(sp->be, &one, L))) goto done;
            agree += hone_sampler_argmax(sp->dlogits, nv) == target[i];
        }
        double a = (double)agree / (double)m, dc = (double)L / (double)N * (1.0 - h) + h;
        for (int64_t k = 0; k <= sp->o.k_max; k++) cost[k] = 1.0 + SPEC_ROW_PRIOR * (double)k + (double)k * dc;
        int64_t k = hone_spec_choose_k(a, sp->o.k_max, cost);
        double e = 1.0, p = 1.0;
        for (int64_t j = 1; j <= k; j++) e += (p *= a);
        if (k > 0 && e / cost[k] > best_rate) {
            best_rate = e / cost[k];
            sp->o.self_layers = (int)L;
            sp->alpha = a;
            sp->st.self_agreement = a;
        }
    }
    rc = 0;
done:
    /* the sequence holds the whole prompt again (the full model's K/V; the draft rewrote the
     * first layers' rows with the same values) */
    if (!rc && sp->seq->n_tokens != n) rc = hone_error_set(HONE_EINTERNAL, "spec: self measure left %lld tokens",
                                                          (long long)sp->seq->n_tokens);
    free(full);
    free(target);
    return (int)rc;
}

/* Self-speculation: k draft tokens from the target's first self_layers layers, one row at a time
 * on the target's own sequence (the first layers' K/V of the drafted tokens are what the target
 * will store for them); the sequence is truncated back before the verifying pass. */
static int draft_self(hone_spec *sp, int64_t k, int64_t *got)
{
    hone_kv_seq *seq = sp->seq;
    int64_t n0 = seq->n_tokens;
    int32_t tok = sp->hist[sp->hist_n - 1], pos;
    hone_kv_seq *seqs[1] = {seq};
    float *outs[1] = {sp->dlogits};
    int rc = 0;
    *got = 0;
    for (int64_t i = 0; i < k; i++) {
        pos = (int32_t)(n0 + i);
        hone_batch b = {1, &tok, seqs, &pos, outs, NULL};
        if ((rc = hone_backend_forward_batch_layers(sp->be, &b, sp->o.self_layers))) break;
        sp->st.draft_passes++;
        int32_t t = propose(sp, sp->dlogits, n0 + 1 + i, i);
        if (t < 0) break;
        sp->draft[(*got)++] = t;
        tok = t;
    }
    hone_kv_cache_truncate(hone_backend_kv(sp->be), seq, n0);
    return rc;
}

/* Draft model: brings the draft's sequence up to hist (all but the last emitted token already
 * fed, then that one) and proposes k tokens, each with the target sampler's rule on the draft's
 * logits and the position's own draw (exact mode: the draw plain decoding uses there, so a draft
 * that agrees with the target proposes the very token the target will sample), or, in
 * distribution mode, sampled from the draft's distribution q with an independent stream. */
static int draft_model(hone_spec *sp, int64_t k, int64_t *got)
{
    hone_backend *d = sp->o.draft;
    int rc;
    *got = 0;
    int64_t have = sp->dseq.n_tokens;
    if (have > sp->hist_n - 1) {
        hone_kv_cache_truncate(hone_backend_kv(d), &sp->dseq, sp->hist_n - 1);
        have = sp->dseq.n_tokens;
    }
    if (sp->hist_n - have > 0 &&
        (rc = hone_backend_forward(d, &sp->dseq, sp->hist + have, sp->hist_n - have, sp->dlogits, 0)))
        return rc;
    sp->st.draft_passes++;
    for (int64_t i = 0; i < k; i++) {
        int32_t t = propose(sp, sp->dlogits, sp->hist_n + i, i); /* the drafted token's position */
        if (t < 0) break;
        sp->draft[(*got)++] = t;
        if (i + 1 == k) break;
        if (sp->dseq.n_tokens + 1 > hone_backend_n_ctx(d)) break;
        if ((rc = hone_backend_forward(d, &sp->dseq, &t, 1, sp->dlogits, 0))) return rc;
        sp->st.draft_passes++;
    }
    return 0;
}

int32_t hone_spec_decide_distribution(hone_sampler *smp, const float *logits, int64_t P, int32_t d,
                                      const double *q, double *p, int *accepted)
{
    uint64_t seed = hone_sampler_seed(smp);
    int64_t nv = hone_sampler_n_vocab(smp);
    if (hone_sampler_probs(smp, logits, p)) return -1;
    double qd = q ? q[d] : 1.0;
    double ratio = qd > 0.0 ? p[d] / qd : 0.0;
    if (hone_sampler_uniform_at(seed, P, 1) < ratio) {
        *accepted = 1;
        return d;
    }
    *accepted = 0;
    double total = 0.0;
    for (int64_t v = 0; v < nv; v++) {
        double r = p[v] - (q ? q[v] : (v == d ? 1.0 : 0.0));
        p[v] = r > 0.0 ? r : 0.0;
        total += p[v];
    }
    if (!(total > 0.0)) return hone_sampler_sample_at(smp, logits, P); /* p == q: cannot happen but by rounding */
    double target = hone_sampler_uniform_at(seed, P, 2) * total, cum = 0.0;
    int32_t last = -1;
    for (int64_t v = 0; v < nv; v++)
        if (p[v] > 0.0) {
            last = (int32_t)v;
            cum += p[v];
            if (cum > target) return last;
        }
    return last;
}

int hone_spec_step(hone_spec *sp, int64_t max_emit, int32_t *out, int64_t *n_out)
{
    int rc;
    *n_out = 0;
    if (max_emit < 1) return hone_error_set(HONE_EINVAL, "spec: max_emit %lld", (long long)max_emit);
    if (sp->hist_n < 1) return hone_error_set(HONE_EINVAL, "spec: step before start");
    hone_kv_seq *seq = sp->seq;
    int64_t n0 = seq->n_tokens, nv = sp->n_vocab;
    int32_t cur = sp->hist[sp->hist_n - 1];
    /* the draft: at most k_max, the emit budget and the context allow */
    int64_t room = hone_backend_n_ctx(sp->be) - n0 - 1;
    int64_t kcap = sp->o.k_max;
    if (kcap > max_emit - 1) kcap = max_emit - 1;
    if (kcap > room) kcap = room;
    if (room < 0) return hone_error_set(HONE_ERANGE, "context full: %lld tokens", (long long)n0);
    int64_t k = 0;
    uint64_t t0 = now_ns(); /* a pass's time includes its draft's: what a draft length costs */
    if (sp->o.kind == HONE_SPEC_LOOKUP && kcap > 0) {
        int64_t avail = hone_spec_lookup(sp->hist, sp->hist_n, sp->o.ngram_min, sp->o.ngram_max, kcap,
                                         sp->draft);
        if (sp->shadow >= 0) { /* the unverified draft of the last pass, against what came */
            observe_accept(sp, sp->shadow == cur);
            sp->shadow = -1;
        }
        k = avail ? choose_k(sp, avail) : 0;
        if (avail && !k) sp->shadow = sp->draft[0];
    } else if (sp->o.kind == HONE_SPEC_DRAFT && kcap > 0) {
        int64_t want = choose_k_probe(sp, kcap), f0 = sp->st.draft_passes;
        if (want > 0 && (rc = draft_model(sp, want, &k))) return rc;
        observe_draft_time(sp, t0, sp->st.draft_passes - f0);
    } else if (sp->o.kind == HONE_SPEC_SELF && sp->o.self_layers > 0 && kcap > 0) {
        int64_t want = choose_k_probe(sp, kcap), f0 = sp->st.draft_passes;
        if (want > 0 && (rc = draft_self(sp, want, &k))) return rc;
        observe_draft_time(sp, t0, sp->st.draft_passes - f0);
    }
    sp->st.proposed += k;
    /* verify: rows cur, d1 .. dk at positions n0 .. n0 + k, every row's logits */
    sp->rows[0] = cur;
    for (int64_t i = 0; i < k; i++) sp->rows[i + 1] = sp->draft[i];
    for (int64_t i = 0; i <= k; i++) {
        sp->pos[i] = (int32_t)(n0 + i);
        sp->seqs[i] = seq;
        sp->outs[i] = sp->logits + i * nv;
    }
    hone_batch b = {k + 1, sp->rows, sp->seqs, sp->pos, sp->outs, NULL};
    if ((rc = hone_backend_forward_batch(sp->be, &b))) return rc;
    double ns = (double)(now_ns() - t0);
    if (!sp->pass_seen[k + 1]) {
        sp->pass_ns[k + 1] = ns;
        sp->pass_seen[k + 1] = 1;
    } else {
        sp->pass_ns[k + 1] += SPEC_EWMA * (ns - sp->pass_ns[k + 1]);
    }
    sp->st.passes++;
    /* accept: the token at position n0 + 1 + i is decided from row i */
    int64_t a = 0;
    int32_t t = -1;
    for (int64_t i = 0; i <= k; i++) {
        const float *row = sp->logits + i * nv;
        int64_t P = n0 + 1 + i;
        int ok = 0;
        if (i < k && sp->o.mode == HONE_SPEC_DISTRIBUTION) {
            t = hone_spec_decide_distribution(sp->smp, row, P, sp->draft[i], sp->q ? sp->q + i * nv : NULL,
                                              sp->probs, &ok);
        } else {
            t = hone_sampler_sample_at(sp->smp, row, P);
            ok = i < k && t == sp->draft[i];
        }
        if (t < 0) {
            hone_kv_cache_truncate(hone_backend_kv(sp->be), seq, n0);
            return HONE_EINVAL;
        }
        if ((rc = emit(sp, t, i, out, n_out))) return rc;
        if (i < k) {
            sp->st.drafted++;
            observe_accept(sp, ok);
        }
        if (!ok) break;
        a++;
        sp->st.accepted++;
    }
    /* roll back the rejected positions: seq keeps cur and the accepted drafts */
    hone_kv_cache_truncate(hone_backend_kv(sp->be), seq, n0 + 1 + a);
    sp->st.emitted += *n_out;
    return 0;
}

const float *hone_spec_logits(const hone_spec *sp, int64_t j) { return sp->logits + sp->emit_row[j] * sp->n_vocab; }

hone_spec_stats hone_spec_get_stats(const hone_spec *sp) { return sp->st; }
