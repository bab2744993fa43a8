/* Speculative decoding inside continuous batching (engine/scheduler.c with prompt-lookup draft
 * rows): every request's output is the output without speculation, for batches of 1 to 16
 * requests, greedy and seeded sampling, with the prefix cache on, and with a KV pool small
 * enough that requests are preempted; the speculation counters add up. Self drafts and a draft
 * model (its own KV pool) too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/error.h"
#include "engine/model.h"
#include "engine/scheduler.h"
#include "engine/spec.h"
#include "engine/tokenizer.h"
#include "harness.h"

#define MAX_REQ 16
#define MAX_TOKENS 40

typedef struct {
    char *text;
    int64_t completion;
} result;

static hone_model *model;
static hone_tokenizer *tok;
static hone_backend *g_draft; /* the scheduler's draft model (test_spec_draft_model), or NULL */
static int g_req_spec;        /* every request's "speculate" (HONE_REQUEST_SPEC_*; 0: the default) */

/* Runs n requests at once through a fresh scheduler; results[i] gets request i's text. */
static void run_batch_mode(int n, int speculate, int mode, int greedy, int64_t kv_blocks, int prefix_cache,
                           result *results, hone_scheduler_stats *st_out)
{
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    co.n_threads = 2;
    co.n_ctx = 256;
    co.kv_blocks = kv_blocks;
    hone_backend *be = NULL;
    hone_scheduler *s = NULL;
    if (hone_backend_new(&be, model, HONE_DEVICE_CPU, &co)) {
        CHECK_MSG(0, "backend: %s", hone_error_last());
        return;
    }
    hone_scheduler_opts so = HONE_SCHEDULER_OPTS_INIT;
    so.max_batch = MAX_REQ;
    so.step_tokens = 64;
    so.prefix_cache = prefix_cache;
    so.speculate = speculate;
    so.spec_mode = mode;
    so.spec_k = 5;
    so.draft = g_draft;
    if (hone_scheduler_new(&s, be, tok, &so)) {
        CHECK_MSG(0, "scheduler: %s", hone_error_last());
        hone_backend_free(be);
        return;
    }
    hone_request *reqs[MAX_REQ];
    for (int i = 0; i < n; i++) {
        int32_t prompt[48];
        int len = 12 + (i % 5) * 7;
        for (int j = 0; j < len; j++) /* repetitive prompts, different per request */
            prompt[j] = (int32_t)(3 + ((j % (3 + i % 4)) * 53 + i * 11) % 2000);
        hone_request_params p = {0};
        p.prompt = prompt;
        p.n_prompt = len;
        p.max_tokens = MAX_TOKENS;
        p.ignore_eos = 1;
        hone_sampler_params sp = HONE_SAMPLER_PARAMS_INIT;
        sp.temperature = i % 3 == 0 || greedy ? 0.0f : 0.8f;
        sp.top_k = i % 3 == 2 ? 20 : 0;
        sp.seed = 500 + (uint64_t)i;
        p.sampling = sp;
        p.speculate = g_req_spec;
        CHECK_EQ_INT(hone_scheduler_submit(s, &p, &reqs[i]), 0);
    }
    for (int i = 0; i < n; i++) {
        hone_request_state st;
        char *text = NULL;
        size_t len = 0;
        do {
            free(text);
            text = NULL;
            CHECK_EQ_INT(hone_request_wait(s, reqs[i], 0, 1000, &st, &text, &len), 0);
        } while (!st.done);
        CHECK_MSG(st.finish == HONE_FINISH_LENGTH, "request %d finished with %d (%s)", i, st.finish, st.error);
        results[i].text = text;
        results[i].completion = st.completion_tokens;
        hone_request_release(s, reqs[i]);
    }
    hone_scheduler_stats_get(s, st_out);
    hone_scheduler_free(s);
    hone_backend_free(be);
}

static void run_batch(int n, int speculate, int64_t kv_blocks, int prefix_cache, result *results,
                      hone_scheduler_stats *st_out)
{
    run_batch_mode(n, speculate, HONE_SPEC_EXACT, 0, kv_blocks, prefix_cache, results, st_out);
}

/* Self-speculation (the first of tiny llama's layers as the draft) in exact mode: the text of
 * plain decoding, greedy and sampled, batches of 1 and 8. Distribution mode, greedy: the
 * target's distribution is one-hot, so its rule accepts exactly the drafts equal to the argmax
 * and the residual is the argmax: plain's text again, lookup and self drafts; sampled: every
 * request completes and the counters add up (its frequencies are test_spec.c's chi-square). */
static void test_spec_self_and_distribution(void)
{
    static const struct {
        int kind, mode, greedy;
    } cfgs[] = {{HONE_SPEC_SELF, HONE_SPEC_EXACT, 0},
                {HONE_SPEC_LOOKUP, HONE_SPEC_DISTRIBUTION, 1},
                {HONE_SPEC_SELF, HONE_SPEC_DISTRIBUTION, 1},
                {HONE_SPEC_LOOKUP, HONE_SPEC_DISTRIBUTION, 0},
                {HONE_SPEC_SELF, HONE_SPEC_DISTRIBUTION, 0}};
    const int sizes[] = {1, 8};
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
        for (size_t si = 0; si < 2; si++) {
            int n = sizes[si];
            result plain[MAX_REQ], spec[MAX_REQ];
            hone_scheduler_stats sp, ss;
            run_batch_mode(n, HONE_SPEC_NONE, HONE_SPEC_EXACT, cfgs[c].greedy, 0, 1, plain, &sp);
            run_batch_mode(n, cfgs[c].kind, cfgs[c].mode, cfgs[c].greedy, 0, 1, spec, &ss);
            int same_expected = cfgs[c].mode == HONE_SPEC_EXACT || cfgs[c].greedy;
            for (int i = 0; i < n; i++) {
                if (same_expected)
                    CHECK_MSG(plain[i].text && spec[i].text && !strcmp(plain[i].text, spec[i].text),
                              "config %zu batch %d request %d: the text differs with speculation", c, n, i);
                CHECK_EQ_INT(spec[i].completion, MAX_TOKENS);
                free(plain[i].text);
                free(spec[i].text);
            }
            CHECK_MSG(ss.spec_passes > 0, "config %zu batch %d: no pass with drafts", c, n);
            CHECK(ss.spec_accepted <= ss.spec_drafted);
            CHECK_EQ_INT(ss.spec_emitted, ss.spec_passes + ss.spec_accepted);
            fprintf(stderr, "config %zu batch %d: steps %llu -> %llu, drafted %llu, accepted %llu\n", c, n,
                    (unsigned long long)sp.steps, (unsigned long long)ss.steps,
                    (unsigned long long)ss.spec_drafted, (unsigned long long)ss.spec_accepted);
        }
}

static void test_spec_equals_plain(void)
{
    const int sizes[] = {1, 4, 16};
    uint64_t accepted = 0, preempted = 0;
    for (int cfg = 0; cfg < 2; cfg++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int n = sizes[si];
            /* cfg 1: 24 blocks of 16 tokens for up to 16 requests of up to 80 tokens: preemption */
            int64_t blocks = cfg ? 24 : 0;
            result plain[MAX_REQ], spec[MAX_REQ];
            hone_scheduler_stats sp, ss;
            run_batch(n, 0, blocks, 1, plain, &sp);
            run_batch(n, 1, blocks, 1, spec, &ss);
            for (int i = 0; i < n; i++) {
                CHECK_MSG(plain[i].text && spec[i].text && !strcmp(plain[i].text, spec[i].text),
                          "batch %d, %lld blocks, request %d: the text differs with speculation", n,
                          (long long)blocks, i);
                CHECK_EQ_INT(spec[i].completion, MAX_TOKENS);
                CHECK_EQ_INT(plain[i].completion, MAX_TOKENS);
                free(plain[i].text);
                free(spec[i].text);
            }
            CHECK_EQ_INT(sp.spec_passes, 0);
            CHECK(ss.spec_accepted <= ss.spec_drafted);
            CHECK_EQ_INT(ss.spec_emitted, ss.spec_passes + ss.spec_accepted);
            CHECK_EQ_INT(ss.generated_tokens, sp.generated_tokens);
            accepted += ss.spec_accepted;
            preempted += ss.preemptions;
            fprintf(stderr, "batch %2d blocks %2lld: steps %llu -> %llu, drafted %llu, accepted %llu, "
                            "preemptions %llu\n", n, (long long)blocks, (unsigned long long)sp.steps,
                    (unsigned long long)ss.steps, (unsigned long long)ss.spec_drafted,
                    (unsigned long long)ss.spec_accepted, (unsigned long long)ss.preemptions);
        }
    CHECK_MSG(accepted > 0, "no draft was ever accepted: the test proves nothing");
    CHECK_MSG(preempted > 0, "no request was preempted with speculation on");
}

/* A draft model (tiny-llama-draft-f32: the target's first layer of two, with its own KV pool):
 * exact mode gives the text of plain decoding, greedy and sampled, batches of 1, 4 and 16, with a
 * pool small enough to preempt, as the scheduler's default and per request; distribution mode
 * greedy too (sampled: every request completes, the counters add up). The draft model's batches run over several requests at once (rows > batches), its
 * pool is whole afterwards, and without a draft model the mode is refused. */
static void test_spec_draft_model(void)
{
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    co.n_threads = 2;
    co.n_ctx = 256;
    co.kv_blocks = 64; /* 16 requests of up to 80 tokens: 5 blocks of 16 each */
    hone_spec_draft *d = NULL;
    if (hone_spec_draft_open(&d, HONE_TEST_DATA_DIR "/tiny-llama-draft-f32.gguf", tok, HONE_DEVICE_CPU, &co)) {
        CHECK_MSG(0, "draft: %s", hone_error_last());
        return;
    }
    hone_kv_cache *dkv = hone_backend_kv(hone_spec_draft_backend(d));
    static const struct {
        int speculate, req, mode, greedy, n;
        int64_t blocks;
    } cfgs[] = {{HONE_SPEC_DRAFT, 0, HONE_SPEC_EXACT, 1, 1, 0},
                {HONE_SPEC_DRAFT, 0, HONE_SPEC_EXACT, 0, 1, 0},
                {HONE_SPEC_DRAFT, 0, HONE_SPEC_EXACT, 0, 4, 0},
                {HONE_SPEC_DRAFT, 0, HONE_SPEC_EXACT, 0, 16, 24},
                {HONE_SPEC_NONE, HONE_REQUEST_SPEC_DRAFT, HONE_SPEC_EXACT, 0, 4, 0},
                {HONE_SPEC_DRAFT, 0, HONE_SPEC_DISTRIBUTION, 1, 4, 0},
                {HONE_SPEC_DRAFT, 0, HONE_SPEC_DISTRIBUTION, 0, 4, 0}};
    uint64_t accepted = 0;
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        int n = cfgs[c].n;
        result plain[MAX_REQ], spec[MAX_REQ];
        hone_scheduler_stats sp, ss;
        g_draft = NULL;
        g_req_spec = 0;
        run_batch_mode(n, HONE_SPEC_NONE, HONE_SPEC_EXACT, cfgs[c].greedy, cfgs[c].blocks, 1, plain, &sp);
        g_draft = hone_spec_draft_backend(d);
        g_req_spec = cfgs[c].req;
        run_batch_mode(n, cfgs[c].speculate, cfgs[c].mode, cfgs[c].greedy, cfgs[c].blocks, 1, spec, &ss);
        g_draft = NULL;
        g_req_spec = 0;
        /* distribution mode sampled: the same distribution, not the same text */
        int same_expected = cfgs[c].mode == HONE_SPEC_EXACT || cfgs[c].greedy;
        for (int i = 0; i < n; i++) {
            if (same_expected)
                CHECK_MSG(plain[i].text && spec[i].text && !strcmp(plain[i].text, spec[i].text),
                          "config %zu batch %d request %d: the text differs with the draft model", c, n, i);
            CHECK_EQ_INT(spec[i].completion, MAX_TOKENS);
            free(plain[i].text);
            free(spec[i].text);
        }
        CHECK_MSG(ss.spec_passes > 0, "config %zu: no pass with drafts", c);
        CHECK(ss.spec_accepted <= ss.spec_drafted);
        CHECK_EQ_INT(ss.spec_emitted, ss.spec_passes + ss.spec_accepted);
        CHECK_MSG(ss.spec_draft_batches > 0 && ss.spec_draft_rows >= ss.spec_draft_batches,
                  "config %zu: draft model batches %llu rows %llu", c, (unsigned long long)ss.spec_draft_batches,
                  (unsigned long long)ss.spec_draft_rows);
        if (n > 1) CHECK_MSG(ss.spec_draft_rows > ss.spec_draft_batches, "config %zu: no batched draft rows", c);
        CHECK_EQ_INT(sp.spec_draft_batches, 0);
        CHECK_EQ_INT(hone_kv_cache_n_free(dkv), hone_kv_cache_n_blocks(dkv));
        accepted += ss.spec_accepted;
        fprintf(stderr, "draft config %zu batch %d: steps %llu -> %llu, drafted %llu, accepted %llu, "
                        "draft batches %llu rows %llu, preemptions %llu\n", c, n, (unsigned long long)sp.steps,
                (unsigned long long)ss.steps, (unsigned long long)ss.spec_drafted,
                (unsigned long long)ss.spec_accepted, (unsigned long long)ss.spec_draft_batches,
                (unsigned long long)ss.spec_draft_rows, (unsigned long long)ss.preemptions);
    }
    CHECK_MSG(accepted > 0, "the draft model's tokens were never accepted: the test proves nothing");
    /* refused without a draft model: as the default, and per request */
    hone_backend *be = NULL;
    hone_scheduler *s = NULL;
    CHECK_EQ_INT(hone_backend_new(&be, model, HONE_DEVICE_CPU, &co), 0);
    hone_scheduler_opts so = HONE_SCHEDULER_OPTS_INIT;
    so.speculate = HONE_SPEC_DRAFT;
    CHECK_EQ_INT(hone_scheduler_new(&s, be, tok, &so), HONE_EINVAL);
    CHECK(strstr(hone_error_last(), "draft model") != NULL);
    so.speculate = HONE_SPEC_NONE;
    CHECK_EQ_INT(hone_scheduler_new(&s, be, tok, &so), 0);
    int32_t prompt[3] = {5, 6, 7};
    hone_request_params p = {0};
    p.prompt = prompt;
    p.n_prompt = 3;
    p.max_tokens = 4;
    p.sampling = (hone_sampler_params)HONE_SAMPLER_PARAMS_INIT;
    p.speculate = HONE_REQUEST_SPEC_DRAFT;
    hone_request *r = NULL;
    CHECK_EQ_INT(hone_scheduler_submit(s, &p, &r), HONE_EINVAL);
    CHECK(r == NULL && strstr(hone_error_last(), "no draft model") != NULL);
    hone_scheduler_free(s);
    hone_backend_free(be);
    hone_spec_draft_free(d);
}

static int setup(void)
{
    const char *path = HONE_TEST_DATA_DIR "/tiny-llama-f32.gguf";
    if (hone_model_load(&model, path) || hone_tokenizer_new(&tok, hone_model_gguf(model))) {
        fprintf(stderr, "cannot load %s: %s\n", path, hone_error_last());
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (setup()) return 1;
    static const harness_case cases[] = {TEST_CASE(test_spec_equals_plain),
                                         TEST_CASE(test_spec_self_and_distribution),
                                         TEST_CASE(test_spec_draft_model)};
    int rc = harness_run(cases, 3, argc, argv);
    hone_tokenizer_free(tok);
    hone_model_free(model);
    return rc;
}
