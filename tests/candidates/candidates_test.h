/* What the candidates tests share: a scratch directory and a small kernel to compile. */
#ifndef HONE_TEST_CANDIDATES_TEST_H
#define HONE_TEST_CANDIDATES_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An add kernel (the baseline's math in plain C): small, valid, passes every gate. */
static const char candidates_test_add_src[] =
    "#include \"kernels/cpu/common.h\"\n"
    "void hone_cpu_add(float *y, const float *a, const float *b, int64_t n, int ith, int nth)\n"
    "{\n"
    "    int64_t i0, i1;\n"
    "    hone_cpu_share(n, ith, nth, &i0, &i1);\n"
    "    for (int64_t i = i0; i < i1; i++) y[i] = a[i] + b[i];\n"
    "}\n";

/* A fresh directory /tmp/hone-test-<what>-XXXXXX (malloc'd; candidates_test_rm_rf frees it). */
static inline char *candidates_test_tmpdir(const char *what)
{
    char t[256];
    snprintf(t, sizeof t, "/tmp/hone-test-%s-XXXXXX", what);
    char *d = strdup(t);
    if (!d || !mkdtemp(d)) { perror("mkdtemp"); exit(1); }
    return d;
}

static inline void candidates_test_rm_rf(char *d)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", d);
    if (system(cmd)) {}
    free(d);
}

#endif
