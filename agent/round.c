/* One tuning round: propose -> guard (the source in memory) -> commit for review. The candidate
 * never runs in this process: the guard evaluates it in its workers. */
#include "round.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "candidates/sha256.h"
#include "candidates/store.h"
#include "engine/error.h"

/* Adds "label" -> "code: reason" to h (while it holds fewer than cap). */
static void history_add(hone_round_history *h, int cap, const char *label, const char *code,
                        const char *reason)
{
    if (!h || h->n >= cap || h->n >= HONE_ROUND_MAX_HISTORY) return;
    snprintf(h->text[h->n][0], sizeof h->text[0][0], "%s", label);
    snprintf(h->text[h->n][1], sizeof h->text[0][1], "%s: %.560s", code, reason);
    h->items[h->n] = (hone_prompt_history){h->text[h->n][0], h->text[h->n][1]};
    h->n++;
}

/* A proposal whose source was guarded before in this run is not guarded again: the round says
 * which candidate it repeats and its verdict, and the next prompt is told. Returns 1 then. */
static int seen_before(hone_round_result *out, hone_round_history *hist, int cap)
{
    if (!hist) return 0;
    char hash[65];
    hone_sha256_hex(out->proposal.source, out->proposal.source_len, hash);
    for (int i = 0; i < hist->n_seen; i++) {
        if (strcmp(hist->seen[i], hash)) continue;
        out->duplicate = 1;
        snprintf(out->duplicate_of, sizeof out->duplicate_of, "candidate %.12s, guarded before in this run (%s)",
                 hash, hist->seen_verdict[i]);
        char label[64];
        snprintf(label, sizeof label, "candidate %.12s again", hash);
        history_add(hist, cap, label, "duplicate", "the same kernel as an earlier candidate; propose a different one");
        return 1;
    }
    return 0;
}

int hone_round_run(hone_round_result *out, const hone_round_opts *opts, const hone_proposer *p,
                   const hone_proposer_request *req, int number, hone_round_history *hist,
                   const hone_round_hooks *hooks)
{
    memset(out, 0, sizeof *out);
    out->number = number;
    out->slot = hone_slots_name(req->slot);
    out->commit_rc = 1;
    out->push_rc = 1;
    hone_proposer_request rq = *req;
    if (hist) {
        rq.history = hist->items;
        rq.n_history = hist->n;
    }
    int rc = hone_proposer_propose(p, &out->proposal, &rq);
    if (rc) return rc;
    char label[64];
    const hone_proposal *pr = &out->proposal;
    if (pr->status == HONE_PROPOSAL_NO_CODE) {
        snprintf(label, sizeof label, "reply %d", number);
        history_add(hist, opts->history_cap, label, pr->reason, pr->why);
    }
    if (pr->status != HONE_PROPOSAL_CODE) return 0;
    if (seen_before(out, hist, opts->history_cap)) return 0;
    if (hooks && hooks->on_proposed) hooks->on_proposed(hooks->user, out);

    hone_guard_opts go = HONE_GUARD_OPTS_INIT;
    go.model_path = opts->model_path;
    go.slot = out->slot;
    go.backend = opts->backend ? opts->backend : "cpu";
    go.source = pr->source;
    go.source_len = pr->source_len;
    go.state_dir = opts->state_dir;
    go.kernels_dir = opts->kernels_dir;
    go.threshold = opts->threshold;
    go.e2e_slack = opts->e2e_slack;
    go.origin_kind = pr->origin_kind;
    go.origin = pr->origin;
    go.quiet = 1;
    go.progress = opts->progress;
    go.progress_user = opts->progress_user;
    go.cancel = opts->cancel;
    out->guard_rc = hone_guard_run(&out->guard, &go, NULL);
    /* the proposer's LLM usage joins the evidence the review commits (-1 / NaN: unknown) */
    out->guard.ev.llm_prompt_tokens = pr->llm_prompt_tokens >= 0 && pr->llm_prompt_tokens <= INT32_MAX
                                          ? (int)pr->llm_prompt_tokens : -1;
    out->guard.ev.llm_completion_tokens = pr->llm_completion_tokens >= 0 && pr->llm_completion_tokens <= INT32_MAX
                                              ? (int)pr->llm_completion_tokens : -1;
    out->guard.ev.llm_cost_usd = pr->llm_cost_usd;
    const hone_guard_result *gr = &out->guard;
    /* a cancelled run judged nothing: not seen, no history, no commit */
    if (!out->guard_rc && gr->code == HONE_GUARD_CANCELLED) return 0;
    if (!out->guard_rc && hist && hist->n_seen < HONE_ROUND_MAX_SEEN) {
        snprintf(hist->seen[hist->n_seen], sizeof hist->seen[0], "%s", gr->hash);
        snprintf(hist->seen_verdict[hist->n_seen], sizeof hist->seen_verdict[0], "%s", gr->accepted
                 ? "accepted" : hone_guard_code_name(gr->code));
        hist->n_seen++;
    }
    if (out->guard_rc) snprintf(out->guard_error, sizeof out->guard_error, "%s", hone_error_last());
    else if (!gr->accepted) {
        snprintf(label, sizeof label, "candidate %.12s", gr->hash);
        history_add(hist, opts->history_cap, label, hone_guard_code_name(gr->code), gr->reason);
    }
    int commit = !hooks || !hooks->on_guarded || hooks->on_guarded(hooks->user, out);
    if (out->guard_rc || !gr->accepted || !opts->commit || !commit) return 0;

    hone_review_opts ro = HONE_REVIEW_OPTS_INIT;
    ro.repo = opts->repo;
    out->commit_rc = hone_review_propose(&out->review, &ro, out->slot, go.backend, pr->source,
                                         pr->source_len, &gr->ev);
    if (out->commit_rc) snprintf(out->commit_error, sizeof out->commit_error, "%s", hone_error_last());
    if (out->commit_rc == 0 && opts->push_remote) { /* an existing branch too: it may not be there yet */
        hone_review_push_opts po = HONE_REVIEW_PUSH_OPTS_INIT;
        po.remote = opts->push_remote;
        out->push_rc = hone_review_push(&out->push, &ro, &po, out->review.branch);
        if (out->push_rc) snprintf(out->push_error, sizeof out->push_error, "%s", hone_error_last());
    }
    return 0;
}

void hone_round_result_clear(hone_round_result *r)
{
    if (r) hone_proposal_clear(&r->proposal);
}

int hone_round_kernel_write(const char *kernels_dir, const char *slot, const char *source)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/cpu", kernels_dir);
    if ((mkdir(kernels_dir, 0700) && errno != EEXIST) || (mkdir(dir, 0700) && errno != EEXIST))
        return hone_error_set(HONE_EIO, "cannot create %s: %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/%s.c", dir, slot);
    return hone_store_atomic_write(path, source, strlen(source));
}

hone_round_tally *hone_round_tally_of(hone_round_tally *v, int *n, int cap, const char *slot)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(v[i].slot, slot)) return &v[i];
    if (*n == cap) return &v[cap - 1];
    hone_round_tally *t = &v[(*n)++];
    memset(t, 0, sizeof *t);
    snprintf(t->slot, sizeof t->slot, "%s", slot);
    return t;
}

int hone_round_tally_count(hone_round_tally *t, const hone_round_result *r)
{
    const hone_guard_result *gr = &r->guard;
    if (r->proposal.status == HONE_PROPOSAL_LLM_FAILED) return 0;
    if (r->proposal.status != HONE_PROPOSAL_CODE || r->duplicate || r->guard_rc || !gr->accepted) {
        t->rejected++;
        return 0;
    }
    t->accepted++;
    if (!(gr->speedup > t->best_speedup)) return 0;
    t->best_speedup = gr->speedup;
    snprintf(t->best_tier, sizeof t->best_tier, "%s", gr->tier);
    snprintf(t->best_hash, sizeof t->best_hash, "%s", gr->hash);
    return 1;
}
