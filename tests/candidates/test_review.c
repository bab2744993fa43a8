/* Review through git: proposals land on hone/<slot>/<backend>/<hash> branches with the right
 * tree, message and trailers (checked with the git command line), never touch the working tree,
 * the index, HEAD or uncommitted changes, and fail clearly without losing anything. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <git2.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/review.h"
#include "app/cli.h"
#include "engine/error.h"
#include "harness.h"
#include "review_test.h"

#ifndef HONE_BIN
#define HONE_BIN "hone"
#endif

static const char cand_src[] =
    "/* matvec_f32 candidate for the tests: the baseline's math, plain C. */\n"
    "#include \"kernels/cpu/common.h\"\n"
    "void hone_cpu_matvec_f32(float *y, const void *W, const float *x, int64_t rows, int64_t cols,\n"
    "                         int ith, int nth) { (void)y; (void)W; (void)x; (void)rows; (void)cols;\n"
    "                         (void)ith; (void)nth; }\n";

static hone_evidence evidence(const char *hash)
{
    hone_evidence ev = HONE_EVIDENCE_INIT;
    ev.speedup_median = 1.234;
    ev.speedup_ci_low = 1.12;
    ev.speedup_ci_high = 1.31;
    ev.ci_level = 0.95;
    ev.incumbent_ns = 1234.5;
    ev.candidate_ns = 1000.4;
    ev.reps = 40;
    ev.threshold = 1.05;
    ev.parity_tier = "faithful";
    ev.candidate_max_abs_err = 1.5e-6;
    ev.incumbent_max_abs_err = 2.0e-6;
    ev.shapes = "576x576, 1536x576, 7x35";
    ev.model_max_abs_dlogit = 3e-5;
    ev.model_kl_mean = 1e-9;
    ev.model_kl_max = 4e-8;
    ev.model_argmax_agreement = 1.0;
    ev.model_prompts = 4;
    ev.model_steps = 16;
    ev.device = "cpu: Test CPU (4 threads)";
    ev.model = "tiny-llama-q4_1";
    ev.candidate_hash = hash;
    ev.origin_kind = "llm";
    ev.origin = "qwen2.5-coder | test";
    ev.seed = 42;
    ev.guard_seconds = 12.5;
    return ev;
}

#define HASH_A "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define HASH_B "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

/* ---- tests ------------------------------------------------------------------------------------- */

static void test_evidence_json_markdown(void)
{
    hone_evidence ev = evidence(HASH_A);
    ev.model_kl_mean = NAN; /* unknown -> null */
    char *json = NULL, *md = NULL;
    CHECK_EQ_INT(hone_evidence_to_json(&json, &ev, "matvec_f32", "cpu"), 0);
    cJSON *root = cJSON_Parse(json);
    CHECK(root != NULL);
    if (root) {
        CHECK_STR_CONTAINS(cJSON_GetObjectItem(root, "slot")->valuestring, "matvec_f32");
        cJSON *speed = cJSON_GetObjectItem(root, "speed");
        CHECK_NEAR(cJSON_GetObjectItem(speed, "speedup_median")->valuedouble, 1.234, 1e-12);
        CHECK_NEAR(cJSON_GetObjectItem(speed, "ci_low")->valuedouble, 1.12, 1e-12);
        CHECK_EQ_INT(cJSON_GetObjectItem(speed, "reps")->valueint, 40);
        cJSON *kp = cJSON_GetObjectItem(root, "kernel_parity");
        CHECK_STR_CONTAINS(cJSON_GetObjectItem(kp, "tier")->valuestring, "faithful");
        cJSON *mp = cJSON_GetObjectItem(root, "model_parity");
        CHECK(cJSON_IsNull(cJSON_GetObjectItem(mp, "kl_mean")));
        CHECK_NEAR(cJSON_GetObjectItem(mp, "kl_max")->valuedouble, 4e-8, 1e-20);
        CHECK_STR_CONTAINS(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "candidate"), "hash")->valuestring,
                           HASH_A);
        cJSON_Delete(root);
    }
    CHECK_EQ_INT(hone_review_evidence_to_markdown(&md, &ev, "matvec_f32", "cpu"), 0);
    CHECK_STR_CONTAINS(md, "| metric | value |\n|---|---|\n");
    CHECK_STR_CONTAINS(md, "| speedup (median) | 1.234x |");
    CHECK_STR_CONTAINS(md, "| speedup 95% CI | 1.120 .. 1.310 |");
    CHECK_STR_CONTAINS(md, "| parity tier | faithful |");
    CHECK_STR_CONTAINS(md, "| model KL per position (mean / max) | n/a / 4.000e-08 |");
    CHECK_STR_CONTAINS(md, "| origin | llm: qwen2.5-coder \\| test |"); /* '|' escaped */
    free(json);
    free(md);
}

static void test_propose_commit(void)
{
    char *repo = make_repo();
    snapshot before, after;
    snap_take(&before, repo);
    char *base = run(NULL, "git -C %s rev-parse main", repo);

    hone_review_opts o = HONE_REVIEW_OPTS_INIT;
    o.repo = repo;
    hone_evidence ev = evidence(HASH_A);
    hone_review_result res;
    int rc = hone_review_propose(&res, &o, "matvec_f32", "cpu", cand_src, strlen(cand_src), &ev);
    CHECK_MSG(rc == 0, "%s", hone_error_last());
    CHECK_STR_CONTAINS(res.branch, "hone/matvec_f32/cpu/0123456789ab");
    CHECK_EQ_INT(strlen(res.branch), strlen("hone/matvec_f32/cpu/0123456789ab"));
    CHECK_EQ_INT(res.existed, 0);
    CHECK(strcmp(res.base, base) == 0);

    /* The branch, its parent and its commit, through the git command line. */
    char *tip = run(NULL, "git -C %s rev-parse %s", repo, res.branch);
    CHECK(strcmp(tip, res.commit) == 0);
    char *parent = run(NULL, "git -C %s rev-parse %s^", repo, res.branch);
    CHECK(strcmp(parent, base) == 0);
    char *title = run(NULL, "git -C %s log -1 --format=%%s %s", repo, res.branch);
    CHECK_MSG(strcmp(title, "matvec_f32 (cpu): 1.23x faster, faithful parity") == 0, "title '%s'", title);
    char *who = run(NULL, "git -C %s log -1 --format='%%an <%%ae>|%%cn <%%ce>' %s", repo, res.branch);
    CHECK_MSG(strcmp(who, "Hone <hone@localhost>|Hone <hone@localhost>") == 0, "'%s'", who);
    char *body = run(NULL, "git -C %s log -1 --format=%%b %s", repo, res.branch);
    CHECK_STR_CONTAINS(body, "| parity tier | faithful |");
    CHECK_STR_CONTAINS(body, "| device | cpu: Test CPU (4 threads) |");
    struct { const char *key, *want; } tr[] = {
        {"Hone-Slot", "matvec_f32"},
        {"Hone-Speedup", "1.234x (95% CI 1.120..1.310)"},
        {"Hone-Parity", "faithful"},
        {"Hone-Device", "cpu: Test CPU (4 threads)"},
        {"Hone-Model", "tiny-llama-q4_1"},
        {"Hone-Candidate", HASH_A},
    };
    for (size_t i = 0; i < sizeof tr / sizeof tr[0]; i++) {
        char *v = run(NULL, "git -C %s log -1 --format='%%(trailers:key=%s,valueonly)' %s", repo,
                      tr[i].key, res.branch);
        CHECK_MSG(strcmp(v, tr[i].want) == 0, "trailer %s = '%s', want '%s'", tr[i].key, v, tr[i].want);
        free(v);
    }
    char *ntr = run(NULL, "git -C %s log -1 --format='%%(trailers:only,unfold)' %s | grep -c .", repo,
                    res.branch);
    CHECK_MSG(strcmp(ntr, "6") == 0, "%s trailers", ntr);

    /* The tree: the candidate replaces the kernel, the evidence joins it; nothing else changes. */
    char *files = run(NULL, "git -C %s diff --name-status %s..%s", repo, base, res.branch);
    CHECK_MSG(strcmp(files, "M\tkernels/cpu/matvec_f32.c\nA\tkernels/cpu/matvec_f32.evidence.json\n"
                            "A\tkernels/cpu/matvec_f32.evidence.md") == 0,
              "diff:\n%s", files);
    char *shown = run(NULL, "git -C %s show %s:kernels/cpu/matvec_f32.c", repo, res.branch);
    CHECK(strncmp(shown, cand_src, strlen(shown)) == 0 && strlen(shown) + 1 == strlen(cand_src));
    char *json = run(NULL, "git -C %s show %s:kernels/cpu/matvec_f32.evidence.json", repo, res.branch);
    cJSON *root = cJSON_Parse(json);
    CHECK(root != NULL);
    if (root) {
        CHECK_NEAR(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "speed"), "speedup_median")->valuedouble,
                   1.234, 1e-12);
        cJSON_Delete(root);
    }
    char *md = run(NULL, "git -C %s show %s:kernels/cpu/matvec_f32.evidence.md", repo, res.branch);
    CHECK_STR_CONTAINS(md, "| speedup (median) | 1.234x |");
    char *readme = run(NULL, "git -C %s show %s:README", repo, res.branch);
    CHECK(strcmp(readme, "hello") == 0); /* the committed README, not the uncommitted change */
    int st;
    free(run(&st, "git -C %s fsck --no-progress 2>&1", repo));
    CHECK_EQ_INT(st, 0);

    /* Working tree, index, HEAD, main and the uncommitted changes: byte for byte. */
    snap_take(&after, repo);
    CHECK(snap_same(&before, &after));
    char *head = run(NULL, "git -C %s symbolic-ref HEAD", repo);
    CHECK(strcmp(head, "refs/heads/main") == 0);

    /* Again with the same candidate: reported, not duplicated. */
    hone_review_result again;
    rc = hone_review_propose(&again, &o, "matvec_f32", "cpu", cand_src, strlen(cand_src), &ev);
    CHECK_MSG(rc == 0, "%s", hone_error_last());
    CHECK_EQ_INT(again.existed, 1);
    CHECK(strcmp(again.commit, res.commit) == 0);
    CHECK(strcmp(again.branch, res.branch) == 0);

    /* The same hash: reported, whatever the text (the hash is the candidate's identity). */
    static const char other[] = "/* another */\n";
    rc = hone_review_propose(&again, &o, "matvec_f32", "cpu", other, strlen(other), &ev);
    CHECK_MSG(rc == 0 && again.existed == 1, "%s", hone_error_last());

    /* Another candidate whose hash shares the 12 characters of the branch name: refused, the
     * branch untouched. */
    hone_evidence evc = evidence("0123456789ab0000000000000000000000000000000000000000000000000000");
    rc = hone_review_propose(&again, &o, "matvec_f32", "cpu", other, strlen(other), &evc);
    CHECK(rc != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "already exists and proposes another candidate");
    char *tip2 = run(NULL, "git -C %s rev-parse %s", repo, res.branch);
    CHECK(strcmp(tip2, res.commit) == 0);

    /* No hash given: the source's git blob id names the branch. */
    hone_evidence ev2 = evidence(NULL);
    rc = hone_review_propose(&again, &o, "matvec_f32", "cpu", other, strlen(other), &ev2);
    CHECK_MSG(rc == 0, "%s", hone_error_last());
    char *blob = run(NULL, "printf '/* another */\\n' | git hash-object --stdin");
    char want[128];
    snprintf(want, sizeof want, "hone/matvec_f32/cpu/%.12s", blob);
    CHECK_MSG(strcmp(again.branch, want) == 0, "%s vs %s", again.branch, want);

    snap_free(&before);
    snap_free(&after);
    free(tip); free(tip2); free(parent); free(title); free(who); free(body); free(ntr); free(files);
    free(shown); free(json); free(md); free(readme); free(head); free(base); free(blob);
    sh("rm -rf %s", repo);
    free(repo);
}

static void test_base_ref_cuda_and_new_dirs(void)
{
    char *repo = make_repo();
    CHECK_EQ_INT(sh("cd %s && git commit -qm second --allow-empty", repo), 0);
    hone_review_opts o = HONE_REVIEW_OPTS_INIT;
    o.repo = repo;
    o.base_ref = "main~1";
    o.author_name = "Review Bot";
    o.author_email = "bot@example.com";
    hone_evidence ev = evidence(HASH_B);
    ev.parity_tier = "exact";
    static const char cu[] = "extern \"C\" __global__ void k() {}\n";
    hone_review_result res;
    int rc = hone_review_propose(&res, &o, "rmsnorm", "cuda", cu, strlen(cu), &ev);
    CHECK_MSG(rc == 0, "%s", hone_error_last());
    CHECK_STR_CONTAINS(res.branch, "hone/rmsnorm/cuda/fedcba987654");
    char *parent = run(NULL, "git -C %s rev-parse %s^", repo, res.branch);
    char *want = run(NULL, "git -C %s rev-parse main~1", repo);
    CHECK(strcmp(parent, want) == 0);
    char *files = run(NULL, "git -C %s diff --name-only %s %s", repo, want, res.branch);
    CHECK_MSG(strcmp(files, "kernels/cuda/rmsnorm.cu\nkernels/cuda/rmsnorm.evidence.json\n"
                            "kernels/cuda/rmsnorm.evidence.md") == 0, "%s", files);
    char *title = run(NULL, "git -C %s log -1 --format='%%s|%%an <%%ae>' %s", repo, res.branch);
    CHECK_MSG(strcmp(title, "rmsnorm (cuda): 1.23x faster, exact parity|Review Bot <bot@example.com>") == 0,
              "%s", title);
    free(parent); free(want); free(files); free(title);
    sh("rm -rf %s", repo);
    free(repo);
}

typedef struct { const char *repo, *hash, *src; int rc; hone_review_result res; char err[1024]; } job;

static void *propose_job(void *arg)
{
    job *j = arg;
    hone_review_opts o = HONE_REVIEW_OPTS_INIT;
    o.repo = j->repo;
    hone_evidence ev = evidence(j->hash);
    j->rc = hone_review_propose(&j->res, &o, "matvec_f32", "cpu", j->src, strlen(j->src), &ev);
    snprintf(j->err, sizeof j->err, "%s", hone_error_last());
    return NULL;
}

static void test_two_at_once(void)
{
    char *repo = make_repo();
    snapshot before, after;
    snap_take(&before, repo);
    job a = {.repo = repo, .hash = HASH_A, .src = "/* candidate a */\n"};
    job b = {.repo = repo, .hash = HASH_B, .src = "/* candidate b */\n"};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, propose_job, &a);
    pthread_create(&tb, NULL, propose_job, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_MSG(a.rc == 0, "%s", a.err);
    CHECK_MSG(b.rc == 0, "%s", b.err);
    char *branches = run(NULL, "git -C %s branch --list 'hone/*' --format='%%(refname:short)'", repo);
    CHECK_MSG(strcmp(branches, "hone/matvec_f32/cpu/0123456789ab\nhone/matvec_f32/cpu/fedcba987654") == 0,
              "%s", branches);
    char *sa = run(NULL, "git -C %s show hone/matvec_f32/cpu/0123456789ab:kernels/cpu/matvec_f32.c", repo);
    char *sb = run(NULL, "git -C %s show hone/matvec_f32/cpu/fedcba987654:kernels/cpu/matvec_f32.c", repo);
    CHECK(strcmp(sa, "/* candidate a */") == 0);
    CHECK(strcmp(sb, "/* candidate b */") == 0);
    snap_take(&after, repo);
    CHECK(snap_same(&before, &after));
    snap_free(&before);
    snap_free(&after);
    free(branches); free(sa); free(sb);
    sh("rm -rf %s", repo);
    free(repo);
}

static void test_bare_repository(void)
{
    char *repo = make_repo();
    char bare[4200];
    snprintf(bare, sizeof bare, "%s.git", repo);
    CHECK_EQ_INT(sh("git clone -q --bare %s %s", repo, bare), 0);
    hone_review_opts o = HONE_REVIEW_OPTS_INIT;
    o.repo = bare;
    hone_evidence ev = evidence(HASH_A);
    hone_review_result res;
    int rc = hone_review_propose(&res, &o, "matvec_f32", "cpu", cand_src, strlen(cand_src), &ev);
    CHECK_MSG(rc == 0, "%s", hone_error_last());
    char *title = run(NULL, "git -C %s log -1 --format=%%s %s", bare, res.branch);
    CHECK(strcmp(title, "matvec_f32 (cpu): 1.23x faster, faithful parity") == 0);
    char *parent = run(NULL, "git -C %s rev-parse %s^", bare, res.branch);
    char *main_ = run(NULL, "git -C %s rev-parse main", bare);
    CHECK(strcmp(parent, main_) == 0);
    free(title); free(parent); free(main_);
    sh("rm -rf %s %s", repo, bare);
    free(repo);
}

static void test_errors(void)
{
    hone_review_opts o = HONE_REVIEW_OPTS_INIT;
    hone_evidence ev = evidence(HASH_A);
    hone_review_result res;

    /* A missing path. */
    o.repo = "/nonexistent/hone/kernels";
    CHECK(hone_review_propose(&res, &o, "matvec_f32", "cpu", cand_src, strlen(cand_src), &ev) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "kernels repository '/nonexistent/hone/kernels' does not exist");

    /* A directory that is no repository. */
    char *plain = tmpdir();
    o.repo = plain;
    CHECK(hone_review_propose(&res, &o, "matvec_f32", "cpu", cand_src, strlen(cand_src), &ev) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "is not a git repository");
    CHECK_STR_CONTAINS(hone_error_last(), "git_repository_open_ext"); /* the libgit2 call... */
    CHECK_STR_CONTAINS(hone_error_last(), "review.c:");              /* ...and where */
    char *ls = run(NULL, "ls -A %s", plain);
    CHECK(strcmp(ls, "") == 0); /* nothing created */
    free(ls);

    /* Bad arguments. */
    char *repo = make_repo();
    o.repo = repo;
    CHECK(hone_review_propose(&res, &o, "../etc", "cpu", cand_src, strlen(cand_src), &ev) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "bad slot name");
    CHECK(hone_review_propose(&res, &o, "matvec_f32", "tpu", cand_src, strlen(cand_src), &ev) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "backend must be cpu or cuda");
    hone_evidence bad = ev;
    bad.parity_tier = "close enough";
    CHECK(hone_review_propose(&res, &o, "matvec_f32", "cpu", cand_src, strlen(cand_src), &bad) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "parity tier must be exact or faithful");
    o.base_ref = "no-such-branch";
    CHECK(hone_review_propose(&res, &o, "matvec_f32", "cpu", cand_src, strlen(cand_src), &ev) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "base 'no-such-branch' does not name a commit");
    o.base_ref = NULL;

    /* A locked index: never written, so not in the way, and left as it was. */
    snapshot before, after;
    CHECK_EQ_INT(sh("echo 'someone else is committing' > %s/.git/index.lock", repo), 0);
    snap_take(&before, repo);
    int rc = hone_review_propose(&res, &o, "matvec_f32", "cpu", cand_src, strlen(cand_src), &ev);
    CHECK_MSG(rc == 0, "%s", hone_error_last());
    snap_take(&after, repo);
    CHECK(snap_same(&before, &after)); /* index.lock included */
    snap_free(&before);
    snap_free(&after);

    /* A locked branch ref (another writer holds it): a clear error, nothing lost. */
    hone_evidence evb = evidence(HASH_B);
    CHECK_EQ_INT(sh("mkdir -p %s/.git/refs/heads/hone/matvec_f32/cpu && "
                    "touch %s/.git/refs/heads/hone/matvec_f32/cpu/fedcba987654.lock", repo, repo), 0);
    snap_take(&before, repo);
    rc = hone_review_propose(&res, &o, "matvec_f32", "cpu", "/* b */\n", 8, &evb);
    CHECK(rc != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "cannot create branch hone/matvec_f32/cpu/fedcba987654");
    CHECK_STR_CONTAINS(hone_error_last(), "git_reference_create");
    CHECK_STR_CONTAINS(hone_error_last(), "lock");
    snap_take(&after, repo);
    CHECK(snap_same(&before, &after));
    snap_free(&before);
    snap_free(&after);
    char *branches = run(NULL, "git -C %s branch --list 'hone/*' --format='%%(refname:short)'", repo);
    CHECK_MSG(strcmp(branches, "hone/matvec_f32/cpu/0123456789ab") == 0, "%s", branches);
    free(branches);
    sh("rm -f %s/.git/refs/heads/hone/matvec_f32/cpu/fedcba987654.lock", repo);

    sh("rm -rf %s %s", repo, plain);
    free(repo);
    free(plain);
}

/* A .git this process cannot write. As root (which ignores permissions) the proposal runs in a
 * child that becomes nobody; either way the error is read back and nothing may change. */
static void test_read_only(void)
{
    char *repo = make_repo();
    snapshot before, after;
    snap_take(&before, repo);
    int root = geteuid() == 0;
    if (!root) sh("chmod -R a-w %s/.git", repo);
    int fds[2];
    CHECK_EQ_INT(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        if (root && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
        setenv("HOME", "/nonexistent", 1); /* nobody cannot stat root's ~/.gitconfig */
        git_libgit2_init();
        if (root) git_libgit2_opts(GIT_OPT_SET_OWNER_VALIDATION, 0); /* the repo is root's */
        hone_review_opts o = HONE_REVIEW_OPTS_INIT;
        o.repo = repo;
        hone_evidence ev = evidence(HASH_A);
        hone_review_result res;
        int rc = hone_review_propose(&res, &o, "matvec_f32", "cpu", cand_src, strlen(cand_src), &ev);
        const char *msg = rc ? hone_error_last() : "(succeeded)";
        if (write(fds[1], msg, strlen(msg)) < 0) _exit(4);
        _exit(rc ? 1 : 0);
    }
    close(fds[1]);
    char msg[2048] = {0};
    size_t n = 0;
    ssize_t got;
    while ((got = read(fds[0], msg + n, sizeof msg - 1 - n)) > 0) n += (size_t)got;
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 1, "child status %d: %s", st, msg);
    CHECK_STR_CONTAINS(msg, "review: cannot write the candidate into");
    CHECK_STR_CONTAINS(msg, "Permission denied");
    CHECK_STR_CONTAINS(msg, "git_blob_create_from_buffer");
    if (!root) sh("chmod -R u+w %s/.git", repo);
    snap_take(&after, repo);
    CHECK(snap_same(&before, &after));
    char *branches = run(NULL, "git -C %s branch --list 'hone/*'", repo);
    CHECK(strcmp(branches, "") == 0);
    free(branches);
    snap_free(&before);
    snap_free(&after);
    sh("rm -rf %s", repo);
    free(repo);
}

/* list, show, verify and prune through the hone binary, on a bare repository. */
static void test_cli(void)
{
    char *repo = make_repo();
    char bare[4200];
    snprintf(bare, sizeof bare, "%s.git", repo);
    CHECK_EQ_INT(sh("git clone -q --bare %s %s", repo, bare), 0);
    hone_review_opts o = HONE_REVIEW_OPTS_INIT;
    o.repo = bare;
    hone_evidence ea = evidence(HASH_A), eb = evidence(HASH_B);
    eb.speedup_median = 2.5;
    eb.parity_tier = "exact";
    eb.device = "cpu: Other CPU";
    hone_review_result ra, rb;
    CHECK_EQ_INT(hone_review_propose(&ra, &o, "matvec_f32", "cpu", cand_src, strlen(cand_src), &ea), 0);
    CHECK_EQ_INT(hone_review_propose(&rb, &o, "swiglu", "cpu", "/* s */\n", 8, &eb), 0);

    hone_review_branch *v = NULL;
    size_t nb = 0;
    CHECK_EQ_INT(hone_review_list(&v, &nb, &o), 0);
    CHECK_EQ_INT(nb, 2);
    if (nb == 2) {
        CHECK(strcmp(v[0].branch, ra.branch) == 0);
        CHECK(strcmp(v[0].slot, "matvec_f32") == 0 && strcmp(v[0].backend, "cpu") == 0);
        CHECK_NEAR(v[0].speedup, 1.234, 1e-9);
        CHECK(strcmp(v[0].parity, "faithful") == 0);
        CHECK(strcmp(v[0].device, "cpu: Test CPU (4 threads)") == 0);
        CHECK(strcmp(v[0].candidate, HASH_A) == 0);
        CHECK_EQ_INT(v[0].merged, 0);
        CHECK_NEAR(v[1].speedup, 2.5, 1e-9);
        CHECK(strcmp(v[1].slot, "swiglu") == 0);
    }
    free(v);

    int st;
    char *out = run(&st, "%s review list --repo %s", HONE_BIN, bare);
    CHECK_EQ_INT(st, 0);
    CHECK_STR_CONTAINS(out, ra.branch);
    CHECK_STR_CONTAINS(out, rb.branch);
    CHECK_STR_CONTAINS(out, "1.23x");
    CHECK_STR_CONTAINS(out, "2.50x");
    CHECK_STR_CONTAINS(out, "faithful");
    CHECK_STR_CONTAINS(out, "cpu: Other CPU");
    free(out);

    out = run(&st, "%s review show %s --repo %s", HONE_BIN, ra.branch, bare);
    CHECK_EQ_INT(st, 0);
    CHECK_STR_CONTAINS(out, "matvec_f32 (cpu): 1.23x faster, faithful parity");
    CHECK_STR_CONTAINS(out, "| max abs error vs f64 oracle, candidate | 1.500e-06 |");
    CHECK_STR_CONTAINS(out, "Hone-Candidate: " HASH_A);
    CHECK_STR_CONTAINS(out, "diff --git a/kernels/cpu/matvec_f32.c b/kernels/cpu/matvec_f32.c");
    CHECK_STR_CONTAINS(out, "+/* matvec_f32 candidate for the tests");
    CHECK_STR_CONTAINS(out, "+++ b/kernels/cpu/matvec_f32.evidence.json");
    free(out);

    out = run(&st, "%s review show hone/nope/cpu/123 --repo %s 2>&1", HONE_BIN, bare);
    CHECK_EQ_INT(st, 1);
    CHECK_STR_CONTAINS(out, "no branch hone/nope/cpu/123");
    free(out);

    char *src = NULL, slot[64], backend[16];
    size_t len = 0;
    CHECK_EQ_INT(hone_review_read_candidate(&src, &len, slot, backend, &o, ra.branch), 0);
    CHECK(src && len == strlen(cand_src) && memcmp(src, cand_src, len) == 0);
    CHECK(strcmp(slot, "matvec_f32") == 0 && strcmp(backend, "cpu") == 0);
    free(src);

    out = run(&st, "%s review verify %s --repo %s 2>&1", HONE_BIN, ra.branch, bare);
    CHECK_EQ_INT(st, 1);
    CHECK_STR_CONTAINS(out, "-m MODEL is required");
    free(out);
    /* The plumbing: the branch's source goes to the guard in this process (a missing model
     * makes the guard fail fast: verify reports it); options after -- reach the guard. */
    out = run(&st, "%s review verify %s -m /nonexistent/model.gguf --repo %s -- --reps 3 2>&1", HONE_BIN,
              ra.branch, bare);
    CHECK_EQ_INT(st, 1);
    CHECK_STR_CONTAINS(out, "the guard with -m /nonexistent/model.gguf --slot matvec_f32 --backend cpu");
    CHECK_STR_CONTAINS(out, "FAILS the guard on this machine");
    free(out);
    out = run(&st, "%s review verify %s -m /nonexistent/model.gguf --repo %s -- --bogus 2>&1", HONE_BIN,
              ra.branch, bare);
    CHECK_EQ_INT(st, 2);
    CHECK_STR_CONTAINS(out, "unknown option --bogus");
    free(out);

    /* Merge one (fast-forward main onto it): list hides it, prune --merged deletes only it. */
    CHECK_EQ_INT(sh("git -C %s update-ref refs/heads/main %s", bare, ra.branch), 0);
    out = run(&st, "%s review list --repo %s", HONE_BIN, bare);
    CHECK(!strstr(out, ra.branch) && strstr(out, rb.branch));
    free(out);
    out = run(&st, "%s review list --all --repo %s", HONE_BIN, bare);
    CHECK_STR_CONTAINS(out, "(merged)");
    free(out);
    out = run(&st, "%s review prune --merged --dry-run --repo %s", HONE_BIN, bare);
    CHECK_STR_CONTAINS(out, "would delete hone/matvec_f32/cpu/0123456789ab (merged)");
    free(out);
    out = run(&st, "%s review prune --merged --repo %s", HONE_BIN, bare);
    CHECK_EQ_INT(st, 0);
    CHECK_STR_CONTAINS(out, "deleted hone/matvec_f32/cpu/0123456789ab");
    CHECK_STR_CONTAINS(out, "1 branch deleted");
    free(out);
    char *branches = run(NULL, "git -C %s branch --list 'hone/*' --format='%%(refname:short)'", bare);
    CHECK_MSG(strcmp(branches, rb.branch) == 0, "%s", branches);
    free(branches);
    out = run(&st, "%s review prune --all --repo %s", HONE_BIN, bare);
    CHECK_EQ_INT(st, 0);
    CHECK_STR_CONTAINS(out, "1 branch deleted");
    free(out);
    branches = run(NULL, "git -C %s branch --list --format='%%(refname:short)'", bare);
    CHECK_MSG(strcmp(branches, "main") == 0, "%s", branches);
    free(branches);
    out = run(&st, "%s review list --repo %s", HONE_BIN, bare);
    CHECK_STR_CONTAINS(out, "no pending hone/");
    free(out);

    /* The library refuses to delete anything but a hone/ branch. */
    CHECK(hone_review_delete(&o, "main") != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "is not a hone/<slot>/<backend>/<hash> branch");

    out = run(&st, "%s review frobnicate 2>&1", HONE_BIN);
    CHECK_EQ_INT(st, 2);
    CHECK_STR_CONTAINS(out, "unknown subcommand 'frobnicate'");
    free(out);

    sh("rm -rf %s %s", repo, bare);
    free(repo);
}

TEST_MAIN(TEST_CASE(test_evidence_json_markdown), TEST_CASE(test_propose_commit),
          TEST_CASE(test_base_ref_cuda_and_new_dirs), TEST_CASE(test_two_at_once),
          TEST_CASE(test_bare_repository), TEST_CASE(test_errors), TEST_CASE(test_read_only),
          TEST_CASE(test_cli))
