/* The C source scan on its own: every shipped baseline kernel and accepted candidate passes;
 * the source tricks of the red-team corpus (token pasting, __x__ spellings, trigraphs, line
 * markers, a macro defined before an #include) are refused with their reason. */
#include "harness.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "engine/file.h"
#include "guard/scan.h"

#define SRC HONE_SOURCE_DIR "/"

static int scan_file(const char *path, char *why, size_t cap)
{
    char *src = NULL;
    size_t n = 0;
    CHECK_EQ_INT(hone_file_read(path, &src, &n), 0);
    int rc = src ? hone_scan_c_source(src, HONE_SOURCE_DIR, why, cap) : -1;
    free(src);
    return rc;
}

static void test_shipped_sources_pass(void)
{
    static const char *const dirs[] = {SRC "kernels/cpu", SRC "tests/guard/good"};
    int n = 0;
    for (int d = 0; d < 2; d++) {
        DIR *dir = opendir(dirs[d]);
        CHECK(dir != NULL);
        for (struct dirent *e; dir && (e = readdir(dir));) {
            size_t l = strlen(e->d_name);
            if (l < 3 || strcmp(e->d_name + l - 2, ".c") != 0) continue;
            char path[512], why[512];
            snprintf(path, sizeof path, "%s/%s", dirs[d], e->d_name);
            int rc = scan_file(path, why, sizeof why);
            CHECK_MSG(rc == 0, "%s refused: %s", path, why);
            n++;
        }
        if (dir) closedir(dir);
    }
    CHECK(n >= 22);
}

static void test_redteam_sources(void)
{
    static const struct { const char *file, *reason; } R[] = {
        {"paste_asm.c", "line 10: forbidden identifier '__asm__' (inline assembly)"},
        {"paste_rdtsc.c", "forbidden identifier '__builtin_ia32_rdtsc' (clocks)"},
        {"dunder_constructor.c", "forbidden identifier '__constructor__' (load-time code)"},
        {"trigraph_include.c", "line 4: trigraph '?" "?=' not allowed"},
        {"tls_counter.c", "forbidden identifier '__thread' (threads)"},
        {"reads_clock.c", "line 8: forbidden identifier '__rdtsc' (clocks)"},
        {"calls_system.c", "'system' (processes)"},
        {"opens_file.c", "<stdio.h> not allowed"},
    };
    for (size_t i = 0; i < sizeof R / sizeof R[0]; i++) {
        char path[512], why[512];
        snprintf(path, sizeof path, SRC "tests/guard/redteam/%s", R[i].file);
        int rc = scan_file(path, why, sizeof why);
        fprintf(stderr, "  %-24s -> %s\n", R[i].file, rc ? why : "passed");
        CHECK_EQ_INT(rc, HONE_EINVAL);
        CHECK_STR_CONTAINS(why, R[i].reason);
    }
}

static void test_inline_sources(void)
{
    static const struct { const char *src, *reason; } S[] = {
        /* a line marker would relabel the candidate's lines as a header's */
        {"# 1 \"/usr/include/math.h\" 3\nint f(void) { return 0; }\n", "directive '#1...' not allowed"},
        {"#line 1 \"/usr/include/math.h\"\n", "directive #line not allowed"},
        {"%:include <stdio.h>\n", "digraph '%:' not allowed"},
        /* a macro defined first could rewrite the header's own text, which is not scanned */
        {"#define static_assert x\n#include <math.h>\n", "line 2: #include <math.h> after a #define"},
        {"#include MACRO\n", "header (macro) not allowed"},
        {"#error no\n", "directive #error not allowed"},
        {"#if 1\n#pragma GCC diagnostic push\n#endif\nint f(int a) { return a; }\n#include <math.h>\n", NULL},
        {"int f(void) { return __builtin_ia32_rd" "tsc(); }\n", "'__builtin_ia32_rdtsc' (clocks)"},
        {"#define E(x) x\nint f(void) { E(__asm__)(\"\"); return 0; }\n", "line 2: forbidden identifier '__asm__'"},
        {"int f(void) { return *(int __seg_fs *)0; }\n", "'__seg_fs' (thread pointer)"},
        /* names in strings and comments are not identifiers */
        {"/* fopen */ const char *f(void) { return \"__asm__ system\"; }\n", NULL},
        {"int f(void) { return undefined_thing; }\n", NULL}, /* the compile gate's to refuse */
        {"#include \"kernels/cpu/common.h\"\n#if\n#endif\n", "the preprocessor failed"},
        /* "..." includes: the include root's headers by exact name (hone_compile_cpu_root_headers) */
        {"#include \"engine/kv_layout.h\"\n#include \"engine/dtype.h\"\n", NULL},
        {"#include \"engine/model.h\"\n", "header \"engine/model.h\" not allowed"},
        {"#include \"engine/dtype.hx\"\n", "header \"engine/dtype.hx\" not allowed"},
        {"#include \"./engine/dtype.h\"\n", "header \"./engine/dtype.h\" not allowed"},
        {"#include \"engine/dtype.h\n", "not allowed"},
        {"#include <engine/dtype.h>\n", "header <engine/dtype.h> not allowed"},
    };
    for (size_t i = 0; i < sizeof S / sizeof S[0]; i++) {
        char why[512];
        int rc = hone_scan_c_source(S[i].src, HONE_SOURCE_DIR, why, sizeof why);
        if (!S[i].reason) {
            CHECK_MSG(rc == 0, "case %zu refused: %s", i, why);
            continue;
        }
        CHECK_MSG(rc == HONE_EINVAL, "case %zu: rc %d (%s)", i, rc, why);
        CHECK_STR_CONTAINS(why, S[i].reason);
    }
}

TEST_MAIN(TEST_CASE(test_shipped_sources_pass), TEST_CASE(test_redteam_sources), TEST_CASE(test_inline_sources))
