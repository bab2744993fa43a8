/* The evidence behind a guard verdict: what was measured (speed, kernel and model parity),
 * where, on what and from which candidate. The guard fills it (hone_guard_result.ev); the review
 * (agent/review.h) commits it beside the kernel, as this JSON and as a Markdown table. */
#ifndef HONE_EVIDENCE_H
#define HONE_EVIDENCE_H

#include <math.h>
#include <stdint.h>

#define HONE_EVIDENCE_MAX_SHAPES 16   /* per-shape timings kept (the slot's non-edge cases) */
#define HONE_EVIDENCE_NQ 7             /* quantiles kept of a timing distribution */

/* The quantiles a distribution is kept as: min, p10, p25, median, p75, p90, max. */
extern const double hone_evidence_quantile_at[HONE_EVIDENCE_NQ];

/* One timed shape of the speed gate: interleaved A/B pairs of incumbent and candidate calls,
 * caches flushed before each. ns are per call (the thread's CPU time on the CPU). */
typedef struct {
    char desc[160];                          /* "matvec_q4_1 rows=1536 cols=576" */
    int gate;                                /* 1: the shape the speed gate's verdict rests on */
    int reps;                                /* A/B pairs */
    double incumbent_ns, candidate_ns;       /* medians */
    double speedup, ci_low, ci_high;         /* median of the pairs' ratios, bootstrap 95% CI */
    double incumbent_q[HONE_EVIDENCE_NQ];    /* quantiles of the incumbent's ns (see above) */
    double candidate_q[HONE_EVIDENCE_NQ];
    double bytes, flops;                     /* the slot's cost model for this shape */
    double roofline_ns;                      /* max(bytes / bandwidth, flops / FMA peak) at 1x */
    double incumbent_roofline, candidate_roofline; /* roofline_ns / median ns: 0..1 (1 = at the roof) */
} hone_evidence_shape;

/* The machine the verdict was measured on (strings owned: the record is copyable). */
typedef struct {
    char cpu_model[128];                     /* /proc/cpuinfo "model name" */
    char cpu_flags[256];                     /* the ISA flags that matter, present ones only:
                                              * "sse4_2 avx avx2 fma f16c avx512f ..." */
    int cores, threads;                      /* physical cores (-1 unknown), online CPUs */
    char compiler[256];                      /* candidates/compile.c's compiler: "cc: gcc (Debian
                                              * 12.2.0-14) 12.2.0" */
    char os[160];                            /* uname: "Linux 6.1.0-18-amd64 x86_64" */
} hone_evidence_machine;

/* Everything behind an acceptance. Plain data: strings are borrowed (NULL: unknown) except the
 * char arrays, doubles are NaN when not measured (serialised as null / "n/a"), ints < 0 when
 * not known. */
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
    /* per-shape kernel timings: the gate's shape (its own samples) and every other non-edge
     * shape (a shorter series after the gate passed; evidence only, not the verdict) */
    hone_evidence_shape shape[HONE_EVIDENCE_MAX_SHAPES];
    int n_shapes;
    /* end to end: decode steps alternated between the tables (the e2e gate) */
    double e2e_incumbent_tok_s, e2e_candidate_tok_s;   /* 1e9 / median step ns */
    double e2e_incumbent_q[HONE_EVIDENCE_NQ];          /* quantiles of tokens/s per step */
    double e2e_candidate_q[HONE_EVIDENCE_NQ];
    double e2e_ratio_median, e2e_ratio_ci_low, e2e_ratio_ci_high; /* incumbent step / candidate step */
    int e2e_steps;
    /* the noise */
    double ab_ratio_q[HONE_EVIDENCE_NQ];     /* quantiles of the gate shape's A/B speedup ratios */
    double ab_ratio_iqr_rel;                 /* (p75 - p25) / median of those ratios */
    double bandwidth_gbps_before, bandwidth_gbps_after; /* the read-bandwidth probe around timing */
    int preempted_reps;                      /* pairs whose wall time exceeded CPU time by 1.2x */
    /* where, and how to get the verdict again */
    hone_evidence_machine machine;
    char reproduce[1024];                    /* "hone guard -m MODEL --slot S --backend cpu FILE --seed N" */
    /* the proposer's LLM call(s) for this candidate (filled by the caller; unknown: -1 / NaN) */
    int llm_prompt_tokens, llm_completion_tokens;
    double llm_cost_usd;
} hone_evidence;

#define HONE_EVIDENCE_INIT                                                                     \
    {.speedup_median = NAN, .speedup_ci_low = NAN, .speedup_ci_high = NAN, .ci_level = NAN,       \
     .incumbent_ns = NAN, .candidate_ns = NAN, .reps = -1, .threshold = NAN,                      \
     .candidate_max_abs_err = NAN, .incumbent_max_abs_err = NAN, .slack = NAN,                    \
     .model_max_abs_dlogit = NAN, .model_kl_mean = NAN, .model_kl_max = NAN,                      \
     .model_argmax_agreement = NAN, .model_prompts = -1, .model_steps = -1, .seed = -1,           \
     .guard_seconds = NAN, .e2e_incumbent_tok_s = NAN, .e2e_candidate_tok_s = NAN,                  \
     .e2e_incumbent_q = {NAN, NAN, NAN, NAN, NAN, NAN, NAN},                                        \
     .e2e_candidate_q = {NAN, NAN, NAN, NAN, NAN, NAN, NAN}, .e2e_ratio_median = NAN,                \
     .e2e_ratio_ci_low = NAN, .e2e_ratio_ci_high = NAN, .e2e_steps = -1,                             \
     .ab_ratio_q = {NAN, NAN, NAN, NAN, NAN, NAN, NAN}, .ab_ratio_iqr_rel = NAN,                     \
     .bandwidth_gbps_before = NAN, .bandwidth_gbps_after = NAN, .preempted_reps = -1,                \
     .machine = {.cores = -1, .threads = -1}, .llm_prompt_tokens = -1, .llm_completion_tokens = -1, \
     .llm_cost_usd = NAN}

/* The evidence as a JSON object (cJSON's formatted print, ending in "\n"): malloc'd into *out.
 * slot and backend are recorded with it. Keys: slot, backend, candidate{hash, so_hash, origin_kind,
 * origin}, speed{speedup_median, ci_low, ci_high, ci_level, incumbent_ns, candidate_ns, reps,
 * threshold}, kernel_parity{tier, candidate_max_abs_err, incumbent_max_abs_err, slack, shapes},
 * model_parity{max_abs_dlogit, kl_mean, kl_max, argmax_agreement, prompts, steps}, device,
 * model, seed, guard_seconds; and
 *   shapes: [{shape, gate, reps, incumbent_ns, candidate_ns, speedup, ci_low, ci_high,
 *             incumbent_ns_quantiles[7], candidate_ns_quantiles[7], bytes, flops, roofline_ns,
 *             incumbent_roofline_pct, candidate_roofline_pct}],
 *   e2e{incumbent_tok_s, candidate_tok_s, incumbent_tok_s_quantiles[7],
 *       candidate_tok_s_quantiles[7], ratio_median, ci_low, ci_high, steps},
 *   noise{ab_ratio_quantiles[7], ab_ratio_iqr_rel, bandwidth_gbps_before, bandwidth_gbps_after,
 *         preempted_reps},
 *   machine{cpu_model, cpu_flags, cores, threads, compiler, os}, reproduce,
 *   llm_prompt_tokens, llm_completion_tokens (ints, -1 unknown), llm_cost_usd (null unknown),
 *   quantiles (the 7 probabilities every *_quantiles array holds: 0, .1, .25, .5, .75, .9, 1).
 * Unknown values are null (llm token counts: -1). Integers: every count is an int (< 2^31, exact
 * as a JSON number); the seed, a 63-bit integer that a double cannot hold, is a decimal STRING
 * ("7860209143120308780"), exact in every JSON reader (a JavaScript or cJSON number is a double). */
int hone_evidence_to_json(char **out, const hone_evidence *ev, const char *slot, const char *backend);

/* The machine this process runs on: CPU model and ISA flags (/proc/cpuinfo), cores and threads,
 * the candidate compiler's identity (candidates/compile.h) and the OS (uname). Never fails:
 * what cannot be read stays "" / -1. */
void hone_evidence_machine_detect(hone_evidence_machine *m);

/* The quantiles (hone_evidence_quantile_at) of v[0..n) into q (NaN when n == 0); sorts a copy. */
void hone_evidence_quantiles(double q[HONE_EVIDENCE_NQ], const double *v, int n);

#endif
