/* Helpers for the tests of the review modules (tests/candidates/test_review.c,
 * tests/agent/test_review_push.c): shell commands with their output, a scratch kernels repository
 * with uncommitted, staged and untracked changes, and a snapshot of everything a review must not
 * touch (work tree, index, HEAD, main). */
#ifndef HONE_TEST_REVIEW_TEST_H
#define HONE_TEST_REVIEW_TEST_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#ifndef HONE_SOURCE_DIR
#define HONE_SOURCE_DIR "."
#endif

/* Runs a shell command; its stdout (trailing newlines removed) into a static-free malloc'd string. */
static inline char *run(int *status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline char *run(int *status, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    if (!p) return strdup("");
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (n + 1 >= cap) buf = realloc(buf, cap *= 2);
    }
    buf[n] = 0;
    while (n && buf[n - 1] == '\n') buf[--n] = 0;
    int st = pclose(p);
    if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
}

static inline int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static inline char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) { *len = 0; return NULL; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    b[*len] = 0;
    fclose(f);
    return b;
}

static inline char *tmpdir(void)
{
    char *d = strdup("/tmp/hone-test-review-XXXXXX");
    if (!mkdtemp(d)) { perror("mkdtemp"); exit(1); }
    chmod(d, 0755);
    return d;
}

/* A kernels repository: kernels/cpu/matvec_f32.c and a README committed on main; then an
 * uncommitted change (README), a staged one (staged.txt) and an untracked file. */
static inline char *make_repo(void)
{
    char *d = tmpdir();
    int rc = sh("cd %s && git init -q -b main . && git config user.email t@example.com && "
                "git config user.name Tester && mkdir -p kernels/cpu && "
                "cp %s/kernels/cpu/matvec_f32.c kernels/cpu/ && echo hello > README && "
                "git add . && git commit -qm base && echo 'uncommitted change' >> README && "
                "echo staged > staged.txt && git add staged.txt && echo untracked > untracked.txt",
                d, HONE_SOURCE_DIR);
    CHECK_EQ_INT(rc, 0);
    return d;
}

/* Bytes of everything a proposal must not touch. */
#define N_SNAP 9
typedef struct { char *data[N_SNAP]; size_t len[N_SNAP]; char *status, *refs; } snapshot;
static const char *snap_files[N_SNAP] = {
    "README", "staged.txt", "untracked.txt", "kernels/cpu/matvec_f32.c", ".git/index", ".git/HEAD",
    ".git/refs/heads/main", ".git/index.lock", ".git/config"};

static inline void snap_take(snapshot *s, const char *repo)
{
    char p[4096];
    for (int i = 0; i < N_SNAP; i++) {
        snprintf(p, sizeof p, "%s/%s", repo, snap_files[i]);
        s->data[i] = read_all(p, &s->len[i]);
    }
    s->status = run(NULL, "git -C %s status --porcelain=v1 --untracked-files=all", repo);
    s->refs = run(NULL, "git -C %s for-each-ref --format='%%(refname) %%(objectname)' refs/heads/main", repo);
}

static inline int snap_same(const snapshot *a, const snapshot *b)
{
    int same = 1;
    for (int i = 0; i < N_SNAP; i++)
        if (a->len[i] != b->len[i] || (!a->data[i]) != (!b->data[i]) ||
            (a->data[i] && memcmp(a->data[i], b->data[i], a->len[i]))) {
            fprintf(stderr, "  changed: %s\n", snap_files[i]);
            same = 0;
        }
    if (strcmp(a->status, b->status)) { fprintf(stderr, "  git status changed\n"); same = 0; }
    if (strcmp(a->refs, b->refs)) { fprintf(stderr, "  main moved\n"); same = 0; }
    return same;
}

static inline void snap_free(snapshot *s)
{
    for (int i = 0; i < N_SNAP; i++) free(s->data[i]);
    free(s->status);
    free(s->refs);
}

#endif
