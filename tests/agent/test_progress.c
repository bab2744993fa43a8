/* The progress line: its text, plain lines off a terminal, the redrawn bar on one, and the
 * guard's callback driving it. */
#include <time.h>
#include <unistd.h>

#include "agent/progress.h"
#include "harness.h"

static char *contents(FILE *f)
{
    fflush(f);
    long n = ftell(f);
    char *s = calloc(1, (size_t)n + 1);
    rewind(f);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = 0;
    fseek(f, 0, SEEK_END);
    return s;
}

static void test_plain_lines(void)
{
    FILE *f = tmpfile();
    hone_progress *p = NULL;
    CHECK_EQ_INT(hone_progress_new(&p, f, 6, 0), 0);
    hone_progress_candidate(p, 0, "profile of tiny");
    hone_progress_begin(p, "profile");
    hone_progress_end(p, "profile", NULL);
    hone_progress_candidate(p, 2, "swiglu");
    hone_progress_guard_cb(p, "speed", 0, NULL);
    char line[256];
    hone_progress_format(p, line, sizeof line);
    CHECK_STR_CONTAINS(line, "candidate 2/6 swiglu | speed 0.0 s | run 0 s | 4 candidates left");
    hone_progress_guard_cb(p, "speed", 1, "pass");
    hone_progress_free(p);
    char *s = contents(f);
    CHECK_STR_CONTAINS(s, "progress: profile of tiny | profile ... 0.0 s | run 0 s | 6 candidates left\n");
    CHECK_STR_CONTAINS(s, "progress: profile of tiny | profile done 0.0 s |");
    CHECK_STR_CONTAINS(s, "progress: candidate 2/6 swiglu | speed ... 0.0 s |");
    CHECK_STR_CONTAINS(s, "progress: candidate 2/6 swiglu | speed pass 0.0 s | run 0 s | 4 candidates left\n");
    CHECK(!strchr(s, '\r') && !strchr(s, '\033')); /* no terminal control off a terminal */
    free(s);
    fclose(f);
}

static void test_bar(void)
{
    FILE *f = tmpfile();
    hone_progress *p = NULL;
    CHECK_EQ_INT(hone_progress_new(&p, f, 4, 1), 0);
    hone_progress_candidate(p, 3, "matvec_q4_1");
    hone_progress_begin(p, "model-parity");
    struct timespec ts = {1, 200000000}; /* the line is redrawn while the step runs */
    nanosleep(&ts, NULL);
    char *mid = contents(f);
    hone_progress_clear(p);
    hone_progress_end(p, "model-parity", "pass");
    hone_progress_free(p);
    char *s = contents(f);
    /* 2 of 4 candidates done: half the bar */
    CHECK_STR_CONTAINS(mid, "\r\033[K[##########----------] candidate 3/4 matvec_q4_1 | model-parity 0.0 s");
    CHECK_STR_CONTAINS(mid, "model-parity 1.0 s"); /* drawn again a second later */
    int redraws = 0;
    for (const char *q = mid; (q = strstr(q, "\r\033[K[")); q++) redraws++;
    CHECK_MSG(redraws >= 4, "%d redraws in 1.2 s", redraws);
    CHECK(strlen(s) >= 4 && strcmp(s + strlen(s) - 4, "\r\033[K") == 0); /* erased at the end */
    CHECK(!strchr(s, '\n'));
    free(mid);
    free(s);
    fclose(f);
}

TEST_MAIN(TEST_CASE(test_plain_lines), TEST_CASE(test_bar))
