/* The Llama-family forward pass on the CPU, chunk by chunk: the layer sequence of
 * engine/layers.c over this context's buffers. Every kernel is called through the slot table,
 * by its descriptor's generic caller, on the thread pool, via run(). */
#include "forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "kv_layout.h"
#include "layers.h"

/* A run: consecutive batch rows of one sequence at consecutive positions. */
typedef struct {
    int64_t t0, n, pos0;
    const hone_kv_seq *seq;
} att_run;

typedef struct {
    const hone_slot_desc *d;
    void *fn;
    const hone_slot_value *v;
    int scratch_arg;        /* the SCRATCH argument (-1: none): share ith gets its own row */
    float *scratch;         /* [nth][stride] */
    int64_t stride;
} slot_call;

/* Independent slot calls collected for one pool job (call_batch_flush): each share runs its
 * share of every call in turn, so the calls cost one dispatch and one barrier. */
#define CALL_BATCH_MAX 3
typedef struct {
    slot_call calls[CALL_BATCH_MAX];
    hone_slot_value v[CALL_BATCH_MAX][HONE_SLOT_MAX_ARGS];
    int n, on;
} call_batch;

struct hone_ctx {
    const hone_model *m;
    hone_hparams hp;
    hone_ctx_opts o;
    hone_slot_table slots;
    hone_pool *pool;
    hone_kv_cache *kv;
    hone_ctx_slot_hook hook;
    void *hook_user;
    call_batch batch;  /* while batch.on, run() collects calls instead of running them */
    /* activations for one chunk */
    float *x;       /* [chunk][dim] residual stream */
    float *h;       /* [chunk][dim] normalised */
    float *q;       /* [chunk][n_heads * head_dim] (q0, or the decode row of qkv) */
    float *k, *v;   /* [chunk][n_kv_heads * head_dim] (k0, v0, or in qkv) */
    float *q0, *k0, *v0;  /* the buffers q, k and v point at unless a fused qkv ran */
    float *qkv;     /* [n_heads * head_dim + 2 * n_kv_heads * head_dim]: a fused qkv's row */
    float *nscratch;/* [n_threads][dim]: each share's norm of a fused rmsnorm_matvec */
    float *att;     /* [chunk][n_heads * head_dim] */
    float *proj;    /* [chunk][dim] output projections */
    float *gate;    /* [chunk][ffn] */
    float *up;      /* [chunk][ffn] */
    float *scratch; /* [n_threads][att_stride]: attention scores, a windowed row's decode scratch */
    float *att_part;/* [chunk][att_stride]: each decode run's attention_decode scratch, which its
                     * shares share (engine/kv_layout.h hone_att_decode_scratch_floats) */
    int64_t att_stride;
    int64_t win;    /* the largest sliding window, at most n_ctx (0: none) */
    float *wk, *wv; /* [n_threads][win][n_kv_heads * head_dim]: a windowed query's keys, gathered */
    int32_t *pos;   /* [chunk] positions of the piece's rows */
    att_run *runs;           /* [chunk] attention runs of the piece */
    hone_kv_seq **seq_rows;  /* [chunk] */
    int32_t *pos_rows;       /* [chunk] */
    float **out_rows;        /* [chunk] */
    float *logits;  /* [chunk][n_vocab] when destination rows are scattered */
    /* the piece being run (forward_piece), for the layer operations */
    int64_t n_runs, piece_n;
    hone_kv_seq *const *piece_seqs;  /* [piece_n] */
    const int32_t *piece_tokens;     /* [piece_n] */
    float *const *piece_out;         /* [piece_n] */
    float *const *piece_hidden;      /* [piece_n] or NULL: hone_batch.hidden_rows */
    float **hidden_rows;             /* [chunk] */
    int pruned;                      /* the piece's wanted rows are already at the front (cpu_prune) */
    int64_t layer_limit;             /* > 0: run only the first layer_limit layers (self-speculation) */
};

/* ---- slot dispatch: every call goes through its descriptor's generic caller ---- */

static void trampoline(void *arg, int ith, int nth)
{
    const slot_call *c = arg;
    if (c->scratch_arg < 0) {
        c->d->invoke(c->fn, c->v, ith, nth);
        return;
    }
    hone_slot_value v[HONE_SLOT_MAX_ARGS];
    memcpy(v, c->v, sizeof v);
    v[c->scratch_arg].p = c->scratch + ith * c->stride;
    c->d->invoke(c->fn, v, ith, nth);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Runs slot id at shape s on the pool: v holds its tensor arguments in signature order, the
 * scalars come from s. Small calls (below the descriptor's nth_max_dim elements of dim 0) run
 * on the calling thread alone. A SCRATCH argument (rmsnorm_matvec's, at most dim floats) is
 * each share's own row of c->nscratch. The hook, when set, gets the call's time and shape. */
static void run(hone_ctx *c, int id, const hone_slot_shape *s, hone_slot_value *v)
{
    const hone_slot_desc *d = hone_slots_desc(id);
    hone_slots_scalars(d, s, v);
    slot_call call = {d, c->slots.fn[id], v, -1, c->nscratch, c->hp.dim};
    for (int a = 0; a < d->n_args; a++)
        if (d->args[a].role == HONE_SLOT_ARG_SCRATCH) call.scratch_arg = a;
    int nth = d->nth_max_dim && s->d[0] < d->nth_max_dim ? 1 : 0;
    if (c->batch.on && !nth && !c->hook && c->batch.n < CALL_BATCH_MAX) {
        int i = c->batch.n++;
        memcpy(c->batch.v[i], v, sizeof c->batch.v[i]);
        call.v = c->batch.v[i];
        c->batch.calls[i] = call;
        return;
    }
    if (!c->hook) {
        hone_pool_run(c->pool, trampoline, &call, nth);
        return;
    }
    uint64_t t0 = now_ns();
    hone_pool_run(c->pool, trampoline, &call, nth);
    c->hook(c->hook_user, id, now_ns() - t0, s);
}

static void batch_trampoline(void *arg, int ith, int nth)
{
    const call_batch *b = arg;
    for (int i = 0; i < b->n; i++) trampoline((void *)&b->calls[i], ith, nth);
}

/* From here to call_batch_flush, run() collects the calls that would take the whole pool
 * (calls independent of each other: their outputs are no other's input). Without a hook only:
 * the profile times every call on its own. */
static int call_batch_begin(hone_ctx *c)
{
    if (c->hook) return 0;
    c->batch.on = 1;
    c->batch.n = 0;
    return 1;
}

/* The collected calls as one pool job. */
static void call_batch_flush(hone_ctx *c)
{
    c->batch.on = 0;
    if (c->batch.n) hone_pool_run(c->pool, batch_trampoline, &c->batch, 0);
    c->batch.n = 0;
}

static hone_slot_shape shape_of(int32_t dtype)
{
    hone_slot_shape s;
    memset(&s, 0, sizeof s);
    s.dtype = dtype;
    return s;
}

static void op_matmul(hone_ctx *c, float *Y, const hone_weight *w, const float *X, int64_t n)
{
    hone_slot_shape s = shape_of(w->dtype);
    hone_slot_value v[HONE_SLOT_MAX_ARGS] = {{.p = Y}, {.cp = w->data}, {.cp = X}};
    int id;
    if (n == 1) {
        id = hone_slots_matvec_id(w->dtype);
        s.d[0] = w->rows; s.d[1] = w->cols;
    } else {
        id = hone_slots_matmul_id(w->dtype);
        s.d[0] = n; s.d[1] = w->rows; s.d[2] = w->cols;
    }
    run(c, id, &s, v);
}

static void op_rmsnorm(hone_ctx *c, float *y, const float *x, const hone_weight *w, int64_t n)
{
    hone_slot_shape s = shape_of(-1);
    s.d[0] = n; s.d[1] = c->hp.dim; s.f[0] = c->hp.norm_eps;
    hone_slot_value v[HONE_SLOT_MAX_ARGS] = {{.p = y}, {.cp = x}, {.cp = w->data}};
    run(c, HONE_SLOT_RMSNORM, &s, v);
}

static void op_add(hone_ctx *c, float *y, const float *a, const float *b, int64_t n)
{
    hone_slot_shape s = shape_of(-1);
    s.d[0] = n;
    hone_slot_value v[HONE_SLOT_MAX_ARGS] = {{.p = y}, {.cp = a}, {.cp = b}};
    run(c, HONE_SLOT_ADD, &s, v);
}

/* Adds a bias row to each of n rows (qwen2's q/k/v biases) through the add slot. */
static void op_bias(hone_ctx *c, float *y, const hone_weight *b, int64_t n)
{
    if (!b->data) return;
    for (int64_t t = 0; t < n; t++) op_add(c, y + t * b->cols, y + t * b->cols, b->data, b->cols);
}

static void op_rope(hone_ctx *c, float *x, int64_t n, int64_t heads)
{
    hone_slot_shape s = shape_of(-1);
    s.d[0] = n; s.d[1] = heads; s.d[2] = c->hp.head_dim; s.d[3] = c->hp.n_rot;
    s.f[0] = c->hp.rope_base; s.flag = c->hp.rope_neox;
    hone_slot_value v[HONE_SLOT_MAX_ARGS] = {{.p = x}, {.cp = c->pos}};
    run(c, HONE_SLOT_ROPE, &s, v);
}

static void op_embed(hone_ctx *c, const int32_t *tokens, int64_t n)
{
    const hone_weight *emb = hone_model_tok_embd(c->m);
    hone_slot_shape s = shape_of(emb->dtype);
    s.d[0] = n; s.d[1] = c->hp.dim; s.d[2] = emb->rows;
    hone_slot_value v[HONE_SLOT_MAX_ARGS] = {{.p = c->x}, {.cp = emb->data}, {.i32 = 0}, {.cp = tokens}};
    run(c, HONE_SLOT_EMBED, &s, v);
}

static void op_swiglu(hone_ctx *c, float *out, const float *g, const float *u, int64_t n)
{
    hone_slot_shape s = shape_of(-1);
    s.d[0] = n;
    hone_slot_value v[HONE_SLOT_MAX_ARGS] = {{.p = out}, {.cp = g}, {.cp = u}};
    run(c, HONE_SLOT_SWIGLU, &s, v);
}

typedef struct {
    hone_ctx *c;
    const att_run *runs;
    int64_t n_runs;
    int64_t layer;
    int prefill;        /* 1: the runs of length > 1; 0: the single-token runs */
} att_job;

/* The rows of a run some of whose queries see fewer keys than they follow (a sliding window of
 * win keys, the query's own included): each row's keys pos - win + 1 .. pos are gathered into
 * this thread's contiguous buffers (one block of win keys) and attended with the decode slot,
 * as a query at the window's length, one share of one (its scratch is this thread's). The rows
 * are dealt to the shares in turn. Rows whose window starts at 0 read the same keys in the
 * same order as the paged path, so they get the same bits. */
static void att_windowed(hone_ctx *c, int64_t layer, const att_run *run, int64_t win,
                         float *scratch, int ith, int share, int nth)
{
    const hone_hparams *hp = &c->hp;
    int64_t bs = hone_kv_cache_block_size(c->kv), qd = hp->n_heads * hp->head_dim;
    int64_t kvh = hp->n_kv_heads, hd = hp->head_dim, row = kvh * hd;
    const float *kc = hone_kv_cache_k(c->kv, layer), *vc = hone_kv_cache_v(c->kv, layer);
    float *wk = c->wk + ith * c->win * row, *wv = c->wv + ith * c->win * row;
    static const int32_t one_block[1] = {0};
    for (int64_t t = share; t < run->n; t += nth) {
        int64_t pos = run->pos0 + t, first = pos + 1 > win ? pos + 1 - win : 0, n_kv = pos + 1 - first;
        /* into one block of win slots, laid out as the cache's blocks (engine/kv_layout.h) */
        for (int64_t j = 0; j < n_kv; j++)
            for (int64_t h = 0; h < kvh; h++) {
                int64_t from = hone_kv_offset(run->seq->blocks, first + j, bs, kvh, h, hd);
                int64_t to = hone_kv_offset(one_block, j, win, kvh, h, hd);
                memcpy(wk + to, kc + from, (size_t)hd * sizeof(float));
                memcpy(wv + to, vc + from, (size_t)hd * sizeof(float));
            }
        int64_t rq = (run->t0 + t) * qd;
        HONE_SLOTS_FN(&c->slots, HONE_SLOT_ATTENTION_DECODE, hone_slot_attention_decode_fn)(
            c->att + rq, c->q + rq, wk, wv, one_block, n_kv, win, hp->n_heads, hp->n_kv_heads,
            hp->head_dim, hp->attn_scale, scratch, 0, 1);
        hone_cpu_attention_decode_fold(c->att + rq, scratch, hp->n_heads, hp->head_dim, n_kv);
    }
}

/* Whether some of run's queries see fewer keys than they follow (a window of win keys; 0: none):
 * att_windowed's rows. */
static int att_run_windowed(const att_run *run, int64_t win) { return win && run->pos0 + run->n > win; }

/* One pool job over many runs: each share does its part of every run, so a batch of many
 * decoding sequences costs one dispatch per layer, not one per sequence. */
static void att_trampoline(void *arg, int ith, int nth)
{
    att_job *j = arg;
    hone_ctx *c = j->c;
    const hone_hparams *hp = &c->hp;
    float scale = hp->attn_scale;
    float *kc = hone_kv_cache_k(c->kv, j->layer), *vc = hone_kv_cache_v(c->kv, j->layer);
    int64_t bs = hone_kv_cache_block_size(c->kv), qd = hp->n_heads * hp->head_dim;
    float *scratch = c->scratch + ith * c->att_stride;
    int64_t win = hone_model_layer_window(c->m, j->layer);
    for (int64_t r = 0; r < j->n_runs; r++) {
        const att_run *run = &j->runs[r];
        if ((run->n > 1) != j->prefill) continue;
        /* thread ith takes share (ith + r) % nth of run r: a permutation per run, so every
         * share is still done once, and uneven shares (9 heads on 2 threads) even out */
        int share = (int)((ith + r) % nth);
        if (att_run_windowed(run, win)) {
            att_windowed(c, j->layer, run, win, scratch, ith, share, nth);
            continue;
        }
        if (run->n == 1) /* the run's own scratch, shared by its shares */
            HONE_SLOTS_FN(&c->slots, HONE_SLOT_ATTENTION_DECODE, hone_slot_attention_decode_fn)(c->att + run->t0 * qd, c->q + run->t0 * qd, kc, vc,
                                      run->seq->blocks, run->pos0 + 1, bs, hp->n_heads,
                                      hp->n_kv_heads, hp->head_dim, scale, c->att_part + r * c->att_stride,
                                      share, nth);
        else
            HONE_SLOTS_FN(&c->slots, HONE_SLOT_ATTENTION_PREFILL, hone_slot_attention_prefill_fn)(c->att + run->t0 * qd, c->q + run->t0 * qd, kc, vc,
                                       run->seq->blocks, run->n, run->pos0, bs, hp->n_heads,
                                       hp->n_kv_heads, hp->head_dim, scale, scratch, share, nth);
    }
}

/* The caller's part of the decode slot (its descriptor's finish), after the pool job: each
 * decode run's rows of more than HONE_ATT_SEG keys folded from the partials its shares left in
 * the run's scratch (the windowed rows fold theirs in att_windowed). */
static void att_fold(hone_ctx *c, int64_t layer, const att_run *runs, int64_t n_runs)
{
    const hone_hparams *hp = &c->hp;
    int64_t win = hone_model_layer_window(c->m, layer), qd = hp->n_heads * hp->head_dim;
    for (int64_t r = 0; r < n_runs; r++) {
        const att_run *run = &runs[r];
        if (run->n != 1 || att_run_windowed(run, win)) continue;
        hone_cpu_attention_decode_fold(c->att + run->t0 * qd, c->att_part + r * c->att_stride, hp->n_heads,
                                       hp->head_dim, run->pos0 + 1);
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
        uint64_t t0 = c->hook ? now_ns() : 0;
        hone_pool_run(c->pool, att_trampoline, &job, 0);
        if (!prefill) att_fold(c, layer, runs, n_runs);
        if (c->hook) {
            /* the shape of the whole call: its query rows, and as context the sum of its
             * sequences' lengths (the profile aggregates over that) */
            hone_slot_shape s = shape_of(-1);
            s.d[0] = rows; s.d[2] = keys; s.d[1] = keys - rows;
            s.d[3] = hone_kv_cache_block_size(c->kv);
            s.d[4] = c->hp.n_heads; s.d[5] = c->hp.n_kv_heads; s.d[6] = c->hp.head_dim;
            c->hook(c->hook_user, id, now_ns() - t0, &s);
        }
    }
}

/* Copies the piece's k and v rows into their sequences' blocks (host work, not a slot). */
static void store_kv(hone_ctx *c, int64_t layer, hone_kv_seq *const *seqs, const int32_t *pos,
                     int64_t n)
{
    int64_t kvh = c->hp.n_kv_heads, hd = c->hp.head_dim, row = kvh * hd;
    int64_t bs = hone_kv_cache_block_size(c->kv);
    float *kc = hone_kv_cache_k(c->kv, layer), *vc = hone_kv_cache_v(c->kv, layer);
    for (int64_t t = 0; t < n; t++)
        for (int64_t h = 0; h < kvh; h++) {
            int64_t off = hone_kv_offset(seqs[t]->blocks, pos[t], bs, kvh, h, hd);
            memcpy(kc + off, c->k + t * row + h * hd, (size_t)hd * sizeof(float));
            memcpy(vc + off, c->v + t * row + h * hd, (size_t)hd * sizeof(float));
        }
}

/* ---- the layer sequence's operations on the CPU (engine/layers.h) ---- */

static float *act(hone_ctx *c, hone_act a)
{
    switch (a) {
    case HONE_ACT_X: return c->x;
    case HONE_ACT_H: return c->h;
    case HONE_ACT_Q: return c->q;
    case HONE_ACT_K: return c->k;
    case HONE_ACT_V: return c->v;
    case HONE_ACT_ATT: return c->att;
    case HONE_ACT_PROJ: return c->proj;
    case HONE_ACT_GATE: return c->gate;
    case HONE_ACT_UP: return c->up;
    default: return c->logits;
    }
}

static int cpu_embed(void *p, hone_act out, int64_t n)
{
    hone_ctx *c = p;
    (void)out;
    op_embed(c, c->piece_tokens, n);
    return 0;
}

static int cpu_rmsnorm(void *p, hone_act y, hone_act x, int64_t layer, hone_wsel w, int64_t n)
{
    hone_ctx *c = p;
    op_rmsnorm(c, act(c, y), act(c, x), hone_layers_weight(c->m, layer, w), n);
    return 0;
}

/* Where the wanted rows' logits go: straight into the caller's rows when they are
 * contiguous, otherwise c->logits, scattered afterwards by logits_scatter. */
static float *logits_dst(hone_ctx *c)
{
    int64_t nv = c->hp.n_vocab, np = c->piece_n;
    float *const *out_rows = c->piece_out;
    float *first = NULL;
    for (int64_t t = 0, r = 0; t < np; t++)
        if (out_rows[t]) {
            if (!first) first = out_rows[t];
            else if (out_rows[t] != first + r * nv) return c->logits;
            r++;
        }
    return first;
}

static void logits_scatter(hone_ctx *c, const float *dst)
{
    int64_t nv = c->hp.n_vocab;
    if (dst != c->logits) return;
    for (int64_t t = 0, r = 0; t < c->piece_n; t++)
        if (c->piece_out[t]) {
            memcpy(c->piece_out[t], c->logits + r * nv, (size_t)nv * sizeof(float));
            r++;
        }
}

static int cpu_matmul(void *p, hone_act y, int64_t layer, hone_wsel w, hone_act x, int64_t n)
{
    hone_ctx *c = p;
    const hone_weight *W = hone_layers_weight(c->m, layer, w);
    if (y != HONE_ACT_LOGITS) {
        op_matmul(c, act(c, y), W, act(c, x), n);
        return 0;
    }
    float *dst = logits_dst(c);
    op_matmul(c, dst, W, act(c, x), n);
    logits_scatter(c, dst);
    return 0;
}

static int cpu_bias(void *p, hone_act y, int64_t layer, hone_wsel w, int64_t n)
{
    hone_ctx *c = p;
    op_bias(c, act(c, y), hone_layers_weight(c->m, layer, w), n);
    return 0;
}

static int cpu_rope(void *p, hone_act x, int64_t n, int64_t heads)
{
    hone_ctx *c = p;
    op_rope(c, act(c, x), n, heads);
    return 0;
}

static int cpu_store_kv(void *p, int64_t layer, int64_t n)
{
    hone_ctx *c = p;
    store_kv(c, layer, c->piece_seqs, c->pos, n);
    return 0;
}

static int cpu_attention(void *p, int64_t layer, int64_t n)
{
    hone_ctx *c = p;
    (void)n;
    op_attention(c, layer, c->runs, c->n_runs);
    return 0;
}

static int cpu_add(void *p, hone_act y, hone_act a, hone_act b, int64_t elems)
{
    hone_ctx *c = p;
    op_add(c, act(c, y), act(c, a), act(c, b), elems);
    return 0;
}

static int cpu_swiglu(void *p, hone_act out, hone_act g, hone_act u, int64_t elems)
{
    hone_ctx *c = p;
    op_swiglu(c, act(c, out), act(c, g), act(c, u), elems);
    return 0;
}

/* The rows whose hidden state is wanted (hone_batch.hidden_rows): the output norm of their
 * x rows, gathered into proj (free after the last residual add), normed into h (free until
 * the head's own norm) and copied out. */
static void hidden_out(hone_ctx *c, int64_t n)
{
    int64_t rows = 0, dim = c->hp.dim;
    if (!c->piece_hidden) return;
    for (int64_t t = 0; t < n; t++)
        if (c->piece_hidden[t]) memcpy(c->proj + rows++ * dim, c->x + t * dim, (size_t)dim * sizeof(float));
    if (!rows) return;
    op_rmsnorm(c, c->h, c->proj, hone_model_output_norm(c->m), rows);
    for (int64_t t = 0, r = 0; t < n; t++)
        if (c->piece_hidden[t]) memcpy(c->piece_hidden[t], c->h + r++ * dim, (size_t)dim * sizeof(float));
}

/* ---- the architecture operations (qwen3, gemma3) ---- */

/* x *= s: host work (n * dim multiplies once per piece, not a hot slot). */
static int cpu_scale(void *p, hone_act x, float s, int64_t elems)
{
    float *v = act(p, x);
    for (int64_t i = 0; i < elems; i++) v[i] *= s;
    return 0;
}

/* Per-head RMSNorm in place through the rmsnorm slot: n * heads rows of head_dim. */
static int cpu_head_norm(void *p, hone_act x, int64_t layer, hone_wsel w, int64_t n, int64_t heads)
{
    hone_ctx *c = p;
    float *v = act(c, x);
    hone_slot_shape s = shape_of(-1);
    s.d[0] = n * heads; s.d[1] = c->hp.head_dim; s.f[0] = c->hp.norm_eps;
    hone_slot_value a[HONE_SLOT_MAX_ARGS] = {{.p = v}, {.cp = v},
                                             {.cp = hone_layers_weight(c->m, layer, w)->data}};
    run(c, HONE_SLOT_RMSNORM, &s, a);
    return 0;
}

static int cpu_geglu(void *p, hone_act out, hone_act g, hone_act u, int64_t elems)
{
    hone_ctx *c = p;
    hone_slot_shape s = shape_of(-1);
    s.d[0] = elems;
    hone_slot_value v[HONE_SLOT_MAX_ARGS] = {{.p = act(c, out)}, {.cp = act(c, g)}, {.cp = act(c, u)}};
    run(c, HONE_SLOT_GEGLU, &s, v);
    return 0;
}

/* logits = cap * tanh(logits / cap) on the caller's rows (where the head left them). */
static int cpu_softcap(void *p, hone_act x, float cap, int64_t elems)
{
    hone_ctx *c = p;
    (void)x; (void)elems;
    for (int64_t t = 0; t < c->piece_n; t++) {
        float *row = c->piece_out[t];
        if (!row) continue;
        for (int64_t i = 0; i < c->hp.n_vocab; i++) row[i] = cap * (float)tanh((double)(row[i] / cap));
    }
    return 0;
}

/* rope at layer's base; with llama3's frequency factors, the rope_freqs slot. */
static int cpu_rope_layer(void *p, hone_act x, int64_t layer, int64_t n, int64_t heads)
{
    hone_ctx *c = p;
    float base = c->hp.rope_base;
    if (!c->hp.rope_freqs) {
        c->hp.rope_base = hone_model_layer_rope_base(c->m, layer);
        op_rope(c, act(c, x), n, heads);
        c->hp.rope_base = base;
        return 0;
    }
    hone_slot_shape s = shape_of(-1);
    s.d[0] = n; s.d[1] = heads; s.d[2] = c->hp.head_dim; s.d[3] = c->hp.n_rot; s.d[4] = c->hp.n_rot / 2;
    s.f[0] = hone_model_layer_rope_base(c->m, layer); s.flag = c->hp.rope_neox;
    hone_slot_value v[HONE_SLOT_MAX_ARGS] = {{.p = act(c, x)}, {.cp = c->pos},
                                             {.cp = hone_model_rope_freqs(c->m)->data}};
    run(c, HONE_SLOT_ROPE_FREQS, &s, v);
    return 0;
}

/* The rows whose logits are wanted moved to the front of x (and of att, with_att), in order;
 * returns their count. */
static int64_t wanted_to_front(hone_ctx *c, int64_t n, int with_att)
{
    int64_t rows = 0, dim = c->hp.dim, ad = c->hp.n_heads * c->hp.head_dim;
    for (int64_t t = 0; t < n; t++)
        if (c->piece_out[t]) {
            if (rows != t) {
                memcpy(c->x + rows * dim, c->x + t * dim, (size_t)dim * sizeof(float));
                if (with_att) memcpy(c->att + rows * ad, c->att + t * ad, (size_t)ad * sizeof(float));
            }
            rows++;
        }
    return rows;
}

/* The wanted rows, gathered to the front of x (already there when cpu_prune ran). */
static int64_t cpu_gather(void *p, int64_t n)
{
    hone_ctx *c = p;
    if (c->pruned) return n;
    hidden_out(c, n);
    return wanted_to_front(c, n, 0);
}

/* After the last layer's attention: the rows whose logits are wanted, gathered to the front of
 * x and att, go on alone (a prompt's other rows skip the last layer's output projection and
 * FFN; every row is computed on its own, so the wanted rows' bits do not change). Not where a
 * row's hidden state is wanted: hidden_out reads every row of x. */
static int64_t cpu_prune(void *p, int64_t n)
{
    hone_ctx *c = p;
    if (c->piece_hidden) return n;
    c->pruned = 1;
    return wanted_to_front(c, n, 1);
}

/* ---- the fused operations: only for a one-token piece, only where the slot table holds a
 * kernel for the fused slot (the baseline table holds none: engine/slots.h) ---- */

/* The fused slot of kind for weight dtype dt when it is provided and the piece (the head: its
 * wanted rows) is one row; -1 otherwise. */
static int fused_slot(const hone_ctx *c, hone_slot_kind kind, int dt, int64_t n)
{
    int id = n == 1 ? hone_slots_fused_id(kind, dt) : -1;
    return id >= 0 && c->slots.fn[id] ? id : -1;
}

static int cpu_qkv(void *p, int64_t layer, hone_act x, int64_t n)
{
    hone_ctx *c = p;
    const hone_weight *wq = hone_layers_weight(c->m, layer, HONE_W_Q);
    const hone_weight *wk = hone_layers_weight(c->m, layer, HONE_W_K);
    const hone_weight *wv = hone_layers_weight(c->m, layer, HONE_W_V);
    int id = wk->dtype == wq->dtype && wv->dtype == wq->dtype ? fused_slot(c, HONE_SLOT_KIND_QKV, wq->dtype, n) : -1;
    c->q = c->q0;
    c->k = c->k0;
    c->v = c->v0;
    if (id < 0) { /* the three matmuls, as one pool job */
        if (!call_batch_begin(c)) return HONE_LAYERS_UNFUSED;
        op_matmul(c, c->q, wq, act(c, x), n);
        op_matmul(c, c->k, wk, act(c, x), n);
        op_matmul(c, c->v, wv, act(c, x), n);
        call_batch_flush(c);
        return 0;
    }
    /* one row of q, k, v, concatenated: the rest of the step reads them where they lie */
    c->q = c->qkv;
    c->k = c->qkv + wq->rows;
    c->v = c->k + wk->rows;
    hone_slot_shape s = shape_of(wq->dtype);
    s.d[0] = wq->rows; s.d[1] = wk->rows; s.d[2] = wv->rows; s.d[3] = wq->cols;
    s.d[4] = wq->rows + wk->rows + wv->rows;
    hone_slot_value v[HONE_SLOT_MAX_ARGS] = {{.p = c->qkv}, {.cp = wq->data}, {.cp = wk->data},
                                             {.cp = wv->data}, {.cp = act(c, x)}};
    run(c, id, &s, v);
    return 0;
}

static int cpu_ffn(void *p, hone_act out, int64_t layer, hone_act x, int64_t n)
{
    hone_ctx *c = p;
    const hone_weight *wg = hone_layers_weight(c->m, layer, HONE_W_GATE);
    const hone_weight *wu = hone_layers_weight(c->m, layer, HONE_W_UP);
    int id = wu->dtype == wg->dtype ? fused_slot(c, HONE_SLOT_KIND_FFN, wg->dtype, n) : -1;
    if (id < 0) { /* the gate and up matmuls as one pool job, then the swiglu */
        if (!call_batch_begin(c)) return HONE_LAYERS_UNFUSED;
        op_matmul(c, c->gate, wg, act(c, x), n);
        op_matmul(c, c->up, wu, act(c, x), n);
        call_batch_flush(c);
        op_swiglu(c, act(c, out), c->gate, c->up, n * c->hp.ffn);
        return 0;
    }
    hone_slot_shape s = shape_of(wg->dtype);
    s.d[0] = wg->rows; s.d[1] = wg->cols;
    hone_slot_value v[HONE_SLOT_MAX_ARGS] = {{.p = act(c, out)}, {.cp = wg->data}, {.cp = wu->data},
                                             {.cp = act(c, x)}};
    run(c, id, &s, v);
    return 0;
}

static int cpu_norm_matmul(void *p, hone_act y, int64_t layer, hone_wsel norm, hone_wsel w,
                           hone_act x, int64_t n)
{
    hone_ctx *c = p;
    const hone_weight *W = hone_layers_weight(c->m, layer, w);
    const hone_weight *g = hone_layers_weight(c->m, layer, norm);
    int id = fused_slot(c, HONE_SLOT_KIND_RMSNORM_MATVEC, W->dtype, n);
    if (id < 0) return HONE_LAYERS_UNFUSED;
    float *dst = y == HONE_ACT_LOGITS ? logits_dst(c) : act(c, y);
    hone_slot_shape s = shape_of(W->dtype);
    s.d[0] = W->rows; s.d[1] = W->cols; s.f[0] = c->hp.norm_eps;
    hone_slot_value v[HONE_SLOT_MAX_ARGS] = {{.p = dst}, {.cp = W->data}, {.cp = act(c, x)},
                                             {.cp = g->data}};
    run(c, id, &s, v);
    if (y == HONE_ACT_LOGITS) logits_scatter(c, dst);
    return 0;
}

static const hone_layer_ops cpu_ops = {
    .embed = cpu_embed, .rmsnorm = cpu_rmsnorm, .matmul = cpu_matmul, .bias = cpu_bias,
    .rope = cpu_rope, .store_kv = cpu_store_kv, .attention = cpu_attention, .add = cpu_add,
    .swiglu = cpu_swiglu, .gather = cpu_gather, .prune = cpu_prune,
    .qkv = cpu_qkv, .ffn = cpu_ffn, .norm_matmul = cpu_norm_matmul,
    .scale = cpu_scale, .head_norm = cpu_head_norm, .geglu = cpu_geglu, .softcap = cpu_softcap,
    .rope_layer = cpu_rope_layer, .rope_freqs = 1, .windows = 1,
};

/* Runs n <= chunk batch rows through the model. out_rows[t] is where row t's logits go
 * (NULL: not wanted). Positions come from pos[t]; KV blocks are already reserved. */
static void forward_piece(hone_ctx *c, hone_kv_seq *const *seqs, const int32_t *tokens,
                          const int32_t *pos, int64_t n, float *const *out_rows,
                          float *const *hidden_rows)
{
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
    c->n_runs = n_runs;
    c->piece_seqs = seqs;
    c->piece_tokens = tokens;
    c->piece_out = out_rows;
    c->piece_hidden = hidden_rows;
    c->piece_n = n;
    c->pruned = 0;
    if (c->layer_limit > 0) hone_layers_run_upto(c->m, &cpu_ops, c, n, c->layer_limit);
    else hone_layers_run(c->m, &cpu_ops, c, n); /* the CPU operations cannot fail */
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
        for (int64_t t = 0; t < m; t++) c->hidden_rows[t] = b->hidden_rows ? b->hidden_rows[t0 + t] : NULL;
        forward_piece(c, b->seqs + t0, b->tokens + t0, b->pos + t0, m, out_rows,
                      b->hidden_rows ? c->hidden_rows : NULL);
        for (int64_t t = 0; t < m; t++) b->seqs[t0 + t]->n_tokens++;
    }
    return 0;
}

int hone_ctx_forward_batch_layers(hone_ctx *c, const hone_batch *b, int64_t n_layers)
{
    c->layer_limit = n_layers;
    int rc = hone_ctx_forward_batch(c, b);
    c->layer_limit = 0;
    return rc;
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
        forward_piece(c, c->seq_rows, tokens + t0, c->pos_rows, m, c->out_rows, NULL);
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
    if (c->o.n_ctx <= 0) c->o.n_ctx = hp->n_ctx_train; /* every context the model supports */
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
    if ((rc = hone_layers_check(m, &cpu_ops, "the CPU backend"))) {
        free(c);
        return rc;
    }
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
    ALLOC(q0, ch * qd)
    ALLOC(att, ch * qd)
    ALLOC(k0, ch * kvd)
    ALLOC(v0, ch * kvd)
    ALLOC(qkv, qd + 2 * kvd)
    ALLOC(nscratch, (int64_t)c->o.n_threads * hp->dim)
    c->q = c->q0;
    c->k = c->k0;
    c->v = c->v0;
    ALLOC(gate, ch * hp->ffn)
    ALLOC(up, ch * hp->ffn)
    c->att_stride = hone_att_decode_scratch_floats(hp->n_heads, hp->head_dim, c->o.n_ctx);
    ALLOC(scratch, (int64_t)c->o.n_threads * c->att_stride)
    ALLOC(att_part, ch * c->att_stride)
    for (int64_t l = 0; l < hp->n_layers; l++) {
        int64_t w = hone_model_layer_window(m, l);
        if (w > c->win) c->win = w < c->o.n_ctx ? w : c->o.n_ctx;
    }
    if (c->win) {
        ALLOC(wk, (int64_t)c->o.n_threads * c->win * kvd)
        ALLOC(wv, (int64_t)c->o.n_threads * c->win * kvd)
    }
    ALLOC(pos, ch)
    ALLOC(runs, ch)
    ALLOC(seq_rows, ch)
    ALLOC(pos_rows, ch)
    ALLOC(out_rows, ch)
    ALLOC(hidden_rows, ch)
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
    free(c->x); free(c->h); free(c->proj); free(c->q0); free(c->att); free(c->k0); free(c->v0);
    free(c->qkv); free(c->nscratch);
    free(c->gate); free(c->up); free(c->scratch); free(c->att_part); free(c->pos); free(c->wk); free(c->wv);
    free(c->runs); free(c->seq_rows); free(c->pos_rows); free(c->out_rows); free(c->hidden_rows); free(c->logits);
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
