/* The Llama-family forward pass, chunk by chunk:
 *   x = embed(tokens)
 *   per layer: h = rmsnorm(x); q,k,v = h Wq,Wk,Wv (+b); rope(q,k); store k,v;
 *              x += attention(q) Wo; h = rmsnorm(x); x += (silu(h Wg) * h Wu) Wd
 *   logits = rmsnorm(x) Wout
 * Every kernel is called through the slot table, on the thread pool, via run(). */
#include "forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"

/* A run: consecutive batch rows of one sequence at consecutive positions. */
typedef struct {
    int64_t t0, n, pos0;
    const hone_kv_seq *seq;
} att_run;

struct hone_ctx {
    const hone_model *m;
    hone_hparams hp;
    hone_ctx_opts o;
    hone_slot_table slots;
    hone_pool *pool;
    hone_kv_cache *kv;
    hone_ctx_slot_hook hook;
    void *hook_user;
    /* activations for one chunk */
    float *x;       /* [chunk][dim] residual stream */
    float *h;       /* [chunk][dim] normalised */
    float *q;       /* [chunk][n_heads * head_dim] */
    float *k, *v;   /* [chunk][n_kv_heads * head_dim] */
    float *att;     /* [chunk][n_heads * head_dim] */
    float *proj;    /* [chunk][dim] output projections */
    float *gate;    /* [chunk][ffn] */
    float *up;      /* [chunk][ffn] */
    float *scratch; /* [n_threads][n_ctx] attention scores */
    int32_t *pos;   /* [chunk] positions of the piece's rows */
    att_run *runs;           /* [chunk] attention runs of the piece */
    hone_kv_seq **seq_rows;  /* [chunk] */
    int32_t *pos_rows;       /* [chunk] */
    float **out_rows;        /* [chunk] */
    float *logits;  /* [chunk][n_vocab] when destination rows are scattered */
};

/* ---- slot dispatch: one args struct and trampoline per signature ---- */

typedef struct {
    hone_slot_id id;
    union {
        struct { hone_slot_embed_fn fn; float *out; const void *table; int32_t dt; const int32_t *ids; int64_t n, dim; } embed;
        struct { hone_slot_rmsnorm_fn fn; float *y; const float *x, *w; int64_t n, dim; float eps; } rms;
        struct { hone_slot_matvec_fn fn; float *y; const void *W; const float *x; int64_t rows, cols; } mv;
        struct { hone_slot_matmul_fn fn; float *Y; const void *W; const float *X; int64_t n, rows, cols; } mm;
        struct { hone_slot_rope_fn fn; float *x; const int32_t *pos; int64_t n, heads, hd, rot; float base; int32_t neox; } rope;
        struct { hone_slot_attention_decode_fn fn; float *out; const float *q, *k, *v; const int32_t *bt; int64_t n_kv, bs, heads, kv_heads, hd; float scale; float *scratch; int64_t stride; } ad;
        struct { hone_slot_attention_prefill_fn fn; float *out; const float *q, *k, *v; const int32_t *bt; int64_t n, pos0, bs, heads, kv_heads, hd; float scale; float *scratch; int64_t stride; } ap;
        struct { hone_slot_swiglu_fn fn; float *out; const float *g, *u; int64_t n; } sw;
        struct { hone_slot_add_fn fn; float *y; const float *a, *b; int64_t n; } add;
    } u;
} slot_call;

static void trampoline(void *arg, int ith, int nth)
{
    slot_call *c = arg;
    switch (c->id) {
    case HONE_SLOT_EMBED: c->u.embed.fn(c->u.embed.out, c->u.embed.table, c->u.embed.dt, c->u.embed.ids, c->u.embed.n, c->u.embed.dim, ith, nth); break;
    case HONE_SLOT_RMSNORM: c->u.rms.fn(c->u.rms.y, c->u.rms.x, c->u.rms.w, c->u.rms.n, c->u.rms.dim, c->u.rms.eps, ith, nth); break;
    case HONE_SLOT_ROPE: c->u.rope.fn(c->u.rope.x, c->u.rope.pos, c->u.rope.n, c->u.rope.heads, c->u.rope.hd, c->u.rope.rot, c->u.rope.base, c->u.rope.neox, ith, nth); break;
    case HONE_SLOT_ATTENTION_DECODE:
        c->u.ad.fn(c->u.ad.out, c->u.ad.q, c->u.ad.k, c->u.ad.v, c->u.ad.bt, c->u.ad.n_kv, c->u.ad.bs, c->u.ad.heads, c->u.ad.kv_heads, c->u.ad.hd, c->u.ad.scale, c->u.ad.scratch + ith * c->u.ad.stride, ith, nth);
        break;
    case HONE_SLOT_ATTENTION_PREFILL:
        c->u.ap.fn(c->u.ap.out, c->u.ap.q, c->u.ap.k, c->u.ap.v, c->u.ap.bt, c->u.ap.n, c->u.ap.pos0, c->u.ap.bs, c->u.ap.heads, c->u.ap.kv_heads, c->u.ap.hd, c->u.ap.scale, c->u.ap.scratch + ith * c->u.ap.stride, ith, nth);
        break;
    case HONE_SLOT_SWIGLU: c->u.sw.fn(c->u.sw.out, c->u.sw.g, c->u.sw.u, c->u.sw.n, ith, nth); break;
    case HONE_SLOT_ADD: c->u.add.fn(c->u.add.y, c->u.add.a, c->u.add.b, c->u.add.n, ith, nth); break;
    default:
        if (c->id >= HONE_SLOT_MATVEC_F32 && c->id <= HONE_SLOT_MATVEC_Q4_1)
            c->u.mv.fn(c->u.mv.y, c->u.mv.W, c->u.mv.x, c->u.mv.rows, c->u.mv.cols, ith, nth);
        else
            c->u.mm.fn(c->u.mm.Y, c->u.mm.W, c->u.mm.X, c->u.mm.n, c->u.mm.rows, c->u.mm.cols, ith, nth);
        break;
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Runs one slot call on nth threads (small elementwise slots run on fewer). a, b, d are the
 * shape the hook reports: embed (n, dim, table dtype), rmsnorm (n, dim, 0), matvec and
 * matmul (rows, cols, n), rope (n, heads, head_dim), swiglu and add (elements, 0, 0);
 * op_attention's: (query rows, sum over its sequences of pos0 + n, heads). */
static void run(hone_ctx *c, slot_call *call, int nth, int64_t a, int64_t b, int64_t d)
{
    if (!c->hook) {
        hone_pool_run(c->pool, trampoline, call, nth);
        return;
    }
    uint64_t t0 = now_ns();
    hone_pool_run(c->pool, trampoline, call, nth);
    c->hook(c->hook_user, call->id, now_ns() - t0, a, b, d);
}

static void op_matmul(hone_ctx *c, float *Y, const hone_weight *w, const float *X, int64_t n)
{
    slot_call call;
    if (n == 1) {
        call.id = (hone_slot_id)hone_slots_matvec_id(w->dtype);
        call.u.mv.fn = c->slots.matvec[w->dtype];
        call.u.mv.y = Y; call.u.mv.W = w->data; call.u.mv.x = X;
        call.u.mv.rows = w->rows; call.u.mv.cols = w->cols;
    } else {
        call.id = (hone_slot_id)hone_slots_matmul_id(w->dtype);
        call.u.mm.fn = c->slots.matmul[w->dtype];
        call.u.mm.Y = Y; call.u.mm.W = w->data; call.u.mm.X = X; call.u.mm.n = n;
        call.u.mm.rows = w->rows; call.u.mm.cols = w->cols;
    }
    run(c, &call, 0, w->rows, w->cols, n);
}

static void op_rmsnorm(hone_ctx *c, float *y, const float *x, const hone_weight *w, int64_t n)
{
    slot_call call = {.id = HONE_SLOT_RMSNORM};
    call.u.rms.fn = c->slots.rmsnorm;
    call.u.rms.y = y; call.u.rms.x = x; call.u.rms.w = w->data;
    call.u.rms.n = n; call.u.rms.dim = c->hp.dim; call.u.rms.eps = c->hp.norm_eps;
    run(c, &call, n > 1 ? 0 : 1, n, c->hp.dim, 0);
}

static void op_add(hone_ctx *c, float *y, const float *a, const float *b, int64_t n)
{
    slot_call call = {.id = HONE_SLOT_ADD};
    call.u.add.fn = c->slots.add;
    call.u.add.y = y; call.u.add.a = a; call.u.add.b = b; call.u.add.n = n;
    run(c, &call, n >= 4096 ? 0 : 1, n, 0, 0);
}

/* Adds a bias row to each of n rows (qwen2's q/k/v biases) through the add slot. */
static void op_bias(hone_ctx *c, float *y, const hone_weight *b, int64_t n)
{
    if (!b->data) return;
    for (int64_t t = 0; t < n; t++) op_add(c, y + t * b->cols, y + t * b->cols, b->data, b->cols);
}

static void op_rope(hone_ctx *c, float *x, int64_t n, int64_t heads)
{
    slot_call call = {.id = HONE_SLOT_ROPE};
    call.u.rope.fn = c->slots.rope;
    call.u.rope.x = x; call.u.rope.pos = c->pos; call.u.rope.n = n; call.u.rope.heads = heads;
    call.u.rope.hd = c->hp.head_dim; call.u.rope.rot = c->hp.n_rot;
    call.u.rope.base = c->hp.rope_base; call.u.rope.neox = c->hp.rope_neox;
    run(c, &call, n > 1 ? 0 : 1, n, heads, c->hp.head_dim);
}

typedef struct {
    hone_ctx *c;
    const att_run *runs;
    int64_t n_runs;
    int64_t layer;
    int prefill;        /* 1: the runs of length > 1; 0: the single-token runs */
} att_job;

/* One pool job over many runs: each share does its part of every run, so a batch of many
 * decoding sequences costs one dispatch per layer, not one per sequence. */
static void att_trampoline(void *arg, int ith, int nth)
{
    att_job *j = arg;
    hone_ctx *c = j->c;
    const hone_hparams *hp = &c->hp;
    float scale = (float)(1.0 / sqrt((double)hp->head_dim));
    float *kc = hone_kv_cache_k(c->kv, j->layer), *vc = hone_kv_cache_v(c->kv, j->layer);
    int64_t bs = hone_kv_cache_block_size(c->kv), qd = hp->n_heads * hp->head_dim;
    float *scratch = c->scratch + ith * c->o.n_ctx;
    for (int64_t r = 0; r < j->n_runs; r++) {
        const att_run *run = &j->runs[r];
        if ((run->n > 1) != j->prefill) continue;
        /* thread ith takes share (ith + r) % nth of run r: a permutation per run, so every
         * share is still done once, and uneven shares (9 heads on 2 threads) even out */
        int share = (int)((ith + r) % nth);
        if (run->n == 1)
            c->slots.attention_decode(c->att + run->t0 * qd, c->q + run->t0 * qd, kc, vc,
                                      run->seq->blocks, run->pos0 + 1, bs, hp->n_heads,
                                      hp->n_kv_heads, hp->head_dim, scale, scratch, share, nth);
        else
            c->slots.attention_prefill(c->att + run->t0 * qd, c->q + run->t0 * qd, kc, vc,
                                       run->seq->blocks, run->n, run->pos0, bs, hp->n_heads,
                                       hp->n_kv_heads, hp->head_dim, scale, scratch, share, nth);
    }
}

static void op_attention(hone_ctx *c, int64_t layer, const att_run *runs, int64_t n_runs)
{
    for (int prefill = 0; prefill < 2; prefill++) {
        int64_t rows = 0, keys = 0, count = 0;
        for (int64_t r = 0; r < n_runs; r++)
            if ((runs[r].n > 1) == prefill) {
                rows += runs[r].n;
                keys += runs[r].pos0 + runs[r].n;
                count++;
            }
        if (!count) continue;
        att_job job = {c, runs, n_runs, layer, prefill};
        hone_slot_id id = prefill ? HONE_SLOT_ATTENTION_PREFILL : HONE_SLOT_ATTENTION_DECODE;
        if (!c->hook) {
            hone_pool_run(c->pool, att_trampoline, &job, 0);
        } else {
            uint64_t t0 = now_ns();
            hone_pool_run(c->pool, att_trampoline, &job, 0);
            c->hook(c->hook_user, id, now_ns() - t0, rows, keys, c->hp.n_heads);
        }
    }
}

/* Copies the piece's k and v rows into their sequences' blocks (host work, not a slot). */
static void store_kv(hone_ctx *c, int64_t layer, hone_kv_seq *const *seqs, const int32_t *pos,
                     int64_t n)
{
    int64_t row = c->hp.n_kv_heads * c->hp.head_dim, bs = hone_kv_cache_block_size(c->kv);
    float *kc = hone_kv_cache_k(c->kv, layer), *vc = hone_kv_cache_v(c->kv, layer);
    for (int64_t t = 0; t < n; t++) {
        int64_t p = pos[t];
        int64_t off = ((int64_t)seqs[t]->blocks[p / bs] * bs + p % bs) * row;
        memcpy(kc + off, c->k + t * row, (size_t)row * sizeof(float));
        memcpy(vc + off, c->v + t * row, (size_t)row * sizeof(float));
    }
}

/* Runs n <= chunk batch rows through the model. out_rows[t] is where row t's logits go
 * (NULL: not wanted). Positions come from pos[t]; KV blocks are already reserved. */
static void forward_piece(hone_ctx *c, hone_kv_seq *const *seqs, const int32_t *tokens,
                          const int32_t *pos, int64_t n, float *const *out_rows)
{
    const hone_hparams *hp = &c->hp;
    const hone_model *m = c->m;
    memcpy(c->pos, pos, (size_t)n * sizeof *pos);
    int64_t n_runs = 0;
    for (int64_t t = 0; t < n; t++) {
        if (n_runs && c->runs[n_runs - 1].seq == seqs[t] &&
            c->runs[n_runs - 1].pos0 + c->runs[n_runs - 1].n == pos[t]) {
            c->runs[n_runs - 1].n++;
        } else {
            c->runs[n_runs++] = (att_run){t, 1, pos[t], seqs[t]};
        }
    }

    const hone_weight *emb = hone_model_tok_embd(m);
    slot_call call = {.id = HONE_SLOT_EMBED};
    call.u.embed.fn = c->slots.embed;
    call.u.embed.out = c->x; call.u.embed.table = emb->data; call.u.embed.dt = emb->dtype;
    call.u.embed.ids = tokens; call.u.embed.n = n; call.u.embed.dim = hp->dim;
    run(c, &call, n > 1 ? 0 : 1, n, hp->dim, emb->dtype);

    for (int64_t l = 0; l < hp->n_layers; l++) {
        const hone_layer *L = hone_model_layer(m, l);
        op_rmsnorm(c, c->h, c->x, &L->attn_norm, n);
        op_matmul(c, c->q, &L->wq, c->h, n);
        op_matmul(c, c->k, &L->wk, c->h, n);
        op_matmul(c, c->v, &L->wv, c->h, n);
        op_bias(c, c->q, &L->bq, n);
        op_bias(c, c->k, &L->bk, n);
        op_bias(c, c->v, &L->bv, n);
        op_rope(c, c->q, n, hp->n_heads);
        op_rope(c, c->k, n, hp->n_kv_heads);
        store_kv(c, l, seqs, pos, n);
        op_attention(c, l, c->runs, n_runs);
        op_matmul(c, c->proj, &L->wo, c->att, n);
        op_add(c, c->x, c->x, c->proj, n * hp->dim);
        op_rmsnorm(c, c->h, c->x, &L->ffn_norm, n);
        op_matmul(c, c->gate, &L->w_gate, c->h, n);
        op_matmul(c, c->up, &L->w_up, c->h, n);
        slot_call sw = {.id = HONE_SLOT_SWIGLU};
        sw.u.sw.fn = c->slots.swiglu;
        sw.u.sw.out = c->gate; sw.u.sw.g = c->gate; sw.u.sw.u = c->up; sw.u.sw.n = n * hp->ffn;
        run(c, &sw, 0, n * hp->ffn, 0, 0);
        op_matmul(c, c->proj, &L->w_down, c->gate, n);
        op_add(c, c->x, c->x, c->proj, n * hp->dim);
    }
    /* the wanted rows, gathered: final norm, then the output projection */
    int64_t rows = 0;
    for (int64_t t = 0; t < n; t++)
        if (out_rows[t]) {
            if (rows != t) memcpy(c->x + rows * hp->dim, c->x + t * hp->dim, (size_t)hp->dim * sizeof(float));
            rows++;
        }
    if (!rows) return;
    op_rmsnorm(c, c->h, c->x, hone_model_output_norm(m), rows);
    /* contiguous destination rows go straight to the caller; otherwise through c->logits */
    float *first = NULL;
    int contiguous = 1;
    for (int64_t t = 0, r = 0; t < n; t++)
        if (out_rows[t]) {
            if (!first) first = out_rows[t];
            else if (out_rows[t] != first + r * hp->n_vocab) contiguous = 0;
            r++;
        }
    if (contiguous) {
        op_matmul(c, first, hone_model_output(m), c->h, rows);
        return;
    }
    op_matmul(c, c->logits, hone_model_output(m), c->h, rows);
    for (int64_t t = 0, r = 0; t < n; t++)
        if (out_rows[t]) {
            memcpy(out_rows[t], c->logits + r * hp->n_vocab, (size_t)hp->n_vocab * sizeof(float));
            r++;
        }
}

int hone_ctx_forward_batch(hone_ctx *c, const hone_batch *b)
{
    const hone_hparams *hp = &c->hp;
    int rc = 0;
    if (b->n <= 0) return hone_error_set(HONE_EINVAL, "no tokens to process");
    /* validate, and find each sequence's first row to check positions are consecutive */
    for (int64_t i = 0; i < b->n; i++) {
        if (b->tokens[i] < 0 || b->tokens[i] >= hp->n_vocab)
            return hone_error_set(HONE_EINVAL, "token id %d out of range [0, %lld)", b->tokens[i],
                                  (long long)hp->n_vocab);
        int64_t expect = b->seqs[i]->n_tokens;
        for (int64_t j = 0; j < i; j++)
            if (b->seqs[j] == b->seqs[i]) expect++;
        if (b->pos[i] != expect)
            return hone_error_set(HONE_EINVAL, "batch row %lld: position %d, expected %lld (each "
                                  "sequence's rows continue it in order)", (long long)i, b->pos[i],
                                  (long long)expect);
        if (b->pos[i] >= c->o.n_ctx)
            return hone_error_set(HONE_ERANGE, "context full: position %d reaches the context "
                                  "length %lld", b->pos[i], (long long)c->o.n_ctx);
    }
    /* reserve every sequence's blocks; on failure give back what this call took */
    int64_t i;
    for (i = 0; i < b->n; i++)
        if ((rc = hone_kv_cache_reserve(c->kv, b->seqs[i], (int64_t)b->pos[i] + 1))) break;
    if (rc) {
        for (int64_t j = 0; j < i; j++) hone_kv_cache_truncate(c->kv, b->seqs[j], b->seqs[j]->n_tokens);
        return rc;
    }
    float **out_rows = c->out_rows;
    for (int64_t t0 = 0; t0 < b->n; t0 += c->o.chunk) {
        int64_t m = b->n - t0 < c->o.chunk ? b->n - t0 : c->o.chunk;
        for (int64_t t = 0; t < m; t++) out_rows[t] = b->out_rows ? b->out_rows[t0 + t] : NULL;
        forward_piece(c, b->seqs + t0, b->tokens + t0, b->pos + t0, m, out_rows);
        for (int64_t t = 0; t < m; t++) b->seqs[t0 + t]->n_tokens++;
    }
    return 0;
}

int hone_ctx_forward(hone_ctx *c, hone_kv_seq *seq, const int32_t *tokens, int64_t n,
                     float *logits, int all_logits)
{
    const hone_hparams *hp = &c->hp;
    if (n <= 0) return hone_error_set(HONE_EINVAL, "no tokens to process");
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return hone_error_set(HONE_EINVAL, "token id %d out of range [0, %lld)", tokens[i],
                                  (long long)hp->n_vocab);
    if (seq->n_tokens + n > c->o.n_ctx)
        return hone_error_set(HONE_ERANGE, "context full: %lld + %lld tokens exceed the context "
                              "length %lld", (long long)seq->n_tokens, (long long)n,
                              (long long)c->o.n_ctx);
    int rc = hone_kv_cache_reserve(c->kv, seq, seq->n_tokens + n);
    if (rc) return rc;
    for (int64_t t0 = 0; t0 < n; t0 += c->o.chunk) {
        int64_t m = n - t0 < c->o.chunk ? n - t0 : c->o.chunk;
        for (int64_t t = 0; t < m; t++) {
            c->seq_rows[t] = seq;
            c->pos_rows[t] = (int32_t)(seq->n_tokens + t);
            float *row = NULL;
            if (logits && all_logits) row = logits + (t0 + t) * hp->n_vocab;
            else if (logits && t0 + t == n - 1) row = logits;
            c->out_rows[t] = row;
        }
        forward_piece(c, c->seq_rows, tokens + t0, c->pos_rows, m, c->out_rows);
        seq->n_tokens += m;
    }
    return 0;
}

int hone_ctx_new(hone_ctx **out, const hone_model *m, const hone_ctx_opts *opts)
{
    hone_ctx_opts dflt = HONE_CTX_OPTS_INIT;
    int rc;
    *out = NULL;
    hone_ctx *c = calloc(1, sizeof *c);
    if (!c) return hone_error_set(HONE_ENOMEM, "out of memory");
    c->m = m;
    c->hp = *hone_model_hparams(m);
    c->o = opts ? *opts : dflt;
    const hone_hparams *hp = &c->hp;
    if (c->o.n_ctx <= 0) c->o.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (c->o.chunk <= 0) c->o.chunk = 64;
    if (c->o.kv_block_size <= 0) c->o.kv_block_size = 16;
    if (c->o.n_ctx > (int64_t)1 << 24 || c->o.chunk > 4096 || c->o.kv_block_size > 4096) {
        rc = hone_error_set(HONE_EINVAL, "context %lld, chunk %lld or KV block %lld out of range",
                            (long long)c->o.n_ctx, (long long)c->o.chunk,
                            (long long)c->o.kv_block_size);
        free(c);
        return rc;
    }
    if (c->o.kv_blocks <= 0) c->o.kv_blocks = (c->o.n_ctx + c->o.kv_block_size - 1) / c->o.kv_block_size;
    hone_slots_cpu_baseline(&c->slots);
    hone_model_make_resident(m);
    if ((rc = hone_pool_new(&c->pool, c->o.n_threads))) goto fail;
    c->o.n_threads = hone_pool_size(c->pool);
    if ((rc = hone_kv_cache_new(&c->kv, hp->n_layers, hp->n_kv_heads, hp->head_dim,
                                c->o.kv_block_size, c->o.kv_blocks)))
        goto fail;
    int64_t ch = c->o.chunk, qd = hp->n_heads * hp->head_dim, kvd = hp->n_kv_heads * hp->head_dim;
#define ALLOC(p, count)                                                              \
    if (!(c->p = aligned_alloc(64, ((size_t)(count) * sizeof *c->p + 63) / 64 * 64))) { \
        rc = hone_error_set(HONE_ENOMEM, "out of memory for activations");           \
        goto fail;                                                                   \
    }
    ALLOC(x, ch * hp->dim)
    ALLOC(h, ch * hp->dim)
    ALLOC(proj, ch * hp->dim)
    ALLOC(q, ch * qd)
    ALLOC(att, ch * qd)
    ALLOC(k, ch * kvd)
    ALLOC(v, ch * kvd)
    ALLOC(gate, ch * hp->ffn)
    ALLOC(up, ch * hp->ffn)
    ALLOC(scratch, (int64_t)c->o.n_threads * c->o.n_ctx)
    ALLOC(pos, ch)
    ALLOC(runs, ch)
    ALLOC(seq_rows, ch)
    ALLOC(pos_rows, ch)
    ALLOC(out_rows, ch)
    ALLOC(logits, ch * hp->n_vocab)
#undef ALLOC
    *out = c;
    return 0;
fail:
    hone_ctx_free(c);
    return rc;
}

void hone_ctx_free(hone_ctx *c)
{
    if (!c) return;
    hone_pool_free(c->pool);
    hone_kv_cache_free(c->kv);
    free(c->x); free(c->h); free(c->proj); free(c->q); free(c->att); free(c->k); free(c->v);
    free(c->gate); free(c->up); free(c->scratch); free(c->pos);
    free(c->runs); free(c->seq_rows); free(c->pos_rows); free(c->out_rows); free(c->logits);
    free(c);
}

const hone_model *hone_ctx_model(const hone_ctx *c) { return c->m; }
int64_t hone_ctx_n_ctx(const hone_ctx *c) { return c->o.n_ctx; }
int hone_ctx_n_threads(const hone_ctx *c) { return c->o.n_threads; }
hone_kv_cache *hone_ctx_kv(hone_ctx *c) { return c->kv; }
hone_slot_table *hone_ctx_slots(hone_ctx *c) { return &c->slots; }

void hone_ctx_set_hook(hone_ctx *c, hone_ctx_slot_hook hook, void *user)
{
    c->hook = hook;
    c->hook_user = user;
}
