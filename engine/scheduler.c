/* The engine thread of the server: admission, step planning (decode rows, chunked prefill
 * under a token budget, KV blocks, preemption), one hone_backend_forward_batch per step,
 * per-request sampling, detokenising and stop strings. Policies: scheduler.h. */
#include "scheduler.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "grammar.h"
#include "kv_cache.h"
#include "prefix_cache.h"
#include "spec.h"

enum { ST_QUEUED = 0, ST_RUNNING = 1, ST_DONE = 2 };

#define GRAMMAR_CACHE 16 /* distinct output grammars whose memos the engine keeps */

struct hone_request {
    int refs;                 /* the caller's and the engine's; freed at 0 (under mu) */
    int state;                /* ST_* (under mu) */
    int cancel;               /* set by hone_request_cancel (under mu) */
    int admitted_once;
    /* engine thread only */
    int32_t *toks;            /* [n_ctx + 1] the prompt, then the sampled tokens */
    int64_t n_toks, n_prompt, max_tokens;
    hone_sampler *smp;
    hone_detok *dt;
    char **stop;              /* [n_stop] */
    size_t *stop_len;
    int n_stop;
    size_t stop_max;
    int ignore_eos;
    hone_grammar *grammar;    /* structured output (a copy), NULL for none */
    hone_grammar_matcher *gm; /* its state after the tokens sampled so far (engine thread:
                               * made at the first sampling, freed when the request finishes) */
    double t_submit, deadline, t_last;
    double t_admit, t_first;  /* first admission, first token (0: not yet): the metrics */
    hone_kv_seq seq;
    int32_t *chain;           /* [n_ctx / bs + 1] prefix-cache entries of blocks 0.. */
    int64_t n_chain;
    int chain_stopped;        /* 1: registering further blocks is off for this request */
    int64_t rows;             /* rows in this step */
    int64_t logit_slot;       /* this step's logits row, -1 for none */
    int32_t sampled;
    /* speculative decoding (engine thread only): this step's draft rows follow the decode row,
     * the drafts written at toks[n_toks ..) (scratch until accepted) */
    int spec;                 /* hone_spec_kind: 0 none, HONE_SPEC_LOOKUP, _SELF or _DRAFT */
    int spec_dist;            /* 1: distribution mode (hone_spec_decide_distribution), else exact */
    double *q;                /* [spec_k][n_vocab] model drafts' distributions (distribution mode) */
    int64_t n_draft;          /* draft rows in this step */
    int32_t *emit;            /* [spec_k + 1] tokens the step's verification emits */
    int64_t n_emit;
    double alpha;             /* acceptance estimate (hone_spec_observe) */
    int32_t shadow;           /* a draft not verified (k = 0 chosen), checked against the next token */
    int64_t spec_accepted;    /* this step's accepted drafts, for the stats */
    int spec_idle;            /* steps in a row a model draft (self, draft) chose k = 0 */
    hone_kv_seq dseq;         /* HONE_SPEC_DRAFT: the draft model's sequence (its own pool):
                               * toks[0 ..) as fed to it, truncated to what was accepted */
    /* output (under mu) */
    char *text;
    size_t text_len, text_cap, emit_len;
    int64_t completion_tokens, cached_tokens;
    hone_finish finish;
    hone_request_error err;
    char error[256];
    hone_request *qprev, *qnext;
    void (*notify)(void *);   /* hone_request_params.notify (under mu; NULL once released) */
    void *notify_user;
    size_t notified_len;      /* emit_len and completion_tokens at the last notify */
    int64_t notified_tokens;
    /* OpenAI outputs (hone_request_params.logprobs ... embed; see the "outputs" section) */
    int want_lp, top_lp, want_plp;
    hone_pooling embed;
    hone_token_logprob lp_pending;  /* engine thread: this step's sampled token */
    hone_token_logprob *lp;         /* [lp_cap] generated tokens' (under mu) */
    int64_t n_lp, lp_cap;
    hone_token_logprob *plp;        /* [n_prompt] the prompt's (engine; read once done) */
    double *emb_sum;                /* [dim] pooled hidden state (engine) */
    float *emb;                     /* [dim] the embedding, set when done */
    int64_t emb_rows;
};

struct hone_scheduler {
    hone_backend *be;
    hone_kv_cache *kv;
    const hone_tokenizer *tok;
    hone_scheduler_opts o;
    int64_t n_vocab, n_ctx, bs;
    hone_prefix_cache *pc;    /* NULL when prefix caching is off */
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;   /* engine waits for work */
    pthread_cond_t out_cv;    /* HTTP threads wait for output */
    int stop;
    hone_request *qhead, *qtail;
    int64_t n_queued;
    /* engine thread only */
    hone_request **running;   /* [max_batch], admission order (oldest first) */
    int n_running;
    int32_t *b_tokens, *b_pos;/* [step_tokens] */
    hone_kv_seq **b_seqs;     /* [step_tokens] */
    float **b_out;            /* [step_tokens] */
    float *logits;            /* [max_batch][n_vocab] */
    /* self-speculation (engine thread): one draft row per request per round */
    int64_t self_layers;      /* the draft's layers */
    int self_ok;              /* the backend runs a layer-limited forward (the CPU one) */
    float *dlogits;           /* [max_batch][n_vocab] */
    int32_t *d_tok, *d_pos;   /* [max_batch] */
    hone_kv_seq **d_seqs;     /* [max_batch] */
    float **d_out;            /* [max_batch] */
    hone_request **d_req;     /* [max_batch] */
    double *dprobs;           /* [n_vocab] distribution mode's scratch */
    /* the draft model (o.draft; engine thread): its pool, and the catch-up batch's arrays */
    hone_backend *dbe;
    hone_kv_cache *dkv;
    int64_t dbs, dn_ctx, dcap;        /* its block size, context; rows per catch-up batch */
    int32_t *dc_tok, *dc_pos;         /* [dcap] */
    hone_kv_seq **dc_seqs;            /* [dcap] */
    float **dc_out;                   /* [dcap] all NULL: catch-up rows need no logits */
    uint64_t d_batches, d_rows;       /* draft model batches and rows not yet in st */
    int32_t *match;           /* [n_ctx / bs + 1] */
    /* outputs beyond the sampled rows' logits (engine thread only) */
    int64_t dim;
    float *plogits;           /* [PLP_ROWS][n_vocab] prompt rows' logits (prompt_logprobs) */
    hone_request **plp_req;   /* [PLP_ROWS] whose prompt row each is */
    int64_t *plp_pos;         /* [PLP_ROWS] its position */
    int n_plp;
    float *hidden;            /* [step_tokens][dim] final hidden states (embeddings) */
    float **b_hidden;         /* [step_tokens] */
    int any_hidden;
    /* statistics (under mu) */
    hone_scheduler_stats st;
    /* the observer (o.observer): prof_mu is held by the engine for a whole step and by readers */
    pthread_mutex_t prof_mu;
    /* step hook (set under mu; called by the engine thread without mu) */
    hone_scheduler_step_hook hook;
    void *hook_user;
    /* structured output: the vocabulary's token trie, built by the first request with a grammar */
    pthread_mutex_t trie_mu;
    hone_token_trie *trie;
    /* engine thread: grammars seen lately with their memos, shared by the requests with an
     * equal grammar so that each state's mask is walked once for all of them */
    struct { hone_grammar *g; hone_grammar_memo *memo; uint64_t hash, used; } gcache[GRAMMAR_CACHE];
    uint64_t gcache_clock;
    float *gmasked;           /* [n_vocab] engine thread: a masked copy of a row whose raw logits
                               * the outputs still read (logprobs) */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void hist_init(hone_histogram *h, const double *le, int n)
{
    memset(h, 0, sizeof *h);
    h->n = n;
    memcpy(h->le, le, (size_t)n * sizeof *le);
}

static void hist_observe(hone_histogram *h, double v)
{
    int i = 0;
    while (i < h->n && v > h->le[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

/* ---- requests ---- */

static void request_free(hone_request *r)
{
    if (!r) return;
    free(r->toks);
    hone_grammar_matcher_free(r->gm);
    hone_grammar_free(r->grammar);
    free(r->emit);
    free(r->q);
    hone_sampler_free(r->smp);
    hone_detok_free(r->dt);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->stop_len);
    free(r->chain);
    free(r->text);
    free(r->seq.blocks);
    free(r->lp);
    free(r->plp);
    free(r->emb_sum);
    free(r->emb);
    free(r);
}

static void unref_locked(hone_request *r)
{
    if (--r->refs == 0) request_free(r);
}

static int text_append(hone_request *r, const char *p, size_t n)
{
    if (r->text_len + n + 1 > r->text_cap) {
        size_t cap = r->text_cap ? r->text_cap : 256;
        while (cap < r->text_len + n + 1) cap *= 2;
        char *t = realloc(r->text, cap);
        if (!t) return hone_error_set(HONE_ENOMEM, "out of memory");
        r->text = t;
        r->text_cap = cap;
    }
    memcpy(r->text + r->text_len, p, n);
    r->text_len += n;
    r->text[r->text_len] = 0;
    return 0;
}

/* Looks for a stop string in the text appended since old_len (a match may start up to
 * stop_max - 1 bytes earlier). Found: truncates the text before it and returns 1. Otherwise
 * moves emit_len up to the text minus the longest suffix that begins some stop string. */
static int stop_scan(hone_request *r, size_t old_len)
{
    if (r->n_stop == 0) {
        r->emit_len = r->text_len;
        return 0;
    }
    size_t from = old_len > r->stop_max - 1 ? old_len - (r->stop_max - 1) : 0;
    size_t best = SIZE_MAX;
    for (int i = 0; i < r->n_stop; i++) {
        const char *hit = r->text_len > from
                              ? memmem(r->text + from, r->text_len - from, r->stop[i], r->stop_len[i])
                              : NULL;
        if (hit && (size_t)(hit - r->text) < best) best = (size_t)(hit - r->text);
    }
    if (best != SIZE_MAX) {
        r->text_len = best;
        r->text[best] = 0;
        if (r->emit_len > best) r->emit_len = best; /* cannot happen: the stop text was held */
        return 1;
    }
    size_t hold = 0;
    for (int i = 0; i < r->n_stop; i++) {
        size_t k = r->stop_len[i] - 1 < r->text_len ? r->stop_len[i] - 1 : r->text_len;
        for (; k > hold; k--)
            if (memcmp(r->text + r->text_len - k, r->stop[i], k) == 0) {
                hold = k;
                break;
            }
    }
    if (r->text_len - hold > r->emit_len) r->emit_len = r->text_len - hold;
    return 0;
}

/* ---- queue (under mu) ---- */

static void queue_remove(hone_scheduler *s, hone_request *r)
{
    if (r->qprev) r->qprev->qnext = r->qnext;
    else s->qhead = r->qnext;
    if (r->qnext) r->qnext->qprev = r->qprev;
    else s->qtail = r->qprev;
    r->qprev = r->qnext = NULL;
    s->n_queued--;
}

static void queue_push(hone_scheduler *s, hone_request *r, int front)
{
    if (front) {
        r->qprev = NULL;
        r->qnext = s->qhead;
        if (s->qhead) s->qhead->qprev = r;
        else s->qtail = r;
        s->qhead = r;
    } else {
        r->qnext = NULL;
        r->qprev = s->qtail;
        if (s->qtail) s->qtail->qnext = r;
        else s->qhead = r;
        s->qtail = r;
    }
    s->n_queued++;
}

/* ---- engine (engine thread, under mu unless said otherwise) ---- */

/* Gives r's KV blocks back (its prefix-cache entries become idle unless others use them). */
static void release_kv(hone_scheduler *s, hone_request *r)
{
    if (s->pc) hone_prefix_cache_unuse(s->pc, r->chain, r->n_chain);
    r->n_chain = 0;
    r->chain_stopped = s->pc == NULL;
    hone_kv_cache_release(s->kv, &r->seq);
    if (s->dkv) hone_kv_cache_release(s->dkv, &r->dseq);
}

static void running_remove(hone_scheduler *s, hone_request *r)
{
    for (int i = 0; i < s->n_running; i++)
        if (s->running[i] == r) {
            memmove(s->running + i, s->running + i + 1,
                    (size_t)(s->n_running - i - 1) * sizeof *s->running);
            s->n_running--;
            return;
        }
}

/* The per-request metrics at its end: end to end, prefill (admission to the first token) and
 * decode (first token to the end) time, prompt and generated lengths, the finish reason. */
static void observe_finish(hone_scheduler *s, const hone_request *r, hone_finish how)
{
    double now = now_s();
    hist_observe(&s->st.e2e, now - r->t_submit);
    if (r->t_admit > 0) hist_observe(&s->st.prefill_time, (r->t_first > 0 ? r->t_first : now) - r->t_admit);
    if (r->t_first > 0) hist_observe(&s->st.decode_time, now - r->t_first);
    hist_observe(&s->st.prompt_len, (double)r->n_prompt);
    hist_observe(&s->st.gen_len, (double)r->completion_tokens);
    if ((unsigned)how < HONE_FINISH_COUNT) s->st.finish_reasons[how]++;
}

/* Ends r (queued or running): its final text, its blocks freed, the engine's reference
 * dropped. */
static void finish(hone_scheduler *s, hone_request *r, hone_finish how, hone_request_error err,
                   const char *msg)
{
    if (r->state == ST_QUEUED) queue_remove(s, r);
    else if (r->state == ST_RUNNING) running_remove(s, r);
    release_kv(s, r);
    hone_grammar_matcher_free(r->gm); /* here, on the engine thread: its memo may be shared */
    r->gm = NULL;
    if (how == HONE_FINISH_LENGTH || (how == HONE_FINISH_STOP && !msg)) {
        /* what the detokeniser still holds is output (a stop string may hide in it) */
        const char *p;
        size_t n = 0;
        size_t old = r->text_len;
        if (hone_detok_flush(r->dt, &p, &n) == 0 && n && text_append(r, p, n) == 0 &&
            stop_scan(r, old))
            how = HONE_FINISH_STOP;
        r->emit_len = r->text_len;
    }
    r->finish = how;
    r->err = err;
    if (msg && how == HONE_FINISH_ERROR) snprintf(r->error, sizeof r->error, "%s", msg);
    r->state = ST_DONE;
    s->st.finished++;
    observe_finish(s, r, how);
    if (err == HONE_REQUEST_ERR_CANCELLED) s->st.cancelled++;
    if (err == HONE_REQUEST_ERR_TIMEOUT) s->st.timed_out++;
    pthread_cond_broadcast(&s->out_cv);
    if (r->notify) r->notify(r->notify_user);
    unref_locked(r);
}

/* Sends the youngest running request back to the head of the queue, freeing its blocks; it
 * recomputes its tokens when readmitted (bitwise the same logits, so the same output). */
static void preempt(hone_scheduler *s, hone_request *r)
{
    running_remove(s, r);
    release_kv(s, r);
    r->state = ST_QUEUED;
    queue_push(s, r, 1);
    s->st.preemptions++;
}

static int64_t blocks_for(const hone_scheduler *s, int64_t n_tokens)
{
    return (n_tokens + s->bs - 1) / s->bs;
}

/* ---- outputs beyond text: logprobs, prompt logprobs, embeddings (engine thread) ---- */

#define PLP_ROWS 32 /* prompt rows per step whose logits are kept for prompt_logprobs */

/* 1 when r needs every prompt row computed (its logits or hidden states): the prefix cache
 * is not read for it (its blocks are still registered for others). */
static int reads_all_rows(const hone_request *r) { return r->want_plp || r->embed != HONE_POOLING_NONE; }

/* At (re)admission: an embedding restarts its pooling (the prompt is recomputed from 0). */
static void outputs_on_admit(hone_scheduler *s, hone_request *r)
{
    if (r->emb_sum) memset(r->emb_sum, 0, (size_t)s->dim * sizeof *r->emb_sum);
    r->emb_rows = 0;
}

/* Caps a prefill of `rows` rows from r's next position so that its prompt rows' logits fit in
 * what is left of this step's PLP_ROWS (*left). */
static int64_t outputs_cap_rows(const hone_scheduler *s, const hone_request *r, int64_t rows, int64_t *left)
{
    (void)s;
    if (!r->want_plp) return rows;
    int64_t base = r->seq.n_tokens, last = r->n_prompt - 1; /* rows at positions < last are kept */
    int64_t kept = base < last ? (last - base < rows ? last - base : rows) : 0;
    if (kept > *left) {
        rows = *left;
        kept = *left;
    }
    *left -= kept;
    return rows;
}

/* Points r's rows [n0, n0 + r->rows) of the step at the prompt-logit and hidden-state rows
 * they need. */
static void outputs_plan(hone_scheduler *s, hone_request *r, int64_t n0)
{
    for (int64_t j = 0; j < r->rows; j++) {
        int64_t pos = r->seq.n_tokens + j, row = n0 + j;
        if (r->want_plp && pos < r->n_prompt - 1 && s->n_plp < PLP_ROWS) {
            s->b_out[row] = s->plogits + (int64_t)s->n_plp * s->n_vocab;
            s->plp_req[s->n_plp] = r;
            s->plp_pos[s->n_plp++] = pos;
        }
        if ((r->embed == HONE_POOLING_MEAN && pos < r->n_prompt) ||
            (r->embed == HONE_POOLING_LAST && pos == r->n_prompt - 1)) {
            s->b_hidden[row] = s->hidden + row * s->dim;
            s->any_hidden = 1;
        }
    }
}

/* After the step (not under mu): r's sampled token's logprobs, its hidden rows pooled. */
static void outputs_collect(hone_scheduler *s, hone_request *r, int64_t n0)
{
    if (r->want_lp && r->logit_slot >= 0 && r->sampled >= 0)
        hone_sampler_logprobs(s->logits + r->logit_slot * s->n_vocab, (int32_t)s->n_vocab, r->sampled,
                              r->top_lp, &r->lp_pending);
    for (int64_t j = 0; r->emb_sum && j < r->rows; j++) {
        const float *h = s->b_hidden[n0 + j];
        if (!h) continue;
        for (int64_t d = 0; d < s->dim; d++) r->emb_sum[d] += h[d];
        r->emb_rows++;
    }
}

/* After the step (not under mu): the kept prompt rows' logprobs of the prompt's next tokens. */
static void outputs_prompt_rows(hone_scheduler *s)
{
    for (int i = 0; i < s->n_plp; i++) {
        hone_request *r = s->plp_req[i];
        int64_t p = s->plp_pos[i];
        /* recomputed after a preemption: the same values (logits do not depend on the batch),
         * and readers may hold them already (hone_request_prompt_logprobs): not written again */
        if (r->completion_tokens > 0) continue;
        hone_sampler_logprobs(s->plogits + (int64_t)i * s->n_vocab, (int32_t)s->n_vocab, r->toks[p + 1],
                              r->top_lp, &r->plp[p + 1]);
    }
}

/* Under mu, in take_token: the sampled token's logprobs join r's list. */
static void outputs_take(hone_request *r)
{
    if (!r->want_lp) return;
    if (r->n_lp == r->lp_cap) {
        int64_t cap = r->lp_cap ? r->lp_cap * 2 : 64;
        hone_token_logprob *lp = realloc(r->lp, (size_t)cap * sizeof *lp);
        if (!lp) return; /* out of memory: the list stops growing (the text goes on) */
        r->lp = lp;
        r->lp_cap = cap;
    }
    r->lp[r->n_lp++] = r->lp_pending;
}

/* Under mu, after a step: a request that generates nothing (max_tokens 0: an embedding, or an
 * echo of prompt logprobs) is finished once its prompt is computed. */
static int outputs_finish_prompt_only(hone_scheduler *s, hone_request *r)
{
    if (r->max_tokens > 0 || r->seq.n_tokens < r->n_toks) return 0;
    if (r->emb_sum) {
        double norm = 0.0, rows = r->emb_rows > 0 ? (double)r->emb_rows : 1.0;
        for (int64_t d = 0; d < s->dim; d++) norm += (r->emb_sum[d] / rows) * (r->emb_sum[d] / rows);
        norm = sqrt(norm);
        for (int64_t d = 0; d < s->dim; d++)
            r->emb[d] = (float)(norm > 0 ? r->emb_sum[d] / rows / norm : 0.0);
    }
    finish(s, r, HONE_FINISH_LENGTH, HONE_REQUEST_ERR_NONE, NULL);
    return 1;
}

static void admit(hone_scheduler *s)
{
    while (s->qhead && s->n_running < s->o.max_batch) {
        hone_request *r = s->qhead;
        int64_t full = (r->n_toks - 1) / s->bs; /* the last token is always computed */
        int64_t m = s->pc && !reads_all_rows(r) ? hone_prefix_cache_match(s->pc, r->toks, full, s->match) : 0;
        int64_t need = blocks_for(s, r->n_toks + 1) - m;
        int64_t idle = s->pc ? hone_prefix_cache_n_idle(s->pc) : 0;
        for (int64_t i = 0; i < m; i++) idle -= hone_prefix_cache_is_idle(s->pc, s->match[i]);
        int64_t avail = hone_kv_cache_n_free(s->kv) + idle;
        if (s->n_running > 0 && need + s->n_running > avail) break;
        queue_remove(s, r);
        if (m && hone_prefix_cache_attach(s->pc, &r->seq, s->match, m) != 0) m = 0;
        memcpy(r->chain, s->match, (size_t)m * sizeof *r->chain);
        r->n_chain = m;
        r->chain_stopped = s->pc == NULL;
        if (!r->admitted_once) {
            r->admitted_once = 1;
            r->t_admit = now_s();
            hist_observe(&s->st.queue_time, r->t_admit - r->t_submit);
            r->cached_tokens = m * s->bs;
            if (s->pc) {
                s->st.prefix_hit_blocks += (uint64_t)m;
                s->st.prefix_miss_blocks += (uint64_t)(full - m);
                s->st.prefix_hit_tokens += (uint64_t)(m * s->bs);
            }
        }
        r->state = ST_RUNNING;
        outputs_on_admit(s, r);
        s->running[s->n_running++] = r;
    }
}

/* Sweeps cancelled and expired requests. */
static void sweep(hone_scheduler *s, double now)
{
    for (hone_request *r = s->qhead, *next; r; r = next) {
        next = r->qnext;
        if (r->cancel) finish(s, r, HONE_FINISH_ERROR, HONE_REQUEST_ERR_CANCELLED, "cancelled");
        else if (now > r->deadline) {
            if (r->completion_tokens > 0) finish(s, r, HONE_FINISH_LENGTH, HONE_REQUEST_ERR_NONE, NULL);
            else finish(s, r, HONE_FINISH_ERROR, HONE_REQUEST_ERR_TIMEOUT,
                        "the request's time limit passed before it produced a token");
        }
    }
    for (int i = s->n_running - 1; i >= 0; i--) {
        hone_request *r = s->running[i];
        if (r->cancel) finish(s, r, HONE_FINISH_ERROR, HONE_REQUEST_ERR_CANCELLED, "cancelled");
        else if (now > r->deadline) {
            if (r->completion_tokens > 0) finish(s, r, HONE_FINISH_LENGTH, HONE_REQUEST_ERR_NONE, NULL);
            else finish(s, r, HONE_FINISH_ERROR, HONE_REQUEST_ERR_TIMEOUT,
                        "the request's time limit passed before it produced a token");
        }
    }
}

/* ---- speculative decoding (engine/spec.h) ---- */

/* Gives each decoding request with speculation on its draft rows for this step, within budget
 * rows in all: prompt lookup over its tokens, the length by its acceptance estimate. The drafts
 * go to toks[n_toks ..), the rows after the decode row. Returns the rows given. */
static int64_t plan_drafts(hone_scheduler *s, int64_t budget)
{
    int64_t given = 0, dfree = s->dkv ? hone_kv_cache_n_free(s->dkv) : 0;
    for (int i = 0; i < s->n_running; i++) {
        hone_request *r = s->running[i];
        r->n_draft = 0;
        /* no drafts where a step's outputs are one row's: logprobs, prompt logprobs, embeddings */
        /* a grammar masks each position by the tokens before it: its drafts would be checked
         * against unmasked draws, so a constrained request does not speculate */
        if (!r->spec || r->rows != 1 || r->want_lp || r->want_plp || r->embed != HONE_POOLING_NONE ||
            r->grammar || r->gm)
            continue;
        int64_t cap = s->o.spec_k;
        if (cap > r->max_tokens - r->completion_tokens - 1) cap = r->max_tokens - r->completion_tokens - 1;
        if (cap > s->n_ctx - r->n_toks) cap = s->n_ctx - r->n_toks;
        if (cap > budget - given) cap = budget - given;
        if (r->spec == HONE_SPEC_DRAFT && cap > s->dn_ctx - r->n_toks) cap = s->dn_ctx - r->n_toks;
        if (cap <= 0) continue;
        if (r->spec == HONE_SPEC_SELF || r->spec == HONE_SPEC_DRAFT) {
            /* drafted by spec_model_drafts once the rows are planned; after HONE_SPEC_PROBE_AFTER
             * steps of k = 0, one draft token (only drafting moves alpha) */
            int64_t k = hone_spec_choose_k(r->alpha, cap, NULL);
            if (k > 0 || ++r->spec_idle >= HONE_SPEC_PROBE_AFTER) {
                r->spec_idle = 0;
                if (!k) k = 1;
            }
            if (k && r->spec == HONE_SPEC_DRAFT) { /* its draft sequence must fit the draft's pool */
                int64_t need = (r->n_toks - 1 + k + s->dbs - 1) / s->dbs - r->dseq.n_blocks;
                if (need > dfree) k = 0;
                else if (need > 0) dfree -= need;
            }
            r->n_draft = k;
            r->rows += r->n_draft;
            given += r->n_draft;
            continue;
        }
        int64_t avail = hone_spec_lookup(r->toks, r->n_toks, 2, 4, cap, r->toks + r->n_toks);
        if (r->shadow >= 0) { /* last step's unverified draft against the token that came */
            r->alpha = hone_spec_observe(r->alpha, r->shadow == r->toks[r->n_toks - 1]);
            r->shadow = -1;
        }
        int64_t k = avail ? hone_spec_choose_k(r->alpha, avail, NULL) : 0;
        if (avail && !k) r->shadow = r->toks[r->n_toks];
        r->n_draft = k;
        r->rows += k;
        given += k;
    }
    return given;
}

/* Verifies r's drafts against this step's logits rows (not under mu): row j decides the token
 * at position n_toks + j with that position's draw; a draft is accepted while it equals it, and
 * the first token that differs (or the one after the last draft) is the target's own. The
 * rejected rows' KV is truncated before any block of them can reach the prefix cache. */
static void spec_verify(hone_scheduler *s, hone_request *r)
{
    int64_t a = 0;
    r->n_emit = 0;
    r->spec_accepted = 0;
    for (int64_t j = 0; j <= r->n_draft; j++) {
        const float *row = s->logits + (r->logit_slot + j) * s->n_vocab;
        int ok = 0;
        int32_t t = r->spec_dist && j < r->n_draft
                        ? hone_spec_decide_distribution(r->smp, row, r->n_toks + j, r->toks[r->n_toks + j],
                                                        r->q ? r->q + j * s->n_vocab : NULL, s->dprobs, &ok)
                        : hone_sampler_sample_at(r->smp, row, r->n_toks + j);
        r->emit[r->n_emit++] = t;
        if (t < 0) break;
        hone_sampler_accept(r->smp, t);
        if (j == r->n_draft) break;
        if (!r->spec_dist) ok = t == r->toks[r->n_toks + j];
        r->alpha = hone_spec_observe(r->alpha, ok);
        if (!ok) break;
        a++;
    }
    r->spec_accepted = a;
    hone_kv_cache_truncate(s->kv, &r->seq, r->n_toks + a);
    if (r->spec == HONE_SPEC_DRAFT && r->dseq.n_tokens > r->n_toks + a)
        hone_kv_cache_truncate(s->dkv, &r->dseq, r->n_toks + a);
}

/* The drafts of this step's planned rows by a model (not under mu): round d runs draft row d of
 * every request drafting with `kind` as one batch, each row's logits proposing the next draft
 * token as hone_spec proposes it: exact mode, the request sampler's rule with the position's
 * draw; distribution mode, a sample of the draft's distribution q (kept for the acceptance
 * test). HONE_SPEC_SELF: the target's first self_layers layers, its final norm and head
 * (hone_backend_forward_batch_layers) on the request's own sequence (the K/V of those layers
 * are what the verifying pass stores for the same tokens), truncated back afterwards.
 * HONE_SPEC_DRAFT: the draft model on the request's draft sequence, which spec_verify truncates
 * to what was accepted. The drafts go to the request's toks and to the batch's rows after its
 * decode row. */
static int spec_rounds(hone_scheduler *s, int kind)
{
    int64_t row0[4096];
    int rc = 0, any = 0;
    for (int i = 0, n0 = 0; i < s->n_running; n0 += (int)s->running[i]->rows, i++) {
        row0[i] = n0;
        any |= s->running[i]->spec == kind && s->running[i]->n_draft > 0;
    }
    if (!any) return 0;
    for (int64_t d = 0; !rc; d++) {
        int m = 0;
        for (int i = 0; i < s->n_running; i++) {
            hone_request *r = s->running[i];
            if (r->spec != kind || r->n_draft <= d) continue;
            s->d_tok[m] = r->toks[r->n_toks - 1 + d]; /* the decode row's token, then draft d - 1 */
            s->d_pos[m] = (int32_t)(r->n_toks - 1 + d);
            s->d_seqs[m] = kind == HONE_SPEC_DRAFT ? &r->dseq : &r->seq;
            s->d_out[m] = s->dlogits + m * s->n_vocab;
            s->d_req[m] = r;
            m++;
        }
        if (!m) break;
        hone_batch b = {m, s->d_tok, s->d_seqs, s->d_pos, s->d_out, NULL};
        if (kind == HONE_SPEC_DRAFT) {
            rc = hone_backend_forward_batch(s->dbe, &b);
            s->d_batches++;
            s->d_rows += (uint64_t)m;
        } else {
            pthread_mutex_lock(&s->prof_mu);
            rc = hone_backend_forward_batch_layers(s->be, &b, s->self_layers);
            pthread_mutex_unlock(&s->prof_mu);
        }
        for (int j = 0; !rc && j < m; j++) {
            hone_request *r = s->d_req[j];
            int64_t P = r->n_toks + d; /* the drafted token's position */
            int32_t t = r->spec_dist ? hone_spec_propose_distribution(r->smp, s->d_out[j], P, r->q + d * s->n_vocab)
                                     : hone_sampler_sample_at(r->smp, s->d_out[j], P);
            if (t < 0) t = r->toks[r->n_toks - 1 + d]; /* cannot happen; any token keeps the rows defined */
            r->toks[P] = t;
        }
    }
    for (int i = 0; i < s->n_running; i++) {
        hone_request *r = s->running[i];
        if (r->spec != kind || r->n_draft <= 0) continue;
        if (kind == HONE_SPEC_SELF) hone_kv_cache_truncate(s->kv, &r->seq, r->n_toks - 1);
        for (int64_t d = 0; d < r->n_draft; d++) s->b_tokens[row0[i] + 1 + d] = r->toks[r->n_toks + d];
    }
    return rc;
}

/* The draft model's catch-up (not under mu): each drafting request's draft sequence is brought
 * up to toks[0 .. n_toks - 1) (all but its decode row's token: the prompt on its first step,
 * then the one or two tokens the last step accepted beyond its drafts), in batches of at most
 * dcap rows over every such request, without logits. */
static int spec_draft_catch_up(hone_scheduler *s)
{
    for (;;) {
        int64_t m = 0;
        for (int i = 0; i < s->n_running && m < s->dcap; i++) {
            hone_request *r = s->running[i];
            if (r->spec != HONE_SPEC_DRAFT || r->n_draft <= 0) continue;
            if (r->dseq.n_tokens > r->n_toks - 1) hone_kv_cache_truncate(s->dkv, &r->dseq, r->n_toks - 1);
            for (int64_t p = r->dseq.n_tokens; p < r->n_toks - 1 && m < s->dcap; p++, m++) {
                s->dc_tok[m] = r->toks[p];
                s->dc_pos[m] = (int32_t)p;
                s->dc_seqs[m] = &r->dseq;
            }
        }
        if (!m) return 0;
        hone_batch b = {m, s->dc_tok, s->dc_seqs, s->dc_pos, s->dc_out, NULL};
        int rc = hone_backend_forward_batch(s->dbe, &b);
        s->d_batches++;
        s->d_rows += (uint64_t)m;
        if (rc) return rc;
    }
}

/* Every model draft of this step (self-speculation, then the draft model). */
static int spec_model_drafts(hone_scheduler *s)
{
    int rc = spec_rounds(s, HONE_SPEC_SELF);
    if (!rc && s->dbe && !(rc = spec_draft_catch_up(s))) rc = spec_rounds(s, HONE_SPEC_DRAFT);
    return rc;
}

/* Decides every running request's rows for this step and makes room for their blocks
 * (evicting idle prefix blocks, then preempting the youngest). Returns the batch's rows. */
static int64_t plan(hone_scheduler *s)
{
    for (;;) {
        int64_t budget = s->o.step_tokens, plp_left = PLP_ROWS;
        for (int i = 0; i < s->n_running; i++) {
            hone_request *r = s->running[i];
            r->rows = r->n_toks - r->seq.n_tokens == 1 ? 1 : 0;
            budget -= r->rows;
        }
        budget -= plan_drafts(s, budget);
        for (int i = 0; i < s->n_running; i++) {
            hone_request *r = s->running[i];
            int64_t rem = r->n_toks - r->seq.n_tokens;
            if (rem > 1) {
                r->rows = rem < budget ? rem : budget;
                r->rows = outputs_cap_rows(s, r, r->rows, &plp_left);
                budget -= r->rows;
            }
        }
        int64_t need = 0;
        for (int i = 0; i < s->n_running; i++) {
            hone_request *r = s->running[i];
            int64_t b = blocks_for(s, r->seq.n_tokens + r->rows) - r->seq.n_blocks;
            if (b > 0) need += b;
        }
        if (need > hone_kv_cache_n_free(s->kv) && s->pc) hone_prefix_cache_evict(s->pc, need);
        if (need <= hone_kv_cache_n_free(s->kv)) break;
        if (s->n_running > 1) {
            preempt(s, s->running[s->n_running - 1]);
            continue;
        }
        if (s->n_running == 1)
            finish(s, s->running[0], HONE_FINISH_ERROR, HONE_REQUEST_ERR_INTERNAL,
                   "KV cache full: the request does not fit even alone (raise --kv-blocks)");
        return 0;
    }
    int64_t n = 0, k = 0;
    s->n_plp = 0;
    s->any_hidden = 0;
    for (int i = 0; i < s->n_running; i++) {
        hone_request *r = s->running[i];
        r->logit_slot = -1;
        int64_t base = r->seq.n_tokens;
        for (int64_t j = 0; j < r->rows; j++, n++) {
            s->b_tokens[n] = r->toks[base + j];
            s->b_pos[n] = (int32_t)(base + j);
            s->b_seqs[n] = &r->seq;
            s->b_out[n] = NULL;
            s->b_hidden[n] = NULL;
        }
        outputs_plan(s, r, n - r->rows);
        if (r->n_draft > 0) { /* every row's logits: the decode row's and each draft's */
            r->logit_slot = k;
            for (int64_t j = 0; j < r->rows; j++) s->b_out[n - r->rows + j] = s->logits + (k++) * s->n_vocab;
        } else if (r->rows && base + r->rows == r->n_toks && r->max_tokens > 0) {
            s->b_out[n - 1] = s->logits + k * s->n_vocab;
            r->logit_slot = k++;
        }
    }
    return n;
}

/* Caches the full blocks r has completed (not under mu: the prefix cache is engine-only). */
static void register_blocks(hone_scheduler *s, hone_request *r)
{
    while (!r->chain_stopped && (r->n_chain + 1) * s->bs <= r->seq.n_tokens) {
        int64_t j = r->n_chain;
        int32_t e;
        int rc = hone_prefix_cache_insert(s->pc, j ? r->chain[j - 1] : -1, r->toks + j * s->bs,
                                          r->seq.blocks[j], &e);
        if (rc != 0) {
            r->chain_stopped = 1; /* an equal block is cached already (or an error) */
            break;
        }
        r->chain[r->n_chain++] = e;
    }
}

/* ---- structured output (engine thread): the grammar's mask before sampling, its state
 * advanced by the sampled token after ---- */

#define GRAMMAR_NO_TOKEN (-2) /* r->sampled when the mask allowed nothing */

/* Sets the logits of the tokens r's grammar does not allow here to -inf. -1 when it allows
 * none (or the mask failed): the request cannot go on. */
static int grammar_mask_row(hone_scheduler *s, hone_request *r, float *row)
{
    int64_t allowed = 0;
    const uint64_t *mask = hone_grammar_matcher_mask(r->gm, s->trie, &allowed);
    if (!mask || allowed == 0) return -1;
    hone_grammar_mask_apply(mask, row, s->n_vocab);
    return 0;
}

/* r's matcher, sharing the memo of an equal grammar seen before (the cache keeps the
 * GRAMMAR_CACHE most recent; an entry no request uses any more may be replaced). */
static int grammar_matcher(hone_scheduler *s, hone_request *r)
{
    uint64_t h = hone_grammar_hash(r->grammar);
    int free_slot = -1; /* an empty entry, else the least recently used one no request uses */
    s->gcache_clock++;
    for (int i = 0; i < GRAMMAR_CACHE; i++) {
        if (!s->gcache[i].g) {
            if (free_slot < 0 || s->gcache[free_slot].g) free_slot = i;
            continue;
        }
        if (s->gcache[i].hash == h && hone_grammar_equal(s->gcache[i].g, r->grammar)) {
            s->gcache[i].used = s->gcache_clock;
            return hone_grammar_matcher_new_shared(&r->gm, s->gcache[i].memo);
        }
        if (hone_grammar_memo_refs(s->gcache[i].memo) == 1 &&
            (free_slot < 0 || (s->gcache[free_slot].g && s->gcache[i].used < s->gcache[free_slot].used)))
            free_slot = i;
    }
    if (free_slot < 0) return hone_grammar_matcher_new(&r->gm, r->grammar); /* a memo of its own */
    hone_grammar_memo *memo;
    int rc = hone_grammar_memo_new(&memo, r->grammar);
    if (rc) return rc;
    hone_grammar_memo_free(s->gcache[free_slot].memo);
    hone_grammar_free(s->gcache[free_slot].g);
    s->gcache[free_slot].g = r->grammar; /* the cache owns it now; the request keeps a borrow */
    s->gcache[free_slot].memo = memo;
    s->gcache[free_slot].hash = h;
    s->gcache[free_slot].used = s->gcache_clock;
    r->grammar = NULL;
    return hone_grammar_matcher_new_shared(&r->gm, memo);
}

/* Samples r's next token from row under its grammar, when it has one. */
static int32_t grammar_sample(hone_scheduler *s, hone_request *r, float *row)
{
    if (!r->gm && !r->grammar) return hone_sampler_sample_at(r->smp, row, r->n_toks);
    if (!r->gm && grammar_matcher(s, r)) return GRAMMAR_NO_TOKEN;
    /* logprobs are the model's distribution before any mask (OpenAI's definition; the sampler's
     * penalties and bias do not touch them either): outputs_collect reads the raw row after
     * this, so with logprobs the mask goes on a copy */
    if (r->want_lp) {
        memcpy(s->gmasked, row, (size_t)s->n_vocab * sizeof *row);
        row = s->gmasked;
    }
    if (grammar_mask_row(s, r, row)) return GRAMMAR_NO_TOKEN;
    int32_t t = hone_sampler_sample_at(r->smp, row, r->n_toks);
    if (t >= 0 && hone_grammar_matcher_accept_token(r->gm, s->trie, t)) return GRAMMAR_NO_TOKEN;
    return t;
}

/* At submission: r's copy of the grammar (its matcher comes at the first sampling, on the
 * engine thread); the trie on first use. */
static int grammar_attach(hone_scheduler *s, hone_request *r, const hone_grammar *g)
{
    int rc = 0;
    pthread_mutex_lock(&s->trie_mu);
    if (!s->trie) rc = hone_token_trie_new(&s->trie, s->tok);
    pthread_mutex_unlock(&s->trie_mu);
    if (rc) return rc;
    hone_grammar_matcher *probe; /* the start state must exist: an error now is a 400, not a failed step */
    if ((rc = hone_grammar_clone(&r->grammar, g)) || (rc = hone_grammar_matcher_new(&probe, r->grammar))) return rc;
    hone_grammar_matcher_free(probe);
    return 0;
}

/* Takes r's new token: usage, latency, text, and whether it is finished. */
static void take_token(hone_scheduler *s, hone_request *r, double now)
{
    int32_t t = r->sampled;
    if (t < 0) {
        finish(s, r, HONE_FINISH_ERROR, HONE_REQUEST_ERR_INTERNAL,
               t == GRAMMAR_NO_TOKEN ? "the output grammar admits no token of the vocabulary here"
                                     : "sampling failed (NaN logits)");
        return;
    }
    r->toks[r->n_toks++] = t;
    r->completion_tokens++;
    if (!hone_tokenizer_is_eog(s->tok, t) || r->ignore_eos) outputs_take(r);
    s->st.generated_tokens++;
    if (r->completion_tokens == 1) {
        hist_observe(&s->st.ttft, now - r->t_submit);
        r->t_first = now;
    }
    else hist_observe(&s->st.itl, now - r->t_last);
    r->t_last = now;
    if (!r->ignore_eos && hone_tokenizer_is_eog(s->tok, t)) {
        finish(s, r, HONE_FINISH_STOP, HONE_REQUEST_ERR_NONE, NULL);
        return;
    }
    const char *p;
    size_t n = 0;
    size_t old = r->text_len;
    if (hone_detok_push(r->dt, t, &p, &n) == 0 && n) {
        if (text_append(r, p, n) != 0) {
            finish(s, r, HONE_FINISH_ERROR, HONE_REQUEST_ERR_INTERNAL, "out of memory");
            return;
        }
        if (stop_scan(r, old)) {
            /* the stop text and anything after it are dropped: no flush */
            r->emit_len = r->text_len;
            finish(s, r, HONE_FINISH_STOP, HONE_REQUEST_ERR_NONE, "");
            return;
        }
    }
    if (r->gm && hone_grammar_matcher_done(r->gm)) { /* the structured output is complete */
        finish(s, r, HONE_FINISH_STOP, HONE_REQUEST_ERR_NONE, NULL);
        return;
    }
    if (r->completion_tokens >= r->max_tokens || r->n_toks - 1 >= s->n_ctx)
        finish(s, r, HONE_FINISH_LENGTH, HONE_REQUEST_ERR_NONE, NULL);
}

static void publish_kv_stats(hone_scheduler *s)
{
    s->st.running = s->n_running;
    s->st.queued = s->n_queued;
    s->st.kv_blocks_used = hone_kv_cache_n_blocks(s->kv) - hone_kv_cache_n_free(s->kv);
    s->st.prefix_entries = s->pc ? hone_prefix_cache_n_entries(s->pc) : 0;
    s->st.prefix_idle = s->pc ? hone_prefix_cache_n_idle(s->pc) : 0;
}

static void *engine_main(void *arg)
{
    hone_scheduler *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        sweep(s, now_s());
        if (s->stop) {
            while (s->n_running)
                finish(s, s->running[0], HONE_FINISH_ERROR, HONE_REQUEST_ERR_SHUTDOWN,
                       "the server is shutting down");
            while (s->qhead)
                finish(s, s->qhead, HONE_FINISH_ERROR, HONE_REQUEST_ERR_SHUTDOWN,
                       "the server is shutting down");
            publish_kv_stats(s);
            break;
        }
        admit(s);
        int64_t n = s->n_running ? plan(s) : 0;
        publish_kv_stats(s);
        if (n == 0) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 200 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
            if (!s->qhead || s->n_running) pthread_cond_timedwait(&s->work_cv, &s->mu, &ts);
            if (s->hook && !s->stop) { /* an idle step boundary */
                hone_scheduler_step_hook hook = s->hook;
                void *hu = s->hook_user;
                hone_scheduler_step idle = {0, 0, 0, 0.0, 0};
                pthread_mutex_unlock(&s->mu);
                hook(hu, &idle);
                pthread_mutex_lock(&s->mu);
            }
            continue;
        }
        int n_seqs = 0;
        for (int i = 0; i < s->n_running; i++) n_seqs += s->running[i]->rows > 0;
        hone_scheduler_step_hook hook = s->hook;
        void *hook_user = s->hook_user;
        pthread_mutex_unlock(&s->mu);
        double t_step = now_s();

        hone_batch b = {n, s->b_tokens, s->b_seqs, s->b_pos, s->b_out, s->any_hidden ? s->b_hidden : NULL};
        const hone_scheduler_observer *ob = &s->o.observer;
        int rc = spec_model_drafts(s);
        pthread_mutex_lock(&s->prof_mu);
        if (ob->step_begin) ob->step_begin(ob->user, n, n_seqs);
        if (!rc) rc = hone_backend_forward_batch(s->be, &b);
        if (ob->step_end) ob->step_end(ob->user);
        pthread_mutex_unlock(&s->prof_mu);
        if (hook) { /* a step boundary: the step is over, the next has not begun */
            hone_scheduler_step last = {n, n_seqs, n == n_seqs, now_s() - t_step, rc};
            hook(hook_user, &last);
        }
        char msg[200] = "";
        if (rc) snprintf(msg, sizeof msg, "engine step failed: %s", hone_error_last());
        for (int i = 0, n0 = 0; !rc && i < s->n_running; n0 += s->running[i]->rows, i++) {
            hone_request *r = s->running[i];
            if (r->n_draft > 0 && r->logit_slot >= 0) spec_verify(s, r); /* rolls back first */
            if (s->pc && r->rows) register_blocks(s, r);
            if (r->logit_slot >= 0 && r->n_draft == 0) {
                /* the position's draw: the same token with or without speculation (and with a
                 * grammar, from the masked row) */
                r->sampled = grammar_sample(s, r, s->logits + r->logit_slot * s->n_vocab);
                if (r->sampled >= 0) hone_sampler_accept(r->smp, r->sampled);
            }
            outputs_collect(s, r, n0);
        }
        if (!rc) outputs_prompt_rows(s);

        pthread_mutex_lock(&s->mu);
        s->st.spec_draft_batches += s->d_batches;
        s->st.spec_draft_rows += s->d_rows;
        s->d_batches = s->d_rows = 0;
        s->st.steps++;
        s->st.rows += (uint64_t)n;
        hist_observe(&s->st.batch, n_seqs);
        double now = now_s();
        for (int i = s->n_running - 1; i >= 0; i--) {
            hone_request *r = s->running[i];
            if (rc && r->rows) finish(s, r, HONE_FINISH_ERROR, HONE_REQUEST_ERR_INTERNAL, msg);
        }
        /* oldest first, so that finishing (which removes from running) keeps order */
        for (int i = 0; !rc && i < s->n_running;) {
            hone_request *r = s->running[i];
            int before = s->n_running;
            if (r->logit_slot >= 0 && r->n_draft > 0) {
                r->logit_slot = -1;
                int64_t ne = r->n_emit, nd = r->n_draft;
                s->st.spec_passes++;
                s->st.spec_drafted += (uint64_t)nd;
                s->st.spec_accepted += (uint64_t)r->spec_accepted;
                s->st.spec_emitted += (uint64_t)ne;
                r->n_draft = 0;
                /* each emitted token in order, while the request runs (finishing frees r) */
                for (int64_t j = 0; j < ne && s->n_running == before; j++) {
                    r->sampled = r->emit[j];
                    take_token(s, r, now);
                }
            } else if (r->logit_slot >= 0) {
                r->logit_slot = -1;
                take_token(s, r, now);
            } else if (r->rows) {
                outputs_finish_prompt_only(s, r);
            }
            if (s->n_running == before) i++;
        }
        pthread_cond_broadcast(&s->out_cv);
        for (int i = 0; i < s->n_running; i++) { /* news: text to send, or tokens (logprobs, a prompt computed) */
            hone_request *r = s->running[i];
            if (r->notify && (r->emit_len != r->notified_len || r->completion_tokens != r->notified_tokens)) {
                r->notified_len = r->emit_len;
                r->notified_tokens = r->completion_tokens;
                r->notify(r->notify_user);
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- public ---- */

int hone_scheduler_new(hone_scheduler **out, hone_backend *be, const hone_tokenizer *tok,
                       const hone_scheduler_opts *opts)
{
    hone_scheduler_opts dflt = HONE_SCHEDULER_OPTS_INIT;
    int rc = 0;
    *out = NULL;
    hone_scheduler *s = calloc(1, sizeof *s);
    if (!s) return hone_error_set(HONE_ENOMEM, "out of memory");
    s->o = opts ? *opts : dflt;
    if (s->o.max_batch < 1 || s->o.max_batch > 4096 || s->o.max_queue < 0 || s->o.timeout_s <= 0 ||
        s->o.step_tokens > (1 << 20)) {
        free(s);
        return hone_error_set(HONE_EINVAL, "scheduler options out of range");
    }
    if (s->o.step_tokens < s->o.max_batch) s->o.step_tokens = s->o.max_batch;
    s->be = be;
    s->kv = hone_backend_kv(be);
    s->tok = tok;
    s->n_vocab = hone_backend_n_vocab(be);
    s->n_ctx = hone_backend_n_ctx(be);
    s->bs = hone_kv_cache_block_size(s->kv);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->prof_mu, NULL);
    pthread_mutex_init(&s->trie_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->work_cv, &ca);
    pthread_cond_init(&s->out_cv, &ca);
    pthread_condattr_destroy(&ca);
    int64_t st = s->o.step_tokens;
    s->running = calloc((size_t)s->o.max_batch, sizeof *s->running);
    s->b_tokens = malloc((size_t)st * sizeof *s->b_tokens);
    s->b_pos = malloc((size_t)st * sizeof *s->b_pos);
    s->b_seqs = malloc((size_t)st * sizeof *s->b_seqs);
    s->b_out = malloc((size_t)st * sizeof *s->b_out);
    if (s->o.spec_k <= 0) s->o.spec_k = 8;
    if (s->o.spec_k > 64) s->o.spec_k = 64;
    /* a decode row and up to spec_k draft rows per request */
    s->logits = malloc((size_t)((int64_t)s->o.max_batch * (s->o.spec_k + 1) * s->n_vocab) * sizeof *s->logits);
    s->match = malloc((size_t)(s->n_ctx / s->bs + 2) * sizeof *s->match);
    if (s->o.speculate < HONE_SPEC_NONE || s->o.speculate > HONE_SPEC_SELF) {
        rc = hone_error_set(HONE_EINVAL, "scheduler: speculate must be none, lookup, self or draft");
        goto fail;
    }
    if (s->o.speculate == HONE_SPEC_DRAFT && !s->o.draft) {
        rc = hone_error_set(HONE_EINVAL, "scheduler: speculate draft needs a draft model (serve --draft MODEL)");
        goto fail;
    }
    if (s->o.draft) {
        if (hone_backend_n_vocab(s->o.draft) != s->n_vocab) {
            rc = hone_error_set(HONE_EINVAL, "scheduler: the draft's vocabulary (%lld) is not the target's (%lld)",
                                (long long)hone_backend_n_vocab(s->o.draft), (long long)s->n_vocab);
            goto fail;
        }
        s->dbe = s->o.draft;
        s->dkv = hone_backend_kv(s->dbe);
        s->dbs = hone_kv_cache_block_size(s->dkv);
        s->dn_ctx = hone_backend_n_ctx(s->dbe);
        s->dcap = st;
        s->dc_tok = malloc((size_t)s->dcap * sizeof *s->dc_tok);
        s->dc_pos = malloc((size_t)s->dcap * sizeof *s->dc_pos);
        s->dc_seqs = malloc((size_t)s->dcap * sizeof *s->dc_seqs);
        s->dc_out = calloc((size_t)s->dcap, sizeof *s->dc_out);
        if (!s->dc_tok || !s->dc_pos || !s->dc_seqs || !s->dc_out) {
            rc = hone_error_set(HONE_ENOMEM, "out of memory for the scheduler");
            goto fail;
        }
    }
    if (s->o.spec_mode != HONE_SPEC_EXACT && s->o.spec_mode != HONE_SPEC_DISTRIBUTION) {
        rc = hone_error_set(HONE_EINVAL, "scheduler: spec_mode must be exact or distribution");
        goto fail;
    }
    {
        int64_t nl = hone_model_hparams(hone_backend_model(be))->n_layers;
        s->self_layers = s->o.self_layers > 0 ? s->o.self_layers : nl / 2;
        if (s->self_layers < 1 || s->self_layers >= nl) {
            rc = hone_error_set(HONE_EINVAL, "scheduler: self_layers %lld outside 1 .. %lld", (long long)s->self_layers,
                                (long long)(nl - 1));
            goto fail;
        }
    }
    s->self_ok = hone_backend_device(be) == HONE_DEVICE_CPU;
    if (s->o.speculate == HONE_SPEC_SELF && !s->self_ok) {
        rc = hone_error_set(HONE_EUNSUPPORTED, "scheduler: self-speculation runs on the CPU backend only");
        goto fail;
    }
    s->dlogits = malloc((size_t)((int64_t)s->o.max_batch * s->n_vocab) * sizeof *s->dlogits);
    s->d_tok = malloc((size_t)s->o.max_batch * sizeof *s->d_tok);
    s->d_pos = malloc((size_t)s->o.max_batch * sizeof *s->d_pos);
    s->d_seqs = malloc((size_t)s->o.max_batch * sizeof *s->d_seqs);
    s->d_out = malloc((size_t)s->o.max_batch * sizeof *s->d_out);
    s->d_req = malloc((size_t)s->o.max_batch * sizeof *s->d_req);
    s->dprobs = malloc((size_t)s->n_vocab * sizeof *s->dprobs);
    if (!s->dlogits || !s->d_tok || !s->d_pos || !s->d_seqs || !s->d_out || !s->d_req || !s->dprobs) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory for the scheduler");
        goto fail;
    }
    s->dim = hone_model_hparams(hone_backend_model(be))->dim;
    s->plogits = malloc((size_t)(PLP_ROWS * s->n_vocab) * sizeof *s->plogits);
    s->plp_req = malloc(PLP_ROWS * sizeof *s->plp_req);
    s->plp_pos = malloc(PLP_ROWS * sizeof *s->plp_pos);
    s->hidden = malloc((size_t)(st * s->dim) * sizeof *s->hidden);
    s->b_hidden = malloc((size_t)st * sizeof *s->b_hidden);
    s->gmasked = malloc((size_t)s->n_vocab * sizeof *s->gmasked);
    if (!s->plogits || !s->plp_req || !s->plp_pos || !s->hidden || !s->b_hidden || !s->gmasked) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory for the scheduler");
        goto fail;
    }
    if (!s->running || !s->b_tokens || !s->b_pos || !s->b_seqs || !s->b_out || !s->logits ||
        !s->match) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory for the scheduler");
        goto fail;
    }
    if (s->o.prefix_cache && (rc = hone_prefix_cache_new(&s->pc, s->kv))) goto fail;
    static const double ttft_le[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
    static const double itl_le[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
    static const double batch_le[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
    hist_init(&s->st.ttft, ttft_le, 12);
    hist_init(&s->st.itl, itl_le, 11);
    hist_init(&s->st.batch, batch_le, 10);
    static const double e2e_le[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300};
    static const double len_le[] = {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768};
    hist_init(&s->st.e2e, e2e_le, 13);
    hist_init(&s->st.queue_time, e2e_le, 13);
    hist_init(&s->st.prefill_time, ttft_le, 12);
    hist_init(&s->st.decode_time, e2e_le, 13);
    hist_init(&s->st.prompt_len, len_le, 14);
    hist_init(&s->st.gen_len, len_le, 14);
    s->st.kv_blocks_total = hone_kv_cache_n_blocks(s->kv);
    s->st.kv_block_size = s->bs;
    if (pthread_create(&s->thread, NULL, engine_main, s) != 0) {
        rc = hone_error_set(HONE_EINTERNAL, "cannot start the engine thread");
        goto fail;
    }
    s->thread_started = 1;
    *out = s;
    return 0;
fail:
    hone_scheduler_free(s);
    return rc;
}

void hone_scheduler_shutdown(hone_scheduler *s)
{
    if (!s->thread_started) return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->thread_started = 0;
}

void hone_scheduler_free(hone_scheduler *s)
{
    if (!s) return;
    hone_scheduler_shutdown(s);
    hone_prefix_cache_free(s->pc);
    free(s->running);
    free(s->b_tokens);
    free(s->b_pos);
    free(s->b_seqs);
    free(s->b_out);
    free(s->logits);
    free(s->dlogits);
    free(s->d_tok);
    free(s->d_pos);
    free(s->d_seqs);
    free(s->d_out);
    free(s->d_req);
    free(s->dprobs);
    free(s->dc_tok);
    free(s->dc_pos);
    free(s->dc_seqs);
    free(s->dc_out);
    free(s->match);
    free(s->plogits);
    free(s->plp_req);
    free(s->plp_pos);
    free(s->hidden);
    free(s->b_hidden);
    free(s->gmasked);
    pthread_cond_destroy(&s->work_cv);
    pthread_cond_destroy(&s->out_cv);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->prof_mu);
    pthread_mutex_destroy(&s->trie_mu);
    hone_token_trie_free(s->trie);
    for (int i = 0; i < GRAMMAR_CACHE; i++) {
        hone_grammar_memo_free(s->gcache[i].memo);
        hone_grammar_free(s->gcache[i].g);
    }
    free(s);
}

int hone_scheduler_submit(hone_scheduler *s, const hone_request_params *p, hone_request **out)
{
    *out = NULL;
    if (p->n_prompt < 1 || p->n_prompt >= s->n_ctx)
        return hone_error_set(HONE_EINVAL, "the prompt has %lld tokens; this server takes 1 to %lld",
                              (long long)p->n_prompt, (long long)(s->n_ctx - 1));
    int prompt_only = p->prompt_logprobs || p->embed != HONE_POOLING_NONE;
    if (p->max_tokens < (prompt_only ? 0 : 1))
        return hone_error_set(HONE_EINVAL, "max_tokens must be at least %d", prompt_only ? 0 : 1);
    if (p->embed != HONE_POOLING_NONE && (p->max_tokens != 0 || p->logprobs || p->prompt_logprobs ||
                                          (p->embed != HONE_POOLING_MEAN && p->embed != HONE_POOLING_LAST)))
        return hone_error_set(HONE_EINVAL, "an embedding request generates nothing (max_tokens 0, no logprobs)");
    if (p->top_logprobs < 0 || p->top_logprobs > HONE_SAMPLER_TOP_LOGPROBS_MAX)
        return hone_error_set(HONE_EINVAL, "top_logprobs must be in [0, %d]", HONE_SAMPLER_TOP_LOGPROBS_MAX);
    if (p->n_stop < 0 || p->n_stop > 16) return hone_error_set(HONE_EINVAL, "too many stop strings");
    for (int64_t i = 0; i < p->n_prompt; i++)
        if (p->prompt[i] < 0 || p->prompt[i] >= s->n_vocab)
            return hone_error_set(HONE_EINVAL, "token id %d out of range [0, %lld)", p->prompt[i],
                                  (long long)s->n_vocab);
    hone_request *r = calloc(1, sizeof *r);
    if (!r) return hone_error_set(HONE_ENOMEM, "out of memory");
    int rc;
    r->refs = 2;
    r->toks = malloc((size_t)(s->n_ctx + 1) * sizeof *r->toks);
    r->chain = malloc((size_t)(s->n_ctx / s->bs + 2) * sizeof *r->chain);
    r->stop = calloc((size_t)p->n_stop + 1, sizeof *r->stop);
    r->stop_len = calloc((size_t)p->n_stop + 1, sizeof *r->stop_len);
    if (!r->toks || !r->chain || !r->stop || !r->stop_len) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory");
        goto fail;
    }
    r->want_lp = p->logprobs;
    r->top_lp = p->top_logprobs;
    r->want_plp = p->prompt_logprobs;
    r->embed = p->embed;
    if ((r->want_plp && !(r->plp = calloc((size_t)p->n_prompt, sizeof *r->plp))) ||
        (r->embed && (!(r->emb_sum = calloc((size_t)s->dim, sizeof *r->emb_sum)) ||
                      !(r->emb = calloc((size_t)s->dim, sizeof *r->emb))))) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory");
        goto fail;
    }
    if (r->plp) r->plp[0].logprob = NAN;
    for (int i = 0; i < p->n_stop; i++) {
        size_t len = strlen(p->stop[i]);
        if (!len) {
            rc = hone_error_set(HONE_EINVAL, "stop strings must not be empty");
            goto fail;
        }
        if (!(r->stop[i] = strdup(p->stop[i]))) {
            rc = hone_error_set(HONE_ENOMEM, "out of memory");
            goto fail;
        }
        r->n_stop = i + 1;
        r->stop_len[i] = len;
        if (len > r->stop_max) r->stop_max = len;
    }
    if ((rc = hone_sampler_new(&r->smp, &p->sampling, (int32_t)s->n_vocab)) ||
        (rc = hone_detok_new(&r->dt, s->tok, 0)))
        goto fail;
    if (p->grammar && (rc = grammar_attach(s, r, p->grammar))) goto fail;
    memcpy(r->toks, p->prompt, (size_t)p->n_prompt * sizeof *r->toks);
    r->n_toks = r->n_prompt = p->n_prompt;
    r->max_tokens = p->max_tokens;
    r->ignore_eos = p->ignore_eos;
    r->notify = p->notify;
    r->notify_user = p->notify_user;
    r->spec = p->speculate == HONE_REQUEST_SPEC_LOOKUP ? HONE_SPEC_LOOKUP
              : p->speculate == HONE_REQUEST_SPEC_SELF ? HONE_SPEC_SELF
              : p->speculate == HONE_REQUEST_SPEC_DRAFT ? HONE_SPEC_DRAFT
              : p->speculate == HONE_REQUEST_SPEC_DEFAULT ? s->o.speculate
                                                         : HONE_SPEC_NONE;
    r->spec_dist = p->spec_mode ? p->spec_mode == HONE_REQUEST_SPEC_DISTRIBUTION
                                : s->o.spec_mode == HONE_SPEC_DISTRIBUTION;
    if (r->spec == HONE_SPEC_SELF && !s->self_ok) {
        rc = hone_error_set(HONE_EUNSUPPORTED, "self-speculation runs on the CPU backend only");
        goto fail;
    }
    if (r->spec == HONE_SPEC_DRAFT && !s->dbe) {
        rc = hone_error_set(HONE_EINVAL, "this server has no draft model (serve --draft MODEL)");
        goto fail;
    }
    if ((r->spec == HONE_SPEC_SELF || r->spec == HONE_SPEC_DRAFT) && r->spec_dist &&
        !(r->q = malloc((size_t)((int64_t)s->o.spec_k * s->n_vocab) * sizeof *r->q))) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory");
        goto fail;
    }
    r->alpha = HONE_SPEC_ALPHA_INIT;
    r->shadow = -1;
    if (!(r->emit = malloc((size_t)(s->o.spec_k + 1) * sizeof *r->emit))) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory");
        goto fail;
    }
    r->chain_stopped = s->pc == NULL;
    r->logit_slot = -1;
    r->t_submit = now_s();
    r->deadline = r->t_submit + s->o.timeout_s;
    pthread_mutex_lock(&s->mu);
    if (s->stop || s->n_queued >= s->o.max_queue) {
        int stopping = s->stop;
        pthread_mutex_unlock(&s->mu);
        rc = stopping ? hone_error_set(HONE_ERANGE, "the server is shutting down")
                      : hone_error_set(HONE_ERANGE, "the request queue is full (%d waiting)",
                                       s->o.max_queue);
        goto fail;
    }
    r->state = ST_QUEUED;
    queue_push(s, r, 0);
    s->st.prompt_tokens += (uint64_t)p->n_prompt;
    s->st.queued = s->n_queued;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
    *out = r;
    return 0;
fail:
    request_free(r);
    return rc;
}

int hone_request_wait(hone_scheduler *s, hone_request *r, size_t from, int timeout_ms,
                      hone_request_state *st, char **text, size_t *text_len)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    if (text) *text = NULL;
    if (text_len) *text_len = 0;
    pthread_mutex_lock(&s->mu);
    while (r->state != ST_DONE && r->emit_len <= from)
        if (pthread_cond_timedwait(&s->out_cv, &s->mu, &ts) == ETIMEDOUT) break;
    memset(st, 0, sizeof *st);
    st->done = r->state == ST_DONE;
    st->finish = r->finish;
    st->error_kind = r->err;
    memcpy(st->error, r->error, sizeof st->error);
    st->prompt_tokens = r->n_prompt;
    st->completion_tokens = r->completion_tokens;
    st->cached_tokens = r->cached_tokens;
    st->text_len = r->emit_len;
    int rc = 0;
    if (text && r->emit_len > from) {
        size_t n = r->emit_len - from;
        if ((*text = malloc(n + 1))) {
            memcpy(*text, r->text + from, n);
            (*text)[n] = 0;
            if (text_len) *text_len = n;
        } else {
            rc = hone_error_set(HONE_ENOMEM, "out of memory");
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int hone_request_logprobs(hone_scheduler *s, hone_request *r, int64_t from, hone_token_logprob **out,
                          int64_t *n)
{
    int rc = 0;
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&s->mu);
    if (from < r->n_lp) {
        if ((*out = malloc((size_t)(r->n_lp - from) * sizeof **out))) {
            memcpy(*out, r->lp + from, (size_t)(r->n_lp - from) * sizeof **out);
            *n = r->n_lp - from;
        } else {
            rc = hone_error_set(HONE_ENOMEM, "out of memory");
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int hone_request_prompt_logprobs(hone_scheduler *s, hone_request *r, hone_token_logprob **out, int64_t *n)
{
    int rc = 0;
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&s->mu);
    /* the prompt's rows are all computed before its first token is taken */
    if ((r->state == ST_DONE || r->completion_tokens > 0) && r->plp && r->finish != HONE_FINISH_ERROR) {
        if ((*out = malloc((size_t)r->n_prompt * sizeof **out))) {
            memcpy(*out, r->plp, (size_t)r->n_prompt * sizeof **out);
            for (int64_t i = 0; i < r->n_prompt; i++) (*out)[i].token = r->toks[i];
            *n = r->n_prompt;
        } else {
            rc = hone_error_set(HONE_ENOMEM, "out of memory");
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int hone_request_embedding(hone_scheduler *s, hone_request *r, float *out, int64_t cap, int64_t *dim)
{
    int rc = 0;
    *dim = s->dim;
    pthread_mutex_lock(&s->mu);
    if (r->state != ST_DONE || !r->emb || r->finish == HONE_FINISH_ERROR)
        rc = hone_error_set(HONE_EINVAL, "the request has no embedding (not done, failed, or not one)");
    else if (cap < s->dim)
        rc = hone_error_set(HONE_ERANGE, "the embedding has %lld floats", (long long)s->dim);
    else
        memcpy(out, r->emb, (size_t)s->dim * sizeof *out);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void hone_request_cancel(hone_scheduler *s, hone_request *r)
{
    pthread_mutex_lock(&s->mu);
    r->cancel = 1;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
}

void hone_request_release(hone_scheduler *s, hone_request *r)
{
    if (!r) return;
    pthread_mutex_lock(&s->mu);
    r->notify = NULL;
    unref_locked(r);
    pthread_mutex_unlock(&s->mu);
}

void hone_scheduler_set_step_hook(hone_scheduler *s, hone_scheduler_step_hook fn, void *user)
{
    pthread_mutex_lock(&s->mu);
    s->hook = fn;
    s->hook_user = user;
    pthread_mutex_unlock(&s->mu);
}

void hone_scheduler_wake(hone_scheduler *s)
{
    pthread_mutex_lock(&s->mu);
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
}

hone_backend *hone_scheduler_backend(hone_scheduler *s) { return s->be; }

void hone_scheduler_stats_get(hone_scheduler *s, hone_scheduler_stats *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->st;
    out->queued = s->n_queued;
    pthread_mutex_unlock(&s->mu);
}

int64_t hone_scheduler_n_active(hone_scheduler *s)
{
    pthread_mutex_lock(&s->mu);
    int64_t n = s->n_queued + s->st.running;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int hone_scheduler_profile_json(hone_scheduler *s, struct cJSON **out)
{
    *out = NULL;
    const hone_scheduler_observer *ob = &s->o.observer;
    if (!ob->json) return hone_error_set(HONE_EUNSUPPORTED, "profiling is off (serve without --no-profile)");
    pthread_mutex_lock(&s->prof_mu);
    int rc = ob->json(ob->user, out);
    pthread_mutex_unlock(&s->prof_mu);
    return rc;
}

int hone_scheduler_slot_shares(hone_scheduler *s, char (*names)[64], double *shares, int cap)
{
    const hone_scheduler_observer *ob = &s->o.observer;
    if (!ob->shares) return 0;
    pthread_mutex_lock(&s->prof_mu);
    int n = ob->shares(ob->user, names, shares, cap);
    pthread_mutex_unlock(&s->prof_mu);
    return n;
}
