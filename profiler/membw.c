/* Memory bandwidth probe (STREAM-like read, copy and triad) with pthreads.
 * Kernels use GCC/Clang vector types so that they stream full vector loads whatever the
 * optimisation level; each thread sweeps its own 64-byte-aligned slice of one buffer. */
#include "membw.h"

#include "error.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MEMBW_ALIGN ((size_t)2 << 20) /* 2 MiB: lets the kernel back the buffer with huge pages */
#define MEMBW_BLOCK 16                /* words per kernel step: four 32-byte vectors */

typedef uint64_t v4u64 __attribute__((vector_size(32)));
typedef double v4f64 __attribute__((vector_size(32)));

/* The kernels are the measurement: optimise them even in a -O0 debug build (GCC only;
 * elsewhere they follow the build's level). */
#if defined(__GNUC__) && !defined(__clang__)
#define MEMBW_KERNEL __attribute__((optimize("O3")))
#else
#define MEMBW_KERNEL
#endif

enum { PHASE_READ, PHASE_COPY, PHASE_TRIAD, PHASE_COUNT };

typedef struct {
    uint64_t *buf;        /* (n_threads * chunk) words swept by the read test */
    size_t chunk;         /* words per thread, a multiple of MEMBW_BLOCK */
    double *arr[3];       /* a, b, c for copy and triad: thirds of buf */
    size_t chunk3;        /* elements per thread in each of a, b, c (multiple of MEMBW_BLOCK) */
    int n_threads, reps, copy_triad;
    clockid_t clock; /* CLOCK_MONOTONIC, or the thread's CPU clock (one thread) */
    pthread_barrier_t barrier;
    pthread_mutex_t gate_mu;  /* the gate: workers wait until every thread exists */
    pthread_cond_t gate_cv;
    int gate;                 /* 0 = wait, 1 = go, -1 = abort (a thread failed to start) */
    double *t_start, *t_end; /* (PHASE_COUNT, reps, n_threads) seconds */
} membw_shared;

typedef struct {
    membw_shared *sh;
    int idx;
    uint64_t sink; /* the read sum, stored so the sweep cannot be optimised away */
} membw_worker;

static double now_s(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sums p[0, n) (n a multiple of MEMBW_BLOCK, p 32-byte aligned) with four independent
 * vector accumulators, so loads are never waiting on one add chain. */
MEMBW_KERNEL static uint64_t kernel_read(const uint64_t *p, size_t n)
{
    v4u64 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    for (size_t i = 0; i < n; i += MEMBW_BLOCK) {
        v4u64 x0, x1, x2, x3;
        memcpy(&x0, p + i, sizeof x0);
        memcpy(&x1, p + i + 4, sizeof x1);
        memcpy(&x2, p + i + 8, sizeof x2);
        memcpy(&x3, p + i + 12, sizeof x3);
        s0 += x0;
        s1 += x1;
        s2 += x2;
        s3 += x3;
    }
    v4u64 s = s0 + s1 + s2 + s3;
    return s[0] + s[1] + s[2] + s[3];
}

/* c[i] = a[i]; n a multiple of MEMBW_BLOCK. */
MEMBW_KERNEL static void kernel_copy(double *c, const double *a, size_t n)
{
    for (size_t i = 0; i < n; i += 4) {
        v4f64 x;
        memcpy(&x, a + i, sizeof x);
        memcpy(c + i, &x, sizeof x);
    }
}

/* a[i] = b[i] + q * c[i]; n a multiple of MEMBW_BLOCK. */
MEMBW_KERNEL static void kernel_triad(double *a, const double *b, const double *c, double q, size_t n)
{
    v4f64 vq = {q, q, q, q};
    for (size_t i = 0; i < n; i += 4) {
        v4f64 x, y;
        memcpy(&x, b + i, sizeof x);
        memcpy(&y, c + i, sizeof y);
        x = x + vq * y;
        memcpy(a + i, &x, sizeof x);
    }
}

static void *worker_main(void *arg)
{
    membw_worker *w = arg;
    membw_shared *sh = w->sh;
    int t = w->idx, nt = sh->n_threads;
    pthread_mutex_lock(&sh->gate_mu);
    while (sh->gate == 0) pthread_cond_wait(&sh->gate_cv, &sh->gate_mu);
    int go = sh->gate > 0;
    pthread_mutex_unlock(&sh->gate_mu);
    if (!go) return NULL;

    uint64_t *mine = sh->buf + (size_t)t * sh->chunk;
    for (size_t i = 0; i < sh->chunk; i++) mine[i] = i; /* first touch: pages local to this thread */
    size_t off3 = (size_t)t * sh->chunk3;
    pthread_barrier_wait(&sh->barrier); /* the thirds overlap other threads' read slices */
    if (sh->copy_triad)
        for (int k = 0; k < 3; k++)
            for (size_t i = 0; i < sh->chunk3; i++) sh->arr[k][off3 + i] = 1.0;
    uint64_t sink = 0;
    int n_phases = sh->copy_triad ? PHASE_COUNT : 1;
    for (int ph = 0; ph < n_phases; ph++) {
        for (int r = 0; r < sh->reps; r++) {
            pthread_barrier_wait(&sh->barrier);
            size_t slot = ((size_t)ph * (size_t)sh->reps + (size_t)r) * (size_t)nt + (size_t)t;
            sh->t_start[slot] = now_s(sh->clock);
            if (ph == PHASE_READ)
                sink += kernel_read(mine, sh->chunk);
            else if (ph == PHASE_COPY)
                kernel_copy(sh->arr[2] + off3, sh->arr[0] + off3, sh->chunk3);
            else
                kernel_triad(sh->arr[0] + off3, sh->arr[1] + off3, sh->arr[2] + off3, 3.0, sh->chunk3);
            sh->t_end[slot] = now_s(sh->clock);
        }
    }
    w->sink = sink;
    return NULL;
}

/* Best (shortest) sweep of a phase: per rep, last end minus first start. */
static double best_time(const membw_shared *sh, int ph)
{
    double best = 0.0;
    for (int r = 0; r < sh->reps; r++) {
        size_t base = ((size_t)ph * (size_t)sh->reps + (size_t)r) * (size_t)sh->n_threads;
        double t0 = sh->t_start[base], t1 = sh->t_end[base];
        for (int t = 1; t < sh->n_threads; t++) {
            if (sh->t_start[base + t] < t0) t0 = sh->t_start[base + t];
            if (sh->t_end[base + t] > t1) t1 = sh->t_end[base + t];
        }
        if (r == 0 || t1 - t0 < best) best = t1 - t0;
    }
    return best > 0.0 ? best : 1e-9;
}

int hone_membw_run(hone_membw_result *out, const hone_membw_opts *opts)
{
    int rc = 0, barrier_ok = 0, gate_ok = 0, n_started = 0;
    membw_shared sh;
    memset(&sh, 0, sizeof sh);
    pthread_t *threads = NULL;
    membw_worker *workers = NULL;
    hone_membw_opts o = HONE_MEMBW_OPTS_INIT;
    if (opts) o = *opts;
    memset(out, 0, sizeof *out);

    if (o.buffer_bytes < ((size_t)1 << 20))
        return hone_error_set(HONE_EINVAL, "membw: buffer_bytes %zu is below 1 MiB", o.buffer_bytes);
    if (o.n_threads < 0 || o.n_threads > 1024)
        return hone_error_set(HONE_EINVAL, "membw: n_threads %d must be 0 (all CPUs) or 1..1024", o.n_threads);
    if (o.repetitions < 1 || o.repetitions > 10000)
        return hone_error_set(HONE_EINVAL, "membw: repetitions %d must be 1..10000", o.repetitions);
    if (o.thread_cpu_time && o.n_threads != 1)
        return hone_error_set(HONE_EINVAL, "membw: thread_cpu_time needs n_threads 1, not %d", o.n_threads);
    sh.clock = o.thread_cpu_time ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
    int nt = o.n_threads;
    if (nt == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        nt = n > 0 ? (n > 1024 ? 1024 : (int)n) : 1;
    }

    size_t words = o.buffer_bytes / sizeof(uint64_t);
    sh.chunk = words / (size_t)nt / MEMBW_BLOCK * MEMBW_BLOCK;
    sh.chunk3 = words / 3 / (size_t)nt / MEMBW_BLOCK * MEMBW_BLOCK;
    if (sh.chunk3 == 0)
        return hone_error_set(HONE_EINVAL, "membw: %zu bytes is too small for %d threads", o.buffer_bytes, nt);
    size_t alloc = (words * sizeof(uint64_t) + MEMBW_ALIGN - 1) / MEMBW_ALIGN * MEMBW_ALIGN;
    sh.buf = aligned_alloc(MEMBW_ALIGN, alloc);
    if (!sh.buf) {
        rc = hone_error_set(HONE_ENOMEM, "membw: cannot allocate %zu bytes", alloc);
        goto done;
    }
#ifdef MADV_HUGEPAGE
    madvise(sh.buf, alloc, MADV_HUGEPAGE); /* advisory: failure only costs TLB misses */
#endif
    /* Thirds start at word multiples of MEMBW_BLOCK, so every vector access stays aligned. */
    size_t third = words / 3 / MEMBW_BLOCK * MEMBW_BLOCK;
    for (int k = 0; k < 3; k++) sh.arr[k] = (double *)(void *)(sh.buf + (size_t)k * third);
    sh.n_threads = nt;
    sh.reps = o.repetitions;
    sh.copy_triad = o.copy_triad != 0;
    size_t n_slots = (size_t)PHASE_COUNT * (size_t)sh.reps * (size_t)nt;
    sh.t_start = calloc(n_slots, sizeof *sh.t_start);
    sh.t_end = calloc(n_slots, sizeof *sh.t_end);
    threads = calloc((size_t)nt, sizeof *threads);
    workers = calloc((size_t)nt, sizeof *workers);
    if (!sh.t_start || !sh.t_end || !threads || !workers) {
        rc = hone_error_set(HONE_ENOMEM, "membw: out of memory");
        goto done;
    }
    if (pthread_barrier_init(&sh.barrier, NULL, (unsigned)nt) != 0) {
        rc = hone_error_set(HONE_EINTERNAL, "membw: pthread_barrier_init failed");
        goto done;
    }
    barrier_ok = 1;
    pthread_mutex_init(&sh.gate_mu, NULL);
    pthread_cond_init(&sh.gate_cv, NULL);
    gate_ok = 1;
    for (int t = 0; t < nt; t++) {
        workers[t].sh = &sh;
        workers[t].idx = t;
        if (pthread_create(&threads[t], NULL, worker_main, &workers[t]) != 0) {
            rc = hone_error_set(HONE_EINTERNAL, "membw: pthread_create failed for thread %d of %d", t, nt);
            break;
        }
        n_started++;
    }
    pthread_mutex_lock(&sh.gate_mu); /* open the gate, or send the started ones home */
    sh.gate = rc ? -1 : 1;
    pthread_cond_broadcast(&sh.gate_cv);
    pthread_mutex_unlock(&sh.gate_mu);
    for (int t = 0; t < n_started; t++) pthread_join(threads[t], NULL);
    if (rc) goto done;

    double read_bytes = (double)sh.chunk * (double)nt * sizeof(uint64_t);
    double elem_bytes = (double)sh.chunk3 * (double)nt * sizeof(double);
    out->read_gbps = read_bytes / best_time(&sh, PHASE_READ) * 1e-9;
    if (sh.copy_triad) {
        out->copy_gbps = 2.0 * elem_bytes / best_time(&sh, PHASE_COPY) * 1e-9;
        out->triad_gbps = 3.0 * elem_bytes / best_time(&sh, PHASE_TRIAD) * 1e-9;
    }
    out->n_threads = nt;
    out->buffer_bytes = (size_t)read_bytes;
done:
    if (barrier_ok) pthread_barrier_destroy(&sh.barrier);
    if (gate_ok) {
        pthread_mutex_destroy(&sh.gate_mu);
        pthread_cond_destroy(&sh.gate_cv);
    }
    free(sh.buf);
    free(sh.t_start);
    free(sh.t_end);
    free(threads);
    free(workers);
    return rc;
}

int hone_membw_measure(double *out_read_gbps, const hone_membw_opts *opts)
{
    hone_membw_opts o = HONE_MEMBW_OPTS_INIT;
    if (opts) o = *opts;
    o.copy_triad = 0;
    hone_membw_result r;
    int rc = hone_membw_run(&r, &o);
    *out_read_gbps = rc == 0 ? r.read_gbps : 0.0;
    return rc;
}

/* f32 FMA throughput of one thread, GFLOP/s: 12 independent chains of vector FMAs. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("O3")))
#endif
double hone_membw_fma_peak_gflops(void)
{
    const long iters = 200000;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_s(CLOCK_MONOTONIC);
        float sink;
#if defined(__AVX512F__)
        __m512 acc[12], m = _mm512_set1_ps(0.999999f), k = _mm512_set1_ps(1e-7f);
        for (int j = 0; j < 12; j++) acc[j] = _mm512_set1_ps((float)j);
        for (long i = 0; i < iters; i++)
            for (int j = 0; j < 12; j++) acc[j] = _mm512_fmadd_ps(acc[j], m, k);
        for (int j = 1; j < 12; j++) acc[0] = _mm512_add_ps(acc[0], acc[j]);
        sink = _mm512_reduce_add_ps(acc[0]);
        double flops = (double)iters * 12 * 16 * 2;
#elif defined(__FMA__) && defined(__AVX__)
        __m256 acc[12], m = _mm256_set1_ps(0.999999f), k = _mm256_set1_ps(1e-7f);
        for (int j = 0; j < 12; j++) acc[j] = _mm256_set1_ps((float)j);
        for (long i = 0; i < iters; i++)
            for (int j = 0; j < 12; j++) acc[j] = _mm256_fmadd_ps(acc[j], m, k);
        for (int j = 1; j < 12; j++) acc[0] = _mm256_add_ps(acc[0], acc[j]);
        float lanes[8];
        _mm256_storeu_ps(lanes, acc[0]);
        sink = lanes[0];
        double flops = (double)iters * 12 * 8 * 2;
#else
        float acc[12];
        for (int j = 0; j < 12; j++) acc[j] = (float)j;
        for (long i = 0; i < iters; i++)
            for (int j = 0; j < 12; j++) acc[j] = fmaf(acc[j], 0.999999f, 1e-7f);
        sink = acc[0] + acc[11];
        double flops = (double)iters * 12 * 2;
#endif
        volatile float keep = sink;
        (void)keep;
        double s = now_s(CLOCK_MONOTONIC) - t0;
        if (s > 0 && flops / s * 1e-9 > best) best = flops / s * 1e-9;
    }
    return best;
}
