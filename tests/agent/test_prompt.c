/* The tuning prompt: carries the slot's contract read from engine/slots.h, the incumbent
 * source, the helpers, shapes, profile, device, the hard rules and the earlier rejections. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/prompt.h"
#include "engine/error.h"
#include "engine/file.h"
#include "harness.h"

static void test_cpu_prompt(void)
{
    hone_prompt_history hist[2] = {{"candidate 1a2b3c4d (rows=8)", "wrong math: max error 3.1e-2 vs incumbent 1.2e-6"},
                                   {"candidate 5e6f7a8b", "compile error: 'acc' undeclared"}};
    hone_prompt_opts o = HONE_PROMPT_OPTS_INIT;
    o.slot = HONE_SLOT_MATVEC_Q4_1;
    o.shapes = "rows 1536 cols 576, 60 calls per token";
    o.profile = "23% of decode step time, 16.5 GB/s = 33% of roofline";
    char dev[512];
    hone_prompt_cpu_device(dev, sizeof dev);
    o.device = dev;
    o.history = hist;
    o.n_history = 2;
    char *sys = NULL, *user = NULL;
    CHECK_EQ_INT(hone_prompt_build(&o, &sys, &user), 0);
    CHECK_STR_CONTAINS(sys, "```c");
    CHECK_STR_CONTAINS(user, "hone_cpu_matvec_q4_1");
    CHECK_STR_CONTAINS(user, "typedef void (*hone_slot_matvec_fn)");   /* the contract itself */
    CHECK_STR_CONTAINS(user, "y[r] = sum_c W[r][c] * x[c]");
    CHECK_STR_CONTAINS(user, "Rules every CPU slot");                  /* the general rules */
    CHECK_STR_CONTAINS(user, "hone_cpu_deq_q4_1");                     /* the incumbent */
    CHECK_STR_CONTAINS(user, "hone_cpu_matvec_simd");                  /* the helpers it uses */
    CHECK_STR_CONTAINS(user, "hone_cpu_deqv_q4_1");                    /* ... transitively */
    CHECK(!strstr(user, "hone_cpu_attend_row"));                       /* not the rest */
    CHECK_STR_CONTAINS(user, "rows 1536 cols 576");
    CHECK_STR_CONTAINS(user, "33% of roofline");
    CHECK_STR_CONTAINS(user, "online CPUs");
    CHECK_STR_CONTAINS(user, "never quantise");
    CHECK_STR_CONTAINS(user, "wrong math: max error 3.1e-2");
    CHECK_STR_CONTAINS(user, "'acc' undeclared");
    free(sys);
    free(user);
    /* every slot has a contract */
    for (int s = 0; s < HONE_SLOT_COUNT; s++) {
        char *c = hone_prompt_contract(s);
        CHECK_MSG(c && strstr(c, "typedef void"), "%s", hone_slots_name((hone_slot_id)s));
        free(c);
    }
    /* a missing source tree is a clear error */
    o.source_dir = "/nonexistent";
    CHECK_EQ_INT(hone_prompt_build(&o, &sys, &user), HONE_EIO);
    CHECK_STR_CONTAINS(hone_error_last(), "cannot read the incumbent");
}

/* The helpers an incumbent uses, out of the header: definitions it names, what those name in
 * turn, the header's conditionals; nothing else. */
static void test_helpers(void)
{
    static const char header[] =
        "#ifndef HONE_KERNELS_CPU_COMMON_H\n#define HONE_KERNELS_CPU_COMMON_H\n#include <math.h>\n\n"
        "#define HONE_LANES 16\n\n"
        "/* the share of a thread */\nstatic inline void hone_cpu_share(int64_t n, int ith, int nth,\n"
        "                                  int64_t *b, int64_t *e)\n{\n    *b = n * ith / nth;\n"
        "    *e = n * (ith + 1) / nth;\n}\n\n"
        "static inline float hone_cpu_sum(const float a[HONE_LANES])\n{\n    return a[0];\n}\n\n"
        "#ifdef __AVX512F__\ntypedef void (*hone_cpu_unused_fn)(int);\n"
        "static inline __attribute__((always_inline)) float\nhone_cpu_twice(const float *a)\n{\n"
        "    return 2 * hone_cpu_sum(a);\n}\n#endif\n#endif\n";
    char *h = hone_prompt_helpers(header, "void f(float *a) { hone_cpu_share(1, 0, 1, 0, 0); hone_cpu_twice(a); }");
    CHECK(h != NULL);
    CHECK_STR_CONTAINS(h, "/* the share of a thread */\nstatic inline void hone_cpu_share");
    CHECK_STR_CONTAINS(h, "hone_cpu_twice(const float *a)");
    CHECK_STR_CONTAINS(h, "static inline float hone_cpu_sum");          /* used by twice */
    CHECK_STR_CONTAINS(h, "#define HONE_LANES 16");                     /* used by sum */
    CHECK_STR_CONTAINS(h, "#ifdef __AVX512F__");
    CHECK(!strstr(h, "hone_cpu_unused_fn"));
    CHECK(!strstr(h, "HONE_KERNELS_CPU_COMMON_H"));
    free(h);
    /* on the real header: the q4_1 matvec's helpers are a fraction of it */
    char path[4096], *common = NULL, *inc = NULL;
    snprintf(path, sizeof path, "%s/kernels/cpu/common.h", HONE_SOURCE_DIR);
    CHECK_EQ_INT(hone_file_read(path, &common, NULL), 0);
    snprintf(path, sizeof path, "%s/kernels/cpu/swiglu.c", HONE_SOURCE_DIR);
    CHECK_EQ_INT(hone_file_read(path, &inc, NULL), 0);
    h = hone_prompt_helpers(common, inc);
    CHECK(h && strstr(h, "hone_cpu_share") && !strstr(h, "hone_cpu_matvec_simd"));
    CHECK(h && strlen(h) * 10 < strlen(common));
    free(h);
    free(inc);
    free(common);
}

/* Level 1 leaves the helpers' text out; a served tree's kernel is the incumbent shown; the best
 * kernel so far is shown to beat. */
static void test_levels_and_best(void)
{
    hone_prompt_opts o = HONE_PROMPT_OPTS_INIT;
    o.slot = HONE_SLOT_SWIGLU;
    char *sys = NULL, *u0 = NULL, *u1 = NULL;
    CHECK_EQ_INT(hone_prompt_build(&o, &sys, &u0), 0);
    free(sys);
    o.level = 1;
    o.best_source = "void hone_cpu_swiglu(void) { /* best so far */ }\n";
    o.best_summary = "candidate 0123abcd: exact tier, 1.31x";
    char dir[] = "/tmp/hone-prompt-XXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/cpu", dir);
    CHECK_EQ_INT(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/cpu/swiglu.c", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) { fputs("/* the served swiglu */\n", f); fclose(f); }
    o.kernels_dir = dir;
    CHECK_EQ_INT(hone_prompt_build(&o, &sys, &u1), 0);
    CHECK_STR_CONTAINS(u0, "static inline void hone_cpu_share");
    CHECK(u1 && !strstr(u1, "static inline void hone_cpu_share"));
    CHECK_STR_CONTAINS(u1, "the approved kernel served now");
    CHECK_STR_CONTAINS(u1, "/* the served swiglu */");
    CHECK_STR_CONTAINS(u1, "best so far */");
    CHECK_STR_CONTAINS(u1, "exact tier, 1.31x");
    CHECK(u0 && u1 && strlen(u1) < strlen(u0));
    free(sys);
    free(u0);
    free(u1);
    unlink(path);
    snprintf(path, sizeof path, "%s/cpu", dir);
    rmdir(path);
    rmdir(dir);
}

TEST_MAIN(TEST_CASE(test_cpu_prompt), TEST_CASE(test_helpers), TEST_CASE(test_levels_and_best))
