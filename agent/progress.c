/* The live progress line (agent/progress.h): a redraw thread on a terminal, plain lines elsewhere. */
#include "progress.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/error.h"

#define BAR_WIDTH 20
#define REDRAW_NS 250000000L

struct hone_progress {
    FILE *f;
    int tty, budget;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int have_thread, stop;
    int number;              /* the candidate (0: none) */
    char what[96];
    char step[48];           /* "" between steps */
    double run_t0, step_t0;
    int drawn;               /* the bar is on the screen */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The line's text (without the bar), p->mu held. */
static void format_locked(const hone_progress *p, char *buf, size_t cap, const char *status)
{
    double t = now_s();
    size_t o = 0;
#define PUT(...) (o += (size_t)snprintf(buf + o, o < cap ? cap - o : 0, __VA_ARGS__))
    if (p->number > 0) PUT("candidate %d/%d %s | ", p->number, p->budget, p->what);
    else if (p->what[0]) PUT("%s | ", p->what);
    if (p->step[0]) PUT("%s%s%s %.1f s | ", p->step, status ? " " : "", status ? status : "", t - p->step_t0);
    int left = p->budget - p->number; /* after the current one */
    PUT("run %.0f s | %d candidate%s left", t - p->run_t0, left, left == 1 ? "" : "s");
#undef PUT
    if (o >= cap && cap) buf[cap - 1] = 0;
}

void hone_progress_format(const hone_progress *p, char *buf, size_t cap)
{
    hone_progress *q = (hone_progress *)p;
    pthread_mutex_lock(&q->mu);
    format_locked(p, buf, cap, NULL);
    pthread_mutex_unlock(&q->mu);
}

/* Redraws the bar in place, p->mu held. */
static void draw_locked(hone_progress *p)
{
    char line[256], bar[BAR_WIDTH + 1];
    int done = p->budget > 0 ? (p->number > 0 ? p->number - 1 : 0) * BAR_WIDTH / p->budget : 0;
    for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < done ? '#' : '-';
    bar[BAR_WIDTH] = 0;
    format_locked(p, line, sizeof line, NULL);
    fprintf(p->f, "\r\033[K[%s] %s", bar, line);
    fflush(p->f);
    p->drawn = 1;
}

static void *redraw_thread(void *arg)
{
    hone_progress *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        if (p->step[0]) draw_locked(p);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += REDRAW_NS;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int hone_progress_new(hone_progress **out, FILE *f, int budget, int tty)
{
    *out = NULL;
    hone_progress *p = calloc(1, sizeof *p);
    if (!p) return hone_error_set(HONE_ENOMEM, "out of memory");
    p->f = f;
    p->budget = budget;
    p->tty = f && (tty < 0 ? isatty(fileno(f)) : tty);
    p->run_t0 = p->step_t0 = now_s();
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (p->tty && pthread_create(&p->thread, NULL, redraw_thread, p) == 0) p->have_thread = 1;
    else p->tty = 0; /* no thread: plain lines */
    *out = p;
    return 0;
}

static void erase_locked(hone_progress *p)
{
    if (p->drawn) {
        fputs("\r\033[K", p->f);
        fflush(p->f);
        p->drawn = 0;
    }
}

void hone_progress_free(hone_progress *p)
{
    if (!p) return;
    if (p->have_thread) {
        pthread_mutex_lock(&p->mu);
        p->stop = 1;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->thread, NULL);
    }
    if (p->f) erase_locked(p);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

void hone_progress_candidate(hone_progress *p, int number, const char *what)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->number = number;
    snprintf(p->what, sizeof p->what, "%s", what ? what : "");
    pthread_mutex_unlock(&p->mu);
}

void hone_progress_begin(hone_progress *p, const char *step)
{
    if (!p || !p->f) return;
    pthread_mutex_lock(&p->mu);
    snprintf(p->step, sizeof p->step, "%s", step);
    p->step_t0 = now_s();
    if (p->tty) {
        draw_locked(p);
    } else {
        char line[256];
        format_locked(p, line, sizeof line, "...");
        fprintf(p->f, "progress: %s\n", line);
        fflush(p->f);
    }
    pthread_mutex_unlock(&p->mu);
}

void hone_progress_end(hone_progress *p, const char *step, const char *status)
{
    if (!p || !p->f) return;
    pthread_mutex_lock(&p->mu);
    if (!p->tty) {
        char line[256];
        snprintf(p->step, sizeof p->step, "%s", step);
        format_locked(p, line, sizeof line, status ? status : "done");
        fprintf(p->f, "progress: %s\n", line);
        fflush(p->f);
    }
    p->step[0] = 0; /* the bar stays until the next step or a line of the caller's */
    pthread_mutex_unlock(&p->mu);
}

void hone_progress_guard_cb(void *user, const char *gate, int end, const char *status)
{
    if (end) hone_progress_end(user, gate, status);
    else hone_progress_begin(user, gate);
}

void hone_progress_clear(hone_progress *p)
{
    if (!p || !p->f) return;
    pthread_mutex_lock(&p->mu);
    erase_locked(p);
    pthread_mutex_unlock(&p->mu);
}
