/* The tuning thread of `hone serve --tune`: live profile -> proposal -> guard -> review commit
 * -> (auto-apply) step-boundary swap -> watch -> keep or roll back. Rules and bounds: tuner.h. */
#include "tuner.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/proposer.h"
#include "agent/round.h"
#include "candidates/kernel_loader.h"
#include "engine/error.h"
#include "engine/file.h"

#define MAX_SLOTS 16
#define MAX_EVENTS 64
#define MAX_REASONS 24
#define MAX_LOADERS 64
#define N_SAMPLES 1024
#define PER_SLOT_CAP 3
#define PROBE_PROMPT 12
#define PROBE_STEPS 3

/* What the tuner adds to a slot's tally (hone_tuner.slots[i] and .live[i] are one slot). */
typedef struct {
    int next_point;             /* search: next point of the space */
    int live;                   /* 1: a tuned kernel of this slot is serving */
    double live_speedup;
    char live_hash[65];
} live_stat;

typedef struct {
    double t;                   /* seconds since the tuner started */
    char kind[16];              /* proposed, accepted, rejected, committed, applied, kept, rolled_back, ... */
    char slot[64];
    char hash[17];
    char detail[256];
} event;

typedef struct {
    int rows;
    float sec;
    int epoch;
} sample;

struct hone_tuner {
    hone_tuner_opts o;
    hone_scheduler *sched;
    hone_backend *be;          /* the serving backend: its slot table is swapped */
    const hone_model *m;
    hone_proposer_kind kind;
    const char *llm_url;
    hone_proposer prop;         /* tuning thread only */
    char self_url[256], api_key[256], self_model[256];
    double t0;
    pthread_t thread;
    int started;
    char tmpdir[64];
    int have_tmp;
    hone_kernel_loader *loaders[MAX_LOADERS];
    int n_loaders;
    hone_backend *probe;        /* a private one-thread CPU backend; tuning thread only */
    int test_regress;
    /* ---- under mu ---- */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    int cancel;                 /* not under mu: atomic; the guard's cancel flag (hone_tuner_stop) */
    int want_profile;           /* the hook fetches the live profile into profile_reply */
    cJSON *profile_reply;
    int swap_pending;           /* the hook applies swap_fn to swap_id and bumps epoch */
    hone_slot_id swap_id;
    void *swap_fn;
    int epoch;                  /* swaps applied so far */
    uint64_t steps_seen, step_errors;
    sample samples[N_SAMPLES];  /* decode-only steps, a ring */
    uint64_t n_samples;
    sample before[N_SAMPLES];   /* the ring as it was when the last swap was applied */
    int n_before;
    char state[32];
    hone_round_tally slots[MAX_SLOTS];
    live_stat live[MAX_SLOTS];
    int n_slots;
    int proposed, accepted, rejected, no_code, llm_errors, committed, applied, rolled_back, kept;
    struct { char reason[32]; int n; } reasons[MAX_REASONS];
    int n_reasons;
    event events[MAX_EVENTS];
    uint64_t n_events;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- status (under mu) ---- */

static void log_event(hone_tuner *t, const char *kind, const char *slot, const char *hash,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void log_event(hone_tuner *t, const char *kind, const char *slot, const char *hash,
                      const char *fmt, ...)
{
    event *e = &t->events[t->n_events++ % MAX_EVENTS];
    memset(e, 0, sizeof *e);
    e->t = now_s() - t->t0;
    snprintf(e->kind, sizeof e->kind, "%s", kind);
    snprintf(e->slot, sizeof e->slot, "%s", slot ? slot : "");
    snprintf(e->hash, sizeof e->hash, "%.12s", hash ? hash : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->detail, sizeof e->detail, fmt, ap);
    va_end(ap);
    fprintf(stderr, "hone serve: tune: %-11s %-14s %-12s %s\n", kind, e->slot, e->hash, e->detail);
}

/* The index of slot name's tally (and live state), added when absent. */
static int slot_of(hone_tuner *t, const char *name)
{
    return (int)(hone_round_tally_of(t->slots, &t->n_slots, MAX_SLOTS, name) - t->slots);
}

static void count_reason(hone_tuner *t, const char *reason)
{
    for (int i = 0; i < t->n_reasons; i++)
        if (!strcmp(t->reasons[i].reason, reason)) { t->reasons[i].n++; return; }
    if (t->n_reasons == MAX_REASONS) return;
    snprintf(t->reasons[t->n_reasons].reason, sizeof t->reasons[0].reason, "%s", reason);
    t->reasons[t->n_reasons++].n = 1;
}

static void set_state(hone_tuner *t, const char *st)
{
    pthread_mutex_lock(&t->mu);
    snprintf(t->state, sizeof t->state, "%s", st);
    pthread_mutex_unlock(&t->mu);
}

/* ---- the step hook (engine thread, between steps) ---- */

static void on_step(void *user, const hone_scheduler_step *st)
{
    hone_tuner *t = user;
    /* never wait for the tuning thread (it runs at idle priority and may sit preempted while
     * holding mu): a busy lock only skips this boundary's bookkeeping */
    if (pthread_mutex_trylock(&t->mu) != 0) return;
    if (t->want_profile) {
        /* read here, between steps, so that the idle-priority thread never holds the profile's
         * lock, which the engine takes around every step */
        cJSON *j = NULL;
        if (hone_scheduler_profile_json(t->sched, &j)) j = NULL;
        cJSON_Delete(t->profile_reply);
        t->profile_reply = j;
        t->want_profile = 0;
        pthread_cond_broadcast(&t->cv);
    }
    if (st->rows > 0) {
        t->steps_seen++;
        if (st->rc) t->step_errors++;
        else if (st->decode_only) {
            sample *s = &t->samples[t->n_samples++ % N_SAMPLES];
            s->rows = (int)st->rows;
            s->sec = (float)st->seconds;
            s->epoch = t->epoch;
        }
    }
    if (t->swap_pending) {
        uint64_t lo = t->n_samples > N_SAMPLES ? t->n_samples - N_SAMPLES : 0;
        t->n_before = 0;
        for (uint64_t i = lo; i < t->n_samples; i++) t->before[t->n_before++] = t->samples[i % N_SAMPLES];
        hone_slots_set(hone_backend_slots(t->be), t->swap_id, t->swap_fn);
        t->swap_pending = 0;
        t->epoch++;
        pthread_cond_broadcast(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
}

/* Sleeps up to s seconds; returns 1 when asked to stop. */
static int nap(hone_tuner *t, double s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double end = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + s;
    ts.tv_sec = (time_t)end;
    ts.tv_nsec = (long)((end - (double)ts.tv_sec) * 1e9);
    pthread_mutex_lock(&t->mu);
    while (!t->stop && pthread_cond_timedwait(&t->cv, &t->mu, &ts) != ETIMEDOUT) {}
    int stop = t->stop;
    pthread_mutex_unlock(&t->mu);
    return stop;
}

/* Asks the engine to install fn in slot id at its next step boundary and waits (bounded) until
 * it has. Returns 0, or HONE_ERANGE if the engine did not reach a boundary in 30 s. */
static int swap_slot(hone_tuner *t, hone_slot_id id, void *fn, int *epoch_out)
{
    pthread_mutex_lock(&t->mu);
    t->swap_id = id;
    t->swap_fn = fn;
    t->swap_pending = 1;
    pthread_mutex_unlock(&t->mu);
    hone_scheduler_wake(t->sched);
    double end = now_s() + 30;
    int rc = 0;
    pthread_mutex_lock(&t->mu);
    while (t->swap_pending) {
        if (now_s() > end) {
            t->swap_pending = 0;
            rc = hone_error_set(HONE_ERANGE, "the engine reached no step boundary in 30 s");
            break;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
    }
    if (epoch_out) *epoch_out = t->epoch;
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* ---- the watcher's measurements ---- */

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median decode step time before (epoch - 1) and after (epoch) the swap for the batch size with
 * the most samples on both sides. Returns 0 and the ratio after/before, or -1 when too few. */
static int step_time_ratio(hone_tuner *t, int epoch, double *ratio, int *rows_out, int *n_out)
{
    static float before[N_SAMPLES], after[N_SAMPLES];
    int best_rows = -1, best_n = 0;
    pthread_mutex_lock(&t->mu);
    uint64_t lo = t->n_samples > N_SAMPLES ? t->n_samples - N_SAMPLES : 0;
    for (int rows = 1; rows <= 64; rows++) {
        int nb = 0, na = 0;
        for (int i = 0; i < t->n_before; i++)
            nb += t->before[i].rows == rows && t->before[i].epoch == epoch - 1;
        for (uint64_t i = lo; i < t->n_samples; i++) {
            const sample *s = &t->samples[i % N_SAMPLES];
            na += s->rows == rows && s->epoch == epoch;
        }
        int n = nb < na ? nb : na;
        if (n > best_n) { best_n = n; best_rows = rows; }
    }
    int nb = 0, na = 0;
    for (int i = 0; best_rows > 0 && i < t->n_before; i++)
        if (t->before[i].rows == best_rows && t->before[i].epoch == epoch - 1) before[nb++] = t->before[i].sec;
    for (uint64_t i = lo; best_rows > 0 && i < t->n_samples; i++) {
        const sample *s = &t->samples[i % N_SAMPLES];
        if (s->rows == best_rows && s->epoch == epoch) after[na++] = s->sec;
    }
    pthread_mutex_unlock(&t->mu);
    *rows_out = best_rows;
    *n_out = best_n;
    if (best_n < 8) return -1;
    qsort(before, (size_t)nb, sizeof *before, cmp_f);
    qsort(after, (size_t)na, sizeof *after, cmp_f);
    *ratio = (double)after[na / 2] / (double)before[nb / 2];
    return 0;
}

/* The probe: PROBE_PROMPT fixed tokens then PROBE_STEPS greedy steps on the private context with
 * table tbl; out: [(1 + PROBE_STEPS) * n_vocab] logits. */
static int probe(hone_tuner *t, const hone_slot_table *tbl, float *out)
{
    const hone_hparams *hp = hone_model_hparams(t->m);
    int64_t V = hp->n_vocab;
    *hone_backend_slots(t->probe) = *tbl;
    int32_t prompt[PROBE_PROMPT];
    for (int i = 0; i < PROBE_PROMPT; i++) prompt[i] = (int32_t)((i * 7919 + 13) % V);
    hone_kv_seq seq = {0};
    int rc = hone_backend_forward(t->probe, &seq, prompt, PROBE_PROMPT, out, 0);
    for (int s = 0; s < PROBE_STEPS && !rc; s++) {
        const float *l = out + (int64_t)s * V;
        int32_t next = 0;
        for (int64_t k = 1; k < V; k++)
            if (l[k] > l[next]) next = (int32_t)k;
        rc = hone_backend_forward(t->probe, &seq, &next, 1, out + (int64_t)(s + 1) * V, 0);
    }
    hone_backend_release(t->probe, &seq);
    return rc;
}

/* 0 when got matches ref for the tier; else fills why. */
static int probe_compare(const hone_tuner *t, const float *ref, const float *got, int exact,
                         char *why, size_t cap)
{
    int64_t V = hone_model_hparams(t->m)->n_vocab;
    for (int s = 0; s <= PROBE_STEPS; s++) {
        const float *a = ref + (int64_t)s * V, *b = got + (int64_t)s * V;
        if (exact) {
            if (memcmp(a, b, (size_t)V * sizeof *a)) {
                int64_t k = 0;
                while (k < V && !memcmp(a + k, b + k, sizeof *a)) k++;
                snprintf(why, cap, "probe step %d: logit %lld is %.9g, was %.9g before the swap "
                         "(exact tier: must be bitwise equal)", s, (long long)k, b[k], a[k]);
                return -1;
            }
            continue;
        }
        int64_t am = 0, bm = 0;
        double scale = 1, d = 0;
        for (int64_t k = 0; k < V; k++) {
            if (a[k] > a[am]) am = k;
            if (b[k] > b[bm]) bm = k;
            if (fabs(a[k]) > scale) scale = fabs(a[k]);
            double dk = fabs((double)a[k] - (double)b[k]);
            if (!(dk <= d)) d = dk; /* NaN counts as the largest */
        }
        if (am != bm || !(d <= 1e-3 * scale)) {
            snprintf(why, cap, "probe step %d: argmax %lld vs %lld, max |dlogit| %.3g (bound %.3g)",
                     s, (long long)bm, (long long)am, d, 1e-3 * scale);
            return -1;
        }
    }
    return 0;
}

/* ---- the loop ---- */

/* The tunable slot with the largest expected gain in the live profile that still has budget;
 * fills the LLM prompt's shape and profile lines. -1 when there is none (yet). */
static int pick_slot(hone_tuner *t, char *shapes, size_t shapes_cap, char *profile, size_t prof_cap)
{
    cJSON *j = NULL;
    pthread_mutex_lock(&t->mu);
    t->want_profile = 1;
    pthread_mutex_unlock(&t->mu);
    hone_scheduler_wake(t->sched);
    double end = now_s() + 10;
    pthread_mutex_lock(&t->mu);
    while (t->want_profile && !t->stop && now_s() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
    }
    t->want_profile = 0;
    j = t->profile_reply;
    t->profile_reply = NULL;
    pthread_mutex_unlock(&t->mu);
    if (!j) return -1;
    int chosen = -1;
    const cJSON *sum = cJSON_GetObjectItem(j, "summary");
    const cJSON *steps = cJSON_GetObjectItem(sum, "steps");
    if (!cJSON_IsNumber(steps) || steps->valuedouble < t->o.min_steps) goto done;
    const cJSON *rk = cJSON_GetObjectItem(j, "ranking"), *row;
    cJSON_ArrayForEach(row, rk) {
        const cJSON *name = cJSON_GetObjectItem(row, "slot");
        if (!cJSON_IsString(name)) continue;
        int id = hone_slots_from_name(name->valuestring);
        if (id < 0 || !hone_proposer_space(&t->prop, (hone_slot_id)id)) continue;
        if (t->o.slot && strcmp(t->o.slot, name->valuestring)) continue;
        pthread_mutex_lock(&t->mu);
        int spent = t->slots[slot_of(t, name->valuestring)].tried >= PER_SLOT_CAP;
        pthread_mutex_unlock(&t->mu);
        if (spent) continue;
        chosen = id;
        const cJSON *share = cJSON_GetObjectItem(row, "share"), *gbps = cJSON_GetObjectItem(row, "gbps"),
                    *roof = cJSON_GetObjectItem(row, "roofline");
        snprintf(profile, prof_cap, "%.1f%% of served step time, %.1f GB/s = %.1f%% of the measured "
                 "roofline (live traffic)", 100 * cJSON_GetNumberValue(share), cJSON_GetNumberValue(gbps),
                 cJSON_IsNumber(roof) ? 100 * roof->valuedouble : 0.0);
        break;
    }
    if (chosen >= 0) {
        size_t o = 0;
        shapes[0] = 0;
        cJSON_ArrayForEach(row, rk) {
            const cJSON *name = cJSON_GetObjectItem(row, "slot"), *shape = cJSON_GetObjectItem(row, "shape"),
                        *calls = cJSON_GetObjectItem(row, "calls");
            if (!cJSON_IsString(name) || hone_slots_from_name(name->valuestring) != chosen ||
                !cJSON_IsString(shape) || o + 120 > shapes_cap)
                continue;
            o += (size_t)snprintf(shapes + o, shapes_cap - o, "- %s: %.0f calls in the served profile\n",
                                  shape->valuestring, cJSON_GetNumberValue(calls));
        }
    }
done:
    cJSON_Delete(j);
    return chosen;
}

/* Auto-apply of an accepted candidate: final self-check on the model's shapes, probe before,
 * swap at a step boundary, watch, and keep or roll back. */
static void apply_and_watch(hone_tuner *t, hone_slot_id id, const char *src, const hone_guard_result *gr,
                            int k)
{
    const char *name = hone_slots_name(id);
    char dir[128];
    snprintf(dir, sizeof dir, "%s/apply-%d", t->tmpdir, k);
    if (hone_round_kernel_write(dir, name, src)) {
        pthread_mutex_lock(&t->mu);
        log_event(t, "apply_refused", name, gr->hash, "%s", hone_error_last());
        pthread_mutex_unlock(&t->mu);
        return;
    }
    hone_slot_table before = *hone_backend_slots(t->be); /* only the hook writes it, on our request */
    hone_slot_table after = before;
    hone_kernel_loader_opts ko = HONE_KERNEL_LOADER_OPTS_INIT;
    ko.kernels_dir = dir;
    ko.model = t->m;
    ko.quiet = 1;
    char cache[256];
    if (t->o.state_dir) {
        snprintf(cache, sizeof cache, "%s/kernel-cache", t->o.state_dir);
        ko.cache_dir = cache;
    }
    hone_kernel_loader *kl = NULL;
    set_state(t, "applying");
    int rc = hone_kernel_loader_new(&kl, &after, &ko);
    if (rc || hone_kernel_loader_state(kl, id) != HONE_KERNEL_INSTALLED) {
        pthread_mutex_lock(&t->mu);
        log_event(t, "apply_refused", name, gr->hash, "live-shape self-check: %s",
                  rc ? hone_error_last() : hone_kernel_loader_detail(kl, id));
        pthread_mutex_unlock(&t->mu);
        hone_kernel_loader_free(kl);
        return;
    }
    t->loaders[t->n_loaders++] = kl; /* unloaded only at hone_tuner_free */
    void *prev = hone_slots_get(&before, id), *fn = hone_slots_get(&after, id);
    int exact = !strcmp(gr->tier, "exact");
    int64_t V = hone_model_hparams(t->m)->n_vocab;
    size_t nl = (size_t)(1 + PROBE_STEPS) * (size_t)V;
    float *ref = malloc(nl * sizeof *ref), *got = malloc(nl * sizeof *got);
    char why[320] = "";
    int epoch = 0;
    if (!ref || !got || probe(t, &before, ref)) {
        pthread_mutex_lock(&t->mu);
        log_event(t, "apply_refused", name, gr->hash, "the probe could not run: %s", hone_error_last());
        pthread_mutex_unlock(&t->mu);
        goto done;
    }
    if (swap_slot(t, id, fn, &epoch)) {
        pthread_mutex_lock(&t->mu);
        log_event(t, "apply_refused", name, gr->hash, "%s", hone_error_last());
        pthread_mutex_unlock(&t->mu);
        goto done;
    }
    pthread_mutex_lock(&t->mu);
    uint64_t errors0 = t->step_errors;
    t->applied++;
    live_stat *ls = &t->live[slot_of(t, name)];
    ls->live = 1;
    ls->live_speedup = gr->speedup;
    snprintf(ls->live_hash, sizeof ls->live_hash, "%s", gr->hash);
    log_event(t, "applied", name, gr->hash, "hot-swapped at a step boundary (%.2fx %s); watching %.0f s",
              gr->speedup, gr->tier, t->o.watch_s);
    snprintf(t->state, sizeof t->state, "watching");
    pthread_mutex_unlock(&t->mu);

    /* watch */
    double t_apply = now_s(), next_spot = t_apply;
    int bad = 0;
    while (!bad) {
        double now = now_s();
        if (now - t_apply >= t->o.watch_s) break;
        pthread_mutex_lock(&t->mu);
        uint64_t errs = t->step_errors - errors0;
        int stop = t->stop;
        pthread_mutex_unlock(&t->mu);
        if (stop) break;
        if (errs) {
            snprintf(why, sizeof why, "%llu engine step(s) failed after the swap", (unsigned long long)errs);
            bad = 1;
            break;
        }
        if (now >= next_spot) {
            if (probe(t, &after, got)) {
                snprintf(why, sizeof why, "the spot-check probe failed: %s", hone_error_last());
                bad = 1;
                break;
            }
            if (t->test_regress) got[V / 2] += 1.0f; /* HONE_TUNE_TEST_REGRESS: test-only */
            if (probe_compare(t, ref, got, exact, why, sizeof why)) {
                char tmp[sizeof why];
                memcpy(tmp, why, sizeof tmp);
                tmp[sizeof tmp - 1] = 0;
                snprintf(why, sizeof why, "parity spot-check failed: %.*s", (int)(sizeof why - 32), tmp);
                bad = 1;
                break;
            }
            next_spot = now + t->o.spot_s;
        }
        double left = t->o.watch_s - (now_s() - t_apply), wait = next_spot - now_s();
        if (wait > left) wait = left;
        if (wait > 1.0) wait = 1.0;
        if (wait > 0 && nap(t, wait)) break;
    }
    double ratio = 0;
    int rows = 0, n = 0;
    if (!bad && step_time_ratio(t, epoch, &ratio, &rows, &n) == 0 && ratio > 1 + t->o.margin) {
        snprintf(why, sizeof why, "decode step time %.1f%% worse than before the swap (batch %d, "
                 "%d steps each side, margin %.0f%%)", 100 * (ratio - 1), rows, n, 100 * t->o.margin);
        bad = 1;
    }
    if (bad) {
        int rb = swap_slot(t, id, prev, NULL);
        pthread_mutex_lock(&t->mu);
        t->rolled_back++;
        t->live[slot_of(t, name)].live = 0;
        log_event(t, "rolled_back", name, gr->hash, "%s%s", why,
                  rb ? "; ROLLBACK SWAP FAILED: the engine reached no step boundary" : "");
        pthread_mutex_unlock(&t->mu);
    } else {
        pthread_mutex_lock(&t->mu);
        t->kept++;
        if (n >= 8)
            log_event(t, "kept", name, gr->hash, "watched %.0f s: no errors, spot-checks equal, "
                      "decode step time x%.3f (batch %d, %d steps each side)", now_s() - t_apply, ratio, rows, n);
        else
            log_event(t, "kept", name, gr->hash, "watched %.0f s: no errors, spot-checks equal "
                      "(too few decode steps to compare times)", now_s() - t_apply);
        pthread_mutex_unlock(&t->mu);
    }
done:
    free(ref);
    free(got);
}

static void set_low_priority(void)
{
    /* nice is per thread on Linux; both it and SCHED_IDLE pass to processes forked from here */
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19)) { /* best effort */ }
#ifdef SCHED_IDLE
    struct sched_param sp = {0};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp)) { /* best effort */ }
#endif
}

/* ---- the round's hooks: events and counters as the guard and the commit go ---- */

static void on_proposed(void *user, const hone_round_result *r)
{
    hone_tuner *t = user;
    pthread_mutex_lock(&t->mu);
    log_event(t, "proposed", r->slot, NULL, "%s", r->proposal.origin);
    snprintf(t->state, sizeof t->state, "guarding");
    pthread_mutex_unlock(&t->mu);
}

static int on_guarded(void *user, const hone_round_result *r)
{
    hone_tuner *t = user;
    const hone_guard_result *gr = &r->guard;
    pthread_mutex_lock(&t->mu);
    hone_round_tally_count(&t->slots[slot_of(t, r->slot)], r);
    if (r->guard_rc) {
        t->rejected++;
        count_reason(t, "guard_error");
        log_event(t, "rejected", r->slot, NULL, "the guard could not run: %s", r->guard_error);
    } else if (!gr->accepted) {
        t->rejected++;
        count_reason(t, hone_guard_code_name(gr->code));
        log_event(t, "rejected", r->slot, gr->hash, "%s: %.200s", hone_guard_code_name(gr->code), gr->reason);
    } else {
        t->accepted++;
        log_event(t, "accepted", r->slot, gr->hash, "%.3fx (95%% CI %.3f-%.3f), %s tier, guard %.1f s",
                  gr->speedup, gr->ci_low, gr->ci_high, gr->tier, gr->seconds);
        snprintf(t->state, sizeof t->state, "committing");
    }
    pthread_mutex_unlock(&t->mu);
    return 1; /* every accepted candidate is committed */
}

/* After a round: what it came to, counted and logged; an accepted kernel applied (auto-apply). */
static void after_round(hone_tuner *t, hone_slot_id slot, int rc, const hone_round_result *r, int k)
{
    const hone_proposal *pr = &r->proposal;
    const char *name = r->slot;
    if (rc || pr->status != HONE_PROPOSAL_CODE) {
        pthread_mutex_lock(&t->mu);
        if (!rc && pr->status == HONE_PROPOSAL_LLM_FAILED) {
            t->llm_errors++;
            log_event(t, "llm_error", name, NULL, "%s", pr->why);
        } else {
            t->no_code++;
            t->rejected++;
            t->slots[slot_of(t, name)].rejected++;
            count_reason(t, rc ? "internal" : pr->reason);
            log_event(t, "rejected", name, NULL, "%s: %s", rc ? "internal" : pr->reason,
                      rc ? hone_error_last() : pr->why);
        }
        pthread_mutex_unlock(&t->mu);
        return;
    }
    if (r->duplicate) {
        pthread_mutex_lock(&t->mu);
        t->rejected++;
        t->slots[slot_of(t, name)].rejected++;
        count_reason(t, "duplicate");
        log_event(t, "rejected", name, NULL, "duplicate: %s", r->duplicate_of);
        pthread_mutex_unlock(&t->mu);
        return;
    }
    if (!r->guard_rc && r->guard.code == HONE_GUARD_CANCELLED) {
        pthread_mutex_lock(&t->mu);
        log_event(t, "cancelled", name, r->guard.hash, "the guard stopped before a verdict (%.1f s): the "
                  "server is stopping", r->guard.seconds);
        pthread_mutex_unlock(&t->mu);
        return;
    }
    if (r->guard_rc || !r->guard.accepted) return;
    pthread_mutex_lock(&t->mu);
    int i = slot_of(t, name);
    if (r->commit_rc == 0) {
        t->committed++;
        snprintf(t->slots[i].branch, sizeof t->slots[i].branch, "%s", r->review.branch);
        log_event(t, "committed", name, r->guard.hash, "%s%s", r->review.branch,
                  r->review.existed ? " (already there)" : "");
        if (r->push_rc == 0) log_event(t, "pushed", name, r->guard.hash, "%s to %s", r->review.branch, r->push.url);
        else if (r->push_rc < 0) log_event(t, "push_failed", name, r->guard.hash, "%s", r->push_error);
    } else {
        log_event(t, "commit_failed", name, r->guard.hash, "%s", r->commit_error);
    }
    int better = !t->live[i].live || r->guard.speedup > t->live[i].live_speedup;
    pthread_mutex_unlock(&t->mu);
    if (t->o.auto_apply && better && t->n_loaders < MAX_LOADERS)
        apply_and_watch(t, slot, pr->source, &r->guard, k);
}

static void *tuner_main(void *arg)
{
    hone_tuner *t = arg;
    set_low_priority();
    int self = t->kind == HONE_PROPOSER_SELF;
    /* self: the model this server serves, its key, answers to the end of its context */
    hone_proposer_llm_opts lo = {.url = self ? t->self_url : t->llm_url,
                                 .model = self && !t->o.llm_model && t->self_model[0] ? t->self_model : t->o.llm_model,
                                 .api_key = self && t->api_key[0] ? t->api_key : NULL,
                                 .timeout_ms = t->o.llm_timeout_ms, .max_tokens = self ? -1 : 0};
    int rc = t->kind == HONE_PROPOSER_SEARCH ? hone_proposer_search_new(&t->prop) : hone_proposer_llm_new(&t->prop, &lo);
    if (rc) {
        pthread_mutex_lock(&t->mu);
        log_event(t, "error", NULL, NULL, "LLM client: %s", hone_error_last());
        snprintf(t->state, sizeof t->state, "failed");
        pthread_mutex_unlock(&t->mu);
        return NULL;
    }
    hone_round_opts ro = HONE_ROUND_OPTS_INIT;
    ro.model_path = t->o.model_path;
    ro.state_dir = t->o.state_dir;
    ro.repo = t->o.repo;
    ro.kernels_dir = t->o.kernels_dir;
    ro.push_remote = t->o.push;
    ro.threshold = t->o.threshold;
    ro.e2e_slack = t->o.e2e_slack;
    ro.history_cap = 8;
    ro.cancel = &t->cancel;
    hone_round_hooks hooks = {.user = t, .on_proposed = on_proposed, .on_guarded = on_guarded};
    static hone_round_history hist; /* large; this thread only */
    static hone_round_result rr;
    memset(&hist, 0, sizeof hist);
    int hist_slot = -1, k = 0, idle_polls = 0;
    for (;;) {
        pthread_mutex_lock(&t->mu);
        int done = t->proposed >= t->o.budget || t->stop;
        pthread_mutex_unlock(&t->mu);
        if (done) break;
        set_state(t, "sleeping");
        if (nap(t, t->o.interval_s)) break;
        char shapes[1024] = "", profile[256] = "";
        set_state(t, "profiling");
        int id = pick_slot(t, shapes, sizeof shapes, profile, sizeof profile);
        if (id < 0) {
            /* no traffic yet, or every tunable slot's share is spent: poll (bounded) */
            if (++idle_polls > 100000) break;
            if (nap(t, 0.5)) break;
            continue;
        }
        hone_slot_id slot = (hone_slot_id)id;
        if (id != hist_slot) { hist.n = 0; hist_slot = id; }
        set_state(t, "proposing");
        pthread_mutex_lock(&t->mu);
        int i = slot_of(t, hone_slots_name(slot));
        t->slots[i].tried++;
        int point = t->live[i].next_point++;
        k = ++t->proposed;
        pthread_mutex_unlock(&t->mu);
        hone_proposer_request rq = {.slot = slot, .index = point, .shapes = shapes, .profile = profile,
                                    .kernels_dir = t->o.kernels_dir};
        rc = hone_round_run(&rr, &ro, &t->prop, &rq, k, &hist, &hooks);
        after_round(t, slot, rc, &rr, k);
        hone_round_result_clear(&rr);
    }
    hone_proposer_free(&t->prop);
    pthread_mutex_lock(&t->mu);
    snprintf(t->state, sizeof t->state, t->stop ? "stopped" : "done");
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

/* ---- public ---- */

int hone_tuner_new(hone_tuner **out, hone_scheduler *sched, hone_backend *be,
                   const hone_tuner_opts *opts)
{
    hone_tuner_opts dflt = HONE_TUNER_OPTS_INIT;
    *out = NULL;
    if (!hone_backend_slots(be))
        return hone_error_set(HONE_EUNSUPPORTED, "--tune swaps kernels in the backend's slot table, "
                              "which %s does not offer: serve with --device cpu", hone_backend_describe(be));
    hone_tuner *t = calloc(1, sizeof *t);
    if (!t) return hone_error_set(HONE_ENOMEM, "out of memory");
    t->o = opts ? *opts : dflt;
    if (t->o.budget <= 0) t->o.budget = 6;
    if (t->o.interval_s < 0) t->o.interval_s = 0;
    if (t->o.watch_s <= 0) t->o.watch_s = 120;
    if (t->o.spot_s <= 0) t->o.spot_s = 10;
    if (t->o.margin <= 0) t->o.margin = 0.10;
    if (t->o.threshold <= 0) t->o.threshold = 1.05;
    if (t->o.min_steps < 1) t->o.min_steps = 1;
    t->sched = sched;
    t->be = be;
    t->m = hone_backend_model(be);
    t->t0 = now_s();
    t->kind = hone_proposer_kind_of(t->o.llm, &t->llm_url);
    const char *tr = getenv("HONE_TUNE_TEST_REGRESS");
    t->test_regress = tr && !strcmp(tr, "1");
    snprintf(t->state, sizeof t->state, "starting");
    pthread_mutex_init(&t->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc;
    if (!t->o.model_path) {
        rc = hone_error_set(HONE_EINVAL, "tuning needs the model's path");
        goto fail;
    }
    snprintf(t->tmpdir, sizeof t->tmpdir, "/tmp/hone-serve-tune-XXXXXX");
    if (!mkdtemp(t->tmpdir)) {
        rc = hone_error_set(HONE_EIO, "cannot create a temporary directory: %s", strerror(errno));
        goto fail;
    }
    t->have_tmp = 1;
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    co.n_threads = 1;
    co.n_ctx = 32;
    co.kv_blocks = 2 * ((co.n_ctx + co.kv_block_size - 1) / co.kv_block_size) + 2;
    if ((rc = hone_backend_new(&t->probe, t->m, HONE_DEVICE_CPU, &co))) goto fail;
    hone_scheduler_set_step_hook(sched, on_step, t);
    *out = t;
    return 0;
fail:
    hone_tuner_free(t);
    return rc;
}

void hone_tuner_set_self_model(hone_tuner *t, const char *model_id)
{
    snprintf(t->self_model, sizeof t->self_model, "%s", model_id ? model_id : "");
}

int hone_tuner_start(hone_tuner *t, const char *self_url, const char *api_key)
{
    snprintf(t->self_url, sizeof t->self_url, "%s", self_url ? self_url : "");
    snprintf(t->api_key, sizeof t->api_key, "%s", api_key ? api_key : "");
    if (pthread_create(&t->thread, NULL, tuner_main, t) != 0)
        return hone_error_set(HONE_EINTERNAL, "cannot start the tuning thread");
    t->started = 1;
    fprintf(stderr, "hone serve: tune: proposer %s, budget %d, interval %.0f s, %s (watch %.0f s); "
            "tuning thread at nice 19 / SCHED_IDLE\n",
            t->kind == HONE_PROPOSER_SEARCH ? "search" : t->kind == HONE_PROPOSER_SELF ? "self (this server)"
                                                                                    : t->llm_url, t->o.budget,
            t->o.interval_s, t->o.auto_apply ? "auto-apply" : "commit only", t->o.watch_s);
    if (t->test_regress)
        fprintf(stderr, "hone serve: tune: HONE_TUNE_TEST_REGRESS=1 (test only): spot-checks after "
                "an apply will fail\n");
    return 0;
}

void hone_tuner_stop(hone_tuner *t)
{
    if (!t) return;
    __atomic_store_n(&t->cancel, 1, __ATOMIC_RELEASE); /* a guard run in progress ends now */
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

void hone_tuner_free(hone_tuner *t)
{
    if (!t) return;
    hone_scheduler_set_step_hook(t->sched, NULL, NULL);
    if (t->started) {
        hone_tuner_stop(t);
        pthread_join(t->thread, NULL);
    }
    for (int i = 0; i < t->n_loaders; i++) hone_kernel_loader_free(t->loaders[i]);
    hone_backend_free(t->probe);
    cJSON_Delete(t->profile_reply);
    if (t->have_tmp && hone_file_remove_tree(t->tmpdir))
        fprintf(stderr, "hone serve: tune: %s\n", hone_error_last());
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

char *hone_tuner_json(void *tuner)
{
    hone_tuner *t = tuner;
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    pthread_mutex_lock(&t->mu);
    cJSON_AddBoolToObject(j, "enabled", 1);
    cJSON_AddStringToObject(j, "state", t->state);
    cJSON_AddStringToObject(j, "proposer", t->kind == HONE_PROPOSER_SEARCH ? "search"
                                           : t->kind == HONE_PROPOSER_SELF ? "self" : "llm");
    cJSON_AddBoolToObject(j, "auto_apply", t->o.auto_apply);
    cJSON_AddNumberToObject(j, "budget", t->o.budget);
    cJSON_AddNumberToObject(j, "interval_s", t->o.interval_s);
    cJSON_AddNumberToObject(j, "watch_s", t->o.watch_s);
    cJSON_AddNumberToObject(j, "steps_seen", (double)t->steps_seen);
    cJSON *c = cJSON_AddObjectToObject(j, "candidates");
    cJSON_AddNumberToObject(c, "proposed", t->proposed);
    cJSON_AddNumberToObject(c, "accepted", t->accepted);
    cJSON_AddNumberToObject(c, "rejected", t->rejected);
    cJSON_AddNumberToObject(c, "no_code", t->no_code);
    cJSON_AddNumberToObject(c, "llm_errors", t->llm_errors);
    cJSON_AddNumberToObject(c, "committed", t->committed);
    cJSON *rr = cJSON_AddObjectToObject(c, "rejected_by_reason");
    for (int i = 0; i < t->n_reasons; i++) cJSON_AddNumberToObject(rr, t->reasons[i].reason, t->reasons[i].n);
    cJSON_AddNumberToObject(j, "applied", t->applied);
    cJSON_AddNumberToObject(j, "kept", t->kept);
    cJSON_AddNumberToObject(j, "rolled_back", t->rolled_back);
    cJSON *sl = cJSON_AddArrayToObject(j, "slots");
    cJSON *live = cJSON_AddArrayToObject(j, "live");
    for (int i = 0; i < t->n_slots; i++) {
        const hone_round_tally *s = &t->slots[i];
        const live_stat *ls = &t->live[i];
        if (!s->tried) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "slot", s->slot);
        cJSON_AddNumberToObject(o, "tried", s->tried);
        cJSON_AddNumberToObject(o, "accepted", s->accepted);
        cJSON_AddNumberToObject(o, "rejected", s->rejected);
        if (s->accepted) {
            cJSON_AddNumberToObject(o, "best_speedup", s->best_speedup);
            cJSON_AddStringToObject(o, "best_tier", s->best_tier);
            cJSON_AddStringToObject(o, "best_candidate", s->best_hash);
        }
        if (s->branch[0]) cJSON_AddStringToObject(o, "review_branch", s->branch);
        cJSON_AddItemToArray(sl, o);
        if (ls->live) {
            cJSON *l = cJSON_CreateObject();
            cJSON_AddStringToObject(l, "slot", s->slot);
            cJSON_AddStringToObject(l, "candidate", ls->live_hash);
            cJSON_AddNumberToObject(l, "speedup", ls->live_speedup);
            cJSON_AddItemToArray(live, l);
        }
    }
    cJSON *ev = cJSON_AddArrayToObject(j, "events");
    uint64_t lo = t->n_events > MAX_EVENTS ? t->n_events - MAX_EVENTS : 0;
    for (uint64_t i = lo; i < t->n_events; i++) {
        const event *e = &t->events[i % MAX_EVENTS];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "t", e->t);
        cJSON_AddStringToObject(o, "event", e->kind);
        cJSON_AddStringToObject(o, "slot", e->slot);
        cJSON_AddStringToObject(o, "candidate", e->hash);
        cJSON_AddStringToObject(o, "detail", e->detail);
        cJSON_AddItemToArray(ev, o);
    }
    pthread_mutex_unlock(&t->mu);
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return text;
}

char *hone_tuner_metrics(void *tuner)
{
    hone_tuner *t = tuner;
    size_t cap = 8192, len = 0;
    char *b = malloc(cap);
    if (!b) return NULL;
#define PUT(...)                                                                      \
    do {                                                                              \
        int n_ = snprintf(b + len, cap - len, __VA_ARGS__);                           \
        if (n_ > 0 && len + (size_t)n_ < cap) len += (size_t)n_;                      \
    } while (0)
    pthread_mutex_lock(&t->mu);
    int tried = 0;
    for (int i = 0; i < t->n_slots; i++) tried += t->slots[i].tried > 0;
    PUT("# HELP hone_tune_slots_tried Slots the tuning loop has proposed candidates for.\n"
        "# TYPE hone_tune_slots_tried gauge\nhone_tune_slots_tried %d\n", tried);
    PUT("# HELP hone_tune_candidates_total Candidates by state.\n# TYPE hone_tune_candidates_total counter\n");
    PUT("hone_tune_candidates_total{state=\"proposed\"} %d\n", t->proposed);
    PUT("hone_tune_candidates_total{state=\"accepted\"} %d\n", t->accepted);
    PUT("hone_tune_candidates_total{state=\"rejected\"} %d\n", t->rejected);
    PUT("# HELP hone_tune_rejected_total Rejected candidates by reason.\n# TYPE hone_tune_rejected_total counter\n");
    for (int i = 0; i < t->n_reasons; i++)
        PUT("hone_tune_rejected_total{reason=\"%s\"} %d\n", t->reasons[i].reason, t->reasons[i].n);
    PUT("# HELP hone_tune_llm_errors_total Failed LLM calls.\n# TYPE hone_tune_llm_errors_total counter\n"
        "hone_tune_llm_errors_total %d\n", t->llm_errors);
    PUT("# HELP hone_tune_committed_total Accepted candidates committed for review.\n"
        "# TYPE hone_tune_committed_total counter\nhone_tune_committed_total %d\n", t->committed);
    PUT("# HELP hone_tune_best_speedup Best accepted kernel-level speedup per slot.\n"
        "# TYPE hone_tune_best_speedup gauge\n");
    for (int i = 0; i < t->n_slots; i++)
        if (t->slots[i].accepted) PUT("hone_tune_best_speedup{slot=\"%s\"} %.4f\n", t->slots[i].slot, t->slots[i].best_speedup);
    PUT("# HELP hone_tune_applied_total Kernels hot-swapped into the engine.\n"
        "# TYPE hone_tune_applied_total counter\nhone_tune_applied_total %d\n", t->applied);
    PUT("# HELP hone_tune_rolled_back_total Applied kernels rolled back by the watcher.\n"
        "# TYPE hone_tune_rolled_back_total counter\nhone_tune_rolled_back_total %d\n", t->rolled_back);
    int live = 0;
    for (int i = 0; i < t->n_slots; i++) live += t->live[i].live;
    PUT("# HELP hone_tune_kernels_live Tuned kernels serving now.\n# TYPE hone_tune_kernels_live gauge\n"
        "hone_tune_kernels_live %d\n", live);
    pthread_mutex_unlock(&t->mu);
#undef PUT
    return b;
}
