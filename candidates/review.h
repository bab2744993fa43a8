/* Review through git: an accepted kernel becomes a libgit2 commit on its own branch
 * `hone/<slot>/<backend>/<short-hash>` of the kernels repository, with its evidence, for a person
 * to merge. Only objects and that one new ref are written: never the working tree, the index,
 * HEAD, the base branch or any uncommitted change; nothing is ever pushed.
 * The evidence record is filled by the guard; this module serialises and commits it. */
#ifndef HONE_REVIEW_H
#define HONE_REVIEW_H

#include <math.h>
#include <stddef.h>
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
    const char *origin_kind;                 /* "llm", "search" or "file" */
    const char *origin;                      /* LLM model name, search parameters, or file path */
    int64_t seed;                            /* the input seed drawn after the candidate was frozen */
    double guard_seconds;                    /* wall time of the whole guard run */
} hone_review_evidence;

#define HONE_REVIEW_EVIDENCE_INIT                                                              \
    {.speedup_median = NAN, .speedup_ci_low = NAN, .speedup_ci_high = NAN, .ci_level = NAN,       \
     .incumbent_ns = NAN, .candidate_ns = NAN, .reps = -1, .threshold = NAN,                      \
     .candidate_max_abs_err = NAN, .incumbent_max_abs_err = NAN, .slack = NAN,                    \
     .model_max_abs_dlogit = NAN, .model_kl_mean = NAN, .model_kl_max = NAN,                      \
     .model_argmax_agreement = NAN, .model_prompts = -1, .model_steps = -1, .seed = -1,           \
     .guard_seconds = NAN}

/* The evidence as a JSON object (cJSON's formatted print, ending in "\n"): malloc'd into *out.
 * slot and backend are recorded with it. Keys: slot, backend, candidate{hash, origin_kind,
 * origin}, speed{speedup_median, ci_low, ci_high, ci_level, incumbent_ns, candidate_ns, reps,
 * threshold}, kernel_parity{tier, candidate_max_abs_err, incumbent_max_abs_err, slack, shapes},
 * model_parity{max_abs_dlogit, kl_mean, kl_max, argmax_agreement, prompts, steps}, device,
 * model, seed, guard_seconds. Unknown values are null. */
int hone_review_evidence_to_json(char **out, const hone_review_evidence *ev, const char *slot,
                                 const char *backend);

/* The evidence as a two-column Markdown table (| metric | value |), malloc'd into *out. */
int hone_review_evidence_to_markdown(char **out, const hone_review_evidence *ev, const char *slot,
                                     const char *backend);

typedef struct {
    const char *repo;          /* kernels repository: work tree, a directory inside it, or a bare
                                  repository. NULL: the one HONE_SOURCE_DIR lives in */
    const char *base_ref;      /* the base commit: any revision; NULL: "HEAD" */
    const char *author_name;   /* NULL: "Hone" (author and committer) */
    const char *author_email;  /* NULL: "hone@localhost" */
} hone_review_opts;

#define HONE_REVIEW_OPTS_INIT {.repo = NULL}

typedef struct {
    char branch[256];   /* "hone/matvec_q4_1/cpu/3f2a9c81d0be" */
    char commit[41];    /* the branch tip */
    char base[41];      /* the base commit (the tip's parent) */
    int existed;        /* 1: the branch was already there with this candidate; nothing written */
} hone_review_result;

/* Commits an accepted candidate: from the base commit, a tree where `source` replaces
 * kernels/<backend>/<slot>.c (cpu) or .cu (cuda) and kernels/<backend>/<slot>.evidence.json and
 * .evidence.md join it; a commit titled "<slot> (<backend>): <speedup>x faster, <tier> parity"
 * whose body is the Markdown table and whose trailers are Hone-Slot, Hone-Speedup, Hone-Parity,
 * Hone-Device, Hone-Model, Hone-Candidate; and the new branch hone/<slot>/<backend>/<h>, h the
 * first 12 characters of ev->candidate_hash (when NULL: of the source's git blob id).
 * If that branch exists with the same candidate, *out reports it with existed = 1 (not an error);
 * with a different one it is an error. Backend: "cpu" or "cuda"; slot: [a-z0-9_]+.
 * Example: hone_review_propose(&res, &opts, "matvec_f32", "cpu", src, strlen(src), &ev). */
int hone_review_propose(hone_review_result *out, const hone_review_opts *opts, const char *slot,
                        const char *backend, const char *source, size_t source_len,
                        const hone_review_evidence *ev);

/* One hone/... branch, described by its branch name and its tip's trailers. */
typedef struct {
    char branch[256];
    char slot[64], backend[16];
    char parity[32];
    char speedup_text[64];   /* the Hone-Speedup trailer as written */
    double speedup;          /* its leading number; NaN if absent */
    char device[160], model[160], candidate[80];
    char commit[41];
    int64_t time;            /* commit time, Unix seconds */
    int merged;              /* the base contains the tip, or already has this kernel file */
} hone_review_branch;

/* All hone/... branches (merged ones too: see .merged), sorted by name: malloc'd into *out
 * (free()), count in *n. The base decides .merged: opts->base_ref, else HEAD (when HEAD does not
 * resolve, as in an empty repository, none counts as merged). */
int hone_review_list(hone_review_branch **out, size_t *n, const hone_review_opts *opts);

/* A readable account of a branch: title, trailers, the evidence file and the patch against the
 * tip's parent (its base). malloc'd into *out. branch: "hone/..." or "refs/heads/hone/...". */
int hone_review_show(char **out, const hone_review_opts *opts, const char *branch);

/* The candidate source a branch proposes (malloc'd, NUL-terminated, length in *len), and its slot
 * and backend (from the branch name). */
int hone_review_read_candidate(char **out, size_t *len, char slot[64], char backend[16],
                               const hone_review_opts *opts, const char *branch);

/* Deletes one hone/... branch (never another branch, never the checked-out one). */
int hone_review_delete(const hone_review_opts *opts, const char *branch);

/* The `hone review` command (registered in engine/cli.c). */
int hone_cli_review(int argc, char **argv);

#endif
