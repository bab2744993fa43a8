/* The KV pool plan (app/kv_plan.h): the trained context by default, room for the requests a
 * command expects, cut to half the free memory with a message rather than failing later. */
#include "app/kv_plan.h"

#include <stdio.h>
#include <string.h>

#include "engine/cuda.h"
#include "engine/error.h"
#include "engine/kv_cache.h"

#define MIB(x) ((double)(x) / (1 << 20))

int64_t hone_kv_plan_swa_bytes(const hone_model *m, int64_t n_tokens)
{
    const hone_hparams *hp = hone_model_hparams(m);
    int64_t layer = hone_kv_cache_token_bytes(1, hp->n_kv_heads, hp->head_dim), sum = 0;
    for (int64_t l = 0; l < hp->n_layers; l++) {
        int64_t w = hone_model_layer_window(m, l);
        sum += layer * (w > 0 && w < n_tokens ? w : n_tokens);
    }
    return sum;
}

/* "memory.max" of this process's cgroup (v2) in bytes; 0 when none is set or readable. */
static int64_t cgroup_max(void)
{
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
    if (!f) return 0;
    long long v = 0, cur = 0;
    int ok = fscanf(f, "%lld", &v) == 1;
    fclose(f);
    if (!ok || v <= 0) return 0;
    if ((f = fopen("/sys/fs/cgroup/memory.current", "r"))) {
        if (fscanf(f, "%lld", &cur) != 1) cur = 0;
        fclose(f);
    }
    return v > cur ? v - cur : 0;
}

int64_t hone_kv_plan_free_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    int64_t avail = 0;
    if (f) {
        char line[128];
        long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) {
                avail = (int64_t)kb * 1024;
                break;
            }
        fclose(f);
    }
    int64_t cg = cgroup_max();
    return cg > 0 && (avail == 0 || cg < avail) ? cg : avail;
}

int64_t hone_kv_plan_device_free_bytes(hone_device device, const hone_model *m)
{
    int avail = 0;
    char why[256];
    hone_cuda_device dev;
    if (device != HONE_DEVICE_CPU && hone_cuda_backend_probe(&avail, why, sizeof why) == 0 && avail &&
        hone_cuda_device_get(&dev, 0) == 0 && dev.total_mem > (int64_t)hone_model_weight_bytes(m))
        return dev.total_mem - (int64_t)hone_model_weight_bytes(m);
    return hone_kv_plan_free_bytes();
}

int hone_kv_plan_make(hone_kv_plan *out, const hone_model *m, const hone_kv_plan_opts *o)
{
    const hone_hparams *hp = hone_model_hparams(m);
    memset(out, 0, sizeof *out);
    int64_t bs = o->block_size > 0 ? o->block_size : 16;
    out->n_ctx_train = hp->n_ctx_train;
    out->n_ctx = o->n_ctx > 0 ? o->n_ctx : hp->n_ctx_train;
    out->block_size = bs;
    out->token_bytes = hone_kv_cache_token_bytes(hp->n_layers, hp->n_kv_heads, hp->head_dim);
    out->free_bytes = o->free_bytes > 0 ? o->free_bytes : hone_kv_plan_free_bytes();
    /* one request at full context: its blocks, plus one (a sequence need not start on a block
     * boundary of the pool's accounting: prefix sharing, the decode step's slack) */
#define PER_SEQ(ctx) (((ctx) + bs - 1) / bs + 1)
    if (o->kv_blocks > 0) {
        if (o->kv_blocks < PER_SEQ(out->n_ctx))
            return hone_error_set(HONE_EINVAL, "--kv-blocks %lld is too few: one full-context request needs "
                                  "%lld blocks of %lld tokens", (long long)o->kv_blocks,
                                  (long long)PER_SEQ(out->n_ctx), (long long)bs);
        out->kv_blocks = o->kv_blocks;
    } else {
        int64_t tokens = o->tokens;
        if (tokens <= 0) { /* serve: room for 2 full contexts or 512 tokens per batch slot */
            int64_t slots = 512 * (int64_t)(o->max_batch > 0 ? o->max_batch : 1);
            tokens = 2 * out->n_ctx > slots ? 2 * out->n_ctx : slots;
        }
        /* a command that knows its one request (generate) needs only that request's blocks */
        int64_t need = o->tokens > 0 ? (o->tokens + bs - 1) / bs + 1 : PER_SEQ(out->n_ctx);
        int64_t blocks = (tokens + bs - 1) / bs;
        if (blocks < need) blocks = need;
        /* at most half the free memory (the rest: weights, activations, the system) */
        int64_t budget = out->free_bytes / 2, block_bytes = bs * out->token_bytes;
        if (out->free_bytes > 0 && blocks * block_bytes > budget) {
            int64_t fit = budget / block_bytes, want = blocks;
            if (fit < need) {
                if (o->n_ctx > 0 || o->tokens > 0 || fit < PER_SEQ(bs))
                    return hone_error_set(HONE_EINVAL, "%lld tokens need %.0f MiB of KV cache (%lld bytes a token); "
                                          "half the free memory is %.0f MiB: ask for a shorter %s",
                                          (long long)(o->tokens > 0 ? o->tokens : out->n_ctx),
                                          MIB(need * block_bytes), (long long)out->token_bytes, MIB(budget),
                                          o->tokens > 0 ? "prompt or fewer tokens (-n)" : "--ctx");
                int64_t ctx = (fit - 1) * bs;
                snprintf(out->note, sizeof out->note, "context cut from %lld to %lld tokens and the KV pool to "
                         "%lld blocks (%.0f MiB): half of the %.0f MiB free; --ctx and --kv-blocks ask "
                         "for more", (long long)out->n_ctx, (long long)ctx, (long long)fit,
                         MIB(fit * block_bytes), MIB(out->free_bytes));
                out->n_ctx = ctx;
            } else {
                snprintf(out->note, sizeof out->note, "KV pool cut from %lld to %lld blocks (%.0f MiB): half of "
                         "the %.0f MiB free; --kv-blocks asks for more", (long long)want, (long long)fit,
                         MIB(fit * block_bytes), MIB(out->free_bytes));
            }
            blocks = fit;
            out->cut = 1;
        }
        out->kv_blocks = blocks;
    }
#undef PER_SEQ
    out->pool_bytes = out->kv_blocks * bs * out->token_bytes;
    out->ctx_bytes = out->n_ctx * out->token_bytes;
    out->ctx_swa_bytes = hone_kv_plan_swa_bytes(m, out->n_ctx);
    return 0;
}
