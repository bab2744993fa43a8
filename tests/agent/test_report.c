/* The evidence JSON's new fields (exact seed, per-shape timings, e2e, noise, machine, reproduce,
 * LLM cost) and the browser report rendered from it: files, numbers, escaping, and the charts'
 * PNG signature when gnuplot is installed. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/report.h"
#include "agent/review.h"
#include "engine/file.h"
#include "guard/evidence.h"
#include "harness.h"

#define SEED 7860209143120308780LL /* > 2^53: a double would print 7.86020914312031e+18 */

static hone_evidence evidence(void)
{
    hone_evidence ev = HONE_EVIDENCE_INIT;
    ev.speedup_median = 2.5;
    ev.speedup_ci_low = 2.41;
    ev.speedup_ci_high = 2.63;
    ev.ci_level = 0.95;
    ev.incumbent_ns = 23185;
    ev.candidate_ns = 9274;
    ev.reps = 41;
    ev.threshold = 1.05;
    ev.parity_tier = "exact";
    ev.candidate_max_abs_err = 0;
    ev.incumbent_max_abs_err = 0;
    ev.model = "tiny-llama";
    ev.candidate_hash = "d11b93e865738b557f0ad5aa982de745bc887f99eaa1d6fdcc8ce4458eacfa29";
    ev.origin_kind = "llm";
    ev.origin = "<script>alert('x')</script> & \"quotes\"";
    ev.seed = SEED;
    ev.guard_seconds = 3.4;
    for (int i = 0; i < 3; i++) {
        hone_evidence_shape *s = &ev.shape[i];
        snprintf(s->desc, sizeof s->desc, "rmsnorm n=%d dim=576%s", 64 >> (2 * i), i == 2 ? " <b>x</b>\"';" : "");
        s->gate = i == 0;
        s->reps = i ? 21 : 41;
        s->incumbent_ns = 23185.0 / (i + 1);
        s->candidate_ns = 9274.0 / (i + 1);
        s->speedup = 2.5 - 0.25 * i;
        s->ci_low = s->speedup - 0.1;
        s->ci_high = s->speedup + 0.1;
        for (int k = 0; k < HONE_EVIDENCE_NQ; k++) {
            s->incumbent_q[k] = s->incumbent_ns * (0.9 + 0.05 * k);
            s->candidate_q[k] = s->candidate_ns * (0.9 + 0.05 * k);
        }
        s->bytes = 297216;
        s->flops = 147456;
        s->roofline_ns = 4016.4 / (i + 1);
        s->incumbent_roofline = s->roofline_ns / s->incumbent_ns;
        s->candidate_roofline = s->roofline_ns / s->candidate_ns;
    }
    ev.n_shapes = 3;
    ev.e2e_incumbent_tok_s = 241.5;
    ev.e2e_candidate_tok_s = 262.25;
    for (int k = 0; k < HONE_EVIDENCE_NQ; k++) {
        ev.e2e_incumbent_q[k] = 200 + 10 * k;
        ev.e2e_candidate_q[k] = 220 + 10 * k;
    }
    ev.e2e_ratio_median = 1.086;
    ev.e2e_ratio_ci_low = 1.05;
    ev.e2e_ratio_ci_high = 1.12;
    ev.e2e_steps = 64;
    double r[5] = {2.2, 2.4, 2.5, 2.6, 2.9};
    hone_evidence_quantiles(ev.ab_ratio_q, r, 5);
    ev.ab_ratio_iqr_rel = (ev.ab_ratio_q[4] - ev.ab_ratio_q[2]) / ev.ab_ratio_q[3];
    ev.bandwidth_gbps_before = 73.4;
    ev.bandwidth_gbps_after = 74.0;
    ev.preempted_reps = 2;
    hone_evidence_machine_detect(&ev.machine);
    snprintf(ev.reproduce, sizeof ev.reproduce,
             "hone guard -m /m/tiny.gguf --slot rmsnorm --backend cpu /s/source.c --seed %lld", (long long)SEED);
    ev.llm_prompt_tokens = 1834;
    ev.llm_completion_tokens = 612;
    ev.llm_cost_usd = 0.0042;
    return ev;
}

static void test_quantiles(void)
{
    double v[5] = {5, 1, 4, 2, 3}, q[HONE_EVIDENCE_NQ];
    hone_evidence_quantiles(q, v, 5);
    CHECK_NEAR(q[0], 1, 0);
    CHECK_NEAR(q[1], 1.4, 1e-12); /* 0.1 x 4 = 0.4 of the way from 1 to 2 */
    CHECK_NEAR(q[2], 2, 0);
    CHECK_NEAR(q[3], 3, 0);
    CHECK_NEAR(q[4], 4, 0);
    CHECK_NEAR(q[6], 5, 0);
    hone_evidence_quantiles(q, v, 0);
    CHECK(isnan(q[3]));
}

static void test_machine(void)
{
    hone_evidence_machine m;
    hone_evidence_machine_detect(&m);
    CHECK(m.threads == (int)sysconf(_SC_NPROCESSORS_ONLN));
    CHECK(m.cores >= 1 && m.cores <= m.threads);
    CHECK(m.cpu_model[0]);
    CHECK_STR_CONTAINS(m.os, "Linux");
    CHECK_MSG(strchr(m.compiler, ':') && strlen(m.compiler) > 5, "compiler '%s'", m.compiler);
#ifdef __AVX2__
    CHECK_STR_CONTAINS(m.cpu_flags, "avx2"); /* this test was compiled for it: the CPU has it */
#endif
}

static void test_json_fields(void)
{
    hone_evidence ev = evidence();
    char *json = NULL;
    CHECK_EQ_INT(hone_evidence_to_json(&json, &ev, "rmsnorm", "cpu"), 0);
    cJSON *root = json ? cJSON_Parse(json) : NULL;
    CHECK(root != NULL);
    if (!root) return;
    /* the seed back exactly: a string of its decimal digits */
    cJSON *seed = cJSON_GetObjectItem(root, "seed");
    CHECK(cJSON_IsString(seed));
    if (cJSON_IsString(seed)) CHECK_EQ_INT(strtoll(seed->valuestring, NULL, 10), SEED);
    CHECK_STR_CONTAINS(json, "\"seed\":\t\"7860209143120308780\"");
    /* the existing keys are still there */
    CHECK_NEAR(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "speed"), "speedup_median")->valuedouble, 2.5, 0);
    CHECK(cJSON_GetObjectItem(root, "kernel_parity") && cJSON_GetObjectItem(root, "model_parity"));
    cJSON *shapes = cJSON_GetObjectItem(root, "shapes");
    CHECK_EQ_INT(cJSON_GetArraySize(shapes), 3);
    cJSON *s0 = cJSON_GetArrayItem(shapes, 0), *s1 = cJSON_GetArrayItem(shapes, 1);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(s0, "gate")) && cJSON_IsFalse(cJSON_GetObjectItem(s1, "gate")));
    CHECK_NEAR(cJSON_GetObjectItem(s1, "speedup")->valuedouble, 2.25, 1e-12);
    CHECK_NEAR(cJSON_GetObjectItem(s0, "incumbent_roofline_pct")->valuedouble, 100 * 4016.4 / 23185, 1e-9);
    CHECK_NEAR(cJSON_GetObjectItem(s0, "candidate_roofline_pct")->valuedouble, 100 * 4016.4 / 9274, 1e-9);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(s0, "candidate_ns_quantiles")), HONE_EVIDENCE_NQ);
    cJSON *e2e = cJSON_GetObjectItem(root, "e2e");
    CHECK_NEAR(cJSON_GetObjectItem(e2e, "candidate_tok_s")->valuedouble, 262.25, 0);
    CHECK_EQ_INT(cJSON_GetObjectItem(e2e, "steps")->valueint, 64);
    cJSON *noise = cJSON_GetObjectItem(root, "noise");
    CHECK_NEAR(cJSON_GetObjectItem(noise, "bandwidth_gbps_after")->valuedouble, 74.0, 0);
    CHECK_EQ_INT(cJSON_GetObjectItem(noise, "preempted_reps")->valueint, 2);
    CHECK_NEAR(cJSON_GetObjectItem(noise, "ab_ratio_iqr_rel")->valuedouble, (2.6 - 2.4) / 2.5, 1e-12);
    cJSON *mach = cJSON_GetObjectItem(root, "machine");
    CHECK_EQ_INT(cJSON_GetObjectItem(mach, "threads")->valueint, ev.machine.threads);
    CHECK_STR_CONTAINS(cJSON_GetObjectItem(root, "reproduce")->valuestring, "--seed 7860209143120308780");
    CHECK_EQ_INT(cJSON_GetObjectItem(root, "llm_prompt_tokens")->valueint, 1834);
    CHECK_EQ_INT(cJSON_GetObjectItem(root, "llm_completion_tokens")->valueint, 612);
    CHECK_NEAR(cJSON_GetObjectItem(root, "llm_cost_usd")->valuedouble, 0.0042, 0);
    cJSON_Delete(root);
    free(json);
    /* unknown: -1 tokens, null cost and seed, no shapes */
    hone_evidence e0 = HONE_EVIDENCE_INIT;
    CHECK_EQ_INT(hone_evidence_to_json(&json, &e0, "add", "cpu"), 0);
    root = cJSON_Parse(json);
    CHECK(root != NULL);
    if (root) {
        CHECK_EQ_INT(cJSON_GetObjectItem(root, "llm_prompt_tokens")->valueint, -1);
        CHECK(cJSON_IsNull(cJSON_GetObjectItem(root, "llm_cost_usd")));
        CHECK(cJSON_IsNull(cJSON_GetObjectItem(root, "seed")));
        CHECK(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "e2e"), "candidate_tok_s")));
        CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(root, "shapes")), 0);
        cJSON_Delete(root);
    }
    free(json);
}

static char *read_text(const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%.4000s/%.100s", dir, name);
    char *s = NULL;
    size_t n = 0;
    return hone_file_read(path, &s, &n) == 0 ? s : NULL;
}

static int png_at(const char *dir, const char *name)
{
    char *s = read_text(dir, name);
    int ok = s && memcmp(s, "\x89PNG\r\n\x1a\n", 8) == 0;
    free(s);
    return ok;
}

static int have_gnuplot(void)
{
    const char *path = getenv("PATH");
    char buf[4200];
    while (path && *path) {
        size_t len = strcspn(path, ":");
        snprintf(buf, sizeof buf, "%.*s/gnuplot", (int)len, path);
        if (len && access(buf, X_OK) == 0) return 1;
        path += len + (path[len] == ':');
    }
    return 0;
}

/* The same evidence in the guard's --evidence wrapper (verdict, reason, "review"). */
static char *wrapped(const char *review_json)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "verdict", "accepted");
    cJSON_AddStringToObject(root, "reason", "accepted: exact tier <i>2.5x</i>");
    cJSON_AddItemToObject(root, "review", cJSON_Parse(review_json));
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    return s;
}

static void test_report(void)
{
    hone_evidence ev = evidence();
    char *json = NULL;
    CHECK_EQ_INT(hone_evidence_to_json(&json, &ev, "rmsnorm", "cpu"), 0);
    char *wrap = json ? wrapped(json) : NULL;
    char dir[] = "/tmp/hone-test-report-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char out_dir[4200];
    snprintf(out_dir, sizeof out_dir, "%s/report", dir); /* created by the report */
    const char *recs[2] = {json, wrap};
    hone_report_opts o = HONE_REPORT_OPTS_INIT;
    o.title = "tune <run> & co";
    o.tok_s_before = 241.5;
    o.tok_s_after = 262.25;
    hone_report_result res;
    CHECK_EQ_INT(hone_report_write(&res, out_dir, recs, 2, &o), 0);
    CHECK_EQ_INT(res.slots, 2);
    char *html = read_text(out_dir, "index.html");
    CHECK(html != NULL);
    if (html) {
        /* numbers from the evidence */
        CHECK_STR_CONTAINS(html, "2.500x [2.410, 2.630]");
        CHECK_STR_CONTAINS(html, "2.250x [2.150, 2.350]");       /* the second shape's speedup */
        CHECK_STR_CONTAINS(html, "17.3% &rarr; 43.3%");          /* % of roofline, before -> after */
        CHECK_STR_CONTAINS(html, "241.5 &rarr; 262.2");          /* e2e tok/s */
        CHECK_STR_CONTAINS(html, "(+8.6%)");                     /* tune's own before/after */
        CHECK_STR_CONTAINS(html, "<td class=\"n\">20866</td>");  /* a timing quantile: 23185 x 0.9 */
        CHECK_STR_CONTAINS(html, "7860209143120308780");         /* the exact seed */
        CHECK_STR_CONTAINS(html, "--seed 7860209143120308780");  /* the reproduce command */
        CHECK_STR_CONTAINS(html, "73.4 / 74.0");                 /* the bandwidth probes */
        CHECK_STR_CONTAINS(html, "1834 / 612, $0.0042");         /* LLM tokens and cost */
        CHECK_STR_CONTAINS(html, ev.machine.cpu_model[0] ? "<th>CPU</th><td>" : "CPU");
        /* every string from the evidence escaped */
        CHECK(!strstr(html, "<script>"));
        CHECK(!strstr(html, "<b>x</b>"));
        CHECK(!strstr(html, "<i>2.5x</i>"));
        CHECK_STR_CONTAINS(html, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;quotes&quot;");
        CHECK_STR_CONTAINS(html, "rmsnorm n=4 dim=576 &lt;b&gt;x&lt;/b&gt;&quot;&#39;;");
        CHECK_STR_CONTAINS(html, "<title>tune &lt;run&gt; &amp; co</title>");
        CHECK_STR_CONTAINS(html, "accepted: exact tier &lt;i&gt;2.5x&lt;/i&gt;"); /* the wrapper's reason */
        CHECK_STR_CONTAINS(html, "href=\"evidence-1.json\"");
    }
    char *e1 = read_text(out_dir, "evidence-1.json");
    CHECK(e1 && wrap && strcmp(e1, wrap) == 0);
    free(e1);
    if (have_gnuplot()) {
        CHECK_EQ_INT(res.gnuplot_found, 1);
        CHECK_EQ_INT(res.charts, 8); /* speedup, roofline, timing, e2e for each record */
        CHECK(png_at(out_dir, "slot0-speedup.png") && png_at(out_dir, "slot0-roofline.png"));
        CHECK(png_at(out_dir, "slot0-timing.png") && png_at(out_dir, "slot1-e2e.png"));
        CHECK_STR_CONTAINS(html, "<img src=\"slot0-roofline.png\"");
        /* the script's labels are sanitised: no quote or markup of the shape name got in */
        char *gp = read_text(out_dir, "charts.gp");
        CHECK_STR_CONTAINS(gp, "\"rmsnorm n=4 dim=576 _b_x__b____\"");
        free(gp);
    } else {
        fprintf(stderr, "gnuplot not installed: the PNG checks are skipped (tools/setup.sh installs it)\n");
    }
    free(html);
    /* without gnuplot: the tables, and a note that the charts need it */
    snprintf(out_dir, sizeof out_dir, "%s/plain", dir);
    o.gnuplot = "";
    CHECK_EQ_INT(hone_report_write(&res, out_dir, recs, 1, &o), 0);
    CHECK_EQ_INT(res.charts, 0);
    html = read_text(out_dir, "index.html");
    CHECK_STR_CONTAINS(html, "The charts need gnuplot");
    CHECK_STR_CONTAINS(html, "2.500x [2.410, 2.630]");
    CHECK(!strstr(html ? html : "", "<img"));
    free(html);
    /* a record that is not JSON is an error, not a page */
    const char *bad[1] = {"{not json"};
    CHECK(hone_report_write(&res, out_dir, bad, 1, &o) < 0);
    hone_file_remove_tree(dir);
    free(json);
    free(wrap);
}

/* `hone review show BRANCH --report DIR`: the branch's committed evidence, rendered. */
static void test_review_show_report(void)
{
    char dir[] = "/tmp/hone-test-report-cli-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cd %s && git init -q -b main repo && cd repo && git -c user.email=t@e -c user.name=T "
             "commit -q --allow-empty -m base", dir);
    CHECK_EQ_INT(system(cmd), 0);
    char repo[4200];
    snprintf(repo, sizeof repo, "%s/repo", dir);
    hone_review_opts ro = HONE_REVIEW_OPTS_INIT;
    ro.repo = repo;
    hone_evidence ev = evidence();
    const char *src = "/* candidate */\n";
    hone_review_result res;
    CHECK_EQ_INT(hone_review_propose(&res, &ro, "rmsnorm", "cpu", src, strlen(src), &ev), 0);
    snprintf(cmd, sizeof cmd, "%s review show %s --repo %s --report %s/out > %s/show.txt 2>&1", HONE_BIN, res.branch,
             repo, dir, dir);
    CHECK_EQ_INT(system(cmd), 0);
    char out[4200];
    snprintf(out, sizeof out, "%s/out", dir);
    char *html = read_text(out, "index.html"), *show = read_text(dir, "show.txt"), *e0 = read_text(out, "evidence-0.json");
    CHECK_STR_CONTAINS(show, "report written to");
    CHECK_STR_CONTAINS(show, "| reproduce | `hone guard -m /m/tiny.gguf"); /* the Markdown's new rows */
    CHECK_STR_CONTAINS(show, "| rmsnorm n=64 dim=576 (gate) | 23185 | 9274 | 2.500x (2.400 .. 2.600) | 17.3% -> 43.3% |");
    CHECK_STR_CONTAINS(html, "Hone review: hone/rmsnorm/cpu/");
    CHECK_STR_CONTAINS(html, "2.500x [2.410, 2.630]");
    CHECK_STR_CONTAINS(html, "17.3% &rarr; 43.3%");
    CHECK_STR_CONTAINS(html, "&lt;script&gt;");
    CHECK_STR_CONTAINS(e0, "\"seed\":\t\"7860209143120308780\""); /* committed exactly */
    free(html);
    free(show);
    free(e0);
    hone_file_remove_tree(dir);
}

/* A guard run's evidence from the command line: the seed above 2^53 exact, the machine, and a
 * reproduce command that runs the same gates on the same inputs. */
static void test_guard_evidence(void)
{
    char dir[] = "/tmp/hone-test-report-guard-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s guard -m %s/tiny-llama-f32.gguf --slot rmsnorm --backend cpu "
             "%s/tests/guard/good/rmsnorm_vec.c --state-dir %s/st --seed %lld --evidence %s/ev.json > %s/out.txt 2>&1",
             HONE_BIN, HONE_TEST_DATA_DIR, HONE_SOURCE_DIR, dir, (long long)SEED, dir, dir);
    int st = system(cmd);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) <= 1); /* accepted or (on a loaded machine) not */
    char *txt = read_text(dir, "ev.json");
    cJSON *root = txt ? cJSON_Parse(txt) : NULL, *rev = cJSON_GetObjectItem(root, "review");
    CHECK(root && rev);
    if (rev) {
        CHECK_STR_CONTAINS(cJSON_GetObjectItem(root, "seed")->valuestring, "7860209143120308780");
        cJSON *seed = cJSON_GetObjectItem(rev, "seed");
        CHECK(cJSON_IsString(seed) && strtoll(seed->valuestring, NULL, 10) == SEED);
        cJSON *m = cJSON_GetObjectItem(rev, "machine");
        CHECK_EQ_INT(cJSON_GetObjectItem(m, "threads")->valueint, sysconf(_SC_NPROCESSORS_ONLN));
        CHECK_STR_CONTAINS(cJSON_GetObjectItem(m, "compiler")->valuestring, "cc");
        const char *rep = cJSON_GetObjectItem(rev, "reproduce")->valuestring;
        CHECK_STR_CONTAINS(rep, "--slot rmsnorm --backend cpu ");
        CHECK_STR_CONTAINS(rep, "--seed 7860209143120308780");
        CHECK_STR_CONTAINS(rep, "/source.c");
        cJSON *shapes = cJSON_GetObjectItem(rev, "shapes");
        const char *verdict = cJSON_GetObjectItem(root, "verdict")->valuestring;
        if (strcmp(verdict, "accepted") == 0) {
            /* the gate's shape and every other non-edge one, with their roofline fractions */
            CHECK_MSG(cJSON_GetArraySize(shapes) >= 3, "%d shapes", cJSON_GetArraySize(shapes));
            cJSON *s0 = cJSON_GetArrayItem(shapes, 0);
            CHECK(cJSON_IsTrue(cJSON_GetObjectItem(s0, "gate")));
            CHECK(cJSON_GetObjectItem(s0, "candidate_roofline_pct")->valuedouble > 0);
            CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(rev, "e2e"), "candidate_tok_s")->valuedouble > 0);
            CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(rev, "noise"), "bandwidth_gbps_before")->valuedouble > 0);
        } else {
            fprintf(stderr, "guard verdict %s (a loaded machine): per-shape checks skipped\n", verdict);
        }
        /* the reproduce command, run as written (hone -> this build), draws the same inputs */
        snprintf(cmd, sizeof cmd, "%s%s --evidence %s/ev2.json --quiet > /dev/null 2>&1", HONE_BIN, rep + 4, dir);
        st = system(cmd);
        CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) <= 1);
        char *t2 = read_text(dir, "ev2.json");
        cJSON *r2 = t2 ? cJSON_Parse(t2) : NULL;
        CHECK(r2 != NULL);
        if (r2) {
            CHECK_STR_CONTAINS(cJSON_GetObjectItem(r2, "seed")->valuestring, "7860209143120308780");
            CHECK_STR_CONTAINS(cJSON_GetObjectItem(r2, "candidate_hash")->valuestring,
                               cJSON_GetObjectItem(root, "candidate_hash")->valuestring);
        }
        cJSON_Delete(r2);
        free(t2);
    }
    cJSON_Delete(root);
    free(txt);
    hone_file_remove_tree(dir);
}

TEST_MAIN(TEST_CASE(test_quantiles), TEST_CASE(test_machine), TEST_CASE(test_json_fields), TEST_CASE(test_report),
          TEST_CASE(test_review_show_report), TEST_CASE(test_guard_evidence))
