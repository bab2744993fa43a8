/* The search path of `hone tune`: the search memory round-trips through its JSON file (records
 * of other keys kept), ranks its records best first, and a second `hone tune --llm none` run
 * on the same state dir takes the remembered estimates instead of screening those points
 * again; the budget counts full guard runs and --screen caps the screens. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/search_memory.h"
#include "agent/tune.h"
#include "harness.h"

static char tmpdir[] = "/tmp/hone-sscreen-XXXXXX";

static void test_memory_round_trip(void)
{
    hone_search_memory *m = NULL;
    char machine[512];
    hone_search_memory_machine(machine, sizeof machine);
    CHECK(strstr(machine, "flags ") != NULL);
    CHECK_EQ_INT(hone_search_memory_open(&m, tmpdir, "rmsnorm", "model: n=1 dim=576;", machine), 0);
    CHECK(hone_search_memory_find(m, "rows=4 upfront=1 lanes=1") == NULL);
    CHECK_EQ_INT(hone_search_memory_put(m, "rows=4 upfront=1 lanes=1", 1.25, 5, "screened", "exact"), 0);
    CHECK_EQ_INT(hone_search_memory_put(m, "rows=2 upfront=1 lanes=1", 1.50, 10, "screened", "exact"), 0);
    CHECK_EQ_INT(hone_search_memory_put(m, "rows=1 upfront=0 lanes=4", NAN, 5, "parity", ""), 0);
    /* a full guard verdict keeps the screened estimate */
    CHECK_EQ_INT(hone_search_memory_put(m, "rows=2 upfront=1 lanes=1", NAN, 0, "slower", "exact"), 0);
    CHECK_EQ_INT(hone_search_memory_save(m), 0);
    hone_search_memory_free(m);
    /* another key in the same file */
    CHECK_EQ_INT(hone_search_memory_open(&m, tmpdir, "swiglu", "model: n=1536;", machine), 0);
    CHECK(hone_search_memory_find(m, "rows=4 upfront=1 lanes=1") == NULL);
    CHECK_EQ_INT(hone_search_memory_put(m, "vexp=1 unroll=2 upfront=16", 3.5, 5, "screened", "exact"), 0);
    CHECK_EQ_INT(hone_search_memory_save(m), 0);
    hone_search_memory_free(m);
    /* the first key again: its three records, the second key's kept beside them */
    CHECK_EQ_INT(hone_search_memory_open(&m, tmpdir, "rmsnorm", "model: n=1 dim=576;", machine), 0);
    const hone_search_memory_entry *e = hone_search_memory_find(m, "rows=2 upfront=1 lanes=1");
    CHECK(e && fabs(e->speedup - 1.50) < 1e-12 && e->reps == 10 && !strcmp(e->verdict, "slower") && !strcmp(e->tier, "exact"));
    e = hone_search_memory_find(m, "rows=1 upfront=0 lanes=4");
    CHECK(e && isnan(e->speedup) && !strcmp(e->verdict, "parity"));
    int n = 0;
    const hone_search_memory_entry *r = hone_search_memory_ranked(m, &n);
    CHECK_EQ_INT(n, 3);
    CHECK(n == 3 && !strcmp(r[0].point, "rows=2 upfront=1 lanes=1") && !strcmp(r[1].point, "rows=4 upfront=1 lanes=1") &&
          isnan(r[2].speedup));
    CHECK_EQ_INT(hone_search_memory_save(m), 0);
    hone_search_memory_free(m);
    CHECK_EQ_INT(hone_search_memory_open(&m, tmpdir, "swiglu", "model: n=1536;", machine), 0);
    e = hone_search_memory_find(m, "vexp=1 unroll=2 upfront=16");
    CHECK(e && fabs(e->speedup - 3.5) < 1e-12);
    hone_search_memory_free(m);
    /* another machine sees none of them */
    CHECK_EQ_INT(hone_search_memory_open(&m, tmpdir, "swiglu", "model: n=1536;", "other CPU"), 0);
    CHECK(hone_search_memory_find(m, "vexp=1 unroll=2 upfront=16") == NULL);
    hone_search_memory_free(m);
}

static void test_second_run_remembers(void)
{
    char model[512], state[600];
    snprintf(model, sizeof model, "%s/tiny-llama-q4_1.gguf", HONE_TEST_DATA_DIR);
    snprintf(state, sizeof state, "%s/state", tmpdir);
    hone_tune_opts o = HONE_TUNE_OPTS_INIT;
    o.model_path = model;
    o.llm = "none";
    o.slot = "swiglu";
    o.budget = 1;
    o.screen_budget = 4;
    o.commit = 0;
    o.state_dir = state;
    o.n_threads = 1;
    hone_tune_result r1, r2;
    CHECK_EQ_INT(hone_tune_run(&r1, &o, stderr), 0);
    CHECK_EQ_INT(r1.screened, 4);
    CHECK_EQ_INT(r1.remembered, 0);
    CHECK(r1.candidates <= 1);
    /* the second run: the points screened (and the one guarded) are not screened again */
    CHECK_EQ_INT(hone_tune_run(&r2, &o, stderr), 0);
    CHECK_MSG(r2.remembered >= 2, "%d remembered", r2.remembered);
    CHECK(r2.screened <= 4 && r2.candidates <= 1);
    FILE *f = NULL;
    char path[700];
    snprintf(path, sizeof path, "%s/search-memory.json", state);
    f = fopen(path, "r");
    CHECK(f != NULL);
    if (f) {
        char buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
        CHECK_STR_CONTAINS(buf, "\"slot\":\t\"swiglu\"");
        CHECK_STR_CONTAINS(buf, "vexp=1 unroll=2 upfront=16");
    }
}

static void cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) { /* best effort */ }
}

int main(int argc, char **argv)
{
    if (!mkdtemp(tmpdir)) return 1;
    atexit(cleanup);
    static const harness_case cases[] = {TEST_CASE(test_memory_round_trip), TEST_CASE(test_second_run_remembers)};
    return harness_run(cases, 2, argc, argv);
}
