/* `hone serve`: option parsing and the wiring of the serving stack: model, tokenizer, backend,
 * the continuous-batching scheduler (engine/scheduler.h), the HTTP server (engine/server.h)
 * and, with --tune, the self-tuning loop (agent/tuner.h) behind the server's callbacks. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/tuner.h"
#include "app/cli.h"
#include "app/kv_plan.h"
#include "candidates/kernel_loader.h"
#include "engine/backend.h"
#include "engine/error.h"
#include "engine/forward.h"
#include "engine/gguf.h"
#include "engine/model.h"
#include "engine/scheduler.h"
#include "engine/spec.h"
#include "engine/server.h"
#include "engine/slots.h"
#include "profiler/profile.h"

static const char serve_usage[] =
    "usage: hone serve -m MODEL [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--ctx N]\n"
    "                  [--max-batch N] [--kv-blocks N] [-t THREADS] [--log-requests]\n"
    "                  [--step-tokens N] [--max-queue N] [--timeout SECONDS] [--model-name NAME]\n"
    "                  [--no-prefix-cache] [--no-profile] [--device cpu|cuda|auto] [--kernels DIR]\n"
    "                  [--metrics-no-auth] [--model-alias NAME]... [--cors-origins '*'|ORIGIN,...]\n"
    "                  [--chat-template FILE] [--speculate none|lookup|self|draft] [--spec-k N]\n"
    "                  [--spec-mode exact|distribution] [--self-layers N] [--draft MODEL]\n"
    "                  [--http-threads N] [--max-connections N] [--max-client-connections N]\n"
    "                  [--header-timeout S] [--idle-timeout S]\n"
    "                  [--tune [--llm URL|self|none] [--llm-model NAME] [--auto-apply]\n"
    "                   [--tune-budget N] [--tune-interval S] [--tune-watch S] [--tune-spot S]\n"
    "                   [--tune-margin X] [--tune-e2e-slack X] [--tune-slot SLOT] [--tune-repo DIR] [--tune-state-dir DIR]\n"
    "                   [--push | --push-to REMOTE]]\n"
    "  --tune: a low-priority thread (nice 19, SCHED_IDLE) tunes the hottest served slots and\n"
    "  commits accepted kernels for review; --auto-apply (staging only) also hot-swaps them\n"
    "  at a step boundary and rolls them back on a regression (agent/tuner.h); --push pushes each\n"
    "  committed branch to origin (--push-to: a remote by name or URL) as `hone review push` does.\n"
    "  --kernels DIR: serve the approved CPU kernels DIR/cpu/<slot>.c (vetted by their evidence,\n"
    "  self-checked) instead of the baselines they differ from; --tune then improves on them.\n"
    "  --device: cpu (the default) or cuda (one sequence per step; fails without a usable GPU).\n"
    "  --metrics-no-auth: /metrics answers without the API key (for a scraper; the rest keeps it).\n"
    "  --model-name: the model's id (default: the file's name without .gguf and spaces);\n"
    "  --model-alias: another name requests may use (repeatable). --cors-origins: answer browsers\n"
    "  from these origins (\"*\": any), preflights included.\n"
    "  --chat-template FILE: render chat requests with this Jinja template instead of the GGUF's.\n"
    "  --speculate lookup: prompt-lookup drafts (at most --spec-k, default 8) join each request's\n"
    "  decode row in the batch; self: drafts from the model's first --self-layers layers (default\n"
    "  half; CPU only). --spec-mode exact (default): the tokens of plain decoding; distribution:\n"
    "  rejection sampling, the same distribution. A request's \"speculate\" (\"lookup\", \"self\",\n"
    "  \"draft\", \"none\") and \"speculate_mode\" (\"exact\", \"distribution\") fields override them.\n"
    "  --draft MODEL: a smaller model of the same vocabulary (refused otherwise) drafts, with its own\n"
    "  KV pool (--kv-blocks blocks too); it is the default (--speculate draft) unless --speculate says.\n"
    "  Connections: an epoll event loop on --http-threads threads (default 4); a generation that\n"
    "  waits holds no thread. --max-connections (default: the descriptor limit, raised to its hard\n"
    "  limit, less 256), --max-client-connections per client address (default 256, 0: no limit;\n"
    "  behind a proxy every client is the proxy), beyond which connections are closed at once.\n"
    "  --header-timeout (default 10 s): inactivity allowed before a request's headers are in;\n"
    "  --idle-timeout (default 30 s): after (a body, keep-alive); 0: none.\n"
    "  --port 0 picks a free port (printed on stderr). The API key may also come from\n"
    "  $HONE_API_KEY. SIGTERM or SIGINT: stop accepting, finish in-flight requests, exit 0.\n";

static int parse_int(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "hone serve: %s expects an integer in [%lld, %lld]\n", flag, (long long)lo,
                (long long)hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_num(const char *flag, const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || errno || end == v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "hone serve: %s expects a number in [%g, %g]\n", flag, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* ---- the live slot profile: a hone_profile behind the scheduler's observer ---- */

static void prof_step_begin(void *p, int64_t n_rows, int n_seqs)
{
    (void)n_seqs;
    hone_profile_step_begin(p, n_rows, 0);
}

static void prof_step_end(void *p) { hone_profile_step_end(p); }

static int prof_json(void *p, cJSON **out) { return hone_profile_json(p, out); }

/* Per-slot share of step time, summed over the slot's shapes (the /metrics gauge). */
static int prof_shares(void *p, char (*names)[64], double *shares, int cap)
{
    int cap_rows = 1024, n = 0, n_out = 0;
    hone_profile_row *rows = malloc((size_t)cap_rows * sizeof *rows);
    if (!rows) return 0;
    hone_profile_rows(p, rows, cap_rows, &n);
    if (n > cap_rows) n = cap_rows;
    for (int i = 0; i < n; i++) {
        const char *name = rows[i].slot >= 0 ? hone_slots_name((hone_slot_id)rows[i].slot)
                                             : rows[i].name;
        int j;
        for (j = 0; j < n_out; j++)
            if (strcmp(names[j], name) == 0) break;
        if (j == n_out) {
            if (n_out == cap) continue;
            snprintf(names[n_out], 64, "%s", name);
            shares[n_out++] = 0;
        }
        shares[j] += rows[i].share;
    }
    free(rows);
    return n_out;
}

/* HONE_SERVE_TEST_LOAD_DELAY_S (tests only): the loading state lasts this long longer; a
 * SIGTERM or SIGINT meanwhile ends the command (returns 1). */
static int test_load_delay(const sigset_t *sigs)
{
    const char *e = getenv("HONE_SERVE_TEST_LOAD_DELAY_S");
    double d = e ? atof(e) : 0;
    if (!(d > 0)) return 0;
    struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
    if (sigtimedwait(sigs, NULL, &ts) > 0) {
        fprintf(stderr, "hone serve: stopped while loading\n");
        return 1;
    }
    return 0;
}

/* The default model id: the file's base name without ".gguf" and without spaces
 * ("/m/SmolLM2 135M.Q4_1.gguf" -> "SmolLM2135M.Q4_1"). */
static void default_model_id(const char *path, char *out, size_t cap)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t n = strlen(base), k = 0;
    if (n > 5 && strcmp(base + n - 5, ".gguf") == 0) n -= 5;
    for (size_t i = 0; i < n && k + 1 < cap; i++)
        if (base[i] != ' ') out[k++] = base[i];
    out[k] = 0;
    if (!k) snprintf(out, cap, "hone");
}

#define SERVE_MAX_ALIASES 16

int hone_cli_serve(int argc, char **argv)
{
    const char *aliases[SERVE_MAX_ALIASES];
    char default_id[256];
    const char *model_path = NULL, *model_name = NULL;
    hone_server_opts so = HONE_SERVER_OPTS_INIT;
    hone_scheduler_opts sco = HONE_SCHEDULER_OPTS_INIT;
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    hone_tuner_opts to = HONE_TUNER_OPTS_INIT;
    int tune = 0, profile = 1;
    hone_device device = HONE_DEVICE_CPU;
    int64_t v, kv_blocks = 0;
    const char *kernels_dir = NULL;
    const char *chat_template = NULL; /* --chat-template FILE */
    const char *draft_path = NULL;    /* --draft MODEL */
    int speculate_set = 0;
    so.api_key = getenv("HONE_API_KEY");
#ifdef HONE_VERSION_STRING
    so.build_version = HONE_VERSION_STRING;
    so.build_commit = HONE_GIT_COMMIT;
#endif
    if (so.api_key && !*so.api_key) so.api_key = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
#define IS(x) (strcmp(a, x) == 0)
        if (IS("-h") || IS("--help")) { fputs(serve_usage, stdout); return 0; }
        else if (IS("--log-requests")) { so.log_requests = 1; continue; }
        else if (IS("--no-prefix-cache")) { sco.prefix_cache = 0; continue; }
        else if (IS("--no-profile")) { profile = 0; continue; }
        else if (IS("--metrics-no-auth")) { so.metrics_public = 1; continue; }
        else if (IS("--tune")) { tune = 1; continue; }
        else if (IS("--auto-apply")) { to.auto_apply = 1; continue; }
        else if (IS("--push")) { to.push = "origin"; continue; }
        if (!val) { fprintf(stderr, "hone serve: unknown option or missing value: %s\n%s", a, serve_usage); return 2; }
        i++;
        if (IS("-m") || IS("--model")) model_path = val;
        else if (IS("--host")) so.host = val;
        else if (IS("--device")) {
            int d = hone_backend_parse_device(val);
            if (d < 0) { fprintf(stderr, "hone serve: --device expects cpu, cuda or auto\n"); return 2; }
            device = (hone_device)d;
        }
        else if (IS("--api-key")) so.api_key = val;
        else if (IS("--model-name")) model_name = val;
        else if (IS("--cors-origins")) so.cors_origins = val;
        else if (IS("--model-alias")) {
            if (so.n_model_aliases == SERVE_MAX_ALIASES) { fprintf(stderr, "hone serve: at most %d --model-alias\n", SERVE_MAX_ALIASES); return 2; }
            aliases[so.n_model_aliases++] = val;
            so.model_aliases = aliases;
        }
        else if (IS("--port")) { if (parse_int(a, val, 0, 65535, &v)) return 2; so.port = (int)v; }
        else if (IS("--ctx")) { if (parse_int(a, val, 16, 1 << 20, &v)) return 2; co.n_ctx = v; }
        else if (IS("--speculate")) {
            int kind;
            if (hone_spec_parse_kind(val, &kind)) {
                fprintf(stderr, "hone serve: --speculate expects none, lookup, self or draft\n");
                return 2;
            }
            sco.speculate = kind;
            speculate_set = 1;
        }
        else if (IS("--draft")) draft_path = val;
        else if (IS("--http-threads")) { if (parse_int(a, val, 1, 256, &v)) return 2; so.http_threads = (int)v; }
        else if (IS("--max-connections")) { if (parse_int(a, val, 1, 1 << 24, &v)) return 2; so.max_connections = (int)v; }
        else if (IS("--max-client-connections")) { if (parse_int(a, val, 0, 1 << 24, &v)) return 2; so.max_client_connections = (int)v; }
        else if (IS("--header-timeout")) { if (parse_int(a, val, 0, 86400, &v)) return 2; so.header_timeout_s = (int)v; }
        else if (IS("--idle-timeout")) { if (parse_int(a, val, 0, 86400, &v)) return 2; so.idle_timeout_s = (int)v; }
        else if (IS("--spec-mode")) {
            if (hone_spec_parse_mode(val, &sco.spec_mode)) {
                fprintf(stderr, "hone serve: --spec-mode expects exact or distribution\n");
                return 2;
            }
        }
        else if (IS("--self-layers")) { if (parse_int(a, val, 1, 4096, &v)) return 2; sco.self_layers = (int)v; }
        else if (IS("--spec-k")) { if (parse_int(a, val, 1, 64, &v)) return 2; sco.spec_k = (int)v; }
        else if (IS("--max-batch")) { if (parse_int(a, val, 1, 1024, &v)) return 2; sco.max_batch = (int)v; }
        else if (IS("--kv-blocks")) { if (parse_int(a, val, 1, INT32_MAX, &v)) return 2; kv_blocks = v; }
        else if (IS("-t") || IS("--threads")) { if (parse_int(a, val, 0, 1024, &v)) return 2; co.n_threads = (int)v; }
        else if (IS("--step-tokens")) { if (parse_int(a, val, 1, 1 << 16, &v)) return 2; sco.step_tokens = v; }
        else if (IS("--max-queue")) { if (parse_int(a, val, 0, 1 << 20, &v)) return 2; sco.max_queue = (int)v; }
        else if (IS("--timeout")) { if (parse_int(a, val, 1, 86400 * 7, &v)) return 2; sco.timeout_s = (double)v; }
        else if (IS("--llm")) to.llm = val;
        else if (IS("--llm-model")) to.llm_model = val;
        else if (IS("--kernels")) kernels_dir = val;
        else if (IS("--chat-template")) chat_template = val;
        else if (IS("--tune-repo")) to.repo = val;
        else if (IS("--push-to")) to.push = val;
        else if (IS("--tune-slot")) to.slot = val;
        else if (IS("--tune-state-dir")) to.state_dir = val;
        else if (IS("--tune-budget")) { if (parse_int(a, val, 1, 10000, &v)) return 2; to.budget = (int)v; }
        else if (IS("--tune-interval")) { if (parse_num(a, val, 0, 86400, &to.interval_s)) return 2; }
        else if (IS("--tune-watch")) { if (parse_num(a, val, 0, 86400, &to.watch_s)) return 2; }
        else if (IS("--tune-spot")) { if (parse_num(a, val, 0.01, 86400, &to.spot_s)) return 2; }
        else if (IS("--tune-margin")) { if (parse_num(a, val, 0, 10, &to.margin)) return 2; }
        else if (IS("--tune-e2e-slack")) { if (parse_num(a, val, 0, 1, &to.e2e_slack)) return 2; }
        else { fprintf(stderr, "hone serve: unknown option: %s\n%s", a, serve_usage); return 2; }
#undef IS
    }
    if (!model_path) { fprintf(stderr, "hone serve: -m MODEL is required\n%s", serve_usage); return 2; }
    if (draft_path && !speculate_set) sco.speculate = HONE_SPEC_DRAFT;
    if (sco.speculate == HONE_SPEC_DRAFT && !draft_path) {
        fprintf(stderr, "hone serve: --speculate draft needs --draft MODEL\n");
        return 2;
    }
    if (to.push && !tune) { fprintf(stderr, "hone serve: --push and --push-to push what --tune commits: add --tune\n"); return 2; }

    hone_model *m = NULL;
    hone_tokenizer *tok = NULL;
    hone_backend *be = NULL;
    hone_spec_draft *draft = NULL;
    hone_scheduler *sched = NULL;
    hone_server *srv = NULL;
    hone_tuner *tuner = NULL;
    hone_kernel_loader *kl = NULL;
    hone_profile *prof = NULL;
    hone_chat_template tmpl;
    int have_tmpl = 0, rc = 1;
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    /* every thread started from here on inherits the mask: only sigwait below sees them */
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* thousands of sockets need descriptors: the soft limit goes up to the hard one */
    hone_server_raise_nofile();
    /* the port opens first: /health answers 503 "loading" until the model is served */
    if (hone_server_new(&srv, NULL, NULL, NULL, &so)) goto fail;
    fprintf(stderr, "hone serve: port %d open; loading %s (/health: 503 loading until ready)\n",
            hone_server_port(srv), model_path);
    hone_server_set_progress(srv, "model", 0.05);
    if (test_load_delay(&sigs)) { rc = 0; goto fail; }
    if (hone_model_load(&m, model_path) || hone_tokenizer_new(&tok, hone_model_gguf(m))) goto fail;
    hone_server_set_progress(srv, "backend", 0.5);
    if (hone_chat_load_with(&tmpl, hone_model_gguf(m), tok, chat_template)) goto fail;
    have_tmpl = 1;
    const hone_hparams *hp = hone_model_hparams(m);
    hone_kv_plan plan;
    hone_kv_plan_opts kpo = HONE_KV_PLAN_OPTS_INIT;
    kpo.n_ctx = co.n_ctx;
    kpo.block_size = co.kv_block_size;
    kpo.kv_blocks = kv_blocks;
    kpo.max_batch = sco.max_batch;
    kpo.free_bytes = hone_kv_plan_device_free_bytes(device, m);
    if (hone_kv_plan_make(&plan, m, &kpo)) goto fail;
    if (plan.cut) fprintf(stderr, "hone serve: %s\n", plan.note);
    co.n_ctx = plan.n_ctx;
    co.kv_blocks = kv_blocks = plan.kv_blocks;
    if (hone_backend_new(&be, m, device, &co)) goto fail;
    int on_gpu = hone_backend_device(be) == HONE_DEVICE_CUDA;
    if (hone_kernel_loader_serve(&kl, be, m, kernels_dir, 0)) goto fail;
    if (on_gpu && sco.max_batch > 1) {
        /* its forward batch takes the rows of one sequence (engine/backend.h) */
        fprintf(stderr, "hone serve: the CUDA backend runs one sequence per step: --max-batch 1\n");
        sco.max_batch = 1;
    }
    if (profile) {
        hone_profile_opts po = HONE_PROFILE_OPTS_INIT;
        po.source = on_gpu ? HONE_PROFILE_CUDA : HONE_PROFILE_CPU;
        po.model = m;
        po.n_threads = hone_backend_n_threads(be);
        /* CPU: the forward pass's slot hook times every slot call; CUDA: CUPTI's activity */
        if (hone_profile_new(&prof, &po) == 0 &&
            (on_gpu || hone_backend_set_slot_hook(be, hone_profile_hook, prof) == 0))
            sco.observer = (hone_scheduler_observer){.step_begin = prof_step_begin,
                                                     .step_end = prof_step_end, .json = prof_json,
                                                     .shares = prof_shares, .user = prof};
        else { /* profiling is optional: serve without it */
            hone_profile_free(prof);
            prof = NULL;
        }
    }
    if (draft_path) { /* the same context and pool size: a draft sequence is at most its request's */
        hone_server_set_progress(srv, "draft", 0.8);
        if (hone_spec_draft_open(&draft, draft_path, tok, device, &co)) goto fail;
        sco.draft = hone_spec_draft_backend(draft);
        fprintf(stderr, "hone serve: draft model %s on %s\n", draft_path, hone_backend_describe(sco.draft));
    }
    hone_server_set_progress(srv, "scheduler", 0.9);
    if (hone_scheduler_new(&sched, be, tok, &sco)) goto fail;
    so.n_ctx = hone_backend_n_ctx(be);
    default_model_id(model_path, default_id, sizeof default_id);
    so.model_id = model_name ? model_name : default_id;
    {   /* llama.cpp's <arch>.pooling_type (1 mean, 3 last) decides how /v1/embeddings pools */
        char key[64];
        int64_t pt = 0;
        snprintf(key, sizeof key, "%s.pooling_type", hp->arch);
        if (hone_gguf_get_i64_opt(hone_model_gguf(m), key, &pt) == 0 && pt == HONE_POOLING_LAST)
            so.pooling = HONE_POOLING_LAST;
    }
    if (tune) {
        if (!profile) {
            hone_error_set(HONE_EINVAL, "--tune reads the live profile: drop --no-profile");
            goto fail;
        }
        to.model_path = model_path;
        to.kernels_dir = kl ? kernels_dir : NULL; /* the incumbents: what is served */
        if (hone_tuner_new(&tuner, sched, be, &to)) goto fail; /* swaps in the backend's table */
        so.tuning_json = hone_tuner_json;
        so.tuning_metrics = hone_tuner_metrics;
        so.tuning_user = tuner;
    }
    hone_server_set_ready(srv, sched, tok, &tmpl, &so);
    if (tuner) {
        char self_url[96];
        snprintf(self_url, sizeof self_url, "http://127.0.0.1:%d/v1", hone_server_port(srv));
        hone_tuner_set_self_model(tuner, so.model_id); /* --llm self asks for what it serves */
        if (hone_tuner_start(tuner, self_url, so.api_key)) goto fail;
    }
    double kv_mib = (double)plan.pool_bytes / (1 << 20);
    fprintf(stderr, "hone serve: model '%s' on %s; ctx %lld, batch %d, step %lld tokens, KV %lld blocks "
            "of %lld tokens (%.0f MiB), prefix cache %s, api key %s\n",
            so.model_id, hone_backend_describe(be), (long long)so.n_ctx, sco.max_batch,
            (long long)(sco.step_tokens < sco.max_batch ? sco.max_batch : sco.step_tokens),
            (long long)kv_blocks, (long long)co.kv_block_size, kv_mib, sco.prefix_cache ? "on" : "off",
            so.api_key ? "required" : "off");
    fprintf(stderr, "hone serve: listening on http://%s%s%s:%d\n", strchr(so.host, ':') ? "[" : "",
            so.host, strchr(so.host, ':') ? "]" : "", hone_server_port(srv));
    fflush(stderr);

    int sig = 0;
    while (sigwait(&sigs, &sig) != 0) {}
    fprintf(stderr, "hone serve: %s: draining (%lld requests in flight)\n",
            sig == SIGTERM ? "SIGTERM" : "SIGINT", (long long)hone_scheduler_n_active(sched));
    hone_tuner_stop(tuner); /* a running guard is cancelled now, not waited for */
    if (hone_server_drain(srv, sco.timeout_s + 10))
        fprintf(stderr, "hone serve: %s; closing them\n", hone_error_last());
    rc = 0;
    fprintf(stderr, "hone serve: stopped\n");
fail:
    if (rc) fprintf(stderr, "hone serve: %s\n", hone_error_last());
    /* whatever is left (a drain that timed out) ends now, so connection threads return */
    if (sched) hone_scheduler_shutdown(sched);
    hone_server_free(srv);
    hone_tuner_free(tuner); /* after the engine stopped: it unloads the tuned kernels */
    hone_scheduler_free(sched);
    if (prof && hone_backend_device(be) == HONE_DEVICE_CPU) hone_backend_set_slot_hook(be, NULL, NULL);
    hone_profile_free(prof);
    hone_spec_draft_free(draft); /* after the scheduler: it held the draft sequences */
    hone_backend_free(be);
    hone_kernel_loader_free(kl); /* after the backend: its table called into the objects */
    if (have_tmpl) hone_chat_clear(&tmpl);
    hone_tokenizer_free(tok);
    hone_model_free(m);
    return rc;
}
