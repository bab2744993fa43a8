/* The CUDA backend: engine/forward.c's forward pass, slot for slot, on one GPU, with the
 * kernels of kernels/cuda/ compiled at run time by NVRTC (engine/cuda_kernels.c).
 *
 *   memory: one device arena per model: the weights as shipped, the paged KV pools
 *           ([n_layers][n_blocks][n_kv_heads][block_size][head_dim] f32, the layout of
 *           engine/kv_cache.h), activations, attention scratch, logits and the step parameters;
 *           block bookkeeping (free list, reference counts, block tables) is a hone_kv_cache
 *           with one float of host storage per token slot: only its allocator is used;
 *   params: what changes from step to step (token ids, positions, the attention length n_kv,
 *           the sequence's block table) lives in device memory, uploaded by one copy before
 *           each piece, so kernels never take it by value;
 *   graphs: a batch-1 decode step is therefore position-independent: it is captured once as a
 *           CUDA graph and replayed for every later decode step (the same launches with the
 *           same arguments as the uncaptured path, hence bitwise the same logits);
 *   prefill: the matmul slot kernels by default (each row bitwise the matvec, as the slot
 *           contract promises); HONE_CUDA_CUBLAS=1 uses cuBLAS sgemm (pedantic f32, weights
 *           dequantised exactly to f32 first) for f32/f16/bf16 weights instead: faster, but
 *           reorders the reductions (faithful tier, not bitwise prefill = decode).
 *   faults: a decode step whose capture fails (or whose graph cannot be instantiated) has already
 *           run uncaptured; the backend then says why once on stderr and in its description,
 *           and decodes uncaptured from then on instead of failing every step.
 * Environment: HONE_CUDA_GRAPHS=0 disables graphs; HONE_CUDA_DEVICE picks the device ordinal;
 * HONE_CUDA_SYNC=1 synchronises and checks after every launch and names the kernel that failed
 * (graphs off: a capturing stream cannot be synchronised); HONE_CUDA_CAPTURE_FAULT=1 makes every
 * capture fail (a synchronisation inside the capture), to exercise the fallback. */
#include "backend_impl.h"

#ifdef HONE_HAVE_CUDA

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "cuda_kernels.h"
#include "error.h"
#include "layers.h"

typedef struct {
    const void *data; /* device pointer (NULL: absent bias) */
    int32_t dtype;
    int64_t rows, cols;
} dweight;

typedef struct {
    dweight attn_norm;    /* [dim] f32 */
    dweight wq;           /* [n_heads * head_dim][dim] */
    dweight wk, wv;       /* [n_kv_heads * head_dim][dim] */
    dweight bq, bk, bv;   /* biases (qwen2) or data == NULL */
    dweight wo;           /* [dim][n_heads * head_dim] */
    dweight ffn_norm;     /* [dim] f32 */
    dweight w_gate, w_up; /* [ffn][dim] */
    dweight w_down;       /* [dim][ffn] */
    /* never uploaded: models with them are refused (hone_layers_check); here for
     * HONE_LAYERS_FIELD */
    dweight q_norm, k_norm, post_attn_norm, post_ffn_norm;
} dlayer;

typedef struct {
    hone_cuda_device dev;
    hone_cuda_kernels *ks;
    const hone_model *m;
    hone_hparams hp;
    hone_ctx_opts o;
    cudaStream_t stream;
    cublasHandle_t blas;  /* NULL unless HONE_CUDA_CUBLAS=1 */
    int use_graphs, use_cublas;
    int sync;             /* HONE_CUDA_SYNC: synchronise and check after every launch */
    int capture_fault;    /* HONE_CUDA_CAPTURE_FAULT: make every capture fail (tests) */
    char graph_off[320];  /* why graphs are off, when a capture failed ("" otherwise) */
    char *arena;          /* the one device allocation */
    size_t arena_bytes;
    dweight tok_embd, output_norm, output;
    dlayer *layers;       /* [n_layers] */
    float *kc, *vc;       /* [n_layers][n_blocks][n_kv_heads][block_size][head_dim] */
    hone_kv_cache *book;  /* block allocator and reference counts only */
    /* activations for one piece (<= chunk tokens) */
    float *x, *h, *proj;  /* [chunk][dim] */
    float *q, *att;       /* [chunk][n_heads * head_dim] */
    float *k, *v;         /* [chunk][n_kv_heads * head_dim] */
    float *gate, *up;     /* [chunk][ffn] */
    float *scratch;       /* [chunk * n_heads][n_ctx] attention scores */
    float *logits;        /* [chunk][n_vocab] */
    float *wtmp;          /* cuBLAS only: one weight dequantised to f32, [rows][cols] */
    int32_t *iota;        /* cuBLAS only: 0, 1, ... (row ids for the dequantising embed) */
    /* step parameters: int32 [tokens: chunk][pos: chunk][n_kv: 1][blocks: max_blocks] */
    int32_t *params;      /* device */
    int32_t *params_host; /* pinned; written only while the stream is idle */
    int64_t max_blocks;
    cudaGraphExec_t graph; /* the batch-1 decode step, once captured */
    /* the piece being enqueued (enqueue_piece), for the layer operations */
    int64_t piece_pos0, piece_out_rows, x_first;
    char desc[1024];
} cuda_backend;

#define P_TOKENS(b) ((b)->params)
#define P_POS(b) ((b)->params + (b)->o.chunk)
#define P_NKV(b) ((b)->params + 2 * (b)->o.chunk)
#define P_BLOCKS(b) ((b)->params + 2 * (b)->o.chunk + 1)

static int env_flag(const char *name, int dflt)
{
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    return strcmp(v, "0") != 0;
}

static int64_t weight_bytes(int32_t dtype, int64_t rows, int64_t cols)
{
    return rows * hone_dtype_row_bytes(dtype, cols);
}

/* ---- launches: one helper per slot signature, as forward.c's op_* ---------------------- */

static int k_launch(cuda_backend *b, int k, int64_t nx, int64_t ny, void **args)
{
    int rc = hone_cuda_kernels_launch(b->ks, k, nx, ny, args, b->stream);
    if (rc || !b->sync) return rc;
    char what[128];
    snprintf(what, sizeof what, "hone_cuda_%s over %lld x %lld items", hone_cuda_kernels_name(k),
             (long long)nx, (long long)ny);
    return hone_cuda_sync_check(b->stream, what, __FILE__, __LINE__);
}

static int op_embed(cuda_backend *b, float *out, const dweight *tab, const int32_t *ids, int64_t n)
{
    int64_t dim = tab->cols;
    int32_t dt = tab->dtype;
    void *args[] = {&out, (void *)&tab->data, &dt, &ids, &n, &dim};
    return k_launch(b, HONE_SLOT_EMBED, dim, n, args);
}

/* Y[n][rows] = X[n][cols] W^T as cuBLAS sgemm: column-major Y^T (rows x n) = W (rows x cols,
 * which is the row-major W read as col-major cols x rows, transposed) times X^T (cols x n).
 * Pedantic math: true f32 products and accumulation, no TF32. */
static int op_gemm_cublas(cuda_backend *b, float *Y, const dweight *w, const float *X, int64_t n)
{
    int rc;
    const float *Wf = w->data;
    if (w->dtype != HONE_DTYPE_F32) { /* exact dequantisation via the embed slot, 65535 rows at a time */
        for (int64_t r0 = 0; r0 < w->rows; r0 += 65535) {
            int64_t nr = w->rows - r0 < 65535 ? w->rows - r0 : 65535;
            dweight part = *w;
            part.rows = nr;
            if ((rc = op_embed(b, b->wtmp + r0 * w->cols, &part, b->iota + r0, nr))) return rc;
        }
        Wf = b->wtmp;
    }
    const float one = 1.0f, zero = 0.0f;
    if ((rc = HONE_CUBLAS(cublasSgemm(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)w->rows, (int)n, (int)w->cols,
                                      &one, Wf, (int)w->cols, X, (int)w->cols, &zero, Y, (int)w->rows))))
        return rc;
    if (!b->sync) return 0;
    char what[128];
    snprintf(what, sizeof what, "cublasSgemm %lld x %lld x %lld", (long long)w->rows, (long long)n,
             (long long)w->cols);
    return hone_cuda_sync_check(b->stream, what, __FILE__, __LINE__);
}

static int op_matmul(cuda_backend *b, float *Y, const dweight *w, const float *X, int64_t n)
{
    if (n == 1) {
        void *args[] = {&Y, (void *)&w->data, &X, (void *)&w->rows, (void *)&w->cols};
        return k_launch(b, hone_slots_matvec_id(w->dtype), w->rows, 1, args);
    }
    if (b->use_cublas && (w->dtype == HONE_DTYPE_F32 || w->dtype == HONE_DTYPE_F16 || w->dtype == HONE_DTYPE_BF16))
        return op_gemm_cublas(b, Y, w, X, n);
    void *args[] = {&Y, (void *)&w->data, &X, &n, (void *)&w->rows, (void *)&w->cols};
    return k_launch(b, hone_slots_matmul_id(w->dtype), w->rows, n, args);
}

static int op_rmsnorm(cuda_backend *b, float *y, const float *x, const dweight *w, int64_t n)
{
    int64_t dim = b->hp.dim;
    float eps = b->hp.norm_eps;
    void *args[] = {&y, &x, (void *)&w->data, &n, &dim, &eps};
    return k_launch(b, HONE_SLOT_RMSNORM, n, 1, args);
}

static int op_add(cuda_backend *b, float *y, const float *a, const float *c, int64_t n)
{
    void *args[] = {&y, &a, &c, &n};
    return k_launch(b, HONE_SLOT_ADD, n, 1, args);
}

/* A bias row added to each of n rows through the add slot, one call per row (forward.c). */
static int op_bias(cuda_backend *b, float *y, const dweight *bias, int64_t n)
{
    int rc;
    if (!bias->data) return 0;
    for (int64_t t = 0; t < n; t++)
        if ((rc = op_add(b, y + t * bias->cols, y + t * bias->cols, bias->data, bias->cols))) return rc;
    return 0;
}

static int op_rope(cuda_backend *b, float *x, int64_t n, int64_t heads)
{
    int32_t *pos = P_POS(b);
    int64_t hd = b->hp.head_dim, rot = b->hp.n_rot;
    float base = b->hp.rope_base;
    int32_t neox = b->hp.rope_neox;
    void *args[] = {&x, &pos, &n, &heads, &hd, &rot, &base, &neox};
    return k_launch(b, HONE_SLOT_ROPE, n * heads, 1, args);
}

static int op_kv_store(cuda_backend *b, int64_t layer, int64_t n)
{
    int64_t kvh = b->hp.n_kv_heads, hd = b->hp.head_dim, row = kvh * hd, bs = b->o.kv_block_size;
    float *kc = b->kc + layer * b->o.kv_blocks * bs * row, *vc = b->vc + layer * b->o.kv_blocks * bs * row;
    int32_t *blocks = P_BLOCKS(b), *pos = P_POS(b);
    void *args[] = {&kc, &vc, &b->k, &b->v, &blocks, &pos, &n, &bs, &kvh, &hd};
    return k_launch(b, HONE_CUDA_KV_STORE, row, n, args);
}

static int op_attention(cuda_backend *b, int64_t layer, int64_t pos0, int64_t n)
{
    const hone_hparams *hp = &b->hp;
    int64_t row = hp->n_kv_heads * hp->head_dim, bs = b->o.kv_block_size;
    float *kc = b->kc + layer * b->o.kv_blocks * bs * row, *vc = b->vc + layer * b->o.kv_blocks * bs * row;
    float scale = (float)(1.0 / sqrt((double)hp->head_dim));
    int32_t *blocks = P_BLOCKS(b), *nkv = P_NKV(b);
    int64_t heads = hp->n_heads, kvh = hp->n_kv_heads, hd = hp->head_dim, stride = b->o.n_ctx;
    if (n == 1) {
        void *args[] = {&b->att, &b->q, &kc, &vc, &blocks, &nkv, &bs, &heads, &kvh, &hd, &scale,
                        &b->scratch, &stride};
        return k_launch(b, HONE_SLOT_ATTENTION_DECODE, heads, 1, args);
    }
    void *args[] = {&b->att, &b->q, &kc, &vc, &blocks, &n, &pos0, &bs, &heads, &kvh, &hd, &scale,
                    &b->scratch, &stride};
    return k_launch(b, HONE_SLOT_ATTENTION_PREFILL, heads, n, args);
}

/* ---- the layer sequence's operations on the device (engine/layers.h) ---- */

static float *act(cuda_backend *b, hone_act a)
{
    switch (a) {
    case HONE_ACT_X: return b->x + b->x_first * b->hp.dim;
    case HONE_ACT_H: return b->h;
    case HONE_ACT_Q: return b->q;
    case HONE_ACT_K: return b->k;
    case HONE_ACT_V: return b->v;
    case HONE_ACT_ATT: return b->att;
    case HONE_ACT_PROJ: return b->proj;
    case HONE_ACT_GATE: return b->gate;
    case HONE_ACT_UP: return b->up;
    default: return b->logits;
    }
}

/* The device copy of the model weight (layer, w). */
static const dweight *dw(const cuda_backend *b, int64_t layer, hone_wsel w)
{
    if (w == HONE_W_TOK_EMBD) return &b->tok_embd;
    if (w == HONE_W_OUTPUT_NORM) return &b->output_norm;
    if (w == HONE_W_OUTPUT) return &b->output;
    return HONE_LAYERS_FIELD(&b->layers[layer], w);
}

static int dev_embed(void *p, hone_act out, int64_t n)
{
    cuda_backend *b = p;
    return op_embed(b, act(b, out), &b->tok_embd, P_TOKENS(b), n);
}

static int dev_rmsnorm(void *p, hone_act y, hone_act x, int64_t layer, hone_wsel w, int64_t n)
{
    cuda_backend *b = p;
    return op_rmsnorm(b, act(b, y), act(b, x), dw(b, layer, w), n);
}

static int dev_matmul(void *p, hone_act y, int64_t layer, hone_wsel w, hone_act x, int64_t n)
{
    cuda_backend *b = p;
    return op_matmul(b, act(b, y), dw(b, layer, w), act(b, x), n);
}

static int dev_bias(void *p, hone_act y, int64_t layer, hone_wsel w, int64_t n)
{
    cuda_backend *b = p;
    return op_bias(b, act(b, y), dw(b, layer, w), n);
}

static int dev_rope(void *p, hone_act x, int64_t n, int64_t heads)
{
    cuda_backend *b = p;
    return op_rope(b, act(b, x), n, heads);
}

static int dev_store_kv(void *p, int64_t layer, int64_t n) { return op_kv_store(p, layer, n); }

static int dev_attention(void *p, int64_t layer, int64_t n)
{
    cuda_backend *b = p;
    return op_attention(b, layer, b->piece_pos0, n);
}

static int dev_add(void *p, hone_act y, hone_act a, hone_act c, int64_t elems)
{
    cuda_backend *b = p;
    return op_add(b, act(b, y), act(b, a), act(b, c), elems);
}

static int dev_swiglu(void *p, hone_act out, hone_act g, hone_act u, int64_t elems)
{
    cuda_backend *b = p;
    float *o = act(b, out), *gp = act(b, g), *up = act(b, u);
    void *args[] = {&o, &gp, &up, &elems};
    return k_launch(b, HONE_SLOT_SWIGLU, elems, 1, args);
}

/* The wanted rows are the piece's last out_rows: the final norm reads x from there. */
static int64_t dev_gather(void *p, int64_t n)
{
    cuda_backend *b = p;
    b->x_first = n - b->piece_out_rows;
    return b->piece_out_rows;
}

static const hone_layer_ops cuda_ops = {
    .embed = dev_embed, .rmsnorm = dev_rmsnorm, .matmul = dev_matmul, .bias = dev_bias,
    .rope = dev_rope, .store_kv = dev_store_kv, .attention = dev_attention, .add = dev_add,
    .swiglu = dev_swiglu, .gather = dev_gather,
};

/* Enqueues one piece of n tokens at positions pos0 .. pos0+n-1 (their params uploaded), the
 * layer sequence of engine/layers.c; logits for the last `out_rows` rows (0, 1 or n) go to
 * b->logits. For n == 1 nothing here depends on pos0, which is what makes the decode graph
 * reusable. */
static int enqueue_piece(cuda_backend *b, int64_t n, int64_t pos0, int64_t out_rows)
{
    b->piece_pos0 = pos0;
    b->piece_out_rows = out_rows;
    b->x_first = 0;
    int rc = hone_layers_run(b->m, &cuda_ops, b, n);
    b->x_first = 0;
    return rc;
}

/* Captures the batch-1 decode step (logits of its one row) as a graph; nothing runs. Work
 * already queued on the stream is not part of the capture. */
static int graph_capture(cuda_backend *b)
{
    cudaGraph_t g = NULL;
    int rc = HONE_CUDART(cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeThreadLocal));
    if (rc) return rc;
    int erc = enqueue_piece(b, 1, 0, 1);
    /* illegal while capturing: invalidates the capture, as a real capture fault would */
    if (!erc && b->capture_fault) erc = HONE_CUDART(cudaStreamSynchronize(b->stream));
    char why[320] = ""; /* the first fault, which ending the capture would overwrite */
    if (erc) snprintf(why, sizeof why, "%s", hone_error_last());
    rc = HONE_CUDART(cudaStreamEndCapture(b->stream, &g));
    if (erc || rc) {
        if (g) cudaGraphDestroy(g);
        (void)cudaGetLastError();
        return erc ? hone_error_set(erc, "%s", why) : rc;
    }
    rc = HONE_CUDART(cudaGraphInstantiate(&b->graph, g, 0));
    cudaGraphDestroy(g);
    if (rc) b->graph = NULL;
    return rc;
}

static void describe(cuda_backend *b);

/* A capture (or instantiation) failed after the step itself ran uncaptured: graphs off for good,
 * said once. The stream has left capture mode (cudaStreamEndCapture ends it even when the
 * capture was invalidated), so the next steps run as the first one did. */
static void graph_fallback(cuda_backend *b)
{
    snprintf(b->graph_off, sizeof b->graph_off, "%s", hone_error_last());
    (void)cudaGetLastError();
    b->use_graphs = 0;
    describe(b);
    fprintf(stderr, "hone: CUDA graph capture failed (%s); decoding without graphs\n", b->graph_off);
}

static int cuda_forward(void *p, hone_kv_seq *seq, const int32_t *tokens, int64_t n, float *logits,
                        int all)
{
    cuda_backend *b = p;
    const hone_hparams *hp = &b->hp;
    int rc;
    if (n <= 0) return hone_error_set(HONE_EINVAL, "no tokens to process");
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return hone_error_set(HONE_EINVAL, "token id %d out of range [0, %lld)", tokens[i],
                                  (long long)hp->n_vocab);
    if (seq->n_tokens + n > b->o.n_ctx)
        return hone_error_set(HONE_ERANGE, "context full: %lld + %lld tokens exceed the context "
                              "length %lld", (long long)seq->n_tokens, (long long)n,
                              (long long)b->o.n_ctx);
    int64_t had = seq->n_tokens;
    if ((rc = hone_kv_cache_reserve(b->book, seq, seq->n_tokens + n))) return rc;
    if ((rc = HONE_CUDART(cudaSetDevice(b->dev.ordinal)))) goto fail;
    for (int64_t t0 = 0; t0 < n; t0 += b->o.chunk) {
        int64_t m = n - t0 < b->o.chunk ? n - t0 : b->o.chunk, pos0 = seq->n_tokens;
        int last = t0 + m == n;
        int64_t rows = logits ? (all ? m : (last ? 1 : 0)) : 0;
        /* the step parameters (the stream is idle: the previous piece ended with a sync) */
        int32_t *ph = b->params_host;
        for (int64_t t = 0; t < m; t++) {
            ph[t] = tokens[t0 + t];
            ph[b->o.chunk + t] = (int32_t)(pos0 + t);
        }
        ph[2 * b->o.chunk] = (int32_t)(pos0 + m); /* n_kv of the last row; decode reads it */
        memcpy(ph + 2 * b->o.chunk + 1, seq->blocks, (size_t)seq->n_blocks * sizeof(int32_t));
        size_t bytes = (size_t)(2 * b->o.chunk + 1 + seq->n_blocks) * sizeof(int32_t);
        if ((rc = HONE_CUDART(cudaMemcpyAsync(b->params, ph, bytes, cudaMemcpyHostToDevice, b->stream))))
            goto fail;
        if (m == 1 && rows == 1 && b->use_graphs && b->graph) {
            if ((rc = HONE_CUDART(cudaGraphLaunch(b->graph, b->stream)))) goto fail;
        } else {
            if ((rc = enqueue_piece(b, m, pos0, rows))) goto fail;
            /* the first decode step runs uncaptured (which also loads every kernel it uses, so
             * no lazy loading happens during capture); then it is captured for the next ones */
            if (m == 1 && rows == 1 && b->use_graphs && graph_capture(b)) graph_fallback(b);
        }
        if (rows) {
            float *dst = all ? logits + t0 * hp->n_vocab : logits;
            if ((rc = HONE_CUDART(cudaMemcpyAsync(dst, b->logits, (size_t)(rows * hp->n_vocab) * sizeof(float),
                                                  cudaMemcpyDeviceToHost, b->stream))))
                goto fail;
        }
        if ((rc = HONE_CUDART(cudaStreamSynchronize(b->stream)))) goto fail;
        seq->n_tokens += m;
    }
    return 0;
fail:
    /* keep the tokens stored before this call; pieces finished in it are dropped as well */
    (void)cudaStreamSynchronize(b->stream);
    hone_kv_cache_truncate(b->book, seq, had);
    seq->n_tokens = had;
    return rc;
}

/* hone_ctx_forward_batch's contract for the rows of one sequence (what one CUDA forward runs);
 * a batch of several sequences is refused before anything changes. */
static int cuda_forward_batch(void *p, const hone_batch *bt)
{
    cuda_backend *b = p;
    const int64_t n = bt->n, V = b->hp.n_vocab;
    if (n <= 0) return 0;
    hone_kv_seq *seq = bt->seqs[0];
    int64_t want = 0; /* rows whose logits are asked for */
    for (int64_t i = 0; i < n; i++) {
        if (bt->seqs[i] != seq)
            return hone_error_set(HONE_EUNSUPPORTED, "the CUDA backend runs the rows of one sequence per "
                                  "batch; row %lld is of another (continuous batching of several "
                                  "sequences is CPU-only)", (long long)i);
        if (bt->pos[i] != seq->n_tokens + i)
            return hone_error_set(HONE_EINVAL, "batch row %lld: position %d does not continue its "
                                  "sequence (at %lld)", (long long)i, bt->pos[i],
                                  (long long)(seq->n_tokens + i));
        want += bt->out_rows && bt->out_rows[i];
    }
    if (want == 0) return cuda_forward(b, seq, bt->tokens, n, NULL, 0);
    if (want == 1 && bt->out_rows[n - 1]) return cuda_forward(b, seq, bt->tokens, n, bt->out_rows[n - 1], 0);
    float *all = malloc((size_t)(n * V) * sizeof *all);
    if (!all) return hone_error_set(HONE_ENOMEM, "out of memory for %lld rows of logits", (long long)n);
    int rc = cuda_forward(b, seq, bt->tokens, n, all, 1);
    for (int64_t i = 0; !rc && i < n; i++)
        if (bt->out_rows[i]) memcpy(bt->out_rows[i], all + i * V, (size_t)V * sizeof *all);
    free(all);
    return rc;
}

static void cuda_release(void *p, hone_kv_seq *seq)
{
    hone_kv_cache_release(((cuda_backend *)p)->book, seq);
}

static int64_t cuda_n_ctx(const void *p) { return ((const cuda_backend *)p)->o.n_ctx; }
static const char *cuda_describe(const void *p) { return ((const cuda_backend *)p)->desc; }
static hone_kv_cache *cuda_kv(void *p) { return ((cuda_backend *)p)->book; }

static void cuda_free(void *p)
{
    cuda_backend *b = p;
    if (!b) return;
    if (b->stream) cudaStreamSynchronize(b->stream);
    if (b->graph) cudaGraphExecDestroy(b->graph);
    if (b->blas) cublasDestroy(b->blas);
    if (b->stream) cudaStreamDestroy(b->stream);
    if (b->arena) cudaFree(b->arena);
    if (b->params_host) cudaFreeHost(b->params_host);
    hone_cuda_kernels_free(b->ks);
    hone_kv_cache_free(b->book);
    free(b->layers);
    free(b);
}

/* ---- construction ------------------------------------------------------------------------ */

static void describe(cuda_backend *b)
{
    char graphs[400];
    if (b->graph_off[0]) snprintf(graphs, sizeof graphs, "off: capture failed: %.300s", b->graph_off);
    else if (b->sync) snprintf(graphs, sizeof graphs, "off (HONE_CUDA_SYNC)");
    else snprintf(graphs, sizeof graphs, "%s", b->use_graphs ? "on" : "off");
    snprintf(b->desc, sizeof b->desc, "cuda: %s (sm_%d, %d SMs, %.0f MiB arena, graphs %s, prefill %s%s)",
             b->dev.name, b->dev.sm, b->dev.n_sms, (double)b->arena_bytes / (1 << 20), graphs,
             b->use_cublas ? "cuBLAS for f32/f16/bf16" : "slot kernels",
             b->sync ? ", HONE_CUDA_SYNC: checked after every launch" : "");
}

/* The arena is laid out twice: first to size it (base == NULL), then for real. */
typedef struct {
    char *base;
    size_t off;
} arena_plan;

static void *take(arena_plan *a, size_t bytes)
{
    size_t o = (a->off + 255) & ~(size_t)255;
    a->off = o + bytes;
    return a->base ? a->base + o : NULL;
}

/* Uploaded weights, deduplicated by host pointer (a tied output shares token_embd). */
typedef struct {
    const void *host;
    void *dev;
} upload;

static int place_weight(arena_plan *a, dweight *out, const hone_weight *w, upload *ups, int *n_ups)
{
    memset(out, 0, sizeof *out);
    if (!w->data) return 0;
    out->dtype = w->dtype;
    out->rows = w->rows;
    out->cols = w->cols;
    for (int i = 0; i < *n_ups; i++)
        if (ups[i].host == w->data) {
            out->data = ups[i].dev;
            return 0;
        }
    size_t bytes = (size_t)weight_bytes(w->dtype, w->rows, w->cols);
    void *dev = take(a, bytes);
    out->data = dev;
    if (a->base) {
        int rc = HONE_CUDART(cudaMemcpy(dev, w->data, bytes, cudaMemcpyHostToDevice));
        if (rc) return rc;
    }
    ups[*n_ups].host = w->data;
    ups[*n_ups].dev = dev;
    (*n_ups)++;
    return 0;
}

/* Lays out (and, with a->base set, uploads) everything the model needs. */
static int plan_arena(cuda_backend *b, arena_plan *a, int64_t wtmp_floats, int64_t iota_n)
{
    const hone_hparams *hp = &b->hp;
    int rc, n_ups = 0;
    int64_t n_mats = 3 + 12 * hp->n_layers;
    upload *ups = calloc((size_t)n_mats, sizeof *ups);
    if (!ups) return hone_error_set(HONE_ENOMEM, "out of memory");
#define W(dst, src) if ((rc = place_weight(a, dst, src, ups, &n_ups))) goto done
    W(&b->tok_embd, hone_model_tok_embd(b->m));
    W(&b->output_norm, hone_model_output_norm(b->m));
    W(&b->output, hone_model_output(b->m));
    for (int64_t l = 0; l < hp->n_layers; l++) {
        const hone_layer *L = hone_model_layer(b->m, l);
        dlayer *D = &b->layers[l];
        W(&D->attn_norm, &L->attn_norm); W(&D->wq, &L->wq); W(&D->wk, &L->wk); W(&D->wv, &L->wv);
        W(&D->bq, &L->bq); W(&D->bk, &L->bk); W(&D->bv, &L->bv); W(&D->wo, &L->wo);
        W(&D->ffn_norm, &L->ffn_norm); W(&D->w_gate, &L->w_gate); W(&D->w_up, &L->w_up);
        W(&D->w_down, &L->w_down);
    }
#undef W
    int64_t ch = b->o.chunk, qd = hp->n_heads * hp->head_dim, kvd = hp->n_kv_heads * hp->head_dim;
    size_t kv = (size_t)(hp->n_layers * b->o.kv_blocks * b->o.kv_block_size * kvd) * sizeof(float);
    b->kc = take(a, kv);
    b->vc = take(a, kv);
#define F(p, count) b->p = take(a, (size_t)(count) * sizeof *b->p)
    F(x, ch * hp->dim); F(h, ch * hp->dim); F(proj, ch * hp->dim);
    F(q, ch * qd); F(att, ch * qd); F(k, ch * kvd); F(v, ch * kvd);
    F(gate, ch * hp->ffn); F(up, ch * hp->ffn);
    F(scratch, ch * hp->n_heads * b->o.n_ctx);
    F(logits, ch * hp->n_vocab);
    F(params, 2 * ch + 1 + b->max_blocks);
    if (wtmp_floats) F(wtmp, wtmp_floats);
    if (iota_n) F(iota, iota_n);
#undef F
    rc = 0;
done:
    free(ups);
    return rc;
}

int hone_cuda_backend_probe(int *out_available, char *why, int cap)
{
    int n = 0, ordinal = 0;
    *out_available = 0;
    hone_cuda_probe(&n, why, cap);
    if (n <= 0) return 0;
    const char *env = getenv("HONE_CUDA_DEVICE");
    if (env && *env) ordinal = atoi(env);
    if (ordinal < 0 || ordinal >= n) {
        snprintf(why, (size_t)cap, "HONE_CUDA_DEVICE=%d but %d device(s)", ordinal, n);
        return 0;
    }
    hone_cuda_device d;
    if (hone_cuda_device_get(&d, ordinal)) {
        snprintf(why, (size_t)cap, "%s", hone_error_last());
        return 0;
    }
    /* NVRTC must be able to target the device */
    int n_archs = 0, found = 0;
    if (nvrtcGetNumSupportedArchs(&n_archs) == NVRTC_SUCCESS && n_archs > 0) {
        int *archs = malloc((size_t)n_archs * sizeof *archs);
        if (archs && nvrtcGetSupportedArchs(archs) == NVRTC_SUCCESS)
            for (int i = 0; i < n_archs; i++) found |= archs[i] == d.sm;
        free(archs);
    }
    if (!found) {
        snprintf(why, (size_t)cap, "%s is sm_%d, which this NVRTC cannot target", d.name, d.sm);
        return 0;
    }
    *out_available = 1;
    return 0;
}

int hone_cuda_backend_new(hone_backend_i *out_iface, void **out_ctx, const hone_model *m,
                          const hone_ctx_opts *opts)
{
    hone_ctx_opts dflt = HONE_CTX_OPTS_INIT;
    int rc, avail = 0, ordinal = 0;
    char why[256];
    *out_ctx = NULL;
    /* the architecture operations the CUDA layer ops lack (QK norm, geglu, sliding windows,
     * per-layer RoPE, ...): refused by name before any device work */
    if ((rc = hone_layers_check(m, &cuda_ops, "the CUDA backend"))) return rc;
    if ((rc = hone_cuda_backend_probe(&avail, why, sizeof why))) return rc;
    if (!avail) return hone_error_set(HONE_EUNSUPPORTED, "no usable GPU (%s)", why);
    cuda_backend *b = calloc(1, sizeof *b);
    if (!b) return hone_error_set(HONE_ENOMEM, "out of memory");
    b->m = m;
    b->hp = *hone_model_hparams(m);
    b->o = opts ? *opts : dflt;
    const hone_hparams *hp = &b->hp;
    /* the same defaults and limits as hone_ctx_new */
    if (b->o.n_ctx <= 0) b->o.n_ctx = hp->n_ctx_train; /* every context the model supports */
    if (b->o.chunk <= 0) b->o.chunk = 64;
    if (b->o.kv_block_size <= 0) b->o.kv_block_size = 16;
    if (b->o.n_ctx > (int64_t)1 << 24 || b->o.chunk > 4096 || b->o.kv_block_size > 4096) {
        rc = hone_error_set(HONE_EINVAL, "context %lld, chunk %lld or KV block %lld out of range",
                            (long long)b->o.n_ctx, (long long)b->o.chunk, (long long)b->o.kv_block_size);
        goto fail;
    }
    if (b->o.kv_blocks <= 0) b->o.kv_blocks = (b->o.n_ctx + b->o.kv_block_size - 1) / b->o.kv_block_size;
    b->max_blocks = (b->o.n_ctx + b->o.kv_block_size - 1) / b->o.kv_block_size;
    if (b->o.n_ctx > INT32_MAX / 2 || hp->n_vocab > INT32_MAX) {
        rc = hone_error_set(HONE_ERANGE, "context or vocabulary too large for int32 positions");
        goto fail;
    }
    b->use_graphs = env_flag("HONE_CUDA_GRAPHS", 1);
    b->use_cublas = env_flag("HONE_CUDA_CUBLAS", 0);
    b->sync = hone_cuda_sync_enabled();
    b->capture_fault = env_flag("HONE_CUDA_CAPTURE_FAULT", 0);
    if (b->sync) b->use_graphs = 0;
    const char *env = getenv("HONE_CUDA_DEVICE");
    if (env && *env) ordinal = atoi(env);
    if ((rc = hone_cuda_device_get(&b->dev, ordinal))) goto fail;
    if ((rc = HONE_CUDART(cudaSetDevice(ordinal)))) goto fail;
    if ((rc = HONE_CUDART(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking)))) goto fail;
    if ((rc = hone_cuda_kernels_new(&b->ks, b->dev.sm, NULL))) goto fail;
    if ((rc = hone_kv_cache_new(&b->book, 1, 1, 1, b->o.kv_block_size, b->o.kv_blocks))) goto fail;
    if (!(b->layers = calloc((size_t)hp->n_layers, sizeof *b->layers))) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory");
        goto fail;
    }
    /* cuBLAS: a temporary for the largest f16/bf16 weight dequantised to f32, row ids */
    int64_t wtmp = 0, iota = 0;
    if (b->use_cublas) {
        const hone_weight *ws[2 + 7 * 1];
        for (int64_t l = -1; l < hp->n_layers; l++) {
            int nw = 0;
            if (l < 0) {
                ws[nw++] = hone_model_output(m);
            } else {
                const hone_layer *L = hone_model_layer(m, l);
                ws[nw++] = &L->wq; ws[nw++] = &L->wk; ws[nw++] = &L->wv; ws[nw++] = &L->wo;
                ws[nw++] = &L->w_gate; ws[nw++] = &L->w_up; ws[nw++] = &L->w_down;
            }
            for (int i = 0; i < nw; i++) {
                const hone_weight *w = ws[i];
                if (w->dtype == HONE_DTYPE_F16 || w->dtype == HONE_DTYPE_BF16) {
                    if (w->rows * w->cols > wtmp) wtmp = w->rows * w->cols;
                    if (w->rows > iota) iota = w->rows;
                }
                if (w->rows > INT32_MAX || w->cols > INT32_MAX) {
                    rc = hone_error_set(HONE_ERANGE, "%s too large for cuBLAS", w->name);
                    goto fail;
                }
            }
        }
        if ((rc = HONE_CUBLAS(cublasCreate(&b->blas))) ||
            (rc = HONE_CUBLAS(cublasSetStream(b->blas, b->stream))) ||
            (rc = HONE_CUBLAS(cublasSetMathMode(b->blas, CUBLAS_PEDANTIC_MATH))))
            goto fail;
    }
    arena_plan a = {NULL, 0};
    if ((rc = plan_arena(b, &a, wtmp, iota))) goto fail;
    b->arena_bytes = a.off;
    if ((rc = HONE_CUDART(cudaMalloc((void **)&b->arena, b->arena_bytes)))) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", hone_error_last());
        rc = hone_error_set(rc, "cannot allocate the model's %.1f MiB on %s: %s",
                            (double)b->arena_bytes / (1 << 20), b->dev.name, msg);
        goto fail;
    }
    a.base = b->arena;
    a.off = 0;
    if ((rc = plan_arena(b, &a, wtmp, iota))) goto fail;
    if (iota) {
        int32_t *tmp = malloc((size_t)iota * sizeof *tmp);
        if (!tmp) { rc = hone_error_set(HONE_ENOMEM, "out of memory"); goto fail; }
        for (int64_t i = 0; i < iota; i++) tmp[i] = (int32_t)i;
        rc = HONE_CUDART(cudaMemcpy(b->iota, tmp, (size_t)iota * sizeof *tmp, cudaMemcpyHostToDevice));
        free(tmp);
        if (rc) goto fail;
    }
    if ((rc = HONE_CUDART(cudaMallocHost((void **)&b->params_host,
                                         (size_t)(2 * b->o.chunk + 1 + b->max_blocks) * sizeof(int32_t)))))
        goto fail;
    describe(b);
    /* no slot table the CPU can swap, no per-slot hook (the GPU profile is CUPTI's) */
    *out_iface = (hone_backend_i){.forward = cuda_forward, .forward_batch = cuda_forward_batch,
                                  .release = cuda_release, .n_ctx = cuda_n_ctx,
                                  .describe = cuda_describe, .kv = cuda_kv, .free = cuda_free};
    *out_ctx = b;
    return 0;
fail:
    cuda_free(b);
    return rc;
}

#endif
