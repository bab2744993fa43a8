/* Approved CPU kernels at start-up: compile DIR/cpu/<slot>.c through the one CPU compile path
 * (candidates/compile.h), match the object's hash with the evidence beside it, dlopen it, check it
 * against the shipped baseline on random inputs of the model's shapes, install it in the slot
 * table, or refuse it with one log line and keep the baseline. */
#include "kernel_loader.h"

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
#include "engine/dtype.h"
#include "engine/error.h"
#include "engine/file.h"

#ifndef HONE_SOURCE_DIR
#define HONE_SOURCE_DIR "."
#endif

struct hone_kernel_loader {
    void *handle[HONE_SLOT_COUNT];          /* dlopen handles of installed kernels */
    hone_kernel_state state[HONE_SLOT_COUNT];
    char *detail[HONE_SLOT_COUNT];          /* refusal reason / shared object path */
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
 * put beside the kernel (DIR/cpu/<slot>.evidence.json). 0 when it matches or no hash was recorded
 * (no evidence file, or evidence from before the guard recorded it); else an error saying why. */
static int check_evidence(const char *kernel_path, const char *so_hash)
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
    int rc = 0;
    if (cJSON_IsString(h) && strcmp(h->valuestring, so_hash) != 0)
        rc = hone_error_set(HONE_EFORMAT,
                            "the compiled object is not the one the guard vetted: sha256 %.16s here, "
                            "%.16s in %s (another compiler, flags or -march?)", so_hash, h->valuestring, ev_path);
    else if (h && !cJSON_IsString(h) && !cJSON_IsNull(h))
        rc = hone_error_set(HONE_EFORMAT, "its evidence %s has a candidate.so_hash that is not a string", ev_path);
    cJSON_Delete(j);
    return rc;
}

/* ---- the self-check ------------------------------------------------------------------------ */

typedef struct {
    int64_t dim, ffn, n_heads, n_kv_heads, head_dim, n_rot;
    float rope_base, eps;
    int neox;
} shapes;

static shapes model_shapes(const hone_kernel_loader_opts *o)
{
    shapes s = {64, 160, 4, 2, 16, 16, 10000.0f, 1e-5f, 0};
    if (o && o->model) {
        const hone_hparams *hp = hone_model_hparams(o->model);
        s.dim = hp->dim;
        s.ffn = hp->ffn;
        s.n_heads = hp->n_heads;
        s.n_kv_heads = hp->n_kv_heads;
        s.head_dim = hp->head_dim;
        s.n_rot = hp->n_rot;
        s.rope_base = hp->rope_base;
        s.eps = hp->norm_eps;
        s.neox = hp->rope_neox;
    }
    return s;
}

typedef struct { uint64_t s; } rng;

static uint64_t rng_next(rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return r->s;
}

static float rng_uniform(rng *r) /* [-1, 1) */
{
    return (float)((double)(rng_next(r) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/* One slot call's inputs; unused fields stay 0. */
typedef struct {
    hone_slot_id id;
    int32_t dtype;
    int64_t n, rows, cols, heads, kv_heads, head_dim, n_rot, n_kv, block_size, pos0;
    float eps, base, scale;
    int32_t neox;
    void *W;
    float *x, *w, *a, *b, *k, *v, *scratch;
    int32_t *ids, *pos, *table;
    int64_t out_n;
    char desc[160];
} kcase;

static void kcase_free(kcase *c)
{
    free(c->W); free(c->x); free(c->w); free(c->a); free(c->b); free(c->k); free(c->v);
    free(c->scratch); free(c->ids); free(c->pos); free(c->table);
}

static float *rand_f32(rng *r, int64_t n, float scale)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    if (p)
        for (int64_t i = 0; i < n; i++) p[i] = rng_uniform(r) * scale;
    return p;
}

/* Random weights W[rows][cols] of dtype: values in [-1, 1], small block scales. */
static void *rand_weights(rng *r, int32_t dt, int64_t rows, int64_t cols)
{
    size_t bytes = (size_t)(rows * hone_dtype_row_bytes(dt, cols));
    uint8_t *p = malloc(bytes ? bytes : 1);
    if (!p) return NULL;
    int64_t nv = rows * cols, nb = nv / HONE_QK;
    switch (dt) {
    case HONE_DTYPE_F32:
        for (int64_t i = 0; i < nv; i++) ((float *)p)[i] = rng_uniform(r);
        break;
    case HONE_DTYPE_F16:
        for (int64_t i = 0; i < nv; i++) ((uint16_t *)p)[i] = hone_f32_to_fp16(rng_uniform(r));
        break;
    case HONE_DTYPE_BF16:
        for (int64_t i = 0; i < nv; i++) ((uint16_t *)p)[i] = hone_f32_to_bf16(rng_uniform(r));
        break;
    case HONE_DTYPE_Q8_0:
        for (int64_t i = 0; i < nb; i++) {
            hone_block_q8_0 *bl = (hone_block_q8_0 *)p + i;
            bl->d = hone_f32_to_fp16(0.004f + 0.004f * fabsf(rng_uniform(r)));
            for (int j = 0; j < 32; j++) bl->qs[j] = (int8_t)((int)(rng_next(r) % 255) - 127);
        }
        break;
    case HONE_DTYPE_Q4_0:
        for (int64_t i = 0; i < nb; i++) {
            hone_block_q4_0 *bl = (hone_block_q4_0 *)p + i;
            bl->d = hone_f32_to_fp16(0.05f + 0.05f * fabsf(rng_uniform(r)));
            for (int j = 0; j < 16; j++) bl->qs[j] = (uint8_t)rng_next(r);
        }
        break;
    case HONE_DTYPE_Q4_1:
        for (int64_t i = 0; i < nb; i++) {
            hone_block_q4_1 *bl = (hone_block_q4_1 *)p + i;
            bl->d = hone_f32_to_fp16(0.05f + 0.05f * fabsf(rng_uniform(r)));
            bl->m = hone_f32_to_fp16(-0.5f * fabsf(rng_uniform(r)));
            for (int j = 0; j < 16; j++) bl->qs[j] = (uint8_t)rng_next(r);
        }
        break;
    default:
        memset(p, 0, bytes);
    }
    return p;
}

static void call_slot(const kcase *c, void *fn, float *out, int ith, int nth)
{
    switch (c->id) {
    case HONE_SLOT_EMBED:
        ((hone_slot_embed_fn)fn)(out, c->W, c->dtype, c->ids, c->n, c->cols, ith, nth);
        break;
    case HONE_SLOT_RMSNORM:
        ((hone_slot_rmsnorm_fn)fn)(out, c->x, c->w, c->n, c->cols, c->eps, ith, nth);
        break;
    case HONE_SLOT_ROPE:
        ((hone_slot_rope_fn)fn)(out, c->pos, c->n, c->heads, c->head_dim, c->n_rot, c->base, c->neox,
                                ith, nth);
        break;
    case HONE_SLOT_ATTENTION_DECODE:
        ((hone_slot_attention_decode_fn)fn)(out, c->x, c->k, c->v, c->table, c->n_kv, c->block_size,
                                            c->heads, c->kv_heads, c->head_dim, c->scale, c->scratch,
                                            ith, nth);
        break;
    case HONE_SLOT_ATTENTION_PREFILL:
        ((hone_slot_attention_prefill_fn)fn)(out, c->x, c->k, c->v, c->table, c->n, c->pos0,
                                             c->block_size, c->heads, c->kv_heads, c->head_dim,
                                             c->scale, c->scratch, ith, nth);
        break;
    case HONE_SLOT_SWIGLU:
        ((hone_slot_swiglu_fn)fn)(out, c->a, c->b, c->n, ith, nth);
        break;
    case HONE_SLOT_ADD:
        ((hone_slot_add_fn)fn)(out, c->a, c->b, c->n, ith, nth);
        break;
    default:
        if (c->id >= HONE_SLOT_MATVEC_F32 && c->id <= HONE_SLOT_MATVEC_Q4_1)
            ((hone_slot_matvec_fn)fn)(out, c->W, c->x, c->rows, c->cols, ith, nth);
        else if (c->id >= HONE_SLOT_MATMUL_F32 && c->id <= HONE_SLOT_MATMUL_Q4_1)
            ((hone_slot_matmul_fn)fn)(out, c->W, c->x, c->n, c->rows, c->cols, ith, nth);
        break;
    }
}

/* Output before the call: the input for in-place rope, NaN poison otherwise. */
static void prepare(const kcase *c, float *out)
{
    if (c->id == HONE_SLOT_ROPE) memcpy(out, c->x, (size_t)c->out_n * sizeof *out);
    else
        for (int64_t i = 0; i < c->out_n; i++) out[i] = NAN;
}

static const int32_t mat_dtypes[6] = {HONE_DTYPE_F32, HONE_DTYPE_F16, HONE_DTYPE_BF16,
                                      HONE_DTYPE_Q8_0, HONE_DTYPE_Q4_0, HONE_DTYPE_Q4_1};

static int32_t slot_dtype(hone_slot_id id)
{
    for (int i = 0; i < 6; i++)
        if (hone_slots_matvec_id(mat_dtypes[i]) == (int)id || hone_slots_matmul_id(mat_dtypes[i]) == (int)id)
            return mat_dtypes[i];
    return -1;
}

/* Builds case number `which` of slot id; 0 ok, 1 no such case (end of the list), < 0 error. */
static int make_case(kcase *c, hone_slot_id id, int which, const shapes *s, rng *r)
{
    memset(c, 0, sizeof *c);
    c->id = id;
    const char *name = hone_slots_name(id);
    int32_t dt = slot_dtype(id);
    if (dt >= 0) {
        int64_t bs = hone_dtype_block_size(dt);
        int64_t cap_rows = 48;
        int64_t shp[5][2] = {{s->ffn < cap_rows ? s->ffn : cap_rows, s->dim},
                             {s->dim < cap_rows ? s->dim : cap_rows, s->ffn},
                             {1, 32},
                             {7, 96},
                             {5, 35}};
        int is_mm = id >= HONE_SLOT_MATMUL_F32;
        int n_shapes = 5;
        if (which >= n_shapes + is_mm) return 1;
        int si = which < n_shapes ? which : 0;
        if (shp[si][1] % bs) { /* block formats need whole blocks: an odd shape is not in scope */
            shp[si][1] = 64;
        }
        c->dtype = dt;
        c->rows = shp[si][0];
        c->cols = shp[si][1];
        c->n = is_mm ? (which < n_shapes ? 5 : 1) : 1;
        c->W = rand_weights(r, dt, c->rows, c->cols);
        c->x = rand_f32(r, c->n * c->cols, 1.0f);
        c->out_n = c->n * c->rows;
        if (is_mm)
            snprintf(c->desc, sizeof c->desc, "%s n=%lld rows=%lld cols=%lld", name, (long long)c->n,
                     (long long)c->rows, (long long)c->cols);
        else
            snprintf(c->desc, sizeof c->desc, "%s rows=%lld cols=%lld", name, (long long)c->rows,
                     (long long)c->cols);
        return c->W && c->x ? 0 : hone_error_set(HONE_ENOMEM, "out of memory");
    }
    switch (id) {
    case HONE_SLOT_EMBED: {
        if (which >= 6) return 1;
        c->dtype = mat_dtypes[which];
        c->cols = s->dim % 32 ? 64 : s->dim;
        c->n = 5;
        int64_t vocab = 37;
        c->W = rand_weights(r, c->dtype, vocab, c->cols);
        c->ids = malloc(5 * sizeof *c->ids);
        if (c->ids)
            for (int i = 0; i < 5; i++) c->ids[i] = (int32_t)(rng_next(r) % (uint64_t)vocab);
        c->out_n = c->n * c->cols;
        snprintf(c->desc, sizeof c->desc, "embed %s n=5 dim=%lld", hone_dtype_name(c->dtype),
                 (long long)c->cols);
        return c->W && c->ids ? 0 : hone_error_set(HONE_ENOMEM, "out of memory");
    }
    case HONE_SLOT_RMSNORM:
        if (which >= 2) return 1;
        c->n = which ? 2 : 3;
        c->cols = which ? 35 : s->dim;
        c->eps = s->eps;
        c->x = rand_f32(r, c->n * c->cols, 2.0f);
        c->w = rand_f32(r, c->cols, 1.0f);
        c->out_n = c->n * c->cols;
        snprintf(c->desc, sizeof c->desc, "rmsnorm n=%lld dim=%lld", (long long)c->n, (long long)c->cols);
        return c->x && c->w ? 0 : hone_error_set(HONE_ENOMEM, "out of memory");
    case HONE_SLOT_ROPE:
        if (which >= 3) return 1;
        c->n = which == 2 ? 2 : 3;
        c->heads = which == 2 ? 3 : s->n_heads;
        c->head_dim = which == 2 ? 10 : s->head_dim;
        c->n_rot = which == 2 ? 6 : s->n_rot;
        c->neox = which == 1 ? !s->neox : s->neox;
        c->base = s->rope_base;
        c->x = rand_f32(r, c->n * c->heads * c->head_dim, 1.0f);
        c->pos = malloc((size_t)c->n * sizeof *c->pos);
        if (c->pos)
            for (int64_t i = 0; i < c->n; i++) c->pos[i] = (int32_t)(rng_next(r) % 1000);
        c->out_n = c->n * c->heads * c->head_dim;
        snprintf(c->desc, sizeof c->desc, "rope n=%lld heads=%lld head_dim=%lld n_rot=%lld %s",
                 (long long)c->n, (long long)c->heads, (long long)c->head_dim, (long long)c->n_rot,
                 c->neox ? "neox" : "normal");
        return c->x && c->pos ? 0 : hone_error_set(HONE_ENOMEM, "out of memory");
    case HONE_SLOT_ATTENTION_DECODE:
    case HONE_SLOT_ATTENTION_PREFILL: {
        if (which >= 2) return 1;
        int prefill = id == HONE_SLOT_ATTENTION_PREFILL;
        c->heads = s->n_heads;
        c->kv_heads = s->n_kv_heads;
        c->head_dim = s->head_dim;
        c->block_size = 16;
        c->scale = (float)(1.0 / sqrt((double)c->head_dim));
        c->n = prefill ? (which ? 4 : 3) : 1;
        c->pos0 = prefill ? (which ? 0 : 34) : 0;
        c->n_kv = prefill ? c->pos0 + c->n : (which ? 1 : 37);
        int64_t nblk = (c->n_kv + c->block_size - 1) / c->block_size;
        int64_t per_blk = c->block_size * c->kv_heads * c->head_dim;
        c->k = rand_f32(r, nblk * per_blk, 1.0f);
        c->v = rand_f32(r, nblk * per_blk, 1.0f);
        c->table = malloc((size_t)nblk * sizeof *c->table);
        if (c->table) /* blocks in reverse order: the kernel must follow the table */
            for (int64_t i = 0; i < nblk; i++) c->table[i] = (int32_t)(nblk - 1 - i);
        c->x = rand_f32(r, c->n * c->heads * c->head_dim, 1.0f);
        c->scratch = malloc((size_t)(c->n_kv + 1) * sizeof *c->scratch);
        c->out_n = c->n * c->heads * c->head_dim;
        snprintf(c->desc, sizeof c->desc, "%s n=%lld keys=%lld heads=%lld/%lld head_dim=%lld", name,
                 (long long)c->n, (long long)c->n_kv, (long long)c->heads, (long long)c->kv_heads,
                 (long long)c->head_dim);
        return c->k && c->v && c->table && c->x && c->scratch ? 0
                                                               : hone_error_set(HONE_ENOMEM, "out of memory");
    }
    case HONE_SLOT_SWIGLU:
    case HONE_SLOT_ADD:
        if (which >= 2) return 1;
        c->n = which ? 37 : s->ffn;
        c->a = rand_f32(r, c->n, 4.0f);
        c->b = rand_f32(r, c->n, 2.0f);
        c->out_n = c->n;
        snprintf(c->desc, sizeof c->desc, "%s n=%lld", name, (long long)c->n);
        return c->a && c->b ? 0 : hone_error_set(HONE_ENOMEM, "out of memory");
    default:
        return hone_error_set(HONE_EINVAL, "no self-check for slot %d", (int)id);
    }
}

/* 0 when cand is within tolerance of base everywhere (exact: the same bits); else an error naming
 * the first element. */
static int compare_outputs(const kcase *c, const float *cand, const float *base, int exact)
{
    for (int64_t i = 0; exact && i < c->out_n; i++)
        if (memcmp(&cand[i], &base[i], sizeof *cand))
            return hone_error_set(HONE_EINVAL, "%s: output[%lld] = %.9g, baseline %.9g (not the same bits)",
                                  c->desc, (long long)i, cand[i], base[i]);
    double ss = 0.0;
    int64_t nf = 0;
    for (int64_t i = 0; i < c->out_n; i++)
        if (isfinite(base[i])) { ss += (double)base[i] * base[i]; nf++; }
    double rms = nf ? sqrt(ss / (double)nf) : 0.0;
    const double rtol = 1e-4;
    for (int64_t i = 0; i < c->out_n; i++) {
        double b = base[i], x = cand[i];
        if (!isfinite(b)) continue;
        if (isnan(x))
            return hone_error_set(HONE_EINVAL, "%s: output[%lld] is NaN (not written?), baseline %.9g",
                                  c->desc, (long long)i, b);
        double tol = rtol * (fabs(b) + rms) + 1e-30;
        if (!(fabs(x - b) <= tol))
            return hone_error_set(HONE_EINVAL, "%s: output[%lld] = %.9g, baseline %.9g (|diff| %.3g > %.3g)",
                                  c->desc, (long long)i, x, b, fabs(x - b), tol);
    }
    return 0;
}

int hone_kernel_loader_check(hone_slot_id id, void *fn, const hone_kernel_loader_opts *opts)
{
    if ((unsigned)id >= HONE_SLOT_COUNT || !fn)
        return hone_error_set(HONE_EINVAL, "self-check: bad slot or function");
    hone_slot_table bt;
    hone_slots_cpu_baseline(&bt);
    void *base_fn = hone_slots_get(&bt, id);
    shapes s = model_shapes(opts);
    rng r = {0x9e3779b97f4a7c15ull ^ (uint64_t)id};
    int rc = 0;
    for (int which = 0;; which++) {
        kcase c;
        int mc = make_case(&c, id, which, &s, &r);
        if (mc == 1) break;
        float *ob = NULL, *oc = NULL, *os = NULL;
        if (mc) { rc = mc; goto next; }
        ob = malloc((size_t)c.out_n * sizeof *ob);
        oc = malloc((size_t)c.out_n * sizeof *oc);
        os = malloc((size_t)c.out_n * sizeof *os);
        if (!ob || !oc || !os) { rc = hone_error_set(HONE_ENOMEM, "out of memory"); goto next; }
        prepare(&c, ob);
        call_slot(&c, base_fn, ob, 0, 1);
        prepare(&c, oc);
        call_slot(&c, fn, oc, 0, 1);
        if ((rc = compare_outputs(&c, oc, ob, opts && opts->exact))) goto next;
        prepare(&c, os); /* the same work in 3 shares must give the same bits */
        for (int ith = 0; ith < 3; ith++) call_slot(&c, fn, os, ith, 3);
        for (int64_t i = 0; i < c.out_n; i++)
            if (memcmp(&os[i], &oc[i], sizeof *os)) {
                rc = hone_error_set(HONE_EINVAL,
                                    "%s: output[%lld] is %.9g in 3 shares but %.9g in one: the result "
                                    "depends on the thread split",
                                    c.desc, (long long)i, os[i], oc[i]);
                break;
            }
    next:
        free(ob);
        free(oc);
        free(os);
        kcase_free(&c);
        if (rc) return rc;
    }
    return 0;
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
    if (!rc && (rc = check_evidence(path, cr.so_hash))) hone_compile_cpu_result_clear(&cr);
    if (rc) {
        snprintf(reason, sizeof reason, "%s", hone_error_last());
        rc = refuse(l, id, path, reason, cr.log && *cr.log ? cr.log : NULL, o);
        hone_compile_cpu_result_clear(&cr);
        return rc;
    }
    hone_compile_cpu_result_clear(&cr);
    if (!(h = dlopen(so, RTLD_LOCAL | RTLD_NOW))) {
        snprintf(reason, sizeof reason, "cannot load %s: %s", so, dlerror());
        return refuse(l, id, path, reason, NULL, o);
    }
    hone_slots_cpu_symbol(id, sym, sizeof sym);
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
    for (int i = 0; i < HONE_SLOT_COUNT; i++) {
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
    for (int i = 0; i < HONE_SLOT_COUNT; i++) {
        if (l->handle[i]) dlclose(l->handle[i]);
        free(l->detail[i]);
    }
    free(l);
}

int hone_kernel_loader_n_installed(const hone_kernel_loader *l)
{
    int n = 0;
    for (int i = 0; l && i < HONE_SLOT_COUNT; i++) n += l->state[i] == HONE_KERNEL_INSTALLED;
    return n;
}

int hone_kernel_loader_n_refused(const hone_kernel_loader *l)
{
    int n = 0;
    for (int i = 0; l && i < HONE_SLOT_COUNT; i++) n += l->state[i] == HONE_KERNEL_REFUSED;
    return n;
}

hone_kernel_state hone_kernel_loader_state(const hone_kernel_loader *l, hone_slot_id id)
{
    return l && (unsigned)id < HONE_SLOT_COUNT ? l->state[id] : HONE_KERNEL_BASELINE;
}

const char *hone_kernel_loader_detail(const hone_kernel_loader *l, hone_slot_id id)
{
    return l && (unsigned)id < HONE_SLOT_COUNT && l->detail[id] ? l->detail[id] : "";
}
