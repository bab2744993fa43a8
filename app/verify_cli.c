/* `hone verify`: a reference against a candidate (agent/verify.h), printed as a table, and as
 * JSON (--json FILE) and a browser page (--report DIR). The command's row is in app/cli.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "agent/verify.h"
#include "app/cli.h"
#include "engine/error.h"

static const char usage_text[] =
    "usage: hone verify --reference R --candidate C [--prompts FILE.jsonl] [--steps N] [--top-k K]\n"
    "                   [--max-prompts N] [--json FILE] [--report DIR] [-t THREADS] [--kernels DIR]\n"
    "                   [--model NAME] [--api-key KEY] [--timeout-ms MS] [--tool-tokens N]\n"
    "                   [--chat-template FILE] [--quiet]\n"
    "  R, C: a GGUF file (run in process on the CPU) or an OpenAI-compatible base URL\n"
    "        (http://HOST:PORT/v1; its /v1/completions with logprobs and echo)\n"
    "  --prompts: JSONL, one {\"prompt\": \"...\", \"set\": \"...\", \"id\": \"...\"} per line\n"
    "             (default: the shipped set, tools/data/verify.jsonl); a line with \"messages\" and\n"
    "             \"tools\" (and optionally \"tool_choice\", \"expect\": \"call\" | \"answer\") is a tool\n"
    "             prompt: both sides' chat completions compared on tool-call trigger P/R/F1,\n"
    "             names, arguments and schema-valid arguments (a file side served on loopback)\n"
    "  --steps: continuation tokens per prompt (default 32); --top-k: endpoint logprobs (20);\n"
    "  --tool-tokens: max_tokens of each tool prompt's chat completion (96);\n"
    "  --chat-template: the Jinja chat template of the file sides' tool prompts (default: the\n"
    "                   model file's own)\n";

static int int_arg(const char *flag, const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return hone_error_set(HONE_EINVAL, "%s expects an integer in [%ld, %ld], got '%s'", flag, lo, hi, v);
    *out = x;
    return 0;
}

int hone_cli_verify(int argc, char **argv)
{
    if (hone_cli_wants_help(argc, argv)) {
        fputs(usage_text, stdout);
        return 0;
    }
    hone_verify_opts o = HONE_VERIFY_OPTS_INIT;
    const char *json_out = NULL, *report = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x = 0;
        int rc = 0;
        if (!strcmp(a, "--quiet")) { o.quiet = 1; continue; }
        if (!v) {
            fprintf(stderr, "hone verify: unknown option or missing value: %s\n%s", a, usage_text);
            return 2;
        }
        if (!strcmp(a, "--reference")) o.reference = v;
        else if (!strcmp(a, "--candidate")) o.candidate = v;
        else if (!strcmp(a, "--prompts")) o.prompts = v;
        else if (!strcmp(a, "--json")) json_out = v;
        else if (!strcmp(a, "--report")) report = v;
        else if (!strcmp(a, "--kernels")) o.kernels_dir = v;
        else if (!strcmp(a, "--chat-template")) o.chat_template = v;
        else if (!strcmp(a, "--model")) o.model = v;
        else if (!strcmp(a, "--api-key")) o.api_key = v;
        else if (!strcmp(a, "--steps")) rc = int_arg(a, v, 1, 4096, &x), o.steps = (int)x;
        else if (!strcmp(a, "--top-k")) rc = int_arg(a, v, 1, 100, &x), o.top_k = (int)x;
        else if (!strcmp(a, "--tool-tokens")) rc = int_arg(a, v, 1, 4096, &x), o.tool_tokens = (int)x;
        else if (!strcmp(a, "--max-prompts")) rc = int_arg(a, v, 0, 1 << 20, &x), o.max_prompts = (int)x;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) rc = int_arg(a, v, 0, 1024, &x), o.n_threads = (int)x;
        else if (!strcmp(a, "--timeout-ms")) rc = int_arg(a, v, 1, 86400000, &x), o.timeout_ms = x;
        else {
            fprintf(stderr, "hone verify: unknown option: %s\n%s", a, usage_text);
            return 2;
        }
        if (rc) {
            fprintf(stderr, "hone verify: %s\n", hone_error_last());
            return 2;
        }
        i++;
    }
    if (!o.reference || !o.candidate) {
        fprintf(stderr, "hone verify: --reference and --candidate are required\n%s", usage_text);
        return 2;
    }
    cJSON *r = NULL;
    if (hone_verify_run(&r, &o)) {
        fprintf(stderr, "hone verify: %s\n", hone_error_last());
        return 1;
    }
    hone_verify_print(stdout, r);
    int rc = 0;
    if (json_out) {
        char *s = cJSON_Print(r);
        FILE *f = s ? fopen(json_out, "w") : NULL;
        if (!f || fputs(s, f) < 0 || fputc('\n', f) < 0) rc = 1;
        if (f && fclose(f)) rc = 1;
        if (rc) fprintf(stderr, "hone verify: cannot write %s: %s\n", json_out, strerror(errno));
        free(s);
    }
    if (report) {
        int charts = 0;
        char note[512];
        if (hone_verify_report(report, r, NULL, &charts, note, sizeof note)) {
            fprintf(stderr, "hone verify: %s\n", hone_error_last());
            rc = 1;
        } else {
            fprintf(stderr, "hone verify: wrote %s/index.html (%d charts%s%s)\n", report, charts, note[0] ? "; " : "", note);
        }
    }
    cJSON_Delete(r);
    return rc;
}
