/* Approved CPU kernels at start-up: compile DIR/cpu/<slot>.c through the one CPU compile path
 * (candidates/compile.h), match the object's hash with the evidence beside it, dlopen it, check it
 * against the shipped baseline on random inputs of the model's shapes, install it in the slot
 * table, or refuse it with one log line and keep the baseline. */
#include "kernel_loader.h"
#include "verify.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "candidates/compile.h"
#include "engine/backend.h"
#include "engine/dtype.h"
#include "engine/error.h"
#include "engine/file.h"

#ifndef HONE_SOURCE_DIR
#define HONE_SOURCE_DIR "."
#endif

struct hone_kernel_loader {
    void *handle[HONE_SLOT_MAX];          /* dlopen handles of installed kernels */
    hone_kernel_state state[HONE_SLOT_MAX];
    char *detail[HONE_SLOT_MAX];          /* refusal reason / shared object path */
};

/* ---- files ------------------------------------------------------------------------------------ */

/* Reads a whole file; 1 if it does not exist, 0 on success, < 0 on other errors. */
static int slurp(const char *path, char **out, size_t *len)
{
    int rc = hone_file_read(path, out, len);
    return rc == HONE_EIO && !*out && errno == ENOENT ? 1 : rc;
}

static void cache_dir(char *buf, size_t cap, const hone_kernel_loader_opts *o)
{
    const char *e;
    if (o && o->cache_dir) snprintf(buf, cap, "%s", o->cache_dir);
    else if ((e = getenv("HONE_KERNEL_CACHE")) && *e) snprintf(buf, cap, "%s", e);
    else if ((e = getenv("XDG_CACHE_HOME")) && *e) snprintf(buf, cap, "%s/hone/kernels", e);
    else if ((e = getenv("HOME")) && *e) snprintf(buf, cap, "%s/.cache/hone/kernels", e);
    else snprintf(buf, cap, "/tmp/hone-kernels-%ld", (long)getuid());
}

static const char *source_dir(const hone_kernel_loader_opts *o)
{
    return o && o->source_dir ? o->source_dir : HONE_SOURCE_DIR;
}

int hone_kernel_loader_serve(hone_kernel_loader **out, hone_backend *be, const hone_model *m, const char *dir,
                             int quiet)
{
    if (!dir) return 0;
    hone_slot_table *slots = hone_backend_slots(be);
    if (!slots) {
        if (!quiet)
            fprintf(stderr, "hone: --kernels: only CPU kernels are loaded at present; %s keeps its own\n",
                    hone_backend_describe(be));
        return 0;
    }
    hone_kernel_loader_opts ko = HONE_KERNEL_LOADER_OPTS_INIT;
    ko.kernels_dir = dir;
    ko.model = m;
    ko.quiet = quiet;
    return hone_kernel_loader_new(out, slots, &ko);
}

int hone_kernel_loader_source(char *buf, size_t cap, const char *kernels_dir, const char *source_dir,
                              const char *slot)
{
    if (kernels_dir) {
        snprintf(buf, cap, "%s/cpu/%s.c", kernels_dir, slot);
        if (access(buf, R_OK) == 0) return 1;
    }
    snprintf(buf, cap, "%s/kernels/cpu/%s.c", source_dir ? source_dir : HONE_SOURCE_DIR, slot);
    return 0;
}

/* ---- compile ------------------------------------------------------------------------------------ */

static int compile_cached(hone_compile_cpu_result *r, char *so_path, size_t cap, const char *src_path,
                          const hone_kernel_loader_opts *o)
{
    char dir[4096];
    cache_dir(dir, sizeof dir, o);
    hone_compile_cpu_opts co = HONE_COMPILE_CPU_OPTS_INIT;
    co.src_root = source_dir(o);
    return hone_compile_cpu_cached(r, so_path, cap, src_path, dir, &co);
}

int hone_kernel_loader_compile(char *so_path, size_t cap, const char *src_path,
                               const hone_kernel_loader_opts *opts)
{
    hone_compile_cpu_result r;
    int rc = compile_cached(&r, so_path, cap, src_path, opts);
    hone_compile_cpu_result_clear(&r);
    return rc;
}

/* Served = vetted: the object's hash against candidate.so_hash of the evidence the review commit
 * put beside the kernel (DIR/cpu/<slot>.evidence.json), and the contract revision it was judged
 * against (slot_rev, 1 when the evidence predates the field) against slot id's now. 0 when both
 * match or no hash was recorded (no evidence file, or evidence from before the guard recorded
 * it); else an error saying why. */
static int check_evidence(const char *kernel_path, const char *so_hash, hone_slot_id id)
{
    char ev_path[4300];
    size_t n = strlen(kernel_path);
    if (n < 2 || snprintf(ev_path, sizeof ev_path, "%.*s.evidence.json", (int)(n - 2), kernel_path) >= (int)sizeof ev_path)
        return 0;
    char *txt = NULL;
    if (hone_file_read(ev_path, &txt, NULL) != 0) return 0; /* no evidence: nothing to match */
    cJSON *j = cJSON_Parse(txt);
    free(txt);
    if (!j) return hone_error_set(HONE_EFORMAT, "its evidence %s is not JSON", ev_path);
    const cJSON *h = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "candidate"), "so_hash");
    const cJSON *rv = cJSON_GetObjectItem(j, "slot_rev");
    int rc = 0, rev = cJSON_IsNumber(rv) ? rv->valueint : 1;
    if (rv && !cJSON_IsNumber(rv))
        rc = hone_error_set(HONE_EFORMAT, "its evidence %s has a slot_rev that is not a number", ev_path);
    else if (rev != hone_slots_rev(id)) {
        const char *why = hone_slots_desc(id)->rev_why;
        rc = hone_error_set(HONE_EFORMAT,
                            "it was vetted against revision %d of the %s contract, which is now at "
                            "revision %d (engine/slots.h%s%s): tune it again", rev, hone_slots_name(id),
                            hone_slots_rev(id), why ? "; " : "", why ? why : "");
    } else if (cJSON_IsString(h) && strcmp(h->valuestring, so_hash) != 0)
        rc = hone_error_set(HONE_EFORMAT,
                            "the compiled object is not the one the guard vetted: sha256 %.16s here, "
                            "%.16s in %s (another compiler, flags or -march?)", so_hash, h->valuestring, ev_path);
    else if (h && !cJSON_IsString(h) && !cJSON_IsNull(h))
        rc = hone_error_set(HONE_EFORMAT, "its evidence %s has a candidate.so_hash that is not a string", ev_path);
    cJSON_Delete(j);
    return rc;
}

/* ---- the self-check ------------------------------------------------------------------------ */

/* 0 when cand is within tolerance of base everywhere (exact: the same bits, any NaN matching any
 * NaN); else an error naming the first element. */
static int compare_outputs(const char *desc, int64_t n, const float *cand, const float *base, int exact)
{
    for (int64_t i = 0; exact && i < n; i++) /* a NaN's sign and payload carry no meaning */
        if (memcmp(&cand[i], &base[i], sizeof *cand) && !(isnan(cand[i]) && isnan(base[i])))
            return hone_error_set(HONE_EINVAL, "%s: output[%lld] = %.9g, baseline %.9g (not the same bits)",
                                  desc, (long long)i, cand[i], base[i]);
    double ss = 0.0;
    int64_t nf = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(base[i])) { ss += (double)base[i] * base[i]; nf++; }
    double rms = nf ? sqrt(ss / (double)nf) : 0.0;
    const double rtol = 1e-4;
    for (int64_t i = 0; i < n; i++) {
        double b = base[i], x = cand[i];
        if (!isfinite(b)) continue;
        if (isnan(x))
            return hone_error_set(HONE_EINVAL, "%s: output[%lld] is NaN (not written?), baseline %.9g",
                                  desc, (long long)i, b);
        double tol = rtol * (fabs(b) + rms) + 1e-30;
        if (!(fabs(x - b) <= tol))
            return hone_error_set(HONE_EINVAL, "%s: output[%lld] = %.9g, baseline %.9g (|diff| %.3g > %.3g)",
                                  desc, (long long)i, x, b, fabs(x - b), tol);
    }
    return 0;
}

/* One call of fn into out (NaN first; an in-place output starts as its input). */
static void call_into(const hone_slot_desc *d, const hone_slot_shape *s, void *fn, void *const *in,
                      float *out, int64_t out_n, int out_arg, float *scratch, int nth)
{
    if (d->args[out_arg].role == HONE_SLOT_ARG_INOUT) memcpy(out, in[out_arg], (size_t)out_n * 4);
    else for (int64_t i = 0; i < out_n; i++) out[i] = NAN;
    hone_slot_value v[HONE_SLOT_MAX_ARGS];
    hone_slots_values(d, s, (const void *const *)in, out, scratch, v);
    for (int ith = 0; ith < nth; ith++) d->invoke(fn, v, ith, nth);
    if (d->finish) d->finish(v); /* the caller's part after the shares */
}

/* Checks fn on one shape: inputs by the descriptor's roles, against the baseline, and the
 * same work in 3 shares against one. */
static int check_shape(const hone_slot_desc *d, void *fn, const hone_slot_shape *s, uint64_t *st,
                       int exact)
{
    void *in[HONE_SLOT_MAX_ARGS] = {NULL};
    float *ob = NULL, *oc = NULL, *os = NULL, *scratch = NULL;
    int out_arg = hone_slots_out_arg(d), rc = 0;
    int64_t out_n = hone_slots_arg_elems(d, out_arg, s), scratch_n = 1;
    char desc[160];
    hone_slots_shape_text(d, s, desc, (int)sizeof desc);
    for (int a = 0; a < d->n_args; a++) {
        if (d->args[a].role == HONE_SLOT_ARG_SCRATCH) scratch_n = hone_slots_arg_elems(d, a, s);
        if (!hone_slots_arg_is_input(d->args[a].role)) continue;
        if (!(in[a] = malloc((size_t)hone_slots_arg_bytes(d, a, s) + 64))) goto oom;
    }
    hone_slots_fill_inputs(d, s, in, st);
    ob = malloc((size_t)out_n * 4);
    oc = malloc((size_t)out_n * 4);
    os = malloc((size_t)out_n * 4);
    scratch = malloc((size_t)scratch_n * 4);
    if (!ob || !oc || !os || !scratch) goto oom;
    call_into(d, s, d->cpu_baseline, in, ob, out_n, out_arg, scratch, 1);
    call_into(d, s, fn, in, oc, out_n, out_arg, scratch, 1);
    if ((rc = compare_outputs(desc, out_n, oc, ob, exact))) goto done;
    call_into(d, s, fn, in, os, out_n, out_arg, scratch, 3);
    for (int64_t i = 0; i < out_n; i++)
        if (memcmp(&os[i], &oc[i], sizeof *os)) {
            rc = hone_error_set(HONE_EINVAL, "%s: output[%lld] is %.9g in 3 shares but %.9g in one: "
                                "the result depends on the thread split", desc, (long long)i, os[i], oc[i]);
            break;
        }
    goto done;
oom:
    rc = hone_error_set(HONE_ENOMEM, "out of memory for the self-check of %s", desc);
done:
    for (int a = 0; a < d->n_args; a++) free(in[a]);
    free(ob);
    free(oc);
    free(os);
    free(scratch);
    return rc;
}

int hone_kernel_loader_check(int id, void *fn, const hone_kernel_loader_opts *opts)
{
    const hone_slot_desc *d = hone_slots_desc(id);
    if (!d || !fn || !d->shapes || !d->cpu_baseline)
        return hone_error_set(HONE_EINVAL, "self-check: bad slot or function");
    hone_slot_shape *shapes = malloc(sizeof *shapes * HONE_SLOT_MAX_SHAPES);
    if (!shapes) return hone_error_set(HONE_ENOMEM, "out of memory");
    int n = d->shapes(d, opts ? opts->model : NULL, shapes, HONE_SLOT_MAX_SHAPES), rc = 0;
    uint64_t st = 0x9e3779b97f4a7c15ull ^ (uint64_t)id;
    for (int i = 0; i < n && !rc; i++) rc = check_shape(d, fn, &shapes[i], &st, opts && opts->exact);
    free(shapes);
    return rc;
}

/* ---- the loader ---------------------------------------------------------------------------- */

static int set_detail(hone_kernel_loader *l, hone_slot_id id, const char *text)
{
    free(l->detail[id]);
    l->detail[id] = strdup(text ? text : "");
    return l->detail[id] ? 0 : hone_error_set(HONE_ENOMEM, "out of memory");
}

static int refuse(hone_kernel_loader *l, hone_slot_id id, const char *path, const char *reason,
                  const char *full, const hone_kernel_loader_opts *o)
{
    l->state[id] = HONE_KERNEL_REFUSED;
    size_t pl = strlen(path);
    if (!strncmp(reason, path, pl) && reason[pl] == ' ') reason += pl + 1; /* path said once */
    if (!o->quiet)
        fprintf(stderr, "hone: kernels: %s refused, the baseline serves: %s\n", path, reason);
    return set_detail(l, id, full ? full : reason);
}

/* Compiles, loads, checks and installs one kernel file; refusals are not errors. */
static int load_one(hone_kernel_loader *l, hone_slot_table *t, hone_slot_id id, const char *path,
                    const hone_kernel_loader_opts *o)
{
    char so[4400], sym[96], reason[6000];
    void *h = NULL;
    hone_compile_cpu_result cr;
    int rc = compile_cached(&cr, so, sizeof so, path, o);
    if (rc == HONE_ENOMEM) { hone_compile_cpu_result_clear(&cr); return rc; }
    if (!rc && (rc = check_evidence(path, cr.so_hash, id))) hone_compile_cpu_result_clear(&cr);
    if (rc) {
        snprintf(reason, sizeof reason, "%s", hone_error_last());
        rc = refuse(l, id, path, reason, cr.log && *cr.log ? cr.log : NULL, o);
        hone_compile_cpu_result_clear(&cr);
        return rc;
    }
    hone_compile_cpu_result_clear(&cr);
    /* the guard's object verifier, before anything of the object is mapped into this process */
    hone_slots_cpu_symbol(id, sym, sizeof sym);
    hone_verify_result vr;
    if ((rc = hone_verify_object(&vr, so, sym, NULL)) != 0) return rc;
    if (!vr.ok) {
        snprintf(reason, sizeof reason, "the object verifier refused it: %s", vr.reason);
        return refuse(l, id, path, reason, NULL, o);
    }
    if (!(h = dlopen(so, RTLD_LOCAL | RTLD_NOW))) {
        snprintf(reason, sizeof reason, "cannot load %s: %s", so, dlerror());
        return refuse(l, id, path, reason, NULL, o);
    }
    void *fn = dlsym(h, sym);
    if (!fn) {
        snprintf(reason, sizeof reason, "it does not define %s (the slot's function)", sym);
        dlclose(h);
        return refuse(l, id, path, reason, NULL, o);
    }
    if ((rc = hone_kernel_loader_check(id, fn, o))) {
        snprintf(reason, sizeof reason, "self-check against the baseline failed: %s", hone_error_last());
        dlclose(h);
        return rc == HONE_ENOMEM ? rc : refuse(l, id, path, reason, NULL, o);
    }
    if ((rc = set_detail(l, id, so))) { dlclose(h); return rc; }
    hone_slots_set(t, id, fn);
    l->handle[id] = h;
    l->state[id] = HONE_KERNEL_INSTALLED;
    if (!o->quiet)
        fprintf(stderr, "hone: kernels: %s installed for %s (self-check against the baseline passed)\n",
                path, hone_slots_name(id));
    return 0;
}

int hone_kernel_loader_new(hone_kernel_loader **out, hone_slot_table *t,
                           const hone_kernel_loader_opts *opts)
{
    hone_kernel_loader_opts o = opts ? *opts : (hone_kernel_loader_opts)HONE_KERNEL_LOADER_OPTS_INIT;
    hone_slot_table saved = *t;
    hone_kernel_loader *l = NULL;
    char dir[4096], path[4200], base[4200];
    char *a = NULL, *b = NULL;
    DIR *d = NULL;
    int rc = 0;
    *out = NULL;
    if (!o.kernels_dir) return hone_error_set(HONE_EINVAL, "kernels: no directory given");
    struct stat st;
    if (stat(o.kernels_dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return hone_error_set(HONE_EINVAL, "kernels directory '%s' does not exist or is not a directory",
                              o.kernels_dir);
    if (!(l = calloc(1, sizeof *l))) return hone_error_set(HONE_ENOMEM, "out of memory");
    snprintf(dir, sizeof dir, "%s/cpu", o.kernels_dir);
    if (!(d = opendir(dir))) {
        if (errno == ENOENT) goto ok; /* no CPU kernels in it: the baselines serve */
        rc = hone_error_set(HONE_EIO, "kernels: cannot read %s: %s", dir, strerror(errno));
        goto done;
    }
    /* A .c file that names no slot would be silently unused: say so. */
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n < 3 || strcmp(e->d_name + n - 2, ".c")) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(n - 2), e->d_name);
        if (hone_slots_from_name(name) < 0 && !o.quiet)
            fprintf(stderr, "hone: kernels: %s/%s ignored: '%s' is not a slot\n", dir, e->d_name, name);
    }
    for (int i = 0; i < hone_slots_count(); i++) {
        hone_slot_id id = (hone_slot_id)i;
        size_t na, nb;
        snprintf(path, sizeof path, "%s/%s.c", dir, hone_slots_name(id));
        snprintf(base, sizeof base, "%s/kernels/cpu/%s.c", source_dir(&o), hone_slots_name(id));
        int ra = slurp(path, &a, &na);
        if (ra == 1) continue;
        if (ra < 0) {
            if (ra == HONE_ENOMEM) { rc = ra; goto done; }
            if ((rc = refuse(l, id, path, hone_error_last(), NULL, &o))) goto done;
            continue;
        }
        int rb = slurp(base, &b, &nb);
        if (rb == HONE_ENOMEM) { rc = rb; goto done; }
        int same = rb == 0 && na == nb && memcmp(a, b, na) == 0;
        free(a);
        free(b);
        a = b = NULL;
        if (same) continue; /* the shipped baseline: already serving */
        if ((rc = load_one(l, t, id, path, &o))) goto done;
    }
ok:
    *out = l;
    l = NULL;
done:
    if (d) closedir(d);
    free(a);
    free(b);
    if (rc) *t = saved;
    hone_kernel_loader_free(l);
    return rc;
}

void hone_kernel_loader_free(hone_kernel_loader *l)
{
    if (!l) return;
    for (int i = 0; i < hone_slots_count(); i++) {
        if (l->handle[i]) dlclose(l->handle[i]);
        free(l->detail[i]);
    }
    free(l);
}

int hone_kernel_loader_n_installed(const hone_kernel_loader *l)
{
    int n = 0;
    for (int i = 0; l && i < hone_slots_count(); i++) n += l->state[i] == HONE_KERNEL_INSTALLED;
    return n;
}

int hone_kernel_loader_n_refused(const hone_kernel_loader *l)
{
    int n = 0;
    for (int i = 0; l && i < hone_slots_count(); i++) n += l->state[i] == HONE_KERNEL_REFUSED;
    return n;
}

hone_kernel_state hone_kernel_loader_state(const hone_kernel_loader *l, hone_slot_id id)
{
    return l && (int)id >= 0 && (int)id < hone_slots_count() ? l->state[id] : HONE_KERNEL_BASELINE;
}

const char *hone_kernel_loader_detail(const hone_kernel_loader *l, hone_slot_id id)
{
    return l && (int)id >= 0 && (int)id < hone_slots_count() && l->detail[id] ? l->detail[id] : "";
}
