/* The forward pass on the CPU: a context binds a model, a slot table, a thread pool, the
 * paged KV cache and the activation buffers, and runs chunks of tokens of one sequence
 * through the model, calling kernels only through the slot table. */
#ifndef HONE_FORWARD_H
#define HONE_FORWARD_H

#include <stdint.h>

#include "kv_cache.h"
#include "model.h"
#include "pool.h"
#include "slots.h"

typedef struct {
    int n_threads;          /* <= 0: all online CPUs */
    int64_t n_ctx;          /* positions per sequence; <= 0: the training context (GGUF context_length) */
    int64_t chunk;          /* prefill chunk size (tokens per forward call inside) */
    int64_t kv_block_size;  /* tokens per KV block */
    int64_t kv_blocks;      /* blocks in the pool; <= 0: enough for one full-length sequence */
} hone_ctx_opts;

#define HONE_CTX_OPTS_INIT {.n_threads = 0, .n_ctx = 0, .chunk = 64, .kv_block_size = 16, .kv_blocks = 0}

/* Called around every slot call when set (the profiler's hook): the slot, the time the call
 * took in ns, and its shape (the slot descriptor's dims; an attention call over several
 * sequences reports its query rows as n and the sum of their context lengths as n_kv). */
typedef void (*hone_ctx_slot_hook)(void *user, int id, uint64_t ns, const hone_slot_shape *shape);

typedef struct hone_ctx hone_ctx;

int hone_ctx_new(hone_ctx **out, const hone_model *m, const hone_ctx_opts *opts);
void hone_ctx_free(hone_ctx *c);

const hone_model *hone_ctx_model(const hone_ctx *c);
int64_t hone_ctx_n_ctx(const hone_ctx *c);
int hone_ctx_n_threads(const hone_ctx *c);
hone_kv_cache *hone_ctx_kv(hone_ctx *c);
/* The table the forward pass calls through; replace entries to swap kernels between calls. */
hone_slot_table *hone_ctx_slots(hone_ctx *c);
void hone_ctx_set_hook(hone_ctx *c, hone_ctx_slot_hook hook, void *user);

/* Feeds tokens[n] at positions seq->n_tokens .. +n-1, storing their K/V in seq's blocks.
 * logits: [n_vocab] for the last token, or [n][n_vocab] when all_logits; NULL for none.
 * Errors: a token id out of range, the context length exceeded, a full KV cache; on error
 * seq keeps only the tokens it had. */
int hone_ctx_forward(hone_ctx *c, hone_kv_seq *seq, const int32_t *tokens, int64_t n,
                     float *logits, int all_logits);

/* A batch of rows from one or many sequences (continuous batching). Row i feeds tokens[i]
 * to seqs[i] at position pos[i]; a sequence's rows appear in order and continue it
 * (pos = its n_tokens, then +1, ...). out_rows[i] receives row i's n_vocab logits, or NULL
 * for none (out_rows itself may be NULL). Every row's logits are bitwise those of the same
 * sequence run alone: matmul rows and attention rows do not depend on the batch. */
typedef struct {
    int64_t n;
    const int32_t *tokens;   /* [n] */
    hone_kv_seq *const *seqs;/* [n] */
    const int32_t *pos;      /* [n] */
    float *const *out_rows;  /* [n] or NULL */
    /* [n] or NULL: where row i's final hidden state goes ([dim] floats: the residual stream
     * after the last layer through the output norm, the head's input; for embeddings), or NULL
     * for none. CPU only: other backends answer HONE_EUNSUPPORTED for a batch that asks. */
    float *const *hidden_rows;
} hone_batch;

/* Runs a batch; on error (bad token or position, context or KV cache full) no sequence
 * changes. */
int hone_ctx_forward_batch(hone_ctx *c, const hone_batch *b);

/* hone_ctx_forward_batch through the first n_layers layers only, then the final norm and head:
 * the draft model of self-speculation (engine/spec.h). The K/V rows it stores for layers below
 * n_layers are bitwise those the full model stores for the same tokens; the other layers'
 * rows at these positions are left as they were, so the caller truncates the sequence back
 * before the full model runs those positions. */
int hone_ctx_forward_batch_layers(hone_ctx *c, const hone_batch *b, int64_t n_layers);

#endif
