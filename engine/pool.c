/* Thread pool: a generation counter announces each job; every thread, the caller included,
 * claims shares from one packed counter until none are left, so a worker the OS has not
 * scheduled costs nothing (the others take its shares). Waiting spins briefly (a decode step
 * issues hundreds of jobs back to back), then yields, then sleeps on a futex, so an idle
 * server burns no CPU and an oversubscribed one (a one-CPU container, a neighbour's load)
 * degrades gracefully instead of spinning against the thread it waits for. */
#include "pool.h"

#include <ctype.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_NS 50000   /* spin this long before yielding */
#define YIELD_NS 200000 /* then yield until this long before sleeping */
#define MAX_SHARES 65535

typedef struct {
    struct hone_pool *pool;
    int index;
} worker;

/* The claim word: generation (32 bits) | share count (16) | next share (16). A thread that
 * claims share k of job g with one CAS knows job g cannot finish (and its fn/arg cannot be
 * overwritten) before it reports share k done. */
#define CLAIM(g, nth, next) (((uint64_t)(g) << 32) | ((uint64_t)(nth) << 16) | (uint64_t)(next))

struct hone_pool {
    int n;                   /* threads including the caller */
    pthread_t *threads;
    worker *workers;
    atomic_uint gen;         /* bumped once per job; workers futex-wait on it */
    atomic_int sleepers;     /* workers inside (or about to enter) futex_wait on gen */
    _Atomic uint64_t claim;
    atomic_uint done;        /* shares finished of the current job; the caller waits on it */
    atomic_int caller_sleeps;
    atomic_int stop;
    hone_pool_fn fn;
    void *arg;
};

static void futex_wait(atomic_uint *addr, unsigned val)
{
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(atomic_uint *addr)
{
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spins, then yields, while *addr == val and the time budget lasts; returns the last value
 * seen (== val when the caller should sleep). */
static unsigned wait_brief(atomic_uint *addr, unsigned val)
{
    unsigned v;
    uint64_t t0 = 0;
    for (unsigned i = 0;; i++) {
        if ((v = atomic_load_explicit(addr, memory_order_acquire)) != val) return v;
        if ((i & 63) == 63) {
            uint64_t t = now_ns();
            if (!t0) t0 = t;
            else if (t - t0 > YIELD_NS) return v;
            else if (t - t0 > SPIN_NS) sched_yield();
        }
        cpu_relax();
    }
}

/* Claims and runs shares of job g until none are left. */
static void run_shares(struct hone_pool *p, unsigned g)
{
    uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
    for (;;) {
        if ((unsigned)(c >> 32) != g) return;
        unsigned nth = (unsigned)(c >> 16) & 0xffff, k = (unsigned)c & 0xffff;
        if (k >= nth) return;
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        p->fn(p->arg, (int)k, (int)nth);
        unsigned d = atomic_fetch_add(&p->done, 1) + 1;
        if (d == nth && atomic_load(&p->caller_sleeps)) futex_wake(&p->done);
        c = atomic_load_explicit(&p->claim, memory_order_acquire);
    }
}

static void *worker_main(void *a)
{
    worker *w = a;
    struct hone_pool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned g = wait_brief(&p->gen, seen);
        while (g == seen) {
            atomic_fetch_add(&p->sleepers, 1);
            if ((g = atomic_load(&p->gen)) == seen) futex_wait(&p->gen, seen);
            atomic_fetch_sub(&p->sleepers, 1);
            g = atomic_load(&p->gen);
        }
        seen = g;
        if (atomic_load(&p->stop)) return NULL;
        run_shares(p, g);
    }
}

/* ---- how many threads fit: the affinity mask and the cgroup CPU quota ---- */

/* Reads the first line of dir/name into buf; 0 on success. */
static int read_line(const char *dir, const char *name, char *buf, size_t cap)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    return ok ? 0 : -1;
}

double hone_pool_cgroup_cpus(const char *dir)
{
    char a[256], b[256];
    if (!read_line(dir, "cpu.max", a, sizeof a)) { /* v2: "max 100000" or "150000 100000" */
        if (!strncmp(a, "max", 3)) return 0;
        long long quota = 0, period = 0;
        if (sscanf(a, "%lld %lld", &quota, &period) == 2 && quota > 0 && period > 0)
            return (double)quota / (double)period;
        return 0;
    }
    if (!read_line(dir, "cpu.cfs_quota_us", a, sizeof a) && /* v1: -1 means unlimited */
        !read_line(dir, "cpu.cfs_period_us", b, sizeof b)) {
        long long quota = atoll(a), period = atoll(b);
        if (quota > 0 && period > 0) return (double)quota / (double)period;
    }
    return 0;
}

/* The tightest quota on the path from this process's cgroup up to the root: a v2 line
 * "0::/a/b" under /sys/fs/cgroup, or v1's "N:...cpu...:/a/b" under /sys/fs/cgroup/cpu,cpuacct
 * (or .../cpu). Inside a container the path is often "/" and the files sit at the mount. */
static double cgroup_cpus_self(void)
{
    const char *env = getenv("HONE_CGROUP_DIR");
    if (env && *env) return hone_pool_cgroup_cpus(env);
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return 0;
    char line[4096], rel[4096] = "", base[64] = "";
    while (fgets(line, sizeof line, f)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        line[strcspn(line, "\n")] = 0;
        *c2 = 0;
        const char *ctrl = c1 + 1;
        if (!*ctrl && !strncmp(line, "0", 1)) {
            if (!*base) { snprintf(base, sizeof base, "/sys/fs/cgroup"); snprintf(rel, sizeof rel, "%s", c2 + 1); }
        } else if (strstr(ctrl, "cpu") && !strstr(ctrl, "cpuset")) {
            snprintf(base, sizeof base, "/sys/fs/cgroup/%s", ctrl);
            if (access(base, F_OK) != 0) snprintf(base, sizeof base, "/sys/fs/cgroup/cpu");
            snprintf(rel, sizeof rel, "%s", c2 + 1);
        }
    }
    fclose(f);
    if (!*base) return 0;
    double best = 0;
    char dir[8192];
    for (;;) { /* this cgroup, then each parent up to the mount */
        snprintf(dir, sizeof dir, "%s%s", base, rel);
        double q = hone_pool_cgroup_cpus(dir);
        if (q > 0 && (best == 0 || q < best)) best = q;
        char *slash = strrchr(rel, '/');
        if (!rel[0] || !strcmp(rel, "/") || !slash) break;
        *slash = 0;
    }
    return best;
}

int hone_pool_fit_threads(int online, int affinity, double quota)
{
    int n = online > 0 ? online : 1;
    if (affinity > 0 && affinity < n) n = affinity;
    if (quota > 0) {
        int q = (int)quota;
        if ((double)q < quota) q++; /* 1.5 CPUs: two threads, each busy 75% */
        if (q < 1) q = 1;
        if (q < n) n = q;
    }
    return n;
}

int hone_pool_default_threads(void)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int affinity = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) affinity = CPU_COUNT(&set);
    return hone_pool_fit_threads(online > 0 ? (int)online : 1, affinity, cgroup_cpus_self());
}

/* ---- the pool ---- */

int hone_pool_new(hone_pool **out, int n_threads)
{
    *out = NULL;
    if (n_threads <= 0) n_threads = hone_pool_default_threads();
    if (n_threads > 1024) return hone_error_set(HONE_EINVAL, "too many threads (%d)", n_threads);
    struct hone_pool *p = calloc(1, sizeof *p);
    if (!p) return hone_error_set(HONE_ENOMEM, "out of memory");
    p->n = n_threads;
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    p->workers = calloc((size_t)n_threads, sizeof *p->workers);
    if (!p->threads || !p->workers) {
        hone_pool_free(p);
        return hone_error_set(HONE_ENOMEM, "out of memory");
    }
    for (int i = 1; i < n_threads; i++) {
        p->workers[i].pool = p;
        p->workers[i].index = i;
        if (pthread_create(&p->threads[i], NULL, worker_main, &p->workers[i]) != 0) {
            p->n = i; /* join the ones started */
            hone_pool_free(p);
            return hone_error_set(HONE_EIO, "cannot start worker thread %d", i);
        }
    }
    *out = p;
    return 0;
}

void hone_pool_free(hone_pool *p)
{
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen, 1);
    futex_wake(&p->gen);
    for (int i = 1; i < p->n; i++)
        if (p->threads && p->threads[i]) pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p->workers);
    free(p);
}

int hone_pool_size(const hone_pool *p) { return p->n; }

void hone_pool_run(hone_pool *p, hone_pool_fn fn, void *arg, int nth)
{
    if (nth <= 0) nth = p->n;
    if (nth > MAX_SHARES) nth = MAX_SHARES;
    if (nth == 1 || p->n == 1) {
        for (int i = 0; i < nth; i++) fn(arg, i, nth);
        return;
    }
    /* the previous job is complete (every share reported done), so no thread reads fn/arg */
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    unsigned g = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
    atomic_store_explicit(&p->claim, CLAIM(g, nth, 0), memory_order_release);
    atomic_store(&p->gen, g);
    if (atomic_load(&p->sleepers) > 0) futex_wake(&p->gen);
    run_shares(p, g);
    unsigned d;
    while ((d = atomic_load(&p->done)) != (unsigned)nth) {
        if (wait_brief(&p->done, d) != d) continue; /* progress: keep spinning */
        atomic_store(&p->caller_sleeps, 1);
        if (atomic_load(&p->done) == d) futex_wait(&p->done, d);
        atomic_store(&p->caller_sleeps, 0);
    }
}
