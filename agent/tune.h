/* `hone tune`: profile, pick the slot with the largest expected end-to-end gain, propose
 * rewrites (an LLM endpoint, the engine itself, or the search proposer), run each through the
 * guard, commit the accepted ones for review, and report decode tokens/s before and after. */
#ifndef HONE_TUNE_H
#define HONE_TUNE_H

#include <stdio.h>

#include "agent/round.h"

typedef struct {
    const char *model_path;
    const char *backend;        /* "cpu" (CUDA tuning needs a GPU for the execution gates) */
    const char *llm;            /* endpoint URL, "self", or "none" (search); NULL: $HONE_LLM_URL or none */
    const char *llm_model;      /* NULL: $HONE_LLM_MODEL */
    const char *slot;           /* NULL: the profile's choice */
    int budget;                 /* full guard runs in all; default 6 */
    int screen_budget;          /* search proposer: cheap screens (guard opts.screen) in all;
                                 * 0: 24; they rank points before the full guard runs */
    int screen_reps;            /* search: timed pairs of a first screen (doubled each round of
                                 * halving); 0: 5 */
    const char *state_dir;      /* NULL: the store's default */
    const char *repo;           /* kernels repository for review branches; NULL: the source tree's */
    const char *kernels_dir;    /* the approved kernels tree to start from (--kernels DIR): the
                                 * engine serves it while profiling and measuring, and the guard's
                                 * incumbent is the kernel it serves; NULL: the shipped baselines */
    int commit;                 /* 1: commit accepted candidates for review (default) */
    const char *push;           /* non-NULL: push each committed branch to this remote (name or URL) */
    double threshold;           /* speed gate; default 1.05 */
    int n_threads;              /* 0: all CPUs */
    long llm_timeout_ms;        /* 0: 120 s */
    int quiet;
    const char *report_dir;     /* NULL: none; else a browser report of every slot's best accepted
                                 * candidate (agent/report.h) is written there at the end */
    int progress;               /* the live progress line on log (agent/progress.h): -1 a bar when
                                 * log is a terminal, plain lines otherwise (default); 0 none */
} hone_tune_opts;

#define HONE_TUNE_OPTS_INIT {.backend = "cpu", .budget = 6, .commit = 1, .threshold = 1.05, .progress = -1}

#define HONE_TUNE_MAX_SLOTS 8

typedef hone_round_tally hone_tune_slot_result; /* tried, accepted, best speedup/tier/hash, branch */

typedef struct {
    hone_tune_slot_result slots[HONE_TUNE_MAX_SLOTS];
    int n_slots;
    int candidates;             /* proposals sent to the full guard (<= budget) */
    int screened;               /* search: screens run (<= screen_budget) */
    int remembered;             /* search: points whose screen came from the search memory */
    int no_code;                /* LLM replies without usable code */
    int llm_errors;             /* failed LLM calls (HTTP errors, timeouts) */
    double tok_s_before, tok_s_after; /* decode tokens/s, medians of alternated runs (one protocol) */
    double tok_s_before_spread, tok_s_after_spread; /* max / min - 1 over those runs */
    int measure_runs;
} hone_tune_result;

/* Runs the loop; the progress line, one line per candidate and the final table go to log.
 * Returns 0 when the loop ran (whatever was accepted), a negative HONE_E* code otherwise. */
int hone_tune_run(hone_tune_result *out, const hone_tune_opts *opts, FILE *log);

#endif
