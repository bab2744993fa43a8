/* The OpenAI-compatible HTTP server (libmicrohttpd's epoll event loop on a fixed pool of
 * threads; a waiting generation suspends its connection, no thread blocks): /v1/models,
 * /v1/models/{id}, /v1/completions, /v1/chat/completions (JSON or server-sent events),
 * /v1/embeddings, /health, /metrics
 * (Prometheus text) and /v1/hone/profile, in front of the continuous-batching scheduler
 * (engine/scheduler.h). `hone serve` (app/serve_cli.c) wires it up. */
#ifndef HONE_SERVER_H
#define HONE_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "chat.h"
#include "scheduler.h"
#include "tokenizer.h"

typedef struct {
    const char *host;        /* numeric address or a name; "127.0.0.1" by default */
    int port;                /* 0: any free port (see hone_server_port) */
    const char *api_key;     /* non-NULL: every route but /health needs "Bearer KEY" */
    int log_requests;        /* 1: log request bodies and rendered chat prompts (text is never logged otherwise) */
    size_t max_body;         /* bytes; larger bodies get 413 */
    const char *model_id;    /* the id /v1/models lists and requests must name */
    int64_t n_ctx;           /* the context length (prompts must be shorter) */
    /* `hone serve --tune` (the tuner, wired by app/serve_cli.c): the body of /v1/hone/tuning (404 while NULL) and
     * extra /metrics lines; each returns malloc'd text (the server frees it) or NULL. */
    char *(*tuning_json)(void *user);
    char *(*tuning_metrics)(void *user);
    void *tuning_user;
    int metrics_public;      /* 1: /metrics answers without the API key (a scraper on a trusted network) */
    const char *build_version, *build_commit; /* hone_build_info labels; NULL: "unknown" */
    /* other names a request's "model" may use (--model-alias); listed by /v1/models too */
    const char *const *model_aliases;
    int n_model_aliases;
    /* CORS (--cors-origins): NULL off; "*" any origin; else a comma-separated list of exact
     * origins ("https://a.example,http://localhost:3000") that get Access-Control-Allow-Origin */
    const char *cors_origins;
    hone_pooling pooling;    /* /v1/embeddings: the model's pooling (NONE: mean) */
    int no_request_log;      /* 1: no line per request (a server embedded in a command, such as
                              * hone verify's; warnings are still logged) */
    /* connections (docs/architecture.md, "Connections") */
    int http_threads;        /* event-loop threads; 0: 4 */
    int max_connections;     /* open connections at most; 0: what RLIMIT_NOFILE's soft limit allows
                              * (less HONE_SERVER_FD_RESERVE) */
    int max_client_connections; /* open connections per client address at most; 0: no limit
                              * (behind a proxy every client is the proxy's address) */
    int header_timeout_s;    /* inactivity before a request's headers are in; 0: none */
    int idle_timeout_s;      /* inactivity after (body, keep-alive between requests); 0: none */
} hone_server_opts;

#define HONE_SERVER_OPTS_INIT                                                                          \
    {.host = "127.0.0.1", .port = 8080, .max_body = (size_t)1 << 20, .model_id = "hone",               \
     .pooling = HONE_POOLING_NONE, .http_threads = 4, .max_client_connections = 256, .header_timeout_s = 10, \
     .idle_timeout_s = 30}

typedef struct hone_server hone_server;

/* Raises this process's RLIMIT_NOFILE soft limit to its hard limit (so that thousands of
 * sockets fit) and returns the new soft limit; `hone serve` calls it before hone_server_new. */
long hone_server_raise_nofile(void);

/* Starts listening. Borrows sched, tok and tmpl, which must outlive the server. With sched
 * NULL the server starts in the loading state: /health answers 503 {"status": "loading",
 * "stage", "progress"} and every other route a 503 "loading" error until
 * hone_server_set_ready (so the port opens before a large model has loaded). */
int hone_server_new(hone_server **out, hone_scheduler *sched, const hone_tokenizer *tok,
                     const hone_chat_template *tmpl, const hone_server_opts *opts);
/* While loading: what /health reports (stage: a short word; progress 0..1). */
void hone_server_set_progress(hone_server *s, const char *stage, double progress);
/* Ends the loading state: the server serves sched from now on, with n_ctx, model_id and the
 * tuning callbacks of late (known only once the model is loaded; the rest of the options stay
 * as given to hone_server_new). Call once, from the thread that created the server. */
void hone_server_set_ready(hone_server *s, hone_scheduler *sched, const hone_tokenizer *tok,
                           const hone_chat_template *tmpl, const hone_server_opts *late);
/* The port actually bound. */
int hone_server_port(const hone_server *s);
/* Graceful shutdown, first half: stops accepting connections, answers new requests on open
 * connections with 503, and waits up to timeout_s for in-flight requests to finish and be
 * sent. Returns 0 when all finished, HONE_ERANGE on timeout. */
int hone_server_drain(hone_server *s, double timeout_s);
/* Stops the daemon (closing any connection left) and frees; accepts NULL. */
void hone_server_free(hone_server *s);

#endif
