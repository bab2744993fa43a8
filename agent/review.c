/* Review through git (libgit2): accepted kernels become commits on hone/<slot>/<backend>/<hash>
 * branches of the kernels repository, with their evidence; `hone review` lists, shows, verifies
 * and prunes them. Only objects and new refs are written: the working tree, the index, HEAD and
 * every existing branch stay as they were. */
#include "review.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <git2.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/error.h"
#include "review_git.h"

#ifndef HONE_SOURCE_DIR
#define HONE_SOURCE_DIR "."
#endif

#define HONE_REVIEW_SHORT 12

/* ---- the libgit2 error wrapper (macros in review_git.h) ---------------------------------- */

int hone_review_git_fail(int grc, const char *what, const char *expr, const char *file, int line)
{
    const git_error *e = git_error_last();
    int code = (grc == GIT_ENOTFOUND || grc == GIT_EEXISTS || grc == GIT_EINVALIDSPEC) ? HONE_EINVAL
                                                                                        : HONE_EIO;
    return hone_error_set(code, "%s: %s [libgit2 %s = %d at %s:%d]", what,
                          e && e->message ? e->message : "(no message)", expr, grc, file, line);
}

#define TRY(expr)                                                                        \
    do {                                                                                 \
        if ((rc = (expr)) != 0) goto done;                                               \
    } while (0)

/* ---- a growable string -------------------------------------------------------------------- */

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) { b->oom = 1; return; }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) { sb_putn(b, tmp, (size_t)n); return; }
    char *big = malloc((size_t)n + 1);
    if (!big) { b->oom = 1; return; }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_putn(b, big, (size_t)n);
    free(big);
}

/* Hands the string to *out (an empty string for an empty buffer). */
static int sb_finish(sbuf *b, char **out)
{
    if (!b->oom && !b->s) sb_putn(b, "", 0);
    if (b->oom) {
        free(b->s);
        return hone_error_set(HONE_ENOMEM, "out of memory");
    }
    *out = b->s;
    return 0;
}

/* ---- evidence ------------------------------------------------------------------------------- */

/* Trailers and table cells are one line: control characters become spaces (and '|' is escaped
 * in table cells). */
static void put_one_line(sbuf *b, const char *s, int table)
{
    if (!s || !*s) { sb_puts(b, "unknown"); return; }
    for (; *s; s++) {
        if ((unsigned char)*s < 0x20 || *s == 0x7f) sb_putn(b, " ", 1);
        else if (table && *s == '|') sb_putn(b, "\\|", 2);
        else sb_putn(b, s, 1);
    }
}

static void md_row(sbuf *b, const char *metric, const char *value)
{
    sb_puts(b, "| ");
    sb_puts(b, metric);
    sb_puts(b, " | ");
    put_one_line(b, value, 1);
    sb_puts(b, " |\n");
}

/* "%.*g"-style number or "n/a". */
static const char *fmt_num(char *buf, size_t cap, const char *fmt, double v)
{
    if (!isfinite(v)) snprintf(buf, cap, "n/a");
    else snprintf(buf, cap, fmt, v);
    return buf;
}

/* The rows of the fields the report reads: end to end, noise, machine, LLM cost, reproduce. */
static void md_report_rows(sbuf *b, const hone_evidence *ev)
{
    char v[1200], a[64], c[64], q[3][32];
    if (isfinite(ev->e2e_incumbent_tok_s) || isfinite(ev->e2e_candidate_tok_s)) {
        snprintf(v, sizeof v, "%s -> %s tok/s (step ratio %s, 95%% CI %s .. %s, %d steps)",
                 fmt_num(a, sizeof a, "%.1f", ev->e2e_incumbent_tok_s), fmt_num(c, sizeof c, "%.1f", ev->e2e_candidate_tok_s),
                 fmt_num(q[0], 32, "%.3f", ev->e2e_ratio_median), fmt_num(q[1], 32, "%.3f", ev->e2e_ratio_ci_low),
                 fmt_num(q[2], 32, "%.3f", ev->e2e_ratio_ci_high), ev->e2e_steps);
        md_row(b, "decode end to end (incumbent -> candidate)", v);
    }
    if (isfinite(ev->ab_ratio_iqr_rel)) {
        snprintf(v, sizeof v, "A/B ratio IQR %.1f%% of the median; bandwidth probe %s / %s GB/s; %d preempted pairs",
                 100 * ev->ab_ratio_iqr_rel, fmt_num(a, sizeof a, "%.1f", ev->bandwidth_gbps_before),
                 fmt_num(c, sizeof c, "%.1f", ev->bandwidth_gbps_after), ev->preempted_reps);
        md_row(b, "noise", v);
    }
    const hone_evidence_machine *m = &ev->machine;
    if (m->cpu_model[0] || m->os[0]) {
        snprintf(v, sizeof v, "%s; %d cores / %d threads; %s; %s; %s", m->cpu_model[0] ? m->cpu_model : "unknown CPU",
                 m->cores, m->threads, m->cpu_flags[0] ? m->cpu_flags : "no ISA flags read",
                 m->compiler[0] ? m->compiler : "compiler unknown", m->os[0] ? m->os : "OS unknown");
        md_row(b, "machine", v);
    }
    if (ev->llm_prompt_tokens >= 0 || ev->llm_completion_tokens >= 0 || isfinite(ev->llm_cost_usd)) {
        snprintf(v, sizeof v, "%d prompt / %d completion tokens, cost %s", ev->llm_prompt_tokens,
                 ev->llm_completion_tokens, fmt_num(a, sizeof a, "$%.4f", ev->llm_cost_usd));
        md_row(b, "LLM", v);
    }
    if (ev->reproduce[0]) {
        snprintf(v, sizeof v, "`%s`", ev->reproduce);
        md_row(b, "reproduce", v);
    }
}

/* Per shape: time, speedup and % of roofline before and after. */
static void md_shapes(sbuf *b, const hone_evidence *ev)
{
    if (ev->n_shapes <= 0) return;
    sb_puts(b, "\n| shape | incumbent ns | candidate ns | speedup (95% CI) | % of roofline before -> after |\n"
               "|---|---|---|---|---|\n");
    for (int i = 0; i < ev->n_shapes && i < HONE_EVIDENCE_MAX_SHAPES; i++) {
        const hone_evidence_shape *s = &ev->shape[i];
        char t0[32], t1[32], sp[32], lo[32], hi[32], r0[32], r1[32];
        sb_puts(b, "| ");
        put_one_line(b, s->desc, 1);
        sb_printf(b, "%s | %s | %s | %sx (%s .. %s) | %s -> %s |\n", s->gate ? " (gate)" : "",
                  fmt_num(t0, 32, "%.0f", s->incumbent_ns), fmt_num(t1, 32, "%.0f", s->candidate_ns),
                  fmt_num(sp, 32, "%.3f", s->speedup), fmt_num(lo, 32, "%.3f", s->ci_low),
                  fmt_num(hi, 32, "%.3f", s->ci_high), fmt_num(r0, 32, "%.1f%%", 100 * s->incumbent_roofline),
                  fmt_num(r1, 32, "%.1f%%", 100 * s->candidate_roofline));
    }
}

int hone_review_evidence_to_markdown(char **out, const hone_evidence *ev, const char *slot,
                                     const char *backend)
{
    sbuf b = {0};
    char v[256], a[64], c[64];
    *out = NULL;
    sb_puts(&b, "| metric | value |\n|---|---|\n");
    snprintf(v, sizeof v, "%s (%s)", slot ? slot : "unknown", backend ? backend : "unknown");
    md_row(&b, "slot", v);
    md_row(&b, "speedup (median)", fmt_num(v, sizeof v, "%.3fx", ev->speedup_median));
    if (isfinite(ev->speedup_ci_low) || isfinite(ev->speedup_ci_high)) {
        snprintf(v, sizeof v, "%s .. %s", fmt_num(a, sizeof a, "%.3f", ev->speedup_ci_low),
                 fmt_num(c, sizeof c, "%.3f", ev->speedup_ci_high));
        char label[64];
        if (isfinite(ev->ci_level))
            snprintf(label, sizeof label, "speedup %g%% CI", ev->ci_level * 100.0);
        else
            snprintf(label, sizeof label, "speedup CI");
        md_row(&b, label, v);
    }
    if (isfinite(ev->incumbent_ns) || isfinite(ev->candidate_ns)) {
        snprintf(v, sizeof v, "%s ns -> %s ns", fmt_num(a, sizeof a, "%.1f", ev->incumbent_ns),
                 fmt_num(c, sizeof c, "%.1f", ev->candidate_ns));
        md_row(&b, "time per call (incumbent -> candidate)", v);
    }
    if (ev->reps >= 0) { snprintf(v, sizeof v, "%d", ev->reps); md_row(&b, "timed repetitions", v); }
    if (isfinite(ev->threshold)) md_row(&b, "speed threshold", fmt_num(v, sizeof v, "%.3fx", ev->threshold));
    md_row(&b, "parity tier", ev->parity_tier);
    md_row(&b, "max abs error vs f64 oracle, candidate",
           fmt_num(v, sizeof v, "%.3e", ev->candidate_max_abs_err));
    md_row(&b, "max abs error vs f64 oracle, incumbent",
           fmt_num(v, sizeof v, "%.3e", ev->incumbent_max_abs_err));
    if (isfinite(ev->slack)) md_row(&b, "allowed slack", fmt_num(v, sizeof v, "%.3g", ev->slack));
    if (ev->shapes) md_row(&b, "shapes checked", ev->shapes);
    md_row(&b, "model max abs delta-logit", fmt_num(v, sizeof v, "%.3e", ev->model_max_abs_dlogit));
    snprintf(v, sizeof v, "%s / %s", fmt_num(a, sizeof a, "%.3e", ev->model_kl_mean),
             fmt_num(c, sizeof c, "%.3e", ev->model_kl_max));
    md_row(&b, "model KL per position (mean / max)", v);
    md_row(&b, "argmax agreement",
           fmt_num(v, sizeof v, "%.2f%%", ev->model_argmax_agreement * 100.0));
    if (ev->model_prompts >= 0 || ev->model_steps >= 0) {
        snprintf(v, sizeof v, "%d prompts x %d steps", ev->model_prompts, ev->model_steps);
        md_row(&b, "parity prompt set", v);
    }
    md_row(&b, "device", ev->device);
    md_row(&b, "model", ev->model);
    md_row(&b, "candidate", ev->candidate_hash);
    if (ev->so_hash) md_row(&b, "object (sha256)", ev->so_hash);
    snprintf(v, sizeof v, "%s%s%s", ev->origin_kind ? ev->origin_kind : "unknown",
             ev->origin ? ": " : "", ev->origin ? ev->origin : "");
    md_row(&b, "origin", v);
    if (ev->seed >= 0) { snprintf(v, sizeof v, "%lld", (long long)ev->seed); md_row(&b, "input seed", v); }
    if (isfinite(ev->guard_seconds)) md_row(&b, "guard time", fmt_num(v, sizeof v, "%.1f s", ev->guard_seconds));
    md_report_rows(&b, ev);
    md_shapes(&b, ev);
    return sb_finish(&b, out);
}

/* ---- repository helpers ---------------------------------------------------------------------- */

static const char *repo_path(const hone_review_opts *o)
{
    return o && o->repo ? o->repo : HONE_SOURCE_DIR;
}

static int open_repo(git_repository **out, const hone_review_opts *o)
{
    const char *path = repo_path(o);
    struct stat st;
    *out = NULL;
    if (stat(path, &st) != 0)
        return hone_error_set(HONE_EINVAL, "kernels repository '%s' does not exist: %s", path,
                              strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return hone_error_set(HONE_EINVAL, "kernels repository '%s' is not a directory", path);
    int grc = git_repository_open_ext(out, path, 0, NULL);
    if (grc < 0) {
        char what[600];
        if (grc == GIT_ENOTFOUND)
            snprintf(what, sizeof what, "'%s' is not a git repository (nor inside one)", path);
        else
            snprintf(what, sizeof what, "cannot open the kernels repository '%s'", path);
        return hone_review_git_fail(grc, what, "git_repository_open_ext(out, path, 0, NULL)", __FILE__, __LINE__);
    }
    return 0;
}

static int valid_backend(const char *b) { return b && (!strcmp(b, "cpu") || !strcmp(b, "cuda")); }

static int valid_slot(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n >= 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_')) return 0;
    return 1;
}

static const char *kernel_ext(const char *backend) { return strcmp(backend, "cuda") ? "c" : "cu"; }

/* "hone/<slot>/<backend>/<hash>" (with or without "refs/heads/") -> its parts; 0 on success. */
static int parse_branch(const char *branch, char *shortname, size_t cap, char slot[64],
                        char backend[16], char hash[80])
{
    if (!strncmp(branch, "refs/heads/", 11)) branch += 11;
    if (strncmp(branch, HONE_REVIEW_PREFIX, strlen(HONE_REVIEW_PREFIX)) || strlen(branch) >= cap)
        return hone_error_set(HONE_EINVAL, "'%s' is not a hone/<slot>/<backend>/<hash> branch", branch);
    snprintf(shortname, cap, "%s", branch);
    const char *p = branch + strlen(HONE_REVIEW_PREFIX);
    const char *s1 = strchr(p, '/'), *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
    if (!s1 || !s2 || strchr(s2 + 1, '/') || s1 - p >= 64 || s2 - s1 - 1 >= 16 || strlen(s2 + 1) >= 80 ||
        !s2[1])
        return hone_error_set(HONE_EINVAL, "'%s' is not a hone/<slot>/<backend>/<hash> branch", branch);
    memcpy(slot, p, (size_t)(s1 - p));
    slot[s1 - p] = 0;
    memcpy(backend, s1 + 1, (size_t)(s2 - s1 - 1));
    backend[s2 - s1 - 1] = 0;
    snprintf(hash, 80, "%s", s2 + 1);
    if (!valid_slot(slot) || !valid_backend(backend))
        return hone_error_set(HONE_EINVAL, "'%s' is not a hone/<slot>/<backend>/<hash> branch", branch);
    return 0;
}

/* The value of trailer `key` in a commit message, copied into buf ("" if absent). */
static void trailer_get(const char *message, const char *key, char *buf, size_t cap)
{
    git_message_trailer_array arr = {0};
    buf[0] = 0;
    if (git_message_trailers(&arr, message) < 0) return;
    for (size_t i = 0; i < arr.count; i++)
        if (strcasecmp(arr.trailers[i].key, key) == 0) {
            snprintf(buf, cap, "%s", arr.trailers[i].value);
            break;
        }
    git_message_trailer_array_free(&arr);
}

/* The base commit: opts->base_ref or HEAD, peeled to a commit. */
static int resolve_base(git_commit **out, git_repository *repo, const hone_review_opts *o)
{
    const char *ref = o && o->base_ref ? o->base_ref : "HEAD";
    git_object *obj = NULL;
    int rc = 0;
    *out = NULL;
    HONE_GIT_TRY(git_revparse_single(&obj, repo, ref), "base '%s' does not name a commit in '%s'",
                 ref, repo_path(o));
    HONE_GIT_TRY(git_object_peel((git_object **)out, obj, GIT_OBJECT_COMMIT),
                 "base '%s' is not a commit", ref);
done:
    git_object_free(obj);
    return rc;
}

/* The blob id of `path` in commit c's tree; 0 if found, 1 if absent, < 0 on error. */
static int blob_at(git_oid *out, git_commit *c, const char *path)
{
    git_tree *tree = NULL;
    git_tree_entry *e = NULL;
    int rc = 0;
    HONE_GIT_TRY(git_commit_tree(&tree, c), "cannot read the tree of commit %.12s",
                 git_oid_tostr_s(git_commit_id(c)));
    int grc = git_tree_entry_bypath(&e, tree, path);
    if (grc == GIT_ENOTFOUND) { rc = 1; goto done; }
    HONE_GIT_TRY_AS(grc, "git_tree_entry_bypath(&e, tree, path)", "cannot look up %s", path);
    git_oid_cpy(out, git_tree_entry_id(e));
done:
    git_tree_entry_free(e);
    git_tree_free(tree);
    return rc;
}

/* ---- propose --------------------------------------------------------------------------------- */

/* If refname exists: 1 when its tip proposes the same candidate (trailer Hone-Candidate equal to
 * hash, or the same kernel blob), filling *out; an error when it proposes another one.
 * 0 when the branch does not exist. */
static int check_existing(hone_review_result *out, git_repository *repo, const char *refname,
                          const char *hash, const git_oid *blob, const char *kpath)
{
    git_reference *ref = NULL;
    git_commit *tip = NULL;
    int rc = 0;
    int grc = git_reference_lookup(&ref, repo, refname);
    if (grc == GIT_ENOTFOUND) return 0;
    HONE_GIT_TRY_AS(grc, "git_reference_lookup(&ref, repo, refname)", "cannot read branch %s", refname + 11);
    HONE_GIT_TRY(git_reference_peel((git_object **)&tip, ref, GIT_OBJECT_COMMIT),
                 "branch %s does not point to a commit", refname + 11);
    char cand[128];
    trailer_get(git_commit_message(tip), "Hone-Candidate", cand, sizeof cand);
    git_oid have;
    int same = strcmp(cand, hash) == 0;
    if (!same) {
        int b = blob_at(&have, tip, kpath);
        if (b < 0) { rc = b; goto done; }
        same = b == 0 && git_oid_equal(&have, blob);
    }
    if (!same) {
        rc = hone_error_set(HONE_EINVAL,
                            "branch %s already exists and proposes another candidate (%s, not %s); "
                            "nothing was written",
                            refname + 11, *cand ? cand : "unknown", hash);
        goto done;
    }
    snprintf(out->branch, sizeof out->branch, "%s", refname + 11);
    git_oid_tostr(out->commit, sizeof out->commit, git_commit_id(tip));
    if (git_commit_parentcount(tip) > 0)
        git_oid_tostr(out->base, sizeof out->base, git_commit_parent_id(tip, 0));
    out->existed = 1;
    rc = 1;
done:
    git_commit_free(tip);
    git_reference_free(ref);
    return rc;
}

static int build_message(char **out, const char *slot, const char *backend,
                         const hone_evidence *ev, const char *hash, const char *table)
{
    sbuf b = {0};
    sb_printf(&b, "%s (%s): %.2fx faster, %s parity\n\n", slot, backend, ev->speedup_median,
              ev->parity_tier);
    sb_puts(&b, table);
    sb_printf(&b, "\nHone-Slot: %s\nHone-Speedup: %.3fx", slot, ev->speedup_median);
    if (isfinite(ev->speedup_ci_low) && isfinite(ev->speedup_ci_high)) {
        if (isfinite(ev->ci_level))
            sb_printf(&b, " (%g%% CI %.3f..%.3f)", ev->ci_level * 100.0, ev->speedup_ci_low,
                      ev->speedup_ci_high);
        else
            sb_printf(&b, " (CI %.3f..%.3f)", ev->speedup_ci_low, ev->speedup_ci_high);
    }
    sb_printf(&b, "\nHone-Parity: %s\nHone-Device: ", ev->parity_tier);
    put_one_line(&b, ev->device, 0);
    sb_puts(&b, "\nHone-Model: ");
    put_one_line(&b, ev->model, 0);
    sb_printf(&b, "\nHone-Candidate: %s\n", hash);
    return sb_finish(&b, out);
}

int hone_review_propose(hone_review_result *out, const hone_review_opts *opts, const char *slot,
                        const char *backend, const char *source, size_t source_len,
                        const hone_evidence *ev)
{
    git_repository *repo = NULL;
    git_commit *base = NULL;
    git_tree *base_tree = NULL, *tree = NULL;
    git_signature *sig = NULL;
    git_reference *ref = NULL;
    char *json = NULL, *md = NULL, *msg = NULL;
    int rc = 0;
    memset(out, 0, sizeof *out);
    if (!valid_slot(slot))
        return hone_error_set(HONE_EINVAL, "review: bad slot name '%s' (expected [a-z0-9_]+)",
                              slot ? slot : "(null)");
    if (!valid_backend(backend))
        return hone_error_set(HONE_EINVAL, "review: backend must be cpu or cuda, got '%s'",
                              backend ? backend : "(null)");
    if (!source || source_len == 0)
        return hone_error_set(HONE_EINVAL, "review: the candidate source is empty");
    if (!ev || !isfinite(ev->speedup_median) || ev->speedup_median <= 0)
        return hone_error_set(HONE_EINVAL, "review: the evidence has no median speedup");
    if (!ev->parity_tier || (strcmp(ev->parity_tier, "exact") && strcmp(ev->parity_tier, "faithful")))
        return hone_error_set(HONE_EINVAL, "review: parity tier must be exact or faithful, got '%s'",
                              ev->parity_tier ? ev->parity_tier : "(null)");

    /* The candidate's identity: the guard's content hash, else the source's git blob id. */
    git_libgit2_init();
    git_oid blob_id;
    char hash[80];
    HONE_GIT_TRY(git_odb_hash(&blob_id, source, source_len, GIT_OBJECT_BLOB),
                 "review: cannot hash the candidate");
    if (ev->candidate_hash) {
        const char *h = strrchr(ev->candidate_hash, ':');
        h = h ? h + 1 : ev->candidate_hash;
        size_t n = strlen(h);
        int ok = n >= 7 && strlen(ev->candidate_hash) < sizeof hash;
        for (size_t i = 0; ok && i < n; i++)
            ok = (h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z');
        if (!ok) {
            rc = hone_error_set(HONE_EINVAL,
                                "review: candidate hash '%s' is not [algo:]<7+ letters or digits>",
                                ev->candidate_hash);
            goto done;
        }
        snprintf(hash, sizeof hash, "%s", ev->candidate_hash);
    } else {
        git_oid_tostr(hash, sizeof hash, &blob_id);
    }
    const char *hs = strrchr(hash, ':');
    hs = hs ? hs + 1 : hash;
    char refname[160], kpath[128], jpath[128], mpath[128];
    snprintf(refname, sizeof refname, "refs/heads/" HONE_REVIEW_PREFIX "%s/%s/%.*s", slot, backend,
             HONE_REVIEW_SHORT, hs);
    snprintf(kpath, sizeof kpath, "kernels/%s/%s.%s", backend, slot, kernel_ext(backend));
    snprintf(jpath, sizeof jpath, "kernels/%s/%s.evidence.json", backend, slot);
    snprintf(mpath, sizeof mpath, "kernels/%s/%s.evidence.md", backend, slot);

    TRY(open_repo(&repo, opts));
    int valid = 0;
    HONE_GIT_TRY(git_reference_name_is_valid(&valid, refname), "review: cannot check %s", refname);
    if (!valid) {
        rc = hone_error_set(HONE_EINVAL, "review: '%s' is not a valid branch name", refname + 11);
        goto done;
    }
    if ((rc = check_existing(out, repo, refname, hash, &blob_id, kpath)) != 0) {
        if (rc == 1) rc = 0;
        goto done;
    }
    TRY(resolve_base(&base, repo, opts));

    /* Objects first (unreachable until the ref exists, so a failure leaves nothing visible). */
    hone_evidence evh = *ev;
    evh.candidate_hash = hash;
    TRY(hone_evidence_to_json(&json, &evh, slot, backend));
    TRY(hone_review_evidence_to_markdown(&md, &evh, slot, backend));
    git_oid src_oid, json_oid, md_oid, tree_oid, commit_oid;
    HONE_GIT_TRY(git_blob_create_from_buffer(&src_oid, repo, source, source_len),
                 "review: cannot write the candidate into '%s'", repo_path(opts));
    HONE_GIT_TRY(git_blob_create_from_buffer(&json_oid, repo, json, strlen(json)),
                 "review: cannot write the evidence into '%s'", repo_path(opts));
    HONE_GIT_TRY(git_blob_create_from_buffer(&md_oid, repo, md, strlen(md)),
                 "review: cannot write the evidence into '%s'", repo_path(opts));
    HONE_GIT_TRY(git_commit_tree(&base_tree, base), "review: cannot read the base tree");
    git_tree_update upd[3] = {
        {GIT_TREE_UPDATE_UPSERT, src_oid, GIT_FILEMODE_BLOB, kpath},
        {GIT_TREE_UPDATE_UPSERT, json_oid, GIT_FILEMODE_BLOB, jpath},
        {GIT_TREE_UPDATE_UPSERT, md_oid, GIT_FILEMODE_BLOB, mpath},
    };
    HONE_GIT_TRY(git_tree_create_updated(&tree_oid, repo, base_tree, 3, upd),
                 "review: cannot write the tree into '%s'", repo_path(opts));
    HONE_GIT_TRY(git_tree_lookup(&tree, repo, &tree_oid), "review: cannot read the new tree");
    const char *name = opts && opts->author_name ? opts->author_name : "Hone";
    const char *email = opts && opts->author_email ? opts->author_email : "hone@localhost";
    HONE_GIT_TRY(git_signature_now(&sig, name, email), "review: bad author '%s <%s>'", name, email);
    TRY(build_message(&msg, slot, backend, ev, hash, md));
    const git_commit *parents[1] = {base};
    HONE_GIT_TRY(git_commit_create(&commit_oid, repo, NULL, sig, sig, NULL, msg, tree, 1, parents),
                 "review: cannot write the commit into '%s'", repo_path(opts));

    /* The only ref written: a new branch (force = 0: never moves an existing one). */
    char log[200];
    snprintf(log, sizeof log, "hone: propose %s (%s)", slot, backend);
    int grc = hone_review_ref_create(&ref, repo, refname, &commit_oid, 0, log);
    if (grc == GIT_EEXISTS) { /* a concurrent proposal of the same hash won the race */
        if ((rc = check_existing(out, repo, refname, hash, &blob_id, kpath)) == 1) rc = 0;
        else if (rc == 0) rc = hone_error_set(HONE_EINTERNAL, "review: %s vanished", refname + 11);
        goto done;
    }
    HONE_GIT_TRY_AS(grc, "git_reference_create(&ref, repo, refname, &commit_oid, 0, log)",
                    "review: cannot create branch %s in '%s'", refname + 11, repo_path(opts));
    snprintf(out->branch, sizeof out->branch, "%s", refname + 11);
    git_oid_tostr(out->commit, sizeof out->commit, &commit_oid);
    git_oid_tostr(out->base, sizeof out->base, git_commit_id(base));
    out->existed = 0;
done:
    free(msg);
    free(json);
    free(md);
    git_reference_free(ref);
    git_signature_free(sig);
    git_tree_free(tree);
    git_tree_free(base_tree);
    git_commit_free(base);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}

/* ---- list, show, read, delete ------------------------------------------------------------------ */

static int cmp_branch(const void *a, const void *b)
{
    return strcmp(((const hone_review_branch *)a)->branch, ((const hone_review_branch *)b)->branch);
}

/* Fills d from branch `name` (short) whose tip is `tip`; base decides .merged. */
static int describe_branch(hone_review_branch *d, git_repository *repo, const char *name,
                           git_commit *tip, git_commit *base)
{
    char hash[80];
    memset(d, 0, sizeof *d);
    int rc = parse_branch(name, d->branch, sizeof d->branch, d->slot, d->backend, hash);
    if (rc) return rc;
    const char *msg = git_commit_message(tip);
    trailer_get(msg, "Hone-Parity", d->parity, sizeof d->parity);
    trailer_get(msg, "Hone-Speedup", d->speedup_text, sizeof d->speedup_text);
    trailer_get(msg, "Hone-Device", d->device, sizeof d->device);
    trailer_get(msg, "Hone-Model", d->model, sizeof d->model);
    trailer_get(msg, "Hone-Candidate", d->candidate, sizeof d->candidate);
    char *end;
    d->speedup = strtod(d->speedup_text, &end);
    if (end == d->speedup_text) d->speedup = NAN;
    git_oid_tostr(d->commit, sizeof d->commit, git_commit_id(tip));
    d->time = (int64_t)git_commit_time(tip);
    if (base) {
        const git_oid *t = git_commit_id(tip), *b = git_commit_id(base);
        d->merged = git_oid_equal(t, b) || git_graph_descendant_of(repo, b, t) == 1;
        if (!d->merged) { /* squash- or rebase-merged: the base already has this kernel */
            char kpath[128];
            git_oid x, y;
            snprintf(kpath, sizeof kpath, "kernels/%s/%s.%s", d->backend, d->slot, kernel_ext(d->backend));
            d->merged = blob_at(&x, tip, kpath) == 0 && blob_at(&y, base, kpath) == 0 && git_oid_equal(&x, &y);
        }
    }
    return 0;
}

int hone_review_list(hone_review_branch **out, size_t *n, const hone_review_opts *opts)
{
    git_repository *repo = NULL;
    git_branch_iterator *it = NULL;
    git_reference *ref = NULL;
    git_commit *base = NULL, *tip = NULL;
    hone_review_branch *v = NULL;
    size_t cnt = 0, cap = 0;
    int rc = 0;
    *out = NULL;
    *n = 0;
    git_libgit2_init();
    TRY(open_repo(&repo, opts));
    if ((rc = resolve_base(&base, repo, opts))) {
        if (opts && opts->base_ref) goto done;
        rc = 0; /* HEAD unborn or dangling: list anyway, nothing counts as merged */
    }
    HONE_GIT_TRY(git_branch_iterator_new(&it, repo, GIT_BRANCH_LOCAL), "review: cannot list branches");
    git_branch_t type;
    int grc;
    while ((grc = git_branch_next(&ref, &type, it)) == 0) {
        const char *name = NULL;
        if (git_branch_name(&name, ref) == 0 && !strncmp(name, HONE_REVIEW_PREFIX, strlen(HONE_REVIEW_PREFIX)) &&
            git_reference_peel((git_object **)&tip, ref, GIT_OBJECT_COMMIT) == 0) {
            if (cnt == cap) {
                size_t nc = cap ? cap * 2 : 16;
                hone_review_branch *nv = realloc(v, nc * sizeof *nv);
                if (!nv) { rc = hone_error_set(HONE_ENOMEM, "out of memory"); goto done; }
                v = nv;
                cap = nc;
            }
            if (describe_branch(&v[cnt], repo, name, tip, base) == 0) cnt++; /* skip odd names */
            git_commit_free(tip);
            tip = NULL;
        }
        git_reference_free(ref);
        ref = NULL;
    }
    if (grc != GIT_ITEROVER)
        HONE_GIT_TRY_AS(grc, "git_branch_next(&ref, &type, it)", "review: cannot list branches");
    if (cnt) qsort(v, cnt, sizeof *v, cmp_branch);
    *out = v;
    *n = cnt;
    v = NULL;
done:
    free(v);
    git_commit_free(tip);
    git_reference_free(ref);
    git_branch_iterator_free(it);
    git_commit_free(base);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}

/* Opens the repository and the tip commit of a hone/ branch. */
static int open_branch(git_repository **repo, git_commit **tip, char *shortname, size_t cap,
                       char slot[64], char backend[16], const hone_review_opts *opts, const char *branch)
{
    git_reference *ref = NULL;
    char hash[80];
    int rc = 0;
    *repo = NULL;
    *tip = NULL;
    TRY(parse_branch(branch, shortname, cap, slot, backend, hash));
    TRY(open_repo(repo, opts));
    HONE_GIT_TRY(git_branch_lookup(&ref, *repo, shortname, GIT_BRANCH_LOCAL),
                 "review: no branch %s in '%s'", shortname, repo_path(opts));
    HONE_GIT_TRY(git_reference_peel((git_object **)tip, ref, GIT_OBJECT_COMMIT),
                 "review: branch %s does not point to a commit", shortname);
done:
    git_reference_free(ref);
    if (rc) {
        git_repository_free(*repo);
        *repo = NULL;
    }
    return rc;
}

static int diff_line_cb(const git_diff_delta *delta, const git_diff_hunk *hunk,
                        const git_diff_line *line, void *payload)
{
    (void)delta;
    (void)hunk;
    sbuf *b = payload;
    if (line->origin == GIT_DIFF_LINE_CONTEXT || line->origin == GIT_DIFF_LINE_ADDITION ||
        line->origin == GIT_DIFF_LINE_DELETION)
        sb_putn(b, &line->origin, 1);
    sb_putn(b, line->content, line->content_len);
    return 0;
}

int hone_review_show(char **out, const hone_review_opts *opts, const char *branch)
{
    git_repository *repo = NULL;
    git_commit *tip = NULL, *parent = NULL;
    git_tree *tree = NULL, *ptree = NULL;
    git_diff *diff = NULL;
    sbuf b = {0};
    char name[256], slot[64], backend[16];
    int rc = 0;
    *out = NULL;
    git_libgit2_init();
    TRY(open_branch(&repo, &tip, name, sizeof name, slot, backend, opts, branch));
    char when[64];
    time_t t = (time_t)git_commit_time(tip);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %z", localtime(&t));
    const git_signature *au = git_commit_author(tip);
    sb_printf(&b, "branch  %s\ncommit  %s\n", name, git_oid_tostr_s(git_commit_id(tip)));
    if (git_commit_parentcount(tip) > 0) {
        HONE_GIT_TRY(git_commit_parent(&parent, tip, 0), "review: cannot read the base of %s", name);
        sb_printf(&b, "base    %s\n", git_oid_tostr_s(git_commit_id(parent)));
    }
    sb_printf(&b, "author  %s <%s>\ndate    %s\n\n", au->name, au->email, when);
    sb_puts(&b, git_commit_message(tip));
    sb_puts(&b, "\n");
    HONE_GIT_TRY(git_commit_tree(&tree, tip), "review: cannot read the tree of %s", name);
    if (parent) HONE_GIT_TRY(git_commit_tree(&ptree, parent), "review: cannot read the base tree");
    git_diff_options dopts;
    git_diff_options_init(&dopts, GIT_DIFF_OPTIONS_VERSION);
    HONE_GIT_TRY(git_diff_tree_to_tree(&diff, repo, ptree, tree, &dopts),
                 "review: cannot diff %s against its base", name);
    HONE_GIT_TRY(git_diff_print(diff, GIT_DIFF_FORMAT_PATCH, diff_line_cb, &b),
                 "review: cannot print the diff of %s", name);
    rc = sb_finish(&b, out);
    b.s = NULL;
done:
    free(b.s);
    git_diff_free(diff);
    git_tree_free(ptree);
    git_tree_free(tree);
    git_commit_free(parent);
    git_commit_free(tip);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}

/* The bytes of kernels/<backend>/<slot>.<suffix> on the branch (NUL-terminated) into *out. */
static int read_branch_file(char **out, size_t *len, char slot[64], char backend[16], const hone_review_opts *opts,
                            const char *branch, int evidence)
{
    git_repository *repo = NULL;
    git_commit *tip = NULL;
    git_blob *blob = NULL;
    char name[256], kpath[128];
    int rc = 0;
    *out = NULL;
    *len = 0;
    git_libgit2_init();
    TRY(open_branch(&repo, &tip, name, sizeof name, slot, backend, opts, branch));
    snprintf(kpath, sizeof kpath, "kernels/%s/%s.%s", backend, slot, evidence ? "evidence.json" : kernel_ext(backend));
    git_oid id;
    if ((rc = blob_at(&id, tip, kpath)) != 0) {
        if (rc == 1) rc = hone_error_set(HONE_EINVAL, "review: branch %s has no %s", name, kpath);
        goto done;
    }
    HONE_GIT_TRY(git_blob_lookup(&blob, repo, &id), "review: cannot read %s on %s", kpath, name);
    size_t n = (size_t)git_blob_rawsize(blob);
    char *s = malloc(n + 1);
    if (!s) { rc = hone_error_set(HONE_ENOMEM, "out of memory"); goto done; }
    memcpy(s, git_blob_rawcontent(blob), n);
    s[n] = 0;
    *out = s;
    *len = n;
done:
    git_blob_free(blob);
    git_commit_free(tip);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}

int hone_review_read_candidate(char **out, size_t *len, char slot[64], char backend[16],
                               const hone_review_opts *opts, const char *branch)
{
    return read_branch_file(out, len, slot, backend, opts, branch, 0);
}

int hone_review_read_evidence(char **out, const hone_review_opts *opts, const char *branch)
{
    char slot[64], backend[16];
    size_t len;
    return read_branch_file(out, &len, slot, backend, opts, branch, 1);
}

int hone_review_delete(const hone_review_opts *opts, const char *branch)
{
    git_repository *repo = NULL;
    git_reference *ref = NULL;
    char name[256], slot[64], backend[16], hash[80];
    int rc = 0;
    git_libgit2_init();
    TRY(parse_branch(branch, name, sizeof name, slot, backend, hash));
    TRY(open_repo(&repo, opts));
    HONE_GIT_TRY(git_branch_lookup(&ref, repo, name, GIT_BRANCH_LOCAL), "review: no branch %s in '%s'",
                 name, repo_path(opts));
    if (git_branch_is_checked_out(ref) == 1) {
        rc = hone_error_set(HONE_EINVAL, "review: %s is checked out; not deleted", name);
        goto done;
    }
    /* The ref (and its reflog) only: hone/ branches carry no branch.<name> config. Not
     * git_branch_delete, whose config clean-up leaks PCRE2 match data in libgit2 1.5
     * (fixed upstream by libgit2/libgit2#6382). */
    HONE_GIT_TRY(git_reference_delete(ref), "review: cannot delete %s", name);
done:
    git_reference_free(ref);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}

/* ---- shared with review_push.c and review_pr.c (review_git.h) -------------------------------- */

int hone_review_open_repo(git_repository **out, const hone_review_opts *opts) { return open_repo(out, opts); }

const char *hone_review_repo_path(const hone_review_opts *opts) { return repo_path(opts); }

int hone_review_parse_branch(const char *branch, char *shortname, size_t cap, char slot[64],
                             char backend[16], char hash[80])
{
    return parse_branch(branch, shortname, cap, slot, backend, hash);
}

int hone_review_resolve_base(git_commit **out, git_repository *repo, const hone_review_opts *opts)
{
    return resolve_base(out, repo, opts);
}

void hone_review_trailer(const char *message, const char *key, char *buf, size_t cap)
{
    trailer_get(message, key, buf, cap);
}

void hone_review_kernel_path(char *buf, size_t cap, const char *slot, const char *backend)
{
    snprintf(buf, cap, "kernels/%s/%s.%s", backend, slot, kernel_ext(backend));
}

void hone_review_evidence_path(char *buf, size_t cap, const char *slot, const char *backend)
{
    snprintf(buf, cap, "kernels/%s/%s.evidence.json", backend, slot);
}

int hone_review_ref_create(git_reference **out, git_repository *repo, const char *name, const git_oid *id,
                           int force, const char *log)
{
    int grc = git_reference_create(out, repo, name, id, force, log);
    for (int attempt = 1; grc == GIT_ELOCKED && attempt < 50; attempt++) {
        struct timespec pause = {0, 2000000L * attempt}; /* 2 ms, 4 ms, ... : ~2.5 s in all */
        nanosleep(&pause, NULL);
        grc = git_reference_create(out, repo, name, id, force, log);
    }
    return grc;
}
