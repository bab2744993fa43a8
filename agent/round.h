/* One tuning round, the one loop body `hone tune` and `hone serve --tune` share: ask a proposer
 * (agent/proposer.h) for a candidate, run its source through the guard (in memory: no candidate
 * files), commit an accepted one for review (agent/review.h), and keep the rejections as the
 * history the next prompt learns from; with push_remote, push the branch as soon as it is
 * committed. Installing accepted kernels (the kernel loader) is the caller's:
 * hone_round_kernel_write lays one out for it. */
#ifndef HONE_ROUND_H
#define HONE_ROUND_H

#include "agent/proposer.h"
#include "agent/review.h"
#include "agent/review_push.h"
#include "guard/guard.h"

#define HONE_ROUND_MAX_HISTORY 16
#define HONE_ROUND_MAX_SEEN 256

typedef struct {
    const char *model_path;   /* the GGUF the guard evaluates on (required) */
    const char *backend;      /* "cpu" */
    const char *state_dir;    /* the candidate store; NULL: the store's default */
    const char *repo;         /* the review repository; NULL: the source tree's */
    const char *kernels_dir;  /* the served kernels tree the guard's incumbent comes from; NULL:
                               * the shipped baselines */
    double threshold;         /* the guard's speed gate */
    double e2e_slack;         /* the guard's end-to-end slack (hone_guard_opts) */
    int commit;               /* 1: commit accepted candidates (when on_guarded agrees) */
    const char *push_remote;  /* non-NULL: push each committed branch to this remote, a name or a
                                 URL (agent/review_push.h); NULL: keep branches local */
    int history_cap;          /* rejections kept for the next prompts, <= HONE_ROUND_MAX_HISTORY */
    void (*progress)(void *user, const char *gate, int end, const char *status); /* the guard's */
    void *progress_user;      /* (hone_guard_opts.progress); NULL: none */
    const int *cancel;        /* the guard's cancel flag (hone_guard_opts.cancel): a round whose
                               * guard was cancelled has guard.code HONE_GUARD_CANCELLED and
                               * records, commits and pushes nothing; NULL: never cancelled */
} hone_round_opts;

#define HONE_ROUND_OPTS_INIT                                                                  \
    {.backend = "cpu", .threshold = 1.05, .commit = 1, .history_cap = HONE_ROUND_MAX_HISTORY}

/* The rejections of the current slot (no usable code, guard verdicts), newest last; the caller
 * zeroes it when it moves to another slot. */
typedef struct {
    hone_prompt_history items[HONE_ROUND_MAX_HISTORY];
    char text[HONE_ROUND_MAX_HISTORY][2][600];
    int n;
    /* every candidate guarded in this run (all slots; not reset with n): its content hash and
     * verdict, so a kernel proposed again is not guarded again */
    char seen[HONE_ROUND_MAX_SEEN][65];
    char seen_verdict[HONE_ROUND_MAX_SEEN][160];
    int n_seen;
} hone_round_history;

typedef struct {
    int number;               /* the candidate's number in the caller's loop (history labels) */
    const char *slot;         /* its slot's name */
    hone_proposal proposal;   /* status, source, origin */
    int duplicate;            /* 1: the same source was guarded before in this run: no guard ran;
                               * duplicate_of says which candidate and its verdict */
    char duplicate_of[240];
    int guard_rc;             /* 0: the guard ran and guard holds its verdict (when proposed);
                               * else the HONE_E* it failed with, guard_error the message */
    char guard_error[512];
    hone_guard_result guard;
    int commit_rc;            /* 1: not committed; 0: committed (review); < 0: failed (commit_error) */
    char commit_error[512];
    hone_review_result review;
    int push_rc;              /* 1: not pushed; 0: pushed (push); < 0: failed (push_error) */
    char push_error[512];
    hone_review_push_result push;
} hone_round_result;

/* Where a round tells its caller how it goes (each may be NULL). */
typedef struct {
    void *user;
    /* The proposal holds code; the guard is next. */
    void (*on_proposed)(void *user, const hone_round_result *r);
    /* The guard ran (r->guard_rc == 0) or failed. Return nonzero to commit an accepted candidate
     * (with opts->commit); NULL: commit every accepted one. */
    int (*on_guarded)(void *user, const hone_round_result *r);
} hone_round_hooks;

/* One round for req (its history fields are filled from hist); number labels the candidate in
 * the history (the caller's count). out->proposal.status says whether
 * there was code to guard; then out->guard_rc and out->guard, then out->commit_rc. Returns 0 when
 * the round ran, whatever came of it; a negative HONE_E* when the proposer could not try (see
 * struct hone_proposer_i). Release out with hone_round_result_clear. */
int hone_round_run(hone_round_result *out, const hone_round_opts *opts, const hone_proposer *p,
                   const hone_proposer_request *req, int number, hone_round_history *hist,
                   const hone_round_hooks *hooks);

/* Frees what out holds (the proposal's source); accepts NULL. */
void hone_round_result_clear(hone_round_result *r);

/* Writes source as kernels_dir/cpu/<slot>.c, creating the directories: the layout the kernel
 * loader (candidates/kernel_loader.h, --kernels DIR) reads. */
int hone_round_kernel_write(const char *kernels_dir, const char *slot, const char *source);

/* Per-slot tallies both tuners report. */
typedef struct {
    char slot[64];
    int tried, accepted, rejected;
    double best_speedup;
    char best_tier[16];
    char best_hash[65];
    char branch[256];         /* review branch of the best accepted candidate, or "" */
} hone_round_tally;

/* The tally of slot in v[0..*n) (added, zeroed, when absent; the last one when v is full). */
hone_round_tally *hone_round_tally_of(hone_round_tally *v, int *n, int cap, const char *slot);

/* Counts r's verdict into t (a failed LLM call counts neither way); returns 1 when r is an accepted candidate faster than t's best so
 * far (t's best is then r's), else 0. */
int hone_round_tally_count(hone_round_tally *t, const hone_round_result *r);

#endif
