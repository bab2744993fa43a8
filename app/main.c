/* The hone command: generate, info, tokenize and logits (the parity primitive), the command
 * table of the others (app/cli.c) and --version.
 * Run `hone help` for usage. Errors print the engine's message and exit 1. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/cli.h"
#include "app/kv_plan.h"
#include "candidates/kernel_loader.h"
#include "engine/backend.h"
#include "engine/chat.h"
#include "engine/error.h"
#include "engine/file.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "engine/pool.h"
#include "engine/sampler.h"
#include "engine/spec.h"
#include "engine/tokenizer.h"

#ifndef HONE_VERSION_STRING /* set by CMake */
#define HONE_VERSION_STRING "unknown"
#endif
#ifndef HONE_GIT_COMMIT
#define HONE_GIT_COMMIT "unknown"
#endif
#ifndef HONE_BUILD_TYPE
#define HONE_BUILD_TYPE "unknown"
#endif

/* The core four commands: name and usage lines (the same shape as hone_cli_commands'). */
static const hone_cli_command core_commands[] = {
    {"generate", NULL,
     "  generate -m MODEL -p TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
     "           [--repeat-penalty R] [--seed S] [--chat] [--system TEXT] [--chat-template FILE]\n"
     "                          stream a completion (with --chat: one chat turn)\n"
     "         [--speculate none|lookup|self|draft] [--draft MODEL] [--spec-k N]\n"
     "         [--spec-mode exact|distribution] [--spec-layers L] [--spec-fixed]\n"
     "                          speculative decoding: prompt-lookup, self (the first L layers; by\n"
     "                          default L is measured on the prompt) or draft-model drafts verified\n"
     "                          in one batched pass; exact (default) gives the tokens of plain decoding\n"},
    {"info", NULL, "  info -m MODEL [--tensors] [--chat-template FILE]\n"
                   "                          print architecture, dtypes, tokenizer, chat template (and every tensor)\n"},
    {"tokenize", NULL,
     "  tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos]\n"
     "                          print the token ids of a text\n"},
    {"logits", NULL,
     "  logits -m MODEL (-p TEXT | --prompt-tokens IDS) --steps K --out FILE\n"
     "         [--tokens IDS] [--all-positions]\n"
     "                          dump the f32 logits of every step: greedy, or teacher-forced\n"
     "                          on --tokens (IDS: comma-separated token ids)\n"},
    {NULL, NULL, NULL},
};

static const char usage_tail[] =
    "\n"
    "\n"
    "common options: -t THREADS (default: the CPUs this process may use: affinity and cgroup quota),\n"
    "                --ctx N (context length; default: the model's trained one),\n"
    "                --chunk N (prefill tokens per forward chunk; the logits do not depend on it),\n"
    "                --device auto|cpu|cuda (auto: the GPU when one is usable),\n"
    "                --kernels DIR (approved CPU kernels DIR/cpu/<slot>.c replace the baselines\n"
    "                they differ from, after a self-check; default: the shipped baselines)\n"
    "`hone COMMAND --help` for one command; `hone --version` for the build.\n";

typedef struct {
    const char *model, *prompt, *file, *out, *prompt_tokens, *tokens, *system, *kernels, *draft;
    const char *chat_template; /* --chat-template FILE: renders instead of the GGUF's template */
    int64_t n_predict, steps, n_ctx;
    int64_t chunk;             /* --chunk: prefill tokens per forward chunk; 0: the engine's */
    int n_threads, chat, no_bos, all_positions, tensors, device, help;
    hone_sampler_params sp;
    hone_spec_opts spec;
} options;

static void print_usage(FILE *f)
{
    fputs("usage: hone <command> [options]\n\ncommands:\n", f);
    for (int i = 0; core_commands[i].name; i++) fputs(core_commands[i].help, f);
    for (int i = 0; hone_cli_commands[i].name; i++) fputs(hone_cli_commands[i].help, f);
    fputs(usage_tail, f);
}

static void print_command_usage(FILE *f, const char *cmd)
{
    for (int i = 0; core_commands[i].name; i++)
        if (!strcmp(core_commands[i].name, cmd)) fprintf(f, "usage: hone %s", core_commands[i].help + 2);
    fputs(usage_tail, f);
}

/* `hone --version`: what was built, from what, with what. */
static void print_version(void)
{
    printf("hone %s\n", HONE_VERSION_STRING);
    printf("commit     %s (when the build was configured)\n", HONE_GIT_COMMIT);
    printf("built      %s %s, %s, %s\n", __DATE__, __TIME__, HONE_BUILD_TYPE, "compiler " __VERSION__);
#ifdef HONE_HAVE_CUDA
    printf("cuda       yes (NVRTC kernels; the driver is loaded when a GPU is used)\n");
#else
    printf("cuda       no (CPU only)\n");
#endif
    printf("threads    %d by default here (affinity and cgroup quota)\n", hone_pool_default_threads());
}

static int die(const char *what)
{
    fprintf(stderr, "hone: %s%s%s\n", what ? what : "", what ? ": " : "", hone_error_last());
    return 1;
}

static int parse_i64(const char *s, int64_t *out, const char *flag)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return hone_error_set(HONE_EINVAL, "%s expects an integer, got '%s'", flag, s);
    *out = v;
    return 0;
}

static int parse_range(const char *flag, const char *v, double lo, double hi, int lo_open, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x))
        return hone_error_set(HONE_EINVAL, "%s expects a number, got '%s'", flag, v);
    if (x < lo || x > hi || (lo_open && x == lo))
        return hone_error_set(HONE_EINVAL, "%s is %s; it must be in %c%g, %g]", flag, v, lo_open ? '(' : '[',
                              lo, hi);
    *out = x;
    return 0;
}

static int parse_int_range(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out)
{
    int rc = parse_i64(v, out, flag);
    if (!rc && (*out < lo || *out > hi))
        rc = hone_error_set(HONE_EINVAL, "%s is %s; it must be in [%lld, %lld]", flag, v, (long long)lo,
                            (long long)hi);
    return rc;
}

enum { O_OUT = 256, O_PROMPT_TOKENS, O_TOKENS, O_SYSTEM, O_KERNELS, O_DEVICE, O_STEPS, O_CTX, O_TEMP,
       O_TOP_K, O_TOP_P, O_MIN_P, O_REPEAT, O_SEED, O_CHAT, O_NO_BOS, O_ALL_POS, O_TENSORS, O_CHAT_TEMPLATE,
       O_SPECULATE, O_DRAFT, O_SPEC_K, O_SPEC_MODE, O_SPEC_FIXED, O_SPEC_LAYERS };
enum { O_CHUNK = 512 }; /* --chunk: the prefill chunk (long-context bitwise tests) */

static const struct option long_opts[] = {
    {"model", required_argument, NULL, 'm'},      {"prompt", required_argument, NULL, 'p'},
    {"file", required_argument, NULL, 'f'},       {"n-predict", required_argument, NULL, 'n'},
    {"threads", required_argument, NULL, 't'},    {"help", no_argument, NULL, 'h'},
    {"out", required_argument, NULL, O_OUT},      {"prompt-tokens", required_argument, NULL, O_PROMPT_TOKENS},
    {"tokens", required_argument, NULL, O_TOKENS}, {"system", required_argument, NULL, O_SYSTEM},
    {"kernels", required_argument, NULL, O_KERNELS}, {"device", required_argument, NULL, O_DEVICE},
    {"steps", required_argument, NULL, O_STEPS},  {"ctx", required_argument, NULL, O_CTX},
    {"chunk", required_argument, NULL, O_CHUNK},
    {"temp", required_argument, NULL, O_TEMP},    {"top-k", required_argument, NULL, O_TOP_K},
    {"top-p", required_argument, NULL, O_TOP_P},  {"min-p", required_argument, NULL, O_MIN_P},
    {"repeat-penalty", required_argument, NULL, O_REPEAT}, {"seed", required_argument, NULL, O_SEED},
    {"chat", no_argument, NULL, O_CHAT},          {"no-bos", no_argument, NULL, O_NO_BOS},
    {"all-positions", no_argument, NULL, O_ALL_POS}, {"tensors", no_argument, NULL, O_TENSORS},
    {"chat-template", required_argument, NULL, O_CHAT_TEMPLATE},
    {"speculate", required_argument, NULL, O_SPECULATE}, {"draft", required_argument, NULL, O_DRAFT},
    {"spec-k", required_argument, NULL, O_SPEC_K}, {"spec-mode", required_argument, NULL, O_SPEC_MODE},
    {"spec-fixed", no_argument, NULL, O_SPEC_FIXED}, {"spec-layers", required_argument, NULL, O_SPEC_LAYERS},
    {NULL, 0, NULL, 0},
};

/* The core four's options (getopt_long over argv[1..], argv[1] the command). Every value is
 * checked against its range here, so a bad one exits 2 before a model is loaded. */
static int parse_options(int argc, char **argv, options *o)
{
    hone_sampler_params sp = HONE_SAMPLER_PARAMS_INIT;
    hone_spec_opts spec = HONE_SPEC_OPTS_INIT;
    memset(o, 0, sizeof *o);
    o->sp = sp;
    o->spec = spec;
    o->spec.kind = HONE_SPEC_NONE;
    o->sp.temperature = 0.0f; /* greedy unless asked */
    o->n_predict = 128;
    o->steps = -1;
    opterr = 0; /* our own messages */
    optind = 1;
    int c, rc = 0;
    while (!rc && (c = getopt_long(argc - 1, argv + 1, ":m:p:f:n:t:h", long_opts, NULL)) != -1) {
        const char *v = optarg; /* argv[optind] is the option just read (argv + 1 is scanned) */
        int64_t iv = 0;
        double x = 0;
        switch (c) {
        case 'h': o->help = 1; break;
        case 'm': o->model = v; break;
        case 'p': o->prompt = v; break;
        case 'f': o->file = v; break;
        case O_OUT: o->out = v; break;
        case O_PROMPT_TOKENS: o->prompt_tokens = v; break;
        case O_TOKENS: o->tokens = v; break;
        case O_SYSTEM: o->system = v; break;
        case O_CHAT_TEMPLATE: o->chat_template = v; break;
        case O_KERNELS: o->kernels = v; break;
        case O_CHAT: o->chat = 1; break;
        case O_NO_BOS: o->no_bos = 1; break;
        case O_ALL_POS: o->all_positions = 1; break;
        case O_TENSORS: o->tensors = 1; break;
        case O_SPECULATE: rc = hone_spec_parse_kind(v, &o->spec.kind); break;
        case O_SPEC_MODE: rc = hone_spec_parse_mode(v, &o->spec.mode); break;
        case O_DRAFT: o->draft = v; break;
        case O_SPEC_FIXED: o->spec.adaptive = 0; break;
        case O_SPEC_LAYERS: rc = parse_int_range("--spec-layers", v, 1, 4096, &iv); o->spec.self_layers = (int)iv; break;
        case O_SPEC_K: rc = parse_int_range("--spec-k", v, 1, 64, &iv); o->spec.k_max = (int)iv; break;
        case O_DEVICE:
            if ((o->device = hone_backend_parse_device(v)) < 0)
                rc = hone_error_set(HONE_EINVAL, "--device must be auto, cpu or cuda, got '%s'", v);
            break;
        case 'n': rc = parse_int_range("-n", v, 0, INT32_MAX, &o->n_predict); break;
        case O_STEPS: rc = parse_int_range("--steps", v, 1, INT32_MAX, &o->steps); break;
        case O_CTX: rc = parse_int_range("--ctx", v, 0, 1 << 22, &o->n_ctx); break;
        case O_CHUNK: rc = parse_int_range("--chunk", v, 1, 4096, &o->chunk); break;
        case 't': rc = parse_int_range("-t", v, 0, 1024, &iv); o->n_threads = (int)iv; break;
        case O_TOP_K: rc = parse_int_range("--top-k", v, 0, INT32_MAX, &iv); o->sp.top_k = (int32_t)iv; break;
        case O_SEED: rc = parse_i64(v, &iv, "--seed"); o->sp.seed = (uint64_t)iv; break;
        case O_TEMP: rc = parse_range("--temp", v, 0, 100, 0, &x); o->sp.temperature = (float)x; break;
        case O_TOP_P: rc = parse_range("--top-p", v, 0, 1, 1, &x); o->sp.top_p = (float)x; break;
        case O_MIN_P: rc = parse_range("--min-p", v, 0, 1, 0, &x); o->sp.min_p = (float)x; break;
        case O_REPEAT: rc = parse_range("--repeat-penalty", v, 0, 100, 1, &x); o->sp.repeat_penalty = (float)x; break;
        case ':': rc = hone_error_set(HONE_EINVAL, "%s needs a value", argv[optind]); break;
        default: rc = hone_error_set(HONE_EINVAL, "unknown option: %s", argv[optind]); break;
        }
    }
    if (rc) return rc;
    if (o->help) return 0;
    if (optind < argc - 1) return hone_error_set(HONE_EINVAL, "unexpected argument: %s", argv[1 + optind]);
    if (!o->model) return hone_error_set(HONE_EINVAL, "-m MODEL is required");
    if (o->draft && o->spec.kind == HONE_SPEC_NONE) o->spec.kind = HONE_SPEC_DRAFT;
    if (o->spec.kind == HONE_SPEC_DRAFT && !o->draft)
        return hone_error_set(HONE_EINVAL, "--speculate draft needs --draft MODEL");
    return 0;
}

/* Parses "1,2,3" into a malloc'd id array. */
static int parse_ids(const char *s, int32_t **out, int64_t *out_n)
{
    int64_t cap = 16, n = 0;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    if (!ids) return hone_error_set(HONE_ENOMEM, "out of memory");
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || v < 0 || v > INT32_MAX) {
            free(ids);
            return hone_error_set(HONE_EINVAL, "bad token id list near '%s'", s);
        }
        if (n == cap) {
            int32_t *nb = realloc(ids, (size_t)(cap *= 2) * sizeof *ids);
            if (!nb) { free(ids); return hone_error_set(HONE_ENOMEM, "out of memory"); }
            ids = nb;
        }
        ids[n++] = (int32_t)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) { free(ids); return hone_error_set(HONE_EINVAL, "bad token id list near '%s'", s); }
    }
    *out = ids;
    *out_n = n;
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* hone info's KV lines: bytes per token, at full context, a sliding-window-aware cache's
 * need, and the pool `hone serve` would plan on this machine. */
static void kv_info(const hone_model *m)
{
    const hone_hparams *hp = hone_model_hparams(m);
    hone_kv_plan p;
    hone_kv_plan_opts po = HONE_KV_PLAN_OPTS_INIT;
    if (hone_kv_plan_make(&p, m, &po) != 0) {
        printf("kv cache      %s\n", hone_error_last());
        return;
    }
    double full = (double)hp->n_ctx_train * (double)p.token_bytes / (1 << 20);
    printf("kv cache      %lld bytes per token (f32 K and V: %lld layers x %lld KV heads x %lld), "
           "%.1f MiB at the full context (%lld tokens)\n", (long long)p.token_bytes, (long long)hp->n_layers,
           (long long)hp->n_kv_heads, (long long)hp->head_dim, full, (long long)hp->n_ctx_train);
    int64_t n_win = 0, win = 0;
    for (int64_t l = 0; l < hp->n_layers; l++)
        if (hone_model_layer_window(m, l) > 0) n_win++, win = hone_model_layer_window(m, l);
    if (n_win)
        printf("              sliding window: %lld of %lld layers see %lld keys; a SWA-aware cache would "
               "need %.1f MiB at the full context (this one keeps every key)\n", (long long)n_win,
               (long long)hp->n_layers, (long long)win,
               (double)hone_kv_plan_swa_bytes(m, hp->n_ctx_train) / (1 << 20));
    printf("serve pool    %lld tokens (%.1f MiB) for a %lld-token context%s%s\n",
           (long long)(p.kv_blocks * p.block_size), (double)p.pool_bytes / (1 << 20), (long long)p.n_ctx,
           p.cut ? "; " : "", p.note);
}

static int cmd_info(const options *o)
{
    hone_model *m = NULL;
    hone_tokenizer *tok = NULL;
    if (hone_model_load(&m, o->model)) return die(NULL);
    const hone_hparams *hp = hone_model_hparams(m);
    const hone_gguf *g = hone_model_gguf(m);
    printf("model         %s\n", hone_model_name(m));
    printf("file          %s (GGUF v%u, %.1f MiB)\n", o->model, hone_gguf_version(g),
           (double)hone_gguf_file_size(g) / (1 << 20));
    printf("architecture  %s\n", hp->arch);
    printf("layers        %lld\n", (long long)hp->n_layers);
    printf("dim           %lld\n", (long long)hp->dim);
    printf("heads         %lld (KV heads %lld%s), head dim %lld\n", (long long)hp->n_heads,
           (long long)hp->n_kv_heads, hp->n_kv_heads < hp->n_heads ? ", GQA" : "",
           (long long)hp->head_dim);
    printf("ffn           %lld\n", (long long)hp->ffn);
    printf("vocab         %lld\n", (long long)hp->n_vocab);
    printf("context       %lld (trained; the default of serve and generate)\n", (long long)hp->n_ctx_train);
    kv_info(m);
    printf("rope          %s layout, base %g, %lld dims\n", hp->rope_neox ? "neox" : "normal",
           (double)hp->rope_base, (long long)hp->n_rot);
    printf("norm eps      %g\n", (double)hp->norm_eps);
    printf("embeddings    %s\n", hp->tied ? "tied (output = token_embd)" : "untied");
    printf("qkv bias      %s\n", hp->has_qkv_bias ? "yes" : "no");
    int64_t counts[HONE_DTYPE_COUNT_MAX] = {0};
    int64_t params = 0;
    for (int64_t i = 0; i < hone_gguf_n_tensors(g); i++) {
        const hone_gguf_tensor *t = hone_gguf_tensor_at(g, i);
        counts[t->dtype]++;
        params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    printf("tensors       %lld (", (long long)hone_gguf_n_tensors(g));
    int first = 1;
    for (int d = 0; d < HONE_DTYPE_COUNT_MAX; d++)
        if (counts[d]) { printf("%s%lld %s", first ? "" : ", ", (long long)counts[d], hone_dtype_name(d)); first = 0; }
    printf("), %.1f M parameters\n", (double)params / 1e6);
    printf("weights/step  %.1f MiB read per decoded token\n",
           (double)hone_model_weight_bytes(m) / (1 << 20));
    if (hone_tokenizer_new(&tok, g) != 0) {
        printf("tokenizer     unavailable: %s\n", hone_error_last());
        tok = NULL;
    } else {
        printf("tokenizer     %s, %lld tokens, pre '%s', bos %d, eos %d, add_bos %d\n",
               hone_tokenizer_kind_of(tok) == HONE_TOKENIZER_GPT2 ? "byte-level BPE (gpt2)"
                                                                  : "SentencePiece (llama)",
               (long long)hone_tokenizer_n_vocab(tok), hone_tokenizer_pre(tok), hone_tokenizer_bos(tok),
               hone_tokenizer_eos(tok), hone_tokenizer_add_bos(tok));
        if (*hone_tokenizer_note(tok)) printf("              note: %s\n", hone_tokenizer_note(tok));
    }
    hone_chat_template ct;
    if (tok && hone_chat_load_with(&ct, g, tok, o->chat_template) == 0) {
        char line[512];
        printf("chat template %s\n", hone_chat_describe(&ct, line, sizeof line));
        hone_chat_clear(&ct);
    } else if (tok) {
        printf("chat template unusable: %s\n", hone_error_last());
    }
    if (o->tensors)
        for (int64_t i = 0; i < hone_gguf_n_tensors(g); i++) {
            const hone_gguf_tensor *t = hone_gguf_tensor_at(g, i);
            printf("  %-32s %-5s [%lld", t->name, hone_dtype_name(t->dtype), (long long)t->ne[0]);
            for (int d = 1; d < t->n_dims; d++) printf(", %lld", (long long)t->ne[d]);
            printf("]\n");
        }
    hone_tokenizer_free(tok);
    hone_model_free(m);
    return 0;
}

/* Loads the text of -p or -f. */
static int prompt_text(const options *o, char **out, size_t *len)
{
    if (o->file) return hone_file_read(o->file, out, len);
    if (!o->prompt) return hone_error_set(HONE_EINVAL, "-p TEXT or -f FILE is required");
    *out = strdup(o->prompt);
    *len = strlen(o->prompt);
    return *out ? 0 : hone_error_set(HONE_ENOMEM, "out of memory");
}

static int cmd_tokenize(const options *o)
{
    hone_gguf *g = NULL;
    hone_tokenizer *tok = NULL;
    char *text = NULL;
    size_t len;
    int32_t *ids = NULL;
    int64_t n = 0;
    int rc = 1;
    if (hone_gguf_open(&g, o->model) || hone_tokenizer_new(&tok, g) || prompt_text(o, &text, &len) ||
        hone_tokenizer_encode(tok, text, len, o->no_bos ? 0 : -1, 1, &ids, &n)) {
        die(NULL);
        goto done;
    }
    for (int64_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    rc = 0;
done:
    free(ids);
    free(text);
    hone_tokenizer_free(tok);
    hone_gguf_free(g);
    return rc;
}

static hone_ctx_opts ctx_options(const options *o)
{
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    co.n_threads = o->n_threads;
    co.n_ctx = o->n_ctx;
    if (o->chunk > 0) co.chunk = o->chunk;
    return co;
}

/* Builds the prompt ids: --prompt-tokens, or the tokenised text (a chat turn with --chat). */
static int prompt_ids(const options *o, const hone_model *m, hone_tokenizer *tok, int32_t **ids,
                      int64_t *n)
{
    if (o->prompt_tokens) return parse_ids(o->prompt_tokens, ids, n);
    char *text = NULL;
    size_t len;
    int rc = prompt_text(o, &text, &len);
    if (rc) return rc;
    int add_bos = o->no_bos ? 0 : -1;
    if (o->chat) {
        hone_chat_template ct;
        if ((rc = hone_chat_load_with(&ct, hone_model_gguf(m), tok, o->chat_template))) {
            free(text);
            return rc;
        }
        hone_chat_msg msgs[2];
        int nm = 0;
        if (o->system) msgs[nm++] = (hone_chat_msg){"system", o->system};
        msgs[nm++] = (hone_chat_msg){"user", text};
        char *formatted = NULL;
        rc = hone_chat_format(&formatted, &ct, msgs, nm, 1);
        if (ct.emits_bos) add_bos = 0;
        hone_chat_clear(&ct);
        free(text);
        if (rc) return rc;
        text = formatted;
        len = strlen(text);
    }
    rc = hone_tokenizer_encode(tok, text, len, add_bos, o->chat, ids, n);
    free(text);
    if (!rc && *n == 0) rc = hone_error_set(HONE_EINVAL, "the prompt is empty");
    return rc;
}

/* The context of a one-request command (generate, logits: --ctx, else the trained one) and a
 * pool for that request: n prompt tokens, `more` after them (flag: the option that asked) and
 * `slack` a pass may verify past them. A request that does not fit is an error here, before
 * any backend is made. */
static int request_plan(const options *o, const hone_model *m, int64_t n, int64_t more, const char *flag,
                        int64_t slack, hone_ctx_opts *co)
{
    hone_kv_plan p;
    hone_kv_plan_opts po = HONE_KV_PLAN_OPTS_INIT;
    int64_t n_ctx = o->n_ctx > 0 ? o->n_ctx : hone_model_hparams(m)->n_ctx_train;
    if (n + more > n_ctx)
        return hone_error_set(HONE_ERANGE, "context length exceeded: the prompt has %lld tokens and %s asks for "
                              "%lld more; the context holds %lld (--ctx, at most the model's trained %lld)",
                              (long long)n, flag, (long long)more, (long long)n_ctx,
                              (long long)hone_model_hparams(m)->n_ctx_train);
    po.n_ctx = n_ctx;
    po.block_size = co->kv_block_size;
    po.tokens = n + more + slack;
    if (po.tokens > n_ctx + 1) po.tokens = n_ctx + 1;
    po.free_bytes = hone_kv_plan_device_free_bytes((hone_device)o->device, m);
    int rc = hone_kv_plan_make(&p, m, &po);
    if (rc) return rc;
    co->n_ctx = p.n_ctx;
    co->kv_blocks = p.kv_blocks;
    return 0;
}

static int cmd_generate(const options *o)
{
    hone_model *m = NULL;
    hone_spec_draft *draft = NULL;
    hone_tokenizer *tok = NULL;
    hone_backend *be = NULL;
    hone_sampler *smp = NULL;
    hone_spec *spec = NULL;
    hone_detok *dt = NULL;
    hone_kernel_loader *kl = NULL;
    hone_kv_seq seq = {0};
    int32_t *ids = NULL, *toks = NULL;
    int64_t n = 0;
    int rc = 1;
    hone_ctx_opts co = ctx_options(o);
    hone_spec_opts so = o->spec;
    if (hone_model_load(&m, o->model) || hone_tokenizer_new(&tok, hone_model_gguf(m)) ||
        prompt_ids(o, m, tok, &ids, &n) ||
        request_plan(o, m, n, o->n_predict, "-n", o->spec.k_max + 1 /* drafts verified */, &co)) {
        die(NULL);
        goto done;
    }
    if (hone_backend_new(&be, m, (hone_device)o->device, &co) || hone_kernel_loader_serve(&kl, be, m, o->kernels, 0) ||
        (o->draft && hone_spec_draft_open(&draft, o->draft, tok, o->device, &co)) ||
        hone_sampler_new(&smp, &o->sp, (int32_t)hone_model_hparams(m)->n_vocab) ||
        hone_detok_new(&dt, tok, 0)) {
        die(NULL);
        goto done;
    }
    so.draft = draft ? hone_spec_draft_backend(draft) : NULL;
    if (hone_spec_new(&spec, &so, be, smp, &seq) ||
        !(toks = malloc((size_t)(so.k_max + 1) * sizeof *toks))) {
        die(NULL);
        goto done;
    }
    if (!o->chat && o->prompt) { /* echo the prompt as the continuation's context */
        fputs(o->prompt, stdout);
        fflush(stdout);
    }
    /* one loop for plain and speculative decoding: each pass emits one or more tokens, every
     * one chosen by the position's draw (hone_sampler_sample_at) */
    double t0 = now_s(), t1 = 0;
    int64_t generated = 0, got = 0;
    int stop = 0;
    if (o->n_predict > 0 && hone_spec_start(spec, ids, n, toks, &got)) { die("prefill"); goto done; }
    t1 = now_s();
    while (o->n_predict > 0 && !stop) {
        for (int64_t j = 0; j < got && !stop; j++) {
            int32_t next = toks[j];
            generated++;
            if (hone_tokenizer_is_eog(tok, next) || generated == o->n_predict) stop = 1;
            if (hone_tokenizer_is_eog(tok, next)) break;
            const char *piece;
            size_t plen;
            if (hone_detok_push(dt, next, &piece, &plen) == 0 && plen) {
                fwrite(piece, 1, plen, stdout);
                fflush(stdout);
            }
        }
        if (stop) break;
        if (seq.n_tokens + 1 > hone_backend_n_ctx(be)) {
            fprintf(stderr, "\nhone: context length %lld reached\n", (long long)hone_backend_n_ctx(be));
            break;
        }
        if (hone_spec_step(spec, o->n_predict - generated, toks, &got)) { die("decode"); goto done; }
    }
    const char *rest;
    size_t rlen;
    if (hone_detok_flush(dt, &rest, &rlen) == 0 && rlen) fwrite(rest, 1, rlen, stdout);
    printf("\n");
    double t2 = now_s();
    fprintf(stderr, "hone: prompt %lld tokens in %.3f s (%.1f tok/s), generated %lld tokens in "
            "%.3f s (%.1f tok/s), %s\n",
            (long long)n, t1 - t0, (double)n / (t1 - t0), (long long)generated, t2 - t1,
            generated > 1 ? (double)(generated - 1) / (t2 - t1) : 0.0, hone_backend_describe(be));
    if (so.kind != HONE_SPEC_NONE) {
        hone_spec_stats st = hone_spec_get_stats(spec);
        fprintf(stderr, "hone: speculation %s (%s): %lld target passes, %.2f tokens per pass, "
                "%lld drafted, %lld accepted (%.1f%%)\n",
                so.kind == HONE_SPEC_LOOKUP ? "lookup" : so.kind == HONE_SPEC_SELF ? "self" : "draft",
                so.mode == HONE_SPEC_EXACT ? "exact" : "distribution", (long long)st.passes,
                st.passes ? (double)st.emitted / (double)st.passes : 0.0, (long long)st.drafted,
                (long long)st.accepted, st.drafted ? 100.0 * (double)st.accepted / (double)st.drafted : 0.0);
        if (so.kind == HONE_SPEC_SELF)
            fprintf(stderr, "hone: self-speculation draft: %lld layers%s (agreement on the prompt %.2f)\n",
                    (long long)st.self_layers, st.self_layers ? "" : " = off: no depth beat plain decoding",
                    st.self_agreement);
    }
    rc = 0;
done:
    free(toks);
    free(ids);
    hone_spec_free(spec);
    if (be) hone_backend_release(be, &seq);
    hone_detok_free(dt);
    hone_sampler_free(smp);
    hone_spec_draft_free(draft);
    hone_backend_free(be);
    hone_kernel_loader_free(kl);
    hone_tokenizer_free(tok);
    hone_model_free(m);
    return rc;
}

/* Writes the HONELGT1 dump: magic, n_vocab, n_tokens, n_prompt, n_rows, tokens[n_tokens],
 * row_pos[n_rows], logits[n_rows][n_vocab] (little-endian). Written to FILE.tmp, renamed. */
static int write_logits(const char *path, uint32_t n_vocab, const int32_t *tokens, uint32_t n_tokens,
                        uint32_t n_prompt, const int32_t *row_pos, uint32_t n_rows,
                        const float *logits)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return hone_error_set(HONE_EIO, "%s: %s", tmp, strerror(errno));
    uint32_t hdr[4] = {n_vocab, n_tokens, n_prompt, n_rows};
    int ok = fwrite("HONELGT1", 1, 8, f) == 8 && fwrite(hdr, 4, 4, f) == 4 &&
             fwrite(tokens, 4, n_tokens, f) == n_tokens && fwrite(row_pos, 4, n_rows, f) == n_rows &&
             fwrite(logits, 4, (size_t)n_rows * n_vocab, f) == (size_t)n_rows * n_vocab;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return hone_error_set(HONE_EIO, "%s: write failed (disk full?)", path);
    }
    return 0;
}

static int cmd_logits(const options *o)
{
    hone_model *m = NULL;
    hone_tokenizer *tok = NULL;
    hone_backend *be = NULL;
    hone_kernel_loader *kl = NULL;
    hone_kv_seq seq = {0};
    int32_t *prompt = NULL, *forced = NULL, *seqtok = NULL, *row_pos = NULL;
    int64_t n_prompt = 0, n_forced = 0;
    float *logits = NULL;
    int rc = 1;
    hone_ctx_opts co = ctx_options(o);
    if (!o->out) { hone_error_set(HONE_EINVAL, "--out FILE is required"); return die(NULL); }
    if (hone_model_load(&m, o->model)) return die(NULL);
    if (!o->prompt_tokens && hone_tokenizer_new(&tok, hone_model_gguf(m))) { die(NULL); goto done; }
    if (prompt_ids(o, m, tok, &prompt, &n_prompt) ||
        (o->tokens && parse_ids(o->tokens, &forced, &n_forced))) {
        die(NULL);
        goto done;
    }
    int64_t steps = o->steps >= 0 ? o->steps : n_forced + 1;
    if (steps < 1) { hone_error_set(HONE_EINVAL, "--steps must be >= 1"); die(NULL); goto done; }
    if (forced && n_forced < steps - 1) {
        hone_error_set(HONE_EINVAL, "--tokens gives %lld tokens; %lld steps need %lld",
                       (long long)n_forced, (long long)steps, (long long)(steps - 1));
        die(NULL);
        goto done;
    }
    if (request_plan(o, m, n_prompt, steps - 1, "--steps", 0, &co) ||
        hone_backend_new(&be, m, (hone_device)o->device, &co) || hone_kernel_loader_serve(&kl, be, m, o->kernels, 0)) {
        die(NULL);
        goto done;
    }
    int64_t nv = hone_model_hparams(m)->n_vocab;
    int64_t n_rows = steps + (o->all_positions ? n_prompt - 1 : 0);
    int64_t n_tokens = n_prompt + steps - 1;
    logits = malloc((size_t)(n_rows * nv) * sizeof *logits);
    seqtok = malloc((size_t)n_tokens * sizeof *seqtok);
    row_pos = malloc((size_t)n_rows * sizeof *row_pos);
    if (!logits || !seqtok || !row_pos) { hone_error_set(HONE_ENOMEM, "out of memory"); die(NULL); goto done; }
    memcpy(seqtok, prompt, (size_t)n_prompt * sizeof *seqtok);
    int64_t row = 0;
    if (o->all_positions) {
        if (hone_backend_forward(be, &seq, prompt, n_prompt, logits, 1)) { die(NULL); goto done; }
        for (int64_t i = 0; i < n_prompt; i++) row_pos[row++] = (int32_t)i;
    } else {
        if (hone_backend_forward(be, &seq, prompt, n_prompt, logits, 0)) { die(NULL); goto done; }
        row_pos[row++] = (int32_t)(n_prompt - 1);
    }
    for (int64_t s = 1; s < steps; s++) {
        int32_t next = forced ? forced[s - 1] : hone_sampler_argmax(logits + (row - 1) * nv, nv);
        seqtok[n_prompt + s - 1] = next;
        if (hone_backend_forward(be, &seq, &next, 1, logits + row * nv, 0)) { die(NULL); goto done; }
        row_pos[row++] = (int32_t)(n_prompt + s - 1);
    }
    if (write_logits(o->out, (uint32_t)nv, seqtok, (uint32_t)n_tokens, (uint32_t)n_prompt, row_pos,
                     (uint32_t)n_rows, logits)) {
        die(NULL);
        goto done;
    }
    fprintf(stderr, "hone: wrote %lld rows of %lld logits to %s\n", (long long)n_rows, (long long)nv,
            o->out);
    rc = 0;
done:
    free(logits);
    free(seqtok);
    free(row_pos);
    free(prompt);
    free(forced);
    if (be) hone_backend_release(be, &seq);
    hone_backend_free(be);
    hone_kernel_loader_free(kl);
    hone_tokenizer_free(tok);
    hone_model_free(m);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        print_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        print_version();
        return 0;
    }
    const char *cmd = argv[1];
    for (int i = 0; hone_cli_commands[i].name; i++)
        if (strcmp(cmd, hone_cli_commands[i].name) == 0) return hone_cli_commands[i].run(argc - 1, argv + 1);
    if (strcmp(cmd, "generate") && strcmp(cmd, "info") && strcmp(cmd, "tokenize") &&
        strcmp(cmd, "logits")) {
        fprintf(stderr, "hone: unknown command '%s'\n\n", cmd);
        print_usage(stderr);
        return 2;
    }
    if (parse_options(argc, argv, &o)) {
        fprintf(stderr, "hone %s: %s\n(`hone %s --help` for usage)\n", cmd, hone_error_last(), cmd);
        return 2;
    }
    if (o.help) {
        print_command_usage(stdout, cmd);
        return 0;
    }
    if (strcmp(cmd, "generate") == 0) return cmd_generate(&o);
    if (strcmp(cmd, "info") == 0) return cmd_info(&o);
    if (strcmp(cmd, "tokenize") == 0) return cmd_tokenize(&o);
    return cmd_logits(&o);
}
