/* The inside of a hone_backend (engine/backend.h): the vtable a backend implements and the
 * struct the public wrappers dispatch through. Private to the backends: engine/backend.c (the
 * selection and the CPU backend over engine/forward.c) and engine/cuda_backend*.c. */
#ifndef HONE_BACKEND_IMPL_H
#define HONE_BACKEND_IMPL_H

#include "backend.h"

/* Every member takes the backend's own context. Optional members may be NULL: slots (no slot
 * table the CPU can swap), set_slot_hook (no per-slot hook). */
typedef struct {
    /* hone_ctx_forward's contract (engine/forward.h) */
    int (*forward)(void *ctx, hone_kv_seq *seq, const int32_t *tokens, int64_t n, float *logits,
                   int all_logits);
    /* hone_ctx_forward_batch's contract; a backend may refuse what it cannot run with
     * HONE_EUNSUPPORTED (no sequence changes then) */
    int (*forward_batch)(void *ctx, const hone_batch *b);
    /* drops a sequence's KV blocks */
    void (*release)(void *ctx, hone_kv_seq *seq);
    int64_t (*n_ctx)(const void *ctx);
    /* "cpu (2 threads)", "cuda: NVIDIA H200 (sm_90)": for logs */
    const char *(*describe)(const void *ctx);
    /* the block bookkeeping of the backend's KV cache (blocks, reference counts) */
    hone_kv_cache *(*kv)(void *ctx);
    hone_slot_table *(*slots)(void *ctx);
    void (*set_slot_hook)(void *ctx, hone_ctx_slot_hook hook, void *user);
    int (*n_threads)(const void *ctx);
    void (*free)(void *ctx);
} hone_backend_i;

struct hone_backend {
    hone_backend_i iface;
    void *ctx;
    hone_device device;       /* the device actually used */
    const hone_model *model;  /* borrowed */
    hone_ctx *cpu;            /* the CPU context when device == CPU, else NULL */
};

/* The CUDA backend's constructor: engine/cuda_backend.c in CUDA builds; HONE_EUNSUPPORTED
 * elsewhere (engine/cuda_backend_none.c). */
int hone_cuda_backend_new(hone_backend_i *out_iface, void **out_ctx, const hone_model *m,
                          const hone_ctx_opts *opts);

#endif
