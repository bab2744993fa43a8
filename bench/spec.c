/* bench/spec: speculative decoding against plain decoding in the same run, interleaved (plain,
 * speculative, plain, ...), per workload: code editing (the output repeats the input),
 * summarisation with quotes, extraction from a long context, free story writing. Prints JSON
 * per workload: acceptance rate (accepted / proposed draft tokens), tokens per target pass,
 * decode tokens/s of both (median, min, max over the reps), the speedup of each interleaved pair
 * (median, min, max; by wall time and by process CPU time), and whether the outputs were identical
 * (exact mode: they must be). Also the cost of one target pass of r rows relative to one row,
 * which is what a draft length pays.
 *
 *   spec [-m MODEL] [-t THREADS] [-n TOKENS] [--reps N] [--spec-k K] [--temp T] [--seed S]
 *        [--mode exact|distribution] [--speculate lookup|self|draft] [--draft MODEL] [--only WORKLOAD]
 *
 * --draft MODEL: a draft model of the same vocabulary (e.g. a more quantised copy of the target)
 * drafts (--speculate draft, the default with it); its prefill is outside the decode time, as
 * the target's is.
 *
 * Without -m: SmolLM2-135M-Instruct Q4_1 (tools/find_smollm2.py). Prompts go through the
 * model's chat template. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/backend.h"
#include "engine/chat.h"
#include "engine/error.h"
#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/spec.h"
#include "engine/tokenizer.h"

typedef struct {
    const char *name, *user;
} workload;

static const workload workloads[] = {
    {"code_edit",
     "Rename the function `area` to `rect_area` in this Python code. Output the whole code, "
     "changed only there:\n\n```python\nimport math\n\n\ndef area(width, height):\n"
     "    \"\"\"Return the area of a rectangle.\"\"\"\n    if width < 0 or height < 0:\n"
     "        raise ValueError(\"sizes must be positive\")\n    return width * height\n\n\n"
     "def perimeter(width, height):\n    \"\"\"Return the perimeter of a rectangle.\"\"\"\n"
     "    if width < 0 or height < 0:\n        raise ValueError(\"sizes must be positive\")\n"
     "    return 2 * (width + height)\n\n\ndef diagonal(width, height):\n"
     "    \"\"\"Return the diagonal of a rectangle.\"\"\"\n    return math.sqrt(width ** 2 + height ** 2)\n"
     "\n\nif __name__ == \"__main__\":\n    print(area(3, 4), perimeter(3, 4), diagonal(3, 4))\n```\n"},
    {"summary_quotes",
     "Summarise this passage in three sentences, quoting its most important sentence word for "
     "word:\n\nThe city council met on Tuesday to discuss the new bicycle lanes. \"We will build "
     "twenty kilometres of protected lanes by the end of next year,\" the mayor said. Residents "
     "who live near the main avenue were worried about parking, and several shop owners asked for "
     "delivery zones. The council agreed to publish a map of the planned lanes next month and to "
     "hold two public meetings before construction begins. \"Safety comes first, and the lanes "
     "will make our streets safer for everyone,\" said the head of the transport committee.\n"},
    {"extraction",
     "Here is a list of orders:\n\n"
     "order 1001: 3 red chairs, shipped to Lyon, paid\n"
     "order 1002: 1 oak table, shipped to Paris, unpaid\n"
     "order 1003: 12 blue mugs, shipped to Paris, paid\n"
     "order 1004: 2 floor lamps, shipped to Berlin, paid\n"
     "order 1005: 4 red chairs, shipped to Paris, paid\n"
     "order 1006: 1 sofa, shipped to Madrid, unpaid\n"
     "order 1007: 6 wine glasses, shipped to Paris, paid\n"
     "order 1008: 2 bookshelves, shipped to Rome, paid\n"
     "order 1009: 8 blue mugs, shipped to Lyon, unpaid\n"
     "order 1010: 1 oak table, shipped to Paris, paid\n"
     "order 1011: 5 cushions, shipped to Vienna, paid\n"
     "order 1012: 3 floor lamps, shipped to Paris, unpaid\n\n"
     "Copy every line of orders shipped to Paris, exactly as written, one per line.\n"},
    {"free_story",
     "Write a short story about a lighthouse keeper who finds a message in a bottle.\n"},
};
#define N_WORKLOADS (int)(sizeof workloads / sizeof workloads[0])

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static cJSON *stats_json(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "median", n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
    cJSON_AddNumberToObject(o, "min", v[0]);
    cJSON_AddNumberToObject(o, "max", v[n - 1]);
    return o;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One generation of up to n_tokens (stops at end of generation): the tokens, the decode time
 * (after the first token, which the prefill gives), and the speculation counters. */
static int generate(hone_backend *be, const hone_tokenizer *tok, const hone_spec_opts *so,
                    const hone_sampler_params *sp, const int32_t *prompt, int64_t n, int64_t n_tokens,
                    int32_t *out, int64_t *n_out, double *decode_s, double *cpu_s, hone_spec_stats *st)
{
    hone_sampler *s = NULL;
    hone_spec *spec = NULL;
    hone_kv_seq seq = {0};
    int32_t buf[65];
    int64_t got = 0, done = 0;
    int rc;
    if ((rc = hone_sampler_new(&s, sp, (int32_t)hone_backend_n_vocab(be))) ||
        (rc = hone_spec_new(&spec, so, be, s, &seq)) || (rc = hone_spec_start(spec, prompt, n, buf, &got)))
        goto done;
    double t0 = now_s(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    int stop = 0;
    for (;;) {
        for (int64_t j = 0; j < got && !stop; j++) {
            out[done++] = buf[j];
            if (hone_tokenizer_is_eog(tok, buf[j]) || done == n_tokens) stop = 1;
        }
        if (stop) break;
        if ((rc = hone_spec_step(spec, n_tokens - done, buf, &got))) goto done;
    }
    *decode_s = now_s() - t0;
    *cpu_s = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    *n_out = done;
    *st = hone_spec_get_stats(spec);
done:
    hone_spec_free(spec);
    hone_backend_release(be, &seq);
    hone_sampler_free(s);
    return rc;
}

/* The time of one target pass of r rows (r = 1 .. k + 1) after a 64-token context, relative to
 * one row: median of reps, interleaved over r. */
static int pass_costs(hone_backend *be, int k, int reps, cJSON *out)
{
    enum { CTX = 64 };
    int32_t toks[CTX + 65], pos[65];
    hone_kv_seq seq = {0};
    hone_kv_seq *seqs[65];
    double *t = calloc((size_t)(k + 1) * (size_t)reps, sizeof *t);
    int rc = 0;
    for (int i = 0; i < CTX + 65; i++) toks[i] = 100 + i * 7;
    if (!t) return hone_error_set(HONE_ENOMEM, "out of memory");
    if ((rc = hone_backend_forward(be, &seq, toks, CTX, NULL, 0))) goto done;
    for (int rep = 0; rep < reps; rep++)
        for (int r = 1; r <= k + 1; r++) {
            for (int i = 0; i < r; i++) {
                pos[i] = CTX + i;
                seqs[i] = &seq;
            }
            hone_batch b = {r, toks + CTX, seqs, pos, NULL, NULL};
            double t0 = now_s();
            if ((rc = hone_backend_forward_batch(be, &b))) goto done;
            t[(r - 1) * reps + rep] = now_s() - t0;
            hone_kv_cache_truncate(hone_backend_kv(be), &seq, CTX);
        }
    double one = median(t, reps);
    for (int r = 1; r <= k + 1; r++) cJSON_AddItemToArray(out, cJSON_CreateNumber(median(t + (r - 1) * reps, reps) / one));
done:
    hone_backend_release(be, &seq);
    free(t);
    return rc;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *only = NULL, *draft_path = NULL;
    int speculate_set = 0;
    int n_threads = 0, reps = 5;
    int64_t n_tokens = 160;
    hone_sampler_params sp = HONE_SAMPLER_PARAMS_INIT;
    sp.temperature = 0.0f;
    hone_spec_opts so = HONE_SPEC_OPTS_INIT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-m") && v) model = argv[++i];
        else if (!strcmp(a, "-t") && v) n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "-n") && v) n_tokens = atoll(argv[++i]);
        else if (!strcmp(a, "--reps") && v) reps = atoi(argv[++i]);
        else if (!strcmp(a, "--spec-k") && v) so.k_max = atoi(argv[++i]);
        else if (!strcmp(a, "--temp") && v) sp.temperature = (float)atof(argv[++i]);
        else if (!strcmp(a, "--seed") && v) sp.seed = (uint64_t)atoll(argv[++i]);
        else if (!strcmp(a, "--only") && v) only = argv[++i];
        else if (!strcmp(a, "--speculate") && v) {
            if (hone_spec_parse_kind(argv[++i], &so.kind) || so.kind == HONE_SPEC_NONE) {
                fprintf(stderr, "spec: --speculate lookup, self or draft\n");
                return 2;
            }
            speculate_set = 1;
        }
        else if (!strcmp(a, "--draft") && v) draft_path = argv[++i];
        else if (!strcmp(a, "--mode") && v) {
            if (hone_spec_parse_mode(argv[++i], &so.mode)) {
                fprintf(stderr, "spec: %s\n", hone_error_last());
                return 2;
            }
        } else {
            fprintf(stderr, "usage: spec [-m MODEL] [-t THREADS] [-n TOKENS] [--reps N] [--spec-k K] "
                            "[--temp T] [--seed S] [--mode exact|distribution] [--speculate lookup|self|draft] [--draft MODEL] "
                            "[--only WORKLOAD]\n");
            return 2;
        }
    }
    char found[4096] = "";
    if (!model) {
        FILE *p = popen("python3 tools/find_smollm2.py 2>/dev/null", "r");
        if (p && fgets(found, sizeof found, p)) found[strcspn(found, "\n")] = 0;
        if (p) pclose(p);
        model = found;
    }
    if (draft_path && !speculate_set) so.kind = HONE_SPEC_DRAFT;
    if (so.kind == HONE_SPEC_DRAFT && !draft_path) {
        fprintf(stderr, "spec: --speculate draft needs --draft MODEL\n");
        return 2;
    }
    if (!*model || reps < 1 || n_tokens < 2 || so.k_max < 1 || so.k_max > 64) {
        fprintf(stderr, "spec: no model (-m, or SmolLM2 through tools/find_smollm2.py), or bad options\n");
        return 2;
    }
    hone_model *m = NULL;
    hone_tokenizer *tok = NULL;
    hone_backend *be = NULL;
    hone_spec_draft *draft = NULL;
    hone_chat_template ct;
    int have_ct = 0, rc = 1;
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    co.n_threads = n_threads;
    co.n_ctx = 2048;
    cJSON *root = cJSON_CreateObject(), *res = cJSON_AddArrayToObject(root, "workloads");
    int32_t *plain_out = malloc((size_t)n_tokens * sizeof *plain_out);
    int32_t *spec_out = malloc((size_t)n_tokens * sizeof *spec_out);
    double *tp = malloc((size_t)reps * sizeof *tp), *ts = malloc((size_t)reps * sizeof *ts);
    double *ratio = malloc((size_t)reps * sizeof *ratio), *cratio = malloc((size_t)reps * sizeof *cratio);
    if (hone_model_load(&m, model) || hone_tokenizer_new(&tok, hone_model_gguf(m)) ||
        hone_backend_new(&be, m, HONE_DEVICE_CPU, &co) || hone_chat_load(&ct, hone_model_gguf(m), tok) ||
        (draft_path && hone_spec_draft_open(&draft, draft_path, tok, HONE_DEVICE_CPU, &co))) {
        fprintf(stderr, "spec: %s\n", hone_error_last());
        goto done;
    }
    have_ct = 1;
    cJSON_AddStringToObject(root, "model", hone_model_name(m));
    cJSON_AddStringToObject(root, "backend", hone_backend_describe(be));
    cJSON_AddStringToObject(root, "mode", so.mode == HONE_SPEC_EXACT ? "exact" : "distribution");
    cJSON_AddStringToObject(root, "draft", so.kind == HONE_SPEC_SELF    ? "self"
                                           : so.kind == HONE_SPEC_DRAFT ? "model"
                                                                        : "lookup");
    if (draft) {
        so.draft = hone_spec_draft_backend(draft);
        cJSON_AddStringToObject(root, "draft_model", hone_model_name(hone_backend_model(so.draft)));
        cJSON_AddStringToObject(root, "draft_path", draft_path);
    }
    cJSON_AddNumberToObject(root, "k_max", so.k_max);
    cJSON_AddNumberToObject(root, "temperature", sp.temperature);
    cJSON_AddNumberToObject(root, "max_tokens", (double)n_tokens);
    cJSON_AddNumberToObject(root, "reps", reps);
    if (pass_costs(be, so.k_max, 15, cJSON_AddArrayToObject(root, "pass_cost_vs_rows"))) {
        fprintf(stderr, "spec: %s\n", hone_error_last());
        goto done;
    }
    for (int w = 0; w < N_WORKLOADS; w++) {
        if (only && strcmp(only, workloads[w].name)) continue;
        hone_chat_msg msg = {"user", workloads[w].user};
        char *text = NULL;
        int32_t *ids = NULL;
        int64_t n = 0;
        if (hone_chat_format(&text, &ct, &msg, 1, 1) ||
            hone_tokenizer_encode(tok, text, strlen(text), ct.emits_bos ? 0 : -1, 1, &ids, &n)) {
            fprintf(stderr, "spec: %s\n", hone_error_last());
            free(text);
            goto done;
        }
        free(text);
        hone_spec_opts plain = so;
        plain.kind = HONE_SPEC_NONE;
        int identical = 1;
        int64_t n_plain = 0, n_spec = 0, passes = 0, emitted = 0, drafted = 0, accepted = 0, proposed = 0;
        int64_t draft_passes = 0;
        for (int r = 0; r < reps; r++) {
            /* a pair: plain and speculative back to back, the order alternating */
            hone_spec_stats st, st_plain;
            double cp = 0, cs = 0;
            int spec_first = r % 2;
            for (int half = 0; half < 2; half++) {
                int do_spec = half == spec_first;
                int e = do_spec ? generate(be, tok, &so, &sp, ids, n, n_tokens, spec_out, &n_spec, &ts[r], &cs, &st)
                                : generate(be, tok, &plain, &sp, ids, n, n_tokens, plain_out, &n_plain, &tp[r], &cp,
                                           &st_plain);
                if (e) {
                    fprintf(stderr, "spec: %s\n", hone_error_last());
                    free(ids);
                    goto done;
                }
            }
            ratio[r] = (tp[r] / (double)(n_plain - 1)) / (ts[r] / (double)(n_spec - 1));
            cratio[r] = (cp / (double)(n_plain - 1)) / (cs / (double)(n_spec - 1));
            tp[r] = (double)(n_plain - 1) / tp[r];
            ts[r] = (double)(n_spec - 1) / ts[r];
            identical &= n_plain == n_spec && !memcmp(plain_out, spec_out, (size_t)n_plain * sizeof *plain_out);
            passes += st.passes;
            emitted += st.emitted;
            drafted += st.drafted;
            accepted += st.accepted;
            proposed += st.proposed;
            draft_passes += st.draft_passes;
        }
        free(ids);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "workload", workloads[w].name);
        cJSON_AddNumberToObject(o, "prompt_tokens", (double)n);
        cJSON_AddNumberToObject(o, "generated_tokens", (double)n_spec);
        cJSON_AddNumberToObject(o, "acceptance_rate", proposed ? (double)accepted / (double)proposed : 0.0);
        cJSON_AddNumberToObject(o, "per_token_acceptance", drafted ? (double)accepted / (double)drafted : 0.0);
        cJSON_AddNumberToObject(o, "tokens_per_target_pass", passes ? (double)emitted / (double)passes : 0.0);
        cJSON_AddNumberToObject(o, "proposed_per_pass", passes ? (double)proposed / (double)passes : 0.0);
        if (so.kind == HONE_SPEC_DRAFT) /* the draft model's forward passes per target pass */
            cJSON_AddNumberToObject(o, "draft_passes_per_pass", passes ? (double)draft_passes / (double)passes : 0.0);
        cJSON_AddItemToObject(o, "plain_tok_s", stats_json(tp, reps));
        cJSON_AddItemToObject(o, "spec_tok_s", stats_json(ts, reps));
        /* the speedup of each interleaved pair (wall time), and by process CPU time (both threads;
         * a neighbour's preemption does not count there) */
        cJSON_AddItemToObject(o, "speedup", stats_json(ratio, reps));
        cJSON_AddItemToObject(o, "speedup_cpu_time", stats_json(cratio, reps));
        cJSON_AddBoolToObject(o, "identical", identical);
        cJSON_AddItemToArray(res, o);
        char *line = cJSON_PrintUnformatted(o);
        fprintf(stderr, "%s\n", line);
        free(line);
    }
    char *s = cJSON_Print(root);
    puts(s);
    free(s);
    rc = 0;
done:
    cJSON_Delete(root);
    free(plain_out);
    free(spec_out);
    free(tp);
    free(ts);
    free(ratio);
    free(cratio);
    if (have_ct) hone_chat_clear(&ct);
    hone_spec_draft_free(draft);
    hone_backend_free(be);
    hone_tokenizer_free(tok);
    hone_model_free(m);
    return rc;
}
