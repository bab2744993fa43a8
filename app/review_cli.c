/* `hone review list|show|verify|prune|push|pr|status`: the review branches (agent/review.h) from
 * the command line; verify re-runs the guard here on a branch's source; push, pr and status hand
 * branches to a team's forge (agent/review_push.h, agent/review_pr.h). */
#include "review_cli.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/report.h"
#include "agent/review.h"
#include "agent/review_pr.h"
#include "agent/review_push.h"
#include "app/guard_cli.h"
#include "engine/error.h"

#ifndef HONE_SOURCE_DIR
#define HONE_SOURCE_DIR "."
#endif

static const char review_usage[] =
    "usage: hone review list [--repo DIR] [--base REF] [--all]\n"
    "       hone review show BRANCH [--repo DIR] [--report OUT]\n"
    "       hone review verify BRANCH -m MODEL [--repo DIR] [-- GUARD-OPTIONS]\n"
    "       hone review prune [--merged | --all] [--repo DIR] [--base REF] [--dry-run]\n"
    "       hone review push [BRANCH... | --all] [--remote NAME|URL] [--ssh-key FILE] [--repo DIR]\n"
    "       hone review pr BRANCH [--remote NAME|URL] [--out DIR] [--repo DIR]\n"
    "       hone review status [--remote NAME|URL] [--online] [--repo DIR] [--base REF]\n"
    "DIR: the kernels repository (default: " HONE_SOURCE_DIR "); REF: the base (default: HEAD)\n"
    "push: only hone/... branches, never forced (--all: every unmerged one); remote default origin.\n"
    "  SSH: --ssh-key or $HONE_SSH_KEY, else the agent; host key in ~/.ssh/known_hosts or\n"
    "  $HONE_SSH_HOST_KEY=SHA256:...; HTTPS: $HONE_GIT_TOKEN (or $GITHUB_TOKEN, $GH_TOKEN)\n"
    "pr: prints the title, a blank line and the Markdown body; writes them to\n"
    "  <git dir>/hone/pr/<slot>.<backend>.<hash>.title and .md (or into --out DIR)\n"
    "OUT: a directory for a report to open in a browser (OUT/index.html, charts by gnuplot)\n";

static void fmt_age(char *buf, size_t cap, int64_t secs)
{
    if (secs < 0) secs = 0;
    if (secs < 120) snprintf(buf, cap, "%llds", (long long)secs);
    else if (secs < 7200) snprintf(buf, cap, "%lldm", (long long)(secs / 60));
    else if (secs < 172800) snprintf(buf, cap, "%lldh", (long long)(secs / 3600));
    else snprintf(buf, cap, "%lldd", (long long)(secs / 86400));
}

static int cli_list(const hone_review_opts *o, int all)
{
    hone_review_branch *v = NULL;
    size_t n = 0;
    if (hone_review_list(&v, &n, o)) {
        fprintf(stderr, "hone review list: %s\n", hone_error_last());
        return 1;
    }
    int64_t now = (int64_t)time(NULL);
    size_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].merged && !all) continue;
        if (!shown++)
            printf("%-44s %-18s %-7s %-8s %-9s %-6s %s\n", "BRANCH", "SLOT", "BACKEND", "SPEEDUP",
                   "PARITY", "AGE", "DEVICE");
        char sp[32], age[32];
        if (isfinite(v[i].speedup)) snprintf(sp, sizeof sp, "%.2fx", v[i].speedup);
        else snprintf(sp, sizeof sp, "?");
        fmt_age(age, sizeof age, now - v[i].time);
        printf("%-44s %-18s %-7s %-8s %-9s %-6s %s%s\n", v[i].branch, v[i].slot, v[i].backend, sp,
               *v[i].parity ? v[i].parity : "?", age, *v[i].device ? v[i].device : "?",
               v[i].merged ? " (merged)" : "");
    }
    if (!shown) printf("no %shone/... branches\n", all ? "" : "pending ");
    free(v);
    return 0;
}

static int cli_prune(const hone_review_opts *o, int all, int dry_run)
{
    hone_review_branch *v = NULL;
    size_t n = 0, deleted = 0;
    int failed = 0;
    if (hone_review_list(&v, &n, o)) {
        fprintf(stderr, "hone review prune: %s\n", hone_error_last());
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!all && !v[i].merged) continue;
        if (dry_run) {
            printf("would delete %s%s\n", v[i].branch, v[i].merged ? " (merged)" : "");
            continue;
        }
        if (hone_review_delete(o, v[i].branch)) {
            fprintf(stderr, "hone review prune: %s\n", hone_error_last());
            failed = 1;
            continue;
        }
        printf("deleted %s (was %.12s)%s\n", v[i].branch, v[i].commit, v[i].merged ? ", merged" : "");
        deleted++;
    }
    if (!dry_run) printf("%zu branch%s deleted\n", deleted, deleted == 1 ? "" : "es");
    free(v);
    return failed;
}

/* Re-runs the guard here on the branch's source: -m MODEL, its slot and backend, and the guard
 * options after `--`. Exit status as `hone guard`'s: 0 passes, 1 fails or could not run. */
static int cli_verify(const hone_review_opts *o, const char *branch, const char *model, int nextra,
                      char **extra)
{
    char *src = NULL;
    size_t len = 0;
    char slot[64], backend[16];
    int rc = 1;
    if (hone_review_read_candidate(&src, &len, slot, backend, o, branch)) {
        fprintf(stderr, "hone review verify: %s\n", hone_error_last());
        return 1;
    }
    if (!model) {
        fprintf(stderr, "hone review verify: -m MODEL is required (the model to check parity on)\n");
        goto done;
    }
    hone_guard_opts go = HONE_GUARD_OPTS_INIT;
    go.model_path = model;
    go.slot = slot;
    go.backend = backend;
    if (hone_guard_cli_parse_opts(&go, NULL, nextra, extra)) {
        fprintf(stderr, "hone review verify: after --: %s\n", hone_error_last());
        rc = 2;
        goto done;
    }
    go.source = src;
    go.source_len = len;
    go.name = branch;
    fprintf(stderr, "hone review verify: %s: the guard with -m %s --slot %s --backend %s on the "
            "branch's source\n", branch, go.model_path, go.slot, go.backend);
    hone_guard_result res;
    if (hone_guard_run(&res, &go, stdout)) {
        fprintf(stderr, "hone review verify: the guard could not run: %s\n", hone_error_last());
        res.accepted = 0;
    }
    fprintf(stderr, "hone review verify: %s %s on this machine\n", branch,
            res.accepted ? "passes the guard" : "FAILS the guard");
    rc = res.accepted ? 0 : 1;
done:
    free(src);
    return rc;
}

/* Pushes each branch (or every unmerged one); exit 1 when any failed. */
static int cli_push(const hone_review_opts *o, const hone_review_push_opts *po, int all, int n,
                    const char **branches)
{
    hone_review_branch *v = NULL;
    size_t nv = 0;
    int failed = 0;
    if (all) {
        if (n) { fprintf(stderr, "hone review push: give branches or --all, not both\n"); return 2; }
        if (hone_review_list(&v, &nv, o)) {
            fprintf(stderr, "hone review push: %s\n", hone_error_last());
            return 1;
        }
    } else if (!n) {
        fprintf(stderr, "hone review push: BRANCH... or --all is required\n%s", review_usage);
        return 2;
    }
    size_t total = all ? nv : (size_t)n;
    for (size_t i = 0; i < total; i++) {
        const char *b = all ? v[i].branch : branches[i];
        if (all && v[i].merged) continue;
        hone_review_push_result r;
        if (hone_review_push(&r, o, po, b)) {
            fprintf(stderr, "hone review push: %s\n", hone_error_last());
            failed = 1;
            continue;
        }
        if (r.outcome == HONE_REVIEW_PUSH_PROPOSED_THERE)
            printf("%s: %s already has this candidate (%.12s, from another replica); nothing pushed\n", r.branch,
                   r.url, r.remote_commit);
        else
            printf("%s: %s %s (%.12s)%s\n", r.branch, r.outcome == HONE_REVIEW_PUSH_UP_TO_DATE ? "up to date on" : "pushed to",
                   r.url, r.commit, r.attempts > 1 ? " after retries" : "");
    }
    if (all && !total) printf("no hone/... branches\n");
    free(v);
    return failed;
}

/* Prints the pull request of branch and writes it beside the branch (or into dir). */
static int cli_pr(const hone_review_opts *o, const char *branch, const char *remote, const char *dir)
{
    char url[512], path[4400];
    int have_url = hone_review_push_url(url, sizeof url, o, remote) == 0;
    if (!have_url && remote) {
        fprintf(stderr, "hone review pr: %s\n", hone_error_last());
        return 1;
    }
    hone_review_pr pr;
    if (hone_review_pr_render(&pr, o, branch, have_url ? url : NULL) ||
        hone_review_pr_write(path, sizeof path, o, branch, &pr, dir)) {
        fprintf(stderr, "hone review pr: %s\n", hone_error_last());
        hone_review_pr_clear(&pr);
        return 1;
    }
    printf("%s\n\n%s", pr.title, pr.body);
    fprintf(stderr, "hone review pr: wrote %s (and .title beside it)\n", path);
    hone_review_pr_clear(&pr);
    return 0;
}

static int cli_status(const hone_review_opts *o, const hone_review_status_opts *so)
{
    hone_review_status *v = NULL;
    size_t n = 0;
    if (hone_review_status_list(&v, &n, o, so)) {
        fprintf(stderr, "hone review status: %s\n", hone_error_last());
        return 1;
    }
    if (n) printf("%-44s %-8s %-7s %s\n", "BRANCH", "SPEEDUP", "PUSHED", "STATE");
    for (size_t i = 0; i < n; i++) {
        char sp[32], state[400];
        if (isfinite(v[i].b.speedup)) snprintf(sp, sizeof sp, "%.2fx", v[i].b.speedup);
        else snprintf(sp, sizeof sp, "?");
        int k = snprintf(state, sizeof state, "%s", v[i].b.merged ? "merged" : "pending");
        if (v[i].superseded_by[0])
            k += snprintf(state + k, sizeof state - (size_t)k, ", superseded by %s", v[i].superseded_by);
        if (v[i].stale) snprintf(state + k, sizeof state - (size_t)k, ", stale (base %zu commit%s ahead)", v[i].behind,
                                 v[i].behind == 1 ? "" : "s");
        printf("%-44s %-8s %-7s %s\n", v[i].b.branch, sp,
               v[i].pushed < 0 ? "?" : v[i].pushed ? "yes" : "no", state);
    }
    if (!n) printf("no hone/... branches\n");
    free(v);
    return 0;
}

/* `show --report OUT`: the branch's evidence as a browser report (agent/report.h). */
static int cli_report(const hone_review_opts *o, const char *branch, const char *dir)
{
    char *ev = NULL;
    if (hone_review_read_evidence(&ev, o, branch)) {
        fprintf(stderr, "hone review show: %s\n", hone_error_last());
        return 1;
    }
    char title[512];
    snprintf(title, sizeof title, "Hone review: %s", branch);
    hone_report_opts ro = HONE_REPORT_OPTS_INIT;
    ro.title = title;
    hone_report_result rr;
    const char *recs[1] = {ev};
    int rc = hone_report_write(&rr, dir, recs, 1, &ro);
    free(ev);
    if (rc) {
        fprintf(stderr, "hone review show: report: %s\n", hone_error_last());
        return 1;
    }
    fprintf(stderr, "hone review show: report written to %s/index.html (%d chart%s)%s%s\n", dir, rr.charts,
            rr.charts == 1 ? "" : "s", rr.note[0] ? "; " : "", rr.note);
    return 0;
}

int hone_cli_review(int argc, char **argv)
{
    hone_review_opts o = HONE_REVIEW_OPTS_INIT;
    const char *sub = argc > 1 ? argv[1] : NULL, *branch = NULL, *model = NULL, *report = NULL;
    int all = 0, merged = 0, dry_run = 0, nextra = 0, nbranches = 0;
    char **extra = NULL;
    const char *branches[256], *outdir = NULL;
    hone_review_push_opts po = HONE_REVIEW_PUSH_OPTS_INIT;
    hone_review_status_opts so = HONE_REVIEW_STATUS_OPTS_INIT;
    if (!sub || !strcmp(sub, "help") || !strcmp(sub, "--help") || !strcmp(sub, "-h")) {
        fputs(review_usage, sub ? stdout : stderr);
        return sub ? 0 : 2;
    }
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--")) { extra = argv + i + 1; nextra = argc - i - 1; break; }
        else if (!strcmp(a, "--all")) all = 1;
        else if (!strcmp(a, "--merged")) merged = 1;
        else if (!strcmp(a, "--dry-run")) dry_run = 1;
        else if (!strcmp(a, "--online")) so.online = 1;
        else if (!strcmp(a, "--remote") || !strcmp(a, "--ssh-key") || !strcmp(a, "--out")) {
            if (!v) { fprintf(stderr, "hone review %s: %s needs a value\n", sub, a); return 2; }
            if (!strcmp(a, "--remote")) po.remote = so.remote = v;
            else if (!strcmp(a, "--ssh-key")) po.ssh_key = v;
            else outdir = v;
            i++;
        }
        else if ((!strcmp(a, "--repo") || !strcmp(a, "--base") || !strcmp(a, "-m") || !strcmp(a, "--model") ||
                  !strcmp(a, "--report"))) {
            if (!v) { fprintf(stderr, "hone review %s: %s needs a value\n", sub, a); return 2; }
            if (!strcmp(a, "--repo")) o.repo = v;
            else if (!strcmp(a, "--base")) o.base_ref = v;
            else if (!strcmp(a, "--report")) report = v;
            else model = v;
            i++;
        } else if (a[0] != '-' && (!branch || !strcmp(sub, "push"))) {
            if (!branch) branch = a;
            if (nbranches == (int)(sizeof branches / sizeof *branches)) {
                fprintf(stderr, "hone review %s: at most %d branches\n", sub, nbranches);
                return 2;
            }
            branches[nbranches++] = a;
        }
        else { fprintf(stderr, "hone review %s: unexpected argument '%s'\n%s", sub, a, review_usage); return 2; }
    }
    if (!strcmp(sub, "list")) return cli_list(&o, all);
    if (!strcmp(sub, "push")) return cli_push(&o, &po, all, nbranches, branches);
    if (!strcmp(sub, "status")) return cli_status(&o, &so);
    if (!strcmp(sub, "pr")) {
        if (!branch) { fprintf(stderr, "hone review pr: BRANCH is required\n%s", review_usage); return 2; }
        return cli_pr(&o, branch, po.remote, outdir);
    }
    if (!strcmp(sub, "prune")) {
        if (all && merged) { fprintf(stderr, "hone review prune: --all and --merged exclude each other\n"); return 2; }
        return cli_prune(&o, all, dry_run);
    }
    if (!strcmp(sub, "show") || !strcmp(sub, "verify")) {
        if (!branch) { fprintf(stderr, "hone review %s: BRANCH is required\n%s", sub, review_usage); return 2; }
        if (!strcmp(sub, "verify")) return cli_verify(&o, branch, model, nextra, extra);
        char *text = NULL;
        if (hone_review_show(&text, &o, branch)) {
            fprintf(stderr, "hone review show: %s\n", hone_error_last());
            return 1;
        }
        fputs(text, stdout);
        free(text);
        return report ? cli_report(&o, branch, report) : 0;
    }
    fprintf(stderr, "hone review: unknown subcommand '%s'\n%s", sub, review_usage);
    return 2;
}
