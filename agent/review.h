/* Review through git: an accepted kernel becomes a libgit2 commit on its own branch
 * `hone/<slot>/<backend>/<short-hash>` of the kernels repository, with its evidence, for a person
 * to merge. Only objects and that one new ref are written: never the working tree, the index,
 * HEAD, the base branch or any uncommitted change. Pushing a branch to a remote, its pull-request
 * text and the status of every branch are agent/review_push.h's and agent/review_pr.h's.
 * The evidence record (guard/evidence.h) is filled by the guard; this module commits it. */
#ifndef HONE_REVIEW_H
#define HONE_REVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "guard/evidence.h"

/* The evidence as a two-column Markdown table (| metric | value |), malloc'd into *out. */
int hone_review_evidence_to_markdown(char **out, const hone_evidence *ev, const char *slot,
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
                        const hone_evidence *ev);

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

/* The evidence JSON a branch commits (kernels/<backend>/<slot>.evidence.json; malloc'd,
 * NUL-terminated): what `hone review show --report` renders (agent/report.h). */
int hone_review_read_evidence(char **out, const hone_review_opts *opts, const char *branch);

/* Deletes one hone/... branch (never another branch, never the checked-out one). */
int hone_review_delete(const hone_review_opts *opts, const char *branch);

#endif
