/* The guard on a loaded machine: a CPU hog runs beside it while one exact-tier candidate
 * (tests/guard/good/rmsnorm_vec.c) is judged three times. The verdicts may differ only by
 * "inconclusive": never accepted once and judged slower (or a regression) another time. */
#include "harness.h"

#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/file.h"
#include "guard/guard.h"
#include "guard_test.h"

static pid_t hog(void)
{
    pid_t p = fork();
    if (p == 0) {
        volatile uint64_t x = 1;
        for (;;) x = x * 6364136223846793005ull + 1; /* until killed */
    }
    return p;
}

static void test_verdicts_agree_under_load(void)
{
    char state[] = "/tmp/hone-guard-load-XXXXXX";
    CHECK(mkdtemp(state) != NULL);
    pid_t h = hog();
    int accepted = 0, against = 0, inconclusive = 0;
    for (int run = 0; run < 3; run++) {
        hone_guard_opts o = guard_test_opts("cpu", "rmsnorm", HONE_SOURCE_DIR "/tests/guard/good/rmsnorm_vec.c",
                                            state);
        CHECK(o.source != NULL);
        hone_guard_result res;
        CHECK_EQ_INT(guard_test_run(&res, &o, o.quiet ? NULL : stderr), 0);
        fprintf(stderr, "  run %d under load: %s (%s) %.2fx [%.2f, %.2f]\n", run + 1,
                hone_guard_code_name(res.code), res.tier, res.speedup, res.ci_low, res.ci_high);
        CHECK_MSG(res.accepted || res.code == HONE_GUARD_SLOWER || res.code == HONE_GUARD_INCONCLUSIVE ||
                  res.code == HONE_GUARD_E2E_REGRESSION, "%s: %s", hone_guard_code_name(res.code), res.reason);
        accepted += res.accepted;
        against += res.code == HONE_GUARD_SLOWER || res.code == HONE_GUARD_E2E_REGRESSION;
        inconclusive += res.code == HONE_GUARD_INCONCLUSIVE;
        CHECK(!strcmp(res.tier, "exact"));
    }
    kill(h, SIGKILL);
    waitpid(h, NULL, 0);
    fprintf(stderr, "  accepted %d, slower %d, inconclusive %d\n", accepted, against, inconclusive);
    CHECK_MSG(!(accepted && against), "contradicting verdicts: %d accepted, %d slower", accepted, against);
    hone_file_remove_tree(state);
}

TEST_MAIN(TEST_CASE(test_verdicts_agree_under_load))
