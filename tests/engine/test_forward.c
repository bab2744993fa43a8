/* Forward pass: the promises that make parity testing possible — prefill in any chunk size,
 * token-by-token decode, any thread count and any set of wanted rows give bitwise-identical
 * logits — plus the errors for a full context, a full KV cache and bad token ids, and SmolLM2
 * answering. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "harness.h"

#define N_TOK 21

static const int32_t prompt[N_TOK] = {1, 17, 300, 411, 65, 123, 400, 289, 5, 1000, 77,
                                      2047, 3, 512, 640, 12, 99, 1500, 256, 257, 18};

static char *model_path(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", HONE_TEST_DATA_DIR, name);
    return buf;
}

/* A context of threads and chunk and a zeroed buffer for every position's logits; NULL when
 * the context cannot be made. */
static float *new_run(const hone_model *m, int threads, int64_t chunk, hone_ctx **ctx)
{
    hone_ctx_opts o = HONE_CTX_OPTS_INIT;
    o.n_threads = threads;
    o.chunk = chunk;
    o.n_ctx = 64;
    float *out = calloc((size_t)(N_TOK * hone_model_hparams(m)->n_vocab), sizeof *out);
    if (!out || hone_ctx_new(ctx, m, &o)) {
        fprintf(stderr, "%s\n", hone_error_last());
        free(out);
        return NULL;
    }
    return out;
}

/* Logits of every position of prompt, computed with the given options: chunked prefill
 * (decode_from < 0) or prefill of the first decode_from tokens then one token at a time. */
static float *run(const hone_model *m, int threads, int64_t chunk, int decode_from)
{
    hone_ctx *ctx = NULL;
    hone_kv_seq seq = {0};
    int64_t nv = hone_model_hparams(m)->n_vocab;
    float *out = new_run(m, threads, chunk, &ctx);
    if (!out) return NULL;
    int rc;
    int32_t ids[N_TOK]; /* the prompt within the vocabulary (the SentencePiece models have 512) */
    for (int t = 0; t < N_TOK; t++) ids[t] = (int32_t)(prompt[t] % nv);
    if (decode_from < 0) {
        rc = hone_ctx_forward(ctx, &seq, ids, N_TOK, out, 1);
    } else {
        rc = hone_ctx_forward(ctx, &seq, ids, decode_from, out, 1);
        for (int t = decode_from; t < N_TOK && !rc; t++)
            rc = hone_ctx_forward(ctx, &seq, &ids[t], 1, out + t * nv, 0);
    }
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(seq.n_tokens, N_TOK);
    hone_kv_cache_release(hone_ctx_kv(ctx), &seq);
    CHECK_EQ_INT(hone_kv_cache_n_free(hone_ctx_kv(ctx)), hone_kv_cache_n_blocks(hone_ctx_kv(ctx)));
    hone_ctx_free(ctx);
    return out;
}

/* Positions whose logits the sparse run asks for: every third, so a chunk's wanted rows are
 * scattered (the last layer runs past its attention only for them: cpu_prune). */
static int sparse_wanted(int t) { return t % 3 == 1; }

/* The prompt's first N_TOK - 3 positions in one batch asking for the logits of the
 * sparse_wanted rows only (chunk rows a piece), then the last 3 decoded one at a time, which
 * read the K/V that the skipped rows stored. Rows not asked for stay zero. */
static float *run_sparse(const hone_model *m, int threads, int64_t chunk)
{
    hone_ctx *ctx = NULL;
    hone_kv_seq seq = {0};
    int64_t nv = hone_model_hparams(m)->n_vocab;
    float *out = new_run(m, threads, chunk, &ctx);
    if (!out) return NULL;
    int32_t ids[N_TOK], pos[N_TOK];
    hone_kv_seq *seqs[N_TOK];
    float *rows[N_TOK];
    const int P = N_TOK - 3;
    for (int t = 0; t < N_TOK; t++) {
        ids[t] = (int32_t)(prompt[t] % nv);
        pos[t] = t;
        seqs[t] = &seq;
        rows[t] = sparse_wanted(t) ? out + t * nv : NULL;
    }
    hone_batch b = {P, ids, seqs, pos, rows, NULL};
    int rc = hone_ctx_forward_batch(ctx, &b);
    for (int t = P; t < N_TOK && !rc; t++) rc = hone_ctx_forward(ctx, &seq, &ids[t], 1, out + t * nv, 0);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(seq.n_tokens, N_TOK);
    hone_kv_cache_release(hone_ctx_kv(ctx), &seq);
    hone_ctx_free(ctx);
    return out;
}

/* run_sparse's rows against the reference: the wanted and decoded rows bitwise equal, the rest
 * untouched (zero). */
static void check_sparse(const char *name, const float *ref, const float *sp, int64_t nv, const char *what)
{
    CHECK_MSG(ref && sp, "%s: %s did not run", name, what);
    if (!ref || !sp) return;
    for (int t = 0; t < N_TOK; t++) {
        const float *r = sp + t * nv;
        if (sparse_wanted(t) || t >= N_TOK - 3) {
            CHECK_MSG(memcmp(r, ref + t * nv, (size_t)nv * sizeof(float)) == 0,
                      "%s: %s, position %d differs from the all-rows prefill", name, what, t);
        } else {
            int zero = 1;
            for (int64_t i = 0; i < nv; i++) zero &= r[i] == 0.0f;
            CHECK_MSG(zero, "%s: %s, position %d was not asked for but written", name, what, t);
        }
    }
}

static void check_invariance(const char *name)
{
    hone_model *m = NULL;
    if (hone_model_load(&m, model_path(name))) {
        CHECK_MSG(0, "load %s: %s", name, hone_error_last());
        return;
    }
    int64_t nv = hone_model_hparams(m)->n_vocab;
    size_t bytes = (size_t)(N_TOK * nv) * sizeof(float);
    float *ref = run(m, 1, 64, -1);
    float *variants[] = {run(m, 2, 64, -1), run(m, 3, 64, -1), run(m, 2, 4, -1), run(m, 2, 1, -1),
                         run(m, 1, 7, 5), run(m, 2, 64, 1)};
    const char *what[] = {"2 threads", "3 threads", "chunk 4", "chunk 1", "decode from 5",
                          "decode from 1"};
    int finite = 1;
    for (int64_t i = 0; ref && i < N_TOK * nv; i++) finite &= isfinite(ref[i]) != 0;
    CHECK_MSG(ref && finite, "%s: logits not finite", name);
    for (int v = 0; v < 6; v++) {
        CHECK_MSG(ref && variants[v] && memcmp(ref, variants[v], bytes) == 0,
                  "%s: %s differs from 1 thread, one chunk", name, what[v]);
        free(variants[v]);
    }
    float *sparse[] = {run_sparse(m, 1, 64), run_sparse(m, 2, 64), run_sparse(m, 2, 4)};
    const char *swhat[] = {"sparse rows, 1 thread", "sparse rows, 2 threads", "sparse rows, chunk 4"};
    for (int v = 0; v < 3; v++) {
        check_sparse(name, ref, sparse[v], nv, swhat[v]);
        free(sparse[v]);
    }
    free(ref);
    hone_model_free(m);
}

static void test_bitwise_invariance(void)
{
    const char *models[] = {"tiny-llama-f32.gguf", "tiny-llama-f16.gguf", "tiny-llama-bf16.gguf",
                            "tiny-llama-q8_0.gguf", "tiny-llama-q4_0.gguf", "tiny-llama-q4_1.gguf",
                            "tiny-qwen2-f32.gguf", "tiny-llama-mha-tied-f32.gguf",
                            /* the further formats (random valid blocks; K formats 256 wide) */
                            "tiny-llama-q5_0.gguf", "tiny-llama-q5_1.gguf", "tiny-llama-q4_k.gguf",
                            "tiny-llama-q5_k.gguf", "tiny-llama-q6_k.gguf", "tiny-llama-q3_k.gguf",
                            "tiny-llama-q2_k.gguf", "tiny-llama-mxfp4.gguf",
                            /* the architecture variants; 21 tokens pass every sliding window */
                            "tiny-gemma3-f32.gguf", "tiny-gemma3-q8_0.gguf", "tiny-qwen3-f32.gguf",
                            "tiny-mistral-swa-f32.gguf", "tiny-llama3-f32.gguf"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) check_invariance(models[i]);
}

static void test_errors(void)
{
    hone_model *m = NULL;
    hone_ctx *ctx = NULL;
    hone_kv_seq seq = {0};
    if (hone_model_load(&m, model_path("tiny-llama-f32.gguf"))) {
        CHECK_MSG(0, "%s", hone_error_last());
        return;
    }
    hone_ctx_opts o = HONE_CTX_OPTS_INIT;
    o.n_ctx = 16;
    o.kv_block_size = 4;
    o.kv_blocks = 3; /* 12 tokens of cache for a 16-token context */
    CHECK_EQ_INT(hone_ctx_new(&ctx, m, &o), 0);
    int32_t bad = (int32_t)hone_model_hparams(m)->n_vocab;
    CHECK_EQ_INT(hone_ctx_forward(ctx, &seq, &bad, 1, NULL, 0), HONE_EINVAL);
    CHECK_STR_CONTAINS(hone_error_last(), "out of range");
    CHECK_EQ_INT(seq.n_tokens, 0);
    CHECK_EQ_INT(hone_ctx_forward(ctx, &seq, prompt, 13, NULL, 0), HONE_ERANGE);
    CHECK_STR_CONTAINS(hone_error_last(), "KV cache full");
    CHECK_EQ_INT(seq.n_tokens, 0);
    CHECK_EQ_INT(hone_kv_cache_n_free(hone_ctx_kv(ctx)), 3);
    CHECK_EQ_INT(hone_ctx_forward(ctx, &seq, prompt, 12, NULL, 0), 0);
    CHECK_EQ_INT(hone_ctx_forward(ctx, &seq, prompt, 5, NULL, 0), HONE_ERANGE);
    CHECK_STR_CONTAINS(hone_error_last(), "context full");
    CHECK_EQ_INT(seq.n_tokens, 12);
    CHECK_EQ_INT(hone_ctx_forward(ctx, &seq, prompt, 0, NULL, 0), HONE_EINVAL);
    hone_kv_cache_release(hone_ctx_kv(ctx), &seq);
    CHECK_EQ_INT(hone_kv_cache_n_free(hone_ctx_kv(ctx)), 3);
    hone_ctx_free(ctx);
    hone_model_free(m);
}

/* SmolLM2 (the real model): greedy "The capital of France is" continues with " Paris". */
static void test_smollm2_paris(void)
{
    const char *path = harness_smollm2();
    if (!path) {
        SKIP_CASE("SmolLM2 not installed");
        return;
    }
    hone_model *m = NULL;
    hone_tokenizer *tok = NULL;
    hone_ctx *ctx = NULL;
    hone_kv_seq seq = {0};
    int32_t *ids = NULL;
    int64_t n = 0;
    const char *text = "The capital of France is";
    CHECK_EQ_INT(hone_model_load(&m, path), 0);
    CHECK_EQ_INT(hone_tokenizer_new(&tok, hone_model_gguf(m)), 0);
    CHECK_EQ_INT(hone_tokenizer_encode(tok, text, strlen(text), -1, 0, &ids, &n), 0);
    hone_ctx_opts o = HONE_CTX_OPTS_INIT;
    o.n_ctx = 64;
    CHECK_EQ_INT(hone_ctx_new(&ctx, m, &o), 0);
    int64_t nv = hone_model_hparams(m)->n_vocab;
    float *logits = malloc((size_t)nv * sizeof *logits);
    int32_t out[8];
    CHECK_EQ_INT(hone_ctx_forward(ctx, &seq, ids, n, logits, 0), 0);
    for (int i = 0; i < 8; i++) {
        int32_t best = 0;
        for (int64_t k = 1; k < nv; k++)
            if (logits[k] > logits[best]) best = (int32_t)k;
        out[i] = best;
        CHECK_EQ_INT(hone_ctx_forward(ctx, &seq, &best, 1, logits, 0), 0);
    }
    char *s = NULL;
    size_t len = 0;
    CHECK_EQ_INT(hone_tokenizer_decode(tok, out, 8, 0, &s, &len), 0);
    CHECK_STR_CONTAINS(s, "Paris");
    fprintf(stderr, "SmolLM2: \"%s%s\"\n", text, s ? s : "");
    free(s);
    free(logits);
    free(ids);
    hone_kv_cache_release(hone_ctx_kv(ctx), &seq);
    hone_ctx_free(ctx);
    hone_tokenizer_free(tok);
    hone_model_free(m);
}

/* Logits of a 12-token prompt on m (new context each time). */
static void prompt_logits(const hone_model *m, float *logits)
{
    hone_ctx *ctx = NULL;
    hone_kv_seq seq = {0};
    hone_ctx_opts o = HONE_CTX_OPTS_INIT;
    o.n_ctx = 32;
    int32_t ids[12];
    for (int i = 0; i < 12; i++) ids[i] = 100 + 37 * i;
    CHECK_EQ_INT(hone_ctx_new(&ctx, m, &o), 0);
    if (!ctx) return;
    CHECK_EQ_INT(hone_ctx_forward(ctx, &seq, ids, 12, logits, 0), 0);
    hone_kv_cache_release(hone_ctx_kv(ctx), &seq);
    hone_ctx_free(ctx);
}

/* The first CPU context moves SmolLM2's weights into huge pages (where the kernel has THP);
 * the logits are bitwise those computed from the file mapping (HONE_HUGEPAGES=0). */
static void test_resident_weights_same_bits(void)
{
    const char *path = harness_smollm2();
    if (!path) {
        SKIP_CASE("SmolLM2 not installed");
        return;
    }
    char thp[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
        if (!fgets(thp, sizeof thp, f)) thp[0] = 0;
        fclose(f);
    }
    int have_thp = thp[0] && !strstr(thp, "[never]");
    hone_model *a = NULL, *b = NULL;
    CHECK_EQ_INT(hone_model_load(&a, path), 0);
    CHECK_EQ_INT(hone_model_load(&b, path), 0);
    if (!a || !b) return;
    CHECK_STR_CONTAINS(hone_model_weight_memory(a), "file mapping");
    int64_t nv = hone_model_hparams(a)->n_vocab;
    float *la = malloc((size_t)nv * sizeof *la), *lb = malloc((size_t)nv * sizeof *lb);
    const void *before = hone_model_layer(a, 0)->wq.data;
    prompt_logits(a, la);
    CHECK_STR_CONTAINS(hone_model_weight_memory(a), have_thp ? "anonymous huge pages" : "file mapping");
    CHECK(have_thp ? hone_model_layer(a, 0)->wq.data != before : hone_model_layer(a, 0)->wq.data == before);
    CHECK_STR_CONTAINS(hone_model_make_resident(a), have_thp ? "anonymous huge pages" : "file mapping");
    setenv("HONE_HUGEPAGES", "0", 1);
    prompt_logits(b, lb);
    unsetenv("HONE_HUGEPAGES");
    CHECK_STR_CONTAINS(hone_model_weight_memory(b), "file mapping");
    CHECK(memcmp(la, lb, (size_t)nv * sizeof *la) == 0);
    free(la);
    free(lb);
    hone_model_free(a);
    hone_model_free(b);
}

/* Continuous batching: three sequences at different stages share batches (a prefill chunk of
 * one beside decode steps of others); every row's logits equal the sequence run alone. */
static void test_batch_equals_alone(void)
{
    hone_model *m = NULL;
    if (hone_model_load(&m, model_path("tiny-llama-q4_1.gguf"))) {
        CHECK_MSG(0, "%s", hone_error_last());
        return;
    }
    int64_t nv = hone_model_hparams(m)->n_vocab;
    size_t row_bytes = (size_t)nv * sizeof(float);
    float *alone = run(m, 2, 64, -1); /* all positions of prompt, one sequence */
    hone_ctx_opts o = HONE_CTX_OPTS_INIT;
    o.n_threads = 2;
    o.chunk = 8;          /* batches larger than a chunk are split */
    o.n_ctx = 64;
    o.kv_block_size = 4;
    o.kv_blocks = 64;
    hone_ctx *ctx = NULL;
    CHECK_EQ_INT(hone_ctx_new(&ctx, m, &o), 0);
    hone_kv_seq s[3] = {{0}};
    float *out = calloc((size_t)(3 * N_TOK * nv), sizeof *out);
    /* schedule: seq 0 starts with a 9-token prefill, seq 1 with 4, seq 2 with 1; then every
     * step each sequence that still has tokens feeds one (or 3 for seq 2) */
    int fed[3] = {0, 0, 0};
    int first[3] = {9, 4, 1}, step[3] = {1, 1, 3};
    int32_t tokens[64], pos[64];
    hone_kv_seq *seqs[64];
    float *rows[64];
    for (int it = 0; it < 40; it++) {
        int64_t n = 0;
        for (int q = 0; q < 3; q++) {
            int k = it == 0 ? first[q] : step[q];
            for (int j = 0; j < k && fed[q] < N_TOK; j++, fed[q]++, n++) {
                tokens[n] = prompt[fed[q]];
                pos[n] = fed[q];
                seqs[n] = &s[q];
                rows[n] = out + ((int64_t)q * N_TOK + fed[q]) * nv;
            }
        }
        if (!n) break;
        hone_batch b = {n, tokens, seqs, pos, rows, NULL};
        CHECK_EQ_INT(hone_ctx_forward_batch(ctx, &b), 0);
    }
    for (int q = 0; q < 3; q++) {
        CHECK_EQ_INT(s[q].n_tokens, N_TOK);
        for (int t = 0; t < N_TOK; t++)
            CHECK_MSG(alone && memcmp(out + ((int64_t)q * N_TOK + t) * nv, alone + (int64_t)t * nv, row_bytes) == 0,
                      "sequence %d position %d differs from running alone", q, t);
        hone_kv_cache_release(hone_ctx_kv(ctx), &s[q]);
    }
    /* a bad position is refused and changes nothing */
    hone_kv_seq z = {0};
    hone_kv_seq *zs[1] = {&z};
    int32_t zpos[1] = {3};
    hone_batch bad = {1, prompt, zs, zpos, NULL, NULL};
    CHECK_EQ_INT(hone_ctx_forward_batch(ctx, &bad), HONE_EINVAL);
    CHECK_STR_CONTAINS(hone_error_last(), "expected 0");
    CHECK_EQ_INT(z.n_tokens, 0);
    CHECK_EQ_INT(hone_kv_cache_n_free(hone_ctx_kv(ctx)), 64);
    free(out);
    free(alone);
    hone_ctx_free(ctx);
    hone_model_free(m);
}

TEST_MAIN(TEST_CASE(test_bitwise_invariance), TEST_CASE(test_errors), TEST_CASE(test_batch_equals_alone),
          TEST_CASE(test_smollm2_paris), TEST_CASE(test_resident_weights_same_bits))
