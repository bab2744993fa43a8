/* The HTTP side of `hone serve`: routing, authentication, request validation into
 * OpenAI-style errors, JSON and server-sent-event responses, Prometheus metrics, the
 * connections (an event loop; a request waiting for the engine suspends its connection) and
 * the serve command (signals, graceful drain). Generation itself is engine/scheduler.c. */
#include "server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "error.h"
#include "forward.h"
#include "json_schema.h"
#include "model.h"
#include "toolcall.h"
#include "utf8.h"

enum { R_MODELS, R_COMPLETIONS, R_CHAT, R_HEALTH, R_METRICS, R_PROFILE, R_TUNING, R_EMBEDDINGS,
       R_MODEL, R_OTHER, R_COUNT };
static const char *const route_path[R_COUNT] = {
    "/v1/models", "/v1/completions", "/v1/chat/completions", "/health", "/metrics",
    "/v1/hone/profile", "/v1/hone/tuning", "/v1/embeddings", "/v1/models/{id}", "other"};
#define MODEL_PREFIX "/v1/models/"
#define MAX_CHOICES 64        /* prompts x n in one request */
#define MAX_BIAS 1024         /* logit_bias entries */

#define MAX_STATUS_ROWS 64
#define DISCARD_FACTOR 8      /* bodies up to 8 x max_body are read before the 413 */
#define MAX_STOP 4
#define MAX_URI_BYTES 8192
#define MAX_HEADER_BYTES 16384
#define MHD_MEMORY_LIMIT ((size_t)256 << 10) /* per connection: headers beyond this get MHD's page */
#define FD_RESERVE 256        /* descriptors kept for files, the engine and the listener */
#define LISTEN_BACKLOG 4096   /* the kernel caps it at net.core.somaxconn */
#define TICK_MS 100           /* how often suspended connections are checked for a gone client */

typedef struct conn_ctx conn_ctx;

struct hone_server {
    hone_server_opts o;
    hone_scheduler *sched;
    const hone_tokenizer *tok;
    const hone_chat_template *tmpl;
    struct MHD_Daemon *d;
    int port;
    MHD_socket listen_fd;
    atomic_int draining;
    atomic_int ready;         /* 0 while the model loads (sched, tok, tmpl not yet set) */
    char load_stage[32];      /* under mu */
    double load_progress;     /* under mu, 0..1 */
    char model_label[128];    /* model_id, safe inside a Prometheus label */
    /* KV admission (set_ready): a request's prompt + max_tokens are at most tokens_max, the
     * context or the pool (blocks x block size) whichever is less; token_bytes: K + V per token */
    int64_t tokens_max, kv_token_bytes;
    int starting;             /* libmicrohttpd's messages while starting go to start_err */
    char start_err[256];
    atomic_ullong next_id;
    pthread_mutex_t mu;       /* inflight, status counters */
    pthread_cond_t idle_cv;
    int64_t inflight;         /* generation requests submitted and not yet completed */
    struct { int route, status; uint64_t n; } counts[MAX_STATUS_ROWS];
    int n_counts;
    const char *const *aliases; /* o.model_aliases */
    hone_toolcall_style tool_style; /* how tmpl takes tools (server_tool_style), under mu */
    int tool_style_known;
    unsigned max_conns;       /* the daemon's connection limit */
    /* suspended connections (docs/architecture.md, "Connections"): a generation waits in no
     * thread; its connection is suspended and the engine's notify resumes it */
    pthread_mutex_t wake_mu;  /* every conn_ctx's wake fields, the list, stopping */
    conn_ctx *susp;           /* the suspended connections (a list through snext/sprev) */
    int64_t n_susp;
    uint64_t n_susp_total;    /* suspensions since start (hone_http_suspensions_total) */
    int stopping;             /* 1: no more suspending (the daemon is stopping) */
    pthread_t ticker;         /* finds suspended connections whose client left */
    int ticker_on;
    pthread_cond_t tick_cv;   /* under wake_mu: wakes the ticker to stop */
};

/* One HTTP request on a connection. */
struct conn_ctx {
    hone_server *srv;
    struct MHD_Connection *conn;
    int route;
    int is_post;
    char *body;
    size_t body_len, body_cap;
    int too_big;
    size_t discarded;         /* body bytes read and dropped after too_big */
    int responded;
    int status;
    double t0;
    char rid[72];             /* the request id: the client's X-Request-Id when sane, else ours */
    char method[12];
    char model_arg[128];      /* /v1/models/{id}: the id */
    char origin[256];         /* the Origin header when CORS allows it, else empty */
    /* a generation: n_choices requests (prompts x n; choice i is prompt i / n, seed + i % n) */
    int n_choices;
    hone_request *reqs[MAX_CHOICES];
    hone_request_state lasts[MAX_CHOICES];
    size_t sents[MAX_CHOICES];      /* text bytes already sent (stream) */
    int64_t lp_sent[MAX_CHOICES];   /* logprob entries already sent (stream) */
    size_t lp_off[MAX_CHOICES];     /* completions' text_offset of the next entry */
    int fin_sent[MAX_CHOICES];      /* stream: the choice's finish chunk is out */
    char *prompt_text[MAX_CHOICES]; /* completions: choice i's prompt as text (echo, text_offset) */
    int logprobs, top_logprobs, echo_on;
    int n_per;                /* choices per prompt (n) */
    int counted;              /* counted in srv->inflight */
    int chat, stream, include_usage;
    char id[48];
    long long created;
    int stage;                /* stream: 0 role chunk due (chat), 1 text, 2 all sent */
    char *pend;               /* SSE bytes ready to go */
    size_t pend_len, pend_off, pend_cap;
    /* tool calls (choice 0 only: n > 1 with tools is refused): the request's tools (the
     * output is parsed for calls), NULL for none */
    cJSON *tools;
    char *held;               /* stream: text seen but not yet sent (a call may be starting) */
    size_t held_len, seen;
    int tc_n;                 /* stream: calls announced so far (their arguments stream as they come) */
    int tc_fallback;          /* 1: a call that cannot stream (unknown name, string arguments): the end decides */
    size_t tc_args_sent[16];  /* argument bytes sent of each announced call */
    /* resuming (handle_generation, handle_embeddings): where the handler is when libmicrohttpd
     * calls it again after a resume, and what it still needs */
    int phase;                /* PHASE_*: 0 before the request was submitted */
    struct gen_request *g;    /* choices not yet submitted need it (n > 1, embeddings) */
    cJSON *g_root;            /* the body g borrows from */
    int n_submitted, b64;
    /* wake state, under srv->wake_mu */
    int suspended;            /* 1: suspended by us, in srv->susp */
    int notified;             /* the engine had news since wake_arm */
    int gone;                 /* the client left (the ticker saw it) or the daemon stops */
    int fd;                   /* the socket, for the ticker */
    conn_ctx *sprev, *snext;
};

enum { PHASE_NONE = 0, PHASE_GENERATION = 1, PHASE_EMBEDDINGS = 2 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- small helpers ---- */

/* One log line: UTC timestamp (ms), level, then the message. */
static void log_line(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void log_line(const char *level, const char *fmt, ...)
{
    struct timespec ts;
    struct tm tm;
    char when[32], small[1024], *msg = small; /* longer lines (logged prompts) on the heap */
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof small && (msg = malloc((size_t)n + 1))) vsnprintf(msg, (size_t)n + 1, fmt, again);
    if (!msg) msg = small;
    va_end(again);
    fprintf(stderr, "%s.%03dZ %s hone serve: %s\n", when, (int)(ts.tv_nsec / 1000000), level, msg);
    if (msg != small) free(msg);
}

/* A client's X-Request-Id is kept when it is 1 to 64 of [A-Za-z0-9._:-] (a balancer's id
 * then follows the request through our log); anything else gets an id of ours. */
static void request_id(hone_server *s, struct MHD_Connection *conn, char *out, size_t cap)
{
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
    size_t n = h ? strlen(h) : 0;
    int ok = n >= 1 && n <= 64;
    for (size_t i = 0; ok && i < n; i++)
        ok = (h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') || (h[i] >= '0' && h[i] <= '9') ||
             strchr("._:-", h[i]) != NULL;
    if (ok) snprintf(out, cap, "%s", h);
    else
        snprintf(out, cap, "req-%016llx",
                 (unsigned long long)(atomic_fetch_add(&s->next_id, 1) * 0x9e3779b97f4a7c15ull));
}

static int route_of(const char *url)
{
    for (int r = 0; r < R_OTHER; r++)
        if (strcmp(url, route_path[r]) == 0) return r;
    if (strncmp(url, MODEL_PREFIX, strlen(MODEL_PREFIX)) == 0 && url[strlen(MODEL_PREFIX)]) return R_MODEL;
    return R_OTHER;
}

/* 1 when name is the served model's id or one of its aliases. */
static int model_known(const hone_server *s, const char *name)
{
    if (strcmp(name, s->o.model_id) == 0) return 1;
    for (int i = 0; i < s->o.n_model_aliases; i++)
        if (strcmp(name, s->o.model_aliases[i]) == 0) return 1;
    return 0;
}

/* CORS: the request's Origin into cc->origin when --cors-origins allows it ("*" any, else an
 * exact entry of the comma-separated list); empty otherwise (no CORS headers then). */
static void cors_origin(conn_ctx *cc)
{
    const char *list = cc->srv->o.cors_origins;
    const char *o = MHD_lookup_connection_value(cc->conn, MHD_HEADER_KIND, "Origin");
    cc->origin[0] = 0;
    if (!list || !o || !*o || strlen(o) >= sizeof cc->origin || strpbrk(o, "\r\n")) return;
    size_t n = strlen(o);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len && *p == ' ') { p++; len--; }
        while (len && p[len - 1] == ' ') len--;
        if ((len == 1 && *p == '*') || (len == n && strncmp(p, o, n) == 0)) {
            snprintf(cc->origin, sizeof cc->origin, "%s", o);
            return;
        }
        if (!e) break;
        p = e + 1;
    }
}

/* The headers every response carries: the request id, CORS, and Connection: close only when
 * the connection must end (draining, an unread oversize body); otherwise it stays open. */
static void common_headers(conn_ctx *cc, struct MHD_Response *resp)
{
    MHD_add_response_header(resp, "X-Request-Id", cc->rid);
    if (cc->origin[0]) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", cc->origin);
        MHD_add_response_header(resp, "Vary", "Origin");
        MHD_add_response_header(resp, "Access-Control-Expose-Headers", "X-Request-Id");
    }
    if (atomic_load(&cc->srv->draining) || cc->too_big)
        MHD_add_response_header(resp, "Connection", "close");
}

static void count_status(hone_server *s, int route, int status)
{
    pthread_mutex_lock(&s->mu);
    int i;
    for (i = 0; i < s->n_counts; i++)
        if (s->counts[i].route == route && s->counts[i].status == status) break;
    if (i == s->n_counts && s->n_counts < MAX_STATUS_ROWS) {
        s->counts[i].route = route;
        s->counts[i].status = status;
        s->counts[i].n = 0;
        s->n_counts++;
    }
    if (i < s->n_counts) s->counts[i].n++;
    pthread_mutex_unlock(&s->mu);
}

static enum MHD_Result send_body(conn_ctx *cc, int status, const char *type, const char *body,
                                 size_t len)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    if (type) MHD_add_response_header(resp, "Content-Type", type);
    common_headers(cc, resp);
    if (status == 401) MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    enum MHD_Result ok = MHD_queue_response(cc->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    cc->responded = 1;
    cc->status = status;
    count_status(cc->srv, cc->route, status);
    return ok;
}

static enum MHD_Result send_json(conn_ctx *cc, int status, cJSON *j)
{
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!text) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":"
                                  "\"server_error\",\"param\":null,\"code\":null}}";
        return send_body(cc, 500, "application/json", oom, sizeof oom - 1);
    }
    enum MHD_Result ok = send_body(cc, status, "application/json", text, strlen(text));
    free(text);
    return ok;
}

static cJSON *error_object(const char *type, const char *param, const char *code, const char *msg)
{
    cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", type);
    if (param) cJSON_AddStringToObject(e, "param", param);
    else cJSON_AddNullToObject(e, "param");
    if (code) cJSON_AddStringToObject(e, "code", code);
    else cJSON_AddNullToObject(e, "code");
    return root;
}

static enum MHD_Result send_error(conn_ctx *cc, int status, const char *type, const char *param,
                                  const char *code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static enum MHD_Result send_error(conn_ctx *cc, int status, const char *type, const char *param,
                                  const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char *clean = hone_utf8_sanitize(msg, strlen(msg));
    enum MHD_Result ok = send_json(cc, status, error_object(type, param, code, clean ? clean : ""));
    free(clean);
    return ok;
}

/* ---- suspend and resume ----
 * A handler that must wait for the engine calls wake_arm, checks what it waits for without
 * blocking, and, when it is not there, wake_suspend: the connection leaves libmicrohttpd's
 * event loop unless news came since wake_arm (then it checks again). The request's notify
 * (on the engine thread) or the ticker resumes it, and libmicrohttpd calls the handler (or
 * the stream's reader) again. The flags under wake_mu make the check and the suspend one
 * step as the notifier sees it, so no news is lost and every resume follows its suspend. */

/* Clears the news flag before a check; 1 when the handler must give up (client gone,
 * stopping). */
static int wake_arm(conn_ctx *cc)
{
    hone_server *s = cc->srv;
    pthread_mutex_lock(&s->wake_mu);
    cc->notified = 0;
    int gone = cc->gone || s->stopping;
    pthread_mutex_unlock(&s->wake_mu);
    return gone;
}

/* Suspends cc's connection unless news came since wake_arm; 1 when it did suspend. */
static int wake_suspend(conn_ctx *cc)
{
    hone_server *s = cc->srv;
    int did = 0;
    pthread_mutex_lock(&s->wake_mu);
    if (!cc->notified && !cc->gone && !s->stopping) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(cc->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        cc->fd = ci ? ci->connect_fd : -1;
        cc->suspended = 1;
        cc->sprev = NULL;
        cc->snext = s->susp;
        if (s->susp) s->susp->sprev = cc;
        s->susp = cc;
        s->n_susp++;
        s->n_susp_total++;
        MHD_suspend_connection(cc->conn);
        did = 1;
    }
    pthread_mutex_unlock(&s->wake_mu);
    return did;
}

/* Under wake_mu: news for cc; resumes its connection when it is suspended. */
static void wake_locked(hone_server *s, conn_ctx *cc)
{
    cc->notified = 1;
    if (!cc->suspended) return;
    cc->suspended = 0;
    if (cc->sprev) cc->sprev->snext = cc->snext;
    else s->susp = cc->snext;
    if (cc->snext) cc->snext->sprev = cc->sprev;
    s->n_susp--;
    MHD_resume_connection(cc->conn);
}

/* hone_request_params.notify: the engine has news for one of cc's requests. */
static void wake_notify(void *user)
{
    conn_ctx *cc = user;
    pthread_mutex_lock(&cc->srv->wake_mu);
    wake_locked(cc->srv, cc);
    pthread_mutex_unlock(&cc->srv->wake_mu);
}

/* 1 when the peer of socket fd has closed its end (EOF or an error on the socket). */
static int socket_gone(int fd)
{
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* A suspended connection is out of libmicrohttpd's loop, which then sees neither its client
 * leave nor its timeout: every TICK_MS this thread peeks at each one's socket and resumes
 * those whose client is gone (the handler then cancels their requests). */
static void *ticker_main(void *arg)
{
    hone_server *s = arg;
    pthread_mutex_lock(&s->wake_mu);
    while (!s->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += TICK_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&s->tick_cv, &s->wake_mu, &ts);
        for (conn_ctx *cc = s->susp, *next; cc; cc = next) {
            next = cc->snext;
            if (cc->fd >= 0 && socket_gone(cc->fd)) {
                cc->gone = 1;
                wake_locked(s, cc);
            }
        }
    }
    pthread_mutex_unlock(&s->wake_mu);
    return NULL;
}

/* Asks the engine to drop every request of cc. */
static void cancel_all(conn_ctx *cc)
{
    for (int k = 0; k < cc->n_choices; k++)
        if (cc->reqs[k]) hone_request_cancel(cc->srv->sched, cc->reqs[k]);
}

/* Request validation fills one of these instead of answering at once. */
typedef struct {
    int status;
    const char *type, *code;
    char param[64];
    char msg[400];
} bad_request;

static int bad(bad_request *b, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int bad(bad_request *b, int status, const char *param, const char *code, const char *fmt, ...)
{
    va_list ap;
    b->status = status;
    b->type = "invalid_request_error";
    b->code = code;
    snprintf(b->param, sizeof b->param, "%s", param ? param : "");
    va_start(ap, fmt);
    vsnprintf(b->msg, sizeof b->msg, fmt, ap);
    va_end(ap);
    return -1;
}

static enum MHD_Result send_bad(conn_ctx *cc, const bad_request *b)
{
    return send_error(cc, b->status, b->type, b->param[0] ? b->param : NULL, b->code, "%s", b->msg);
}

/* ---- request parsing ---- */

typedef struct gen_request {
    int chat;
    int32_t *ids;
    int64_t n_ids;
    int64_t max_tokens;
    int max_set;                         /* 1: max_tokens (or max_completion_tokens) was given */
    hone_sampler_params sp;
    const char *stop[MAX_STOP];
    int n_stop;
    int stream, include_usage, ignore_eos;
    /* OpenAI's further parameters (parse_openai) */
    int n;                               /* choices per prompt */
    int n_prompts;                       /* completions: a batch of prompts (prompt 0 is ids) */
    int32_t *more_ids[MAX_CHOICES];      /* prompts 1.. */
    int64_t more_n[MAX_CHOICES];
    const char *prompt_text[MAX_CHOICES];/* completions: each prompt as a string (borrowed; NULL: ids) */
    int logprobs, top_logprobs, echo;
    int32_t bias_ids[MAX_BIAS];
    float bias_vals[MAX_BIAS];
    hone_grammar *grammar;    /* response_format / tool_choice: the output's grammar, or NULL */
    cJSON *tools;             /* tools the output may call (a copy), NULL for none */
    char *prompt;             /* chat with log_requests: the rendered prompt, for the log */
    int speculate;              /* HONE_REQUEST_SPEC_*: the "speculate" field (Hone's extension) */
    int spec_mode;              /* HONE_REQUEST_SPEC_EXACT / _DISTRIBUTION: "speculate_mode" (Hone's) */
} gen_request;

static int32_t *prompt_ids(const gen_request *g, int i) { return i ? g->more_ids[i - 1] : g->ids; }
static int64_t prompt_len(const gen_request *g, int i) { return i ? g->more_n[i - 1] : g->n_ids; }

static void gen_request_free(gen_request *g)
{
    free(g->ids);
    g->ids = NULL;
    for (int i = 0; i + 1 < g->n_prompts; i++) free(g->more_ids[i]);
    g->n_prompts = 0;
    hone_grammar_free(g->grammar); /* the scheduler keeps its own copy */
    g->grammar = NULL;
    cJSON_Delete(g->tools);
    g->tools = NULL;
    free(g->prompt);
    g->prompt = NULL;
}

static int get_number(cJSON *root, const char *name, double lo, double hi, int integral,
                      int *present, double *out, bad_request *b)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    *present = 0;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v))
        return bad(b, 400, name, "invalid_type", "'%s' must be a %s", name,
                   integral ? "integer" : "number");
    double x = v->valuedouble;
    if (!isfinite(x) || (integral && x != floor(x)))
        return bad(b, 400, name, "invalid_type", "'%s' must be %s", name,
                   integral ? "an integer" : "a finite number");
    if (x < lo || x > hi)
        return bad(b, 400, name, "invalid_value", "'%s' is %g; it must be between %g and %g", name,
                   x, lo, hi);
    *present = 1;
    *out = x;
    return 0;
}

static int get_bool(cJSON *root, const char *name, int *out, bad_request *b)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return bad(b, 400, name, "invalid_type", "'%s' must be a boolean", name);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* Text of a message's content: a string, or an array of {"type": "text", "text": ...}. */
static int content_text(cJSON *c, int i, char **out, bad_request *b)
{
    char param[48];
    snprintf(param, sizeof param, "messages[%d].content", i);
    if (cJSON_IsString(c)) {
        *out = strdup(c->valuestring);
        return *out ? 0 : bad(b, 500, NULL, NULL, "out of memory");
    }
    if (!cJSON_IsArray(c))
        return bad(b, 400, param, "invalid_type", "'%s' must be a string or an array of text parts",
                   param);
    size_t len = 0;
    cJSON *part;
    cJSON_ArrayForEach(part, c) {
        cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsObject(part) || !cJSON_IsString(type) || strcmp(type->valuestring, "text") ||
            !cJSON_IsString(text))
            return bad(b, 400, param, "invalid_value",
                       "'%s' parts must be {\"type\": \"text\", \"text\": \"...\"}", param);
        len += strlen(text->valuestring);
    }
    char *s = malloc(len + 1);
    if (!s) return bad(b, 500, NULL, NULL, "out of memory");
    s[0] = 0;
    cJSON_ArrayForEach(part, c) strcat(s, cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring);
    *out = s;
    return 0;
}

static int tool_chat_prompt(hone_server *s, cJSON *root, gen_request *g, bad_request *b);
static int wants_tool_prompt(cJSON *root, const gen_request *g);

/* A rendered chat prompt into g's ids; kept in g->prompt for the request log when bodies
 * are logged. Takes formatted. */
static int chat_encode(hone_server *s, char *formatted, gen_request *g, bad_request *b)
{
    int rc = 0;
    if (hone_tokenizer_encode(s->tok, formatted, strlen(formatted), s->tmpl->emits_bos ? 0 : -1, 1, &g->ids,
                              &g->n_ids))
        rc = bad(b, 400, "messages", "invalid_value", "%s", hone_error_last());
    if (s->o.log_requests && !rc) g->prompt = formatted;
    else free(formatted);
    return rc;
}

static int chat_prompt(hone_server *s, cJSON *root, gen_request *g, bad_request *b)
{
    if (wants_tool_prompt(root, g)) return tool_chat_prompt(s, root, g, b);
    cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!msgs) return bad(b, 400, "messages", "missing_required_parameter", "'messages' is required");
    if (!cJSON_IsArray(msgs)) return bad(b, 400, "messages", "invalid_type", "'messages' must be an array");
    int n = cJSON_GetArraySize(msgs);
    if (n == 0) return bad(b, 400, "messages", "invalid_value", "'messages' must not be empty");
    if (n > 4096) return bad(b, 400, "messages", "invalid_value", "too many messages (%d)", n);
    hone_chat_msg *m = calloc((size_t)n, sizeof *m);
    char **texts = calloc((size_t)n, sizeof *texts);
    char *formatted = NULL;
    int rc = -1, i = 0;
    if (!m || !texts) { bad(b, 500, NULL, NULL, "out of memory"); goto done; }
    cJSON *msg;
    cJSON_ArrayForEach(msg, msgs) {
        char param[48];
        snprintf(param, sizeof param, "messages[%d]", i);
        if (!cJSON_IsObject(msg)) { bad(b, 400, param, "invalid_type", "'%s' must be an object", param); goto done; }
        cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        snprintf(param, sizeof param, "messages[%d].role", i);
        if (!cJSON_IsString(role)) { bad(b, 400, param, "invalid_type", "'%s' must be a string", param); goto done; }
        const char *r = role->valuestring;
        if (strcmp(r, "developer") == 0) r = "system";
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant")) {
            bad(b, 400, param, "invalid_value",
                "'%s' is '%.40s'; it must be one of system, developer, user, assistant", param, r);
            goto done;
        }
        cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
        if (!content) {
            snprintf(param, sizeof param, "messages[%d].content", i);
            bad(b, 400, param, "missing_required_parameter", "'%s' is required", param);
            goto done;
        }
        if (content_text(content, i, &texts[i], b)) goto done;
        m[i].role = r;
        m[i].content = texts[i];
        i++;
    }
    if (hone_chat_format(&formatted, s->tmpl, m, n, 1)) {
        bad(b, 400, "messages", "invalid_value", "%s", hone_error_last());
        goto done;
    }
    rc = chat_encode(s, formatted, g, b);
done:
    for (int k = 0; texts && k < n; k++) free(texts[k]);
    free(texts);
    free(m);
    return rc;
}

/* One completions prompt (a string or an array of token ids) into ids / n. */
static int completion_one(hone_server *s, cJSON *p, int32_t **ids, int64_t *n, const char **text, bad_request *b)
{
    *text = NULL;
    if (cJSON_IsString(p)) {
        *text = p->valuestring;
        if (hone_tokenizer_encode(s->tok, p->valuestring, strlen(p->valuestring), -1, 0, ids, n))
            return bad(b, 400, "prompt", "invalid_value", "%s", hone_error_last());
        return 0;
    }
    int k = cJSON_GetArraySize(p);
    if (!(*ids = malloc((size_t)(k ? k : 1) * sizeof **ids))) return bad(b, 500, NULL, NULL, "out of memory");
    int64_t nv = hone_tokenizer_n_vocab(s->tok);
    cJSON *x;
    cJSON_ArrayForEach(x, p) {
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 0 ||
            x->valuedouble >= (double)nv)
            return bad(b, 400, "prompt", "invalid_value",
                       "'prompt' token ids must be integers in [0, %lld)", (long long)nv);
        (*ids)[(*n)++] = (int32_t)x->valuedouble;
    }
    return 0;
}

/* A request's prompts under key `name` ('prompt' of /v1/completions, 'input' of
 * /v1/embeddings): a string, an array of token ids, or a batch (an array of strings or of
 * token-id arrays, at most MAX_CHOICES: one choice set per prompt, as OpenAI answers it). */
static int prompts_of(hone_server *s, cJSON *root, const char *name, gen_request *g, bad_request *b)
{
    cJSON *p = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!p) return bad(b, 400, name, "missing_required_parameter", "'%s' is required", name);
    if (!cJSON_IsString(p) && !cJSON_IsArray(p))
        return bad(b, 400, name, "invalid_type",
                   "'%s' must be a string, an array of token ids, or an array of those", name);
    cJSON *first = cJSON_IsArray(p) ? cJSON_GetArrayItem(p, 0) : NULL;
    int batch = first && (cJSON_IsString(first) || cJSON_IsArray(first));
    int n = batch ? cJSON_GetArraySize(p) : 1;
    if (n > MAX_CHOICES) return bad(b, 400, name, "invalid_value", "at most %d prompts in one request", MAX_CHOICES);
    cJSON *x = batch ? p->child : p;
    for (int i = 0; i < n; i++, x = x->next) {
        if (batch && !cJSON_IsString(x) && !cJSON_IsArray(x))
            return bad(b, 400, name, "invalid_type", "a batch of prompts holds strings or token-id arrays");
        int32_t **ids = i ? &g->more_ids[i - 1] : &g->ids;
        int64_t *len = i ? &g->more_n[i - 1] : &g->n_ids;
        g->n_prompts = i + 1;
        if (completion_one(s, x, ids, len, &g->prompt_text[i], b)) {
            snprintf(b->param, sizeof b->param, "%s", name);
            return -1;
        }
    }
    return 0;
}

static int completion_prompt(hone_server *s, cJSON *root, gen_request *g, bad_request *b)
{
    return prompts_of(s, root, "prompt", g, b);
}

/* OpenAI's parameters beyond the basic sampler: n, logprobs / top_logprobs, echo,
 * presence_penalty, frequency_penalty, logit_bias. */
static int parse_openai(hone_server *s, cJSON *root, gen_request *g, bad_request *b)
{
    double x;
    int has;
    g->n = 1;
    if (get_number(root, "n", 1, MAX_CHOICES, 1, &has, &x, b)) return -1;
    if (has) g->n = (int)x;
    if (get_number(root, "presence_penalty", -2, 2, 0, &has, &x, b)) return -1;
    if (has) g->sp.presence_penalty = (float)x;
    if (get_number(root, "frequency_penalty", -2, 2, 0, &has, &x, b)) return -1;
    if (has) g->sp.frequency_penalty = (float)x;
    cJSON *lp = cJSON_GetObjectItemCaseSensitive(root, "logprobs");
    if (g->chat) { /* logprobs: bool; top_logprobs: 0..20 and needs logprobs */
        if (get_bool(root, "logprobs", &g->logprobs, b)) return -1;
        if (get_number(root, "top_logprobs", 0, HONE_SAMPLER_TOP_LOGPROBS_MAX, 1, &has, &x, b)) return -1;
        if (has && !g->logprobs)
            return bad(b, 400, "top_logprobs", "invalid_value", "'top_logprobs' needs 'logprobs': true");
        if (has) g->top_logprobs = (int)x;
        if (cJSON_GetObjectItemCaseSensitive(root, "echo"))
            return bad(b, 400, "echo", "unsupported_parameter", "'echo' is a /v1/completions parameter");
    } else { /* logprobs: the number of alternatives, 0..20 (OpenAI's legacy API allows 5) */
        if (lp && cJSON_IsBool(lp))
            return bad(b, 400, "logprobs", "invalid_type", "'logprobs' must be an integer on /v1/completions");
        if (get_number(root, "logprobs", 0, HONE_SAMPLER_TOP_LOGPROBS_MAX, 1, &has, &x, b)) return -1;
        if (has) {
            g->logprobs = 1;
            g->top_logprobs = (int)x;
        }
        if (get_bool(root, "echo", &g->echo, b)) return -1;
    }
    cJSON *lb = cJSON_GetObjectItemCaseSensitive(root, "logit_bias");
    if (lb && !cJSON_IsNull(lb)) {
        if (!cJSON_IsObject(lb))
            return bad(b, 400, "logit_bias", "invalid_type", "'logit_bias' must map token ids to numbers");
        int64_t nv = hone_tokenizer_n_vocab(s->tok);
        cJSON *e;
        cJSON_ArrayForEach(e, lb) {
            char *end = NULL;
            long long id = strtoll(e->string, &end, 10);
            if (!*e->string || *end || id < 0 || id >= nv)
                return bad(b, 400, "logit_bias", "invalid_value",
                           "'logit_bias' key '%.40s' is not a token id in [0, %lld)", e->string, (long long)nv);
            if (!cJSON_IsNumber(e) || !(e->valuedouble >= -100 && e->valuedouble <= 100))
                return bad(b, 400, "logit_bias", "invalid_value",
                           "'logit_bias' values must be numbers in [-100, 100]");
            if (g->sp.n_bias == MAX_BIAS)
                return bad(b, 400, "logit_bias", "invalid_value", "at most %d 'logit_bias' entries", MAX_BIAS);
            g->bias_ids[g->sp.n_bias] = (int32_t)id;
            g->bias_vals[g->sp.n_bias++] = (float)e->valuedouble;
        }
        g->sp.bias_ids = g->bias_ids;
        g->sp.bias_vals = g->bias_vals;
    }
    return 0;
}

/* ---- structured output and tools (requests) ---- */

/* How the chat template takes tools (the template's own rendering or the fallback, and the
 * call format its prompt teaches): found once, by a probe render, on the first request that
 * needs it. */
static hone_toolcall_style server_tool_style(hone_server *s)
{
    pthread_mutex_lock(&s->mu);
    if (!s->tool_style_known) {
        hone_toolcall_style_of(&s->tool_style, s->tmpl);
        s->tool_style_known = 1;
    }
    hone_toolcall_style st = s->tool_style;
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* response_format (json_object, json_schema), tools and tool_choice: g->grammar is the
 * output's grammar when the request constrains it, g->tools the tools to parse calls of. */
static int structured_parse(hone_server *s, cJSON *root, int chat, gen_request *g, bad_request *b)
{
    cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_format");
    if (rf && !cJSON_IsNull(rf)) {
        cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
        if (!cJSON_IsObject(rf) || !cJSON_IsString(type))
            return bad(b, 400, "response_format", "invalid_type", "'response_format' must be an object with a 'type'");
        const char *t = type->valuestring;
        if (!strcmp(t, "json_object")) {
            if (hone_json_schema_compile(&g->grammar, NULL, NULL))
                return bad(b, 500, NULL, NULL, "%s", hone_error_last());
        } else if (!strcmp(t, "json_schema")) {
            cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
            cJSON *sch = cJSON_GetObjectItemCaseSensitive(js, "schema");
            if (!cJSON_IsObject(js))
                return bad(b, 400, "response_format.json_schema", "missing_required_parameter",
                           "'response_format.json_schema' must be an object with a 'schema'");
            cJSON *name = cJSON_GetObjectItemCaseSensitive(js, "name");
            if (name && !cJSON_IsString(name))
                return bad(b, 400, "response_format.json_schema.name", "invalid_type",
                           "'response_format.json_schema.name' must be a string");
            if (sch && !cJSON_IsObject(sch) && !cJSON_IsBool(sch))
                return bad(b, 400, "response_format.json_schema.schema", "invalid_type",
                           "'response_format.json_schema.schema' must be an object");
            if (hone_json_schema_compile(&g->grammar, sch, NULL))
                return bad(b, 400, "response_format.json_schema.schema", "invalid_value", "%s", hone_error_last());
        } else if (strcmp(t, "text")) {
            return bad(b, 400, "response_format.type", "invalid_value",
                       "'response_format.type' is '%.40s'; it must be one of text, json_object, json_schema", t);
        }
    }
    cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    cJSON *choice = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    if (tools && cJSON_IsNull(tools)) tools = NULL;
    if (choice && cJSON_IsNull(choice)) choice = NULL;
    if (!tools && !choice) return 0;
    if (!chat) return bad(b, 400, tools ? "tools" : "tool_choice", "unsupported_parameter",
                          "tools are only supported on /v1/chat/completions");
    if (tools && !cJSON_IsArray(tools)) return bad(b, 400, "tools", "invalid_type", "'tools' must be an array");
    const char *mode = tools && cJSON_GetArraySize(tools) ? "auto" : "none", *name = NULL;
    if (cJSON_IsString(choice)) {
        mode = choice->valuestring;
        if (strcmp(mode, "none") && strcmp(mode, "auto") && strcmp(mode, "required"))
            return bad(b, 400, "tool_choice", "invalid_value",
                       "'tool_choice' is '%.40s'; it must be none, auto, required or {\"type\": \"function\", ...}", mode);
    } else if (choice) {
        cJSON *fn = cJSON_GetObjectItemCaseSensitive(choice, "function");
        cJSON *nm = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsObject(choice) || !cJSON_IsString(nm))
            return bad(b, 400, "tool_choice", "invalid_type",
                       "'tool_choice' must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}");
        mode = "named";
        name = nm->valuestring;
    }
    int forced = !strcmp(mode, "required") || !strcmp(mode, "named");
    if (strcmp(mode, "none") && (!tools || cJSON_GetArraySize(tools) == 0))
        return bad(b, 400, "tool_choice", "invalid_value", "'tool_choice' '%s' needs a non-empty 'tools'", mode);
    if (!strcmp(mode, "none")) return 0;
    if (forced) {
        if (g->grammar)
            return bad(b, 400, "tool_choice", "invalid_value",
                       "'tool_choice' %s cannot be combined with a JSON 'response_format'", mode);
        hone_toolcall_style st = server_tool_style(s);
        if (hone_toolcall_grammar(&g->grammar, tools, name, &st))
            return bad(b, 400, name ? "tool_choice" : "tools", "invalid_value", "%s", hone_error_last());
    }
    if (!(g->tools = cJSON_Duplicate(tools, 1))) return bad(b, 500, NULL, NULL, "out of memory");
    return 0;
}

/* 1 when the conversation needs the tool rendering: tools to offer, or tool results and
 * assistant tool calls in its history. */
static int wants_tool_prompt(cJSON *root, const gen_request *g)
{
    if (g->tools) return 1;
    cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(root, "messages")) {
        cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
        cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        if ((cJSON_IsString(r) && !strcmp(r->valuestring, "tool")) || (tc && !cJSON_IsNull(tc))) return 1;
    }
    return 0;
}

/* The chat prompt of a conversation with tools or tool history: through the model's own
 * template where it renders them, else through engine/toolcall.c's plain messages. */
static int tool_chat_prompt(hone_server *s, cJSON *root, gen_request *g, bad_request *b)
{
    cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
        return bad(b, 400, "messages", "invalid_value", "'messages' must be a non-empty array");
    if (cJSON_GetArraySize(msgs) > 4096) return bad(b, 400, "messages", "invalid_value", "too many messages");
    hone_toolcall_style st = server_tool_style(s);
    char *formatted = NULL;
    if (hone_toolcall_prompt(&formatted, s->tmpl, &st, msgs, g->tools))
        return bad(b, 400, "messages", "invalid_value", "%s", hone_error_last());
    return chat_encode(s, formatted, g, b);
}

/* Admission by KV room: prompt i plus the completion must fit s->tokens_max (the context, or
 * the pool where that is smaller), checked before any work; OpenAI's 400 otherwise. An unset
 * max_tokens is the room left (completions keep their default cap: choice_max_tokens). */
static int64_t request_tokens_max(const hone_server *s)
{
    return s->tokens_max > 0 ? s->tokens_max : s->o.n_ctx;
}

static int context_check(const hone_server *s, const gen_request *g, int i, const char *what, bad_request *b)
{
    int64_t p = prompt_len(g, i), lim = request_tokens_max(s);
    if (p >= s->o.n_ctx)
        return bad(b, 400, what, "context_length_exceeded",
                   "This model's maximum context length is %lld tokens; the prompt has %lld tokens "
                   "(at most %lld leaves room for one generated token)",
                   (long long)s->o.n_ctx, (long long)p, (long long)(s->o.n_ctx - 1));
    if (p >= lim)
        return bad(b, 400, what, "context_length_exceeded",
                   "This model's maximum context length is %lld tokens and the KV cache holds %lld tokens "
                   "per request; the prompt has %lld tokens", (long long)s->o.n_ctx, (long long)lim,
                   (long long)p);
    if (g->max_set && p + g->max_tokens > lim)
        return bad(b, 400, what, "context_length_exceeded",
                   "This model's maximum context length is %lld tokens. However, you requested %lld tokens "
                   "(%lld in the %s, %lld in the completion). Please reduce the length of the %s or "
                   "completion.", (long long)lim, (long long)(p + g->max_tokens), (long long)p, what,
                   (long long)g->max_tokens, what);
    return 0;
}

/* Validates and tokenises a generation request. */
static int parse_generation(hone_server *s, cJSON *root, int chat, gen_request *g, bad_request *b)
{
    hone_sampler_params sp = HONE_SAMPLER_PARAMS_INIT;
    double x;
    int has;
    memset(g, 0, sizeof *g);
    g->chat = chat;
    g->sp = sp;
    g->sp.repeat_last_n = 0;
    g->sp.seed = ((uint64_t)time(NULL) << 20) ^ atomic_fetch_add(&s->next_id, 1) * 0x9e3779b97f4a7c15ull;
    g->max_tokens = chat ? s->o.n_ctx : 16;

    cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (model && !cJSON_IsNull(model)) {
        if (!cJSON_IsString(model)) return bad(b, 400, "model", "invalid_type", "'model' must be a string");
        if (!model_known(s, model->valuestring))
            return bad(b, 404, "model", "model_not_found",
                       "The model '%.100s' does not exist; this server serves '%s'",
                       model->valuestring, s->o.model_id);
    }
    if (get_number(root, "max_tokens", 0, (double)s->o.n_ctx, 1, &has, &x, b)) return -1;
    if (has) g->max_tokens = (int64_t)x, g->max_set = 1;
    if (get_number(root, "max_completion_tokens", 1, (double)s->o.n_ctx, 1, &has, &x, b)) return -1;
    if (has) g->max_tokens = (int64_t)x, g->max_set = 1;
    if (get_number(root, "temperature", 0, 2, 0, &has, &x, b)) return -1;
    if (has) g->sp.temperature = (float)x;
    if (get_number(root, "top_p", 0, 1, 0, &has, &x, b)) return -1;
    if (has) {
        if (x <= 0) return bad(b, 400, "top_p", "invalid_value", "'top_p' must be in (0, 1]");
        g->sp.top_p = (float)x;
    }
    if (get_number(root, "top_k", 0, 1 << 30, 1, &has, &x, b)) return -1;
    if (has) g->sp.top_k = (int32_t)x;
    if (get_number(root, "min_p", 0, 1, 0, &has, &x, b)) return -1;
    if (has) g->sp.min_p = (float)x;
    if (get_number(root, "repetition_penalty", 0.01, 100, 0, &has, &x, b)) return -1;
    if (has) { g->sp.repeat_penalty = (float)x; g->sp.repeat_last_n = 64; }
    if (get_number(root, "seed", -9.2e18, 1.8e19, 1, &has, &x, b)) return -1;
    if (has) g->sp.seed = x < 0 ? (uint64_t)(int64_t)x : (uint64_t)x;
    if (parse_openai(s, root, g, b)) return -1;
    if (g->max_tokens == 0 && !g->echo)
        return bad(b, 400, "max_tokens", "invalid_value", "'max_tokens' is 0; it must be at least 1 (0 only with 'echo')");
    if (g->max_tokens == 0 && g->stream)
        return bad(b, 400, "max_tokens", "invalid_value", "'max_tokens' 0 cannot be streamed");
    if (get_bool(root, "stream", &g->stream, b) || get_bool(root, "ignore_eos", &g->ignore_eos, b))
        return -1;
    cJSON *spec = cJSON_GetObjectItemCaseSensitive(root, "speculate"); /* "lookup" | "self" | "draft" | "none" */
    if (spec && !cJSON_IsNull(spec)) {
        const char *v = cJSON_IsString(spec) ? spec->valuestring : "";
        g->speculate = !strcmp(v, "lookup") ? HONE_REQUEST_SPEC_LOOKUP
                       : !strcmp(v, "self") ? HONE_REQUEST_SPEC_SELF
                       : !strcmp(v, "draft") ? HONE_REQUEST_SPEC_DRAFT
                       : !strcmp(v, "none") ? HONE_REQUEST_SPEC_OFF
                                            : -1;
        if (g->speculate < 0)
            return bad(b, 400, "speculate", "invalid_value",
                       "'speculate' must be \"lookup\", \"self\", \"draft\" or \"none\"");
    }
    cJSON *smode = cJSON_GetObjectItemCaseSensitive(root, "speculate_mode"); /* "exact" | "distribution" */
    if (smode && !cJSON_IsNull(smode)) {
        const char *v = cJSON_IsString(smode) ? smode->valuestring : "";
        g->spec_mode = !strcmp(v, "exact") ? HONE_REQUEST_SPEC_EXACT
                       : !strcmp(v, "distribution") ? HONE_REQUEST_SPEC_DISTRIBUTION
                                                    : -1;
        if (g->spec_mode < 0)
            return bad(b, 400, "speculate_mode", "invalid_value",
                       "'speculate_mode' must be \"exact\" or \"distribution\"");
    }
    cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so))
            return bad(b, 400, "stream_options", "invalid_type", "'stream_options' must be an object");
        if (!g->stream)
            return bad(b, 400, "stream_options", "invalid_value",
                       "'stream_options' is only allowed when 'stream' is true");
        if (get_bool(so, "include_usage", &g->include_usage, b)) return -1;
    }
    cJSON *stop = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (stop && !cJSON_IsNull(stop)) {
        if (cJSON_IsString(stop)) {
            g->stop[g->n_stop++] = stop->valuestring;
        } else if (cJSON_IsArray(stop)) {
            if (cJSON_GetArraySize(stop) > MAX_STOP)
                return bad(b, 400, "stop", "invalid_value", "'stop' takes at most %d strings", MAX_STOP);
            cJSON *it;
            cJSON_ArrayForEach(it, stop) {
                if (!cJSON_IsString(it))
                    return bad(b, 400, "stop", "invalid_type", "'stop' must hold strings");
                g->stop[g->n_stop++] = it->valuestring;
            }
        } else {
            return bad(b, 400, "stop", "invalid_type", "'stop' must be a string or an array of strings");
        }
        for (int i = 0; i < g->n_stop; i++) {
            if (!g->stop[i][0]) return bad(b, 400, "stop", "invalid_value", "stop strings must not be empty");
            if (!hone_utf8_valid((const unsigned char *)g->stop[i], strlen(g->stop[i])))
                return bad(b, 400, "stop", "invalid_value", "stop strings must be valid UTF-8");
        }
    }
    if (structured_parse(s, root, chat, g, b)) return -1;
    /* Tool calls are parsed and streamed for one choice (conn_ctx's held / tc_* state is choice
     * 0's), and a streamed call's deltas carry no logprobs: these combinations are refused.
     * response_format goes with any n (each choice's request has the grammar). */
    if (g->tools && g->n > 1)
        return bad(b, 400, "n", "unsupported_parameter", "'n' > 1 is not supported together with 'tools'");
    if (g->tools && g->stream && g->logprobs)
        return bad(b, 400, "logprobs", "unsupported_parameter",
                   "'logprobs' is not supported together with 'tools' when streaming");
    if (chat ? chat_prompt(s, root, g, b) : completion_prompt(s, root, g, b)) return -1;
    if (chat) g->n_prompts = 1;
    const char *what = chat ? "messages" : "prompt";
    if ((int64_t)g->n_prompts * g->n > MAX_CHOICES)
        return bad(b, 400, "n", "invalid_value", "prompts x n is %d; at most %d choices per request",
                   g->n_prompts * g->n, MAX_CHOICES);
    for (int i = 0; i < g->n_prompts; i++) {
        if (prompt_len(g, i) == 0) return bad(b, 400, what, "invalid_value", "the prompt is empty");
        if (context_check(s, g, i, what, b)) return -1;
    }
    return 0;
}

/* ---- responses ---- */

/* Usage over every choice: each prompt's tokens once (n choices share it), every choice's
 * completion tokens. */
static void add_usage(cJSON *obj, conn_ctx *cc)
{
    int64_t prompt = 0, completion = 0, cached = 0;
    for (int i = 0; i < cc->n_choices; i++) {
        completion += cc->lasts[i].completion_tokens;
        if (i % cc->n_per == 0) { /* choices of one prompt share it: counted once */
            prompt += cc->lasts[i].prompt_tokens;
            cached += cc->lasts[i].cached_tokens;
        }
    }
    cJSON *u = cJSON_AddObjectToObject(obj, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)completion);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(prompt + completion));
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", (double)cached);
}

static const char *finish_name(hone_finish f)
{
    return f == HONE_FINISH_STOP ? "stop" : "length";
}

static cJSON *response_head(conn_ctx *cc, const char *object)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", cc->id);
    cJSON_AddStringToObject(j, "object", object);
    cJSON_AddNumberToObject(j, "created", (double)cc->created);
    cJSON_AddStringToObject(j, "model", cc->srv->o.model_id);
    return j;
}

/* ---- logprobs in OpenAI's shapes ---- */

/* A token's raw bytes (special tokens as their text), into buf[cap]; returns the length. */
static size_t token_bytes(const hone_server *s, int32_t id, char *buf, size_t cap)
{
    size_t n = 0;
    if (hone_tokenizer_decode_piece(s->tok, id, HONE_TOKENIZER_DECODE_SPECIAL, buf, cap, &n)) return 0;
    return n;
}

/* A logprob as JSON: -inf (a token the model cannot produce) as OpenAI's -9999.0. */
static double lp_json(float lp) { return isfinite(lp) ? (double)lp : -9999.0; }

/* {"token", "logprob", "bytes"} of chat's logprobs.content[] and of its top_logprobs[]. */
static cJSON *chat_token(const hone_server *s, int32_t id, float lp)
{
    char buf[256];
    size_t n = token_bytes(s, id, buf, sizeof buf);
    cJSON *t = cJSON_CreateObject();
    char *clean = hone_utf8_sanitize(buf, n);
    cJSON_AddStringToObject(t, "token", clean ? clean : "");
    free(clean);
    cJSON_AddNumberToObject(t, "logprob", lp_json(lp));
    cJSON *bytes = cJSON_AddArrayToObject(t, "bytes");
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)buf[i]));
    return t;
}

/* Chat: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}], "refusal": null}. */
static cJSON *chat_logprobs(const hone_server *s, const hone_token_logprob *e, int64_t n)
{
    cJSON *j = cJSON_CreateObject(), *content = cJSON_AddArrayToObject(j, "content");
    for (int64_t i = 0; i < n; i++) {
        cJSON *t = chat_token(s, e[i].token, e[i].logprob);
        cJSON *top = cJSON_AddArrayToObject(t, "top_logprobs");
        for (int k = 0; k < e[i].n_top; k++) cJSON_AddItemToArray(top, chat_token(s, e[i].top_ids[k], e[i].top_lps[k]));
        cJSON_AddItemToArray(content, t);
    }
    cJSON_AddNullToObject(j, "refusal");
    return j;
}

/* Completions: {"tokens", "token_logprobs", "top_logprobs" ({token: logprob} each), "text_offset"}
 * for entries e[0, n); an entry with a NaN logprob (the prompt's first token) has null
 * logprob and top_logprobs. *offset is the text offset (bytes) of e[0]; it moves past e[n-1]. */
static cJSON *completion_logprobs(const hone_server *s, const hone_token_logprob *e, int64_t n, size_t *offset)
{
    cJSON *j = cJSON_CreateObject();
    cJSON *tokens = cJSON_AddArrayToObject(j, "tokens"), *lps = cJSON_AddArrayToObject(j, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(j, "top_logprobs"), *offs = cJSON_AddArrayToObject(j, "text_offset");
    char buf[256];
    for (int64_t i = 0; i < n; i++) {
        size_t len = token_bytes(s, e[i].token, buf, sizeof buf);
        char *clean = hone_utf8_sanitize(buf, len);
        cJSON_AddItemToArray(tokens, cJSON_CreateString(clean ? clean : ""));
        free(clean);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)*offset));
        *offset += len;
        if (isnan(e[i].logprob)) {
            cJSON_AddItemToArray(lps, cJSON_CreateNull());
            cJSON_AddItemToArray(tops, cJSON_CreateNull());
            continue;
        }
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(lp_json(e[i].logprob)));
        cJSON *top = cJSON_CreateObject();
        for (int k = 0; k < e[i].n_top; k++) {
            size_t tl = token_bytes(s, e[i].top_ids[k], buf, sizeof buf);
            char *name = hone_utf8_sanitize(buf, tl);
            if (name && !cJSON_GetObjectItemCaseSensitive(top, name))
                cJSON_AddNumberToObject(top, name, lp_json(e[i].top_lps[k]));
            free(name);
        }
        cJSON_AddItemToArray(tops, top);
    }
    return j;
}

/* Appends to array `completions` of a completions logprobs object `into` the entries of `more`. */
static void completion_logprobs_append(cJSON *into, cJSON *more)
{
    static const char *const keys[4] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
    for (int k = 0; k < 4; k++) {
        cJSON *dst = cJSON_GetObjectItemCaseSensitive(into, keys[k]);
        cJSON *src = cJSON_DetachItemFromObjectCaseSensitive(more, keys[k]);
        cJSON *it;
        while (src && (it = src->child)) cJSON_AddItemToArray(dst, cJSON_DetachItemViaPointer(src, it));
        cJSON_Delete(src);
    }
    cJSON_Delete(more);
}

/* Choice i's logprobs object for entries from the generated tokens' list (from index `from`),
 * with the prompt's entries first when `prompt` (echo); NULL when logprobs are off. */
static cJSON *choice_logprobs(conn_ctx *cc, int i, int prompt, int64_t *from)
{
    hone_server *s = cc->srv;
    if (!cc->logprobs) return NULL;
    hone_token_logprob *e = NULL;
    int64_t n = 0;
    cJSON *j = NULL;
    if (prompt && cc->echo_on && !cc->chat) {
        hone_token_logprob *pe = NULL;
        int64_t pn = 0;
        hone_request_prompt_logprobs(s->sched, cc->reqs[i], &pe, &pn);
        j = completion_logprobs(s, pe, pn, &cc->lp_off[i]);
        free(pe);
    }
    hone_request_logprobs(s->sched, cc->reqs[i], *from, &e, &n);
    *from += n;
    if (cc->chat) {
        j = chat_logprobs(s, e, n);
    } else {
        cJSON *more = completion_logprobs(s, e, n, &cc->lp_off[i]);
        if (j) completion_logprobs_append(j, more);
        else j = more;
    }
    free(e);
    return j;
}

/* One choice (index i): chat delta / message or completion text (text NULL for none), its
 * logprobs (NULL: null), appended to j's "choices" (created when absent). */
static void add_choice(cJSON *j, conn_ctx *cc, int i, const char *text, size_t len, int role,
                       const char *finish, int whole_message, cJSON *logprobs)
{
    cJSON *choices = cJSON_GetObjectItemCaseSensitive(j, "choices");
    if (!choices) choices = cJSON_AddArrayToObject(j, "choices");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, c);
    cJSON_AddNumberToObject(c, "index", i);
    char *clean = text ? hone_utf8_sanitize(text, len) : NULL;
    if (cc->chat) {
        cJSON *m = cJSON_AddObjectToObject(c, whole_message ? "message" : "delta");
        if (role || whole_message) cJSON_AddStringToObject(m, "role", "assistant");
        if (clean) cJSON_AddStringToObject(m, "content", clean);
        if (whole_message) cJSON_AddNullToObject(m, "refusal");
    } else {
        cJSON_AddStringToObject(c, "text", clean ? clean : "");
    }
    if (logprobs) cJSON_AddItemToObject(c, "logprobs", logprobs);
    else cJSON_AddNullToObject(c, "logprobs");
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    free(clean);
}

/* ---- tool calls (responses) ---- */

static void tool_call_id(conn_ctx *cc, int i, char *out, size_t cap)
{
    hone_toolcall_style st = server_tool_style(cc->srv);
    hone_toolcall_id(out, cap, &st, (unsigned long long)(atomic_fetch_add(&cc->srv->next_id, 1) *
                                                         0x9e3779b97f4a7c15ull ^ (uint64_t)(i + 1)));
}

/* The whole message of a chat answer (choice 0) whose text holds tool calls: content (or
 * null), tool_calls, finish_reason "tool_calls", logprobs (taken; NULL: null). 0 when the text
 * holds no call (nothing added, logprobs not taken). */
static int add_tool_choice(cJSON *j, conn_ctx *cc, const char *text, size_t len, cJSON *logprobs)
{
    hone_toolcall_result r;
    if (hone_toolcall_parse(&r, text, len, cc->tools) || r.n_calls == 0) {
        hone_toolcall_result_clear(&r);
        return 0;
    }
    cJSON *choices = cJSON_AddArrayToObject(j, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, c);
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON *m = cJSON_AddObjectToObject(c, "message");
    cJSON_AddStringToObject(m, "role", "assistant");
    char *clean = r.content ? hone_utf8_sanitize(r.content, strlen(r.content)) : NULL;
    if (clean) cJSON_AddStringToObject(m, "content", clean);
    else cJSON_AddNullToObject(m, "content");
    free(clean);
    cJSON *calls = cJSON_AddArrayToObject(m, "tool_calls");
    for (int i = 0; i < r.n_calls; i++) {
        char id[40];
        tool_call_id(cc, i, id, sizeof id);
        cJSON *tc = cJSON_CreateObject(), *fn;
        cJSON_AddStringToObject(tc, "id", id);
        cJSON_AddStringToObject(tc, "type", "function");
        fn = cJSON_AddObjectToObject(tc, "function");
        cJSON_AddStringToObject(fn, "name", r.calls[i].name);
        cJSON_AddStringToObject(fn, "arguments", r.calls[i].arguments);
        cJSON_AddItemToArray(calls, tc);
    }
    if (logprobs) cJSON_AddItemToObject(c, "logprobs", logprobs);
    else cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddStringToObject(c, "finish_reason", "tool_calls");
    hone_toolcall_result_clear(&r);
    return 1;
}

/* A chunk with one delta of tool_calls[index]: the first names the call (id, type, name,
 * empty arguments), later ones carry arguments text. */
static cJSON *tool_delta(conn_ctx *cc, int index, const char *id, const char *name, const char *args)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", cc->id);
    cJSON_AddStringToObject(j, "object", "chat.completion.chunk");
    cJSON_AddNumberToObject(j, "created", (double)cc->created);
    cJSON_AddStringToObject(j, "model", cc->srv->o.model_id);
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(j, "choices"), c);
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON *d = cJSON_AddObjectToObject(c, "delta"), *tc = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(d, "tool_calls"), tc);
    cJSON_AddNumberToObject(tc, "index", index);
    if (id) {
        cJSON_AddStringToObject(tc, "id", id);
        cJSON_AddStringToObject(tc, "type", "function");
    }
    cJSON *fn = cJSON_AddObjectToObject(tc, "function");
    if (name) cJSON_AddStringToObject(fn, "name", name);
    cJSON_AddStringToObject(fn, "arguments", args);
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddNullToObject(c, "finish_reason");
    return j;
}

static int pend_event(conn_ctx *cc, cJSON *j);
static int pend_add(conn_ctx *cc, const char *p, size_t n);
static int stream_choice_end(conn_ctx *cc, int i, const char *finish);
static int stream_close(conn_ctx *cc);
static int stream_live_calls(conn_ctx *cc);

/* stream_more for a request with tools (one choice; after the role chunk): text that is surely content streams as it comes;
 * from where a call may start it is held, and at the end the held text's calls go out as
 * OpenAI sends them (per call a delta with id, type and name, then its arguments), with
 * finish_reason "tool_calls". */
static int stream_tools_more(conn_ctx *cc)
{
    const char *obj = "chat.completion.chunk";
    char *text = NULL;
    size_t len = 0;
    if (hone_request_wait(cc->srv->sched, cc->reqs[0], cc->seen, 0, &cc->lasts[0], &text, &len)) {
        free(text);
        return -1;
    }
    if (!len && !cc->lasts[0].done) return 0; /* nothing new yet */
    int rc = 0;
    if (len) {
        char *h = realloc(cc->held, cc->held_len + len + 1);
        if (!h) {
            free(text);
            return -1;
        }
        cc->held = h;
        memcpy(cc->held + cc->held_len, text, len);
        cc->held_len += len;
        cc->held[cc->held_len] = 0;
        cc->seen += len;
    }
    free(text);
    int done = cc->lasts[0].done && cc->lasts[0].text_len <= cc->seen;
    const char *finish = done ? finish_name(cc->lasts[0].finish) : NULL;
    if (cc->tc_n > 0) { /* calls are streaming: the held text is theirs */
        rc |= stream_live_calls(cc);
        cc->sents[0] = cc->seen - cc->held_len;
        if (done) rc |= stream_choice_end(cc, 0, cc->lasts[0].finish == HONE_FINISH_LENGTH ? finish : "tool_calls") |
                        stream_close(cc);
        return rc ? -1 : 0;
    }
    size_t k = cc->held_len ? hone_toolcall_content_prefix(cc->held, cc->held_len) : 0;
    if (done && cc->lasts[0].finish != HONE_FINISH_ERROR && k < cc->held_len) {
        hone_toolcall_result r;
        if (hone_toolcall_parse(&r, cc->held + k, cc->held_len - k, cc->tools) == 0 && r.n_calls > 0) {
            if (k) { /* the content before the calls */
                cJSON *j = response_head(cc, obj);
                add_choice(j, cc, 0, cc->held, k, 0, NULL, 0, NULL);
                rc |= pend_event(cc, j);
            }
            if (r.content) {
                cJSON *j = response_head(cc, obj);
                add_choice(j, cc, 0, r.content, strlen(r.content), 0, NULL, 0, NULL);
                rc |= pend_event(cc, j);
            }
            for (int i = 0; i < r.n_calls; i++) {
                char id[40];
                tool_call_id(cc, i, id, sizeof id);
                rc |= pend_event(cc, tool_delta(cc, i, id, r.calls[i].name, ""));
                rc |= pend_event(cc, tool_delta(cc, i, NULL, NULL, r.calls[i].arguments));
            }
            finish = "tool_calls";
            k = cc->held_len; /* all of it is accounted for */
            cc->held_len = 0;
        }
        hone_toolcall_result_clear(&r);
        if (cc->held_len) k = cc->held_len; /* no call after all: content */
    }
    if (k && cc->held_len) {
        cJSON *j = response_head(cc, obj);
        add_choice(j, cc, 0, cc->held, k, 0, NULL, 0, NULL);
        rc |= pend_event(cc, j);
        memmove(cc->held, cc->held + k, cc->held_len - k);
        cc->held_len -= k;
    }
    if (!done && cc->held_len) rc |= stream_live_calls(cc); /* a call may have begun */
    cc->sents[0] = cc->seen - cc->held_len;
    if (done) rc |= stream_choice_end(cc, 0, finish) | stream_close(cc);
    return rc ? -1 : 0;
}

static int tool_named(const cJSON *tools, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "name");
        if (cJSON_IsString(nm) && !strcmp(nm->valuestring, name)) return 1;
    }
    return 0;
}

/* The calls the held text begins, as they grow: a call is announced (id, type, name) once
 * its name and the start of its arguments are there, then its arguments go out in pieces as
 * the model writes them. A call that cannot stream (a name not among the tools, arguments
 * written as a JSON string) leaves the rest to the end of the stream. */
static int stream_live_calls(conn_ctx *cc)
{
    hone_toolcall_partial p[16];
    int n = hone_toolcall_scan(cc->held, cc->held_len, p, 16), rc = 0;
    for (int i = 0; i < n && i < 16; i++) {
        if (i >= cc->tc_n) {
            if (cc->tc_fallback || !p[i].name_done || !p[i].args_started) break;
            if (!tool_named(cc->tools, p[i].name) || p[i].args_is_string) {
                cc->tc_fallback = 1;
                break;
            }
            char id[40];
            tool_call_id(cc, i, id, sizeof id);
            rc |= pend_event(cc, tool_delta(cc, i, id, p[i].name, ""));
            cc->tc_args_sent[i] = 0;
            cc->tc_n = i + 1;
        }
        if (p[i].args_len > cc->tc_args_sent[i]) {
            size_t from = cc->tc_args_sent[i], m = p[i].args_len - from;
            char *piece = malloc(m + 1);
            if (!piece) return -1;
            memcpy(piece, cc->held + p[i].args_off + from, m);
            piece[m] = 0;
            char *clean = hone_utf8_sanitize(piece, m);
            rc |= pend_event(cc, tool_delta(cc, i, NULL, NULL, clean ? clean : ""));
            free(clean);
            free(piece);
            cc->tc_args_sent[i] = p[i].args_len;
        }
        if (!p[i].args_done) break;
    }
    return rc;
}

static int pend_add(conn_ctx *cc, const char *p, size_t n)
{
    if (cc->pend_len + n > cc->pend_cap) {
        size_t cap = cc->pend_cap ? cc->pend_cap : 1024;
        while (cap < cc->pend_len + n) cap *= 2;
        char *b = realloc(cc->pend, cap);
        if (!b) return -1;
        cc->pend = b;
        cc->pend_cap = cap;
    }
    memcpy(cc->pend + cc->pend_len, p, n);
    cc->pend_len += n;
    return 0;
}

static int pend_event(conn_ctx *cc, cJSON *j)
{
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!text) return -1;
    int rc = pend_add(cc, "data: ", 6) || pend_add(cc, text, strlen(text)) || pend_add(cc, "\n\n", 2);
    free(text);
    return rc;
}

/* 1 when the client has closed its end (EOF or an error on the socket). */
static int client_gone(conn_ctx *cc)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(cc->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci && socket_gone(ci->connect_fd);
}

/* Choice i's state now into cc->lasts[i], without waiting; 1 when it is done. */
static int choice_done(conn_ctx *cc, int i)
{
    hone_request_wait(cc->srv->sched, cc->reqs[i], SIZE_MAX, 0, &cc->lasts[i], NULL, NULL);
    return cc->lasts[i].done;
}

static enum MHD_Result send_request_error(conn_ctx *cc, int i)
{
    const hone_request_state *st = &cc->lasts[i];
    switch (st->error_kind) {
    case HONE_REQUEST_ERR_TIMEOUT:
        return send_error(cc, 504, "server_error", NULL, "timeout", "%s", st->error);
    case HONE_REQUEST_ERR_SHUTDOWN:
        return send_error(cc, 503, "server_error", NULL, "shutting_down", "%s", st->error);
    default:
        return send_error(cc, 500, "server_error", NULL, NULL, "%s", st->error);
    }
}

/* Fills cc->pend with the next events of a stream, if there are any yet (it never waits);
 * -1 when the client is gone. Each event carries one choice's new text and the logprobs of
 * the tokens taken since the last event. */
static int stream_more(conn_ctx *cc)
{
    hone_server *s = cc->srv;
    const char *obj = cc->chat ? "chat.completion.chunk" : "text_completion";
    cc->pend_len = cc->pend_off = 0;
    if (cc->stage == 0) {
        int rc = 0;
        for (int i = 0; !cc->chat && cc->logprobs && i < cc->n_choices; i++) /* echo needs the prompt computed */
            if (cc->echo_on && cc->prompt_text[i] && !choice_done(cc, i) && cc->lasts[i].completion_tokens == 0)
                return 0;
        for (int i = 0; i < cc->n_choices; i++) {
            if (!cc->chat && !(cc->echo_on && cc->prompt_text[i])) continue;
            cJSON *j = response_head(cc, obj);
            if (cc->chat) {
                add_choice(j, cc, i, "", 0, 1, NULL, 0, NULL);
            } else { /* echo: the prompt first (its logprobs come once the prompt is computed) */
                const char *pt = cc->prompt_text[i];
                cJSON *lp = NULL;
                if (cc->logprobs) {
                    hone_token_logprob *pe = NULL;
                    int64_t pn = 0;
                    hone_request_prompt_logprobs(s->sched, cc->reqs[i], &pe, &pn);
                    lp = completion_logprobs(s, pe, pn, &cc->lp_off[i]);
                    free(pe);
                }
                add_choice(j, cc, i, pt, strlen(pt), 0, NULL, 0, lp);
            }
            rc |= pend_event(cc, j);
        }
        cc->stage = 1;
        return rc ? -1 : 0;
    }
    if (cc->tools) return stream_tools_more(cc);
    int rc = 0, all_done = 1, progress = 0;
    for (int i = 0; i < cc->n_choices; i++) {
        if (cc->fin_sent[i]) continue;
        all_done = 0;
        char *text = NULL;
        size_t len = 0;
        if (hone_request_wait(s->sched, cc->reqs[i], cc->sents[i], 0, &cc->lasts[i], &text, &len)) {
            free(text);
            return -1;
        }
        int64_t from = cc->lp_sent[i];
        cJSON *lp = NULL;
        if (cc->logprobs) {
            hone_token_logprob *e = NULL;
            int64_t n = 0;
            hone_request_logprobs(s->sched, cc->reqs[i], from, &e, &n);
            if (n) lp = cc->chat ? chat_logprobs(s, e, n) : completion_logprobs(s, e, n, &cc->lp_off[i]);
            cc->lp_sent[i] += n;
            free(e);
        }
        if (len || lp) {
            cJSON *j = response_head(cc, obj);
            add_choice(j, cc, i, text ? text : "", len, 0, NULL, 0, lp);
            rc |= pend_event(cc, j);
            cc->sents[i] += len;
            progress = 1;
        }
        free(text);
        const hone_request_state *st = &cc->lasts[i];
        if (st->done && st->text_len <= cc->sents[i]) {
            rc |= stream_choice_end(cc, i, finish_name(st->finish));
            progress = 1;
        }
    }
    int finished = 1;
    for (int i = 0; i < cc->n_choices; i++) finished &= cc->fin_sent[i];
    if (all_done || finished) {
        rc |= stream_close(cc);
    } else if (!progress && client_gone(cc)) {
        cancel_all(cc);
        return -1;
    }
    return rc ? -1 : 0;
}

/* Choice i's end in a stream: its finish chunk (finish_reason `finish`), or its error. */
static int stream_choice_end(conn_ctx *cc, int i, const char *finish)
{
    const hone_request_state *st = &cc->lasts[i];
    cc->fin_sent[i] = 1;
    if (st->finish == HONE_FINISH_ERROR) return pend_event(cc, error_object("server_error", NULL, NULL, st->error));
    cJSON *j = response_head(cc, cc->chat ? "chat.completion.chunk" : "text_completion");
    add_choice(j, cc, i, NULL, 0, 0, finish, 0, NULL);
    return pend_event(cc, j);
}

/* The end of a stream, every choice's finish out: usage when asked, [DONE]. */
static int stream_close(conn_ctx *cc)
{
    int rc = 0;
    if (cc->include_usage) {
        cJSON *j = response_head(cc, cc->chat ? "chat.completion.chunk" : "text_completion");
        cJSON_AddArrayToObject(j, "choices");
        add_usage(j, cc);
        rc |= pend_event(cc, j);
    }
    rc |= pend_add(cc, "data: [DONE]\n\n", 14);
    cc->stage = 2;
    return rc;
}

/* The stream's content reader: with nothing to send it suspends the connection and returns
 * 0 (libmicrohttpd calls it again once the engine's notify resumes it). */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    conn_ctx *cc = cls;
    (void)pos;
    while (cc->pend_off == cc->pend_len) {
        if (cc->stage == 2) return MHD_CONTENT_READER_END_OF_STREAM;
        if (wake_arm(cc)) {
            cancel_all(cc);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        int stage = cc->stage; /* a new stage has not looked at the engine yet: no suspend */
        if (stream_more(cc)) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (cc->pend_off == cc->pend_len && cc->stage == stage && wake_suspend(cc)) return 0;
    }
    size_t n = cc->pend_len - cc->pend_off < max ? cc->pend_len - cc->pend_off : max;
    memcpy(buf, cc->pend + cc->pend_off, n);
    cc->pend_off += n;
    return (ssize_t)n;
}

/* JSON that cJSON would accept but that cannot mean what the client sent: a raw NUL byte, or
 * a \u0000 escape inside a string (cJSON's C strings end there, so a role "user\u0000x"
 * would pass as "user", and a prompt or stop string would silently lose its tail). Fills b
 * and returns -1 for such a body. Escaped backslashes ("\\u0000") are text, not NUL. */
static int json_nul_check(const char *body, size_t len, bad_request *b)
{
    if (memchr(body, 0, len))
        return bad(b, 400, NULL, "invalid_json", "the request body contains a NUL byte");
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = body[i];
        if (!in_str) {
            in_str = c == '"';
        } else if (c == '"') {
            in_str = 0;
        } else if (c == '\\' && i + 1 < len) {
            if (body[i + 1] == 'u' && i + 5 < len && !strncmp(body + i + 2, "0000", 4))
                return bad(b, 400, NULL, "invalid_value",
                           "a string in the request contains \\u0000 (NUL), which is not supported");
            i++; /* the escaped character */
        }
    }
    return 0;
}

/* Parses the whole body as one JSON value: trailing bytes other than whitespace (a second
 * value, garbage) make it invalid. NULL, with b filled, when it is not. */
static cJSON *json_parse_body(const char *body, size_t len, bad_request *b)
{
    const char *end = NULL;
    if (!len) return bad(b, 400, NULL, "invalid_json", "the request body is empty"), NULL;
    if (json_nul_check(body, len, b)) return NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!root) return bad(b, 400, NULL, "invalid_json", "the request body is not valid JSON"), NULL;
    while (end && end < body + len && *end && strchr(" \t\r\n", *end)) end++;
    if (end != body + len) {
        cJSON_Delete(root);
        bad(b, 400, NULL, "invalid_json", "the request body has data after its JSON value (at byte %zu)",
            (size_t)(end - body));
        return NULL;
    }
    return root;
}

/* Submits choice i (prompt i / n, seed + i % n). */
static int submit_choice(conn_ctx *cc, const gen_request *g, int i)
{
    int pi = i / g->n;
    int64_t room = request_tokens_max(cc->srv) - prompt_len(g, pi); /* >= 1 (context_check) */
    hone_request_params p = {.prompt = prompt_ids(g, pi), .n_prompt = prompt_len(g, pi),
                             .max_tokens = g->max_set || g->max_tokens < room ? g->max_tokens : room,
                             .sampling = g->sp, .stop = g->stop, .n_stop = g->n_stop, .ignore_eos = g->ignore_eos};
    p.sampling.seed = g->sp.seed + (uint64_t)(i % g->n);
    p.logprobs = g->logprobs;
    p.top_logprobs = g->top_logprobs;
    p.prompt_logprobs = g->echo && g->logprobs;
    p.grammar = g->grammar;
    p.speculate = g->speculate;
    p.notify = wake_notify;
    p.notify_user = cc;
    p.spec_mode = g->spec_mode;
    return hone_scheduler_submit(cc->srv->sched, &p, &cc->reqs[i]);
}

/* Submits the choices that may go now, without waiting. With n > 1 the first choice of each
 * prompt goes first and the others once its prompt is computed (its first token taken), so
 * that they read the prompt's full blocks from the prefix cache instead of computing them
 * again. 0 when every choice is submitted, 1 when some still wait, -1 (answered) on failure. */
static int submit_ready(conn_ctx *cc, const gen_request *g, enum MHD_Result *ok)
{
    int rc = 0, waiting = 0;
    for (int i = 0; i < cc->n_choices && !rc; i++) {
        int f = i - i % g->n;
        if (cc->reqs[i]) continue;
        if (f != i && !choice_done(cc, f) && cc->lasts[f].completion_tokens == 0) {
            waiting = 1;
            continue;
        }
        rc = submit_choice(cc, g, i);
    }
    if (!rc) return waiting;
    cancel_all(cc);
    if (rc == HONE_ERANGE)
        *ok = send_error(cc, 503, "server_error", NULL, "overloaded", "%s; retry later", hone_error_last());
    else
        *ok = send_error(cc, 400, "invalid_request_error", NULL, "invalid_value", "%s", hone_error_last());
    return -1;
}

/* Frees what the submission needed (cc->g and the body it borrows from). */
static void submitted(conn_ctx *cc)
{
    if (cc->g) gen_request_free(cc->g);
    free(cc->g);
    cc->g = NULL;
    cJSON_Delete(cc->g_root);
    cc->g_root = NULL;
}

static enum MHD_Result request_more(conn_ctx *cc);

/* Counts the request in flight, moves it (and the body it borrows from) into cc, and runs
 * its phase (PHASE_*) from submission on: request_more's answer. */
static enum MHD_Result request_start(conn_ctx *cc, gen_request *g, cJSON **root, int phase)
{
    hone_server *s = cc->srv;
    pthread_mutex_lock(&s->mu);
    s->inflight++;
    cc->counted = 1;
    pthread_mutex_unlock(&s->mu);
    if (!(cc->g = malloc(sizeof *cc->g))) return send_error(cc, 500, "server_error", NULL, NULL, "out of memory");
    *cc->g = *g;
    if (g->sp.bias_ids) { /* the logit bias lives in g itself */
        cc->g->sp.bias_ids = cc->g->bias_ids;
        cc->g->sp.bias_vals = cc->g->bias_vals;
    }
    memset(g, 0, sizeof *g);
    cc->g_root = *root;
    *root = NULL;
    cc->phase = phase;
    return request_more(cc);
}

/* A POST body as a JSON object into *root; NULL when it was answered (too big, not UTF-8,
 * not JSON, not an object), *ok then holds the answer's result. */
static cJSON *read_json_body(conn_ctx *cc, enum MHD_Result *ok)
{
    hone_server *s = cc->srv;
    bad_request b;
    cJSON *root;
    if (cc->too_big)
        return *ok = send_error(cc, 413, "invalid_request_error", NULL, "request_too_large",
                                "the request body exceeds %zu bytes", s->o.max_body), NULL;
    if (s->o.log_requests)
        log_line("info", "request %s body %s: %.*s", cc->rid, route_path[cc->route],
                 (int)(cc->body_len < 4000 ? cc->body_len : 4000), cc->body ? cc->body : "");
    if (!hone_utf8_valid((const unsigned char *)cc->body, cc->body_len))
        return *ok = send_error(cc, 400, "invalid_request_error", NULL, "invalid_encoding",
                                "the request body is not valid UTF-8"), NULL;
    if (!(root = json_parse_body(cc->body, cc->body_len, &b))) return *ok = send_bad(cc, &b), NULL;
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return *ok = send_error(cc, 400, "invalid_request_error", NULL, "invalid_json",
                                "the request body must be a JSON object"), NULL;
    }
    return root;
}

/* With log_requests: the chat prompt the template rendered, as a JSON string (one line). */
static void log_prompt(conn_ctx *cc, const char *prompt)
{
    cJSON *j = cJSON_CreateString(prompt);
    char *t = j ? cJSON_PrintUnformatted(j) : NULL;
    if (t) log_line("info", "request %s prompt: %s", cc->rid, t);
    free(t);
    cJSON_Delete(j);
}

static enum MHD_Result handle_generation(conn_ctx *cc)
{
    hone_server *s = cc->srv;
    bad_request b;
    gen_request g;
    memset(&g, 0, sizeof g);
    enum MHD_Result ok;
    cJSON *root = NULL;
    int chat = cc->route == R_CHAT;
    if (!(root = read_json_body(cc, &ok))) return ok;
    if (parse_generation(s, root, chat, &g, &b)) {
        ok = send_bad(cc, &b);
        goto done;
    }
    if (g.prompt) log_prompt(cc, g.prompt);
    if (atomic_load(&s->draining)) {
        ok = send_error(cc, 503, "server_error", NULL, "shutting_down", "the server is shutting down");
        goto done;
    }
    cc->chat = chat;
    cc->stream = g.stream;
    cc->include_usage = g.include_usage;
    cc->logprobs = g.logprobs;
    cc->top_logprobs = g.top_logprobs;
    cc->echo_on = g.echo;
    cc->n_per = g.n;
    cc->n_choices = g.n_prompts * g.n;
    for (int i = 0; !chat && i < cc->n_choices; i++) { /* each choice's prompt as text */
        int pi = i / g.n;
        if (g.prompt_text[pi]) {
            cc->prompt_text[i] = strdup(g.prompt_text[pi]);
        } else {
            size_t l = 0;
            if (hone_tokenizer_decode(s->tok, prompt_ids(&g, pi), prompt_len(&g, pi), 0, &cc->prompt_text[i], &l))
                cc->prompt_text[i] = NULL;
        }
        if (!cc->prompt_text[i]) {
            ok = send_error(cc, 500, "server_error", NULL, NULL, "out of memory");
            goto done;
        }
        cc->lp_off[i] = g.echo ? 0 : strlen(cc->prompt_text[i]);
    }
    cc->tools = g.tools; /* the stream or the answer parses its calls */
    g.tools = NULL;
    snprintf(cc->id, sizeof cc->id, "%s-%016llx", chat ? "chatcmpl" : "cmpl",
             (unsigned long long)(atomic_fetch_add(&s->next_id, 1) * 0x9e3779b97f4a7c15ull ^
                                  (uint64_t)time(NULL)));
    cc->created = (long long)time(NULL);
    ok = request_start(cc, &g, &root, PHASE_GENERATION);
done:
    cJSON_Delete(root);
    gen_request_free(&g);
    return ok;
}

/* The answer once there is one to give: a stream starts at its first text (or its end, so
 * that early failures get a real status), a JSON answer when every choice is done. 0 when
 * it answered (*ok), 1 while the engine has not got that far. */
static int generation_answer(conn_ctx *cc, enum MHD_Result *ok)
{
    hone_server *s = cc->srv;
    if (cc->stream) {
        if (!choice_done(cc, 0) && cc->lasts[0].text_len == 0) return 1;
        if (cc->lasts[0].done && cc->lasts[0].finish == HONE_FINISH_ERROR && cc->lasts[0].completion_tokens == 0)
            return *ok = send_request_error(cc, 0), 0;
        struct MHD_Response *resp =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, cc, NULL);
        if (!resp) return *ok = MHD_NO, 0;
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        common_headers(cc, resp);
        *ok = MHD_queue_response(cc->conn, 200, resp);
        MHD_destroy_response(resp);
        cc->responded = 1;
        cc->status = 200;
        count_status(s, cc->route, 200);
        return 0;
    }
    for (int i = 0; i < cc->n_choices; i++) { /* in order: the first failed choice answers */
        if (!choice_done(cc, i)) return 1;
        if (cc->lasts[i].finish == HONE_FINISH_ERROR) {
            cancel_all(cc);
            return *ok = send_request_error(cc, i), 0;
        }
    }
    cJSON *j = response_head(cc, cc->chat ? "chat.completion" : "text_completion");
    for (int i = 0; i < cc->n_choices; i++) {
        char *text = NULL;
        size_t len = 0;
        if (hone_request_wait(s->sched, cc->reqs[i], 0, 0, &cc->lasts[i], &text, &len)) {
            free(text);
            cJSON_Delete(j);
            return *ok = MHD_NO, 0;
        }
        if (cc->echo_on) { /* the prompt, then the completion */
            size_t pl = strlen(cc->prompt_text[i]);
            char *both = malloc(pl + len + 1);
            if (both) {
                memcpy(both, cc->prompt_text[i], pl);
                memcpy(both + pl, text ? text : "", len);
                both[pl + len] = 0;
            }
            free(text);
            text = both;
            len += pl;
        }
        int64_t from = 0;
        cJSON *lp = choice_logprobs(cc, i, 1, &from);
        if (!cc->tools || !add_tool_choice(j, cc, text ? text : "", text ? len : 0, lp)) /* tools: n is 1 */
            add_choice(j, cc, i, text ? text : "", text ? len : 0, 1, finish_name(cc->lasts[i].finish), 1, lp);
        free(text);
    }
    add_usage(j, cc);
    *ok = send_json(cc, 200, j);
    return 0;
}

static void metric(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void metric(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = *buf ? vsnprintf(*buf + *len, *cap - *len, fmt, ap) : -1;
        va_end(ap);
        if (n >= 0 && *len + (size_t)n < *cap) {
            *len += (size_t)n;
            return;
        }
        size_t nc = *cap ? *cap * 2 : 16384;
        char *nb = realloc(*buf, nc);
        if (!nb) return;
        *buf = nb;
        *cap = nc;
    }
}

static void metric_hist(char **b, size_t *l, size_t *c, const char *name, const char *help,
                        const hone_histogram *h)
{
    metric(b, l, c, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < h->n; i++) {
        cum += h->counts[i];
        metric(b, l, c, "%s_bucket{le=\"%g\"} %llu\n", name, h->le[i], (unsigned long long)cum);
    }
    cum += h->counts[h->n];
    metric(b, l, c, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
           (unsigned long long)cum, name, h->sum, name, (unsigned long long)h->count);
}

/* The standard process_* families (what prometheus_client's process collector exports), from
 * /proc/self. */
static void process_metrics(char **b, size_t *l, size_t *c)
{
    long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    unsigned long long ut = 0, st = 0, start = 0, vsize = 0;
    long long rss = 0, btime = 0;
    FILE *f = fopen("/proc/self/stat", "r");
    if (f) {
        char buf[2048];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
        if (p)
            sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
                   "%llu %llu %lld", &ut, &st, &start, &vsize, &rss);
        fclose(f);
    }
    if ((f = fopen("/proc/stat", "r"))) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "btime %lld", &btime) == 1) break;
        fclose(f);
    }
    int fds = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) fds += e->d_name[0] != '.';
        closedir(d);
        fds--; /* the directory stream itself */
    }
    struct rlimit rl;
    long long max_fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (long long)rl.rlim_cur : -1;
    metric(b, l, c, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
                    "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.2f\n"
                    "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
                    "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %lld\n"
                    "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
                    "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %llu\n"
                    "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"
                    "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.2f\n"
                    "# HELP process_open_fds Number of open file descriptors.\n"
                    "# TYPE process_open_fds gauge\nprocess_open_fds %d\n"
                    "# HELP process_max_fds Maximum number of open file descriptors.\n"
                    "# TYPE process_max_fds gauge\nprocess_max_fds %lld\n",
           tck > 0 ? (double)(ut + st) / (double)tck : 0.0, rss * (long long)page, vsize,
           tck > 0 ? (double)btime + (double)start / (double)tck : 0.0, fds, max_fds);
}

static enum MHD_Result handle_metrics(conn_ctx *cc)
{
    hone_server *s = cc->srv;
    hone_scheduler_stats st;
    hone_scheduler_stats_get(s->sched, &st);
    char *b = NULL;
    size_t l = 0, c = 0;
#define COUNTER(name, help, v) \
    metric(&b, &l, &c, "# HELP " name " " help "\n# TYPE " name " counter\n" name " %llu\n", \
           (unsigned long long)(v))
#define GAUGE(name, help, v) \
    metric(&b, &l, &c, "# HELP " name " " help "\n# TYPE " name " gauge\n" name " %lld\n", \
           (long long)(v))
    metric(&b, &l, &c, "# HELP hone_requests_total HTTP requests answered, by route and status.\n"
                       "# TYPE hone_requests_total counter\n");
    pthread_mutex_lock(&s->mu);
    int64_t inflight = s->inflight;
    for (int i = 0; i < s->n_counts; i++)
        metric(&b, &l, &c, "hone_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
               route_path[s->counts[i].route], s->counts[i].status, (unsigned long long)s->counts[i].n);
    pthread_mutex_unlock(&s->mu);
    COUNTER("hone_prompt_tokens_total", "Prompt tokens of submitted requests.", st.prompt_tokens);
    COUNTER("hone_generated_tokens_total", "Tokens generated.", st.generated_tokens);
    metric_hist(&b, &l, &c, "hone_time_to_first_token_seconds",
                "From submission to the first generated token.", &st.ttft);
    metric_hist(&b, &l, &c, "hone_inter_token_latency_seconds",
                "Between consecutive generated tokens of a request.", &st.itl);
    metric_hist(&b, &l, &c, "hone_batch_size", "Sequences in each engine step.", &st.batch);
    metric_hist(&b, &l, &c, "hone_e2e_request_latency_seconds",
                "From submission to the end of a finished request.", &st.e2e);
    metric_hist(&b, &l, &c, "hone_request_queue_time_seconds",
                "From submission to first admission into the running batch.", &st.queue_time);
    metric_hist(&b, &l, &c, "hone_request_prefill_time_seconds",
                "From admission to the first generated token.", &st.prefill_time);
    metric_hist(&b, &l, &c, "hone_request_decode_time_seconds",
                "From the first generated token to the end of the request.", &st.decode_time);
    metric_hist(&b, &l, &c, "hone_request_prompt_tokens", "Prompt length of finished requests.",
                &st.prompt_len);
    metric_hist(&b, &l, &c, "hone_request_generation_tokens", "Tokens generated by finished requests.",
                &st.gen_len);
    metric(&b, &l, &c, "# HELP hone_request_success_total Finished requests by finish reason.\n"
                       "# TYPE hone_request_success_total counter\n"
                       "hone_request_success_total{finished_reason=\"stop\"} %llu\n"
                       "hone_request_success_total{finished_reason=\"length\"} %llu\n"
                       "# HELP hone_request_failure_total Requests that ended in an error (time limit, shutdown, "
                       "cancelled, engine).\n# TYPE hone_request_failure_total counter\n"
                       "hone_request_failure_total %llu\n",
           (unsigned long long)st.finish_reasons[HONE_FINISH_STOP],
           (unsigned long long)st.finish_reasons[HONE_FINISH_LENGTH],
           (unsigned long long)st.finish_reasons[HONE_FINISH_ERROR]);
    process_metrics(&b, &l, &c);
    metric(&b, &l, &c, "# HELP hone_build_info The build and what it serves (value 1).\n"
                       "# TYPE hone_build_info gauge\n"
                       "hone_build_info{version=\"%s\",commit=\"%s\",model=\"%s\"} 1\n",
           s->o.build_version ? s->o.build_version : "unknown",
           s->o.build_commit ? s->o.build_commit : "unknown", s->model_label);
    COUNTER("hone_steps_total", "Engine steps (batched forward calls).", st.steps);
    COUNTER("hone_batch_rows_total", "Token rows computed (decode and prefill).", st.rows);
    GAUGE("hone_requests_running", "Requests in the running batch.", st.running);
    GAUGE("hone_requests_queued", "Requests waiting for admission.", st.queued);
    GAUGE("hone_http_inflight", "Generation requests not yet fully answered.", inflight);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    pthread_mutex_lock(&s->wake_mu);
    int64_t n_susp = s->n_susp;
    uint64_t n_susp_total = s->n_susp_total;
    pthread_mutex_unlock(&s->wake_mu);
    GAUGE("hone_http_connections", "Open client connections.", di ? di->num_connections : 0);
    GAUGE("hone_http_connections_limit", "Open client connections at most.", s->max_conns);
    GAUGE("hone_http_connections_suspended", "Connections waiting for the engine (no thread held).", n_susp);
    COUNTER("hone_http_suspensions_total", "Times a connection was suspended to wait for the engine.", n_susp_total);
    GAUGE("hone_kv_cache_blocks", "KV cache blocks (used or free).", st.kv_blocks_total);
    metric(&b, &l, &c, "# HELP hone_kv_cache_usage_ratio KV cache blocks in use over all blocks (1 = full).\n"
                       "# TYPE hone_kv_cache_usage_ratio gauge\nhone_kv_cache_usage_ratio %.6f\n",
           st.kv_blocks_total ? (double)st.kv_blocks_used / (double)st.kv_blocks_total : 0.0);
    GAUGE("hone_kv_cache_block_tokens", "Tokens per KV cache block.", st.kv_block_size);
    GAUGE("hone_kv_cache_blocks_used", "KV cache blocks not free (running sequences and prefix cache).",
          st.kv_blocks_used);
    GAUGE("hone_kv_cache_blocks_active", "KV cache blocks held by running sequences.",
          st.kv_blocks_used - st.prefix_idle);
    GAUGE("hone_prefix_cache_blocks", "Blocks in the prefix cache.", st.prefix_entries);
    GAUGE("hone_prefix_cache_blocks_idle", "Prefix cache blocks no running sequence uses (evictable).",
          st.prefix_idle);
    COUNTER("hone_prefix_cache_hits_total", "Full prompt blocks found in the prefix cache.",
            st.prefix_hit_blocks);
    COUNTER("hone_prefix_cache_misses_total", "Full prompt blocks not found in the prefix cache.",
            st.prefix_miss_blocks);
    COUNTER("hone_prefix_cache_hit_tokens_total", "Prompt tokens served from the prefix cache.",
            st.prefix_hit_tokens);
    COUNTER("hone_preemptions_total", "Requests preempted (recomputed later) for KV space.",
            st.preemptions);
    COUNTER("hone_requests_cancelled_total", "Requests cancelled (client gone).", st.cancelled);
    COUNTER("hone_requests_timed_out_total", "Requests that hit the time limit before a token.",
            st.timed_out);
    /* speculative decoding (engine/spec.h) */
    COUNTER("hone_spec_passes_total", "Request passes that verified draft tokens.", st.spec_passes);
    COUNTER("hone_spec_draft_tokens_total", "Draft tokens verified.", st.spec_drafted);
    COUNTER("hone_spec_accepted_tokens_total", "Draft tokens accepted.", st.spec_accepted);
    COUNTER("hone_spec_emitted_tokens_total", "Tokens emitted by passes that verified drafts.", st.spec_emitted);
    COUNTER("hone_spec_draft_model_batches_total", "Draft model forward batches (catch-up and draft rounds).",
            st.spec_draft_batches);
    COUNTER("hone_spec_draft_model_rows_total", "Rows in the draft model's forward batches.", st.spec_draft_rows);
    metric(&b, &l, &c, "# HELP hone_spec_acceptance_ratio Draft tokens accepted over verified.\n"
                       "# TYPE hone_spec_acceptance_ratio gauge\nhone_spec_acceptance_ratio %.6f\n",
           st.spec_drafted ? (double)st.spec_accepted / (double)st.spec_drafted : 0.0);
    metric(&b, &l, &c, "# HELP hone_spec_tokens_per_pass Tokens emitted per request pass with drafts.\n"
                       "# TYPE hone_spec_tokens_per_pass gauge\nhone_spec_tokens_per_pass %.6f\n",
           st.spec_passes ? (double)st.spec_emitted / (double)st.spec_passes : 0.0);
    /* long context (issue 18): the KV pool in bytes and what one request may hold */
    GAUGE("hone_kv_cache_token_bytes", "K and V bytes one token takes, all layers.", s->kv_token_bytes);
    GAUGE("hone_kv_cache_bytes", "KV cache pool bytes (used or free).",
          st.kv_blocks_total * st.kv_block_size * s->kv_token_bytes);
    GAUGE("hone_kv_cache_bytes_used", "KV cache bytes in blocks not free (running sequences and prefix cache).",
          st.kv_blocks_used * st.kv_block_size * s->kv_token_bytes);
    GAUGE("hone_context_length", "Context length served (positions per sequence).", s->o.n_ctx);
    GAUGE("hone_request_tokens_max", "Prompt plus completion tokens one request may have (context or pool).",
          s->tokens_max);
#undef COUNTER
#undef GAUGE
    char names[64][64];
    double shares[64];
    int n = hone_scheduler_slot_shares(s->sched, names, shares, 64);
    if (n) metric(&b, &l, &c, "# HELP hone_slot_time_share Share of engine step time per kernel slot.\n"
                              "# TYPE hone_slot_time_share gauge\n");
    for (int i = 0; i < n; i++)
        metric(&b, &l, &c, "hone_slot_time_share{slot=\"%s\"} %.6f\n", names[i], shares[i]);
    char *tm = s->o.tuning_metrics ? s->o.tuning_metrics(s->o.tuning_user) : NULL;
    if (tm) metric(&b, &l, &c, "%s", tm);
    free(tm);
    enum MHD_Result ok = b ? send_body(cc, 200, "text/plain; version=0.0.4", b, l)
                           : send_error(cc, 500, "server_error", NULL, NULL, "out of memory");
    free(b);
    return ok;
}

/* /v1/models' entry for name (the model's id or an alias). */
static cJSON *model_object(const hone_server *s, const char *name)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "hone");
    cJSON_AddNumberToObject(m, "context_length", (double)s->o.n_ctx);
    return m;
}

/* ---- /v1/embeddings ---- */

/* RFC 4648 base64 of n bytes, malloc'd and NUL-terminated. */
static char *base64(const unsigned char *p, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *o++ = tab[v >> 18 & 63];
        *o++ = tab[v >> 12 & 63];
        *o++ = i + 1 < n ? tab[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? tab[v & 63] : '=';
    }
    *o = 0;
    return out;
}

/* 'input' (prompts_of), each non-empty and shorter than the context. */
static int embedding_inputs(hone_server *s, cJSON *root, gen_request *g, bad_request *b)
{
    if (prompts_of(s, root, "input", g, b)) return -1;
    for (int i = 0; i < g->n_prompts; i++) {
        if (prompt_len(g, i) == 0) return bad(b, 400, "input", "invalid_value", "input %d is empty", i);
        if (prompt_len(g, i) >= s->o.n_ctx)
            return bad(b, 400, "input", "context_length_exceeded",
                       "This model's maximum context length is %lld tokens; input %d has %lld",
                       (long long)s->o.n_ctx, i, (long long)prompt_len(g, i));
    }
    return 0;
}

/* POST /v1/embeddings: each input is one embedding request (max_tokens 0): the prompt's final
 * hidden states pooled (the model's pooling, else mean) and L2-normalised, as OpenAI's are. */
static enum MHD_Result handle_embeddings(conn_ctx *cc)
{
    hone_server *s = cc->srv;
    bad_request b;
    gen_request g;
    memset(&g, 0, sizeof g);
    enum MHD_Result ok;
    cJSON *root = NULL;
    int b64 = 0;
    if (!(root = read_json_body(cc, &ok))) return ok;
    cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (model && !cJSON_IsNull(model) && (!cJSON_IsString(model) || !model_known(s, model->valuestring))) {
        ok = cJSON_IsString(model)
                 ? send_error(cc, 404, "invalid_request_error", "model", "model_not_found",
                              "The model '%.100s' does not exist; this server serves '%s'", model->valuestring,
                              s->o.model_id)
                 : send_error(cc, 400, "invalid_request_error", "model", "invalid_type", "'model' must be a string");
        goto done;
    }
    cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "encoding_format");
    if (fmt && !cJSON_IsNull(fmt)) {
        if (!cJSON_IsString(fmt) || (strcmp(fmt->valuestring, "float") && strcmp(fmt->valuestring, "base64"))) {
            ok = send_error(cc, 400, "invalid_request_error", "encoding_format", "invalid_value",
                            "'encoding_format' must be 'float' or 'base64'");
            goto done;
        }
        b64 = strcmp(fmt->valuestring, "base64") == 0;
    }
    hone_backend *be = hone_scheduler_backend(s->sched);
    const hone_hparams *hp = hone_model_hparams(hone_backend_model(be));
    if (hone_backend_device(be) != HONE_DEVICE_CPU) { /* a failing step would fail its batch-mates too */
        ok = send_error(cc, 400, "invalid_request_error", NULL, "unsupported_device",
                        "embeddings are computed on the CPU backend only (serve with --device cpu)");
        goto done;
    }
    double dims;
    int has;
    if (get_number(root, "dimensions", 1, 1 << 20, 1, &has, &dims, &b)) {
        ok = send_bad(cc, &b);
        goto done;
    }
    if (has && (int64_t)dims != hp->dim) {
        ok = send_error(cc, 400, "invalid_request_error", "dimensions", "unsupported_parameter",
                        "'dimensions' %lld: this model's embeddings have %lld (no truncation)",
                        (long long)dims, (long long)hp->dim);
        goto done;
    }
    if (embedding_inputs(s, root, &g, &b)) {
        ok = send_bad(cc, &b);
        goto done;
    }
    if (atomic_load(&s->draining)) {
        ok = send_error(cc, 503, "server_error", NULL, "shutting_down", "the server is shutting down");
        goto done;
    }
    cc->n_per = 1;
    cc->n_choices = g.n_prompts;
    cc->b64 = b64;
    ok = request_start(cc, &g, &root, PHASE_EMBEDDINGS);
done:
    cJSON_Delete(root);
    gen_request_free(&g);
    return ok;
}

/* Submits the inputs not yet submitted, without waiting; when the queue is full, the rest
 * wait for an earlier input to finish. 0 when all are in, 1 while some wait, -1 answered. */
static int embeddings_submit(conn_ctx *cc, enum MHD_Result *ok)
{
    hone_server *s = cc->srv;
    const gen_request *g = cc->g;
    hone_pooling pool = s->o.pooling == HONE_POOLING_LAST ? HONE_POOLING_LAST : HONE_POOLING_MEAN;
    for (int i = cc->n_submitted; i < cc->n_choices; i++) {
        hone_sampler_params sp = HONE_SAMPLER_PARAMS_INIT;
        hone_request_params p = {.prompt = prompt_ids(g, i), .n_prompt = prompt_len(g, i), .sampling = sp};
        p.embed = pool;
        p.notify = wake_notify;
        p.notify_user = cc;
        int rc = hone_scheduler_submit(s->sched, &p, &cc->reqs[i]);
        if (rc == HONE_ERANGE && !atomic_load(&s->draining)) { /* queue full: wait while an earlier input runs */
            int k = 0;
            while (k < i && choice_done(cc, k)) k++;
            if (k < i) return 1;
        }
        if (rc) {
            *ok = rc == HONE_ERANGE ? send_error(cc, 503, "server_error", NULL, "overloaded", "%s; retry later", hone_error_last())
                                    : send_error(cc, 400, "invalid_request_error", "input", "invalid_value", "%s", hone_error_last());
            return -1;
        }
        cc->n_submitted = i + 1;
    }
    return 0;
}

/* The answer once every input is done: 0 when it answered (*ok), 1 before. */
static int embeddings_answer(conn_ctx *cc, enum MHD_Result *ok)
{
    hone_server *s = cc->srv;
    hone_backend *be = hone_scheduler_backend(s->sched);
    const hone_hparams *hp = hone_model_hparams(hone_backend_model(be));
    for (int i = 0; i < cc->n_choices; i++) {
        if (!choice_done(cc, i)) return 1;
        if (cc->lasts[i].finish == HONE_FINISH_ERROR) return *ok = send_request_error(cc, i), 0;
    }
    float *v = malloc((size_t)hp->dim * sizeof *v);
    if (!v) return *ok = send_error(cc, 500, "server_error", NULL, NULL, "out of memory"), 0;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(j, "data");
    int64_t tokens = 0;
    for (int i = 0; i < cc->n_choices; i++) {
        int64_t dim = 0;
        if (hone_request_embedding(s->sched, cc->reqs[i], v, hp->dim, &dim)) {
            *ok = send_error(cc, 500, "server_error", NULL, NULL, "%s", hone_error_last());
            goto done;
        }
        tokens += cc->lasts[i].prompt_tokens;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "object", "embedding");
        cJSON_AddNumberToObject(e, "index", i);
        if (cc->b64) { /* little-endian float32, as OpenAI's base64 */
            unsigned char *raw = malloc((size_t)dim * 4);
            for (int64_t d = 0; raw && d < dim; d++) {
                uint32_t u;
                memcpy(&u, &v[d], 4);
                for (int k = 0; k < 4; k++) raw[d * 4 + k] = (unsigned char)(u >> (8 * k));
            }
            char *text = raw ? base64(raw, (size_t)dim * 4) : NULL;
            free(raw);
            cJSON_AddStringToObject(e, "embedding", text ? text : "");
            free(text);
        } else {
            cJSON *arr = cJSON_AddArrayToObject(e, "embedding");
            for (int64_t d = 0; d < dim; d++) cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)v[d]));
        }
        cJSON_AddItemToArray(data, e);
    }
    cJSON_AddStringToObject(j, "model", s->o.model_id);
    cJSON *u = cJSON_AddObjectToObject(j, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)tokens);
    cJSON_AddNumberToObject(u, "total_tokens", (double)tokens);
    *ok = send_json(cc, 200, j);
    j = NULL;
done:
    cJSON_Delete(j);
    free(v);
    return 0;
}

/* A generation or embeddings request from its submission on, each time libmicrohttpd calls
 * the handler (at first, then after every resume): submits what may go, answers when there
 * is an answer, else suspends the connection until the engine has news. No thread waits. */
static enum MHD_Result request_more(conn_ctx *cc)
{
    enum MHD_Result ok = MHD_NO;
    int emb = cc->phase == PHASE_EMBEDDINGS;
    for (;;) {
        if (wake_arm(cc)) { /* the client left */
            cancel_all(cc);
            return MHD_NO;
        }
        int w = !cc->g ? 0 : emb ? embeddings_submit(cc, &ok) : submit_ready(cc, cc->g, &ok);
        if (w < 0) return ok;
        if (!w) {
            submitted(cc);
            if (!(emb ? embeddings_answer(cc, &ok) : generation_answer(cc, &ok))) return ok;
        }
        if (wake_suspend(cc)) return MHD_YES;
    }
}

static enum MHD_Result handle_get(conn_ctx *cc)
{
    hone_server *s = cc->srv;
    switch (cc->route) {
    case R_HEALTH: {
        int draining = atomic_load(&s->draining);
        const char *body = draining ? "{\"status\":\"draining\"}" : "{\"status\":\"ok\"}";
        return send_body(cc, draining ? 503 : 200, "application/json", body, strlen(body));
    }
    case R_MODELS: {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "object", "list");
        cJSON *data = cJSON_AddArrayToObject(j, "data");
        cJSON_AddItemToArray(data, model_object(s, s->o.model_id));
        for (int i = 0; i < s->o.n_model_aliases; i++)
            cJSON_AddItemToArray(data, model_object(s, s->o.model_aliases[i]));
        return send_json(cc, 200, j);
    }
    case R_MODEL:
        if (!model_known(s, cc->model_arg))
            return send_error(cc, 404, "invalid_request_error", "model", "model_not_found",
                              "The model '%.100s' does not exist; this server serves '%s'", cc->model_arg,
                              s->o.model_id);
        return send_json(cc, 200, model_object(s, cc->model_arg));
    case R_METRICS:
        return handle_metrics(cc);
    case R_PROFILE: {
        cJSON *j = NULL;
        if (hone_scheduler_profile_json(s->sched, &j))
            return send_error(cc, 404, "invalid_request_error", NULL, "profile_unavailable", "%s",
                              hone_error_last());
        return send_json(cc, 200, j);
    }
    case R_TUNING: {
        char *body = s->o.tuning_json ? s->o.tuning_json(s->o.tuning_user) : NULL;
        if (!body)
            return send_error(cc, 404, "invalid_request_error", NULL, "tuning_off",
                              "tuning is off (serve with --tune)");
        enum MHD_Result ok = send_body(cc, 200, "application/json", body, strlen(body));
        free(body);
        return ok;
    }
    default:
        return send_error(cc, 404, "invalid_request_error", NULL, "not_found", "no route %s",
                          route_path[cc->route]);
    }
}

/* The key check reads the header with its length, so a NUL inside it never matches where the
 * library keeps the bytes after it. libmicrohttpd 0.9.75 itself cuts a header value at a NUL
 * before we see it: "Bearer KEY\0junk" arrives as "Bearer KEY" (only a client that holds the
 * key gets in), and "Bearer K\0EY" as "Bearer K" (refused). */
static int auth_ok(hone_server *s, struct MHD_Connection *conn)
{
    const char *h = NULL;
    size_t hn = 0;
    if (MHD_lookup_connection_value_n(conn, MHD_HEADER_KIND, "Authorization", 13, &h, &hn) != MHD_YES ||
        !h || memchr(h, 0, hn) || strlen(h) != hn || strncmp(h, "Bearer ", 7) != 0)
        return 0;
    h += 7;
    size_t a = strlen(h), b = strlen(s->o.api_key);
    unsigned diff = (unsigned)(a != b);
    for (size_t i = 0; i < b; i++) diff |= (unsigned char)(h[i < a ? i : 0] ^ s->o.api_key[i]);
    return diff == 0;
}

/* Adds the bytes of one header or query argument to *cls (a size_t). */
static enum MHD_Result count_bytes(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    *(size_t *)cls += strlen(key) + (value ? strlen(value) : 0) + 4;
    return MHD_YES;
}

/* The CORS preflight (OPTIONS on any route): 204 with the methods and headers a browser may
 * use; no API key is needed (browsers send none on a preflight). */
static enum MHD_Result handle_options(conn_ctx *cc)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    common_headers(cc, resp);
    MHD_add_response_header(resp, "Allow", "GET, POST, OPTIONS");
    if (cc->origin[0]) {
        const char *req = MHD_lookup_connection_value(cc->conn, MHD_HEADER_KIND, "Access-Control-Request-Headers");
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                                req && *req && !strpbrk(req, "\r\n") ? req
                                                                      : "Authorization, Content-Type, X-Request-Id");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "86400");
    }
    enum MHD_Result ok = MHD_queue_response(cc->conn, 204, resp);
    MHD_destroy_response(resp);
    cc->responded = 1;
    cc->status = 204;
    count_status(cc->srv, cc->route, 204);
    return ok;
}

/* The request as a whole, once its body (if any) is read: loading, preflight, key, method,
 * route. Answering only now (never on libmicrohttpd's first call) keeps the connection open:
 * a response queued before the request was fully read makes the library close it. */
static enum MHD_Result dispatch(conn_ctx *cc, const char *method)
{
    hone_server *s = cc->srv;
    int gen = cc->route == R_COMPLETIONS || cc->route == R_CHAT || cc->route == R_EMBEDDINGS;
    int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    if (strcmp(method, "OPTIONS") == 0) return handle_options(cc);
    if (!atomic_load_explicit(&s->ready, memory_order_acquire)) { /* the model is loading */
        pthread_mutex_lock(&s->mu);
        char stage[32];
        double prog = s->load_progress;
        snprintf(stage, sizeof stage, "%s", s->load_stage);
        pthread_mutex_unlock(&s->mu);
        if (cc->route == R_HEALTH) {
            char body[128];
            snprintf(body, sizeof body, "{\"status\":\"loading\",\"stage\":\"%s\",\"progress\":%.2f}",
                     stage, prog);
            return send_body(cc, 503, "application/json", body, strlen(body));
        }
        return send_error(cc, 503, "server_error", NULL, "loading", "the model is loading (%s, %.0f%%); "
                          "retry when /health says ok", stage, prog * 100);
    }
    if (s->o.api_key && cc->route != R_HEALTH && !(cc->route == R_METRICS && s->o.metrics_public) &&
        !auth_ok(s, cc->conn))
        return send_error(cc, 401, "authentication_error", NULL, "invalid_api_key",
                          "a valid 'Authorization: Bearer <key>' header is required");
    if (cc->route != R_OTHER && ((gen && !cc->is_post) || (!gen && !get)))
        return send_error(cc, 405, "invalid_request_error", NULL, "method_not_allowed",
                          "%s is not allowed on %s", method, route_path[cc->route]);
    if (!gen) return handle_get(cc);
    if (cc->route == R_EMBEDDINGS) return handle_embeddings(cc);
    return handle_generation(cc);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    hone_server *s = cls;
    conn_ctx *cc = *con_cls;
    (void)version;
    if (!cc) {
        if (!(cc = calloc(1, sizeof *cc))) return MHD_NO;
        *con_cls = cc;
        /* the event loop's threads only parse and write: below the engine's threads, so that
         * many streaming clients do not preempt the pool in the middle of a step */
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 5);
        /* the headers are in: from now on the idle timeout (body, keep-alive) applies */
        if (s->o.idle_timeout_s != s->o.header_timeout_s)
            MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)s->o.idle_timeout_s);
        cc->srv = s;
        cc->conn = conn;
        cc->t0 = now_s();
        cc->route = route_of(url);
        if (cc->route == R_MODEL) snprintf(cc->model_arg, sizeof cc->model_arg, "%s", url + strlen(MODEL_PREFIX));
        request_id(s, conn, cc->rid, sizeof cc->rid);
        cors_origin(cc);
        snprintf(cc->method, sizeof cc->method, "%s", method);
        cc->is_post = strcmp(method, "POST") == 0;
        /* our own limits, well below libmicrohttpd's (MHD_MEMORY_LIMIT), so that a long URI or
         * header block gets an OpenAI-shaped JSON error rather than the library's HTML page */
        size_t uri = strlen(url), head = 0;
        MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, count_bytes, &uri);
        MHD_get_connection_values(conn, MHD_HEADER_KIND, count_bytes, &head);
        if (uri > MAX_URI_BYTES)
            return send_error(cc, 414, "invalid_request_error", NULL, "uri_too_long",
                              "the request URI exceeds %d bytes", MAX_URI_BYTES);
        if (head > MAX_HEADER_BYTES)
            return send_error(cc, 431, "invalid_request_error", NULL, "headers_too_large",
                              "the request headers exceed %d bytes", MAX_HEADER_BYTES);
        /* a body a little too big is read and dropped, so that clients that send it all
         * before reading get the 413; a huge one is refused at once (the connection closes) */
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > DISCARD_FACTOR * s->o.max_body) {
            cc->too_big = 1;
            return send_error(cc, 413, "invalid_request_error", NULL, "request_too_large",
                              "the request body exceeds %zu bytes", s->o.max_body);
        }
        /* libmicrohttpd 0.9.75 decodes only "chunked"; with another coding it would read the
         * body until the client closes (a hang until the idle timeout): refuse it now */
        const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Transfer-Encoding");
        if (te && strcasecmp(te, "chunked") != 0)
            return send_error(cc, 501, "invalid_request_error", NULL, "unsupported_transfer_encoding",
                              "Transfer-Encoding '%.40s' is not supported (only chunked)", te);
        return MHD_YES;
    }
    if (cc->responded) {
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (cc->too_big || cc->body_len + n > s->o.max_body) {
            cc->too_big = 1;
            cc->discarded += n;
            if (cc->discarded > DISCARD_FACTOR * s->o.max_body)
                return send_error(cc, 413, "invalid_request_error", NULL, "request_too_large",
                                  "the request body exceeds %zu bytes", s->o.max_body);
            return MHD_YES;
        }
        if (cc->body_len + n + 1 > cc->body_cap) {
            size_t cap = cc->body_cap ? cc->body_cap : 4096;
            while (cap < cc->body_len + n + 1) cap *= 2;
            char *b = realloc(cc->body, cap);
            if (!b) return MHD_NO;
            cc->body = b;
            cc->body_cap = cap;
        }
        memcpy(cc->body + cc->body_len, upload, n);
        cc->body_len += n;
        cc->body[cc->body_len] = 0;
        return MHD_YES;
    }
    if (cc->phase) return request_more(cc); /* resumed: the engine has news */
    return dispatch(cc, method);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    hone_server *s = cls;
    conn_ctx *cc = *con_cls;
    (void)conn;
    if (!cc) return;
    *con_cls = NULL;
    int64_t prompt = 0, completion = 0, cached = 0;
    hone_finish fin = HONE_FINISH_NONE;
    for (int i = 0; i < cc->n_choices; i++) {
        if (!cc->reqs[i]) continue;
        if (!cc->lasts[i].done) hone_request_cancel(s->sched, cc->reqs[i]);
        hone_request_release(s->sched, cc->reqs[i]);
        completion += cc->lasts[i].completion_tokens;
        if (i % (cc->n_per ? cc->n_per : 1) == 0) {
            prompt += cc->lasts[i].prompt_tokens;
            cached += cc->lasts[i].cached_tokens;
        }
        if (fin == HONE_FINISH_NONE || cc->lasts[i].finish == HONE_FINISH_ERROR) fin = cc->lasts[i].finish;
    }
    for (int i = 0; i < MAX_CHOICES; i++) free(cc->prompt_text[i]);
    submitted(cc);
    /* one line per request (successful health checks and scrapes excepted: probes would drown
     * the log); the text itself only with --log-requests */
    const char *how = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (client gone)";
    int quiet = (cc->route == R_HEALTH || cc->route == R_METRICS) && cc->status == 200 && !*how;
    const char *level = cc->status >= 500 || *how ? "warn" : "info";
    if (s->o.no_request_log && !strcmp(level, "info")) quiet = 1;
    if (quiet) {
        /* nothing to log */
    } else if (cc->n_choices && cc->reqs[0])
        log_line(level, "request %s %s %s %d %.3fs prompt=%lld completion=%lld cached=%lld finish=%s%s",
                 cc->rid, cc->method, route_path[cc->route], cc->status, now_s() - cc->t0,
                 (long long)prompt, (long long)completion, (long long)cached,
                 fin == HONE_FINISH_ERROR ? "error" : finish_name(fin), how);
    else
        log_line(level, "request %s %s %s %d %.3fs%s", cc->rid, cc->method,
                 cc->route == R_OTHER ? "(other)" : route_path[cc->route], cc->status, now_s() - cc->t0, how);
    pthread_mutex_lock(&s->mu);
    if (cc->counted && --s->inflight == 0) pthread_cond_broadcast(&s->idle_cv);
    pthread_mutex_unlock(&s->mu);
    free(cc->body);
    free(cc->pend);
    free(cc->held);
    cJSON_Delete(cc->tools);
    free(cc);
}

static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
    hone_server *s = cls;
    (void)addr;
    (void)len;
    return atomic_load(&s->draining) ? MHD_NO : MHD_YES;
}

/* ---- lifecycle ---- */

static void set_model_label(hone_server *s)
{
    size_t k = 0;
    for (const char *p = s->o.model_id ? s->o.model_id : ""; *p && k + 1 < sizeof s->model_label; p++)
        s->model_label[k++] = (*p == '"' || *p == '\\' || *p == '\n') ? '_' : *p;
    s->model_label[k] = 0;
}

void hone_server_set_progress(hone_server *s, const char *stage, double progress)
{
    pthread_mutex_lock(&s->mu);
    snprintf(s->load_stage, sizeof s->load_stage, "%s", stage);
    s->load_progress = progress < 0 ? 0 : progress > 1 ? 1 : progress;
    pthread_mutex_unlock(&s->mu);
    log_line("info", "loading: %s (%.0f%%)", stage, progress * 100);
}

void hone_server_set_ready(hone_server *s, hone_scheduler *sched, const hone_tokenizer *tok,
                           const hone_chat_template *tmpl, const hone_server_opts *late)
{
    s->sched = sched;
    s->tok = tok;
    s->tmpl = tmpl;
    s->o.n_ctx = late->n_ctx;
    s->tokens_max = s->o.n_ctx;
    hone_backend *be = sched ? hone_scheduler_backend(sched) : NULL;
    if (be) {
        const hone_hparams *hp = hone_model_hparams(hone_backend_model(be));
        hone_kv_cache *kv = hone_backend_kv(be);
        int64_t pool = kv ? hone_kv_cache_n_blocks(kv) * hone_kv_cache_block_size(kv) : 0;
        if (pool > 0 && pool < s->tokens_max) s->tokens_max = pool;
        s->kv_token_bytes = hone_kv_cache_token_bytes(hp->n_layers, hp->n_kv_heads, hp->head_dim);
    }
    s->o.model_id = late->model_id;
    s->o.tuning_json = late->tuning_json;
    s->o.tuning_metrics = late->tuning_metrics;
    s->o.tuning_user = late->tuning_user;
    s->o.pooling = late->pooling;
    s->o.model_aliases = late->model_aliases;
    s->o.n_model_aliases = late->n_model_aliases;
    set_model_label(s);
    hone_server_set_progress(s, "ready", 1);
    atomic_store_explicit(&s->ready, 1, memory_order_release); /* publishes the fields above */
}

/* libmicrohttpd's own log: kept while the daemon starts (a failure reports it in one line),
 * printed with a level afterwards. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    hone_server *s = cls;
    char msg[256];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = 0;
    if (s->starting) snprintf(s->start_err, sizeof s->start_err, "%s", msg);
    else log_line("warn", "microhttpd: %s", msg);
}

/* 1 for 127.0.0.0/8, ::1 and ::ffff:127.x (reachable from this machine only). */
static int is_loopback(const struct sockaddr *a)
{
    if (a->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
    if (a->sa_family == AF_INET6) {
        const struct in6_addr *x = &((const struct sockaddr_in6 *)a)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(x) || (IN6_IS_ADDR_V4MAPPED(x) && x->s6_addr[12] == 127);
    }
    return 0;
}

/* Why binding addr failed, from a probe socket (errno of bind), for a one-line error. */
static const char *bind_error(const struct sockaddr *addr, socklen_t len)
{
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return strerror(errno);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    const char *why = bind(fd, addr, len) != 0 ? strerror(errno) : NULL;
    close(fd);
    return why;
}

int hone_server_new(hone_server **out, hone_scheduler *sched, const hone_tokenizer *tok,
                    const hone_chat_template *tmpl, const hone_server_opts *opts)
{
    hone_server_opts dflt = HONE_SERVER_OPTS_INIT;
    struct addrinfo hints, *ai = NULL;
    int rc;
    *out = NULL;
    hone_server *s = calloc(1, sizeof *s);
    if (!s) return hone_error_set(HONE_ENOMEM, "out of memory");
    s->o = opts ? *opts : dflt;
    s->sched = sched;
    s->tok = tok;
    s->tmpl = tmpl;
    s->listen_fd = MHD_INVALID_SOCKET;
    atomic_init(&s->draining, 0);
    set_model_label(s);
    snprintf(s->load_stage, sizeof s->load_stage, "starting");
    atomic_init(&s->ready, sched != NULL);
    /* ids (requests, tool calls, default seeds) from a random start: replicas, restarts and
     * two servers of one process started in the same second must not repeat each other's */
    unsigned long long id0 = 0;
    if (getrandom(&id0, sizeof id0, 0) != (ssize_t)sizeof id0)
        id0 = (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 32) ^ (uintptr_t)s;
    atomic_init(&s->next_id, id0);
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->idle_cv, &ca);
    pthread_cond_init(&s->tick_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&s->wake_mu, NULL);
    if (s->o.port < 0 || s->o.port > 65535) {
        rc = hone_error_set(HONE_EINVAL, "port %d out of range", s->o.port);
        goto fail;
    }
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(s->o.host, NULL, &hints, &ai);
    if (gai || !ai) {
        rc = hone_error_set(HONE_EINVAL, "cannot resolve host '%s': %s", s->o.host, gai_strerror(gai));
        goto fail;
    }
    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof addr);
    memcpy(&addr, ai->ai_addr, ai->ai_addrlen);
    if (s->o.http_threads < 0 || s->o.max_connections < 0 || s->o.max_client_connections < 0 ||
        s->o.header_timeout_s < 0 || s->o.idle_timeout_s < 0) {
        freeaddrinfo(ai);
        rc = hone_error_set(HONE_EINVAL, "negative connection option");
        goto fail;
    }
    /* an event loop on a fixed pool of threads: an idle connection costs a socket and a
     * little memory, never a thread; a waiting generation suspends its connection */
    unsigned threads = s->o.http_threads ? (unsigned)s->o.http_threads : 4;
    struct rlimit nofile;
    long fds = getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY ? (long)nofile.rlim_cur : 1 << 20;
    long fit = fds - FD_RESERVE > 64 ? fds - FD_RESERVE : 64;
    s->max_conns = s->o.max_connections ? (unsigned)s->o.max_connections : (unsigned)fit;
    if ((long)s->max_conns > fit)
        log_line("warn", "--max-connections %u exceeds what the descriptor limit (%ld) leaves (%ld): "
                 "connections beyond it fail to be accepted", s->max_conns, fds, fit);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
#ifdef __linux__
    flags |= MHD_USE_EPOLL;
#else
    flags |= MHD_USE_AUTO;
#endif
    if (ai->ai_family == AF_INET6) {
        ((struct sockaddr_in6 *)&addr)->sin6_port = htons((uint16_t)s->o.port);
        flags |= MHD_USE_IPv6;
    } else {
        ((struct sockaddr_in *)&addr)->sin_port = htons((uint16_t)s->o.port);
    }
    freeaddrinfo(ai);
    socklen_t addr_len = addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    s->starting = 1;
    s->d = MHD_start_daemon(flags, (uint16_t)s->o.port, on_accept, s, on_request, s,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, MHD_MEMORY_LIMIT,
                            MHD_OPTION_THREAD_POOL_SIZE, threads,
                            MHD_OPTION_CONNECTION_LIMIT, s->max_conns,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)s->o.max_client_connections,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->o.header_timeout_s,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)LISTEN_BACKLOG,
                            MHD_OPTION_END);
    s->starting = 0;
    if (!s->d) {
        const char *why = bind_error((struct sockaddr *)&addr, addr_len);
        rc = hone_error_set(HONE_EIO, "cannot listen on %s port %d: %s", s->o.host, s->o.port,
                            why ? why : s->start_err[0] ? s->start_err : "the HTTP library refused");
        goto fail;
    }
    if (!s->o.api_key && !is_loopback((struct sockaddr *)&addr))
        log_line("warn", "listening on %s beyond loopback without an API key: anyone who can reach "
                 "the port can use it (--api-key KEY or HONE_API_KEY)", s->o.host);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : s->o.port;
    if (pthread_create(&s->ticker, NULL, ticker_main, s) != 0) {
        rc = hone_error_set(HONE_EINTERNAL, "cannot start the connection ticker");
        goto fail;
    }
    s->ticker_on = 1;
    log_line("info", "connections: %s, %u threads, at most %u (%u per client), timeouts %ds headers, %ds idle",
             (flags & MHD_USE_EPOLL) == MHD_USE_EPOLL ? "epoll" : "poll", threads, s->max_conns,
             (unsigned)s->o.max_client_connections, s->o.header_timeout_s, s->o.idle_timeout_s);
    *out = s;
    return 0;
fail:
    hone_server_free(s);
    return rc;
}

int hone_server_port(const hone_server *s) { return s->port; }

int hone_server_drain(hone_server *s, double timeout_s)
{
    atomic_store(&s->draining, 1);
    s->listen_fd = MHD_quiesce_daemon(s->d);
    /* refuse new connections now; the socket itself is closed after MHD_stop_daemon */
    if (s->listen_fd != MHD_INVALID_SOCKET) shutdown(s->listen_fd, SHUT_RDWR);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)timeout_s;
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    while (s->inflight > 0)
        if (pthread_cond_timedwait(&s->idle_cv, &s->mu, &ts) == ETIMEDOUT) {
            rc = hone_error_set(HONE_ERANGE, "%lld requests still in flight after %.0f s",
                                (long long)s->inflight, timeout_s);
            break;
        }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Resumes every suspended connection (their handlers give up) and stops suspending: the
 * daemon may not stop with one suspended. */
static void wake_stop(hone_server *s)
{
    pthread_mutex_lock(&s->wake_mu);
    s->stopping = 1;
    pthread_cond_signal(&s->tick_cv);
    while (s->susp) {
        s->susp->gone = 1;
        wake_locked(s, s->susp);
    }
    pthread_mutex_unlock(&s->wake_mu);
    if (s->ticker_on) pthread_join(s->ticker, NULL);
    s->ticker_on = 0;
}

long hone_server_raise_nofile(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0) return -1;
    if (r.rlim_cur < r.rlim_max) {
        rlim_t want = r.rlim_max;
        r.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &r) != 0) getrlimit(RLIMIT_NOFILE, &r);
    }
    return r.rlim_cur == RLIM_INFINITY ? LONG_MAX : (long)r.rlim_cur;
}

void hone_server_free(hone_server *s)
{
    if (!s) return;
    wake_stop(s);
    if (s->d) MHD_stop_daemon(s->d);
    if (s->listen_fd != MHD_INVALID_SOCKET) close(s->listen_fd);
    pthread_cond_destroy(&s->idle_cv);
    pthread_cond_destroy(&s->tick_cv);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->wake_mu);
    free(s);
}
