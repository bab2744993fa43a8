/* Review branches pushed over SSH (agent/review_push.h) to an OpenSSH server this test starts
 * on loopback: a throwaway host key and user key, sshd as a non-daemon child on a free port with
 * its own configuration (no system configuration is read or touched). The branch arrives with
 * its trailers through a key file and through the SSH agent; an unknown host key and an
 * unauthorised key are refused with a clear message; the work tree, index and HEAD stay as they
 * were. Skipped (77) without /usr/sbin/sshd or without SSH in libgit2. */
#include <arpa/inet.h>
#include <git2.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "agent/review.h"
#include "agent/review_push.h"
#include "engine/error.h"
#include "harness.h"
#include "review_test.h"

#define SSHD "/usr/sbin/sshd"
#define SLOT "matvec_f32"
#define HASH_A "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a"
#define HASH_B "6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b"
#define HASH_C "7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c"

static char *dir, *repo, *bare, url[4400];
static pid_t sshd_pid, agent_pid;

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || getsockname(s, (struct sockaddr *)&a, &n)) return -1;
    close(s);
    return ntohs(a.sin_port);
}

static int can_connect(int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0;
    if (s >= 0) close(s);
    return ok;
}

static pid_t spawn(const char *log, char *const argv[])
{
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        if (!freopen(log, "a", stderr) || !freopen(log, "a", stdout)) _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    return p;
}

/* Keys, the server's configuration, the server; HOME is a scratch directory whose
 * .ssh/known_hosts holds the server's host key. 0 when sshd listens. */
static int start_sshd(void)
{
    const char *user = getpwuid(getuid())->pw_name;
    if (sh("cd %s && ssh-keygen -q -t ed25519 -N '' -C host -f host_key && ssh-keygen -q -t ed25519 -N '' -C user "
           "-f user_key && ssh-keygen -q -t ed25519 -N '' -C stranger -f stranger_key && cp user_key.pub "
           "authorized_keys && chmod 600 authorized_keys && mkdir -p home/.ssh", dir))
        return -1;
    for (int tries = 0; tries < 5; tries++) {
        int port = free_port();
        char cfg[4400], log[4400];
        snprintf(cfg, sizeof cfg, "%s/sshd_config", dir);
        snprintf(log, sizeof log, "%s/sshd.log", dir);
        FILE *f = fopen(cfg, "w");
        if (!f) return -1;
        fprintf(f, "Port %d\nListenAddress 127.0.0.1\nHostKey %s/host_key\nPidFile %s/sshd.pid\n"
                   "AuthorizedKeysFile %s/authorized_keys\nStrictModes no\nUsePAM no\nPubkeyAuthentication yes\n"
                   "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
                   "AllowUsers %s\nLogLevel VERBOSE\n", port, dir, dir, dir, user);
        fclose(f);
        /* as root sshd wants its privilege-separation directory, which the Debian service makes */
        if (getuid() == 0) sh("mkdir -p /run/sshd && chmod 0755 /run/sshd");
        char *argv[] = {SSHD, "-D", "-e", "-f", cfg, NULL};
        sshd_pid = spawn(log, argv);
        for (int i = 0; i < 100; i++) {
            if (can_connect(port)) {
                snprintf(url, sizeof url, "ssh://%s@127.0.0.1:%d%s", user, port, bare);
                return sh("cd %s && printf '[127.0.0.1]:%d %%s\\n' \"$(cut -d' ' -f1,2 host_key.pub)\" > "
                          "home/.ssh/known_hosts", dir, port);
            }
            int st;
            if (waitpid(sshd_pid, &st, WNOHANG) == sshd_pid) break; /* it died: port taken? */
            usleep(50000);
        }
        kill(sshd_pid, SIGTERM);
        waitpid(sshd_pid, NULL, 0);
        sshd_pid = 0;
    }
    sh("cat %s/sshd.log >&2", dir);
    return -1;
}

static hone_review_result propose(const char *hash, const char *src)
{
    hone_review_opts o = HONE_REVIEW_OPTS_INIT;
    o.repo = repo;
    hone_evidence ev = HONE_EVIDENCE_INIT;
    ev.speedup_median = 1.5;
    ev.parity_tier = "exact";
    ev.device = "cpu: Test CPU";
    ev.model = "tiny";
    ev.candidate_hash = hash;
    hone_review_result r;
    CHECK_MSG(hone_review_propose(&r, &o, SLOT, "cpu", src, strlen(src), &ev) == 0, "%s", hone_error_last());
    return r;
}

static int push(hone_review_push_result *r, const char *branch, const char *key)
{
    hone_review_opts o = HONE_REVIEW_OPTS_INIT;
    o.repo = repo;
    hone_review_push_opts po = HONE_REVIEW_PUSH_OPTS_INIT;
    po.remote = url;
    po.ssh_key = key;
    po.attempts = 2;
    return hone_review_push(r, &o, &po, branch);
}

static void check_remote_has(const hone_review_result *b, const char *hash)
{
    char *tip = run(NULL, "git --git-dir=%s rev-parse refs/heads/%s", bare, b->branch);
    CHECK_MSG(strcmp(tip, b->commit) == 0, "remote tip %s, local %s", tip, b->commit);
    char *log = run(NULL, "git --git-dir=%s log -1 --format=%%B %s", bare, b->branch);
    CHECK_STR_CONTAINS(log, "Hone-Slot: " SLOT);
    CHECK_STR_CONTAINS(log, "Hone-Parity: exact");
    char want[128];
    snprintf(want, sizeof want, "Hone-Candidate: %s", hash);
    CHECK_STR_CONTAINS(log, want);
    free(tip);
    free(log);
}

static void test_ssh_push(void)
{
    char key[4400], stranger[4400], home[4400];
    snprintf(key, sizeof key, "%s/user_key", dir);
    snprintf(stranger, sizeof stranger, "%s/stranger_key", dir);
    snprintf(home, sizeof home, "%s/home", dir);
    setenv("HOME", home, 1);
    unsetenv("SSH_AUTH_SOCK");
    unsetenv("HONE_SSH_KEY");
    unsetenv("HONE_SSH_HOST_KEY");
    hone_review_result a = propose(HASH_A, "/* over ssh, key file */\n");
    hone_review_result b = propose(HASH_B, "/* over ssh, agent */\n");
    hone_review_result c = propose(HASH_C, "/* over ssh, pinned host key */\n");
    snapshot before, after;
    snap_take(&before, repo);

    /* a key file */
    hone_review_push_result r;
    CHECK_MSG(push(&r, a.branch, key) == 0, "%s", hone_error_last());
    CHECK_EQ_INT(r.outcome, HONE_REVIEW_PUSH_PUSHED);
    check_remote_has(&a, HASH_A);
    CHECK_MSG(push(&r, a.branch, key) == 0, "%s", hone_error_last());
    CHECK_EQ_INT(r.outcome, HONE_REVIEW_PUSH_UP_TO_DATE);

    /* a key the server does not know, and no agent: refused, saying what was tried */
    CHECK(push(&r, b.branch, stranger) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "SSH authentication as '");
    CHECK_STR_CONTAINS(hone_error_last(), "stranger_key");

    /* the agent */
    char sock[4400], log[4400];
    snprintf(sock, sizeof sock, "%s/agent.sock", dir);
    snprintf(log, sizeof log, "%s/agent.log", dir);
    char *argv[] = {"/usr/bin/ssh-agent", "-D", "-a", sock, NULL};
    agent_pid = spawn(log, argv);
    for (int i = 0; i < 100 && access(sock, F_OK); i++) usleep(50000);
    setenv("SSH_AUTH_SOCK", sock, 1);
    CHECK_EQ_INT(sh("ssh-add -q %s 2>/dev/null", key), 0);
    CHECK_MSG(push(&r, b.branch, NULL) == 0, "%s", hone_error_last());
    CHECK_EQ_INT(r.outcome, HONE_REVIEW_PUSH_PUSHED);
    check_remote_has(&b, HASH_B);

    /* an unknown host key is refused, with its fingerprint; pinning that fingerprint admits it */
    sh("mv %s/.ssh/known_hosts %s/.ssh/known_hosts.off", home, home);
    CHECK(push(&r, c.branch, key) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "not in ~/.ssh/known_hosts");
    char *fp = run(NULL, "ssh-keygen -lf %s/host_key.pub | cut -d' ' -f2", dir);
    CHECK_STR_CONTAINS(hone_error_last(), fp);
    setenv("HONE_SSH_HOST_KEY", "SHA256:notthisone", 1);
    CHECK(push(&r, c.branch, key) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "not the one HONE_SSH_HOST_KEY pins");
    setenv("HONE_SSH_HOST_KEY", fp, 1);
    CHECK_MSG(push(&r, c.branch, key) == 0, "%s", hone_error_last());
    check_remote_has(&c, HASH_C);
    unsetenv("HONE_SSH_HOST_KEY");
    sh("mv %s/.ssh/known_hosts.off %s/.ssh/known_hosts", home, home);

    /* the status, asked over SSH */
    hone_review_opts o = HONE_REVIEW_OPTS_INIT;
    o.repo = repo;
    hone_review_status_opts so = HONE_REVIEW_STATUS_OPTS_INIT;
    so.remote = url;
    hone_review_status *v = NULL;
    size_t n = 0;
    setenv("HONE_SSH_KEY", key, 1);
    CHECK_MSG(hone_review_status_list(&v, &n, &o, &so) == 0, "%s", hone_error_last());
    CHECK_EQ_INT((int)n, 3);
    for (size_t i = 0; i < n; i++) CHECK_MSG(v[i].pushed == 1, "%s not pushed", v[i].b.branch);
    free(v);
    unsetenv("HONE_SSH_KEY");
    CHECK_EQ_INT(sh("git --git-dir=%s fsck --strict --no-dangling", bare), 0);

    snap_take(&after, repo);
    CHECK(snap_same(&before, &after));
    snap_free(&before);
    snap_free(&after);
    free(fp);
}

int main(void)
{
    if (access(SSHD, X_OK)) {
        fprintf(stderr, "SKIP: %s is not installed (Debian: apt-get install openssh-server); the SSH push is "
                        "not tested\n", SSHD);
        return 77;
    }
    git_libgit2_init();
    int ssh = git_libgit2_features() & GIT_FEATURE_SSH;
    git_libgit2_shutdown();
    dir = tmpdir();
    repo = make_repo();
    bare = tmpdir();
    sh("git init -q --bare -b main %s", bare);
    if (!ssh) { /* what can be tested: the clear refusal */
        snprintf(url, sizeof url, "ssh://git@127.0.0.1:1%s", bare);
        hone_review_result a = propose(HASH_A, "/* a */\n");
        hone_review_push_result r;
        CHECK(push(&r, a.branch, NULL) != 0);
        CHECK_STR_CONTAINS(hone_error_last(), "built without SSH");
        fprintf(stderr, "SKIP: this libgit2 has no SSH support (GIT_FEATURE_SSH); only its refusal was tested\n");
        return harness_failures ? 1 : 77;
    }
    if (start_sshd()) {
        fprintf(stderr, "could not start %s on loopback\n", SSHD);
        return 1;
    }
    test_ssh_push();
    if (agent_pid) { kill(agent_pid, SIGTERM); waitpid(agent_pid, NULL, 0); }
    kill(sshd_pid, SIGTERM);
    waitpid(sshd_pid, NULL, 0);
    if (harness_failures) sh("tail -20 %s/sshd.log >&2", dir);
    sh("rm -rf %s %s %s", dir, repo, bare);
    printf("test_ssh_push %s\n%d checks, %d failed\n", harness_failures ? "FAILED" : "ok", harness_checks,
           harness_failures);
    return harness_failures ? 1 : 0;
}
