/* The kernel-slot contract: one C signature per operation of the forward pass.
 * The engine calls kernels only through a hone_slot_table; the profiler times slots,
 * the agent rewrites them, the guard checks them, the review commits them.
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

/* The paged KV cache of one layer: token j of a sequence lives in block
 * block_table[j / block_size] at slot j % block_size; a block holds
 * [block_size][n_kv_heads][head_dim] f32 for K (k_cache) and likewise for V (v_cache). */

/* One query per head: out[h][d] = sum_j softmax_j(scale * q[h] . K[j][kvh]) V[j][kvh][d]
 * over keys j < n_kv, with kvh = h / (n_heads / n_kv_heads). q[n_heads][head_dim],
 * out[n_heads][head_dim]. scratch: this share's own workspace of >= n_kv floats.
 * Share: heads. */
typedef void (*hone_slot_attention_decode_fn)(float *out, const float *q, const float *k_cache,
                                              const float *v_cache, const int32_t *block_table,
                                              int64_t n_kv, int64_t block_size, int64_t n_heads,
                                              int64_t n_kv_heads, int64_t head_dim, float scale,
                                              float *scratch, int ith, int nth);

/* Causal attention for n queries at positions pos0 .. pos0+n-1 (their K/V already in the
 * cache): query t sees keys j <= pos0 + t. q[n][n_heads][head_dim], out likewise.
 * Each (t, h) row must be bitwise equal to attention_decode with n_kv = pos0 + t + 1.
 * scratch: this share's own workspace of >= pos0 + n floats. Share: (token, head) rows. */
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

/* y[i] = a[i] + b[i], i < n. y may equal a or b. Share: elements. */
typedef void (*hone_slot_add_fn)(float *y, const float *a, const float *b, int64_t n, int ith,
                                 int nth);

/* Slot identities, used by the profiler, the agent, the guard and the review. */
typedef enum {
    HONE_SLOT_EMBED,
    HONE_SLOT_RMSNORM,
    HONE_SLOT_MATVEC_F32, HONE_SLOT_MATVEC_F16, HONE_SLOT_MATVEC_BF16,
    HONE_SLOT_MATVEC_Q8_0, HONE_SLOT_MATVEC_Q4_0, HONE_SLOT_MATVEC_Q4_1,
    HONE_SLOT_MATMUL_F32, HONE_SLOT_MATMUL_F16, HONE_SLOT_MATMUL_BF16,
    HONE_SLOT_MATMUL_Q8_0, HONE_SLOT_MATMUL_Q4_0, HONE_SLOT_MATMUL_Q4_1,
    HONE_SLOT_ROPE,
    HONE_SLOT_ATTENTION_DECODE,
    HONE_SLOT_ATTENTION_PREFILL,
    HONE_SLOT_SWIGLU,
    HONE_SLOT_ADD,
    HONE_SLOT_COUNT
} hone_slot_id;

typedef struct {
    hone_slot_embed_fn embed;
    hone_slot_rmsnorm_fn rmsnorm;
    hone_slot_matvec_fn matvec[HONE_DTYPE_COUNT_MAX];  /* indexed by hone_dtype */
    hone_slot_matmul_fn matmul[HONE_DTYPE_COUNT_MAX];
    hone_slot_rope_fn rope;
    hone_slot_attention_decode_fn attention_decode;
    hone_slot_attention_prefill_fn attention_prefill;
    hone_slot_swiglu_fn swiglu;
    hone_slot_add_fn add;
} hone_slot_table;

/* "matvec_q4_1", "attention_decode", ... (the names of kernels/<backend>/<slot>.*). */
const char *hone_slots_name(hone_slot_id id);
/* Parses a slot name; -1 if unknown. */
int hone_slots_from_name(const char *name);
/* The C symbol a CPU kernel file defines for the slot: "hone_cpu_<slot>". */
void hone_slots_cpu_symbol(hone_slot_id id, char *buf, int cap);
/* The slot of the matvec / matmul for a weight dtype; -1 if the dtype is not served. */
int hone_slots_matvec_id(int dtype);
int hone_slots_matmul_id(int dtype);

/* Fills t with the CPU baselines of kernels/cpu/. */
void hone_slots_cpu_baseline(hone_slot_table *t);
/* Reads / replaces the function pointer of one slot in t (as void * for loaders). */
void *hone_slots_get(const hone_slot_table *t, hone_slot_id id);
void hone_slots_set(hone_slot_table *t, hone_slot_id id, void *fn);

#endif
