/* OpenAI-compatible chat client: one POST per attempt, retried with exponential backoff on
 * 429, 5xx and transport errors; the reply's choices[0].message.content is returned. */
#include "llm.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/error.h"

struct hone_llm {
    hone_llm_opts o;
    char *url, *endpoint, *model, *auth; /* auth: "Authorization: Bearer ..." (never logged) */
    size_t base_len;                     /* endpoint's length without "/chat/completions" */
};

typedef struct {
    char *data;
    size_t len, cap;
} buffer;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *user)
{
    buffer *b = user;
    size_t n = size * nmemb;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        if (cap > (64u << 20)) return 0; /* a 64 MiB reply is not a kernel: abort */
        char *d = realloc(b->data, cap);
        if (!d) return 0;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = 0;
    return n;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

int hone_llm_new(hone_llm **out, const hone_llm_opts *opts)
{
    hone_llm_opts dflt = HONE_LLM_OPTS_INIT;
    *out = NULL;
    pthread_once(&curl_once, curl_init_once);
    hone_llm *l = calloc(1, sizeof *l);
    if (!l) return hone_error_set(HONE_ENOMEM, "out of memory");
    l->o = opts ? *opts : dflt;
    const char *url = l->o.url ? l->o.url : getenv("HONE_LLM_URL");
    const char *model = l->o.model ? l->o.model : getenv("HONE_LLM_MODEL");
    const char *key = l->o.api_key ? l->o.api_key : getenv("HONE_LLM_API_KEY");
    if (!url || !*url) {
        free(l);
        return hone_error_set(HONE_EINVAL, "no LLM endpoint: set --llm URL or HONE_LLM_URL");
    }
    if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
        free(l);
        return hone_error_set(HONE_EINVAL, "LLM URL must start with http:// or https://: '%s'", url);
    }
    l->url = strdup(url);
    l->model = strdup(model && *model ? model : "default");
    size_t ul = strlen(url);
    while (ul && url[ul - 1] == '/') ul--;
    const char *suffix = "/chat/completions";
    int has_suffix = ul >= strlen(suffix) && !strncmp(url + ul - strlen(suffix), suffix, strlen(suffix));
    l->endpoint = malloc(ul + strlen(suffix) + 1);
    if (l->endpoint) {
        memcpy(l->endpoint, url, ul);
        strcpy(l->endpoint + ul, has_suffix ? "" : suffix);
        l->base_len = strlen(l->endpoint) - strlen(suffix);
    }
    if (key && *key) {
        l->auth = malloc(strlen(key) + 32);
        if (l->auth) sprintf(l->auth, "Authorization: Bearer %s", key);
    }
    if (!l->url || !l->model || !l->endpoint || (key && *key && !l->auth)) {
        hone_llm_free(l);
        return hone_error_set(HONE_ENOMEM, "out of memory");
    }
    if (l->o.timeout_ms <= 0) l->o.timeout_ms = dflt.timeout_ms;
    if (l->o.connect_timeout_ms <= 0) l->o.connect_timeout_ms = dflt.connect_timeout_ms;
    if (l->o.max_retries < 0) l->o.max_retries = 0;
    if (l->o.backoff_ms < 0) l->o.backoff_ms = 0;
    if (l->o.max_tokens == 0) l->o.max_tokens = dflt.max_tokens;
    *out = l;
    return 0;
}

void hone_llm_free(hone_llm *l)
{
    if (!l) return;
    free(l->url);
    free(l->endpoint);
    free(l->model);
    if (l->auth) {
        memset(l->auth, 0, strlen(l->auth)); /* the key does not linger in freed memory */
        free(l->auth);
    }
    free(l);
}

const char *hone_llm_model(const hone_llm *l) { return l->model; }
const char *hone_llm_endpoint(const hone_llm *l) { return l->endpoint; }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static char *request_body(const hone_llm *l, const hone_llm_msg *msgs, int n)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "model", l->model);
    cJSON *arr = cJSON_AddArrayToObject(root, "messages");
    for (int i = 0; i < n; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", msgs[i].role);
        cJSON_AddStringToObject(m, "content", msgs[i].content);
        cJSON_AddItemToArray(arr, m);
    }
    cJSON_AddNumberToObject(root, "temperature", l->o.temperature);
    if (l->o.max_tokens > 0) cJSON_AddNumberToObject(root, "max_tokens", l->o.max_tokens);
    cJSON_AddBoolToObject(root, "stream", 0);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* Parses a chat completion; fills usage; returns content (malloc'd) or NULL with the error set. */
static char *parse_reply(const char *body, hone_llm_usage *usage)
{
    cJSON *root = cJSON_Parse(body);
    char *out = NULL;
    if (!root) {
        hone_error_set(HONE_EFORMAT, "LLM reply is not JSON: %.120s", body);
        return NULL;
    }
    cJSON *u = cJSON_GetObjectItemCaseSensitive(root, "usage");
    if (cJSON_IsObject(u)) {
        cJSON *pt = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens");
        cJSON *ct = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens");
        cJSON *tt = cJSON_GetObjectItemCaseSensitive(u, "total_tokens");
        if (cJSON_IsNumber(pt)) usage->prompt_tokens += (int64_t)pt->valuedouble;
        if (cJSON_IsNumber(ct)) usage->completion_tokens += (int64_t)ct->valuedouble;
        if (cJSON_IsNumber(tt)) usage->total_tokens += (int64_t)tt->valuedouble;
    }
    cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
    cJSON *c0 = cJSON_IsArray(choices) ? cJSON_GetArrayItem(choices, 0) : NULL;
    cJSON *msg = c0 ? cJSON_GetObjectItemCaseSensitive(c0, "message") : NULL;
    cJSON *content = msg ? cJSON_GetObjectItemCaseSensitive(msg, "content") : NULL;
    cJSON *fin = c0 ? cJSON_GetObjectItemCaseSensitive(c0, "finish_reason") : NULL;
    usage->truncated = cJSON_IsString(fin) && !strcmp(fin->valuestring, "length");
    if (!cJSON_IsString(content))
        hone_error_set(HONE_EFORMAT, "LLM reply has no choices[0].message.content: %.120s", body);
    else if (!(out = strdup(content->valuestring)))
        hone_error_set(HONE_ENOMEM, "out of memory");
    cJSON_Delete(root);
    return out;
}

/* The server's error message from an OpenAI-style error body, or the body's start; returns 1
 * when the error's code is "context_length_exceeded" (OpenAI's, and this engine's). */
static int error_message(const char *body, char *buf, size_t cap)
{
    cJSON *root = cJSON_Parse(body ? body : "");
    cJSON *e = root ? cJSON_GetObjectItemCaseSensitive(root, "error") : NULL;
    cJSON *m = e ? cJSON_GetObjectItemCaseSensitive(e, "message") : NULL;
    cJSON *code = e ? cJSON_GetObjectItemCaseSensitive(e, "code") : NULL;
    snprintf(buf, cap, "%.200s", cJSON_IsString(m) ? m->valuestring : body ? body : "");
    int ctx = cJSON_IsString(code) && !strcmp(code->valuestring, "context_length_exceeded");
    cJSON_Delete(root);
    return ctx;
}

/* POSTs body to url (body NULL: a GET) with the retries; *reply: the 2xx answer's body (malloc'd). */
static int post(hone_llm *l, const char *url, const char *body, char **reply, hone_llm_usage *usage)
{
    *reply = NULL;
    CURL *curl = curl_easy_init();
    struct curl_slist *hdr = NULL;
    hdr = curl_slist_append(hdr, "Content-Type: application/json");
    if (l->auth) hdr = curl_slist_append(hdr, l->auth);
    int rc = HONE_EIO;
    double t0 = now_s();
    long delay = l->o.backoff_ms;
    char curl_err[CURL_ERROR_SIZE];
    for (int attempt = 0; curl && hdr && attempt <= l->o.max_retries; attempt++) {
        buffer resp = {0};
        curl_err[0] = 0;
        curl_easy_reset(curl);
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdr);
        if (body) curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        else curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &resp);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, l->o.timeout_ms);
        curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, l->o.connect_timeout_ms);
        curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_err);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
        usage->attempts++;
        CURLcode cc = curl_easy_perform(curl);
        long status = 0;
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        usage->http_status = status;
        int retry = 0;
        if (cc != CURLE_OK) {
            rc = hone_error_set(HONE_EIO, "LLM endpoint %s unreachable: %s", url,
                                curl_err[0] ? curl_err : curl_easy_strerror(cc));
            retry = 1;
        } else if (status == 429 || status >= 500) {
            char msg[256];
            error_message(resp.data, msg, sizeof msg);
            rc = hone_error_set(HONE_EIO, "LLM endpoint %s answered HTTP %ld: %s", url, status, msg);
            retry = 1;
        } else if (status >= 400 || status < 200) {
            char msg[256];
            usage->context_exceeded = error_message(resp.data, msg, sizeof msg);
            rc = hone_error_set(HONE_EINVAL, "LLM endpoint %s answered HTTP %ld: %s", url, status, msg);
        } else {
            *reply = resp.data ? resp.data : strdup("");
            resp.data = NULL;
            rc = *reply ? 0 : hone_error_set(HONE_ENOMEM, "out of memory");
        }
        free(resp.data);
        if (!retry || attempt == l->o.max_retries) break;
        sleep_ms(delay);
        delay *= 2;
    }
    if (!curl || !hdr) rc = hone_error_set(HONE_ENOMEM, "cannot initialise libcurl");
    usage->seconds = now_s() - t0;
    curl_slist_free_all(hdr);
    curl_easy_cleanup(curl);
    return rc;
}

int hone_llm_chat(hone_llm *l, const hone_llm_msg *msgs, int n, char **out, hone_llm_usage *usage)
{
    hone_llm_usage local;
    if (!usage) usage = &local;
    memset(usage, 0, sizeof *usage);
    *out = NULL;
    char *body = request_body(l, msgs, n), *reply = NULL;
    if (!body) return hone_error_set(HONE_ENOMEM, "out of memory");
    int rc = post(l, l->endpoint, body, &reply, usage);
    if (rc == 0) {
        *out = parse_reply(reply, usage);
        rc = *out ? 0 : HONE_EFORMAT;
    }
    free(reply);
    free(body);
    return rc;
}

int hone_llm_set_model(hone_llm *l, const char *model)
{
    char *m = strdup(model);
    if (!m) return hone_error_set(HONE_ENOMEM, "out of memory");
    free(l->model);
    l->model = m;
    return 0;
}

int hone_llm_post(hone_llm *l, const char *path, const char *body, char **reply, hone_llm_usage *usage)
{
    hone_llm_usage local;
    if (!usage) usage = &local;
    memset(usage, 0, sizeof *usage);
    *reply = NULL;
    size_t n = l->base_len + strlen(path) + 1;
    char *url = malloc(n);
    if (!url) return hone_error_set(HONE_ENOMEM, "out of memory");
    snprintf(url, n, "%.*s%s", (int)l->base_len, l->endpoint, path);
    int rc = post(l, url, body, reply, usage);
    free(url);
    return rc;
}
