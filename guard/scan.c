/* Static checks of candidates (see scan.h): the C source scanned after the preprocessor ran,
 * the object handed to the verifier (candidates/verify.c), the CUDA source and PTX. */
#include "scan.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "candidates/compile.h"
#include "candidates/verify.h"
#include "engine/error.h"
#include "engine/file.h"

/* the system headers a C candidate may include; its "..." includes: hone_compile_cpu_root_headers */
static const char *const C_HEADERS[] = {"<stdint.h>", "<stddef.h>", "<math.h>", "<string.h>",
                                        "<float.h>", "<stdbool.h>", "<immintrin.h>", NULL};

typedef struct { const char *name; const char *what; } banned;

static const banned C_BANNED[] = {
    {"asm", "inline assembly"}, {"__asm", "inline assembly"}, {"__asm__", "inline assembly"},
    {"syscall", "system calls"}, {"fork", "processes"}, {"vfork", "processes"},
    {"clone", "processes"}, {"execl", "processes"}, {"execv", "processes"}, {"execve", "processes"},
    {"execvp", "processes"}, {"execlp", "processes"}, {"system", "processes"}, {"popen", "processes"},
    {"kill", "processes"}, {"raise", "processes"}, {"signal", "processes"},
    {"exit", "process exit"}, {"_exit", "process exit"}, {"_Exit", "process exit"},
    {"abort", "process exit"}, {"quick_exit", "process exit"}, {"atexit", "process exit"},
    {"fopen", "files"}, {"open", "files"}, {"openat", "files"}, {"creat", "files"},
    {"read", "files"}, {"write", "files"}, {"fwrite", "files"}, {"fread", "files"},
    {"printf", "output"}, {"fprintf", "output"}, {"puts", "output"}, {"putchar", "output"},
    {"socket", "network"}, {"connect", "network"}, {"bind", "network"}, {"sendto", "network"},
    {"clock", "clocks"}, {"clock_gettime", "clocks"}, {"time", "clocks"},
    {"gettimeofday", "clocks"}, {"rdtsc", "clocks"}, {"__rdtsc", "clocks"}, {"__rdtscp", "clocks"},
    {"_rdtsc", "clocks"}, {"rdtscp", "clocks"}, {"__builtin_ia32_rdtsc", "clocks"},
    {"__builtin_ia32_rdtscp", "clocks"}, {"__builtin_readcyclecounter", "clocks"},
    {"_rdpmc", "clocks"}, {"__rdpmc", "clocks"},
    {"malloc", "allocation"}, {"calloc", "allocation"}, {"realloc", "allocation"},
    {"free", "allocation"}, {"aligned_alloc", "allocation"}, {"posix_memalign", "allocation"},
    {"alloca", "allocation"}, {"__builtin_alloca", "allocation"}, {"mmap", "allocation"},
    {"_Thread_local", "threads"}, {"thread_local", "threads"}, {"__thread", "threads"},
    {"dlopen", "loading code"}, {"dlsym", "loading code"}, {"getenv", "environment"},
    {"environ", "environment"}, {"setjmp", "control flow"}, {"longjmp", "control flow"},
    {"constructor", "load-time code"}, {"destructor", "load-time code"},
    {"__builtin_frame_address", "stack inspection"}, {"__builtin_return_address", "stack inspection"},
    {"__builtin_trap", "process exit"}, {"_mm_clflush", "cache control"},
    {"_mm_clflushopt", "cache control"}, {"__sync_synchronize", "atomics"},
    {"_Atomic", "atomics"}, {"__seg_fs", "thread pointer"}, {"__seg_gs", "thread pointer"},
    {NULL, NULL}};

/* Identifier prefixes banned wholesale. */
static const banned C_BANNED_PREFIX[] = {{"pthread_", "threads"}, {"thrd_", "threads"},
                                         {"mtx_", "threads"}, {"__atomic_", "atomics"},
                                         {"__sync_", "atomics"}, {"exec", "processes"},
                                         {"sys_", "system calls"}, {NULL, NULL}};

static int fail(char *why, size_t cap, int line, const char *fmt, const char *a, const char *b)
{
    char msg[256];
    snprintf(msg, sizeof msg, fmt, a, b);
    snprintf(why, cap, "line %d: %s", line, msg);
    return HONE_EINVAL;
}

/* Copies src with comments and string/char literals blanked (newlines kept). */
static char *strip(const char *src)
{
    size_t n = strlen(src);
    char *o = malloc(n + 1);
    if (!o) return NULL;
    size_t i = 0;
    while (i < n) {
        if (src[i] == '/' && src[i + 1] == '*') {
            o[i] = o[i + 1] = ' ';
            i += 2;
            while (i < n && !(src[i] == '*' && src[i + 1] == '/')) {
                o[i] = src[i] == '\n' ? '\n' : ' ';
                i++;
            }
            if (i < n) o[i] = o[i + 1] = ' ', i += 2;
        } else if (src[i] == '/' && src[i + 1] == '/') {
            while (i < n && src[i] != '\n') o[i++] = ' ';
        } else if (src[i] == '"' || src[i] == '\'') {
            char q = src[i];
            o[i] = src[i];
            i++;
            while (i < n && src[i] != q && src[i] != '\n') {
                if (src[i] == '\\' && i + 1 < n) o[i] = ' ', i++;
                o[i] = ' ';
                i++;
            }
            if (i < n) o[i] = src[i], i++;
        } else {
            o[i] = src[i];
            i++;
        }
    }
    o[n] = 0;
    return o;
}

/* One identifier against the banned lists; `__x__` is also judged as `x` (GCC reads
 * `__constructor__` as `constructor`). */
static int check_identifier(const char *id, int line, char *why, size_t cap)
{
    char inner[128];
    size_t n = strlen(id);
    const char *alt = NULL;
    if (n > 4 && n < sizeof inner && strncmp(id, "__", 2) == 0 && strcmp(id + n - 2, "__") == 0) {
        memcpy(inner, id + 2, n - 4);
        inner[n - 4] = 0;
        alt = inner;
    }
    for (int pass = 0; pass < 2; pass++) {
        const char *s = pass ? alt : id;
        if (!s) continue;
        for (int i = 0; C_BANNED[i].name; i++)
            if (strcmp(s, C_BANNED[i].name) == 0)
                return fail(why, cap, line, "forbidden identifier '%s' (%s)", id, C_BANNED[i].what);
        for (int i = 0; C_BANNED_PREFIX[i].name; i++)
            if (strncmp(s, C_BANNED_PREFIX[i].name, strlen(C_BANNED_PREFIX[i].name)) == 0)
                return fail(why, cap, line, "forbidden identifier '%s' (%s)", id, C_BANNED_PREFIX[i].what);
    }
    return 0;
}

/* The directives of the original text: headers on the whitelist, only the harmless
 * directives, no #include after a #define or #undef (a macro could rewrite a header's text,
 * which the token scan trusts), no trigraphs or %: digraphs (a `??=include` or
 * `%:include` is an #include the line scan would not see). */
static int scan_directives(const char *src, const char *s, char *why, size_t cap)
{
    int rc = 0, line = 1, defined = 0;
    for (const char *t = src; *t && !rc; t++) {
        if (*t == '\n') line++;
        if (t[0] == '?' && t[1] == '?' && t[2] && strchr("=()/'<>!-", t[2]))
            rc = fail(why, cap, line, "trigraph '?\?%s' not allowed%s", (char[]){t[2], 0}, "");
    }
    line = 1;
    for (const char *t = s; *t && !rc; t++) {
        if (*t == '\n') line++;
        if (t[0] == '%' && t[1] == ':') rc = fail(why, cap, line, "digraph '%%:' not allowed%s%s", "", "");
    }
    line = 1;
    const char *p = s;
    while (*p && !rc) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *q = p;
        while (q < p + len && isspace((unsigned char)*q)) q++;
        if (q < p + len && *q == '#') {
            q++;
            while (q < p + len && isspace((unsigned char)*q)) q++;
            char dir[32] = {0};
            int k = 0;
            while (q < p + len && isalpha((unsigned char)*q) && k < 31) dir[k++] = *q++;
            if (strcmp(dir, "include") == 0) {
                while (q < p + len && isspace((unsigned char)*q)) q++;
                /* the stripped copy blanked the quoted name: read it from the original */
                const char *orig = src + (q - s);
                char hdr[256] = {0};
                int h = 0;
                char close = *orig == '<' ? '>' : '"';
                if (*orig == '<' || *orig == '"') {
                    hdr[h++] = *orig++;
                    while (*orig && *orig != close && *orig != '\n' && h < 250) hdr[h++] = *orig++;
                    if (*orig == close) hdr[h++] = close;
                }
                int ok = 0;
                for (int i = 0; C_HEADERS[i]; i++)
                    if (strcmp(hdr, C_HEADERS[i]) == 0) ok = 1;
                /* a "..." include: one of the include root's headers, by its name between the quotes */
                for (int i = 0; hdr[0] == '"' && h > 2 && hdr[h - 1] == '"' && hone_compile_cpu_root_headers[i]; i++)
                    if (strlen(hone_compile_cpu_root_headers[i]) == (size_t)(h - 2) &&
                        strncmp(hdr + 1, hone_compile_cpu_root_headers[i], (size_t)(h - 2)) == 0)
                        ok = 1;
                if (!ok) rc = fail(why, cap, line, "header %s not allowed%s", hdr[0] ? hdr : "(macro)", "");
                else if (defined)
                    rc = fail(why, cap, line, "#include %s after a #define or #undef (a macro could rewrite the header)%s",
                              hdr, "");
            } else if (strcmp(dir, "define") == 0 || strcmp(dir, "undef") == 0) {
                defined = 1;
            } else if (dir[0] == 0 && q < p + len) {
                /* `# 12 "file"` is a line marker: it would relabel the candidate's tokens */
                rc = fail(why, cap, line, "preprocessor directive '#%s...' not allowed%s", (char[]){*q, 0}, "");
            } else if (!(strcmp(dir, "if") == 0 || strcmp(dir, "ifdef") == 0 ||
                         strcmp(dir, "ifndef") == 0 || strcmp(dir, "elif") == 0 ||
                         strcmp(dir, "else") == 0 || strcmp(dir, "endif") == 0 ||
                         strcmp(dir, "pragma") == 0 || dir[0] == 0)) {
                rc = fail(why, cap, line, "preprocessor directive #%s not allowed%s", dir, "");
            }
        }
        line++;
        p = eol ? eol + 1 : p + len;
    }
    return rc;
}

enum { CPP_TIMEOUT_MS = 30000, CPP_MAX_OUTPUT = 64 << 20 };

/* Runs `cc -E` with the guard's compile flags on the source at path; *out (malloc'd) is the
 * output with line markers. 0, or HONE_EINVAL with why[] (preprocessor error, timeout, output
 * above the cap), or HONE_EIO when it cannot be run. */
static int preprocess(char **out, const char *path, const char *err_path, const char *include_root,
                      char *why, size_t cap)
{
    *out = NULL;
    const char *cc = getenv("HONE_CC");
    if (!cc || !*cc) cc = "cc";
    char flags[] = HONE_COMPILE_CPU_FLAGS, inc[4200];
    snprintf(inc, sizeof inc, "-I%s", include_root);
    char *argv[32];
    int a = 0;
    argv[a++] = (char *)cc;
    for (char *tok = strtok(flags, " "); tok && a < 24; tok = strtok(NULL, " ")) argv[a++] = tok;
    argv[a++] = "-E";
    argv[a++] = inc;
    argv[a++] = (char *)path;
    argv[a] = NULL;
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) return hone_error_set(HONE_EIO, "pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid;
    int e = posix_spawnp(&pid, cc, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[1]);
    if (e) {
        close(pfd[0]);
        return hone_error_set(HONE_EIO, "cannot run %s: %s", cc, strerror(e));
    }
    size_t n = 0, capb = 1 << 16;
    char *buf = malloc(capb);
    int rc = buf ? 0 : hone_error_set(HONE_ENOMEM, "out of memory");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!rc) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        if (ms > CPP_TIMEOUT_MS) {
            rc = HONE_EINVAL;
            snprintf(why, cap, "the preprocessor ran over %d s", CPP_TIMEOUT_MS / 1000);
            break;
        }
        struct pollfd pf = {pfd[0], POLLIN, 0};
        if (poll(&pf, 1, 100) <= 0) continue;
        if (n + 65536 + 1 > capb) {
            if (capb >= CPP_MAX_OUTPUT) {
                rc = HONE_EINVAL;
                snprintf(why, cap, "the preprocessed source is above %d MiB", CPP_MAX_OUTPUT >> 20);
                break;
            }
            char *nb = realloc(buf, capb *= 2);
            if (!nb) {
                rc = hone_error_set(HONE_ENOMEM, "out of memory");
                break;
            }
            buf = nb;
        }
        ssize_t r = read(pfd[0], buf + n, 65536);
        if (r == 0) break;
        if (r < 0 && errno != EINTR) {
            rc = hone_error_set(HONE_EIO, "reading the preprocessor: %s", strerror(errno));
            break;
        }
        if (r > 0) n += (size_t)r;
    }
    close(pfd[0]);
    if (rc) kill(pid, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (!rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        char *err = NULL;
        size_t en = 0;
        hone_file_read(err_path, &err, &en);
        char *nl = err ? strchr(err, '\n') : NULL;
        if (nl) *nl = 0;
        snprintf(why, cap, "the preprocessor failed: %s", err && *err ? err : "(no message)");
        free(err);
        rc = HONE_EINVAL;
    }
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = 0;
    *out = buf;
    return 0;
}

/* The identifiers of the preprocessed text that belong to the candidate's own file (line
 * markers say whose a line is: macro expansions land where they are used, so a pasted
 * `__as##m__` is read here as `__asm__`); the whitelisted headers' own text is not judged. */
static int scan_tokens(const char *pp, const char *path, char *why, size_t cap)
{
    int mine = 0, line = 1;
    size_t plen = strlen(path);
    for (const char *p = pp; *p;) {
        const char *eol = strchr(p, '\n');
        const char *end = eol ? eol : p + strlen(p);
        if (p[0] == '#' && p[1] == ' ' && isdigit((unsigned char)p[2])) {
            /* # <line> "<file>" <flags> */
            char *q;
            long l = strtol(p + 2, &q, 10);
            mine = q[0] == ' ' && q[1] == '"' && strncmp(q + 2, path, plen) == 0 && q[2 + plen] == '"';
            line = (int)l;
        } else {
            for (const char *t = p; mine && t < end;) {
                if (*t == '"' || *t == '\'') {
                    char qc = *t++;
                    while (t < end && *t != qc) t += *t == '\\' ? 2 : 1;
                    t++;
                } else if (isalpha((unsigned char)*t) || *t == '_') {
                    const char *b = t;
                    while (t < end && (isalnum((unsigned char)*t) || *t == '_')) t++;
                    char id[128];
                    size_t il = (size_t)(t - b) < sizeof id - 1 ? (size_t)(t - b) : sizeof id - 1;
                    memcpy(id, b, il);
                    id[il] = 0;
                    if (check_identifier(id, line, why, cap)) return HONE_EINVAL;
                } else if (isdigit((unsigned char)*t) || (*t == '.' && isdigit((unsigned char)t[1]))) {
                    /* a pp-number: 0x1p-3f, 1e+5 */
                    while (t < end && (isalnum((unsigned char)*t) || *t == '.' || *t == '_' ||
                                       ((*t == '+' || *t == '-') && strchr("eEpP", t[-1]))))
                        t++;
                } else {
                    t++;
                }
            }
            line++;
        }
        p = eol ? eol + 1 : end;
    }
    return 0;
}

int hone_scan_c_source(const char *src, const char *include_root, char *why, size_t cap)
{
    why[0] = 0;
    char dir[] = "/tmp/hone-scan-XXXXXX", path[64], err_path[64], *pp = NULL;
    char *s = strip(src);
    if (!s) return hone_error_set(HONE_ENOMEM, "out of memory");
    int rc = scan_directives(src, s, why, cap);
    int have_dir = 0;
    if (rc) goto done;
    if (!mkdtemp(dir)) {
        rc = hone_error_set(HONE_EIO, "mkdtemp: %s", strerror(errno));
        goto done;
    }
    have_dir = 1;
    snprintf(path, sizeof path, "%s/candidate.c", dir);
    snprintf(err_path, sizeof err_path, "%s/cpp.err", dir);
    FILE *f = fopen(path, "w");
    if (!f || fputs(src, f) < 0) {
        if (f) fclose(f);
        rc = hone_error_set(HONE_EIO, "cannot write %s", path);
        goto done;
    }
    if (fclose(f) != 0) {
        rc = hone_error_set(HONE_EIO, "cannot write %s", path);
        goto done;
    }
    if ((rc = preprocess(&pp, path, err_path, include_root, why, cap)) != 0) goto done;
    rc = scan_tokens(pp, path, why, cap);
done:
    if (have_dir) {
        unlink(path);
        unlink(err_path);
        rmdir(dir);
    }
    free(pp);
    free(s);
    return rc;
}

/* ---- ELF: the object verifier ---------------------------------------------------------- */

int hone_scan_elf(const char *path, const char *symbol, char *why, size_t cap)
{
    why[0] = 0;
    hone_verify_result v;
    hone_verify_opts o = HONE_VERIFY_OPTS_INIT;
    int rc = hone_verify_object(&v, path, symbol, &o);
    if (rc) {
        snprintf(why, cap, "cannot verify %s: %s", path, hone_error_last());
        return rc;
    }
    if (v.ok) return 0;
    snprintf(why, cap, "%s", v.reason);
    return strncmp(v.reason, "not a 64-bit ELF", 16) == 0 ? HONE_EFORMAT : HONE_EINVAL;
}

/* ---- CUDA ------------------------------------------------------------------------------- */

static const banned CU_BANNED[] = {
    {"printf", "device printf"}, {"clock", "clock reads"}, {"clock64", "clock reads"},
    {"__globaltimer", "clock reads"}, {"globaltimer", "clock reads"}, {"malloc", "device malloc"},
    {"free", "device malloc"}, {"new", "device new"}, {"delete", "device new"},
    {"asm", "inline PTX"}, {"__nanosleep", "sleeping"}, {"__trap", "trap"}, {NULL, NULL}};

int hone_scan_cuda_source(const char *src, char *why, size_t cap)
{
    why[0] = 0;
    char *s = strip(src);
    if (!s) return hone_error_set(HONE_ENOMEM, "out of memory");
    int rc = 0, line = 1;
    for (const char *t = s; *t && !rc;) {
        if (*t == '\n') {
            line++;
            t++;
        } else if (*t == '#') {
            const char *q = t + 1;
            while (*q == ' ') q++;
            if (strncmp(q, "include", 7) == 0) {
                /* only the kernels' own header (its text is the engine's): read in src, since
                 * s has the literal blanked */
                static const char hdr[] = "\"common.cuh\"";
                const char *o = src + (q - s) + 7;
                while (*o == ' ' || *o == '\t') o++;
                int ok = strncmp(o, hdr, sizeof hdr - 1) == 0;
                if (ok) /* and nothing else on the line */
                    for (const char *e = s + (o - src) + sizeof hdr - 1; *e && *e != '\n'; e++)
                        ok &= *e == ' ' || *e == '\t' || *e == '\r';
                if (!ok) rc = fail(why, cap, line, "#include not allowed in a CUDA candidate (only %s)%s", hdr, "");
            }
            while (*t && *t != '\n') t++;
        } else if (isalpha((unsigned char)*t) || *t == '_') {
            const char *b = t;
            while (isalnum((unsigned char)*t) || *t == '_') t++;
            char id[128];
            size_t il = (size_t)(t - b) < sizeof id - 1 ? (size_t)(t - b) : sizeof id - 1;
            memcpy(id, b, il);
            id[il] = 0;
            for (int i = 0; CU_BANNED[i].name && !rc; i++)
                if (strcmp(id, CU_BANNED[i].name) == 0)
                    rc = fail(why, cap, line, "forbidden identifier '%s' (%s)", id, CU_BANNED[i].what);
        } else {
            t++;
        }
    }
    if (!rc && !strstr(s, "__global__")) {
        snprintf(why, cap, "no __global__ kernel");
        rc = HONE_EINVAL;
    }
    free(s);
    return rc;
}

int hone_scan_ptx(const char *ptx, char *why, size_t cap)
{
    static const char *const bad[] = {"%globaltimer", "%clock", "vprintf", "malloc", "free(", NULL};
    for (int i = 0; bad[i]; i++)
        if (strstr(ptx, bad[i])) {
            snprintf(why, cap, "the PTX reads or calls %s", bad[i]);
            return HONE_EINVAL;
        }
    why[0] = 0;
    return 0;
}
