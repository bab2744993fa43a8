/* The engine's thread pool: runs the shares of one slot call on all workers at once.
 * The calling thread is share 0; workers spin briefly between calls, then sleep. */
#ifndef HONE_POOL_H
#define HONE_POOL_H

typedef struct hone_pool hone_pool;

/* Share ith of nth of one job. */
typedef void (*hone_pool_fn)(void *arg, int ith, int nth);

/* n_threads <= 0: the number of online CPUs. */
int hone_pool_new(hone_pool **out, int n_threads);
void hone_pool_free(hone_pool *p);
int hone_pool_size(const hone_pool *p);

/* Runs fn(arg, i, nth) for i < nth on nth threads (nth <= pool size; nth <= 0: all) and
 * returns when every share is done. Not reentrant: one caller at a time. */
void hone_pool_run(hone_pool *p, hone_pool_fn fn, void *arg, int nth);

#endif
