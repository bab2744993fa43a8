/* Run-time compilation of candidates (see compile.h): the one CPU path (the system C compiler
 * through posix_spawn with a timeout, a size cap and a content key), and NVRTC through dlopen. */
#include "compile.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "candidates/sha256.h"
#include "engine/error.h"
#include "engine/file.h"

#ifndef HONE_SOURCE_DIR
#define HONE_SOURCE_DIR "."
#endif

extern char **environ;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *compiler(void)
{
    const char *cc = getenv("HONE_CC");
    return cc && *cc ? cc : "cc";
}

/* Runs argv[0] (PATH search, no shell) in cwd (NULL: here) in its own process group with stdin
 * /dev/null, files capped at fsize bytes (0: no cap); stdout+stderr into *out_log (malloc'd).
 * *out_status is the wait status; *out_timed_out 1 when the group was killed after timeout_s.
 * 0, or HONE_EIO (with errno's text) when it could not be started. */
static int run_captured(char **out_log, int *out_status, int *out_timed_out, char *const argv[],
                        const char *cwd, double timeout_s, size_t fsize, const int *cancel)
{
    *out_log = NULL;
    *out_status = 0;
    *out_timed_out = 0;
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) return hone_error_set(HONE_EIO, "pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
    if (cwd) posix_spawn_file_actions_addchdir_np(&fa, cwd);
    posix_spawnattr_setpgroup(&at, 0); /* the timeout kills cc1, as and ld with the driver */
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    pid_t pid;
    int serr = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(pfd[1]);
    if (serr) {
        close(pfd[0]);
        return hone_error_set(HONE_EIO, "cannot run the C compiler '%s': %s", argv[0], strerror(serr));
    }
    /* A disk guard: the object is checked against the cap afterwards; this only stops a
     * compiler writing gigabytes first (children started after this inherit it). */
    if (fsize) prlimit(pid, RLIMIT_FSIZE, &(struct rlimit){fsize, fsize}, NULL);
    size_t cap = 4096, n = 0;
    char *log = malloc(cap);
    double t0 = mono_s();
    for (;;) {
        struct pollfd p = {pfd[0], POLLIN, 0};
        int pr = poll(&p, 1, 100);
        if (pr > 0) {
            if (log && n + 1025 > cap) {
                char *nl = realloc(log, cap *= 2);
                if (!nl) { free(log); log = NULL; }
                else log = nl;
            }
            char sink[1024];
            ssize_t r = read(pfd[0], log ? log + n : sink, 1024);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            if (log) n += (size_t)r;
        }
        if (!*out_timed_out && (mono_s() - t0 > timeout_s ||
                                (cancel && __atomic_load_n(cancel, __ATOMIC_ACQUIRE)))) {
            kill(-pid, SIGKILL);
            *out_timed_out = 1;
        }
    }
    close(pfd[0]);
    while (waitpid(pid, out_status, 0) < 0 && errno == EINTR) {}
    if (*out_timed_out) kill(-pid, SIGKILL); /* anything of the group still running */
    if (!log) return hone_error_set(HONE_ENOMEM, "out of memory");
    log[n] = 0;
    *out_log = log;
    return 0;
}

/* The first line of `cc --version`, once per process per compiler name: part of the key, so a
 * compiler upgrade recompiles. */
static int compiler_identity(char *out, size_t cap, const char *cc)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char name[512], line[512];
    pthread_mutex_lock(&mu);
    int rc = 0;
    if (strcmp(name, cc) != 0 || !line[0]) {
        char *log = NULL, *argv[] = {(char *)cc, "--version", NULL};
        int st, to;
        if ((rc = run_captured(&log, &st, &to, argv, NULL, 10.0, 0, NULL)) == 0) {
            if (to || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                rc = hone_error_set(HONE_EIO, "cannot run the C compiler '%s': --version %s", cc,
                                    to ? "timed out" : "failed");
            else {
                snprintf(line, sizeof line, "%.*s", (int)strcspn(log, "\n"), log);
                snprintf(name, sizeof name, "%s", cc);
            }
        }
        free(log);
    }
    if (!rc) snprintf(out, cap, "%s", line);
    pthread_mutex_unlock(&mu);
    return rc;
}

int hone_compile_cpu_compiler(char *out, size_t cap)
{
    char line[512];
    int rc = compiler_identity(line, sizeof line, compiler());
    snprintf(out, cap, "%s: %s", compiler(), rc ? "unknown" : line);
    return rc;
}

const char *const hone_compile_cpu_root_headers[] = {"kernels/cpu/common.h", "engine/dtype.h",
                                                     "engine/kv_layout.h", NULL};

/* The content key (see hone_compile_cpu_result.key); each part NUL-terminated so that no two
 * different inputs concatenate to the same bytes. */
static int content_key(char out[65], const char *cc, const char *src, size_t len, const char *root)
{
    char ident[512], hdr_path[4200];
    int rc = compiler_identity(ident, sizeof ident, cc);
    if (rc) return rc;
    const char *parts[] = {"hone-cpu-compile-2", cc, ident, HONE_COMPILE_CPU_FLAGS, root};
    hone_sha256_ctx c;
    hone_sha256_init(&c);
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) hone_sha256_update(&c, parts[i], strlen(parts[i]) + 1);
    /* the root's headers a kernel may include, each NUL-ended */
    for (int i = 0; hone_compile_cpu_root_headers[i]; i++) {
        snprintf(hdr_path, sizeof hdr_path, "%s/%s", root, hone_compile_cpu_root_headers[i]);
        char *hdr = NULL;
        size_t hlen = 0;
        if (hone_file_read(hdr_path, &hdr, &hlen) != 0) hlen = 0; /* no such header: nothing to hash */
        hone_sha256_update(&c, hdr ? hdr : "", hlen);
        hone_sha256_update(&c, "", 1);
        free(hdr);
    }
    hone_sha256_update(&c, src, len);
    hone_sha256_final_hex(&c, out);
    return 0;
}

/* The size cap on an ELF object's bytes: the file, each section, the loaded sections together. */
static int check_size(const uint8_t *b, size_t n, size_t max, const char *what)
{
    const size_t mib = (size_t)1 << 20;
    if (n > max)
        return hone_error_set(HONE_EFORMAT, "%s: the object is %zu bytes, over the cap of %zu (%zu MiB)",
                              what, n, max, max / mib);
    Elf64_Ehdr eh;
    if (n < sizeof eh || memcmp(b, ELFMAG, SELFMAG) != 0 || b[EI_CLASS] != ELFCLASS64)
        return hone_error_set(HONE_EFORMAT, "%s: the compiler did not produce a 64-bit ELF object", what);
    memcpy(&eh, b, sizeof eh);
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > n ||
        (size_t)eh.e_shnum * sizeof(Elf64_Shdr) > n - eh.e_shoff)
        return hone_error_set(HONE_EFORMAT, "%s: malformed section headers", what);
    const char *names = NULL;
    size_t names_n = 0;
    if (eh.e_shstrndx < eh.e_shnum) {
        Elf64_Shdr ss;
        memcpy(&ss, b + eh.e_shoff + (size_t)eh.e_shstrndx * sizeof ss, sizeof ss);
        if (ss.sh_offset <= n && ss.sh_size <= n - ss.sh_offset) {
            names = (const char *)b + ss.sh_offset;
            names_n = ss.sh_size;
        }
    }
    uint64_t loaded = 0;
    for (size_t i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, b + eh.e_shoff + i * sizeof sh, sizeof sh);
        const char *nm = names && sh.sh_name < names_n ? names + sh.sh_name : "?";
        int nl = names ? (int)strnlen(nm, names_n - (size_t)(nm - names)) : 1;
        if (sh.sh_size > max)
            return hone_error_set(HONE_EFORMAT, "%s: section %.*s is %llu bytes, over the cap of %zu (%zu MiB)",
                                  what, nl, nm, (unsigned long long)sh.sh_size, max, max / mib);
        if (sh.sh_flags & SHF_ALLOC) loaded += sh.sh_size;
    }
    if (loaded > max)
        return hone_error_set(HONE_EFORMAT, "%s: the loaded sections take %llu bytes, over the cap of %zu (%zu MiB)",
                              what, (unsigned long long)loaded, max, max / mib);
    return 0;
}

/* Reads, size-checks and hashes an object. */
static int inspect_object(hone_compile_cpu_result *out, const char *path, size_t max, const char *what)
{
    char *b = NULL;
    size_t n = 0;
    if (hone_file_read(path, &b, &n) != 0) return hone_error_set(HONE_EIO, "cannot read %s", path);
    int rc = check_size((const uint8_t *)b, n, max, what);
    if (!rc) {
        hone_sha256_hex(b, n, out->so_hash);
        out->so_bytes = n;
    }
    free(b);
    return rc;
}

void hone_compile_cpu_result_clear(hone_compile_cpu_result *r)
{
    if (!r) return;
    free(r->log);
    memset(r, 0, sizeof *r);
}

static int write_all(const char *path, const char *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return hone_error_set(HONE_EIO, "cannot create %s: %s", path, strerror(errno));
    while (len) {
        ssize_t w = write(fd, data, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            return hone_error_set(HONE_EIO, "cannot write %s: %s", path, strerror(e));
        }
        data += w;
        len -= (size_t)w;
    }
    close(fd);
    return 0;
}

/* The compiler names the private copy "kernel.c"; its messages should name the file the caller
 * has: each "kernel.c:" becomes "<src_path>:". A new string (the old one is freed), or log. */
static char *rename_in_log(char *log, const char *src_path)
{
    const char *tag = "kernel.c:";
    size_t tl = strlen(tag), pl = strlen(src_path), hits = 0;
    for (const char *p = log; (p = strstr(p, tag)); p += tl) hits++;
    if (!hits) return log;
    char *o = malloc(strlen(log) + hits * (pl + 1) + 1);
    if (!o) return log;
    char *w = o;
    for (const char *p = log, *q; ; p = q + tl) {
        if (!(q = strstr(p, tag))) { strcpy(w, p); break; }
        memcpy(w, p, (size_t)(q - p)), w += q - p;
        memcpy(w, src_path, pl), w += pl;
        *w++ = ':';
    }
    free(log);
    return o;
}

/* Compiles src[len] into so_path (see hone_compile_cpu); out->key already set. */
static int compile_bytes(hone_compile_cpu_result *out, const char *src, size_t len,
                         const char *src_path, const char *so_path, const hone_compile_cpu_opts *o)
{
    static atomic_uint seq;
    const char *cc = compiler();
    const char *root = o->src_root;
    size_t max = o->max_bytes ? o->max_bytes : HONE_COMPILE_CPU_MAX_BYTES;
    double timeout = o->timeout_s > 0 ? o->timeout_s : 60.0;
    char dir[4400], csrc[4500], cso[4500], inc[4200];
    char *log = NULL;
    int rc = 0, made = 0;
    if (o->cancel && __atomic_load_n(o->cancel, __ATOMIC_ACQUIRE))
        return hone_error_set(HONE_ECANCELED, "%s: the compile was cancelled", src_path);
    /* the private directory sits beside so_path, so the rename is within one file system */
    const char *slash = strrchr(so_path, '/');
    int dl = slash ? (int)(slash - so_path) : 1;
    if (snprintf(dir, sizeof dir, "%.*s/.hone-cc.%ld.%u.XXXXXX", dl, slash ? so_path : ".",
                 (long)getpid(), atomic_fetch_add(&seq, 1)) >= (int)sizeof dir)
        return hone_error_set(HONE_ERANGE, "path too long: %s", so_path);
    if (!mkdtemp(dir)) return hone_error_set(HONE_EIO, "cannot create %s: %s", dir, strerror(errno));
    made = 1;
    /* a fixed name: the object records it (STT_FILE), so the bytes must not depend on the path */
    snprintf(csrc, sizeof csrc, "%s/kernel.c", dir);
    snprintf(cso, sizeof cso, "%s/kernel.so", dir);
    snprintf(inc, sizeof inc, "-I%s", root);
    if ((rc = write_all(csrc, src, len))) goto done;

    char flags[] = HONE_COMPILE_CPU_FLAGS;
    char *argv[24];
    int a = 0;
    argv[a++] = (char *)cc;
    for (char *save = NULL, *t = strtok_r(flags, " ", &save); t && a < 18; t = strtok_r(NULL, " ", &save))
        argv[a++] = t;
    argv[a++] = inc;
    argv[a++] = "-o";
    argv[a++] = "kernel.so";
    argv[a++] = "kernel.c";
    argv[a] = NULL;
    snprintf(out->cmd, sizeof out->cmd, "%s " HONE_COMPILE_CPU_FLAGS " %s -o kernel.so kernel.c  "
             "(a copy of %s, into %s)", cc, inc, src_path, so_path);

    int st = 0, to = 0;
    /* files the compiler writes (.s, .o, the object) may be larger than the object: room to spare */
    size_t fsize = 8 * max > ((size_t)64 << 20) ? 8 * max : (size_t)64 << 20;
    if ((rc = run_captured(&log, &st, &to, argv, dir, timeout, fsize, o->cancel))) goto done;
    out->log = log = rename_in_log(log, src_path);
    if (to && o->cancel && __atomic_load_n(o->cancel, __ATOMIC_ACQUIRE)) {
        rc = hone_error_set(HONE_ECANCELED, "%s: the compile was cancelled", src_path);
        goto done;
    }
    if (to) {
        rc = hone_error_set(HONE_EFORMAT, "%s: the compiler timed out after %.0f s", src_path, timeout);
        goto done;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127 && !*log) {
        rc = hone_error_set(HONE_EIO, "cannot run the C compiler '%s'", cc);
        goto done;
    }
    if (strstr(log, "File size limit exceeded") || strstr(log, "File too large") ||
        (WIFSIGNALED(st) && WTERMSIG(st) == SIGXFSZ)) {
        rc = hone_error_set(HONE_EFORMAT, "%s: the compiler's output passed %zu bytes: the object "
                            "would be over the cap of %zu (%zu MiB)", src_path, fsize, max, max >> 20);
        goto done;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        const char *e = strstr(log, "error");
        if (e)
            while (e > log && e[-1] != '\n') e--;
        rc = hone_error_set(HONE_EFORMAT, "%s does not compile (%s " HONE_COMPILE_CPU_FLAGS " -I%s): %.*s%s",
                            src_path, cc, root, e ? (int)strcspn(e, "\n") : 0, e ? e : "",
                            e ? "" : "the compiler failed");
        goto done;
    }
    if ((rc = inspect_object(out, cso, max, src_path))) goto done;
    if (rename(cso, so_path) != 0)
        rc = hone_error_set(HONE_EIO, "cannot move the object to %s: %s", so_path, strerror(errno));
done:
    if (!out->log) free(log);
    if (made) {
        unlink(csrc);
        unlink(cso);
        rmdir(dir);
    }
    return rc;
}

/* The common start of both entry points: options with their defaults, the source read once, its key. */
static int prepare(hone_compile_cpu_result *out, hone_compile_cpu_opts *o, char **src, size_t *len,
                   const char *src_path, const hone_compile_cpu_opts *opts)
{
    *o = opts ? *opts : (hone_compile_cpu_opts)HONE_COMPILE_CPU_OPTS_INIT;
    if (!o->src_root) o->src_root = HONE_SOURCE_DIR;
    memset(out, 0, sizeof *out);
    if (hone_file_read(src_path, src, len) != 0)
        return hone_error_set(HONE_EIO, "cannot read %s: %s", src_path, strerror(errno));
    return content_key(out->key, compiler(), *src, *len, o->src_root);
}

int hone_compile_cpu(hone_compile_cpu_result *out, const char *src_path, const char *so_path,
                     const hone_compile_cpu_opts *opts)
{
    hone_compile_cpu_opts o;
    char *src = NULL;
    size_t len = 0;
    int rc = prepare(out, &o, &src, &len, src_path, opts);
    if (!rc) rc = compile_bytes(out, src, len, src_path, so_path, &o);
    free(src);
    return rc;
}

static int mkdir_p(const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return hone_error_set(HONE_ERANGE, "path too long: %s", path);
    for (char *p = tmp + 1;; p++)
        if (*p == '/' || !*p) {
            char c = *p;
            *p = 0;
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
                return hone_error_set(HONE_EIO, "cannot create %s: %s", tmp, strerror(errno));
            if (!(*p = c)) break;
        }
    return 0;
}

int hone_compile_cpu_cached(hone_compile_cpu_result *out, char *so_path, size_t cap,
                            const char *src_path, const char *cache_dir,
                            const hone_compile_cpu_opts *opts)
{
    hone_compile_cpu_opts o;
    char *src = NULL;
    size_t len = 0;
    int rc = prepare(out, &o, &src, &len, src_path, opts);
    if (rc || (rc = mkdir_p(cache_dir))) goto done;
    const char *base = strrchr(src_path, '/');
    base = base ? base + 1 : src_path;
    if (snprintf(so_path, cap, "%s/%.*s-%.16s.so", cache_dir, (int)strcspn(base, "."), base, out->key) >= (int)cap) {
        rc = hone_error_set(HONE_ERANGE, "cache path too long: %s", cache_dir);
        goto done;
    }
    if (access(so_path, R_OK) == 0) { /* compiled before under the same key */
        out->cached = 1;
        snprintf(out->cmd, sizeof out->cmd, "(reused %s)", so_path);
        rc = inspect_object(out, so_path, o.max_bytes ? o.max_bytes : HONE_COMPILE_CPU_MAX_BYTES, so_path);
        goto done;
    }
    rc = compile_bytes(out, src, len, src_path, so_path, &o);
done:
    free(src);
    return rc;
}

int hone_compile_file_hash(char out[65], const char *path)
{
    char *b = NULL;
    size_t n = 0;
    if (hone_file_read(path, &b, &n) != 0) return hone_error_set(HONE_EIO, "cannot read %s", path);
    hone_sha256_hex(b, n, out);
    free(b);
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
