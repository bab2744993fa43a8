/* The guard (see guard.h): the gates, the isolated workers that run candidate code, the
 * verdict, the evidence and the `hone guard` command. */
#include "guard.h"

#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <errno.h>
#include <immintrin.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "candidates/compile.h"
#include "candidates/kernel_loader.h"
#include "candidates/sha256.h"
#include "candidates/store.h"
#include "candidates/worker.h"
#include "engine/backend.h"
#include "engine/cuda_kernels.h"
#include "engine/cuda_nvrtc.h"
#include "engine/error.h"
#include "engine/file.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "engine/slots.h"
#include "guard/cases.h"
#include "guard/cuda_exec.h"
#include "guard/oracle.h"
#include "guard/scan.h"
#include "profiler/membw.h"

/* ---- stated bounds ------------------------------------------------------------------------ */
/* faithful tier: every element's error against the oracle within FAITHFUL_BOUND_SLACK x the
 * operation's a-priori f32 error bound (guard/oracle.h); slots without a bound (registered ones
 * that bring none) fall back to the incumbent's own error: max <= 1.5 x, mean <= 1.25 x */
#define FAITHFUL_BOUND_SLACK 2.0
#define FAITHFUL_MAX_SLACK 1.5
#define FAITHFUL_MEAN_SLACK 1.25
#define FAITHFUL_ABS_FLOOR 0x1p-30 /* plus this fraction of the output's max |ref| */
#define SPEED_ROUNDS 3           /* timing workers at most while the interval stays undecided */
#define SPEED_BUDGET_S 40.0      /* ... and at most this long */
#define PREEMPTED_RATIO 1.2      /* a rep whose wall time exceeds its CPU time by this was preempted */
#define ROOFLINE_MARGIN 1.5      /* suspect: faster than bytes / (1.5 x measured peak read bandwidth) */
#define MAX_REPS 201
#define SCREEN_REPS_DEFAULT 9      /* opts.screen: timed pairs of its one timing worker */
#define BOOTSTRAP 2000
/* model parity (faithful): relative to the incumbent's logit scale s = max |logit| */
#define MODEL_MAX_DLOGIT_REL 1e-3 /* max |Δlogit| <= 1e-3 s */
#define MODEL_KL_MAX 1e-4         /* per-position KL(incumbent || candidate) */
#define MODEL_KL_MEAN 1e-6
#define MODEL_TIE_REL 1e-3        /* a near-tie: incumbent top-2 gap < 1e-3 s */
/* end to end: reject when the median decode-step speed ratio (candidate / incumbent) is below
 * 0.97 and the upper bound of its 95% CI is below 1.0 (a regression beyond noise) */
#define E2E_SLACK_DEFAULT 0.05            /* accepted only when the decode ratio's CI low >= 1 - this: the noise of
                                   * alternated decode steps on a shared 2-core machine is a few % */
#define CPU_PROMPTS 6
#define CPU_PREFILL 8
#define CPU_STEPS 24

const char *hone_guard_code_name(hone_guard_code c)
{
    static const char *const n[] = {"ok", "usage", "scan", "compile", "elf", "crash", "timeout",
                                    "canary", "input-mutated", "wrote-nothing", "nonfinite",
                                    "constant", "parity", "nondeterministic", "share", "recheck",
                                    "model-parity", "slower", "suspect", "e2e-regression",
                                    "not-evaluated", "internal", "fp-state", "inconclusive",
                                    "screened", "cancelled"};
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

/* A case set with its truth: the f64 oracle and the incumbent's outputs and errors. */
typedef struct {
    hone_case_set cs;
    double **ref;          /* [case][out_len] oracle */
    double **bound;        /* [case][out_len] a-priori error bound, or NULL for the slot */
    float **inc;           /* [case][out_len] incumbent outputs */
    hone_oracle_err *inc_err;
} case_data;

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
    case_data main;        /* the slot's cases */
    case_data fresh;       /* the same shapes with other inputs, run at main's addresses */
    void *inc_fn;
    hone_slot_table served;    /* the incumbent table: the baselines, or what opts->kernels_dir serves */
    hone_kernel_loader *kl;    /* owns the served tree's objects */
    int verdict_done;
    double bound_worst;    /* faithful: the largest error / (slack x a-priori bound) seen */
    int cuda;              /* the candidate is a CUDA kernel */
    hone_cuda_exec_device gpu;
    char kroot[4200];      /* CUDA: the candidate's kernels root (cuda_exec.h) */
    double speed_bw, speed_gflops; /* the speed gate's roofs, for the other shapes' evidence */
    const char *gate_open; /* the gate the progress callback was last told began */
} run_state;

/* Tells opts->progress that gate name begins (end 0) or ended (end 1, with its status). */
static void progress(run_state *r, const char *name, int end, const char *status)
{
    if (!r->o->progress) return;
    if (!end) r->gate_open = name;
    else if (r->gate_open && strcmp(r->gate_open, name) == 0) r->gate_open = NULL;
    r->o->progress(r->o->progress_user, name, end, status);
}

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
    progress(r, name, 1, status);
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

/* 1 when opts->cancel asks the run to stop (then the verdict is HONE_GUARD_CANCELLED). */
static int cancelled(run_state *r)
{
    if (!r->o->cancel || !__atomic_load_n(r->o->cancel, __ATOMIC_ACQUIRE)) return 0;
    reject(r, HONE_GUARD_CANCELLED, "cancelled before a verdict (the caller is stopping)");
    return 1;
}

/* The worker options every CPU gate starts from: the watchdog, and the caller's cancel flag. */
static hone_worker_opts worker_opts(const run_state *r, double timeout_s, int cpu_s)
{
    hone_worker_opts wo = HONE_WORKER_OPTS_INIT;
    wo.timeout_s = timeout_s;
    wo.cpu_s = cpu_s;
    wo.cancel = r->o->cancel;
    return wo;
}

/* ---- kernel-parity worker ------------------------------------------------------------------ */

typedef struct {
    const run_state *r;
    int phase;               /* 0: parity runs; 1: timing + re-check; 2: every shape's timing */
    volatile struct speed_shm *speed;
    volatile struct shapes_shm *shapes; /* phase 2 */
} kworker_arg;

/* Filled by the worker's trusted code, read by the parent, which alone judges them. (Code of
 * the candidate's could write here too: the parent bounds what it reads, and a forged timing is
 * what the CPU-time and roofline checks are for.) */
struct speed_shm {
    int reps, inner, done;
    double inc_ns[MAX_REPS], cand_ns[MAX_REPS];    /* wall time per call */
    double inc_cpu[MAX_REPS], cand_cpu[MAX_REPS];  /* the thread's CPU time per call */
    /* the floating-point state after a call differs from before it */
    int fp_bad;
    uint32_t mxcsr0, mxcsr;
    uint16_t fpcw0, fpcw;
    int fp_case;
};

/* Phase 2 (the evidence's per-shape timings): SHAPE_REPS pairs of each non-edge case but the
 * gate's own, which the speed gate timed already. */
#define SHAPE_REPS 21
struct shapes_shm {
    int n, reps, done;
    int case_i[HONE_EVIDENCE_MAX_SHAPES];
    double inc_ns[HONE_EVIDENCE_MAX_SHAPES][SHAPE_REPS], cand_ns[HONE_EVIDENCE_MAX_SHAPES][SHAPE_REPS];
    double inc_cpu[HONE_EVIDENCE_MAX_SHAPES][SHAPE_REPS], cand_cpu[HONE_EVIDENCE_MAX_SHAPES][SHAPE_REPS];
};

/* MXCSR and the x87 control word: what a kernel must leave as it found them (FTZ/DAZ, rounding
 * mode, exception masks, precision control). */
static inline uint32_t mxcsr_get(void) { return _mm_getcsr(); }
static inline uint16_t fpcw_get(void)
{
    uint16_t cw;
    __asm__ volatile("fnstcw %0" : "=m"(cw));
    return cw;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 0 when the FP state is still (m0, c0); else records it in sp and returns 1. */
static int fp_changed(volatile struct speed_shm *sp, uint32_t m0, uint16_t c0, int case_i)
{
    uint32_t m = mxcsr_get() & ~0x3fu; /* the six sticky exception flags may be set by any math */
    uint16_t c = fpcw_get();
    if (m == (m0 & ~0x3fu) && c == c0) return 0;
    sp->fp_bad = 1;
    sp->mxcsr0 = m0 & ~0x3fu;
    sp->mxcsr = m;
    sp->fpcw0 = c0;
    sp->fpcw = c;
    sp->fp_case = case_i;
    return 1;
}

/* Timed A/B pairs: --reps, default 41, at most MAX_REPS. */
static int speed_reps(const run_state *r)
{
    int reps = r->o->reps > 0 ? r->o->reps : r->o->screen ? SCREEN_REPS_DEFAULT : 41;
    return reps > MAX_REPS ? MAX_REPS : reps;
}

static void *load_candidate(const char *so, const char *sym)
{
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!h) return NULL;
    return dlsym(h, sym);
}

/* One call, then the FP state checked: 1 when it changed (recorded in sp). */
#define CALL_CHECKED(fn, c, base, o, scratch, ith, nth)                                          \
    do {                                                                                          \
        hone_cases_call(fn, c, base, o, scratch, ith, nth);                                       \
        if (fp_changed(sp, m0, c0, i)) return 1;                                                  \
    } while (0)

/* Every parity run of every case (no allocation: this runs under strict seccomp); returns 1
 * when a call left the FP state changed. */
static int run_parity_calls(const run_state *r, void *fn, volatile struct speed_shm *sp)
{
    const hone_case_set *s = &r->main.cs, *f = &r->fresh.cs;
    uint32_t m0 = mxcsr_get();
    uint16_t c0 = fpcw_get();
    for (int i = 0; i < s->n; i++) {
        const hone_case *c = &s->c[i];
        float *scratch = hone_cases_scratch(s, c);
        for (int k = 0; k < 3; k++) {
            float *o = hone_cases_out(s, c, k);
            hone_cases_poison(s, c, o);
            CALL_CHECKED(fn, c, s->base, o, scratch, 0, 1);
        }
        float *o = hone_cases_out(s, c, 3);
        hone_cases_poison(s, c, o);
        for (int ith = 0; ith < 2; ith++) CALL_CHECKED(fn, c, s->base, o, scratch, ith, 2);
        for (int ith = 0; ith < 3; ith++) {
            o = hone_cases_out(s, c, 4 + ith);
            hone_cases_poison(s, c, o);
            CALL_CHECKED(fn, c, s->base, o, scratch, ith, 3);
        }
        /* the fresh case's bytes at this case's addresses, one call into output 0, then both
         * back where they were: a result cached by address or call count comes back stale */
        hone_cases_copy(s->base, f->base, c, 1);
        o = hone_cases_out(s, c, 0);
        hone_cases_poison(s, c, o);
        hone_cases_call(fn, c, s->base, o, scratch, 0, 1);
        hone_cases_copy(s->base, f->base, c, 1);
        if (fp_changed(sp, m0, c0, i)) return 1;
    }
    return 0;
}
#undef CALL_CHECKED

static void flush_range(const uint8_t *p, size_t n)
{
    for (size_t k = 0; k < n; k += 64) _mm_clflush(p + k);
}

/* A case prepared for timing: copies of its bytes outside the shared region, enough that one
 * rep lasts >= 20 us (at most 16). */
typedef struct {
    const hone_case *tc;
    size_t lo, span;
    int inner;
    uint8_t *copies[16];
} timed_case;

static int timed_case_prepare(timed_case *x, const run_state *r, const hone_case *tc)
{
    const hone_case_set *s = &r->main.cs;
    size_t lo, hi;
    hone_cases_span(tc, &lo, &hi);
    x->tc = tc;
    x->lo = lo;
    x->span = hi - lo;
    /* calibrate: copies so that one rep lasts >= 20 us */
    uint8_t *one = malloc(x->span);
    if (!one) return 5;
    const uint8_t *b1 = one - lo;
    hone_cases_copy((uint8_t *)b1, s->base, tc, 0);
    hone_cases_call(r->inc_fn, tc, b1, (float *)(b1 + tc->out_off[0]), (float *)(b1 + tc->scratch_off), 0, 1);
    uint64_t t0 = mono_ns();
    hone_cases_call(r->inc_fn, tc, b1, (float *)(b1 + tc->out_off[0]), (float *)(b1 + tc->scratch_off), 0, 1);
    uint64_t t1 = mono_ns();
    free(one);
    int inner = (int)(20000.0 / (double)(t1 - t0 + 1)) + 1;
    x->inner = inner > 16 ? 16 : inner;
    for (int k = 0; k < x->inner; k++) {
        x->copies[k] = malloc(x->span);
        if (!x->copies[k]) return 5;
        hone_cases_copy(x->copies[k] - lo, s->base, tc, 0); /* (no guard pages in the copies) */
    }
    return 0;
}

/* 3 warm-up pairs, then reps interleaved pairs (AB, BA, ...), every copy flushed before each
 * rep: per-call wall and thread CPU ns into the arrays. 1 when a call changed the FP state. */
static int timed_case_run(const timed_case *x, void *fns[2], int reps, volatile double *inc_ns,
                          volatile double *cand_ns, volatile double *inc_cpu, volatile double *cand_cpu,
                          volatile struct speed_shm *sp, uint32_t m0, uint16_t c0)
{
    const hone_case *tc = x->tc;
    int inner = x->inner;
    for (int rep = -3; rep < reps; rep++) { /* 3 warm-up pairs */
        for (int w = 0; w < 2; w++) {
            int which = (rep & 1) ? 1 - w : w; /* alternate the order: AB, BA, ... */
            for (int k = 0; k < inner; k++) flush_range(x->copies[k], x->span);
            _mm_mfence();
            uint64_t a0 = mono_ns(), u0 = thread_cpu_ns();
            for (int k = 0; k < inner; k++) {
                const uint8_t *bk = x->copies[k] - x->lo;
                hone_cases_call(fns[which], tc, bk, (float *)(bk + tc->out_off[0]),
                                (float *)(bk + tc->scratch_off), 0, 1);
            }
            uint64_t a1 = mono_ns(), u1 = thread_cpu_ns();
            if (fp_changed(sp, m0, c0, -1)) return 1;
            if (rep >= 0) {
                double ns = (double)(a1 - a0) / inner, cpu = (double)(u1 - u0) / inner;
                if (which == 0) inc_ns[rep] = ns, inc_cpu[rep] = cpu;
                else cand_ns[rep] = ns, cand_cpu[rep] = cpu;
            }
        }
    }
    return 0;
}

/* Phase 2: every non-edge case but the gate's, SHAPE_REPS pairs each (evidence only). */
static int time_shapes(kworker_arg *a, void *fns[2])
{
    const run_state *r = a->r;
    const hone_case_set *s = &r->main.cs;
    volatile struct shapes_shm *sh = a->shapes;
    static timed_case tcx[HONE_EVIDENCE_MAX_SHAPES]; /* static: large, and the worker is a fork of its own */
    int n = 0;
    for (int i = 0; i < s->n && n < HONE_EVIDENCE_MAX_SHAPES - 1; i++) {
        if (s->c[i].shape.edge || s->c[i].timing) continue;
        if (timed_case_prepare(&tcx[n], r, &s->c[i]) != 0) return 5;
        sh->case_i[n++] = i;
    }
    if (hone_worker_enter_timing() != 0) return 4;
    uint32_t m0 = mxcsr_get();
    uint16_t c0 = fpcw_get();
    for (int k = 0; k < n; k++)
        if (timed_case_run(&tcx[k], fns, SHAPE_REPS, sh->inc_ns[k], sh->cand_ns[k], sh->inc_cpu[k],
                           sh->cand_cpu[k], a->speed, m0, c0))
            return 9;
    sh->n = n;
    sh->reps = SHAPE_REPS;
    sh->done = 1;
    return 0;
}

static int kworker(void *argp)
{
    kworker_arg *a = argp;
    const run_state *r = a->r;
    void *fn = load_candidate(r->so_path, r->symbol);
    if (!fn) return 3;
    if (a->phase == 0) {
        if (hone_worker_enter_strict() != 0) return 4;
        return run_parity_calls(r, fn, a->speed) ? 9 : 0;
    }
    /* timing: copies of the timing case, each flushed from every cache level before a rep */
    const hone_case_set *s = &r->main.cs;
    void *fns[2] = {r->inc_fn, fn};
    if (a->phase == 2) return time_shapes(a, fns);
    timed_case tcx;
    if (timed_case_prepare(&tcx, r, hone_cases_timing(s)) != 0) return 5;
    int reps = speed_reps(r), inner = tcx.inner;
    if (hone_worker_enter_timing() != 0) return 4;
    uint32_t m0 = mxcsr_get();
    uint16_t c0 = fpcw_get();
    volatile struct speed_shm *sp = a->speed;
    if (timed_case_run(&tcx, fns, reps, sp->inc_ns, sp->cand_ns, sp->inc_cpu, sp->cand_cpu, sp, m0, c0)) return 9;
    a->speed->reps = reps;
    a->speed->inner = inner;
    /* correctness again, after the timing loop */
    for (int i = 0; i < s->n; i++) {
        const hone_case *c = &s->c[i];
        float *o = hone_cases_out(s, c, 7);
        hone_cases_poison(s, c, o);
        hone_cases_call(fn, c, s->base, o, hone_cases_scratch(s, c), 0, 1);
        if (fp_changed(a->speed, m0, c0, i)) return 9;
    }
    a->speed->done = 1;
    return 0;
}

/* A call left the floating-point state changed: MXCSR's FTZ (bit 15), DAZ (bit 6), rounding
 * (bits 13-14) or exception masks (7-12), or the x87 control word. */
static void fp_state_failure(run_state *r, const char *gname, const volatile struct speed_shm *sp)
{
    const char *where = sp->fp_case >= 0 && sp->fp_case < r->main.cs.n ? r->main.cs.c[sp->fp_case].desc
                                                                         : "the timing loop";
    gate(r, gname, "fail", "MXCSR %#x -> %#x, x87 control word %#x -> %#x after a call (%s)",
         sp->mxcsr0, sp->mxcsr, sp->fpcw0, sp->fpcw, where);
    reject(r, HONE_GUARD_FP_STATE, "changed the floating-point state: MXCSR %#x -> %#x%s, x87 control word "
           "%#x -> %#x (%s); a kernel must leave FTZ/DAZ, rounding and precision as it found them",
           sp->mxcsr0, sp->mxcsr, (sp->mxcsr & 0x8040u) != (sp->mxcsr0 & 0x8040u) ? " (FTZ/DAZ)" : "",
           sp->fpcw0, sp->fpcw, where);
}

static void worker_failure(run_state *r, const char *gname, const hone_worker_result *w)
{
    if (w->cancelled && cancelled(r)) return;
    hone_guard_code code = w->timed_out ? HONE_GUARD_TIMEOUT
                         : w->signal ? HONE_GUARD_CRASH : HONE_GUARD_CRASH;
    const char *why = w->reason;
    if (!w->timed_out && !w->signal) {
        if (w->exit_status == 3) why = "the shared object could not be loaded in the worker";
        else if (w->exit_status == 4) why = "seccomp unavailable in the worker";
        else if (w->exit_status == 5) why = "the worker ran out of memory preparing its inputs";
        code = w->exit_status >= 3 && w->exit_status <= 5 ? HONE_GUARD_INTERNAL : HONE_GUARD_CRASH;
    }
    /* a fault on a guard page of the cases is an out-of-bounds access, with the buffer named */
    char where[256];
    if ((w->signal == SIGSEGV || w->signal == SIGBUS) && w->fault_addr &&
        (hone_cases_where(&r->main.cs, w->fault_addr, where, sizeof where) ||
         hone_cases_where(&r->fresh.cs, w->fault_addr, where, sizeof where))) {
        gate(r, gname, "fail", "out-of-bounds access: faulted on a guard page %s", where);
        reject(r, HONE_GUARD_CANARY, "out-of-bounds access: faulted on a guard page %s", where);
        return;
    }
    gate(r, gname, "fail", "%s", why);
    reject(r, code, "%s: %s", gname, why);
}

/* ---- kernel parity: the judgement --------------------------------------------------------- */

static int is_poison(float f) { return fbits(f) == HONE_CASES_POISON; }

/* 1 when exactly one of a, b is NaN, or exactly one is Inf, or both are Inf of other signs (the
 * rule of hone_oracle_compare's n_nonfinite_mismatch). */
static int nonfinite_differs(float a, float b)
{
    return isnan(a) != isnan(b) || isinf(a) != isinf(b) || (isinf(a) && isinf(b) && signbit(a) != signbit(b));
}

/* Case i of set d (r->main: three runs and, on the CPU, the shares; r->fresh: one run).
 * pass 0: unwritten, non-finite and constant outputs (over every case first, so that the most
 * specific reason wins); pass 1: parity tier, determinism, shares. A failure is a rejection
 * (r->verdict_done); like every judgement and gate below, it returns 0 whatever the verdict. */
static int judge_case(run_state *r, const case_data *d, int i, double *worst_cand, double *worst_inc,
                      int *exact, int pass)
{
    const hone_case_set *s = &d->cs;
    const hone_case *c = &s->c[i];
    const float *o0 = hone_cases_out(s, c, 0);
    const double *ref = d->ref[i];
    int runs = d == &r->main ? 3 : 1, shares = runs == 3 && !r->cuda;
    int64_t n = c->out_len;
    if (!c->inplace) {
        int64_t left = 0;
        for (int64_t k = 0; k < n; k++) left += is_poison(o0[k]);
        if (left == n) {
            gate(r, "kernel-parity", "fail", "wrote nothing (%s)", c->desc);
            reject(r, HONE_GUARD_WROTE_NOTHING, "wrote nothing: the poisoned output was left untouched (%s)", c->desc);
            return 0;
        }
        if (left) {
            gate(r, "kernel-parity", "fail", "left %lld of %lld elements unwritten (%s)", (long long)left, (long long)n, c->desc);
            reject(r, HONE_GUARD_NONFINITE, "NaN/Inf mismatch: left %lld of %lld output elements unwritten (%s)",
                   (long long)left, (long long)n, c->desc);
            return 0;
        }
    }
    hone_oracle_err e;
    hone_oracle_compare_rows(o0, ref, c->cmp_rows, c->cmp_row_len, &e);
    if (e.n_nonfinite_mismatch) {
        /* NaN/Inf must sit where the oracle has them, or where the incumbent has them: at the
         * extremes (an f32 intermediate that underflows or overflows where double does not) the
         * served f32 semantics may part from the double truth, and a candidate may follow it */
        int64_t k0 = -1, bad = 0;
        const float *inc = d->inc[i];
        for (int64_t k = 0; k < n; k++) {
            if (nonfinite_differs(o0[k], (float)ref[k]) && nonfinite_differs(o0[k], inc[k])) {
                bad++;
                if (k0 < 0) k0 = k;
            }
        }
        if (bad) {
            gate(r, "kernel-parity", "fail", "NaN/Inf at %lld elements where the oracle and the incumbent differ (%s)",
                 (long long)bad, c->desc);
            reject(r, HONE_GUARD_NONFINITE, "NaN/Inf mismatch at %lld elements (%s; first [%lld]: got %g, oracle %g, "
                   "incumbent %g)", (long long)bad, c->desc, (long long)k0, (double)o0[k0], ref[k0], (double)inc[k0]);
            return 0;
        }
    }
    if (n >= 4) {
        /* the oracle is constant when every element equals the first, NaN counting as equal to
         * NaN: a NaN in a norm weight of the edge cases makes every row of rmsnorm_matvec NaN, in
         * f64 as in f32, and the NaN-everywhere answer is then the right one */
        int cconst = 1, oconst = 1;
        for (int64_t k = 1; k < n; k++) {
            if (fbits(o0[k]) != fbits(o0[0])) cconst = 0;
            if (ref[k] != ref[0] && !(isnan(ref[k]) && isnan(ref[0]))) oconst = 0;
        }
        if (cconst && !oconst) {
            gate(r, "kernel-parity", "fail", "constant output %g where the oracle varies (%s)", (double)o0[0], c->desc);
            reject(r, HONE_GUARD_CONSTANT, "constant output (%g everywhere) where the oracle is not (%s)", (double)o0[0], c->desc);
            return 0;
        }
    }
    if (pass == 0) return 0;
    int same = memcmp(o0, d->inc[i], (size_t)n * 4) == 0;
    if (!same) *exact = 0;
    const hone_oracle_err *ie = &d->inc_err[i];
    double floor_abs = FAITHFUL_ABS_FLOOR * ie->ref_max_abs;
    if (!same && d->bound) {
        /* the a-priori bound, element by element */
        const double *b = d->bound[i];
        int64_t kw = -1;
        double worst = 0;
        for (int64_t k = 0; k < n; k++) {
            if (!isfinite(o0[k]) || !isfinite((float)ref[k])) continue;
            double x = fabs((double)o0[k] - ref[k]) / (FAITHFUL_BOUND_SLACK * b[k]);
            if (x > worst) worst = x, kw = k;
        }
        if (worst > r->bound_worst) r->bound_worst = worst;
        if (worst > 1.0) {
            gate(r, "kernel-parity", "fail", "error beyond %.0f x the a-priori f32 bound at [%lld]: |err| %.3g, bound %.3g (%s)",
                 FAITHFUL_BOUND_SLACK, (long long)kw, fabs((double)o0[kw] - ref[kw]), d->bound[i][kw], c->desc);
            reject(r, HONE_GUARD_PARITY,
                   "error beyond the faithful bound on %s: element [%lld] is off by %.3g, %.3g x the %.3g that "
                   "any f32 evaluation of the operation stays within (%.0f x its a-priori error bound)",
                   c->desc, (long long)kw, fabs((double)o0[kw] - ref[kw]), worst * FAITHFUL_BOUND_SLACK,
                   d->bound[i][kw], FAITHFUL_BOUND_SLACK);
            return 0;
        }
    } else if (!same && (e.max_abs > FAITHFUL_MAX_SLACK * ie->max_abs + floor_abs ||
                         e.mean_abs > FAITHFUL_MEAN_SLACK * ie->mean_abs + floor_abs)) {
        gate(r, "kernel-parity", "fail", "error vs oracle: max %.3g mean %.3g; incumbent max %.3g mean %.3g (%s)",
             e.max_abs, e.mean_abs, ie->max_abs, ie->mean_abs, c->desc);
        reject(r, HONE_GUARD_PARITY,
               "error beyond the faithful bound on %s: max |err| %.3g vs incumbent %.3g (allowed %.3g), mean %.3g vs %.3g",
               c->desc, e.max_abs, ie->max_abs, FAITHFUL_MAX_SLACK * ie->max_abs + floor_abs, e.mean_abs, ie->mean_abs);
        return 0;
    }
    if (e.max_abs > *worst_cand) *worst_cand = e.max_abs;
    if (ie->max_abs > *worst_inc) *worst_inc = ie->max_abs;
    for (int k = 1; k < runs; k++)
        if (memcmp(o0, hone_cases_out(s, c, k), (size_t)n * 4) != 0) {
            gate(r, "kernel-parity", "fail", "run %d differs from run 1 (%s)", k + 1, c->desc);
            reject(r, HONE_GUARD_NONDETERMINISTIC, "three runs are not bitwise identical: run %d differs (%s)", k + 1, c->desc);
            return 0;
        }
    if (!shares) return 0;
    if (memcmp(o0, hone_cases_out(s, c, 3), (size_t)n * 4) != 0) {
        gate(r, "kernel-parity", "fail", "nth=2 differs from nth=1 (%s)", c->desc);
        reject(r, HONE_GUARD_SHARE, "share contract: nth=2 gives other bits than nth=1 (%s)", c->desc);
        return 0;
    }
    /* nth = 3, each share alone: disjoint, whole units, complete, same bits */
    int8_t *owner = malloc((size_t)n), *uowner = malloc((size_t)c->share_units);
    memset(owner, -1, (size_t)n);
    memset(uowner, -1, (size_t)c->share_units);
    const float *init = c->inplace ? (const float *)(s->base + c->in_off[c->out_arg]) : NULL;
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
        return 0;
    }
    return 0;
}

/* Canaries and inputs of every case of d, as the last runs left them. */
static int check_hygiene(run_state *r, const case_data *d, const char *gname)
{
    for (int i = 0; i < d->cs.n; i++) {
        const hone_case *c = &d->cs.c[i];
        char what[256];
        if (!hone_cases_canaries_ok(&d->cs, c, what, sizeof what)) {
            gate(r, gname, "fail", "canary broken: %s", what);
            reject(r, HONE_GUARD_CANARY, "out-of-bounds write: %s", what);
            return 0;
        }
        if (hone_cases_hash_inputs(&d->cs, c) != c->in_hash) {
            gate(r, gname, "fail", "an input changed (%s)", c->desc);
            reject(r, HONE_GUARD_INPUT_MUTATED, "mutates its input: the inputs' hash changed (%s)", c->desc);
            return 0;
        }
    }
    return 0;
}

static int judge_parity(run_state *r, double t0);

static int kernel_parity_gate(run_state *r)
{
    double t0 = mono_s();
    struct speed_shm *sp = hone_worker_shared_new(sizeof *sp);
    if (!sp) return HONE_ENOMEM;
    kworker_arg a = {r, 0, sp, NULL};
    double kt = r->o->kernel_timeout_s > 0 ? r->o->kernel_timeout_s : 10.0;
    hone_worker_opts wo = worker_opts(r, kt, (int)kt + 2);
    hone_worker_result w;
    int rc = 0;
    if (hone_worker_run(&w, &wo, kworker, &a) != 0) {
        reject(r, HONE_GUARD_INTERNAL, "cannot start a worker: %s", hone_error_last());
    } else if (w.exit_status == 9 && sp->fp_bad) {
        fp_state_failure(r, "kernel-parity", sp);
    } else if (!w.ok) {
        worker_failure(r, "kernel-parity", &w);
    } else {
        rc = judge_parity(r, t0);
    }
    hone_worker_shared_free(sp, sizeof *sp);
    return rc;
}

/* The verdict of kernel parity on the runs in the shared regions, for both backends: hygiene,
 * then pass 0 and pass 1 of judge_case over r->main and r->fresh, then the tier. */
static int judge_parity(run_state *r, double t0)
{
    const case_data *sets[2] = {&r->main, &r->fresh};
    for (int k = 0; k < 2 && !r->verdict_done; k++) check_hygiene(r, sets[k], "kernel-parity");
    double wc = 0, wi = 0;
    int exact = 1;
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < sets[k]->cs.n; i++) {
                if (r->verdict_done) return 0;
                judge_case(r, sets[k], i, &wc, &wi, &exact, pass);
            }
    if (r->verdict_done) return 0;
    snprintf(r->res->tier, sizeof r->res->tier, "%s", exact ? "exact" : "faithful");
    char shapes[512] = "";
    for (int i = 0; i < r->main.cs.n && strlen(shapes) < 400; i++) {
        const char *d = strchr(r->main.cs.c[i].desc, ' ');
        snprintf(shapes + strlen(shapes), sizeof shapes - strlen(shapes), "%s%s", i ? "; " : "", d ? d + 1 : "");
    }
    snprintf(r->res->ev_shapes, sizeof r->res->ev_shapes, "%s", shapes);
    r->res->ev.parity_tier = r->res->tier;
    r->res->ev.candidate_max_abs_err = wc;
    r->res->ev.incumbent_max_abs_err = wi;
    r->res->ev.slack = r->main.bound ? FAITHFUL_BOUND_SLACK : FAITHFUL_MAX_SLACK - 1.0;
    r->res->ev.shapes = r->res->ev_shapes;
    char rule[160];
    if (exact) snprintf(rule, sizeof rule, "bitwise the incumbent");
    else if (r->main.bound)
        snprintf(rule, sizeof rule, "worst element at %.3g of %.0f x its a-priori f32 error bound",
                 r->bound_worst, FAITHFUL_BOUND_SLACK);
    else snprintf(rule, sizeof rule, "within %.2f x the incumbent's error (the slot has no a-priori bound)",
                  FAITHFUL_MAX_SLACK);
    cJSON *g = gate(r, "kernel-parity", "pass",
                    "%s tier over %d cases (seed %llu): max |err| vs f64 oracle %.3g (incumbent %.3g), %s; %s (%.2f s)",
                    r->res->tier, r->main.cs.n, (unsigned long long)r->seed, wc, wi, rule,
                    r->cuda ? "3 runs at 3 device addresses identical, every case again with fresh inputs "
                              "at the same addresses, canaries, guards and inputs intact"
                            : "3 runs identical, nth=1/2/3 identical, shares disjoint, every case again with "
                              "fresh inputs at the same addresses, canaries and inputs intact",
                    mono_s() - t0);
    cJSON_AddStringToObject(g, "tier", r->res->tier);
    cJSON_AddNumberToObject(g, "cases", r->main.cs.n);
    cJSON_AddNumberToObject(g, "candidate_max_abs_err", wc);
    cJSON_AddNumberToObject(g, "incumbent_max_abs_err", wi);
    if (r->main.bound) {
        cJSON_AddStringToObject(g, "faithful_rule", "a-priori f32 error bound per element");
        cJSON_AddNumberToObject(g, "faithful_bound_slack", FAITHFUL_BOUND_SLACK);
        cJSON_AddNumberToObject(g, "worst_error_over_bound", r->bound_worst * FAITHFUL_BOUND_SLACK);
    } else {
        cJSON_AddStringToObject(g, "faithful_rule", "relative to the incumbent's error");
        cJSON_AddNumberToObject(g, "faithful_max_slack", FAITHFUL_MAX_SLACK);
        cJSON_AddNumberToObject(g, "faithful_mean_slack", FAITHFUL_MEAN_SLACK);
    }
    cJSON *arr = cJSON_AddArrayToObject(g, "shapes");
    for (int i = 0; i < r->main.cs.n; i++) cJSON_AddItemToArray(arr, cJSON_CreateString(r->main.cs.c[i].desc));
    return 0;
}

/* ---- speed -------------------------------------------------------------------------------- */

static double peak_bw_gbps(void)
{
    hone_membw_opts mo = HONE_MEMBW_OPTS_INIT;
    mo.buffer_bytes = (size_t)256 << 20;
    mo.repetitions = 3;
    mo.copy_triad = 0;
    /* the kernels are timed on one thread by its CPU clock; so is the roof, which preemption by
     * other tenants would otherwise lower below what a candidate honestly reaches */
    mo.n_threads = 1;
    mo.thread_cpu_time = 1;
    double g = 0;
    if (hone_membw_measure(&g, &mo) != 0) g = 0;
    return g;
}

/* Timings of interleaved A/B pairs: wall time, and (CPU) the thread's CPU time of the same
 * reps, which preemption by other tenants does not inflate. */
typedef struct {
    int n, inner, rounds;
    double inc_ns[MAX_REPS * SPEED_ROUNDS], cand_ns[MAX_REPS * SPEED_ROUNDS];
    double inc_cpu[MAX_REPS * SPEED_ROUNDS], cand_cpu[MAX_REPS * SPEED_ROUNDS];
    int have_cpu;
} timings;

/* 1: faster (median >= threshold, CI low > 1); -1: slower (CI high below the threshold);
 * 0: undecided. */
static int speed_decide(double med, double lo, double hi, double threshold)
{
    if (med >= threshold && lo > 1.0) return 1;
    if (hi < threshold) return -1;
    return 0;
}

/* The speedups of t: CPU-time ratios where measured, else wall-time ones; median and CI. */
static void speedups(const run_state *r, const timings *t, double *med, double *lo, double *hi)
{
    double ratio[MAX_REPS * SPEED_ROUNDS];
    for (int i = 0; i < t->n; i++)
        ratio[i] = t->have_cpu ? t->inc_cpu[i] / t->cand_cpu[i] : t->inc_ns[i] / t->cand_ns[i];
    *med = median(ratio, t->n);
    bootstrap_ci(ratio, t->n, r->seed, lo, hi);
}

/* One timing worker (kworker phase 1) of gate gname: its pairs appended to t; 0 when it failed
 * (then rejected with the reason), 1 when t holds them. */
static int timing_worker(run_state *r, struct speed_shm *sp, timings *t, const char *gname, double timeout_s)
{
    memset(sp, 0, sizeof *sp);
    kworker_arg a = {r, 1, sp, NULL};
    hone_worker_opts wo = worker_opts(r, timeout_s, (int)timeout_s);
    hone_worker_result w;
    if (hone_worker_run(&w, &wo, kworker, &a) != 0) {
        reject(r, HONE_GUARD_INTERNAL, "cannot start a worker: %s", hone_error_last());
        return 0;
    }
    if (w.exit_status == 9 && sp->fp_bad) {
        fp_state_failure(r, gname, sp);
        return 0;
    }
    if (!w.ok || !sp->done || sp->reps <= 0 || sp->reps > MAX_REPS) {
        worker_failure(r, gname, &w);
        return 0;
    }
    for (int i = 0; i < sp->reps && t->n < MAX_REPS * SPEED_ROUNDS; i++, t->n++) {
        t->inc_ns[t->n] = sp->inc_ns[i];
        t->cand_ns[t->n] = sp->cand_ns[i];
        t->inc_cpu[t->n] = sp->inc_cpu[i] > 0 ? sp->inc_cpu[i] : sp->inc_ns[i];
        t->cand_cpu[t->n] = sp->cand_cpu[i] > 0 ? sp->cand_cpu[i] : sp->cand_ns[i];
    }
    t->inner = sp->inner;
    return 1;
}

/* After the timing loop: hygiene of the main cases, and output 7 (computed after it) bitwise
 * output 0; 0 when that failed (rejected), else 1. */
static int recheck_after_timing(run_state *r, const char *gname)
{
    check_hygiene(r, &r->main, gname);
    if (r->verdict_done) return 0;
    for (int i = 0; i < r->main.cs.n; i++) {
        const hone_case_set *cs = &r->main.cs;
        const hone_case *c = &cs->c[i];
        if (memcmp(hone_cases_out(cs, c, 7), hone_cases_out(cs, c, 0), (size_t)c->out_len * 4) != 0) {
            gate(r, gname, "fail", "results after the timing loop differ from before (%s)", c->desc);
            reject(r, HONE_GUARD_RECHECK, "correctness re-check after the timing loop failed: other bits than before (%s)", c->desc);
            return 0;
        }
    }
    return 1;
}

static int judge_speed(run_state *r, const timings *t, double bw, double gflops, const char *bw_what,
                       const char *how, double t0);

/* Timing workers, each a fresh process with its own calibration, until the interval decides
 * (faster or slower) or the rounds or the budget are spent; then the verdict. The roofline is
 * the higher of two bandwidth probes, before and after the timing. */
static int speed_gate(run_state *r)
{
    double t0 = mono_s(), bw0 = peak_bw_gbps();
    struct speed_shm *sp = hone_worker_shared_new(sizeof *sp);
    timings *t = calloc(1, sizeof *t);
    int rc = 0;
    if (!sp || !t) {
        reject(r, HONE_GUARD_INTERNAL, "out of memory for the speed gate");
        goto done;
    }
    t->have_cpu = 1;
    for (int round = 0; round < SPEED_ROUNDS; round++) {
        if (cancelled(r)) goto done;
        if (!timing_worker(r, sp, t, "speed", 120)) goto done;
        t->rounds = round + 1;
        double med, lo, hi;
        speedups(r, t, &med, &lo, &hi);
        if (speed_decide(med, lo, hi, r->o->threshold) != 0 || mono_s() - t0 > SPEED_BUDGET_S) break;
    }
    if (cancelled(r)) goto done;
    double bw1 = peak_bw_gbps();
    r->res->ev.bandwidth_gbps_before = bw0;
    r->res->ev.bandwidth_gbps_after = bw1;
    rc = judge_speed(r, t, bw0 > bw1 ? bw0 : bw1, hone_membw_fma_peak_gflops(), "the measured read bandwidth",
                     "caches flushed by clflush", t0);
done:
    hone_worker_shared_free(sp, sizeof *sp);
    free(t);
    return rc;
}

/* ---- the evidence's measurements beside the verdicts (guard/evidence.h) ------------------ */

/* One shape's entry from its interleaved pairs (CPU-time ns where measured): medians, the
 * pairs' speedup and its CI, quantiles, and the fraction of the shape's roofline reached
 * (bytes / bw GB/s or flops / gflops, the higher; 0: that roof unknown). */
static void evidence_shape(hone_evidence_shape *e, const run_state *r, const hone_case *c, const double *inc,
                           const double *cand, int n, double bw, double gflops)
{
    double ratio[MAX_REPS * SPEED_ROUNDS];
    if (n > MAX_REPS * SPEED_ROUNDS) n = MAX_REPS * SPEED_ROUNDS;
    for (int i = 0; i < n; i++) ratio[i] = inc[i] / cand[i];
    snprintf(e->desc, sizeof e->desc, "%s", c->desc);
    e->reps = n;
    e->incumbent_ns = median(inc, n);
    e->candidate_ns = median(cand, n);
    e->speedup = median(ratio, n);
    bootstrap_ci(ratio, n, r->seed + 2, &e->ci_low, &e->ci_high);
    hone_evidence_quantiles(e->incumbent_q, inc, n);
    hone_evidence_quantiles(e->candidate_q, cand, n);
    e->bytes = hone_cases_cost(c, &e->flops);
    double bw_ns = bw > 0 ? e->bytes / bw : 0, fl_ns = gflops > 0 ? e->flops / gflops : 0;
    e->roofline_ns = bw_ns > fl_ns ? bw_ns : fl_ns;
    e->incumbent_roofline = e->roofline_ns > 0 ? e->roofline_ns / e->incumbent_ns : NAN;
    e->candidate_roofline = e->roofline_ns > 0 ? e->roofline_ns / e->candidate_ns : NAN;
}

/* The gate's own shape (first in ev.shape) and the noise of its A/B ratios. */
static void evidence_gate_shape(run_state *r, const timings *t, double bw, double gflops, int preempted)
{
    hone_evidence *ev = &r->res->ev;
    const double *inc = t->have_cpu ? t->inc_cpu : t->inc_ns, *cand = t->have_cpu ? t->cand_cpu : t->cand_ns;
    hone_evidence_shape *e = &ev->shape[0];
    evidence_shape(e, r, hone_cases_timing(&r->main.cs), inc, cand, t->n, bw, gflops);
    e->gate = 1;
    ev->n_shapes = 1;
    double ratio[MAX_REPS * SPEED_ROUNDS];
    for (int i = 0; i < t->n; i++) ratio[i] = inc[i] / cand[i];
    hone_evidence_quantiles(ev->ab_ratio_q, ratio, t->n);
    ev->ab_ratio_iqr_rel = (ev->ab_ratio_q[4] - ev->ab_ratio_q[2]) / ev->ab_ratio_q[3];
    ev->preempted_reps = preempted;
    r->speed_bw = bw;
    r->speed_gflops = gflops;
}

/* The end-to-end gate's decode steps (ns per step, incumbent and candidate) as tokens/s. */
static void evidence_e2e(run_state *r, const double *ti, const double *tc, int n, double med, double lo, double hi)
{
    hone_evidence *ev = &r->res->ev;
    double *rate = malloc(sizeof *rate * (size_t)(n > 0 ? n : 1));
    if (!rate) return;
    for (int i = 0; i < n; i++) rate[i] = 1e9 / ti[i];
    hone_evidence_quantiles(ev->e2e_incumbent_q, rate, n);
    for (int i = 0; i < n; i++) rate[i] = 1e9 / tc[i];
    hone_evidence_quantiles(ev->e2e_candidate_q, rate, n);
    free(rate);
    ev->e2e_incumbent_tok_s = 1e9 / median(ti, n);
    ev->e2e_candidate_tok_s = 1e9 / median(tc, n);
    ev->e2e_ratio_median = med;
    ev->e2e_ratio_ci_low = lo;
    ev->e2e_ratio_ci_high = hi;
    ev->e2e_steps = n;
}

/* After the speed gate passed: every other non-edge shape timed in one worker (SHAPE_REPS
 * pairs each) for the evidence; a failure here is recorded in the gate list, not a verdict. */
static int shapes_timing(run_state *r)
{
    if (r->cuda || r->res->ev.n_shapes != 1) return 0;
    double t0 = mono_s();
    progress(r, "speed-shapes", 0, NULL);
    struct speed_shm *sp = hone_worker_shared_new(sizeof *sp);
    struct shapes_shm *sh = hone_worker_shared_new(sizeof *sh);
    if (sp && sh) {
        memset(sp, 0, sizeof *sp);
        memset(sh, 0, sizeof *sh);
        kworker_arg a = {r, 2, sp, sh};
        hone_worker_opts wo = worker_opts(r, 120, 120);
        hone_worker_result w;
        memset(&w, 0, sizeof w);
        if (hone_worker_run(&w, &wo, kworker, &a) == 0 && w.ok && sh->done) {
            hone_evidence *ev = &r->res->ev;
            for (int k = 0; k < sh->n && ev->n_shapes < HONE_EVIDENCE_MAX_SHAPES; k++) {
                double inc[SHAPE_REPS], cand[SHAPE_REPS];
                for (int i = 0; i < sh->reps; i++) {
                    inc[i] = sh->inc_cpu[k][i] > 0 ? sh->inc_cpu[k][i] : sh->inc_ns[k][i];
                    cand[i] = sh->cand_cpu[k][i] > 0 ? sh->cand_cpu[k][i] : sh->cand_ns[k][i];
                }
                evidence_shape(&ev->shape[ev->n_shapes++], r, &r->main.cs.c[sh->case_i[k]], inc, cand, sh->reps,
                               r->speed_bw, r->speed_gflops);
            }
            gate(r, "speed-shapes", "pass", "%d more shapes timed for the evidence, %d A/B pairs each (%.2f s)",
                 sh->n, sh->reps, mono_s() - t0);
        } else {
            gate(r, "speed-shapes", "skipped", "the per-shape timing worker did not finish: %s (evidence only)",
                 w.ok ? "no result" : w.reason[0] ? w.reason : hone_error_last());
        }
    }
    hone_worker_shared_free(sp, sizeof *sp);
    hone_worker_shared_free(sh, sizeof *sh);
    return 0;
}

/* Shell-quotes s into b (single quotes; ' as '\''), for the reproduce command. */
static size_t put_quoted(char *b, size_t o, size_t cap, const char *s)
{
    int plain = *s != 0;
    for (const char *p = s; *p; p++)
        plain &= (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                 strchr("/._-+=:,", *p) != NULL;
    if (o + 1 >= cap) return o;
    if (plain) {
        int k = snprintf(b + o, cap - o, "%s", s);
        return (size_t)k >= cap - o ? cap - 1 : o + (size_t)k;
    }
    b[o++] = '\'';
    for (; *s && o + 5 < cap; s++) {
        if (*s == '\'') { memcpy(b + o, "'\\''", 4); o += 4; }
        else b[o++] = *s;
    }
    if (o + 1 < cap) b[o++] = '\'';
    b[o] = 0;
    return o;
}

/* The command that runs the same gates on the same inputs: the stored source, the model, the
 * seed and every option that changes a verdict. */
static void evidence_reproduce(run_state *r, hone_store *st)
{
    const hone_guard_opts *o = r->o;
    hone_evidence *ev = &r->res->ev;
    char src[4400], model[4200], *b = ev->reproduce;
    size_t cap = sizeof ev->reproduce, n;
    hone_store_path(st, r->res->hash, r->cuda ? "source.cu" : "source.c", src, sizeof src);
    if (!o->model_path || !realpath(o->model_path, model)) snprintf(model, sizeof model, "%s", o->model_path ? o->model_path : "");
    n = (size_t)snprintf(b, cap, "hone guard");
    if (model[0]) {
        n += (size_t)snprintf(b + n, cap - n, " -m ");
        n = put_quoted(b, n, cap, model);
    }
    n += (size_t)snprintf(b + n, cap - n, " --slot %s --backend %s ", o->slot, o->backend);
    n = put_quoted(b, n, cap, src);
    if (n < cap) n += (size_t)snprintf(b + n, cap - n, " --seed %lld", (long long)ev->seed);
    if (n < cap && o->threshold != 1.05) n += (size_t)snprintf(b + n, cap - n, " --threshold %g", o->threshold);
    if (n < cap && o->reps > 0) n += (size_t)snprintf(b + n, cap - n, " --reps %d", o->reps);
    if (n < cap && o->model_prompts > 0) n += (size_t)snprintf(b + n, cap - n, " --prompts %d", o->model_prompts);
    if (n < cap && o->model_steps > 0) n += (size_t)snprintf(b + n, cap - n, " --steps %d", o->model_steps);
    if (n < cap && o->kernels_dir) { /* the incumbent was what that tree serves */
        char kd[4200];
        n += (size_t)snprintf(b + n, cap - n, " --kernels ");
        n = put_quoted(b, n, cap, realpath(o->kernels_dir, kd) ? kd : o->kernels_dir);
    }
    if (n < cap && o->state_dir) {
        n += (size_t)snprintf(b + n, cap - n, " --state-dir ");
        put_quoted(b, n, cap, o->state_dir);
    }
}

/* The speed verdict on timings in hand, for both backends: the re-check (output 7 against
 * output 0 of every case, canaries and inputs), then the median speedup of the interleaved
 * pairs, its bootstrap CI and the decision (faster, slower, or inconclusive when the interval
 * stays across the threshold), and the roofline: suspect only when the candidate would beat
 * bytes / bandwidth or flops / FMA peak of its shape (bw GB/s, gflops GFLOP/s for one thread;
 * 0: that roof unchecked). how: what was done before each rep, for the report. */
static int judge_speed(run_state *r, const timings *t, double bw, double gflops, const char *bw_what,
                       const char *how, double t0)
{
    if (!recheck_after_timing(r, "speed")) return 0;
    int n = t->n;
    double med, lo, hi;
    speedups(r, t, &med, &lo, &hi);
    double wall_ratio[MAX_REPS * SPEED_ROUNDS];
    int preempted = 0;
    for (int i = 0; i < n; i++) {
        wall_ratio[i] = t->inc_ns[i] / t->cand_ns[i];
        if (t->have_cpu && (t->inc_ns[i] > PREEMPTED_RATIO * t->inc_cpu[i] ||
                            t->cand_ns[i] > PREEMPTED_RATIO * t->cand_cpu[i]))
            preempted++;
    }
    double wall_med = median(wall_ratio, n);
    double inc_ns = median(t->have_cpu ? t->inc_cpu : t->inc_ns, n);
    double cand_ns = median(t->have_cpu ? t->cand_cpu : t->cand_ns, n);
    const hone_case *tc = hone_cases_timing(&r->main.cs);
    double flops, bytes = hone_cases_cost(tc, &flops);
    /* bytes / (GB/s) = ns; the probes are themselves noisy on a shared machine, so a candidate
     * is suspect only when it beats a roof at ROOFLINE_MARGIN x the measured peak */
    double bw_ns = bw > 0 ? bytes / (ROOFLINE_MARGIN * bw) : 0;
    double fl_ns = gflops > 0 ? flops / (ROOFLINE_MARGIN * gflops) : 0;
    double floor_ns = bw_ns > fl_ns ? bw_ns : fl_ns;
    r->res->speedup = med;
    r->res->ci_low = lo;
    r->res->ci_high = hi;
    hone_evidence *ev = &r->res->ev;
    ev->speedup_median = med;
    ev->speedup_ci_low = lo;
    ev->speedup_ci_high = hi;
    ev->ci_level = 0.95;
    ev->incumbent_ns = inc_ns;
    ev->candidate_ns = cand_ns;
    ev->reps = n;
    ev->threshold = r->o->threshold;
    evidence_gate_shape(r, t, bw, gflops, preempted);
    const char *status = "pass";
    int decision = speed_decide(med, lo, hi, r->o->threshold);
    if (floor_ns > 0 && cand_ns < floor_ns) {
        status = "fail";
        reject(r, HONE_GUARD_SUSPECT, "suspect speedup %.2fx on %s: %.0f ns a call beats its roofline of %.0f ns "
               "(%s)", med, tc->desc, cand_ns, floor_ns, bw_ns >= fl_ns ? "bytes moved / 1.5 x the read bandwidth"
                                                                      : "flops / 1.5 x the FMA peak");
    } else if (decision < 0) {
        status = "fail";
        reject(r, HONE_GUARD_SLOWER, "not faster: median speedup %.3fx (95%% CI %.3f-%.3f) on %s; needs >= %.2fx with the CI above 1.0",
               med, lo, hi, tc->desc, r->o->threshold);
    } else if (decision == 0) {
        status = "fail";
        reject(r, HONE_GUARD_INCONCLUSIVE, "inconclusive: median speedup %.3fx, 95%% CI %.3f-%.3f on %s after %d "
               "rounds of timing (%d of %d reps preempted): the interval still spans the threshold %.2fx; run "
               "it again on a quieter machine", med, lo, hi, tc->desc, t->rounds, preempted, n, r->o->threshold);
    }
    cJSON *g = gate(r, "speed", status,
                    "%s: incumbent %.0f ns, candidate %.0f ns per call (%s); median speedup %.3fx, 95%% CI "
                    "[%.3f, %.3f] (wall-time median %.3fx; %d interleaved reps x %d calls in %d rounds, %d "
                    "preempted, %s; threshold %.2fx); roofline floor %.0f ns (%.2f MB at 1.5 x %.1f GB/s, %s; "
                    "%.2f MFLOP at 1.5 x %.1f GFLOP/s); results re-checked after timing (%.2f s)",
                    tc->desc, inc_ns, cand_ns, t->have_cpu ? "thread CPU time" : "wall time", med, lo, hi,
                    wall_med, n, t->inner, t->rounds, preempted, how, r->o->threshold, floor_ns, bytes / 1e6,
                    bw, bw_what, flops / 1e6, gflops, mono_s() - t0);
    cJSON_AddNumberToObject(g, "speedup_median", med);
    cJSON_AddNumberToObject(g, "ci_low", lo);
    cJSON_AddNumberToObject(g, "ci_high", hi);
    cJSON_AddNumberToObject(g, "wall_speedup_median", wall_med);
    cJSON_AddNumberToObject(g, "incumbent_ns", inc_ns);
    cJSON_AddNumberToObject(g, "candidate_ns", cand_ns);
    cJSON_AddStringToObject(g, "clock", t->have_cpu ? "thread CPU time" : "wall time");
    cJSON_AddNumberToObject(g, "reps", n);
    cJSON_AddNumberToObject(g, "rounds", t->rounds);
    cJSON_AddNumberToObject(g, "preempted_reps", preempted);
    cJSON_AddNumberToObject(g, "threshold", r->o->threshold);
    cJSON_AddNumberToObject(g, "roofline_floor_ns", floor_ns);
    cJSON_AddNumberToObject(g, r->cuda ? "peak_gbps" : "peak_read_gbps", bw);
    cJSON_AddNumberToObject(g, "peak_gflops_one_thread", gflops);
    cJSON_AddStringToObject(g, "shape", tc->desc);
    return 0;
}

/* ---- screening (opts.screen) ---------------------------------------------------------------- */


/* One timing worker of reps pairs (opts.reps, else SCREEN_REPS_DEFAULT), the re-check after it,
 * and the estimate into the result: the screen's last gate. Nothing is accepted here. */
static int screen_gate(run_state *r)
{
    double t0 = mono_s();
    struct speed_shm *sp = hone_worker_shared_new(sizeof *sp);
    timings *t = calloc(1, sizeof *t);
    if (!sp || !t) {
        reject(r, HONE_GUARD_INTERNAL, "out of memory for the screen");
        goto done;
    }
    t->have_cpu = 1;
    t->rounds = 1;
    if (!timing_worker(r, sp, t, "screen", 60) || !recheck_after_timing(r, "screen")) goto done;
    double med, lo, hi;
    speedups(r, t, &med, &lo, &hi);
    r->res->speedup = med;
    r->res->ci_low = lo;
    r->res->ci_high = hi;
    const hone_case *tc = hone_cases_timing(&r->main.cs);
    cJSON *g = gate(r, "screen", "pass",
                    "%s: incumbent %.0f ns, candidate %.0f ns per call (thread CPU time); estimated speedup "
                    "%.3fx, 95%% CI [%.3f, %.3f] over %d interleaved reps x %d calls; no model, roofline or "
                    "end-to-end gate: not an acceptance (%.2f s)",
                    tc->desc, median(t->inc_cpu, t->n), median(t->cand_cpu, t->n), med, lo, hi, t->n, t->inner,
                    mono_s() - t0);
    cJSON_AddNumberToObject(g, "speedup_median", med);
    cJSON_AddNumberToObject(g, "ci_low", lo);
    cJSON_AddNumberToObject(g, "ci_high", hi);
    cJSON_AddNumberToObject(g, "reps", t->n);
    r->res->code = HONE_GUARD_SCREENED;
    snprintf(r->res->reason, sizeof r->res->reason, "screened (not accepted): %s tier, estimated %.3fx "
             "(95%% CI %.3f-%.3f, %d reps) on %s", r->res->tier, med, lo, hi, t->n, tc->desc);
    r->verdict_done = 1;
done:
    hone_worker_shared_free(sp, sizeof *sp);
    free(t);
    return 0;
}

/* ---- model parity and end to end ---------------------------------------------------------- */

/* The model gates' prompt set, the same on both backends: P prompts of pre prefill tokens and
 * S teacher-forced decode steps (L = pre + S positions), token ids drawn from the seed. */
typedef struct {
    int P, pre, S, L;
    int64_t V;
    int32_t *tokens;       /* [P][L] */
    size_t lbytes;         /* the logits of the set: [P][L][V] floats */
    hone_ctx_opts co;      /* a context that holds one prompt */
} model_plan;

/* A context for one sequence of `positions` tokens (two fit: the e2e gate runs two). */
static hone_ctx_opts model_ctx_opts(int positions)
{
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    co.n_ctx = positions + 8;
    co.kv_blocks = 2 * ((co.n_ctx + co.kv_block_size - 1) / co.kv_block_size) + 2;
    return co;
}

static int model_plan_new(model_plan *mp, const run_state *r)
{
    memset(mp, 0, sizeof *mp);
    mp->V = hone_model_hparams(r->model)->n_vocab;
    mp->P = r->o->model_prompts > 0 ? r->o->model_prompts : CPU_PROMPTS;
    mp->S = r->o->model_steps > 0 ? r->o->model_steps : CPU_STEPS;
    mp->pre = CPU_PREFILL;
    mp->L = mp->pre + mp->S;
    mp->lbytes = (size_t)mp->P * (size_t)mp->L * (size_t)mp->V * sizeof(float);
    mp->co = model_ctx_opts(mp->L);
    if (!(mp->tokens = malloc(sizeof(int32_t) * (size_t)mp->P * (size_t)mp->L)))
        return hone_error_set(HONE_ENOMEM, "out of memory");
    prng_state = r->seed ^ 0x70ce115ull;
    for (int i = 0; i < mp->P * mp->L; i++) mp->tokens[i] = (int32_t)(prng() % (uint64_t)mp->V);
    return 0;
}

static void model_plan_free(model_plan *mp) { free(mp->tokens); }

typedef struct {
    run_state *r;
    int mode;              /* 0: teacher-forced logits; 1: e2e timing */
    int P, pre, S;
    const int32_t *tokens; /* [P][pre + S] */
    float *logits;         /* shared: [P][pre + S][n_vocab] */
    double *t_inc, *t_cand;/* shared: [S] (mode 1) */
} mworker_arg;

/* One prompt on backend b: the pre tokens as one prefill (logits of every row), then S decode
 * steps of the given tokens (teacher forcing); out: [pre + S][V]. */
static int teacher_forced(hone_backend *b, const int32_t *toks, int pre, int S, float *out, int64_t V)
{
    hone_kv_seq seq = {0};
    int rc = hone_backend_forward(b, &seq, toks, pre, out, 1);
    for (int s = 0; s < S && !rc; s++)
        rc = hone_backend_forward(b, &seq, toks + pre + s, 1, out + (int64_t)(pre + s) * V, 0);
    hone_backend_release(b, &seq);
    return rc;
}

/* Prompts p0 .. P-1 of the set into logits ([P][L][V], the whole set's layout). */
static int teacher_forced_set(hone_backend *b, const int32_t *tokens, int p0, int P, int pre, int S,
                              float *logits, int64_t V)
{
    int L = pre + S, rc = 0;
    for (int p = p0; p < P && !rc; p++)
        rc = teacher_forced(b, tokens + p * L, pre, S, logits + (int64_t)p * L * V, V);
    return rc;
}

static int mworker(void *argp)
{
    mworker_arg *a = argp;
    run_state *r = a->r;
    void *fn = load_candidate(r->so_path, r->symbol);
    if (!fn) return 3;
    hone_ctx_opts co = model_ctx_opts(a->pre + a->S);
    hone_backend *b = NULL;
    if (hone_backend_new(&b, r->model, HONE_DEVICE_CPU, &co) != 0) return 6;
    int64_t V = hone_model_hparams(r->model)->n_vocab;
    hone_slot_table *t = hone_backend_slots(b);
    *t = r->served;
    void *inc = hone_slots_get(t, r->slot);
    if (hone_worker_enter_filter(-1) != 0) return 4;
    if (a->mode == 0) {
        hone_slots_set(t, r->slot, fn);
        return teacher_forced_set(b, a->tokens, 0, a->P, a->pre, a->S, a->logits, V) ? 7 : 0;
    }
    /* e2e: two sequences fed the same tokens, decode steps alternated between the tables */
    hone_kv_seq sa = {0}, sb = {0};
    hone_slots_set(t, r->slot, inc);
    if (hone_backend_forward(b, &sa, a->tokens, a->pre, NULL, 0)) return 7;
    hone_slots_set(t, r->slot, fn);
    if (hone_backend_forward(b, &sb, a->tokens, a->pre, NULL, 0)) return 7;
    float *lg = a->logits;
    for (int s = 0; s < a->S; s++) {
        for (int w = 0; w < 2; w++) {
            int cand = (s & 1) ? 1 - w : w;
            hone_slots_set(t, r->slot, cand ? fn : inc);
            uint64_t t0 = mono_ns();
            if (hone_backend_forward(b, cand ? &sb : &sa, a->tokens + a->pre + s, 1, lg, 0)) return 7;
            uint64_t t1 = mono_ns();
            (cand ? a->t_cand : a->t_inc)[s] = (double)(t1 - t0);
        }
    }
    return 0;
}

static void count_hook(void *user, int id, uint64_t ns, const hone_slot_shape *shape)
{
    (void)ns, (void)shape;
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

/* The model-parity verdict, for both backends: the candidate's logits against the incumbent's
 * over the prompt set (max |dlogit| relative to the logit scale, per-position KL, argmax
 * agreement except at near-ties). */
static int judge_model(run_state *r, const model_plan *mp, const float *inc, const float *cand, double t0)
{
    int64_t V = mp->V;
    int P = mp->P, L = mp->L;
    double scale = 0, max_d = 0, kl_max = 0, kl_sum = 0;
    int64_t agree = 0, counted = 0, ties = 0, npos = (int64_t)P * L, nonfinite = 0;
    for (int64_t i = 0; i < npos * V; i++) {
        if (fabsf(inc[i]) > scale) scale = fabsf(inc[i]);
        if (!isfinite(cand[i])) nonfinite++;
    }
    int bitwise = memcmp(inc, cand, mp->lbytes) == 0;
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
    hone_evidence *ev = &r->res->ev;
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
                    "model%s: %s; max |dlogit| %.3g (bound %.3g = 1e-3 x scale %.3g), KL mean %.3g max %.3g "
                    "(bounds %.0e, %.0e), argmax agreement %lld/%lld (%lld near-ties excluded)%s (%.2f s)",
                    hone_model_name(r->model), P, L, mp->pre, mp->S, r->cuda ? " on the GPU" : "",
                    bitwise ? "bitwise identical logits" : "faithful",
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
    }
    return 0;
}

static int model_gates(run_state *r, int do_e2e)
{
    double t0 = mono_s();
    model_plan mp;
    int rc = 0;
    hone_backend *bk = NULL;
    float *inc = NULL, *cand = NULL;
    if (model_plan_new(&mp, r) != 0) {
        reject(r, HONE_GUARD_INTERNAL, "model gate: %s", hone_error_last());
        goto done;
    }
    int P = mp.P, S = mp.S, pre = mp.pre, L = mp.L;
    int64_t V = mp.V;
    const int32_t *tokens = mp.tokens;
    if (hone_backend_new(&bk, r->model, HONE_DEVICE_CPU, &mp.co) != 0) {
        reject(r, HONE_GUARD_INTERNAL, "model context: %s", hone_error_last());
        goto done;
    }
    *hone_backend_slots(bk) = r->served;
    inc = malloc(mp.lbytes);
    cand = hone_worker_shared_new(mp.lbytes);
    if (!inc || !cand) {
        reject(r, HONE_GUARD_INTERNAL, "out of memory for the model gate");
        goto done;
    }
    /* does the model call this slot at all? A fused slot is not provided by the incumbent
     * table (engine/slots.h): ask with its baseline composition slotted in, then run the
     * incumbent (without it) for every prompt. */
    int counts[HONE_SLOT_MAX] = {0}, p0 = 1;
    hone_slot_table *bt = hone_backend_slots(bk);
    if (!hone_slots_get(bt, r->slot)) {
        hone_slots_set(bt, r->slot, r->inc_fn);
        p0 = 0;
    }
    hone_backend_set_slot_hook(bk, count_hook, counts);
    rc = teacher_forced(bk, tokens, pre, S, inc, V);
    hone_backend_set_slot_hook(bk, NULL, NULL);
    if (!p0) hone_slots_set(bt, r->slot, NULL);
    if (rc != 0) {
        rc = 0;
        reject(r, HONE_GUARD_INTERNAL, "incumbent forward: %s", hone_error_last());
        goto done;
    }
    if (cancelled(r)) goto done;
    if (!counts[r->slot]) {
        gate(r, "model-parity", "pass", "not exercised: %s never calls %s (kernel gates only)",
             hone_model_name(r->model), hone_slots_name(r->slot));
        if (do_e2e) gate(r, "e2e", "pass", "not applicable: the model never calls %s", hone_slots_name(r->slot));
        goto done;
    }
    if (!do_e2e) {
        if (teacher_forced_set(bk, tokens, p0, P, pre, S, inc, V) != 0) {
            reject(r, HONE_GUARD_INTERNAL, "incumbent forward: %s", hone_error_last());
            goto done;
        }
        if (cancelled(r)) goto done;
        mworker_arg a = {r, 0, P, pre, S, tokens, cand, NULL, NULL};
        hone_worker_opts wo = worker_opts(r, 120, 240);
        wo.as_extra = (size_t)4 << 30;
        hone_worker_result w;
        if (hone_worker_run(&w, &wo, mworker, &a) != 0 || !w.ok) {
            if (!w.ok && w.exit_status >= 3 && w.exit_status <= 7 && !w.signal)
                gate(r, "model-parity", "fail", "worker could not run the model (status %d)", w.exit_status);
            worker_failure(r, "model-parity", &w);
            goto done;
        }
        rc = judge_model(r, &mp, inc, cand, t0);
        goto done;
    }
    /* end to end: decode steps alternated between the tables, in rounds until the decode
     * ratio's interval decides: accepted only when its low end clears 1 - the slack */
    {
        const double e2e_slack = r->o->e2e_slack > 0 ? r->o->e2e_slack : E2E_SLACK_DEFAULT;
        int S2 = S < 64 ? 64 : S, n = 0, rounds = 0, decision = 0; /* steps per round */
        double *tt = hone_worker_shared_new(sizeof(double) * 2 * (size_t)S2);
        int32_t *tk = malloc(sizeof(int32_t) * (size_t)(pre + S2));
        float *lg = malloc(sizeof(float) * (size_t)V);
        double ratio[3 * 512], ti_all[3 * 512], tc_all[3 * 512], med = 0, lo = 0, hi = 0;
        if (!tt || !tk || !lg) {
            reject(r, HONE_GUARD_INTERNAL, "out of memory for the end-to-end gate");
        } else {
            for (int i = 0; i < pre + S2; i++) tk[i] = tokens[i % (P * L)];
            int ok = 1;
            for (rounds = 0; rounds < 3 && ok && decision == 0;) {
                mworker_arg a = {r, 1, 1, pre, S2, tk, lg, tt, tt + S2};
                hone_worker_opts wo = worker_opts(r, 120, 240);
                wo.as_extra = (size_t)4 << 30;
                hone_worker_result w;
                ok = hone_worker_run(&w, &wo, mworker, &a) == 0 && w.ok;
                if (!ok) {
                    worker_failure(r, "e2e", &w);
                    break;
                }
                rounds++;
                for (int i = 0; i < S2 && n < 3 * 512; i++, n++) {
                    ratio[n] = tt[i] / tt[S2 + i];
                    ti_all[n] = tt[i];
                    tc_all[n] = tt[S2 + i];
                }
                med = median(ratio, n);
                bootstrap_ci(ratio, n, r->seed + 1, &lo, &hi);
                decision = lo >= 1.0 - e2e_slack ? 1 : hi < 1.0 - e2e_slack ? -1 : 0;
            }
            if (ok) {
                double ti = median(ti_all, n), tc = median(tc_all, n);
                evidence_e2e(r, ti_all, tc_all, n, med, lo, hi);
                cJSON *g = gate(r, "e2e", decision > 0 ? "pass" : "fail",
                                "decode: incumbent %.1f tok/s, candidate %.1f tok/s; median step ratio %.3f, 95%% CI "
                                "[%.3f, %.3f] over %d alternated steps in %d rounds (rule: accepted when the CI's low "
                                "end >= %.2f) (%.2f s)",
                                1e9 / ti, 1e9 / tc, med, lo, hi, n, rounds, 1.0 - e2e_slack, mono_s() - t0);
                cJSON_AddNumberToObject(g, "incumbent_tok_s", 1e9 / ti);
                cJSON_AddNumberToObject(g, "candidate_tok_s", 1e9 / tc);
                cJSON_AddNumberToObject(g, "ratio_median", med);
                cJSON_AddNumberToObject(g, "ci_low", lo);
                cJSON_AddNumberToObject(g, "ci_high", hi);
                cJSON_AddNumberToObject(g, "rounds", rounds);
                cJSON_AddNumberToObject(g, "slack", e2e_slack);
                if (decision < 0)
                    reject(r, HONE_GUARD_E2E_REGRESSION, "end to end: decode %.1f -> %.1f tok/s (ratio %.3f, CI %.3f-%.3f, "
                           "below %.2f)", 1e9 / ti, 1e9 / tc, med, lo, hi, 1.0 - e2e_slack);
                else if (decision == 0)
                    reject(r, HONE_GUARD_INCONCLUSIVE, "inconclusive end to end: decode %.1f -> %.1f tok/s (ratio %.3f, CI "
                           "%.3f-%.3f after %d rounds) does not clear %.2f; run it again on a quieter machine",
                           1e9 / ti, 1e9 / tc, med, lo, hi, rounds, 1.0 - e2e_slack);
            }
        }
        if (tt) hone_worker_shared_free(tt, sizeof(double) * 2 * (size_t)S2);
        free(tk);
        free(lg);
    }
done:
    hone_backend_free(bk);
    free(inc);
    hone_worker_shared_free(cand, mp.lbytes);
    model_plan_free(&mp);
    return rc;
}

/* ---- setup: oracle and incumbent, in this (trusted) process ------------------------------- */

/* The incumbent's errors against the oracle, once d->inc holds its outputs. */
static void case_data_errors(case_data *d)
{
    for (int i = 0; i < d->cs.n; i++) {
        const hone_case *c = &d->cs.c[i];
        hone_oracle_compare_rows(d->inc[i], d->ref[i], c->cmp_rows, c->cmp_row_len, &d->inc_err[i]);
    }
}

/* The slot's cases with inputs from seed and their oracle; with inc_fn (a CPU incumbent) also
 * the incumbent's outputs and errors (CUDA: those come from a worker, then case_data_errors). */
static int case_data_new(case_data *d, const run_state *r, uint64_t seed, void *inc_fn)
{
    int rc = hone_cases_new(&d->cs, r->slot, r->model, seed);
    if (rc) return rc;
    d->ref = calloc((size_t)d->cs.n, sizeof *d->ref);
    d->inc = calloc((size_t)d->cs.n, sizeof *d->inc);
    d->inc_err = calloc((size_t)d->cs.n, sizeof *d->inc_err);
    d->bound = calloc((size_t)d->cs.n, sizeof *d->bound);
    if (!d->ref || !d->inc || !d->inc_err || !d->bound) return hone_error_set(HONE_ENOMEM, "out of memory");
    for (int i = 0; i < d->cs.n; i++) {
        const hone_case *c = &d->cs.c[i];
        d->ref[i] = malloc(sizeof(double) * (size_t)c->out_len);
        d->inc[i] = malloc(sizeof(float) * (size_t)c->out_len);
        if (!d->ref[i] || !d->inc[i]) return hone_error_set(HONE_ENOMEM, "out of memory");
        hone_cases_oracle(c, d->cs.base, d->ref[i]);
        if (d->bound && !(d->bound[i] = malloc(sizeof(double) * (size_t)c->out_len)))
            return hone_error_set(HONE_ENOMEM, "out of memory");
        if (d->bound && !hone_cases_bound(c, d->cs.base, d->ref[i], d->bound[i])) {
            for (int k = 0; k <= i; k++) free(d->bound[k]); /* the slot has none: all or nothing */
            free(d->bound);
            d->bound = NULL;
        }
        if (!inc_fn) continue;
        float *scr = malloc(sizeof(float) * (size_t)(c->scratch_len + 1));
        if (!scr) return hone_error_set(HONE_ENOMEM, "out of memory");
        hone_cases_poison(&d->cs, c, d->inc[i]);
        hone_cases_call(inc_fn, c, d->cs.base, d->inc[i], scr, 0, 1);
        free(scr);
        if (hone_cases_hash_inputs(&d->cs, c) != c->in_hash)
            return hone_error_set(HONE_EINTERNAL, "the incumbent changed its inputs (%s)", c->desc);
    }
    if (inc_fn) case_data_errors(d);
    return 0;
}

#define FRESH_SEED 0xf7e54ca5e5ull /* the fresh set's seed: the run's seed xor this */

/* r->main and r->fresh: the same shapes (so the same layout) with other inputs, which kernel
 * parity moves to r->main's addresses for one more call. inc_fn: the incumbent (CPU), or NULL
 * when a worker computes its outputs (CUDA). */
static int case_sets_new(run_state *r, void *inc_fn)
{
    int rc;
    if ((rc = case_data_new(&r->main, r, r->seed, inc_fn)) != 0 ||
        (rc = case_data_new(&r->fresh, r, r->seed ^ FRESH_SEED, inc_fn)) != 0)
        return rc;
    if (r->fresh.cs.n != r->main.cs.n)
        return hone_error_set(HONE_EINTERNAL, "the fresh case set differs in size");
    for (int i = 0; i < r->fresh.cs.n; i++) {
        size_t lo, hi, lo2, hi2;
        hone_cases_span(&r->main.cs.c[i], &lo, &hi);
        hone_cases_span(&r->fresh.cs.c[i], &lo2, &hi2);
        if (lo != lo2 || hi != hi2)
            return hone_error_set(HONE_EINTERNAL, "the fresh case set is laid out differently (%s)",
                                  r->main.cs.c[i].desc);
        char *d = r->fresh.cs.c[i].desc;
        size_t l = strlen(d);
        snprintf(d + l, sizeof r->fresh.cs.c[i].desc - l, " [fresh inputs, same addresses]");
    }
    return 0;
}

static void case_data_free(case_data *d)
{
    for (int i = 0; i < d->cs.n; i++) {
        if (d->ref) free(d->ref[i]);
        if (d->inc) free(d->inc[i]);
        if (d->bound) free(d->bound[i]);
    }
    free(d->ref);
    free(d->inc);
    free(d->bound);
    free(d->inc_err);
    hone_cases_free(&d->cs);
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

/* ---- CUDA: the execution gates (the GPU work itself runs in workers: guard/cuda_exec.h) ---- */

#define CUDA_PARITY_TIMEOUT_S 30.0 /* a candidate's kernel-parity worker, its CUDA start-up included */
#define CUDA_WORKER_TIMEOUT_S 300.0 /* the incumbent's worker, the model runs, the timing */

/* A CUDA worker that did not end well: the rejection and its reason. */
static void cuda_failure(run_state *r, const char *gname, const hone_cuda_exec_status *st)
{
    hone_guard_code code = HONE_GUARD_INTERNAL;
    const char *what = "the GPU worker failed: ";
    switch (st->end) {
    case HONE_CUDA_EXEC_KILLED: worker_failure(r, gname, &st->w); return;
    case HONE_CUDA_EXEC_LOAD: code = HONE_GUARD_COMPILE; what = "does not load on the GPU: "; break;
    case HONE_CUDA_EXEC_FAULT: code = HONE_GUARD_CRASH; what = "CUDA error: "; break;
    case HONE_CUDA_EXEC_OOB: code = HONE_GUARD_CANARY; what = "out-of-bounds write: "; break;
    case HONE_CUDA_EXEC_MUTATED: code = HONE_GUARD_INPUT_MUTATED; what = ""; break;
    default: break;
    }
    gate(r, gname, "fail", "%s%s", what, st->why);
    reject(r, code, "%s: %s%s", gname, what, st->why);
}

/* The incumbent's outputs for r->main and r->fresh, from a worker (the CUDA incumbent runs only
 * on the GPU), then its errors against the oracle. */
static int cuda_incumbent(run_state *r)
{
    hone_cuda_exec_status st;
    case_data *sets[2] = {&r->main, &r->fresh};
    if (hone_cuda_exec_parity(&st, r->gpu.dev.sm, NULL, r->slot, &r->main.cs, &r->fresh.cs, 1,
                              CUDA_WORKER_TIMEOUT_S) != 0) {
        reject(r, HONE_GUARD_INTERNAL, "cannot start a GPU worker: %s", hone_error_last());
        return 0;
    }
    if (st.end != HONE_CUDA_EXEC_OK) {
        gate(r, "kernel-parity", "fail", "the incumbent kernel failed: %s", st.why);
        reject(r, HONE_GUARD_INTERNAL, "the incumbent CUDA kernel failed: %s", st.why);
        return 0;
    }
    for (int k = 0; k < 2; k++) {
        case_data *d = sets[k];
        for (int i = 0; i < d->cs.n; i++) {
            const hone_case *c = &d->cs.c[i];
            char what[256];
            if (!hone_cases_canaries_ok(&d->cs, c, what, sizeof what) ||
                hone_cases_hash_inputs(&d->cs, c) != c->in_hash) {
                reject(r, HONE_GUARD_INTERNAL, "the incumbent CUDA kernel broke a canary or an input (%s)", c->desc);
                return 0;
            }
            memcpy(d->inc[i], hone_cases_out(&d->cs, c, 0), sizeof(float) * (size_t)c->out_len);
        }
        case_data_errors(d);
    }
    return 0;
}

static int cuda_kernel_parity_gate(run_state *r)
{
    double t0 = mono_s();
    hone_cuda_exec_status st;
    double timeout = r->o->kernel_timeout_s > 0 ? r->o->kernel_timeout_s : CUDA_PARITY_TIMEOUT_S;
    if (hone_cuda_exec_parity(&st, r->gpu.dev.sm, r->kroot, r->slot, &r->main.cs, &r->fresh.cs, 3, timeout) != 0) {
        reject(r, HONE_GUARD_INTERNAL, "cannot start a GPU worker: %s", hone_error_last());
        return 0;
    }
    if (st.end != HONE_CUDA_EXEC_OK) {
        cuda_failure(r, "kernel-parity", &st);
        return 0;
    }
    return judge_parity(r, t0);
}

typedef struct {
    const model_plan *mp;
    float *logits; /* shared with the parent */
} logits_job;

/* In a worker: the prompt set teacher-forced on the worker's CUDA backend. */
static int logits_run(void *user, hone_backend *b)
{
    const logits_job *j = user;
    const model_plan *mp = j->mp;
    return teacher_forced_set(b, mp->tokens, 0, mp->P, mp->pre, mp->S, j->logits, mp->V);
}

/* Model parity on the GPU: the prompt set on a CUDA backend with the incumbent kernels and on
 * one whose kernels directory holds the candidate, each in its own worker, then judge_model. */
static int cuda_model_gate(run_state *r)
{
    double t0 = mono_s();
    model_plan mp;
    float *logits[2] = {NULL, NULL}; /* incumbent, candidate */
    int rc = 0;
    if (model_plan_new(&mp, r) != 0) {
        reject(r, HONE_GUARD_INTERNAL, "model gate: %s", hone_error_last());
        goto done;
    }
    for (int k = 0; k < 2; k++) {
        hone_cuda_exec_status st;
        logits_job job = {&mp, logits[k] = hone_worker_shared_new(mp.lbytes)};
        if (!logits[k] || hone_cuda_exec_model(&st, k ? r->kroot : NULL, r->model, &mp.co, logits_run, &job,
                                                CUDA_WORKER_TIMEOUT_S) != 0) {
            reject(r, HONE_GUARD_INTERNAL, "model gate: %s", hone_error_last());
            goto done;
        }
        if (st.end != HONE_CUDA_EXEC_OK && k == 0) {
            gate(r, "model-parity", "fail", "the incumbent model run failed: %s", st.why);
            reject(r, HONE_GUARD_INTERNAL, "model parity: the incumbent CUDA run failed: %s", st.why);
            goto done;
        }
        if (st.end != HONE_CUDA_EXEC_OK) {
            cuda_failure(r, "model-parity", &st);
            goto done;
        }
    }
    rc = judge_model(r, &mp, logits[0], logits[1], t0);
done:
    for (int k = 0; k < 2; k++) hone_worker_shared_free(logits[k], mp.lbytes);
    model_plan_free(&mp);
    return rc;
}

static int cuda_speed_gate(run_state *r)
{
    double t0 = mono_s();
    timings *t = calloc(1, sizeof *t);
    if (!t) return HONE_ENOMEM;
    int reps = speed_reps(r), inner = 0, rc = 0;
    hone_cuda_exec_status st;
    if (hone_cuda_exec_time(&st, r->gpu.dev.sm, NULL, r->kroot, r->slot, &r->main.cs, reps, t->inc_ns,
                            t->cand_ns, &inner, CUDA_WORKER_TIMEOUT_S) != 0) {
        reject(r, HONE_GUARD_INTERNAL, "cannot start a GPU worker: %s", hone_error_last());
    } else if (st.end != HONE_CUDA_EXEC_OK) {
        cuda_failure(r, "speed", &st);
    } else {
        t->n = reps;
        t->inner = inner;
        t->rounds = 1;
        rc = judge_speed(r, t, r->gpu.dev.peak_gbps, 0, "the device's DRAM peak", "L2 flushed, cudaEvent timing", t0);
    }
    free(t);
    return rc;
}

/* After the compile gates, on a machine with a GPU: the kernels compiled for the device here
 * (NVRTC only), then kernel parity, model parity and speed with the CPU path's judgements.
 * Returns 0 when they ran (a rejection is in r->res; none: accepted), or a negative HONE_E*. */
static int cuda_exec_gates(run_state *r, hone_store *st, const char *src, size_t len)
{
    int rc, sm = r->gpu.dev.sm;
    char dir[4400], why[1200];
    if (!r->o->model_path)
        return hone_error_set(HONE_EINVAL, "a model (-m) is required for the CUDA execution gates");
    if ((rc = hone_model_load(&r->model, r->o->model_path)) != 0) return rc;
    /* every kernel for this device into the cubin cache, which the workers only read */
    if ((rc = hone_cuda_kernels_dir(dir, sizeof dir)) != 0) return rc;
    if (hone_cuda_kernels_compile(dir, sm) != 0) {
        reject(r, HONE_GUARD_INTERNAL, "the incumbent CUDA kernels do not compile for sm_%d: %s", sm,
               hone_error_last());
        return 0;
    }
    if ((rc = hone_cuda_exec_kernels_new(r->kroot, sizeof r->kroot, r->o->slot, src, len)) != 0) return rc;
    snprintf(dir, sizeof dir, "%s/cuda", r->kroot);
    if (hone_cuda_kernels_compile(dir, sm) != 0) {
        snprintf(why, sizeof why, "%s", hone_error_last());
        gate(r, "compile", "fail", "NVRTC for the device (sm_%d, the engine's options): %s", sm, why);
        reject(r, HONE_GUARD_COMPILE, "NVRTC (sm_%d, the engine's options) failed: %s", sm, why);
        return 0;
    }
    /* 4. kernel parity */
    progress(r, "kernel-parity", 0, NULL);
    if ((rc = case_sets_new(r, NULL)) != 0) return rc;
    if ((rc = cuda_incumbent(r)) || r->verdict_done) return rc;
    if ((rc = cuda_kernel_parity_gate(r)) || r->verdict_done) return rc;
    hone_store_set_state(st, r->res->hash, HONE_STORE_KERNEL_PARITY, NULL, NULL);
    /* 5. model parity */
    progress(r, "model-parity", 0, NULL);
    if ((rc = cuda_model_gate(r)) || r->verdict_done) return rc;
    hone_store_set_state(st, r->res->hash, HONE_STORE_MODEL_PARITY, NULL, NULL);
    if (r->o->skip_speed) {
        gate(r, "speed", "skipped", "--skip-speed (testing only)");
        return 0;
    }
    /* 6. speed (the end-to-end decode comparison is the CPU's alone for now) */
    progress(r, "speed", 0, NULL);
    if ((rc = cuda_speed_gate(r)) || r->verdict_done) return rc;
    hone_store_set_state(st, r->res->hash, HONE_STORE_SPEED, NULL, NULL);
    gate(r, "e2e", "skipped", "not built for the CUDA backend: the kernel speed gate decides");
    return 0;
}

/* NVRTC for compute_80 (PTX, scanned), sm_80 and sm_90 (cubins, which must define the entry
 * point), each log and output kept in the store; header: common.cuh's text. A failure is a
 * rejection (r->verdict_done); returns 0. */
static int cuda_compile_gate(run_state *r, hone_store *st, const char *src, const char *header,
                             const char *entry)
{
    char why[512];
    const char *archs[] = {"compute_80", "sm_80", "sm_90"};
    for (int i = 0; i < 3; i++) {
        void *out = NULL;
        size_t n = 0;
        char *log = NULL, logname[64];
        int rc = hone_compile_cuda(&out, &n, &log, src, "candidate.cu", archs[i], header);
        snprintf(logname, sizeof logname, "nvrtc-%s.log", archs[i]);
        if (log) hone_store_write(st, r->res->hash, logname, log, strlen(log));
        if (!rc) {
            char name[64];
            snprintf(name, sizeof name, i == 0 ? "candidate.ptx" : "candidate.%s.cubin", archs[i]);
            hone_store_write(st, r->res->hash, name, out, n);
        }
        int fail = 1;
        if (rc) {
            gate(r, "compile", "fail", "NVRTC %s: %s", archs[i], log ? log : hone_error_last());
            reject(r, HONE_GUARD_COMPILE, "NVRTC (%s) failed: %s", archs[i], log && *log ? log : hone_error_last());
        } else if (i == 0 && !r->o->skip_scan && hone_scan_ptx(out, why, sizeof why) != 0) {
            gate(r, "compile", "fail", "PTX scan: %s", why);
            reject(r, HONE_GUARD_SCAN, "PTX scan: %s", why);
        } else if (i > 0 && hone_cuda_nvrtc_has_symbol(out, n, entry) == 0) {
            gate(r, "compile", "fail", "no entry point %s in the %s cubin", entry, archs[i]);
            reject(r, HONE_GUARD_COMPILE, "no entry point: the kernel must be extern \"C\" __global__ %s", entry);
        } else {
            fail = 0;
        }
        free(log);
        free(out);
        if (fail) return 0;
    }
    return 0;
}

/* CUDA: the scan, the launch line, NVRTC (cuda_compile_gate); then, where a GPU is found (by a
 * worker: this process never initialises CUDA), the execution gates. Returns 0 when the gates
 * ran (a rejection is in r->res; none: accepted), a negative HONE_E* code when the guard could
 * not run. */
static int cuda_gates(run_state *r, hone_store *st, const char *src, size_t len)
{
    char why[512], entry[128], dir[4096], path[4400];
    char *header = NULL;
    if (!r->o->skip_scan && hone_scan_cuda_source(src, why, sizeof why) != 0) {
        gate(r, "scan", "fail", "%s", why);
        reject(r, HONE_GUARD_SCAN, "static scan: %s", why);
        return 0;
    }
    gate(r, "scan", "pass", "CUDA source: no printf, clock/clock64/globaltimer, device malloc/new, asm; "
         "no #include but \"common.cuh\"");
    if (!hone_compile_nvrtc_available(why, sizeof why)) {
        gate(r, "compile", "skipped", "%s", why);
        reject(r, HONE_GUARD_NOT_EVALUATED, "not evaluated: %s", why);
        return 0;
    }
    snprintf(entry, sizeof entry, "hone_cuda_%s", r->o->slot);
    hone_cuda_launch cfg;
    if (hone_cuda_nvrtc_parse_launch(&cfg, src, "candidate.cu") != 0) {
        gate(r, "compile", "fail", "%s", hone_error_last());
        reject(r, HONE_GUARD_COMPILE, "launch configuration: %s", hone_error_last());
        return 0;
    }
    /* the incumbent's common.cuh, the one header a kernel may include (absent: none) */
    if (hone_cuda_kernels_dir(dir, sizeof dir) == 0) {
        snprintf(path, sizeof path, "%s/common.cuh", dir);
        if (hone_file_read(path, &header, NULL) != 0) header = NULL;
    }
    cuda_compile_gate(r, st, src, header, entry);
    free(header);
    if (r->verdict_done) return 0;
    gate(r, "compile", "pass", "NVRTC: PTX (compute_80, scanned), cubins for sm_80 and sm_90 defining %s; "
         "hone-launch block=%d x=%d y=%d smem=%d", entry, cfg.block, cfg.x, cfg.y, cfg.smem);
    hone_store_set_state(st, r->res->hash, HONE_STORE_COMPILED, NULL, NULL);
    hone_cuda_exec_probe(&r->gpu);
    if (!r->gpu.available) {
        gate(r, "execution", "skipped", "skipped: no GPU%s%s", r->gpu.why[0] ? " - " : "", r->gpu.why);
        reject(r, HONE_GUARD_NOT_EVALUATED, "not evaluated: no GPU (compile gates passed)");
        r->res->evaluated = 0;
        return 0;
    }
    return cuda_exec_gates(r, st, src, len);
}

/* The candidate's name in the report and the evidence. */
static const char *source_name(const hone_guard_opts *o)
{
    return o->name ? o->name : "(in memory)";
}

static void write_evidence(run_state *r, hone_store *st, double t_start)
{
    hone_guard_result *res = r->res;
    res->seconds = mono_s() - t_start;
    res->ev.guard_seconds = res->seconds;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "verdict", res->accepted ? "accepted" : res->code == HONE_GUARD_SCREENED ? "screened"
                                             : res->evaluated ? "rejected" : "not evaluated");
    cJSON_AddStringToObject(root, "code", hone_guard_code_name(res->code));
    cJSON_AddStringToObject(root, "reason", res->reason);
    cJSON_AddStringToObject(root, "slot", r->o->slot);
    cJSON_AddStringToObject(root, "backend", r->o->backend);
    cJSON_AddStringToObject(root, "candidate_hash", res->hash);
    if (res->so_hash[0]) cJSON_AddStringToObject(root, "so_hash", res->so_hash);
    cJSON_AddStringToObject(root, "file", source_name(r->o));
    char seed[32]; /* a string: a double cannot hold a 63-bit seed (guard/evidence.h) */
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)r->seed);
    cJSON_AddStringToObject(root, "seed", seed);
    cJSON_AddStringToObject(root, "seed_source", r->o->seed >= 0 ? "--seed (testing)" : "getrandom after the candidate was hashed");
    cJSON_AddStringToObject(root, "tier", res->tier);
    cJSON_AddStringToObject(root, "compile_flags",
                            r->cuda ? "nvrtc " HONE_COMPILE_CUDA_FLAGS : HONE_COMPILE_CPU_FLAGS);
    cJSON_AddNumberToObject(root, "guard_seconds", res->seconds);
    cJSON_AddItemReferenceToObject(root, "gates", r->gates);
    char *rev = NULL;
    if (hone_evidence_to_json(&rev, &res->ev, r->o->slot, r->o->backend) == 0 && rev) {
        cJSON *rj = cJSON_Parse(rev);
        if (rj) cJSON_AddItemToObject(root, "review", rj);
    }
    free(rev);
    char *txt = cJSON_Print(root);
    if (txt) {
        if (st && res->hash[0] && res->code == HONE_GUARD_SCREENED) {
            hone_store_write(st, res->hash, "screen.json", txt, strlen(txt)); /* no verdict state */
        } else if (st && res->hash[0]) {
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

/* The incumbent table: the shipped baselines, with what opts->kernels_dir serves installed
 * through the kernel loader (its self-check and the evidence's object hash: served = vetted).
 * A kernel of the tree the loader refuses is not served, so its baseline is the incumbent. */
static int served_table(run_state *r)
{
    hone_slots_cpu_baseline(&r->served);
    if (!r->o->kernels_dir) return 0;
    hone_kernel_loader_opts ko = HONE_KERNEL_LOADER_OPTS_INIT;
    ko.kernels_dir = r->o->kernels_dir;
    ko.model = r->model;
    ko.quiet = 1;
    int rc = hone_kernel_loader_new(&r->kl, &r->served, &ko);
    if (rc) return rc;
    hone_kernel_state ks = hone_kernel_loader_state(r->kl, r->slot);
    gate(r, "incumbent", "pass", "%s serves %d approved kernel(s), %d refused; %s: %s%s", r->o->kernels_dir,
         hone_kernel_loader_n_installed(r->kl), hone_kernel_loader_n_refused(r->kl), hone_slots_name(r->slot),
         ks == HONE_KERNEL_INSTALLED ? "the served kernel " : ks == HONE_KERNEL_REFUSED ? "refused there, the baseline: "
                                                                                       : "the baseline",
         ks == HONE_KERNEL_BASELINE ? "" : hone_kernel_loader_detail(r->kl, r->slot));
    return 0;
}

int hone_guard_run(hone_guard_result *out, const hone_guard_opts *opts, FILE *report)
{
    double t_start = mono_s();
    memset(out, 0, sizeof *out);
    hone_evidence ev0 = HONE_EVIDENCE_INIT;
    out->ev = ev0;
    out->evaluated = 1;
    out->speedup = out->ci_low = out->ci_high = NAN;
    run_state r;
    memset(&r, 0, sizeof r);
    r.o = opts;
    r.res = out;
    r.rep = opts->quiet ? NULL : report;
    r.gates = cJSON_CreateArray();
    r.cuda = opts->backend && strcmp(opts->backend, "cuda") == 0;
    hone_store *st = NULL;
    const char *src = opts->source;
    size_t len = opts->source_len;
    int rc = 0;
    int cuda = r.cuda;
    if (!opts->slot || !opts->source || !opts->backend || (!cuda && strcmp(opts->backend, "cpu") != 0)) {
        rc = hone_error_set(HONE_EINVAL, "slot, backend (cpu|cuda) and source are required");
        goto done;
    }
    int sid = hone_slots_from_name(opts->slot);
    if (sid < 0) {
        rc = hone_error_set(HONE_EINVAL, "unknown slot '%s'", opts->slot);
        goto done;
    }
    r.slot = (hone_slot_id)sid;
    hone_slots_cpu_symbol(r.slot, r.symbol, sizeof r.symbol);
    if (cuda && opts->screen) {
        rc = hone_error_set(HONE_EINVAL, "screening is for CPU candidates");
        goto done;
    }
    if (!cuda && !opts->model_path) {
        rc = hone_error_set(HONE_EINVAL, "a model (-m) is required for the CPU gates");
        goto done;
    }
    if ((rc = hone_store_open(&st, opts->state_dir)) != 0) goto done;

    /* 1. freeze: hash and store, then draw the seed */
    char inc_path[4400] = "", inc_dir[4096], inc_hash[65] = "";
    if (!cuda) /* the served kernel when the tree has one */
        hone_kernel_loader_source(inc_path, sizeof inc_path, opts->kernels_dir, HONE_SOURCE_DIR, opts->slot);
    else if (hone_cuda_kernels_dir(inc_dir, sizeof inc_dir) == 0) /* $HONE_KERNELS_DIR, as the engine */
        snprintf(inc_path, sizeof inc_path, "%s/%s.cu", inc_dir, opts->slot);
    size_t ilen = 0;
    char *isrc = NULL;
    if (hone_file_read(inc_path, &isrc, &ilen) == 0) hone_sha256_hex(isrc, ilen, inc_hash);
    free(isrc);
    snprintf(out->ev_origin, sizeof out->ev_origin, "%s", opts->origin ? opts->origin : source_name(opts));
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
                opts->backend, source_name(opts), out->hash, (unsigned long long)r.seed,
                opts->seed >= 0 ? " (--seed: testing only)" : " (drawn after hashing)");
    gate(&r, "freeze", "pass", "sha256 %s stored under %s", out->hash, hone_store_dir(st));

    if (cuda) {
        if ((rc = cuda_gates(&r, st, src, len)) != 0) goto done;
        goto verdict;
    }
    /* 2. static scan */
    if (cancelled(&r)) goto verdict;
    progress(&r, "scan", 0, NULL);
    char why[512];
    if (opts->skip_scan) {
        gate(&r, "scan", "skipped", "--skip-scan (testing only)");
    } else if (hone_scan_c_source(src, HONE_SOURCE_DIR, why, sizeof why) != 0) {
        gate(&r, "scan", "fail", "%s", why);
        reject(&r, HONE_GUARD_SCAN, "static scan: %s", why);
        goto verdict;
    } else {
        gate(&r, "scan", "pass", "headers on the whitelist; no asm, system calls, processes, files, clocks, threads or allocation");
    }
    /* 3. compile + ELF */
    progress(&r, "compile", 0, NULL);
    {
        char cmd[8192], so[4400], srcp[4400];
        hone_store_path(st, out->hash, "candidate.so", so, sizeof so);
        hone_store_path(st, out->hash, "source.c", srcp, sizeof srcp);
        snprintf(r.so_path, sizeof r.so_path, "%s", so);
        double tc = mono_s();
        hone_compile_cpu_result cres;
        hone_compile_cpu_opts copts = HONE_COMPILE_CPU_OPTS_INIT;
        copts.src_root = HONE_SOURCE_DIR;
        copts.cancel = opts->cancel;
        int crc = hone_compile_cpu(&cres, srcp, so, &copts);
        if (crc == HONE_ECANCELED && cancelled(&r)) { /* no log of a killed compile either */
            hone_compile_cpu_result_clear(&cres);
            goto verdict;
        }
        const char *log = cres.log;
        snprintf(cmd, sizeof cmd, "%s", cres.cmd);
        if (log) hone_store_write(st, out->hash, "compile.log", log, strlen(log));
        if (crc) {
            gate(&r, "compile", "fail", "%s\n%s", hone_error_last(), log ? log : "");
            reject(&r, HONE_GUARD_COMPILE, "compile failed: %s", log && *log ? log : hone_error_last());
            hone_compile_cpu_result_clear(&cres);
            goto verdict;
        }
        snprintf(out->so_hash, sizeof out->so_hash, "%s", cres.so_hash); /* served = vetted */
        out->ev.so_hash = out->so_hash;
        hone_compile_cpu_result_clear(&cres);
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
    if (cancelled(&r)) goto verdict;
    progress(&r, "kernel-parity", 0, NULL);
    if ((rc = hone_model_load(&r.model, opts->model_path)) != 0) goto done;
    if ((rc = served_table(&r)) != 0) goto done;
    r.inc_fn = hone_slots_get(&r.served, r.slot);
    if (!r.inc_fn) r.inc_fn = hone_slots_desc(r.slot)->cpu_baseline; /* a fused slot the tree does not provide */
    if ((rc = case_sets_new(&r, r.inc_fn)) != 0) goto done;
    if (cancelled(&r)) goto verdict;
    if ((rc = kernel_parity_gate(&r)) != 0) goto done;
    if (r.verdict_done) goto verdict;
    hone_store_set_state(st, out->hash, HONE_STORE_KERNEL_PARITY, NULL, NULL);
    if (opts->screen) { /* the cheap estimate only (screen_gate) */
        if ((rc = screen_gate(&r)) != 0) goto done;
        goto verdict;
    }
    /* 5. model parity */
    if (cancelled(&r)) goto verdict;
    progress(&r, "model-parity", 0, NULL);
    if ((rc = model_gates(&r, 0)) != 0) goto done;
    if (r.verdict_done) goto verdict;
    hone_store_set_state(st, out->hash, HONE_STORE_MODEL_PARITY, NULL, NULL);
    if (opts->skip_speed) {
        gate(&r, "speed", "skipped", "--skip-speed (testing only)");
        goto verdict;
    }
    /* 6. speed: kernel, then end to end */
    if (cancelled(&r)) goto verdict;
    progress(&r, "speed", 0, NULL);
    if ((rc = speed_gate(&r)) != 0) goto done;
    if (r.verdict_done) goto verdict;
    if (!cancelled(&r)) shapes_timing(&r);
    if (cancelled(&r)) goto verdict;
    progress(&r, "e2e", 0, NULL);
    hone_store_set_state(st, out->hash, HONE_STORE_SPEED, NULL, NULL);
    if ((rc = model_gates(&r, 1)) != 0) goto done;

verdict:
    if (!r.verdict_done) cancelled(&r); /* a flag set during the last gate: still no verdict */
    if (out->code == HONE_GUARD_CANCELLED) {
        /* no verdict to record: the store keeps the state reached, nothing else is written */
        out->seconds = mono_s() - t_start;
        if (r.gate_open) progress(&r, r.gate_open, 1, "cancelled");
        if (r.rep) fprintf(r.rep, "verdict: CANCELLED - %s [%.1f s]\n", out->reason, out->seconds);
        goto done;
    }
    if (!r.verdict_done) {
        out->accepted = 1;
        out->code = HONE_GUARD_OK;
        snprintf(out->reason, sizeof out->reason, "accepted: %s tier, %.3fx faster", out->tier, out->speedup);
    }
    if (out->code == HONE_GUARD_NOT_EVALUATED) out->evaluated = 0;
    if (r.gpu.available)
        snprintf(out->ev_device, sizeof out->ev_device, "cuda: %.100s (sm_%d, %d SMs, %.0f GB/s DRAM peak)",
                 r.gpu.dev.name, r.gpu.dev.sm, r.gpu.dev.n_sms, r.gpu.dev.peak_gbps);
    else
        describe_cpu(out->ev_device, sizeof out->ev_device);
    out->ev.device = out->ev_device;
    snprintf(out->ev_model, sizeof out->ev_model, "%s", r.model ? hone_model_name(r.model) : (opts->model_path ? opts->model_path : ""));
    out->ev.model = out->ev_model;
    hone_evidence_machine_detect(&out->ev.machine);
    evidence_reproduce(&r, st);
    if (r.gate_open) progress(&r, r.gate_open, 1, "done"); /* a gate that ended without a line */
    write_evidence(&r, st, t_start);
    if (r.rep)
        fprintf(r.rep, "verdict: %s (%s) - %s [%.1f s]\n",
                out->accepted ? "ACCEPTED" : out->code == HONE_GUARD_SCREENED ? "SCREENED"
                                 : out->evaluated ? "REJECTED" : "NOT EVALUATED",
                hone_guard_code_name(out->code), out->reason, out->seconds);
done:
    case_data_free(&r.main);
    case_data_free(&r.fresh);
    hone_cuda_exec_kernels_free(r.kroot);
    hone_kernel_loader_free(r.kl); /* no backend of the run holds the table any more */
    hone_model_free(r.model);
    hone_store_free(st);
    cJSON_Delete(r.gates);
    return rc;
}
