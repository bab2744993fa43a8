/* `hone guard FILE`: reads the candidate, runs it through every gate (guard/guard.h) and
 * prints the report; exit 0 accepted, 1 rejected or not evaluated, 2 usage. */
#include "guard_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "engine/file.h"
#include "engine/slots.h"

static int usage(void)
{
    fprintf(stderr,
            "usage: hone guard -m MODEL --slot SLOT --backend cpu|cuda FILE [--state-dir DIR]\n"
            "                  [--evidence OUT.json] [--threshold 1.05] [--seed S (testing only)]\n"
            "                  [--prompts N] [--steps N] [--reps N] [--kernels DIR] [--quiet]\n"
            "  --kernels DIR: the incumbent is what DIR serves (DIR/cpu/<slot>.c, as --kernels of\n"
            "                 generate and serve), not the shipped baseline\n");
    return 2;
}

int hone_guard_cli_parse_opts(hone_guard_opts *o, const char **file, int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (strcmp(a, name) == 0 && v && (i++, 1))
        if (ARG("-m") || ARG("--model")) o->model_path = v;
        else if (ARG("--slot")) o->slot = v;
        else if (ARG("--backend")) o->backend = v;
        else if (ARG("--state-dir")) o->state_dir = v;
        else if (ARG("--kernels")) o->kernels_dir = v;
        else if (ARG("--evidence")) o->evidence_path = v;
        else if (ARG("--threshold")) o->threshold = atof(v);
        else if (ARG("--seed")) o->seed = strtoll(v, NULL, 0);
        else if (ARG("--prompts")) o->model_prompts = atoi(v);
        else if (ARG("--steps")) o->model_steps = atoi(v);
        else if (ARG("--reps")) o->reps = atoi(v);
        else if (strcmp(a, "--quiet") == 0) o->quiet = 1;
        else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) return 1;
        else if (a[0] == '-') return hone_error_set(HONE_EINVAL, "unknown option %s", a);
        else if (file && !*file) *file = a;
        else return hone_error_set(HONE_EINVAL, "unexpected argument %s", a);
#undef ARG
    }
    return 0;
}

int hone_cli_guard(int argc, char **argv)
{
    hone_guard_opts o = HONE_GUARD_OPTS_INIT;
    o.backend = NULL;
    const char *file = NULL;
    int prc = hone_guard_cli_parse_opts(&o, &file, argc - 1, argv + 1);
    if (prc < 0) fprintf(stderr, "hone guard: %s\n", hone_error_last());
    if (prc) return usage();
    if (!o.slot || !o.backend || !file || (strcmp(o.backend, "cpu") && strcmp(o.backend, "cuda")) ||
        !(o.threshold > 0) || (!o.model_path && strcmp(o.backend, "cpu") == 0))
        return usage();
    if (hone_slots_from_name(o.slot) < 0) {
        fprintf(stderr, "hone guard: unknown slot '%s'\n", o.slot);
        return 2;
    }
    char *src = NULL;
    if (hone_file_read(file, &src, &o.source_len)) {
        fprintf(stderr, "hone guard: cannot read %s\n", file);
        return 1;
    }
    o.source = src;
    o.name = file;
    hone_guard_result res;
    int rc = hone_guard_run(&res, &o, stdout);
    free(src);
    if (rc) {
        fprintf(stderr, "hone guard: %s\n", hone_error_last());
        return 1;
    }
    return res.accepted ? 0 : 1;
}
