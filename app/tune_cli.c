/* `hone tune`: the options of hone_tune_run (agent/tune.h) from the command line. */
#include "tune_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/tune.h"
#include "engine/error.h"

static const char tune_usage[] =
    "usage: hone tune -m MODEL [--llm URL|self|none] [--llm-model NAME] [--budget N] [--slot SLOT]\n"
    "                 [--state-dir DIR] [--repo DIR] [--no-commit] [--threshold X] [-t THREADS]\n"
    "                 [--kernels DIR] [--device cpu] [--screen N] [--screen-reps R]\n"
    "                 [--push | --push-to REMOTE] [--report DIR] [--no-progress]\n"
    "  --kernels DIR: start from an approved kernels tree (DIR/cpu/<slot>.c, as serve --kernels):\n"
    "                 it serves while profiling and measuring, and each candidate must beat the\n"
    "                 kernel it serves\n"
    "  --budget N:    full guard runs in all (default 6): parity, model parity, kernel speed, end\n"
    "                 to end, 10-40 s each\n"
    "  --screen N:    search proposer (--llm none): cheap screens in all (default 24), each the\n"
    "                 freeze, scan, compile and kernel-parity gates plus a short kernel A/B timing,\n"
    "                 never an acceptance; the better half of a slot's points is screened again\n"
    "                 with twice the reps until two are left, and those go to the full guard.\n"
    "                 Results are remembered per (slot, shapes, machine) in the state dir's\n"
    "                 search-memory.json, so a second run skips the points screened before\n"
    "  --screen-reps R: timed pairs of a first screen (default 5)\n"
    "  --push: push each committed review branch to origin as it is committed (--push-to: a remote\n"
    "  by name or URL; credentials as `hone review push`)\n"
    "  --report DIR:  a report to open in a browser (DIR/index.html, charts by gnuplot) of every\n"
    "                 slot's best accepted kernel\n"
    "  the progress line is a bar on a terminal, plain lines otherwise (--no-progress: none)\n";

int hone_cli_tune(int argc, char **argv)
{
    hone_tune_opts o = HONE_TUNE_OPTS_INIT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-commit")) { o.commit = 0; continue; }
        if (!strcmp(a, "--quiet")) { o.quiet = 1; continue; }
        if (!strcmp(a, "--push")) { o.push = "origin"; continue; }
        if (!strcmp(a, "--no-progress")) { o.progress = 0; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(tune_usage, stdout); return 0; }
        if (!v) { fprintf(stderr, "hone tune: %s needs a value\n%s", a, tune_usage); return 2; }
        if (!strcmp(a, "-m")) o.model_path = v;
        else if (!strcmp(a, "--llm")) o.llm = v;
        else if (!strcmp(a, "--llm-model")) o.llm_model = v;
        else if (!strcmp(a, "--budget")) o.budget = atoi(v);
        else if (!strcmp(a, "--slot")) o.slot = v;
        else if (!strcmp(a, "--state-dir")) o.state_dir = v;
        else if (!strcmp(a, "--repo")) o.repo = v;
        else if (!strcmp(a, "--kernels")) o.kernels_dir = v;
        else if (!strcmp(a, "--push-to")) o.push = v;
        else if (!strcmp(a, "--threshold")) o.threshold = atof(v);
        else if (!strcmp(a, "--screen")) o.screen_budget = atoi(v);
        else if (!strcmp(a, "--screen-reps")) o.screen_reps = atoi(v);
        else if (!strcmp(a, "-t")) o.n_threads = atoi(v);
        else if (!strcmp(a, "--device")) o.backend = v;
        else if (!strcmp(a, "--report")) o.report_dir = v;
        else if (!strcmp(a, "--llm-timeout")) o.llm_timeout_ms = (long)(atof(v) * 1000);
        else { fprintf(stderr, "hone tune: unknown option %s\n%s", a, tune_usage); return 2; }
        i++;
    }
    if (!o.model_path) { fprintf(stderr, "hone tune: -m MODEL is required\n%s", tune_usage); return 2; }
    if (o.budget < 1 || o.budget > 10000) { fprintf(stderr, "hone tune: --budget must be 1..10000\n"); return 2; }
    if (o.screen_budget < 0 || o.screen_budget > 10000 || o.screen_reps < 0 || o.screen_reps > 100) {
        fprintf(stderr, "hone tune: --screen must be 0..10000 and --screen-reps 0..100\n");
        return 2;
    }
    hone_tune_result r;
    if (hone_tune_run(&r, &o, o.quiet ? NULL : stderr)) {
        fprintf(stderr, "hone tune: %s\n", hone_error_last());
        return 1;
    }
    return 0;
}
