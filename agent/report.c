/* The browser report (agent/report.h): index.html from evidence JSON, charts by gnuplot run as a
 * child process on a script file. Evidence is data from a branch anyone could have written: every
 * string goes into the HTML escaped, and into the gnuplot script only as a sanitised label. */
#include "report.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/error.h"
#include "guard/evidence.h"

#define NQ HONE_EVIDENCE_NQ
#define MAX_SHAPES HONE_EVIDENCE_MAX_SHAPES

/* ---- reading the evidence ------------------------------------------------------------------ */

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const cJSON *obj(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsObject(v) ? v : NULL;
}

/* An array of NQ quantiles, or all NaN. */
static void quantiles(const cJSON *o, const char *k, double q[NQ])
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, k);
    for (int i = 0; i < NQ; i++) {
        const cJSON *v = cJSON_IsArray(a) ? cJSON_GetArrayItem(a, i) : NULL;
        q[i] = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    }
}

/* One slot's record: the review's evidence (under "review" in the guard's --evidence file). */
typedef struct {
    const cJSON *ev;           /* the evidence record */
    const char *verdict, *reason; /* from the guard's wrapper, when there was one */
} record;

static void record_of(record *r, const cJSON *root)
{
    const cJSON *rev = obj(root, "review");
    r->ev = rev ? rev : root;
    r->verdict = rev ? str(root, "verdict") : NULL;
    r->reason = rev ? str(root, "reason") : NULL;
}

/* ---- HTML -------------------------------------------------------------------------------- */

/* s escaped for HTML text and attribute values; control characters as U+FFFD; NULL: "unknown". */
static void esc(FILE *f, const char *s)
{
    if (!s) {
        fputs("<i>unknown</i>", f);
        return;
    }
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '&') fputs("&amp;", f);
        else if (c == '<') fputs("&lt;", f);
        else if (c == '>') fputs("&gt;", f);
        else if (c == '"') fputs("&quot;", f);
        else if (c == '\'') fputs("&#39;", f);
        else if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) fputs("&#xFFFD;", f);
        else fputc(c, f);
    }
}

/* A number with fmt, or "n/a". */
static void fnum(FILE *f, const char *fmt, double v)
{
    if (isfinite(v)) fprintf(f, fmt, v);
    else fputs("n/a", f);
}

static void row_begin(FILE *f, const char *label) { fprintf(f, "<tr><th>%s</th><td>", label); }
static void row_end(FILE *f) { fputs("</td></tr>\n", f); }

static void row_str(FILE *f, const char *label, const char *v)
{
    row_begin(f, label);
    esc(f, v);
    row_end(f);
}

static void row_num(FILE *f, const char *label, const char *fmt, double v)
{
    row_begin(f, label);
    fnum(f, fmt, v);
    row_end(f);
}

static const char page_head[] =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src 'self'; "
    "style-src 'unsafe-inline'\">\n<title>";

static const char page_style[] =
    "</title>\n<style>\n"
    "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}\n"
    "table{border-collapse:collapse;margin:.6em 0 1.2em}th,td{border:1px solid #ccc;padding:.25em .6em;"
    "text-align:left;vertical-align:top}th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:"
    "tabular-nums}\npre{background:#f6f6f6;padding:.6em;overflow-x:auto;white-space:pre-wrap;word-break:"
    "break-all}\nimg{max-width:100%;border:1px solid #ddd;margin:.3em 0}.note{color:#8a5a00}"
    ".good{color:#176f2c}.bad{color:#a11}\nsection{border-top:2px solid #ddd;margin-top:2em}\n"
    "</style></head><body>\n";

/* The speedup table of every slot at the top. */
static void html_summary(FILE *f, const record *rs, int n, const hone_report_opts *o)
{
    fputs("<h2>Summary</h2>\n<table><tr><th>slot</th><th>verdict</th><th>kernel speedup (median, 95% CI)"
          "</th><th>parity</th><th>decode tok/s incumbent &rarr; candidate (e2e gate)</th></tr>\n", f);
    for (int i = 0; i < n; i++) {
        const cJSON *ev = rs[i].ev, *sp = obj(ev, "speed"), *e2e = obj(ev, "e2e"), *kp = obj(ev, "kernel_parity");
        fprintf(f, "<tr><td><a href=\"#slot%d\">", i);
        esc(f, str(ev, "slot"));
        fputs(" (", f);
        esc(f, str(ev, "backend"));
        fputs(")</a></td><td>", f);
        esc(f, rs[i].verdict ? rs[i].verdict : "accepted (committed for review)");
        fputs("</td><td class=\"n\">", f);
        fnum(f, "%.3fx", num(sp, "speedup_median"));
        fputs(" [", f);
        fnum(f, "%.3f", num(sp, "ci_low"));
        fputs(", ", f);
        fnum(f, "%.3f", num(sp, "ci_high"));
        fputs("]</td><td>", f);
        esc(f, str(kp, "tier"));
        fputs("</td><td class=\"n\">", f);
        fnum(f, "%.1f", num(e2e, "incumbent_tok_s"));
        fputs(" &rarr; ", f);
        fnum(f, "%.1f", num(e2e, "candidate_tok_s"));
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
    if (isfinite(o->tok_s_before) || isfinite(o->tok_s_after)) {
        fputs("<p>Decode with every accepted kernel installed (hone tune, same run, alternated): ", f);
        fnum(f, "%.1f", o->tok_s_before);
        fputs(" &rarr; ", f);
        fnum(f, "%.1f", o->tok_s_after);
        fputs(" tok/s", f);
        if (isfinite(o->tok_s_before) && isfinite(o->tok_s_after) && o->tok_s_before > 0)
            fprintf(f, " (%+.1f%%)", 100.0 * (o->tok_s_after / o->tok_s_before - 1.0));
        fputs(".</p>\n", f);
    }
}

static void html_quantiles(FILE *f, const double q[NQ], const char *fmt)
{
    for (int k = 0; k < NQ; k++) {
        fputs("<td class=\"n\">", f);
        fnum(f, fmt, q[k]);
        fputs("</td>", f);
    }
}

static void html_shapes(FILE *f, const cJSON *ev)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(ev, "shapes");
    int n = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : 0;
    if (!n) {
        fputs("<p class=\"note\">No per-shape timings in this evidence (recorded by newer guards).</p>\n", f);
        return;
    }
    fputs("<h3>Kernel time per shape</h3>\n<table><tr><th>shape</th><th>incumbent ns</th><th>candidate ns</th>"
          "<th>speedup [95% CI]</th><th>% of roofline before &rarr; after</th><th>A/B pairs</th></tr>\n", f);
    for (int i = 0; i < n; i++) {
        const cJSON *s = cJSON_GetArrayItem(arr, i);
        fputs("<tr><td>", f);
        esc(f, str(s, "shape"));
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "gate"))) fputs(" <b>(the gate's shape)</b>", f);
        fputs("</td><td class=\"n\">", f);
        fnum(f, "%.0f", num(s, "incumbent_ns"));
        fputs("</td><td class=\"n\">", f);
        fnum(f, "%.0f", num(s, "candidate_ns"));
        fputs("</td><td class=\"n\">", f);
        fnum(f, "%.3fx", num(s, "speedup"));
        fputs(" [", f);
        fnum(f, "%.3f", num(s, "ci_low"));
        fputs(", ", f);
        fnum(f, "%.3f", num(s, "ci_high"));
        fputs("]</td><td class=\"n\">", f);
        fnum(f, "%.1f%%", num(s, "incumbent_roofline_pct"));
        fputs(" &rarr; ", f);
        fnum(f, "%.1f%%", num(s, "candidate_roofline_pct"));
        fputs("</td><td class=\"n\">", f);
        fnum(f, "%.0f", num(s, "reps"));
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n<h3>Timing distributions (ns per call: min, p10, p25, median, p75, p90, max)</h3>\n"
          "<table><tr><th>shape</th><th></th><th>min</th><th>p10</th><th>p25</th><th>median</th><th>p75</th>"
          "<th>p90</th><th>max</th></tr>\n", f);
    for (int i = 0; i < n; i++) {
        const cJSON *s = cJSON_GetArrayItem(arr, i);
        double qi[NQ], qc[NQ];
        quantiles(s, "incumbent_ns_quantiles", qi);
        quantiles(s, "candidate_ns_quantiles", qc);
        fputs("<tr><td rowspan=\"2\">", f);
        esc(f, str(s, "shape"));
        fputs("</td><td>incumbent</td>", f);
        html_quantiles(f, qi, "%.0f");
        fputs("</tr>\n<tr><td>candidate</td>", f);
        html_quantiles(f, qc, "%.0f");
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void html_e2e_noise(FILE *f, const cJSON *ev)
{
    const cJSON *e2e = obj(ev, "e2e"), *nz = obj(ev, "noise");
    double qi[NQ], qc[NQ];
    quantiles(e2e, "incumbent_tok_s_quantiles", qi);
    quantiles(e2e, "candidate_tok_s_quantiles", qc);
    fputs("<h3>End to end: decode tokens/s (the e2e gate, steps alternated between the tables)</h3>\n"
          "<table><tr><th></th><th>median</th><th>min</th><th>p10</th><th>p25</th><th>p50</th><th>p75</th>"
          "<th>p90</th><th>max</th></tr>\n<tr><th>incumbent</th><td class=\"n\">", f);
    fnum(f, "%.1f", num(e2e, "incumbent_tok_s"));
    fputs("</td>", f);
    html_quantiles(f, qi, "%.1f");
    fputs("</tr>\n<tr><th>candidate</th><td class=\"n\">", f);
    fnum(f, "%.1f", num(e2e, "candidate_tok_s"));
    fputs("</td>", f);
    html_quantiles(f, qc, "%.1f");
    fputs("</tr>\n</table>\n<p>Step-time ratio incumbent / candidate: ", f);
    fnum(f, "%.3f", num(e2e, "ratio_median"));
    fputs(", 95% CI [", f);
    fnum(f, "%.3f", num(e2e, "ci_low"));
    fputs(", ", f);
    fnum(f, "%.3f", num(e2e, "ci_high"));
    fputs("] over ", f);
    fnum(f, "%.0f", num(e2e, "steps"));
    fputs(" steps.</p>\n<h3>Noise</h3>\n<table>\n", f);
    double q[NQ];
    quantiles(nz, "ab_ratio_quantiles", q);
    row_begin(f, "A/B speedup ratios of the gate's shape (p10 / p25 / median / p75 / p90)");
    for (int k = 1; k < NQ - 1; k++) {
        fnum(f, "%.3f", q[k]);
        if (k < NQ - 2) fputs(" / ", f);
    }
    row_end(f);
    row_num(f, "relative interquartile range of those ratios", "%.3f", num(nz, "ab_ratio_iqr_rel"));
    row_begin(f, "read-bandwidth probe before / after timing (GB/s)");
    fnum(f, "%.1f", num(nz, "bandwidth_gbps_before"));
    fputs(" / ", f);
    fnum(f, "%.1f", num(nz, "bandwidth_gbps_after"));
    row_end(f);
    row_num(f, "preempted A/B pairs", "%.0f", num(nz, "preempted_reps"));
    fputs("</table>\n", f);
}

static void html_facts(FILE *f, const record *r)
{
    const cJSON *ev = r->ev, *sp = obj(ev, "speed"), *kp = obj(ev, "kernel_parity"), *mp = obj(ev, "model_parity"),
                *c = obj(ev, "candidate"), *m = obj(ev, "machine");
    fputs("<h3>Verdict, parity and origin</h3>\n<table>\n", f);
    if (r->verdict) row_str(f, "verdict", r->verdict);
    if (r->reason) row_str(f, "reason", r->reason);
    row_num(f, "speed threshold", "%.3fx", num(sp, "threshold"));
    row_str(f, "parity tier", str(kp, "tier"));
    row_num(f, "max |error| vs f64 oracle, candidate", "%.3e", num(kp, "candidate_max_abs_err"));
    row_num(f, "max |error| vs f64 oracle, incumbent", "%.3e", num(kp, "incumbent_max_abs_err"));
    row_str(f, "shapes checked for parity", str(kp, "shapes"));
    row_num(f, "model max |&Delta;logit|", "%.3e", num(mp, "max_abs_dlogit"));
    row_num(f, "model KL per position, max", "%.3e", num(mp, "kl_max"));
    row_num(f, "argmax agreement", "%.4f", num(mp, "argmax_agreement"));
    row_str(f, "model", str(ev, "model"));
    row_str(f, "candidate (sha256 of the source)", str(c, "hash"));
    row_str(f, "object (sha256)", str(c, "so_hash"));
    row_str(f, "origin kind", str(c, "origin_kind"));
    row_str(f, "origin", str(c, "origin"));
    row_str(f, "input seed", str(ev, "seed"));
    double pt = num(ev, "llm_prompt_tokens"), ct = num(ev, "llm_completion_tokens");
    row_begin(f, "LLM tokens (prompt / completion), cost");
    fnum(f, "%.0f", pt >= 0 ? pt : NAN);
    fputs(" / ", f);
    fnum(f, "%.0f", ct >= 0 ? ct : NAN);
    fputs(", ", f);
    fnum(f, "$%.4f", num(ev, "llm_cost_usd"));
    row_end(f);
    row_num(f, "guard time (s)", "%.1f", num(ev, "guard_seconds"));
    fputs("</table>\n<h3>Machine</h3>\n<table>\n", f);
    row_str(f, "device", str(ev, "device"));
    row_str(f, "CPU", str(m, "cpu_model"));
    row_str(f, "ISA flags", str(m, "cpu_flags"));
    row_begin(f, "cores / threads");
    fnum(f, "%.0f", num(m, "cores"));
    fputs(" / ", f);
    fnum(f, "%.0f", num(m, "threads"));
    row_end(f);
    row_str(f, "compiler", str(m, "compiler"));
    row_str(f, "OS", str(m, "os"));
    fputs("</table>\n<h3>Reproduce</h3>\n<pre><code>", f);
    esc(f, str(ev, "reproduce"));
    fputs("</code></pre>\n", f);
}

/* ---- charts ----------------------------------------------------------------------------- */

/* A label for the gnuplot script: letters, digits and " =._,-" only (anything else '_'), at
 * most 48 characters, so it can never end the script's string or escape from it. */
static void label(char *out, size_t cap, const char *s)
{
    size_t o = 0;
    for (; s && *s && o + 1 < cap && o < 48; s++) {
        char c = *s;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr(" =._,-", c);
        out[o++] = ok ? c : '_';
    }
    out[o] = 0;
}

static const char chart_term[] = "set terminal pngcairo size 900,400 noenhanced font \",10\"\n";

static void xtics(FILE *g, const char *const *labels, int n, double step, double off)
{
    fputs("set xtics rotate by 25 right (", g);
    for (int i = 0; i < n; i++) fprintf(g, "%s\"%s\" %g", i ? ", " : "", labels[i], i * step + off);
    fputs(")\n", g);
}

/* A chart over the shapes: terminal, output slot<si>-<kind>.png, title "<slot>: <what>" (what is
 * a gnuplot-safe literal), y label, fill, box width, x range [-0.7, xmax]. */
static void chart_frame(FILE *g, int si, const char *kind, const char *slot, const char *what, const char *ylabel,
                        double fill, double boxwidth, double xmax)
{
    fputs("reset\n", g);
    fputs(chart_term, g);
    fprintf(g, "set output 'slot%d-%s.png'\nset title \"%s: ", si, kind, slot);
    fputs(what, g); /* a literal of this file's, never evidence text */
    fputs("\"\nset ylabel '", g);
    fputs(ylabel, g);
    fprintf(g, "'\nset grid ytics\nset style fill solid %.2f border -1\nset boxwidth %.2f\nset xrange [-0.7:%g]\n"
               "set yrange [0:*]\nset bmargin 7\nset lmargin 12\nset key outside top center horizontal\n",
            fill, boxwidth, xmax);
}

/* One slot's data file and its part of the script; returns the charts it asks for. */
static int chart_slot(FILE *g, const char *dir, int si, const record *r)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(r->ev, "shapes");
    int n = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : 0, charts = 0;
    if (n > MAX_SHAPES) n = MAX_SHAPES;
    char path[4400], lab[MAX_SHAPES][64];
    const char *labs[MAX_SHAPES];
    snprintf(path, sizeof path, "%s/slot%d.dat", dir, si);
    FILE *d = fopen(path, "w");
    if (!d) return 0;
    fputs("# i speedup ci_low ci_high inc_roof% cand_roof% inc_q[7] cand_q[7]\n", d);
    for (int i = 0; i < n; i++) {
        const cJSON *s = cJSON_GetArrayItem(arr, i);
        double qi[NQ], qc[NQ];
        quantiles(s, "incumbent_ns_quantiles", qi);
        quantiles(s, "candidate_ns_quantiles", qc);
        label(lab[i], sizeof lab[i], str(s, "shape"));
        labs[i] = lab[i];
        fprintf(d, "%d %.6g %.6g %.6g %.6g %.6g", i, num(s, "speedup"), num(s, "ci_low"), num(s, "ci_high"),
                num(s, "incumbent_roofline_pct"), num(s, "candidate_roofline_pct"));
        for (int k = 0; k < NQ; k++) fprintf(d, " %.6g", qi[k]);
        for (int k = 0; k < NQ; k++) fprintf(d, " %.6g", qc[k]);
        fputc('\n', d);
    }
    fclose(d);
    /* (gnuplot reads "nan" as a missing value) */
    const char *slot = str(r->ev, "slot");
    char sl[64];
    label(sl, sizeof sl, slot ? slot : "slot");
    if (n > 0) {
        /* the three per-shape charts: the same frame (x = shapes), each its own y */
        chart_frame(g, si, "speedup", sl, "kernel speedup per shape (median, 95% CI)",
                    "incumbent time / candidate time", 0.55, 0.6, n - 0.3);
        xtics(g, labs, n, 1, 0);
        fprintf(g, "plot 'slot%d.dat' using 1:2 with boxes lc rgb '#4a7fc1' title 'median speedup', "
                   "'' using 1:2:3:4 with yerrorbars lc rgb 'black' pt 0 lw 1.5 title '95%% CI', "
                   "1 with lines dt 2 lc rgb '#888888' title '1.0 (no change)'\n", si);
        chart_frame(g, si, "roofline", sl, "% of the shape's roofline (max of bytes / read bandwidth, flops / FMA peak)",
                    "% of roofline", 0.7, 0.36, n - 0.3);
        xtics(g, labs, n, 1, 0);
        fprintf(g, "plot 'slot%d.dat' using ($1-0.19):5 with boxes lc rgb '#c98b3c' title 'incumbent (before)', "
                   "'' using ($1+0.19):6 with boxes lc rgb '#3c9a5f' title 'candidate (after)'\n", si);
        chart_frame(g, si, "timing", sl, "time per call relative to the incumbent's median (box p25-p75, whiskers "
                    "p10-p90, bar median; min/max in the table)", "time / incumbent median", 0.75, 0.7, 3.0 * n - 1.2);
        xtics(g, labs, n, 3, 0.5);
        /* every column over the incumbent's median (column 10): the shapes' spreads side by side */
        fprintf(g, "m(c) = column(c) / column(10)\n"
                   "plot 'slot%d.dat' using ($1*3):(m(9)):(m(8)):(m(12)):(m(11)) with candlesticks whiskerbars "
                   "lc rgb '#c98b3c' title 'incumbent', "
                   "'' using ($1*3):(m(10)):(m(10)):(m(10)):(m(10)) with candlesticks lc rgb 'black' lw 1 notitle, "
                   "'' using ($1*3+1):(m(16)):(m(15)):(m(19)):(m(18)) with candlesticks whiskerbars lc rgb '#3c9a5f' "
                   "title 'candidate', "
                   "'' using ($1*3+1):(m(17)):(m(17)):(m(17)):(m(17)) with candlesticks lc rgb 'black' lw 1 notitle\n",
                si);
        charts += 3;
    }
    const cJSON *e2e = obj(r->ev, "e2e");
    double qi[NQ], qc[NQ];
    quantiles(e2e, "incumbent_tok_s_quantiles", qi);
    quantiles(e2e, "candidate_tok_s_quantiles", qc);
    if (isfinite(qi[3]) && isfinite(qc[3])) {
        snprintf(path, sizeof path, "%s/e2e%d.dat", dir, si);
        if (!(d = fopen(path, "w"))) return charts;
        fputs("# x q[7] (tokens/s per decode step)\n", d);
        for (int w = 0; w < 2; w++) {
            fprintf(d, "%d", w);
            for (int k = 0; k < NQ; k++) fprintf(d, " %.6g", w ? qc[k] : qi[k]);
            fputc('\n', d);
        }
        fclose(d);
        fputs("reset\n", g);
        fputs("set terminal pngcairo size 600,380 noenhanced font \",10\"\n", g);
        fprintf(g, "set output 'slot%d-e2e.png'\nset title \"%s: decode tokens/s per step (e2e gate)\"\n"
                   "set ylabel 'tokens/s'\nset grid ytics\nset boxwidth 0.5\nset style fill solid 0.4 border -1\n"
                   "set xrange [-0.7:1.7]\nset xtics ('incumbent' 0, 'candidate' 1)\nunset key\n"
                   "plot 'e2e%d.dat' using 1:4:3:7:6 with candlesticks whiskerbars lc rgb '#4a7fc1', "
                   "'' using 1:5:5:5:5 with candlesticks lc rgb 'black' lw 2, "
                   "'' using 1:2 with points pt 7 ps 0.5 lc rgb '#4a7fc1', "
                   "'' using 1:8 with points pt 7 ps 0.5 lc rgb '#4a7fc1'\n", si, sl, si);
        charts++;
    }
    return charts;
}

/* The gnuplot to run, or NULL: opts->gnuplot, else "gnuplot" on PATH. */
static const char *find_gnuplot(const hone_report_opts *o, char *buf, size_t cap)
{
    if (o->gnuplot) return o->gnuplot[0] && access(o->gnuplot, X_OK) == 0 ? o->gnuplot : NULL;
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    while (*path) {
        size_t len = strcspn(path, ":");
        snprintf(buf, cap, "%.*s/gnuplot", (int)len, path);
        if (len && access(buf, X_OK) == 0) return buf;
        path += len + (path[len] == ':');
    }
    return NULL;
}

/* Runs gp on DIR/charts.gp in DIR (fork + exec, no shell; its own process group, killed after
 * timeout_s); its output into DIR/gnuplot.log. 0 when it exited 0. */
static int run_gnuplot(const char *gp, const char *dir, double timeout_s, char *note, size_t cap)
{
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(note, cap, "cannot start gnuplot: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        if (chdir(dir) != 0) _exit(126);
        int in = open("/dev/null", O_RDONLY), log = open("gnuplot.log", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in >= 0) dup2(in, 0);
        if (log >= 0) {
            dup2(log, 1);
            dup2(log, 2);
        }
        execl(gp, gp, "charts.gp", (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    int st = 0;
    for (double waited = 0;; waited += 0.02) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) {
            snprintf(note, cap, "gnuplot: waitpid: %s", strerror(errno));
            return -1;
        }
        if (waited > timeout_s) {
            kill(-pid, SIGKILL);
            waitpid(pid, &st, 0);
            snprintf(note, cap, "gnuplot did not finish within %.0f s", timeout_s);
            return -1;
        }
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(note, cap, "gnuplot failed (status %d; see gnuplot.log)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return -1;
    }
    return 0;
}

/* 1 when DIR/name is a PNG (its 8-byte signature). */
static int is_png(const char *dir, const char *name)
{
    char path[4400];
    unsigned char sig[8];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    int ok = fread(sig, 1, 8, f) == 8 && memcmp(sig, "\x89PNG\r\n\x1a\n", 8) == 0;
    fclose(f);
    return ok;
}

static const char *const chart_kind[] = {"speedup", "roofline", "timing", "e2e"};
static const char *const chart_alt[] = {"kernel speedup per shape with 95% CI",
                                        "% of roofline per shape, before and after",
                                        "timing distributions per shape", "end-to-end decode tokens/s"};

/* Draws every slot's charts; out->charts counts the PNGs that came out. */
static void draw_charts(hone_report_result *out, const char *dir, const record *rs, int n, const hone_report_opts *o)
{
    char gpbuf[4200], path[4400];
    const char *gp = find_gnuplot(o, gpbuf, sizeof gpbuf);
    if (!gp) {
        snprintf(out->note, sizeof out->note, "The charts need gnuplot (Debian: apt-get install gnuplot-nox), "
                 "which was not found; the tables below hold every number.");
        return;
    }
    out->gnuplot_found = 1;
    snprintf(path, sizeof path, "%s/charts.gp", dir);
    FILE *g = fopen(path, "w");
    if (!g) {
        snprintf(out->note, sizeof out->note, "cannot write charts.gp: %s", strerror(errno));
        return;
    }
    fputs("# hone report charts (generated; run: gnuplot charts.gp)\n", g);
    int asked = 0;
    for (int i = 0; i < n; i++) asked += chart_slot(g, dir, i, &rs[i]);
    fclose(g);
    if (!asked) return;
    run_gnuplot(gp, dir, o->chart_timeout_s > 0 ? o->chart_timeout_s : 60, out->note, sizeof out->note);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 4; k++) {
            char name[64];
            snprintf(name, sizeof name, "slot%d-%s.png", i, chart_kind[k]);
            out->charts += is_png(dir, name);
        }
}

static void html_charts(FILE *f, const char *dir, int si)
{
    for (int k = 0; k < 4; k++) {
        char name[64];
        snprintf(name, sizeof name, "slot%d-%s.png", si, chart_kind[k]);
        if (is_png(dir, name)) fprintf(f, "<img src=\"%s\" alt=\"%s\"><br>\n", name, chart_alt[k]);
    }
}

/* ---- the report ------------------------------------------------------------------------- */

static int write_file(const char *dir, const char *name, const char *text)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return hone_error_set(HONE_EIO, "cannot write %s: %s", path, strerror(errno));
    int ok = fputs(text, f) >= 0;
    ok &= fclose(f) == 0;
    return ok ? 0 : hone_error_set(HONE_EIO, "cannot write %s", path);
}

int hone_report_write(hone_report_result *out, const char *dir, const char *const *evidence_json, int n,
                      const hone_report_opts *opts)
{
    hone_report_opts o = HONE_REPORT_OPTS_INIT;
    if (opts) o = *opts;
    memset(out, 0, sizeof *out);
    cJSON **roots = calloc((size_t)(n > 0 ? n : 1), sizeof *roots);
    record *rs = calloc((size_t)(n > 0 ? n : 1), sizeof *rs);
    char path[4400], tmp[4400];
    FILE *f = NULL;
    int rc = 0;
    if (!roots || !rs) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory");
        goto done;
    }
    if (!dir || !*dir) {
        rc = hone_error_set(HONE_EINVAL, "a report directory is required");
        goto done;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        rc = hone_error_set(HONE_EIO, "cannot create %s: %s", dir, strerror(errno));
        goto done;
    }
    for (int i = 0; i < n; i++) {
        if (!evidence_json[i] || !(roots[i] = cJSON_Parse(evidence_json[i])) || !cJSON_IsObject(roots[i])) {
            rc = hone_error_set(HONE_EFORMAT, "evidence record %d is not a JSON object", i);
            goto done;
        }
        record_of(&rs[i], roots[i]);
        char name[64];
        snprintf(name, sizeof name, "evidence-%d.json", i);
        if ((rc = write_file(dir, name, evidence_json[i]))) goto done;
    }
    draw_charts(out, dir, rs, n, &o);
    snprintf(path, sizeof path, "%s/index.html", dir);
    snprintf(tmp, sizeof tmp, "%s/.index.html.tmp", dir);
    if (!(f = fopen(tmp, "w"))) {
        rc = hone_error_set(HONE_EIO, "cannot write %s: %s", tmp, strerror(errno));
        goto done;
    }
    const char *title = o.title ? o.title : "Hone kernel report";
    fputs(page_head, f);
    esc(f, title);
    fputs(page_style, f);
    fputs("<h1>", f);
    esc(f, title);
    fputs("</h1>\n", f);
    time_t now = time(NULL);
    struct tm tm;
    char when[64] = "";
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    fprintf(f, "<p>%d kernel slot%s; written %s. Every number comes from the evidence files beside this page "
               "(evidence-&lt;i&gt;.json).</p>\n", n, n == 1 ? "" : "s", when);
    if (!out->charts) {
        fputs("<p class=\"note\">", f);
        esc(f, out->note[0] ? out->note : "No charts: the evidence has no per-shape timings.");
        fputs("</p>\n", f);
    }
    html_summary(f, rs, n, &o);
    for (int i = 0; i < n; i++) {
        fprintf(f, "<section id=\"slot%d\"><h2>", i);
        esc(f, str(rs[i].ev, "slot"));
        fputs(" (", f);
        esc(f, str(rs[i].ev, "backend"));
        fputs("): ", f);
        fnum(f, "%.3fx", num(obj(rs[i].ev, "speed"), "speedup_median"));
        fputs(" faster at the gate's shape</h2>\n", f);
        html_charts(f, dir, i);
        html_shapes(f, rs[i].ev);
        html_e2e_noise(f, rs[i].ev);
        html_facts(f, &rs[i]);
        fprintf(f, "<p><a href=\"evidence-%d.json\">the evidence record (JSON)</a></p>\n</section>\n", i);
    }
    fputs("</body></html>\n", f);
    int ok = !ferror(f);
    ok &= fclose(f) == 0;
    f = NULL;
    if (!ok || rename(tmp, path) != 0) {
        rc = hone_error_set(HONE_EIO, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        goto done;
    }
    out->slots = n;
done:
    if (f) {
        fclose(f);
        unlink(tmp);
    }
    for (int i = 0; roots && i < n; i++) cJSON_Delete(roots[i]);
    free(roots);
    free(rs);
    return rc;
}

/* ---- shared with other pages (hone verify's report) -------------------------------------- */

void hone_report_escape(FILE *f, const char *s) { esc(f, s); }

void hone_report_page_begin(FILE *f, const char *title)
{
    fputs(page_head, f);
    esc(f, title);
    fputs(page_style, f);
}

int hone_report_run_charts(const char *gnuplot, const char *dir, double timeout_s, int *found, char *note, size_t cap)
{
    hone_report_opts o = HONE_REPORT_OPTS_INIT;
    o.gnuplot = gnuplot;
    char gpbuf[4096];
    const char *gp = find_gnuplot(&o, gpbuf, sizeof gpbuf);
    *found = gp != NULL;
    if (!gp) {
        snprintf(note, cap, "The charts need gnuplot (Debian: apt-get install gnuplot-nox), which was not found.");
        return -1;
    }
    return run_gnuplot(gp, dir, timeout_s > 0 ? timeout_s : 60, note, cap);
}

int hone_report_is_png(const char *dir, const char *name) { return is_png(dir, name); }

int hone_report_write_text(const char *dir, const char *name, const char *text) { return write_file(dir, name, text); }
