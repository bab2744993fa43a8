/* The KV pool plan of a command (serve, generate): the context length (the model's trained
 * one unless asked otherwise), the pool's blocks, and what they cost in memory, cut to fit
 * half the memory that is free, with a message saying what was cut. One place for the
 * arithmetic that `hone info`, `hone serve` and `hone generate` report and use. */
#ifndef HONE_KV_PLAN_H
#define HONE_KV_PLAN_H

#include <stdint.h>

#include "engine/backend.h"
#include "engine/model.h"

typedef struct {
    int64_t n_ctx;       /* requested (--ctx); <= 0: the model's trained context */
    int64_t block_size;  /* tokens per KV block (> 0) */
    int64_t kv_blocks;   /* requested (--kv-blocks): taken as it is; <= 0: planned */
    int64_t tokens;      /* > 0: the pool holds this many tokens of one request (generate: the
                          * prompt, -n and the drafts), not a full context; <= 0: serve's rule,
                          * 2 full contexts or 512 tokens per batch slot, at least one full context */
    int max_batch;       /* batch slots (serve's rule) */
    int64_t free_bytes;  /* memory the pool may take half of; <= 0: MemAvailable */
} hone_kv_plan_opts;

#define HONE_KV_PLAN_OPTS_INIT {.n_ctx = 0, .block_size = 16, .kv_blocks = 0, .tokens = 0, .max_batch = 1}

typedef struct {
    int64_t n_ctx;          /* the context length served */
    int64_t n_ctx_train;    /* the model's (GGUF <arch>.context_length) */
    int64_t block_size, kv_blocks;
    int64_t token_bytes;    /* K + V bytes per token, all layers (hone_kv_cache_token_bytes) */
    int64_t pool_bytes;     /* kv_blocks x block_size x token_bytes */
    int64_t ctx_bytes;      /* one full context: n_ctx x token_bytes */
    int64_t ctx_swa_bytes;  /* one full context in a cache that keeps only each sliding-window
                             * layer's window (== ctx_bytes for a model without windows) */
    int64_t free_bytes;     /* the free memory the plan was cut against */
    int cut;                /* 1: the pool (and with it maybe the context) was cut to fit */
    char note[320];         /* what was cut, why, and how to ask for more; "" when nothing */
} hone_kv_plan;

/* Plans the pool for m. Errors (HONE_EINVAL, with a message): --kv-blocks too few for one
 * full-context request; an explicit --ctx whose one request does not fit half the free memory.
 * An unrequested context that does not fit is cut to what does (plan.cut, plan.note).
 *   hone_kv_plan p; hone_kv_plan_opts o = HONE_KV_PLAN_OPTS_INIT;
 *   hone_kv_plan_make(&p, m, &o);  // SmolLM2-135M: n_ctx 8192, 16384 tokens, 720 MiB */
int hone_kv_plan_make(hone_kv_plan *out, const hone_model *m, const hone_kv_plan_opts *o);

/* K + V bytes of n_tokens tokens of one sequence in a cache that keeps only the last `window`
 * keys of each sliding-window layer and every key of the others. */
int64_t hone_kv_plan_swa_bytes(const hone_model *m, int64_t n_tokens);

/* The memory this process may still take (/proc/meminfo MemAvailable, capped by a cgroup's
 * memory.max where one is set); 0 when unknown. */
int64_t hone_kv_plan_free_bytes(void);
/* The memory a pool on `device` may take half of: the GPU's memory less the weights where the
 * backend will be CUDA (CUDA, or AUTO with a usable GPU), else hone_kv_plan_free_bytes(). */
int64_t hone_kv_plan_device_free_bytes(hone_device device, const hone_model *m);

#endif
