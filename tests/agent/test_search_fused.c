/* The fused slots' search family (agent/search_fused.h): every point of every fused slot's
 * space renders to a C file the extractor accepts for the slot, compiles through the one CPU
 * compile path (candidates/compile.h) and gives bitwise the baseline composition's output (the
 * exact tier) on random inputs of the slot's shapes, with 1 and 3 shares; the incumbent's point
 * is last; the other slots are not the family's. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/extract.h"
#include "agent/search_fused.h"
#include "candidates/compile.h"
#include "engine/dtype.h"
#include "engine/error.h"
#include "engine/file.h"
#include "engine/slots.h"
#include "harness.h"

static char tmpdir[] = "/tmp/hone-search-fused-XXXXXX";

static void *compile_point(hone_slot_id slot, const char *src, int idx)
{
    char c_path[256], so_path[256];
    snprintf(c_path, sizeof c_path, "%s/%s_%d.c", tmpdir, hone_slots_name(slot), idx);
    snprintf(so_path, sizeof so_path, "%s/%s_%d.so", tmpdir, hone_slots_name(slot), idx);
    FILE *f = fopen(c_path, "w");
    if (!f) return NULL;
    fputs(src, f);
    fclose(f);
    hone_compile_cpu_result r;
    int rc = hone_compile_cpu(&r, c_path, so_path, NULL);
    if (rc) fprintf(stderr, "%s\n%s\n", hone_error_last(), r.log ? r.log : "");
    hone_compile_cpu_result_clear(&r);
    if (rc) return NULL;
    void *h = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    char sym[96];
    hone_slots_cpu_symbol(slot, sym, sizeof sym);
    return h ? dlsym(h, sym) : NULL;
}

/* The inputs of one call at shape s, filled by role (hone_slots_fill_inputs). */
typedef struct {
    void *in[HONE_SLOT_MAX_ARGS];
    float *a, *b, *scratch;
    int64_t out_n;
} call_bufs;

static void bufs_new(call_bufs *c, const hone_slot_desc *d, const hone_slot_shape *s, uint64_t *st)
{
    memset(c, 0, sizeof *c);
    int64_t scratch_n = 1;
    for (int a = 0; a < d->n_args; a++) {
        if (d->args[a].role == HONE_SLOT_ARG_SCRATCH) scratch_n = hone_slots_arg_elems(d, a, s);
        if (hone_slots_arg_is_input(d->args[a].role)) c->in[a] = malloc((size_t)hone_slots_arg_bytes(d, a, s) + 64);
    }
    hone_slots_fill_inputs(d, s, c->in, st);
    c->out_n = hone_slots_arg_elems(d, hone_slots_out_arg(d), s);
    c->a = malloc((size_t)c->out_n * 4);
    c->b = malloc((size_t)c->out_n * 4);
    c->scratch = malloc((size_t)scratch_n * 4);
}

static void bufs_free(call_bufs *c)
{
    for (int a = 0; a < HONE_SLOT_MAX_ARGS; a++) free(c->in[a]);
    free(c->a);
    free(c->b);
    free(c->scratch);
}

/* out = fn on the call's inputs, share by share (nth shares one after another). */
static void call(const hone_slot_desc *d, const hone_slot_shape *s, void *fn, call_bufs *c, float *out, int nth)
{
    hone_slot_value v[HONE_SLOT_MAX_ARGS];
    hone_slots_values(d, s, (const void *const *)c->in, out, c->scratch, v);
    memset(out, 0xff, (size_t)c->out_n * 4);
    for (int ith = 0; ith < nth; ith++) d->invoke(fn, v, ith, nth);
}

/* The slot's shapes without the edge ones (special values are the guard's business: a NaN's
 * sign may follow the compiler's choice of fma form), the LM head cut to 3001 rows. */
static int test_shapes(const hone_slot_desc *d, hone_slot_shape *out)
{
    hone_slot_shape all[HONE_SLOT_MAX_SHAPES];
    int n = d->shapes(d, NULL, all, HONE_SLOT_MAX_SHAPES), k = 0;
    for (int i = 0; i < n; i++) {
        if (all[i].edge) continue;
        out[k] = all[i];
        if (d->kind == HONE_SLOT_KIND_RMSNORM_MATVEC && out[k].d[0] > 3001) out[k].d[0] = 3001;
        k++;
    }
    return k;
}

static void test_space_render_compile_exact(void)
{
    const hone_search_family *f = &hone_search_fused_family;
    CHECK(!strcmp(f->params[0], "rows") && !strcmp(f->params[1], "prefetch") && f->params[2] == NULL);
    int points = 0, checked = 0;
    uint64_t st = 0x5eedf00d;
    for (int id = HONE_SLOT_FUSED_FIRST; id < HONE_SLOT_COUNT; id++) {
        hone_slot_id slot = (hone_slot_id)id;
        const hone_slot_desc *d = hone_slots_desc(id);
        CHECK(f->supports(slot));
        hone_search_point pts[32], inc = f->incumbent(slot);
        int n = f->space(slot, pts, 32);
        CHECK(n >= 8);
        CHECK(pts[n - 1].v[0] == inc.v[0] && pts[n - 1].v[1] == inc.v[1]);
        hone_slot_shape shapes[HONE_SLOT_MAX_SHAPES];
        int ns = test_shapes(d, shapes);
        CHECK(ns >= 4);
        /* every point of the q4_1 slots (SmolLM2's); of the other dtypes the first point and the
         * incumbent's (the template is one per kind: the dtype only picks the dequantiser), so
         * the suite stays within CI's time */
        size_t nl = strlen(d->name);
        int every = nl > 5 && !strcmp(d->name + nl - 5, "_q4_1");
        for (int p = 0; p < n; p++) {
            for (int q = 0; q < p; q++)
                CHECK_MSG(pts[q].v[0] != pts[p].v[0] || pts[q].v[1] != pts[p].v[1], "%s: point %d repeats", d->name, p);
            if (!every && p != 0 && p != n - 1) continue;
            char *src = NULL;
            CHECK_EQ_INT(f->render(slot, pts[p], &src), 0);
            if (!src) continue;
            char *fenced = malloc(strlen(src) + 16), *code = NULL;
            sprintf(fenced, "```c\n%s```\n", src);
            hone_extract_status es;
            CHECK_EQ_INT(hone_extract_code(fenced, slot, "cpu", &code, &es), 0);
            CHECK_MSG(es == HONE_EXTRACT_OK, "%s: %s", d->name, hone_extract_status_name(es));
            free(code);
            free(fenced);
            void *fn = compile_point(slot, src, p);
            free(src);
            CHECK_MSG(fn != NULL, "%s point rows=%d prefetch=%d does not compile", d->name, pts[p].v[0], pts[p].v[1]);
            if (!fn) continue;
            points++;
            for (int s = 0; s < ns; s++) {
                call_bufs c;
                bufs_new(&c, d, &shapes[s], &st);
                for (int nth = 1; nth <= 3; nth += 2) {
                    call(d, &shapes[s], d->cpu_baseline, &c, c.a, nth);
                    call(d, &shapes[s], fn, &c, c.b, nth);
                    char text[160];
                    hone_slots_shape_text(d, &shapes[s], text, sizeof text);
                    CHECK_MSG(memcmp(c.a, c.b, (size_t)c.out_n * 4) == 0, "%s rows=%d prefetch=%d: not "
                              "bitwise the baseline composition on %s (nth %d)", d->name, pts[p].v[0],
                              pts[p].v[1], text, nth);
                    checked++;
                }
                bufs_free(&c);
            }
        }
    }
    fprintf(stderr, "  %d points compiled, %d outputs compared bitwise\n", points, checked);
    CHECK(points == 3 * 12 + 15 * 2);
    /* not the family's slots */
    char *src = NULL;
    CHECK_EQ_INT(f->supports(HONE_SLOT_MATVEC_Q4_1), 0);
    CHECK_EQ_INT(f->space(HONE_SLOT_SWIGLU, (hone_search_point[4]){{{0}}}, 4), 0);
    CHECK_EQ_INT(f->render(HONE_SLOT_SWIGLU, f->incumbent(HONE_SLOT_SWIGLU), &src), HONE_EUNSUPPORTED);
    hone_search_point bad = {{9, 0}};
    CHECK_EQ_INT(f->render(HONE_SLOT_QKV_Q4_1, bad, &src), HONE_EINVAL);
}

static void cleanup(void) { hone_file_remove_tree(tmpdir); }

int main(int argc, char **argv)
{
    if (!mkdtemp(tmpdir)) return 1;
    atexit(cleanup);
    static const harness_case cases[] = {TEST_CASE(test_space_render_compile_exact)};
    return harness_run(cases, 1, argc, argv);
}
