/* `hone review list|show|verify|prune`: the review branches (agent/review.h) from the command
 * line; verify re-runs the guard here on a branch's source. */
#include "review_cli.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/report.h"
#include "agent/review.h"
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
    "DIR: the kernels repository (default: " HONE_SOURCE_DIR "); REF: the base (default: HEAD);\n"
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
    int all = 0, merged = 0, dry_run = 0, nextra = 0;
    char **extra = NULL;
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
        else if ((!strcmp(a, "--repo") || !strcmp(a, "--base") || !strcmp(a, "-m") || !strcmp(a, "--model") ||
                  !strcmp(a, "--report"))) {
            if (!v) { fprintf(stderr, "hone review %s: %s needs a value\n", sub, a); return 2; }
            if (!strcmp(a, "--repo")) o.repo = v;
            else if (!strcmp(a, "--base")) o.base_ref = v;
            else if (!strcmp(a, "--report")) report = v;
            else model = v;
            i++;
        } else if (a[0] != '-' && !branch) branch = a;
        else { fprintf(stderr, "hone review %s: unexpected argument '%s'\n%s", sub, a, review_usage); return 2; }
    }
    if (!strcmp(sub, "list")) return cli_list(&o, all);
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
