/* Pushing review branches (libgit2's git_remote_push, never forced) and the standing of every
 * branch against the base and a remote. Credentials come from the environment or the SSH agent
 * and never reach a message: errors name the method tried, never a secret. */
#include "review_push.h"

#include <git2.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/error.h"
#include "review_git.h"

#define TRY(expr)                                                                        \
    do {                                                                                 \
        if ((rc = (expr)) != 0) goto done;                                               \
    } while (0)

/* ---- remotes and URLs ------------------------------------------------------------------------ */

/* A URL rather than a remote's name: scheme://..., an absolute path, or scp-like user@host:path. */
static int looks_like_url(const char *s)
{
    return strstr(s, "://") || s[0] == '/' || (strchr(s, '@') && strchr(s, ':'));
}

/* ssh://..., ssh+git://, git+ssh://, or scp-like [user@]host:path (a ':' before any '/'). */
static int is_ssh_url(const char *u)
{
    if (strstr(u, "://")) return !strncmp(u, "ssh://", 6) || !strncmp(u, "ssh+git://", 10) || !strncmp(u, "git+ssh://", 10);
    const char *colon = strchr(u, ':'), *slash = strchr(u, '/');
    return colon && (!slash || colon < slash);
}

/* url without the password of any "user:password@" (the user stays). */
static void strip_password(char *buf, size_t cap, const char *url)
{
    snprintf(buf, cap, "%s", url ? url : "");
    char *s = strstr(buf, "://");
    if (!s) return;
    s += 3;
    char *slash = strchr(s, '/'), *at = strchr(s, '@');
    if (!at || (slash && at > slash)) return;
    char *colon = memchr(s, ':', (size_t)(at - s));
    if (colon) memmove(colon, at, strlen(at) + 1);
}

/* The remote `name` of repo (its pushurl, else its url), else `name` itself as a URL; *named
 * says which. Not git_remote_lookup: in libgit2 1.5 it leaks PCRE2 match data on every call
 * (the config regex; fixed upstream by libgit2/libgit2#6382), and a tuner pushes for days. A
 * named remote's tracking ref is then ours to move (push_named_tracking). */
static int open_remote(git_remote **out, int *named, git_repository *repo, const char *name,
                       const hone_review_opts *opts)
{
    git_config *cfg = NULL;
    git_buf url = {0};
    int rc = 0;
    *out = NULL;
    *named = 0;
    if (git_remote_name_is_valid(named, name) < 0) *named = 0;
    if (*named) {
        char key[600];
        HONE_GIT_TRY(git_repository_config_snapshot(&cfg, repo), "review: cannot read the configuration of '%s'",
                     hone_review_repo_path(opts));
        snprintf(key, sizeof key, "remote.%s.pushurl", name);
        int grc = git_config_get_string_buf(&url, cfg, key);
        if (grc == GIT_ENOTFOUND) {
            snprintf(key, sizeof key, "remote.%s.url", name);
            grc = git_config_get_string_buf(&url, cfg, key);
        }
        if (grc == GIT_ENOTFOUND) *named = 0;
        else HONE_GIT_TRY_AS(grc, "git_config_get_string_buf(&url, cfg, key)", "review: cannot read %s", key);
    }
    git_error_clear();
    if (!*named && !looks_like_url(name)) {
        rc = hone_error_set(HONE_EINVAL, "review: '%s' has no remote '%s' (give a remote's name or a URL)",
                            hone_review_repo_path(opts), name);
        goto done;
    }
    /* in memory, nothing read from the configuration (url.<base>.insteadOf is not applied: its
     * regex lookup leaks the same way) */
    git_remote_create_options co;
    git_remote_create_options_init(&co, GIT_REMOTE_CREATE_OPTIONS_VERSION);
    co.repository = repo;
    co.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF | GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
    HONE_GIT_TRY(git_remote_create_with_opts(out, *named ? url.ptr : name, &co), "review: bad remote URL");
done:
    git_buf_dispose(&url);
    git_config_free(cfg);
    return rc;
}

int hone_review_push_url(char *buf, size_t cap, const hone_review_opts *opts, const char *remote)
{
    git_repository *repo = NULL;
    git_remote *r = NULL;
    int named = 0, rc = 0;
    buf[0] = 0;
    git_libgit2_init();
    TRY(hone_review_open_repo(&repo, opts));
    TRY(open_remote(&r, &named, repo, remote ? remote : "origin", opts));
    strip_password(buf, cap, git_remote_url(r));
done:
    git_remote_free(r);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}

/* ---- callbacks: credentials, host keys, the remote's answer ----------------------------------- */

typedef struct {
    const char *key;         /* SSH key file, or NULL */
    int tried_key, tried_agent, tried_token, tried_user;
    char auth_why[300];      /* why no (further) credential could be offered */
    char cert_why[400];      /* why the host key was refused */
    char rejected[400];      /* a ref the remote refused, with its reason */
    git_oid remote_before;   /* the remote's tip of the branch before the push (zero: none) */
    int negotiated;
} push_ctx;

static int file_readable(const char *p)
{
    FILE *f = fopen(p, "rb");
    if (f) fclose(f);
    return f != NULL;
}

static const char *first_env(const char *const *names, const char **which)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v) { *which = *names; return v; }
    }
    return NULL;
}

/* Offers each method once (libgit2 asks again after a refusal): the key file, then the agent;
 * for HTTPS the token. Then gives up, saying what was tried (no secret is ever written). */
static int cred_cb(git_credential **out, const char *url, const char *user_from_url,
                   unsigned int allowed, void *payload)
{
    push_ctx *c = payload;
    (void)url;
    const char *user = user_from_url && *user_from_url ? user_from_url : NULL;
    if (allowed & GIT_CREDENTIAL_USERNAME) {
        if (c->tried_user++) goto none;
        return git_credential_username_new(out, user ? user : (getenv("USER") ? getenv("USER") : "git"));
    }
    if (allowed & GIT_CREDENTIAL_SSH_KEY) {
        const char *u = user ? user : (getenv("USER") ? getenv("USER") : "git");
        if (c->key && !c->tried_key) {
            c->tried_key = 1;
            char pub[4200];
            snprintf(pub, sizeof pub, "%s.pub", c->key);
            return git_credential_ssh_key_new(out, u, file_readable(pub) ? pub : NULL, c->key,
                                              getenv("HONE_SSH_PASSPHRASE"));
        }
        if (!c->tried_agent && getenv("SSH_AUTH_SOCK")) {
            c->tried_agent = 1;
            return git_credential_ssh_key_from_agent(out, u);
        }
        snprintf(c->auth_why, sizeof c->auth_why, "SSH authentication as '%s' failed (tried: %s%s%s)", u,
                 c->tried_key ? "the key file " : "", c->tried_key ? c->key : "",
                 c->tried_agent ? (c->tried_key ? " and the agent" : "the agent")
                                : (c->tried_key ? "" : "nothing: no key file ($HONE_SSH_KEY) and no agent ($SSH_AUTH_SOCK)"));
        return GIT_EAUTH;
    }
    if (allowed & GIT_CREDENTIAL_USERPASS_PLAINTEXT) {
        static const char *const tokens[] = {"HONE_GIT_TOKEN", "GITHUB_TOKEN", "GH_TOKEN", "GITLAB_TOKEN", NULL};
        const char *which = NULL, *tok = first_env(tokens, &which);
        if (tok && !c->tried_token) {
            c->tried_token = 1;
            const char *u = getenv("HONE_GIT_USER");
            return git_credential_userpass_plaintext_new(out, u && *u ? u : (user ? user : "x-access-token"), tok);
        }
        snprintf(c->auth_why, sizeof c->auth_why, "HTTPS authentication failed (%s%s)",
                 tok ? "the remote refused the token in $" : "no token: set $HONE_GIT_TOKEN",
                 tok ? which : "");
        return GIT_EAUTH;
    }
none:
    snprintf(c->auth_why, sizeof c->auth_why, "the remote asks for credentials hone cannot offer (types 0x%x)",
             allowed);
    return GIT_EAUTH;
}

static void base64(char *out, const unsigned char *in, size_t n) /* no padding, as ssh-keygen */
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        if (i + 1 < n) out[o++] = t[v >> 6 & 63];
        if (i + 2 < n) out[o++] = t[v & 63];
    }
    out[o] = 0;
}

/* libgit2 checked the host key against ~/.ssh/known_hosts (valid); else a pinned fingerprint
 * ($HONE_SSH_HOST_KEY) may vouch for it. TLS certificates are libgit2's (the system's CAs). */
static int cert_cb(git_cert *cert, int valid, const char *host, void *payload)
{
    push_ctx *c = payload;
    if (valid) return 0;
    if (cert->cert_type != GIT_CERT_HOSTKEY_LIBSSH2) {
        snprintf(c->cert_why, sizeof c->cert_why, "the TLS certificate of %s is not valid", host);
        return GIT_ECERTIFICATE;
    }
    const git_cert_hostkey *hk = (const git_cert_hostkey *)cert;
    char fp[80] = "unknown";
    if (hk->type & GIT_CERT_SSH_SHA256) {
        memcpy(fp, "SHA256:", 7);
        base64(fp + 7, hk->hash_sha256, 32);
    }
    const char *pin = getenv("HONE_SSH_HOST_KEY");
    if (pin && (hk->type & GIT_CERT_SSH_SHA256) && !strcmp(pin, fp)) return 0;
    snprintf(c->cert_why, sizeof c->cert_why,
             "the SSH host key of %s (%s) is %s; add the host to ~/.ssh/known_hosts "
             "(ssh-keyscan) or set HONE_SSH_HOST_KEY to its fingerprint", host, fp,
             pin ? "not the one HONE_SSH_HOST_KEY pins" : "not in ~/.ssh/known_hosts");
    return GIT_ECERTIFICATE;
}

static int update_cb(const char *refname, const char *status, void *payload)
{
    push_ctx *c = payload;
    if (status) snprintf(c->rejected, sizeof c->rejected, "%s: %s", refname, status);
    return 0;
}

static int negotiation_cb(const git_push_update **updates, size_t len, void *payload)
{
    push_ctx *c = payload;
    for (size_t i = 0; i < len; i++) {
        git_oid_cpy(&c->remote_before, &updates[i]->src); /* src: the remote's current target */
        c->negotiated = 1;
    }
    return 0;
}

static void set_callbacks(git_remote_callbacks *cb, push_ctx *c)
{
    cb->credentials = cred_cb;
    cb->certificate_check = cert_cb;
    cb->push_update_reference = update_cb;
    cb->push_negotiation = negotiation_cb;
    cb->payload = c;
}

/* The error of a failed network call: our callbacks' reason first (never a secret), then libgit2's. */
static int net_fail(int grc, const push_ctx *c, const char *what, const char *url, const char *expr)
{
    if (c->cert_why[0]) return hone_error_set(HONE_EIO, "%s %s: %s", what, url, c->cert_why);
    if (c->auth_why[0]) return hone_error_set(HONE_EIO, "%s %s: %s", what, url, c->auth_why);
    char w[700];
    snprintf(w, sizeof w, "%s %s", what, url);
    return hone_review_git_fail(grc, w, expr, __FILE__, __LINE__);
}

/* ---- push -------------------------------------------------------------------------------------- */

/* The remote's tip of refs/heads/<branch> (ls-remote): 0 found, 1 absent, < 0 error. */
static int remote_tip(git_oid *out, git_remote *r, const char *refname, push_ctx *c, const char *url)
{
    git_remote_callbacks cb;
    git_remote_init_callbacks(&cb, GIT_REMOTE_CALLBACKS_VERSION);
    set_callbacks(&cb, c);
    int grc = git_remote_connect(r, GIT_DIRECTION_FETCH, &cb, NULL, NULL);
    if (grc < 0) return net_fail(grc, c, "review: cannot connect to", url, "git_remote_connect");
    const git_remote_head **heads = NULL;
    size_t n = 0;
    int found = 1;
    grc = git_remote_ls(&heads, &n, r);
    if (grc < 0) {
        git_remote_disconnect(r);
        return net_fail(grc, c, "review: cannot list the refs of", url, "git_remote_ls");
    }
    for (size_t i = 0; i < n; i++)
        if (!strcmp(heads[i]->name, refname)) { git_oid_cpy(out, &heads[i]->oid); found = 0; }
    git_remote_disconnect(r);
    return found;
}

/* The remote has the branch at another commit: the same candidate (Hone-Candidate of its tip,
 * downloaded) is 1, another one an error. */
static int same_candidate_there(git_repository *repo, git_remote *r, const char *refname, git_commit *local,
                                git_oid *there, push_ctx *c, const char *url)
{
    git_commit *theirs = NULL;
    int rc = remote_tip(there, r, refname, c, url);
    if (rc) return rc < 0 ? rc : hone_error_set(HONE_EIO, "review: %s refused %s but does not have it", url, refname);
    if (git_commit_lookup(&theirs, repo, there) < 0) {
        git_fetch_options fo;
        git_fetch_options_init(&fo, GIT_FETCH_OPTIONS_VERSION);
        set_callbacks(&fo.callbacks, c);
        char *spec = (char *)refname;
        git_strarray specs = {&spec, 1};
        int grc = git_remote_download(r, &specs, &fo); /* objects only: no ref moves */
        if (grc < 0) return net_fail(grc, c, "review: cannot download the remote's", refname, "git_remote_download");
        HONE_GIT_TRY(git_commit_lookup(&theirs, repo, there), "review: the remote's %s is not a commit", refname);
    }
    char mine[128], other[128];
    hone_review_trailer(git_commit_message(local), "Hone-Candidate", mine, sizeof mine);
    hone_review_trailer(git_commit_message(theirs), "Hone-Candidate", other, sizeof other);
    if (*mine && !strcmp(mine, other)) rc = 1;
    else
        rc = hone_error_set(HONE_EINVAL, "review: %s on %s is another candidate (%s, here %s); not overwritten",
                            refname + 11, url, *other ? other : "unknown", *mine ? mine : "unknown");
done:
    git_commit_free(theirs);
    return rc;
}

/* A failure worth another try: a lock held by another writer, a dropped connection. */
static int transient(int grc, const push_ctx *c)
{
    if (c->auth_why[0] || c->cert_why[0]) return 0;
    if (grc == GIT_ELOCKED) return 1;
    if (grc == GIT_EAUTH || grc == GIT_ECERTIFICATE || grc == GIT_ENONFASTFORWARD || grc == GIT_ENOTFOUND ||
        grc == GIT_EINVALIDSPEC)
        return 0;
    const git_error *e = git_error_last();
    return e && (e->klass == GIT_ERROR_NET || e->klass == GIT_ERROR_SSH || e->klass == GIT_ERROR_OS ||
                 (e->message && strstr(e->message, "lock")));
}

int hone_review_push(hone_review_push_result *out, const hone_review_opts *opts,
                     const hone_review_push_opts *po, const char *branch)
{
    git_repository *repo = NULL;
    git_remote *remote = NULL;
    git_reference *ref = NULL;
    git_commit *tip = NULL;
    char name[256], slot[64], backend[16], hash[80], refname[300];
    int rc = 0, named = 0;
    memset(out, 0, sizeof *out);
    if (!branch || hone_review_parse_branch(branch, name, sizeof name, slot, backend, hash))
        return hone_error_set(HONE_EINVAL, "review push: refusing '%s': only hone/<slot>/<backend>/<hash> "
                              "branches are pushed", branch ? branch : "(null)");
    snprintf(refname, sizeof refname, "refs/heads/%s", name);
    snprintf(out->branch, sizeof out->branch, "%s", name);
    const char *rname = po && po->remote ? po->remote : "origin";
    int attempts = po && po->attempts > 0 ? po->attempts : 5;
    push_ctx c = {.key = po && po->ssh_key ? po->ssh_key : getenv("HONE_SSH_KEY")};
    if (c.key && !*c.key) c.key = NULL;

    git_libgit2_init();
    TRY(hone_review_open_repo(&repo, opts));
    HONE_GIT_TRY(git_reference_lookup(&ref, repo, refname), "review push: no branch %s in '%s'", name,
                 hone_review_repo_path(opts));
    HONE_GIT_TRY(git_reference_peel((git_object **)&tip, ref, GIT_OBJECT_COMMIT),
                 "review push: %s does not point to a commit", name);
    git_oid_tostr(out->commit, sizeof out->commit, git_commit_id(tip));
    TRY(open_remote(&remote, &named, repo, rname, opts));
    strip_password(out->url, sizeof out->url, git_remote_url(remote));
    if (is_ssh_url(git_remote_url(remote))) {
        if (!(git_libgit2_features() & GIT_FEATURE_SSH)) {
            rc = hone_error_set(HONE_EINVAL, "review push: %s is an SSH remote and this libgit2 was built "
                                "without SSH (GIT_FEATURE_SSH); push over HTTPS or file:// instead", out->url);
            goto done;
        }
    }

    char spec_s[620];
    snprintf(spec_s, sizeof spec_s, "%s:%s", refname, refname); /* no '+': never forced */
    char *spec = spec_s;
    git_strarray specs = {&spec, 1};
    for (int attempt = 1;; attempt++) {
        push_ctx fresh = {.key = c.key};
        c = fresh;
        out->attempts = attempt;
        git_push_options opt;
        git_push_options_init(&opt, GIT_PUSH_OPTIONS_VERSION);
        set_callbacks(&opt.callbacks, &c);
        int grc = git_remote_push(remote, &specs, &opt);
        if (grc == 0 && !c.rejected[0]) {
            git_oid_tostr(out->remote_commit, sizeof out->remote_commit, git_commit_id(tip));
            if (named) { /* what `git push` leaves: refs/remotes/<name>/<branch> at the pushed tip */
                char tracking[600];
                git_reference *tr = NULL;
                snprintf(tracking, sizeof tracking, "refs/remotes/%s/%s", rname, name);
                int trc = hone_review_ref_create(&tr, repo, tracking, git_commit_id(tip), 1, "update by push");
                git_reference_free(tr);
                HONE_GIT_TRY_AS(trc, "hone_review_ref_create(&tr, repo, tracking, tip, 1, msg)",
                                "review push: pushed, but cannot update %s", tracking);
            }
            out->outcome = c.negotiated && git_oid_equal(&c.remote_before, git_commit_id(tip))
                               ? HONE_REVIEW_PUSH_UP_TO_DATE
                               : HONE_REVIEW_PUSH_PUSHED;
            break;
        }
        int nonff = grc == GIT_ENONFASTFORWARD ||
                    (grc == 0 && (strstr(c.rejected, "fast") || strstr(c.rejected, "fetch first") ||
                                  strstr(c.rejected, "already exists")));
        if (nonff) { /* the remote has this branch at another commit: whose candidate? */
            git_oid there;
            push_ctx cc = {.key = c.key};
            if ((rc = same_candidate_there(repo, remote, refname, tip, &there, &cc, out->url)) < 0) goto done;
            git_oid_tostr(out->remote_commit, sizeof out->remote_commit, &there);
            out->outcome = HONE_REVIEW_PUSH_PROPOSED_THERE;
            rc = 0;
            break;
        }
        int again = grc == 0 ? strstr(c.rejected, "lock") != NULL : transient(grc, &c);
        if (!again || attempt >= attempts) {
            if (grc == 0)
                rc = hone_error_set(HONE_EIO, "review push: %s refused %s", out->url, c.rejected);
            else
                rc = net_fail(grc, &c, "review push: cannot push to", out->url, "git_remote_push(remote, &specs, &opt)");
            goto done;
        }
        struct timespec pause = {0, 50000000L * attempt}; /* 50 ms, 100 ms, ... */
        nanosleep(&pause, NULL);
    }
done:
    git_commit_free(tip);
    git_reference_free(ref);
    git_remote_free(remote);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}

/* ---- status ------------------------------------------------------------------------------------- */

/* The remote's refs/heads/hone/... tips (ls-remote) into tips[i] for v[i] (zero oid: absent). */
static int ls_remote_tips(git_oid *tips, const hone_review_status *v, size_t n, git_remote *r, const char *url)
{
    push_ctx c = {.key = getenv("HONE_SSH_KEY")};
    git_remote_callbacks cb;
    git_remote_init_callbacks(&cb, GIT_REMOTE_CALLBACKS_VERSION);
    set_callbacks(&cb, &c);
    int grc = git_remote_connect(r, GIT_DIRECTION_FETCH, &cb, NULL, NULL);
    if (grc < 0) return net_fail(grc, &c, "review status: cannot connect to", url, "git_remote_connect");
    const git_remote_head **heads = NULL;
    size_t nh = 0;
    grc = git_remote_ls(&heads, &nh, r);
    if (grc < 0) {
        git_remote_disconnect(r);
        return net_fail(grc, &c, "review status: cannot list the refs of", url, "git_remote_ls");
    }
    for (size_t i = 0; i < nh; i++) {
        if (strncmp(heads[i]->name, "refs/heads/", 11)) continue;
        for (size_t j = 0; j < n; j++)
            if (!strcmp(heads[i]->name + 11, v[j].b.branch)) git_oid_cpy(&tips[j], &heads[i]->oid);
    }
    git_remote_disconnect(r);
    return 0;
}

int hone_review_status_list(hone_review_status **out, size_t *n, const hone_review_opts *opts,
                            const hone_review_status_opts *so)
{
    hone_review_branch *br = NULL;
    hone_review_status *v = NULL;
    git_repository *repo = NULL;
    git_remote *remote = NULL;
    git_commit *base = NULL;
    git_oid *tips = NULL;
    size_t nb = 0;
    int rc = 0;
    *out = NULL;
    *n = 0;
    git_libgit2_init();
    TRY(hone_review_list(&br, &nb, opts));
    v = calloc(nb ? nb : 1, sizeof *v);
    tips = calloc(nb ? nb : 1, sizeof *tips);
    if (!v || !tips) { rc = hone_error_set(HONE_ENOMEM, "out of memory"); goto done; }
    for (size_t i = 0; i < nb; i++) {
        v[i].b = br[i];
        v[i].pushed = -1;
    }
    TRY(hone_review_open_repo(&repo, opts));
    if ((rc = hone_review_resolve_base(&base, repo, opts))) {
        if (opts && opts->base_ref) goto done;
        rc = 0; /* unborn HEAD: nothing is stale */
    }

    /* pushed: the remote's tips, asked (online, or a URL) or as the tracking refs remember them */
    const char *rname = so && so->remote ? so->remote : "origin";
    int named = 0;
    if ((rc = open_remote(&remote, &named, repo, rname, opts))) {
        if (so && so->remote) goto done;
        rc = 0; /* no origin: pushed stays unknown */
    }
    if (remote && (!named || (so && so->online))) {
        char url[512];
        strip_password(url, sizeof url, git_remote_url(remote));
        TRY(ls_remote_tips(tips, v, nb, remote, url));
        for (size_t i = 0; i < nb; i++) {
            git_oid local;
            git_oid_fromstr(&local, v[i].b.commit);
            v[i].pushed = git_oid_equal(&tips[i], &local);
        }
    } else if (remote) {
        for (size_t i = 0; i < nb; i++) {
            char tr[400];
            git_oid id, local;
            snprintf(tr, sizeof tr, "refs/remotes/%s/%s", rname, v[i].b.branch);
            git_oid_fromstr(&local, v[i].b.commit);
            v[i].pushed = git_reference_name_to_id(&id, repo, tr) == 0 && git_oid_equal(&id, &local);
        }
        git_error_clear();
    }

    for (size_t i = 0; i < nb; i++) {
        /* stale: the base moved on since this branch left it */
        if (base && !v[i].b.merged) {
            git_oid local;
            size_t ahead = 0, behind = 0;
            git_oid_fromstr(&local, v[i].b.commit);
            if (git_graph_ahead_behind(&ahead, &behind, repo, &local, git_commit_id(base)) == 0 && behind > 0) {
                v[i].stale = 1;
                v[i].behind = behind;
            }
        }
        /* superseded: the fastest other branch for the same slot, backend and machine */
        double best = v[i].b.speedup;
        for (size_t j = 0; j < nb; j++) {
            if (j == i || strcmp(v[j].b.slot, v[i].b.slot) || strcmp(v[j].b.backend, v[i].b.backend) ||
                !v[i].b.device[0] || strcmp(v[j].b.device, v[i].b.device))
                continue;
            if (isfinite(v[j].b.speedup) && (!isfinite(best) || v[j].b.speedup > best)) {
                best = v[j].b.speedup;
                snprintf(v[i].superseded_by, sizeof v[i].superseded_by, "%s", v[j].b.branch);
            }
        }
    }
    *out = v;
    *n = nb;
    v = NULL;
done:
    free(tips);
    free(v);
    free(br);
    git_remote_free(remote);
    git_commit_free(base);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}
