/* hone_request_params.notify, what the server's event loop resumes a suspended connection
 * from: it comes on the engine thread once per step that gave the request a token and once
 * when it finishes (never for a step that changed nothing it can read), the state it
 * announces is there to read when it comes, and it never comes after hone_request_release. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "engine/backend.h"
#include "engine/error.h"
#include "engine/model.h"
#include "engine/scheduler.h"
#include "engine/tokenizer.h"
#include "harness.h"

typedef struct {
    atomic_int calls;
    atomic_int foreign;  /* calls on a thread other than the test's */
    pthread_t test_thread;
} counter;

static void count_notify(void *user)
{
    counter *c = user;
    atomic_fetch_add(&c->calls, 1);
    if (!pthread_equal(pthread_self(), c->test_thread)) atomic_fetch_add(&c->foreign, 1);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_notify(void)
{
    hone_model *m = NULL;
    hone_tokenizer *tok = NULL;
    hone_backend *be = NULL;
    hone_scheduler *s = NULL;
    if (hone_model_load(&m, HONE_TEST_DATA_DIR "/tiny-llama-f32.gguf") || hone_tokenizer_new(&tok, hone_model_gguf(m))) {
        CHECK_MSG(0, "load: %s", hone_error_last());
        goto done;
    }
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    co.n_threads = 1;
    co.n_ctx = 256;
    co.kv_blocks = 128;
    CHECK(hone_backend_new(&be, m, HONE_DEVICE_CPU, &co) == 0);
    hone_scheduler_opts so = HONE_SCHEDULER_OPTS_INIT;
    so.prefix_cache = 0;
    so.step_tokens = 16;
    CHECK(be && hone_scheduler_new(&s, be, tok, &so) == 0);
    if (!s) goto done;
    int32_t prompt[40];
    for (int i = 0; i < 40; i++) prompt[i] = 100 + 7 * i;
    counter c = {.test_thread = pthread_self()};
    enum { MAX_TOKENS = 12 };
    /* a prompt of 40 tokens in chunks of 16 (3 prefill steps, the first token at the third),
     * then 11 decode steps: one notify per token, the last one from its finish */
    hone_request_params p = {.prompt = prompt, .n_prompt = 40, .max_tokens = MAX_TOKENS, .ignore_eos = 1};
    p.sampling = (hone_sampler_params)HONE_SAMPLER_PARAMS_INIT;
    p.notify = count_notify;
    p.notify_user = &c;
    hone_request *r = NULL;
    CHECK(hone_scheduler_submit(s, &p, &r) == 0);
    hone_request_state st = {0};
    int seen = 0, stale = 0;
    for (int i = 0; i < 3000 && !st.done; i++) { /* wait by notify count only, as the server does */
        int n = atomic_load(&c.calls);
        if (n == seen) {
            sleep_ms(1);
            continue;
        }
        seen = n;
        hone_request_wait(s, r, SIZE_MAX, 0, &st, NULL, NULL);
        stale += st.completion_tokens < n; /* a notify announces a token already readable */
    }
    hone_request_wait(s, r, SIZE_MAX, 0, &st, NULL, NULL);
    CHECK_MSG(st.done && st.completion_tokens == MAX_TOKENS, "done %d tokens %lld", st.done,
              (long long)st.completion_tokens);
    sleep_ms(50);
    CHECK_MSG(atomic_load(&c.calls) == MAX_TOKENS, "notifies %d for %d tokens (none for prefill-only steps)",
              atomic_load(&c.calls), MAX_TOKENS);
    CHECK_MSG(stale == 0, "%d notifies came before their token was readable", stale);
    CHECK(atomic_load(&c.foreign) == atomic_load(&c.calls));
    hone_request_release(s, r);

    /* released while it runs: no notify after the release returns */
    counter c2 = {.test_thread = pthread_self()};
    p.notify_user = &c2;
    p.max_tokens = 200;
    CHECK(hone_scheduler_submit(s, &p, &r) == 0);
    for (int i = 0; i < 3000 && atomic_load(&c2.calls) < 2; i++) sleep_ms(1);
    CHECK_MSG(atomic_load(&c2.calls) >= 2, "the long request notifies (%d)", atomic_load(&c2.calls));
    hone_request_release(s, r);
    int at_release = atomic_load(&c2.calls);
    sleep_ms(100); /* steps go on: the engine still holds its reference */
    CHECK_MSG(atomic_load(&c2.calls) == at_release, "notifies after the release: %d -> %d", at_release,
              atomic_load(&c2.calls));
    hone_scheduler_stats stats;
    hone_scheduler_stats_get(s, &stats);
    CHECK_MSG(stats.generated_tokens > (uint64_t)(MAX_TOKENS + at_release), "the released request kept running (%llu tokens)",
              (unsigned long long)stats.generated_tokens);
done:
    hone_scheduler_free(s);
    hone_backend_free(be);
    hone_tokenizer_free(tok);
    hone_model_free(m);
}

TEST_MAIN(TEST_CASE(test_notify))
