/* The engine's thread pool: runs the shares of one slot call on all workers at once.
 * The calling thread is share 0; workers spin briefly between calls, then sleep. */
#ifndef HONE_POOL_H
#define HONE_POOL_H

typedef struct hone_pool hone_pool;

/* Share ith of nth of one job. */
typedef void (*hone_pool_fn)(void *arg, int ith, int nth);

/* n_threads <= 0: hone_pool_default_threads(). */
int hone_pool_new(hone_pool **out, int n_threads);
void hone_pool_free(hone_pool *p);
int hone_pool_size(const hone_pool *p);

/* Runs fn(arg, i, nth) once for every i < nth and returns when every share is done. The
 * pool's threads (the caller included) claim shares until none are left, so nth may exceed
 * the pool size (at most 65535; nth <= 0: one share per thread). Not reentrant: one caller
 * at a time. */
void hone_pool_run(hone_pool *p, hone_pool_fn fn, void *arg, int nth);

/* The CPUs this process may use: the online count, cut to the affinity mask
 * (sched_getaffinity) and to the cgroup CPU quota rounded up (cgroup v2 cpu.max, v1
 * cpu.cfs_quota_us / cpu.cfs_period_us, the tightest on the path to the root). HONE_CGROUP_DIR
 * names one directory to read the quota files from instead (tests, unusual mounts). */
int hone_pool_default_threads(void);

/* The arithmetic of the above: min(online, affinity, ceil(quota)); affinity <= 0 or
 * quota <= 0 mean "no limit". Example: (16, 4, 1.5) -> 2. */
int hone_pool_fit_threads(int online, int affinity, double quota);

/* The CPU quota the files in dir give (cpu.max, else cpu.cfs_quota_us and
 * cpu.cfs_period_us), in CPUs; 0 when unlimited or absent. "150000 100000" -> 1.5. */
double hone_pool_cgroup_cpus(const char *dir);

#endif
