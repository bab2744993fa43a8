/* Run-time compilation of candidates (see compile.h): the system C compiler in a child
 * process with a timeout, and NVRTC through dlopen. */
#include "compile.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/error.h"

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int hone_compile_cpu(char **out_log, char *cmd, size_t cmd_cap, const char *src_path,
                     const char *so_path, const char *src_root, double timeout_s)
{
    *out_log = NULL;
    const char *cc = getenv("HONE_CC");
    if (!cc || !*cc) cc = "cc";
    char inc[4200];
    snprintf(inc, sizeof inc, "-I%s", src_root);
    const char *argv[24];
    int a = 0;
    argv[a++] = cc;
    char flags[] = HONE_COMPILE_CPU_FLAGS;
    for (char *tok = strtok(flags, " "); tok && a < 16; tok = strtok(NULL, " ")) argv[a++] = tok;
    argv[a++] = inc;
    argv[a++] = "-o";
    argv[a++] = so_path;
    argv[a++] = src_path;
    argv[a] = NULL;
    size_t off = 0;
    for (int i = 0; i < a && cmd; i++) {
        int n = snprintf(cmd + off, off < cmd_cap ? cmd_cap - off : 0, "%s%s", i ? " " : "", argv[i]);
        if (n > 0) off += (size_t)n;
    }
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) return hone_error_set(HONE_EIO, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return hone_error_set(HONE_EIO, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        dup2(pfd[1], 1);
        dup2(pfd[1], 2);
        int dn = open("/dev/null", O_RDONLY);
        if (dn >= 0) dup2(dn, 0);
        execvp(cc, (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", cc, strerror(errno));
        _exit(127);
    }
    close(pfd[1]);
    size_t cap = 4096, n = 0;
    char *log = malloc(cap);
    double t0 = mono_s();
    int killed = 0;
    for (;;) {
        struct pollfd p = {pfd[0], POLLIN, 0};
        int pr = poll(&p, 1, 100);
        if (pr > 0) {
            if (n + 1025 > cap) {
                char *nl = realloc(log, cap *= 2);
                if (!nl) break;
                log = nl;
            }
            ssize_t r = read(pfd[0], log + n, 1024);
            if (r <= 0) break;
            n += (size_t)r;
        }
        if (!killed && mono_s() - t0 > timeout_s) {
            kill(pid, SIGKILL);
            killed = 1;
        }
    }
    close(pfd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (log) log[n] = 0;
    *out_log = log;
    if (killed) return hone_error_set(HONE_EFORMAT, "compiler timed out after %.0f s", timeout_s);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127) return hone_error_set(HONE_EIO, "cannot run the C compiler %s", cc);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return hone_error_set(HONE_EFORMAT, "the C compiler failed (status %d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return 0;
}

/* ---- NVRTC through dlopen ---------------------------------------------------------------- */

typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

static struct {
    int tried, ok;
    char why[256];
    nvrtcResult (*create)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                          const char *const *);
    nvrtcResult (*compile)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*log_size)(nvrtcProgram, size_t *);
    nvrtcResult (*log)(nvrtcProgram, char *);
    nvrtcResult (*cubin_size)(nvrtcProgram, size_t *);
    nvrtcResult (*cubin)(nvrtcProgram, char *);
    nvrtcResult (*ptx_size)(nvrtcProgram, size_t *);
    nvrtcResult (*ptx)(nvrtcProgram, char *);
    nvrtcResult (*destroy)(nvrtcProgram *);
    const char *(*errstr)(nvrtcResult);
} nv;

static void nv_load(void)
{
    if (nv.tried) return;
    nv.tried = 1;
    static const char *const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                        "/usr/local/cuda/lib64/libnvrtc.so", NULL};
    void *h = NULL;
    for (int i = 0; names[i] && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(nv.why, sizeof nv.why, "libnvrtc not found (%s)", dlerror());
        return;
    }
#define SYM(field, name)                                                                     \
    if (!(*(void **)&nv.field = dlsym(h, name))) {                                          \
        snprintf(nv.why, sizeof nv.why, "libnvrtc lacks %s", name);                         \
        return;                                                                              \
    }
    SYM(create, "nvrtcCreateProgram")
    SYM(compile, "nvrtcCompileProgram")
    SYM(log_size, "nvrtcGetProgramLogSize")
    SYM(log, "nvrtcGetProgramLog")
    SYM(cubin_size, "nvrtcGetCUBINSize")
    SYM(cubin, "nvrtcGetCUBIN")
    SYM(ptx_size, "nvrtcGetPTXSize")
    SYM(ptx, "nvrtcGetPTX")
    SYM(destroy, "nvrtcDestroyProgram")
    SYM(errstr, "nvrtcGetErrorString")
#undef SYM
    nv.ok = 1;
}

int hone_compile_nvrtc_available(char *why, size_t cap)
{
    nv_load();
    if (!nv.ok && why) snprintf(why, cap, "%s", nv.why);
    return nv.ok;
}

int hone_compile_cuda(void **out, size_t *out_n, char **out_log, const char *src,
                      const char *name, const char *arch, const char *header)
{
    *out = NULL;
    *out_n = 0;
    *out_log = NULL;
    nv_load();
    if (!nv.ok) return hone_error_set(HONE_EUNSUPPORTED, "NVRTC unavailable: %s", nv.why);
    nvrtcProgram prog = NULL;
    int rc = 0;
    const char *hdr_src[1] = {header}, *hdr_name[1] = {"common.cuh"};
    nvrtcResult r = nv.create(&prog, src, name, header ? 1 : 0, hdr_src, hdr_name);
    if (r != 0) return hone_error_set(HONE_EINTERNAL, "nvrtcCreateProgram: %s", nv.errstr(r));
    char archopt[64];
    snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
    /* the engine's options: what passes here is what the engine runs */
    char flags[sizeof HONE_COMPILE_CUDA_FLAGS];
    const char *opts[8] = {archopt};
    int n_opts = 1 + hone_cuda_nvrtc_flags(opts + 1, 7, flags);
    nvrtcResult cr = nv.compile(prog, n_opts, opts);
    size_t ls = 0;
    nv.log_size(prog, &ls);
    char *log = malloc(ls + 1);
    if (log) {
        log[0] = 0;
        if (ls) nv.log(prog, log);
        log[ls] = 0;
    }
    *out_log = log;
    if (cr != 0) {
        rc = hone_error_set(HONE_EFORMAT, "NVRTC (%s): %s", arch, nv.errstr(cr));
        goto done;
    }
    int is_ptx = strncmp(arch, "compute_", 8) == 0;
    size_t n = 0;
    r = is_ptx ? nv.ptx_size(prog, &n) : nv.cubin_size(prog, &n);
    if (r != 0 || n == 0) {
        rc = hone_error_set(HONE_EINTERNAL, "NVRTC returned no %s", is_ptx ? "PTX" : "cubin");
        goto done;
    }
    char *buf = malloc(n + 1);
    if (!buf) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory");
        goto done;
    }
    r = is_ptx ? nv.ptx(prog, buf) : nv.cubin(prog, buf);
    buf[n] = 0;
    *out = buf;
    *out_n = n;
done:
    nv.destroy(&prog);
    return rc;
}
