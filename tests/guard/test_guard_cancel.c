/* hone_guard_opts.cancel: a run asked to stop ends at once with HONE_GUARD_CANCELLED (not a
 * verdict), kills the worker it is waiting on, and records nothing beyond the state the
 * candidate reached: no verdict, no evidence.json, no --evidence file, no temp file. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "candidates/store.h"
#include "guard_test.h"

#define SRC HONE_SOURCE_DIR "/tests/guard/"

static char STATE[256];

static void setup(void)
{
    if (STATE[0]) return;
    snprintf(STATE, sizeof STATE, "/tmp/hone-guard-cancel-XXXXXX");
    if (!mkdtemp(STATE)) exit(1);
}

/* The candidate's store state ("proposed", "compiled", ...; "" when unknown), whether its
 * directory holds evidence.json, and how many temp files or compile directories it holds. */
static void store_state(const char *hash, char *state, size_t cap, int *evidence, int *stray)
{
    hone_store *st = NULL;
    char *meta = NULL;
    state[0] = 0;
    if (hone_store_open(&st, STATE) == 0 && hone_store_read_meta(st, hash, &meta) == 0) {
        cJSON *j = cJSON_Parse(meta);
        const cJSON *s = cJSON_GetObjectItem(j, "state");
        if (cJSON_IsString(s)) snprintf(state, cap, "%s", s->valuestring);
        cJSON_Delete(j);
    }
    char dir[4400];
    *evidence = *stray = 0;
    if (st && hone_store_path(st, hash, "", dir, sizeof dir) == 0) {
        DIR *d = opendir(dir);
        for (struct dirent *e; d && (e = readdir(d));) {
            *evidence += strcmp(e->d_name, "evidence.json") == 0;
            *stray += strstr(e->d_name, ".tmp.") != NULL || strncmp(e->d_name, ".hone-cc.", 9) == 0;
        }
        if (d) closedir(d);
    }
    free(meta);
    hone_store_free(st);
}

static int flag;

static void *raise_later(void *arg)
{
    struct timespec ts = {0, (long)(*(double *)arg * 1e9)};
    nanosleep(&ts, NULL);
    __atomic_store_n(&flag, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_cancelled_before_start(void)
{
    setup();
    char ev[512];
    snprintf(ev, sizeof ev, "%s/ev-before.json", STATE);
    hone_guard_opts o = guard_test_opts("cpu", "swiglu", HONE_SOURCE_DIR "/kernels/cpu/swiglu.c", STATE);
    o.evidence_path = ev;
    flag = 1;
    o.cancel = &flag;
    hone_guard_result res;
    CHECK_EQ_INT(guard_test_run(&res, &o, NULL), 0);
    CHECK_MSG(res.code == HONE_GUARD_CANCELLED && !res.accepted, "%s: %s", hone_guard_code_name(res.code), res.reason);
    CHECK_STR_CONTAINS(res.reason, "cancelled");
    CHECK_EQ_INT(strlen(res.hash), 64); /* frozen first: the store has the source */
    char state[32];
    int evidence, stray;
    store_state(res.hash, state, sizeof state, &evidence, &stray);
    CHECK_MSG(strcmp(state, "proposed") == 0, "state %s", state);
    CHECK_EQ_INT(evidence, 0);
    CHECK_EQ_INT(stray, 0);
    CHECK(access(ev, F_OK) != 0);
}

/* A candidate that hangs in the kernel-parity worker: without the flag the worker's watchdog
 * (30 s here) would end it with a timeout; the flag at 0.5 s ends the run within a second. */
static void test_cancelled_while_a_worker_hangs(void)
{
    setup();
    hone_guard_opts o = guard_test_opts("cpu", "swiglu", SRC "redteam/loops_forever.c", STATE);
    o.kernel_timeout_s = 30;
    flag = 0;
    o.cancel = &flag;
    double after = 0.5;
    pthread_t th;
    CHECK_EQ_INT(pthread_create(&th, NULL, raise_later, &after), 0);
    hone_guard_result res;
    CHECK_EQ_INT(guard_test_run(&res, &o, NULL), 0);
    pthread_join(th, NULL);
    fprintf(stderr, "  loops_forever.c cancelled at 0.5 s -> %s after %.2f s\n", hone_guard_code_name(res.code),
            res.seconds);
    CHECK_MSG(res.code == HONE_GUARD_CANCELLED && !res.accepted, "%s: %s", hone_guard_code_name(res.code), res.reason);
    /* generous for a loaded machine: the point is that the 30 s watchdog did not decide */
    CHECK_MSG(res.seconds >= 0.5 && res.seconds < 10, "%.2f s", res.seconds);
    char state[32];
    int evidence, stray;
    store_state(res.hash, state, sizeof state, &evidence, &stray);
    CHECK_MSG(strcmp(state, "proposed") == 0 || strcmp(state, "compiled") == 0, "state %s", state);
    CHECK_EQ_INT(evidence, 0);
    CHECK_EQ_INT(stray, 0);
}

static void cleanup(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", STATE);
    if (STATE[0] && system(cmd)) { /* best effort */ }
}

int main(int argc, char **argv)
{
    atexit(cleanup);
    static const harness_case cases[] = {TEST_CASE(test_cancelled_before_start),
                                         TEST_CASE(test_cancelled_while_a_worker_hangs)};
    return harness_run(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
}
