/* Test helpers for kernels as C files (the search proposer's points, the naive incumbents):
 * compile one through candidates/compile.h (cached under the test data dir) and load its slot
 * function; compare a slot function's outputs with the baseline's on the guard's cases. */
#ifndef HONE_TESTS_AGENT_KERNEL_CHECK_H
#define HONE_TESTS_AGENT_KERNEL_CHECK_H

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candidates/compile.h"
#include "engine/error.h"
#include "engine/slots.h"
#include "guard/cases.h"
#include "guard/scan.h"
#include "harness.h"

/* Compiles the C text src (written as dir/<slot>_<idx>.c) and returns its slot function. */
static inline void *compile_point_in(const char *dir, hone_slot_id slot, const char *src, int idx)
{
    char c_path[512], so_path[512];
    snprintf(c_path, sizeof c_path, "%s/%s_%d.c", dir, hone_slots_name(slot), idx);
    FILE *f = fopen(c_path, "w");
    if (!f) return NULL;
    fputs(src, f);
    fclose(f);
    char why[512], sym[96];
    hone_slots_cpu_symbol(slot, sym, sizeof sym);
    CHECK_MSG(hone_scan_c_source(src, HONE_SOURCE_DIR, why, sizeof why) == 0, "%s %d: source scan: %s",
              hone_slots_name(slot), idx, why);
    hone_compile_cpu_result r;
    int rc = hone_compile_cpu_cached(&r, so_path, sizeof so_path, c_path, HONE_TEST_DATA_DIR "/search-cache", NULL);
    if (rc) fprintf(stderr, "%s\n%s\n", hone_error_last(), r.log ? r.log : "");
    hone_compile_cpu_result_clear(&r);
    if (rc) return NULL;
    /* the guard's object scan, which the loader runs too */
    CHECK_MSG(hone_scan_elf(so_path, sym, why, sizeof why) == 0, "%s %d: ELF scan: %s", hone_slots_name(slot), idx, why);
    void *h = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    return h ? dlsym(h, sym) : NULL;
}

/* fn's outputs against the baseline's on every case of slot (m: the model's shapes too, or
 * NULL), nth 1 and 3; tol 0: bitwise; tol < 0: bitwise but for the bits of a NaN. */
static inline int check_against_baseline(hone_slot_id slot, void *fn, double tol, const char *what,
                                         const hone_model *m)
{
    hone_slot_table base;
    hone_slots_cpu_baseline(&base);
    void *inc = hone_slots_get(&base, slot);
    hone_case_set cs;
    CHECK_EQ_INT(hone_cases_new(&cs, slot, m, 0x5eed0 + (uint64_t)slot), 0);
    int bad = 0;
    for (int i = 0; i < cs.n && !bad; i++) {
        const hone_case *c = &cs.c[i];
        float *scr = hone_cases_scratch(&cs, c);
        float *a = hone_cases_out(&cs, c, 0), *b = hone_cases_out(&cs, c, 1), *b3 = hone_cases_out(&cs, c, 4);
        hone_cases_poison(&cs, c, a);
        hone_cases_call(inc, c, cs.base, a, scr, 0, 1);
        hone_cases_poison(&cs, c, b);
        hone_cases_call(fn, c, cs.base, b, scr, 0, 1);
        hone_cases_poison(&cs, c, b3);
        for (int ith = 0; ith < 3; ith++) hone_cases_call(fn, c, cs.base, b3, scr, ith, 3);
        for (int64_t k = 0; k < c->out_len && !bad; k++) {
            float x = a[k], y = b[k], y3 = b3[k];
            if (tol == 0) {
                bad = memcmp(&x, &y, 4) != 0 || memcmp(&x, &y3, 4) != 0;
            } else if (tol < 0) { /* bitwise but for which NaN (sign, payload) a NaN is */
                bad = isnan(x) ? !isnan(y) || !isnan(y3) : memcmp(&x, &y, 4) != 0 || memcmp(&x, &y3, 4) != 0;
            } else {
                int nan_differs = isnan(x) != isnan(y) || isnan(x) != isnan(y3);
                bad = nan_differs || (!isnan(x) && (fabs((double)x - y) > tol * fabs((double)x) + 1e-30 ||
                                                    fabs((double)x - y3) > tol * fabs((double)x) + 1e-30));
            }
            if (bad) fprintf(stderr, "%s: %s element %lld: baseline %a, point %a (nth 3: %a)\n", what, c->desc,
                             (long long)k, x, y, y3);
        }
    }
    hone_cases_free(&cs);
    return !bad;
}

#endif
