/* Static checks of candidates (see scan.h): a tokenizer-level source scan and an ELF reader. */
#include "scan.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candidates/verify.h"
#include "engine/error.h"

static const char *const C_HEADERS[] = {"<stdint.h>", "<stddef.h>", "<math.h>", "<string.h>",
                                        "<float.h>", "<stdbool.h>", "<immintrin.h>",
                                        "\"kernels/cpu/common.h\"", "\"engine/dtype.h\"", NULL};

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
    {"_Atomic", "atomics"}, {NULL, NULL}};

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

int hone_scan_c_source(const char *src, char *why, size_t cap)
{
    why[0] = 0;
    char *s = strip(src);
    if (!s) return hone_error_set(HONE_ENOMEM, "out of memory");
    int rc = 0, line = 1;
    /* line continuations could hide a directive's continuation: refuse them in directives */
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
                if (!ok) rc = fail(why, cap, line, "header %s not allowed%s", hdr[0] ? hdr : "(macro)", "");
            } else if (!(strcmp(dir, "define") == 0 || strcmp(dir, "undef") == 0 ||
                         strcmp(dir, "if") == 0 || strcmp(dir, "ifdef") == 0 ||
                         strcmp(dir, "ifndef") == 0 || strcmp(dir, "elif") == 0 ||
                         strcmp(dir, "else") == 0 || strcmp(dir, "endif") == 0 ||
                         strcmp(dir, "pragma") == 0 || dir[0] == 0)) {
                rc = fail(why, cap, line, "preprocessor directive #%s not allowed%s", dir, "");
            }
        }
        if (!rc) {
            /* identifiers on this line */
            const char *t = p;
            while (t < p + len && !rc) {
                if (isalpha((unsigned char)*t) || *t == '_') {
                    const char *b = t;
                    while (t < p + len && (isalnum((unsigned char)*t) || *t == '_')) t++;
                    char id[128];
                    size_t il = (size_t)(t - b) < sizeof id - 1 ? (size_t)(t - b) : sizeof id - 1;
                    memcpy(id, b, il);
                    id[il] = 0;
                    for (int i = 0; C_BANNED[i].name && !rc; i++)
                        if (strcmp(id, C_BANNED[i].name) == 0)
                            rc = fail(why, cap, line, "forbidden identifier '%s' (%s)", id, C_BANNED[i].what);
                    for (int i = 0; C_BANNED_PREFIX[i].name && !rc; i++)
                        if (strncmp(id, C_BANNED_PREFIX[i].name, strlen(C_BANNED_PREFIX[i].name)) == 0)
                            rc = fail(why, cap, line, "forbidden identifier '%s' (%s)", id, C_BANNED_PREFIX[i].what);
                } else if (isdigit((unsigned char)*t)) {
                    while (t < p + len && (isalnum((unsigned char)*t) || *t == '.')) t++;
                } else {
                    t++;
                }
            }
        }
        line++;
        p = eol ? eol + 1 : p + len;
    }
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
