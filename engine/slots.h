/* The kernel-slot contract: one descriptor per operation of the forward pass.
 * The engine calls kernels only through a hone_slot_table; the profiler times slots, the agent
 * rewrites them, the guard checks them, the loader installs them, and every one of them reads
 * what a slot is from its descriptor (hone_slots_desc): name, kind, dtype, arguments with their
 * roles and shapes, the share axis, the cost model, the C signature, the shape set and a
 * generic caller. Adding a slot or a dtype is one descriptor, its kernel files and its oracle.
 *
 * Rules every CPU slot function obeys (baselines and candidates alike):
 *  - it computes the share `ith` of `nth` (0 <= ith < nth) of its output, and the shares
 *    together cover the output exactly once; it never creates threads or allocates;
 *  - each output element is computed by one fixed sequence of f32 operations that does not
 *    depend on nth, ith, or on the batch size n: so threading and batching change no bit;
 *  - inputs are never written (except the in-place slots rope and rmsnorm with y == x);
 *  - all tensors are dense row-major with the shapes given in brackets; weight matrices are
 *    GGUF rows: W[rows][cols] of the weight dtype (block formats: cols / 32 blocks per row).
 * docs/architecture.md keeps the table of slots and their contracts. */
#ifndef HONE_SLOTS_H
#define HONE_SLOTS_H

#include <stdint.h>

#include "dtype.h"
#include "kv_layout.h"
#include "model.h"

/* The rules above, as the prompt gives them to an LLM (one text). */
extern const char hone_slots_rules[];

/* ---- the C signatures ------------------------------------------------------------------ */

/* out[n][dim] = table[ids[i]][:] dequantised to f32 (exactly). Share: rows of out. */
typedef void (*hone_slot_embed_fn)(float *out, const void *table, int32_t dtype, const int32_t *ids,
                                   int64_t n, int64_t dim, int ith, int nth);

/* y[r][i] = x[r][i] / sqrt(mean_j(x[r][j]^2) + eps) * w[i], for r < n, i < dim. y may equal x.
 * Share: rows. */
typedef void (*hone_slot_rmsnorm_fn)(float *y, const float *x, const float *w, int64_t n,
                                     int64_t dim, float eps, int ith, int nth);

/* y[r] = sum_c W[r][c] * x[c]: x[cols], y[rows]. Share: rows. */
typedef void (*hone_slot_matvec_fn)(float *y, const void *W, const float *x, int64_t rows,
                                    int64_t cols, int ith, int nth);

/* Y[t][r] = sum_c W[r][c] * X[t][c]: X[n][cols], Y[n][rows]. Share: rows.
 * Y[t] must be bitwise equal to the same dtype's matvec of X[t]. */
typedef void (*hone_slot_matmul_fn)(float *Y, const void *W, const float *X, int64_t n,
                                    int64_t rows, int64_t cols, int ith, int nth);

/* In place on x[n][n_heads][head_dim]: rotates the first n_rot dims of every head by
 * theta_i = pos[t] * freq_base^(-2i/n_rot), i < n_rot/2, computed in double.
 * Normal layout (neox == 0) pairs (2i, 2i+1); NeoX layout pairs (i, i + n_rot/2).
 * (a, b) -> (a cos - b sin, a sin + b cos). Share: (token, head) rows. */
typedef void (*hone_slot_rope_fn)(float *x, const int32_t *pos, int64_t n, int64_t n_heads,
                                  int64_t head_dim, int64_t n_rot, float freq_base, int32_t neox,
                                  int ith, int nth);

/* rope with llama3's frequency factors: theta_i = pos[t] * (freq_base^(-2i/n_rot) / freqs[i])
 * (the inverse frequency and the angle in double), freqs[n_rot / 2]; otherwise as rope.
 * Share: (token, head) rows. */
typedef void (*hone_slot_rope_freqs_fn)(float *x, const int32_t *pos, const float *freqs,
                                        int64_t n, int64_t n_heads, int64_t head_dim,
                                        int64_t n_rot, float freq_base, int32_t neox, int ith,
                                        int nth);

/* The paged KV cache of one layer: token j of a sequence lives in block
 * block_table[j / block_size] at slot j % block_size; a block holds
 * [n_kv_heads][block_size][head_dim] f32 for K (k_cache) and likewise for V (v_cache), so
 * token j's row of kv head kvh starts at hone_kv_offset(block_table, j, block_size,
 * n_kv_heads, kvh, head_dim) (engine/kv_layout.h). */

/* One query per head: out[h][d] = sum_j softmax_j(scale * q[h] . K[j][kvh]) V[j][kvh][d]
 * over keys j < n_kv, with kvh = h / (n_heads / n_kv_heads). q[n_heads][head_dim],
 * out[n_heads][head_dim]. A row of more than HONE_ATT_SEG keys is computed in segments of
 * HONE_ATT_SEG keys folded in order (engine/kv_layout.h; kernels/cpu/common.h
 * hone_cpu_att_fold). scratch: the call's workspace, shared by its shares, of
 * hone_att_decode_scratch_floats(n_heads, head_dim, n_kv) floats. Share: heads (at most
 * HONE_ATT_SEG keys: the shares write out), or (head, segment) partials, which the shares
 * leave in the scratch at more keys and the caller folds into out after the last share
 * (hone_cpu_attention_decode_fold: the descriptor's finish). */
typedef void (*hone_slot_attention_decode_fn)(float *out, const float *q, const float *k_cache,
                                              const float *v_cache, const int32_t *block_table,
                                              int64_t n_kv, int64_t block_size, int64_t n_heads,
                                              int64_t n_kv_heads, int64_t head_dim, float scale,
                                              float *scratch, int ith, int nth);

/* Causal attention for n queries at positions pos0 .. pos0+n-1 (their K/V already in the
 * cache): query t sees keys j <= pos0 + t. q[n][n_heads][head_dim], out likewise.
 * Each (t, h) row must be bitwise equal to attention_decode with n_kv = pos0 + t + 1 (in
 * segments of HONE_ATT_SEG keys beyond that many).
 * scratch: this share's own workspace of >= pos0 + n floats. Share: (token, head) rows. */
/* attention_decode's finish on the CPU (its descriptor's): folds the partials the shares left
 * in scratch into out at more than HONE_ATT_SEG keys; nothing at fewer. */
void hone_cpu_attention_decode_fold(float *out, const float *scratch, int64_t n_heads, int64_t head_dim,
                                    int64_t n_kv);

typedef void (*hone_slot_attention_prefill_fn)(float *out, const float *q, const float *k_cache,
                                               const float *v_cache, const int32_t *block_table,
                                               int64_t n, int64_t pos0, int64_t block_size,
                                               int64_t n_heads, int64_t n_kv_heads,
                                               int64_t head_dim, float scale, float *scratch,
                                               int ith, int nth);

/* out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i], i < n. out may equal
 * gate or up. Share: elements. */
typedef void (*hone_slot_swiglu_fn)(float *out, const float *gate, const float *up, int64_t n,
                                    int ith, int nth);

/* out[i] = gelu_tanh(gate[i]) * up[i] (Gemma's gated FFN), i < n, in f32 as
 * g' = 0.7978845608f * g * (1 + 0.044715f * g * g); t = (float)tanh((double)g');
 * out = 0.5f * g * (1 + t) * u, each operation rounded to f32 left to right (tanh in double,
 * rounded once). out may equal gate or up. Share: elements. */
typedef void (*hone_slot_geglu_fn)(float *out, const float *gate, const float *up, int64_t n,
                                   int ith, int nth);

/* y[i] = a[i] + b[i], i < n. y may equal a or b. Share: elements. */
typedef void (*hone_slot_add_fn)(float *y, const float *a, const float *b, int64_t n, int ith,
                                 int nth);

/* ---- fused slots (decode, one token): the unfused composition is their baseline, bitwise ---- */

/* y[rq + rk + rv] = concat(Wq x, Wk x, Wv x): Wq[rq][cols], Wk[rk][cols], Wv[rv][cols] of one
 * weight dtype, x[cols]; row r of y is bitwise the same dtype's matvec row (of Wq for r < rq,
 * of Wk at r - rq, of Wv at r - rq - rk). Share: rows of y (the concatenated rows). */
typedef void (*hone_slot_qkv_fn)(float *y, const void *Wq, const void *Wk, const void *Wv,
                                 const float *x, int64_t rq, int64_t rk, int64_t rv, int64_t cols,
                                 int ith, int nth);

/* out[r] = swiglu(Wg x, Wu x)[r] = g / (1 + expf(-g)) * u with g = (Wg x)[r], u = (Wu x)[r]
 * each bitwise the same dtype's matvec row, then the swiglu slot's f32 formula. Wg, Wu
 * [rows][cols], x[cols], out[rows]. Share: rows. */
typedef void (*hone_slot_ffn_fn)(float *out, const void *Wg, const void *Wu, const float *x,
                                 int64_t rows, int64_t cols, int ith, int nth);

/* y[r] = sum_c W[r][c] * h[c] with h = rmsnorm(x, g, eps) (the rmsnorm slot's f32 formula, one
 * row): bitwise rmsnorm then the same dtype's matvec. W[rows][cols], x[cols], g[cols],
 * y[rows]; scratch: this share's own workspace of >= cols floats (each share may recompute the
 * norm there). Share: rows. */
typedef void (*hone_slot_rmsnorm_matvec_fn)(float *y, const void *W, const float *x,
                                            const float *g, int64_t rows, int64_t cols, float eps,
                                            float *scratch, int ith, int nth);

/* ---- slot identities ------------------------------------------------------------------- */

/* The built-in slots; registered slots (hone_slots_register) take ids from HONE_SLOT_COUNT up. */
typedef enum {
    HONE_SLOT_EMBED,
    HONE_SLOT_RMSNORM,
    HONE_SLOT_MATVEC_F32, HONE_SLOT_MATVEC_F16, HONE_SLOT_MATVEC_BF16,
    HONE_SLOT_MATVEC_Q8_0, HONE_SLOT_MATVEC_Q4_0, HONE_SLOT_MATVEC_Q4_1,
    /* the further GGML formats (no fused slots) */
    HONE_SLOT_MATVEC_Q5_0, HONE_SLOT_MATVEC_Q5_1, HONE_SLOT_MATVEC_Q4_K, HONE_SLOT_MATVEC_Q5_K,
    HONE_SLOT_MATVEC_Q6_K, HONE_SLOT_MATVEC_Q3_K, HONE_SLOT_MATVEC_Q2_K, HONE_SLOT_MATVEC_MXFP4,
    HONE_SLOT_MATMUL_F32, HONE_SLOT_MATMUL_F16, HONE_SLOT_MATMUL_BF16,
    HONE_SLOT_MATMUL_Q8_0, HONE_SLOT_MATMUL_Q4_0, HONE_SLOT_MATMUL_Q4_1,
    HONE_SLOT_MATMUL_Q5_0, HONE_SLOT_MATMUL_Q5_1, HONE_SLOT_MATMUL_Q4_K, HONE_SLOT_MATMUL_Q5_K,
    HONE_SLOT_MATMUL_Q6_K, HONE_SLOT_MATMUL_Q3_K, HONE_SLOT_MATMUL_Q2_K, HONE_SLOT_MATMUL_MXFP4,
    HONE_SLOT_ROPE,
    HONE_SLOT_ATTENTION_DECODE,
    HONE_SLOT_ATTENTION_PREFILL,
    HONE_SLOT_SWIGLU,
    HONE_SLOT_ADD,
    HONE_SLOT_GEGLU,
    HONE_SLOT_ROPE_FREQS,
    /* the fused slots, one per weight dtype in the matvec order (f32 .. q4_1); no CUDA kernel */
    HONE_SLOT_QKV_F32, HONE_SLOT_QKV_F16, HONE_SLOT_QKV_BF16,
    HONE_SLOT_QKV_Q8_0, HONE_SLOT_QKV_Q4_0, HONE_SLOT_QKV_Q4_1,
    HONE_SLOT_FFN_F32, HONE_SLOT_FFN_F16, HONE_SLOT_FFN_BF16,
    HONE_SLOT_FFN_Q8_0, HONE_SLOT_FFN_Q4_0, HONE_SLOT_FFN_Q4_1,
    HONE_SLOT_RMSNORM_MATVEC_F32, HONE_SLOT_RMSNORM_MATVEC_F16, HONE_SLOT_RMSNORM_MATVEC_BF16,
    HONE_SLOT_RMSNORM_MATVEC_Q8_0, HONE_SLOT_RMSNORM_MATVEC_Q4_0, HONE_SLOT_RMSNORM_MATVEC_Q4_1,
    HONE_SLOT_COUNT
} hone_slot_id;

/* The last matvec and matmul slots (the matvec_<dt> slots are MATVEC_F32 .. MATVEC_LAST). */
#define HONE_SLOT_MATVEC_LAST HONE_SLOT_MATVEC_MXFP4
#define HONE_SLOT_MATMUL_LAST HONE_SLOT_MATMUL_MXFP4

/* The first fused slot: the slots below it are the ones every backend implements (the CUDA
 * backend has a kernels/cuda/<slot>.cu for each). */
#define HONE_SLOT_FUSED_FIRST HONE_SLOT_QKV_F32

#define HONE_SLOT_MAX 80       /* built-in + registered slots */

/* What a slot computes, for the consumers that treat families alike (the oracle, the search
 * proposer's templates). HONE_SLOT_KIND_OTHER: a registered slot, whose descriptor carries
 * its own oracle. */
typedef enum {
    HONE_SLOT_KIND_EMBED,
    HONE_SLOT_KIND_RMSNORM,
    HONE_SLOT_KIND_MATVEC,
    HONE_SLOT_KIND_MATMUL,
    HONE_SLOT_KIND_ROPE,
    HONE_SLOT_KIND_ATTENTION_DECODE,
    HONE_SLOT_KIND_ATTENTION_PREFILL,
    HONE_SLOT_KIND_SWIGLU,
    HONE_SLOT_KIND_ADD,
    HONE_SLOT_KIND_QKV,             /* fused: q, k, v projections in one pass */
    HONE_SLOT_KIND_FFN,             /* fused: gate and up projections with swiglu */
    HONE_SLOT_KIND_RMSNORM_MATVEC,  /* fused: rmsnorm into the one matvec it feeds */
    HONE_SLOT_KIND_GEGLU,           /* gelu_tanh(gate) * up (Gemma) */
    HONE_SLOT_KIND_ROPE_FREQS,      /* rope with per-pair frequency factors (llama3) */
    HONE_SLOT_KIND_OTHER
} hone_slot_kind;

/* ---- descriptors ----------------------------------------------------------------------- */

#define HONE_SLOT_MAX_ARGS 16
#define HONE_SLOT_MAX_DIMS 10
#define HONE_SLOT_MAX_PARAMS 3
#define HONE_SLOT_MAX_SHAPES 48

/* The role of one argument, which says how a caller makes it. Tensor roles have a shape
 * (hone_slot_arg.dims); scalar roles take their value from the shape (dim or param). */
typedef enum {
    HONE_SLOT_ARG_OUT,      /* float[dims]: written by the slot, one element per share unit */
    HONE_SLOT_ARG_INOUT,    /* float[dims]: updated in place; also the slot's output */
    HONE_SLOT_ARG_IN,       /* float[dims]: read-only activations */
    HONE_SLOT_ARG_NORM,     /* float[dims]: read-only weights of a norm, about 1 */
    HONE_SLOT_ARG_WEIGHT,   /* the slot's dtype, rows = product of all dims but the last */
    HONE_SLOT_ARG_INDEX,    /* int32[dims]: ids or positions in [0, bound) */
    HONE_SLOT_ARG_KV,       /* float[n_blocks][kv_heads][block_size][head_dim]: a paged cache,
                             * keys < valid filled through the block table `ref` */
    HONE_SLOT_ARG_BLOCKS,   /* int32[dims]: a block table (a permutation of the blocks) */
    HONE_SLOT_ARG_SCRATCH,  /* float[dims]: this share's own workspace */
    HONE_SLOT_ARG_DIM,      /* int64: shape dimension dims[0] */
    HONE_SLOT_ARG_DTYPE,    /* int32: the weight dtype */
    HONE_SLOT_ARG_F32,      /* float: param dims[0] */
    HONE_SLOT_ARG_I32       /* int32: param dims[0] (a flag) */
} hone_slot_role;

#define HONE_SLOT_END (-1)

typedef struct {
    const char *name;       /* "y", "W", "rows": the parameter's name in the C signature */
    const char *ctype;      /* "float *", "const void *", "int64_t", ... */
    hone_slot_role role;
    int8_t dims[5];         /* tensors: the dims whose product is the element count
                             * (HONE_SLOT_END ends the list); DIM, F32, I32: the index */
    float lo, hi;           /* IN / NORM: ordinary values are drawn from [lo, hi) */
    double edge;            /* IN: the largest magnitude of edge values (0: none) */
    int8_t bound;           /* INDEX: the dim that bounds the ids (-1: 4096); KV: the dim of
                             * valid keys */
    int8_t ref;             /* KV: the argument index of its block table */
    uint8_t flags;          /* HONE_SLOT_ARG_ZERO_ROW: edge shapes zero the first row */
} hone_slot_arg;

#define HONE_SLOT_ARG_ZERO_ROW 1     /* IN: edge shapes zero the first row */
#define HONE_SLOT_ARG_ZERO_BLOCKS 4   /* IN: edge shapes zero about a third of the 32-element
                                      * blocks (so Inf/NaN weights meet zero activations) */
#define HONE_SLOT_ARG_DEVICE_I32 2   /* DIM: a CUDA kernel reads it from device memory (int32),
                                      * so one captured launch serves every value */

/* One shape of a slot: the values of its dims and params, and the weight dtype. */
typedef struct {
    int64_t d[HONE_SLOT_MAX_DIMS];
    float f[HONE_SLOT_MAX_PARAMS];
    int32_t flag;           /* the I32 param (rope's neox) */
    int32_t dtype;          /* weight / table dtype; -1 where the slot has none */
    int edge;               /* 1: fill the inputs with edge values (huge, zero, subnormal) */
} hone_slot_shape;

/* The value of one argument in a call, in signature order. */
typedef union {
    void *p;
    const void *cp;
    int64_t i64;
    int32_t i32;
    float f32;
} hone_slot_value;

typedef struct hone_slot_desc hone_slot_desc;

struct hone_slot_desc {
    const char *name;           /* "matvec_q4_1": kernels/<backend>/<name>.{c,cu} */
    hone_slot_kind kind;
    int32_t dtype;              /* the weight dtype, -1 for none */
    const char *math;           /* the contract in words: math, layout, aliasing */
    int rev;                    /* the contract's revision (0: 1); a kernel written for another
                                 * is refused (its evidence's slot_rev, candidates/kernel_loader.c).
                                 * Attention: 2, the KV layout of engine/kv_layout.h; 3, rows
                                 * in segments of HONE_ATT_SEG keys, folded in order */
    const char *rev_why;        /* what revision rev changed, said in that refusal (NULL: none) */
    const char *fn_type;        /* "hone_slot_matvec_fn" */
    int n_args;
    hone_slot_arg args[HONE_SLOT_MAX_ARGS];   /* in signature order, then (int ith, int nth) */
    int n_dims;
    const char *dims[HONE_SLOT_MAX_DIMS];     /* dim names: "rows", "cols", ... */
    uint32_t key_dims;          /* bit i: dim i identifies a profiled shape; the others (the
                                 * context length of attention) are aggregated */
    int8_t range_dim;           /* the aggregated dim shown as min..max in the profile; -1 */
    const char *params[HONE_SLOT_MAX_PARAMS]; /* F32 param names: "eps" */
    int8_t share_units[5];      /* the share axis: element k of the output belongs to unit */
    int8_t share_len[5];        /* (k / prod(share_len)) % prod(share_units) */
    int8_t cmp_rows[5];         /* the output as rows for error metrics: prod(cmp_rows) rows */
    int64_t nth_max_dim;        /* the engine runs it on one thread below this many elements
                                 * of dim 0 (0: always all threads) */
    int8_t cuda_x[5], cuda_y[5];/* CUDA: the items along the launch's x and y axes (products of
                                 * dims; kernels/cuda/README.md). The CUDA argument list is the
                                 * C one, with a SCRATCH followed by its row stride (int64) */
    /* Bytes moved at least and flops of one call of shape s. */
    void (*cost)(const hone_slot_desc *d, const hone_slot_shape *s, double *bytes, double *flops);
    /* The SCRATCH argument's floats at shape s where the dims' product does not say it
     * (attention_decode's shared partials); NULL: the product of its dims. */
    int64_t (*scratch_elems)(const hone_slot_shape *s);
    /* The caller's part of a CPU call, after all its shares (v: the call's argument values):
     * attention_decode folds the partials its shares left in the scratch. NULL: none. */
    void (*finish)(const hone_slot_value *v);
    /* Fills derived dims (attention: n_kv of a prefill, the block count) after the others. */
    void (*derive)(const hone_slot_desc *d, hone_slot_shape *s);
    /* The shape set: the shapes of model m (NULL: none), the SmolLM2-135M reference shapes and
     * edge shapes (1, odd, non-power-of-two). Returns the count (<= cap). */
    int (*shapes)(const hone_slot_desc *d, const hone_model *m, hone_slot_shape *out, int cap);
    /* Calls fn (a function of this slot's signature) with the argument values v. */
    void (*invoke)(void *fn, const hone_slot_value *v, int ith, int nth);
    /* The f64 oracle of a registered slot: ref[out elements] from the inputs in v. Built-in
     * kinds leave it NULL: their oracles are the guard's (guard/oracle.h). */
    void (*oracle)(const hone_slot_desc *d, const hone_slot_shape *s, const hone_slot_value *v,
                   double *ref);
    void *cpu_baseline;         /* kernels/cpu/<name>.c's hone_cpu_<name> */
};

/* The descriptor of slot id (built-in or registered); NULL when there is none. */
const hone_slot_desc *hone_slots_desc(int id);
/* Number of slot ids in use (HONE_SLOT_COUNT + the registered ones). */
int hone_slots_count(void);
/* Adds a slot (tests, experiments): *d is copied; returns its id (>= HONE_SLOT_COUNT) or a
 * negative HONE_E* code when the table is full or the name is taken. Not thread-safe: register
 * before any other thread reads the table. */
int hone_slots_register(const hone_slot_desc *d);

/* "matvec_q4_1", "attention_decode", ... (the names of kernels/<backend>/<slot>.*). */
const char *hone_slots_name(int id);
/* The revision of slot id's contract (hone_slot_desc.rev; 1 where none is set, -1 for no such
 * slot): recorded in the evidence, matched by the kernel loader.
 *   hone_slots_rev(HONE_SLOT_ATTENTION_DECODE) == 2, hone_slots_rev(HONE_SLOT_ADD) == 1 */
int hone_slots_rev(int id);
/* Parses a slot name; -1 if unknown. */
int hone_slots_from_name(const char *name);
/* The C symbol a CPU kernel file defines for the slot: "hone_cpu_<slot>". */
void hone_slots_cpu_symbol(int id, char *buf, int cap);
/* The C prototype of the slot's CPU function: "void hone_cpu_add(float *y, ..., int ith, int nth)".
 * Returns the length written (snprintf's). */
int hone_slots_prototype(int id, char *buf, int cap);
/* The comma-separated parameter types, whitespace-free ("float *,const void *,...,int,int"). */
int hone_slots_param_types(int id, char *buf, int cap);
/* The slot of the matvec / matmul for a weight dtype; -1 if the dtype is not served. */
int hone_slots_matvec_id(int dtype);
int hone_slots_matmul_id(int dtype);
/* The fused slot of kind (HONE_SLOT_KIND_QKV, _FFN, _RMSNORM_MATVEC) for a weight dtype; -1 if
 * there is none (f32 .. q4_1 have them; q5_0 .. mxfp4 do not). */
int hone_slots_fused_id(hone_slot_kind kind, int dtype);
/* 1 for a fused slot (its baseline is the unfused composition; see the table below). */
int hone_slots_is_fused(int id);
/* The component slots a fused slot's work replaces in a decode step (qkv_q4_1: matvec_q4_1;
 * ffn: matvec, swiglu; rmsnorm_matvec: rmsnorm, matvec) into ids (up to cap); returns the count
 * (0 for a slot that is not fused). */
int hone_slots_fused_components(int id, int *ids, int cap);

/* ---- shapes and calls ------------------------------------------------------------------ */

/* 1 for the roles that pass a tensor (a pointer), 0 for the scalars (dim, dtype, params). */
int hone_slots_arg_is_tensor(hone_slot_role r);
/* Elements of argument a's tensor at shape s (product of its dims; 1 for scalars). */
int64_t hone_slots_arg_elems(const hone_slot_desc *d, int a, const hone_slot_shape *s);
/* Bytes of argument a's tensor (weights: dtype rows; index and blocks: 4 per element). */
int64_t hone_slots_arg_bytes(const hone_slot_desc *d, int a, const hone_slot_shape *s);
/* The position of the last dim in argument g's dims list (a weight's columns). */
int hone_slots_arg_last_dim(const hone_slot_arg *g);
/* The output argument (OUT or INOUT) of d. */
int hone_slots_out_arg(const hone_slot_desc *d);
/* Elements of product of the dims list l at shape s. */
int64_t hone_slots_dims_prod(const int8_t *l, const hone_slot_shape *s);
/* "matvec_q4_1 rows=1536 cols=576": the slot name and its key dims. */
void hone_slots_shape_text(const hone_slot_desc *d, const hone_slot_shape *s, char *buf, int cap);
/* Scalar argument values of shape s written into v (tensor slots untouched). */
void hone_slots_scalars(const hone_slot_desc *d, const hone_slot_shape *s, hone_slot_value *v);

/* The inputs' generator (splitmix64 over *state), shared by every case builder (the guard's,
 * the loader's self-check, tests). */
uint64_t hone_slots_rand(uint64_t *state);
/* A random weight W[rows][cols] of dtype: values about [-1, 1], finite f16 scales in the block
 * formats (random block bytes with sane scales are valid blocks). */
void hone_slots_fill_weight(void *w, int dt, int64_t rows, int64_t cols, uint64_t *state);
/* 1 for the roles whose tensor the caller provides filled (IN, NORM, WEIGHT, INDEX, KV,
 * BLOCKS, and INOUT's initial content). */
int hone_slots_arg_is_input(hone_slot_role r);
/* Fills every input argument of a call at shape s: in[a] is argument a's buffer
 * (hone_slots_arg_bytes) for the input roles; by role: weights of the dtype, activations in
 * [lo, hi), ids below their bound, block tables as permutations, paged caches NaN wherever no
 * key should be read. Edge shapes add special values to every input that can hold them:
 * activations huge, zero, subnormal (and whole zero blocks where flagged); weights and norm
 * weights +-Inf, NaN, subnormal, huge and zero (block formats: in their f16 scales). */
void hone_slots_fill_inputs(const hone_slot_desc *d, const hone_slot_shape *s, void *const *in,
                            uint64_t *state);
/* The argument values of a call: scalars from s, inputs from in[], the output out (INOUT: out,
 * or its input buffer when out is NULL, as the oracles read it), the scratch. */
void hone_slots_values(const hone_slot_desc *d, const hone_slot_shape *s, const void *const *in,
                       float *out, float *scratch, hone_slot_value *v);

/* ---- the table the engine calls -------------------------------------------------------- */

/* fn[id] is the function the engine calls for slot id. A fused slot is called only where its
 * entry is set: "provided". The baseline table leaves every fused entry NULL, so the forward
 * pass runs the unfused sequence exactly as without fused slots; an entry is set only by an
 * approved kernel (the kernel loader installing kernels/cpu/<fused>.c, the guard or the tuner
 * slotting a candidate in). The fused slot's own baseline, the unfused composition of the
 * baseline kernels (bitwise), stays reachable through its descriptor (cpu_baseline): it is the
 * guard's kernel-level incumbent and the loader's self-check reference, while the guard's
 * model and end-to-end gates compare the forward without the fused slot (NULL, the real
 * incumbent) against the forward with the candidate. */
typedef struct {
    void *fn[HONE_SLOT_MAX];    /* indexed by slot id: a function of the slot's signature */
} hone_slot_table;

/* Fills t with the CPU baselines of kernels/cpu/ (registered slots: their cpu_baseline); the
 * fused slots' entries are NULL (not provided: the engine runs the unfused sequence). */
void hone_slots_cpu_baseline(hone_slot_table *t);
/* Reads / replaces the function pointer of one slot in t (as void * for loaders). */
void *hone_slots_get(const hone_slot_table *t, int id);
void hone_slots_set(hone_slot_table *t, int id, void *fn);

/* Typed reads for the forward pass and tests. */
static inline hone_slot_matvec_fn hone_slots_matvec(const hone_slot_table *t, int dtype)
{
    int id = hone_slots_matvec_id(dtype);
    return id < 0 ? (hone_slot_matvec_fn)0 : (hone_slot_matvec_fn)t->fn[id];
}
static inline hone_slot_matmul_fn hone_slots_matmul(const hone_slot_table *t, int dtype)
{
    int id = hone_slots_matmul_id(dtype);
    return id < 0 ? (hone_slot_matmul_fn)0 : (hone_slot_matmul_fn)t->fn[id];
}
#define HONE_SLOTS_FN(t, id, type) ((type)(t)->fn[id])

#endif
