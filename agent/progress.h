/* A live progress line for long steps (the tuner's profile, each candidate's gates): the step,
 * its elapsed time, the run's elapsed time and the budget left. On a terminal one line redrawn
 * in place four times a second with a bar of the budget spent; otherwise (a pipe, a log file)
 * one plain line as each step begins and ends. */
#ifndef HONE_PROGRESS_H
#define HONE_PROGRESS_H

#include <stdio.h>

typedef struct hone_progress hone_progress;

/* Progress to f over a budget of `budget` candidates. tty: 1 redraws a bar, 0 writes lines,
 * -1 decides by isatty(f). f NULL: a sink that writes nothing. */
int hone_progress_new(hone_progress **out, FILE *f, int budget, int tty);
void hone_progress_free(hone_progress *p);   /* erases the bar; accepts NULL */

/* The candidate now being worked on (1-based; 0: none, e.g. the profile) and what it is. */
void hone_progress_candidate(hone_progress *p, int number, const char *what);

/* A step begins / ends (status: "pass", "fail", ...; NULL: "done"). */
void hone_progress_begin(hone_progress *p, const char *step);
void hone_progress_end(hone_progress *p, const char *step, const char *status);

/* The guard's callback (hone_guard_opts.progress, user = the hone_progress). */
void hone_progress_guard_cb(void *user, const char *gate, int end, const char *status);

/* Erases the bar so that the caller can print a line of its own to the same stream; the bar
 * comes back at the next redraw. (Plain-line mode: nothing to do.) */
void hone_progress_clear(hone_progress *p);

/* The line as it would be drawn now (for tests): "candidate 2/6 swiglu | speed 3.1 s | run 41 s
 * | 4 candidates left". */
void hone_progress_format(const hone_progress *p, char *buf, size_t cap);

#endif
