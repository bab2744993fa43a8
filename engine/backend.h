/* A compute backend behind one interface (ggml-style vtable + context): the CPU forward pass
 * (engine/forward.c) or the CUDA one (engine/cuda_*.c when built with the CUDA toolkit).
 * Commands and the server talk to a hone_backend, never to a device directly. */
#ifndef HONE_BACKEND_H
#define HONE_BACKEND_H

#include <stdint.h>

#include "forward.h"
#include "kv_cache.h"
#include "model.h"

typedef enum { HONE_DEVICE_AUTO = 0, HONE_DEVICE_CPU = 1, HONE_DEVICE_CUDA = 2 } hone_device;

typedef struct {
    /* Same contract as hone_ctx_forward (engine/forward.h). */
    int (*forward)(void *ctx, hone_kv_seq *seq, const int32_t *tokens, int64_t n, float *logits,
                   int all_logits);
    /* Drops a sequence's KV blocks. */
    void (*release)(void *ctx, hone_kv_seq *seq);
    int64_t (*n_ctx)(const void *ctx);
    /* "cpu (2 threads)", "cuda: NVIDIA H200 (sm_90)": for logs. */
    const char *(*describe)(const void *ctx);
    void (*free)(void *ctx);
} hone_backend_i;

typedef struct {
    hone_backend_i iface;
    void *ctx;
    hone_device device;   /* the device actually used */
    hone_ctx *cpu;        /* the CPU context when device == CPU (slots, hooks), else NULL */
} hone_backend;

/* Parses "auto", "cpu" or "cuda"; -1 if unknown. */
int hone_backend_parse_device(const char *s);

/* Opens a backend for m. HONE_DEVICE_AUTO takes the GPU when one is usable and otherwise the
 * CPU; HONE_DEVICE_CUDA without a usable GPU (or a build without CUDA) fails with a message
 * saying why. The choice is reported through describe(). */
int hone_backend_new(hone_backend **out, const hone_model *m, hone_device device,
                     const hone_ctx_opts *opts);
void hone_backend_free(hone_backend *b);

/* Set by engine/cuda_backend.c in CUDA builds; returns HONE_EUNSUPPORTED elsewhere.
 * *out_available is 1 when a CUDA device can be used (driver present, device count > 0). */
int hone_cuda_backend_probe(int *out_available, char *why, int cap);
int hone_cuda_backend_new(hone_backend_i *out_iface, void **out_ctx, const hone_model *m,
                          const hone_ctx_opts *opts);

#endif
