/* `hone tune` against a scripted OpenAI-compatible endpoint on loopback (fake_llm.py): a
 * correct faster kernel is accepted and committed for review; a broken one, prose without
 * code, HTTP 500s and a timeout are each rejected or survived with a reason; the run stays
 * within its budget; later prompts carry the earlier rejections. Also `--llm none`. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/search.h"
#include "harness.h"

#include "engine/file.h"

static char tmpdir[] = "/tmp/hone-tune-test-XXXXXX";
static pid_t server_pid;

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strdup(buf);
}

static int run(const char *cmd, char **out)
{
    char full[16384];
    snprintf(full, sizeof full, "%s > %s/out.txt 2>&1", cmd, tmpdir);
    int st = system(full);
    snprintf(full, sizeof full, "%s/out.txt", tmpdir);
    *out = slurp(full);
    fprintf(stderr, "$ %s\n%s\n", cmd, *out ? *out : "");
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int start_server(const char *script_path, const char *log_path)
{
    int fds[2];
    if (pipe(fds)) return -1;
    server_pid = fork();
    if (server_pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "exec python3 %s/tests/agent/fake_llm.py --script %s --log %s",
                 HONE_SOURCE_DIR, script_path, log_path);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[32] = {0};
    size_t got = 0;
    while (got < sizeof buf - 1 && !strchr(buf, '\n')) {
        ssize_t n = read(fds[0], buf + got, sizeof buf - 1 - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fds[0]);
    return got ? atoi(buf) : -1;
}

static int make_repo(const char *dir)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "git init -q %s && git -C %s -c user.email=t@t -c user.name=t commit -q "
             "--allow-empty -m base", dir, dir);
    return system(cmd);
}

static void test_scripted_llm(void)
{
    char model[512], script[512], log[512], good[512], repo[512], cmd[8192];
    /* SmolLM2: a real model's decode step for the guard's end-to-end gate; the scripted kernel is
     * tests/guard/good/rmsnorm_vec.c (exact tier, compute-bound, so its 2.7x does not depend on
     * what else streams memory on the machine) */
    FILE *fp = popen("python3 " HONE_SOURCE_DIR "/tools/find_smollm2.py 2>/dev/null", "r");
    model[0] = 0;
    if (fp && fgets(model, sizeof model, fp)) model[strcspn(model, "\n")] = 0;
    if (fp) pclose(fp);
    if (!model[0] || access(model, R_OK)) { SKIP_CASE("SmolLM2 not installed"); return; }
    snprintf(script, sizeof script, "%s/script.json", tmpdir);
    snprintf(log, sizeof log, "%s/requests.jsonl", tmpdir);
    snprintf(good, sizeof good, "%s/good.md", tmpdir);
    snprintf(repo, sizeof repo, "%s/repo", tmpdir);
    CHECK_EQ_INT(make_repo(repo), 0);
    /* the correct, faster kernel, as an LLM would reply */
    char *src = NULL;
    CHECK_EQ_INT(hone_file_read(HONE_SOURCE_DIR "/tests/guard/good/rmsnorm_vec.c", &src, NULL), 0);
    FILE *f = fopen(good, "w");
    fprintf(f, "Here is a version with four vector accumulators.\n\n```c\n%s```\n", src);
    fclose(f);
    free(src);
    f = fopen(script, "w");
    fprintf(f, "[{\"reply_file\": \"%s\"},\n"
               " {\"reply\": \"```c\\n#include \\\"kernels/cpu/common.h\\\"\\nvoid hone_cpu_rmsnorm(float *y, const float *x, const float *w, int64_t n, int64_t dim, float eps, int ith, int nth)\\n{\\n    this does not compile;\\n}\\n```\"},\n"
               " {\"reply\": \"You could try unrolling the loop and using prefetch instructions.\"},\n"
               " {\"status\": 500}, {\"status\": 500}, {\"status\": 500}, {\"status\": 500},\n"
               " {\"sleep\": 3, \"reply\": \"too late\"}]\n", good);
    fclose(f);
    int port = start_server(script, log);
    CHECK(port > 0);
    snprintf(cmd, sizeof cmd, "%s tune -m %s --llm http://127.0.0.1:%d/v1 --llm-model scripted "
             "--llm-timeout 1 --slot rmsnorm --budget 5 --repo %s --state-dir %s/state", HONE_BIN,
             model, port, repo, tmpdir);
    char *out = NULL;
    CHECK_EQ_INT(run(cmd, &out), 0);
    CHECK_STR_CONTAINS(out, "[1/5] rmsnorm");
    CHECK_STR_CONTAINS(out, "ACCEPTED exact");
    CHECK_STR_CONTAINS(out, "committed for review: hone/rmsnorm/cpu/");
    CHECK_STR_CONTAINS(out, "[2/5] rmsnorm");
    CHECK_STR_CONTAINS(out, "rejected: compile");
    CHECK_STR_CONTAINS(out, "[3/5] rmsnorm          rejected: no code");
    CHECK_STR_CONTAINS(out, "[4/5] rmsnorm          LLM call failed");
    CHECK_STR_CONTAINS(out, "HTTP 500");
    CHECK_STR_CONTAINS(out, "[5/5] rmsnorm          LLM call failed");
    CHECK_STR_CONTAINS(out, "unreachable"); /* the timeout */
    CHECK(!strstr(out, "[6/5]"));
    CHECK_STR_CONTAINS(out, "5 candidates, 1 without usable code, 2 LLM errors");
    free(out);
    kill(server_pid, SIGKILL);
    waitpid(server_pid, NULL, 0);
    /* the requests: 1 + 1 + 1 + 4 (500, retried) + 4 (timeouts, retried) = 11; later prompts
     * carry the earlier rejections */
    char *reqs = slurp(log);
    int lines = 0;
    for (char *q = reqs; q && *q; q++) lines += *q == '\n';
    CHECK_EQ_INT(lines, 11);
    char *third = reqs;
    for (int i = 0; i < 2 && third; i++) third = strchr(third, '\n') ? strchr(third, '\n') + 1 : NULL;
    CHECK(third && strstr(third, "Earlier candidates for this slot"));
    CHECK(third && strstr(third, "compile"));
    CHECK(reqs && strstr(reqs, "\"model\": \"scripted\""));
    free(reqs);
    /* the branch is in the repository, with the trailers */
    snprintf(cmd, sizeof cmd, "git -C %s log --all --format=%%B | grep -c '^Hone-Slot: rmsnorm'", repo);
    CHECK_EQ_INT(run(cmd, &out), 0);
    CHECK(out && atoi(out) == 1);
    free(out);
}

/* The LLM proposer on realistic replies, on the tiny model: prose around several code blocks (the
 * kernel's block is guarded), a wrong signature, code cut off at the token limit, the first
 * kernel proposed again (not guarded twice), a kernel for another slot. Each is a verdict with
 * its reason; the prompts carry the profile with its roofline and the rejections so far. */
static void test_realistic_replies(void)
{
    char model[512], script[512], log[512], kernel[512], cmd[8192];
    snprintf(model, sizeof model, "%s/tiny-llama-f32.gguf", HONE_TEST_DATA_DIR);
    snprintf(script, sizeof script, "%s/script2.json", tmpdir);
    snprintf(log, sizeof log, "%s/requests2.jsonl", tmpdir);
    snprintf(kernel, sizeof kernel, "%s/kernel.md", tmpdir);
    FILE *f = fopen(kernel, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("To build it:\n```sh\ncc -O3 -c swiglu.c\n```\nA helper you could use:\n```c\n"
          "static inline float silu(float g) { return g / (1.0f + expf(-g)); }\n```\nThe kernel:\n```c\n"
          "#include \"kernels/cpu/common.h\"\n\n"
          "void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)\n"
          "{\n    int64_t i0, i1;\n    hone_cpu_share(n, ith, nth, &i0, &i1);\n"
          "    for (int64_t i = i0; i < i1; i++) {\n        float g = gate[i];\n"
          "        out[i] = g / (1.0f + expf(-g)) * up[i];\n    }\n}\n```\nIt keeps the incumbent's order.\n", f);
    fclose(f);
    f = fopen(script, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "[{\"reply_file\": \"%s\"},\n"
               " {\"reply\": \"```c\\nvoid hone_cpu_swiglu(float *out, const float *gate, int64_t n, int ith, int nth)\\n{ }\\n```\"},\n"
               " {\"finish_reason\": \"length\", \"reply\": \"```c\\nvoid hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)\\n{\\n    for (int64_t i = 0; i < n; i++) {\\n        out[i] = gate[i] *\"},\n"
               " {\"reply_file\": \"%s\"},\n"
               " {\"reply\": \"Try this rmsnorm:\\n```c\\nvoid hone_cpu_rmsnorm(float *y, const float *x, const float *w, int64_t n, int64_t dim, float eps, int ith, int nth)\\n{ }\\n```\"}]\n",
            kernel, kernel);
    fclose(f);
    int port = start_server(script, log);
    CHECK(port > 0);
    snprintf(cmd, sizeof cmd, "%s tune -m %s --llm http://127.0.0.1:%d/v1 --llm-model scripted --slot swiglu "
             "--budget 5 --no-commit --state-dir %s/state2", HONE_BIN, model, port, tmpdir);
    char *out = NULL;
    CHECK_EQ_INT(run(cmd, &out), 0);
    kill(server_pid, SIGKILL);
    waitpid(server_pid, NULL, 0);
    server_pid = 0;
    /* 1: the kernel's block reached the guard (a verdict with its hash, not "no code") */
    const char *first = out ? strstr(out, "[1/5] swiglu           ") : NULL;
    char hash[13] = "";
    CHECK(first && sscanf(first, "[1/5] swiglu %12s", hash) == 1 && strlen(hash) == 12);
    CHECK(first && !strncmp(first + 23, hash, 12) && !strstr(out, "[1/5] swiglu           rejected: no"));
    CHECK_STR_CONTAINS(out, "[2/5] swiglu           rejected: bad signature");
    CHECK_STR_CONTAINS(out, "[3/5] swiglu           rejected: partial code");
    CHECK_STR_CONTAINS(out, "(the reply stopped at the token limit)");
    char dup[128];
    snprintf(dup, sizeof dup, "[4/5] swiglu           rejected: duplicate of candidate %s, guarded before", hash);
    CHECK_STR_CONTAINS(out, dup);
    CHECK_STR_CONTAINS(out, "[5/5] swiglu           rejected: no entry point");
    CHECK_STR_CONTAINS(out, "the entry point of slot rmsnorm; this slot is swiglu");
    CHECK_STR_CONTAINS(out, "5 candidates, 3 without usable code, 0 LLM errors");
    free(out);
    /* five requests, each prompt with the profile and its roofline; the last one learns from the
     * bad signature, the cut-off block and the duplicate */
    char *reqs = slurp(log);
    int lines = 0;
    for (char *q = reqs; q && *q; q++) lines += *q == '\n';
    CHECK_EQ_INT(lines, 5);
    char *last = reqs ? strrchr(reqs, '{') : NULL;
    while (last && last > reqs && last[-1] != '\n') last--;
    CHECK(reqs && strstr(reqs, "of the measured roofline"));
    CHECK(last && strstr(last, "bad signature") && strstr(last, "partial code") && strstr(last, "duplicate"));
    free(reqs);
}

static void test_search_none(void)
{
    char model[512], repo[512], cmd[4096];
    snprintf(model, sizeof model, "%s/tiny-llama-q4_1.gguf", HONE_TEST_DATA_DIR);
    snprintf(repo, sizeof repo, "%s/repo2", tmpdir);
    CHECK_EQ_INT(make_repo(repo), 0);
    snprintf(cmd, sizeof cmd, "%s tune -m %s --llm none --slot matvec_q4_1 --budget 2 --screen 6 --repo %s "
             "--state-dir %s/state", HONE_BIN, model, repo, tmpdir);
    char *out = NULL;
    CHECK_EQ_INT(run(cmd, &out), 0);
    CHECK_STR_CONTAINS(out, "proposer: search");
    /* the search path screens the leading points, then guards at most two of them */
    CHECK_STR_CONTAINS(out, "screen matvec_q4_1");
    CHECK_STR_CONTAINS(out, "rows=2 prefetch=8192");
    CHECK_STR_CONTAINS(out, "rows=4 prefetch=8192");
    CHECK_STR_CONTAINS(out, "6 points screened");
    CHECK(!strstr(out, "[3/2]"));
    CHECK_STR_CONTAINS(out, "decode");
    free(out);
    /* an unreachable endpoint is a clear failure of each call, not a crash */
    snprintf(cmd, sizeof cmd, "%s tune -m %s --llm http://127.0.0.1:9/v1 --llm-timeout 1 --budget 1 "
             "--no-commit --state-dir %s/state", HONE_BIN, model, tmpdir);
    CHECK_EQ_INT(run(cmd, &out), 0);
    CHECK_STR_CONTAINS(out, "LLM call failed");
    free(out);
    /* every built-in slot has a search family now; a name that is no slot is refused */
    snprintf(cmd, sizeof cmd, "%s tune -m %s --llm none --slot nonsense --budget 1", HONE_BIN, model);
    CHECK_EQ_INT(run(cmd, &out), 1);
    CHECK_STR_CONTAINS(out, "unknown slot 'nonsense'");
    free(out);
    /* --llm self: the engine serves its own model to the tuner on loopback (the model it serves,
     * its whole trained context, no max_tokens: it answers to the end of its context) and a
     * round runs through it: the tiny random model's reply holds no code, a verdict of the round */
    snprintf(model, sizeof model, "%s/tiny-llama-long-f32.gguf", HONE_TEST_DATA_DIR);
    snprintf(cmd, sizeof cmd, "%s tune -m %s --llm self --slot swiglu --budget 1 --no-commit "
             "--state-dir %s/state", HONE_BIN, model, tmpdir);
    CHECK_EQ_INT(run(cmd, &out), 0);
    CHECK_STR_CONTAINS(out, "proposer: self (this model on loopback)");
    CHECK(out && !strstr(out, "does not exist") && !strstr(out, "LLM call failed"));
    CHECK_STR_CONTAINS(out, "[1/1] swiglu           rejected: no code");
    CHECK_STR_CONTAINS(out, "from llm tiny-llama-long-f32 via http://127.0.0.1:");
    const char *via = out ? strstr(out, "/v1/chat/completions, ") : NULL;
    long long pt = 0, ct = -1;
    CHECK(via && sscanf(via, "/v1/chat/completions, %lld prompt + %lld completion tokens", &pt, &ct) == 2);
    CHECK_MSG(pt > 1000 && ct >= 0, "prompt %lld, completion %lld tokens", pt, ct); /* the whole prompt went */
    CHECK_STR_CONTAINS(out, "1 without usable code, 0 LLM errors");
    free(out);
}

static void cleanup(void)
{
    if (server_pid > 0) { kill(server_pid, SIGKILL); waitpid(server_pid, NULL, 0); }
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) { /* best effort */ }
}

int main(int argc, char **argv)
{
    if (!mkdtemp(tmpdir)) return 1;
    atexit(cleanup);
    static const harness_case cases[] = {TEST_CASE(test_scripted_llm), TEST_CASE(test_realistic_replies),
                                         TEST_CASE(test_search_none)};
    return harness_run(cases, 3, argc, argv);
}
