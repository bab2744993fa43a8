/* Speculative decoding: the positional draw, prompt lookup, exact mode's promise (the tokens of
 * plain decoding, each decided from bitwise the same logits, greedy and sampled, on tiny models
 * and SmolLM2, with lookup and draft-model drafts, fixed and adaptive draft lengths), the KV
 * rollback (the sequence holds exactly the emitted tokens, blocks return to the pool), and
 * distribution mode's output distribution (a chi-square test against the target's). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/error.h"
#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/spec.h"
#include "engine/tokenizer.h"
#include "harness.h"

static char *model_path(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", HONE_TEST_DATA_DIR, name);
    return buf;
}

static hone_backend *open_backend(hone_model *m)
{
    hone_ctx_opts o = HONE_CTX_OPTS_INIT;
    o.n_threads = 2;
    o.n_ctx = 256;
    hone_backend *be = NULL;
    if (hone_backend_new(&be, m, HONE_DEVICE_CPU, &o)) {
        CHECK_MSG(0, "backend: %s", hone_error_last());
        return NULL;
    }
    return be;
}

static void test_uniform_at(void)
{
    /* a fixed function of (seed, pos, stream): the same whatever came before */
    double a = hone_sampler_uniform_at(7, 12, 0);
    for (int i = 0; i < 5; i++) (void)hone_sampler_uniform_at(7, i, 0);
    CHECK(a == hone_sampler_uniform_at(7, 12, 0));
    CHECK(a != hone_sampler_uniform_at(8, 12, 0));
    CHECK(a != hone_sampler_uniform_at(7, 13, 0));
    CHECK(a != hone_sampler_uniform_at(7, 12, 1));
    /* uniform: mean 1/2, variance 1/12, ten bins about equal */
    enum { N = 100000 };
    int bins[10] = {0};
    double sum = 0, sq = 0;
    for (int64_t p = 0; p < N; p++) {
        double u = hone_sampler_uniform_at(99, p, 0);
        CHECK_MSG(u >= 0.0 && u < 1.0, "u = %g", u);
        sum += u;
        sq += u * u;
        bins[(int)(u * 10)]++;
    }
    CHECK_NEAR(sum / N, 0.5, 0.005);
    CHECK_NEAR(sq / N - (sum / N) * (sum / N), 1.0 / 12, 0.002);
    double chi = 0;
    for (int b = 0; b < 10; b++) chi += (bins[b] - N / 10.0) * (bins[b] - N / 10.0) / (N / 10.0);
    CHECK_MSG(chi < 27.9, "chi-square %g over 9 df (p = 0.001 at 27.9)", chi); /* 9 df */
}

static void test_sample_at(void)
{
    enum { N = 8, DRAWS = 40000 };
    float l[N] = {1.0f, 2.0f, 0.5f, 3.0f, -1.0f, 0.0f, 2.5f, 1.5f};
    hone_sampler_params p = HONE_SAMPLER_PARAMS_INIT;
    p.seed = 5;
    p.temperature = 0.8f;
    hone_sampler *a = NULL, *b = NULL;
    CHECK_EQ_INT(hone_sampler_new(&a, &p, N), 0);
    CHECK_EQ_INT(hone_sampler_new(&b, &p, N), 0);
    /* order-independent: b draws positions backwards */
    int32_t fwd[64];
    for (int i = 0; i < 64; i++) fwd[i] = hone_sampler_sample_at(a, l, i);
    int same = 1;
    for (int i = 63; i >= 0; i--) same &= hone_sampler_sample_at(b, l, i) == fwd[i];
    CHECK(same);
    /* sample_u with the stream's uniform is the stream sampler */
    CHECK_EQ_INT(hone_sampler_sample_u(a, l, hone_sampler_uniform_at(5, 3, 0)), fwd[3]);
    /* frequencies over positions match hone_sampler_probs */
    double probs[N], want[N];
    CHECK_EQ_INT(hone_sampler_probs(a, l, probs), 0);
    double z = 0;
    for (int i = 0; i < N; i++) z += (want[i] = exp(((double)l[i] - 3.0) / (double)0.8f));
    int counts[N] = {0};
    for (int i = 0; i < DRAWS; i++) counts[hone_sampler_sample_at(a, l, 1000 + i)]++;
    double chi = 0;
    for (int i = 0; i < N; i++) {
        CHECK_NEAR(probs[i], want[i] / z, 1e-9);
        double e = probs[i] * DRAWS;
        chi += (counts[i] - e) * (counts[i] - e) / e;
    }
    CHECK_MSG(chi < 24.3, "chi-square %g over 7 df", chi);
    /* greedy: one-hot at the argmax, and the draw does not matter */
    hone_sampler_free(a);
    p.temperature = 0.0f;
    CHECK_EQ_INT(hone_sampler_new(&a, &p, N), 0);
    CHECK_EQ_INT(hone_sampler_probs(a, l, probs), 0);
    CHECK(probs[3] == 1.0 && probs[0] == 0.0);
    CHECK_EQ_INT(hone_sampler_sample_at(a, l, 17), 3);
    hone_sampler_free(a);
    hone_sampler_free(b);
}

static void test_lookup(void)
{
    int32_t out[8];
    const int32_t h[] = {5, 6, 7, 8, 5, 6};
    CHECK_EQ_INT(hone_spec_lookup(h, 6, 2, 4, 8, out), 4);
    CHECK(out[0] == 7 && out[1] == 8 && out[2] == 5 && out[3] == 6);
    CHECK_EQ_INT(hone_spec_lookup(h, 6, 2, 4, 2, out), 2); /* k caps it */
    CHECK_EQ_INT(hone_spec_lookup(h, 6, 3, 4, 8, out), 0); /* "8 5 6" never occurred before */
    /* the longest suffix wins over a more recent shorter one: "1 2 3" -> 9, "2 3" alone -> 4 */
    const int32_t g[] = {1, 2, 3, 9, 9, 2, 3, 4, 1, 2, 3};
    CHECK_EQ_INT(hone_spec_lookup(g, 11, 2, 3, 1, out), 1);
    CHECK_EQ_INT(out[0], 9);
    CHECK_EQ_INT(hone_spec_lookup(g, 11, 2, 2, 1, out), 1);
    CHECK_EQ_INT(out[0], 4);
    CHECK_EQ_INT(hone_spec_lookup(g, 1, 1, 3, 4, out), 0);
}

/* Plain decoding, the reference: one token per forward, decided by the position's draw. */
static int plain(hone_backend *be, const hone_sampler_params *sp, const int32_t *prompt, int64_t n,
                 int64_t steps, int32_t *toks, float *rows)
{
    int64_t nv = hone_backend_n_vocab(be);
    hone_sampler *s = NULL;
    hone_kv_seq seq = {0};
    float *l = malloc((size_t)nv * sizeof *l);
    int rc = hone_sampler_new(&s, sp, (int32_t)nv);
    if (!rc) rc = hone_backend_forward(be, &seq, prompt, n, l, 0);
    for (int64_t i = 0; !rc && i < steps; i++) {
        memcpy(rows + i * nv, l, (size_t)nv * sizeof *l);
        toks[i] = hone_sampler_sample_at(s, l, n + i);
        hone_sampler_accept(s, toks[i]);
        if (i + 1 < steps) rc = hone_backend_forward(be, &seq, &toks[i], 1, l, 0);
    }
    hone_backend_release(be, &seq);
    hone_sampler_free(s);
    free(l);
    return rc;
}

/* The same through hone_spec; returns the stats. */
static hone_spec_stats speculative(hone_backend *be, const hone_spec_opts *so, const hone_sampler_params *sp,
                                   const int32_t *prompt, int64_t n, int64_t steps, int32_t *toks,
                                   float *rows)
{
    int64_t nv = hone_backend_n_vocab(be);
    hone_sampler *s = NULL;
    hone_spec *spec = NULL;
    hone_kv_seq seq = {0};
    hone_spec_stats st = {0};
    int32_t buf[65];
    int64_t got = 0, done = 0;
    int64_t free0 = hone_kv_cache_n_free(hone_backend_kv(be));
    CHECK_EQ_INT(hone_sampler_new(&s, sp, (int32_t)nv), 0);
    CHECK_EQ_INT(hone_spec_new(&spec, so, be, s, &seq), 0);
    int rc = hone_spec_start(spec, prompt, n, buf, &got);
    for (;;) {
        CHECK_MSG(rc == 0, "spec: %s", hone_error_last());
        if (rc) break;
        for (int64_t j = 0; j < got && done < steps; j++, done++) {
            toks[done] = buf[j];
            memcpy(rows + done * nv, hone_spec_logits(spec, j), (size_t)nv * sizeof(float));
        }
        if (done >= steps) break;
        /* the sequence holds every emitted token but the last */
        CHECK_EQ_INT(seq.n_tokens, n + done - 1);
        rc = hone_spec_step(spec, steps - done, buf, &got);
        CHECK(got >= 1 && got <= so->k_max + 1);
    }
    st = hone_spec_get_stats(spec);
    hone_spec_free(spec);
    hone_backend_release(be, &seq);
    CHECK_EQ_INT(hone_kv_cache_n_free(hone_backend_kv(be)), free0);
    hone_sampler_free(s);
    return st;
}

/* Exact mode on model `name` (draft: a draft model or NULL for lookup): several prompts,
 * greedy and seeded sampling, fixed and adaptive k: tokens and logits rows equal plain's.
 * cfgs: a bit mask of the configurations below (bits 0-3) and prompts (bits 4-5; CFG_ALL: all). */
#define CFG_ALL 0x3Fu
#define CFG_PROMPT(i) (1u << (4 + (i)))
static void check_exact_cfgs(const char *path, const char *draft_path, int self_layers, int64_t steps,
                             unsigned cfgs, int64_t *accepted_out)
{
    hone_model *m = NULL, *dm = NULL;
    if (hone_model_load(&m, path)) {
        CHECK_MSG(0, "load %s: %s", path, hone_error_last());
        return;
    }
    hone_backend *be = open_backend(m), *dbe = NULL;
    if (draft_path) {
        CHECK_EQ_INT(hone_model_load(&dm, draft_path), 0);
        dbe = open_backend(dm);
    }
    int64_t nv = hone_backend_n_vocab(be);
    float *ra = malloc((size_t)(steps * nv) * sizeof *ra), *rb = malloc((size_t)(steps * nv) * sizeof *rb);
    int32_t *ta = malloc((size_t)steps * sizeof *ta), *tb = malloc((size_t)steps * sizeof *tb);
    /* a repetitive prompt (lookup drafts from the start) and a plain one */
    int32_t p1[24], p2[7] = {1, 17, 300, 411, 65, 123, 400};
    for (int i = 0; i < 24; i++) p1[i] = (int32_t)(10 + (i % 6) * 37);
    const int32_t *prompts[2] = {p1, p2};
    int64_t lens[2] = {24, 7};
    int64_t accepted = 0;
    for (int pi = 0; pi < 2; pi++)
        for (int cfg = 0; cfg < 4; cfg++) {
            if (!(cfgs >> cfg & 1) || !(cfgs & CFG_PROMPT(pi))) continue;
            hone_sampler_params sp = HONE_SAMPLER_PARAMS_INIT;
            sp.temperature = cfg < 2 ? 0.0f : 0.7f; /* greedy, then sampled (top-k 40, seeded) */
            sp.top_k = cfg < 2 ? 0 : 40;
            sp.seed = 1000 + (uint64_t)(pi * 4 + cfg);
            if (cfg == 3) sp.repeat_penalty = 1.3f;
            hone_spec_opts so = HONE_SPEC_OPTS_INIT;
            so.kind = dbe ? HONE_SPEC_DRAFT : self_layers ? HONE_SPEC_SELF : HONE_SPEC_LOOKUP;
            so.draft = dbe;
            so.self_layers = self_layers < 0 ? 0 : self_layers; /* < 0: chosen by measurement */
            so.k_max = cfg % 2 ? 3 : 6;
            so.ngram_min = 1;
            so.adaptive = cfg % 2; /* fixed k drafts whenever it can */
            CHECK_EQ_INT(plain(be, &sp, prompts[pi], lens[pi], steps, ta, ra), 0);
            hone_spec_stats st = speculative(be, &so, &sp, prompts[pi], lens[pi], steps, tb, rb);
            CHECK_MSG(memcmp(ta, tb, (size_t)steps * sizeof *ta) == 0, "%s prompt %d config %d: tokens differ",
                      path, pi, cfg);
            CHECK_MSG(memcmp(ra, rb, (size_t)(steps * nv) * sizeof *ra) == 0,
                      "%s prompt %d config %d: logits differ", path, pi, cfg);
            CHECK(st.emitted >= st.passes && st.accepted <= st.drafted);
            CHECK_EQ_INT(st.emitted, st.passes + st.accepted);
            accepted += st.accepted;
        }
    *accepted_out = accepted;
    free(ra);
    free(rb);
    free(ta);
    free(tb);
    hone_backend_free(dbe);
    hone_model_free(dm);
    hone_backend_free(be);
    hone_model_free(m);
}

static void check_exact(const char *path, const char *draft_path, int self_layers, int64_t steps,
                        int64_t *accepted_out)
{
    check_exact_cfgs(path, draft_path, self_layers, steps, CFG_ALL, accepted_out);
}

static void test_exact_tiny(void)
{
    const char *models[] = {"tiny-llama-f32.gguf", "tiny-llama-q4_1.gguf", "tiny-qwen2-f32.gguf"};
    int64_t total = 0;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        int64_t acc = 0;
        char path[4096];
        snprintf(path, sizeof path, "%s", model_path(models[i]));
        check_exact(path, NULL, 0, 40, &acc);
        total += acc;
    }
    CHECK_MSG(total > 0, "no draft token was ever accepted (the test would prove nothing)");
}

static void test_exact_draft_model(void)
{
    char t[4096], d[4096];
    snprintf(t, sizeof t, "%s", model_path("tiny-llama-f32.gguf"));
    snprintf(d, sizeof d, "%s", model_path("tiny-llama-q8_0.gguf")); /* same vocabulary, other weights */
    int64_t acc = 0;
    check_exact(t, d, 0, 30, &acc);
    CHECK_MSG(acc > 0, "the q8_0 draft never agreed with the f32 target");
    /* a smaller draft: the target's first layer of two (tiny-llama-draft-f32) */
    snprintf(d, sizeof d, "%s", model_path("tiny-llama-draft-f32.gguf"));
    acc = 0;
    check_exact(t, d, 0, 30, &acc);
    CHECK_MSG(acc > 0, "the 1-layer draft never agreed with the 2-layer target");
}

/* hone_spec_draft_open: a draft of the same vocabulary opens (and has the target's vocabulary
 * size); one with two token strings swapped, or another tokenizer, is refused naming the
 * difference. */
static void test_draft_vocab(void)
{
    hone_model *m = NULL;
    hone_tokenizer *tok = NULL;
    hone_spec_draft *d = NULL;
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    co.n_threads = 1;
    co.n_ctx = 64;
    char path[4096];
    snprintf(path, sizeof path, "%s", model_path("tiny-llama-f32.gguf"));
    CHECK_EQ_INT(hone_model_load(&m, path), 0);
    CHECK_EQ_INT(hone_tokenizer_new(&tok, hone_model_gguf(m)), 0);
    char why[160];
    CHECK_EQ_INT(hone_tokenizer_same_vocab(tok, tok, why, sizeof why), 1);
    CHECK_EQ_INT(hone_spec_draft_open(&d, model_path("tiny-llama-draft-f32.gguf"), tok, HONE_DEVICE_CPU, &co), 0);
    CHECK(d && hone_backend_n_vocab(hone_spec_draft_backend(d)) == hone_tokenizer_n_vocab(tok));
    hone_spec_draft_free(d);
    d = NULL;
    CHECK_EQ_INT(hone_spec_draft_open(&d, model_path("tiny-llama-vocabswap-f32.gguf"), tok, HONE_DEVICE_CPU, &co),
                 HONE_EINVAL);
    CHECK(d == NULL);
    CHECK_MSG(strstr(hone_error_last(), "vocabulary") && strstr(hone_error_last(), "token 300 is"),
              "message: %s", hone_error_last());
    CHECK_EQ_INT(hone_spec_draft_open(&d, model_path("tiny-llama-spm-f32.gguf"), tok, HONE_DEVICE_CPU, &co),
                 HONE_EINVAL);
    CHECK_MSG(strstr(hone_error_last(), "tokenizer kinds differ"), "message: %s", hone_error_last());
    CHECK_EQ_INT(hone_spec_draft_open(&d, model_path("no-such-model.gguf"), tok, HONE_DEVICE_CPU, &co) < 0, 1);
    CHECK(d == NULL);
    hone_tokenizer_free(tok);
    hone_model_free(m);
}

static void test_exact_smollm2(void)
{
#if defined(__SANITIZE_ADDRESS__)
    /* the real models under the sanitizers' instrumentation run past the test's time limit on
     * a 2-core machine; the Release run checks them, the tiny models' cases run here */
    SKIP_CASE("SmolLM2 under the sanitizers: too slow (the Release run checks it)");
    return;
#endif
    const char *path = harness_smollm2();
    if (!path) {
        SKIP_CASE("SmolLM2 absent");
        return;
    }
    int64_t acc = 0;
    check_exact(path, NULL, 0, 24, &acc);
    CHECK(acc > 0);
    check_exact(path, NULL, 15, 12, &acc); /* self-speculation: half of SmolLM2's 30 layers */
    CHECK(acc > 0);
    /* a draft model: SmolLM2 drafting for itself (its single-row logits are the verifying
     * rows' bitwise, so every greedy draft is accepted), greedy fixed k and seeded top-k adaptive */
    check_exact_cfgs(path, path, 0, 12, 0x1u | 0x8u | CFG_PROMPT(1), &acc);
    CHECK(acc > 0);
}

/* Gemma 3 (Q4_K_M: its own matmul formats, 262k vocabulary, sliding-window layers): greedy with a
 * fixed k and seeded top-k sampling with the repetition penalty and an adaptive k, lookup drafts;
 * then self-speculation greedy. Few steps: it is the largest model of the suite. */
static void test_exact_gemma3(void)
{
#if defined(__SANITIZE_ADDRESS__)
    /* as test_exact_smollm2: the Release run checks it */
    SKIP_CASE("Gemma 3 under the sanitizers: too slow (the Release run checks it)");
    return;
#endif
    const char *path = harness_gemma3();
    if (!path) {
        SKIP_CASE("Gemma 3 absent (tools/find_gemma3.py)");
        return;
    }
    int64_t acc = 0;
    check_exact_cfgs(path, NULL, 0, 8, 1u << 0 | 1u << 3 | CFG_PROMPT(0), &acc); /* the repetitive prompt */
    CHECK(acc > 0);
    check_exact_cfgs(path, NULL, 0, 8, 1u << 2 | CFG_PROMPT(1), &acc);
    check_exact_cfgs(path, NULL, 9, 6, 1u << 0 | CFG_PROMPT(1), &acc); /* self: half of its 18 layers */
}

/* Self-speculation: the first layers as the draft, on the target's own KV rows. */
static void test_exact_self(void)
{
    char t[4096];
    snprintf(t, sizeof t, "%s", model_path("tiny-llama-f32.gguf"));
    int64_t acc = 0;
    check_exact(t, NULL, 1, 30, &acc);
    check_exact(t, NULL, -1, 30, &acc); /* the layer count by measurement (may switch drafting off) */
    snprintf(t, sizeof t, "%s", model_path("tiny-qwen2-f32.gguf"));
    check_exact(t, NULL, 1, 30, &acc);
}

/* Distribution mode: with a draft model that disagrees often (the q4_0 copy of the target), the second
 * generated token's frequencies over many seeds match the target's own distribution
 * sum_t1 p(t1) p(. | t1) (a chi-square goodness-of-fit test; the seeds are fixed, so the
 * test is deterministic). */
static void test_distribution(void)
{
    hone_model *m = NULL, *dm = NULL;
    CHECK_EQ_INT(hone_model_load(&m, model_path("tiny-llama-f32.gguf")), 0);
    CHECK_EQ_INT(hone_model_load(&dm, model_path("tiny-llama-q4_0.gguf")), 0);
    hone_backend *be = open_backend(m), *dbe = open_backend(dm);
    if (!be || !dbe) return;
    int64_t nv = hone_backend_n_vocab(be);
    CHECK_EQ_INT(hone_backend_n_vocab(dbe), nv);
    const int32_t prompt[5] = {1, 40, 300, 7, 99};
    hone_sampler_params sp = HONE_SAMPLER_PARAMS_INIT;
    sp.temperature = 1.5f;
    sp.top_k = 4;
    /* the expected distribution of token 2 */
    hone_sampler *s = NULL;
    CHECK_EQ_INT(hone_sampler_new(&s, &sp, (int32_t)nv), 0);
    double *p1 = calloc((size_t)nv, sizeof *p1), *p2 = calloc((size_t)nv, sizeof *p2);
    double *want = calloc((size_t)nv, sizeof *want);
    float *l = malloc((size_t)nv * sizeof *l);
    hone_kv_seq seq = {0};
    CHECK_EQ_INT(hone_backend_forward(be, &seq, prompt, 5, l, 0), 0);
    CHECK_EQ_INT(hone_sampler_probs(s, l, p1), 0);
    for (int32_t t = 0; t < nv; t++) {
        if (p1[t] == 0.0) continue;
        hone_kv_cache_truncate(hone_backend_kv(be), &seq, 5);
        CHECK_EQ_INT(hone_backend_forward(be, &seq, &t, 1, l, 0), 0);
        CHECK_EQ_INT(hone_sampler_probs(s, l, p2), 0);
        for (int64_t v = 0; v < nv; v++) want[v] += p1[t] * p2[v];
    }
    hone_backend_release(be, &seq);
    enum { RUNS = 3000 };
    int *counts = calloc((size_t)nv, sizeof *counts);
    int64_t drafted = 0, accepted = 0;
    for (int r = 0; r < RUNS; r++) {
        hone_sampler *rs = NULL;
        hone_spec *spec = NULL;
        hone_kv_seq q = {0};
        sp.seed = 77000 + (uint64_t)r;
        CHECK_EQ_INT(hone_sampler_new(&rs, &sp, (int32_t)nv), 0);
        hone_spec_opts so = HONE_SPEC_OPTS_INIT;
        so.kind = HONE_SPEC_DRAFT;
        so.mode = HONE_SPEC_DISTRIBUTION;
        so.draft = dbe;
        so.k_max = 2;
        so.adaptive = 0;
        int32_t buf[4];
        int64_t got = 0;
        CHECK_EQ_INT(hone_spec_new(&spec, &so, be, rs, &q), 0);
        CHECK_EQ_INT(hone_spec_start(spec, prompt, 5, buf, &got), 0);
        CHECK_EQ_INT(hone_spec_step(spec, 3, buf, &got), 0);
        counts[buf[0]]++;
        hone_spec_stats st = hone_spec_get_stats(spec);
        drafted += st.drafted;
        accepted += st.accepted;
        hone_spec_free(spec);
        hone_backend_release(be, &q);
        hone_sampler_free(rs);
    }
    /* pool the categories expected fewer than 5 times */
    double chi = 0, e_small = 0;
    int df = -1, small = 0;
    for (int64_t v = 0; v < nv; v++) {
        double e = want[v] * RUNS;
        if (e == 0.0) {
            CHECK_MSG(counts[v] == 0, "token %lld has probability 0 but came %d times", (long long)v, counts[v]);
            continue;
        }
        if (e < 5) {
            e_small += e;
            small += counts[v];
            continue;
        }
        chi += (counts[v] - e) * (counts[v] - e) / e;
        df++;
    }
    if (e_small > 0) {
        chi += (small - e_small) * (small - e_small) / e_small;
        df++;
    }
    /* the 0.001 critical value of chi-square, Wilson-Hilferty */
    double zq = 3.09, crit = df * pow(1 - 2.0 / (9 * df) + zq * sqrt(2.0 / (9 * df)), 3);
    CHECK_MSG(df >= 3 && chi < crit, "chi-square %g over %d df (critical %g)", chi, df, crit);
    CHECK_MSG(drafted > 0 && accepted > 0 && accepted < drafted, "drafted %lld, accepted %lld",
              (long long)drafted, (long long)accepted);
    fprintf(stderr, "distribution mode: chi-square %.1f over %d df (critical %.1f), acceptance %.2f\n", chi,
            df, crit, (double)accepted / (double)drafted);
    free(counts);
    free(p1);
    free(p2);
    free(want);
    free(l);
    hone_sampler_free(s);
    hone_backend_free(be);
    hone_backend_free(dbe);
    hone_model_free(m);
    hone_model_free(dm);
}

TEST_MAIN(TEST_CASE(test_uniform_at), TEST_CASE(test_sample_at), TEST_CASE(test_lookup),
          TEST_CASE(test_exact_tiny), TEST_CASE(test_exact_draft_model), TEST_CASE(test_draft_vocab),
          TEST_CASE(test_exact_self),
          TEST_CASE(test_exact_smollm2), TEST_CASE(test_exact_gemma3),
          TEST_CASE(test_distribution))
