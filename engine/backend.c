/* Backend selection and the CPU backend's vtable (a thin wrapper of engine/forward.c). */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

typedef struct {
    hone_ctx *ctx;
    char desc[64];
} cpu_backend;

static int cpu_forward(void *p, hone_kv_seq *seq, const int32_t *tokens, int64_t n, float *logits,
                       int all)
{
    return hone_ctx_forward(((cpu_backend *)p)->ctx, seq, tokens, n, logits, all);
}

static void cpu_release(void *p, hone_kv_seq *seq)
{
    hone_kv_cache_release(hone_ctx_kv(((cpu_backend *)p)->ctx), seq);
}

static int64_t cpu_n_ctx(const void *p) { return hone_ctx_n_ctx(((const cpu_backend *)p)->ctx); }
static const char *cpu_describe(const void *p) { return ((const cpu_backend *)p)->desc; }

static void cpu_free(void *p)
{
    cpu_backend *b = p;
    if (!b) return;
    hone_ctx_free(b->ctx);
    free(b);
}

int hone_backend_parse_device(const char *s)
{
    if (!strcmp(s, "auto")) return HONE_DEVICE_AUTO;
    if (!strcmp(s, "cpu")) return HONE_DEVICE_CPU;
    if (!strcmp(s, "cuda")) return HONE_DEVICE_CUDA;
    return -1;
}

int hone_backend_new(hone_backend **out, const hone_model *m, hone_device device,
                     const hone_ctx_opts *opts)
{
    int rc;
    *out = NULL;
    hone_backend *b = calloc(1, sizeof *b);
    if (!b) return hone_error_set(HONE_ENOMEM, "out of memory");
    if (device == HONE_DEVICE_AUTO || device == HONE_DEVICE_CUDA) {
        int avail = 0;
        char why[256] = "";
        rc = hone_cuda_backend_probe(&avail, why, sizeof why);
        if (avail) {
            if ((rc = hone_cuda_backend_new(&b->iface, &b->ctx, m, opts)) == 0) {
                b->device = HONE_DEVICE_CUDA;
                if (device == HONE_DEVICE_AUTO)
                    fprintf(stderr, "hone: --device auto chose %s\n", b->iface.describe(b->ctx));
                *out = b;
                return 0;
            }
            if (device == HONE_DEVICE_CUDA) goto fail;
            fprintf(stderr, "hone: CUDA backend failed (%s); using the CPU\n", hone_error_last());
        } else if (device == HONE_DEVICE_CUDA) {
            rc = hone_error_set(HONE_EUNSUPPORTED, "--device cuda: no usable GPU (%s)", why);
            goto fail;
        }
    }
    cpu_backend *cb = calloc(1, sizeof *cb);
    if (!cb) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = hone_ctx_new(&cb->ctx, m, opts))) {
        free(cb);
        goto fail;
    }
    snprintf(cb->desc, sizeof cb->desc, "cpu (%d threads)", hone_ctx_n_threads(cb->ctx));
    b->iface = (hone_backend_i){cpu_forward, cpu_release, cpu_n_ctx, cpu_describe, cpu_free};
    b->ctx = cb;
    b->device = HONE_DEVICE_CPU;
    b->cpu = cb->ctx;
    if (device == HONE_DEVICE_AUTO) fprintf(stderr, "hone: --device auto chose %s\n", cb->desc);
    *out = b;
    return 0;
fail:
    free(b);
    return rc;
}

void hone_backend_free(hone_backend *b)
{
    if (!b) return;
    if (b->iface.free) b->iface.free(b->ctx);
    free(b);
}
