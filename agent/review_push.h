/* Review branches leave the machine: push hone/<slot>/<backend>/<hash> branches to a remote
 * through libgit2 (file://, SSH with the agent or a key file, HTTPS with a token from the
 * environment), and say for every branch whether it is pushed, merged into the base, superseded
 * by a faster one for the same slot and machine, or stale against a newer base.
 * Only hone/... branches are ever pushed, never force-pushed; the work tree, the index and HEAD
 * are never touched. Credentials are read from the environment and never logged. */
#ifndef HONE_REVIEW_PUSH_H
#define HONE_REVIEW_PUSH_H

#include <stddef.h>

#include "agent/review.h"

/* Where and how to push.
 * Credentials, asked for only when the remote wants them:
 *   SSH:   the key file ssh_key (else $HONE_SSH_KEY; its public half KEY.pub when present;
 *          passphrase $HONE_SSH_PASSPHRASE), then the SSH agent ($SSH_AUTH_SOCK). The host key
 *          must be in ~/.ssh/known_hosts, or match $HONE_SSH_HOST_KEY ("SHA256:..." as
 *          `ssh-keygen -lf` prints it).
 *   HTTPS: the token $HONE_GIT_TOKEN (else $GITHUB_TOKEN, $GH_TOKEN, $GITLAB_TOKEN) as the
 *          password of user $HONE_GIT_USER (else the URL's user, else "x-access-token"). */
typedef struct {
    const char *remote;   /* a remote of the repository by name, or a URL (file://..., ssh://...,
                             user@host:path, https://...); NULL: "origin" */
    const char *ssh_key;  /* private key file; NULL: $HONE_SSH_KEY, else the agent */
    int attempts;         /* tries on a transient failure (a locked ref, a dropped connection);
                             0: 5 */
} hone_review_push_opts;

#define HONE_REVIEW_PUSH_OPTS_INIT {.remote = NULL, .attempts = 0}

typedef enum {
    HONE_REVIEW_PUSH_PUSHED = 0,     /* the remote now has the branch at the local tip */
    HONE_REVIEW_PUSH_UP_TO_DATE,     /* it had it already */
    HONE_REVIEW_PUSH_PROPOSED_THERE  /* it has the branch with the same candidate from another
                                        replica (another commit); nothing was written */
} hone_review_push_outcome;

typedef struct {
    char branch[256];                /* "hone/matvec_q4_1/cpu/3f2a9c81d0be" */
    char commit[41];                 /* the local tip */
    char remote_commit[41];          /* the remote's tip after the push */
    char url[512];                   /* the remote's URL, any user:password@ removed */
    hone_review_push_outcome outcome;
    int attempts;                    /* tries it took */
} hone_review_push_result;

/* Pushes one hone/... branch (refs/heads/B -> refs/heads/B, never forced); a named remote's
 * tracking ref refs/remotes/<name>/B follows. A branch of another name is refused before
 * anything is opened. When the remote already has B at another commit, its tip is downloaded and
 * compared: the same Hone-Candidate is outcome PROPOSED_THERE (not an error), another candidate
 * is an error. Transient failures are retried with a growing pause; an authentication or
 * host-key failure is not.
 * Example: hone_review_push(&res, &ro, &po, "hone/matvec_f32/cpu/0123456789ab"). */
int hone_review_push(hone_review_push_result *out, const hone_review_opts *opts,
                     const hone_review_push_opts *po, const char *branch);

/* The URL of remote (name or URL) with any "user:password@" removed, into buf. */
int hone_review_push_url(char *buf, size_t cap, const hone_review_opts *opts, const char *remote);

/* One branch's standing. */
typedef struct {
    hone_review_branch b;      /* name, trailers, tip, .merged (agent/review.h) */
    int pushed;                /* 1: the remote has the branch at this tip; 0: not (or at another
                                  tip); -1: unknown (no remote to ask) */
    int stale;                 /* 1: unmerged and the base has commits the branch lacks */
    size_t behind;             /* how many */
    char superseded_by[256];   /* a faster branch for the same slot, backend and device, or "" */
} hone_review_status;

typedef struct {
    const char *remote;        /* name or URL to compare with; NULL: "origin" when it exists */
    int online;                /* 1: ask the remote (ls-remote); 0: a named remote's tracking
                                  refs (what the last push or fetch saw); a URL is always asked */
} hone_review_status_opts;

#define HONE_REVIEW_STATUS_OPTS_INIT {.remote = NULL, .online = 0}

/* The standing of every hone/... branch, sorted by name: malloc'd into *out (free()), count in
 * *n. opts->base_ref (else HEAD) is the base for merged and stale. */
int hone_review_status_list(hone_review_status **out, size_t *n, const hone_review_opts *opts,
                            const hone_review_status_opts *so);

#endif
