/* Speculative decoding that is bit-exact: a draft proposes the next tokens of one sequence, the
 * target verifies them in one batched forward, and the accepted prefix plus the target's own
 * next token are emitted. Because a batched row is bitwise the row decoded alone and every
 * position's random draw is a fixed function of (seed, position) (hone_sampler_sample_at),
 * `exact` mode emits exactly the tokens plain decoding emits, and each from the same logits.
 *
 * Drafts: prompt lookup (the longest recent n-gram of the prompt and output so far that
 * occurred before, and the tokens that followed it), or a draft model (same vocabulary: a
 * smaller model, or the target's first layers: self-speculation). */
#ifndef HONE_SPEC_H
#define HONE_SPEC_H

#include <stdint.h>

#include "backend.h"
#include "kv_cache.h"
#include "sampler.h"
#include "tokenizer.h"

typedef enum {
    HONE_SPEC_NONE = 0,   /* plain decoding: one token per target pass (the reference) */
    HONE_SPEC_LOOKUP = 1, /* prompt lookup: n-gram matches in the prompt and the output */
    HONE_SPEC_DRAFT = 2,  /* a draft model (hone_spec_opts.draft), same vocabulary */
    HONE_SPEC_SELF = 3,   /* self-speculation: the target's first layers, its final norm and head
                           * (CPU backend), sharing the target's KV rows of those layers */
} hone_spec_kind;

typedef enum {
    HONE_SPEC_EXACT = 0,        /* accept a draft token iff it is the token the target samples at
                                 * that position with that position's draw: output bitwise plain */
    HONE_SPEC_DISTRIBUTION = 1, /* Leviathan et al. / Chen et al. rejection sampling: the same
                                 * output distribution, not the same tokens */
} hone_spec_mode;

typedef struct {
    int kind;              /* hone_spec_kind */
    int mode;              /* hone_spec_mode */
    int k_max;             /* at most this many draft tokens per pass, 1..64 */
    int ngram_min, ngram_max; /* lookup: suffix lengths tried, longest first */
    int adaptive;          /* 1: the draft length per pass from the measured acceptance and pass
                            * times (expected tokens per second); 0: always k_max when drafts exist */
    hone_backend *draft;   /* HONE_SPEC_DRAFT: the draft model's backend (borrowed); its vocabulary
                            * must be the target's */
    int self_layers;       /* HONE_SPEC_SELF: layers of the draft; 0: chosen by measurement at start
                            * (agreement of each candidate's argmax with the target's on the
                            * prompt's last rows, against its share of the weights read) */
} hone_spec_opts;

#define HONE_SPEC_OPTS_INIT                                                                     \
    {.kind = HONE_SPEC_LOOKUP, .mode = HONE_SPEC_EXACT, .k_max = 8, .ngram_min = 2, .ngram_max = 4, \
     .adaptive = 1, .draft = NULL, .self_layers = 0}

/* Counters of one sequence's speculation. */
typedef struct {
    int64_t passes;    /* target forward passes after the prefill */
    int64_t emitted;   /* tokens those passes emitted (the first token, from the prefill, excluded) */
    int64_t proposed;  /* draft tokens put into verifying passes */
    int64_t drafted;   /* draft tokens examined: those accepted and the first rejected of each pass */
    int64_t accepted;  /* of which accepted (accepted / proposed: the acceptance rate) */
    int64_t draft_passes; /* draft model forward passes */
    int64_t self_layers;  /* self-speculation: the draft's layers (0: drafting off, none paid) */
    double self_agreement;/* and its measured agreement with the target on the prompt */
} hone_spec_stats;

typedef struct hone_spec hone_spec;

/* A draft model (HONE_SPEC_DRAFT, `--draft MODEL`): the GGUF at path opened as a second model
 * and backend on device with co (so with its own KV pool of co->kv_blocks blocks). Refused
 * (HONE_EINVAL, naming the first difference) unless its vocabulary is target_tok's
 * (hone_tokenizer_same_vocab): a draft token id must mean the target's token. */
typedef struct hone_spec_draft hone_spec_draft;
int hone_spec_draft_open(hone_spec_draft **out, const char *path, const hone_tokenizer *target_tok, int device,
                         const hone_ctx_opts *co);
/* The draft's backend (borrowed: valid until hone_spec_draft_free). */
hone_backend *hone_spec_draft_backend(const hone_spec_draft *d);
/* Accepts NULL. */
void hone_spec_draft_free(hone_spec_draft *d);

/* Passes a draft model or self-speculation choose no draft (adaptive k = 0) before one pass
 * drafts a single token anyway, so that the acceptance estimate, which only drafting updates,
 * can recover when the text turns predictable. */
#define HONE_SPEC_PROBE_AFTER 16

/* Parses "none"/"off", "lookup", "draft", "self" into *out (hone_spec_kind); "exact"/"distribution"
 * into a hone_spec_mode. HONE_EINVAL for anything else. */
int hone_spec_parse_kind(const char *s, int *out);
int hone_spec_parse_mode(const char *s, int *out);

/* A speculative decoder for one sequence of target backend be: seq (empty, or holding a prefix
 * the caller computed; borrowed) is fed and rolled back by the decoder; smp (borrowed) decides
 * every token with hone_sampler_sample_at and records each emitted token with
 * hone_sampler_accept. HONE_EINVAL for bad options or a draft whose vocabulary differs. */
int hone_spec_new(hone_spec **out, const hone_spec_opts *opts, hone_backend *be, hone_sampler *smp,
                  hone_kv_seq *seq);
/* Releases the draft model's sequence; seq stays the caller's. Accepts NULL. */
void hone_spec_free(hone_spec *sp);

/* Feeds prompt[n] (n >= 1) to seq and emits the first token into out[0] (*n_out = 1). */
int hone_spec_start(hone_spec *sp, const int32_t *prompt, int64_t n, int32_t *out, int64_t *n_out);

/* One target pass: drafts up to min(k, max_emit - 1) tokens, verifies them with the last emitted
 * token in one batched forward, and writes the emitted tokens (1 .. k + 1 of them, at most
 * max_emit >= 1) into out, *n_out their count. Afterwards seq holds every emitted token but the
 * last (whose logits come with the next pass): rejected positions are rolled back
 * (hone_kv_cache_truncate). On error (context or KV cache full) seq and the emitted tokens are as
 * before the call. out needs room for k_max + 1 tokens. */
int hone_spec_step(hone_spec *sp, int64_t max_emit, int32_t *out, int64_t *n_out);

/* The logits row (n_vocab floats) that emitted token j of the last call was decided from:
 * bitwise the row plain decoding decides that token from. Valid until the next call. */
const float *hone_spec_logits(const hone_spec *sp, int64_t j);

/* The counters so far. */
hone_spec_stats hone_spec_get_stats(const hone_spec *sp);

/* Prompt lookup: the draft after hist[n]: for L = ngram_max down to ngram_min, the most recent
 * earlier occurrence of hist's last L tokens, and up to k tokens that followed it. Returns how
 * many it wrote to out (0: no match).
 *   hist = 5 6 7 8 5 6, ngram 2: the suffix "5 6" occurred at 0, so the draft is 7 8 5 6 ... */
int64_t hone_spec_lookup(const int32_t *hist, int64_t n, int ngram_min, int ngram_max, int64_t k,
                         int32_t *out);

/* The draft-length rule, for callers that verify drafts themselves (the scheduler): the k in
 * 0..avail that maximises the expected tokens per unit of time, 1 + alpha + ... + alpha^k over
 * cost[k] (the time of a pass of k + 1 rows; NULL: 1 + 0.1 k, the prior before measuring), where
 * alpha is the estimated probability that a draft token is accepted. */
int64_t hone_spec_choose_k(double alpha, int64_t avail, const double *cost);
/* Distribution mode's draft token at position P from the draft's logits: its distribution q
 * (n_vocab doubles, written: hone_sampler_probs) sampled with the position's stream-3 draw.
 * -1 when the sampler fails. */
int32_t hone_spec_propose_distribution(hone_sampler *smp, const float *logits, int64_t P, double *q);
/* Distribution mode's rule at position P (Leviathan et al. / Chen et al.): accept draft d with
 * probability min(1, p(d) / q(d)) (the stream-1 draw; q NULL: one-hot at d, a lookup draft), else
 * sample the residual max(0, p - q), normalised (stream 2); p: the target's distribution from
 * logits, scratch of n_vocab doubles. Returns the token (-1: the sampler failed), *accepted. */
int32_t hone_spec_decide_distribution(hone_sampler *smp, const float *logits, int64_t P, int32_t d,
                                      const double *q, double *p, int *accepted);
/* alpha after one more observed draft token (accepted or not): a running average. */
double hone_spec_observe(double alpha, int accepted);
/* The estimate before any observation. */
#define HONE_SPEC_ALPHA_INIT 0.5

#endif
