/* The report a reviewer opens in a browser: DIR/index.html from evidence JSON (the guard's
 * evidence record, guard/evidence.h, as the review commits it beside the kernel, or the guard's
 * --evidence file that wraps it under "review"), with charts drawn by gnuplot. One function for
 * `hone tune --report DIR` and `hone review show BRANCH --report DIR`. */
#ifndef HONE_REPORT_H
#define HONE_REPORT_H

#include <math.h>
#include <stdio.h>
#include <stddef.h>

typedef struct {
    const char *title;          /* the page's heading; NULL: "Hone kernel report" */
    const char *gnuplot;        /* the gnuplot to run: NULL: "gnuplot" from PATH; "": none (the
                                 * report then says the charts need gnuplot) */
    double tok_s_before, tok_s_after; /* `hone tune`'s own decode measurement (NaN: none) */
    double chart_timeout_s;     /* gnuplot is killed after this; <= 0: 60 s */
} hone_report_opts;

#define HONE_REPORT_OPTS_INIT {.tok_s_before = NAN, .tok_s_after = NAN, .chart_timeout_s = 60}

typedef struct {
    int slots;                  /* sections written (one per evidence record) */
    int charts;                 /* PNG files gnuplot wrote */
    int gnuplot_found;          /* 0: no gnuplot; tables only */
    char note[512];             /* why there are no charts, when there are none */
} hone_report_result;

/* Writes DIR/index.html (created with DIR when missing), DIR/evidence-<i>.json (each record as
 * given) and, with gnuplot, DIR/slot<i>-speedup.png, -roofline.png, -timing.png, -e2e.png:
 * per slot the speedup with its CI, % of roofline per shape before and after, the timing
 * distributions (quantiles as boxes), end-to-end tokens/s before and after, the noise, the
 * machine and the command that reproduces the verdict. Every string from the evidence is
 * HTML-escaped; gnuplot runs as a child process (no shell) on a script file in DIR whose only
 * strings are sanitised labels. Returns 0, or a negative HONE_E* (a record that is not JSON,
 * DIR not writable); gnuplot failing is not an error (out->note says why). */
int hone_report_write(hone_report_result *out, const char *dir, const char *const *evidence_json, int n,
                      const hone_report_opts *opts);

/* The pieces other pages share (hone verify's report): s HTML-escaped (NULL: "unknown"); the
 * page's head (strict CSP, no scripts) and style up to <body>, with title escaped; gnuplot
 * (opts-style: NULL = from PATH, "" = none) run on DIR/charts.gp in DIR, killed after
 * timeout_s, *found set, 0 when it exited 0 (else note says why); 1 when DIR/name is a PNG. */
void hone_report_escape(FILE *f, const char *s);
void hone_report_page_begin(FILE *f, const char *title);
int hone_report_run_charts(const char *gnuplot, const char *dir, double timeout_s, int *found, char *note, size_t cap);
int hone_report_is_png(const char *dir, const char *name);
/* Writes text to DIR/name; HONE_EIO naming the path. */
int hone_report_write_text(const char *dir, const char *name, const char *text);

#endif
