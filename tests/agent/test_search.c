/* The search proposer: every family's table entry and space (the incumbent's point last, no
 * duplicates); every point of the matvec/matmul families' first points and of every other
 * family renders to a C file that the extractor accepts, compiles through candidates/compile.h
 * and gives bitwise the baseline's output (the exact tier) on the guard's cases (reference and
 * edge shapes, random and special inputs) for nth 1 and 3; a point that says it reorders
 * (rmsnorm lanes > 1) stays within a relative 1e-6 of it; the vector expf is bitwise libm's. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/extract.h"
#include "agent/search.h"
#include "candidates/compile.h"
#include "engine/dtype.h"
#include "engine/error.h"
#include "engine/slots.h"
#include "guard/cases.h"
#include "harness.h"
#include "kernel_check.h"

static char tmpdir[] = "/tmp/hone-search-XXXXXX";

static void *compile_point(hone_slot_id slot, const char *src, int idx)
{
    return compile_point_in(tmpdir, slot, src, idx);
}

/* The extractor takes the rendered file as an LLM's reply would hold it. */
static void check_extracts(hone_slot_id slot, const char *src)
{
    char *code = NULL;
    hone_extract_status st;
    char *fenced = malloc(strlen(src) + 16);
    sprintf(fenced, "```c\n%s```\n", src);
    CHECK_EQ_INT(hone_extract_code(fenced, slot, "cpu", &code, &st), 0);
    CHECK_MSG(st == HONE_EXTRACT_OK, "%s: %s", hone_slots_name(slot), hone_extract_status_name(st));
    free(code);
    free(fenced);
}

static void check_space_shape(hone_slot_id slot, const hone_search_point *pts, int n)
{
    CHECK_MSG(n >= 3, "%s: %d points", hone_slots_name(slot), n);
    CHECK(hone_search_point_eq(pts[n - 1], hone_search_incumbent(slot)));
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            CHECK_MSG(!hone_search_point_eq(pts[i], pts[j]), "%s: points %d and %d equal", hone_slots_name(slot), i, j);
}

static void test_linear_families(void)
{
    int checked = 0;
    for (int s = HONE_SLOT_MATVEC_F32; s <= HONE_SLOT_MATMUL_LAST; s++) {
        hone_slot_id slot = (hone_slot_id)s;
        hone_search_point pts[64];
        int n = hone_search_space(slot, pts, 64);
        check_space_shape(slot, pts, n);
        CHECK(strcmp(hone_search_family_of(slot)->name, s >= HONE_SLOT_MATMUL_F32 ? "matmul" : "matvec") == 0);
        /* the matvec and matmul spaces are large: the first two points and the incumbent; of
         * the further formats (q5_0 .. mxfp4, the same templates) the first point only */
        int pick[3] = {0, 1, n - 1};
        int more = (s > HONE_SLOT_MATVEC_Q4_1 && s <= HONE_SLOT_MATVEC_LAST) || s > HONE_SLOT_MATMUL_Q4_1;
        for (int k = 0; k < (more ? 1 : 3); k++) {
            char *src = NULL, what[128], desc[96];
            CHECK_EQ_INT(hone_search_render(slot, pts[pick[k]], &src), 0);
            check_extracts(slot, src);
            void *fn = compile_point(slot, src, pick[k]);
            free(src);
            hone_search_describe(slot, pts[pick[k]], desc, sizeof desc);
            snprintf(what, sizeof what, "%s %s", hone_slots_name(slot), desc);
            CHECK_MSG(fn != NULL, "%s does not compile", what);
            if (fn) CHECK_MSG(check_against_baseline(slot, fn, 0, what, NULL), "%s differs from the baseline", what);
            checked++;
        }
    }
    CHECK_EQ_INT(checked, 3 * 12 + 2 * (HONE_SLOT_MATVEC_LAST - HONE_SLOT_MATVEC_Q4_1));
    /* the matvec space: rows in flight x prefetch distances 0 .. 32 KiB, far prefetch first;
     * the staged block formats' incumbent (the one-row point without prefetch) last */
    hone_search_point pts[64];
    CHECK_EQ_INT(hone_search_space(HONE_SLOT_MATVEC_Q4_1, pts, 64), 28);
    CHECK(pts[0].v[0] == 2 && pts[0].v[1] == 16384 && pts[27].v[0] == 1 && pts[27].v[1] == 0);
    CHECK_EQ_INT(hone_search_space(HONE_SLOT_MATVEC_F16, pts, 64), 28);
    CHECK(pts[27].v[0] == 1 && pts[27].v[1] == 16384); /* the shipped schedule's point */
    CHECK_EQ_INT(hone_search_space(HONE_SLOT_MATMUL_F16, pts, 64), 12);
    CHECK(pts[0].v[0] == 12 && pts[0].v[1] == 8192 && pts[11].v[0] == 8 && pts[11].v[1] == 8192);
}

/* Every point of every other family, compiled and compared. */
static void test_other_families(void)
{
    static const hone_slot_id slots[] = {HONE_SLOT_RMSNORM, HONE_SLOT_SWIGLU, HONE_SLOT_ADD, HONE_SLOT_ROPE,
                                         HONE_SLOT_ATTENTION_DECODE, HONE_SLOT_ATTENTION_PREFILL, HONE_SLOT_EMBED};
    int checked = 0;
    for (size_t si = 0; si < sizeof slots / sizeof slots[0]; si++) {
        hone_slot_id slot = slots[si];
        CHECK_MSG(hone_search_supports(slot), "%s has no family", hone_slots_name(slot));
        hone_search_point pts[64];
        int n = hone_search_space(slot, pts, 64);
        check_space_shape(slot, pts, n);
        for (int k = 0; k < n; k++) {
            char *src = NULL, what[128], desc[96];
            CHECK_EQ_INT(hone_search_render(slot, pts[k], &src), 0);
            if (!src) continue;
            check_extracts(slot, src);
            void *fn = compile_point(slot, src, k);
            free(src);
            hone_search_describe(slot, pts[k], desc, sizeof desc);
            snprintf(what, sizeof what, "%s %s", hone_slots_name(slot), desc);
            CHECK_MSG(fn != NULL, "%s does not compile", what);
            if (!fn) continue;
            /* rmsnorm lanes > 1 reorders the sum of squares: faithful, not bitwise */
            double tol = slot == HONE_SLOT_RMSNORM && pts[k].v[2] > 1 ? 1e-6 : 0;
            CHECK_MSG(check_against_baseline(slot, fn, tol, what, NULL), "%s differs from the baseline", what);
            checked++;
        }
    }
    CHECK_MSG(checked >= 60, "%d points checked", checked);
    /* a point outside a family's range is refused; slots without a family say so */
    char *src = NULL;
    hone_search_point bad = {{9, 9, 9, 9}};
    CHECK_EQ_INT(hone_search_render(HONE_SLOT_SWIGLU, bad, &src), HONE_EINVAL);
    CHECK(src == NULL);
    hone_slot_id none = (hone_slot_id)-1;
    CHECK(hone_search_family_of(none) == NULL);
    CHECK_EQ_INT(hone_search_space(none, &bad, 1), 0);
    CHECK_EQ_INT(hone_search_render(none, bad, &src), HONE_EUNSUPPORTED);
    char desc[96];
    hone_search_point p = {{3, 4, 8, 1}};
    hone_search_describe(HONE_SLOT_ATTENTION_DECODE, p, desc, sizeof desc);
    CHECK(strcmp(desc, "heads=3 keys=4 prefetch=8 vexp=1") == 0);
}

/* The vector expf against libm's on a dense sample of |x| < 88 and on special values. */
static void test_vector_expf(void)
{
    char *ex = hone_search_expf_text();
    CHECK(ex != NULL);
    char *src = hone_search_format(
        "#include \"kernels/cpu/common.h\"\n%s\n"
        "void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)\n"
        "{\n    (void)up; (void)ith; (void)nth;\n"
        "    for (int64_t i = 0; i + 16 <= n; i += 16) hone_search_expf16(out + i, gate + i);\n}\n", ex);
    free(ex);
    void *fn = compile_point(HONE_SLOT_SWIGLU, src, 1000);
    free(src);
    CHECK(fn != NULL);
    if (!fn) return;
    enum { N = 1 << 16 };
    float *x = malloc(N * sizeof *x), *e = malloc(N * sizeof *e);
    long bad = 0, tested = 0;
    for (uint64_t u0 = 0; u0 + (uint64_t)N * 61 <= 0xffffffffull && bad == 0; u0 += (uint64_t)N * 61) {
        for (int i = 0; i < N; i++) {
            uint32_t u = (uint32_t)(u0 + (uint64_t)i * 61);
            memcpy(&x[i], &u, 4);
        }
        ((hone_slot_swiglu_fn)fn)(e, x, x, N, 0, 1);
        for (int i = 0; i < N; i++) {
            float r = expf(x[i]);
            if (memcmp(&r, &e[i], 4) != 0 && !(isnan(r) && isnan(e[i]))) {
                if (bad++ < 3) fprintf(stderr, "expf(%a): libm %a, vector %a\n", x[i], r, e[i]);
            }
        }
        tested += N;
    }
    CHECK_MSG(bad == 0, "%ld of %ld differ", bad, tested);
    CHECK(tested > 60000000);
    free(x);
    free(e);
}

/* Long context (issue 18): every attention point walks a row's segments itself (heads in
 * flight at any key count) rather than falling back to the baseline row past a key limit, so a
 * point can win at the key count of the case the guard's speed gate times; that its segments
 * fold to the baseline's bits is checked above on the guard's cases. */
static void test_attention_reaches_the_timed_keys(void)
{
    static const hone_slot_id slots[] = {HONE_SLOT_ATTENTION_DECODE, HONE_SLOT_ATTENTION_PREFILL};
    for (size_t si = 0; si < 2; si++) {
        hone_case_set cs;
        CHECK_EQ_INT(hone_cases_new(&cs, slots[si], NULL, 7), 0);
        const hone_case *tc = hone_cases_timing(&cs);
        CHECK(tc != NULL);
        int64_t keys = tc ? tc->shape.d[2] : 0; /* n_kv (prefill: the last query's, derived) */
        CHECK_MSG(keys >= 4096, "%s: the gate times %lld keys", hone_slots_name(slots[si]), (long long)keys);
        hone_search_point pts[64];
        int n = hone_search_space(slots[si], pts, 64);
        for (int k = 0; k < n; k++) {
            char *src = NULL;
            CHECK_EQ_INT(hone_search_render(slots[si], pts[k], &src), 0);
            CHECK_MSG(src && strstr(src, "hone_cpu_att_seg_len(n_kv, j)") && !strstr(src, "MAXK"),
                      "%s point %d does not walk a row's segments", hone_slots_name(slots[si]), k);
            free(src);
        }
        hone_cases_free(&cs);
    }
}

static void cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) { /* best effort */ }
}

int main(int argc, char **argv)
{
    if (!mkdtemp(tmpdir)) return 1;
    atexit(cleanup);
    static const harness_case cases[] = {TEST_CASE(test_linear_families), TEST_CASE(test_other_families),
                                         TEST_CASE(test_vector_expf), TEST_CASE(test_attention_reaches_the_timed_keys)};
    return harness_run(cases, 4, argc, argv);
}
