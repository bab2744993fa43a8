/* Thread pool: a generation counter announces each job; workers spin on it for a short
 * while (a decode step issues hundreds of jobs back to back), then sleep on a condition
 * variable, so an idle server burns no CPU. */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_LIMIT 200000

typedef struct {
    struct hone_pool *pool;
    int index;
} worker;

struct hone_pool {
    int n;                   /* threads including the caller */
    pthread_t *threads;
    worker *workers;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen;         /* bumped once per job */
    atomic_int pending;      /* worker shares not yet finished */
    atomic_int stop;
    hone_pool_fn fn;
    void *arg;
    int nth;
};

static void *worker_main(void *a)
{
    worker *w = a;
    struct hone_pool *p = w->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
               spins < SPIN_LIMIT) {
            cpu_relax();
            spins++;
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load(&p->gen)) == seen) pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        seen = g;
        if (atomic_load(&p->stop)) return NULL;
        if (w->index < p->nth) p->fn(p->arg, w->index, p->nth);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

int hone_pool_new(hone_pool **out, int n_threads)
{
    *out = NULL;
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    if (n_threads > 1024) return hone_error_set(HONE_EINVAL, "too many threads (%d)", n_threads);
    struct hone_pool *p = calloc(1, sizeof *p);
    if (!p) return hone_error_set(HONE_ENOMEM, "out of memory");
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
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
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->gen, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++)
        if (p->threads && p->threads[i]) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->threads);
    free(p->workers);
    free(p);
}

int hone_pool_size(const hone_pool *p) { return p->n; }

void hone_pool_run(hone_pool *p, hone_pool_fn fn, void *arg, int nth)
{
    if (nth <= 0 || nth > p->n) nth = p->n;
    if (nth == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    p->nth = nth;
    /* every worker acknowledges every job, also those past nth, so none can lag a job behind */
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, nth);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) cpu_relax();
}
