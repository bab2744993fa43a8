/* `hone serve --tune --auto-apply` end to end: renders the correct, faster q8_0 matvec (the
 * search template with far prefetch, as an LLM would reply) for the scripted LLM endpoint, then
 * runs tests/server/tune_serve_driver.py (traffic, apply, keep, rollback; see there). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/search.h"
#include "harness.h"

static char tmpdir[] = "/tmp/hone-tune-serve-test-XXXXXX";

static void test_tune_serve(void)
{
    char good[512], cmd[4096];
    snprintf(good, sizeof good, "%s/good.md", tmpdir);
    hone_search_point p = {4, 8192, 4};
    char *src = NULL;
    CHECK_EQ_INT(hone_search_render(HONE_SLOT_MATVEC_Q8_0, p, &src), 0);
    FILE *f = fopen(good, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "This version keeps more rows in flight and prefetches further ahead.\n\n```c\n%s```\n", src);
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
