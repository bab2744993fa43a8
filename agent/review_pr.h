/* A pull request for a review branch: its title and a Markdown body rendered from the evidence
 * the branch commits beside the kernel (kernels/<backend>/<slot>.evidence.json), written beside
 * the branch in the repository's git directory so that any forge's CLI or API can post it. */
#ifndef HONE_REVIEW_PR_H
#define HONE_REVIEW_PR_H

#include <stddef.h>

#include "agent/review.h"

typedef struct {
    char *title;   /* one line: the tip's summary, "<slot> (<backend>): 1.23x faster, exact parity" */
    char *body;    /* Markdown, sections "## What changed", "## Speedup", "## Parity", "## Machine",
                      "## How to reproduce", "## Report" */
} hone_review_pr;

/* Renders branch's pull request from its tip: the evidence JSON (every figure in the body is one
 * of its numbers, formatted: speedups %.3f, times %.1f ns, errors and KL %.3e, agreement %.2f%%),
 * the files it changes against its base, and how to fetch (from remote_url, when not NULL) and
 * re-check it. Release with hone_review_pr_clear.
 * Example: hone_review_pr_render(&pr, &ro, "hone/matvec_f32/cpu/0123456789ab", NULL). */
int hone_review_pr_render(hone_review_pr *out, const hone_review_opts *opts, const char *branch,
                          const char *remote_url);

/* Writes pr beside the branch: <git dir>/hone/pr/<branch>.title and .md (dir: another directory
 * instead of <git dir>/hone/pr). The body file's path into path (cap bytes).
 * `gh pr create --head B --title "$(cat T)" --body-file M` posts it. */
int hone_review_pr_write(char *path, size_t cap, const hone_review_opts *opts, const char *branch,
                         const hone_review_pr *pr, const char *dir);

/* Frees what pr holds; accepts NULL. */
void hone_review_pr_clear(hone_review_pr *pr);

#endif
