/* Supervised pull requests (agent/review_push.h, agent/review_pr.h): review branches pushed to
 * bare repositories over file:// (the remote's git log shows them with their trailers, the local
 * work tree, index and HEAD stay as they were), their pull-request text checked against the
 * evidence they commit, their status (pushed, merged, superseded, stale), replicas proposing
 * and pushing to one repository at once, and HTTPS tokens that reach the server and no message.
 * The SSH transport has its own test (test_review_ssh.c). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <sys/types.h>

#include "agent/review.h"
#include "agent/review_pr.h"
#include "agent/review_push.h"
#include "engine/error.h"
#include "harness.h"
#include "review_test.h"

#ifndef HONE_BIN
#define HONE_BIN "hone"
#endif

#define SLOT "matvec_f32"
#define HASH_A "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
#define HASH_B "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2"
#define HASH_C "c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3"
#define DEVICE "cpu: Test CPU (2 threads)"

/* Evidence with every figure the pull request shows. */
static hone_evidence ev_of(const char *hash, double speedup, const char *device)
{
    return (hone_evidence){
        .speedup_median = speedup, .speedup_ci_low = speedup - 0.05, .speedup_ci_high = speedup + 0.04,
        .ci_level = 0.95, .incumbent_ns = 2000.0, .candidate_ns = 2000.0 / speedup, .reps = 30,
        .threshold = 1.05, .parity_tier = "exact", .candidate_max_abs_err = 2.5e-6,
        .incumbent_max_abs_err = 2.5e-6, .slack = NAN, .shapes = "576x576, 1536x576",
        .model_max_abs_dlogit = 0.0, .model_kl_mean = 0.0, .model_kl_max = 0.0,
        .model_argmax_agreement = 1.0, .model_prompts = 3, .model_steps = 16, .device = device,
        .model = "SmolLM2-135M-Instruct.Q4_1", .candidate_hash = hash, .origin_kind = "search",
        .origin = "unroll=4 | test", .seed = 1234567, .guard_seconds = 21.5};
}

static hone_review_result propose_in(const char *repo, const char *slot, const char *hash, const char *src,
                                     double speedup, const char *device, const char *author)
{
    hone_review_opts o = HONE_REVIEW_OPTS_INIT;
    o.repo = repo;
    o.author_name = author;
    hone_evidence ev = ev_of(hash, speedup, device);
    hone_review_result r;
    int rc = hone_review_propose(&r, &o, slot, "cpu", src, strlen(src), &ev);
    CHECK_MSG(rc == 0, "propose %s: %s", hash, hone_error_last());
    return r;
}

/* A clean repository with kernels/cpu/matvec_f32.c on main. */
static char *clean_repo(void)
{
    char *d = tmpdir();
    CHECK_EQ_INT(sh("cd %s && git init -q -b main . && git config user.email t@example.com && "
                    "git config user.name Tester && mkdir -p kernels/cpu && "
                    "cp %s/kernels/cpu/matvec_f32.c kernels/cpu/ && git add . && git commit -qm base",
                    d, HONE_SOURCE_DIR), 0);
    return d;
}

static char *bare_repo(void)
{
    char *d = tmpdir();
    CHECK_EQ_INT(sh("git init -q --bare -b main %s", d), 0);
    return d;
}

/* ---- push ------------------------------------------------------------------------------------------ */

static void test_refuses_other_branches(void)
{
    char *repo = make_repo(), *bare = bare_repo();
    hone_review_opts o = HONE_REVIEW_OPTS_INIT;
    o.repo = repo;
    char url[4200];
    snprintf(url, sizeof url, "file://%s", bare);
    hone_review_push_opts po = HONE_REVIEW_PUSH_OPTS_INIT;
    po.remote = url;
    hone_review_push_result r;
    const char *bad[] = {"main", "refs/heads/main", "feature/x", "hone/x", "hone/" SLOT "/cpu/a/b"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(hone_review_push(&r, &o, &po, bad[i]) != 0);
        CHECK_STR_CONTAINS(hone_error_last(), "only hone/<slot>/<backend>/<hash> branches are pushed");
    }
    char *refs = run(NULL, "git --git-dir=%s for-each-ref", bare);
    CHECK_MSG(refs[0] == 0, "the remote got refs: %s", refs);
    int st;
    char *out = run(&st, "%s review push main --repo %s --remote %s 2>&1", HONE_BIN, repo, url);
    CHECK_EQ_INT(st, 1);
    CHECK_STR_CONTAINS(out, "refusing 'main'");
    free(out);
    out = run(&st, "%s review push --repo %s 2>&1", HONE_BIN, repo);
    CHECK_EQ_INT(st, 2);
    CHECK_STR_CONTAINS(out, "BRANCH... or --all is required");
    free(out);
    /* a name that is neither a remote nor a URL */
    po.remote = "upstream";
    hone_review_result a = propose_in(repo, SLOT, HASH_A, "/* a */\n", 1.25, DEVICE, NULL);
    CHECK(hone_review_push(&r, &o, &po, a.branch) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "has no remote 'upstream'");
    /* no origin: whether a branch is pushed is unknown, not "no" */
    hone_review_status_opts so = HONE_REVIEW_STATUS_OPTS_INIT;
    hone_review_status *v = NULL;
    size_t n = 0;
    CHECK_MSG(hone_review_status_list(&v, &n, &o, &so) == 0, "%s", hone_error_last());
    CHECK_EQ_INT((int)n, 1);
    if (n) CHECK_EQ_INT(v[0].pushed, -1);
    free(v);
    so.remote = "upstream";
    CHECK(hone_review_status_list(&v, &n, &o, &so) != 0);
    /* serve pushes only what its tuner commits */
    out = run(&st, "%s serve -m /nonexistent.gguf --push 2>&1", HONE_BIN);
    CHECK_EQ_INT(st, 2);
    CHECK_STR_CONTAINS(out, "--push and --push-to push what --tune commits");
    free(out);
    free(refs);
    sh("rm -rf %s %s", repo, bare);
    free(repo);
    free(bare);
}

static void test_push_file(void)
{
    char *repo = make_repo(), *bare = bare_repo(), *bare2 = bare_repo();
    CHECK_EQ_INT(sh("git -C %s remote add origin file://%s", repo, bare), 0);
    hone_review_result a = propose_in(repo, SLOT, HASH_A, "/* candidate a */\n", 1.25, DEVICE, NULL);
    hone_review_result b = propose_in(repo, SLOT, HASH_B, "/* candidate b */\n", 1.4, DEVICE, NULL);
    snapshot before, after;
    snap_take(&before, repo);

    hone_review_opts o = HONE_REVIEW_OPTS_INIT;
    o.repo = repo;
    hone_review_push_opts po = HONE_REVIEW_PUSH_OPTS_INIT; /* origin */
    hone_review_push_result r;
    CHECK_MSG(hone_review_push(&r, &o, &po, a.branch) == 0, "%s", hone_error_last());
    CHECK_EQ_INT(r.outcome, HONE_REVIEW_PUSH_PUSHED);
    CHECK(strcmp(r.commit, a.commit) == 0);
    CHECK(strcmp(r.remote_commit, a.commit) == 0);
    CHECK_STR_CONTAINS(r.url, bare);

    /* the remote's git log shows the branch with its trailers; only that branch went */
    char *log = run(NULL, "git --git-dir=%s log -1 --format=%%B %s", bare, a.branch);
    CHECK_STR_CONTAINS(log, SLOT " (cpu): 1.25x faster, exact parity");
    CHECK_STR_CONTAINS(log, "Hone-Slot: " SLOT);
    CHECK_STR_CONTAINS(log, "Hone-Speedup: 1.250x (95% CI 1.200..1.290)");
    CHECK_STR_CONTAINS(log, "Hone-Parity: exact");
    CHECK_STR_CONTAINS(log, "Hone-Device: " DEVICE);
    CHECK_STR_CONTAINS(log, "Hone-Candidate: " HASH_A);
    char *trailers = run(NULL, "git --git-dir=%s log -1 --format='%%(trailers:key=Hone-Candidate,valueonly)' %s",
                         bare, a.branch);
    CHECK_MSG(strcmp(trailers, HASH_A) == 0, "%s", trailers);
    char *rtip = run(NULL, "git --git-dir=%s rev-parse refs/heads/%s", bare, a.branch);
    CHECK(strcmp(rtip, a.commit) == 0);
    char *refs = run(NULL, "git --git-dir=%s for-each-ref --format='%%(refname)'", bare);
    CHECK_MSG(strcmp(refs + 11, a.branch) == 0, "%s", refs);
    char *track = run(NULL, "git -C %s rev-parse refs/remotes/origin/%s", repo, a.branch);
    CHECK_MSG(strcmp(track, a.commit) == 0, "tracking ref %s", track);
    CHECK_EQ_INT(sh("git --git-dir=%s fsck --strict --no-dangling", bare), 0);

    /* again: nothing to do */
    CHECK_MSG(hone_review_push(&r, &o, &po, a.branch) == 0, "%s", hone_error_last());
    CHECK_EQ_INT(r.outcome, HONE_REVIEW_PUSH_UP_TO_DATE);

    /* a URL instead of a remote: no tracking ref for it */
    char url[4200];
    snprintf(url, sizeof url, "file://%s", bare2);
    po.remote = url;
    CHECK_MSG(hone_review_push(&r, &o, &po, b.branch) == 0, "%s", hone_error_last());
    CHECK_EQ_INT(r.outcome, HONE_REVIEW_PUSH_PUSHED);
    char *rtip2 = run(NULL, "git --git-dir=%s rev-parse refs/heads/%s", bare2, b.branch);
    CHECK(strcmp(rtip2, b.commit) == 0);
    char *tracks = run(NULL, "git -C %s for-each-ref --format='%%(refname)' refs/remotes", repo);
    CHECK_MSG(strstr(tracks, b.branch) == NULL, "%s", tracks);

    /* the command: --all pushes both to origin (a is there already) */
    int st;
    char *out = run(&st, "%s review push --all --repo %s", HONE_BIN, repo);
    CHECK_EQ_INT(st, 0);
    CHECK_STR_CONTAINS(out, "up to date on");
    CHECK_STR_CONTAINS(out, "pushed to");
    char *rtipb = run(NULL, "git --git-dir=%s rev-parse refs/heads/%s", bare, b.branch);
    CHECK(strcmp(rtipb, b.commit) == 0);

    snap_take(&after, repo);
    CHECK(snap_same(&before, &after));
    snap_free(&before);
    snap_free(&after);
    free(log); free(trailers); free(rtip); free(refs); free(track); free(rtip2); free(tracks); free(out); free(rtipb);
    sh("rm -rf %s %s %s", repo, bare, bare2);
    free(repo); free(bare); free(bare2);
}

/* Two replicas with their own clones of one kernels repository propose the same candidate: the
 * first push wins, the second finds it there (one branch); another candidate under the same
 * branch name is refused and the remote keeps the first. */
static void test_replica_clones(void)
{
    char *seed = clean_repo(), *bare = bare_repo(), *r1 = tmpdir(), *r2 = tmpdir();
    CHECK_EQ_INT(sh("git -C %s push -q file://%s main && git clone -q file://%s %s/c && git clone -q file://%s %s/c",
                    seed, bare, bare, r1, bare, r2), 0);
    char c1[4200], c2[4200];
    snprintf(c1, sizeof c1, "%s/c", r1);
    snprintf(c2, sizeof c2, "%s/c", r2);
    hone_review_result a1 = propose_in(c1, SLOT, HASH_C, "/* same */\n", 1.3, DEVICE, "replica 1");
    hone_review_result a2 = propose_in(c2, SLOT, HASH_C, "/* same */\n", 1.3, DEVICE, "replica 2");
    CHECK(strcmp(a1.branch, a2.branch) == 0);
    CHECK(strcmp(a1.commit, a2.commit) != 0); /* other author: another commit */
    hone_review_opts o1 = HONE_REVIEW_OPTS_INIT, o2 = HONE_REVIEW_OPTS_INIT;
    o1.repo = c1;
    o2.repo = c2;
    hone_review_push_opts po = HONE_REVIEW_PUSH_OPTS_INIT;
    hone_review_push_result r;
    CHECK_MSG(hone_review_push(&r, &o1, &po, a1.branch) == 0, "%s", hone_error_last());
    CHECK_EQ_INT(r.outcome, HONE_REVIEW_PUSH_PUSHED);
    CHECK_MSG(hone_review_push(&r, &o2, &po, a2.branch) == 0, "%s", hone_error_last());
    CHECK_EQ_INT(r.outcome, HONE_REVIEW_PUSH_PROPOSED_THERE);
    CHECK(strcmp(r.remote_commit, a1.commit) == 0);
    char *tip = run(NULL, "git --git-dir=%s rev-parse refs/heads/%s", bare, a1.branch);
    CHECK(strcmp(tip, a1.commit) == 0);

    /* same 12-character prefix, another candidate */
    char other[80];
    snprintf(other, sizeof other, "%.12s%s", HASH_C, "ffffffffffffffffffffffffffffffffffffffffffffffffffff");
    char c3[4200];
    snprintf(c3, sizeof c3, "%s/d", r2);
    CHECK_EQ_INT(sh("git clone -q file://%s %s", bare, c3), 0);
    CHECK_EQ_INT(sh("git -C %s branch -q -D -r origin/%s", c3, a1.branch), 0); /* a replica that never saw it */
    hone_review_opts o3 = HONE_REVIEW_OPTS_INIT;
    o3.repo = c3;
    hone_review_result a3 = propose_in(c3, SLOT, other, "/* other */\n", 1.2, DEVICE, "replica 3");
    CHECK(strcmp(a3.branch, a1.branch) == 0);
    CHECK(hone_review_push(&r, &o3, &po, a3.branch) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "is another candidate");
    free(tip);
    tip = run(NULL, "git --git-dir=%s rev-parse refs/heads/%s", bare, a1.branch);
    CHECK(strcmp(tip, a1.commit) == 0);
    CHECK_EQ_INT(sh("git --git-dir=%s fsck --strict --no-dangling", bare), 0);
    free(tip);
    sh("rm -rf %s %s %s %s", seed, bare, r1, r2);
    free(seed); free(bare); free(r1); free(r2);
}

/* Replicas proposing into one repository and pushing to one remote at once, as processes: every
 * accepted branch exists afterwards, here and there, both pass git fsck, and the candidate all of
 * them propose is one branch. */
#define N_PROC 4
#define N_EACH 6
static void cand_hash(char *h, size_t cap, int proc, int k)
{
    snprintf(h, cap, "%02d%02d", proc, k);
    for (size_t i = strlen(h); i < 64 && i + 1 < cap; i++) h[i] = "0123456789abcdef"[(i * 7 + (size_t)proc + (size_t)k) % 16];
    h[64] = 0;
}

static int replica(const char *repo, int proc, int go_fd)
{
    char c;
    if (read(go_fd, &c, 1) < 0) return 1; /* the start signal: the pipe closes */
    hone_review_opts o = HONE_REVIEW_OPTS_INIT;
    o.repo = repo;
    hone_review_push_opts po = HONE_REVIEW_PUSH_OPTS_INIT;
    int bad = 0;
    for (int k = 0; k <= N_EACH; k++) {
        char h[80], src[128];
        if (k == N_EACH) snprintf(h, sizeof h, "%s", HASH_A); /* the one all propose */
        else cand_hash(h, sizeof h, proc, k);
        snprintf(src, sizeof src, "/* candidate %s */\n", k == N_EACH ? "shared" : h);
        hone_evidence ev = ev_of(h, 1.1 + 0.01 * k, DEVICE);
        hone_review_result r;
        hone_review_push_result pr;
        if (hone_review_propose(&r, &o, SLOT, "cpu", src, strlen(src), &ev) ||
            hone_review_push(&pr, &o, &po, r.branch)) {
            fprintf(stderr, "replica %d, candidate %d: %s\n", proc, k, hone_error_last());
            bad = 1;
        }
    }
    return bad;
}

static void test_replicas_at_once(void)
{
    char *repo = clean_repo(), *bare = bare_repo();
    CHECK_EQ_INT(sh("git -C %s remote add origin file://%s", repo, bare), 0);
    int go[2];
    CHECK_EQ_INT(pipe(go), 0);
    pid_t pids[N_PROC];
    for (int p = 0; p < N_PROC; p++) {
        fflush(NULL);
        pids[p] = fork();
        if (pids[p] == 0) {
            close(go[1]);
            _exit(replica(repo, p, go[0]));
        }
    }
    close(go[0]);
    close(go[1]); /* all start together */
    for (int p = 0; p < N_PROC; p++) {
        int st = 0;
        waitpid(pids[p], &st, 0);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "replica %d failed (status %d)", p, st);
    }
    char *local = run(NULL, "git -C %s for-each-ref --format='%%(refname:short) %%(objectname)' refs/heads/hone | sort", repo);
    char *remote = run(NULL, "git --git-dir=%s for-each-ref --format='%%(refname:short) %%(objectname)' refs/heads/hone | sort", bare);
    CHECK_MSG(strcmp(local, remote) == 0, "local:\n%s\nremote:\n%s", local, remote);
    int lines = 1;
    for (const char *s = local; *s; s++) lines += *s == '\n';
    CHECK_EQ_INT(lines, N_PROC * N_EACH + 1);
    for (int p = 0; p < N_PROC; p++)
        for (int k = 0; k < N_EACH; k++) {
            char h[80], b[128];
            cand_hash(h, sizeof h, p, k);
            snprintf(b, sizeof b, "hone/" SLOT "/cpu/%.12s ", h);
            CHECK_MSG(strstr(remote, b) != NULL, "missing %s", b);
        }
    char *dup = run(NULL, "git --git-dir=%s for-each-ref --format='%%(refname)' 'refs/heads/hone/" SLOT "/cpu/%.12s*' | wc -l",
                    bare, HASH_A);
    CHECK_MSG(strcmp(dup, "1") == 0, "%s", dup);
    CHECK_EQ_INT(sh("git -C %s fsck --strict --no-dangling", repo), 0);
    CHECK_EQ_INT(sh("git --git-dir=%s fsck --strict --no-dangling", bare), 0);
    free(local); free(remote); free(dup);
    sh("rm -rf %s %s", repo, bare);
    free(repo); free(bare);
}

/* ---- pull request ------------------------------------------------------------------------------------- */

/* The evidence's seed: a decimal string (exact). */
static long long jseed(const cJSON *root)
{
    const cJSON *v = cJSON_GetObjectItem(root, "seed");
    CHECK_MSG(cJSON_IsString(v), "evidence .seed is a string");
    return cJSON_IsString(v) ? strtoll(v->valuestring, NULL, 10) : -1;
}

static double jnum(const cJSON *root, const char *obj, const char *key)
{
    const cJSON *o = obj ? cJSON_GetObjectItem(root, obj) : root;
    const cJSON *v = cJSON_GetObjectItem(o, key);
    CHECK_MSG(cJSON_IsNumber(v), "evidence %s.%s", obj ? obj : "", key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* Every figure the body shows, formatted from the committed evidence. */
static void check_numbers(const char *body, const char *evjson, const char *branch)
{
    cJSON *ev = cJSON_Parse(evjson);
    CHECK(ev != NULL);
    if (!ev) return;
    char want[512];
    snprintf(want, sizeof want, "Median speedup **%.3fx** (%g%% CI %.3f .. %.3f)", jnum(ev, "speed", "speedup_median"),
             jnum(ev, "speed", "ci_level") * 100, jnum(ev, "speed", "ci_low"), jnum(ev, "speed", "ci_high"));
    CHECK_STR_CONTAINS(body, want);
    snprintf(want, sizeof want, "of %.0f repetitions each; the gate asks for %.3fx", jnum(ev, "speed", "reps"),
             jnum(ev, "speed", "threshold"));
    CHECK_STR_CONTAINS(body, want);
    snprintf(want, sizeof want, "| the guard's timing case | %.1f | %.1f | %.3fx |", jnum(ev, "speed", "incumbent_ns"), jnum(ev, "speed", "candidate_ns"), jnum(ev, "speed", "speedup_median"));
    CHECK_STR_CONTAINS(body, want);
    snprintf(want, sizeof want, "| max abs error vs f64 oracle, candidate | %.3e |",
             jnum(ev, "kernel_parity", "candidate_max_abs_err"));
    CHECK_STR_CONTAINS(body, want);
    snprintf(want, sizeof want, "| model max abs delta-logit | %.3e |", jnum(ev, "model_parity", "max_abs_dlogit"));
    CHECK_STR_CONTAINS(body, want);
    snprintf(want, sizeof want, "| model KL per position, max | %.3e |", jnum(ev, "model_parity", "kl_max"));
    CHECK_STR_CONTAINS(body, want);
    snprintf(want, sizeof want, "| argmax agreement | %.2f%% |", jnum(ev, "model_parity", "argmax_agreement") * 100);
    CHECK_STR_CONTAINS(body, want);
    snprintf(want, sizeof want, "| parity prompt set | %.0f prompts x %.0f steps |", jnum(ev, "model_parity", "prompts"),
             jnum(ev, "model_parity", "steps"));
    CHECK_STR_CONTAINS(body, want);
    snprintf(want, sizeof want, "Tier **%s**", cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "kernel_parity"), "tier")->valuestring);
    CHECK_STR_CONTAINS(body, want);
    snprintf(want, sizeof want, "- device: %s\n- model: %s\n- input seed: %lld\n- guard time: %.1f s",
             cJSON_GetObjectItem(ev, "device")->valuestring, cJSON_GetObjectItem(ev, "model")->valuestring,
             jseed(ev), jnum(ev, NULL, "guard_seconds"));
    CHECK_STR_CONTAINS(body, want);
    snprintf(want, sizeof want, "- candidate: `%s`",
             cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "candidate"), "hash")->valuestring);
    CHECK_STR_CONTAINS(body, want);
    snprintf(want, sizeof want, "hone review verify %s -m MODEL.gguf -- --seed %lld", branch, jseed(ev));
    CHECK_STR_CONTAINS(body, want);
    snprintf(want, sizeof want, "hone review show %s --report DIR", branch);
    CHECK_STR_CONTAINS(body, want);
    cJSON_Delete(ev);
}

static void check_sections(const char *body)
{
    static const char *sections[] = {"## What changed\n", "## Speedup\n", "## Parity\n", "## Machine\n",
                                     "## How to reproduce\n", "## Report\n"};
    const char *prev = body;
    for (size_t i = 0; i < sizeof sections / sizeof *sections; i++) {
        const char *at = strstr(body, sections[i]);
        CHECK_MSG(at != NULL && at >= prev, "section %s missing or out of order", sections[i]);
        if (at) prev = at;
    }
}

static void test_pr(void)
{
    char *repo = make_repo(), *bare = bare_repo();
    CHECK_EQ_INT(sh("git -C %s remote add origin file://%s", repo, bare), 0);
    hone_review_result a = propose_in(repo, SLOT, HASH_A, "/* candidate a */\n", 1.25, DEVICE, NULL);
    snapshot before, after;
    snap_take(&before, repo);
    hone_review_opts o = HONE_REVIEW_OPTS_INIT;
    o.repo = repo;
    char url[4200];
    snprintf(url, sizeof url, "file://%s", bare);
    hone_review_pr pr;
    CHECK_MSG(hone_review_pr_render(&pr, &o, a.branch, url) == 0, "%s", hone_error_last());
    if (!pr.body) return;
    CHECK(strcmp(pr.title, SLOT " (cpu): 1.25x faster, exact parity") == 0);
    check_sections(pr.body);
    char *evjson = run(NULL, "git -C %s show %s:kernels/cpu/" SLOT ".evidence.json", repo, a.branch);
    check_numbers(pr.body, evjson, a.branch);
    CHECK_STR_CONTAINS(pr.body, "| `kernels/cpu/" SLOT ".c` | 1 |");
    CHECK_STR_CONTAINS(pr.body, "| `kernels/cpu/" SLOT ".evidence.json` |");
    char want[9000];
    snprintf(want, sizeof want, "git fetch %s %s:%s", url, a.branch, a.branch);
    CHECK_STR_CONTAINS(pr.body, want);
    CHECK_STR_CONTAINS(pr.body, "- origin: search (unroll=4 \\| test)");

    /* written beside the branch, in the git directory */
    char path[4400];
    CHECK_MSG(hone_review_pr_write(path, sizeof path, &o, a.branch, &pr, NULL) == 0, "%s", hone_error_last());
    snprintf(want, sizeof want, "%s/.git/hone/pr/" SLOT ".cpu.%.12s.md", repo, HASH_A);
    CHECK_MSG(strcmp(path, want) == 0, "%s", path);
    size_t len;
    char *body = read_all(path, &len), *title;
    CHECK(body && strcmp(body, pr.body) == 0);
    snprintf(want, sizeof want, "%s/.git/hone/pr/" SLOT ".cpu.%.12s.title", repo, HASH_A);
    title = read_all(want, &len);
    snprintf(want, sizeof want, "%s\n", pr.title);
    CHECK(title && strcmp(title, want) == 0);

    /* the command prints title, blank line, body */
    int st;
    char *out = run(&st, "%s review pr %s --repo %s", HONE_BIN, a.branch, repo);
    CHECK_EQ_INT(st, 0);
    char *expect = malloc(strlen(pr.title) + strlen(pr.body) + 4);
    sprintf(expect, "%s\n\n%s", pr.title, pr.body);
    size_t n = strlen(expect);
    while (n && expect[n - 1] == '\n') expect[--n] = 0;
    CHECK_MSG(strcmp(out, expect) == 0, "hone review pr printed:\n%s", out);
    char *outdir = tmpdir();
    free(out);
    out = run(&st, "%s review pr %s --repo %s --out %s >/dev/null && ls %s", HONE_BIN, a.branch, repo, outdir, outdir);
    snprintf(want, sizeof want, SLOT ".cpu.%.12s.md\n" SLOT ".cpu.%.12s.title", HASH_A, HASH_A);
    CHECK_MSG(strcmp(out, want) == 0, "%s", out);
    snap_take(&after, repo);
    CHECK(snap_same(&before, &after));

    /* evidence with per-shape rows (speed.per_shape): one table row per shape */
    char *cmd = run(&st,
        "cd %s && t=$(mktemp -d) && GIT_INDEX_FILE=$t/i git read-tree %s && "
        "git show %s:kernels/cpu/" SLOT ".evidence.json > $t/in && "
        "python3 -c \"import json,sys; e=json.load(open(sys.argv[1])); "
        "e['speed']['per_shape']=[{'shape':'576x576','incumbent_ns':2100,'candidate_ns':1603.25,'speedup':1.31},"
        "{'shape':'1536x576','incumbent_ns':5200,'candidate_ns':4300.25,'speedup':1.2093}]; "
        "open(sys.argv[2],'w').write(json.dumps(e))\" $t/in $t/e && "
        "b=$(git hash-object -w $t/e) && GIT_INDEX_FILE=$t/i git update-index --cacheinfo 100644,$b,kernels/cpu/" SLOT ".evidence.json && "
        "tr=$(GIT_INDEX_FILE=$t/i git write-tree) && c=$(git commit-tree $tr -p %s^ -m 'per shape') && "
        "git update-ref refs/heads/hone/" SLOT "/cpu/ddddddddddd1 $c && rm -rf $t",
        repo, a.branch, a.branch, a.branch);
    CHECK_EQ_INT(st, 0);
    hone_review_pr_clear(&pr);
    CHECK_MSG(hone_review_pr_render(&pr, &o, "hone/" SLOT "/cpu/ddddddddddd1", NULL) == 0, "%s", hone_error_last());
    CHECK_STR_CONTAINS(pr.body, "| shape | incumbent_ns | candidate_ns | speedup |\n|---|---|---|---|\n"
                                "| 576x576 | 2100 | 1603 | 1.31 |\n| 1536x576 | 5200 | 4300 | 1.209 |\n");
    CHECK(strstr(pr.body, "git fetch") == NULL); /* no remote given */

    /* a branch without evidence is an error, not an empty body */
    CHECK_EQ_INT(sh("cd %s && git update-ref refs/heads/hone/" SLOT "/cpu/eeeeeeeeeee1 $(git rev-parse main)", repo), 0);
    hone_review_pr_clear(&pr);
    CHECK(hone_review_pr_render(&pr, &o, "hone/" SLOT "/cpu/eeeeeeeeeee1", NULL) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "has no evidence file kernels/cpu/" SLOT ".evidence.json");

    hone_review_pr_clear(&pr);
    snap_free(&before);
    snap_free(&after);
    free(evjson); free(body); free(title); free(out); free(expect); free(cmd);
    sh("rm -rf %s %s %s", repo, bare, outdir);
    free(repo); free(bare); free(outdir);
}

/* ---- status ------------------------------------------------------------------------------------------- */

static const hone_review_status *find(const hone_review_status *v, size_t n, const char *branch)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i].b.branch, branch)) return &v[i];
    return NULL;
}

static void test_status(void)
{
    char *repo = clean_repo(), *bare = bare_repo();
    CHECK_EQ_INT(sh("git -C %s remote add origin file://%s", repo, bare), 0);
    hone_review_result a = propose_in(repo, SLOT, HASH_A, "/* a */\n", 1.25, DEVICE, NULL);
    hone_review_result b = propose_in(repo, SLOT, HASH_B, "/* b */\n", 1.40, DEVICE, NULL);
    hone_review_result c = propose_in(repo, SLOT, HASH_C, "/* c */\n", 1.10, "cpu: Other CPU (64 threads)", NULL);
    hone_review_opts o = HONE_REVIEW_OPTS_INIT;
    o.repo = repo;
    hone_review_push_opts po = HONE_REVIEW_PUSH_OPTS_INIT;
    hone_review_push_result pr;
    CHECK_MSG(hone_review_push(&pr, &o, &po, a.branch) == 0, "%s", hone_error_last());

    hone_review_status_opts so = HONE_REVIEW_STATUS_OPTS_INIT;
    hone_review_status *v = NULL;
    size_t n = 0;
    CHECK_MSG(hone_review_status_list(&v, &n, &o, &so) == 0, "%s", hone_error_last());
    CHECK_EQ_INT((int)n, 3);
    const hone_review_status *sa = find(v, n, a.branch), *sb = find(v, n, b.branch), *sc = find(v, n, c.branch);
    CHECK(sa && sb && sc);
    if (!sa || !sb || !sc) return;
    CHECK_EQ_INT(sa->pushed, 1);
    CHECK_EQ_INT(sb->pushed, 0);
    CHECK(strcmp(sa->superseded_by, b.branch) == 0); /* same slot and machine, faster */
    CHECK(sb->superseded_by[0] == 0);
    CHECK(sc->superseded_by[0] == 0);                /* another machine */
    CHECK(!sa->stale && !sb->stale && !sa->b.merged);
    free(v);

    /* the base moves on, then a person merges b */
    CHECK_EQ_INT(sh("git -C %s commit -q --allow-empty -m next && git -C %s merge -q --no-ff --no-edit %s", repo,
                    repo, b.branch), 0);
    CHECK_MSG(hone_review_status_list(&v, &n, &o, &so) == 0, "%s", hone_error_last());
    sa = find(v, n, a.branch);
    sb = find(v, n, b.branch);
    CHECK(sa && sb);
    if (!sa || !sb) return;
    CHECK_EQ_INT(sb->b.merged, 1);
    CHECK_EQ_INT(sb->stale, 0);
    CHECK_EQ_INT(sa->stale, 1);
    char *behind = run(NULL, "git -C %s rev-list --count %s..main", repo, a.branch);
    CHECK_EQ_INT((int)sa->behind, atoi(behind));
    CHECK_EQ_INT((int)sa->behind, 3);
    CHECK(strcmp(sa->superseded_by, b.branch) == 0);
    free(v);

    /* asked online, and through a URL: the same answer for what was pushed */
    so.online = 1;
    CHECK_MSG(hone_review_status_list(&v, &n, &o, &so) == 0, "%s", hone_error_last());
    CHECK(find(v, n, a.branch) && find(v, n, a.branch)->pushed == 1);
    CHECK(find(v, n, b.branch) && find(v, n, b.branch)->pushed == 0);
    free(v);
    char url[4200];
    snprintf(url, sizeof url, "file://%s", bare);
    so.remote = url;
    so.online = 0;
    CHECK_MSG(hone_review_status_list(&v, &n, &o, &so) == 0, "%s", hone_error_last());
    CHECK(find(v, n, a.branch) && find(v, n, a.branch)->pushed == 1);
    free(v);

    int st;
    char *out = run(&st, "%s review status --repo %s", HONE_BIN, repo);
    CHECK_EQ_INT(st, 0);
    char want[1024];
    snprintf(want, sizeof want, "%-44s %-8s %-7s pending, superseded by %s, stale (base 3 commits ahead)", a.branch,
             "1.25x", "yes", b.branch);
    CHECK_MSG(strstr(out, want) != NULL, "%s", out);
    snprintf(want, sizeof want, "%-44s %-8s %-7s merged", b.branch, "1.40x", "no");
    CHECK_MSG(strstr(out, want) != NULL, "%s", out);
    free(out);
    free(behind);
    sh("rm -rf %s %s", repo, bare);
    free(repo); free(bare);
}

/* ---- HTTPS credentials ----------------------------------------------------------------------------- */

/* A server that asks for Basic authentication and records what it is sent: the token reaches it
 * as the password, and neither the token nor a URL's password appears in any message. */
static void test_token_not_logged(void)
{
    char *dir = tmpdir(), *repo = clean_repo();
    hone_review_result a = propose_in(repo, SLOT, HASH_A, "/* a */\n", 1.25, DEVICE, NULL);
    char script[4400];
    snprintf(script, sizeof script, "%s/srv.py", dir);
    FILE *f = fopen(script, "w");
    fprintf(f, "import http.server, sys\n"
               "class H(http.server.BaseHTTPRequestHandler):\n"
               "    def do_GET(self):\n"
               "        a = self.headers.get('Authorization')\n"
               "        if a: open(sys.argv[2], 'a').write(a + '\\n')\n"
               "        self.send_response(401)\n"
               "        self.send_header('WWW-Authenticate', 'Basic realm=\"hone\"')\n"
               "        self.send_header('Content-Length', '0')\n"
               "        self.end_headers()\n"
               "    do_POST = do_GET\n"
               "    def log_message(self, *a): pass\n"
               "s = http.server.HTTPServer(('127.0.0.1', 0), H)\n"
               "open(sys.argv[1], 'w').write(str(s.server_port))\n"
               "s.serve_forever()\n");
    fclose(f);
    char portf[4400], authf[4400];
    snprintf(portf, sizeof portf, "%s/port", dir);
    snprintf(authf, sizeof authf, "%s/auth", dir);
    fflush(NULL);
    pid_t srv = fork();
    if (srv == 0) {
        execlp("python3", "python3", script, portf, authf, (char *)NULL);
        _exit(127);
    }
    size_t len = 0;
    char *port = NULL;
    for (int i = 0; i < 100 && (!port || !len); i++) {
        usleep(50000);
        free(port);
        port = read_all(portf, &len);
    }
    CHECK(port && len);
    setenv("HONE_GIT_TOKEN", "s3cr3t-t0ken-value", 1);
    char url[256];
    snprintf(url, sizeof url, "http://alice:hunter2pw@127.0.0.1:%s/kernels.git", port ? port : "1");
    hone_review_opts o = HONE_REVIEW_OPTS_INIT;
    o.repo = repo;
    hone_review_push_opts po = HONE_REVIEW_PUSH_OPTS_INIT;
    po.remote = url;
    po.attempts = 1;
    hone_review_push_result r;
    CHECK(hone_review_push(&r, &o, &po, a.branch) != 0);
    const char *msg = hone_error_last();
    CHECK_STR_CONTAINS(msg, "HTTPS authentication failed (the remote refused the token in $HONE_GIT_TOKEN)");
    CHECK_MSG(strstr(msg, "s3cr3t") == NULL && strstr(msg, "hunter2pw") == NULL, "%s", msg);
    CHECK_STR_CONTAINS(msg, "http://alice@127.0.0.1:");
    char *auth = read_all(authf, &len);
    /* "Basic " + base64("alice:s3cr3t-t0ken-value"): the URL's user, the token as password */
    CHECK_MSG(auth && strstr(auth, "Basic YWxpY2U6czNjcjN0LXQwa2VuLXZhbHVl") != NULL, "%s", auth ? auth : "(none)");
    int st;
    char *out = run(&st, "%s review push %s --repo %s --remote '%s' 2>&1", HONE_BIN, a.branch, repo, url);
    CHECK_EQ_INT(st, 1);
    CHECK_MSG(strstr(out, "s3cr3t") == NULL && strstr(out, "hunter2pw") == NULL, "%s", out);
    unsetenv("HONE_GIT_TOKEN");
    kill(srv, SIGTERM);
    waitpid(srv, NULL, 0);
    free(port); free(auth); free(out);
    sh("rm -rf %s %s", dir, repo);
    free(dir); free(repo);
}

TEST_MAIN(TEST_CASE(test_refuses_other_branches), TEST_CASE(test_push_file), TEST_CASE(test_replica_clones),
          TEST_CASE(test_replicas_at_once), TEST_CASE(test_pr), TEST_CASE(test_status),
          TEST_CASE(test_token_not_logged))
