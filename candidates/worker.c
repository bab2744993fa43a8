/* The isolated worker (see worker.h): fork, limits, seccomp, watchdog. */
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/error.h"

static int child_strict; /* in the child: strict mode entered, so only SYS_exit may end it */

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *hone_worker_signame(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    case SIGKILL: return "SIGKILL";
    case SIGSYS: return "SIGSYS";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGTERM: return "SIGTERM";
    case SIGTRAP: return "SIGTRAP";
    case SIGPIPE: return "SIGPIPE";
    default: return "a signal";
    }
}

void *hone_worker_shared_new(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        hone_error_set(HONE_ENOMEM, "shared memory of %zu bytes: %s", bytes, strerror(errno));
        return NULL;
    }
    return p;
}

void hone_worker_shared_free(void *p, size_t bytes)
{
    if (p) munmap(p, bytes ? bytes : 1);
}

static size_t vm_size(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1) pages = 0;
        fclose(f);
    }
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

int hone_worker_enter_strict(void)
{
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0) != 0)
        return hone_error_set(HONE_EUNSUPPORTED, "seccomp strict: %s", strerror(errno));
    child_strict = 1;
    return 0;
}

int hone_worker_enter_filter(int write_fd)
{
#define ALLOW(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        /* x32 ABI numbers have bit 30 set: refuse them outright */
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        ALLOW(SYS_futex), ALLOW(SYS_mmap), ALLOW(SYS_munmap), ALLOW(SYS_mprotect),
        ALLOW(SYS_madvise), ALLOW(SYS_brk), ALLOW(SYS_mremap), ALLOW(SYS_clock_gettime),
        ALLOW(SYS_clock_nanosleep), ALLOW(SYS_nanosleep), ALLOW(SYS_sched_yield),
        ALLOW(SYS_rt_sigreturn), ALLOW(SYS_rt_sigprocmask), ALLOW(SYS_gettid), ALLOW(SYS_getpid),
        ALLOW(SYS_exit), ALLOW(SYS_exit_group), ALLOW(SYS_read),
        /* a pool thread that starts late registers itself: */
        ALLOW(SYS_rseq), ALLOW(SYS_set_robust_list),
        /* write: only to fd 2 or write_fd */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_write, 0, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 2, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)write_fd, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
#undef ALLOW
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return hone_error_set(HONE_EUNSUPPORTED, "no_new_privs: %s", strerror(errno));
    long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog);
    if (r != 0)
        return hone_error_set(HONE_EUNSUPPORTED, "seccomp filter (TSYNC): %s",
                              r > 0 ? "a thread could not be synchronised" : strerror(errno));
    return 0;
}

int hone_worker_enter_timing(void)
{
#define ALLOW(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        ALLOW(SYS_clock_gettime), ALLOW(SYS_rt_sigreturn), ALLOW(SYS_exit), ALLOW(SYS_exit_group),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
#undef ALLOW
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return hone_error_set(HONE_EUNSUPPORTED, "no_new_privs: %s", strerror(errno));
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
        return hone_error_set(HONE_EUNSUPPORTED, "seccomp filter: %s", strerror(errno));
    return 0;
}

/* The fault channel: a shared page the parent maps before fork; the child's SIGSEGV/SIGBUS
 * handler (trusted code, on its own stack) writes the signal and the faulting address there
 * and ends the process, so the parent can say which buffer was read or written out of
 * bounds. A forged entry could only change the wording of a rejection. */
typedef struct {
    volatile int sig;
    volatile uintptr_t addr;
} fault_page;

static fault_page *child_fault;

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (child_fault) {
        child_fault->addr = (uintptr_t)si->si_addr;
        child_fault->sig = sig;
    }
    if (child_strict) syscall(SYS_exit, 128 + sig);
    syscall(SYS_exit_group, 128 + sig);
}

static void child_setup(const hone_worker_opts *o)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    if (o->no_net) (void)unshare(CLONE_NEWNET);
    /* /dev/null on 0-2 and nothing else open: what a candidate prints reaches no one, and it
     * inherits no pipe or file of the parent's */
    int dn = open("/dev/null", O_RDWR);
    if (dn >= 0) {
        dup2(dn, 0);
        dup2(dn, 1);
        dup2(dn, 2);
    }
    syscall(SYS_close_range, 3u, ~0u, 0u);
    if (!o->gpu && child_fault) {
        static char altstack[1 << 16];
        stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
        sigaltstack(&ss, NULL);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fault;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigaction(SIGSEGV, &sa, NULL);
        sigaction(SIGBUS, &sa, NULL);
    }
    struct rlimit r;
    r.rlim_cur = r.rlim_max = (rlim_t)o->cpu_s;
    setrlimit(RLIMIT_CPU, &r);
    r.rlim_cur = r.rlim_max = 0;
    setrlimit(RLIMIT_FSIZE, &r);
    setrlimit(RLIMIT_CORE, &r);
    if (!o->gpu) {
        r.rlim_cur = r.rlim_max = (rlim_t)(vm_size() + o->as_extra);
        setrlimit(RLIMIT_AS, &r);
        /* no new processes (root is exempt from RLIMIT_NPROC; seccomp refuses clone anyway) */
        r.rlim_cur = r.rlim_max = 0;
        setrlimit(RLIMIT_NPROC, &r);
    }
    signal(SIGPIPE, SIG_DFL);
}

int hone_worker_run(hone_worker_result *out, const hone_worker_opts *opts, int (*fn)(void *arg),
                    void *arg)
{
    hone_worker_opts o = HONE_WORKER_OPTS_INIT;
    if (opts) o = *opts;
    memset(out, 0, sizeof *out);
    out->exit_status = -1;
    fflush(NULL);
    fault_page *fp = mmap(NULL, sizeof *fp, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (fp == MAP_FAILED) return hone_error_set(HONE_ENOMEM, "fault page: %s", strerror(errno));
    fp->sig = 0;
    fp->addr = 0;
    double t0 = mono_s();
    pid_t pid = fork();
    if (pid < 0) {
        munmap(fp, sizeof *fp);
        return hone_error_set(HONE_EIO, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        child_fault = fp;
        child_setup(&o);
        int rc = fn(arg);
        if (child_strict) syscall(SYS_exit, rc & 0xff);
        syscall(SYS_exit_group, rc & 0xff);
        for (;;) {}
    }
    int st = 0;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) break;
        int stop = o.cancel && __atomic_load_n(o.cancel, __ATOMIC_ACQUIRE);
        if (stop || mono_s() - t0 > o.timeout_s) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
            if (stop) out->cancelled = 1;
            else out->timed_out = 1;
            break;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    out->wall_s = mono_s() - t0;
    if (out->cancelled) {
        out->signal = SIGKILL;
        snprintf(out->reason, sizeof out->reason, "cancelled");
    } else if (out->timed_out) {
        out->signal = SIGKILL;
        snprintf(out->reason, sizeof out->reason, "timed out after %g s", o.timeout_s);
    } else if (WIFSIGNALED(st)) {
        out->signal = WTERMSIG(st);
        if (out->signal == SIGKILL)
            snprintf(out->reason, sizeof out->reason,
                     "killed by SIGKILL (a forbidden system call under seccomp, or a limit)");
        else if (out->signal == SIGSYS)
            snprintf(out->reason, sizeof out->reason, "killed by SIGSYS (a forbidden system call)");
        else if (out->signal == SIGXCPU)
            snprintf(out->reason, sizeof out->reason, "killed by SIGXCPU (CPU time limit of %d s)", o.cpu_s);
        else
            snprintf(out->reason, sizeof out->reason, "killed by %s", hone_worker_signame(out->signal));
    } else if (WIFEXITED(st) && fp->sig && WEXITSTATUS(st) == 128 + fp->sig) {
        out->signal = fp->sig;
        out->fault_addr = fp->addr;
        snprintf(out->reason, sizeof out->reason, "killed by %s at address %#lx",
                 hone_worker_signame(out->signal), (unsigned long)fp->addr);
    } else if (WIFEXITED(st)) {
        out->exit_status = WEXITSTATUS(st);
        out->ok = out->exit_status == 0;
        if (!out->ok) snprintf(out->reason, sizeof out->reason, "exited with status %d", out->exit_status);
    }
    munmap(fp, sizeof *fp);
    return 0;
}
