/* A Llama-family model loaded from GGUF: hyperparameters from the metadata and weights
 * borrowed from the file's mapping, or moved byte for byte into huge pages for the CPU
 * (hone_model_make_resident); served as shipped, never converted or requantised. */
#ifndef HONE_MODEL_H
#define HONE_MODEL_H

#include <stdint.h>

#include "gguf.h"

typedef struct {
    char arch[32];        /* "llama", "mistral", "qwen2" */
    int64_t n_layers;
    int64_t dim;          /* embedding length */
    int64_t n_heads;
    int64_t n_kv_heads;   /* < n_heads: grouped-query attention */
    int64_t head_dim;
    int64_t n_rot;        /* rotated dims per head (<= head_dim) */
    int64_t ffn;          /* feed-forward length */
    int64_t n_vocab;
    int64_t n_ctx_train;
    float rope_base;
    float norm_eps;
    int rope_neox;        /* 1: NeoX layout (qwen2), 0: normal (llama) */
    int tied;             /* output projection shares token_embd */
    int has_qkv_bias;
} hone_hparams;

/* A weight matrix W[rows][cols] (GGUF ne0 = cols, ne1 = rows) or a vector (rows = 1). */
typedef struct {
    const void *data;
    int32_t dtype;
    int64_t rows, cols;
    const char *name;
} hone_weight;

typedef struct {
    hone_weight attn_norm;        /* [dim] f32 */
    hone_weight wq;               /* [n_heads * head_dim][dim] */
    hone_weight wk, wv;           /* [n_kv_heads * head_dim][dim] */
    hone_weight bq, bk, bv;       /* biases (qwen2) or data == NULL */
    hone_weight wo;               /* [dim][n_heads * head_dim] */
    hone_weight ffn_norm;         /* [dim] f32 */
    hone_weight w_gate, w_up;     /* [ffn][dim] */
    hone_weight w_down;           /* [dim][ffn] */
} hone_layer;

typedef struct hone_model hone_model;

/* Opens path, reads the hyperparameters and checks every tensor's presence, dtype and shape.
 * Unsupported architectures are refused by name. */
int hone_model_load(hone_model **out, const char *path);
void hone_model_free(hone_model *m);

const hone_hparams *hone_model_hparams(const hone_model *m);
const hone_gguf *hone_model_gguf(const hone_model *m);
const hone_layer *hone_model_layer(const hone_model *m, int64_t i);
const hone_weight *hone_model_tok_embd(const hone_model *m);   /* [n_vocab][dim] */
const hone_weight *hone_model_output_norm(const hone_model *m);/* [dim] f32 */
const hone_weight *hone_model_output(const hone_model *m);     /* [n_vocab][dim]; token_embd if tied */
/* Bytes of weights read by one decode step (every matrix once, the embedding row aside). */
int64_t hone_model_weight_bytes(const hone_model *m);
/* Moves the tensor data out of the file mapping into anonymous memory advised for transparent
 * huge pages (one TLB entry per 2 MiB instead of per 4 KiB: decode streams every weight once
 * per token, and measured f32 decode on SmolLM2-135M ran about 7% faster). The bytes are
 * copied as they are; only their address changes, so the values any kernel sees are the same.
 * Done once per model, by the first CPU forward context (hone_ctx_new); later calls return at
 * once. Skipped when HONE_HUGEPAGES=0, when the kernel has THP off, for weights under 2 MiB,
 * for weights over half the memory available, or when the memory cannot be had (the file
 * mapping serves as before). Returns where the
 * weights live: "anonymous huge pages" or "file mapping". Not meant to run while another
 * thread reads this model's weight pointers. */
const char *hone_model_make_resident(const hone_model *m);
/* Where the weights live now (as above), without moving them. */
const char *hone_model_weight_memory(const hone_model *m);

/* The name the file gives itself (general.name) or its basename. */
const char *hone_model_name(const hone_model *m);

#endif
