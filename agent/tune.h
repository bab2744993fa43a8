/* `hone tune`: profile, pick the slot with the largest expected end-to-end gain, propose
 * rewrites (an LLM endpoint, the engine itself, or the search proposer), run each through the
 * guard, commit the accepted ones for review, and report decode tokens/s before and after. */
#ifndef HONE_TUNE_H
#define HONE_TUNE_H

#include <stdio.h>

typedef struct {
    const char *model_path;
    const char *backend;        /* "cpu" (CUDA tuning needs a GPU for the execution gates) */
    const char *llm;            /* endpoint URL, "self", or "none" (search); NULL: $HONE_LLM_URL or none */
    const char *llm_model;      /* NULL: $HONE_LLM_MODEL */
    const char *slot;           /* NULL: the profile's choice */
    int budget;                 /* candidates in all; default 6 */
    const char *state_dir;      /* NULL: the store's default */
    const char *repo;           /* kernels repository for review branches; NULL: the source tree's */
    int commit;                 /* 1: commit accepted candidates for review (default) */
    double threshold;           /* speed gate; default 1.05 */
    int n_threads;              /* 0: all CPUs */
    long llm_timeout_ms;        /* 0: 120 s */
    int quiet;
} hone_tune_opts;

#define HONE_TUNE_OPTS_INIT {.backend = "cpu", .budget = 6, .commit = 1, .threshold = 1.05}

#define HONE_TUNE_MAX_SLOTS 8

typedef struct {
    char slot[64];
    int tried, accepted;
    double best_speedup;
    char best_tier[16];
    char best_hash[65];
    char branch[256];           /* review branch of the best accepted candidate, or "" */
} hone_tune_slot_result;

typedef struct {
    hone_tune_slot_result slots[HONE_TUNE_MAX_SLOTS];
    int n_slots;
    int candidates;             /* proposals made (<= budget) */
    int no_code;                /* LLM replies without usable code */
    int llm_errors;             /* failed LLM calls (HTTP errors, timeouts) */
    double tok_s_before, tok_s_after; /* decode tokens/s, median of runs */
} hone_tune_result;

struct hone_llm;

/* One LLM proposal (shared by `hone tune` and `hone serve --tune`). */
typedef struct {
    char *src;              /* the extracted kernel (malloc'd; caller frees), or NULL */
    int status;             /* hone_extract_status of the reply (OK when src is set) */
    int llm_failed;         /* 1: the call itself failed (HTTP error, timeout): see hone_error_last() */
    char origin[512];       /* "llm MODEL via URL, N prompt + M completion tokens, K attempt(s)" */
} hone_tune_proposal;

/* Builds the prompt from po (a hone_prompt_opts *: slot, shapes, profile, device, history), asks
 * client and extracts the slot's kernel. Returns 0 when the endpoint was asked (out says what came
 * back: code, no usable code with the reason in hone_error_last(), or a failed call); a negative
 * HONE_E* code only when the prompt could not be built or memory ran out. */
int hone_tune_propose_llm(hone_tune_proposal *out, struct hone_llm *client, const void *po);

/* Runs the loop; progress lines (one per candidate) and the final table go to log.
 * Returns 0 when the loop ran (whatever was accepted), a negative HONE_E* code otherwise. */
int hone_tune_run(hone_tune_result *out, const hone_tune_opts *opts, FILE *log);

/* Writes text to path (HONE_EIO naming the path, "disk full?" when the write fails). */
int hone_tune_write_file(const char *path, const char *text);

int hone_cli_tune(int argc, char **argv);

#endif
