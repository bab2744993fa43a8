/* The guard's cases (see cases.h): shape sets, fresh inputs, layout, calls and oracles. */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candidates/worker.h"
#include "engine/dtype.h"
#include "engine/error.h"
#include "guard/oracle.h"

/* SmolLM2-135M, always in the set so that tiny test models still give realistic timing shapes. */
#define REF_DIM 576
#define REF_HEADS 9
#define REF_KV_HEADS 3
#define REF_HEAD_DIM 64
#define REF_FFN 1536
#define REF_CHUNK 64
#define MAX_WEIGHT_BYTES ((int64_t)32 << 20) /* bigger model matrices are left to model parity */
#define MAX_CASES 48

uint64_t hone_cases_rand(uint64_t *state) /* splitmix64 */
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rng_state;
static uint64_t rnd_u64(void) { return hone_cases_rand(&rng_state); }
static double rnd_unit_s(uint64_t *st) { return (double)(hone_cases_rand(st) >> 11) * 0x1p-53; }
static float rnd_f_s(uint64_t *st, double lo, double hi) { return (float)(lo + (hi - lo) * rnd_unit_s(st)); }
static float rnd_f(double lo, double hi) { return rnd_f_s(&rng_state, lo, hi); }

/* An "edge value": mostly ordinary, sometimes large, tiny, zero or subnormal. */
static float rnd_edge(double big)
{
    switch (rnd_u64() % 8) {
    case 0: return rnd_f(-big, big);
    case 1: return 0.0f;
    case 2: return rnd_f(-1e-40, 1e-40); /* subnormal */
    case 3: return (rnd_u64() & 1) ? (float)big : (float)-big;
    default: return rnd_f(-2, 2);
    }
}

typedef struct {
    hone_case c[MAX_CASES];
    int n;
    int edge[MAX_CASES];
} builder;

static hone_case *add(builder *b, hone_slot_id slot)
{
    if (b->n >= MAX_CASES) return NULL;
    hone_case *c = &b->c[b->n++];
    memset(c, 0, sizeof *c);
    c->slot = slot;
    return c;
}

static int same_case(const hone_case *a, const hone_case *b)
{
    return a->dtype == b->dtype && a->n == b->n && a->rows == b->rows && a->cols == b->cols &&
           a->dim == b->dim && a->heads == b->heads && a->kv_heads == b->kv_heads &&
           a->head_dim == b->head_dim && a->n_rot == b->n_rot && a->n_kv == b->n_kv &&
           a->block_size == b->block_size && a->pos0 == b->pos0 && a->neox == b->neox;
}

/* Drops the last case if it repeats an earlier one. */
static void dedup(builder *b)
{
    for (int i = 0; i + 1 < b->n; i++)
        if (same_case(&b->c[i], &b->c[b->n - 1]) && b->edge[i] == b->edge[b->n - 1]) {
            b->n--;
            return;
        }
}

static void elementwise(builder *b, hone_slot_id slot, int64_t n, int edge)
{
    hone_case *c = add(b, slot);
    if (!c) return;
    c->n = n;
    b->edge[b->n - 1] = edge;
    dedup(b);
}

static void mat(builder *b, hone_slot_id slot, int dt, int64_t n, int64_t rows, int64_t cols)
{
    if (hone_dtype_block_size(dt) == HONE_QK && cols % HONE_QK) return;
    if (hone_dtype_row_bytes(dt, cols) * rows > MAX_WEIGHT_BYTES) return;
    hone_case *c = add(b, slot);
    if (!c) return;
    c->dtype = dt;
    c->n = n;
    c->rows = rows;
    c->cols = cols;
    dedup(b);
}

static void rmsnorm(builder *b, int64_t n, int64_t dim, float eps, int edge)
{
    hone_case *c = add(b, HONE_SLOT_RMSNORM);
    if (!c) return;
    c->n = n;
    c->dim = dim;
    c->eps = eps;
    b->edge[b->n - 1] = edge;
    dedup(b);
}

static void rope(builder *b, int64_t n, int64_t heads, int64_t hd, int64_t n_rot, float base, int neox)
{
    hone_case *c = add(b, HONE_SLOT_ROPE);
    if (!c) return;
    c->n = n;
    c->heads = heads;
    c->head_dim = hd;
    c->n_rot = n_rot;
    c->freq_base = base;
    c->neox = neox;
    dedup(b);
}

static void attn(builder *b, hone_slot_id slot, int64_t n, int64_t pos0_or_nkv, int64_t bs,
                 int64_t heads, int64_t kvh, int64_t hd, int edge)
{
    hone_case *c = add(b, slot);
    if (!c) return;
    c->heads = heads;
    c->kv_heads = kvh;
    c->head_dim = hd;
    c->block_size = bs;
    c->scale = (float)(1.0 / sqrt((double)hd));
    if (slot == HONE_SLOT_ATTENTION_DECODE) {
        c->n = 1;
        c->n_kv = pos0_or_nkv;
    } else {
        c->n = n;
        c->pos0 = pos0_or_nkv;
        c->n_kv = pos0_or_nkv + n;
    }
    b->edge[b->n - 1] = edge;
    dedup(b);
}

static void embed(builder *b, int dt, int64_t n, int64_t dim, int64_t vocab)
{
    if (hone_dtype_block_size(dt) == HONE_QK && dim % HONE_QK) return;
    hone_case *c = add(b, HONE_SLOT_EMBED);
    if (!c) return;
    c->dtype = dt;
    c->n = n;
    c->dim = dim;
    c->rows = vocab;
    dedup(b);
}

static const int DTYPES[6] = {HONE_DTYPE_F32, HONE_DTYPE_F16, HONE_DTYPE_BF16,
                              HONE_DTYPE_Q8_0, HONE_DTYPE_Q4_0, HONE_DTYPE_Q4_1};

/* Every distinct weight shape of dtype dt in the model. */
static void model_mats(builder *b, hone_slot_id slot, int dt, int64_t n, const hone_model *m)
{
    const hone_hparams *hp = hone_model_hparams(m);
    for (int64_t l = 0; l < hp->n_layers && l < 1; l++) {
        const hone_layer *L = hone_model_layer(m, l);
        const hone_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < 7; i++)
            if (ws[i]->dtype == dt) mat(b, slot, dt, n, ws[i]->rows, ws[i]->cols);
    }
    const hone_weight *o = hone_model_output(m);
    if (o->dtype == dt) mat(b, slot, dt, n, o->rows, o->cols);
}

static void build(builder *b, hone_slot_id slot, const hone_model *m)
{
    const hone_hparams *hp = m ? hone_model_hparams(m) : NULL;
    int64_t mdim = hp ? hp->dim : REF_DIM, mffn = hp ? hp->ffn : REF_FFN;
    float eps = hp ? hp->norm_eps : 1e-5f;
    switch (slot) {
    case HONE_SLOT_SWIGLU:
    case HONE_SLOT_ADD: {
        int64_t ns[] = {1, 7, 33, 1000, mffn, mdim, REF_FFN, REF_DIM, REF_CHUNK * REF_FFN};
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) elementwise(b, slot, ns[i], 0);
        elementwise(b, slot, 257, 1);
        break;
    }
    case HONE_SLOT_RMSNORM:
        rmsnorm(b, 1, mdim, eps, 0);
        rmsnorm(b, 5, mdim, eps, 0);
        rmsnorm(b, 1, REF_DIM, eps, 0);
        rmsnorm(b, REF_CHUNK, REF_DIM, eps, 0);
        rmsnorm(b, 1, 1, eps, 0);
        rmsnorm(b, 3, 7, eps, 0);
        rmsnorm(b, 2, 33, eps, 0);
        rmsnorm(b, 4, 100, eps, 1);
        break;
    case HONE_SLOT_ROPE: {
        int64_t h = hp ? hp->n_heads : REF_HEADS, kv = hp ? hp->n_kv_heads : REF_KV_HEADS;
        int64_t hd = hp ? hp->head_dim : REF_HEAD_DIM, nr = hp ? hp->n_rot : REF_HEAD_DIM;
        float base = hp ? hp->rope_base : 100000.0f;
        int neox = hp ? hp->rope_neox : 0;
        rope(b, 1, h, hd, nr, base, neox);
        rope(b, 5, kv, hd, nr, base, neox);
        rope(b, REF_CHUNK, REF_HEADS, REF_HEAD_DIM, REF_HEAD_DIM, 100000.0f, 0);
        rope(b, 3, 3, 6, 4, 10000.0f, 0);
        rope(b, 3, 3, 6, 4, 10000.0f, 1);
        rope(b, 2, 1, 10, 10, 500000.0f, 1);
        rope(b, 1, 1, 2, 2, 10000.0f, 0);
        break;
    }
    case HONE_SLOT_ATTENTION_DECODE:
    case HONE_SLOT_ATTENTION_PREFILL: {
        int64_t h = hp ? hp->n_heads : REF_HEADS, kv = hp ? hp->n_kv_heads : REF_KV_HEADS;
        int64_t hd = hp ? hp->head_dim : REF_HEAD_DIM;
        int dec = slot == HONE_SLOT_ATTENTION_DECODE;
        if (dec) {
            attn(b, slot, 1, 1, 16, h, kv, hd, 0);
            attn(b, slot, 1, 37, 16, h, kv, hd, 0);
            attn(b, slot, 1, 300, 16, h, kv, hd, 0);
            attn(b, slot, 1, 1024, 16, REF_HEADS, REF_KV_HEADS, REF_HEAD_DIM, 0);
            attn(b, slot, 1, 5, 3, 4, 2, 7, 0);
            attn(b, slot, 1, 2, 1, 2, 1, 33, 0);
            attn(b, slot, 1, 50, 16, 4, 2, 16, 1);
        } else {
            attn(b, slot, 5, 0, 16, h, kv, hd, 0);
            attn(b, slot, 3, 20, 16, h, kv, hd, 0);
            attn(b, slot, REF_CHUNK, 64, 16, REF_HEADS, REF_KV_HEADS, REF_HEAD_DIM, 0);
            attn(b, slot, 4, 3, 3, 4, 2, 7, 0);
            attn(b, slot, 1, 0, 1, 2, 1, 33, 0);
            attn(b, slot, 6, 10, 16, 4, 2, 16, 1);
        }
        break;
    }
    case HONE_SLOT_EMBED:
        for (int i = 0; i < 6; i++) {
            embed(b, DTYPES[i], 5, REF_DIM, 1000);
            embed(b, DTYPES[i], 1, 32, 7);
        }
        if (hp) embed(b, hone_model_tok_embd(m)->dtype, 7, mdim, 1000);
        embed(b, HONE_DTYPE_F32, 3, 7, 5);
        break;
    default: {
        int is_mv = slot >= HONE_SLOT_MATVEC_F32 && slot <= HONE_SLOT_MATVEC_Q4_1;
        int dt = DTYPES[is_mv ? slot - HONE_SLOT_MATVEC_F32 : slot - HONE_SLOT_MATMUL_F32];
        int64_t n = is_mv ? 1 : 5;
        if (m) model_mats(b, slot, dt, n, m);
        mat(b, slot, dt, n, REF_FFN, REF_DIM);
        mat(b, slot, dt, n, REF_DIM, REF_FFN);
        mat(b, slot, dt, n, REF_DIM, REF_DIM);
        mat(b, slot, dt, n, 192, REF_DIM);
        if (!is_mv) mat(b, slot, dt, REF_CHUNK, REF_FFN, REF_DIM);
        int64_t e = is_mv ? 1 : 2;
        mat(b, slot, dt, e, 1, 32);
        mat(b, slot, dt, e, 7, 64);
        mat(b, slot, dt, e, 33, 96);
        mat(b, slot, dt, is_mv ? 1 : 3, 3, 160);
        mat(b, slot, dt, e, 5, 7);
        mat(b, slot, dt, e, 3, 33);
        mat(b, slot, dt, 1, 1, 1);
        break;
    }
    }
}

/* ---- layout ---------------------------------------------------------------------------- */

static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

static void layout(hone_case *c, size_t *off)
{
    int64_t n = c->n;
    switch (c->slot) {
    case HONE_SLOT_EMBED:
        c->n_in = 2;
        c->in_bytes[0] = (size_t)(hone_dtype_row_bytes(c->dtype, c->dim) * c->rows);
        c->in_bytes[1] = (size_t)n * 4;
        c->out_len = n * c->dim;
        c->cmp_rows = n;
        c->cmp_row_len = c->dim;
        c->share_units = n;
        c->share_unit_len = c->dim;
        snprintf(c->desc, sizeof c->desc, "embed %s n=%lld dim=%lld", hone_dtype_name(c->dtype), (long long)n, (long long)c->dim);
        break;
    case HONE_SLOT_RMSNORM:
        c->n_in = 2;
        c->in_bytes[0] = (size_t)(n * c->dim) * 4;
        c->in_bytes[1] = (size_t)c->dim * 4;
        c->out_len = n * c->dim;
        c->cmp_rows = n;
        c->cmp_row_len = c->dim;
        c->share_units = n;
        c->share_unit_len = c->dim;
        snprintf(c->desc, sizeof c->desc, "rmsnorm n=%lld dim=%lld", (long long)n, (long long)c->dim);
        break;
    case HONE_SLOT_ROPE:
        c->n_in = 2;
        c->inplace = 1;
        c->in_bytes[0] = (size_t)(n * c->heads * c->head_dim) * 4;
        c->in_bytes[1] = (size_t)n * 4;
        c->out_len = n * c->heads * c->head_dim;
        c->cmp_rows = n * c->heads;
        c->cmp_row_len = c->head_dim;
        c->share_units = n * c->heads;
        c->share_unit_len = c->head_dim;
        snprintf(c->desc, sizeof c->desc, "rope n=%lld heads=%lld head_dim=%lld n_rot=%lld %s",
                 (long long)n, (long long)c->heads, (long long)c->head_dim, (long long)c->n_rot,
                 c->neox ? "neox" : "normal");
        break;
    case HONE_SLOT_ATTENTION_DECODE:
    case HONE_SLOT_ATTENTION_PREFILL: {
        c->n_blocks = (c->n_kv + c->block_size - 1) / c->block_size + 2;
        size_t cache = (size_t)(c->n_blocks * c->block_size * c->kv_heads * c->head_dim) * 4;
        c->n_in = 4;
        c->in_bytes[0] = (size_t)(n * c->heads * c->head_dim) * 4;
        c->in_bytes[1] = cache;
        c->in_bytes[2] = cache;
        c->in_bytes[3] = (size_t)c->n_blocks * 4;
        c->out_len = n * c->heads * c->head_dim;
        c->cmp_rows = n * c->heads;
        c->cmp_row_len = c->head_dim;
        c->share_units = n * c->heads;
        c->share_unit_len = c->head_dim;
        c->scratch_len = c->n_kv;
        if (c->slot == HONE_SLOT_ATTENTION_DECODE)
            snprintf(c->desc, sizeof c->desc, "attention_decode n_kv=%lld heads=%lld/%lld head_dim=%lld bs=%lld",
                     (long long)c->n_kv, (long long)c->heads, (long long)c->kv_heads,
                     (long long)c->head_dim, (long long)c->block_size);
        else
            snprintf(c->desc, sizeof c->desc, "attention_prefill n=%lld pos0=%lld heads=%lld/%lld head_dim=%lld bs=%lld",
                     (long long)n, (long long)c->pos0, (long long)c->heads, (long long)c->kv_heads,
                     (long long)c->head_dim, (long long)c->block_size);
        break;
    }
    case HONE_SLOT_SWIGLU:
    case HONE_SLOT_ADD:
        c->n_in = 2;
        c->in_bytes[0] = c->in_bytes[1] = (size_t)n * 4;
        c->out_len = n;
        c->cmp_rows = 1;
        c->cmp_row_len = n;
        c->share_units = n;
        c->share_unit_len = 1;
        snprintf(c->desc, sizeof c->desc, "%s n=%lld", hone_slots_name(c->slot), (long long)n);
        break;
    default: { /* matvec / matmul */
        int is_mv = c->slot <= HONE_SLOT_MATVEC_Q4_1;
        int64_t nt = is_mv ? 1 : n;
        c->n_in = 2;
        c->in_bytes[0] = (size_t)(hone_dtype_row_bytes(c->dtype, c->cols) * c->rows);
        c->in_bytes[1] = (size_t)(nt * c->cols) * 4;
        c->out_len = nt * c->rows;
        c->cmp_rows = nt;
        c->cmp_row_len = c->rows;
        c->share_units = c->rows;
        c->share_unit_len = 1;
        if (is_mv)
            snprintf(c->desc, sizeof c->desc, "%s rows=%lld cols=%lld", hone_slots_name(c->slot), (long long)c->rows, (long long)c->cols);
        else
            snprintf(c->desc, sizeof c->desc, "%s n=%lld rows=%lld cols=%lld", hone_slots_name(c->slot), (long long)n, (long long)c->rows, (long long)c->cols);
        break;
    }
    }
    for (int i = 0; i < c->n_in; i++) {
        c->in_off[i] = *off;
        *off = align64(*off + c->in_bytes[i]);
    }
    for (int k = 0; k < HONE_CASES_NOUT; k++) {
        *off += HONE_CASES_CANARY;
        c->out_off[k] = *off;
        *off = align64(*off + (size_t)c->out_len * 4) + HONE_CASES_CANARY;
    }
    *off += HONE_CASES_CANARY;
    c->scratch_off = *off;
    *off = align64(*off + (size_t)c->scratch_len * 4) + HONE_CASES_CANARY;
}

/* ---- inputs ----------------------------------------------------------------------------- */

static uint16_t rnd_scale(uint64_t *st, double lo, double hi, int allow_neg)
{
    double v = lo + (hi - lo) * rnd_unit_s(st);
    if (allow_neg && (hone_cases_rand(st) & 1)) v = -v;
    return hone_f32_to_fp16((float)v);
}

void hone_cases_fill_weight(void *w, int dt, int64_t rows, int64_t cols, uint64_t *st)
{
    int64_t n = rows * cols, nb = n / HONE_QK;
    switch (dt) {
    case HONE_DTYPE_F32:
        for (int64_t i = 0; i < n; i++) ((float *)w)[i] = rnd_f_s(st, -1, 1);
        break;
    case HONE_DTYPE_F16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)w)[i] = hone_f32_to_fp16(rnd_f_s(st, -1, 1));
        break;
    case HONE_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)w)[i] = hone_f32_to_bf16(rnd_f_s(st, -1, 1));
        break;
    case HONE_DTYPE_Q8_0:
        for (int64_t b = 0; b < nb; b++) {
            hone_block_q8_0 *k = (hone_block_q8_0 *)w + b;
            k->d = rnd_scale(st, 0.001, 0.01, 1);
            for (int j = 0; j < 32; j++) k->qs[j] = (int8_t)(hone_cases_rand(st) & 0xFF);
        }
        break;
    case HONE_DTYPE_Q4_0:
        for (int64_t b = 0; b < nb; b++) {
            hone_block_q4_0 *k = (hone_block_q4_0 *)w + b;
            k->d = rnd_scale(st, 0.01, 0.15, 1);
            for (int j = 0; j < 16; j++) k->qs[j] = (uint8_t)(hone_cases_rand(st) & 0xFF);
        }
        break;
    case HONE_DTYPE_Q4_1:
        for (int64_t b = 0; b < nb; b++) {
            hone_block_q4_1 *k = (hone_block_q4_1 *)w + b;
            k->d = rnd_scale(st, 0.01, 0.15, 0);
            k->m = rnd_scale(st, 0.0, 1.0, 1);
            for (int j = 0; j < 16; j++) k->qs[j] = (uint8_t)(hone_cases_rand(st) & 0xFF);
        }
        break;
    }
}

static void fill_f(float *v, int64_t n, double lo, double hi, int edge, double big)
{
    for (int64_t i = 0; i < n; i++) v[i] = edge ? rnd_edge(big) : rnd_f(lo, hi);
}

static void fill(hone_case *c, uint8_t *base, int edge)
{
    void *in[HONE_CASES_MAX_IN];
    for (int i = 0; i < c->n_in; i++) in[i] = base + c->in_off[i];
    switch (c->slot) {
    case HONE_SLOT_EMBED:
        hone_cases_fill_weight(in[0], c->dtype, c->rows, c->dim, &rng_state);
        for (int64_t i = 0; i < c->n; i++) ((int32_t *)in[1])[i] = (int32_t)(rnd_u64() % (uint64_t)c->rows);
        break;
    case HONE_SLOT_RMSNORM:
        /* edge: large rows whose squares overflow f32, a zero row, subnormals */
        fill_f(in[0], c->n * c->dim, -2, 2, edge, 3e19);
        if (edge) memset(in[0], 0, (size_t)c->dim * 4);
        fill_f(in[1], c->dim, 0.5, 1.5, 0, 0);
        break;
    case HONE_SLOT_ROPE:
        fill_f(in[0], c->n * c->heads * c->head_dim, -2, 2, 0, 0);
        for (int64_t i = 0; i < c->n; i++) ((int32_t *)in[1])[i] = (int32_t)(rnd_u64() % 4096);
        break;
    case HONE_SLOT_ATTENTION_DECODE:
    case HONE_SLOT_ATTENTION_PREFILL: {
        int64_t per_pos = c->kv_heads * c->head_dim;
        fill_f(in[0], c->n * c->heads * c->head_dim, -1, 1, 0, 0);
        if (edge) /* peaky softmax: large scores */
            for (int64_t i = 0; i < c->n * c->heads * c->head_dim; i++) ((float *)in[0])[i] *= 12.0f;
        float *k = in[1], *v = in[2];
        int64_t total = c->n_blocks * c->block_size * per_pos;
        for (int64_t i = 0; i < total; i++) {
            k[i] = NAN; /* slots no key should be read from */
            v[i] = NAN;
        }
        /* block table: a random permutation of the blocks */
        int32_t *bt = in[3];
        for (int64_t i = 0; i < c->n_blocks; i++) bt[i] = (int32_t)i;
        for (int64_t i = c->n_blocks - 1; i > 0; i--) {
            int64_t j = (int64_t)(rnd_u64() % (uint64_t)(i + 1));
            int32_t t = bt[i];
            bt[i] = bt[j];
            bt[j] = t;
        }
        for (int64_t j = 0; j < c->n_kv; j++) {
            int64_t off = ((int64_t)bt[j / c->block_size] * c->block_size + j % c->block_size) * per_pos;
            fill_f(k + off, per_pos, -1, 1, 0, 0);
            fill_f(v + off, per_pos, -1, 1, 0, 0);
        }
        break;
    }
    case HONE_SLOT_SWIGLU:
        /* edge: gates up to +-100 (expf overflows beyond 88), zeros, subnormals */
        fill_f(in[0], c->n, -6, 6, edge, 100.0);
        fill_f(in[1], c->n, -2, 2, edge, 1e3);
        break;
    case HONE_SLOT_ADD:
        fill_f(in[0], c->n, -2, 2, edge, 1e30);
        fill_f(in[1], c->n, -2, 2, edge, 1e30);
        break;
    default:
        hone_cases_fill_weight(in[0], c->dtype, c->rows, c->cols, &rng_state);
        fill_f(in[1], (c->slot <= HONE_SLOT_MATVEC_Q4_1 ? 1 : c->n) * c->cols, -1, 1, 0, 0);
        break;
    }
}

uint64_t hone_cases_hash_inputs(const hone_case_set *s, const hone_case *c)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < c->n_in; i++) {
        const uint8_t *p = s->base + c->in_off[i];
        for (size_t k = 0; k < c->in_bytes[i]; k++) h = (h ^ p[k]) * 0x100000001b3ull;
    }
    return h;
}

double hone_cases_bytes(const hone_case *c)
{
    double b = (double)c->out_len * 4;
    for (int i = 0; i < c->n_in; i++) b += (double)c->in_bytes[i];
    if (c->slot == HONE_SLOT_ATTENTION_DECODE || c->slot == HONE_SLOT_ATTENTION_PREFILL) {
        /* only the n_kv used positions of the cache are read */
        b -= (double)c->in_bytes[1] + (double)c->in_bytes[2];
        b += 2.0 * (double)(c->n_kv * c->kv_heads * c->head_dim) * 4;
    }
    return b;
}

int hone_cases_new(hone_case_set *out, hone_slot_id slot, const hone_model *m, uint64_t seed)
{
    memset(out, 0, sizeof *out);
    builder *b = calloc(1, sizeof *b);
    if (!b) return hone_error_set(HONE_ENOMEM, "out of memory");
    build(b, slot, m);
    size_t off = 0;
    double best = -1;
    int tbest = 0;
    for (int i = 0; i < b->n; i++) {
        layout(&b->c[i], &off);
        if (!b->edge[i] && hone_cases_bytes(&b->c[i]) > best) {
            best = hone_cases_bytes(&b->c[i]);
            tbest = i;
        }
    }
    b->c[tbest].timing = 1;
    out->bytes = off;
    out->base = hone_worker_shared_new(off);
    if (!out->base) {
        free(b);
        return HONE_ENOMEM;
    }
    out->c = malloc(sizeof(hone_case) * (size_t)b->n);
    if (!out->c) {
        hone_worker_shared_free(out->base, off);
        free(b);
        return hone_error_set(HONE_ENOMEM, "out of memory");
    }
    out->n = b->n;
    out->seed = seed;
    rng_state = seed;
    for (int i = 0; i < HONE_CASES_CANARY; i++) out->canary[i] = (uint8_t)(rnd_u64() | 1);
    for (int i = 0; i < b->n; i++) {
        hone_case *c = &b->c[i];
        fill(c, out->base, b->edge[i]);
        if (b->edge[i]) {
            size_t l = strlen(c->desc);
            snprintf(c->desc + l, sizeof c->desc - l, " (edge values)");
        }
        c->in_hash = 0;
        out->c[i] = *c;
        out->c[i].in_hash = hone_cases_hash_inputs(out, &out->c[i]);
        for (int k = 0; k < HONE_CASES_NOUT; k++) {
            memcpy(out->base + c->out_off[k] - HONE_CASES_CANARY, out->canary, HONE_CASES_CANARY);
            memcpy(out->base + align64(c->out_off[k] + (size_t)c->out_len * 4), out->canary, HONE_CASES_CANARY);
        }
        memcpy(out->base + c->scratch_off - HONE_CASES_CANARY, out->canary, HONE_CASES_CANARY);
        memcpy(out->base + align64(c->scratch_off + (size_t)c->scratch_len * 4), out->canary, HONE_CASES_CANARY);
    }
    free(b);
    return 0;
}

void hone_cases_free(hone_case_set *s)
{
    if (!s) return;
    hone_worker_shared_free(s->base, s->bytes);
    free(s->c);
    memset(s, 0, sizeof *s);
}

const hone_case *hone_cases_timing(const hone_case_set *s)
{
    const hone_case *tc = &s->c[0];
    for (int i = 0; i < s->n; i++)
        if (s->c[i].timing) tc = &s->c[i];
    return tc;
}

float *hone_cases_out(const hone_case_set *s, const hone_case *c, int k)
{
    return (float *)(s->base + c->out_off[k]);
}

float *hone_cases_scratch(const hone_case_set *s, const hone_case *c)
{
    return (float *)(s->base + c->scratch_off);
}

void hone_cases_poison(const hone_case_set *s, const hone_case *c, float *out)
{
    if (c->inplace) {
        memcpy(out, s->base + c->in_off[0], (size_t)c->out_len * 4);
        return;
    }
    uint32_t p = HONE_CASES_POISON;
    for (int64_t i = 0; i < c->out_len; i++) memcpy(&out[i], &p, 4);
}

int hone_cases_canaries_ok(const hone_case_set *s, const hone_case *c, char *what, size_t cap)
{
    for (int k = 0; k < HONE_CASES_NOUT; k++) {
        const uint8_t *pre = s->base + c->out_off[k] - HONE_CASES_CANARY;
        const uint8_t *post = s->base + align64(c->out_off[k] + (size_t)c->out_len * 4);
        if (memcmp(pre, s->canary, HONE_CASES_CANARY) != 0) {
            snprintf(what, cap, "wrote before its output (%s)", c->desc);
            return 0;
        }
        if (memcmp(post, s->canary, HONE_CASES_CANARY) != 0) {
            snprintf(what, cap, "wrote past the end of its output (%s)", c->desc);
            return 0;
        }
        /* the alignment gap between the output's end and the canary must stay untouched too:
         * it is zero from the shared mapping */
        const uint8_t *gap = s->base + c->out_off[k] + (size_t)c->out_len * 4;
        for (; gap < post; gap++)
            if (*gap) {
                snprintf(what, cap, "wrote past the end of its output (%s)", c->desc);
                return 0;
            }
    }
    const uint8_t *pre = s->base + c->scratch_off - HONE_CASES_CANARY;
    const uint8_t *post = s->base + align64(c->scratch_off + (size_t)c->scratch_len * 4);
    if (memcmp(pre, s->canary, HONE_CASES_CANARY) || memcmp(post, s->canary, HONE_CASES_CANARY)) {
        snprintf(what, cap, "wrote outside its scratch buffer (%s)", c->desc);
        return 0;
    }
    return 1;
}

void hone_cases_call(void *fn, const hone_case *c, const uint8_t *base, float *out,
                     float *scratch, int ith, int nth)
{
    const void *in0 = base + c->in_off[0], *in1 = base + c->in_off[1];
    switch (c->slot) {
    case HONE_SLOT_EMBED:
        ((hone_slot_embed_fn)fn)(out, in0, c->dtype, in1, c->n, c->dim, ith, nth);
        break;
    case HONE_SLOT_RMSNORM:
        ((hone_slot_rmsnorm_fn)fn)(out, in0, in1, c->n, c->dim, c->eps, ith, nth);
        break;
    case HONE_SLOT_ROPE:
        ((hone_slot_rope_fn)fn)(out, in1, c->n, c->heads, c->head_dim, c->n_rot, c->freq_base,
                                c->neox, ith, nth);
        break;
    case HONE_SLOT_ATTENTION_DECODE:
        ((hone_slot_attention_decode_fn)fn)(out, in0, in1, (const float *)(base + c->in_off[2]),
                                            (const int32_t *)(base + c->in_off[3]), c->n_kv,
                                            c->block_size, c->heads, c->kv_heads, c->head_dim,
                                            c->scale, scratch, ith, nth);
        break;
    case HONE_SLOT_ATTENTION_PREFILL:
        ((hone_slot_attention_prefill_fn)fn)(out, in0, in1, (const float *)(base + c->in_off[2]),
                                             (const int32_t *)(base + c->in_off[3]), c->n,
                                             c->pos0, c->block_size, c->heads, c->kv_heads,
                                             c->head_dim, c->scale, scratch, ith, nth);
        break;
    case HONE_SLOT_SWIGLU:
        ((hone_slot_swiglu_fn)fn)(out, in0, in1, c->n, ith, nth);
        break;
    case HONE_SLOT_ADD:
        ((hone_slot_add_fn)fn)(out, in0, in1, c->n, ith, nth);
        break;
    default:
        if (c->slot <= HONE_SLOT_MATVEC_Q4_1)
            ((hone_slot_matvec_fn)fn)(out, in0, in1, c->rows, c->cols, ith, nth);
        else
            ((hone_slot_matmul_fn)fn)(out, in0, in1, c->n, c->rows, c->cols, ith, nth);
        break;
    }
}

void hone_cases_span(const hone_case *c, size_t *lo, size_t *hi)
{
    *lo = c->in_off[0];
    *hi = align64(c->scratch_off + (size_t)c->scratch_len * 4) + HONE_CASES_CANARY;
}

int64_t hone_cases_cuda_scratch_len(const hone_case *c)
{
    if (c->slot != HONE_SLOT_ATTENTION_DECODE && c->slot != HONE_SLOT_ATTENTION_PREFILL) return 0;
    return c->n * c->heads * c->n_kv;
}

static void *arg_ptr(hone_cases_cuda_launch *o, int *k, const void *p)
{
    o->ptr[*k] = (void *)p;
    return &o->ptr[(*k)++];
}

static void *arg_i64(hone_cases_cuda_launch *o, int *k, int64_t v)
{
    o->i64[*k] = v;
    return &o->i64[(*k)++];
}

void hone_cases_cuda_args(hone_cases_cuda_launch *o, const hone_case *c, uint8_t *dev, size_t lo,
                          float *dev_out, float *scratch, int32_t *n_kv)
{
    memset(o, 0, sizeof *o);
    int np = 0, ni = 0, a = 0;
    const uint8_t *in[HONE_CASES_MAX_IN] = {NULL};
    for (int i = 0; i < c->n_in; i++) in[i] = dev + (c->in_off[i] - lo);
    void **A = o->args;
    o->f32[0] = c->eps;
    o->i32[0] = c->dtype;
    A[a++] = arg_ptr(o, &np, dev_out);
    o->items_y = 1;
    switch (c->slot) {
    case HONE_SLOT_EMBED: /* out, table, dtype, ids, n, dim */
        A[a++] = arg_ptr(o, &np, in[0]);
        A[a++] = &o->i32[0];
        A[a++] = arg_ptr(o, &np, in[1]);
        A[a++] = arg_i64(o, &ni, c->n);
        A[a++] = arg_i64(o, &ni, c->dim);
        o->items_x = c->dim;
        o->items_y = c->n;
        break;
    case HONE_SLOT_RMSNORM: /* y, x, w, n, dim, eps */
        A[a++] = arg_ptr(o, &np, in[0]);
        A[a++] = arg_ptr(o, &np, in[1]);
        A[a++] = arg_i64(o, &ni, c->n);
        A[a++] = arg_i64(o, &ni, c->dim);
        A[a++] = &o->f32[0];
        o->items_x = c->n;
        break;
    case HONE_SLOT_ROPE: /* x (in place), pos, n, n_heads, head_dim, n_rot, freq_base, neox */
        o->f32[0] = c->freq_base;
        o->i32[0] = c->neox;
        A[a++] = arg_ptr(o, &np, in[1]);
        A[a++] = arg_i64(o, &ni, c->n);
        A[a++] = arg_i64(o, &ni, c->heads);
        A[a++] = arg_i64(o, &ni, c->head_dim);
        A[a++] = arg_i64(o, &ni, c->n_rot);
        A[a++] = &o->f32[0];
        A[a++] = &o->i32[0];
        o->items_x = c->n * c->heads;
        break;
    case HONE_SLOT_ATTENTION_DECODE:
    case HONE_SLOT_ATTENTION_PREFILL: {
        /* out, q, k_cache, v_cache, block_table, n_kv pointer | n, pos0, block_size, n_heads,
         * n_kv_heads, head_dim, scale, scratch, scratch_stride */
        int dec = c->slot == HONE_SLOT_ATTENTION_DECODE;
        o->f32[0] = c->scale;
        for (int i = 0; i < 4; i++) A[a++] = arg_ptr(o, &np, in[i]);
        if (dec) {
            A[a++] = arg_ptr(o, &np, n_kv);
        } else {
            A[a++] = arg_i64(o, &ni, c->n);
            A[a++] = arg_i64(o, &ni, c->pos0);
        }
        A[a++] = arg_i64(o, &ni, c->block_size);
        A[a++] = arg_i64(o, &ni, c->heads);
        A[a++] = arg_i64(o, &ni, c->kv_heads);
        A[a++] = arg_i64(o, &ni, c->head_dim);
        A[a++] = &o->f32[0];
        A[a++] = arg_ptr(o, &np, scratch);
        A[a++] = arg_i64(o, &ni, c->n_kv);
        o->items_x = c->heads;
        o->items_y = dec ? 1 : c->n;
        break;
    }
    case HONE_SLOT_SWIGLU:
    case HONE_SLOT_ADD: /* out, a, b, n */
        A[a++] = arg_ptr(o, &np, in[0]);
        A[a++] = arg_ptr(o, &np, in[1]);
        A[a++] = arg_i64(o, &ni, c->n);
        o->items_x = c->n;
        break;
    default: /* matvec: y, W, x, rows, cols; matmul: Y, W, X, n, rows, cols */
        A[a++] = arg_ptr(o, &np, in[0]);
        A[a++] = arg_ptr(o, &np, in[1]);
        if (c->slot > HONE_SLOT_MATVEC_Q4_1) {
            A[a++] = arg_i64(o, &ni, c->n);
            o->items_y = c->n;
        }
        A[a++] = arg_i64(o, &ni, c->rows);
        A[a++] = arg_i64(o, &ni, c->cols);
        o->items_x = c->rows;
        break;
    }
    o->n_args = a;
}

void hone_cases_oracle(const hone_case *c, const uint8_t *base, double *ref)
{
    const void *in0 = base + c->in_off[0], *in1 = base + c->in_off[1];
    switch (c->slot) {
    case HONE_SLOT_EMBED: hone_oracle_embed(ref, in0, c->dtype, in1, c->n, c->dim); break;
    case HONE_SLOT_RMSNORM: hone_oracle_rmsnorm(ref, in0, in1, c->n, c->dim, c->eps); break;
    case HONE_SLOT_ROPE:
        hone_oracle_rope(ref, in0, in1, c->n, c->heads, c->head_dim, c->n_rot, c->freq_base, c->neox);
        break;
    case HONE_SLOT_ATTENTION_DECODE:
        hone_oracle_attention_decode(ref, in0, in1, (const float *)(base + c->in_off[2]),
                                     (const int32_t *)(base + c->in_off[3]), c->n_kv,
                                     c->block_size, c->heads, c->kv_heads, c->head_dim, c->scale);
        break;
    case HONE_SLOT_ATTENTION_PREFILL:
        hone_oracle_attention_prefill(ref, in0, in1, (const float *)(base + c->in_off[2]),
                                      (const int32_t *)(base + c->in_off[3]), c->n, c->pos0,
                                      c->block_size, c->heads, c->kv_heads, c->head_dim, c->scale);
        break;
    case HONE_SLOT_SWIGLU: hone_oracle_swiglu(ref, in0, in1, c->n); break;
    case HONE_SLOT_ADD: hone_oracle_add(ref, in0, in1, c->n); break;
    default:
        if (c->slot <= HONE_SLOT_MATVEC_Q4_1)
            hone_oracle_matvec(ref, c->dtype, in0, in1, c->rows, c->cols);
        else
            hone_oracle_matmul(ref, c->dtype, in0, in1, c->n, c->rows, c->cols);
        break;
    }
}
