/* A compute backend behind one interface (ggml-style vtable + context): the CPU forward pass
 * (engine/forward.c) or the CUDA one (engine/cuda_*.c when built with the CUDA toolkit).
 * Commands and the server talk to a hone_backend, never to a device directly; the vtable is
 * private to the backends (engine/backend_impl.h). */
#ifndef HONE_BACKEND_H
#define HONE_BACKEND_H

#include <stdint.h>

#include "forward.h"
#include "kv_cache.h"
#include "model.h"

typedef enum { HONE_DEVICE_AUTO = 0, HONE_DEVICE_CPU = 1, HONE_DEVICE_CUDA = 2 } hone_device;

/* A backend: opaque; every call goes through the wrappers below. */
typedef struct hone_backend hone_backend;

/* Parses "auto", "cpu" or "cuda"; -1 if unknown. */
int hone_backend_parse_device(const char *s);

/* Opens a backend for m (borrowed: it must outlive the backend). HONE_DEVICE_AUTO takes the
 * GPU when one is usable and otherwise the CPU; HONE_DEVICE_CUDA without a usable GPU (or a
 * build without CUDA) fails with a message saying why. The choice is reported through
 * hone_backend_describe(). */
int hone_backend_new(hone_backend **out, const hone_model *m, hone_device device,
                     const hone_ctx_opts *opts);
/* Accepts NULL. */
void hone_backend_free(hone_backend *b);

/* hone_ctx_forward's contract (engine/forward.h) on whatever device b runs on. */
int hone_backend_forward(hone_backend *b, hone_kv_seq *seq, const int32_t *tokens, int64_t n,
                         float *logits, int all_logits);
/* hone_ctx_forward_batch's contract (engine/forward.h: rows of one or many sequences, each
 * row's logits bitwise those of its sequence run alone; on error no sequence changes). The
 * CUDA backend runs the rows of one sequence and answers HONE_EUNSUPPORTED for a batch of
 * several. */
int hone_backend_forward_batch(hone_backend *b, const hone_batch *batch);
/* hone_ctx_forward_batch_layers (engine/forward.h) on the CPU backend; HONE_EUNSUPPORTED on
 * others. */
int hone_backend_forward_batch_layers(hone_backend *b, const hone_batch *batch, int64_t n_layers);
/* Drops a sequence's KV blocks. */
void hone_backend_release(hone_backend *b, hone_kv_seq *seq);

int64_t hone_backend_n_ctx(const hone_backend *b);
int64_t hone_backend_n_vocab(const hone_backend *b);
/* Threads of the CPU forward pass; 0 on a GPU. */
int hone_backend_n_threads(const hone_backend *b);
const hone_model *hone_backend_model(const hone_backend *b);
/* "cpu (2 threads)", "cuda: NVIDIA H200 (sm_90)": for logs. */
const char *hone_backend_describe(const hone_backend *b);
/* The device actually used (never HONE_DEVICE_AUTO). */
hone_device hone_backend_device(const hone_backend *b);
/* The KV cache's block bookkeeping (free list, reference counts, block tables: what the
 * scheduler and the prefix cache manage); the cache's data may live on the device. */
hone_kv_cache *hone_backend_kv(hone_backend *b);

/* The slot table the forward pass calls through, whose entries may be replaced between calls
 * (kernel loading, hot swaps); NULL where the backend has none the CPU can swap (CUDA). */
hone_slot_table *hone_backend_slots(hone_backend *b);
/* Sets the hook called around every slot call (hone_ctx_slot_hook; NULL removes it).
 * HONE_EUNSUPPORTED where the backend times no slot calls of its own (CUDA: its profile
 * comes from CUPTI). */
int hone_backend_set_slot_hook(hone_backend *b, hone_ctx_slot_hook hook, void *user);

/* Set by engine/cuda_backend.c in CUDA builds; returns HONE_EUNSUPPORTED elsewhere.
 * *out_available is 1 when a CUDA device can be used (driver present, device count > 0). */
int hone_cuda_backend_probe(int *out_available, char *why, int cap);


#endif
