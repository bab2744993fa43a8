/* Backend selection, the public wrappers, and the CPU backend's vtable (a thin wrapper of
 * engine/forward.c). */
#include "backend_impl.h"

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

static int cpu_forward_batch(void *p, const hone_batch *b)
{
    return hone_ctx_forward_batch(((cpu_backend *)p)->ctx, b);
}

static int64_t cpu_n_ctx(const void *p) { return hone_ctx_n_ctx(((const cpu_backend *)p)->ctx); }
static const char *cpu_describe(const void *p) { return ((const cpu_backend *)p)->desc; }
static hone_kv_cache *cpu_kv(void *p) { return hone_ctx_kv(((cpu_backend *)p)->ctx); }
static hone_slot_table *cpu_slots(void *p) { return hone_ctx_slots(((cpu_backend *)p)->ctx); }
static int cpu_n_threads(const void *p) { return hone_ctx_n_threads(((const cpu_backend *)p)->ctx); }

static void cpu_set_slot_hook(void *p, hone_ctx_slot_hook hook, void *user)
{
    hone_ctx_set_hook(((cpu_backend *)p)->ctx, hook, user);
}

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
    b->model = m;
    if (device == HONE_DEVICE_AUTO || device == HONE_DEVICE_CUDA) {
        int avail = 0;
        char why[256] = "";
        rc = hone_cuda_backend_probe(&avail, why, sizeof why);
        if (avail) {
            if ((rc = hone_cuda_backend_new(&b->iface, &b->ctx, m, opts)) == 0) {
                b->device = HONE_DEVICE_CUDA;
                if (device == HONE_DEVICE_AUTO)
                    fprintf(stderr, "hone: --device auto chose %s\n", hone_backend_describe(b));
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
    b->iface = (hone_backend_i){.forward = cpu_forward, .forward_batch = cpu_forward_batch,
                                .release = cpu_release, .n_ctx = cpu_n_ctx,
                                .describe = cpu_describe, .kv = cpu_kv, .slots = cpu_slots,
                                .set_slot_hook = cpu_set_slot_hook, .n_threads = cpu_n_threads,
                                .free = cpu_free};
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

int hone_backend_forward(hone_backend *b, hone_kv_seq *seq, const int32_t *tokens, int64_t n,
                         float *logits, int all_logits)
{
    return b->iface.forward(b->ctx, seq, tokens, n, logits, all_logits);
}

int hone_backend_forward_batch(hone_backend *b, const hone_batch *batch)
{
    if (batch->hidden_rows && hone_backend_device(b) != HONE_DEVICE_CPU)
        return hone_error_set(HONE_EUNSUPPORTED, "hidden states (embeddings) are computed on the CPU "
                              "backend only (serve with --device cpu)");
    return b->iface.forward_batch(b->ctx, batch);
}

int hone_backend_forward_batch_layers(hone_backend *b, const hone_batch *batch, int64_t n_layers)
{
    if (!b->cpu)
        return hone_error_set(HONE_EUNSUPPORTED, "a forward through the first layers only (self-speculation) "
                              "runs on the CPU backend only");
    return hone_ctx_forward_batch_layers(b->cpu, batch, n_layers);
}

void hone_backend_release(hone_backend *b, hone_kv_seq *seq) { b->iface.release(b->ctx, seq); }
int64_t hone_backend_n_ctx(const hone_backend *b) { return b->iface.n_ctx(b->ctx); }
int64_t hone_backend_n_vocab(const hone_backend *b) { return hone_model_hparams(b->model)->n_vocab; }
const hone_model *hone_backend_model(const hone_backend *b) { return b->model; }
const char *hone_backend_describe(const hone_backend *b) { return b->iface.describe(b->ctx); }
hone_device hone_backend_device(const hone_backend *b) { return b->device; }
hone_kv_cache *hone_backend_kv(hone_backend *b) { return b->iface.kv(b->ctx); }

int hone_backend_n_threads(const hone_backend *b)
{
    return b->iface.n_threads ? b->iface.n_threads(b->ctx) : 0;
}

hone_slot_table *hone_backend_slots(hone_backend *b)
{
    return b->iface.slots ? b->iface.slots(b->ctx) : NULL;
}

int hone_backend_set_slot_hook(hone_backend *b, hone_ctx_slot_hook hook, void *user)
{
    if (!b->iface.set_slot_hook)
        return hone_error_set(HONE_EUNSUPPORTED, "%s has no per-slot hook", hone_backend_describe(b));
    b->iface.set_slot_hook(b->ctx, hook, user);
    return 0;
}
