/* The a-priori error bounds (guard/oracle.h): every shipped baseline stays within its bound on
 * every case of its slot's shape set (edge cases included), so does a legitimate reorder (four
 * accumulators instead of sixteen lanes), and a low-precision accumulation does not. */
#include "harness.h"

#include <float.h>
#include <stdint.h>

#include "engine/slots.h"
#include "guard/cases.h"
#include "guard/oracle.h"

/* max over compared elements of |got - ref| / bound; -1 if an element has no finite pair */
static double worst_ratio(const hone_case *c, const hone_case_set *s, void *fn)
{
    float *o = hone_cases_out(s, c, 0);
    hone_cases_poison(s, c, o);
    hone_cases_call(fn, c, s->base, o, hone_cases_scratch(s, c), 0, 1);
    double *ref = malloc(sizeof(double) * (size_t)c->out_len), *b = malloc(sizeof(double) * (size_t)c->out_len);
    hone_cases_oracle(c, s->base, ref);
    CHECK(hone_cases_bound(c, s->base, ref, b) == 1);
    double worst = 0;
    for (int64_t i = 0; i < c->out_len; i++) {
        if (!isfinite(o[i]) || !isfinite((float)ref[i])) continue;
        double r = fabs((double)o[i] - ref[i]) / b[i];
        if (r > worst) worst = r;
    }
    free(ref);
    free(b);
    return worst;
}

static void test_baselines_within_bounds(void)
{
    for (int id = 0; id < HONE_SLOT_COUNT; id++) {
        hone_case_set s;
        CHECK_EQ_INT(hone_cases_new(&s, id, NULL, 1234 + (uint64_t)id), 0);
        double worst = 0;
        for (int i = 0; i < s.n; i++) {
            double r = worst_ratio(&s.c[i], &s, hone_slots_desc(id)->cpu_baseline);
            CHECK_MSG(r <= 1.0, "%s: error %.3g x its bound", s.c[i].desc, r);
            if (r > worst) worst = r;
        }
        fprintf(stderr, "  %-20s worst error / bound %.3g over %d cases\n", hone_slots_name(id), worst, s.n);
        hone_cases_free(&s);
    }
}

/* matvec_f32 with four accumulators (a reorder a person would write) and in _Float16 */
static void mv4(float *y, const void *W, const float *x, int64_t rows, int64_t cols, int ith, int nth)
{
    for (int64_t r = rows * ith / nth; r < rows * (ith + 1) / nth; r++) {
        const float *w = (const float *)W + r * cols;
        float a[4] = {0};
        for (int64_t c = 0; c < cols; c++) a[c % 4] += w[c] * x[c];
        y[r] = (a[0] + a[1]) + (a[2] + a[3]);
    }
}

static void mv_half(float *y, const void *W, const float *x, int64_t rows, int64_t cols, int ith, int nth)
{
    for (int64_t r = rows * ith / nth; r < rows * (ith + 1) / nth; r++) {
        const float *w = (const float *)W + r * cols;
        _Float16 acc = 0;
        for (int64_t c = 0; c < cols; c++) acc += (_Float16)(w[c] * x[c]);
        y[r] = (float)acc;
    }
}

static void test_reorder_within_low_precision_beyond(void)
{
    hone_case_set s;
    CHECK_EQ_INT(hone_cases_new(&s, HONE_SLOT_MATVEC_F32, NULL, 99), 0);
    double w4 = 0, wh = 0;
    for (int i = 0; i < s.n; i++) {
        double a = worst_ratio(&s.c[i], &s, (void *)mv4), b = worst_ratio(&s.c[i], &s, (void *)mv_half);
        if (a > w4) w4 = a;
        if (b > wh) wh = b;
    }
    fprintf(stderr, "  4 accumulators: %.3g of the bound; _Float16: %.3g\n", w4, wh);
    CHECK(w4 <= 1.0);
    CHECK(wh > 2.0); /* beyond the faithful tier's slack */
    hone_cases_free(&s);
}

static void test_gamma(void)
{
    CHECK_NEAR(hone_oracle_gamma(1), 0x1p-24 / (1 - 0x1p-24), 1e-30);
    CHECK(isinf(hone_oracle_gamma((int64_t)1 << 25)));
}

TEST_MAIN(TEST_CASE(test_gamma), TEST_CASE(test_baselines_within_bounds),
          TEST_CASE(test_reorder_within_low_precision_beyond))
