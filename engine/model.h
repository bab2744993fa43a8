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
    /* architecture features beyond Llama's (0 where the model has none; see
     * hone_model_layer_window and hone_model_layer_rope_base for the per-layer ones) */
    int qk_norm;          /* per-head RMSNorm of q and k before RoPE (qwen3, gemma3) */
    int post_norms;       /* gemma3: RMSNorm of the attention and FFN outputs before each add */
    int geglu;            /* FFN activation gelu_tanh (gemma3) instead of silu */
    float embd_scale;     /* gemma3: embedding rows times sqrt(dim) (rounded to f32); 0: none */
    float attn_scale;     /* score scale: 1/sqrt(head_dim) unless the architecture says */
    float final_softcap;  /* logits = c * tanh(logits / c) (final_logit_softcapping); 0: none */
    int64_t swa;          /* sliding window: a query sees its swa latest keys; 0: none */
    int swa_pattern;      /* 0: every layer windowed (when swa); p: layer l is global (full
                           * attention, base rope_base) when l % p == p - 1 (gemma3: 6) */
    float rope_base_swa;  /* RoPE base of the windowed layers when swa_pattern (gemma3: 10000) */
    int rope_freqs;       /* llama3 RoPE: theta_i divided by rope_freqs.weight[i] */
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
    hone_weight q_norm, k_norm;   /* [head_dim] f32 per-head norms (qwen3, gemma3) or NULL */
    hone_weight post_attn_norm;   /* [dim] f32 (gemma3) or NULL */
    hone_weight post_ffn_norm;    /* [dim] f32 (gemma3) or NULL */
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
/* [n_rot / 2] f32 RoPE frequency factors (llama3), or a weight with data NULL. */
const hone_weight *hone_model_rope_freqs(const hone_model *m);
/* The sliding window of layer l (keys a query sees, itself included), 0 for full attention. */
int64_t hone_model_layer_window(const hone_model *m, int64_t l);
/* The RoPE base of layer l (gemma3's windowed layers use rope_base_swa). */
float hone_model_layer_rope_base(const hone_model *m, int64_t l);

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
