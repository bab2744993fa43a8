/* Running CUDA code for the guard in child workers (see cuda_exec.h): the probe, the kernels
 * root of a candidate, kernel parity calls on device copies of the cases, the A/B timing and
 * whole-model runs. */
#include "cuda_exec.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "candidates/store.h"
#include "engine/cuda_kernels.h"
#include "engine/error.h"

int hone_cuda_exec_kernels_new(char *root, size_t cap, const char *slot, const char *src, size_t len)
{
    char inc[4096], real[PATH_MAX], dir[4400], path[4700], target[PATH_MAX + 300], file[128];
    int rc = hone_cuda_kernels_dir(inc, sizeof inc);
    if (cap) root[0] = 0;
    if (rc) return rc;
    if (!realpath(inc, real)) return hone_error_set(HONE_EIO, "kernels directory %s: %s", inc, strerror(errno));
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(root, cap, "%s/hone-guard-kernels-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (n < 0 || (size_t)n >= cap || n > 4000) {
        if (cap) root[0] = 0;
        return hone_error_set(HONE_ERANGE, "temporary directory path too long");
    }
    if (!mkdtemp(root)) {
        rc = hone_error_set(HONE_EIO, "mkdtemp %s: %s", root, strerror(errno));
        root[0] = 0;
        return rc;
    }
    snprintf(dir, sizeof dir, "%s/cuda", root);
    snprintf(file, sizeof file, "%s.cu", slot);
    DIR *d = NULL;
    if (mkdir(dir, 0755) != 0) {
        rc = hone_error_set(HONE_EIO, "mkdir %s: %s", dir, strerror(errno));
        goto done;
    }
    if (!(d = opendir(real))) {
        rc = hone_error_set(HONE_EIO, "opendir %s: %s", real, strerror(errno));
        goto done;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        if (e->d_name[0] == '.' || strcmp(e->d_name, file) == 0) continue;
        snprintf(target, sizeof target, "%s/%s", real, e->d_name);
        if (stat(target, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (symlink(target, path) != 0) {
            rc = hone_error_set(HONE_EIO, "symlink %s: %s", path, strerror(errno));
            goto done;
        }
    }
    snprintf(path, sizeof path, "%s/%s", dir, file);
    rc = hone_store_atomic_write(path, src, len);
done:
    if (d) closedir(d);
    if (rc) {
        hone_cuda_exec_kernels_free(root);
        root[0] = 0;
    }
    return rc;
}

void hone_cuda_exec_kernels_free(const char *root)
{
    if (!root || !root[0]) return;
    char dir[4400], path[4700];
    snprintf(dir, sizeof dir, "%s/cuda", root);
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
    rmdir(root);
}

#ifdef HONE_HAVE_CUDA

/* What a child reports to its parent, in memory shared with it. */
typedef struct {
    int end;                /* hone_cuda_exec_end */
    char why[768];
    int available;          /* probe */
    char pwhy[256];
    hone_cuda_device dev;
    int reps, inner;        /* timing */
    double inc_ns[HONE_CUDA_EXEC_MAX_REPS], cand_ns[HONE_CUDA_EXEC_MAX_REPS];
} shm;

static int child_fail(shm *sh, hone_cuda_exec_end end, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* In a child: records how it failed; returns the child's exit status (1). */
static int child_fail(shm *sh, hone_cuda_exec_end end, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sh->why, sizeof sh->why, fmt, ap);
    va_end(ap);
    sh->end = end;
    return 1;
}

/* Every child: a cubin cache write (which RLIMIT_FSIZE 0 refuses) must fail, not kill. */
static void child_start(void) { signal(SIGXFSZ, SIG_IGN); }

static int device_ordinal(void)
{
    const char *env = getenv("HONE_CUDA_DEVICE");
    return env && *env ? atoi(env) : 0;
}

static shm *shm_new(void) { return hone_worker_shared_new(sizeof(shm)); }
static void shm_free(shm *sh) { hone_worker_shared_free(sh, sizeof(shm)); }

/* Runs fn(arg) in a GPU worker and says how it ended. */
static int run_child(hone_cuda_exec_status *st, const shm *sh, double timeout_s, int (*fn)(void *), void *arg)
{
    hone_worker_opts wo = HONE_WORKER_OPTS_INIT;
    wo.timeout_s = timeout_s;
    wo.cpu_s = (int)(2 * timeout_s) + 10; /* a synchronising runtime spins while it waits */
    wo.gpu = 1;
    /* the network namespace stays: candidate code is device code, which makes no system calls,
     * and the driver may talk to host daemons (nvidia-persistenced, MPS) */
    wo.no_net = 0;
    memset(st, 0, sizeof *st);
    int rc = hone_worker_run(&st->w, &wo, fn, arg);
    if (rc) return rc;
    if (st->w.ok) {
        st->end = HONE_CUDA_EXEC_OK;
    } else if (st->w.timed_out || st->w.signal) {
        st->end = HONE_CUDA_EXEC_KILLED;
        snprintf(st->why, sizeof st->why, "%s", st->w.reason);
    } else if (sh->end != HONE_CUDA_EXEC_OK) {
        st->end = (hone_cuda_exec_end)sh->end;
        snprintf(st->why, sizeof st->why, "%s", sh->why);
    } else {
        st->end = HONE_CUDA_EXEC_SETUP;
        snprintf(st->why, sizeof st->why, "the GPU worker %s", st->w.reason);
    }
    return 0;
}

/* ---- the probe ------------------------------------------------------------------------------ */

static int probe_child(void *p)
{
    shm *sh = p;
    int avail = 0;
    child_start();
    hone_cuda_backend_probe(&avail, sh->pwhy, sizeof sh->pwhy);
    if (avail && hone_cuda_device_get(&sh->dev, device_ordinal()) != 0) {
        avail = 0;
        snprintf(sh->pwhy, sizeof sh->pwhy, "%s", hone_error_last());
    }
    sh->available = avail;
    return 0;
}

int hone_cuda_exec_probe(hone_cuda_exec_device *out)
{
    memset(out, 0, sizeof *out);
    shm *sh = shm_new();
    if (!sh) {
        snprintf(out->why, sizeof out->why, "%s", hone_error_last());
        return 0;
    }
    hone_cuda_exec_status st;
    if (run_child(&st, sh, 60.0, probe_child, sh) != 0)
        snprintf(out->why, sizeof out->why, "cannot start the GPU probe: %s", hone_error_last());
    else if (st.end != HONE_CUDA_EXEC_OK)
        snprintf(out->why, sizeof out->why, "the GPU probe failed: %.200s", st.why);
    else {
        out->available = sh->available;
        snprintf(out->why, sizeof out->why, "%s", sh->pwhy);
        out->dev = sh->dev;
    }
    shm_free(sh);
    return 0;
}

/* ---- device copies of a case --------------------------------------------------------------- */

static size_t round256(size_t x) { return (x + 255) & ~(size_t)255; }

/* A device copy of one case: its span (the bytes of the shared region from lo), then the
 * attention scratch between two guards of 0xff, then n_kv in a last guard block:
 *   [span | pad | GUARD | scratch | GUARD | n_kv, 252 bytes of 0xff] */
typedef struct {
    uint8_t *dev;
    uint8_t *host;      /* the download buffer, bytes long */
    size_t lo, span, guard0, scratch, guard1, nkv, bytes;
} image;

static int image_new(shm *sh, image *im, const hone_case *c)
{
    size_t hi;
    memset(im, 0, sizeof *im);
    hone_cases_span(c, &im->lo, &hi);
    im->span = hi - im->lo;
    im->guard0 = round256(im->span);
    im->scratch = im->guard0 + HONE_CUDA_EXEC_GUARD;
    im->guard1 = im->scratch + round256((size_t)hone_cases_cuda_scratch_len(c) * 4);
    im->nkv = im->guard1 + HONE_CUDA_EXEC_GUARD;
    im->bytes = im->nkv + 256;
    if (HONE_CUDART(cudaMalloc((void **)&im->dev, im->bytes)))
        return child_fail(sh, HONE_CUDA_EXEC_SETUP, "device memory for %s: %s", c->desc, hone_error_last());
    if (!(im->host = malloc(im->bytes)))
        return child_fail(sh, HONE_CUDA_EXEC_SETUP, "out of host memory (%s)", c->desc);
    return 0;
}

static void image_free(image *im)
{
    if (im->dev) cudaFree(im->dev);
    free(im->host);
    memset(im, 0, sizeof *im);
}

/* Copies case c of s (its output buffers as they are) to the device: guards and scratch 0xff
 * (NaN as floats), n_kv its value. */
static int image_upload(shm *sh, image *im, const hone_case_set *s, const hone_case *c)
{
    int32_t nkv = (int32_t)c->n_kv;
    /* the case's readable ranges into a host image of the span, then the image up */
    hone_cases_copy(im->host - im->lo, s->base, c, 0);
    if (HONE_CUDART(cudaMemcpy(im->dev, im->host, im->span, cudaMemcpyHostToDevice)) ||
        HONE_CUDART(cudaMemset(im->dev + im->span, 0xff, im->bytes - im->span)) ||
        HONE_CUDART(cudaMemcpy(im->dev + im->nkv, &nkv, sizeof nkv, cudaMemcpyHostToDevice)))
        return child_fail(sh, HONE_CUDA_EXEC_SETUP, "upload of %s: %s", c->desc, hone_error_last());
    return 0;
}

static void image_args(hone_cases_cuda_launch *L, const image *im, const hone_case *c, int out_k)
{
    hone_cases_cuda_args(L, c, im->dev, im->lo, (float *)(im->dev + (c->out_off[out_k] - im->lo)),
                         (float *)(im->dev + im->scratch), (int32_t *)(im->dev + im->nkv));
}

/* After a call into output out_k: the guards, n_kv and the other outputs must be as uploaded;
 * then the span (output, canaries, inputs) goes back into the shared region. */
static int take_back(shm *sh, const image *im, const hone_case_set *s, const hone_case *c, int out_k)
{
    for (size_t b = im->span; b < im->bytes; b++) {
        if (b == im->scratch) b = im->guard1;
        if (b >= im->nkv && b < im->nkv + 4) continue;
        if (im->host[b] != 0xff)
            return child_fail(sh, HONE_CUDA_EXEC_OOB, "wrote outside its buffers: %s of the device "
                              "scratch (%s)", b < im->scratch ? "before the start" : "past the end", c->desc);
    }
    int32_t nkv;
    memcpy(&nkv, im->host + im->nkv, sizeof nkv);
    if (nkv != (int32_t)c->n_kv)
        return child_fail(sh, HONE_CUDA_EXEC_MUTATED, "mutates its input: n_kv changed from %lld to %d (%s)",
                          (long long)c->n_kv, nkv, c->desc);
    size_t len = (size_t)c->out_len * 4;
    for (int k = 0; k < HONE_CASES_NOUT; k++)
        if (k != out_k && memcmp(im->host + (c->out_off[k] - im->lo), s->base + c->out_off[k], len) != 0)
            return child_fail(sh, HONE_CUDA_EXEC_OOB, "wrote into another output buffer of the "
                              "same case, beyond its canaries (%s)", c->desc);
    hone_cases_copy(s->base, im->host - im->lo, c, 0);
    return 0;
}

/* One call of kernel `slot` of ks on case i of s into output out_k, on the device copy im:
 * the output poisoned, everything uploaded, the launch, a synchronisation (where a fault
 * surfaces), the download and take_back. */
static int call(shm *sh, const hone_cuda_kernels *ks, hone_slot_id slot, const hone_case_set *s, int i,
                int out_k, image *im)
{
    const hone_case *c = &s->c[i];
    hone_cases_poison(s, c, hone_cases_out(s, c, out_k));
    int rc = image_upload(sh, im, s, c);
    if (rc) return rc;
    hone_cases_cuda_launch L;
    image_args(&L, im, c, out_k);
    rc = hone_cuda_kernels_launch(ks, slot, L.items_x, L.items_y, L.args, 0);
    if (!rc) rc = HONE_CUDART(cudaDeviceSynchronize());
    if (!rc) rc = HONE_CUDART(cudaMemcpy(im->host, im->dev, im->bytes, cudaMemcpyDeviceToHost));
    if (rc) return child_fail(sh, HONE_CUDA_EXEC_FAULT, "%s: %s", c->desc, hone_error_last());
    return take_back(sh, im, s, c, out_k);
}

/* Selects the device and loads every kernel of root (NULL: the engine's directory). */
static int load(shm *sh, hone_cuda_kernels **ks, int sm, const char *root)
{
    char dir[4400];
    if (HONE_CUDART(cudaSetDevice(device_ordinal())))
        return child_fail(sh, HONE_CUDA_EXEC_SETUP, "%s", hone_error_last());
    if (root) snprintf(dir, sizeof dir, "%s/cuda", root);
    if (hone_cuda_kernels_new(ks, sm, root ? dir : NULL))
        return child_fail(sh, HONE_CUDA_EXEC_LOAD, "%s", hone_error_last());
    return 0;
}

/* ---- kernel parity -------------------------------------------------------------------------- */

typedef struct {
    shm *sh;
    int sm;
    const char *root;
    hone_slot_id slot;
    hone_case_set *cs, *fresh;
    int runs;
} parity_arg;

static int parity_child(void *p)
{
    parity_arg *a = p;
    hone_cuda_kernels *ks = NULL;
    image im[3];
    memset(im, 0, sizeof im);
    child_start();
    int rc = load(a->sh, &ks, a->sm, a->root);
    for (int i = 0; i < a->cs->n && !rc; i++) {
        for (int k = 0; k < a->runs && !rc; k++) {
            rc = image_new(a->sh, &im[k], &a->cs->c[i]);
            if (!rc) rc = call(a->sh, ks, a->slot, a->cs, i, k, &im[k]);
        }
        if (!rc && a->fresh) {
            size_t lo, hi, lo2, hi2;
            hone_cases_span(&a->cs->c[i], &lo, &hi);
            hone_cases_span(&a->fresh->c[i], &lo2, &hi2);
            if (lo != lo2 || hi != hi2)
                rc = child_fail(a->sh, HONE_CUDA_EXEC_SETUP, "the fresh case set is laid out differently (%s)",
                                a->cs->c[i].desc);
            else
                rc = call(a->sh, ks, a->slot, a->fresh, i, 0, &im[a->runs - 1]);
        }
        for (int k = 0; k < 3; k++) image_free(&im[k]);
    }
    if (!rc) hone_cuda_kernels_free(ks); /* after a fault the context is gone: exit instead */
    return rc;
}

int hone_cuda_exec_parity(hone_cuda_exec_status *st, int sm, const char *root, hone_slot_id slot,
                          hone_case_set *cs, hone_case_set *fresh, int runs, double timeout_s)
{
    if (runs != 1 && runs != 3) return hone_error_set(HONE_EINVAL, "runs must be 1 or 3");
    if (fresh && fresh->n != cs->n) return hone_error_set(HONE_EINVAL, "the fresh case set differs in size");
    shm *sh = shm_new();
    if (!sh) return HONE_ENOMEM;
    parity_arg a = {sh, sm, root, slot, cs, fresh, runs};
    int rc = run_child(st, sh, timeout_s, parity_child, &a);
    shm_free(sh);
    return rc;
}

/* ---- speed ---------------------------------------------------------------------------------- */

#define TIME_COPIES 16

typedef struct {
    shm *sh;
    int sm;
    const char *roots[2];   /* incumbent, candidate */
    hone_slot_id slot;
    hone_case_set *cs;
    int reps;
} time_arg;

/* Launches kernel `slot` of ks on the first n copies, between two events; *ms their time. */
static int timed(shm *sh, const hone_cuda_kernels *ks, hone_slot_id slot, hone_cases_cuda_launch *L, int n,
                 cudaEvent_t e0, cudaEvent_t e1, const char *desc, float *ms)
{
    int rc = HONE_CUDART(cudaEventRecord(e0, 0));
    for (int k = 0; k < n && !rc; k++)
        rc = hone_cuda_kernels_launch(ks, slot, L[k].items_x, L[k].items_y, L[k].args, 0);
    if (!rc) rc = HONE_CUDART(cudaEventRecord(e1, 0));
    if (!rc) rc = HONE_CUDART(cudaEventSynchronize(e1));
    if (!rc) rc = HONE_CUDART(cudaEventElapsedTime(ms, e0, e1));
    if (rc) return child_fail(sh, HONE_CUDA_EXEC_FAULT, "timing %s: %s", desc, hone_error_last());
    return 0;
}

static int time_child(void *p)
{
    time_arg *a = p;
    shm *sh = a->sh;
    const hone_case_set *s = a->cs;
    hone_cuda_kernels *ks[2] = {NULL, NULL};
    image im[TIME_COPIES];
    hone_cases_cuda_launch *L = malloc(sizeof *L * TIME_COPIES);
    cudaEvent_t e0 = NULL, e1 = NULL;
    uint8_t *flush = NULL;
    int l2 = 0, inner = 1, rc;
    float ms = 0;
    memset(im, 0, sizeof im);
    child_start();
    if (!L) return child_fail(sh, HONE_CUDA_EXEC_SETUP, "out of host memory");
    if ((rc = load(sh, &ks[0], a->sm, a->roots[0])) || (rc = load(sh, &ks[1], a->sm, a->roots[1]))) return rc;
    const hone_case *c = hone_cases_timing(s);
    /* the L2 flush: a memset of twice the L2 (at least 8 MiB) before every rep */
    (void)cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device_ordinal());
    size_t flush_bytes = (size_t)(l2 > 4 << 20 ? 2 * l2 : 8 << 20);
    if (HONE_CUDART(cudaMalloc((void **)&flush, flush_bytes)) || HONE_CUDART(cudaEventCreate(&e0)) ||
        HONE_CUDART(cudaEventCreate(&e1)))
        return child_fail(sh, HONE_CUDA_EXEC_SETUP, "%s", hone_error_last());
    /* calibrate on one copy: a warm call, then a timed one; enough copies for ~50 us a rep */
    if ((rc = image_new(sh, &im[0], c)) || (rc = image_upload(sh, &im[0], s, c))) return rc;
    image_args(&L[0], &im[0], c, 0);
    if ((rc = timed(sh, ks[0], a->slot, L, 1, e0, e1, c->desc, &ms)) ||
        (rc = timed(sh, ks[0], a->slot, L, 1, e0, e1, c->desc, &ms)))
        return rc;
    inner = (int)(0.05 / (ms > 1e-4f ? ms : 1e-4f)) + 1;
    if (inner > TIME_COPIES) inner = TIME_COPIES;
    for (int k = 1; k < inner; k++) {
        if ((rc = image_new(sh, &im[k], c)) || (rc = image_upload(sh, &im[k], s, c))) return rc;
        image_args(&L[k], &im[k], c, 0);
    }
    for (int rep = -3; rep < a->reps; rep++) /* 3 warm-up pairs */
        for (int w = 0; w < 2; w++) {
            int which = (rep & 1) ? 1 - w : w; /* alternate the order: AB, BA, ... */
            (void)cudaCtxResetPersistingL2Cache();
            (void)cudaGetLastError(); /* where persisting L2 is not supported */
            if (HONE_CUDART(cudaMemsetAsync(flush, rep & 0x7f, flush_bytes, 0)))
                return child_fail(sh, HONE_CUDA_EXEC_SETUP, "L2 flush: %s", hone_error_last());
            if ((rc = timed(sh, ks[which], a->slot, L, inner, e0, e1, c->desc, &ms))) return rc;
            if (rep >= 0) (which ? sh->cand_ns : sh->inc_ns)[rep] = (double)ms * 1e6 / inner;
        }
    sh->reps = a->reps;
    sh->inner = inner;
    for (int k = 0; k < TIME_COPIES; k++) image_free(&im[k]);
    /* correctness again, after the timing loop: every case into output 7 */
    for (int i = 0; i < s->n && !rc; i++) {
        rc = image_new(sh, &im[0], &s->c[i]);
        if (!rc) rc = call(sh, ks[1], a->slot, a->cs, i, 7, &im[0]);
        image_free(&im[0]);
    }
    if (rc) return rc;
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(flush);
    free(L);
    hone_cuda_kernels_free(ks[0]);
    hone_cuda_kernels_free(ks[1]);
    return 0;
}

int hone_cuda_exec_time(hone_cuda_exec_status *st, int sm, const char *inc_root, const char *cand_root,
                        hone_slot_id slot, hone_case_set *cs, int reps, double *inc_ns, double *cand_ns,
                        int *inner, double timeout_s)
{
    if (reps < 1 || reps > HONE_CUDA_EXEC_MAX_REPS) return hone_error_set(HONE_EINVAL, "reps out of range");
    shm *sh = shm_new();
    if (!sh) return HONE_ENOMEM;
    time_arg a = {sh, sm, {inc_root, cand_root}, slot, cs, reps};
    int rc = run_child(st, sh, timeout_s, time_child, &a);
    if (!rc && st->end == HONE_CUDA_EXEC_OK) {
        memcpy(inc_ns, sh->inc_ns, sizeof(double) * (size_t)reps);
        memcpy(cand_ns, sh->cand_ns, sizeof(double) * (size_t)reps);
        *inner = sh->inner;
    }
    shm_free(sh);
    return rc;
}

/* ---- the whole model ------------------------------------------------------------------------ */

typedef struct {
    shm *sh;
    const char *root;
    const hone_model *m;
    const hone_ctx_opts *opts;
    int (*fn)(void *user, hone_backend *b);
    void *user;
} model_arg;

static int model_child(void *p)
{
    model_arg *a = p;
    hone_backend *b = NULL;
    child_start();
    /* the engine's kernels directory, as a served model would read it */
    if (a->root && setenv("HONE_KERNELS_DIR", a->root, 1) != 0)
        return child_fail(a->sh, HONE_CUDA_EXEC_SETUP, "setenv: %s", strerror(errno));
    if (hone_backend_new(&b, a->m, HONE_DEVICE_CUDA, a->opts) != 0)
        return child_fail(a->sh, HONE_CUDA_EXEC_LOAD, "%s", hone_error_last());
    if (a->fn(a->user, b) != 0) return child_fail(a->sh, HONE_CUDA_EXEC_FAULT, "%s", hone_error_last());
    hone_backend_free(b);
    return 0;
}

int hone_cuda_exec_model(hone_cuda_exec_status *st, const char *root, const hone_model *m,
                         const hone_ctx_opts *opts, int (*fn)(void *user, hone_backend *b), void *user,
                         double timeout_s)
{
    shm *sh = shm_new();
    if (!sh) return HONE_ENOMEM;
    model_arg a = {sh, root, m, opts, fn, user};
    int rc = run_child(st, sh, timeout_s, model_child, &a);
    shm_free(sh);
    return rc;
}

#else /* !HONE_HAVE_CUDA */

int hone_cuda_exec_probe(hone_cuda_exec_device *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->why, sizeof out->why, "this build has no CUDA support");
    return 0;
}

int hone_cuda_exec_parity(hone_cuda_exec_status *st, int sm, const char *root, hone_slot_id slot,
                          hone_case_set *cs, hone_case_set *fresh, int runs, double timeout_s)
{
    (void)sm, (void)root, (void)slot, (void)cs, (void)fresh, (void)runs, (void)timeout_s;
    memset(st, 0, sizeof *st);
    return hone_error_set(HONE_EUNSUPPORTED, "this build has no CUDA support");
}

int hone_cuda_exec_time(hone_cuda_exec_status *st, int sm, const char *inc_root, const char *cand_root,
                        hone_slot_id slot, hone_case_set *cs, int reps, double *inc_ns, double *cand_ns,
                        int *inner, double timeout_s)
{
    (void)sm, (void)inc_root, (void)cand_root, (void)slot, (void)cs, (void)reps, (void)inc_ns, (void)cand_ns;
    (void)inner, (void)timeout_s;
    memset(st, 0, sizeof *st);
    return hone_error_set(HONE_EUNSUPPORTED, "this build has no CUDA support");
}

int hone_cuda_exec_model(hone_cuda_exec_status *st, const char *root, const hone_model *m,
                         const hone_ctx_opts *opts, int (*fn)(void *user, hone_backend *b), void *user,
                         double timeout_s)
{
    (void)root, (void)m, (void)opts, (void)fn, (void)user, (void)timeout_s;
    memset(st, 0, sizeof *st);
    return hone_error_set(HONE_EUNSUPPORTED, "this build has no CUDA support");
}

#endif
