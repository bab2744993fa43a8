/* The guard (see guard.h): the gates, the isolated workers that run candidate code, the
 * verdict, the evidence and the `hone guard` command. */
#include "guard.h"

#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <errno.h>
#include <immintrin.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "candidates/compile.h"
#include "candidates/sha256.h"
#include "candidates/store.h"
#include "candidates/worker.h"
#include "engine/backend.h"
#include "engine/error.h"
#include "engine/file.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "engine/slots.h"
#include "guard/cases.h"
#include "guard/oracle.h"
#include "guard/scan.h"
#include "profiler/membw.h"

/* ---- stated bounds ------------------------------------------------------------------------ */
#define FAITHFUL_MAX_SLACK 1.5    /* candidate max error <= 1.5 x the incumbent's (per case) */
#define FAITHFUL_MEAN_SLACK 1.25  /* candidate mean error <= 1.25 x the incumbent's */
#define FAITHFUL_ABS_FLOOR 0x1p-30 /* plus this fraction of the output's max |ref| */
#define SPEED_MAX_PLAUSIBLE 10.0
#define ROOFLINE_MARGIN 1.5      /* suspect: faster than bytes / (1.5 x measured peak read bandwidth) */
#define MAX_REPS 201
#define BOOTSTRAP 2000
/* model parity (faithful): relative to the incumbent's logit scale s = max |logit| */
#define MODEL_MAX_DLOGIT_REL 1e-3 /* max |Δlogit| <= 1e-3 s */
#define MODEL_KL_MAX 1e-4         /* per-position KL(incumbent || candidate) */
#define MODEL_KL_MEAN 1e-6
#define MODEL_TIE_REL 1e-3        /* a near-tie: incumbent top-2 gap < 1e-3 s */
/* end to end: reject when the median decode-step speed ratio (candidate / incumbent) is below
 * 0.97 and the upper bound of its 95% CI is below 1.0 (a regression beyond noise) */
#define E2E_MIN_RATIO 0.97
#define CPU_PROMPTS 6
#define CPU_PREFILL 8
#define CPU_STEPS 24

const char *hone_guard_code_name(hone_guard_code c)
{
    static const char *const n[] = {"ok", "usage", "scan", "compile", "elf", "crash", "timeout",
                                    "canary", "input-mutated", "wrote-nothing", "nonfinite",
                                    "constant", "parity", "nondeterministic", "share", "recheck",
                                    "model-parity", "slower", "suspect", "e2e-regression",
                                    "not-evaluated", "internal"};
    return (unsigned)c < sizeof n / sizeof n[0] ? n[c] : "unknown";
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t prng_state;
static uint64_t prng(void)
{
    uint64_t z = (prng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double *t = malloc(sizeof(double) * (size_t)n);
    memcpy(t, v, sizeof(double) * (size_t)n);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    double m = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    free(t);
    return m;
}

/* Percentile bootstrap of the median of v[n]: the 2.5% and 97.5% points. */
static void bootstrap_ci(const double *v, int n, uint64_t seed, double *lo, double *hi)
{
    double *meds = malloc(sizeof(double) * BOOTSTRAP), *s = malloc(sizeof(double) * (size_t)n);
    prng_state = seed ^ 0xb007b007ull;
    for (int b = 0; b < BOOTSTRAP; b++) {
        for (int i = 0; i < n; i++) s[i] = v[prng() % (uint64_t)n];
        meds[b] = median(s, n);
    }
    qsort(meds, BOOTSTRAP, sizeof *meds, cmp_double);
    *lo = meds[(int)(0.025 * BOOTSTRAP)];
    *hi = meds[(int)(0.975 * BOOTSTRAP) - 1];
    free(meds);
    free(s);
}

/* ---- the run's state ---------------------------------------------------------------------- */

typedef struct {
    const hone_guard_opts *o;
    hone_guard_result *res;
    FILE *rep;
    cJSON *gates;
    hone_slot_id slot;
    char so_path[4400];
    char symbol[96];
    uint64_t seed;
    hone_model *model;
    hone_case_set cs;
    double **ref;          /* [case][out_len] oracle */
    float **inc;           /* [case][out_len] incumbent outputs */
    hone_oracle_err *inc_err;
    void *inc_fn;
    int verdict_done;
} run_state;

static cJSON *gate(run_state *r, const char *name, const char *status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static cJSON *gate(run_state *r, const char *name, const char *status, const char *fmt, ...)
{
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    cJSON *g = cJSON_CreateObject();
    cJSON_AddStringToObject(g, "gate", name);
    cJSON_AddStringToObject(g, "status", status);
    cJSON_AddStringToObject(g, "detail", detail);
    cJSON_AddItemToArray(r->gates, g);
    if (r->rep) fprintf(r->rep, "  %-14s %-8s %s\n", name, status, detail);
    return g;
}

static void reject(run_state *r, hone_guard_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void reject(run_state *r, hone_guard_code code, const char *fmt, ...)
{
    if (r->verdict_done) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->res->reason, sizeof r->res->reason, fmt, ap);
    va_end(ap);
    r->res->code = code;
    r->res->accepted = 0;
    r->verdict_done = 1;
}

/* ---- kernel-parity worker ------------------------------------------------------------------ */

typedef struct {
    const run_state *r;
    int phase;               /* 0: parity runs; 1: timing + re-check */
    volatile struct speed_shm *speed;
} kworker_arg;

struct speed_shm {
    int reps, inner, done;
    double inc_ns[MAX_REPS], cand_ns[MAX_REPS];
};

static void *load_candidate(const char *so, const char *sym)
{
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!h) return NULL;
    return dlsym(h, sym);
}

static void run_parity_calls(const run_state *r, void *fn)
{
    const hone_case_set *s = &r->cs;
    for (int i = 0; i < s->n; i++) {
        const hone_case *c = &s->c[i];
        float *scratch = hone_cases_scratch(s, c);
        for (int k = 0; k < 3; k++) {
            float *o = hone_cases_out(s, c, k);
            hone_cases_poison(s, c, o);
            hone_cases_call(fn, c, s->base, o, scratch, 0, 1);
        }
        float *o = hone_cases_out(s, c, 3);
        hone_cases_poison(s, c, o);
        for (int ith = 0; ith < 2; ith++) hone_cases_call(fn, c, s->base, o, scratch, ith, 2);
        for (int ith = 0; ith < 3; ith++) {
            o = hone_cases_out(s, c, 4 + ith);
            hone_cases_poison(s, c, o);
            hone_cases_call(fn, c, s->base, o, scratch, ith, 3);
        }
    }
}

static size_t case_lo(const hone_case *c) { return c->in_off[0]; }
static size_t case_hi(const hone_case *c)
{
    return c->scratch_off + (size_t)c->scratch_len * 4 + 2 * HONE_CASES_CANARY + 64;
}

static void flush_range(const uint8_t *p, size_t n)
{
    for (size_t k = 0; k < n; k += 64) _mm_clflush(p + k);
}

static int kworker(void *argp)
{
    kworker_arg *a = argp;
    const run_state *r = a->r;
    void *fn = load_candidate(r->so_path, r->symbol);
    if (!fn) return 3;
    if (a->phase == 0) {
        if (hone_worker_enter_strict() != 0) return 4;
        run_parity_calls(r, fn);
        return 0;
    }
    /* timing: copies of the timing case, each flushed from every cache level before a rep */
    const hone_case_set *s = &r->cs;
    const hone_case *tc = NULL;
    for (int i = 0; i < s->n; i++)
        if (s->c[i].timing) tc = &s->c[i];
    size_t lo = case_lo(tc), hi = case_hi(tc), span = hi - lo;
    /* calibrate: copies so that one rep lasts >= 20 us */
    uint8_t *one = malloc(span);
    if (!one) return 5;
    memcpy(one, s->base + lo, span);
    const uint8_t *b1 = one - lo;
    hone_cases_call(r->inc_fn, tc, b1, (float *)(b1 + tc->out_off[0]), (float *)(b1 + tc->scratch_off), 0, 1);
    uint64_t t0 = mono_ns();
    hone_cases_call(r->inc_fn, tc, b1, (float *)(b1 + tc->out_off[0]), (float *)(b1 + tc->scratch_off), 0, 1);
    uint64_t t1 = mono_ns();
    free(one);
    int inner = (int)(20000.0 / (double)(t1 - t0 + 1)) + 1;
    if (inner > 16) inner = 16;
    uint8_t *copies[16];
    for (int k = 0; k < inner; k++) {
        copies[k] = malloc(span);
        if (!copies[k]) return 5;
        memcpy(copies[k], s->base + lo, span);
    }
    int reps = r->o->reps > 0 ? r->o->reps : 41;
    if (reps > MAX_REPS) reps = MAX_REPS;
    if (hone_worker_enter_timing() != 0) return 4;
    void *fns[2] = {r->inc_fn, fn};
    for (int rep = -3; rep < reps; rep++) { /* 3 warm-up pairs */
        for (int w = 0; w < 2; w++) {
            int which = (rep & 1) ? 1 - w : w; /* alternate the order: AB, BA, ... */
            for (int k = 0; k < inner; k++) flush_range(copies[k], span);
            _mm_mfence();
            uint64_t a0 = mono_ns();
            for (int k = 0; k < inner; k++) {
                const uint8_t *bk = copies[k] - lo;
                hone_cases_call(fns[which], tc, bk, (float *)(bk + tc->out_off[0]),
                                (float *)(bk + tc->scratch_off), 0, 1);
            }
            uint64_t a1 = mono_ns();
            if (rep >= 0) {
                double ns = (double)(a1 - a0) / inner;
                if (which == 0) a->speed->inc_ns[rep] = ns;
                else a->speed->cand_ns[rep] = ns;
            }
        }
    }
    a->speed->reps = reps;
    a->speed->inner = inner;
    /* correctness again, after the timing loop */
    for (int i = 0; i < s->n; i++) {
        const hone_case *c = &s->c[i];
        float *o = hone_cases_out(s, c, 7);
        hone_cases_poison(s, c, o);
        hone_cases_call(fn, c, s->base, o, hone_cases_scratch(s, c), 0, 1);
    }
    a->speed->done = 1;
    return 0;
}

static void worker_failure(run_state *r, const char *gname, const hone_worker_result *w)
{
    hone_guard_code code = w->timed_out ? HONE_GUARD_TIMEOUT
                         : w->signal ? HONE_GUARD_CRASH : HONE_GUARD_CRASH;
    const char *why = w->reason;
    if (!w->timed_out && !w->signal) {
        if (w->exit_status == 3) why = "the shared object could not be loaded in the worker";
        else if (w->exit_status == 4) why = "seccomp unavailable in the worker";
        else if (w->exit_status == 5) why = "the worker ran out of memory preparing its inputs";
        code = w->exit_status >= 3 && w->exit_status <= 5 ? HONE_GUARD_INTERNAL : HONE_GUARD_CRASH;
    }
    gate(r, gname, "fail", "%s", why);
    reject(r, code, "%s: %s", gname, why);
}

/* ---- kernel parity: the judgement --------------------------------------------------------- */

static int is_poison(float f) { return fbits(f) == HONE_CASES_POISON; }

/* pass 0: unwritten, non-finite and constant outputs (over every case first, so that the most
 * specific reason wins); pass 1: parity tier, determinism, shares. */
static int judge_case(run_state *r, int i, double *worst_cand, double *worst_inc, int *exact, int pass)
{
    const hone_case_set *s = &r->cs;
    const hone_case *c = &s->c[i];
    const float *o0 = hone_cases_out(s, c, 0);
    const double *ref = r->ref[i];
    int64_t n = c->out_len;
    if (!c->inplace) {
        int64_t left = 0;
        for (int64_t k = 0; k < n; k++) left += is_poison(o0[k]);
        if (left == n) {
            gate(r, "kernel-parity", "fail", "wrote nothing (%s)", c->desc);
            reject(r, HONE_GUARD_WROTE_NOTHING, "wrote nothing: the poisoned output was left untouched (%s)", c->desc);
            return -1;
        }
        if (left) {
            gate(r, "kernel-parity", "fail", "left %lld of %lld elements unwritten (%s)", (long long)left, (long long)n, c->desc);
            reject(r, HONE_GUARD_NONFINITE, "NaN/Inf mismatch: left %lld of %lld output elements unwritten (%s)",
                   (long long)left, (long long)n, c->desc);
            return -1;
        }
    }
    hone_oracle_err e;
    hone_oracle_compare_rows(o0, ref, c->cmp_rows, c->cmp_row_len, &e);
    if (e.n_nonfinite_mismatch) {
        int64_t k0 = -1;
        for (int64_t k = 0; k < n && k0 < 0; k++) {
            float rf = (float)ref[k];
            if (isnan(o0[k]) != isnan(rf) || isinf(o0[k]) != isinf(rf)) k0 = k;
        }
        gate(r, "kernel-parity", "fail", "NaN/Inf at %lld elements where the oracle differs (%s)",
             (long long)e.n_nonfinite_mismatch, c->desc);
        reject(r, HONE_GUARD_NONFINITE, "NaN/Inf mismatch at %lld elements (%s; first [%lld]: got %g, oracle %g)",
               (long long)e.n_nonfinite_mismatch, c->desc, (long long)k0, k0 >= 0 ? (double)o0[k0] : 0.0,
               k0 >= 0 ? ref[k0] : 0.0);
        return -1;
    }
    if (n >= 4) {
        int cconst = 1, oconst = 1;
        for (int64_t k = 1; k < n; k++) {
            if (fbits(o0[k]) != fbits(o0[0])) cconst = 0;
            if (ref[k] != ref[0]) oconst = 0;
        }
        if (cconst && !oconst) {
            gate(r, "kernel-parity", "fail", "constant output %g where the oracle varies (%s)", (double)o0[0], c->desc);
            reject(r, HONE_GUARD_CONSTANT, "constant output (%g everywhere) where the oracle is not (%s)", (double)o0[0], c->desc);
            return -1;
        }
    }
    if (pass == 0) return 0;
    int same = memcmp(o0, r->inc[i], (size_t)n * 4) == 0;
    if (!same) *exact = 0;
    const hone_oracle_err *ie = &r->inc_err[i];
    double floor_abs = FAITHFUL_ABS_FLOOR * ie->ref_max_abs;
    if (!same && (e.max_abs > FAITHFUL_MAX_SLACK * ie->max_abs + floor_abs ||
                  e.mean_abs > FAITHFUL_MEAN_SLACK * ie->mean_abs + floor_abs)) {
        gate(r, "kernel-parity", "fail", "error vs oracle: max %.3g mean %.3g; incumbent max %.3g mean %.3g (%s)",
             e.max_abs, e.mean_abs, ie->max_abs, ie->mean_abs, c->desc);
        reject(r, HONE_GUARD_PARITY,
               "error beyond the faithful bound on %s: max |err| %.3g vs incumbent %.3g (allowed %.3g), mean %.3g vs %.3g",
               c->desc, e.max_abs, ie->max_abs, FAITHFUL_MAX_SLACK * ie->max_abs + floor_abs, e.mean_abs, ie->mean_abs);
        return -1;
    }
    if (e.max_abs > *worst_cand) *worst_cand = e.max_abs;
    if (ie->max_abs > *worst_inc) *worst_inc = ie->max_abs;
    for (int k = 1; k < 3; k++)
        if (memcmp(o0, hone_cases_out(s, c, k), (size_t)n * 4) != 0) {
            gate(r, "kernel-parity", "fail", "run %d differs from run 1 (%s)", k + 1, c->desc);
            reject(r, HONE_GUARD_NONDETERMINISTIC, "three runs are not bitwise identical: run %d differs (%s)", k + 1, c->desc);
            return -1;
        }
    if (memcmp(o0, hone_cases_out(s, c, 3), (size_t)n * 4) != 0) {
        gate(r, "kernel-parity", "fail", "nth=2 differs from nth=1 (%s)", c->desc);
        reject(r, HONE_GUARD_SHARE, "share contract: nth=2 gives other bits than nth=1 (%s)", c->desc);
        return -1;
    }
    /* nth = 3, each share alone: disjoint, whole units, complete, same bits */
    int8_t *owner = malloc((size_t)n), *uowner = malloc((size_t)c->share_units);
    memset(owner, -1, (size_t)n);
    memset(uowner, -1, (size_t)c->share_units);
    const float *init = c->inplace ? (const float *)(s->base + c->in_off[0]) : NULL;
    int64_t twice = 0, wrong = 0, split = 0, missed = 0;
    for (int ith = 0; ith < 3; ith++) {
        const float *o = hone_cases_out(s, c, 4 + ith);
        for (int64_t k = 0; k < n; k++) {
            uint32_t b0 = init ? fbits(init[k]) : HONE_CASES_POISON;
            if (fbits(o[k]) == b0) continue;
            if (owner[k] >= 0) twice++;
            owner[k] = (int8_t)ith;
            if (fbits(o[k]) != fbits(o0[k])) wrong++;
            int64_t u = (k / c->share_unit_len) % c->share_units;
            if (uowner[u] < 0) uowner[u] = (int8_t)ith;
            else if (uowner[u] != ith) split++;
        }
    }
    for (int64_t k = 0; k < n; k++)
        if (owner[k] < 0 && fbits(o0[k]) != (init ? fbits(init[k]) : HONE_CASES_POISON)) missed++;
    free(owner);
    free(uowner);
    if (twice || wrong || split || missed) {
        gate(r, "kernel-parity", "fail", "shares of nth=3: %lld written twice, %lld other bits, %lld units split, %lld never written (%s)",
             (long long)twice, (long long)wrong, (long long)split, (long long)missed, c->desc);
        reject(r, HONE_GUARD_SHARE, "share contract: each share alone must write only its own part "
               "(nth=3: %lld elements written by two shares, %lld with other bits, %lld never written; %s)",
               (long long)twice, (long long)wrong, (long long)missed, c->desc);
        return -1;
    }
    return 0;
}

static int check_hygiene(run_state *r, int out_k_first, int out_k_last, const char *gname)
{
    (void)out_k_first;
    (void)out_k_last;
    for (int i = 0; i < r->cs.n; i++) {
        const hone_case *c = &r->cs.c[i];
        char what[256];
        if (!hone_cases_canaries_ok(&r->cs, c, what, sizeof what)) {
            gate(r, gname, "fail", "canary broken: %s", what);
            reject(r, HONE_GUARD_CANARY, "out-of-bounds write: %s", what);
            return -1;
        }
        if (hone_cases_hash_inputs(&r->cs, c) != c->in_hash) {
            gate(r, gname, "fail", "an input changed (%s)", c->desc);
            reject(r, HONE_GUARD_INPUT_MUTATED, "mutates its input: the inputs' hash changed (%s)", c->desc);
            return -1;
        }
    }
    return 0;
}

static int kernel_parity_gate(run_state *r)
{
    double t0 = mono_s();
    kworker_arg a = {r, 0, NULL};
    hone_worker_opts wo = HONE_WORKER_OPTS_INIT;
    wo.timeout_s = r->o->kernel_timeout_s > 0 ? r->o->kernel_timeout_s : 10.0;
    wo.cpu_s = (int)wo.timeout_s + 2;
    hone_worker_result w;
    if (hone_worker_run(&w, &wo, kworker, &a) != 0) {
        reject(r, HONE_GUARD_INTERNAL, "cannot start a worker: %s", hone_error_last());
        return -1;
    }
    if (!w.ok) {
        worker_failure(r, "kernel-parity", &w);
        return -1;
    }
    if (check_hygiene(r, 0, 6, "kernel-parity")) return -1;
    double wc = 0, wi = 0;
    int exact = 1;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < r->cs.n; i++)
            if (judge_case(r, i, &wc, &wi, &exact, pass)) return -1;
    snprintf(r->res->tier, sizeof r->res->tier, "%s", exact ? "exact" : "faithful");
    char shapes[512] = "";
    for (int i = 0; i < r->cs.n && strlen(shapes) < 400; i++) {
        const char *d = strchr(r->cs.c[i].desc, ' ');
        snprintf(shapes + strlen(shapes), sizeof shapes - strlen(shapes), "%s%s", i ? "; " : "", d ? d + 1 : "");
    }
    snprintf(r->res->ev_shapes, sizeof r->res->ev_shapes, "%s", shapes);
    r->res->ev.parity_tier = r->res->tier;
    r->res->ev.candidate_max_abs_err = wc;
    r->res->ev.incumbent_max_abs_err = wi;
    r->res->ev.slack = FAITHFUL_MAX_SLACK - 1.0;
    r->res->ev.shapes = r->res->ev_shapes;
    cJSON *g = gate(r, "kernel-parity", "pass",
                    "%s tier over %d cases (seed %llu): max |err| vs f64 oracle %.3g (incumbent %.3g); "
                    "3 runs identical, nth=1/2/3 identical, shares disjoint, canaries and inputs intact (%.2f s)",
                    r->res->tier, r->cs.n, (unsigned long long)r->seed, wc, wi, mono_s() - t0);
    cJSON_AddStringToObject(g, "tier", r->res->tier);
    cJSON_AddNumberToObject(g, "cases", r->cs.n);
    cJSON_AddNumberToObject(g, "candidate_max_abs_err", wc);
    cJSON_AddNumberToObject(g, "incumbent_max_abs_err", wi);
    cJSON_AddNumberToObject(g, "faithful_max_slack", FAITHFUL_MAX_SLACK);
    cJSON_AddNumberToObject(g, "faithful_mean_slack", FAITHFUL_MEAN_SLACK);
    cJSON *arr = cJSON_AddArrayToObject(g, "shapes");
    for (int i = 0; i < r->cs.n; i++) cJSON_AddItemToArray(arr, cJSON_CreateString(r->cs.c[i].desc));
    return 0;
}

/* ---- speed -------------------------------------------------------------------------------- */

static double peak_bw_gbps(void)
{
    hone_membw_opts mo = HONE_MEMBW_OPTS_INIT;
    mo.buffer_bytes = (size_t)256 << 20;
    mo.repetitions = 3;
    mo.copy_triad = 0;
    double g = 0;
    if (hone_membw_measure(&g, &mo) != 0) g = 0;
    return g;
}

static int speed_gate(run_state *r)
{
    double t0 = mono_s();
    struct speed_shm *sp = hone_worker_shared_new(sizeof *sp);
    if (!sp) {
        reject(r, HONE_GUARD_INTERNAL, "shared memory: %s", hone_error_last());
        return -1;
    }
    kworker_arg a = {r, 1, sp};
    hone_worker_opts wo = HONE_WORKER_OPTS_INIT;
    wo.timeout_s = 120;
    wo.cpu_s = 120;
    hone_worker_result w;
    int rc = -1;
    if (hone_worker_run(&w, &wo, kworker, &a) != 0) {
        reject(r, HONE_GUARD_INTERNAL, "cannot start a worker: %s", hone_error_last());
        goto done;
    }
    if (!w.ok || !sp->done) {
        worker_failure(r, "speed", &w);
        goto done;
    }
    if (check_hygiene(r, 7, 7, "speed")) goto done;
    for (int i = 0; i < r->cs.n; i++) {
        const hone_case *c = &r->cs.c[i];
        if (memcmp(hone_cases_out(&r->cs, c, 7), hone_cases_out(&r->cs, c, 0), (size_t)c->out_len * 4) != 0) {
            gate(r, "speed", "fail", "results after the timing loop differ from before (%s)", c->desc);
            reject(r, HONE_GUARD_RECHECK, "correctness re-check after the timing loop failed: other bits than before (%s)", c->desc);
            goto done;
        }
    }
    int n = sp->reps;
    double ratio[MAX_REPS];
    for (int i = 0; i < n; i++) ratio[i] = sp->inc_ns[i] / sp->cand_ns[i];
    double med = median(ratio, n), lo, hi;
    bootstrap_ci(ratio, n, r->seed, &lo, &hi);
    double inc_ns = median(sp->inc_ns, n), cand_ns = median(sp->cand_ns, n);
    const hone_case *tc = NULL;
    for (int i = 0; i < r->cs.n; i++)
        if (r->cs.c[i].timing) tc = &r->cs.c[i];
    double bytes = hone_cases_bytes(tc), bw = peak_bw_gbps();
    /* bytes / (GB/s) = ns; the probe's figure is itself noisy on a shared machine, so a candidate
     * is suspect only when it beats the roofline at ROOFLINE_MARGIN x the measured bandwidth */
    double floor_ns = bw > 0 ? bytes / (ROOFLINE_MARGIN * bw) : 0;
    r->res->speedup = med;
    r->res->ci_low = lo;
    r->res->ci_high = hi;
    hone_review_evidence *ev = &r->res->ev;
    ev->speedup_median = med;
    ev->speedup_ci_low = lo;
    ev->speedup_ci_high = hi;
    ev->ci_level = 0.95;
    ev->incumbent_ns = inc_ns;
    ev->candidate_ns = cand_ns;
    ev->reps = n;
    ev->threshold = r->o->threshold;
    const char *status = "pass";
    if (med > SPEED_MAX_PLAUSIBLE || (floor_ns > 0 && cand_ns < floor_ns)) {
        status = "fail";
        reject(r, HONE_GUARD_SUSPECT, "suspect speedup %.2fx on %s: %s", med, tc->desc,
               med > SPEED_MAX_PLAUSIBLE ? "above 10x" : "faster than the memory roofline");
    } else if (!(med >= r->o->threshold && lo > 1.0)) {
        status = "fail";
        reject(r, HONE_GUARD_SLOWER, "not faster: median speedup %.3fx (95%% CI %.3f-%.3f) on %s; needs >= %.2fx with the CI above 1.0",
               med, lo, hi, tc->desc, r->o->threshold);
    }
    cJSON *g = gate(r, "speed", status,
                    "%s: incumbent %.0f ns, candidate %.0f ns per call; median speedup %.3fx, 95%% CI [%.3f, %.3f] "
                    "(%d interleaved reps x %d calls, caches flushed; threshold %.2fx); roofline floor %.0f ns "
                    "(%.2f MB at 1.5 x %.1f GB/s); results re-checked after timing (%.2f s)",
                    tc->desc, inc_ns, cand_ns, med, lo, hi, n, sp->inner, r->o->threshold, floor_ns,
                    bytes / 1e6, bw, mono_s() - t0);
    cJSON_AddNumberToObject(g, "speedup_median", med);
    cJSON_AddNumberToObject(g, "ci_low", lo);
    cJSON_AddNumberToObject(g, "ci_high", hi);
    cJSON_AddNumberToObject(g, "incumbent_ns", inc_ns);
    cJSON_AddNumberToObject(g, "candidate_ns", cand_ns);
    cJSON_AddNumberToObject(g, "reps", n);
    cJSON_AddNumberToObject(g, "threshold", r->o->threshold);
    cJSON_AddNumberToObject(g, "roofline_floor_ns", floor_ns);
    cJSON_AddNumberToObject(g, "peak_read_gbps", bw);
    cJSON_AddStringToObject(g, "shape", tc->desc);
    rc = strcmp(status, "pass") == 0 ? 0 : -1;
done:
    hone_worker_shared_free(sp, sizeof *sp);
    return rc;
}

/* ---- model parity and end to end ---------------------------------------------------------- */

typedef struct {
    run_state *r;
    int mode;              /* 0: teacher-forced logits; 1: e2e timing */
    int P, pre, S;
    const int32_t *tokens; /* [P][pre + S] */
    float *logits;         /* shared: [P][pre + S][n_vocab] */
    double *t_inc, *t_cand;/* shared: [S] (mode 1) */
} mworker_arg;

static int teacher_forced(hone_ctx *ctx, const int32_t *toks, int pre, int S, float *out, int64_t V)
{
    hone_kv_seq seq = {0};
    int rc = hone_ctx_forward(ctx, &seq, toks, pre, out, 1);
    for (int s = 0; s < S && !rc; s++)
        rc = hone_ctx_forward(ctx, &seq, toks + pre + s, 1, out + (int64_t)(pre + s) * V, 0);
    hone_kv_cache_release(hone_ctx_kv(ctx), &seq);
    return rc;
}

static int mworker(void *argp)
{
    mworker_arg *a = argp;
    run_state *r = a->r;
    void *fn = load_candidate(r->so_path, r->symbol);
    if (!fn) return 3;
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    co.n_ctx = a->pre + a->S + 8;
    co.kv_blocks = 2 * ((co.n_ctx + co.kv_block_size - 1) / co.kv_block_size) + 2;
    hone_ctx *ctx = NULL;
    if (hone_ctx_new(&ctx, r->model, &co) != 0) return 6;
    int64_t V = hone_model_hparams(r->model)->n_vocab;
    hone_slot_table *t = hone_ctx_slots(ctx);
    void *inc = hone_slots_get(t, r->slot);
    if (hone_worker_enter_filter(-1) != 0) return 4;
    if (a->mode == 0) {
        hone_slots_set(t, r->slot, fn);
        int L = a->pre + a->S;
        for (int p = 0; p < a->P; p++)
            if (teacher_forced(ctx, a->tokens + p * L, a->pre, a->S, a->logits + (int64_t)p * L * V, V)) return 7;
        return 0;
    }
    /* e2e: two sequences fed the same tokens, decode steps alternated between the tables */
    hone_kv_seq sa = {0}, sb = {0};
    hone_slots_set(t, r->slot, inc);
    if (hone_ctx_forward(ctx, &sa, a->tokens, a->pre, NULL, 0)) return 7;
    hone_slots_set(t, r->slot, fn);
    if (hone_ctx_forward(ctx, &sb, a->tokens, a->pre, NULL, 0)) return 7;
    float *lg = a->logits;
    for (int s = 0; s < a->S; s++) {
        for (int w = 0; w < 2; w++) {
            int cand = (s & 1) ? 1 - w : w;
            hone_slots_set(t, r->slot, cand ? fn : inc);
            uint64_t t0 = mono_ns();
            if (hone_ctx_forward(ctx, cand ? &sb : &sa, a->tokens + a->pre + s, 1, lg, 0)) return 7;
            uint64_t t1 = mono_ns();
            (cand ? a->t_cand : a->t_inc)[s] = (double)(t1 - t0);
        }
    }
    return 0;
}

static void count_hook(void *user, hone_slot_id id, uint64_t ns, int64_t a, int64_t b, int64_t c)
{
    (void)ns, (void)a, (void)b, (void)c;
    ((int *)user)[id]++;
}

static double kl_row(const float *p_logits, const float *q_logits, int64_t V)
{
    double mp = -INFINITY, mq = -INFINITY;
    for (int64_t i = 0; i < V; i++) {
        if (p_logits[i] > mp) mp = p_logits[i];
        if (q_logits[i] > mq) mq = q_logits[i];
    }
    double zp = 0, zq = 0;
    for (int64_t i = 0; i < V; i++) {
        zp += exp(p_logits[i] - mp);
        zq += exp(q_logits[i] - mq);
    }
    double lzp = log(zp) + mp, lzq = log(zq) + mq, kl = 0;
    for (int64_t i = 0; i < V; i++) {
        double lp = p_logits[i] - lzp, lq = q_logits[i] - lzq;
        kl += exp(lp) * (lp - lq);
    }
    return kl > 0 ? kl : 0;
}

static int model_gates(run_state *r, int do_e2e)
{
    double t0 = mono_s();
    const hone_hparams *hp = hone_model_hparams(r->model);
    int64_t V = hp->n_vocab;
    int P = r->o->model_prompts > 0 ? r->o->model_prompts : CPU_PROMPTS;
    int S = r->o->model_steps > 0 ? r->o->model_steps : CPU_STEPS;
    int pre = CPU_PREFILL, L = pre + S;
    int rc = -1;
    hone_ctx *ctx = NULL;
    int32_t *tokens = NULL;
    float *inc = NULL, *cand = NULL;
    double *times = NULL;
    size_t lbytes = (size_t)P * (size_t)L * (size_t)V * sizeof(float);
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    co.n_ctx = L + 8;
    co.kv_blocks = 2 * ((co.n_ctx + co.kv_block_size - 1) / co.kv_block_size) + 2;
    if (hone_ctx_new(&ctx, r->model, &co) != 0) {
        reject(r, HONE_GUARD_INTERNAL, "model context: %s", hone_error_last());
        goto done;
    }
    tokens = malloc(sizeof(int32_t) * (size_t)P * (size_t)L);
    inc = malloc(lbytes);
    cand = hone_worker_shared_new(lbytes);
    times = hone_worker_shared_new(sizeof(double) * 2 * (size_t)S);
    if (!tokens || !inc || !cand || !times) {
        reject(r, HONE_GUARD_INTERNAL, "out of memory for the model gate");
        goto done;
    }
    prng_state = r->seed ^ 0x70ce115ull;
    for (int i = 0; i < P * L; i++) tokens[i] = (int32_t)(prng() % (uint64_t)V);
    /* does the model call this slot at all? */
    int counts[HONE_SLOT_COUNT] = {0};
    hone_ctx_set_hook(ctx, count_hook, counts);
    for (int p = 0; p < P && !rc; p++) {}
    if (teacher_forced(ctx, tokens, pre, S, inc, V) != 0) {
        reject(r, HONE_GUARD_INTERNAL, "incumbent forward: %s", hone_error_last());
        goto done;
    }
    hone_ctx_set_hook(ctx, NULL, NULL);
    if (!counts[r->slot]) {
        gate(r, "model-parity", "pass", "not exercised: %s never calls %s (kernel gates only)",
             hone_model_name(r->model), hone_slots_name(r->slot));
        if (do_e2e) gate(r, "e2e", "pass", "not applicable: the model never calls %s", hone_slots_name(r->slot));
        rc = 0;
        goto done;
    }
    if (!do_e2e) {
        for (int p = 1; p < P; p++)
            if (teacher_forced(ctx, tokens + p * L, pre, S, inc + (int64_t)p * L * V, V) != 0) {
                reject(r, HONE_GUARD_INTERNAL, "incumbent forward: %s", hone_error_last());
                goto done;
            }
        mworker_arg a = {r, 0, P, pre, S, tokens, cand, NULL, NULL};
        hone_worker_opts wo = HONE_WORKER_OPTS_INIT;
        wo.timeout_s = 120;
        wo.cpu_s = 240;
        wo.as_extra = (size_t)4 << 30;
        hone_worker_result w;
        if (hone_worker_run(&w, &wo, mworker, &a) != 0 || !w.ok) {
            if (!w.ok && w.exit_status >= 3 && w.exit_status <= 7 && !w.signal)
                gate(r, "model-parity", "fail", "worker could not run the model (status %d)", w.exit_status);
            worker_failure(r, "model-parity", &w);
            goto done;
        }
        double scale = 0, max_d = 0, kl_max = 0, kl_sum = 0;
        int64_t agree = 0, counted = 0, ties = 0, npos = (int64_t)P * L, nonfinite = 0;
        for (int64_t i = 0; i < npos * V; i++) {
            if (fabsf(inc[i]) > scale) scale = fabsf(inc[i]);
            if (!isfinite(cand[i])) nonfinite++;
        }
        int bitwise = memcmp(inc, cand, lbytes) == 0;
        for (int64_t pos = 0; pos < npos; pos++) {
            const float *a1 = inc + pos * V, *b1 = cand + pos * V;
            int64_t ai = 0, bi = 0, a2 = -1;
            for (int64_t i = 0; i < V; i++) {
                double d = fabs((double)a1[i] - b1[i]);
                if (!(d <= max_d)) max_d = d;
                if (a1[i] > a1[ai]) ai = i;
                if (b1[i] > b1[bi]) bi = i;
            }
            for (int64_t i = 0; i < V; i++)
                if (i != ai && (a2 < 0 || a1[i] > a1[a2])) a2 = i;
            double gap = a2 >= 0 ? a1[ai] - a1[a2] : INFINITY;
            if (gap < MODEL_TIE_REL * scale) ties++;
            else {
                counted++;
                agree += ai == bi;
            }
            double kl = nonfinite ? INFINITY : kl_row(a1, b1, V);
            kl_sum += kl;
            if (kl > kl_max) kl_max = kl;
        }
        double kl_mean = kl_sum / (double)npos, agreement = counted ? (double)agree / (double)counted : 1.0;
        hone_review_evidence *ev = &r->res->ev;
        ev->model_max_abs_dlogit = max_d;
        ev->model_kl_mean = kl_mean;
        ev->model_kl_max = kl_max;
        ev->model_argmax_agreement = agreement;
        ev->model_prompts = P;
        ev->model_steps = L;
        int ok = nonfinite == 0 && max_d <= MODEL_MAX_DLOGIT_REL * scale && kl_max <= MODEL_KL_MAX &&
                 kl_mean <= MODEL_KL_MEAN && agree == counted;
        cJSON *g = gate(r, "model-parity", ok ? "pass" : "fail",
                        "%s: %d prompts x %d positions teacher-forced (%d prefill + %d decode), candidate in the whole "
                        "model: %s; max |dlogit| %.3g (bound %.3g = 1e-3 x scale %.3g), KL mean %.3g max %.3g "
                        "(bounds %.0e, %.0e), argmax agreement %lld/%lld (%lld near-ties excluded)%s (%.2f s)",
                        hone_model_name(r->model), P, L, pre, S, bitwise ? "bitwise identical logits" : "faithful",
                        max_d, MODEL_MAX_DLOGIT_REL * scale, scale, kl_mean, kl_max, MODEL_KL_MEAN,
                        MODEL_KL_MAX, (long long)agree, (long long)counted, (long long)ties,
                        nonfinite ? "; NaN/Inf in the logits" : "", mono_s() - t0);
        cJSON_AddNumberToObject(g, "max_abs_dlogit", max_d);
        cJSON_AddNumberToObject(g, "logit_scale", scale);
        cJSON_AddNumberToObject(g, "kl_mean", kl_mean);
        cJSON_AddNumberToObject(g, "kl_max", kl_max);
        cJSON_AddNumberToObject(g, "argmax_agreement", agreement);
        cJSON_AddNumberToObject(g, "near_ties", (double)ties);
        cJSON_AddNumberToObject(g, "prompts", P);
        cJSON_AddNumberToObject(g, "positions_per_prompt", L);
        cJSON_AddBoolToObject(g, "bitwise", bitwise);
        if (!ok) {
            reject(r, HONE_GUARD_MODEL_PARITY,
                   "model parity: max |dlogit| %.3g (bound %.3g), KL max %.3g, argmax %lld/%lld%s", max_d,
                   MODEL_MAX_DLOGIT_REL * scale, kl_max, (long long)agree, (long long)counted,
                   nonfinite ? ", NaN/Inf in the logits" : "");
            goto done;
        }
        rc = 0;
        goto done;
    }
    /* end to end */
    {
        int S2 = S < 16 ? 16 : S;
        double *tt = hone_worker_shared_new(sizeof(double) * 2 * (size_t)S2);
        int32_t *tk = malloc(sizeof(int32_t) * (size_t)(pre + S2));
        for (int i = 0; i < pre + S2; i++) tk[i] = tokens[i % (P * L)];
        float *lg = malloc(sizeof(float) * (size_t)V);
        mworker_arg a = {r, 1, 1, pre, S2, tk, lg, tt, tt + S2};
        hone_worker_opts wo = HONE_WORKER_OPTS_INIT;
        wo.timeout_s = 120;
        wo.cpu_s = 240;
        wo.as_extra = (size_t)4 << 30;
        hone_worker_result w;
        int ok = hone_worker_run(&w, &wo, mworker, &a) == 0 && w.ok;
        if (!ok) {
            worker_failure(r, "e2e", &w);
        } else {
            double ratio[512];
            int n = S2 < 512 ? S2 : 512;
            for (int i = 0; i < n; i++) ratio[i] = tt[i] / tt[S2 + i];
            double med = median(ratio, n), lo, hi;
            bootstrap_ci(ratio, n, r->seed + 1, &lo, &hi);
            double ti = median(tt, n), tc = median(tt + S2, n);
            int regress = med < E2E_MIN_RATIO && hi < 1.0;
            cJSON *g = gate(r, "e2e", regress ? "fail" : "pass",
                            "decode: incumbent %.1f tok/s, candidate %.1f tok/s; median step ratio %.3f, 95%% CI "
                            "[%.3f, %.3f] over %d alternated steps (rule: regression when < %.2f and CI < 1.0) (%.2f s)",
                            1e9 / ti, 1e9 / tc, med, lo, hi, n, E2E_MIN_RATIO, mono_s() - t0);
            cJSON_AddNumberToObject(g, "incumbent_tok_s", 1e9 / ti);
            cJSON_AddNumberToObject(g, "candidate_tok_s", 1e9 / tc);
            cJSON_AddNumberToObject(g, "ratio_median", med);
            cJSON_AddNumberToObject(g, "ci_low", lo);
            cJSON_AddNumberToObject(g, "ci_high", hi);
            if (regress)
                reject(r, HONE_GUARD_E2E_REGRESSION, "end to end: decode %.1f -> %.1f tok/s (ratio %.3f, CI high %.3f)",
                       1e9 / ti, 1e9 / tc, med, hi);
            else
                rc = 0;
        }
        hone_worker_shared_free(tt, sizeof(double) * 2 * (size_t)S2);
        free(tk);
        free(lg);
    }
done:
    hone_ctx_free(ctx);
    free(tokens);
    free(inc);
    hone_worker_shared_free(cand, lbytes);
    hone_worker_shared_free(times, sizeof(double) * 2 * (size_t)S);
    return rc;
}

/* ---- setup: oracle and incumbent, in this (trusted) process ------------------------------- */

static int prepare_cases(run_state *r)
{
    int rc = hone_cases_new(&r->cs, r->slot, r->model, r->seed);
    if (rc) return rc;
    r->ref = calloc((size_t)r->cs.n, sizeof *r->ref);
    r->inc = calloc((size_t)r->cs.n, sizeof *r->inc);
    r->inc_err = calloc((size_t)r->cs.n, sizeof *r->inc_err);
    if (!r->ref || !r->inc || !r->inc_err) return hone_error_set(HONE_ENOMEM, "out of memory");
    for (int i = 0; i < r->cs.n; i++) {
        const hone_case *c = &r->cs.c[i];
        r->ref[i] = malloc(sizeof(double) * (size_t)c->out_len);
        r->inc[i] = malloc(sizeof(float) * (size_t)c->out_len);
        float *scr = malloc(sizeof(float) * (size_t)(c->scratch_len + 1));
        if (!r->ref[i] || !r->inc[i] || !scr) return hone_error_set(HONE_ENOMEM, "out of memory");
        hone_cases_oracle(c, r->cs.base, r->ref[i]);
        hone_cases_poison(&r->cs, c, r->inc[i]);
        hone_cases_call(r->inc_fn, c, r->cs.base, r->inc[i], scr, 0, 1);
        free(scr);
        hone_oracle_compare_rows(r->inc[i], r->ref[i], c->cmp_rows, c->cmp_row_len, &r->inc_err[i]);
        if (hone_cases_hash_inputs(&r->cs, c) != c->in_hash)
            return hone_error_set(HONE_EINTERNAL, "the incumbent changed its inputs (%s)", c->desc);
    }
    return 0;
}

static void free_cases(run_state *r)
{
    for (int i = 0; i < r->cs.n; i++) {
        if (r->ref) free(r->ref[i]);
        if (r->inc) free(r->inc[i]);
    }
    free(r->ref);
    free(r->inc);
    free(r->inc_err);
    hone_cases_free(&r->cs);
}

static void describe_cpu(char *buf, size_t cap)
{
    char model[128] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                if (c) {
                    c += 2;
                    c[strcspn(c, "\n")] = 0;
                    snprintf(model, sizeof model, "%s", c);
                }
                break;
            }
        fclose(f);
    }
    snprintf(buf, cap, "cpu: %s (%ld threads)", model, sysconf(_SC_NPROCESSORS_ONLN));
}

static int cuda_gates(run_state *r, const char *src)
{
    char why[512];
    if (!r->o->skip_scan && hone_scan_cuda_source(src, why, sizeof why) != 0) {
        gate(r, "scan", "fail", "%s", why);
        reject(r, HONE_GUARD_SCAN, "static scan: %s", why);
        return -1;
    }
    gate(r, "scan", "pass", "CUDA source: no printf, clock/clock64/globaltimer, device malloc/new, asm");
    if (!hone_compile_nvrtc_available(why, sizeof why)) {
        gate(r, "compile", "skipped", "%s", why);
        reject(r, HONE_GUARD_NOT_EVALUATED, "not evaluated: %s", why);
        return -1;
    }
    const char *archs[] = {"compute_80", "sm_80", "sm_90"};
    for (int i = 0; i < 3; i++) {
        void *out = NULL;
        size_t n = 0;
        char *log = NULL;
        int rc = hone_compile_cuda(&out, &n, &log, src, "candidate.cu", archs[i]);
        char logname[64];
        snprintf(logname, sizeof logname, "nvrtc-%s.log", archs[i]);
        hone_store *st = NULL;
        if (hone_store_open(&st, r->o->state_dir) == 0) {
            if (log) hone_store_write(st, r->res->hash, logname, log, strlen(log));
            if (!rc) {
                char name[64];
                snprintf(name, sizeof name, i == 0 ? "candidate.ptx" : "candidate.%s.cubin", archs[i]);
                hone_store_write(st, r->res->hash, name, out, n);
            }
            hone_store_free(st);
        }
        if (rc) {
            gate(r, "compile", "fail", "NVRTC %s: %s", archs[i], log ? log : hone_error_last());
            reject(r, HONE_GUARD_COMPILE, "NVRTC (%s) failed: %s", archs[i], log && *log ? log : hone_error_last());
            free(log);
            free(out);
            return -1;
        }
        if (i == 0 && !r->o->skip_scan && hone_scan_ptx(out, why, sizeof why) != 0) {
            gate(r, "compile", "fail", "PTX scan: %s", why);
            reject(r, HONE_GUARD_SCAN, "PTX scan: %s", why);
            free(log);
            free(out);
            return -1;
        }
        free(log);
        free(out);
    }
    gate(r, "compile", "pass", "NVRTC: PTX (compute_80, scanned), cubins for sm_80 and sm_90");
    int avail = 0;
    char pwhy[256] = "";
    if (hone_cuda_backend_probe(&avail, pwhy, sizeof pwhy) != 0 || !avail) {
        gate(r, "execution", "skipped", "skipped: no GPU%s%s", pwhy[0] ? " - " : "", pwhy);
        reject(r, HONE_GUARD_NOT_EVALUATED, "not evaluated: no GPU (compile gates passed)");
        r->res->evaluated = 0;
        return -1;
    }
    gate(r, "execution", "skipped", "skipped: the CUDA execution gates are not built yet");
    reject(r, HONE_GUARD_NOT_EVALUATED, "not evaluated: CUDA execution gates not built (compile gates passed)");
    r->res->evaluated = 0;
    return -1;
}

static void write_evidence(run_state *r, hone_store *st, double t_start)
{
    hone_guard_result *res = r->res;
    res->seconds = mono_s() - t_start;
    res->ev.guard_seconds = res->seconds;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "verdict", res->accepted ? "accepted" : res->evaluated ? "rejected" : "not evaluated");
    cJSON_AddStringToObject(root, "code", hone_guard_code_name(res->code));
    cJSON_AddStringToObject(root, "reason", res->reason);
    cJSON_AddStringToObject(root, "slot", r->o->slot);
    cJSON_AddStringToObject(root, "backend", r->o->backend);
    cJSON_AddStringToObject(root, "candidate_hash", res->hash);
    cJSON_AddStringToObject(root, "file", r->o->file);
    cJSON_AddNumberToObject(root, "seed", (double)r->seed);
    cJSON_AddStringToObject(root, "seed_source", r->o->seed >= 0 ? "--seed (testing)" : "getrandom after the candidate was hashed");
    cJSON_AddStringToObject(root, "tier", res->tier);
    cJSON_AddStringToObject(root, "compile_flags", HONE_COMPILE_CPU_FLAGS);
    cJSON_AddNumberToObject(root, "guard_seconds", res->seconds);
    cJSON_AddItemReferenceToObject(root, "gates", r->gates);
    char *rev = NULL;
    if (hone_review_evidence_to_json(&rev, &res->ev, r->o->slot, r->o->backend) == 0 && rev) {
        cJSON *rj = cJSON_Parse(rev);
        if (rj) cJSON_AddItemToObject(root, "review", rj);
    }
    free(rev);
    char *txt = cJSON_Print(root);
    if (txt) {
        if (st && res->hash[0]) {
            hone_store_write(st, res->hash, "evidence.json", txt, strlen(txt));
            hone_store_set_state(st, res->hash, res->accepted ? HONE_STORE_ACCEPTED : HONE_STORE_REJECTED,
                                 res->accepted ? NULL : res->reason, txt);
        }
        if (r->o->evidence_path) {
            size_t n = strlen(txt);
            char *t2 = malloc(n + 2);
            if (t2) {
                memcpy(t2, txt, n);
                t2[n] = '\n';
                t2[n + 1] = 0;
                if (hone_store_atomic_write(r->o->evidence_path, t2, n + 1) != 0 && r->rep)
                    fprintf(r->rep, "warning: cannot write %s: %s\n", r->o->evidence_path, hone_error_last());
                free(t2);
            }
        }
        free(txt);
    }
    cJSON_Delete(root);
}

int hone_guard_run(hone_guard_result *out, const hone_guard_opts *opts, FILE *report)
{
    double t_start = mono_s();
    memset(out, 0, sizeof *out);
    hone_review_evidence ev0 = HONE_REVIEW_EVIDENCE_INIT;
    out->ev = ev0;
    out->evaluated = 1;
    out->speedup = out->ci_low = out->ci_high = NAN;
    run_state r;
    memset(&r, 0, sizeof r);
    r.o = opts;
    r.res = out;
    r.rep = opts->quiet ? NULL : report;
    r.gates = cJSON_CreateArray();
    hone_store *st = NULL;
    char *src = NULL;
    size_t len = 0;
    int rc = 0;
    int cuda = opts->backend && strcmp(opts->backend, "cuda") == 0;
    if (!opts->slot || !opts->file || !opts->backend || (!cuda && strcmp(opts->backend, "cpu") != 0)) {
        rc = hone_error_set(HONE_EINVAL, "slot, backend (cpu|cuda) and file are required");
        goto done;
    }
    int sid = hone_slots_from_name(opts->slot);
    if (sid < 0) {
        rc = hone_error_set(HONE_EINVAL, "unknown slot '%s'", opts->slot);
        goto done;
    }
    r.slot = (hone_slot_id)sid;
    hone_slots_cpu_symbol(r.slot, r.symbol, sizeof r.symbol);
    if (hone_file_read(opts->file, &src, &len)) {
        rc = hone_error_set(HONE_EIO, "cannot read %s", opts->file);
        goto done;
    }
    if (!cuda && !opts->model_path) {
        rc = hone_error_set(HONE_EINVAL, "a model (-m) is required for the CPU gates");
        goto done;
    }
    if ((rc = hone_store_open(&st, opts->state_dir)) != 0) goto done;

    /* 1. freeze: hash and store, then draw the seed */
    char inc_path[4200], inc_hash[65] = "";
    snprintf(inc_path, sizeof inc_path, "%s/kernels/%s/%s.%s", HONE_SOURCE_DIR, opts->backend, opts->slot, cuda ? "cu" : "c");
    size_t ilen = 0;
    char *isrc = NULL;
    if (hone_file_read(inc_path, &isrc, &ilen) == 0) hone_sha256_hex(isrc, ilen, inc_hash);
    free(isrc);
    snprintf(out->ev_origin, sizeof out->ev_origin, "%s", opts->origin ? opts->origin : opts->file);
    hone_store_meta meta = {opts->slot, opts->backend, opts->origin_kind ? opts->origin_kind : "file",
                            out->ev_origin, inc_hash[0] ? inc_hash : NULL};
    if ((rc = hone_store_put(st, out->hash, src, len, &meta)) != 0) goto done;
    if (opts->seed >= 0) {
        r.seed = (uint64_t)opts->seed;
    } else if (getrandom(&r.seed, sizeof r.seed, 0) != (ssize_t)sizeof r.seed) {
        rc = hone_error_set(HONE_EIO, "getrandom: %s", strerror(errno));
        goto done;
    }
    out->ev.seed = (int64_t)(r.seed & 0x7fffffffffffffffull);
    r.seed = (uint64_t)out->ev.seed;
    out->ev.candidate_hash = out->hash;
    out->ev.origin_kind = meta.origin_kind;
    out->ev.origin = out->ev_origin;
    out->ev.threshold = opts->threshold;
    if (r.rep)
        fprintf(r.rep, "hone guard: %s (%s) %s\n  candidate %.12s (sha256), seed %llu%s\n", opts->slot,
                opts->backend, opts->file, out->hash, (unsigned long long)r.seed,
                opts->seed >= 0 ? " (--seed: testing only)" : " (drawn after hashing)");
    gate(&r, "freeze", "pass", "sha256 %s stored under %s", out->hash, hone_store_dir(st));

    if (cuda) {
        cuda_gates(&r, src);
        goto verdict;
    }
    /* 2. static scan */
    char why[512];
    if (opts->skip_scan) {
        gate(&r, "scan", "skipped", "--skip-scan (testing only)");
    } else if (hone_scan_c_source(src, why, sizeof why) != 0) {
        gate(&r, "scan", "fail", "%s", why);
        reject(&r, HONE_GUARD_SCAN, "static scan: %s", why);
        goto verdict;
    } else {
        gate(&r, "scan", "pass", "headers on the whitelist; no asm, system calls, processes, files, clocks, threads or allocation");
    }
    /* 3. compile + ELF */
    {
        char cmd[8192], so[4400], srcp[4400];
        hone_store_path(st, out->hash, "candidate.so", so, sizeof so);
        hone_store_path(st, out->hash, "source.c", srcp, sizeof srcp);
        snprintf(r.so_path, sizeof r.so_path, "%s", so);
        char *log = NULL;
        double tc = mono_s();
        int crc = hone_compile_cpu(&log, cmd, sizeof cmd, srcp, so, HONE_SOURCE_DIR, 60.0);
        if (log) hone_store_write(st, out->hash, "compile.log", log, strlen(log));
        if (crc) {
            gate(&r, "compile", "fail", "%s\n%s", hone_error_last(), log ? log : "");
            reject(&r, HONE_GUARD_COMPILE, "compile failed: %s", log && *log ? log : hone_error_last());
            free(log);
            goto verdict;
        }
        free(log);
        hone_store_set_state(st, out->hash, HONE_STORE_COMPILED, NULL, NULL);
        if (!opts->skip_scan && hone_scan_elf(so, r.symbol, why, sizeof why) != 0) {
            gate(&r, "compile", "fail", "ELF: %s", why);
            reject(&r, HONE_GUARD_ELF, "ELF check: %s", why);
            goto verdict;
        }
        gate(&r, "compile", "pass", "%s (%.2f s); ELF: no writable data, no load-time code, symbols on the list",
             cmd, mono_s() - tc);
    }
    /* 4. kernel parity */
    if ((rc = hone_model_load(&r.model, opts->model_path)) != 0) goto done;
    {
        hone_slot_table base;
        hone_slots_cpu_baseline(&base);
        r.inc_fn = hone_slots_get(&base, r.slot);
    }
    if ((rc = prepare_cases(&r)) != 0) goto done;
    if (kernel_parity_gate(&r)) goto verdict;
    hone_store_set_state(st, out->hash, HONE_STORE_KERNEL_PARITY, NULL, NULL);
    /* 5. model parity */
    if (model_gates(&r, 0)) goto verdict;
    hone_store_set_state(st, out->hash, HONE_STORE_MODEL_PARITY, NULL, NULL);
    if (opts->skip_speed) {
        gate(&r, "speed", "skipped", "--skip-speed (testing only)");
        goto verdict;
    }
    /* 6. speed: kernel, then end to end */
    if (speed_gate(&r)) goto verdict;
    hone_store_set_state(st, out->hash, HONE_STORE_SPEED, NULL, NULL);
    if (model_gates(&r, 1)) goto verdict;

verdict:
    if (!r.verdict_done) {
        out->accepted = 1;
        out->code = HONE_GUARD_OK;
        snprintf(out->reason, sizeof out->reason, "accepted: %s tier, %.3fx faster", out->tier, out->speedup);
    }
    if (out->code == HONE_GUARD_NOT_EVALUATED) out->evaluated = 0;
    describe_cpu(out->ev_device, sizeof out->ev_device);
    out->ev.device = out->ev_device;
    snprintf(out->ev_model, sizeof out->ev_model, "%s", r.model ? hone_model_name(r.model) : (opts->model_path ? opts->model_path : ""));
    out->ev.model = out->ev_model;
    write_evidence(&r, st, t_start);
    if (r.rep)
        fprintf(r.rep, "verdict: %s (%s) - %s [%.1f s]\n",
                out->accepted ? "ACCEPTED" : out->evaluated ? "REJECTED" : "NOT EVALUATED",
                hone_guard_code_name(out->code), out->reason, out->seconds);
done:
    free_cases(&r);
    hone_model_free(r.model);
    hone_store_free(st);
    free(src);
    cJSON_Delete(r.gates);
    return rc;
}

/* ---- the command ---------------------------------------------------------------------------- */

static int usage(void)
{
    fprintf(stderr,
            "usage: hone guard -m MODEL --slot SLOT --backend cpu|cuda FILE [--state-dir DIR]\n"
            "                  [--evidence OUT.json] [--threshold 1.05] [--seed S (testing only)]\n"
            "                  [--prompts N] [--steps N] [--reps N] [--quiet]\n");
    return 2;
}

int hone_cli_guard(int argc, char **argv)
{
    hone_guard_opts o = HONE_GUARD_OPTS_INIT;
    o.backend = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (strcmp(a, name) == 0 && v && (i++, 1))
        if (ARG("-m") || (strcmp(a, "--model") == 0 && v && (i++, 1))) o.model_path = v;
        else if (ARG("--slot")) o.slot = v;
        else if (ARG("--backend")) o.backend = v;
        else if (ARG("--state-dir")) o.state_dir = v;
        else if (ARG("--evidence")) o.evidence_path = v;
        else if (ARG("--threshold")) o.threshold = atof(v);
        else if (ARG("--seed")) o.seed = strtoll(v, NULL, 0);
        else if (ARG("--prompts")) o.model_prompts = atoi(v);
        else if (ARG("--steps")) o.model_steps = atoi(v);
        else if (ARG("--reps")) o.reps = atoi(v);
        else if (strcmp(a, "--quiet") == 0) o.quiet = 1;
        else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) return usage();
        else if (a[0] == '-') {
            fprintf(stderr, "hone guard: unknown option %s\n", a);
            return usage();
        } else if (!o.file) o.file = a;
        else return usage();
#undef ARG
    }
    if (!o.slot || !o.backend || !o.file || (strcmp(o.backend, "cpu") && strcmp(o.backend, "cuda")) ||
        !(o.threshold > 0) || (!o.model_path && strcmp(o.backend, "cpu") == 0))
        return usage();
    if (hone_slots_from_name(o.slot) < 0) {
        fprintf(stderr, "hone guard: unknown slot '%s'\n", o.slot);
        return 2;
    }
    hone_guard_result res;
    int rc = hone_guard_run(&res, &o, stdout);
    if (rc) {
        fprintf(stderr, "hone guard: %s\n", hone_error_last());
        return 1;
    }
    return res.accepted ? 0 : 1;
}
