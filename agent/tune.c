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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/progress.h"
#include "agent/proposer.h"
#include "agent/report.h"
#include "agent/round.h"
#include "agent/search.h"
#include "agent/search_memory.h"
#include "candidates/sha256.h"
#include "candidates/store.h"
#include "guard/guard.h"
#include "candidates/kernel_loader.h"
#include "engine/error.h"
#include "engine/file.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "profiler/profile.h"

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

/* Decode tokens/s of be: a 32-token prompt then 32 greedy steps. */
static int decode_rate(hone_backend *be, const hone_model *m, double *out)
{
    const hone_hparams *hp = hone_model_hparams(m);
    int32_t prompt[32];
    for (int i = 0; i < 32; i++) prompt[i] = (int32_t)((i * 7919 + 13) % hp->n_vocab);
    float *logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    if (!logits) return hone_error_set(HONE_ENOMEM, "out of memory");
    hone_kv_seq seq = {0};
    int rc = hone_backend_forward(be, &seq, prompt, 32, logits, 0);
    double t0 = now_s();
    for (int i = 0; i < 32 && !rc; i++) {
        int32_t next = 0;
        for (int64_t k = 1; k < hp->n_vocab; k++)
            if (logits[k] > logits[next]) next = (int32_t)k;
        rc = hone_backend_forward(be, &seq, &next, 1, logits, 0);
    }
    *out = 32.0 / (now_s() - t0);
    hone_backend_release(be, &seq);
    free(logits);
    return rc;
}

/* Profiles a prompt and some decode steps; fills the ranking. */
static int profile_model(hone_backend *be, const hone_model *m, int n_threads, hone_profile_row *rows,
                         int cap, int *n)
{
    hone_profile *p = NULL;
    hone_profile_opts po = HONE_PROFILE_OPTS_INIT;
    po.n_threads = n_threads;
    int rc = hone_profile_new(&p, &po);
    if (rc) return rc;
    if ((rc = hone_profile_attach(p, be))) goto done;
    const hone_hparams *hp = hone_model_hparams(m);
    int32_t prompt[32];
    for (int i = 0; i < 32; i++) prompt[i] = (int32_t)((i * 7919 + 13) % hp->n_vocab);
    float *logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    hone_kv_seq seq = {0};
    hone_profile_step_begin(p, 32, 0);
    rc = logits ? hone_backend_forward(be, &seq, prompt, 32, logits, 0) : HONE_ENOMEM;
    hone_profile_step_end(p);
    for (int i = 0; i < 64 && !rc; i++) { /* decode dominates serving: weigh it so */
        int32_t next = (int32_t)((i * 31 + 7) % hp->n_vocab);
        hone_profile_step_begin(p, 1, seq.n_tokens);
        rc = hone_backend_forward(be, &seq, &next, 1, logits, 0);
        hone_profile_step_end(p);
    }
    hone_backend_release(be, &seq);
    free(logits);
    hone_profile_detach(p, be);
    if (!rc) rc = hone_profile_ranking(p, rows, cap, n);
done:
    hone_profile_free(p);
    return rc;
}

/* The ranking's top rows on log (after the progress step, whose bar shares the stream). */
static void print_profile(const hone_model *m, const hone_profile_row *rows, int n, int cap, FILE *log)
{
    if (!log) return;
    fprintf(log, "tune: profile of %s (top slots by expected gain):\n", hone_model_name(m));
    for (int i = 0; i < n && i < 5 && i < cap; i++)
        fprintf(log, "  %d. %-18s %-14s %5.1f%% of step time, %5.1f%% of roofline, gain %.1f%%\n",
                i + 1, rows[i].name, rows[i].shape, 100 * rows[i].share, 100 * rows[i].roofline,
                100 * rows[i].gain);
}

/* --kernels DIR: the approved tree serves from the start (the kernel loader's checks); the
 * guard's incumbents come from the same tree (hone_round_opts.kernels_dir). */
static int load_served(hone_kernel_loader **kl, hone_backend *be, const hone_model *m, const char *dir, FILE *log)
{
    int rc = hone_kernel_loader_serve(kl, be, m, dir, log == NULL);
    if (rc || !*kl) return rc;
    if (log) fprintf(log, "tune: serving %s: %d approved kernel(s) installed, %d refused\n", dir,
                     hone_kernel_loader_n_installed(*kl), hone_kernel_loader_n_refused(*kl));
    return 0;
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
static pid_t start_self(const char *model, int n_threads, int64_t n_ctx, char *url, size_t cap)
{
    int port = free_port();
    if (port < 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char p[16], t[16], c[24];
        snprintf(p, sizeof p, "%d", port);
        snprintf(t, sizeof t, "%d", n_threads > 0 ? n_threads : 1);
        snprintf(c, sizeof c, "%lld", (long long)n_ctx);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 2);
        execl("/proc/self/exe", "hone", "serve", "-m", model, "--host", "127.0.0.1", "--port", p,
              "-t", t, "--ctx", c, "--no-profile", (char *)NULL);
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

/* ---- --report and the progress line ---- */

/* The evidence JSON of each slot's best accepted candidate (index: out->slots), for --report. */
typedef struct {
    char *json[HONE_TUNE_MAX_SLOTS];
} tune_report;

static void tune_report_keep(tune_report *tr, int slot_i, const hone_round_result *r)
{
    char *json = NULL;
    if (!tr || slot_i < 0 || slot_i >= HONE_TUNE_MAX_SLOTS ||
        hone_evidence_to_json(&json, &r->guard.ev, r->slot, "cpu") != 0)
        return;
    free(tr->json[slot_i]);
    tr->json[slot_i] = json;
}

/* Writes the report of the kept records into dir; a line on log says where. */
static int tune_report_write(const tune_report *tr, const char *dir, const hone_tune_result *out,
                             const hone_model *m, FILE *log)
{
    const char *recs[HONE_TUNE_MAX_SLOTS];
    int n = 0;
    for (int i = 0; i < out->n_slots && i < HONE_TUNE_MAX_SLOTS; i++)
        if (tr->json[i]) recs[n++] = tr->json[i];
    char title[384];
    snprintf(title, sizeof title, "hone tune: %s", hone_model_name(m));
    hone_report_opts ro = HONE_REPORT_OPTS_INIT;
    ro.title = title;
    if (n) {
        ro.tok_s_before = out->tok_s_before;
        ro.tok_s_after = out->tok_s_after;
    }
    hone_report_result rr;
    int rc = hone_report_write(&rr, dir, recs, n, &ro);
    if (!rc && log)
        fprintf(log, "tune: report of %d accepted slot%s: %s/index.html (%d chart%s)%s%s\n", n, n == 1 ? "" : "s",
                dir, rr.charts, rr.charts == 1 ? "" : "s", rr.note[0] ? "; " : "", rr.note);
    return rc;
}

static void tune_report_clear(tune_report *tr)
{
    for (int i = 0; i < HONE_TUNE_MAX_SLOTS; i++) free(tr->json[i]);
}

/* The progress line's step around fn (profile, measurements). */
#define TUNE_STEP(prog, name, call)                                                                  \
    do {                                                                                             \
        hone_progress_begin((prog), (name));                                                         \
        rc = (call);                                                                                 \
        hone_progress_end((prog), (name), rc ? "failed" : NULL);                                     \
        hone_progress_clear(prog);                                                                   \
    } while (0)

/* A round's report lines and tallies (the hook runs between the guard and the commit). */
typedef struct {
    const hone_tune_opts *o;
    hone_tune_result *out;
    hone_tune_slot_result *sr;
    const char *kernels_dir;    /* the accepted kernels, for the final measurement */
    FILE *log;
    char **best;                /* the slot's best accepted source so far (malloc'd), for the prompt */
    hone_progress *prog;        /* the live line (NULL: none) */
    tune_report *report;        /* --report's records (NULL: no report) */
} tune_round;

static void on_proposed(void *user, const hone_round_result *r)
{
    tune_round *t = user;
    hone_progress_end(t->prog, "propose", r->proposal.status == HONE_PROPOSAL_CODE ? "code" : "no code");
}

static int on_guarded(void *user, const hone_round_result *r)
{
    tune_round *t = user;
    const hone_guard_result *gr = &r->guard;
    FILE *log = t->log;
    hone_progress_clear(t->prog);
    if (r->guard_rc) {
        if (log) fprintf(log, "tune: [%d/%d] %-16s guard could not run: %s\n", r->number, t->o->budget,
                         r->slot, r->guard_error);
        return 0;
    }
    if (log) {
        fprintf(log, "tune: [%d/%d] %-16s %.12s %-26s %s%s (%.1f s)\n", r->number, t->o->budget, r->slot,
                gr->hash, r->proposal.origin, gr->accepted ? "ACCEPTED " : "rejected: ",
                gr->accepted ? gr->tier : hone_guard_code_name(gr->code), gr->seconds);
        if (!gr->accepted) fprintf(log, "tune:        %s\n", gr->reason);
        else fprintf(log, "tune:        speedup %.3fx (95%% CI %.3f-%.3f)\n", gr->speedup, gr->ci_low, gr->ci_high);
    }
    /* only a new best of its slot is kept (for the end-to-end measurement) and committed */
    if (!hone_round_tally_count(t->sr, r)) return 0;
    tune_report_keep(t->report, (int)(t->sr - t->out->slots), r);
    free(*t->best);
    *t->best = strdup(r->proposal.source);
    if (hone_round_kernel_write(t->kernels_dir, r->slot, r->proposal.source) && log)
        fprintf(log, "tune:        %s\n", hone_error_last());
    return 1;
}

/* What a round without a verdict, or with a commit, leaves to report. */
static void report_round(tune_round *t, const hone_round_result *r)
{
    const hone_proposal *pr = &r->proposal;
    FILE *log = t->log;
    hone_progress_clear(t->prog);
    if (pr->status == HONE_PROPOSAL_LLM_FAILED) {
        t->out->llm_errors++;
        if (log) fprintf(log, "tune: [%d/%d] %-16s LLM call failed: %s\n", r->number, t->o->budget, r->slot, pr->why);
    } else if (pr->status == HONE_PROPOSAL_NO_CODE) {
        t->out->no_code++;
        if (log) fprintf(log, "tune: [%d/%d] %-16s rejected: %s (%s)\ntune:        from %s\n", r->number,
                         t->o->budget, r->slot, pr->reason, pr->why, pr->origin);
    } else if (r->duplicate) {
        t->sr->rejected++;
        if (log) fprintf(log, "tune: [%d/%d] %-16s rejected: duplicate of %s\n", r->number, t->o->budget,
                         r->slot, r->duplicate_of);
    } else if (r->commit_rc == 0) {
        snprintf(t->sr->branch, sizeof t->sr->branch, "%s", r->review.branch);
        if (log) fprintf(log, "tune:        committed for review: %s%s\n", r->review.branch,
                         r->review.existed ? " (already there)" : "");
        if (log && r->push_rc == 0) fprintf(log, "tune:        pushed to %s%s\n", r->push.url,
                                            r->push.outcome == HONE_REVIEW_PUSH_PUSHED ? "" : " (already there)");
        else if (log && r->push_rc < 0) fprintf(log, "tune:        push failed: %s\n", r->push_error);
    } else if (r->commit_rc < 0 && log) {
        fprintf(log, "tune:        review commit failed: %s\n", r->commit_error);
    }
}

/* ---- the search proposer's path: screen a slot's space, halve, guard the best ---- */

#define SCREEN_BUDGET_DEFAULT 24
#define SCREEN_REPS_DEFAULT 5
#define SEARCH_FINALISTS 2      /* full guard runs a slot gets at most */
#define SEARCH_MAX_POINTS 64

typedef struct {
    int index;                  /* in the slot's space */
    char desc[96];              /* the point, as the memory keys it */
    double speedup;             /* latest estimate; 0: failed a cheap gate */
    int reps;
    int alive;
} search_pt;

static int cmp_pt(const void *a, const void *b)
{
    const search_pt *x = a, *y = b;
    if (x->alive != y->alive) return y->alive - x->alive;
    return (x->speedup < y->speedup) - (x->speedup > y->speedup);
}

/* One screen of point p (guard opts.screen): its estimate, or 0 with the reason logged. */
static int screen_one(const hone_tune_opts *o, const hone_proposer *prop, hone_slot_id slot, search_pt *p,
                      int reps, hone_search_memory *mem, FILE *log)
{
    hone_proposal pr;
    hone_proposer_request rq = {.slot = slot, .index = p->index, .kernels_dir = o->kernels_dir};
    int rc = hone_proposer_propose(prop, &pr, &rq);
    if (rc) return rc;
    hone_guard_opts go = HONE_GUARD_OPTS_INIT;
    go.model_path = o->model_path;
    go.slot = hone_slots_name(slot);
    go.source = pr.source;
    go.source_len = pr.source_len;
    go.state_dir = o->state_dir;
    go.kernels_dir = o->kernels_dir; /* the incumbent: what the served tree serves */
    go.threshold = o->threshold;
    go.origin_kind = "search";
    go.origin = pr.origin;
    go.quiet = 1;
    go.screen = 1;
    go.reps = reps;
    static hone_guard_result gr; /* large; one tuning run per process */
    rc = hone_guard_run(&gr, &go, NULL);
    hone_proposal_clear(&pr);
    if (rc) return rc;
    int ok = gr.code == HONE_GUARD_SCREENED;
    p->speedup = ok ? gr.speedup : 0;
    p->reps = reps;
    p->alive = ok;
    if (log)
        fprintf(log, "tune: screen %-16s %-34s %s %.3fx (%d reps, %s, %.1f s)\n", hone_slots_name(slot), p->desc,
                ok ? "estimated" : "failed:", ok ? gr.speedup : 0.0, reps,
                ok ? gr.tier : hone_guard_code_name(gr.code), gr.seconds);
    return hone_search_memory_put(mem, p->desc, ok ? gr.speedup : NAN, reps,
                                  ok ? "screened" : hone_guard_code_name(gr.code), gr.tier);
}

static int cmp_shape(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The shape-set key of slot: the model's name, its profiled call shapes (in string order: the
 * profile lists them by expected gain, which two runs can rank either way when close, and the
 * key must not follow), and the incumbent the estimates are relative to (the first 12 hex digits
 * of its source's SHA-256: the served tree's kernel, else the shipped baseline). */
static void shapes_key(const hone_profile_row *rows, int n_rows, hone_slot_id slot, const hone_model *m,
                       const char *kernels_dir, char *out, size_t cap)
{
    char path[4400], hash[65] = "none";
    char *src = NULL;
    size_t len = 0;
    hone_kernel_loader_source(path, sizeof path, kernels_dir, HONE_SOURCE_DIR, hone_slots_name(slot));
    if (hone_file_read(path, &src, &len) != 0) src = NULL;
    if (src) hone_sha256_hex(src, len, hash);
    free(src);
    int o = snprintf(out, cap, "%s; incumbent %.12s:", hone_model_name(m), hash);
    const char **mine = malloc((size_t)(n_rows > 0 ? n_rows : 1) * sizeof *mine);
    int n = 0;
    for (int i = 0; i < n_rows; i++)
        if (rows[i].slot == (int)slot) {
            if (mine) mine[n++] = rows[i].shape;
            else if (o < (int)cap - 1) o += snprintf(out + o, cap - (size_t)o, " %s;", rows[i].shape); /* no memory: profile order */
        }
    if (n > 1) qsort(mine, (size_t)n, sizeof *mine, cmp_shape);
    for (int i = 0; i < n && o < (int)cap - 1; i++) o += snprintf(out + o, cap - (size_t)o, " %s;", mine[i]);
    free(mine);
}

/* A slot through the search path: points the memory holds keep their estimate; the others
 * (most promising first, up to two thirds of a screen_cap over 4) are screened with reps pairs; the better half is
 * screened again with twice the reps until two are left or the cap is spent; then up to
 * SEARCH_FINALISTS of them whose estimate clears 1.0 go to the full guard (hone_round_run,
 * counted against the budget), and the verdicts join the memory. */
static int search_slot(tune_round *tr, const hone_round_opts *ro, const hone_proposer *prop, hone_slot_id slot,
                       const hone_profile_row *rows, int n_rows, const hone_model *m, int screen_cap,
                       hone_round_history *hist)
{
    const hone_tune_opts *o = tr->o;
    hone_tune_result *out = tr->out;
    FILE *log = tr->log;
    hone_store *st = NULL;
    hone_search_memory *mem = NULL;
    char shapes[512], machine[512];
    int rc = hone_store_open(&st, o->state_dir);
    if (rc) return rc;
    shapes_key(rows, n_rows, slot, m, o->kernels_dir, shapes, sizeof shapes);
    hone_search_memory_machine(machine, sizeof machine);
    rc = hone_search_memory_open(&mem, hone_store_dir(st), hone_slots_name(slot), shapes, machine);
    hone_store_free(st);
    if (rc) return rc;

    hone_search_point sp[SEARCH_MAX_POINTS];
    int n_sp = hone_search_space(slot, sp, SEARCH_MAX_POINTS);
    static search_pt pts[SEARCH_MAX_POINTS];
    int np = 0, screens = 0;
    for (int i = 0; i < n_sp - 1; i++) { /* the incumbent's own point (last) is what it is */
        search_pt *p = &pts[np];
        memset(p, 0, sizeof *p);
        p->index = i;
        hone_search_describe(slot, sp[i], p->desc, sizeof p->desc);
        const hone_search_memory_entry *e = hone_search_memory_find(mem, p->desc);
        if (e && strcmp(e->verdict, "screened")) continue; /* guarded before, or failed a gate */
        if (e) {
            p->speedup = e->speedup;
            p->reps = e->reps;
            p->alive = 1;
            out->remembered++;
        }
        np++;
    }
    int reps = o->screen_reps > 0 ? o->screen_reps : SCREEN_REPS_DEFAULT;
    /* a third is kept for the halving rounds, unless the cap is too small to halve anything */
    int first_cap = screen_cap <= 4 ? screen_cap : screen_cap - screen_cap / 3;
    for (int i = 0; i < np && screens < first_cap && !rc; i++)
        if (!pts[i].reps) {
            rc = screen_one(o, prop, slot, &pts[i], reps, mem, log);
            screens++;
        }
    int alive = 0;
    for (int i = 0; i < np; i++) alive += pts[i].alive;
    /* successive halving: the better half again with twice the reps */
    while (!rc && alive > SEARCH_FINALISTS && screens < screen_cap) {
        qsort(pts, (size_t)np, sizeof pts[0], cmp_pt);
        int keep = (alive + 1) / 2;
        for (int i = keep; i < np; i++) pts[i].alive = 0;
        reps *= 2;
        for (int i = 0; i < keep && screens < screen_cap && !rc; i++)
            if (pts[i].reps < reps) {
                rc = screen_one(o, prop, slot, &pts[i], reps, mem, log);
                screens++;
            }
        alive = 0;
        for (int i = 0; i < np; i++) alive += pts[i].alive;
    }
    out->screened += screens;
    qsort(pts, (size_t)np, sizeof pts[0], cmp_pt);
    for (int i = 0; !rc && i < np && i < SEARCH_FINALISTS && out->candidates < o->budget; i++) {
        if (!pts[i].alive || pts[i].speedup < 1.0) {
            if (log && i == 0)
                fprintf(log, "tune: %s: no screened point is faster than the incumbent; no full guard run\n",
                        hone_slots_name(slot));
            break;
        }
        out->candidates++;
        tr->sr->tried++;
        hone_proposer_request rq = {.slot = slot, .index = pts[i].index, .kernels_dir = o->kernels_dir};
        hone_round_hooks hooks = {.user = tr, .on_guarded = on_guarded};
        static hone_round_result rr; /* large; one tuning run per process */
        if ((rc = hone_round_run(&rr, ro, prop, &rq, out->candidates, hist, &hooks))) break;
        report_round(tr, &rr);
        if (!rr.guard_rc)
            hone_search_memory_put(mem, pts[i].desc, NAN, 0,
                                   rr.guard.accepted ? "accepted" : hone_guard_code_name(rr.guard.code), rr.guard.tier);
        hone_round_result_clear(&rr);
    }
    int src = hone_search_memory_save(mem);
    if (!rc && src && log) fprintf(log, "tune: search memory: %s\n", hone_error_last());
    hone_search_memory_free(mem);
    return rc;
}

/* The prompt's lines for slot: its profiled call shapes and its share of the step. */
static void prompt_lines(const hone_profile_row *rows, int n_rows, hone_slot_id slot,
                         const hone_profile_row *info, char *shapes, size_t shapes_cap, char *profile,
                         size_t profile_cap)
{
    int so = 0;
    shapes[0] = 0;
    for (int i = 0; i < n_rows; i++)
        if (rows[i].slot == (int)slot && so < (int)shapes_cap - 100)
            so += snprintf(shapes + so, shapes_cap - (size_t)so, "- %s: %lld calls in the profiled run\n",
                           rows[i].shape, (long long)rows[i].calls);
    if (info)
        snprintf(profile, profile_cap, "%.1f%% of decode step time, %.1f GB/s = %.1f%% of the "
                 "measured roofline", 100 * info->share, info->gbps, 100 * info->roofline);
    else
        snprintf(profile, profile_cap, "(not in the profile)");
}

/* The one measurement protocol of "before" and "after": decode tokens/s of the table before
 * (the served kernels) and, when after is not NULL, of after (the served kernels with the
 * accepted ones), one discarded warm-up run each, then 5 runs each alternated so that drift hits
 * both alike; the medians and the spread (max / min - 1 of each side) into out. */
#define MEASURE_RUNS 5
static int measure(hone_tune_result *out, hone_backend *be, const hone_model *m, const hone_slot_table *before,
                   const hone_slot_table *after)
{
    double v[2][MEASURE_RUNS], warm;
    int sides = after ? 2 : 1, rc = 0;
    for (int w = 0; w < sides && !rc; w++) {
        *hone_backend_slots(be) = w ? *after : *before;
        rc = decode_rate(be, m, &warm);
    }
    for (int i = 0; i < MEASURE_RUNS && !rc; i++)
        for (int w = 0; w < sides && !rc; w++) {
            *hone_backend_slots(be) = w ? *after : *before;
            rc = decode_rate(be, m, &v[w][i]);
        }
    *hone_backend_slots(be) = *before;
    if (rc) return rc;
    for (int w = 0; w < sides; w++) qsort(v[w], MEASURE_RUNS, sizeof v[w][0], cmp_d);
    out->tok_s_before = v[0][MEASURE_RUNS / 2];
    out->tok_s_before_spread = v[0][MEASURE_RUNS - 1] / v[0][0] - 1.0;
    out->tok_s_after = v[sides - 1][MEASURE_RUNS / 2];
    out->tok_s_after_spread = v[sides - 1][MEASURE_RUNS - 1] / v[sides - 1][0] - 1.0;
    out->measure_runs = MEASURE_RUNS;
    return 0;
}

/* Decode tokens/s with and without the accepted kernels (loaded from kernels_dir through the
 * kernel loader's self-check on top of the served table). */
static int measure_after(hone_tune_result *out, hone_backend *be, const hone_model *m, const char *kernels_dir,
                         hone_kernel_loader **kl)
{
    hone_kernel_loader_opts ko = HONE_KERNEL_LOADER_OPTS_INIT;
    ko.kernels_dir = kernels_dir;
    ko.model = m;
    ko.quiet = 1;
    hone_slot_table before = *hone_backend_slots(be), after = before;
    if (hone_kernel_loader_new(kl, &after, &ko) != 0 || hone_kernel_loader_n_installed(*kl) == 0)
        return measure(out, be, m, &before, NULL);
    return measure(out, be, m, &before, &after);
}

static void report_table(const hone_tune_result *out, FILE *log)
{
    fprintf(log, "\ntune: %-18s %6s %9s %13s  %s\n", "slot", "tried", "accepted", "best speedup", "review branch");
    for (int i = 0; i < out->n_slots; i++) {
        const hone_tune_slot_result *s = &out->slots[i];
        char sp[32] = "-";
        if (s->accepted) snprintf(sp, sizeof sp, "%.2fx %s", s->best_speedup, s->best_tier);
        fprintf(log, "tune: %-18s %6d %9d %13s  %s\n", s->slot, s->tried, s->accepted, sp,
                s->branch[0] ? s->branch : "-");
    }
    fprintf(log, "tune: decode %.1f tok/s before, %.1f tok/s after (%+.1f%%; medians of %d alternated "
            "runs, spread %.1f%% / %.1f%%); %d candidates, %d without usable code, %d LLM errors\n",
            out->tok_s_before, out->tok_s_after, 100.0 * (out->tok_s_after / out->tok_s_before - 1.0),
            out->measure_runs, 100.0 * out->tok_s_before_spread, 100.0 * out->tok_s_after_spread,
            out->candidates, out->no_code, out->llm_errors);
    if (out->screened || out->remembered)
        fprintf(log, "tune: search: %d points screened, %d estimates from the search memory\n", out->screened,
                out->remembered);
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
    const char *llm = NULL;
    hone_proposer_kind kind = hone_proposer_kind_of(o.llm, &llm);
    int search = kind == HONE_PROPOSER_SEARCH, self = kind == HONE_PROPOSER_SELF;

    hone_model *m = NULL;
    hone_backend *be = NULL;
    hone_proposer prop = {0};
    hone_kernel_loader *kl = NULL, *served = NULL;
    char *best_src = NULL;      /* the current slot's best accepted source (the prompt shows it) */
    pid_t self_pid = -1;
    char tmpdir[] = "/tmp/hone-tune-XXXXXX";
    int have_tmp = 0, rc;
    hone_progress *prog = NULL;
    static tune_report report; /* one tuning run per process */
    memset(&report, 0, sizeof report);
    if (log && o.progress && (rc = hone_progress_new(&prog, log, o.budget, o.progress < 0 ? -1 : 1))) return rc;
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    co.n_threads = o.n_threads;
    co.n_ctx = 160;
    if ((rc = hone_model_load(&m, o.model_path)) || (rc = hone_backend_new(&be, m, HONE_DEVICE_CPU, &co)) ||
        (rc = load_served(&served, be, m, o.kernels_dir, log)))
        goto done;
    if (!mkdtemp(tmpdir)) {
        rc = hone_error_set(HONE_EIO, "cannot create a temporary directory: %s", strerror(errno));
        goto done;
    }
    have_tmp = 1;

    hone_profile_row rows[64];
    int n_rows = 0;
    hone_progress_candidate(prog, 0, hone_model_name(m));
    TUNE_STEP(prog, "profile", profile_model(be, m, o.n_threads, rows, 64, &n_rows));
    if (rc) goto done;
    print_profile(m, rows, n_rows, 64, log);
    if (n_rows > 64) n_rows = 64;
    hone_slot_id plan[16];
    const hone_profile_row *info[16];
    int n_plan = plan_slots(&o, search, rows, n_rows, plan, info, 16);
    if (n_plan < 0) { rc = n_plan; goto done; }
    if (n_plan == 0) {
        rc = hone_error_set(HONE_EUNSUPPORTED, "no profiled slot can be tuned with this proposer");
        goto done;
    }
    if (log) fprintf(log, "tune: proposer: %s; budget %d candidates%s%s%s\n",
                     search ? "search" : self ? "self (this model on loopback)" : llm, o.budget,
                     search ? " (full guard runs) after cheap screens" : "",
                     o.kernels_dir ? "; incumbents: the kernels " : "", o.kernels_dir ? o.kernels_dir : "");

    char url[128];
    if (self) {
        /* the model's whole trained context (at most 32k tokens): the prompt and the kernel */
        int64_t sctx = hone_model_hparams(m)->n_ctx_train;
        if (sctx > 32768) sctx = 32768;
        if ((self_pid = start_self(o.model_path, o.n_threads, sctx, url, sizeof url)) < 0) {
            rc = hone_error_set(HONE_EIO, "could not start `hone serve` for --llm self");
            goto done;
        }
        llm = url;
    }
    /* self: ask for the model it serves, and let it answer to the end of its context */
    hone_proposer_llm_opts lo = {.url = llm, .model = self && !o.llm_model ? hone_model_name(m) : o.llm_model,
                                 .timeout_ms = o.llm_timeout_ms, .max_tokens = self ? -1 : 0};
    rc = search ? hone_proposer_search_new(&prop) : hone_proposer_llm_new(&prop, &lo);
    if (rc) goto done;
    hone_round_opts ro = HONE_ROUND_OPTS_INIT;
    ro.model_path = o.model_path;
    ro.state_dir = o.state_dir;
    ro.repo = o.repo;
    ro.kernels_dir = o.kernels_dir;
    ro.threshold = o.threshold;
    ro.commit = o.commit;
    ro.push_remote = o.push;
    ro.progress = prog ? hone_progress_guard_cb : NULL;
    ro.progress_user = prog;
    static hone_round_history hist; /* large; one tuning run per process */
    memset(&hist, 0, sizeof hist);
    char kernels_dir[sizeof tmpdir + 16];
    snprintf(kernels_dir, sizeof kernels_dir, "%s/kernels", tmpdir);

    if (search) { /* screen each slot's space, then the best points through the full guard */
        int screen_left = o.screen_budget > 0 ? o.screen_budget : SCREEN_BUDGET_DEFAULT;
        for (int i = 0; i < n_plan && out->candidates < o.budget; i++) {
            hone_tune_slot_result *sr = hone_round_tally_of(out->slots, &out->n_slots, HONE_TUNE_MAX_SLOTS,
                                                            hone_slots_name(plan[i]));
            char *best = NULL; /* the slot's best accepted source (on_guarded keeps it) */
            tune_round tr = {&o, out, sr, kernels_dir, log, &best, prog, o.report_dir ? &report : NULL};
            int cap = screen_left / (n_plan - i);
            if (cap < 4 && screen_left >= 4) cap = 4;
            int before = out->screened;
            hist.n = 0;
            rc = search_slot(&tr, &ro, &prop, plan[i], rows, n_rows, m, cap, &hist);
            free(best);
            if (rc) goto done;
            screen_left -= out->screened - before;
        }
        goto measured;
    }
    /* an LLM: the budget shared by up to three slots, each kept while its rounds learn from the
     * last (an acceptance included) */
    int per_slot_cap = o.budget / (n_plan < 3 ? n_plan : 3) > 0 ? o.budget / (n_plan < 3 ? n_plan : 3) : 1;
    int slot_i = 0, tried_here = 0, next_point = 0;
    int n_space = hone_proposer_space(&prop, plan[0]);
    while (out->candidates < o.budget && slot_i < n_plan) {
        hone_slot_id slot = plan[slot_i];
        hone_tune_slot_result *sr = hone_round_tally_of(out->slots, &out->n_slots, HONE_TUNE_MAX_SLOTS,
                                                        hone_slots_name(slot));
        /* move on once this slot's share is spent or its space is exhausted */
        if (tried_here >= per_slot_cap || next_point >= n_space) {
            slot_i++;
            tried_here = 0;
            next_point = 0;
            hist.n = 0;
            free(best_src);
            best_src = NULL;
            if (slot_i < n_plan) n_space = hone_proposer_space(&prop, plan[slot_i]);
            continue;
        }
        out->candidates++;
        tried_here++;
        sr->tried++;
        char shapes[512], profile[256];
        prompt_lines(rows, n_rows, slot, info[slot_i], shapes, sizeof shapes, profile, sizeof profile);
        char best_summary[128] = "";
        if (best_src)
            snprintf(best_summary, sizeof best_summary, "candidate %.12s: %s tier, %.2fx", sr->best_hash,
                     sr->best_tier, sr->best_speedup);
        hone_proposer_request rq = {.slot = slot, .index = next_point++, .shapes = shapes, .profile = profile,
                                    .kernels_dir = o.kernels_dir, .best_source = best_src,
                                    .best_summary = best_src ? best_summary : NULL};
        tune_round tr = {&o, out, sr, kernels_dir, log, &best_src, prog, o.report_dir ? &report : NULL};
        hone_round_hooks hooks = {.user = &tr, .on_proposed = on_proposed, .on_guarded = on_guarded};
        hone_progress_candidate(prog, out->candidates, hone_slots_name(slot));
        hone_progress_begin(prog, "propose");
        static hone_round_result rr; /* large; one tuning run per process */
        if ((rc = hone_round_run(&rr, &ro, &prop, &rq, out->candidates, &hist, &hooks))) goto done;
        report_round(&tr, &rr);
        hone_round_result_clear(&rr);
    }

measured:; /* the search path joins here */
    int any = 0;
    for (int i = 0; i < out->n_slots; i++) any |= out->slots[i].accepted > 0;
    hone_progress_begin(prog, any ? "decode after" : "decode");
    if (any) rc = measure_after(out, be, m, kernels_dir, &kl);
    else rc = measure(out, be, m, hone_backend_slots(be), NULL);
    hone_progress_end(prog, any ? "decode after" : "decode", rc ? "failed" : NULL);
    hone_progress_clear(prog);
    if (rc) goto done;
    if (log) report_table(out, log);
    if (o.report_dir && (rc = tune_report_write(&report, o.report_dir, out, m, log))) goto done;
    rc = 0;
done:
    hone_progress_free(prog);
    tune_report_clear(&report);
    if (self_pid > 0) {
        kill(self_pid, SIGTERM);
        waitpid(self_pid, NULL, 0);
    }
    hone_proposer_free(&prop);
    hone_backend_free(be);   /* before the loader: the table points into its objects */
    hone_kernel_loader_free(kl);
    hone_kernel_loader_free(served);
    free(best_src);
    hone_model_free(m);
    if (have_tmp && hone_file_remove_tree(tmpdir) && log) fprintf(log, "tune: %s\n", hone_error_last());
    return rc;
}
