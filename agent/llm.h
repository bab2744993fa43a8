/* A client for any OpenAI-compatible /v1/chat/completions endpoint (libcurl + cJSON):
 * base URL, model and API key from options or HONE_LLM_URL / HONE_LLM_MODEL /
 * HONE_LLM_API_KEY; timeouts; retries with exponential backoff on 429 and 5xx; token usage
 * per call. The API key is sent as a bearer token and never logged or written anywhere. */
#ifndef HONE_LLM_H
#define HONE_LLM_H

#include <stdint.h>

typedef struct {
    const char *url;        /* base URL, e.g. "http://127.0.0.1:8080/v1"; NULL: $HONE_LLM_URL */
    const char *model;      /* NULL: $HONE_LLM_MODEL, else "default" */
    const char *api_key;    /* NULL: $HONE_LLM_API_KEY, else none */
    long timeout_ms;        /* whole request; default 120000 */
    long connect_timeout_ms;/* default 5000 */
    int max_retries;        /* on 429, 5xx and connection errors; default 3 */
    long backoff_ms;        /* first retry delay, doubled each time; default 500 */
    double temperature;     /* default 0.2 */
    int max_tokens;         /* 0: 4096; < 0: not sent (the server's own limit: for this engine's
                             * server, the rest of its context) */
} hone_llm_opts;

#define HONE_LLM_OPTS_INIT                                                                   \
    {.timeout_ms = 120000, .connect_timeout_ms = 5000, .max_retries = 3, .backoff_ms = 500,   \
     .temperature = 0.2, .max_tokens = 4096}

typedef struct {
    const char *role;       /* "system", "user", "assistant" */
    const char *content;
} hone_llm_msg;

typedef struct {
    int64_t prompt_tokens, completion_tokens, total_tokens;
    int attempts;           /* HTTP requests made (1 + retries) */
    long http_status;       /* of the last attempt; 0 if no HTTP answer */
    int context_exceeded;   /* the endpoint refused the prompt as longer than its context
                             * (HTTP 400, error code "context_length_exceeded") */
    int truncated;          /* the reply stopped at the token limit (finish_reason "length") */
    double seconds;
} hone_llm_usage;

typedef struct hone_llm hone_llm;

/* HONE_EINVAL if no URL is configured (say so: "set --llm URL or HONE_LLM_URL"). */
int hone_llm_new(hone_llm **out, const hone_llm_opts *opts);
void hone_llm_free(hone_llm *l);
const char *hone_llm_model(const hone_llm *l);
/* The endpoint actually posted to (base URL + "/chat/completions"), for logs. */
const char *hone_llm_endpoint(const hone_llm *l);

/* Sends msgs and returns the first choice's message content (malloc'd, caller frees).
 * Errors: HONE_EIO for an unreachable endpoint or a timeout after the retries ("LLM endpoint
 * http://... unreachable: Connection refused"), HONE_EFORMAT for a reply that is not a chat
 * completion, HONE_EINVAL for a 4xx other than 429 (the server's error message quoted).
 * usage (may be NULL) is filled in every case. */
int hone_llm_chat(hone_llm *l, const hone_llm_msg *msgs, int n, char **out, hone_llm_usage *usage);

/* POSTs a JSON body to the base URL + path ("/completions": the base is the URL without its
 * "/chat/completions") with the same timeouts, retries and errors as hone_llm_chat, and returns
 * the 2xx reply's body as it came (malloc'd, caller frees). */
int hone_llm_post(hone_llm *l, const char *path, const char *body, char **reply, hone_llm_usage *usage);
/* body NULL: a GET of the path (e.g. "/models"). */

/* Replaces the model name sent with each request. */
int hone_llm_set_model(hone_llm *l, const char *model);

#endif
