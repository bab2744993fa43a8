/* Pull-request text for a review branch, from the evidence it commits: what changed, the speed
 * (per shape where the evidence has it), parity, the machine, how to reproduce it, and where the
 * report's charts come from. Nothing here measures: every figure is read from the evidence. */
#include "review_pr.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <git2.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "candidates/store.h"
#include "engine/error.h"
#include "review_git.h"

#define TRY(expr)                                                                        \
    do {                                                                                 \
        if ((rc = (expr)) != 0) goto done;                                               \
    } while (0)

/* ---- reading the evidence ---------------------------------------------------------------------- */

static const cJSON *at(const cJSON *o, const char *k) { return o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL; }

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = at(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = at(o, k);
    return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

/* A Markdown cell: '|' escaped, line breaks as spaces. */
static void cell(FILE *f, const char *s)
{
    if (!s) { fputs("n/a", f); return; }
    for (; *s; s++) {
        if (*s == '|') fputs("\\|", f);
        else if ((unsigned char)*s < 0x20) fputc(' ', f);
        else fputc(*s, f);
    }
}

static void fnum(FILE *f, const char *fmt, double v)
{
    if (isfinite(v)) fprintf(f, fmt, v);
    else fputs("n/a", f);
}

static void row_num(FILE *f, const char *label, const char *fmt, double v)
{
    fprintf(f, "| %s | ", label);
    fnum(f, fmt, v);
    fputs(" |\n", f);
}

/* Any JSON value as a cell: integers as such, other numbers %.4g, strings as they are. */
static void jcell(FILE *f, const cJSON *v)
{
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d == floor(d) && fabs(d) < 1e15) fprintf(f, "%lld", (long long)d);
        else fprintf(f, "%.4g", d);
    } else if (cJSON_IsString(v)) cell(f, v->valuestring);
    else if (cJSON_IsBool(v)) fputs(cJSON_IsTrue(v) ? "yes" : "no", f);
    else fputs("n/a", f);
}

/* The per-shape rows of the evidence, if it has them: the first array of objects found under
 * speed, then at the top level (e.g. speed.per_shape = [{"shape": "576x576", "speedup": 1.3}]). */
static const cJSON *per_shape(const cJSON *root)
{
    const cJSON *where[2] = {at(root, "speed"), root};
    for (int w = 0; w < 2; w++) {
        const cJSON *it;
        cJSON_ArrayForEach(it, where[w])
            if (cJSON_IsArray(it) && cJSON_IsObject(cJSON_GetArrayItem(it, 0))) return it;
    }
    return NULL;
}

/* The rows as a table: the columns are the first row's keys. */
static void shape_table(FILE *f, const cJSON *rows)
{
    const cJSON *first = cJSON_GetArrayItem(rows, 0), *k, *row;
    fputs("|", f);
    cJSON_ArrayForEach(k, first) { fputc(' ', f); cell(f, k->string); fputs(" |", f); }
    fputs("\n|", f);
    cJSON_ArrayForEach(k, first) fputs("---|", f);
    fputc('\n', f);
    cJSON_ArrayForEach(row, rows) {
        fputs("|", f);
        cJSON_ArrayForEach(k, first) { fputc(' ', f); jcell(f, at(row, k->string)); fputs(" |", f); }
        fputc('\n', f);
    }
}

/* The text of path in tree (malloc'd, NUL-terminated); 1 when absent. */
static int blob_text(char **out, git_repository *repo, git_tree *tree, const char *path)
{
    git_tree_entry *e = NULL;
    git_blob *blob = NULL;
    int rc = 0;
    *out = NULL;
    int grc = git_tree_entry_bypath(&e, tree, path);
    if (grc == GIT_ENOTFOUND) return 1;
    HONE_GIT_TRY_AS(grc, "git_tree_entry_bypath(&e, tree, path)", "review pr: cannot look up %s", path);
    HONE_GIT_TRY(git_blob_lookup(&blob, repo, git_tree_entry_id(e)), "review pr: cannot read %s", path);
    size_t n = (size_t)git_blob_rawsize(blob);
    if (!(*out = malloc(n + 1))) { rc = hone_error_set(HONE_ENOMEM, "out of memory"); goto done; }
    memcpy(*out, git_blob_rawcontent(blob), n);
    (*out)[n] = 0;
done:
    git_blob_free(blob);
    git_tree_entry_free(e);
    return rc;
}

/* The guard's input seed, every digit: the evidence JSON holds it as a decimal string (exact);
 * older evidence as a double (exact below 2^53 only), with the Markdown table beside it
 * (| input seed | N |) as an integer. "" when none has it. */
static void seed_text(char *buf, size_t cap, const cJSON *ev, const char *md)
{
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(ev, "seed");
    buf[0] = 0;
    if (cJSON_IsString(js)) {
        char *end;
        long long s = strtoll(js->valuestring, &end, 10);
        if (end != js->valuestring && !*end) snprintf(buf, cap, "%lld", s);
        return;
    }
    const char *row = md ? strstr(md, "| input seed | ") : NULL;
    double v = num(ev, "seed");
    if (row) {
        char *end;
        long long s = strtoll(row + 15, &end, 10);
        if (end != row + 15 && (!isfinite(v) || fabs((double)s - v) <= fabs(v) * 1e-15)) {
            snprintf(buf, cap, "%lld", s);
            return;
        }
    }
    if (isfinite(v) && fabs(v) < 9007199254740992.0) snprintf(buf, cap, "%.0f", v);
}

/* ---- rendering ---------------------------------------------------------------------------------- */

/* "| path | +added | -removed |" for every file the tip changes against its base. */
static int changed_files(FILE *f, git_repository *repo, git_commit *tip, git_commit *parent, const char *name)
{
    git_tree *tree = NULL, *ptree = NULL;
    git_diff *diff = NULL;
    git_patch *patch = NULL;
    int rc = 0;
    HONE_GIT_TRY(git_commit_tree(&tree, tip), "review pr: cannot read the tree of %s", name);
    if (parent) HONE_GIT_TRY(git_commit_tree(&ptree, parent), "review pr: cannot read the base tree");
    HONE_GIT_TRY(git_diff_tree_to_tree(&diff, repo, ptree, tree, NULL), "review pr: cannot diff %s", name);
    fputs("| file | lines added | lines removed |\n|---|---|---|\n", f);
    for (size_t i = 0; i < git_diff_num_deltas(diff); i++) {
        size_t ctx = 0, add = 0, del = 0;
        HONE_GIT_TRY(git_patch_from_diff(&patch, diff, i), "review pr: cannot read the diff of %s", name);
        HONE_GIT_TRY(git_patch_line_stats(&ctx, &add, &del, patch), "review pr: cannot count lines");
        fputs("| `", f);
        cell(f, git_patch_get_delta(patch)->new_file.path);
        fprintf(f, "` | %zu | %zu |\n", add, del);
        git_patch_free(patch);
        patch = NULL;
    }
done:
    git_patch_free(patch);
    git_diff_free(diff);
    git_tree_free(ptree);
    git_tree_free(tree);
    return rc;
}

static void render_body(FILE *f, const cJSON *ev, const char *seed, const char *name, const char *slot, const char *backend,
                        const char *tip, const char *base, const char *kpath, const char *epath,
                        const char *remote_url)
{
    const cJSON *sp = at(ev, "speed"), *kp = at(ev, "kernel_parity"), *mp = at(ev, "model_parity");
    const char *model = str(ev, "model"), *device = str(ev, "device");

    fputs("## Speedup\n\n", f);
    fputs("Median speedup **", f);
    fnum(f, "%.3fx", num(sp, "speedup_median"));
    fputs("**", f);
    if (isfinite(num(sp, "ci_low")) && isfinite(num(sp, "ci_high"))) {
        fputs(" (", f);
        if (isfinite(num(sp, "ci_level"))) fprintf(f, "%g%% ", num(sp, "ci_level") * 100.0);
        fprintf(f, "CI %.3f .. %.3f)", num(sp, "ci_low"), num(sp, "ci_high"));
    }
    fputs(" over the incumbent, in interleaved A/B timing", f);
    if (isfinite(num(sp, "reps"))) fprintf(f, " of %.0f repetitions each", num(sp, "reps"));
    fputs("; the gate asks for ", f);
    fnum(f, "%.3fx", num(sp, "threshold"));
    fputs(".\n\n", f);
    const cJSON *rows = per_shape(ev);
    if (rows) {
        shape_table(f, rows);
    } else {
        /* one timing for all the shapes: the guard's speed gate */
        fputs("| shape | incumbent ns/call | candidate ns/call | speedup |\n|---|---|---|---|\n| ", f);
        cell(f, "the guard's timing case");
        const char *fmts[3] = {" | %.1f", " | %.1f", " | %.3fx"};
        double vals[3] = {num(sp, "incumbent_ns"), num(sp, "candidate_ns"), num(sp, "speedup_median")};
        for (int i = 0; i < 3; i++) {
            if (isfinite(vals[i])) fprintf(f, fmts[i], vals[i]);
            else fputs(" | n/a", f);
        }
        fputs(" |\n", f);
    }

    fputs("\n## Parity\n\n", f);
    const char *tier = str(kp, "tier");
    fputs("Tier **", f);
    cell(f, tier);
    fputs("**: ", f);
    fputs(tier && !strcmp(tier, "exact")
              ? "the candidate's outputs equal the incumbent's bit for bit on every test input.\n\n"
              : "the candidate is no further from the f64 oracle than the incumbent, plus the allowed slack.\n\n",
          f);
    fputs("| metric | value |\n|---|---|\n", f);
    row_num(f, "max abs error vs f64 oracle, candidate", "%.3e", num(kp, "candidate_max_abs_err"));
    row_num(f, "max abs error vs f64 oracle, incumbent", "%.3e", num(kp, "incumbent_max_abs_err"));
    row_num(f, "allowed slack", "%.3e", num(kp, "slack"));
    fputs("| shapes checked | ", f);
    cell(f, str(kp, "shapes"));
    fputs(" |\n", f);
    row_num(f, "model max abs delta-logit", "%.3e", num(mp, "max_abs_dlogit"));
    row_num(f, "model KL per position, mean", "%.3e", num(mp, "kl_mean"));
    row_num(f, "model KL per position, max", "%.3e", num(mp, "kl_max"));
    row_num(f, "argmax agreement", "%.2f%%", num(mp, "argmax_agreement") * 100.0);
    fputs("| parity prompt set | ", f);
    fnum(f, "%.0f prompts x ", num(mp, "prompts"));
    fnum(f, "%.0f steps", num(mp, "steps"));
    fputs(" |\n", f);

    fputs("\n## Machine\n\n", f);
    fputs("- device: ", f);
    cell(f, device);
    fputs("\n- model: ", f);
    cell(f, model);
    fprintf(f, "\n- input seed: %s", *seed ? seed : "n/a");
    fputs("\n- guard time: ", f);
    fnum(f, "%.1f s", num(ev, "guard_seconds"));
    fputs("\n", f);

    fputs("\n## How to reproduce\n\n```sh\n", f);
    if (remote_url) fprintf(f, "git fetch %s %s:%s\n", remote_url, name, name);
    fprintf(f, "hone review verify %s -m MODEL.gguf", name);
    if (*seed) fprintf(f, " -- --seed %s", seed);
    fprintf(f, "\n```\n\n`verify` re-runs the guard on this machine on the branch's `%s` (slot `%s`, "
               "backend `%s`), with the model the parity was measured on (`%s`); it exits 0 when the "
               "candidate passes.\n", kpath, slot, backend, model ? model : "unknown");

    fputs("\n## Report\n\n", f);
    fprintf(f, "```sh\nhone review show %s --report DIR\n```\n\nrenders this branch's charts (speed per "
               "shape, the timing distributions, parity) into DIR.\n", name);

    fputs("\n---\n", f);
    fprintf(f, "Branch `%s`, commit `%.12s` on base `%.12s`; evidence: `%s`.\n", name, tip, base, epath);
}

int hone_review_pr_render(hone_review_pr *out, const hone_review_opts *opts, const char *branch,
                          const char *remote_url)
{
    git_repository *repo = NULL;
    git_reference *ref = NULL;
    git_commit *tip = NULL, *parent = NULL;
    git_tree *tree = NULL;
    cJSON *ev = NULL;
    char *body = NULL, *evtext = NULL, *evmd = NULL;
    size_t body_len = 0;
    FILE *f = NULL;
    char name[256], slot[64], backend[16], hash[80], refname[300], kpath[128], epath[128];
    int rc = 0;
    memset(out, 0, sizeof *out);
    git_libgit2_init();
    TRY(hone_review_parse_branch(branch, name, sizeof name, slot, backend, hash));
    snprintf(refname, sizeof refname, "refs/heads/%s", name);
    hone_review_kernel_path(kpath, sizeof kpath, slot, backend);
    hone_review_evidence_path(epath, sizeof epath, slot, backend);
    TRY(hone_review_open_repo(&repo, opts));
    HONE_GIT_TRY(git_reference_lookup(&ref, repo, refname), "review pr: no branch %s in '%s'", name,
                 hone_review_repo_path(opts));
    HONE_GIT_TRY(git_reference_peel((git_object **)&tip, ref, GIT_OBJECT_COMMIT),
                 "review pr: %s does not point to a commit", name);
    if (git_commit_parentcount(tip) > 0)
        HONE_GIT_TRY(git_commit_parent(&parent, tip, 0), "review pr: cannot read the base of %s", name);
    HONE_GIT_TRY(git_commit_tree(&tree, tip), "review pr: cannot read the tree of %s", name);
    if ((rc = blob_text(&evtext, repo, tree, epath)) != 0) {
        if (rc == 1) rc = hone_error_set(HONE_EINVAL, "review pr: %s has no evidence file %s", name, epath);
        goto done;
    }
    char mpath[140], seed[32];
    snprintf(mpath, sizeof mpath, "%.*s.md", (int)(strlen(epath) - 5), epath); /* .json -> .md */
    if ((rc = blob_text(&evmd, repo, tree, mpath)) < 0) goto done;
    rc = 0;
    if (!(ev = cJSON_Parse(evtext)) || !cJSON_IsObject(ev)) {
        rc = hone_error_set(HONE_EINVAL, "review pr: %s on %s is not a JSON object", epath, name);
        goto done;
    }

    if (!(f = open_memstream(&body, &body_len))) {
        rc = hone_error_set(HONE_ENOMEM, "review pr: open_memstream: %s", strerror(errno));
        goto done;
    }
    const cJSON *cand = at(ev, "candidate");
    char tip_s[41], base_s[41] = "none";
    git_oid_tostr(tip_s, sizeof tip_s, git_commit_id(tip));
    if (parent) git_oid_tostr(base_s, sizeof base_s, git_commit_id(parent));
    fputs("## What changed\n\n", f);
    fprintf(f, "A new `%s` kernel for the `%s` backend replaces `%s`, proposed by Hone and accepted by its "
               "guard; its evidence is committed beside it.\n\n", slot, backend, kpath);
    fputs("- candidate: `", f);
    cell(f, str(cand, "hash"));
    fputs("`\n- origin: ", f);
    cell(f, str(cand, "origin_kind"));
    if (str(cand, "origin")) { fputs(" (", f); cell(f, str(cand, "origin")); fputs(")", f); }
    if (str(cand, "so_hash")) { fputs("\n- vetted object (sha256): `", f); cell(f, str(cand, "so_hash")); fputs("`", f); }
    fputs("\n\n", f);
    TRY(changed_files(f, repo, tip, parent, name));
    fputc('\n', f);
    seed_text(seed, sizeof seed, ev, evmd);
    render_body(f, ev, seed, name, slot, backend, tip_s, base_s, kpath, epath, remote_url);
    if (fclose(f) != 0) { f = NULL; rc = hone_error_set(HONE_ENOMEM, "review pr: out of memory"); goto done; }
    f = NULL;
    out->title = strdup(git_commit_summary(tip));
    out->body = body;
    body = NULL;
    if (!out->title) { hone_review_pr_clear(out); rc = hone_error_set(HONE_ENOMEM, "out of memory"); }
done:
    if (f) fclose(f);
    free(body);
    free(evtext);
    free(evmd);
    cJSON_Delete(ev);
    git_tree_free(tree);
    git_commit_free(parent);
    git_commit_free(tip);
    git_reference_free(ref);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}

int hone_review_pr_write(char *path, size_t cap, const hone_review_opts *opts, const char *branch,
                         const hone_review_pr *pr, const char *dir)
{
    git_repository *repo = NULL;
    char name[256], slot[64], backend[16], hash[80], d[4096], p[4400];
    int rc = 0;
    if (cap) path[0] = 0;
    git_libgit2_init();
    TRY(hone_review_parse_branch(branch, name, sizeof name, slot, backend, hash));
    if (dir) {
        snprintf(d, sizeof d, "%s", dir);
    } else { /* <git dir>/hone/pr: beside the refs, in a bare repository too, never in the work tree */
        TRY(hone_review_open_repo(&repo, opts));
        snprintf(d, sizeof d, "%shone", git_repository_path(repo));
        if (mkdir(d, 0755) && errno != EEXIST) {
            rc = hone_error_set(HONE_EIO, "review pr: cannot create %s: %s", d, strerror(errno));
            goto done;
        }
        snprintf(d, sizeof d, "%shone/pr", git_repository_path(repo));
    }
    if (mkdir(d, 0755) && errno != EEXIST) {
        rc = hone_error_set(HONE_EIO, "review pr: cannot create %s: %s", d, strerror(errno));
        goto done;
    }
    /* one flat name per branch: <slot>.<backend>.<hash> ('.' is in no slot, backend or hash) */
    snprintf(p, sizeof p, "%s/%s.%s.%s.title", d, slot, backend, hash);
    size_t tl = strlen(pr->title);
    char *t = malloc(tl + 2);
    if (!t) { rc = hone_error_set(HONE_ENOMEM, "out of memory"); goto done; }
    memcpy(t, pr->title, tl);
    t[tl] = '\n';
    t[tl + 1] = 0;
    rc = hone_store_atomic_write(p, t, tl + 1);
    free(t);
    if (rc) goto done;
    snprintf(p, sizeof p, "%s/%s.%s.%s.md", d, slot, backend, hash);
    TRY(hone_store_atomic_write(p, pr->body, strlen(pr->body)));
    snprintf(path, cap, "%s", p);
done:
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}

void hone_review_pr_clear(hone_review_pr *pr)
{
    if (!pr) return;
    free(pr->title);
    free(pr->body);
    pr->title = pr->body = NULL;
}
