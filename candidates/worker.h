/* Isolation: candidate code runs only in a child worker process, never in the engine's.
 * The child gets resource limits (RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE 0, RLIMIT_CORE 0,
 * RLIMIT_NPROC), no network (its own empty network namespace when permitted), no new
 * privileges, and dies with its parent; the parent runs a wall-clock watchdog (SIGKILL on
 * timeout). Before calling candidate code the child locks itself down further with seccomp:
 * strict mode (read/write/exit/sigreturn only) for kernel parity runs, a
 * tighter BPF filter for kernel timing runs (clock_gettime/exit/sigreturn only), or a BPF allow-list applied to
 * every thread (TSYNC) for model runs that need the thread pool. Results come back through
 * memory shared with the parent (hone_worker_shared_new). A crash, hang or limit is reported
 * as a reason ("killed by SIGSEGV", "timed out after 10 s"), never as a failure of the parent. */
#ifndef HONE_WORKER_H
#define HONE_WORKER_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    double timeout_s;      /* wall clock; the child is SIGKILLed after it */
    int cpu_s;             /* RLIMIT_CPU (seconds of CPU, all threads) */
    size_t as_extra;       /* RLIMIT_AS = the address space at fork + this many bytes */
    int no_net;            /* 1: unshare(CLONE_NEWNET) (skipped silently when not permitted) */
    int gpu;               /* 1: the child initialises CUDA, so two limits are left off: RLIMIT_AS
                            * (the driver reserves a unified address range the size of host plus
                            * device memory) and RLIMIT_NPROC (the runtime starts threads); the
                            * others stay. CUDA must not have been initialised in the parent:
                            * a forked child cannot use it then. */
    const int *cancel;     /* non-NULL: while the child runs, the parent polls *cancel (an
                            * atomic load, every 2 ms) and SIGKILLs the child once it is
                            * nonzero (out->cancelled): how a stopping server ends a guard run
                            * within milliseconds instead of waiting for its verdict */
} hone_worker_opts;

#define HONE_WORKER_OPTS_INIT {10.0, 30, (size_t)1 << 30, 1, 0, NULL}

typedef struct {
    int ok;              /* 1: exited normally with status 0 */
    int exit_status;     /* when it exited: its status; else -1 */
    int signal;          /* when killed by a signal: its number; else 0 */
    int timed_out;       /* 1: killed by the watchdog */
    int cancelled;       /* 1: killed because opts->cancel was set (no verdict on the code) */
    double wall_s;
    uintptr_t fault_addr;/* SIGSEGV / SIGBUS: the address it faulted on (CPU workers), else 0 */
    char reason[160];    /* "", "killed by SIGSEGV at address 0x...", "timed out after 10 s",
                          * "exited with status 3", "cancelled" */
} hone_worker_result;

/* Runs fn(arg) in a forked child under opts' limits and waits for it (at most timeout_s).
 * fn's return value is the child's exit status. Returns 0 when the child could be run (whatever
 * became of it: see out), a negative HONE_E* code when fork failed. */
int hone_worker_run(hone_worker_result *out, const hone_worker_opts *opts, int (*fn)(void *arg),
                    void *arg);

/* Memory shared with the children forked afterwards (MAP_SHARED | MAP_ANONYMOUS), zeroed. */
void *hone_worker_shared_new(size_t bytes);
void hone_worker_shared_free(void *p, size_t bytes);

/* In the child: enters SECCOMP_MODE_STRICT. Only read, write, _exit and sigreturn remain
 * (on x86 the TSC and so the vDSO clock are disabled too: see
 * hone_worker_enter_timing). Everything the child needs (memory, the dlopen'ed code with
 * its symbols bound: RTLD_NOW) must be ready before. After it, return from fn normally: the
 * worker ends the process with the thread-exit call strict mode permits. */
int hone_worker_enter_strict(void);

/* In the child: the timing variant of strict mode. Strict mode also disables the TSC on x86
 * kernels (TIF_NOTSC), so the vDSO clock faults under it; the timing harness instead installs a
 * BPF filter that allows only clock_gettime (the vDSO's fallback), sigreturn, exit and
 * exit_group: even read and write are refused. */
int hone_worker_enter_timing(void);

/* In the child: installs a BPF allow-list on every thread of the process (TSYNC): futex,
 * memory (mmap, munmap, mprotect, madvise, brk, mremap), clocks, sched_yield, nanosleep,
 * signal return and masks, gettid/getpid, rseq and set_robust_list (a
 * pool thread that starts after the filter registers itself), write to fd 2 and to write_fd (>= 0), exit and
 * exit_group. Any other call kills the process. */
int hone_worker_enter_filter(int write_fd);

/* "SIGSEGV" for SIGSEGV, ... */
const char *hone_worker_signame(int sig);

#endif
