/* The CUDA half of a test-backend-ops: every CUDA kernel (kernels/cuda/) on random inputs, over
 * the SmolLM2 shapes and odd shapes, against the CPU baseline and the f64 oracle:
 *  - matvec, matmul, embed, add, kv_store: bitwise equal to the CPU (the same operation order);
 *  - rmsnorm, rope, swiglu, attention: within 2 f32 ulps of the CPU and, against the oracle,
 *    no worse than the CPU plus 2 ulps (their double and exp steps may round differently);
 *  - batching: matmul row t == matvec of X[t]; attention_prefill row (t, h) == attention_decode
 *    with n_kv = pos0 + t + 1 (bitwise, on the GPU);
 *  - hygiene: outputs poisoned with NaN (every element must be written), guard regions around
 *    every output (nothing written outside), unused KV slots hold NaN (never read).
 * Needs a GPU: exits 77 (skipped) without one. */
#include "harness.h"

#ifndef HONE_HAVE_CUDA
int main(void)
{
    fprintf(stderr, "skipped: this build has no CUDA support\n");
    return 77;
}
#else

#include <stdint.h>

#include "engine/cuda.h"
#include "engine/cuda_kernels.h"
#include "engine/dtype.h"
#include "engine/error.h"
#include "engine/slots.h"
#include "guard/cases.h"
#include "guard/oracle.h"

#define GUARD 4096 /* bytes of poison on each side of every device output */

static hone_cuda_kernels *KS;
static hone_slot_table CPU;

/* ---- utilities ------------------------------------------------------------------------- */

static uint64_t rng = 0x6a09e667f3bcc909ull;
static uint64_t rnd_u64(void)
{
    return hone_slots_rand(&rng);
}
static double rnd_unit(void) { return (double)(rnd_u64() >> 11) * 0x1p-53; }
static float rnd_f(double lo, double hi) { return (float)(lo + (hi - lo) * rnd_unit()); }

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    return p;
}

static float *rnd_vec(int64_t n, double lo, double hi)
{
    float *v = xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) v[i] = rnd_f(lo, hi);
    return v;
}

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static int64_t first_diff(const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (fbits(a[i]) != fbits(b[i])) return i;
    return -1;
}

static void die_cuda(int rc, const char *what)
{
    if (rc) { fprintf(stderr, "%s: %s\n", what, hone_error_last()); exit(1); }
}

static void *dev_dup(const void *h, size_t n)
{
    void *d = NULL;
    die_cuda(HONE_CUDART(cudaMalloc(&d, n ? n : 1)), "cudaMalloc");
    if (n) die_cuda(HONE_CUDART(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice)), "upload");
    return d;
}

/* A device output of `bytes` with GUARD bytes of 0xff (NaN as floats) on each side and inside. */
static void *dev_out(size_t bytes)
{
    char *d = NULL;
    die_cuda(HONE_CUDART(cudaMalloc((void **)&d, bytes + 2 * GUARD)), "cudaMalloc");
    die_cuda(HONE_CUDART(cudaMemset(d, 0xff, bytes + 2 * GUARD)), "cudaMemset");
    return d + GUARD;
}

/* Downloads a dev_out buffer into host (may be NULL) and checks its guards; frees it. */
static void dev_take(void *d, void *host, size_t bytes, const char *what)
{
    char *base = (char *)d - GUARD;
    unsigned char *all = xmalloc(bytes + 2 * GUARD);
    die_cuda(HONE_CUDART(cudaMemcpy(all, base, bytes + 2 * GUARD, cudaMemcpyDeviceToHost)), "download");
    int bad = 0;
    for (size_t i = 0; i < GUARD; i++) bad |= all[i] != 0xff || all[GUARD + bytes + i] != 0xff;
    CHECK_MSG(!bad, "%s: written outside its output", what);
    if (host) memcpy(host, all + GUARD, bytes);
    free(all);
    cudaFree(base);
}

static void launch(int k, int64_t nx, int64_t ny, void **args)
{
    int rc = hone_cuda_kernels_launch(KS, k, nx, ny, args, 0);
    if (!rc) rc = HONE_CUDART(cudaDeviceSynchronize());
    CHECK_MSG(rc == 0, "%s: %s", hone_cuda_kernels_name(k), hone_error_last());
    if (rc) exit(1); /* a device fault poisons the context: nothing after it is meaningful */
}

static int any_nan(const float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (v[i] != v[i]) return 1;
    return 0;
}

/* The faithful check: |gpu - ref| <= |cpu - ref| + slack element by element, NaN in the same
 * places, and |gpu - cpu| <= slack, with slack = ulps f32 ulps of the element (row_len == 0) or
 * of the largest |ref| of its row of row_len elements (outputs that are sums of many terms, such
 * as attention and rope, can cancel to far below the size of their terms). Returns the count of
 * elements bitwise equal to the CPU's. */
static int64_t check_faithful(const char *what, const float *gpu, const float *cpu, const double *ref,
                              int64_t n, double ulps, int64_t row_len)
{
    int64_t same = 0, bad = 0, worst = -1;
    double scale = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (row_len > 0 && i % row_len == 0) {
            scale = 0.0;
            for (int64_t j = i; j < i + row_len && j < n; j++)
                if (ref[j] == ref[j] && fabs(ref[j]) > scale) scale = fabs(ref[j]);
        }
        same += fbits(gpu[i]) == fbits(cpu[i]);
        if ((gpu[i] != gpu[i]) != (cpu[i] != cpu[i])) { bad++; worst = i; continue; }
        if (gpu[i] != gpu[i]) continue;
        double eg = fabs((double)gpu[i] - ref[i]), ec = fabs((double)cpu[i] - ref[i]);
        double slack = ulps * hone_oracle_ulp_f32(row_len > 0 ? scale : ref[i]);
        if (eg > ec + slack || fabs((double)gpu[i] - cpu[i]) > slack) {
            bad++;
            worst = i;
        }
    }
    CHECK_MSG(bad == 0, "%s: %lld elements beyond the faithful bound (e.g. [%lld] gpu %.9g cpu %.9g ref %.9g)",
              what, (long long)bad, (long long)worst, worst >= 0 ? gpu[worst] : 0.0,
              worst >= 0 ? cpu[worst] : 0.0, worst >= 0 ? ref[worst] : 0.0);
    return same;
}

static int is_block(int dt) { return hone_dtype_block_size(dt) == HONE_QK; }

static void *make_weight(int dt, int64_t rows, int64_t cols, size_t *bytes)
{
    *bytes = (size_t)(hone_dtype_row_bytes(dt, cols) * rows);
    void *w = xmalloc(*bytes);
    hone_slots_fill_weight(w, dt, rows, cols, &rng);
    return w;
}

static const int DTYPES[] = {HONE_DTYPE_F32, HONE_DTYPE_F16, HONE_DTYPE_BF16,
                             HONE_DTYPE_Q8_0, HONE_DTYPE_Q4_0, HONE_DTYPE_Q4_1};

/* ---- matvec / matmul ------------------------------------------------------------------- */

static void check_matvec_matmul(int dt, int64_t rows, int64_t cols)
{
    char what[128];
    size_t wb;
    void *W = make_weight(dt, rows, cols, &wb);
    const int64_t NS[] = {1, 3, 8, 13};
    int64_t nmax = 13;
    float *X = rnd_vec(nmax * cols, -1, 1);
    void *dW = dev_dup(W, wb);
    float *dX = dev_dup(X, (size_t)(nmax * cols) * sizeof(float));
    float *cpu = xmalloc((size_t)(nmax * rows) * sizeof(float)), *gpu = xmalloc((size_t)(nmax * rows) * sizeof(float));
    float *gmv = xmalloc((size_t)(nmax * rows) * sizeof(float));
    double *ref = xmalloc((size_t)rows * sizeof(double));

    /* matvec of every row of X (kept for the matmul == matvec check) */
    for (int64_t t = 0; t < nmax; t++) {
        float *dy = dev_out((size_t)rows * sizeof(float));
        float *dx = dX + t * cols;
        void *args[] = {&dy, &dW, &dx, &rows, &cols};
        launch(hone_slots_matvec_id(dt), rows, 1, args);
        snprintf(what, sizeof what, "matvec_%s %lldx%lld", hone_dtype_name(dt), (long long)rows, (long long)cols);
        dev_take(dy, gmv + t * rows, (size_t)rows * sizeof(float), what);
        if (t == 0 || t == nmax - 1) {
            hone_slots_matvec(&CPU, dt)(cpu, W, X + t * cols, rows, cols, 0, 1);
            int64_t d = first_diff(gmv + t * rows, cpu, rows);
            CHECK_MSG(d < 0, "%s: row %lld differs from the CPU: %.9g vs %.9g", what, (long long)d,
                      d >= 0 ? gmv[t * rows + d] : 0.0, d >= 0 ? cpu[d] : 0.0);
            CHECK_MSG(!any_nan(gmv + t * rows, rows), "%s: unwritten output", what);
            hone_oracle_matvec(ref, dt, W, X + t * cols, rows, cols);
            check_faithful(what, gmv + t * rows, cpu, ref, rows, 0, 0);
        }
    }
    for (size_t i = 0; i < sizeof NS / sizeof NS[0]; i++) {
        int64_t n = NS[i];
        float *dY = dev_out((size_t)(n * rows) * sizeof(float));
        void *args[] = {&dY, &dW, &dX, &n, &rows, &cols};
        launch(hone_slots_matmul_id(dt), rows, n, args);
        snprintf(what, sizeof what, "matmul_%s n=%lld %lldx%lld", hone_dtype_name(dt), (long long)n,
                 (long long)rows, (long long)cols);
        dev_take(dY, gpu, (size_t)(n * rows) * sizeof(float), what);
        hone_slots_matmul(&CPU, dt)(cpu, W, X, n, rows, cols, 0, 1);
        int64_t d = first_diff(gpu, cpu, n * rows);
        CHECK_MSG(d < 0, "%s: element %lld differs from the CPU", what, (long long)d);
        d = first_diff(gpu, gmv, n * rows);
        CHECK_MSG(d < 0, "%s: element %lld differs from the GPU matvec of its row", what, (long long)d);
    }
    cudaFree(dW);
    cudaFree(dX);
    free(W); free(X); free(cpu); free(gpu); free(gmv); free(ref);
}

static void test_matvec_matmul(void)
{
    /* SmolLM2-135M's shapes, then odd ones (block formats need cols % 32 == 0) */
    static const int64_t shapes[][2] = {{576, 576}, {192, 576}, {1536, 576}, {576, 1536},
                                        {1, 32}, {7, 64}, {33, 96}, {1000, 160}, {17, 4128}};
    static const int64_t plain[][2] = {{5, 1}, {3, 17}, {9, 33}, {17, 100}, {2, 15}};
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++) {
        int dt = DTYPES[i];
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) check_matvec_matmul(dt, shapes[s][0], shapes[s][1]);
        if (!is_block(dt))
            for (size_t s = 0; s < sizeof plain / sizeof plain[0]; s++) check_matvec_matmul(dt, plain[s][0], plain[s][1]);
    }
    /* the output projection's shape (vocab rows), once in f16 */
    check_matvec_matmul(HONE_DTYPE_F16, 49152, 576);
}

/* The further formats (q5_0 .. mxfp4): whole blocks of 32 or 256 values per row, matvec and
 * matmul against the CPU bitwise, and embed. */
static const int MORE[] = {HONE_DTYPE_Q5_0, HONE_DTYPE_Q5_1, HONE_DTYPE_Q4_K, HONE_DTYPE_Q5_K,
                           HONE_DTYPE_Q6_K, HONE_DTYPE_Q3_K, HONE_DTYPE_Q2_K, HONE_DTYPE_MXFP4};

static void test_matvec_matmul_more(void)
{
    static const int64_t shapes[][2] = {{576, 1536}, {1536, 512}, {1, 256}, {7, 512}, {33, 768}, {17, 4096}};
    for (size_t i = 0; i < sizeof MORE / sizeof MORE[0]; i++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) check_matvec_matmul(MORE[i], shapes[s][0], shapes[s][1]);
}

static void test_embed_more(void)
{
    for (size_t i = 0; i < sizeof MORE / sizeof MORE[0]; i++) {
        int dt = MORE[i];
        int64_t dim = 2 * hone_dtype_block_size(dt), vocab = 300, n = 7;
        size_t tb;
        void *tab = make_weight(dt, vocab, dim, &tb);
        int32_t ids[7];
        for (int t = 0; t < n; t++) ids[t] = (int32_t)(rnd_u64() % (uint64_t)vocab);
        void *dtab = dev_dup(tab, tb);
        int32_t *dids = dev_dup(ids, sizeof ids);
        float *dout = dev_out((size_t)(n * dim) * sizeof(float));
        int32_t dtype = dt;
        void *args[] = {&dout, &dtab, &dtype, &dids, &n, &dim};
        launch(HONE_SLOT_EMBED, dim, n, args);
        float *gpu = xmalloc((size_t)(n * dim) * sizeof(float)), *cpu = xmalloc((size_t)(n * dim) * sizeof(float));
        char what[64];
        snprintf(what, sizeof what, "embed %s dim=%lld", hone_dtype_name(dt), (long long)dim);
        dev_take(dout, gpu, (size_t)(n * dim) * sizeof(float), what);
        HONE_SLOTS_FN(&CPU, HONE_SLOT_EMBED, hone_slot_embed_fn)(cpu, tab, dt, ids, n, dim, 0, 1);
        CHECK_MSG(first_diff(gpu, cpu, n * dim) < 0, "%s differs from the CPU", what);
        cudaFree(dtab);
        cudaFree(dids);
        free(tab); free(gpu); free(cpu);
    }
}

/* ---- embed ----------------------------------------------------------------------------- */

static void test_embed(void)
{
    static const int64_t dims[] = {576, 64, 32, 33, 1};
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++) {
        int dt = DTYPES[i];
        for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
            int64_t dim = dims[d], vocab = 300, n = 7;
            if (is_block(dt) && dim % 32) continue;
            size_t tb;
            void *tab = make_weight(dt, vocab, dim, &tb);
            int32_t ids[7];
            for (int t = 0; t < n; t++) ids[t] = (int32_t)(rnd_u64() % (uint64_t)vocab);
            ids[0] = 0;
            ids[n - 1] = (int32_t)vocab - 1;
            void *dtab = dev_dup(tab, tb);
            int32_t *dids = dev_dup(ids, sizeof ids);
            float *dout = dev_out((size_t)(n * dim) * sizeof(float));
            int32_t dtype = dt;
            void *args[] = {&dout, &dtab, &dtype, &dids, &n, &dim};
            launch(HONE_SLOT_EMBED, dim, n, args);
            float *gpu = xmalloc((size_t)(n * dim) * sizeof(float)), *cpu = xmalloc((size_t)(n * dim) * sizeof(float));
            char what[64];
            snprintf(what, sizeof what, "embed %s dim=%lld", hone_dtype_name(dt), (long long)dim);
            dev_take(dout, gpu, (size_t)(n * dim) * sizeof(float), what);
            HONE_SLOTS_FN(&CPU, HONE_SLOT_EMBED, hone_slot_embed_fn)(cpu, tab, dt, ids, n, dim, 0, 1);
            CHECK_MSG(first_diff(gpu, cpu, n * dim) < 0, "%s differs from the CPU", what);
            cudaFree(dtab);
            cudaFree(dids);
            free(tab); free(gpu); free(cpu);
        }
    }
}

/* ---- rmsnorm, rope, swiglu, add -------------------------------------------------------- */

static void test_rmsnorm(void)
{
    static const int64_t shapes[][2] = {{1, 576}, {3, 576}, {64, 576}, {5, 64}, {2, 33}, {4, 1}, {1, 4097}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int inplace = 0; inplace < 2; inplace++) {
            int64_t n = shapes[s][0], dim = shapes[s][1];
            float *x = rnd_vec(n * dim, -3, 3), *w = rnd_vec(dim, -2, 2);
            float eps = 1e-5f;
            float *dx = inplace ? dev_out((size_t)(n * dim) * sizeof(float)) : dev_dup(x, (size_t)(n * dim) * sizeof(float));
            if (inplace) cudaMemcpy(dx, x, (size_t)(n * dim) * sizeof(float), cudaMemcpyHostToDevice);
            float *dw = dev_dup(w, (size_t)dim * sizeof(float));
            float *dy = inplace ? dx : dev_out((size_t)(n * dim) * sizeof(float));
            void *args[] = {&dy, &dx, &dw, &n, &dim, &eps};
            launch(HONE_SLOT_RMSNORM, n, 1, args);
            float *gpu = xmalloc((size_t)(n * dim) * sizeof(float)), *cpu = xmalloc((size_t)(n * dim) * sizeof(float));
            double *ref = xmalloc((size_t)(n * dim) * sizeof(double));
            char what[64];
            snprintf(what, sizeof what, "rmsnorm %lldx%lld%s", (long long)n, (long long)dim, inplace ? " in place" : "");
            dev_take(dy, gpu, (size_t)(n * dim) * sizeof(float), what);
            if (!inplace) cudaFree(dx);
            cudaFree(dw);
            HONE_SLOTS_FN(&CPU, HONE_SLOT_RMSNORM, hone_slot_rmsnorm_fn)(cpu, x, w, n, dim, eps, 0, 1);
            hone_oracle_rmsnorm(ref, x, w, n, dim, eps);
            CHECK_MSG(!any_nan(gpu, n * dim), "%s: unwritten output", what);
            check_faithful(what, gpu, cpu, ref, n * dim, 2, 0);
            free(x); free(w); free(gpu); free(cpu); free(ref);
        }
}

static void test_rope(void)
{
    static const int64_t cfg[][4] = {/* n, heads, head_dim, n_rot */
                                     {1, 9, 64, 64}, {5, 3, 64, 64}, {64, 9, 64, 64}, {3, 4, 128, 64},
                                     {2, 2, 10, 6}, {1, 33, 64, 64}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++)
        for (int neox = 0; neox < 2; neox++) {
            int64_t n = cfg[c][0], heads = cfg[c][1], hd = cfg[c][2], rot = cfg[c][3], len = n * heads * hd;
            float *x = rnd_vec(len, -2, 2), *cpu = xmalloc((size_t)len * sizeof(float)), *gpu = xmalloc((size_t)len * sizeof(float));
            int32_t *pos = xmalloc((size_t)n * sizeof(int32_t));
            for (int64_t t = 0; t < n; t++) pos[t] = (int32_t)(t == 0 ? 0 : rnd_u64() % 8192);
            float base = neox ? 1000000.0f : 10000.0f;
            int32_t nx = neox;
            float *dx = dev_out((size_t)len * sizeof(float));
            cudaMemcpy(dx, x, (size_t)len * sizeof(float), cudaMemcpyHostToDevice);
            int32_t *dpos = dev_dup(pos, (size_t)n * sizeof(int32_t));
            void *args[] = {&dx, &dpos, &n, &heads, &hd, &rot, &base, &nx};
            launch(HONE_SLOT_ROPE, n * heads, 1, args);
            char what[64];
            snprintf(what, sizeof what, "rope n=%lld heads=%lld hd=%lld rot=%lld neox=%d", (long long)n,
                     (long long)heads, (long long)hd, (long long)rot, neox);
            dev_take(dx, gpu, (size_t)len * sizeof(float), what);
            cudaFree(dpos);
            memcpy(cpu, x, (size_t)len * sizeof(float));
            HONE_SLOTS_FN(&CPU, HONE_SLOT_ROPE, hone_slot_rope_fn)(cpu, pos, n, heads, hd, rot, base, neox, 0, 1);
            double *ref = xmalloc((size_t)len * sizeof(double));
            hone_oracle_rope(ref, x, pos, n, heads, hd, rot, base, neox);
            check_faithful(what, gpu, cpu, ref, len, 2, hd);
            free(x); free(cpu); free(gpu); free(pos); free(ref);
        }
}

static void test_swiglu_add(void)
{
    static const int64_t ns[] = {1, 255, 1536, 1000003};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int alias = 0; alias < 2; alias++) {
            int64_t n = ns[i];
            size_t bytes = (size_t)n * sizeof(float);
            float *g = rnd_vec(n, -20, 20), *u = rnd_vec(n, -3, 3);
            if (n > 3) { g[0] = -100.0f; g[1] = 100.0f; g[2] = 0.0f; }
            float *cpu = xmalloc(bytes), *gpu = xmalloc(bytes);
            double *ref = xmalloc((size_t)n * sizeof(double));
            char what[64];
            /* swiglu (alias: out == gate) */
            float *dg = dev_out(bytes), *du = dev_dup(u, bytes);
            cudaMemcpy(dg, g, bytes, cudaMemcpyHostToDevice);
            float *dout = alias ? dg : dev_out(bytes);
            void *args[] = {&dout, &dg, &du, &n};
            launch(HONE_SLOT_SWIGLU, n, 1, args);
            snprintf(what, sizeof what, "swiglu n=%lld%s", (long long)n, alias ? " out=gate" : "");
            dev_take(dout, gpu, bytes, what);
            if (!alias) dev_take(dg, NULL, bytes, what);
            HONE_SLOTS_FN(&CPU, HONE_SLOT_SWIGLU, hone_slot_swiglu_fn)(cpu, g, u, n, 0, 1);
            hone_oracle_swiglu(ref, g, u, n);
            check_faithful(what, gpu, cpu, ref, n, 2, 0);
            /* add (alias: y == a) */
            float *da = dev_out(bytes);
            cudaMemcpy(da, g, bytes, cudaMemcpyHostToDevice);
            float *dy = alias ? da : dev_out(bytes);
            void *args2[] = {&dy, &da, &du, &n};
            launch(HONE_SLOT_ADD, n, 1, args2);
            snprintf(what, sizeof what, "add n=%lld%s", (long long)n, alias ? " y=a" : "");
            dev_take(dy, gpu, bytes, what);
            if (!alias) dev_take(da, NULL, bytes, what);
            cudaFree(du);
            HONE_SLOTS_FN(&CPU, HONE_SLOT_ADD, hone_slot_add_fn)(cpu, g, u, n, 0, 1);
            CHECK_MSG(first_diff(gpu, cpu, n) < 0, "%s differs from the CPU", what);
            free(g); free(u); free(cpu); free(gpu); free(ref);
        }
}

/* ---- paged attention and kv_store ------------------------------------------------------ */

typedef struct {
    float *k, *v;  /* host pools, NaN outside the n_kv keys */
    int32_t *bt;
    int64_t n_blocks, floats;
} paged_kv;

static paged_kv make_cache(int64_t n_kv, int64_t bs, int64_t kvh, int64_t hd)
{
    paged_kv c;
    int64_t row = kvh * hd;
    c.n_blocks = (n_kv + bs - 1) / bs + 2;
    c.floats = c.n_blocks * bs * row;
    c.k = xmalloc((size_t)c.floats * sizeof(float));
    c.v = xmalloc((size_t)c.floats * sizeof(float));
    c.bt = xmalloc((size_t)c.n_blocks * sizeof(int32_t));
    for (int64_t b = 0; b < c.n_blocks; b++) c.bt[b] = (int32_t)b;
    for (int64_t b = c.n_blocks - 1; b > 0; b--) {
        int64_t o = (int64_t)(rnd_u64() % (uint64_t)(b + 1));
        int32_t t = c.bt[b]; c.bt[b] = c.bt[o]; c.bt[o] = t;
    }
    float nan;
    uint32_t nb = 0x7fedcba9u;
    memcpy(&nan, &nb, 4);
    for (int64_t i = 0; i < c.floats; i++) c.k[i] = c.v[i] = nan;
    for (int64_t j = 0; j < n_kv; j++)
        for (int64_t h = 0; h < kvh; h++) {
            int64_t off = hone_kv_offset(c.bt, j, bs, kvh, h, hd);
            for (int64_t i = 0; i < hd; i++) {
                c.k[off + i] = rnd_f(-1, 1);
                c.v[off + i] = rnd_f(-1, 1);
            }
        }
    return c;
}

static void test_attention(void)
{
    static const int64_t cfg[][5] = {/* heads, kv_heads, head_dim, block_size, n_kv */
                                     {9, 3, 64, 16, 1}, {9, 3, 64, 16, 77}, {9, 3, 64, 16, 600},
                                     {4, 2, 16, 16, 200}, {8, 8, 128, 32, 1000}, {2, 1, 40, 5, 33},
                                     {6, 2, 24, 7, 2100}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        int64_t heads = cfg[c][0], kvh = cfg[c][1], hd = cfg[c][2], bs = cfg[c][3], n_kv = cfg[c][4];
        int64_t qd = heads * hd;
        paged_kv kv = make_cache(n_kv, bs, kvh, hd);
        float scale = (float)(1.0 / sqrt((double)hd));
        float *dk = dev_dup(kv.k, (size_t)kv.floats * sizeof(float)), *dv = dev_dup(kv.v, (size_t)kv.floats * sizeof(float));
        int32_t *dbt = dev_dup(kv.bt, (size_t)kv.n_blocks * sizeof(int32_t));
        /* prefill of the last n queries, each row checked against decode */
        int64_t n = n_kv < 7 ? n_kv : 7, pos0 = n_kv - n, stride = n_kv + 3;
        float *q = rnd_vec(n * qd, -1, 1);
        float *dq = dev_dup(q, (size_t)(n * qd) * sizeof(float));
        float *dscr = dev_out((size_t)(n * heads * stride) * sizeof(float));
        float *dout = dev_out((size_t)(n * qd) * sizeof(float));
        void *pargs[] = {&dout, &dq, &dk, &dv, &dbt, &n, &pos0, &bs, &heads, &kvh, &hd, &scale, &dscr, &stride};
        launch(HONE_SLOT_ATTENTION_PREFILL, heads, n, pargs);
        float *pre = xmalloc((size_t)(n * qd) * sizeof(float));
        char what[128];
        snprintf(what, sizeof what, "attention_prefill heads=%lld/%lld hd=%lld bs=%lld n_kv=%lld", (long long)heads,
                 (long long)kvh, (long long)hd, (long long)bs, (long long)n_kv);
        dev_take(dout, pre, (size_t)(n * qd) * sizeof(float), what);
        dev_take(dscr, NULL, (size_t)(n * heads * stride) * sizeof(float), what);
        CHECK_MSG(!any_nan(pre, n * qd), "%s: NaN (unwritten, or a read past n_kv)", what);
        float *cpu = xmalloc((size_t)(n * qd) * sizeof(float)), *scr = xmalloc((size_t)stride * sizeof(float));
        double *ref = xmalloc((size_t)(n * qd) * sizeof(double));
        HONE_SLOTS_FN(&CPU, HONE_SLOT_ATTENTION_PREFILL, hone_slot_attention_prefill_fn)(cpu, q, kv.k, kv.v, kv.bt, n, pos0, bs, heads, kvh, hd, scale, scr, 0, 1);
        hone_oracle_attention_prefill(ref, q, kv.k, kv.v, kv.bt, n, pos0, bs, heads, kvh, hd, scale);
        int64_t same = check_faithful(what, pre, cpu, ref, n * qd, 4, hd);
        fprintf(stderr, "  %s: %lld of %lld bitwise equal to the CPU\n", what, (long long)same, (long long)(n * qd));
        for (int64_t t = 0; t < n; t++) {
            int32_t nkv = (int32_t)(pos0 + t + 1);
            int32_t *dnkv = dev_dup(&nkv, sizeof nkv);
            float *dqt = dq + t * qd, *dsc = dev_out((size_t)(heads * stride) * sizeof(float));
            float *dec_out = dev_out((size_t)qd * sizeof(float));
            void *dargs[] = {&dec_out, &dqt, &dk, &dv, &dbt, &dnkv, &bs, &heads, &kvh, &hd, &scale, &dsc, &stride};
            launch(HONE_SLOT_ATTENTION_DECODE, heads, 1, dargs);
            float *dec = xmalloc((size_t)qd * sizeof(float));
            dev_take(dec_out, dec, (size_t)qd * sizeof(float), "attention_decode");
            dev_take(dsc, NULL, (size_t)(heads * stride) * sizeof(float), "attention_decode scratch");
            CHECK_MSG(first_diff(dec, pre + t * qd, qd) < 0, "%s: prefill row %lld != decode with n_kv=%d", what,
                      (long long)t, nkv);
            cudaFree(dnkv);
            free(dec);
        }
        cudaFree(dk); cudaFree(dv); cudaFree(dbt); cudaFree(dq);
        free(q); free(pre); free(cpu); free(scr); free(ref);
        free(kv.k); free(kv.v); free(kv.bt);
    }
}

static void test_kv_store(void)
{
    int64_t bs = 16, kvh = 3, hd = 64, row = kvh * hd, n = 5, n_kv = 40;
    paged_kv kv = make_cache(n_kv, bs, kvh, hd);
    int64_t pos0 = n_kv - n;
    float *k = rnd_vec(n * row, -1, 1), *v = rnd_vec(n * row, -1, 1);
    int32_t pos[5];
    for (int t = 0; t < n; t++) pos[t] = (int32_t)(pos0 + t);
    size_t pool = (size_t)kv.floats * sizeof(float);
    float *dkc = dev_out(pool), *dvc = dev_out(pool);
    cudaMemcpy(dkc, kv.k, pool, cudaMemcpyHostToDevice);
    cudaMemcpy(dvc, kv.v, pool, cudaMemcpyHostToDevice);
    float *dk = dev_dup(k, (size_t)(n * row) * sizeof(float)), *dv = dev_dup(v, (size_t)(n * row) * sizeof(float));
    int32_t *dbt = dev_dup(kv.bt, (size_t)kv.n_blocks * sizeof(int32_t)), *dpos = dev_dup(pos, sizeof pos);
    void *args[] = {&dkc, &dvc, &dk, &dv, &dbt, &dpos, &n, &bs, &kvh, &hd};
    launch(HONE_CUDA_KV_STORE, row, n, args);
    float *gk = xmalloc(pool), *gv = xmalloc(pool);
    dev_take(dkc, gk, pool, "kv_store k");
    dev_take(dvc, gv, pool, "kv_store v");
    for (int64_t t = 0; t < n; t++)
        for (int64_t h = 0; h < kvh; h++) { /* the CPU engine's store_kv (engine/forward.c) */
            int64_t off = hone_kv_offset(kv.bt, pos[t], bs, kvh, h, hd);
            memcpy(kv.k + off, k + t * row + h * hd, (size_t)hd * sizeof(float));
            memcpy(kv.v + off, v + t * row + h * hd, (size_t)hd * sizeof(float));
        }
    CHECK(memcmp(gk, kv.k, pool) == 0);
    CHECK(memcmp(gv, kv.v, pool) == 0);
    cudaFree(dk); cudaFree(dv); cudaFree(dbt); cudaFree(dpos);
    free(k); free(v); free(gk); free(gv); free(kv.k); free(kv.v); free(kv.bt);
}

int main(int argc, char **argv)
{
    int n_dev = 0;
    char why[256];
    hone_cuda_probe(&n_dev, why, sizeof why);
    if (n_dev <= 0) {
        fprintf(stderr, "skipped: no GPU (%s)\n", why);
        return 77;
    }
    hone_cuda_device dev;
    die_cuda(hone_cuda_device_get(&dev, 0), "device");
    die_cuda(HONE_CUDART(cudaSetDevice(0)), "cudaSetDevice");
    die_cuda(hone_cuda_kernels_new(&KS, dev.sm, NULL), "kernels");
    fprintf(stderr, "device: %s (sm_%d), %d of %d kernels from the cubin cache\n", dev.name, dev.sm,
            hone_cuda_kernels_n_cached(KS), HONE_CUDA_KERNEL_COUNT);
    hone_slots_cpu_baseline(&CPU);
    static const harness_case cases[] = {
        TEST_CASE(test_matvec_matmul), TEST_CASE(test_matvec_matmul_more), TEST_CASE(test_embed),
        TEST_CASE(test_embed_more), TEST_CASE(test_rmsnorm),
        TEST_CASE(test_rope), TEST_CASE(test_swiglu_add), TEST_CASE(test_attention),
        TEST_CASE(test_kv_store)};
    int rc = harness_run(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
    hone_cuda_kernels_free(KS);
    return rc;
}
#endif
