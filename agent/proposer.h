/* Where candidate kernels come from: one interface (a vtable and its context, as ggml's backends)
 * over the search proposer (agent/search.c's templates) and the LLM proposer (agent/prompt.c's
 * prompt to any OpenAI-compatible endpoint through agent/llm.c, the kernel taken out of the
 * reply by agent/extract.c). "self" is the LLM proposer pointed at this engine's own server on
 * loopback: `hone tune` starts one, `hone serve --tune` is one. */
#ifndef HONE_PROPOSER_H
#define HONE_PROPOSER_H

#include <stddef.h>
#include <stdint.h>

#include "agent/prompt.h"
#include "engine/slots.h"

/* What an --llm value names: NULL (then $HONE_LLM_URL), "" or "none": the search proposer;
 * "self": this engine on loopback; anything else an endpoint URL. */
typedef enum {
    HONE_PROPOSER_SEARCH,
    HONE_PROPOSER_SELF,
    HONE_PROPOSER_URL,
} hone_proposer_kind;

/* The kind llm names; *url (may be NULL) gets the value it resolved to ($HONE_LLM_URL for NULL). */
hone_proposer_kind hone_proposer_kind_of(const char *llm, const char **url);

typedef enum {
    HONE_PROPOSAL_CODE,       /* source holds a kernel */
    HONE_PROPOSAL_NO_CODE,    /* the reply held no usable code: reason and why say what was wrong */
    HONE_PROPOSAL_LLM_FAILED, /* the call itself failed (HTTP error, timeout): why */
} hone_proposal_status;

typedef struct {
    hone_proposal_status status;
    char *source;             /* CODE: the kernel (malloc'd, NUL-terminated; hone_proposal_clear) */
    size_t source_len;
    const char *reason;       /* NO_CODE: the extract status's name, e.g. "no_code" (static) */
    char why[600];            /* NO_CODE, LLM_FAILED: the error text */
    char origin_kind[16];     /* "search" or "llm" */
    char origin[512];         /* the search point, or "llm MODEL via URL, N prompt + M completion
                               * tokens, K attempt(s)" */
    int64_t llm_prompt_tokens, llm_completion_tokens; /* the LLM's usage over every call this
                               * proposal made; -1: not an LLM proposal */
    double llm_cost_usd;      /* from the prices given (hone_proposer_llm_opts); NAN: unknown */
    int llm_level;            /* the prompt level that fit the endpoint's context (hone_prompt_opts) */
} hone_proposal;

/* What to propose: the slot, and for the LLM the prompt's live lines and earlier rejections. */
typedef struct {
    hone_slot_id slot;
    int index;                /* search: the point of the slot's space (past the last: the last) */
    const char *shapes;       /* LLM: one line per call shape; NULL: none */
    const char *profile;      /* LLM: the slot's share and roofline line; NULL: none */
    const hone_prompt_history *history;
    int n_history;
    const char *kernels_dir;  /* LLM: the served tree, whose kernel is the incumbent shown */
    const char *best_source;  /* LLM: the best kernel accepted so far for the slot (NULL: none) */
    const char *best_summary;
} hone_proposer_request;

struct hone_proposer_i {
    const char *name;         /* "search", "llm" */
    /* How many candidates it can make for slot; 0: it cannot handle the slot. */
    int (*space)(void *ctx, hone_slot_id slot);
    /* Fills out (status CODE, NO_CODE or LLM_FAILED); a negative HONE_E* only when it could not
     * try (the prompt could not be built, memory). */
    int (*propose)(void *ctx, hone_proposal *out, const hone_proposer_request *req);
    void (*free)(void *ctx);
};

typedef struct {
    const struct hone_proposer_i *i;
    void *ctx;
} hone_proposer;

/* The search proposer (no context). */
int hone_proposer_search_new(hone_proposer *out);

/* The LLM proposer's settings. */
typedef struct {
    const char *url;
    const char *model;        /* NULL: $HONE_LLM_MODEL */
    const char *api_key;      /* NULL: $HONE_LLM_API_KEY */
    long timeout_ms;          /* <= 0: the client's 120 s */
    int max_tokens;           /* 0: the client's 4096; < 0: not sent (the server's own limit, for
                               * this engine's server the rest of its context: --llm self) */
    double usd_per_mtok_in, usd_per_mtok_out; /* prices per million tokens; 0: unknown ($HONE_LLM_PRICE
                               * = "IN,OUT" when both are 0) */
} hone_proposer_llm_opts;

/* The LLM proposer, prompting for the CPU backend of this machine. When the endpoint refuses a
 * prompt as longer than its context, the proposal retries with the next smaller prompt level
 * (hone_prompt_opts.level) before it gives up. */
int hone_proposer_llm_new(hone_proposer *out, const hone_proposer_llm_opts *o);

int hone_proposer_space(const hone_proposer *p, hone_slot_id slot);
int hone_proposer_propose(const hone_proposer *p, hone_proposal *out, const hone_proposer_request *req);
/* Frees the context and zeroes p; accepts a zeroed proposer. */
void hone_proposer_free(hone_proposer *p);

/* Frees a proposal's source; accepts NULL. */
void hone_proposal_clear(hone_proposal *p);

#endif
