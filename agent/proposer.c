/* The two proposers behind hone_proposer: search (rendered template points) and LLM (prompt,
 * chat, extract). Neither runs what it proposes: the guard does, in its workers. */
#include "proposer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/extract.h"
#include "agent/llm.h"
#include "agent/search.h"
#include "engine/error.h"

#define SEARCH_SPACE_CAP 64

hone_proposer_kind hone_proposer_kind_of(const char *llm, const char **url)
{
    const char *u = llm ? llm : getenv("HONE_LLM_URL");
    if (url) *url = u;
    if (!u || !*u || !strcmp(u, "none")) return HONE_PROPOSER_SEARCH;
    return strcmp(u, "self") ? HONE_PROPOSER_URL : HONE_PROPOSER_SELF;
}

/* ---- search ---- */

static int search_space(void *ctx, hone_slot_id slot)
{
    (void)ctx;
    hone_search_point pts[SEARCH_SPACE_CAP];
    return hone_search_supports(slot) ? hone_search_space(slot, pts, SEARCH_SPACE_CAP) : 0;
}

static int search_propose(void *ctx, hone_proposal *out, const hone_proposer_request *req)
{
    (void)ctx;
    hone_search_point pts[SEARCH_SPACE_CAP];
    int np = hone_search_space(req->slot, pts, SEARCH_SPACE_CAP);
    if (np <= 0) return hone_error_set(HONE_EUNSUPPORTED, "the search proposer has no template for %s",
                                       hone_slots_name(req->slot));
    int k = req->index < np ? req->index : np - 1;
    hone_search_describe(req->slot, pts[k], out->origin, sizeof out->origin);
    snprintf(out->origin_kind, sizeof out->origin_kind, "search");
    int rc = hone_search_render(req->slot, pts[k], &out->source);
    if (rc) return rc;
    out->source_len = strlen(out->source);
    out->status = HONE_PROPOSAL_CODE;
    return 0;
}

static void search_free(void *ctx) { (void)ctx; }

static const struct hone_proposer_i search_i = {"search", search_space, search_propose, search_free};

int hone_proposer_search_new(hone_proposer *out)
{
    out->i = &search_i;
    out->ctx = NULL;
    return 0;
}

/* ---- LLM ---- */

typedef struct {
    hone_llm *client;
    char device[512];         /* the prompt's device line, this machine's CPU */
    double price_in, price_out; /* USD per million tokens; 0: unknown */
} llm_ctx;

static int llm_space(void *ctx, hone_slot_id slot)
{
    (void)ctx;
    (void)slot;
    return 1 << 30; /* every slot, as often as asked */
}

static int llm_propose(void *ctx, hone_proposal *out, const hone_proposer_request *req)
{
    llm_ctx *c = ctx;
    hone_prompt_opts po = HONE_PROMPT_OPTS_INIT;
    po.slot = req->slot;
    po.backend = "cpu";
    po.shapes = req->shapes;
    po.profile = req->profile;
    po.device = c->device;
    po.history = req->history;
    po.n_history = req->n_history;
    po.kernels_dir = req->kernels_dir;
    po.best_source = req->best_source;
    po.best_summary = req->best_summary;
    char *reply = NULL;
    hone_llm_usage u, all = {0};
    int lrc = 0;
    /* the largest prompt that fits the endpoint's context */
    for (po.level = 0; po.level < HONE_PROMPT_LEVELS; po.level++) {
        char *sys = NULL, *user = NULL;
        int rc = hone_prompt_build(&po, &sys, &user);
        if (rc) return rc;
        hone_llm_msg msgs[2] = {{"system", sys}, {"user", user}};
        lrc = hone_llm_chat(c->client, msgs, 2, &reply, &u);
        free(sys);
        free(user);
        all.prompt_tokens += u.prompt_tokens;
        all.completion_tokens += u.completion_tokens;
        all.attempts += u.attempts;
        if (!lrc || !u.context_exceeded) break;
    }
    out->llm_level = po.level < HONE_PROMPT_LEVELS ? po.level : HONE_PROMPT_LEVELS - 1;
    out->llm_prompt_tokens = all.prompt_tokens;
    out->llm_completion_tokens = all.completion_tokens;
    out->llm_cost_usd = c->price_in > 0 || c->price_out > 0
                            ? ((double)all.prompt_tokens * c->price_in + (double)all.completion_tokens * c->price_out) / 1e6
                            : NAN;
    snprintf(out->origin_kind, sizeof out->origin_kind, "llm");
    snprintf(out->origin, sizeof out->origin,
             "llm %s via %s, %lld prompt + %lld completion tokens, %d attempt(s)%s",
             hone_llm_model(c->client), hone_llm_endpoint(c->client), (long long)all.prompt_tokens,
             (long long)all.completion_tokens, all.attempts,
             out->llm_level ? ", the smaller prompt (context)" : "");
    if (lrc) {
        out->status = HONE_PROPOSAL_LLM_FAILED;
        snprintf(out->why, sizeof out->why, "%s", hone_error_last());
        return 0;
    }
    hone_extract_status st;
    int rc = hone_extract_code(reply, req->slot, "cpu", &out->source, &st);
    free(reply);
    if (rc) return rc;
    if (st != HONE_EXTRACT_OK || !out->source) {
        free(out->source);
        out->source = NULL;
        out->status = HONE_PROPOSAL_NO_CODE;
        out->reason = hone_extract_status_name(st);
        snprintf(out->why, sizeof out->why, "%s%s", hone_error_last(),
                 u.truncated ? " (the reply stopped at the token limit)" : "");
        return 0;
    }
    out->source_len = strlen(out->source);
    out->status = HONE_PROPOSAL_CODE;
    return 0;
}

static void llm_free(void *ctx)
{
    llm_ctx *c = ctx;
    if (!c) return;
    hone_llm_free(c->client);
    free(c);
}

static const struct hone_proposer_i llm_i = {"llm", llm_space, llm_propose, llm_free};

int hone_proposer_llm_new(hone_proposer *out, const hone_proposer_llm_opts *o)
{
    out->i = NULL;
    out->ctx = NULL;
    llm_ctx *c = calloc(1, sizeof *c);
    if (!c) return hone_error_set(HONE_ENOMEM, "out of memory");
    hone_llm_opts lo = HONE_LLM_OPTS_INIT;
    lo.url = o->url;
    lo.model = o->model;
    lo.api_key = o->api_key;
    if (o->timeout_ms > 0) lo.timeout_ms = o->timeout_ms;
    if (o->max_tokens) lo.max_tokens = o->max_tokens;
    c->price_in = o->usd_per_mtok_in;
    c->price_out = o->usd_per_mtok_out;
    const char *price = getenv("HONE_LLM_PRICE");
    if (c->price_in <= 0 && c->price_out <= 0 && price &&
        sscanf(price, "%lf,%lf", &c->price_in, &c->price_out) != 2)
        c->price_in = c->price_out = 0;
    int rc = hone_llm_new(&c->client, &lo);
    if (rc) {
        free(c);
        return rc;
    }
    hone_prompt_cpu_device(c->device, sizeof c->device);
    out->i = &llm_i;
    out->ctx = c;
    return 0;
}

/* ---- the interface ---- */

int hone_proposer_space(const hone_proposer *p, hone_slot_id slot)
{
    return p->i->space(p->ctx, slot);
}

int hone_proposer_propose(const hone_proposer *p, hone_proposal *out, const hone_proposer_request *req)
{
    memset(out, 0, sizeof *out);
    out->status = HONE_PROPOSAL_NO_CODE;
    out->reason = "no_code";
    out->llm_prompt_tokens = out->llm_completion_tokens = -1;
    out->llm_cost_usd = NAN;
    int rc = p->i->propose(p->ctx, out, req);
    if (rc) hone_proposal_clear(out);
    return rc;
}

void hone_proposer_free(hone_proposer *p)
{
    if (!p || !p->i) return;
    p->i->free(p->ctx);
    p->i = NULL;
    p->ctx = NULL;
}

void hone_proposal_clear(hone_proposal *p)
{
    if (!p) return;
    free(p->source);
    p->source = NULL;
    p->source_len = 0;
}
