/* hone verify (agent/verify.h): a reference and a candidate, each a GGUF file run in process or
 * an OpenAI-compatible endpoint, compared teacher-forced on the reference's continuations and
 * free-running. */
#include "agent/verify.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/llm.h"
#include "agent/report.h"
#include "agent/verify_tools.h"
#include "candidates/kernel_loader.h"
#include "engine/backend.h"
#include "engine/error.h"
#include "engine/chat.h"
#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/server.h"
#include "engine/tokenizer.h"
#include "engine/utf8.h"

/* ---- a side: a file in process or an endpoint ---------------------------------------------- */

typedef struct {
    const char *src;
    int is_file;
    hone_model *m;
    hone_tokenizer *tok;
    hone_backend *be;
    hone_kernel_loader *kl;
    int64_t n_vocab;
    char **piece;         /* file: id -> its bytes as text (what an endpoint calls the token) */
    int32_t *slot;        /* file: open-addressing table piece -> id (lazily built) */
    int64_t n_slot;
    hone_llm *llm;        /* endpoint: its client; file: the client of its loopback server, once
                           * tool prompts need one (side_serve) */
    hone_scheduler *sched;/* file, tool prompts: the side served in process */
    hone_server *srv;
    hone_chat_template tmpl;
    int have_tmpl;
    char desc[256];
} side;

/* A continuation: token pieces, and ids when it came from a file. */
typedef struct {
    int n;
    char **piece;
    int32_t *id;          /* NULL for an endpoint's */
    int ends;             /* a file's: the last token is its end-of-generation token */
} tokens;

/* One position's distribution: a file's full logits, or an endpoint's top logprobs. */
typedef struct {
    const float *logits;  /* [n_vocab], or NULL */
    int k;
    char **key;
    double *lp;
} dist;

static int is_url(const char *s) { return !strncmp(s, "http://", 7) || !strncmp(s, "https://", 8); }

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void side_free(side *s)
{
    if (s->piece)
        for (int64_t i = 0; i < s->n_vocab; i++) free(s->piece[i]);
    free(s->piece);
    free(s->slot);
    hone_server_free(s->srv); /* the server before the scheduler it submits to */
    hone_scheduler_free(s->sched);
    if (s->have_tmpl) hone_chat_clear(&s->tmpl);
    hone_backend_free(s->be);
    hone_kernel_loader_free(s->kl);
    hone_tokenizer_free(s->tok);
    hone_model_free(s->m);
    hone_llm_free(s->llm);
    memset(s, 0, sizeof *s);
}

static int side_open(side *s, const char *src, const hone_verify_opts *o)
{
    memset(s, 0, sizeof *s);
    s->src = src;
    s->is_file = !is_url(src);
    if (!s->is_file) {
        hone_llm_opts lo = HONE_LLM_OPTS_INIT;
        lo.url = src;
        lo.model = o->model;
        lo.api_key = o->api_key;
        if (o->timeout_ms > 0) lo.timeout_ms = o->timeout_ms;
        int rc = hone_llm_new(&s->llm, &lo);
        if (!rc && !o->model) { /* the endpoint's first model, as /v1/models lists them */
            char *reply = NULL;
            rc = hone_llm_post(s->llm, "/models", NULL, &reply, NULL);
            cJSON *root = rc ? NULL : cJSON_Parse(reply);
            cJSON *m0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "data"), 0);
            cJSON *id = cJSON_GetObjectItemCaseSensitive(m0, "id");
            if (!rc && !cJSON_IsString(id))
                rc = hone_error_set(HONE_EFORMAT, "%s/models lists no model; name one with --model", src);
            if (!rc) rc = hone_llm_set_model(s->llm, id->valuestring);
            cJSON_Delete(root);
            free(reply);
        }
        snprintf(s->desc, sizeof s->desc, "endpoint %s (model %s)", src, s->llm ? hone_llm_model(s->llm) : "?");
        return rc;
    }
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    co.n_threads = o->n_threads;
    int rc;
    if ((rc = hone_model_load(&s->m, src)) || (rc = hone_tokenizer_new(&s->tok, hone_model_gguf(s->m))) ||
        (rc = hone_backend_new(&s->be, s->m, HONE_DEVICE_CPU, &co)) ||
        (rc = hone_kernel_loader_serve(&s->kl, s->be, s->m, o->kernels_dir, 1)))
        return rc;
    s->n_vocab = hone_model_hparams(s->m)->n_vocab;
    s->piece = calloc((size_t)s->n_vocab, sizeof *s->piece);
    if (!s->piece) return hone_error_set(HONE_ENOMEM, "out of memory");
    for (int64_t i = 0; i < s->n_vocab; i++) {
        char buf[512];
        size_t len = 0;
        if (hone_tokenizer_decode_piece(s->tok, (int32_t)i, HONE_TOKENIZER_DECODE_SPECIAL, buf, sizeof buf - 1, &len))
            len = 0;
        buf[len < sizeof buf ? len : sizeof buf - 1] = 0;
        if (!(s->piece[i] = strdup(buf))) return hone_error_set(HONE_ENOMEM, "out of memory");
    }
    snprintf(s->desc, sizeof s->desc, "file %s (%s, %s)", src, hone_model_name(s->m), hone_backend_describe(s->be));
    return 0;
}

/* A file side's chat completions, for the tool prompts: the model served in process on a
 * loopback port (engine/server.h: the chat template, the tool rendering and the tool-call
 * parser `hone serve` runs), s->llm its client. The scheduler borrows s->be, so this comes
 * after every direct use of it. */
static int side_serve(side *s, const hone_verify_opts *o)
{
    if (!s->is_file || s->srv) return 0;
    hone_scheduler_opts sco = HONE_SCHEDULER_OPTS_INIT;
    hone_server_opts so = HONE_SERVER_OPTS_INIT;
    so.port = 0;
    so.model_id = "verify";
    so.no_request_log = 1;
    int rc = hone_chat_load_with(&s->tmpl, hone_model_gguf(s->m), s->tok, o->chat_template);
    if (rc) return rc;
    s->have_tmpl = 1;
    if ((rc = hone_scheduler_new(&s->sched, s->be, s->tok, &sco))) return rc;
    so.n_ctx = hone_backend_n_ctx(s->be);
    if ((rc = hone_server_new(&s->srv, s->sched, s->tok, &s->tmpl, &so))) return rc;
    char url[96];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", hone_server_port(s->srv));
    hone_llm_opts lo = HONE_LLM_OPTS_INIT;
    lo.url = url;
    lo.model = so.model_id;
    lo.api_key = "";
    lo.max_retries = 0;
    if (o->timeout_ms > 0) lo.timeout_ms = o->timeout_ms;
    return hone_llm_new(&s->llm, &lo);
}

/* The id whose piece is text, or -1 (the first id when several decode alike). */
static int32_t side_find(side *s, const char *text)
{
    if (!s->slot) {
        s->n_slot = 1;
        while (s->n_slot < 2 * s->n_vocab) s->n_slot <<= 1;
        s->slot = malloc((size_t)s->n_slot * sizeof *s->slot);
        if (!s->slot) return -1;
        for (int64_t i = 0; i < s->n_slot; i++) s->slot[i] = -1;
        for (int64_t id = 0; id < s->n_vocab; id++) {
            if (!s->piece[id][0]) continue;
            int64_t h = (int64_t)(hash_str(s->piece[id]) & (uint64_t)(s->n_slot - 1));
            while (s->slot[h] >= 0 && strcmp(s->piece[s->slot[h]], s->piece[id])) h = (h + 1) & (s->n_slot - 1);
            if (s->slot[h] < 0) s->slot[h] = (int32_t)id;
        }
    }
    int64_t h = (int64_t)(hash_str(text) & (uint64_t)(s->n_slot - 1));
    for (; s->slot[h] >= 0; h = (h + 1) & (s->n_slot - 1))
        if (!strcmp(s->piece[s->slot[h]], text)) return s->slot[h];
    return -1;
}

static void tokens_free(tokens *t)
{
    for (int i = 0; i < t->n; i++) free(t->piece[i]);
    free(t->piece);
    free(t->id);
    memset(t, 0, sizeof *t);
}

static int tokens_alloc(tokens *t, int cap)
{
    t->piece = calloc((size_t)cap, sizeof *t->piece);
    t->id = malloc((size_t)cap * sizeof *t->id);
    return t->piece && t->id ? 0 : hone_error_set(HONE_ENOMEM, "out of memory");
}

/* Appends a piece (up to cap, the tokens_alloc capacity). */
static int tokens_push(tokens *t, const char *piece, int32_t id, int cap)
{
    if (t->n >= cap) return 0;
    if (!(t->piece[t->n] = strdup(piece))) return hone_error_set(HONE_ENOMEM, "out of memory");
    t->id[t->n++] = id;
    return 0;
}

/* The prompt's ids on a file side (the model's BOS rule, special tokens as text). */
static int file_prompt(side *s, const char *prompt, int32_t **ids, int64_t *n)
{
    return hone_tokenizer_encode(s->tok, prompt, strlen(prompt), -1, 0, ids, n);
}

/* POSTs a /completions request; *root: the parsed reply's first choice's logprobs object. */
static int endpoint_logprobs(side *s, cJSON *req, cJSON **root, cJSON **lp)
{
    char *body = cJSON_PrintUnformatted(req), *reply = NULL;
    if (!body) return hone_error_set(HONE_ENOMEM, "out of memory");
    int rc = hone_llm_post(s->llm, "/completions", body, &reply, NULL);
    free(body);
    if (rc) return rc;
    *root = cJSON_Parse(reply);
    cJSON *ch = *root ? cJSON_GetObjectItemCaseSensitive(*root, "choices") : NULL;
    cJSON *c0 = cJSON_IsArray(ch) ? cJSON_GetArrayItem(ch, 0) : NULL;
    *lp = c0 ? cJSON_GetObjectItemCaseSensitive(c0, "logprobs") : NULL;
    cJSON *toks = *lp ? cJSON_GetObjectItemCaseSensitive(*lp, "tokens") : NULL;
    if (!cJSON_IsArray(toks)) {
        rc = hone_error_set(HONE_EFORMAT, "%s: the completion has no choices[0].logprobs.tokens (does the endpoint "
                            "support logprobs on /v1/completions?): %.160s", s->src, reply);
        cJSON_Delete(*root);
        *root = NULL;
    }
    free(reply);
    return rc;
}

static cJSON *completion_request(side *s, const char *prompt, int max_tokens, int logprobs, int echo)
{
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "model", hone_llm_model(s->llm));
    cJSON_AddStringToObject(req, "prompt", prompt);
    cJSON_AddNumberToObject(req, "max_tokens", max_tokens);
    cJSON_AddNumberToObject(req, "temperature", 0);
    cJSON_AddNumberToObject(req, "logprobs", logprobs);
    if (echo) cJSON_AddBoolToObject(req, "echo", 1);
    return req;
}

/* Greedy continuation of up to steps tokens (a file's ends with its end-of-generation token
 * when it chose one, out->ends set; an endpoint's replies do not show theirs). */
static int side_greedy(side *s, const char *prompt, int steps, tokens *out, float **rows_out)
{
    memset(out, 0, sizeof *out);
    if (rows_out) *rows_out = NULL;
    if (s->is_file) {
        int32_t *ids = NULL;
        int64_t n = 0;
        hone_kv_seq seq = {0};
        /* rows_out: every step's logits kept, row i the distribution that chose token i (bitwise
         * what a teacher-forced pass over the same tokens computes, so it need not be run) */
        int64_t kept = rows_out ? steps : 1;
        float *logits = malloc((size_t)(kept * s->n_vocab) * sizeof *logits), *row = logits;
        int rc = logits ? file_prompt(s, prompt, &ids, &n) : hone_error_set(HONE_ENOMEM, "out of memory");
        if (!rc) rc = hone_backend_forward(s->be, &seq, ids, n, row, 0);
        if (!rc) rc = tokens_alloc(out, steps);
        for (int i = 0; !rc && i < steps; i++) {
            int32_t next = (int32_t)hone_sampler_argmax(row, s->n_vocab);
            if ((rc = tokens_push(out, s->piece[next], next, steps))) break;
            if (hone_tokenizer_is_eog(s->tok, next)) {
                out->ends = 1;
                break;
            }
            if (rows_out) row += s->n_vocab;
            if (i + 1 < steps) rc = hone_backend_forward(s->be, &seq, &next, 1, row, 0);
        }
        hone_backend_release(s->be, &seq);
        free(ids);
        if (!rc && rows_out) *rows_out = logits;
        else free(logits);
        return rc;
    }
    cJSON *req = completion_request(s, prompt, steps, 1, 0), *root = NULL, *lp = NULL;
    int rc = endpoint_logprobs(s, req, &root, &lp);
    cJSON_Delete(req);
    if (rc) return rc;
    cJSON *t;
    rc = tokens_alloc(out, steps);
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(lp, "tokens"))
        if (!rc && cJSON_IsString(t)) rc = tokens_push(out, t->valuestring, -1, steps);
    free(out->id);
    out->id = NULL;
    cJSON_Delete(root);
    return rc;
}

/* Teacher-forced scoring of cont after prompt: d[i] is the distribution that predicts cont's
 * token i. A file fills *logits_out (rows it owns); an endpoint *root_out (d's keys point in). */
static int side_forced(side *s, const char *prompt, const tokens *cont, const side *teacher, dist *d,
                       float **logits_out, cJSON **root_out, int top_k)
{
    *logits_out = NULL;
    *root_out = NULL;
    memset(d, 0, (size_t)cont->n * sizeof *d);
    if (s->is_file) {
        int32_t *ids = NULL;
        int64_t n = 0;
        int rc = file_prompt(s, prompt, &ids, &n);
        if (rc) return rc;
        int32_t *all = malloc((size_t)(n + cont->n) * sizeof *all);
        if (!all) {
            free(ids);
            return hone_error_set(HONE_ENOMEM, "out of memory");
        }
        memcpy(all, ids, (size_t)n * sizeof *all);
        int same_vocab = cont->id && teacher->is_file && teacher->n_vocab == s->n_vocab;
        for (int i = 0; i < cont->n && !rc; i++) {
            all[n + i] = same_vocab ? cont->id[i] : side_find(s, cont->piece[i]);
            if (all[n + i] < 0)
                rc = hone_error_set(HONE_EFORMAT, "%s: the reference's token %d (\"%.40s\") is not a token of this "
                                    "vocabulary: the two sides tokenize differently", s->src, i, cont->piece[i]);
        }
        int64_t rows = n + cont->n;
        float *logits = rc ? NULL : malloc((size_t)(rows * s->n_vocab) * sizeof *logits);
        if (!rc && !logits) rc = hone_error_set(HONE_ENOMEM, "out of memory");
        hone_kv_seq seq = {0};
        if (!rc) rc = hone_backend_forward(s->be, &seq, all, rows, logits, 1);
        hone_backend_release(s->be, &seq);
        for (int i = 0; !rc && i < cont->n; i++) d[i].logits = logits + (n - 1 + i) * s->n_vocab;
        free(ids);
        free(all);
        if (rc) free(logits);
        else *logits_out = logits;
        return rc;
    }
    size_t len = strlen(prompt);
    for (int i = 0; i < cont->n; i++) len += strlen(cont->piece[i]);
    char *text = malloc(len + 1);
    if (!text) return hone_error_set(HONE_ENOMEM, "out of memory");
    strcpy(text, prompt);
    for (int i = 0; i < cont->n; i++) strcat(text, cont->piece[i]);
    cJSON *req = completion_request(s, text, 1, top_k, 1), *root = NULL, *lp = NULL;
    free(text);
    int rc = endpoint_logprobs(s, req, &root, &lp);
    cJSON_Delete(req);
    if (rc) return rc;
    cJSON *toks = cJSON_GetObjectItemCaseSensitive(lp, "tokens");
    cJSON *tlp = cJSON_GetObjectItemCaseSensitive(lp, "token_logprobs");
    cJSON *top = cJSON_GetObjectItemCaseSensitive(lp, "top_logprobs");
    cJSON *off = cJSON_GetObjectItemCaseSensitive(lp, "text_offset");
    int nt = cJSON_GetArraySize(toks), j0 = -1;
    size_t plen = strlen(prompt), at = 0;
    for (int j = 0; j < nt; j++) { /* the first token at or after the prompt's end */
        cJSON *o = cJSON_GetArrayItem(off, j), *t = cJSON_GetArrayItem(toks, j);
        if (cJSON_IsNumber(o)) at = (size_t)o->valuedouble;
        if (at >= plen) {
            j0 = j;
            break;
        }
        at += cJSON_IsString(t) ? strlen(t->valuestring) : 0;
    }
    if (j0 < 0 || j0 + cont->n > nt)
        rc = hone_error_set(HONE_EFORMAT, "%s: the echoed prompt has %d tokens, too few for the %d of the "
                            "continuation", s->src, nt, cont->n);
    for (int i = 0; !rc && i < cont->n; i++) {
        cJSON *t = cJSON_GetArrayItem(toks, j0 + i), *tl = cJSON_GetArrayItem(tlp, j0 + i);
        cJSON *tp = cJSON_GetArrayItem(top, j0 + i);
        if (!cJSON_IsString(t) || strcmp(t->valuestring, cont->piece[i])) {
            rc = hone_error_set(HONE_EFORMAT, "%s tokenizes the continuation differently at its token %d "
                                "(\"%.40s\" where the reference has \"%.40s\")", s->src, i,
                                cJSON_IsString(t) ? t->valuestring : "?", cont->piece[i]);
            break;
        }
        int k = cJSON_IsObject(tp) ? cJSON_GetArraySize(tp) : 0;
        d[i].key = malloc((size_t)(k + 1) * sizeof *d[i].key);
        d[i].lp = malloc((size_t)(k + 1) * sizeof *d[i].lp);
        if (!d[i].key || !d[i].lp) {
            rc = hone_error_set(HONE_ENOMEM, "out of memory");
            break;
        }
        int has_own = 0;
        cJSON *e;
        if (k) cJSON_ArrayForEach(e, tp) if (cJSON_IsNumber(e)) {
            d[i].key[d[i].k] = e->string;
            d[i].lp[d[i].k++] = e->valuedouble;
            has_own |= !strcmp(e->string, t->valuestring);
        }
        if (!has_own && cJSON_IsNumber(tl)) { /* the token's own logprob, when outside the top k */
            d[i].key[d[i].k] = t->valuestring;
            d[i].lp[d[i].k++] = tl->valuedouble;
        }
        if (!d[i].k)
            rc = hone_error_set(HONE_EFORMAT, "%s: no logprobs at the continuation's token %d", s->src, i);
    }
    if (rc) cJSON_Delete(root);
    else *root_out = root;
    return rc;
}

static void dists_free(dist *d, int n)
{
    for (int i = 0; i < n; i++) {
        free(d[i].key);
        free(d[i].lp);
    }
}

/* ---- comparing two distributions ------------------------------------------------------------ */

/* log-softmax of a file's logits (double). */
static void log_softmax(const float *l, int64_t n, double *out)
{
    double mx = -INFINITY, z = 0;
    for (int64_t i = 0; i < n; i++)
        if (l[i] > mx) mx = l[i];
    for (int64_t i = 0; i < n; i++) z += exp((double)l[i] - mx);
    double lz = mx + log(z);
    for (int64_t i = 0; i < n; i++) out[i] = (double)l[i] - lz;
}

typedef struct {
    double kl, max_abs;
    int agree;
} cmp;

/* The sparse distribution's best key. */
static const char *sparse_top(const dist *d)
{
    int b = 0;
    for (int i = 1; i < d->k; i++)
        if (d->lp[i] > d->lp[b]) b = i;
    return d->key[b];
}

/* logprob of key on a side: full (via the side's piece table) or sparse; NAN when unknown. */
static double lp_of(side *s, const dist *d, const double *full_lp, const char *key)
{
    if (d->logits) {
        int32_t id = side_find(s, key);
        return id >= 0 ? full_lp[id] : NAN;
    }
    for (int i = 0; i < d->k; i++)
        if (!strcmp(d->key[i], key)) return d->lp[i];
    return NAN;
}

static cmp compare(side *rs, const dist *p, side *cs, const dist *q, double *lp_p, double *lp_q)
{
    cmp c = {0, 0, 0};
    if (p->logits) log_softmax(p->logits, rs->n_vocab, lp_p);
    if (q->logits) log_softmax(q->logits, cs->n_vocab, lp_q);
    if (p->logits && q->logits && rs->n_vocab == cs->n_vocab) { /* exact */
        for (int64_t i = 0; i < rs->n_vocab; i++) {
            double pi = exp(lp_p[i]);
            if (pi > 0) c.kl += pi * (lp_p[i] - lp_q[i]);
            double dl = fabs((double)p->logits[i] - (double)q->logits[i]);
            if (dl > c.max_abs || isnan(dl)) c.max_abs = dl;
        }
        c.agree = hone_sampler_argmax(p->logits, rs->n_vocab) == hone_sampler_argmax(q->logits, cs->n_vocab);
        if (c.kl < 0) c.kl = 0; /* rounding of an identical pair */
        return c;
    }
    /* over the keys the sparse side(s) name and both sides know, the rest lumped together */
    const dist *sp = q->logits ? p : q;
    double mp = 0, mq = 0;
    for (int i = 0; i < sp->k; i++) {
        double a = lp_of(rs, p, lp_p, sp->key[i]), b = lp_of(cs, q, lp_q, sp->key[i]);
        if (isnan(a) || isnan(b)) continue;
        double pa = exp(a), qb = exp(b);
        if (pa > 0) c.kl += pa * (a - b);
        mp += pa;
        mq += qb;
        if (fabs(a - b) > c.max_abs) c.max_abs = fabs(a - b);
    }
    double rp = 1 - mp, rq = 1 - mq;
    if (rp > 1e-12) c.kl += rp * (log(rp) - log(rq > 1e-300 ? rq : 1e-300));
    if (c.kl < 0) c.kl = 0;
    const char *tp = p->logits ? rs->piece[hone_sampler_argmax(p->logits, rs->n_vocab)] : sparse_top(p);
    const char *tq = q->logits ? cs->piece[hone_sampler_argmax(q->logits, cs->n_vocab)] : sparse_top(q);
    c.agree = !strcmp(tp, tq);
    return c;
}

/* ---- prompts ---------------------------------------------------------------------------------- */

typedef struct {
    char *id, *set, *text;
} prompt;

/* The prompts of a JSONL file: text prompts ({"prompt"}) into *out, tool prompts ({"messages",
 * "tools"}) into *tools; at most max lines of both (0: all). */
static int read_prompts(const char *path, prompt **out, int *n, hone_verify_tool_prompt **tools, int *nt, int max)
{
    *out = NULL;
    *n = 0;
    *tools = NULL;
    *nt = 0;
    int cap_t = 0;
    FILE *f = fopen(path, "r");
    if (!f) return hone_error_set(HONE_EIO, "cannot open prompts %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    int rc = 0, lineno = 0, cap_p = 0;
    while (getline(&line, &cap, f) > 0 && (!max || *n + *nt < max)) {
        lineno++;
        if (strspn(line, " \t\r\n") == strlen(line)) continue;
        cJSON *j = cJSON_Parse(line);
        cJSON *t = j ? cJSON_GetObjectItemCaseSensitive(j, "prompt") : NULL;
        if (j && !t && cJSON_GetObjectItemCaseSensitive(j, "messages")) {
            char where[4200];
            snprintf(where, sizeof where, "%s:%d", path, lineno);
            if (*nt == cap_t) {
                cap_t = cap_t ? 2 * cap_t : 8;
                hone_verify_tool_prompt *np = realloc(*tools, (size_t)cap_t * sizeof *np);
                if (!np) {
                    cJSON_Delete(j);
                    rc = hone_error_set(HONE_ENOMEM, "out of memory");
                    break;
                }
                *tools = np;
            }
            rc = hone_verify_tool_prompt_parse(&(*tools)[*nt], j, where);
            cJSON_Delete(j);
            if (rc) break;
            (*nt)++;
            continue;
        }
        if (!cJSON_IsString(t) || !t->valuestring[0]) {
            cJSON_Delete(j);
            rc = hone_error_set(HONE_EFORMAT, "%s:%d: each line must be a JSON object with a non-empty \"prompt\" "
                                "string, or with \"messages\" and \"tools\" (a tool prompt)", path, lineno);
            break;
        }
        if (*n == cap_p) {
            cap_p = cap_p ? 2 * cap_p : 16;
            prompt *np = realloc(*out, (size_t)cap_p * sizeof *np);
            if (!np) {
                cJSON_Delete(j);
                rc = hone_error_set(HONE_ENOMEM, "out of memory");
                break;
            }
            *out = np;
        }
        cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id"), *set = cJSON_GetObjectItemCaseSensitive(j, "set");
        char idbuf[32];
        snprintf(idbuf, sizeof idbuf, "%d", lineno);
        prompt *p = &(*out)[(*n)++];
        p->id = strdup(cJSON_IsString(id) ? id->valuestring : idbuf);
        p->set = strdup(cJSON_IsString(set) ? set->valuestring : "default");
        p->text = strdup(t->valuestring);
        cJSON_Delete(j);
        if (!p->id || !p->set || !p->text) {
            rc = hone_error_set(HONE_ENOMEM, "out of memory");
            break;
        }
    }
    free(line);
    fclose(f);
    if (!rc && !*n && !*nt) rc = hone_error_set(HONE_EFORMAT, "%s holds no prompts", path);
    return rc;
}

static void prompts_free(prompt *p, int n)
{
    for (int i = 0; i < n; i++) {
        free(p[i].id);
        free(p[i].set);
        free(p[i].text);
    }
    free(p);
}

/* ---- the run ---------------------------------------------------------------------------------- */

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A summary over the prompts whose set is set (NULL: all). */
static cJSON *summarise(cJSON *prompts, const char *set, int steps)
{
    double kl_sum = 0, kl_max = 0, dmax = 0;
    int64_t pos = 0, agree = 0;
    int n = 0, identical = 0, nd = 0;
    double *div = malloc(((size_t)cJSON_GetArraySize(prompts) + 1) * sizeof *div);
    cJSON *p;
    cJSON_ArrayForEach(p, prompts) {
        if (set && strcmp(cJSON_GetObjectItemCaseSensitive(p, "set")->valuestring, set)) continue;
        n++;
        cJSON *v;
        cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(p, "kl")) {
            kl_sum += v->valuedouble;
            if (v->valuedouble > kl_max) kl_max = v->valuedouble;
            pos++;
        }
        cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(p, "top1")) agree += v->valueint;
        double d = cJSON_GetObjectItemCaseSensitive(p, "max_abs_dlogit")->valuedouble;
        if (d > dmax) dmax = d;
        int fd = cJSON_GetObjectItemCaseSensitive(p, "first_divergence")->valueint;
        if (fd < 0) identical++;
        if (div) div[nd++] = fd < 0 ? steps : fd;
    }
    cJSON *o = cJSON_CreateObject();
    double flip = pos ? 1.0 - (double)agree / (double)pos : 0;
    cJSON_AddNumberToObject(o, "prompts", n);
    cJSON_AddNumberToObject(o, "positions", (double)pos);
    cJSON_AddNumberToObject(o, "kl_mean", pos ? kl_sum / (double)pos : 0);
    cJSON_AddNumberToObject(o, "kl_max", kl_max);
    cJSON_AddNumberToObject(o, "top1_agreement", pos ? (double)agree / (double)pos : 1);
    cJSON_AddNumberToObject(o, "max_abs_dlogit", dmax);
    cJSON_AddNumberToObject(o, "flip_rate", flip);
    cJSON *sv = cJSON_AddObjectToObject(o, "survival_model");
    const int ns[] = {20, 50, 100};
    for (int i = 0; i < 3; i++) {
        char k[8];
        snprintf(k, sizeof k, "%d", ns[i]);
        cJSON_AddNumberToObject(sv, k, pow(1 - flip, ns[i]));
    }
    cJSON_AddNumberToObject(o, "greedy_identical", identical);
    if (div && nd) {
        qsort(div, (size_t)nd, sizeof *div, cmp_d);
        cJSON_AddNumberToObject(o, "first_divergence_median", nd % 2 ? div[nd / 2] : 0.5 * (div[nd / 2 - 1] + div[nd / 2]));
    }
    free(div);
    return o;
}

static int verify_prompt(side *ref, side *cand, const prompt *pr, const hone_verify_opts *o, double *lp_p,
                         double *lp_q, cJSON *prompts)
{
    tokens teach = {0}, free_run = {0};
    dist *dp = NULL, *dq = NULL;
    float *lgp = NULL, *lgq = NULL;
    cJSON *rootp = NULL, *rootq = NULL;
    float *ref_rows = NULL; /* a file reference's own greedy logits: its teacher-forced rows */
    int rc = side_greedy(ref, pr->text, o->steps, &teach, &ref_rows);
    /* an endpoint neither shows nor scores an end-of-generation token: leave it out there */
    int both_files = ref->is_file && cand->is_file;
    if (!rc && teach.ends && !both_files) {
        free(teach.piece[--teach.n]);
        teach.ends = 0;
    }
    if (!rc && teach.n == 0) {
        if (!o->quiet) fprintf(stderr, "verify: prompt %s: the reference ends at once; skipped\n", pr->id);
        tokens_free(&teach);
        free(ref_rows);
        return 0;
    }
    if (!rc) {
        dp = calloc((size_t)teach.n, sizeof *dp);
        dq = calloc((size_t)teach.n, sizeof *dq);
        if (!dp || !dq) rc = hone_error_set(HONE_ENOMEM, "out of memory");
    }
    if (!rc && ref_rows) {
        for (int i = 0; i < teach.n; i++) dp[i].logits = ref_rows + (int64_t)i * ref->n_vocab;
        lgp = ref_rows;
        ref_rows = NULL;
    } else if (!rc) {
        rc = side_forced(ref, pr->text, &teach, ref, dp, &lgp, &rootp, o->top_k);
    }
    if (!rc) rc = side_forced(cand, pr->text, &teach, ref, dq, &lgq, &rootq, o->top_k);
    if (!rc) rc = side_greedy(cand, pr->text, o->steps, &free_run, NULL);
    if (!rc && free_run.ends && !both_files) free(free_run.piece[--free_run.n]);
    if (!rc) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "id", pr->id);
        cJSON_AddStringToObject(j, "set", pr->set);
        cJSON *kl = cJSON_AddArrayToObject(j, "kl"), *top1 = cJSON_AddArrayToObject(j, "top1");
        double dmax = 0;
        int flips = 0;
        for (int i = 0; i < teach.n; i++) {
            cmp c = compare(ref, &dp[i], cand, &dq[i], lp_p, lp_q);
            cJSON_AddItemToArray(kl, cJSON_CreateNumber(c.kl));
            cJSON_AddItemToArray(top1, cJSON_CreateNumber(c.agree));
            if (c.max_abs > dmax) dmax = c.max_abs;
            flips += !c.agree;
        }
        int fd = -1, m = teach.n < free_run.n ? teach.n : free_run.n;
        for (int i = 0; i < m && fd < 0; i++)
            if (strcmp(teach.piece[i], free_run.piece[i])) fd = i;
        if (fd < 0 && teach.n != free_run.n) fd = m;
        cJSON_AddNumberToObject(j, "max_abs_dlogit", dmax);
        cJSON_AddNumberToObject(j, "flip_rate", (double)flips / teach.n);
        cJSON_AddNumberToObject(j, "first_divergence", fd);
        cJSON_AddNumberToObject(j, "tokens", teach.n);
        char *text = NULL;
        size_t len = 0;
        for (int i = 0; i < teach.n; i++) len += strlen(teach.piece[i]);
        if ((text = malloc(len + 1))) {
            text[0] = 0;
            for (int i = 0; i < teach.n; i++) strcat(text, teach.piece[i]);
            char *clean = hone_utf8_sanitize(text, strlen(text));
            cJSON_AddStringToObject(j, "reference_text", clean ? clean : "");
            free(clean);
            free(text);
        }
        cJSON_AddItemToArray(prompts, j);
    }
    if (dp) dists_free(dp, teach.n);
    if (dq) dists_free(dq, teach.n);
    free(dp);
    free(dq);
    free(lgp);
    free(ref_rows);
    free(lgq);
    cJSON_Delete(rootp);
    cJSON_Delete(rootq);
    tokens_free(&teach);
    tokens_free(&free_run);
    return rc;
}

static cJSON *side_json(const side *s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "source", s->src);
    cJSON_AddStringToObject(o, "kind", s->is_file ? "file" : "endpoint");
    cJSON_AddStringToObject(o, "description", s->desc);
    return o;
}

int hone_verify_run(cJSON **out, const hone_verify_opts *opts)
{
    hone_verify_opts o = opts ? *opts : (hone_verify_opts)HONE_VERIFY_OPTS_INIT;
    *out = NULL;
    if (!o.reference || !o.candidate) return hone_error_set(HONE_EINVAL, "--reference and --candidate are required");
    if (o.steps < 1 || o.steps > 4096) return hone_error_set(HONE_EINVAL, "--steps must be in [1, 4096]");
    if (o.top_k < 1 || o.top_k > 100) return hone_error_set(HONE_EINVAL, "--top-k must be in [1, 100]");
    if (o.tool_tokens < 1 || o.tool_tokens > 4096) return hone_error_set(HONE_EINVAL, "--tool-tokens must be in [1, 4096]");
    const char *ppath = o.prompts ? o.prompts : HONE_SOURCE_DIR "/tools/data/verify.jsonl";
    prompt *pr = NULL;
    hone_verify_tool_prompt *tp = NULL;
    int np = 0, nt = 0;
    side ref, cand;
    memset(&ref, 0, sizeof ref);
    memset(&cand, 0, sizeof cand);
    double *lp_p = NULL, *lp_q = NULL;
    int rc = read_prompts(ppath, &pr, &np, &tp, &nt, o.max_prompts);
    if (!rc) rc = side_open(&ref, o.reference, &o);
    if (!rc) rc = side_open(&cand, o.candidate, &o);
    if (!rc && ref.is_file && cand.is_file && ref.n_vocab != cand.n_vocab)
        rc = hone_error_set(HONE_EINVAL, "the two models' vocabularies differ (%lld and %lld tokens)",
                            (long long)ref.n_vocab, (long long)cand.n_vocab);
    if (!rc) {
        lp_p = malloc((size_t)(ref.n_vocab > 0 ? ref.n_vocab : 1) * sizeof *lp_p);
        lp_q = malloc((size_t)(cand.n_vocab > 0 ? cand.n_vocab : 1) * sizeof *lp_q);
        if (!lp_p || !lp_q) rc = hone_error_set(HONE_ENOMEM, "out of memory");
    }
    cJSON *root = cJSON_CreateObject(), *prompts = cJSON_CreateArray(), *tool_prompts = cJSON_CreateArray();
    for (int i = 0; !rc && i < np; i++) {
        if (!o.quiet) fprintf(stderr, "verify: prompt %d/%d (%s)\n", i + 1, np, pr[i].id);
        rc = verify_prompt(&ref, &cand, &pr[i], &o, lp_p, lp_q, prompts);
        if (rc) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", hone_error_last());
            hone_error_set(rc, "prompt %s: %s", pr[i].id, msg);
        }
    }
    if (!rc && nt) { /* the agentic checks, each side as an endpoint (a file served in process) */
        if (!(rc = side_serve(&ref, &o)) && !(rc = side_serve(&cand, &o)))
            rc = hone_verify_tools_run(tool_prompts, ref.llm, cand.llm, tp, nt, o.tool_tokens, o.quiet);
    }
    if (!rc) {
        cJSON_AddItemToObject(root, "reference", side_json(&ref));
        cJSON_AddItemToObject(root, "candidate", side_json(&cand));
        cJSON_AddBoolToObject(root, "exact", ref.is_file && cand.is_file);
        cJSON_AddStringToObject(root, "kl_kind", ref.is_file && cand.is_file
                                    ? "exact over the whole vocabulary"
                                    : "lower bound: over the tokens both sides report, the rest lumped into one");
        cJSON_AddStringToObject(root, "prompts_file", ppath);
        cJSON_AddNumberToObject(root, "steps", o.steps);
        cJSON_AddNumberToObject(root, "top_k", o.top_k);
        cJSON_AddItemToObject(root, "summary", summarise(prompts, NULL, o.steps));
        cJSON *sets = cJSON_AddObjectToObject(root, "sets");
        cJSON *p;
        cJSON_ArrayForEach(p, prompts) {
            const char *set = cJSON_GetObjectItemCaseSensitive(p, "set")->valuestring;
            if (!cJSON_GetObjectItemCaseSensitive(sets, set))
                cJSON_AddItemToObject(sets, set, summarise(prompts, set, o.steps));
        }
        cJSON *klp = cJSON_AddArrayToObject(root, "kl_per_position");
        for (int i = 0; i < o.steps; i++) {
            double s = 0;
            int n = 0;
            cJSON_ArrayForEach(p, prompts) {
                cJSON *v = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(p, "kl"), i);
                if (v) s += v->valuedouble, n++;
            }
            if (n) cJSON_AddItemToArray(klp, cJSON_CreateNumber(s / n));
        }
        cJSON *gs = cJSON_AddArrayToObject(root, "greedy_survival");
        for (int step = 1; step <= o.steps; step++) {
            int alive = 0, n = 0;
            cJSON_ArrayForEach(p, prompts) {
                int fd = cJSON_GetObjectItemCaseSensitive(p, "first_divergence")->valueint;
                alive += fd < 0 || fd >= step;
                n++;
            }
            cJSON_AddItemToArray(gs, cJSON_CreateNumber(n ? (double)alive / n : 1));
        }
        cJSON_AddItemToObject(root, "prompts", prompts);
        prompts = NULL;
        if (nt) {
            cJSON *tools = cJSON_AddObjectToObject(root, "tools");
            cJSON_AddNumberToObject(tools, "max_tokens", o.tool_tokens);
            cJSON_AddItemToObject(tools, "summary", hone_verify_tools_summarise(tool_prompts));
            cJSON_AddItemToObject(tools, "prompts", tool_prompts);
            tool_prompts = NULL;
        }
        *out = root;
        root = NULL;
    }
    cJSON_Delete(prompts);
    cJSON_Delete(tool_prompts);
    cJSON_Delete(root);
    free(lp_p);
    free(lp_q);
    side_free(&ref);
    side_free(&cand);
    prompts_free(pr, np);
    for (int i = 0; i < nt; i++) hone_verify_tool_prompt_clear(&tp[i]);
    free(tp);
    return rc;
}

/* ---- output ----------------------------------------------------------------------------------- */

static double jnum(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* A rate as a percentage, "-" when it is null (no calls to rate). */
static void fmt_rate(char *buf, size_t n, const cJSON *v)
{
    if (cJSON_IsNumber(v)) snprintf(buf, n, "%.1f%%", 100 * v->valuedouble);
    else snprintf(buf, n, "-");
}

/* The tool summary's rates as text: schema-valid (reference, candidate), name and argument
 * agreement. */
typedef struct {
    char vr[16], vc[16], na[16], aa[16];
} tool_rates;

static tool_rates tool_rates_of(const cJSON *ts)
{
    tool_rates t;
    fmt_rate(t.vr, sizeof t.vr, cJSON_GetObjectItemCaseSensitive(ts, "schema_valid_reference"));
    fmt_rate(t.vc, sizeof t.vc, cJSON_GetObjectItemCaseSensitive(ts, "schema_valid_candidate"));
    fmt_rate(t.na, sizeof t.na, cJSON_GetObjectItemCaseSensitive(ts, "name_agreement"));
    fmt_rate(t.aa, sizeof t.aa, cJSON_GetObjectItemCaseSensitive(ts, "arguments_agreement"));
    return t;
}

static void print_row(FILE *f, const char *name, const cJSON *s)
{
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(s, "survival_model");
    fprintf(f, "%-12s %7.0f %9.0f %10.3g %10.3g %7.2f%% %11.3g %8.4f %6.3f %6.3f %6.3f %9.0f %8.1f\n", name,
            jnum(s, "prompts"), jnum(s, "positions"), jnum(s, "kl_mean"), jnum(s, "kl_max"),
            100 * jnum(s, "top1_agreement"), jnum(s, "max_abs_dlogit"), jnum(s, "flip_rate"), jnum(sv, "20"),
            jnum(sv, "50"), jnum(sv, "100"), jnum(s, "greedy_identical"), jnum(s, "first_divergence_median"));
}

static void print_text_table(FILE *f, const cJSON *r);
static void print_tools(FILE *f, const cJSON *r);

void hone_verify_print(FILE *f, const cJSON *r)
{
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(r, "reference");
    const cJSON *cand = cJSON_GetObjectItemCaseSensitive(r, "candidate");
    fprintf(f, "reference: %s\ncandidate: %s\n",
            cJSON_GetObjectItemCaseSensitive(ref, "description")->valuestring,
            cJSON_GetObjectItemCaseSensitive(cand, "description")->valuestring);
    fprintf(f, "KL(ref || cand): %s; %g continuation tokens per prompt\n\n",
            cJSON_GetObjectItemCaseSensitive(r, "kl_kind")->valuestring, jnum(r, "steps"));
    if (jnum(cJSON_GetObjectItemCaseSensitive(r, "summary"), "prompts") > 0) print_text_table(f, r);
    print_tools(f, r);
}

/* The text prompts' table. */
static void print_text_table(FILE *f, const cJSON *r)
{
    fprintf(f, "%-12s %7s %9s %10s %10s %8s %11s %8s %6s %6s %6s %9s %8s\n", "set", "prompts", "positions",
            "KL mean", "KL max", "top-1", "max|dlogit|", "p", "^20", "^50", "^100", "identical", "1st div");
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(r, "sets")) print_row(f, s->string, s);
    print_row(f, "all", cJSON_GetObjectItemCaseSensitive(r, "summary"));
    fprintf(f, "\np: the per-step flip rate (teacher-forced top-1 disagreement); ^n: (1-p)^n, the chance an n-step "
            "task survives every step;\nidentical: prompts whose free-running greedy outputs agree for all steps; "
            "1st div: the median first step where they differ.\n");
}

/* The tool prompts' section. */
static void print_tools(FILE *f, const cJSON *r)
{
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "tools"), "summary");
    if (!ts) return;
    tool_rates tr = tool_rates_of(ts);
    if (jnum(ts, "refused_by_reference") + jnum(ts, "refused_by_candidate") > 0)
        fprintf(f, "\ntool prompts refused (HTTP 4xx, not scored): by the reference %.0f, by the candidate %.0f\n",
                jnum(ts, "refused_by_reference"), jnum(ts, "refused_by_candidate"));
    fprintf(f, "\ntool calls (%.0f prompts; the reference's trigger as the truth):\n"
            "  tp %.0f  fp %.0f  fn %.0f  tn %.0f   precision %.3f  recall %.3f  F1 %.3f\n"
            "  where both call: same tools %s, same arguments %s\n"
            "  schema-valid arguments: reference %s, candidate %s\n",
            jnum(ts, "prompts"), jnum(ts, "tp"), jnum(ts, "fp"), jnum(ts, "fn"), jnum(ts, "tn"),
            jnum(ts, "precision"), jnum(ts, "recall"), jnum(ts, "f1"), tr.na, tr.aa, tr.vr, tr.vc);
    const char *sides[] = {"reference", "candidate"};
    for (int k = 0; k < 2 && jnum(ts, "labelled") > 0; k++) {
        char key[32];
        snprintf(key, sizeof key, "%s_vs_label", sides[k]);
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(ts, key);
        fprintf(f, "  %s against the %.0f labels: precision %.3f  recall %.3f  F1 %.3f\n", sides[k],
                jnum(ts, "labelled"), jnum(l, "precision"), jnum(l, "recall"), jnum(l, "f1"));
    }
}

static const char charts_gp[] =
    "# hone verify charts (generated; run: gnuplot charts.gp)\n"
    "set terminal pngcairo size 900,400 noenhanced font \",10\"\n"
    "set grid\n"
    "set output 'kl.png'\nset title 'KL(ref || cand) per position, mean over prompts'\n"
    "set xlabel 'continuation position'\nset ylabel 'KL (nats)'\n"
    "plot 'kl.dat' using 1:2 with linespoints title 'mean KL'\n"
    "set output 'flips.png'\nset title 'per-prompt flip rate (teacher-forced top-1 disagreement)'\n"
    "set xlabel 'flip rate'\nset ylabel 'prompts'\nset style fill solid 0.6\nset boxwidth 0.045\n"
    "set xrange [-0.05:1.05]\n"
    "plot 'flips.dat' using 1:2 with boxes title 'prompts'\n"
    "set output 'survival.png'\nset title 'survival of an n-step task'\nset xrange [0:100]\nset yrange [0:1.05]\n"
    "set xlabel 'steps n'\nset ylabel 'P(no flip in n steps)'\n"
    "plot 'survival.dat' using 1:2 with lines title 'model: (1 - p)^n', "
    "'survival.dat' using 1:3 with linespoints title 'measured (free-running greedy)'\n";

/* The page's tool-call section: the summary, then each prompt's calls on both sides. */
static void tools_html(FILE *f, const cJSON *tools)
{
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(tools, "summary");
    if (!ts) return;
    tool_rates tr = tool_rates_of(ts);
    fprintf(f, "<h2>Tool calls</h2>\n<table>\n<tr><th>prompts</th><th>tp</th><th>fp</th><th>fn</th><th>tn</th>"
            "<th>precision</th><th>recall</th><th>F1</th><th>same tools</th><th>same arguments</th>"
            "<th>schema-valid (reference)</th><th>schema-valid (candidate)</th></tr>\n<tr><td class=n>%.0f</td>"
            "<td class=n>%.0f</td><td class=n>%.0f</td><td class=n>%.0f</td><td class=n>%.0f</td><td class=n>%.3f</td>"
            "<td class=n>%.3f</td><td class=n>%.3f</td><td class=n>%s</td><td class=n>%s</td><td class=n>%s</td>"
            "<td class=n>%s</td></tr>\n</table>\n", jnum(ts, "prompts"), jnum(ts, "tp"), jnum(ts, "fp"), jnum(ts, "fn"),
            jnum(ts, "tn"), jnum(ts, "precision"), jnum(ts, "recall"), jnum(ts, "f1"), tr.na, tr.aa, tr.vr, tr.vc);
    fputs("<table>\n<tr><th>id</th><th>reference</th><th>candidate</th></tr>\n", f);
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(tools, "prompts")) {
        fputs("<tr><td>", f);
        hone_report_escape(f, cJSON_GetObjectItemCaseSensitive(p, "id")->valuestring);
        const char *sides[] = {"reference", "candidate"};
        for (int k = 0; k < 2; k++) {
            fputs("</td><td>", f);
            const cJSON *sd = cJSON_GetObjectItemCaseSensitive(p, sides[k]), *c;
            const cJSON *content = cJSON_GetObjectItemCaseSensitive(sd, "content");
            cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(sd, "calls")) {
                const cJSON *ok = cJSON_GetObjectItemCaseSensitive(c, "schema_valid");
                hone_report_escape(f, cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring);
                fputc('(', f);
                hone_report_escape(f, cJSON_GetObjectItemCaseSensitive(c, "arguments")->valuestring);
                fprintf(f, ") %s<br>", cJSON_IsTrue(ok) ? "&#10003;" : cJSON_IsFalse(ok) ? "&#10007; invalid" : "?");
            }
            if (cJSON_IsString(content)) hone_report_escape(f, content->valuestring);
        }
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

int hone_verify_report(const char *dir, const cJSON *r, const char *gnuplot, int *charts, char *note, size_t cap)
{
    *charts = 0;
    note[0] = 0;
    if (mkdir(dir, 0755) && errno != EEXIST) return hone_error_set(HONE_EIO, "cannot create %s: %s", dir, strerror(errno));
    char *js = cJSON_Print(r);
    if (!js) return hone_error_set(HONE_ENOMEM, "out of memory");
    int rc = hone_report_write_text(dir, "verify.json", js);
    free(js);
    if (rc) return rc;
    /* the data files */
    char path[4400];
    const cJSON *summary = cJSON_GetObjectItemCaseSensitive(r, "summary");
    double p = jnum(summary, "flip_rate");
    FILE *f;
    snprintf(path, sizeof path, "%s/kl.dat", dir);
    if (!(f = fopen(path, "w"))) return hone_error_set(HONE_EIO, "cannot write %s: %s", path, strerror(errno));
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(r, "kl_per_position")) fprintf(f, "%d %.17g\n", i++, v->valuedouble);
    fclose(f);
    snprintf(path, sizeof path, "%s/flips.dat", dir);
    if (!(f = fopen(path, "w"))) return hone_error_set(HONE_EIO, "cannot write %s: %s", path, strerror(errno));
    int bins[21] = {0};
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(r, "prompts")) {
        double fr = jnum(v, "flip_rate");
        int b = (int)floor(fr * 20 + 0.5);
        bins[b < 0 ? 0 : b > 20 ? 20 : b]++;
    }
    for (int b = 0; b <= 20; b++) fprintf(f, "%.2f %d\n", b / 20.0, bins[b]);
    fclose(f);
    snprintf(path, sizeof path, "%s/survival.dat", dir);
    if (!(f = fopen(path, "w"))) return hone_error_set(HONE_EIO, "cannot write %s: %s", path, strerror(errno));
    const cJSON *gs = cJSON_GetObjectItemCaseSensitive(r, "greedy_survival");
    for (int n = 0; n <= 100; n++) {
        const cJSON *m = n ? cJSON_GetArrayItem(gs, n - 1) : NULL;
        if (n == 0) fprintf(f, "0 1 1\n");
        else if (m) fprintf(f, "%d %.17g %.17g\n", n, pow(1 - p, n), m->valuedouble);
        else fprintf(f, "%d %.17g nan\n", n, pow(1 - p, n));
    }
    fclose(f);
    if ((rc = hone_report_write_text(dir, "charts.gp", charts_gp))) return rc;
    int found = 0;
    if (hone_report_run_charts(gnuplot, dir, 60, &found, note, cap) == 0) {
        const char *png[] = {"kl.png", "flips.png", "survival.png"};
        for (int k = 0; k < 3; k++) *charts += hone_report_is_png(dir, png[k]);
    }
    /* the page */
    snprintf(path, sizeof path, "%s/index.html", dir);
    if (!(f = fopen(path, "w"))) return hone_error_set(HONE_EIO, "cannot write %s: %s", path, strerror(errno));
    hone_report_page_begin(f, "hone verify");
    fputs("<h1>hone verify</h1>\n<table>\n", f);
    const char *sides[] = {"reference", "candidate"};
    for (int k = 0; k < 2; k++) {
        fprintf(f, "<tr><th>%s</th><td>", sides[k]);
        hone_report_escape(f, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, sides[k]),
                                                               "description")->valuestring);
        fputs("</td></tr>\n", f);
    }
    fputs("<tr><th>KL</th><td>", f);
    hone_report_escape(f, cJSON_GetObjectItemCaseSensitive(r, "kl_kind")->valuestring);
    fprintf(f, "</td></tr>\n<tr><th>tokens per prompt</th><td>%.0f</td></tr>\n</table>\n", jnum(r, "steps"));
    fputs("<table>\n<tr><th>set</th><th>prompts</th><th>positions</th><th>KL mean</th><th>KL max</th><th>top-1</th>"
          "<th>max |&Delta;logit|</th><th>p</th><th>(1-p)^20</th><th>(1-p)^50</th><th>(1-p)^100</th>"
          "<th>identical greedy</th><th>first divergence (median)</th></tr>\n", f);
    const cJSON *sets = cJSON_GetObjectItemCaseSensitive(r, "sets"), *s;
    for (int pass = 0; pass < 2; pass++)
        for (s = pass ? summary : sets->child; s; s = pass ? NULL : s->next) {
            const cJSON *sv = cJSON_GetObjectItemCaseSensitive(s, "survival_model");
            fputs("<tr><td>", f);
            hone_report_escape(f, pass ? "all" : s->string);
            fprintf(f, "</td><td class=n>%.0f</td><td class=n>%.0f</td><td class=n>%.3g</td><td class=n>%.3g</td>"
                    "<td class=n>%.2f%%</td><td class=n>%.3g</td><td class=n>%.4f</td><td class=n>%.3f</td>"
                    "<td class=n>%.3f</td><td class=n>%.3f</td><td class=n>%.0f</td><td class=n>%.1f</td></tr>\n",
                    jnum(s, "prompts"), jnum(s, "positions"), jnum(s, "kl_mean"), jnum(s, "kl_max"),
                    100 * jnum(s, "top1_agreement"), jnum(s, "max_abs_dlogit"), jnum(s, "flip_rate"), jnum(sv, "20"),
                    jnum(sv, "50"), jnum(sv, "100"), jnum(s, "greedy_identical"), jnum(s, "first_divergence_median"));
        }
    fputs("</table>\n", f);
    if (*charts)
        fputs("<img src=\"kl.png\" alt=\"KL per position\">\n<img src=\"flips.png\" alt=\"flip-rate histogram\">\n"
              "<img src=\"survival.png\" alt=\"survival curves\">\n", f);
    else {
        fputs("<p class=note>", f);
        hone_report_escape(f, note[0] ? note : "no charts");
        fputs("</p>\n", f);
    }
    fputs("<h2>Prompts</h2>\n<table>\n<tr><th>id</th><th>set</th><th>tokens</th><th>flip rate</th>"
          "<th>first divergence</th><th>max |&Delta;|</th><th>reference continuation</th></tr>\n", f);
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(r, "prompts")) {
        fputs("<tr><td>", f);
        hone_report_escape(f, cJSON_GetObjectItemCaseSensitive(v, "id")->valuestring);
        fputs("</td><td>", f);
        hone_report_escape(f, cJSON_GetObjectItemCaseSensitive(v, "set")->valuestring);
        fprintf(f, "</td><td class=n>%.0f</td><td class=n>%.3f</td><td class=n>%.0f</td><td class=n>%.3g</td><td>",
                jnum(v, "tokens"), jnum(v, "flip_rate"), jnum(v, "first_divergence"), jnum(v, "max_abs_dlogit"));
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "reference_text");
        hone_report_escape(f, cJSON_IsString(t) ? t->valuestring : "");
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
    tools_html(f, cJSON_GetObjectItemCaseSensitive(r, "tools"));
    fputs("</body></html>\n", f);
    if (fclose(f)) return hone_error_set(HONE_EIO, "cannot write %s: %s", path, strerror(errno));
    return 0;
}
