/* Memory bandwidth probe: the roofline the CPU profiler and benchmarks compare against.
 * STREAM-like: a buffer well above the last-level cache, split across threads, each
 * sweeping its slice; the best of several repetitions, in GB/s (1e9 bytes per second). */
#ifndef HONE_MEMBW_H
#define HONE_MEMBW_H

#include <stddef.h>

typedef struct {
    size_t buffer_bytes; /* total working set; default 512 MiB; at least 1 MiB */
    int n_threads;       /* 0 = every online CPU; otherwise 1..1024 */
    int repetitions;     /* sweeps timed; the best one is reported; >= 1; default 5 */
    int copy_triad;      /* also time STREAM copy and triad (three arrays of buffer/3) */
    int thread_cpu_time; /* time each sweep by the thread's CPU clock, not the wall clock (needs
                          * n_threads == 1): a figure preemption by other tenants cannot lower, to
                          * compare with kernel timings taken on the same clock (the guard's) */
} hone_membw_opts;

#define HONE_MEMBW_OPTS_INIT \
    {.buffer_bytes = (size_t)512 << 20, .n_threads = 0, .repetitions = 5, .copy_triad = 1, .thread_cpu_time = 0}

typedef struct {
    double read_gbps;    /* sum of every 8-byte word of the buffer: bytes read / time */
    double copy_gbps;    /* c[i] = a[i], counted as 2 * 8 bytes per element (as STREAM; the
                          * write-allocate read of c is real traffic but not counted); 0 if off */
    double triad_gbps;   /* a[i] = b[i] + q * c[i], counted as 3 * 8 bytes per element; 0 if off */
    int n_threads;       /* threads actually used */
    size_t buffer_bytes; /* bytes actually swept by the read test */
} hone_membw_result;

/* Measures sustained memory bandwidth. Allocates the buffer (transparent huge pages
 * requested where available), has each thread touch its own slice first (so pages are
 * local on NUMA machines and no page faults are timed), then times `repetitions` sweeps,
 * all threads starting together at a barrier; a sweep's time is from the first thread's
 * start to the last thread's end. The read kernel sums 64-bit words into several
 * independent accumulators so that it vectorises. HONE_EINVAL for bad options,
 * HONE_ENOMEM if the buffer cannot be allocated, HONE_EINTERNAL if threads fail. */
int hone_membw_run(hone_membw_result *out, const hone_membw_opts *opts);

/* The read figure only (opts may be NULL for the defaults; copy/triad are skipped):
 *   double gbps; if (hone_membw_measure(&gbps, NULL) == 0) printf("%.1f GB/s\n", gbps); */
int hone_membw_measure(double *out_read_gbps, const hone_membw_opts *opts);

/* The f32 FMA throughput of the calling thread, GFLOP/s: 12 independent chains of the widest
 * vector FMAs this build has, best of 3 runs of about 2.4 M FMAs each (a few ms). */
double hone_membw_fma_peak_gflops(void);

#endif
