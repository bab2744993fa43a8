/* A slot added through its descriptor alone (a test-only "axpy": y = alpha x + z) reaches every
 * consumer of the slot table: the profiler (name, shape, cost model), the guard's cases and its
 * oracle, the guard's kernel-parity gate itself, the kernel loader's self-check, the prompt's
 * contract and the extractor's signature check. Nothing outside this file knows the slot. */
#include "harness.h"

#include <stdint.h>
#include <unistd.h>

#include "agent/extract.h"
#include "agent/prompt.h"
#include "candidates/kernel_loader.h"
#include "engine/error.h"
#include "engine/slots.h"
#include "guard/cases.h"
#include "guard/guard.h"
#include "guard_test.h"
#include "profiler/profile.h"

typedef void (*axpy_fn)(float *y, const float *x, const float *z, int64_t n, float alpha, int ith,
                        int nth);

/* The baseline: elements split in contiguous shares. */
static void axpy_baseline(float *y, const float *x, const float *z, int64_t n, float alpha, int ith,
                          int nth)
{
    int64_t lo = n * ith / nth, hi = n * (ith + 1) / nth;
    for (int64_t i = lo; i < hi; i++) y[i] = alpha * x[i] + z[i];
}

static void axpy_invoke(void *fn, const hone_slot_value *v, int ith, int nth)
{
    ((axpy_fn)fn)(v[0].p, v[1].cp, v[2].cp, v[3].i64, v[4].f32, ith, nth);
}

static void axpy_cost(const hone_slot_desc *d, const hone_slot_shape *s, double *bytes, double *flops)
{
    (void)d;
    *bytes = 12.0 * (double)s->d[0];
    *flops = 2.0 * (double)s->d[0];
}

static int axpy_shapes(const hone_slot_desc *d, const hone_model *m, hone_slot_shape *out, int cap)
{
    (void)d, (void)m;
    static const int64_t ns[] = {1, 7, 1000, 4096};
    int k = 0;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0] && k < cap; i++)
        out[k++] = (hone_slot_shape){.d = {ns[i]}, .f = {0.75f}, .dtype = -1};
    if (k < cap) out[k++] = (hone_slot_shape){.d = {33}, .f = {-3.0f}, .dtype = -1, .edge = 1};
    return k;
}

static void axpy_oracle(const hone_slot_desc *d, const hone_slot_shape *s, const hone_slot_value *v,
                        double *ref)
{
    (void)d;
    const float *x = v[1].cp, *z = v[2].cp;
    for (int64_t i = 0; i < s->d[0]; i++) ref[i] = (double)s->f[0] * x[i] + z[i];
}

static int AXPY = -1;

static void register_axpy(void)
{
    hone_slot_desc d = {
        .name = "axpy", .kind = HONE_SLOT_KIND_OTHER, .dtype = -1,
        .math = "y[i] = alpha * x[i] + z[i] for i < n (a test-only slot).",
        .n_args = 5,
        .args = {{.name = "y", .ctype = "float *", .role = HONE_SLOT_ARG_OUT, .dims = {0, HONE_SLOT_END}},
                 {.name = "x", .ctype = "const float *", .role = HONE_SLOT_ARG_IN, .dims = {0, HONE_SLOT_END},
                  .lo = -2, .hi = 2, .edge = 1e30},
                 {.name = "z", .ctype = "const float *", .role = HONE_SLOT_ARG_IN, .dims = {0, HONE_SLOT_END},
                  .lo = -2, .hi = 2},
                 {.name = "n", .ctype = "int64_t", .role = HONE_SLOT_ARG_DIM, .dims = {0, HONE_SLOT_END}},
                 {.name = "alpha", .ctype = "float", .role = HONE_SLOT_ARG_F32, .dims = {0, HONE_SLOT_END}}},
        .n_dims = 1, .dims = {"n"}, .key_dims = 1, .range_dim = -1, .params = {"alpha"},
        .share_units = {0, HONE_SLOT_END}, .share_len = {HONE_SLOT_END}, .cmp_rows = {HONE_SLOT_END},
        .cuda_x = {0, HONE_SLOT_END}, .cuda_y = {HONE_SLOT_END},
        .cost = axpy_cost, .shapes = axpy_shapes, .invoke = axpy_invoke, .oracle = axpy_oracle,
        .cpu_baseline = (void *)axpy_baseline,
    };
    AXPY = hone_slots_register(&d);
    CHECK(AXPY >= HONE_SLOT_COUNT);
    CHECK_EQ_INT(hone_slots_from_name("axpy"), AXPY);
    CHECK_EQ_INT(hone_slots_count(), HONE_SLOT_COUNT + 1);
    CHECK(hone_slots_register(&d) < 0); /* the name is taken */
    CHECK_STR_CONTAINS(hone_error_last(), "exists already");
    hone_slot_table t;
    hone_slots_cpu_baseline(&t);
    CHECK(hone_slots_get(&t, AXPY) == (void *)axpy_baseline);
}

static void test_profile(void)
{
    hone_profile_opts po = HONE_PROFILE_OPTS_INIT;
    po.peak_gbps = 50;
    po.peak_gflops = 100;
    hone_profile *p = NULL;
    CHECK_EQ_INT(hone_profile_new(&p, &po), 0);
    hone_slot_shape s = {.d = {4096}, .f = {0.5f}, .dtype = -1};
    hone_profile_step_begin(p, 1, 0);
    for (int i = 0; i < 3; i++) hone_profile_hook(p, AXPY, 1000, &s);
    hone_profile_step_end(p);
    hone_profile_row rows[8];
    int n = 0, seen = 0;
    hone_profile_rows(p, rows, 8, &n);
    for (int i = 0; i < n && i < 8; i++)
        if (rows[i].slot == AXPY) {
            seen = 1;
            CHECK_MSG(!strcmp(rows[i].name, "axpy"), "%s", rows[i].name);
            CHECK_MSG(!strcmp(rows[i].shape, "n=4096"), "%s", rows[i].shape);
            CHECK_EQ_INT(rows[i].calls, 3);
            CHECK_NEAR(rows[i].bytes, 3 * 12.0 * 4096, 1e-9); /* the descriptor's cost model */
            CHECK_NEAR(rows[i].flops, 3 * 2.0 * 4096, 1e-9);
        }
    CHECK(seen);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    hone_profile_print(p, f);
    fclose(f);
    CHECK_STR_CONTAINS(text, "axpy");
    free(text);
    hone_profile_free(p);
}

static void test_cases(void)
{
    hone_case_set cs;
    CHECK_EQ_INT(hone_cases_new(&cs, AXPY, NULL, 42), 0);
    CHECK_EQ_INT(cs.n, 5);
    int edge = 0;
    for (int i = 0; i < cs.n; i++) {
        const hone_case *c = &cs.c[i];
        CHECK_EQ_INT(c->out_len, c->shape.d[0]);
        CHECK_EQ_INT(c->share_units, c->shape.d[0]);
        edge += strstr(c->desc, "(edge values)") != NULL;
        CHECK_STR_CONTAINS(c->desc, "axpy n=");
        float *o = hone_cases_out(&cs, c, 0);
        hone_cases_poison(&cs, c, o);
        hone_cases_call((void *)axpy_baseline, c, cs.base, o, hone_cases_scratch(&cs, c), 0, 1);
        double *ref = malloc(sizeof(double) * (size_t)c->out_len);
        hone_cases_oracle(c, cs.base, ref);
        for (int64_t k = 0; k < c->out_len; k++)
            if (isfinite(ref[k])) CHECK_NEAR(o[k], ref[k], fabs(ref[k]) * 1e-6 + 1e-6);
        free(ref);
        char what[128];
        CHECK(hone_cases_canaries_ok(&cs, c, what, sizeof what));
        CHECK(hone_cases_hash_inputs(&cs, c) == c->in_hash);
    }
    CHECK_EQ_INT(edge, 1);
    CHECK_EQ_INT(hone_cases_timing(&cs)->shape.d[0], 4096);
    CHECK_NEAR(hone_cases_cost(hone_cases_timing(&cs), NULL), 12.0 * 4096, 1e-9);
    hone_cases_free(&cs);
}

static void bad_axpy(float *y, const float *x, const float *z, int64_t n, float alpha, int ith, int nth)
{
    int64_t lo = n * ith / nth, hi = n * (ith + 1) / nth;
    for (int64_t i = lo; i < hi; i++) y[i] = alpha * x[i] - z[i];
}

static void test_loader_check(void)
{
    hone_kernel_loader_opts o = HONE_KERNEL_LOADER_OPTS_INIT;
    CHECK_EQ_INT(hone_kernel_loader_check(AXPY, (void *)axpy_baseline, &o), 0);
    CHECK(hone_kernel_loader_check(AXPY, (void *)bad_axpy, &o) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "axpy n=");
}

static void test_prompt_and_extract(void)
{
    char *c = hone_prompt_contract(AXPY);
    CHECK(c != NULL);
    if (c) {
        CHECK_STR_CONTAINS(c, "y[i] = alpha * x[i] + z[i]");
        CHECK_STR_CONTAINS(c, "Rules every CPU slot");
        CHECK_STR_CONTAINS(c, "typedef void (*hone_slot_axpy_fn)(float *y, const float *x, const float *z, "
                              "int64_t n, float alpha, int ith, int nth);");
        CHECK_STR_CONTAINS(c, "alpha");
    }
    free(c);
    CHECK_MSG(!strcmp(hone_extract_cpu_signature(AXPY), "float *,const float *,const float *,int64_t,float,int,int"), "%s", hone_extract_cpu_signature(AXPY));
    const char *good = "Here:\n```c\nvoid hone_cpu_axpy(float *restrict y, const float *x, const float *z, "
                       "int64_t n, float a, int ith, int nth) { (void)y; }\n```\n";
    const char *bad = "```c\nvoid hone_cpu_axpy(float *y, const float *x, int64_t n, int ith, int nth) {}\n```\n";
    char *code = NULL;
    hone_extract_status st;
    CHECK_EQ_INT(hone_extract_code(good, AXPY, "cpu", &code, &st), 0);
    CHECK_EQ_INT(st, HONE_EXTRACT_OK);
    CHECK(code && strstr(code, "hone_cpu_axpy"));
    free(code);
    code = NULL;
    CHECK_EQ_INT(hone_extract_code(bad, AXPY, "cpu", &code, &st), 0);
    CHECK_EQ_INT(st, HONE_EXTRACT_BAD_SIGNATURE);
    CHECK(code == NULL);
}

/* The guard's kernel gates on the registered slot: a correct rewrite passes parity (the tiny
 * model never calls the slot, so model parity says "not exercised"), a wrong one fails it. */
static void test_guard(void)
{
    char dir[] = "/tmp/hone-slot-registry-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char good[512], bad[512], state[512];
    snprintf(good, sizeof good, "%s/good.c", dir);
    snprintf(bad, sizeof bad, "%s/bad.c", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    FILE *f = fopen(good, "w");
    fputs("#include <stdint.h>\n"
          "void hone_cpu_axpy(float *y, const float *x, const float *z, int64_t n, float alpha,\n"
          "                   int ith, int nth)\n"
          "{\n"
          "    int64_t lo = n * ith / nth, hi = n * (ith + 1) / nth;\n"
          "    for (int64_t i = lo; i < hi; i++) y[i] = alpha * x[i] + z[i];\n"
          "}\n", f);
    fclose(f);
    f = fopen(bad, "w");
    fputs("#include <stdint.h>\n"
          "void hone_cpu_axpy(float *y, const float *x, const float *z, int64_t n, float alpha,\n"
          "                   int ith, int nth)\n"
          "{\n"
          "    int64_t lo = n * ith / nth, hi = n * (ith + 1) / nth;\n"
          "    for (int64_t i = lo; i < hi; i++) y[i] = alpha * x[i] + 1.001f * z[i];\n"
          "}\n", f);
    fclose(f);
    hone_guard_result res;
    hone_guard_opts o = guard_test_opts("cpu", "axpy", good, state);
    o.skip_speed = 1;
    o.kernel_timeout_s = 10;
    CHECK_EQ_INT(hone_guard_run(&res, &o, o.quiet ? NULL : stderr), 0);
    CHECK_MSG(res.accepted, "%s: %s", hone_guard_code_name(res.code), res.reason);
    CHECK_MSG(!strcmp(res.tier, "exact"), "%s", res.tier);
    o = guard_test_opts("cpu", "axpy", bad, state);
    o.skip_speed = 1;
    CHECK_EQ_INT(hone_guard_run(&res, &o, o.quiet ? NULL : stderr), 0);
    CHECK(!res.accepted);
    CHECK_EQ_INT(res.code, HONE_GUARD_PARITY);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) { /* best effort */ }
}

TEST_MAIN(TEST_CASE(register_axpy), TEST_CASE(test_profile), TEST_CASE(test_cases), TEST_CASE(test_loader_check),
          TEST_CASE(test_prompt_and_extract), TEST_CASE(test_guard))
