/* The CPU profiler: an artificially slowed slot ranks first, the rows (outside row included)
 * add up to the measured step time, profiling changes no logit bit, the byte model gives the
 * stated figures, JSON (library and `hone profile --json`) parses with its fields, and the
 * profiler's own overhead is reported and small. On a tiny model and on SmolLM2 if present. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "engine/error.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "harness.h"
#include "profiler/profile.h"

#define TINY "tiny-llama-q4_1.gguf"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *tiny_path(void)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", HONE_TEST_DATA_DIR, TINY);
    return buf;
}

/* SmolLM2's GGUF: HONE_SMOLLM2, else tools/find_smollm2.py; NULL if absent. */
static const char *smollm2_path(void)
{
    static char buf[4096];
    static int done;
    if (done) return buf[0] ? buf : NULL;
    done = 1;
    const char *env = getenv("HONE_SMOLLM2");
    if (env) {
        snprintf(buf, sizeof buf, "%s", env);
        return buf;
    }
    FILE *p = popen("python3 " HONE_SOURCE_DIR "/tools/find_smollm2.py 2>/dev/null", "r");
    if (p) {
        if (!fgets(buf, sizeof buf, p)) buf[0] = 0;
        pclose(p);
        buf[strcspn(buf, "\n")] = 0;
    }
    if (!buf[0]) fprintf(stderr, "note: SmolLM2 GGUF not found, skipping its checks\n");
    return buf[0] ? buf : NULL;
}

/* ---- a slowed slot: the baseline, then a spin on share 0 (test-only, no production code) ---- */

static hone_slot_rope_fn base_rope;
static uint64_t spin_ns;

static void slow_rope(float *x, const int32_t *pos, int64_t n, int64_t heads, int64_t hd,
                      int64_t n_rot, float base, int32_t neox, int ith, int nth)
{
    base_rope(x, pos, n, heads, hd, n_rot, base, neox, ith, nth);
    if (ith != 0) return;
    uint64_t t0 = now_ns();
    while (now_ns() - t0 < spin_ns) {
    }
}

/* Runs a prompt of n_prompt tokens and n_decode greedy steps on ctx, each step bracketed by
 * the profile (if any); returns the test's own wall time of the forward calls in ns.
 * logits_out (optional): [n_decode + 1][n_vocab] of every step. */
static uint64_t run_steps(hone_backend *ctx, hone_profile *prof, int n_prompt, int n_decode,
                          float *logits_out)
{
    const hone_hparams *hp = hone_model_hparams(hone_backend_model(ctx));
    hone_kv_seq seq = {0};
    int32_t *toks = malloc((size_t)n_prompt * sizeof *toks);
    float *logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    uint64_t total = 0;
    for (int i = 0; i < n_prompt; i++) toks[i] = (int32_t)((i * 131 + 7) % hp->n_vocab);
    for (int s = 0; s <= n_decode; s++) {
        int32_t tok = 0;
        if (s) {
            for (int64_t v = 1; v < hp->n_vocab; v++)
                if (logits[v] > logits[tok]) tok = (int32_t)v;
        }
        uint64_t t0 = now_ns();
        if (prof) hone_profile_step_begin(prof, s ? 1 : n_prompt, seq.n_tokens);
        int rc = s ? hone_backend_forward(ctx, &seq, &tok, 1, logits, 0)
                   : hone_backend_forward(ctx, &seq, toks, n_prompt, logits, 0);
        if (prof) hone_profile_step_end(prof);
        total += now_ns() - t0;
        CHECK_EQ_INT(rc, 0);
        if (logits_out) memcpy(logits_out + (size_t)s * hp->n_vocab, logits, (size_t)hp->n_vocab * sizeof *logits);
    }
    hone_backend_release(ctx, &seq);
    free(toks);
    free(logits);
    return total;
}

typedef struct {
    hone_model *m;
    hone_backend *ctx;
    hone_profile *prof;
} fixture;

static int open_fixture(fixture *f, const char *path, int threads)
{
    memset(f, 0, sizeof *f);
    hone_ctx_opts o = HONE_CTX_OPTS_INIT;
    o.n_threads = threads;
    o.n_ctx = 128;
    hone_profile_opts po = HONE_PROFILE_OPTS_INIT;
    po.n_threads = threads;
    if (hone_model_load(&f->m, path) || hone_backend_new(&f->ctx, f->m, HONE_DEVICE_CPU, &o) ||
        hone_profile_new(&f->prof, &po) || hone_profile_attach(f->prof, f->ctx)) {
        CHECK_MSG(0, "%s: %s", path, hone_error_last());
        return -1;
    }
    return 0;
}

static void close_fixture(fixture *f)
{
    if (f->prof && f->ctx) hone_profile_detach(f->prof, f->ctx);
    hone_profile_free(f->prof);
    hone_backend_free(f->ctx);
    hone_model_free(f->m);
}

/* rope is the cheapest slot; slowed by `spin` ns per call it must rank first. */
static void check_slowed_first(const char *path, uint64_t spin, int n_prompt, int n_decode)
{
    fixture f;
    if (open_fixture(&f, path, 1)) {
        close_fixture(&f);
        return;
    }
    hone_slot_table *t = hone_backend_slots(f.ctx);
    base_rope = HONE_SLOTS_FN(t, HONE_SLOT_ROPE, hone_slot_rope_fn);
    spin_ns = spin;
    hone_slots_set(t, HONE_SLOT_ROPE, (void *)slow_rope);
    run_steps(f.ctx, f.prof, n_prompt, n_decode, NULL);
    hone_slots_set(t, HONE_SLOT_ROPE, (void *)base_rope);
    hone_profile_row top[4];
    int n = 0;
    CHECK_EQ_INT(hone_profile_ranking(f.prof, top, 4, &n), 0);
    CHECK(n >= 4);
    CHECK_MSG(n > 0 && top[0].slot == HONE_SLOT_ROPE, "%s: first is %s", path, n ? top[0].name : "-");
    CHECK_MSG(n > 0 && top[0].gain > top[1].gain, "%s: gains %g, %g", path, top[0].gain, top[1].gain);
    /* the ranking holds slot rows only */
    for (int i = 0; i < n && i < 4; i++) CHECK(top[i].slot >= 0);
    close_fixture(&f);
}

static void test_slowed_slot_ranks_first_tiny(void) { check_slowed_first(tiny_path(), 1000000, 8, 8); }

static void test_slowed_slot_ranks_first_smollm2(void)
{
    const char *p = smollm2_path();
    if (p) check_slowed_first(p, 2000000, 8, 3);
    else SKIP_CASE("SmolLM2 GGUF not found");
}

/* The rows, outside row included, add up to the step time the test measures itself. */
static void check_rows_add_up(const char *path, int threads, int n_prompt, int n_decode)
{
    fixture f;
    if (open_fixture(&f, path, threads)) {
        close_fixture(&f);
        return;
    }
    double measured_ms = (double)run_steps(f.ctx, f.prof, n_prompt, n_decode, NULL) * 1e-6;
    hone_profile_row rows[256];
    int n = 0;
    CHECK_EQ_INT(hone_profile_rows(f.prof, rows, 256, &n), 0);
    CHECK(n > 1 && n <= 256);
    double sum = 0, share = 0;
    int outside = 0;
    for (int i = 0; i < n && i < 256; i++) {
        sum += rows[i].total_ms;
        share += rows[i].share;
        outside += rows[i].slot == HONE_PROFILE_OUTSIDE;
        if (i) CHECK(rows[i].total_ms <= rows[i - 1].total_ms); /* sorted by share */
        CHECK(rows[i].total_ms >= 0);
    }
    hone_profile_summary s;
    hone_profile_summary_get(f.prof, &s);
    CHECK_EQ_INT(outside, 1);
    CHECK_EQ_INT(s.steps, n_decode + 1);
    CHECK_EQ_INT(s.prefill_steps, 1);
    CHECK_MSG(s.slot_ms <= s.step_ms, "slot time %g ms > step time %g ms", s.slot_ms, s.step_ms);
    CHECK_MSG(sum >= 0.95 * measured_ms && sum <= 1.05 * measured_ms,
              "%s: rows add up to %.4f ms, steps measured %.4f ms", path, sum, measured_ms);
    CHECK_NEAR(share, 1.0, 1e-9);
    close_fixture(&f);
}

static void test_rows_add_up_tiny(void)
{
    check_rows_add_up(tiny_path(), 1, 16, 16);
    check_rows_add_up(tiny_path(), 2, 16, 16);
}

static void test_rows_add_up_smollm2(void)
{
    const char *p = smollm2_path();
    if (p) check_rows_add_up(p, 2, 16, 8);
    else SKIP_CASE("SmolLM2 GGUF not found");
}

/* Profiling on changes no logit: bitwise equal to a run without the hook. */
static void check_logits_unchanged(const char *path, int n_prompt, int n_decode)
{
    fixture f;
    if (open_fixture(&f, path, 2)) {
        close_fixture(&f);
        return;
    }
    size_t nv = (size_t)hone_model_hparams(f.m)->n_vocab, count = nv * (size_t)(n_decode + 1);
    float *on = malloc(count * sizeof *on), *off = malloc(count * sizeof *off);
    run_steps(f.ctx, f.prof, n_prompt, n_decode, on);
    hone_profile_summary s1, s2;
    hone_profile_summary_get(f.prof, &s1);
    hone_profile_detach(f.prof, f.ctx);
    run_steps(f.ctx, NULL, n_prompt, n_decode, off);
    hone_profile_summary_get(f.prof, &s2);
    CHECK_MSG(memcmp(on, off, count * sizeof *on) == 0, "%s: logits differ with profiling on", path);
    CHECK(s1.calls > 0);
    CHECK_EQ_INT(s2.calls, s1.calls); /* detached: the forward pass calls no hook */
    free(on);
    free(off);
    close_fixture(&f);
}

static void test_logits_unchanged(void)
{
    check_logits_unchanged(tiny_path(), 12, 6);
    const char *p = smollm2_path();
    if (p) check_logits_unchanged(p, 8, 4);
    else SKIP_CASE("SmolLM2 GGUF not found");
}

/* The byte model of a matvec and of decode attention, against the formulas. */
static void test_byte_model(void)
{
    fixture f;
    if (open_fixture(&f, tiny_path(), 1)) {
        close_fixture(&f);
        return;
    }
    const hone_hparams *hp = hone_model_hparams(f.m);
    run_steps(f.ctx, f.prof, 4, 2, NULL); /* decode at n_kv = 5, 6 */
    hone_profile_row rows[256];
    int n = 0, seen_mv = 0, seen_att = 0;
    hone_profile_rows(f.prof, rows, 256, &n);
    for (int i = 0; i < n && i < 256; i++) {
        const hone_profile_row *r = &rows[i];
        if (r->slot == HONE_SLOT_MATVEC_Q4_1 && r->dims[0] == hp->dim && r->dims[1] == hp->dim) {
            double per = (double)r->dims[0] * (r->dims[1] / 32 * 20) + 4.0 * (r->dims[0] + r->dims[1]);
            CHECK_NEAR(r->bytes, per * r->calls, 1e-6);
            CHECK_NEAR(r->flops, 2.0 * r->dims[0] * r->dims[1] * r->calls, 1e-6);
            CHECK_EQ_INT(r->dtype, HONE_DTYPE_Q4_1);
            CHECK(r->gbps > 0 && r->roofline > 0);
            CHECK_NEAR(r->gain, r->share * (r->roofline >= 1 ? 0 : 1 - r->roofline), 1e-12);
            seen_mv = 1;
        }
        if (r->slot == HONE_SLOT_ATTENTION_DECODE) {
            /* n_kv 5 and 6, once per layer: K and V of each key and kv head, q and out */
            double kv = 2.0 * 4 * hp->n_kv_heads * hp->head_dim * (5 + 6) * hp->n_layers;
            double qo = 2.0 * 4 * hp->n_heads * hp->head_dim * 2 * hp->n_layers;
            CHECK_NEAR(r->bytes, kv + qo, 1e-6);
            CHECK_EQ_INT(r->calls, 2 * hp->n_layers);
            CHECK_STR_CONTAINS(r->shape, "kv=5..6");
            seen_att = 1;
        }
    }
    CHECK(seen_mv && seen_att);
    close_fixture(&f);
}

static void check_json_fields(cJSON *root)
{
    CHECK(root != NULL);
    if (!root) return;
    cJSON *s = cJSON_GetObjectItem(root, "summary");
    CHECK(cJSON_IsObject(s));
    const char *num[] = {"steps", "calls", "step_ms", "slot_ms", "outside_ms", "peak_gbps",
                         "peak_gflops", "hook_ns", "overhead"};
    for (size_t i = 0; s && i < sizeof num / sizeof num[0]; i++)
        CHECK_MSG(cJSON_IsNumber(cJSON_GetObjectItem(s, num[i])), "summary.%s", num[i]);
    CHECK(cJSON_IsString(cJSON_GetObjectItem(root, "source")));
    cJSON *rows = cJSON_GetObjectItem(root, "rows"), *rank = cJSON_GetObjectItem(root, "ranking");
    CHECK(cJSON_IsArray(rows) && cJSON_GetArraySize(rows) > 1);
    CHECK(cJSON_IsArray(rank) && cJSON_GetArraySize(rank) > 0);
    int outside = 0;
    cJSON *r;
    cJSON_ArrayForEach(r, rows) {
        const char *str[] = {"slot", "dtype", "shape"};
        const char *nums[] = {"calls", "total_ms", "share", "bytes", "flops", "gbps", "gflops", "gain"};
        for (size_t i = 0; i < 3; i++) CHECK(cJSON_IsString(cJSON_GetObjectItem(r, str[i])));
        for (size_t i = 0; i < 8; i++) CHECK(cJSON_IsNumber(cJSON_GetObjectItem(r, nums[i])));
        cJSON *roof = cJSON_GetObjectItem(r, "roofline");
        CHECK(cJSON_IsNumber(roof) || cJSON_IsNull(roof));
        const char *slot = cJSON_GetStringValue(cJSON_GetObjectItem(r, "slot"));
        if (slot && !strcmp(slot, "(outside slots)")) outside++;
    }
    CHECK_EQ_INT(outside, 1);
    /* the ranking is sorted by gain */
    double prev = 1e300;
    cJSON_ArrayForEach(r, rank) {
        double g = cJSON_GetNumberValue(cJSON_GetObjectItem(r, "gain"));
        CHECK(g <= prev);
        prev = g;
    }
}

static void test_json(void)
{
    fixture f;
    if (open_fixture(&f, tiny_path(), 1)) {
        close_fixture(&f);
        return;
    }
    run_steps(f.ctx, f.prof, 8, 4, NULL);
    cJSON *root = NULL;
    CHECK_EQ_INT(hone_profile_json(f.prof, &root), 0);
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON *back = text ? cJSON_Parse(text) : NULL;
    check_json_fields(back);
    cJSON_Delete(back);
    cJSON_Delete(root);
    free(text);
    close_fixture(&f);
}

/* `hone profile --json`: parses, has the fields, and the command's own figures. */
static void test_cli_json(void)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s profile -m %s --device cpu --tokens 6 --prompt 5 -t 1 --json",
             HONE_BIN, tiny_path());
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p) return;
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - 1 - len, p)) > 0) len += got;
    int st = pclose(p);
    CHECK_EQ_INT(st, 0);
    if (!buf) return;
    buf[len] = 0;
    cJSON *root = cJSON_Parse(buf);
    CHECK_MSG(root != NULL, "not JSON: %.200s", buf);
    check_json_fields(root);
    if (root) {
        CHECK(cJSON_IsString(cJSON_GetObjectItem(root, "model")));
        CHECK(cJSON_IsNumber(cJSON_GetObjectItem(root, "overhead_ab")));
        CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "decode_tokens")), 6, 0);
        cJSON *s = cJSON_GetObjectItem(root, "summary");
        CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(s, "decode_steps")), 6, 0);
        CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(s, "prefill_steps")), 1, 0);
    }
    cJSON_Delete(root);
    free(buf);
}

/* The profiler's overhead: the calibrated figure (clock reads + hook per call) is reported
 * and small, and an A/B of decode steps with the hook on and off agrees loosely. */
static void check_overhead(const char *path, int n_decode, double bound)
{
    fixture f;
    if (open_fixture(&f, path, 2)) {
        close_fixture(&f);
        return;
    }
    run_steps(f.ctx, f.prof, 8, n_decode, NULL);
    hone_profile_summary s;
    hone_profile_summary_get(f.prof, &s);
    CHECK(s.hook_ns > 0 && s.hook_ns < 5000);
    CHECK_MSG(s.overhead >= 0 && s.overhead < bound, "%s: overhead %.2f%%", path, 100 * s.overhead);
    /* A/B: alternate hooked and plain runs of the same steps; medians of 5 each */
    double on[5], off[5];
    for (int i = 0; i < 10; i++) {
        if (i & 1) hone_profile_attach(f.prof, f.ctx);
        else hone_profile_detach(f.prof, f.ctx);
        double t = (double)run_steps(f.ctx, NULL, 8, n_decode, NULL);
        if (i & 1) on[i / 2] = t;
        else off[i / 2] = t;
    }
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++) {
            if (on[j] < on[i]) { double x = on[i]; on[i] = on[j]; on[j] = x; }
            if (off[j] < off[i]) { double x = off[i]; off[i] = off[j]; off[j] = x; }
        }
    /* the fastest of each: interference from other processes only ever adds time */
    double ab = (on[0] - off[0]) / off[0];
    fprintf(stderr, "note: %s: profiler overhead %.1f ns/call, %.3f%% of step time calibrated, "
                    "%+.2f%% A/B (noisy)\n", path, s.hook_ns, 100 * s.overhead, 100 * ab);
    CHECK_MSG(ab < 0.5, "A/B overhead %.1f%%", 100 * ab); /* loose: a shared, noisy machine */
    close_fixture(&f);
}

static void test_overhead(void)
{
    /* the tiny model's slot calls last a microsecond or two: a loose bound; SmolLM2's is the
     * real figure (target < 2%) */
    check_overhead(tiny_path(), 8, 0.25);
    const char *p = smollm2_path();
    if (p) check_overhead(p, 8, 0.10);
    else SKIP_CASE("SmolLM2 GGUF not found");
}

/* A CUDA profile without CUDA (or a device) fails cleanly, saying why. */
static void test_cuda_source_unavailable(void)
{
    hone_profile_opts po = HONE_PROFILE_OPTS_INIT;
    po.source = HONE_PROFILE_CUDA;
    hone_profile *p = NULL;
    int rc = hone_profile_new(&p, &po);
    if (rc == 0) { /* a GPU is here: nothing to check on this path */
        hone_profile_free(p);
        return;
    }
    CHECK(p == NULL);
    CHECK(rc == HONE_EUNSUPPORTED || rc == HONE_EINTERNAL);
    CHECK(strlen(hone_error_last()) > 0);
}

TEST_MAIN(TEST_CASE(test_slowed_slot_ranks_first_tiny), TEST_CASE(test_slowed_slot_ranks_first_smollm2),
          TEST_CASE(test_rows_add_up_tiny), TEST_CASE(test_rows_add_up_smollm2),
          TEST_CASE(test_logits_unchanged), TEST_CASE(test_byte_model), TEST_CASE(test_json),
          TEST_CASE(test_cli_json), TEST_CASE(test_overhead), TEST_CASE(test_cuda_source_unavailable))
