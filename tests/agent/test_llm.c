/* The LLM client against a scripted endpoint on loopback (tests/agent/fake_llm.py): replies,
 * usage, retries on 500 and 429, a timeout, a 4xx, garbage, an unreachable endpoint, the
 * bearer key sent but never in error messages; and code extraction from replies. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/extract.h"
#include "agent/llm.h"
#include "engine/error.h"
#include "harness.h"

static pid_t server_pid;
static char tmpdir[] = "/tmp/hone-llm-XXXXXX";

/* Starts fake_llm.py with the script text; returns its port. */
static int start_server(const char *script, const char *extra)
{
    char path[256], cmd[1024];
    snprintf(path, sizeof path, "%s/script.json", tmpdir);
    FILE *f = fopen(path, "w");
    fputs(script, f);
    fclose(f);
    int fds[2];
    if (pipe(fds)) return -1;
    server_pid = fork();
    if (server_pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        snprintf(cmd, sizeof cmd, "exec python3 %s/tests/agent/fake_llm.py --script %s --log %s/log.jsonl %s",
                 HONE_SOURCE_DIR, path, tmpdir, extra ? extra : "");
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[32] = {0};
    size_t got = 0;
    while (got < sizeof buf - 1 && !strchr(buf, '\n')) { /* the whole line, then close */
        ssize_t n = read(fds[0], buf + got, sizeof buf - 1 - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fds[0]);
    return got > 0 ? atoi(buf) : -1;
}

static void stop_server(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, NULL, 0);
        server_pid = 0;
    }
}

static hone_llm *client(int port, const char *key, long timeout_ms)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", port);
    hone_llm_opts o = HONE_LLM_OPTS_INIT;
    o.url = url;
    o.model = "fake-model";
    o.api_key = key;
    o.timeout_ms = timeout_ms;
    o.backoff_ms = 10;
    o.max_retries = 2;
    hone_llm *l = NULL;
    CHECK_EQ_INT(hone_llm_new(&l, &o), 0);
    return l;
}

static const hone_llm_msg msgs[] = {{"system", "You write kernels."}, {"user", "Make it fast."}};

static void test_reply_and_usage(void)
{
    int port = start_server("[{\"reply\": \"hello ```c\\nint x;\\n```\"}]", "--api-key sekrit-123");
    CHECK(port > 0);
    hone_llm *l = client(port, "sekrit-123", 5000);
    char *out = NULL;
    hone_llm_usage u;
    CHECK_EQ_INT(hone_llm_chat(l, msgs, 2, &out, &u), 0);
    CHECK_STR_CONTAINS(out, "int x;");
    CHECK_EQ_INT(u.attempts, 1);
    CHECK_EQ_INT(u.http_status, 200);
    CHECK(u.prompt_tokens > 0 && u.completion_tokens > 0);
    CHECK_STR_CONTAINS(hone_llm_endpoint(l), "/v1/chat/completions");
    free(out);
    hone_llm_free(l);
    /* the request carried the model, both messages and the key */
    char path[256], line[8192] = {0};
    snprintf(path, sizeof path, "%s/log.jsonl", tmpdir);
    FILE *f = fopen(path, "r");
    CHECK(f && fgets(line, sizeof line, f));
    if (f) fclose(f);
    CHECK_STR_CONTAINS(line, "\"model\": \"fake-model\"");
    CHECK_STR_CONTAINS(line, "Make it fast.");
    CHECK_STR_CONTAINS(line, "Bearer sekrit-123");
    /* a wrong key: a 401 is not retried, and the message never shows the key */
    l = client(port, "wrong-key", 5000);
    CHECK_EQ_INT(hone_llm_chat(l, msgs, 2, &out, &u), HONE_EINVAL);
    CHECK_EQ_INT(u.attempts, 1);
    CHECK_STR_CONTAINS(hone_error_last(), "HTTP 401");
    CHECK(strstr(hone_error_last(), "wrong-key") == NULL);
    hone_llm_free(l);
    stop_server();
    remove(path);
}

static void test_retries(void)
{
    int port = start_server("[{\"status\": 500}, {\"status\": 429}, {\"reply\": \"third time\"}]", NULL);
    hone_llm *l = client(port, NULL, 5000);
    char *out = NULL;
    hone_llm_usage u;
    CHECK_EQ_INT(hone_llm_chat(l, msgs, 2, &out, &u), 0);
    CHECK_EQ_INT(u.attempts, 3);
    CHECK(out && strcmp(out, "third time") == 0);
    free(out);
    hone_llm_free(l);
    stop_server();
    /* always 500: gives up after 1 + 2 retries with the server's message */
    port = start_server("[{\"status\": 503}]", NULL);
    l = client(port, NULL, 5000);
    CHECK_EQ_INT(hone_llm_chat(l, msgs, 2, &out, &u), HONE_EIO);
    CHECK_EQ_INT(u.attempts, 3);
    CHECK_STR_CONTAINS(hone_error_last(), "HTTP 503");
    CHECK_STR_CONTAINS(hone_error_last(), "scripted failure 503");
    CHECK(out == NULL);
    hone_llm_free(l);
    stop_server();
}

static void test_timeout_garbage_unreachable(void)
{
    int port = start_server("[{\"sleep\": 3, \"reply\": \"late\"}]", NULL);
    hone_llm *l = client(port, NULL, 300);
    char *out = NULL;
    hone_llm_usage u;
    CHECK_EQ_INT(hone_llm_chat(l, msgs, 2, &out, &u), HONE_EIO);
    CHECK_STR_CONTAINS(hone_error_last(), "unreachable");
    CHECK_EQ_INT(u.attempts, 3);
    CHECK(u.seconds < 2.9); /* three 0.3 s timeouts, not three full answers */
    hone_llm_free(l);
    stop_server();
    port = start_server("[{\"garbage\": \"<html>nope</html>\"}]", NULL);
    l = client(port, NULL, 5000);
    CHECK_EQ_INT(hone_llm_chat(l, msgs, 2, &out, &u), HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "not JSON");
    hone_llm_free(l);
    stop_server();
    /* a port nobody listens on (the server just stopped) */
    l = client(port, NULL, 1000);
    CHECK_EQ_INT(hone_llm_chat(l, msgs, 2, &out, &u), HONE_EIO);
    CHECK_STR_CONTAINS(hone_error_last(), "unreachable");
    hone_llm_free(l);
    /* no URL configured at all */
    hone_llm_opts o = HONE_LLM_OPTS_INIT;
    unsetenv("HONE_LLM_URL");
    CHECK_EQ_INT(hone_llm_new(&l, &o), HONE_EINVAL);
    CHECK_STR_CONTAINS(hone_error_last(), "HONE_LLM_URL");
}

static void test_extract(void)
{
    char *code = NULL;
    hone_extract_status st;
    const char *good =
        "Here is a faster kernel.\n```c\n#include \"kernels/cpu/common.h\"\n"
        "void hone_cpu_add(float *restrict y, const float *a, const float * b, int64_t n, int ith, int nth)\n"
        "{\n    (void)y;\n}\n```\nIt unrolls by 4.";
    CHECK_EQ_INT(hone_extract_code(good, HONE_SLOT_ADD, "cpu", &code, &st), 0);
    CHECK_EQ_INT(st, HONE_EXTRACT_OK);
    CHECK_STR_CONTAINS(code, "hone_cpu_add(float *restrict y");
    CHECK(code && !strstr(code, "```"));
    free(code);
    CHECK_EQ_INT(hone_extract_code("I think you should unroll the loop.", HONE_SLOT_ADD, "cpu", &code, &st), 0);
    CHECK_EQ_INT(st, HONE_EXTRACT_NO_CODE);
    CHECK(code == NULL);
    CHECK_EQ_INT(hone_extract_code("```c\nvoid helper(void) {}\n```", HONE_SLOT_ADD, "cpu", &code, &st), 0);
    CHECK_EQ_INT(st, HONE_EXTRACT_NO_ENTRY);
    const char *bad = "```c\nvoid hone_cpu_add(float *y, const float *a, int64_t n, int ith, int nth) { }\n```";
    CHECK_EQ_INT(hone_extract_code(bad, HONE_SLOT_ADD, "cpu", &code, &st), 0);
    CHECK_EQ_INT(st, HONE_EXTRACT_BAD_SIGNATURE);
    CHECK_STR_CONTAINS(hone_error_last(), "the slot's are");
    /* a kernel for another slot says which slot it is for */
    const char *other = "```c\nvoid hone_cpu_swiglu(float *out, const float *g, const float *u, int64_t n, int ith, int nth)\n{ }\n```";
    CHECK_EQ_INT(hone_extract_code(other, HONE_SLOT_ADD, "cpu", &code, &st), 0);
    CHECK_EQ_INT(st, HONE_EXTRACT_NO_ENTRY);
    CHECK_STR_CONTAINS(hone_error_last(), "defines hone_cpu_swiglu, the entry point of slot swiglu; this slot is add");
    /* a block cut off at the token limit: no closing fence, unbalanced braces */
    const char *cut = "Here:\n```c\nvoid hone_cpu_add(float *y, const float *a, const float *b, int64_t n, int ith, int nth)\n"
                      "{\n    for (int64_t i = 0; i < n; i++) {\n        y[i] = a[i] /* { */ + b";
    CHECK_EQ_INT(hone_extract_code(cut, HONE_SLOT_ADD, "cpu", &code, &st), 0);
    CHECK_EQ_INT(st, HONE_EXTRACT_PARTIAL);
    CHECK(code == NULL);
    CHECK_STR_CONTAINS(hone_error_last(), "is cut off");
    /* an unterminated fence around a complete function is still the kernel */
    const char *open_fence = "```c\nvoid hone_cpu_add(float *y, const float *a, const float *b, int64_t n, int ith, int nth)\n"
                             "{\n    const char *s = \"}\"; (void)s; /* } */\n}\n";
    CHECK_EQ_INT(hone_extract_code(open_fence, HONE_SLOT_ADD, "cpu", &code, &st), 0);
    CHECK_EQ_INT(st, HONE_EXTRACT_OK);
    free(code);
    /* prose with several blocks: a shell line, a helper, then the kernel; the kernel's block wins */
    const char *several = "First compile with\n```sh\ngcc -O3 add.c\n```\nA helper:\n```c\nstatic inline float twice(float x) { return 2 * x; }\n```\n"
                          "And the kernel:\n```c\nvoid hone_cpu_add(float *y, const float *a, const float *b, int64_t n, int ith, int nth)\n{ (void)y; }\n```\nDone.";
    CHECK_EQ_INT(hone_extract_code(several, HONE_SLOT_ADD, "cpu", &code, &st), 0);
    CHECK_EQ_INT(st, HONE_EXTRACT_OK);
    CHECK(code && strstr(code, "hone_cpu_add") && !strstr(code, "gcc") && !strstr(code, "twice"));
    free(code);
    /* every shipped baseline, fenced, extracts with its own signature */
    for (int s = 0; s < HONE_SLOT_COUNT; s++) {
        char path[512];
        snprintf(path, sizeof path, "%s/kernels/cpu/%s.c", HONE_SOURCE_DIR, hone_slots_name((hone_slot_id)s));
        FILE *f = fopen(path, "r");
        CHECK_MSG(f != NULL, "%s", path);
        if (!f) continue;
        static char src[65536];
        size_t n = fread(src, 1, sizeof src - 1, f);
        fclose(f);
        src[n] = 0;
        static char reply[70000];
        snprintf(reply, sizeof reply, "Sure.\n```c\n%s```\n", src);
        CHECK_EQ_INT(hone_extract_code(reply, (hone_slot_id)s, "cpu", &code, &st), 0);
        CHECK_MSG(st == HONE_EXTRACT_OK, "%s: %s", hone_slots_name((hone_slot_id)s), hone_error_last());
        free(code);
    }
}

static void cleanup(void)
{
    stop_server();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) { /* best effort */ }
}

int main(int argc, char **argv)
{
    if (!mkdtemp(tmpdir)) return 1;
    atexit(cleanup);
    static const harness_case cases[] = {TEST_CASE(test_reply_and_usage), TEST_CASE(test_retries),
                                         TEST_CASE(test_timeout_garbage_unreachable),
                                         TEST_CASE(test_extract)};
    return harness_run(cases, 4, argc, argv);
}
