/* The evidence behind a guard verdict: what was measured (speed, kernel and model parity),
 * where, on what and from which candidate. The guard fills it (hone_guard_result.ev); the review
 * (agent/review.h) commits it beside the kernel, as this JSON and as a Markdown table. */
#ifndef HONE_EVIDENCE_H
#define HONE_EVIDENCE_H

#include <math.h>
#include <stdint.h>

/* Everything behind an acceptance. Plain data: strings are borrowed (NULL: unknown), doubles
 * are NaN when not measured (serialised as null / "n/a"), ints < 0 when not known. */
typedef struct {
    /* speed gate, kernel level: incumbent time / candidate time, interleaved A/B */
    double speedup_median;
    double speedup_ci_low, speedup_ci_high;  /* confidence interval of the median speedup */
    double ci_level;                         /* e.g. 0.95 */
    double incumbent_ns, candidate_ns;       /* median time per call */
    int reps;                                /* timed repetitions of each */
    double threshold;                        /* the gate: median speedup >= threshold */
    /* kernel parity against the f64 oracle, over every test input */
    const char *parity_tier;                 /* "exact" or "faithful" */
    double candidate_max_abs_err;            /* max |candidate - oracle| */
    double incumbent_max_abs_err;            /* max |incumbent - oracle| */
    double slack;                            /* faithful: allowed excess over the incumbent */
    const char *shapes;                      /* the shapes checked, e.g. "576x576, 1536x576, 7x35" */
    /* model parity, teacher-forced over the parity prompt set */
    double model_max_abs_dlogit;             /* max |Δlogit| vs the incumbent */
    double model_kl_mean, model_kl_max;      /* per-position KL(incumbent || candidate) */
    double model_argmax_agreement;           /* fraction of positions with the same argmax, 0..1 */
    int model_prompts, model_steps;
    /* where and what */
    const char *device;                      /* "cpu: AMD EPYC 9654 (16 threads)", "cuda: NVIDIA H200" */
    const char *model;                       /* model name (or file) the parity was measured on */
    const char *candidate_hash;              /* content hash of the candidate source (hex) */
    const char *so_hash;                     /* CPU: SHA-256 of the object the guard vetted (hex); the
                                                kernel loader serves only an object with it */
    const char *origin_kind;                 /* "llm", "search" or "file" */
    const char *origin;                      /* LLM model name, search parameters, or file path */
    int64_t seed;                            /* the input seed drawn after the candidate was frozen */
    double guard_seconds;                    /* wall time of the whole guard run */
} hone_evidence;

#define HONE_EVIDENCE_INIT                                                                     \
    {.speedup_median = NAN, .speedup_ci_low = NAN, .speedup_ci_high = NAN, .ci_level = NAN,       \
     .incumbent_ns = NAN, .candidate_ns = NAN, .reps = -1, .threshold = NAN,                      \
     .candidate_max_abs_err = NAN, .incumbent_max_abs_err = NAN, .slack = NAN,                    \
     .model_max_abs_dlogit = NAN, .model_kl_mean = NAN, .model_kl_max = NAN,                      \
     .model_argmax_agreement = NAN, .model_prompts = -1, .model_steps = -1, .seed = -1,           \
     .guard_seconds = NAN}

/* The evidence as a JSON object (cJSON's formatted print, ending in "\n"): malloc'd into *out.
 * slot and backend are recorded with it. Keys: slot, backend, candidate{hash, so_hash, origin_kind,
 * origin}, speed{speedup_median, ci_low, ci_high, ci_level, incumbent_ns, candidate_ns, reps,
 * threshold}, kernel_parity{tier, candidate_max_abs_err, incumbent_max_abs_err, slack, shapes},
 * model_parity{max_abs_dlogit, kl_mean, kl_max, argmax_agreement, prompts, steps}, device,
 * model, seed, guard_seconds. Unknown values are null. */
int hone_evidence_to_json(char **out, const hone_evidence *ev, const char *slot, const char *backend);

#endif
