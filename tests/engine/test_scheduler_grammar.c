/* Structured output through the scheduler on a tiny random-weight model: whatever the
 * weights and the sampler settings (temperature, top-k, top-p, min-p, repetition penalty,
 * greedy), every constrained request's text is a sentence of its grammar and finishes as
 * soon as the grammar is done; constrained and unconstrained requests share batches, and the
 * unconstrained ones produce exactly what they produce alone. */
#include <cjson/cJSON.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/error.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"
#include "engine/model.h"
#include "engine/scheduler.h"
#include "engine/tokenizer.h"
#include "harness.h"

static const char SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"maxLength\":5},\"b\":{\"enum\":[1,2,\"x\"]},"
    "\"c\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"maxItems\":3},\"d\":{\"type\":\"integer\"}},"
    "\"required\":[\"a\",\"b\",\"c\"],\"additionalProperties\":false}";

/* Waits for r and returns its whole text (malloc'd) and final state. */
static char *wait_all(hone_scheduler *s, hone_request *r, hone_request_state *st)
{
    for (int i = 0; i < 6000; i++) {
        if (hone_request_wait(s, r, SIZE_MAX, 100, st, NULL, NULL)) return NULL;
        if (st->done) break;
    }
    char *text = NULL;
    size_t len = 0;
    hone_request_wait(s, r, 0, 0, st, &text, &len);
    return text ? text : strdup("");
}

static void test_constrained_batch(void)
{
    hone_model *m = NULL;
    hone_tokenizer *tok = NULL;
    hone_backend *be = NULL;
    hone_scheduler *s = NULL;
    hone_grammar *g = NULL;
    cJSON *schema = cJSON_Parse(SCHEMA);
    if (hone_model_load(&m, HONE_TEST_DATA_DIR "/tiny-llama-f32.gguf") || hone_tokenizer_new(&tok, hone_model_gguf(m))) {
        CHECK_MSG(0, "load: %s", hone_error_last());
        goto done;
    }
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    co.n_threads = 2;
    co.n_ctx = 256;
    co.kv_blocks = 512;
    CHECK(hone_backend_new(&be, m, HONE_DEVICE_CPU, &co) == 0);
    hone_scheduler_opts so = HONE_SCHEDULER_OPTS_INIT;
    so.max_batch = 8;
    CHECK(be && hone_scheduler_new(&s, be, tok, &so) == 0);
    CHECK(hone_json_schema_compile(&g, schema, NULL) == 0);
    if (!s || !g) goto done;
    int32_t prompt[6] = {1, 200, 300, 400, 500, 600};
    /* the unconstrained references, alone */
    enum { N_FREE = 2, N_CON = 10 };
    char *alone[N_FREE] = {0};
    hone_request_params fp = {.prompt = prompt, .n_prompt = 6, .max_tokens = 24, .ignore_eos = 1};
    fp.sampling = (hone_sampler_params)HONE_SAMPLER_PARAMS_INIT;
    for (int i = 0; i < N_FREE; i++) {
        hone_request *r;
        hone_request_state st;
        fp.sampling.seed = (uint64_t)i + 7;
        CHECK(hone_scheduler_submit(s, &fp, &r) == 0);
        alone[i] = wait_all(s, r, &st);
        hone_request_release(s, r);
    }
    /* then everything together */
    hone_request *rs[N_FREE + N_CON];
    for (int i = 0; i < N_FREE + N_CON; i++) {
        hone_request_params p = fp;
        if (i < N_FREE) {
            p.sampling.seed = (uint64_t)i + 7;
        } else {
            int k = i - N_FREE;
            p.max_tokens = 200;
            p.ignore_eos = 0;
            p.grammar = g;
            p.sampling.seed = (uint64_t)k * 31 + 1;
            p.sampling.temperature = k == 0 ? 0.0f : k % 3 == 0 ? 1.5f : 1.0f;
            if (k % 4 == 1) p.sampling.top_k = 5;
            if (k % 4 == 2) p.sampling.top_p = 0.8f;
            if (k % 4 == 3) p.sampling.min_p = 0.1f;
            if (k % 5 == 4) {
                p.sampling.repeat_penalty = 1.3f;
                p.sampling.repeat_last_n = 16;
            }
        }
        CHECK(hone_scheduler_submit(s, &p, &rs[i]) == 0);
    }
    for (int i = 0; i < N_FREE + N_CON; i++) {
        hone_request_state st;
        char *text = wait_all(s, rs[i], &st);
        if (i < N_FREE) {
            CHECK_MSG(text && alone[i] && !strcmp(text, alone[i]), "unconstrained %d: %s vs %s", i, text, alone[i]);
        } else {
            CHECK_MSG(text && hone_grammar_accepts(g, text, strlen(text)), "request %d: %s", i, text ? text : "(null)");
            CHECK_MSG(st.finish == HONE_FINISH_STOP, "request %d finish %d", i, (int)st.finish);
            cJSON *j = text ? cJSON_Parse(text) : NULL;
            CHECK_MSG(cJSON_IsObject(j) && cJSON_IsString(cJSON_GetObjectItem(j, "a")) &&
                      cJSON_IsArray(cJSON_GetObjectItem(j, "c")), "request %d parses: %s", i, text);
            cJSON_Delete(j);
        }
        free(text);
        hone_request_release(s, rs[i]);
    }
    for (int i = 0; i < N_FREE; i++) free(alone[i]);
done:
    hone_scheduler_free(s);
    hone_grammar_free(g);
    hone_backend_free(be);
    hone_tokenizer_free(tok);
    hone_model_free(m);
    cJSON_Delete(schema);
}

TEST_MAIN(TEST_CASE(test_constrained_batch))
