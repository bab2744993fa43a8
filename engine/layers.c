/* The layer sequence (see layers.h). */
#include "layers.h"

#include <stdio.h>

#include "error.h"

const hone_weight *hone_layers_weight(const hone_model *m, int64_t layer, hone_wsel w)
{
    if (w == HONE_W_TOK_EMBD) return hone_model_tok_embd(m);
    if (w == HONE_W_OUTPUT_NORM) return hone_model_output_norm(m);
    if (w == HONE_W_OUTPUT) return hone_model_output(m);
    return HONE_LAYERS_FIELD(hone_model_layer(m, layer), w);
}

/* Whether the model needs per-layer RoPE (two bases, or frequency factors). */
static int needs_rope_layer(const hone_hparams *hp)
{
    return hp->rope_freqs || (hp->swa_pattern && hp->rope_base_swa != hp->rope_base);
}

int hone_layers_check(const hone_model *m, const hone_layer_ops *o, const char *executor)
{
    const hone_hparams *hp = hone_model_hparams(m);
    char miss[256] = "";
    size_t len = 0;
#define NEED(cond, what)                                                                        \
    if (cond) len += (size_t)snprintf(miss + len, len < sizeof miss ? sizeof miss - len : 0, "%s%s", \
                                      len ? ", " : "", what);
    NEED(hp->embd_scale != 0 && !o->scale, "embedding scale")
    NEED(hp->qk_norm && !o->head_norm, "QK norm")
    NEED(hp->geglu && !o->geglu, "GELU-tanh gated FFN (geglu)")
    NEED(hp->final_softcap != 0 && !o->softcap, "final logit soft-capping")
    NEED(hp->swa_pattern && hp->rope_base_swa != hp->rope_base && !o->rope_layer, "per-layer RoPE bases")
    NEED(hp->rope_freqs && !(o->rope_layer && o->rope_freqs),
         "llama3 RoPE frequency factors (rope_freqs.weight)")
    NEED(hp->swa && !o->windows, "sliding-window attention")
#undef NEED
    if (!len) return 0;
    return hone_error_set(HONE_EUNSUPPORTED, "%s does not serve %s models of this kind (%s): %s",
                          executor, hp->arch, hone_model_name(m), miss);
}

int hone_layers_run(const hone_model *m, const hone_layer_ops *o, void *c, int64_t n)
{
    return hone_layers_run_upto(m, o, c, n, hone_model_hparams(m)->n_layers);
}

int hone_layers_run_upto(const hone_model *m, const hone_layer_ops *o, void *c, int64_t n, int64_t n_layers)
{
    const hone_hparams *hp = hone_model_hparams(m);
    int rc;
    if ((rc = hone_layers_check(m, o, "this executor"))) return rc;
#define TRY(call) if ((rc = (call))) return rc
/* a fused operation where the executor provides one: 0 ran, HONE_LAYERS_UNFUSED did not */
#define FUSED(op, ...) (rc = o->op ? o->op(c, __VA_ARGS__) : HONE_LAYERS_UNFUSED)
    TRY(o->embed(c, HONE_ACT_X, n));
    if (hp->embd_scale != 0) TRY(o->scale(c, HONE_ACT_X, hp->embd_scale, n * hp->dim));
    int rope_l = needs_rope_layer(hp);
    int64_t last = (n_layers < hp->n_layers ? n_layers : hp->n_layers) - 1;
    for (int64_t l = 0; l <= last; l++) {
        TRY(o->rmsnorm(c, HONE_ACT_H, HONE_ACT_X, l, HONE_W_ATTN_NORM, n));
        if (FUSED(qkv, l, HONE_ACT_H, n) < 0) return rc;
        if (rc == HONE_LAYERS_UNFUSED) {
            TRY(o->matmul(c, HONE_ACT_Q, l, HONE_W_Q, HONE_ACT_H, n));
            TRY(o->matmul(c, HONE_ACT_K, l, HONE_W_K, HONE_ACT_H, n));
            TRY(o->matmul(c, HONE_ACT_V, l, HONE_W_V, HONE_ACT_H, n));
        }
        if (hone_layers_weight(m, l, HONE_W_BQ)->data) TRY(o->bias(c, HONE_ACT_Q, l, HONE_W_BQ, n));
        if (hone_layers_weight(m, l, HONE_W_BK)->data) TRY(o->bias(c, HONE_ACT_K, l, HONE_W_BK, n));
        if (hone_layers_weight(m, l, HONE_W_BV)->data) TRY(o->bias(c, HONE_ACT_V, l, HONE_W_BV, n));
        if (hp->qk_norm) {
            TRY(o->head_norm(c, HONE_ACT_Q, l, HONE_W_Q_NORM, n, hp->n_heads));
            TRY(o->head_norm(c, HONE_ACT_K, l, HONE_W_K_NORM, n, hp->n_kv_heads));
        }
        if (rope_l) {
            TRY(o->rope_layer(c, HONE_ACT_Q, l, n, hp->n_heads));
            TRY(o->rope_layer(c, HONE_ACT_K, l, n, hp->n_kv_heads));
        } else {
            TRY(o->rope(c, HONE_ACT_Q, n, hp->n_heads));
            TRY(o->rope(c, HONE_ACT_K, n, hp->n_kv_heads));
        }
        TRY(o->store_kv(c, l, n));
        TRY(o->attention(c, l, n));
        if (l == last && o->prune) { /* the rest of the last layer only for the rows the head reads */
            int64_t rows = o->prune(c, n);
            if (rows <= 0) return (int)rows;
            n = rows;
        }
        TRY(o->matmul(c, HONE_ACT_PROJ, l, HONE_W_O, HONE_ACT_ATT, n));
        if (hp->post_norms) TRY(o->rmsnorm(c, HONE_ACT_PROJ, HONE_ACT_PROJ, l, HONE_W_POST_ATTN_NORM, n));
        TRY(o->add(c, HONE_ACT_X, HONE_ACT_X, HONE_ACT_PROJ, n * hp->dim));
        TRY(o->rmsnorm(c, HONE_ACT_H, HONE_ACT_X, l, HONE_W_FFN_NORM, n));
        if (hp->geglu) {
            TRY(o->matmul(c, HONE_ACT_GATE, l, HONE_W_GATE, HONE_ACT_H, n));
            TRY(o->matmul(c, HONE_ACT_UP, l, HONE_W_UP, HONE_ACT_H, n));
            TRY(o->geglu(c, HONE_ACT_GATE, HONE_ACT_GATE, HONE_ACT_UP, n * hp->ffn));
        } else {
            if (FUSED(ffn, HONE_ACT_GATE, l, HONE_ACT_H, n) < 0) return rc;
            if (rc == HONE_LAYERS_UNFUSED) {
                TRY(o->matmul(c, HONE_ACT_GATE, l, HONE_W_GATE, HONE_ACT_H, n));
                TRY(o->matmul(c, HONE_ACT_UP, l, HONE_W_UP, HONE_ACT_H, n));
                TRY(o->swiglu(c, HONE_ACT_GATE, HONE_ACT_GATE, HONE_ACT_UP, n * hp->ffn));
            }
        }
        TRY(o->matmul(c, HONE_ACT_PROJ, l, HONE_W_DOWN, HONE_ACT_GATE, n));
        if (hp->post_norms) TRY(o->rmsnorm(c, HONE_ACT_PROJ, HONE_ACT_PROJ, l, HONE_W_POST_FFN_NORM, n));
        TRY(o->add(c, HONE_ACT_X, HONE_ACT_X, HONE_ACT_PROJ, n * hp->dim));
    }
    int64_t rows = o->gather(c, n);
    if (rows <= 0) return (int)rows;
    if (FUSED(norm_matmul, HONE_ACT_LOGITS, -1, HONE_W_OUTPUT_NORM, HONE_W_OUTPUT, HONE_ACT_X, rows) < 0)
        return rc;
    if (rc == HONE_LAYERS_UNFUSED) {
        TRY(o->rmsnorm(c, HONE_ACT_H, HONE_ACT_X, -1, HONE_W_OUTPUT_NORM, rows));
        TRY(o->matmul(c, HONE_ACT_LOGITS, -1, HONE_W_OUTPUT, HONE_ACT_H, rows));
    }
    if (hp->final_softcap != 0) TRY(o->softcap(c, HONE_ACT_LOGITS, hp->final_softcap, rows * hp->n_vocab));
#undef FUSED
#undef TRY
    return 0;
}
