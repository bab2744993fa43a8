/* The tuning loop. Candidate code never runs in this process before the guard has accepted
 * it: the guard evaluates it in isolated workers; only accepted kernels are loaded (through
 * the kernel loader's self-check) for the final end-to-end measurement. */
#include "tune.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/extract.h"
#include "agent/llm.h"
#include "agent/prompt.h"
#include "agent/search.h"
#include "candidates/kernel_loader.h"
#include "agent/review.h"
#include "engine/error.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "guard/guard.h"
#include "profiler/profile.h"

#define MAX_HISTORY 16

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Decode tokens/s of ctx: a 32-token prompt then 32 greedy steps. */
static int decode_rate(hone_ctx *ctx, const hone_model *m, double *out)
{
    const hone_hparams *hp = hone_model_hparams(m);
    int32_t prompt[32];
    for (int i = 0; i < 32; i++) prompt[i] = (int32_t)((i * 7919 + 13) % hp->n_vocab);
    float *logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    if (!logits) return hone_error_set(HONE_ENOMEM, "out of memory");
    hone_kv_seq seq = {0};
    int rc = hone_ctx_forward(ctx, &seq, prompt, 32, logits, 0);
    double t0 = now_s();
    for (int i = 0; i < 32 && !rc; i++) {
        int32_t next = 0;
        for (int64_t k = 1; k < hp->n_vocab; k++)
            if (logits[k] > logits[next]) next = (int32_t)k;
        rc = hone_ctx_forward(ctx, &seq, &next, 1, logits, 0);
    }
    *out = 32.0 / (now_s() - t0);
    hone_kv_cache_release(hone_ctx_kv(ctx), &seq);
    free(logits);
    return rc;
}

/* Profiles a prompt and some decode steps; fills the ranking. */
static int profile_model(hone_ctx *ctx, const hone_model *m, int n_threads, hone_profile_row *rows,
                         int cap, int *n, FILE *log)
{
    hone_profile *p = NULL;
    hone_profile_opts po = HONE_PROFILE_OPTS_INIT;
    po.n_threads = n_threads;
    int rc = hone_profile_new(&p, &po);
    if (rc) return rc;
    if ((rc = hone_profile_attach(p, ctx))) goto done;
    const hone_hparams *hp = hone_model_hparams(m);
    int32_t prompt[32];
    for (int i = 0; i < 32; i++) prompt[i] = (int32_t)((i * 7919 + 13) % hp->n_vocab);
    float *logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    hone_kv_seq seq = {0};
    hone_profile_step_begin(p, 32, 0);
    rc = logits ? hone_ctx_forward(ctx, &seq, prompt, 32, logits, 0) : HONE_ENOMEM;
    hone_profile_step_end(p);
    for (int i = 0; i < 64 && !rc; i++) { /* decode dominates serving: weigh it so */
        int32_t next = (int32_t)((i * 31 + 7) % hp->n_vocab);
        hone_profile_step_begin(p, 1, seq.n_tokens);
        rc = hone_ctx_forward(ctx, &seq, &next, 1, logits, 0);
        hone_profile_step_end(p);
    }
    hone_kv_cache_release(hone_ctx_kv(ctx), &seq);
    free(logits);
    hone_profile_detach(p, ctx);
    if (!rc) rc = hone_profile_ranking(p, rows, cap, n);
    if (!rc && log) {
        fprintf(log, "tune: profile of %s (top slots by expected gain):\n", hone_model_name(m));
        for (int i = 0; i < *n && i < 5 && i < cap; i++)
            fprintf(log, "  %d. %-18s %-14s %5.1f%% of step time, %5.1f%% of roofline, gain %.1f%%\n",
                    i + 1, rows[i].name, rows[i].shape, 100 * rows[i].share, 100 * rows[i].roofline,
                    100 * rows[i].gain);
    }
done:
    hone_profile_free(p);
    return rc;
}

/* ---- "self": the engine's own model behind `hone serve` on loopback ---- */

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (s >= 0) close(s);
    return port;
}

/* Starts `hone serve` on the model; waits for /health; returns the child's pid. */
static pid_t start_self(const char *model, int n_threads, char *url, size_t cap)
{
    int port = free_port();
    if (port < 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char p[16], t[16];
        snprintf(p, sizeof p, "%d", port);
        snprintf(t, sizeof t, "%d", n_threads > 0 ? n_threads : 1);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 2);
        execl("/proc/self/exe", "hone", "serve", "-m", model, "--host", "127.0.0.1", "--port", p,
              "-t", t, (char *)NULL);
        _exit(127);
    }
    snprintf(url, cap, "http://127.0.0.1:%d/v1", port);
    /* wait for it to listen (bounded) */
    for (int i = 0; i < 300; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int ok = s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0;
        if (s >= 0) close(s);
        if (ok) return pid;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) return -1;
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static hone_tune_slot_result *slot_result(hone_tune_result *r, const char *slot)
{
    for (int i = 0; i < r->n_slots; i++)
        if (!strcmp(r->slots[i].slot, slot)) return &r->slots[i];
    if (r->n_slots == HONE_TUNE_MAX_SLOTS) return &r->slots[HONE_TUNE_MAX_SLOTS - 1];
    hone_tune_slot_result *s = &r->slots[r->n_slots++];
    memset(s, 0, sizeof *s);
    snprintf(s->slot, sizeof s->slot, "%s", slot);
    return s;
}

int hone_tune_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return hone_error_set(HONE_EIO, "%s: %s", path, strerror(errno));
    int ok = fputs(text, f) >= 0;
    ok = (fclose(f) == 0) && ok;
    return ok ? 0 : hone_error_set(HONE_EIO, "%s: write failed (disk full?)", path);
}

/* The slot order to work on: the ranking's slots (each once), filtered to what the proposer
 * can handle; or just the slot asked for. */
static int plan_slots(const hone_tune_opts *o, int search, const hone_profile_row *rows, int n,
                      hone_slot_id *out, const hone_profile_row **info, int cap)
{
    int k = 0;
    if (o->slot) {
        int id = hone_slots_from_name(o->slot);
        if (id < 0) return hone_error_set(HONE_EINVAL, "unknown slot '%s'", o->slot);
        if (search && !hone_search_supports((hone_slot_id)id))
            return hone_error_set(HONE_EUNSUPPORTED, "the search proposer has no template for %s; "
                                  "use --llm URL", o->slot);
        out[k] = (hone_slot_id)id;
        info[k] = NULL;
        for (int i = 0; i < n; i++)
            if (rows[i].slot == id) { info[k] = &rows[i]; break; }
        return 1;
    }
    for (int i = 0; i < n && k < cap; i++) {
        if (rows[i].slot < 0) continue;
        hone_slot_id id = (hone_slot_id)rows[i].slot;
        int dup = 0;
        for (int j = 0; j < k; j++) dup |= out[j] == id;
        if (dup || (search && !hone_search_supports(id))) continue;
        out[k] = id;
        info[k] = &rows[i];
        k++;
    }
    return k;
}

int hone_tune_propose_llm(hone_tune_proposal *out, hone_llm *client, const void *prompt_opts)
{
    const hone_prompt_opts *po = prompt_opts;
    memset(out, 0, sizeof *out);
    out->status = HONE_EXTRACT_NO_CODE;
    char *sys = NULL, *user = NULL, *reply = NULL;
    int rc = hone_prompt_build(po, &sys, &user);
    if (rc) return rc;
    hone_llm_msg msgs[2] = {{"system", sys}, {"user", user}};
    hone_llm_usage u;
    int lrc = hone_llm_chat(client, msgs, 2, &reply, &u);
    free(sys);
    free(user);
    snprintf(out->origin, sizeof out->origin,
             "llm %s via %s, %lld prompt + %lld completion tokens, %d attempt(s)",
             hone_llm_model(client), hone_llm_endpoint(client), (long long)u.prompt_tokens,
             (long long)u.completion_tokens, u.attempts);
    if (lrc) {
        out->llm_failed = 1;
        return 0;
    }
    hone_extract_status st;
    rc = hone_extract_code(reply, po->slot, po->backend ? po->backend : "cpu", &out->src, &st);
    free(reply);
    out->status = (int)st;
    return rc;
}

int hone_tune_run(hone_tune_result *out, const hone_tune_opts *opts, FILE *log)
{
    hone_tune_opts o = *opts;
    memset(out, 0, sizeof *out);
    if (!o.model_path) return hone_error_set(HONE_EINVAL, "-m MODEL is required");
    if (o.budget <= 0) o.budget = 6;
    if (o.threshold <= 0) o.threshold = 1.05;
    if (!o.backend) o.backend = "cpu";
    if (strcmp(o.backend, "cpu"))
        return hone_error_set(HONE_EUNSUPPORTED, "tuning the %s backend needs its execution gates "
                              "on a GPU; `hone guard --backend cuda` checks CUDA candidates", o.backend);
    const char *llm = o.llm ? o.llm : getenv("HONE_LLM_URL");
    int search = !llm || !*llm || !strcmp(llm, "none");
    int self = !search && !strcmp(llm, "self");

    hone_model *m = NULL;
    hone_ctx *ctx = NULL;
    hone_llm *client = NULL;
    hone_kernel_loader *kl = NULL;
    pid_t self_pid = -1;
    char tmpdir[] = "/tmp/hone-tune-XXXXXX";
    int have_tmp = 0, rc;
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    co.n_threads = o.n_threads;
    co.n_ctx = 160;
    if ((rc = hone_model_load(&m, o.model_path)) || (rc = hone_ctx_new(&ctx, m, &co))) goto done;
    if (!mkdtemp(tmpdir)) {
        rc = hone_error_set(HONE_EIO, "cannot create a temporary directory: %s", strerror(errno));
        goto done;
    }
    have_tmp = 1;

    hone_profile_row rows[64];
    int n_rows = 0;
    if ((rc = profile_model(ctx, m, o.n_threads, rows, 64, &n_rows, log))) goto done;
    if (n_rows > 64) n_rows = 64;
    hone_slot_id plan[16];
    const hone_profile_row *info[16];
    int n_plan = plan_slots(&o, search, rows, n_rows, plan, info, 16);
    if (n_plan < 0) { rc = n_plan; goto done; }
    if (n_plan == 0) {
        rc = hone_error_set(HONE_EUNSUPPORTED, "no profiled slot can be tuned with this proposer");
        goto done;
    }
    double v[3] = {0, 0, 0};
    for (int i = 0; i < 3 && !rc; i++) rc = decode_rate(ctx, m, &v[i]); /* median of 3 */
    if (rc) goto done;
    qsort(v, 3, sizeof v[0], cmp_d);
    out->tok_s_before = v[1];
    if (log) fprintf(log, "tune: decode before: %.1f tok/s; proposer: %s; budget %d candidates\n",
                     out->tok_s_before, search ? "search" : self ? "self (this model on loopback)" : llm,
                     o.budget);

    char url[128];
    if (self) {
        if ((self_pid = start_self(o.model_path, o.n_threads, url, sizeof url)) < 0) {
            rc = hone_error_set(HONE_EIO, "could not start `hone serve` for --llm self");
            goto done;
        }
        llm = url;
    }
    if (!search) {
        hone_llm_opts lo = HONE_LLM_OPTS_INIT;
        lo.url = llm;
        lo.model = o.llm_model;
        if (o.llm_timeout_ms > 0) lo.timeout_ms = o.llm_timeout_ms;
        if ((rc = hone_llm_new(&client, &lo))) goto done;
    }
    char device[512];
    hone_prompt_cpu_device(device, sizeof device);
    hone_prompt_history hist[MAX_HISTORY];
    char hist_text[MAX_HISTORY][2][600];
    int n_hist = 0;

    /* search: the first points of each slot's space; an LLM: the budget shared by up to three
     * slots, each kept while its rounds learn from the last (an acceptance included) */
    int per_slot_cap = search ? 3 : (o.budget / (n_plan < 3 ? n_plan : 3) > 0 ? o.budget / (n_plan < 3 ? n_plan : 3) : 1);
    int slot_i = 0, tried_here = 0, next_point = 0;
    hone_search_point pts[64];
    int n_pts = search ? hone_search_space(plan[0], pts, 64) : 0;
    char accepted_dir[4200];
    snprintf(accepted_dir, sizeof accepted_dir, "%s/kernels/cpu", tmpdir);
    char mk[4300];
    snprintf(mk, sizeof mk, "%s/kernels", tmpdir);
    mkdir(mk, 0700);
    mkdir(accepted_dir, 0700);

    while (out->candidates < o.budget && slot_i < n_plan) {
        hone_slot_id slot = plan[slot_i];
        const char *slot_name = hone_slots_name(slot);
        hone_tune_slot_result *sr = slot_result(out, slot_name);
        /* move on once this slot's share is spent or (search) its space is exhausted */
        if (tried_here >= per_slot_cap || (search && next_point >= n_pts)) {
            slot_i++;
            tried_here = 0;
            next_point = 0;
            n_hist = 0;
            if (slot_i < n_plan && search) n_pts = hone_search_space(plan[slot_i], pts, 64);
            continue;
        }
        out->candidates++;
        tried_here++;
        sr->tried++;
        char *src = NULL, origin[512], origin_kind[16];
        if (search) {
            hone_search_point p = pts[next_point++];
            char desc[64];
            hone_search_describe(slot, p, desc, sizeof desc);
            snprintf(origin, sizeof origin, "%s", desc);
            snprintf(origin_kind, sizeof origin_kind, "search");
            if ((rc = hone_search_render(slot, p, &src))) goto done;
        } else {
            char shapes[512] = "", profile[256] = "(not in the profile)";
            int so = 0;
            for (int i = 0; i < n_rows; i++)
                if (rows[i].slot == (int)slot && so < (int)sizeof shapes - 100)
                    so += snprintf(shapes + so, sizeof shapes - (size_t)so, "- %s: %lld calls in the profiled run\n",
                                   rows[i].shape, (long long)rows[i].calls);
            if (info[slot_i])
                snprintf(profile, sizeof profile, "%.1f%% of decode step time, %.1f GB/s = %.1f%% of the "
                         "measured roofline", 100 * info[slot_i]->share, info[slot_i]->gbps,
                         100 * info[slot_i]->roofline);
            hone_prompt_opts po = HONE_PROMPT_OPTS_INIT;
            po.slot = slot;
            po.backend = "cpu";
            po.shapes = shapes;
            po.profile = profile;
            po.device = device;
            po.history = hist;
            po.n_history = n_hist;
            hone_tune_proposal pr;
            if ((rc = hone_tune_propose_llm(&pr, client, &po))) goto done;
            snprintf(origin_kind, sizeof origin_kind, "llm");
            snprintf(origin, sizeof origin, "%s", pr.origin);
            if (pr.llm_failed) {
                out->llm_errors++;
                if (log) fprintf(log, "tune: [%d/%d] %-16s LLM call failed: %s\n", out->candidates,
                                 o.budget, slot_name, hone_error_last());
                rc = 0;
                continue;
            }
            src = pr.src;
            hone_extract_status st = (hone_extract_status)pr.status;
            if (st != HONE_EXTRACT_OK) {
                out->no_code++;
                if (log) fprintf(log, "tune: [%d/%d] %-16s rejected: %s (%s)\n", out->candidates,
                                 o.budget, slot_name, hone_extract_status_name(st), hone_error_last());
                if (n_hist < MAX_HISTORY) {
                    snprintf(hist_text[n_hist][0], 600, "reply %d", out->candidates);
                    snprintf(hist_text[n_hist][1], 600, "%s: %s", hone_extract_status_name(st), hone_error_last());
                    hist[n_hist] = (hone_prompt_history){hist_text[n_hist][0], hist_text[n_hist][1]};
                    n_hist++;
                }
                continue;
            }
        }
        char cand_path[4400];
        snprintf(cand_path, sizeof cand_path, "%s/candidate-%d.c", tmpdir, out->candidates);
        rc = hone_tune_write_file(cand_path, src);
        if (rc) { free(src); goto done; }
        hone_guard_opts go = HONE_GUARD_OPTS_INIT;
        go.model_path = o.model_path;
        go.slot = slot_name;
        go.backend = "cpu";
        go.source = src;
        go.source_len = strlen(src);
        go.name = cand_path;
        go.state_dir = o.state_dir;
        go.threshold = o.threshold;
        go.origin_kind = origin_kind;
        go.origin = origin;
        go.quiet = 1;
        hone_guard_result gr;
        double t0 = now_s();
        rc = hone_guard_run(&gr, &go, NULL);
        if (rc) {
            if (log) fprintf(log, "tune: [%d/%d] %-16s guard could not run: %s\n", out->candidates,
                             o.budget, slot_name, hone_error_last());
            free(src);
            rc = 0;
            continue;
        }
        if (log)
            fprintf(log, "tune: [%d/%d] %-16s %.12s %-26s %s%s%s (%.1f s)\n", out->candidates,
                    o.budget, slot_name, gr.hash, origin,
                    gr.accepted ? "ACCEPTED " : "rejected: ",
                    gr.accepted ? gr.tier : hone_guard_code_name(gr.code),
                    gr.accepted ? "" : "", now_s() - t0);
        if (log && !gr.accepted) fprintf(log, "tune:        %s\n", gr.reason);
        if (log && gr.accepted) fprintf(log, "tune:        speedup %.3fx (95%% CI %.3f-%.3f)\n", gr.speedup,
                                        gr.ci_low, gr.ci_high);
        if (gr.accepted) {
            sr->accepted++;
            if (gr.speedup > sr->best_speedup) {
                sr->best_speedup = gr.speedup;
                snprintf(sr->best_tier, sizeof sr->best_tier, "%s", gr.tier);
                snprintf(sr->best_hash, sizeof sr->best_hash, "%s", gr.hash);
                char kpath[4400];
                snprintf(kpath, sizeof kpath, "%s/%s.c", accepted_dir, slot_name);
                hone_tune_write_file(kpath, src);
                if (o.commit) {
                    hone_review_opts ro = HONE_REVIEW_OPTS_INIT;
                    ro.repo = o.repo;
                    hone_review_result res;
                    if (hone_review_propose(&res, &ro, slot_name, "cpu", src, strlen(src), &gr.ev) == 0) {
                        snprintf(sr->branch, sizeof sr->branch, "%s", res.branch);
                        if (log) fprintf(log, "tune:        committed for review: %s%s\n", res.branch,
                                         res.existed ? " (already there)" : "");
                    } else if (log) {
                        fprintf(log, "tune:        review commit failed: %s\n", hone_error_last());
                    }
                }
            }
        } else if (n_hist < MAX_HISTORY) {
            snprintf(hist_text[n_hist][0], 600, "candidate %.12s", gr.hash);
            snprintf(hist_text[n_hist][1], 600, "%s: %s", hone_guard_code_name(gr.code), gr.reason);
            hist[n_hist] = (hone_prompt_history){hist_text[n_hist][0], hist_text[n_hist][1]};
            n_hist++;
        }
        free(src);
    }

    /* end to end with the accepted kernels, loaded through the kernel loader's self-check */
    out->tok_s_after = out->tok_s_before;
    int any = 0;
    for (int i = 0; i < out->n_slots; i++) any |= out->slots[i].accepted > 0;
    if (any) {
        hone_kernel_loader_opts ko = HONE_KERNEL_LOADER_OPTS_INIT;
        ko.kernels_dir = mk;
        ko.model = m;
        ko.quiet = 1;
        hone_slot_table before = *hone_ctx_slots(ctx);
        if (hone_kernel_loader_new(&kl, hone_ctx_slots(ctx), &ko) == 0 &&
            hone_kernel_loader_n_installed(kl) > 0) {
            hone_slot_table after = *hone_ctx_slots(ctx);
            double vb[5], va[5];
            for (int i = 0; i < 5 && !rc; i++) { /* alternate, so drift hits both alike */
                *hone_ctx_slots(ctx) = before;
                rc = decode_rate(ctx, m, &vb[i]);
                *hone_ctx_slots(ctx) = after;
                if (!rc) rc = decode_rate(ctx, m, &va[i]);
            }
            if (rc) goto done;
            qsort(vb, 5, sizeof vb[0], cmp_d);
            qsort(va, 5, sizeof va[0], cmp_d);
            out->tok_s_before = vb[2];
            out->tok_s_after = va[2];
        }
    }
    if (log) {
        fprintf(log, "\ntune: %-18s %6s %9s %13s  %s\n", "slot", "tried", "accepted", "best speedup", "review branch");
        for (int i = 0; i < out->n_slots; i++) {
            const hone_tune_slot_result *s = &out->slots[i];
            char sp[32] = "-";
            if (s->accepted) snprintf(sp, sizeof sp, "%.2fx %s", s->best_speedup, s->best_tier);
            fprintf(log, "tune: %-18s %6d %9d %13s  %s\n", s->slot, s->tried, s->accepted, sp,
                    s->branch[0] ? s->branch : "-");
        }
        fprintf(log, "tune: decode %.1f tok/s before, %.1f tok/s after (%+.1f%%); %d candidates, "
                "%d without usable code, %d LLM errors\n", out->tok_s_before, out->tok_s_after,
                100.0 * (out->tok_s_after / out->tok_s_before - 1.0), out->candidates, out->no_code,
                out->llm_errors);
    }
    rc = 0;
done:
    if (self_pid > 0) {
        kill(self_pid, SIGTERM);
        waitpid(self_pid, NULL, 0);
    }
    hone_llm_free(client);
    hone_ctx_free(ctx);   /* before the loader: the table points into its objects */
    hone_kernel_loader_free(kl);
    hone_model_free(m);
    if (have_tmp) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd)) { /* best effort */ }
    }
    return rc;
}

static const char tune_usage[] =
    "usage: hone tune -m MODEL [--llm URL|self|none] [--llm-model NAME] [--budget N] [--slot SLOT]\n"
    "                 [--state-dir DIR] [--repo DIR] [--no-commit] [--threshold X] [-t THREADS]\n"
    "                 [--device cpu]\n";

int hone_cli_tune(int argc, char **argv)
{
    hone_tune_opts o = HONE_TUNE_OPTS_INIT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-commit")) { o.commit = 0; continue; }
        if (!strcmp(a, "--quiet")) { o.quiet = 1; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(tune_usage, stdout); return 0; }
        if (!v) { fprintf(stderr, "hone tune: %s needs a value\n%s", a, tune_usage); return 2; }
        if (!strcmp(a, "-m")) o.model_path = v;
        else if (!strcmp(a, "--llm")) o.llm = v;
        else if (!strcmp(a, "--llm-model")) o.llm_model = v;
        else if (!strcmp(a, "--budget")) o.budget = atoi(v);
        else if (!strcmp(a, "--slot")) o.slot = v;
        else if (!strcmp(a, "--state-dir")) o.state_dir = v;
        else if (!strcmp(a, "--repo")) o.repo = v;
        else if (!strcmp(a, "--threshold")) o.threshold = atof(v);
        else if (!strcmp(a, "-t")) o.n_threads = atoi(v);
        else if (!strcmp(a, "--device")) o.backend = v;
        else if (!strcmp(a, "--llm-timeout")) o.llm_timeout_ms = (long)(atof(v) * 1000);
        else { fprintf(stderr, "hone tune: unknown option %s\n%s", a, tune_usage); return 2; }
        i++;
    }
    if (!o.model_path) { fprintf(stderr, "hone tune: -m MODEL is required\n%s", tune_usage); return 2; }
    if (o.budget < 1 || o.budget > 10000) { fprintf(stderr, "hone tune: --budget must be 1..10000\n"); return 2; }
    hone_tune_result r;
    if (hone_tune_run(&r, &o, o.quiet ? NULL : stderr)) {
        fprintf(stderr, "hone tune: %s\n", hone_error_last());
        return 1;
    }
    return 0;
}
