/* Concurrent use of one store: two processes putting, compiling and moving the same candidate at
 * once both succeed, see one whole object with one hash and lose no history entry; two guards on
 * one candidate with a shared state directory reach the same verdict with no read error. */
#include <cjson/cJSON.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "candidates/compile.h"
#include "candidates/sha256.h"
#include "candidates/store.h"
#include "engine/error.h"
#include "engine/file.h"
#include "guard_test.h"
#include "harness.h"
#include "candidates_test.h"

enum { ROUNDS = 6 };

/* One writer: ROUNDS x (put, compile into the store, hash what is there, set a state).
 * Its exit status is 0 only when every step worked and every object had the hash `want`. */
static int writer(const char *dir, const char *want)
{
    hone_store *s = NULL;
    if (hone_store_open(&s, dir)) return 10;
    hone_store_meta meta = {"add", "cpu", "file", "test_store", NULL};
    for (int r = 0; r < ROUNDS; r++) {
        char hash[65], srcp[4400], so[4400], got[65];
        if (hone_store_put(s, hash, candidates_test_add_src, strlen(candidates_test_add_src), &meta)) return 11;
        hone_store_path(s, hash, "source.c", srcp, sizeof srcp);
        hone_store_path(s, hash, "candidate.so", so, sizeof so);
        hone_compile_cpu_result cr;
        int rc = hone_compile_cpu(&cr, srcp, so, NULL);
        if (!rc && strcmp(cr.so_hash, want)) rc = 12;
        if (!rc && cr.log) rc = hone_store_write(s, hash, "compile.log", cr.log, strlen(cr.log)) ? 13 : 0;
        hone_compile_cpu_result_clear(&cr);
        if (rc) {
            fprintf(stderr, "writer %ld: %s\n", (long)getpid(), hone_error_last());
            return rc > 0 ? rc : 14;
        }
        /* the other writer may be renaming its object over this one: whole either way */
        if (hone_compile_file_hash(got, so) || strcmp(got, want)) return 15;
        if (hone_store_set_state(s, hash, HONE_STORE_COMPILED, NULL, NULL)) return 16;
    }
    hone_store_free(s);
    return 0;
}

static void test_two_writers(void)
{
    char *d = candidates_test_tmpdir("store");
    /* the object's hash, from a compile outside the store */
    char src[4300], so[4300];
    snprintf(src, sizeof src, "%s/ref.c", d);
    snprintf(so, sizeof so, "%s/ref.so", d);
    FILE *f = fopen(src, "w");
    fputs(candidates_test_add_src, f);
    fclose(f);
    hone_compile_cpu_result ref;
    CHECK_EQ_INT(hone_compile_cpu(&ref, src, so, NULL), 0);

    pid_t p[2];
    for (int i = 0; i < 2; i++)
        if ((p[i] = fork()) == 0) _exit(writer(d, ref.so_hash));
    for (int i = 0; i < 2; i++) {
        int st = 0;
        waitpid(p[i], &st, 0);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d: status %d", i,
                  WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    /* no entry lost: 2 x ROUNDS "compiled" and as many "proposed" in the history */
    hone_store *s = NULL;
    CHECK_EQ_INT(hone_store_open(&s, d), 0);
    char hash[65], *m = NULL;
    hone_sha256_hex(candidates_test_add_src, strlen(candidates_test_add_src), hash);
    CHECK_EQ_INT(hone_store_read_meta(s, hash, &m), 0);
    cJSON *j = m ? cJSON_Parse(m) : NULL;
    CHECK(j != NULL);
    int compiled = 0, proposed = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "history")) {
        const char *stn = cJSON_GetStringValue(cJSON_GetObjectItem(e, "state"));
        compiled += stn && !strcmp(stn, "compiled");
        proposed += stn && !strcmp(stn, "proposed");
    }
    CHECK_EQ_INT(compiled, 2 * ROUNDS);
    CHECK_EQ_INT(proposed, 2 * ROUNDS);
    /* no temp file or private compile directory left behind */
    char cmd[4600];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A %s/candidates/%s | grep -v -x -e source.c -e meta.json "
             "-e candidate.so -e compile.log -e .lock)\"", d, hash);
    CHECK_EQ_INT(system(cmd), 0);
    cJSON_Delete(j);
    free(m);
    hone_store_free(s);
    hone_compile_cpu_result_clear(&ref);
    candidates_test_rm_rf(d);
}

/* What a guard child reports back through shared memory. */
typedef struct {
    int rc, accepted, code;
    char reason[512], so_hash[65], error[512];
} guard_report;

static void test_two_guards(void)
{
    char *d = candidates_test_tmpdir("store");
    char src[4300];
    snprintf(src, sizeof src, "%s/add.c", d);
    FILE *f = fopen(src, "w");
    fputs(candidates_test_add_src, f);
    fclose(f);
    guard_report *rep = mmap(NULL, 2 * sizeof *rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(rep != MAP_FAILED);
    if (rep == MAP_FAILED) return;
    memset(rep, 0, 2 * sizeof *rep);
    pid_t p[2];
    for (int i = 0; i < 2; i++)
        if ((p[i] = fork()) == 0) {
            hone_guard_opts o = guard_test_opts("cpu", "add", src, d);
            o.skip_speed = 1;
            o.seed = 7;
            o.model_prompts = 2;
            o.model_steps = 8;
            hone_guard_result res;
            rep[i].rc = hone_guard_run(&res, &o, stderr);
            rep[i].accepted = res.accepted;
            rep[i].code = (int)res.code;
            snprintf(rep[i].reason, sizeof rep[i].reason, "%s", res.reason);
            snprintf(rep[i].so_hash, sizeof rep[i].so_hash, "%s", res.so_hash);
            snprintf(rep[i].error, sizeof rep[i].error, "%s", rep[i].rc ? hone_error_last() : "");
            _exit(0);
        }
    for (int i = 0; i < 2; i++) {
        int st = 0;
        waitpid(p[i], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        fprintf(stderr, "  guard %d: rc %d, %s (%s) so %.16s %s\n", i, rep[i].rc,
                hone_guard_code_name(rep[i].code), rep[i].reason, rep[i].so_hash, rep[i].error);
        CHECK_EQ_INT(rep[i].rc, 0);
        CHECK_EQ_INT(rep[i].accepted, 1);
        CHECK(strstr(rep[i].reason, "cannot read") == NULL);
        CHECK_EQ_INT((int)strlen(rep[i].so_hash), 64);
    }
    CHECK_EQ_INT(rep[0].code, rep[1].code);
    CHECK(strcmp(rep[0].so_hash, rep[1].so_hash) == 0);
    /* the evidence records the object's hash */
    char hash[65], ev[4400], *txt = NULL;
    hone_sha256_hex(candidates_test_add_src, strlen(candidates_test_add_src), hash);
    snprintf(ev, sizeof ev, "%s/candidates/%s/evidence.json", d, hash);
    CHECK_EQ_INT(hone_file_read(ev, &txt, NULL), 0);
    char want[100];
    snprintf(want, sizeof want, "\"so_hash\":\t\"%s\"", rep[0].so_hash);
    CHECK_STR_CONTAINS(txt, want);
    free(txt);
    munmap(rep, 2 * sizeof *rep);
    candidates_test_rm_rf(d);
}

TEST_MAIN(TEST_CASE(test_two_writers), TEST_CASE(test_two_guards))
