/* `hone serve --tune --auto-apply` end to end: wraps the correct, faster rmsnorm
 * (tests/guard/good/rmsnorm_vec.c, exact tier, compute-bound: its 2.7x holds while the server's
 * own decode streams the weights beside the guard) in an LLM-style reply for the scripted
 * endpoint, then runs tests/server/tune_serve_driver.py (traffic, apply, keep, rollback). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/file.h"
#include "harness.h"

static char tmpdir[] = "/tmp/hone-tune-serve-test-XXXXXX";

static void test_tune_serve(void)
{
    char good[512], cmd[4096];
    snprintf(good, sizeof good, "%s/good.md", tmpdir);
    char *src = NULL;
    CHECK_EQ_INT(hone_file_read(HONE_SOURCE_DIR "/tests/guard/good/rmsnorm_vec.c", &src, NULL), 0);
    FILE *f = fopen(good, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "This version sums the squares in four vector accumulators.\n\n```c\n%s```\n", src);
    fclose(f);
    free(src);
    snprintf(cmd, sizeof cmd, "HONE_BIN=%s HONE_TEST_DATA=%s HONE_SOURCE_DIR=%s python3 "
             "%s/tests/server/tune_serve_driver.py %s %s", HONE_BIN, HONE_TEST_DATA_DIR,
             HONE_SOURCE_DIR, HONE_SOURCE_DIR, good, tmpdir);
    int st = system(cmd);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (code == 77) { fprintf(stderr, "no test model\n"); exit(77); }
    CHECK_EQ_INT(code, 0);
}

static void cleanup(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) { /* best effort */ }
}

int main(int argc, char **argv)
{
    if (!mkdtemp(tmpdir)) return 1;
    atexit(cleanup);
    static const harness_case cases[] = {TEST_CASE(test_tune_serve)};
    return harness_run(cases, 1, argc, argv);
}
