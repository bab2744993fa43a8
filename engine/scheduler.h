/* Continuous batching for the server: one engine thread runs steps; each step is one
 * hone_batch with a decode row for every running sequence plus chunked-prefill rows of
 * newly admitted ones, up to a token budget. Requests join and leave at step boundaries,
 * hold their KV in the paged cache, reuse cached prompt prefixes, and turn their tokens into
 * text (streaming detokeniser, stop strings with hold-back) that HTTP threads read.
 *
 * Policies (docs/architecture.md, "Serving"):
 *  - admission: FIFO; the queue head is admitted when a batch slot is free and the blocks for
 *    its prompt (+1 token), beyond the prefix-cache hit, fit in the free blocks plus idle
 *    cached ones, keeping one block of headroom per running sequence; otherwise it waits.
 *    Submitting to a full queue fails (the server answers 503).
 *  - cache full mid-generation: idle prefix-cache blocks are evicted first (LRU, leaves
 *    first); then the youngest running request is preempted: its blocks are released and it
 *    goes back to the head of the queue with its prompt and the tokens generated so far; on
 *    readmission it recomputes them (mostly from the prefix cache) and continues with its
 *    own sampler, so its output is exactly what it would have been (logits are bitwise
 *    independent of batching).
 *  - time limit: a request past its deadline finishes with finish_reason "length" (what it
 *    has generated so far), or with a timeout error if it produced nothing yet.
 *  - cancellation (client gone): the request leaves at the next step boundary and its blocks
 *    are freed then. */
#ifndef HONE_SCHEDULER_H
#define HONE_SCHEDULER_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "forward.h"
#include "sampler.h"
#include "tokenizer.h"

struct cJSON;

/* Watches the engine's steps: the slot profiler, created and attached to the forward pass's
 * slot hook by the command that wires the server (app/serve_cli.c); the engine knows nothing
 * of it. step_begin/step_end bracket every step's forward batch on the engine thread; json
 * and shares answer readers on any thread. The scheduler holds one lock across a whole step
 * and around every json/shares call, so the observer needs no lock of its own. Any member may
 * be NULL; all NULL (the default) is no observer. */
typedef struct {
    void (*step_begin)(void *user, int64_t n_rows, int n_seqs);
    void (*step_end)(void *user);
    /* hone_scheduler_profile_json's body; the caller owns *out */
    int (*json)(void *user, struct cJSON **out);
    /* hone_scheduler_slot_shares' answer: up to cap (name, share) pairs, returns the count */
    int (*shares)(void *user, char (*names)[64], double *shares, int cap);
    void *user;
} hone_scheduler_observer;

typedef struct {
    int max_batch;          /* running sequences at most */
    int64_t step_tokens;    /* rows per step at most (decode rows + prefill chunks); >= max_batch */
    int max_queue;          /* waiting requests at most; a submit beyond fails */
    double timeout_s;       /* per-request time limit, from submission */
    int prefix_cache;       /* 1: reuse cached block-aligned prompt prefixes */
    hone_scheduler_observer observer;   /* the slot profile (see above); zeroed: none */
    /* speculative decoding (engine/spec.h): a request's decode row is followed in the same batch
     * by draft rows (prompt lookup, or the target's first self_layers layers: CPU backend),
     * verified with the position's draw: exact mode gives the tokens plain decoding gives,
     * distribution mode the same distribution (Leviathan et al.). */
    int speculate;          /* default for requests: hone_spec_kind NONE, LOOKUP, SELF or DRAFT */
    int spec_k;             /* draft tokens per request per step at most; 0: 8 */
    int spec_mode;          /* default for requests: hone_spec_mode (EXACT or DISTRIBUTION) */
    int self_layers;        /* self-speculation's draft layers; 0: half the model's */
    /* HONE_SPEC_DRAFT: a draft model's backend (borrowed; same vocabulary: hone_spec_draft_open)
     * with its own KV pool, where each drafting request keeps a sequence of its tokens, rolled
     * back to what was accepted; NULL: no draft model (speculate DRAFT is refused) */
    hone_backend *draft;
} hone_scheduler_opts;

#define HONE_SCHEDULER_OPTS_INIT \
    {.max_batch = 16, .step_tokens = 256, .max_queue = 64, .timeout_s = 600.0, .prefix_cache = 1}

/* How an embedding request pools the final hidden states of its prompt (llama.cpp's
 * <arch>.pooling_type values: 1 mean, 3 last). */
typedef enum { HONE_POOLING_NONE = 0, HONE_POOLING_MEAN = 1, HONE_POOLING_LAST = 3 } hone_pooling;

typedef struct {
    const int32_t *prompt;       /* [n_prompt] token ids, copied */
    int64_t n_prompt;            /* 1 .. n_ctx - 1 */
    int64_t max_tokens;          /* >= 1; 0 allowed with prompt_logprobs or embed (no generation) */
    hone_sampler_params sampling;
    const char *const *stop;     /* [n_stop] non-empty strings, copied */
    int n_stop;
    int ignore_eos;              /* 1: an end-of-generation token does not stop */
    /* OpenAI outputs beyond text (hone_request_logprobs, _prompt_logprobs, _embedding): */
    int logprobs;                /* 1: each generated token's logprob (end-of-generation tokens excluded) */
    int top_logprobs;            /* 0..HONE_SAMPLER_TOP_LOGPROBS_MAX alternatives per position */
    int prompt_logprobs;         /* 1: the prompt's logprobs too (echo); the prefix cache is not read */
    hone_pooling embed;          /* NONE, or an embedding request: max_tokens 0, pooled final hidden states */
    /* structured output: NULL, or a finished grammar (engine/grammar.h, copied) the output
     * must match: every step masks the tokens it does not allow, an end-of-generation token
     * is allowed only where it accepts, and the request finishes (stop) when it is done */
    const struct hone_grammar *grammar;
    int speculate;               /* HONE_REQUEST_SPEC_*: 0 the scheduler's default */
    /* NULL, or called with notify_user whenever the request has more to read (after a step
     * that gave it text or tokens, and when it finishes): on the engine thread, under the scheduler's lock,
     * so it must be quick and must not call the scheduler. An event loop resumes the waiting
     * connection from it instead of blocking a thread in hone_request_wait. It is never
     * called once hone_request_release has returned. */
    void (*notify)(void *notify_user);
    void *notify_user;
    int spec_mode;               /* HONE_REQUEST_SPEC_EXACT / _DISTRIBUTION: 0 the scheduler's default */
} hone_request_params;

enum {
    HONE_REQUEST_SPEC_DEFAULT = 0,
    HONE_REQUEST_SPEC_OFF = 1,
    HONE_REQUEST_SPEC_LOOKUP = 2,
    HONE_REQUEST_SPEC_SELF = 3,
    HONE_REQUEST_SPEC_DRAFT = 4, /* the scheduler's draft model (hone_scheduler_opts.draft) */
};
enum { HONE_REQUEST_SPEC_EXACT = 1, HONE_REQUEST_SPEC_DISTRIBUTION = 2 };

typedef enum {
    HONE_FINISH_NONE = 0,    /* still running */
    HONE_FINISH_STOP = 1,    /* end-of-generation token or a stop string */
    HONE_FINISH_LENGTH = 2,  /* max_tokens, the context length, or the time limit */
    HONE_FINISH_ERROR = 3,   /* see error / error_kind */
    HONE_FINISH_COUNT
} hone_finish;

typedef enum {
    HONE_REQUEST_ERR_NONE = 0,
    HONE_REQUEST_ERR_TIMEOUT = 1,    /* the time limit passed before any token */
    HONE_REQUEST_ERR_SHUTDOWN = 2,   /* the server stopped before it finished */
    HONE_REQUEST_ERR_CANCELLED = 3,  /* hone_request_cancel */
    HONE_REQUEST_ERR_INTERNAL = 4    /* the engine failed (message in error) */
} hone_request_error;

/* A snapshot of a request, for the HTTP side. */
typedef struct {
    int done;
    hone_finish finish;
    hone_request_error error_kind;
    char error[256];
    int64_t prompt_tokens;
    int64_t completion_tokens;   /* tokens sampled, an end-of-generation token included */
    int64_t cached_tokens;       /* prompt tokens served from the prefix cache */
    size_t text_len;             /* text that may be sent: complete UTF-8, no stop text, no
                                  * held-back prefix of a stop string */
} hone_request_state;

typedef struct {
    int n;                 /* buckets; counts[n] is +Inf */
    double le[16];
    uint64_t counts[17];   /* non-cumulative */
    double sum;
    uint64_t count;
} hone_histogram;

typedef struct {
    uint64_t prompt_tokens, generated_tokens;
    uint64_t prefix_hit_blocks, prefix_miss_blocks, prefix_hit_tokens;
    uint64_t preemptions, cancelled, timed_out, finished, steps, rows;
    int64_t running, queued;
    int64_t kv_blocks_total, kv_blocks_used, kv_block_size;
    int64_t prefix_entries, prefix_idle;
    hone_histogram ttft, itl, batch;   /* seconds, seconds, sequences per step */
    /* per finished request: seconds end to end, waiting for admission, admission to the first
     * token, first token to the end; prompt and generated tokens; finishes by hone_finish */
    hone_histogram e2e, queue_time, prefill_time, decode_time, prompt_len, gen_len;
    uint64_t finish_reasons[HONE_FINISH_COUNT];
    /* speculative decoding: request passes with draft rows, draft tokens verified and accepted,
     * tokens those passes emitted */
    uint64_t spec_passes, spec_drafted, spec_accepted, spec_emitted;
    /* the draft model's forward batches (catch-up and draft rounds, each over every drafting
     * request) and their rows */
    uint64_t spec_draft_batches, spec_draft_rows;
} hone_scheduler_stats;

typedef struct hone_scheduler hone_scheduler;
typedef struct hone_request hone_request;

/* Borrows be (whose KV cache it manages and whose hone_backend_forward_batch runs every step)
 * and tok; both must outlive the scheduler. Starts the engine thread. */
int hone_scheduler_new(hone_scheduler **out, hone_backend *be, const hone_tokenizer *tok,
                       const hone_scheduler_opts *opts);
/* Stops the engine thread: requests still queued or running finish with
 * HONE_REQUEST_ERR_SHUTDOWN (their waiters wake) and new submissions fail. Idempotent. */
void hone_scheduler_shutdown(hone_scheduler *s);
/* Shuts down, then frees everything but requests still referenced by callers, which stay
 * readable until hone_request_release. Accepts NULL. */
void hone_scheduler_free(hone_scheduler *s);

/* Queues a request; *out holds a reference the caller drops with hone_request_release.
 * HONE_ERANGE when the queue is full, HONE_EINVAL for bad params (message says which). */
int hone_scheduler_submit(hone_scheduler *s, const hone_request_params *p, hone_request **out);

/* Waits up to timeout_ms until r has more than `from` bytes of sendable text or is done;
 * fills *st and, when text is non-NULL, a malloc'd copy of the sendable text from `from`
 * (*text_len bytes, NUL-terminated; caller frees). */
int hone_request_wait(hone_scheduler *s, hone_request *r, size_t from, int timeout_ms,
                      hone_request_state *st, char **text, size_t *text_len);
/* Copies of r's logprobs so far (hone_request_params.logprobs): the generated tokens' from
 * index `from` on (*out malloc'd, *n entries; caller frees; *out NULL when none). */
int hone_request_logprobs(hone_scheduler *s, hone_request *r, int64_t from, hone_token_logprob **out,
                          int64_t *n);
/* Once r is done: the prompt's logprobs (prompt_logprobs), entry i for prompt token i (entry
 * 0 has no context: its n_top is 0 and its logprob NaN). *n is n_prompt, or 0 before the
 * prompt was computed. */
int hone_request_prompt_logprobs(hone_scheduler *s, hone_request *r, hone_token_logprob **out, int64_t *n);
/* Once an embedding request is done: the pooled hidden state, L2-normalised, into out[dim]
 * (dim = the model's embedding width, *dim receives it). HONE_EINVAL before. */
int hone_request_embedding(hone_scheduler *s, hone_request *r, float *out, int64_t cap, int64_t *dim);

/* Asks the engine to drop r at the next step boundary (its KV blocks are freed then). */
void hone_request_cancel(hone_scheduler *s, hone_request *r);
/* Drops the caller's reference; accepts NULL. */
void hone_request_release(hone_scheduler *s, hone_request *r);

/* The backend the scheduler runs on (borrowed). */
hone_backend *hone_scheduler_backend(hone_scheduler *s);

void hone_scheduler_stats_get(hone_scheduler *s, hone_scheduler_stats *out);
/* Requests queued or running. */
int64_t hone_scheduler_n_active(hone_scheduler *s);

/* What one engine step did, for a step hook. */
typedef struct {
    int64_t rows;       /* token rows computed; 0: no step ran (an idle boundary) */
    int seqs;           /* sequences with rows in the step */
    int decode_only;    /* 1: every row was a decode row (rows == seqs) */
    double seconds;     /* wall time of the step's hone_backend_forward_batch */
    int rc;             /* its return code (0, or a negative HONE_E* code) */
} hone_scheduler_step;

typedef void (*hone_scheduler_step_hook)(void *user, const hone_scheduler_step *last);

/* Installs fn (NULL removes it). It is called on the engine thread at every step boundary:
 * after each step (last describes it) and after each idle wait (last->rows == 0, at least
 * every 200 ms). No step runs during the call and the scheduler's lock is not held, so the
 * hook may replace entries of hone_backend_slots(be) (a kernel hot swap). It must be quick:
 * requests wait while it runs. user must stay valid until hone_scheduler_shutdown. */
void hone_scheduler_set_step_hook(hone_scheduler *s, hone_scheduler_step_hook fn, void *user);
/* Wakes an idle engine thread, so that an idle boundary (and the hook) comes soon. */
void hone_scheduler_wake(hone_scheduler *s);

/* The slot profile of every step so far (the observer's json); HONE_EUNSUPPORTED when there
 * is no observer (profiling is off). Caller owns *out. */
int hone_scheduler_profile_json(hone_scheduler *s, struct cJSON **out);
/* Per-slot share of step time: up to cap (name, share) pairs summed over shapes; returns
 * the count (0 without a profile). */
int hone_scheduler_slot_shares(hone_scheduler *s, char (*names)[64], double *shares, int cap);

#endif
