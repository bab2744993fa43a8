/* The Llama-family layer sequence, written once. Every executor of a model implements the
 * operations of hone_layer_ops over its own buffers: the CPU forward pass (engine/forward.c),
 * the CUDA backend (engine/cuda_backend.c) and the profiler's cost model (profiler/profile.c),
 * and hone_layers_run calls them in the model's order:
 *   x = embed(tokens)
 *   per layer: h = rmsnorm(x); q,k,v = h Wq,Wk,Wv (+ biases); rope(q), rope(k); store k, v;
 *              att = attention(q); x += att Wo; h = rmsnorm(x); x += swiglu(h Wg, h Wu) Wd
 *   the rows whose logits are wanted: logits = rmsnorm(x) Wout
 * and the architecture steps where the model has them (qwen3, gemma3): x *= sqrt(dim) after
 * the embedding; q, k = per-head rmsnorm(q, k) before RoPE; per-layer RoPE bases and llama3
 * frequency factors; sliding-window attention; rmsnorm of att Wo and of the FFN output before
 * each residual add; geglu in place of swiglu; logits = c tanh(logits / c).
 * with three optional fused steps an executor may provide (q,k,v in one pass; gate, up and
 * swiglu in one; the final norm into the head). */
#ifndef HONE_LAYERS_H
#define HONE_LAYERS_H

#include <stdint.h>

#include "model.h"

/* The activation buffers an executor owns, by role; each holds one row per token of a piece. */
typedef enum {
    HONE_ACT_X,      /* [n][dim] the residual stream */
    HONE_ACT_H,      /* [n][dim] normalised */
    HONE_ACT_Q,      /* [n][n_heads * head_dim] */
    HONE_ACT_K,      /* [n][n_kv_heads * head_dim] */
    HONE_ACT_V,      /* [n][n_kv_heads * head_dim] */
    HONE_ACT_ATT,    /* [n][n_heads * head_dim] attention output */
    HONE_ACT_PROJ,   /* [n][dim] output projections */
    HONE_ACT_GATE,   /* [n][ffn] */
    HONE_ACT_UP,     /* [n][ffn] */
    HONE_ACT_LOGITS  /* [rows][n_vocab] the wanted rows' logits */
} hone_act;

/* The weights, by role: hone_layers_weight(m, layer, HONE_W_Q) is layer's Wq; the
 * model-wide ones (embedding, output norm and head) ignore the layer. */
typedef enum {
    HONE_W_TOK_EMBD,
    HONE_W_ATTN_NORM, HONE_W_Q, HONE_W_K, HONE_W_V, HONE_W_BQ, HONE_W_BK, HONE_W_BV, HONE_W_O,
    HONE_W_FFN_NORM, HONE_W_GATE, HONE_W_UP, HONE_W_DOWN,
    HONE_W_OUTPUT_NORM, HONE_W_OUTPUT,
    /* the architecture weights: per-head q and k norms (qwen3, gemma3), gemma3's post-norms */
    HONE_W_Q_NORM, HONE_W_K_NORM, HONE_W_POST_ATTN_NORM, HONE_W_POST_FFN_NORM
} hone_wsel;

const hone_weight *hone_layers_weight(const hone_model *m, int64_t layer, hone_wsel w);

/* The field of a per-layer weight struct with hone_layer's field names (the host's, or a
 * backend's device copy) that weight w names: HONE_LAYERS_FIELD(&layers[l], HONE_W_Q) is &->wq. */
#define HONE_LAYERS_FIELD(L, w)                                                                  \
    ((w) == HONE_W_ATTN_NORM ? &(L)->attn_norm : (w) == HONE_W_Q ? &(L)->wq                      \
     : (w) == HONE_W_K ? &(L)->wk : (w) == HONE_W_V ? &(L)->wv : (w) == HONE_W_BQ ? &(L)->bq     \
     : (w) == HONE_W_BK ? &(L)->bk : (w) == HONE_W_BV ? &(L)->bv : (w) == HONE_W_O ? &(L)->wo    \
     : (w) == HONE_W_FFN_NORM ? &(L)->ffn_norm : (w) == HONE_W_GATE ? &(L)->w_gate               \
     : (w) == HONE_W_UP ? &(L)->w_up : (w) == HONE_W_Q_NORM ? &(L)->q_norm                    \
     : (w) == HONE_W_K_NORM ? &(L)->k_norm : (w) == HONE_W_POST_ATTN_NORM ? &(L)->post_attn_norm \
     : (w) == HONE_W_POST_FFN_NORM ? &(L)->post_ffn_norm : &(L)->w_down)

/* What a fused operation returns when it does not run (not provided for this piece: its
 * kernel is not installed, the piece is not a single-token decode, the weights' dtypes differ):
 * hone_layers_run then runs the unfused sequence in its place. */
#define HONE_LAYERS_UNFUSED 1

/* One executor: every operation returns 0 or a negative HONE_E* code, which stops the run.
 * n is the piece's token count; layer and w name a weight for hone_layers_weight. */
typedef struct {
    int (*embed)(void *ctx, hone_act out, int64_t n);
    int (*rmsnorm)(void *ctx, hone_act y, hone_act x, int64_t layer, hone_wsel w, int64_t n);
    int (*matmul)(void *ctx, hone_act y, int64_t layer, hone_wsel w, hone_act x, int64_t n);
    /* adds bias row w to each of n rows of y (only called where the model has the bias) */
    int (*bias)(void *ctx, hone_act y, int64_t layer, hone_wsel w, int64_t n);
    int (*rope)(void *ctx, hone_act x, int64_t n, int64_t heads);
    int (*store_kv)(void *ctx, int64_t layer, int64_t n);   /* k, v rows into the cache */
    int (*attention)(void *ctx, int64_t layer, int64_t n);  /* att from q and the cache */
    int (*add)(void *ctx, hone_act y, hone_act a, hone_act b, int64_t elems);
    int (*swiglu)(void *ctx, hone_act out, hone_act gate, hone_act up, int64_t elems);
    /* Makes the x rows whose logits are wanted the first rows the next rmsnorm reads; returns
     * their count (0: none, the run ends) or a negative HONE_E* code. */
    int64_t (*gather)(void *ctx, int64_t n);
    /* Optional (NULL: every row runs the whole last layer): after the last layer's attention,
     * when no row's hidden state is wanted, makes the rows whose logits are wanted the first
     * rows of x and att and returns their count; the rest of the layer and gather then see only
     * them (no later operation reads the other rows, whose K and V are already stored). Returns
     * n where it does not prune, 0 when no row is wanted (the run ends), or a negative code. */
    int64_t (*prune)(void *ctx, int64_t n);
    /* Optional fused operations: NULL, or a return of HONE_LAYERS_UNFUSED, runs the unfused
     * sequence instead (the CUDA backend and the profiler's cost model leave them NULL). Each
     * must give bitwise what the sequence it replaces gives. */
    /* q, k, v = x Wq, x Wk, x Wv (the biases follow, as after the three matmuls) */
    int (*qkv)(void *ctx, int64_t layer, hone_act x, int64_t n);
    /* out = swiglu(x Wg, x Wu) (replaces the gate and up matmuls and the swiglu into out) */
    int (*ffn)(void *ctx, hone_act out, int64_t layer, hone_act x, int64_t n);
    /* y = rmsnorm(x, weight norm) W (replaces the rmsnorm into HONE_ACT_H and the matmul of it
     * where one norm feeds exactly one matmul: the output head) */
    int (*norm_matmul)(void *ctx, hone_act y, int64_t layer, hone_wsel norm, hone_wsel w,
                       hone_act x, int64_t n);
    /* The architecture operations beyond Llama's: NULL where the executor does not serve them,
     * and a model that needs one is refused by name (hone_layers_check). */
    /* x *= s elementwise in f32 (gemma3's embedding scale) */
    int (*scale)(void *ctx, hone_act x, float s, int64_t elems);
    /* in place, each of the n * heads rows of head_dim: rmsnorm with weight w (QK norm) */
    int (*head_norm)(void *ctx, hone_act x, int64_t layer, hone_wsel w, int64_t n, int64_t heads);
    /* out = gelu_tanh(gate) * up (the geglu slot) */
    int (*geglu)(void *ctx, hone_act out, hone_act gate, hone_act up, int64_t elems);
    /* x = c * tanh(x / c) elementwise (final logit soft-capping), on the wanted rows */
    int (*softcap)(void *ctx, hone_act x, float c, int64_t elems);
    /* rope with layer's base (hone_model_layer_rope_base) and the model's frequency factors
     * (llama3); when NULL, rope serves only models with one base and no factors */
    int (*rope_layer)(void *ctx, hone_act x, int64_t layer, int64_t n, int64_t heads);
    /* 1: rope_layer applies llama3's frequency factors (hone_model_rope_freqs) */
    int rope_freqs;
    /* 1: attention honours each layer's sliding window (hone_model_layer_window) */
    int windows;
} hone_layer_ops;

/* 0 when the executor serves every operation model m needs; otherwise HONE_EUNSUPPORTED with a
 * message naming the executor ("the CUDA backend"), the architecture and the operations. */
int hone_layers_check(const hone_model *m, const hone_layer_ops *ops, const char *executor);

/* Runs the sequence for a piece of n tokens. */
int hone_layers_run(const hone_model *m, const hone_layer_ops *ops, void *ctx, int64_t n);
/* The same with only the first n_layers layers before the final norm and head (the draft of
 * self-speculation, engine/spec.h); n_layers >= the model's runs them all. */
int hone_layers_run_upto(const hone_model *m, const hone_layer_ops *ops, void *ctx, int64_t n,
                         int64_t n_layers);

#endif
