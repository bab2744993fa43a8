/* Continuous self-tuning in staging (`hone serve --tune`): a low-priority thread reads the
 * server's live slot profile, proposes candidates for the hottest tunable slot (the search
 * proposer, an LLM endpoint, or this very server), guards each in isolated workers, commits
 * accepted ones for review and, with auto-apply, hot-swaps them into the serving engine at a
 * step boundary, then watches them and rolls back on a regression.
 *
 * Threads and priorities: the tuning thread runs at nice 19 under SCHED_IDLE; every process it
 * starts (the compiler, the guard's workers) inherits both, so tuning only uses CPU time the
 * engine and the HTTP threads leave idle. It sleeps --tune-interval seconds before each
 * candidate, so at most one guard run is in flight and the loop is idle most of the time.
 *
 * The swap: the scheduler's step hook (engine thread, between steps, no step running) replaces
 * one function pointer of the engine's slot table; the tuning thread only asks and waits. The
 * engine never waits for the idle-priority thread (no priority inversion): the hook only
 * trylocks the tuner's lock (a busy lock skips one boundary's bookkeeping), and the live
 * profile is read by the hook on the engine thread, so the tuning thread never holds the
 * profile lock that the engine takes around every step.
 *
 * Watch rules, for watch_s seconds after an apply (each failure rolls back at the next step
 * boundary and is logged):
 *  - an engine step fails;
 *  - the parity spot-check fails: a fixed probe (12 prompt tokens, 3 greedy decode steps) on a
 *    private one-thread context, with the applied kernel, against its logits recorded just before
 *    the swap with the previous table: bitwise equal for an exact-tier kernel; for a faithful
 *    one the same argmax and max |dlogit| <= 1e-3 x max(1, max |logit|). Run after the swap and
 *    then every spot_s seconds;
 *  - at the end of the window, decode-only step time (median per batch size, the size with the
 *    most samples on both sides, >= 8 each) is worse than before the swap by more than margin.
 *
 * Test-only hook: HONE_TUNE_TEST_REGRESS=1 in the environment perturbs one logit of every
 * post-apply spot-check, so the watcher sees a parity failure and rolls back (the served
 * kernel itself is untouched). Never set it outside tests. */
#ifndef HONE_TUNER_H
#define HONE_TUNER_H

#include "engine/backend.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "engine/scheduler.h"

typedef struct {
    const char *model_path;   /* the served GGUF (the guard evaluates candidates on it) */
    const char *llm;          /* URL, "self" (this server), "none" (search); NULL: $HONE_LLM_URL or none */
    const char *llm_model;    /* NULL: $HONE_LLM_MODEL; with "self": the model id this server serves */
    long llm_timeout_ms;      /* 0: 120 s */
    int auto_apply;           /* 1: hot-swap accepted kernels (staging only) and watch them */
    int budget;               /* candidates in all; default 6 */
    double interval_s;        /* sleep before each candidate; default 30 */
    double watch_s;           /* watch window after an apply; default 120 */
    double spot_s;            /* spot-check period while watching; default 10 */
    double margin;            /* decode step time regression margin; default 0.10 */
    int min_steps;            /* served steps profiled before the first pick; default 16 */
    const char *repo;         /* review repository; NULL: the source tree's */
    const char *push;         /* non-NULL: push each committed branch to this remote (name or URL) */
    const char *state_dir;    /* candidate store; NULL: the store's default */
    const char *kernels_dir;  /* the tree the server serves (serve --kernels DIR): the guard's
                               * incumbents; NULL: the shipped baselines */
    double threshold;         /* the guard's speed gate; default 1.05 */
    double e2e_slack;         /* the guard's end-to-end slack; 0: its default (0.05) */
    const char *slot;         /* only this slot (when it is in the live profile); NULL: the ranking's */
} hone_tuner_opts;

#define HONE_TUNER_OPTS_INIT                                                                 \
    {.budget = 6, .interval_s = 30.0, .watch_s = 120.0, .spot_s = 10.0, .margin = 0.10,       \
     .min_steps = 16, .threshold = 1.05}

typedef struct hone_tuner hone_tuner;

/* Makes the tuner and installs its step hook on sched; borrows everything (they must outlive it).
 * be is the serving backend: the tuner swaps kernels in its slot table (hone_backend_slots), so a
 * backend without one (CUDA, for now) is refused with HONE_EUNSUPPORTED. */
int hone_tuner_new(hone_tuner **out, hone_scheduler *sched, hone_backend *be,
                   const hone_tuner_opts *opts);
/* Starts the tuning thread. self_url ("http://127.0.0.1:PORT/v1") and api_key serve --llm self. */
int hone_tuner_start(hone_tuner *t, const char *self_url, const char *api_key);
/* The model id the server serves (what --llm self asks for); call before hone_tuner_start. */
void hone_tuner_set_self_model(hone_tuner *t, const char *model_id);
/* Asks the thread to stop without waiting: a guard run in progress is cancelled (its workers
 * and compiler are killed, nothing is recorded or committed for that candidate: see
 * hone_guard_opts.cancel), a sleep or a watch window ends; a commit already under way finishes,
 * so the review repository never holds half a commit. `hone serve` calls it as SIGTERM arrives,
 * before draining, so the thread is gone by the time hone_tuner_free joins it. Accepts NULL. */
void hone_tuner_stop(hone_tuner *t);
/* Stops the thread (hone_tuner_stop) and joins it. Call after
 * hone_scheduler_shutdown (the hook must no longer run) and before freeing the scheduler; the
 * loaded kernels are unloaded here, so the engine must not run steps any more. Accepts NULL. */
void hone_tuner_free(hone_tuner *t);

/* /v1/hone/tuning: the loop's state as JSON text (malloc'd). */
char *hone_tuner_json(void *tuner);
/* Prometheus lines (malloc'd): hone_tune_* counters and gauges. */
char *hone_tuner_metrics(void *tuner);

#endif
