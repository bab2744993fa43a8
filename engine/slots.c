/* The slot descriptor table (see slots.h): one descriptor per built-in slot, the registered
 * ones after them, and the generic helpers every consumer uses to build, call and describe a
 * slot from its descriptor alone. */
#include "slots.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "kv_layout.h"

/* The baselines, one per kernels/cpu/<slot>.c. */
void hone_cpu_embed(float *, const void *, int32_t, const int32_t *, int64_t, int64_t, int, int);
void hone_cpu_rmsnorm(float *, const float *, const float *, int64_t, int64_t, float, int, int);
#define DECL_MV(dt)                                                                            \
    void hone_cpu_matvec_##dt(float *, const void *, const float *, int64_t, int64_t, int, int); \
    void hone_cpu_matmul_##dt(float *, const void *, const float *, int64_t, int64_t, int64_t, int, int);
DECL_MV(f32)
DECL_MV(f16)
DECL_MV(bf16)
DECL_MV(q8_0)
DECL_MV(q4_0)
DECL_MV(q4_1)
DECL_MV(q5_0)
DECL_MV(q5_1)
DECL_MV(q4_k)
DECL_MV(q5_k)
DECL_MV(q6_k)
DECL_MV(q3_k)
DECL_MV(q2_k)
DECL_MV(mxfp4)
/* The fused slots' baselines (kernels/cpu/qkv_<dt>.c, ffn_<dt>.c, rmsnorm_matvec_<dt>.c). */
#define DECL_FUSED(dt)                                                                            \
    void hone_cpu_qkv_##dt(float *, const void *, const void *, const void *, const float *,     \
                           int64_t, int64_t, int64_t, int64_t, int, int);                        \
    void hone_cpu_ffn_##dt(float *, const void *, const void *, const float *, int64_t, int64_t,  \
                           int, int);                                                            \
    void hone_cpu_rmsnorm_matvec_##dt(float *, const void *, const float *, const float *,       \
                                      int64_t, int64_t, float, float *, int, int);
DECL_FUSED(f32)
DECL_FUSED(f16)
DECL_FUSED(bf16)
DECL_FUSED(q8_0)
DECL_FUSED(q4_0)
DECL_FUSED(q4_1)
void hone_cpu_rope(float *, const int32_t *, int64_t, int64_t, int64_t, int64_t, float, int32_t, int,
                   int);
void hone_cpu_attention_decode(float *, const float *, const float *, const float *, const int32_t *,
                               int64_t, int64_t, int64_t, int64_t, int64_t, float, float *, int, int);
void hone_cpu_attention_prefill(float *, const float *, const float *, const float *,
                                const int32_t *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                float, float *, int, int);
void hone_cpu_swiglu(float *, const float *, const float *, int64_t, int, int);
void hone_cpu_add(float *, const float *, const float *, int64_t, int, int);
void hone_cpu_geglu(float *, const float *, const float *, int64_t, int, int);
void hone_cpu_rope_freqs(float *, const int32_t *, const float *, int64_t, int64_t, int64_t, int64_t,
                         float, int32_t, int, int);

const char hone_slots_rules[] =
    "Rules every CPU slot function obeys (baselines and candidates alike):\n"
    " - it computes the share `ith` of `nth` (0 <= ith < nth) of its output, and the shares\n"
    "   together cover the output exactly once; it never creates threads or allocates;\n"
    " - each output element is computed by one fixed sequence of f32 operations that does not\n"
    "   depend on nth, ith, or on the batch size n: so threading and batching change no bit;\n"
    " - inputs are never written (except the in-place slots rope and rmsnorm with y == x);\n"
    " - all tensors are dense row-major with the shapes given in brackets; weight matrices are\n"
    "   GGUF rows: W[rows][cols] of the weight dtype (block formats: cols / 32 blocks per row,\n"
    "   K formats q2_k .. q6_k: cols / 256).\n";

/* ---- generic callers, one per signature ---------------------------------------------- */

static void invoke_embed(void *fn, const hone_slot_value *v, int ith, int nth)
{
    ((hone_slot_embed_fn)fn)(v[0].p, v[1].cp, v[2].i32, v[3].cp, v[4].i64, v[5].i64, ith, nth);
}

static void invoke_rmsnorm(void *fn, const hone_slot_value *v, int ith, int nth)
{
    ((hone_slot_rmsnorm_fn)fn)(v[0].p, v[1].cp, v[2].cp, v[3].i64, v[4].i64, v[5].f32, ith, nth);
}

static void invoke_matvec(void *fn, const hone_slot_value *v, int ith, int nth)
{
    ((hone_slot_matvec_fn)fn)(v[0].p, v[1].cp, v[2].cp, v[3].i64, v[4].i64, ith, nth);
}

static void invoke_matmul(void *fn, const hone_slot_value *v, int ith, int nth)
{
    ((hone_slot_matmul_fn)fn)(v[0].p, v[1].cp, v[2].cp, v[3].i64, v[4].i64, v[5].i64, ith, nth);
}

static void invoke_rope(void *fn, const hone_slot_value *v, int ith, int nth)
{
    ((hone_slot_rope_fn)fn)(v[0].p, v[1].cp, v[2].i64, v[3].i64, v[4].i64, v[5].i64, v[6].f32,
                            v[7].i32, ith, nth);
}

static void invoke_rope_freqs(void *fn, const hone_slot_value *v, int ith, int nth)
{
    ((hone_slot_rope_freqs_fn)fn)(v[0].p, v[1].cp, v[2].cp, v[3].i64, v[4].i64, v[5].i64, v[6].i64,
                                  v[7].f32, v[8].i32, ith, nth);
}

static void invoke_attention_decode(void *fn, const hone_slot_value *v, int ith, int nth)
{
    ((hone_slot_attention_decode_fn)fn)(v[0].p, v[1].cp, v[2].cp, v[3].cp, v[4].cp, v[5].i64,
                                        v[6].i64, v[7].i64, v[8].i64, v[9].i64, v[10].f32,
                                        v[11].p, ith, nth);
}

static void invoke_attention_prefill(void *fn, const hone_slot_value *v, int ith, int nth)
{
    ((hone_slot_attention_prefill_fn)fn)(v[0].p, v[1].cp, v[2].cp, v[3].cp, v[4].cp, v[5].i64,
                                         v[6].i64, v[7].i64, v[8].i64, v[9].i64, v[10].i64,
                                         v[11].f32, v[12].p, ith, nth);
}

/* swiglu and add: (float *out, const float *a, const float *b, int64_t n, ith, nth) */
static void invoke_binary(void *fn, const hone_slot_value *v, int ith, int nth)
{
    ((hone_slot_add_fn)fn)(v[0].p, v[1].cp, v[2].cp, v[3].i64, ith, nth);
}

static void invoke_qkv(void *fn, const hone_slot_value *v, int ith, int nth)
{
    ((hone_slot_qkv_fn)fn)(v[0].p, v[1].cp, v[2].cp, v[3].cp, v[4].cp, v[5].i64, v[6].i64, v[7].i64,
                           v[8].i64, ith, nth);
}

static void invoke_ffn(void *fn, const hone_slot_value *v, int ith, int nth)
{
    ((hone_slot_ffn_fn)fn)(v[0].p, v[1].cp, v[2].cp, v[3].cp, v[4].i64, v[5].i64, ith, nth);
}

static void invoke_rmsnorm_matvec(void *fn, const hone_slot_value *v, int ith, int nth)
{
    ((hone_slot_rmsnorm_matvec_fn)fn)(v[0].p, v[1].cp, v[2].cp, v[3].cp, v[4].i64, v[5].i64,
                                      v[6].f32, v[7].p, ith, nth);
}

/* ---- cost models: bytes moved at least, and flops ---------------------------------------- */

static double row_bytes(int dt, int64_t cols)
{
    int64_t bs = hone_dtype_block_size(dt);
    if (bs <= 0) return 4.0 * (double)cols;
    return (double)((cols + bs - 1) / bs) * (double)hone_dtype_type_size(dt);
}

enum { E_N, E_DIM, E_VOCAB };                    /* embed */
enum { R_N, R_DIM };                             /* rmsnorm */
enum { MV_ROWS, MV_COLS };                       /* matvec */
enum { MM_N, MM_ROWS, MM_COLS };                 /* matmul */
enum { P_N, P_HEADS, P_HEAD_DIM, P_ROT, P_HALF }; /* rope (rope_freqs: P_HALF = n_rot / 2, derived) */
enum { A_N, A_POS0, A_NKV, A_BS, A_HEADS, A_KVH, A_HD, A_NBLOCKS }; /* attention */
enum { B_N };                                    /* swiglu, add */
enum { QKV_RQ, QKV_RK, QKV_RV, QKV_COLS, QKV_ROWS }; /* qkv (QKV_ROWS = rq + rk + rv, derived) */
enum { F_ROWS, F_COLS };                         /* ffn, rmsnorm_matvec */

static void cost_embed(const hone_slot_desc *d, const hone_slot_shape *s, double *bytes, double *flops)
{
    (void)d;
    double n = (double)s->d[E_N], dim = (double)s->d[E_DIM];
    *bytes = n * (row_bytes(s->dtype, s->d[E_DIM]) + 4 * dim);
    *flops = n * dim;
}

static void cost_rmsnorm(const hone_slot_desc *d, const hone_slot_shape *s, double *bytes, double *flops)
{
    (void)d;
    double n = (double)s->d[R_N], dim = (double)s->d[R_DIM];
    *bytes = 4 * (2 * n * dim + dim);
    *flops = 4 * n * dim;
}

static void cost_matvec(const hone_slot_desc *d, const hone_slot_shape *s, double *bytes, double *flops)
{
    double rows = (double)s->d[MV_ROWS], cols = (double)s->d[MV_COLS];
    *bytes = rows * row_bytes(d->dtype, s->d[MV_COLS]) + 4 * (rows + cols);
    *flops = 2 * rows * cols;
}

static void cost_matmul(const hone_slot_desc *d, const hone_slot_shape *s, double *bytes, double *flops)
{
    double n = (double)s->d[MM_N], rows = (double)s->d[MM_ROWS], cols = (double)s->d[MM_COLS];
    *bytes = rows * row_bytes(d->dtype, s->d[MM_COLS]) + 4 * n * (rows + cols);
    *flops = 2 * n * rows * cols;
}

static void cost_rope(const hone_slot_desc *d, const hone_slot_shape *s, double *bytes, double *flops)
{
    (void)d;
    double n = (double)s->d[P_N], h = (double)s->d[P_HEADS], hd = (double)s->d[P_HEAD_DIM];
    *bytes = 4 * (2 * n * h * hd + n);
    *flops = 3 * n * h * hd;
}

/* Every visible key's K and V once per kv head, plus q in and out. n_kv is the sum of the
 * call's context lengths; the keys seen summed over queries are n_kv for decode rows (one per
 * sequence), and for prefill as if one sequence of n rows at pos0 = n_kv - n. */
static void cost_attention(const hone_slot_desc *d, const hone_slot_shape *s, double *bytes,
                           double *flops)
{
    double n = (double)s->d[A_N], B = (double)s->d[A_NKV], h = (double)s->d[A_HEADS];
    double kvh = (double)s->d[A_KVH], hd = (double)s->d[A_HD];
    double visible = d->kind == HONE_SLOT_KIND_ATTENTION_DECODE ? B : n * (B - n) + n * (n + 1) / 2;
    *bytes = 4 * (2 * B * kvh * hd + 2 * n * h * hd);
    *flops = 4 * h * hd * visible;
}

static void cost_swiglu(const hone_slot_desc *d, const hone_slot_shape *s, double *bytes, double *flops)
{
    (void)d;
    *bytes = 12 * (double)s->d[B_N];
    *flops = 5 * (double)s->d[B_N];
}

static void cost_geglu(const hone_slot_desc *d, const hone_slot_shape *s, double *bytes, double *flops)
{
    (void)d;
    *bytes = 12 * (double)s->d[B_N];
    *flops = 12 * (double)s->d[B_N];
}

static void cost_add(const hone_slot_desc *d, const hone_slot_shape *s, double *bytes, double *flops)
{
    (void)d;
    *bytes = 12 * (double)s->d[B_N];
    *flops = (double)s->d[B_N];
}

/* The fused slots move what their components move less the intermediates they keep. */
static void cost_qkv(const hone_slot_desc *d, const hone_slot_shape *s, double *bytes, double *flops)
{
    double rows = (double)s->d[QKV_ROWS], cols = (double)s->d[QKV_COLS];
    *bytes = rows * row_bytes(d->dtype, s->d[QKV_COLS]) + 4 * (rows + cols);
    *flops = 2 * rows * cols;
}

static void cost_ffn(const hone_slot_desc *d, const hone_slot_shape *s, double *bytes, double *flops)
{
    double rows = (double)s->d[F_ROWS], cols = (double)s->d[F_COLS];
    *bytes = 2 * rows * row_bytes(d->dtype, s->d[F_COLS]) + 4 * (rows + cols);
    *flops = 4 * rows * cols + 5 * rows;
}

static void cost_rmsnorm_matvec(const hone_slot_desc *d, const hone_slot_shape *s, double *bytes,
                                double *flops)
{
    double rows = (double)s->d[F_ROWS], cols = (double)s->d[F_COLS];
    *bytes = rows * row_bytes(d->dtype, s->d[F_COLS]) + 4 * (rows + 2 * cols);
    *flops = 2 * rows * cols + 4 * cols;
}

/* ---- derived dims -------------------------------------------------------------------------- */

static void derive_qkv(const hone_slot_desc *d, hone_slot_shape *s)
{
    (void)d;
    s->d[QKV_ROWS] = s->d[QKV_RQ] + s->d[QKV_RK] + s->d[QKV_RV];
}

static void derive_rope_freqs(const hone_slot_desc *d, hone_slot_shape *s)
{
    (void)d;
    s->d[P_HALF] = s->d[P_ROT] / 2;
}

/* The cache of a case holds its keys' blocks plus two more no key should be read from. */
static void derive_attention(const hone_slot_desc *d, hone_slot_shape *s)
{
    if (d->kind == HONE_SLOT_KIND_ATTENTION_DECODE) {
        s->d[A_N] = 1;
        s->d[A_POS0] = s->d[A_NKV] - 1;
    } else {
        s->d[A_NKV] = s->d[A_POS0] + s->d[A_N];
    }
    s->d[A_NBLOCKS] = (s->d[A_NKV] + s->d[A_BS] - 1) / s->d[A_BS] + 2;
    s->f[0] = (float)(1.0 / sqrt((double)s->d[A_HD]));
}

/* ---- shape sets ---------------------------------------------------------------------------- */

/* SmolLM2-135M, always in the set so that tiny test models still give realistic timing shapes. */
#define REF_DIM 576
#define REF_HEADS 9
#define REF_KV_HEADS 3
#define REF_HEAD_DIM 64
#define REF_FFN 1536
#define REF_CHUNK 64
#define MAX_WEIGHT_BYTES ((int64_t)128 << 20) /* the LM head of a small model in f32 fits; bigger
                                                 * matrices are left to model parity */

typedef struct {
    const hone_slot_desc *d;
    hone_slot_shape *s;
    int n, cap;
    int edge;      /* push_mat: the shapes pushed are edge shapes */
} shape_list;

static int same_shape(const hone_slot_shape *a, const hone_slot_shape *b)
{
    return !memcmp(a->d, b->d, sizeof a->d) && !memcmp(a->f, b->f, sizeof a->f) &&
           a->flag == b->flag && a->dtype == b->dtype && a->edge == b->edge;
}

/* Appends a shape (dims in order, then derived ones) unless it repeats one. f: NULL or
 * HONE_SLOT_MAX_PARAMS params. */
static void push(shape_list *l, const int64_t *dims, int nd, const float *f, int32_t flag,
                 int32_t dtype, int edge)
{
    if (l->n >= l->cap) return;
    hone_slot_shape s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < nd; i++) s.d[i] = dims[i];
    for (int i = 0; f && i < HONE_SLOT_MAX_PARAMS; i++) s.f[i] = f[i];
    s.flag = flag;
    s.dtype = dtype;
    s.edge = edge;
    if (l->d->derive) l->d->derive(l->d, &s);
    for (int i = 0; i < l->n; i++)
        if (same_shape(&l->s[i], &s)) return;
    l->s[l->n++] = s;
}

#define PUSH(l, f, flag, dtype, edge, ...)                                                    \
    do {                                                                                      \
        int64_t dims_[] = {__VA_ARGS__};                                                      \
        push(l, dims_, (int)(sizeof dims_ / sizeof dims_[0]), f, flag, dtype, edge);          \
    } while (0)

static const hone_hparams *hparams(const hone_model *m) { return m ? hone_model_hparams(m) : NULL; }

static int shapes_elementwise(const hone_slot_desc *d, const hone_model *m, hone_slot_shape *out, int cap)
{
    const hone_hparams *hp = hparams(m);
    int64_t mdim = hp ? hp->dim : REF_DIM, mffn = hp ? hp->ffn : REF_FFN;
    shape_list l = {.d = d, .s = out, .cap = cap};
    int64_t ns[] = {1, 7, 33, 1000, mffn, mdim, REF_FFN, REF_DIM, REF_CHUNK * REF_FFN};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) PUSH(&l, NULL, 0, -1, 0, ns[i]);
    PUSH(&l, NULL, 0, -1, 1, 257);
    return l.n;
}

static int shapes_rmsnorm(const hone_slot_desc *d, const hone_model *m, hone_slot_shape *out, int cap)
{
    const hone_hparams *hp = hparams(m);
    int64_t mdim = hp ? hp->dim : REF_DIM;
    float eps[HONE_SLOT_MAX_PARAMS] = {hp ? hp->norm_eps : 1e-5f};
    shape_list l = {.d = d, .s = out, .cap = cap};
    PUSH(&l, eps, 0, -1, 0, 1, mdim);
    PUSH(&l, eps, 0, -1, 0, 5, mdim);
    PUSH(&l, eps, 0, -1, 0, 1, REF_DIM);
    PUSH(&l, eps, 0, -1, 0, REF_CHUNK, REF_DIM);
    PUSH(&l, eps, 0, -1, 0, 1, 1);
    PUSH(&l, eps, 0, -1, 0, 3, 7);
    PUSH(&l, eps, 0, -1, 0, 2, 33);
    PUSH(&l, eps, 0, -1, 1, 4, 100);
    return l.n;
}

static int shapes_rope(const hone_slot_desc *d, const hone_model *m, hone_slot_shape *out, int cap)
{
    const hone_hparams *hp = hparams(m);
    int64_t h = hp ? hp->n_heads : REF_HEADS, kv = hp ? hp->n_kv_heads : REF_KV_HEADS;
    int64_t hd = hp ? hp->head_dim : REF_HEAD_DIM, nr = hp ? hp->n_rot : REF_HEAD_DIM;
    float base[HONE_SLOT_MAX_PARAMS] = {hp ? hp->rope_base : 100000.0f};
    int neox = hp ? hp->rope_neox : 0;
    float b1[HONE_SLOT_MAX_PARAMS] = {100000.0f}, b2[HONE_SLOT_MAX_PARAMS] = {10000.0f},
          b3[HONE_SLOT_MAX_PARAMS] = {500000.0f};
    shape_list l = {.d = d, .s = out, .cap = cap};
    PUSH(&l, base, neox, -1, 0, 1, h, hd, nr);
    PUSH(&l, base, neox, -1, 0, 5, kv, hd, nr);
    PUSH(&l, b1, 0, -1, 0, REF_CHUNK, REF_HEADS, REF_HEAD_DIM, REF_HEAD_DIM);
    PUSH(&l, b2, 0, -1, 0, 3, 3, 6, 4);
    PUSH(&l, b2, 1, -1, 0, 3, 3, 6, 4);
    PUSH(&l, b3, 1, -1, 0, 2, 1, 10, 10);
    PUSH(&l, b2, 0, -1, 0, 1, 1, 2, 2);
    return l.n;
}

/* Keys of the long-context cases: a tile and block boundary of every kernel so far. */
#define LONG_KEYS 4096

/* dims: n, pos0, n_kv, block_size, heads, kv_heads, head_dim (n_blocks derived) */
static int shapes_attention(const hone_slot_desc *d, const hone_model *m, hone_slot_shape *out, int cap)
{
    const hone_hparams *hp = hparams(m);
    int64_t h = hp ? hp->n_heads : REF_HEADS, kv = hp ? hp->n_kv_heads : REF_KV_HEADS;
    int64_t hd = hp ? hp->head_dim : REF_HEAD_DIM;
    shape_list l = {.d = d, .s = out, .cap = cap};
    if (d->kind == HONE_SLOT_KIND_ATTENTION_DECODE) {
        PUSH(&l, NULL, 0, -1, 0, 1, 0, 1, 16, h, kv, hd);
        PUSH(&l, NULL, 0, -1, 0, 1, 0, 37, 16, h, kv, hd);
        PUSH(&l, NULL, 0, -1, 0, 1, 0, 300, 16, h, kv, hd);
        PUSH(&l, NULL, 0, -1, 0, 1, 0, 1024, 16, REF_HEADS, REF_KV_HEADS, REF_HEAD_DIM);
        /* long context (issue 18): the gate times 4096 keys (the largest case); parity one key
         * either side of the 4096 tile and block boundary */
        PUSH(&l, NULL, 0, -1, 0, 1, 0, LONG_KEYS, 16, REF_HEADS, REF_KV_HEADS, REF_HEAD_DIM);
        PUSH(&l, NULL, 0, -1, 0, 1, 0, LONG_KEYS - 1, 16, h, kv, hd);
        PUSH(&l, NULL, 0, -1, 0, 1, 0, LONG_KEYS + 1, 16, 4, 2, 16);
        PUSH(&l, NULL, 0, -1, 0, 1, 0, 5, 3, 4, 2, 7);
        PUSH(&l, NULL, 0, -1, 0, 1, 0, 2, 1, 2, 1, 33);
        PUSH(&l, NULL, 0, -1, 1, 1, 0, 50, 16, 4, 2, 16);
    } else {
        PUSH(&l, NULL, 0, -1, 0, 5, 0, 0, 16, h, kv, hd);
        PUSH(&l, NULL, 0, -1, 0, 3, 20, 0, 16, h, kv, hd);
        PUSH(&l, NULL, 0, -1, 0, REF_CHUNK, 64, 0, 16, REF_HEADS, REF_KV_HEADS, REF_HEAD_DIM);
        /* long context: chunks whose queries see 4081 .. 4096 keys and 4094 .. 4100 (across the
         * 4096 boundary) */
        PUSH(&l, NULL, 0, -1, 0, 16, LONG_KEYS - 16, 0, 16, REF_HEADS, REF_KV_HEADS, REF_HEAD_DIM);
        PUSH(&l, NULL, 0, -1, 0, 7, LONG_KEYS - 3, 0, 16, h, kv, hd);
        PUSH(&l, NULL, 0, -1, 0, 4, 3, 0, 3, 4, 2, 7);
        PUSH(&l, NULL, 0, -1, 0, 1, 0, 0, 1, 2, 1, 33);
        PUSH(&l, NULL, 0, -1, 1, 6, 10, 0, 16, 4, 2, 16);
    }
    return l.n;
}

/* The weight dtypes in the order of the matvec / matmul slots; the first N_FUSED_DTYPES have
 * fused slots (in the same order). */
#define N_MAT_DTYPES 14
#define N_FUSED_DTYPES 6
static const int MAT_DTYPES[N_MAT_DTYPES] = {
    HONE_DTYPE_F32,  HONE_DTYPE_F16,  HONE_DTYPE_BF16, HONE_DTYPE_Q8_0, HONE_DTYPE_Q4_0,
    HONE_DTYPE_Q4_1, HONE_DTYPE_Q5_0, HONE_DTYPE_Q5_1, HONE_DTYPE_Q4_K, HONE_DTYPE_Q5_K,
    HONE_DTYPE_Q6_K, HONE_DTYPE_Q3_K, HONE_DTYPE_Q2_K, HONE_DTYPE_MXFP4};
_Static_assert(HONE_SLOT_MATVEC_LAST - HONE_SLOT_MATVEC_F32 + 1 == N_MAT_DTYPES, "matvec slots");
_Static_assert(HONE_SLOT_MATMUL_LAST - HONE_SLOT_MATMUL_F32 + 1 == N_MAT_DTYPES, "matmul slots");

static int shapes_embed(const hone_slot_desc *d, const hone_model *m, hone_slot_shape *out, int cap)
{
    shape_list l = {.d = d, .s = out, .cap = cap};
    for (int i = 0; i < N_FUSED_DTYPES; i++) {
        int dt = MAT_DTYPES[i];
        PUSH(&l, NULL, 0, dt, 0, 5, REF_DIM, 1000); /* both dims are whole blocks */
        PUSH(&l, NULL, 0, dt, 0, 1, 32, 7);
    }
    if (m) {
        const hone_weight *e = hone_model_tok_embd(m);
        if (hone_dtype_block_size(e->dtype) == 1 || e->cols % HONE_QK == 0)
            PUSH(&l, NULL, 0, e->dtype, 0, 7, e->cols, 1000);
    }
    PUSH(&l, NULL, 0, HONE_DTYPE_F32, 0, 3, 7, 5);
    for (int i = 0; i < N_FUSED_DTYPES; i++) PUSH(&l, NULL, 0, MAT_DTYPES[i], 1, 9, 64, 50); /* special rows */
    for (int i = N_FUSED_DTYPES; i < N_MAT_DTYPES; i++) { /* the further formats: 256 columns */
        PUSH(&l, NULL, 0, MAT_DTYPES[i], 0, 5, 256, 300);
        PUSH(&l, NULL, 0, MAT_DTYPES[i], 1, 9, 256, 50);
    }
    return l.n;
}

/* A matrix shape of the slot: matvec (rows, cols), matmul (n, rows, cols); refused where the
 * dtype's blocks do not divide cols or the weight is too big for kernel-level cases. */
static void push_mat(shape_list *l, int64_t n, int64_t rows, int64_t cols)
{
    int dt = l->d->dtype;
    if (cols % hone_dtype_block_size(dt)) return;
    if (hone_dtype_row_bytes(dt, cols) * rows > MAX_WEIGHT_BYTES) return;
    if (l->d->kind == HONE_SLOT_KIND_MATVEC) PUSH(l, NULL, 0, dt, l->edge, rows, cols);
    else PUSH(l, NULL, 0, dt, l->edge, n, rows, cols);
}

/* The shapes a K format (cols % 256 == 0) adds, the SmolLM2 ones having 576 columns: the
 * reference FFN up and down at 1536, one and odd rows, several blocks per row. */
static void k_shapes(shape_list *l, int mv)
{
    push_mat(l, mv ? 1 : 5, REF_FFN, 1536);
    push_mat(l, mv ? 1 : 2, 1, 256);
    push_mat(l, mv ? 1 : 2, 7, 512);
    push_mat(l, mv ? 1 : 3, 33, 1280);
}

static int shapes_mat(const hone_slot_desc *d, const hone_model *m, hone_slot_shape *out, int cap)
{
    shape_list l = {.d = d, .s = out, .cap = cap};
    int mv = d->kind == HONE_SLOT_KIND_MATVEC;
    int64_t n = mv ? 1 : 5;
    if (m) { /* every distinct weight shape of the slot's dtype in the model */
        const hone_layer *L = hone_model_layer(m, 0);
        const hone_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down,
                                   hone_model_output(m)};
        for (int i = 0; i < 8; i++)
            if (ws[i]->dtype == d->dtype) push_mat(&l, n, ws[i]->rows, ws[i]->cols);
    }
    push_mat(&l, n, REF_FFN, REF_DIM);
    push_mat(&l, n, REF_DIM, REF_FFN);
    push_mat(&l, n, REF_DIM, REF_DIM);
    push_mat(&l, n, 192, REF_DIM);
    if (!mv) push_mat(&l, REF_CHUNK, REF_FFN, REF_DIM);
    int64_t e = mv ? 1 : 2;
    push_mat(&l, e, 1, 32);
    push_mat(&l, e, 7, 64);
    push_mat(&l, e, 33, 96);
    push_mat(&l, mv ? 1 : 3, 3, 160);
    push_mat(&l, e, 5, 7);
    push_mat(&l, e, 3, 33);
    push_mat(&l, 1, 1, 1);
    if (hone_dtype_block_size(d->dtype) == HONE_QK_K) /* whole 256-value blocks */
        k_shapes(&l, mv);
    l.edge = 1; /* special weights against zero blocks of activations, and huge/tiny ones */
    push_mat(&l, mv ? 1 : 3, 33, 96);
    push_mat(&l, mv ? 1 : 2, 64, 256);
    if (hone_dtype_block_size(d->dtype) == HONE_QK_K) push_mat(&l, mv ? 1 : 3, 17, 768);
    return l.n;
}

/* A fused slot's shape of weight rows (qkv: rq, rk, rv; the others: rows) and cols, refused
 * like push_mat's (blocks must divide cols; the weights together at most MAX_WEIGHT_BYTES). */
static void push_fused(shape_list *l, float eps, int64_t rq, int64_t rk, int64_t rv, int64_t cols)
{
    int dt = l->d->dtype;
    float f[HONE_SLOT_MAX_PARAMS] = {eps};
    if (hone_dtype_block_size(dt) == HONE_QK && cols % HONE_QK) return;
    int64_t rows = l->d->kind == HONE_SLOT_KIND_QKV ? rq + rk + rv
                 : l->d->kind == HONE_SLOT_KIND_FFN ? 2 * rq : rq;
    if (hone_dtype_row_bytes(dt, cols) * rows > MAX_WEIGHT_BYTES) return;
    if (l->d->kind == HONE_SLOT_KIND_QKV) PUSH(l, NULL, 0, dt, l->edge, rq, rk, rv, cols);
    else PUSH(l, l->d->kind == HONE_SLOT_KIND_RMSNORM_MATVEC ? f : NULL, 0, dt, l->edge, rq, cols);
}

/* The model's shapes where all the fused weights share the slot's dtype (qkv: layer 0's q, k,
 * v; ffn: gate and up; rmsnorm_matvec: the output head, the one norm that feeds one matvec),
 * the SmolLM2-135M reference shapes, then edge shapes (1, odd, non-power-of-two). */
static int shapes_fused(const hone_slot_desc *d, const hone_model *m, hone_slot_shape *out, int cap)
{
    shape_list l = {.d = d, .s = out, .cap = cap};
    int k = d->kind, dt = d->dtype;
    float eps = m ? hone_model_hparams(m)->norm_eps : 1e-5f;
    if (m) {
        const hone_layer *L = hone_model_layer(m, 0);
        const hone_weight *o = hone_model_output(m);
        if (k == HONE_SLOT_KIND_QKV && L->wq.dtype == dt && L->wk.dtype == dt && L->wv.dtype == dt)
            push_fused(&l, eps, L->wq.rows, L->wk.rows, L->wv.rows, L->wq.cols);
        if (k == HONE_SLOT_KIND_FFN && L->w_gate.dtype == dt && L->w_up.dtype == dt)
            push_fused(&l, eps, L->w_gate.rows, 0, 0, L->w_gate.cols);
        if (k == HONE_SLOT_KIND_RMSNORM_MATVEC && o->dtype == dt) push_fused(&l, eps, o->rows, 0, 0, o->cols);
    }
    if (k == HONE_SLOT_KIND_QKV) push_fused(&l, eps, REF_DIM, 192, 192, REF_DIM);
    else if (k == HONE_SLOT_KIND_FFN) push_fused(&l, eps, REF_FFN, 0, 0, REF_DIM);
    else push_fused(&l, eps, 49152, 0, 0, REF_DIM);
    push_fused(&l, eps, 1, 1, 1, 32);
    push_fused(&l, eps, 7, 3, 5, 64);
    push_fused(&l, eps, 33, 2, 1, 96);
    push_fused(&l, eps, 5, 3, 3, 7);
    push_fused(&l, eps, 3, 1, 2, 33);
    push_fused(&l, eps, 1, 1, 1, 1);
    l.edge = 1;
    push_fused(&l, eps, 33, 5, 7, 96);
    push_fused(&l, eps, 64, 16, 16, 256);
    return l.n;
}

/* ---- the descriptors ---------------------------------------------------------------------- */

#define L(...) {__VA_ARGS__, HONE_SLOT_END}
#define NONE {HONE_SLOT_END}
#define T_OUT(nm, ...) {.name = nm, .ctype = "float *", .role = HONE_SLOT_ARG_OUT, .dims = L(__VA_ARGS__)}
#define T_IN(nm, l, h, e, ...) \
    {.name = nm, .ctype = "const float *", .role = HONE_SLOT_ARG_IN, .dims = L(__VA_ARGS__), .lo = l, .hi = h, .edge = e}
#define T_DIM(nm, i) {.name = nm, .ctype = "int64_t", .role = HONE_SLOT_ARG_DIM, .dims = {i, HONE_SLOT_END}}
#define T_F32(nm, i) {.name = nm, .ctype = "float", .role = HONE_SLOT_ARG_F32, .dims = {i, HONE_SLOT_END}}

#define MATVEC_DESC(dt, DT)                                                                         \
    {.name = "matvec_" #dt, .kind = HONE_SLOT_KIND_MATVEC, .dtype = DT,                             \
     .math = "y[r] = sum_c W[r][c] * x[c] for r < rows: W[rows][cols] of the weight dtype "         \
             "(GGUF rows, dequantised exactly), x[cols], y[rows] f32.",                             \
     .fn_type = "hone_slot_matvec_fn", .n_args = 5,                                                 \
     .args = {T_OUT("y", MV_ROWS),                                                                  \
              {.name = "W", .ctype = "const void *", .role = HONE_SLOT_ARG_WEIGHT, .dims = L(MV_ROWS, MV_COLS)}, \
              {.name = "x", .ctype = "const float *", .role = HONE_SLOT_ARG_IN, .dims = L(MV_COLS),       \
               .lo = -1, .hi = 1, .edge = 1e4, .flags = HONE_SLOT_ARG_ZERO_BLOCKS},                 \
              T_DIM("rows", MV_ROWS), T_DIM("cols", MV_COLS)},        \
     .n_dims = 2, .dims = {"rows", "cols"}, .key_dims = 3, .range_dim = -1,                         \
     .share_units = L(MV_ROWS), .share_len = NONE, .cmp_rows = NONE, .cuda_x = L(MV_ROWS), .cuda_y = NONE,                                \
     .cost = cost_matvec, .shapes = shapes_mat, .invoke = invoke_matvec,                            \
     .cpu_baseline = (void *)hone_cpu_matvec_##dt}

#define MATMUL_DESC(dt, DT)                                                                         \
    {.name = "matmul_" #dt, .kind = HONE_SLOT_KIND_MATMUL, .dtype = DT,                             \
     .math = "Y[t][r] = sum_c W[r][c] * X[t][c]: W[rows][cols] of the weight dtype, X[n][cols], "   \
             "Y[n][rows] f32; Y[t] must be bitwise the same dtype's matvec of X[t].",               \
     .fn_type = "hone_slot_matmul_fn", .n_args = 6,                                                 \
     .args = {T_OUT("Y", MM_N, MM_ROWS),                                                            \
              {.name = "W", .ctype = "const void *", .role = HONE_SLOT_ARG_WEIGHT, .dims = L(MM_ROWS, MM_COLS)}, \
              {.name = "X", .ctype = "const float *", .role = HONE_SLOT_ARG_IN, .dims = L(MM_N, MM_COLS), \
               .lo = -1, .hi = 1, .edge = 1e4, .flags = HONE_SLOT_ARG_ZERO_BLOCKS},                 \
              T_DIM("n", MM_N), T_DIM("rows", MM_ROWS),                                             \
              T_DIM("cols", MM_COLS)},                                                              \
     .n_dims = 3, .dims = {"n", "rows", "cols"}, .key_dims = 7, .range_dim = -1,                    \
     .share_units = L(MM_ROWS), .share_len = NONE, .cmp_rows = L(MM_N), .cuda_x = L(MM_ROWS), .cuda_y = L(MM_N),                             \
     .cost = cost_matmul, .shapes = shapes_mat, .invoke = invoke_matmul,                            \
     .cpu_baseline = (void *)hone_cpu_matmul_##dt}

#define T_W(nm, ...) {.name = nm, .ctype = "const void *", .role = HONE_SLOT_ARG_WEIGHT, .dims = L(__VA_ARGS__)}
#define T_X(nm, d)                                                                                  \
    {.name = nm, .ctype = "const float *", .role = HONE_SLOT_ARG_IN, .dims = L(d), .lo = -1, .hi = 1, \
     .edge = 1e4, .flags = HONE_SLOT_ARG_ZERO_BLOCKS}

#define QKV_DESC(dt, DT)                                                                            \
    {.name = "qkv_" #dt, .kind = HONE_SLOT_KIND_QKV, .dtype = DT,                                   \
     .math = "y[rq + rk + rv] = concat(Wq x, Wk x, Wv x) (decode, one token): Wq[rq][cols], "       \
             "Wk[rk][cols], Wv[rv][cols] of the weight dtype (GGUF rows, dequantised exactly), "    \
             "x[cols], y f32; row r of y is bitwise the matvec row of Wq (r < rq), of Wk at r - rq, " \
             "of Wv at r - rq - rk. Share: the concatenated rows of y.",                            \
     .fn_type = "hone_slot_qkv_fn", .n_args = 9,                                                    \
     .args = {T_OUT("y", QKV_ROWS), T_W("Wq", QKV_RQ, QKV_COLS), T_W("Wk", QKV_RK, QKV_COLS),       \
              T_W("Wv", QKV_RV, QKV_COLS), T_X("x", QKV_COLS), T_DIM("rq", QKV_RQ),                 \
              T_DIM("rk", QKV_RK), T_DIM("rv", QKV_RV), T_DIM("cols", QKV_COLS)},                   \
     .n_dims = 5, .dims = {"rq", "rk", "rv", "cols", "rows"}, .key_dims = 15, .range_dim = -1,      \
     .share_units = L(QKV_ROWS), .share_len = NONE, .cmp_rows = NONE, .cuda_x = NONE, .cuda_y = NONE, \
     .cost = cost_qkv, .derive = derive_qkv, .shapes = shapes_fused, .invoke = invoke_qkv,          \
     .cpu_baseline = (void *)hone_cpu_qkv_##dt}

#define FFN_DESC(dt, DT)                                                                            \
    {.name = "ffn_" #dt, .kind = HONE_SLOT_KIND_FFN, .dtype = DT,                                   \
     .math = "out[r] = g / (1 + expf(-g)) * u with g = (Wg x)[r], u = (Wu x)[r], r < rows (gate "   \
             "and up projections with swiglu, decode, one token): Wg, Wu [rows][cols] of the "      \
             "weight dtype, x[cols], out[rows] f32; g and u bitwise the matvec rows, then the "     \
             "swiglu slot's f32 formula.",                                                          \
     .fn_type = "hone_slot_ffn_fn", .n_args = 6,                                                    \
     .args = {T_OUT("out", F_ROWS), T_W("Wg", F_ROWS, F_COLS), T_W("Wu", F_ROWS, F_COLS),           \
              T_X("x", F_COLS), T_DIM("rows", F_ROWS), T_DIM("cols", F_COLS)},                      \
     .n_dims = 2, .dims = {"rows", "cols"}, .key_dims = 3, .range_dim = -1,                         \
     .share_units = L(F_ROWS), .share_len = NONE, .cmp_rows = NONE, .cuda_x = NONE, .cuda_y = NONE, \
     .cost = cost_ffn, .shapes = shapes_fused, .invoke = invoke_ffn,                                \
     .cpu_baseline = (void *)hone_cpu_ffn_##dt}

#define RMSNORM_MATVEC_DESC(dt, DT)                                                                 \
    {.name = "rmsnorm_matvec_" #dt, .kind = HONE_SLOT_KIND_RMSNORM_MATVEC, .dtype = DT,             \
     .math = "y[r] = sum_c W[r][c] * h[c], h[c] = x[c] / sqrt(mean_j(x[j]^2) + eps) * g[c] "        \
             "(decode, one token; the final norm into the LM head): W[rows][cols] of the weight "   \
             "dtype, x[cols], g[cols], y[rows] f32; h bitwise the rmsnorm slot's f32 row, y "       \
             "bitwise the matvec of h; scratch: this share's own >= cols floats (each share may "   \
             "recompute h there).",                                                                 \
     .fn_type = "hone_slot_rmsnorm_matvec_fn", .n_args = 8,                                         \
     .args = {T_OUT("y", F_ROWS), T_W("W", F_ROWS, F_COLS),                                         \
              {.name = "x", .ctype = "const float *", .role = HONE_SLOT_ARG_IN, .dims = L(F_COLS),   \
               .lo = -2, .hi = 2, .edge = 1e4, .flags = HONE_SLOT_ARG_ZERO_BLOCKS},                 \
              {.name = "g", .ctype = "const float *", .role = HONE_SLOT_ARG_NORM, .dims = L(F_COLS), \
               .lo = 0.5f, .hi = 1.5f},                                                             \
              T_DIM("rows", F_ROWS), T_DIM("cols", F_COLS), T_F32("eps", 0),                        \
              {.name = "scratch", .ctype = "float *", .role = HONE_SLOT_ARG_SCRATCH, .dims = L(F_COLS)}}, \
     .n_dims = 2, .dims = {"rows", "cols"}, .key_dims = 3, .range_dim = -1, .params = {"eps"},      \
     .share_units = L(F_ROWS), .share_len = NONE, .cmp_rows = NONE, .cuda_x = NONE, .cuda_y = NONE, \
     .cost = cost_rmsnorm_matvec, .shapes = shapes_fused, .invoke = invoke_rmsnorm_matvec,          \
     .cpu_baseline = (void *)hone_cpu_rmsnorm_matvec_##dt}

#define ATTN_ARGS_HEAD                                                                              \
    T_OUT("out", A_N, A_HEADS, A_HD), T_IN("q", -1, 1, 12, A_N, A_HEADS, A_HD),                     \
    {.name = "k_cache", .ctype = "const float *", .role = HONE_SLOT_ARG_KV,                         \
     .dims = L(A_NBLOCKS, A_KVH, A_BS, A_HD), .lo = -1, .hi = 1, .bound = A_NKV, .ref = 4},         \
    {.name = "v_cache", .ctype = "const float *", .role = HONE_SLOT_ARG_KV,                         \
     .dims = L(A_NBLOCKS, A_KVH, A_BS, A_HD), .lo = -1, .hi = 1, .bound = A_NKV, .ref = 4},         \
    {.name = "block_table", .ctype = "const int32_t *", .role = HONE_SLOT_ARG_BLOCKS, .dims = L(A_NBLOCKS)}
#define ATTN_ARGS_TAIL                                                                              \
    T_DIM("block_size", A_BS), T_DIM("n_heads", A_HEADS), T_DIM("n_kv_heads", A_KVH),               \
    T_DIM("head_dim", A_HD), T_F32("scale", 0),                                                     \
    {.name = "scratch", .ctype = "float *", .role = HONE_SLOT_ARG_SCRATCH, .dims = L(A_NKV)}
#define ATTN_DIMS .n_dims = 8, .dims = {"n", "pos0", "n_kv", "block_size", "heads", "kv_heads", "head_dim", "n_blocks"}

static void finish_attention_decode(const hone_slot_value *v)
{
    hone_cpu_attention_decode_fold(v[0].p, v[11].p, v[7].i64, v[9].i64, v[5].i64);
}

static int64_t scratch_attention_decode(const hone_slot_shape *s)
{
    return hone_att_decode_scratch_floats(s->d[A_HEADS], s->d[A_HD], s->d[A_NKV]);
}

static const hone_slot_desc builtin[HONE_SLOT_COUNT] = {
    [HONE_SLOT_EMBED] = {
        .name = "embed", .kind = HONE_SLOT_KIND_EMBED, .dtype = -1,
        .math = "out[i][:] = table[ids[i]][:] dequantised to f32 exactly, for i < n: "
                "table[vocab][dim] of its dtype, ids[n] int32, out[n][dim].",
        .fn_type = "hone_slot_embed_fn", .n_args = 6,
        .args = {T_OUT("out", E_N, E_DIM),
                 {.name = "table", .ctype = "const void *", .role = HONE_SLOT_ARG_WEIGHT, .dims = L(E_VOCAB, E_DIM)},
                 {.name = "dtype", .ctype = "int32_t", .role = HONE_SLOT_ARG_DTYPE, .dims = NONE},
                 {.name = "ids", .ctype = "const int32_t *", .role = HONE_SLOT_ARG_INDEX, .dims = L(E_N), .bound = E_VOCAB},
                 T_DIM("n", E_N), T_DIM("dim", E_DIM)},
        .n_dims = 3, .dims = {"n", "dim", "vocab"}, .key_dims = 3, .range_dim = -1,
        .share_units = L(E_N), .share_len = L(E_DIM), .cmp_rows = L(E_N), .nth_max_dim = 2,
        .cuda_x = L(E_DIM), .cuda_y = L(E_N),
        .cost = cost_embed, .shapes = shapes_embed, .invoke = invoke_embed,
        .cpu_baseline = (void *)hone_cpu_embed},
    [HONE_SLOT_RMSNORM] = {
        .name = "rmsnorm", .kind = HONE_SLOT_KIND_RMSNORM, .dtype = -1,
        .math = "y[r][i] = x[r][i] / sqrt(mean_j(x[r][j]^2) + eps) * w[i] for r < n, i < dim; "
                "y may equal x (in place).",
        .fn_type = "hone_slot_rmsnorm_fn", .n_args = 6,
        .args = {T_OUT("y", R_N, R_DIM),
                 {.name = "x", .ctype = "const float *", .role = HONE_SLOT_ARG_IN, .dims = L(R_N, R_DIM),
                  .lo = -2, .hi = 2, .edge = 3e19, .flags = HONE_SLOT_ARG_ZERO_ROW},
                 {.name = "w", .ctype = "const float *", .role = HONE_SLOT_ARG_NORM, .dims = L(R_DIM), .lo = 0.5f, .hi = 1.5f},
                 T_DIM("n", R_N), T_DIM("dim", R_DIM), T_F32("eps", 0)},
        .n_dims = 2, .dims = {"n", "dim"}, .key_dims = 3, .range_dim = -1, .params = {"eps"},
        .share_units = L(R_N), .share_len = L(R_DIM), .cmp_rows = L(R_N), .nth_max_dim = 2,
        .cuda_x = L(R_N), .cuda_y = NONE,
        .cost = cost_rmsnorm, .shapes = shapes_rmsnorm, .invoke = invoke_rmsnorm,
        .cpu_baseline = (void *)hone_cpu_rmsnorm},
    [HONE_SLOT_MATVEC_F32] = MATVEC_DESC(f32, HONE_DTYPE_F32),
    [HONE_SLOT_MATVEC_F16] = MATVEC_DESC(f16, HONE_DTYPE_F16),
    [HONE_SLOT_MATVEC_BF16] = MATVEC_DESC(bf16, HONE_DTYPE_BF16),
    [HONE_SLOT_MATVEC_Q8_0] = MATVEC_DESC(q8_0, HONE_DTYPE_Q8_0),
    [HONE_SLOT_MATVEC_Q4_0] = MATVEC_DESC(q4_0, HONE_DTYPE_Q4_0),
    [HONE_SLOT_MATVEC_Q4_1] = MATVEC_DESC(q4_1, HONE_DTYPE_Q4_1),
    [HONE_SLOT_MATVEC_Q5_0] = MATVEC_DESC(q5_0, HONE_DTYPE_Q5_0),
    [HONE_SLOT_MATVEC_Q5_1] = MATVEC_DESC(q5_1, HONE_DTYPE_Q5_1),
    [HONE_SLOT_MATVEC_Q4_K] = MATVEC_DESC(q4_k, HONE_DTYPE_Q4_K),
    [HONE_SLOT_MATVEC_Q5_K] = MATVEC_DESC(q5_k, HONE_DTYPE_Q5_K),
    [HONE_SLOT_MATVEC_Q6_K] = MATVEC_DESC(q6_k, HONE_DTYPE_Q6_K),
    [HONE_SLOT_MATVEC_Q3_K] = MATVEC_DESC(q3_k, HONE_DTYPE_Q3_K),
    [HONE_SLOT_MATVEC_Q2_K] = MATVEC_DESC(q2_k, HONE_DTYPE_Q2_K),
    [HONE_SLOT_MATVEC_MXFP4] = MATVEC_DESC(mxfp4, HONE_DTYPE_MXFP4),
    [HONE_SLOT_MATMUL_F32] = MATMUL_DESC(f32, HONE_DTYPE_F32),
    [HONE_SLOT_MATMUL_F16] = MATMUL_DESC(f16, HONE_DTYPE_F16),
    [HONE_SLOT_MATMUL_BF16] = MATMUL_DESC(bf16, HONE_DTYPE_BF16),
    [HONE_SLOT_MATMUL_Q8_0] = MATMUL_DESC(q8_0, HONE_DTYPE_Q8_0),
    [HONE_SLOT_MATMUL_Q4_0] = MATMUL_DESC(q4_0, HONE_DTYPE_Q4_0),
    [HONE_SLOT_MATMUL_Q4_1] = MATMUL_DESC(q4_1, HONE_DTYPE_Q4_1),
    [HONE_SLOT_MATMUL_Q5_0] = MATMUL_DESC(q5_0, HONE_DTYPE_Q5_0),
    [HONE_SLOT_MATMUL_Q5_1] = MATMUL_DESC(q5_1, HONE_DTYPE_Q5_1),
    [HONE_SLOT_MATMUL_Q4_K] = MATMUL_DESC(q4_k, HONE_DTYPE_Q4_K),
    [HONE_SLOT_MATMUL_Q5_K] = MATMUL_DESC(q5_k, HONE_DTYPE_Q5_K),
    [HONE_SLOT_MATMUL_Q6_K] = MATMUL_DESC(q6_k, HONE_DTYPE_Q6_K),
    [HONE_SLOT_MATMUL_Q3_K] = MATMUL_DESC(q3_k, HONE_DTYPE_Q3_K),
    [HONE_SLOT_MATMUL_Q2_K] = MATMUL_DESC(q2_k, HONE_DTYPE_Q2_K),
    [HONE_SLOT_MATMUL_MXFP4] = MATMUL_DESC(mxfp4, HONE_DTYPE_MXFP4),
    [HONE_SLOT_ROPE] = {
        .name = "rope", .kind = HONE_SLOT_KIND_ROPE, .dtype = -1,
        .math = "In place on x[n][n_heads][head_dim]: rotates the first n_rot dims of every head by "
                "theta_i = pos[t] * freq_base^(-2i/n_rot), i < n_rot/2, computed in double; normal "
                "layout (neox == 0) pairs (2i, 2i+1), NeoX pairs (i, i + n_rot/2); "
                "(a, b) -> (a cos - b sin, a sin + b cos).",
        .fn_type = "hone_slot_rope_fn", .n_args = 8,
        .args = {{.name = "x", .ctype = "float *", .role = HONE_SLOT_ARG_INOUT, .dims = L(P_N, P_HEADS, P_HEAD_DIM), .lo = -2, .hi = 2},
                 {.name = "pos", .ctype = "const int32_t *", .role = HONE_SLOT_ARG_INDEX, .dims = L(P_N), .bound = -1},
                 T_DIM("n", P_N), T_DIM("n_heads", P_HEADS), T_DIM("head_dim", P_HEAD_DIM),
                 T_DIM("n_rot", P_ROT), T_F32("freq_base", 0),
                 {.name = "neox", .ctype = "int32_t", .role = HONE_SLOT_ARG_I32, .dims = {0, HONE_SLOT_END}}},
        .n_dims = 4, .dims = {"n", "heads", "head_dim", "n_rot"}, .key_dims = 15, .range_dim = -1,
        .params = {"freq_base"},
        .share_units = L(P_N, P_HEADS), .share_len = L(P_HEAD_DIM), .cmp_rows = L(P_N, P_HEADS),
        .nth_max_dim = 2, .cuda_x = L(P_N, P_HEADS), .cuda_y = NONE,
        .cost = cost_rope, .shapes = shapes_rope, .invoke = invoke_rope,
        .cpu_baseline = (void *)hone_cpu_rope},
    [HONE_SLOT_ATTENTION_DECODE] = {
        .name = "attention_decode", .kind = HONE_SLOT_KIND_ATTENTION_DECODE, .dtype = -1, .rev = 3,
        .rev_why = "rows of more than 512 keys are computed in segments of 512 keys, folded in order "
                   "(engine/kv_layout.h HONE_ATT_SEG), and the scratch is shared by a call's shares",
        .math = "One query per head over the paged cache: out[h][d] = sum_j softmax_j(scale * q[h] . "
                "K[j][kvh]) V[j][kvh][d] over keys j < n_kv, kvh = h / (n_heads / n_kv_heads); key j "
                "lives in block block_table[j / block_size] at slot j % block_size, a block holding "
                "[n_kv_heads][block_size][head_dim] f32 (one kv head's rows of a block contiguous: "
                "key j of kv head kvh at ((block_table[j / block_size] * n_kv_heads + kvh) * "
                "block_size + j % block_size) * head_dim). A row of more than 512 keys is computed in "
                "segments of 512 keys (keys [512 s, 512 s + 512)), each segment's softmax against its "
                "own maximum m_s with normaliser l_s (double) and unnormalised output o_s, then folded "
                "in segment order as hone_cpu_att_fold (kernels/cpu/common.h) does: M = max, a = "
                "expf(m - M), b = expf(m_s - M), l = l a + l_s b, A[d] = fmaf(o_s[d], b, A[d] a); "
                "out = A * (float)(1.0 / l). scratch: one buffer shared by all shares of the call, of "
                "max(n_kv, n_heads * ceil(n_kv / 512) * (head_dim + 4)) floats. On the CPU, with at "
                "most 512 keys the shares split the heads and write out; with more, the shares write no out: "
                "together they leave in scratch the partial of every (head h, segment s), at float "
                "(h * ceil(n_kv / 512) + s) * (head_dim + 4): head_dim floats of o_s, then m_s (a "
                "float), one unused float, l_s (a double); the caller folds them into out after the "
                "last share (kernels/cpu/attention_decode.c hone_cpu_attention_decode_fold). CUDA: "
                "each row whole (its segments folded in order) into out, scratch its scores.",
        .fn_type = "hone_slot_attention_decode_fn", .n_args = 12,
        .args = {ATTN_ARGS_HEAD,
                 {.name = "n_kv", .ctype = "int64_t", .role = HONE_SLOT_ARG_DIM, .dims = {A_NKV, HONE_SLOT_END},
                  .flags = HONE_SLOT_ARG_DEVICE_I32},
                 ATTN_ARGS_TAIL},
        ATTN_DIMS, .key_dims = (1u << A_N) | (1u << A_HEADS) | (1u << A_KVH) | (1u << A_HD),
        .range_dim = A_NKV, .params = {"scale"},
        .share_units = L(A_N, A_HEADS), .share_len = L(A_HD), .cmp_rows = L(A_N, A_HEADS),
        .cuda_x = L(A_HEADS), .cuda_y = L(A_N),
        .cost = cost_attention, .derive = derive_attention, .shapes = shapes_attention,
        .scratch_elems = scratch_attention_decode, .finish = finish_attention_decode,
        .invoke = invoke_attention_decode, .cpu_baseline = (void *)hone_cpu_attention_decode},
    [HONE_SLOT_ATTENTION_PREFILL] = {
        .name = "attention_prefill", .kind = HONE_SLOT_KIND_ATTENTION_PREFILL, .dtype = -1, .rev = 3,
        .rev_why = "rows of more than 512 keys are computed in segments of 512 keys, folded in order "
                   "(engine/kv_layout.h HONE_ATT_SEG), as attention_decode's",
        .math = "Causal attention for n queries at positions pos0 .. pos0+n-1 (their K/V already in "
                "the cache): query t sees keys j <= pos0 + t; q[n][n_heads][head_dim], out likewise; "
                "each (t, h) row bitwise equal to attention_decode with n_kv = pos0 + t + 1; "
                "scratch: this share's >= pos0 + n floats.",
        .fn_type = "hone_slot_attention_prefill_fn", .n_args = 13,
        .args = {ATTN_ARGS_HEAD, T_DIM("n", A_N), T_DIM("pos0", A_POS0), ATTN_ARGS_TAIL},
        ATTN_DIMS, .key_dims = (1u << A_N) | (1u << A_HEADS) | (1u << A_KVH) | (1u << A_HD),
        .range_dim = A_NKV, .params = {"scale"},
        .share_units = L(A_N, A_HEADS), .share_len = L(A_HD), .cmp_rows = L(A_N, A_HEADS),
        .cuda_x = L(A_HEADS), .cuda_y = L(A_N),
        .cost = cost_attention, .derive = derive_attention, .shapes = shapes_attention,
        .invoke = invoke_attention_prefill, .cpu_baseline = (void *)hone_cpu_attention_prefill},
    [HONE_SLOT_SWIGLU] = {
        .name = "swiglu", .kind = HONE_SLOT_KIND_SWIGLU, .dtype = -1,
        .math = "out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i], i < n; "
                "out may equal gate or up.",
        .fn_type = "hone_slot_swiglu_fn", .n_args = 4,
        .args = {T_OUT("out", B_N), T_IN("gate", -6, 6, 100, B_N), T_IN("up", -2, 2, 1e3, B_N), T_DIM("n", B_N)},
        .n_dims = 1, .dims = {"n"}, .key_dims = 1, .range_dim = -1,
        .share_units = L(B_N), .share_len = NONE, .cmp_rows = NONE, .cuda_x = L(B_N), .cuda_y = NONE,
        .cost = cost_swiglu, .shapes = shapes_elementwise, .invoke = invoke_binary,
        .cpu_baseline = (void *)hone_cpu_swiglu},
    [HONE_SLOT_ADD] = {
        .name = "add", .kind = HONE_SLOT_KIND_ADD, .dtype = -1,
        .math = "y[i] = a[i] + b[i], i < n (the residual add; also qwen2's q/k/v biases, row by "
                "row); y may equal a or b.",
        .fn_type = "hone_slot_add_fn", .n_args = 4,
        .args = {T_OUT("y", B_N), T_IN("a", -2, 2, 1e30, B_N), T_IN("b", -2, 2, 1e30, B_N), T_DIM("n", B_N)},
        .n_dims = 1, .dims = {"n"}, .key_dims = 1, .range_dim = -1,
        .share_units = L(B_N), .share_len = NONE, .cmp_rows = NONE, .nth_max_dim = 4096,
        .cuda_x = L(B_N), .cuda_y = NONE,
        .cost = cost_add, .shapes = shapes_elementwise, .invoke = invoke_binary,
        .cpu_baseline = (void *)hone_cpu_add},
    [HONE_SLOT_GEGLU] = {
        .name = "geglu", .kind = HONE_SLOT_KIND_GEGLU, .dtype = -1,
        .math = "out[i] = gelu_tanh(gate[i]) * up[i], i < n (Gemma's gated FFN): in f32, "
                "y = 0.7978845608f * g * (1 + 0.044715f * g * g), t = (float)tanh((double)y), "
                "out = 0.5f * g * (1 + t) * u, each operation rounded left to right; out may equal "
                "gate or up.",
        .fn_type = "hone_slot_geglu_fn", .n_args = 4,
        .args = {T_OUT("out", B_N), T_IN("gate", -6, 6, 100, B_N), T_IN("up", -2, 2, 1e3, B_N), T_DIM("n", B_N)},
        .n_dims = 1, .dims = {"n"}, .key_dims = 1, .range_dim = -1,
        .share_units = L(B_N), .share_len = NONE, .cmp_rows = NONE, .cuda_x = L(B_N), .cuda_y = NONE,
        .cost = cost_geglu, .shapes = shapes_elementwise, .invoke = invoke_binary,
        .cpu_baseline = (void *)hone_cpu_geglu},
    [HONE_SLOT_ROPE_FREQS] = {
        .name = "rope_freqs", .kind = HONE_SLOT_KIND_ROPE_FREQS, .dtype = -1,
        .math = "rope with per-pair frequency factors (llama3's rope_freqs.weight): in place on "
                "x[n][n_heads][head_dim], rotates the first n_rot dims of every head by theta_i = "
                "pos[t] * (freq_base^(-2i/n_rot) / freqs[i]), i < n_rot/2, the inverse frequency and "
                "the angle in double; normal layout (neox == 0) pairs (2i, 2i+1), NeoX pairs (i, i + "
                "n_rot/2); (a, b) -> (a cos - b sin, a sin + b cos).",
        .fn_type = "hone_slot_rope_freqs_fn", .n_args = 9,
        .args = {{.name = "x", .ctype = "float *", .role = HONE_SLOT_ARG_INOUT, .dims = L(P_N, P_HEADS, P_HEAD_DIM), .lo = -2, .hi = 2},
                 {.name = "pos", .ctype = "const int32_t *", .role = HONE_SLOT_ARG_INDEX, .dims = L(P_N), .bound = -1},
                 {.name = "freqs", .ctype = "const float *", .role = HONE_SLOT_ARG_NORM, .dims = L(P_HALF), .lo = 1, .hi = 8},
                 T_DIM("n", P_N), T_DIM("n_heads", P_HEADS), T_DIM("head_dim", P_HEAD_DIM),
                 T_DIM("n_rot", P_ROT), T_F32("freq_base", 0),
                 {.name = "neox", .ctype = "int32_t", .role = HONE_SLOT_ARG_I32, .dims = {0, HONE_SLOT_END}}},
        .n_dims = 5, .dims = {"n", "heads", "head_dim", "n_rot", "half"}, .key_dims = 15, .range_dim = -1,
        .params = {"freq_base"},
        .share_units = L(P_N, P_HEADS), .share_len = L(P_HEAD_DIM), .cmp_rows = L(P_N, P_HEADS),
        .nth_max_dim = 2, .cuda_x = L(P_N, P_HEADS), .cuda_y = NONE,
        .cost = cost_rope, .derive = derive_rope_freqs, .shapes = shapes_rope, .invoke = invoke_rope_freqs,
        .cpu_baseline = (void *)hone_cpu_rope_freqs},
    [HONE_SLOT_QKV_F32] = QKV_DESC(f32, HONE_DTYPE_F32),
    [HONE_SLOT_QKV_F16] = QKV_DESC(f16, HONE_DTYPE_F16),
    [HONE_SLOT_QKV_BF16] = QKV_DESC(bf16, HONE_DTYPE_BF16),
    [HONE_SLOT_QKV_Q8_0] = QKV_DESC(q8_0, HONE_DTYPE_Q8_0),
    [HONE_SLOT_QKV_Q4_0] = QKV_DESC(q4_0, HONE_DTYPE_Q4_0),
    [HONE_SLOT_QKV_Q4_1] = QKV_DESC(q4_1, HONE_DTYPE_Q4_1),
    [HONE_SLOT_FFN_F32] = FFN_DESC(f32, HONE_DTYPE_F32),
    [HONE_SLOT_FFN_F16] = FFN_DESC(f16, HONE_DTYPE_F16),
    [HONE_SLOT_FFN_BF16] = FFN_DESC(bf16, HONE_DTYPE_BF16),
    [HONE_SLOT_FFN_Q8_0] = FFN_DESC(q8_0, HONE_DTYPE_Q8_0),
    [HONE_SLOT_FFN_Q4_0] = FFN_DESC(q4_0, HONE_DTYPE_Q4_0),
    [HONE_SLOT_FFN_Q4_1] = FFN_DESC(q4_1, HONE_DTYPE_Q4_1),
    [HONE_SLOT_RMSNORM_MATVEC_F32] = RMSNORM_MATVEC_DESC(f32, HONE_DTYPE_F32),
    [HONE_SLOT_RMSNORM_MATVEC_F16] = RMSNORM_MATVEC_DESC(f16, HONE_DTYPE_F16),
    [HONE_SLOT_RMSNORM_MATVEC_BF16] = RMSNORM_MATVEC_DESC(bf16, HONE_DTYPE_BF16),
    [HONE_SLOT_RMSNORM_MATVEC_Q8_0] = RMSNORM_MATVEC_DESC(q8_0, HONE_DTYPE_Q8_0),
    [HONE_SLOT_RMSNORM_MATVEC_Q4_0] = RMSNORM_MATVEC_DESC(q4_0, HONE_DTYPE_Q4_0),
    [HONE_SLOT_RMSNORM_MATVEC_Q4_1] = RMSNORM_MATVEC_DESC(q4_1, HONE_DTYPE_Q4_1),
};

static hone_slot_desc registered[HONE_SLOT_MAX - HONE_SLOT_COUNT];
static int n_registered;

const hone_slot_desc *hone_slots_desc(int id)
{
    if (id >= 0 && id < HONE_SLOT_COUNT) return &builtin[id];
    if (id >= HONE_SLOT_COUNT && id < HONE_SLOT_COUNT + n_registered) return &registered[id - HONE_SLOT_COUNT];
    return NULL;
}

int hone_slots_count(void) { return HONE_SLOT_COUNT + n_registered; }

int hone_slots_register(const hone_slot_desc *d)
{
    if (!d || !d->name || !d->invoke || d->n_args <= 0 || d->n_args > HONE_SLOT_MAX_ARGS)
        return hone_error_set(HONE_EINVAL, "a slot descriptor needs a name, an invoke and 1..%d "
                              "arguments", HONE_SLOT_MAX_ARGS);
    if (hone_slots_from_name(d->name) >= 0)
        return hone_error_set(HONE_EINVAL, "slot '%s' exists already", d->name);
    if (n_registered >= HONE_SLOT_MAX - HONE_SLOT_COUNT)
        return hone_error_set(HONE_ERANGE, "the slot table is full (%d slots)", HONE_SLOT_MAX);
    if (hone_slots_out_arg(d) < 0)
        return hone_error_set(HONE_EINVAL, "slot '%s' has no output argument", d->name);
    registered[n_registered] = *d;
    return HONE_SLOT_COUNT + n_registered++;
}

const char *hone_slots_name(int id)
{
    const hone_slot_desc *d = hone_slots_desc(id);
    return d ? d->name : "unknown";
}

int hone_slots_rev(int id)
{
    const hone_slot_desc *d = hone_slots_desc(id);
    return !d ? -1 : d->rev > 0 ? d->rev : 1;
}

int hone_slots_from_name(const char *name)
{
    for (int i = 0; i < hone_slots_count(); i++)
        if (strcmp(name, hone_slots_desc(i)->name) == 0) return i;
    return -1;
}

void hone_slots_cpu_symbol(int id, char *buf, int cap)
{
    snprintf(buf, (size_t)cap, "hone_cpu_%s", hone_slots_name(id));
}

int hone_slots_prototype(int id, char *buf, int cap)
{
    const hone_slot_desc *d = hone_slots_desc(id);
    if (!d) return snprintf(buf, (size_t)cap, "%s", "");
    int n = snprintf(buf, (size_t)cap, "void hone_cpu_%s(", d->name);
    for (int a = 0; a < d->n_args; a++) {
        const char *t = d->args[a].ctype;
        size_t tl = strlen(t);
        n += snprintf(buf + (n < cap ? n : cap), (size_t)(n < cap ? cap - n : 0), "%s%s%s", t,
                      tl && t[tl - 1] == '*' ? "" : " ", d->args[a].name);
        n += snprintf(buf + (n < cap ? n : cap), (size_t)(n < cap ? cap - n : 0), ", ");
    }
    n += snprintf(buf + (n < cap ? n : cap), (size_t)(n < cap ? cap - n : 0), "int ith, int nth)");
    return n;
}

int hone_slots_param_types(int id, char *buf, int cap)
{
    const hone_slot_desc *d = hone_slots_desc(id);
    int n = 0;
    if (cap > 0) buf[0] = 0;
    if (!d) return 0;
    for (int a = 0; a <= d->n_args; a++) {
        const char *t = a < d->n_args ? d->args[a].ctype : "int,int";
        n += snprintf(buf + (n < cap ? n : cap), (size_t)(n < cap ? cap - n : 0), "%s%s",
                      a ? "," : "", t);
    }
    return n;
}

int hone_slots_matvec_id(int dtype)
{
    for (int i = 0; i < N_MAT_DTYPES; i++)
        if (MAT_DTYPES[i] == dtype) return HONE_SLOT_MATVEC_F32 + i;
    return -1;
}

int hone_slots_matmul_id(int dtype)
{
    for (int i = 0; i < N_MAT_DTYPES; i++)
        if (MAT_DTYPES[i] == dtype) return HONE_SLOT_MATMUL_F32 + i;
    return -1;
}

int hone_slots_fused_id(hone_slot_kind kind, int dtype)
{
    int mv = hone_slots_matvec_id(dtype);
    if (mv < 0) return -1;
    int i = mv - HONE_SLOT_MATVEC_F32;
    if (i >= N_FUSED_DTYPES) return -1;
    switch (kind) {
    case HONE_SLOT_KIND_QKV: return HONE_SLOT_QKV_F32 + i;
    case HONE_SLOT_KIND_FFN: return HONE_SLOT_FFN_F32 + i;
    case HONE_SLOT_KIND_RMSNORM_MATVEC: return HONE_SLOT_RMSNORM_MATVEC_F32 + i;
    default: return -1;
    }
}

int hone_slots_is_fused(int id) { return id >= HONE_SLOT_FUSED_FIRST && id < HONE_SLOT_COUNT; }

int hone_slots_fused_components(int id, int *ids, int cap)
{
    if (!hone_slots_is_fused(id) || cap < 2) return 0;
    const hone_slot_desc *d = hone_slots_desc(id);
    int mv = hone_slots_matvec_id(d->dtype);
    if (d->kind == HONE_SLOT_KIND_QKV) {
        ids[0] = mv;
        return 1;
    }
    ids[0] = d->kind == HONE_SLOT_KIND_FFN ? mv : HONE_SLOT_RMSNORM;
    ids[1] = d->kind == HONE_SLOT_KIND_FFN ? HONE_SLOT_SWIGLU : mv;
    return 2;
}

/* ---- shapes and calls ----------------------------------------------------------------------- */

int64_t hone_slots_dims_prod(const int8_t *l, const hone_slot_shape *s)
{
    int64_t p = 1;
    for (int i = 0; i < 5 && l[i] != HONE_SLOT_END; i++) p *= s->d[l[i]];
    return p;
}

int hone_slots_arg_is_tensor(hone_slot_role r)
{
    return r != HONE_SLOT_ARG_DIM && r != HONE_SLOT_ARG_DTYPE && r != HONE_SLOT_ARG_F32 &&
           r != HONE_SLOT_ARG_I32;
}

int64_t hone_slots_arg_elems(const hone_slot_desc *d, int a, const hone_slot_shape *s)
{
    if (d->args[a].role == HONE_SLOT_ARG_SCRATCH && d->scratch_elems) return d->scratch_elems(s);
    return hone_slots_arg_is_tensor(d->args[a].role) ? hone_slots_dims_prod(d->args[a].dims, s) : 1;
}

int hone_slots_arg_last_dim(const hone_slot_arg *g)
{
    int last = 0;
    while (last + 1 < 5 && g->dims[last + 1] != HONE_SLOT_END) last++;
    return last;
}

int64_t hone_slots_arg_bytes(const hone_slot_desc *d, int a, const hone_slot_shape *s)
{
    const hone_slot_arg *g = &d->args[a];
    if (!hone_slots_arg_is_tensor(g->role)) return 0;
    if (g->role == HONE_SLOT_ARG_WEIGHT) {
        int last = hone_slots_arg_last_dim(g);
        int64_t rows = 1;
        for (int i = 0; i < last; i++) rows *= s->d[g->dims[i]];
        return hone_dtype_row_bytes(s->dtype, s->d[g->dims[last]]) * rows;
    }
    return hone_slots_arg_elems(d, a, s) * 4;
}

int hone_slots_out_arg(const hone_slot_desc *d)
{
    for (int a = 0; a < d->n_args; a++)
        if (d->args[a].role == HONE_SLOT_ARG_OUT || d->args[a].role == HONE_SLOT_ARG_INOUT) return a;
    return -1;
}

void hone_slots_scalars(const hone_slot_desc *d, const hone_slot_shape *s, hone_slot_value *v)
{
    for (int a = 0; a < d->n_args; a++) {
        const hone_slot_arg *g = &d->args[a];
        switch (g->role) {
        case HONE_SLOT_ARG_DIM: v[a].i64 = s->d[g->dims[0]]; break;
        case HONE_SLOT_ARG_DTYPE: v[a].i32 = s->dtype; break;
        case HONE_SLOT_ARG_F32: v[a].f32 = s->f[g->dims[0]]; break;
        case HONE_SLOT_ARG_I32: v[a].i32 = s->flag; break;
        default: break;
        }
    }
}

void hone_slots_shape_text(const hone_slot_desc *d, const hone_slot_shape *s, char *buf, int cap)
{
    int n = snprintf(buf, (size_t)cap, "%s", d->name);
#define APPEND(...) n += snprintf(buf + (n < cap ? n : cap), (size_t)(n < cap ? cap - n : 0), __VA_ARGS__)
    for (int a = 0; a < d->n_args; a++) {
        const hone_slot_arg *g = &d->args[a];
        switch (g->role) {
        case HONE_SLOT_ARG_DIM: APPEND(" %s=%lld", g->name, (long long)s->d[g->dims[0]]); break;
        case HONE_SLOT_ARG_DTYPE: APPEND(" %s", hone_dtype_name(s->dtype)); break;
        case HONE_SLOT_ARG_I32: APPEND(" %s=%d", g->name, (int)s->flag); break;
        default: break;
        }
    }
    if (d->kind == HONE_SLOT_KIND_EMBED) APPEND(" vocab=%lld", (long long)s->d[E_VOCAB]);
#undef APPEND
}

/* ---- inputs: the generator every case builder uses ------------------------------------------- */

uint64_t hone_slots_rand(uint64_t *state) /* splitmix64 */
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rnd_unit(uint64_t *st) { return (double)(hone_slots_rand(st) >> 11) * 0x1p-53; }
static float rnd_f(uint64_t *st, double lo, double hi) { return (float)(lo + (hi - lo) * rnd_unit(st)); }

/* An "edge value": mostly ordinary, sometimes large, tiny, zero or subnormal. */
static float rnd_edge(uint64_t *st, double big)
{
    switch (hone_slots_rand(st) % 8) {
    case 0: return rnd_f(st, -big, big);
    case 1: return 0.0f;
    case 2: return rnd_f(st, -1e-40, 1e-40); /* subnormal */
    case 3: return (hone_slots_rand(st) & 1) ? (float)big : (float)-big;
    default: return rnd_f(st, -2, 2);
    }
}

static uint16_t rnd_scale(uint64_t *st, double lo, double hi, int allow_neg)
{
    double v = lo + (hi - lo) * rnd_unit(st);
    if (allow_neg && (hone_slots_rand(st) & 1)) v = -v;
    return hone_f32_to_fp16((float)v);
}

static void rnd_bytes(uint64_t *st, uint8_t *p, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(hone_slots_rand(st) & 0xFF);
}

/* Random blocks of the further formats: random quants and packed scales, f16 scales chosen so
 * that the values stay about [-2, 2] (the K formats' d and dmin are positive, as ggml makes them). */
static void fill_weight_more(void *w, int dt, int64_t n, uint64_t *st)
{
    int64_t nb = n / hone_dtype_block_size(dt);
    for (int64_t b = 0; b < nb; b++) {
        switch (dt) {
        case HONE_DTYPE_Q5_0: {
            hone_block_q5_0 *k = (hone_block_q5_0 *)w + b;
            k->d = rnd_scale(st, 0.005, 0.075, 1);
            rnd_bytes(st, k->qh, 4);
            rnd_bytes(st, k->qs, 16);
            break;
        }
        case HONE_DTYPE_Q5_1: {
            hone_block_q5_1 *k = (hone_block_q5_1 *)w + b;
            k->d = rnd_scale(st, 0.005, 0.075, 0);
            k->m = rnd_scale(st, 0.0, 1.0, 1);
            rnd_bytes(st, k->qh, 4);
            rnd_bytes(st, k->qs, 16);
            break;
        }
        case HONE_DTYPE_MXFP4: {
            hone_block_mxfp4 *k = (hone_block_mxfp4 *)w + b;
            k->e = (uint8_t)(121 + hone_slots_rand(st) % 5); /* d = 2^-7 .. 2^-3 */
            rnd_bytes(st, k->qs, 16);
            break;
        }
        case HONE_DTYPE_Q4_K: {
            hone_block_q4_k *k = (hone_block_q4_k *)w + b;
            k->d = rnd_scale(st, 0.0005, 0.002, 0);
            k->dmin = rnd_scale(st, 0.0005, 0.002, 0);
            rnd_bytes(st, k->scales, 12);
            rnd_bytes(st, k->qs, 128);
            break;
        }
        case HONE_DTYPE_Q5_K: {
            hone_block_q5_k *k = (hone_block_q5_k *)w + b;
            k->d = rnd_scale(st, 0.0003, 0.001, 0);
            k->dmin = rnd_scale(st, 0.0005, 0.002, 0);
            rnd_bytes(st, k->scales, 12);
            rnd_bytes(st, k->qh, 32);
            rnd_bytes(st, k->qs, 128);
            break;
        }
        case HONE_DTYPE_Q6_K: {
            hone_block_q6_k *k = (hone_block_q6_k *)w + b;
            rnd_bytes(st, k->ql, 128);
            rnd_bytes(st, k->qh, 64);
            rnd_bytes(st, (uint8_t *)k->scales, 16);
            k->d = rnd_scale(st, 0.0001, 0.0005, 0);
            break;
        }
        case HONE_DTYPE_Q3_K: {
            hone_block_q3_k *k = (hone_block_q3_k *)w + b;
            rnd_bytes(st, k->hmask, 32);
            rnd_bytes(st, k->qs, 64);
            rnd_bytes(st, k->scales, 12);
            k->d = rnd_scale(st, 0.002, 0.01, 0);
            break;
        }
        case HONE_DTYPE_Q2_K: {
            hone_block_q2_k *k = (hone_block_q2_k *)w + b;
            rnd_bytes(st, k->scales, 16);
            rnd_bytes(st, k->qs, 64);
            k->d = rnd_scale(st, 0.005, 0.03, 0);
            k->dmin = rnd_scale(st, 0.005, 0.03, 0);
            break;
        }
        default: break;
        }
    }
}

void hone_slots_fill_weight(void *w, int dt, int64_t rows, int64_t cols, uint64_t *st)
{
    int64_t n = rows * cols, nb = n / HONE_QK;
    switch (dt) {
    case HONE_DTYPE_F32:
        for (int64_t i = 0; i < n; i++) ((float *)w)[i] = rnd_f(st, -1, 1);
        break;
    case HONE_DTYPE_F16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)w)[i] = hone_f32_to_fp16(rnd_f(st, -1, 1));
        break;
    case HONE_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)w)[i] = hone_f32_to_bf16(rnd_f(st, -1, 1));
        break;
    case HONE_DTYPE_Q8_0:
        for (int64_t b = 0; b < nb; b++) {
            hone_block_q8_0 *k = (hone_block_q8_0 *)w + b;
            k->d = rnd_scale(st, 0.001, 0.01, 1);
            for (int j = 0; j < 32; j++) k->qs[j] = (int8_t)(hone_slots_rand(st) & 0xFF);
        }
        break;
    case HONE_DTYPE_Q4_0:
        for (int64_t b = 0; b < nb; b++) {
            hone_block_q4_0 *k = (hone_block_q4_0 *)w + b;
            k->d = rnd_scale(st, 0.01, 0.15, 1);
            for (int j = 0; j < 16; j++) k->qs[j] = (uint8_t)(hone_slots_rand(st) & 0xFF);
        }
        break;
    case HONE_DTYPE_Q4_1:
        for (int64_t b = 0; b < nb; b++) {
            hone_block_q4_1 *k = (hone_block_q4_1 *)w + b;
            k->d = rnd_scale(st, 0.01, 0.15, 0);
            k->m = rnd_scale(st, 0.0, 1.0, 1);
            for (int j = 0; j < 16; j++) k->qs[j] = (uint8_t)(hone_slots_rand(st) & 0xFF);
        }
        break;
    default:
        fill_weight_more(w, dt, n, st);
        break;
    }
}

static void fill_f(uint64_t *st, float *v, int64_t n, double lo, double hi, double big)
{
    for (int64_t i = 0; i < n; i++) v[i] = big > 0 ? rnd_edge(st, big) : rnd_f(st, lo, hi);
}

/* A block table: a random permutation of the blocks. */
static void fill_blocks(uint64_t *st, int32_t *bt, int64_t n)
{
    for (int64_t i = 0; i < n; i++) bt[i] = (int32_t)i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(hone_slots_rand(st) % (uint64_t)(i + 1));
        int32_t t = bt[i];
        bt[i] = bt[j];
        bt[j] = t;
    }
}

/* A paged cache [n_blocks][kv_heads][block_size][head_dim] (engine/kv_layout.h): NaN
 * everywhere (slots no key should be read from), then the first `valid` keys, found through
 * the block table, in [lo, hi), key by key and a key's heads in order. */
static void fill_kv(uint64_t *st, const hone_slot_arg *g, const hone_slot_shape *s, float *kv,
                    const int32_t *bt)
{
    int64_t total = hone_slots_dims_prod(g->dims, s);
    int64_t kvh = s->d[g->dims[1]], bs = s->d[g->dims[2]], hd = s->d[g->dims[3]];
    for (int64_t i = 0; i < total; i++) kv[i] = NAN;
    for (int64_t j = 0; j < s->d[g->bound]; j++)
        for (int64_t h = 0; h < kvh; h++) fill_f(st, kv + hone_kv_offset(bt, j, bs, kvh, h, hd), hd, g->lo, g->hi, 0);
}

/* Where a block format keeps its f16 d. */
static int64_t d_offset(int dt)
{
    switch (dt) {
    case HONE_DTYPE_Q2_K: return offsetof(hone_block_q2_k, d);
    case HONE_DTYPE_Q3_K: return offsetof(hone_block_q3_k, d);
    case HONE_DTYPE_Q6_K: return offsetof(hone_block_q6_k, d);
    default: return 0;
    }
}

/* Special values sprinkled into a weight of an edge shape (about 1 element in 48, 1 block in 3):
 * +-Inf, NaN, subnormal, huge (not near the top of the range, so that a sum's overflow does not
 * depend on its order) and zero. Block formats get them in their f16 scales. */
static void sprinkle_weight(uint64_t *st, void *w, int dt, int64_t n)
{
    static const float fs[] = {INFINITY, -INFINITY, NAN, 1e-40f, 1e20f, 0.0f};
    static const uint16_t hs[] = {0x7c00, 0xfc00, 0x7e00, 0x0001, 0x7bff, 0x0000}; /* f16 */
    static const uint16_t bs[] = {0x7f80, 0xff80, 0x7fc0, 0x0001, 0x60ad, 0x0000}; /* bf16 */
    int64_t bsz = hone_dtype_block_size(dt), nb = n / bsz, tsz = hone_dtype_type_size(dt);
    for (int64_t b = 0; b < nb; b++) {
        if (hone_slots_rand(st) % (bsz > 1 ? 3 : 48)) continue;
        int k = (int)(hone_slots_rand(st) % 6);
        uint8_t *p = (uint8_t *)w + b * tsz;
        switch (dt) {
        case HONE_DTYPE_F32: memcpy(p, &fs[k], 4); break;
        case HONE_DTYPE_F16: memcpy(p, &hs[k], 2); break;
        case HONE_DTYPE_BF16: memcpy(p, &bs[k], 2); break;
        case HONE_DTYPE_MXFP4: { /* e: 2^-128 (subnormal), 2^-127, 2^126 (x 12: inf), 2^127 */
            static const uint8_t es[] = {0, 1, 254, 255, 127, 0};
            p[0] = es[k];
            break;
        }
        default: /* d: first in the 32-value formats, q4_K and q5_K, last in q2_K, q3_K, q6_K */
            memcpy(p + d_offset(dt), &hs[k], 2);
            break;
        }
    }
}

int hone_slots_arg_is_input(hone_slot_role r)
{
    return r == HONE_SLOT_ARG_IN || r == HONE_SLOT_ARG_NORM || r == HONE_SLOT_ARG_WEIGHT ||
           r == HONE_SLOT_ARG_INDEX || r == HONE_SLOT_ARG_KV || r == HONE_SLOT_ARG_BLOCKS ||
           r == HONE_SLOT_ARG_INOUT;
}

void hone_slots_fill_inputs(const hone_slot_desc *d, const hone_slot_shape *s, void *const *in,
                            uint64_t *st)
{
    for (int a = 0; a < d->n_args; a++)
        if (d->args[a].role == HONE_SLOT_ARG_BLOCKS)
            fill_blocks(st, in[a], hone_slots_arg_elems(d, a, s));
    for (int a = 0; a < d->n_args; a++) {
        const hone_slot_arg *g = &d->args[a];
        void *p = in[a];
        int64_t n = hone_slots_arg_elems(d, a, s);
        switch (g->role) {
        case HONE_SLOT_ARG_WEIGHT: {
            int64_t cols = s->d[g->dims[hone_slots_arg_last_dim(g)]];
            hone_slots_fill_weight(p, s->dtype, n / cols, cols, st);
            if (s->edge) sprinkle_weight(st, p, s->dtype, n);
            break;
        }
        case HONE_SLOT_ARG_IN:
        case HONE_SLOT_ARG_INOUT:
            fill_f(st, p, n, g->lo, g->hi, s->edge ? g->edge : 0);
            if (s->edge && (g->flags & HONE_SLOT_ARG_ZERO_ROW))
                memset(p, 0, (size_t)s->d[g->dims[hone_slots_arg_last_dim(g)]] * 4);
            if (s->edge && (g->flags & HONE_SLOT_ARG_ZERO_BLOCKS))
                for (int64_t b = 0; b + 32 <= n; b += 32)
                    if (hone_slots_rand(st) % 3 == 0) memset((float *)p + b, 0, 32 * 4);
            break;
        case HONE_SLOT_ARG_NORM:
            fill_f(st, p, n, g->lo, g->hi, 0);
            if (s->edge) sprinkle_weight(st, p, HONE_DTYPE_F32, n);
            break;
        case HONE_SLOT_ARG_INDEX: {
            uint64_t bound = g->bound >= 0 ? (uint64_t)s->d[g->bound] : 4096;
            for (int64_t i = 0; i < n; i++) ((int32_t *)p)[i] = (int32_t)(hone_slots_rand(st) % bound);
            break;
        }
        case HONE_SLOT_ARG_KV: fill_kv(st, g, s, p, in[g->ref]); break;
        default: break;
        }
    }
}

void hone_slots_values(const hone_slot_desc *d, const hone_slot_shape *s, const void *const *in,
                       float *out, float *scratch, hone_slot_value *v)
{
    memset(v, 0, sizeof(hone_slot_value) * HONE_SLOT_MAX_ARGS);
    hone_slots_scalars(d, s, v);
    for (int a = 0; a < d->n_args; a++) {
        hone_slot_role r = d->args[a].role;
        if (r == HONE_SLOT_ARG_OUT || (r == HONE_SLOT_ARG_INOUT && out)) v[a].p = out;
        else if (r == HONE_SLOT_ARG_SCRATCH) v[a].p = scratch;
        else if (hone_slots_arg_is_input(r)) v[a].cp = in[a];
    }
}

/* ---- the table --------------------------------------------------------------------------------- */

void hone_slots_cpu_baseline(hone_slot_table *t)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < hone_slots_count(); i++)
        if (!hone_slots_is_fused(i)) t->fn[i] = hone_slots_desc(i)->cpu_baseline;
}

void *hone_slots_get(const hone_slot_table *t, int id)
{
    return id >= 0 && id < HONE_SLOT_MAX ? t->fn[id] : NULL;
}

void hone_slots_set(hone_slot_table *t, int id, void *fn)
{
    if (id >= 0 && id < HONE_SLOT_MAX) t->fn[id] = fn;
}
