/* Internal to the review modules (review.c, review_push.c, review_pr.c): the libgit2 error
 * wrapper and the repository, branch-name and trailer helpers they share. Not a public API:
 * nothing outside agent/review*.c includes it. */
#ifndef HONE_REVIEW_GIT_H
#define HONE_REVIEW_GIT_H

#include <git2.h>
#include <stdio.h>

#include "agent/review.h"

#define HONE_REVIEW_PREFIX "hone/"

/* Records "<what>: <libgit2's message> [libgit2 <expr> = <code> at file:line]" and returns the
 * hone code for it. */
int hone_review_git_fail(int grc, const char *what, const char *expr, const char *file, int line);

/* Runs a libgit2 call in a function with `int rc` and a `done:` label; on failure records what
 * was being done (printf-style), the call, file, line and libgit2's message, and jumps to done.
 * HONE_GIT_TRY_AS checks a return code already in hand, naming the call that gave it. */
#define HONE_GIT_TRY_AS(grc, call, ...)                                                  \
    do {                                                                                 \
        if ((grc) < 0) {                                                                 \
            char what_[768];                                                             \
            snprintf(what_, sizeof what_, __VA_ARGS__);                                  \
            rc = hone_review_git_fail((grc), what_, call, __FILE__, __LINE__);           \
            goto done;                                                                   \
        }                                                                                \
    } while (0)

#define HONE_GIT_TRY(expr, ...)                                                          \
    do {                                                                                 \
        int grc_ = (expr);                                                               \
        HONE_GIT_TRY_AS(grc_, #expr, __VA_ARGS__);                                       \
    } while (0)

/* The kernels repository of opts (NULL: the source tree's), opened; its path for messages. */
int hone_review_open_repo(git_repository **out, const hone_review_opts *opts);
const char *hone_review_repo_path(const hone_review_opts *opts);

/* "hone/<slot>/<backend>/<hash>" (with or without "refs/heads/") -> its parts; 0 on success,
 * HONE_EINVAL for any other name. */
int hone_review_parse_branch(const char *branch, char *shortname, size_t cap, char slot[64],
                             char backend[16], char hash[80]);

/* The base commit: opts->base_ref or HEAD, peeled to a commit. */
int hone_review_resolve_base(git_commit **out, git_repository *repo, const hone_review_opts *opts);

/* The value of trailer `key` in a commit message, copied into buf ("" if absent). */
void hone_review_trailer(const char *message, const char *key, char *buf, size_t cap);

/* git_reference_create, tried again while another process holds a lock it needs (the ref's own
 * lock file, or packed-refs while it is rewritten): ~2.5 s of growing pauses; libgit2's code. */
int hone_review_ref_create(git_reference **out, git_repository *repo, const char *name, const git_oid *id,
                           int force, const char *log);

/* "kernels/<backend>/<slot>.<c|cu>" and "kernels/<backend>/<slot>.evidence.json". */
void hone_review_kernel_path(char *buf, size_t cap, const char *slot, const char *backend);
void hone_review_evidence_path(char *buf, size_t cap, const char *slot, const char *backend);

#endif
