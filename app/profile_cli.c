/* `hone profile`: runs a prompt and N decode steps with the profiler on and prints the
 * per-slot table (or JSON), then measures the profiler's own cost by A/B decode steps with
 * the hook on and off. The command's row is in app/cli.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "app/cli.h"
#include "engine/backend.h"
#include "engine/error.h"
#include "engine/model.h"
#include "profiler/profile.h"

int hone_cli_profile(int argc, char **argv);

typedef struct {
    const char *model;
    int device, n_threads, json;
    int64_t prompt, tokens;
} options;

static int usage_to(FILE *f, int rc)
{
    fprintf(f, "usage: hone profile -m MODEL [--device cpu|cuda|auto] [--tokens N] "
                    "[--prompt N] [-t THREADS] [--json]\n");
    return rc;
}

static int usage(void) { return usage_to(stderr, 2); }

static int parse_count(const char *s, int64_t lo, int64_t hi, int64_t *out, const char *flag)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return hone_error_set(HONE_EINVAL, "%s expects an integer in [%lld, %lld], got '%s'", flag,
                              (long long)lo, (long long)hi, s);
    *out = v;
    return 0;
}

static int parse(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->prompt = 32;
    o->tokens = 32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t x = 0;
        int rc = 0;
        if (!strcmp(a, "--json")) { o->json = 1; continue; }
        if (!v) return hone_error_set(HONE_EINVAL, "unknown option or missing value: %s", a);
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--device")) {
            if ((o->device = hone_backend_parse_device(v)) < 0)
                return hone_error_set(HONE_EINVAL, "--device must be auto, cpu or cuda, got '%s'", v);
        } else if (!strcmp(a, "--tokens")) rc = parse_count(v, 1, 1 << 20, &o->tokens, a);
        else if (!strcmp(a, "--prompt")) rc = parse_count(v, 1, 1 << 20, &o->prompt, a);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            rc = parse_count(v, 0, 1024, &x, a);
            o->n_threads = (int)x;
        } else return hone_error_set(HONE_EINVAL, "unknown option: %s", a);
        if (rc) return rc;
        i++;
    }
    if (!o->model) return hone_error_set(HONE_EINVAL, "-m MODEL is required");
    return 0;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int32_t argmax(const float *x, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The hook's cost measured end to end: 2 * pairs decode steps, alternately with the hook
 * on and off (so drift hits both alike); the relative difference of the medians. */
static int ab_overhead(hone_backend *be, const hone_profile *main, hone_kv_seq *seq,
                       float *logits, int64_t n_vocab, int pairs, double *out)
{
    uint64_t *t[2];
    hone_profile *prof = NULL;
    hone_profile_summary s;
    hone_profile_summary_get(main, &s);
    hone_profile_opts po = HONE_PROFILE_OPTS_INIT;
    po.peak_gbps = s.peak_gbps; /* a scratch profile: the table's figures stay as they are */
    po.peak_gflops = s.peak_gflops;
    po.model = hone_backend_model(be);
    int rc = hone_profile_new(&prof, &po);
    if (rc) return rc;
    t[0] = calloc((size_t)pairs, sizeof(uint64_t));
    t[1] = calloc((size_t)pairs, sizeof(uint64_t));
    if (!t[0] || !t[1]) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < 2 * pairs; i++) {
        int on = i & 1;
        int32_t tok = argmax(logits, n_vocab);
        if (on) hone_backend_set_slot_hook(be, hone_profile_hook, prof);
        uint64_t t0 = now_ns();
        rc = hone_backend_forward(be, seq, &tok, 1, logits, 0);
        t[on][i / 2] = now_ns() - t0;
        hone_backend_set_slot_hook(be, NULL, NULL);
        if (rc) goto done;
    }
    qsort(t[0], (size_t)pairs, sizeof(uint64_t), cmp_u64);
    qsort(t[1], (size_t)pairs, sizeof(uint64_t), cmp_u64);
    *out = ((double)t[1][pairs / 2] - (double)t[0][pairs / 2]) / (double)t[0][pairs / 2];
done:
    hone_profile_free(prof);
    free(t[0]);
    free(t[1]);
    return rc;
}

int hone_cli_profile(int argc, char **argv)
{
    if (hone_cli_wants_help(argc, argv)) return usage_to(stdout, 0);
    options o;
    hone_model *m = NULL;
    hone_backend *be = NULL;
    hone_profile *prof = NULL;
    hone_kv_seq seq = {0};
    int32_t *prompt = NULL;
    float *logits = NULL;
    int rc, ret = 1, ab_pairs = 0;
    double ab = 0;
    if (parse(argc, argv, &o)) {
        fprintf(stderr, "hone profile: %s\n", hone_error_last());
        return usage();
    }
    if ((rc = hone_model_load(&m, o.model))) goto done;
    const hone_hparams *hp = hone_model_hparams(m);
    ab_pairs = o.tokens < 16 ? (int)o.tokens : 16;
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    co.n_threads = o.n_threads;
    co.n_ctx = o.prompt + o.tokens + 2 * ab_pairs + 1;
    if (co.n_ctx > hp->n_ctx_train) {
        rc = hone_error_set(HONE_ERANGE, "--prompt + --tokens (+%d A/B steps) exceed the model's "
                            "context of %lld", 2 * ab_pairs, (long long)hp->n_ctx_train);
        goto done;
    }
    if ((rc = hone_backend_new(&be, m, (hone_device)o.device, &co))) goto done;
    hone_profile_opts po = HONE_PROFILE_OPTS_INIT;
    /* CPU: the forward pass's slot hook times each slot call; CUDA: CUPTI's kernel activity */
    int cpu = hone_backend_device(be) == HONE_DEVICE_CPU;
    po.source = cpu ? HONE_PROFILE_CPU : HONE_PROFILE_CUDA;
    po.model = m;
    po.n_threads = hone_backend_n_threads(be);
    if ((rc = hone_profile_new(&prof, &po))) goto done;
    /* the prompt: a fixed pseudo-random token sequence (the slots' cost does not depend on
     * which tokens they are) */
    prompt = malloc((size_t)o.prompt * sizeof *prompt);
    logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    if (!prompt || !logits) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < o.prompt; i++)
        prompt[i] = (int32_t)((i * 7919 + 17) % hp->n_vocab);
    if (cpu) hone_backend_set_slot_hook(be, hone_profile_hook, prof);
    uint64_t t0 = now_ns();
    hone_profile_step_begin(prof, o.prompt, 0);
    rc = hone_backend_forward(be, &seq, prompt, o.prompt, logits, 0);
    hone_profile_step_end(prof);
    uint64_t t1 = now_ns();
    for (int64_t s = 0; !rc && s < o.tokens; s++) {
        int32_t tok = argmax(logits, hp->n_vocab); /* greedy sampling: host work */
        hone_profile_step_begin(prof, 1, seq.n_tokens);
        rc = hone_backend_forward(be, &seq, &tok, 1, logits, 0);
        hone_profile_step_end(prof);
    }
    uint64_t t2 = now_ns();
    if (cpu) hone_backend_set_slot_hook(be, NULL, NULL);
    if (rc) goto done;
    if (cpu && (rc = ab_overhead(be, prof, &seq, logits, hp->n_vocab, ab_pairs, &ab))) goto done;

    double prefill_s = (double)(t1 - t0) * 1e-9, decode_s = (double)(t2 - t1) * 1e-9;
    if (o.json) {
        cJSON *root = NULL;
        if ((rc = hone_profile_json(prof, &root))) goto done;
        cJSON_AddStringToObject(root, "model", hone_model_name(m));
        cJSON_AddStringToObject(root, "device", hone_backend_describe(be));
        cJSON_AddNumberToObject(root, "prompt_tokens", (double)o.prompt);
        cJSON_AddNumberToObject(root, "decode_tokens", (double)o.tokens);
        cJSON_AddNumberToObject(root, "prefill_tokens_per_s", (double)o.prompt / prefill_s);
        cJSON_AddNumberToObject(root, "decode_tokens_per_s", (double)o.tokens / decode_s);
        if (cpu) cJSON_AddNumberToObject(root, "overhead_ab", ab);
        char *text = cJSON_Print(root);
        cJSON_Delete(root);
        if (!text) {
            rc = hone_error_set(HONE_ENOMEM, "out of memory");
            goto done;
        }
        puts(text);
        free(text);
    } else {
        printf("model: %s; device: %s; prompt %lld tokens (%.1f tok/s), %lld decode steps "
               "(%.1f tok/s)\n", hone_model_name(m), hone_backend_describe(be),
               (long long)o.prompt, (double)o.prompt / prefill_s, (long long)o.tokens,
               (double)o.tokens / decode_s);
        hone_profile_print(prof, stdout);
        if (cpu)
            printf("A/B overhead: decode step median %+.2f%% with the hook on (%d steps each; "
                   "noise included)\n", 100 * ab, ab_pairs);
    }
    ret = 0;
done:
    if (ret) fprintf(stderr, "hone profile: %s\n", hone_error_last());
    if (be) hone_backend_release(be, &seq);
    hone_profile_free(prof);
    hone_backend_free(be);
    hone_model_free(m);
    free(prompt);
    free(logits);
    return ret;
}
