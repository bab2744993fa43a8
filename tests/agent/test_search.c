/* The search proposer: every point of every matvec/matmul space renders to a C file that
 * compiles, defines the slot's entry point, and gives bitwise the incumbent's output (the
 * exact tier) on model and odd shapes; the incumbent's own point is in the space. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/extract.h"
#include "agent/search.h"
#include "engine/dtype.h"
#include "engine/slots.h"
#include "engine/error.h"
#include "harness.h"

static char tmpdir[] = "/tmp/hone-search-XXXXXX";
static unsigned rng = 12345;
static float frand(void) { rng = rng * 1664525u + 1013904223u; return (float)(rng >> 8) / 16777216.0f - 0.5f; }

/* Random weights of dtype (finite f16 scales). */
static void *make_weights(int dt, int64_t rows, int64_t cols)
{
    int64_t bytes = rows * hone_dtype_row_bytes(dt, cols);
    uint8_t *w = malloc((size_t)bytes);
    for (int64_t i = 0; i < bytes; i++) w[i] = (uint8_t)(rng = rng * 1664525u + 1013904223u, rng >> 24);
    int64_t bs = hone_dtype_block_size(dt), ts = hone_dtype_type_size(dt);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < cols / bs; b++) {
            uint8_t *blk = w + r * hone_dtype_row_bytes(dt, cols) + b * ts;
            if (dt == HONE_DTYPE_F32) { float f = frand(); memcpy(blk, &f, 4); }
            else if (dt == HONE_DTYPE_F16) { uint16_t h = hone_f32_to_fp16(frand()); memcpy(blk, &h, 2); }
            else if (dt == HONE_DTYPE_BF16) { uint16_t h = hone_f32_to_bf16(frand()); memcpy(blk, &h, 2); }
            else {
                uint16_t d = hone_f32_to_fp16(0.01f + 0.02f * (frand() + 0.5f)), m = hone_f32_to_fp16(frand() * 0.1f);
                memcpy(blk, &d, 2);
                if (dt == HONE_DTYPE_Q4_1) memcpy(blk + 2, &m, 2);
            }
        }
    return w;
}

static void *compile_point(hone_slot_id slot, const char *src, int idx)
{
    char c_path[256], so_path[256], cmd[1024];
    snprintf(c_path, sizeof c_path, "%s/%s_%d.c", tmpdir, hone_slots_name(slot), idx);
    snprintf(so_path, sizeof so_path, "%s/%s_%d.so", tmpdir, hone_slots_name(slot), idx);
    FILE *f = fopen(c_path, "w");
    fputs(src, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "cc -std=c11 -O2 -march=native -fPIC -shared -Wall -Wextra -Werror -I%s -o %s %s",
             HONE_SOURCE_DIR, so_path, c_path);
    if (system(cmd) != 0) return NULL;
    void *h = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    char sym[96];
    hone_slots_cpu_symbol(slot, sym, sizeof sym);
    return h ? dlsym(h, sym) : NULL;
}

static void test_space_and_exactness(void)
{
    hone_slot_table base;
    hone_slots_cpu_baseline(&base);
    static const int64_t shapes[][3] = {{576, 576, 3}, {37, 96, 5}, {5, 33, 2}, {1, 7, 1}};
    int checked = 0;
    for (int s = HONE_SLOT_MATVEC_F32; s <= HONE_SLOT_MATMUL_Q4_1; s++) {
        hone_slot_id slot = (hone_slot_id)s;
        int is_mm = slot >= HONE_SLOT_MATMUL_F32;
        int dt = 0;
        for (int d = 0; d < HONE_DTYPE_COUNT_MAX; d++)
            if (hone_slots_matvec_id(d) == s || hone_slots_matmul_id(d) == s) dt = d;
        hone_search_point pts[32];
        int n = hone_search_space(slot, pts, 32);
        CHECK(n >= 4);
        hone_search_point inc = hone_search_incumbent(slot);
        CHECK(pts[n - 1].rows == inc.rows && pts[n - 1].prefetch == inc.prefetch && pts[n - 1].tile == inc.tile);
        /* compile a few points per slot (all would take long): the first two and the incumbent */
        int pick[3] = {0, 1, n - 1};
        for (int k = 0; k < 3; k++) {
            char *src = NULL;
            CHECK_EQ_INT(hone_search_render(slot, pts[pick[k]], &src), 0);
            char *code = NULL;
            hone_extract_status st;
            char *fenced = malloc(strlen(src) + 16);
            sprintf(fenced, "```c\n%s```\n", src);
            CHECK_EQ_INT(hone_extract_code(fenced, slot, "cpu", &code, &st), 0);
            CHECK_MSG(st == HONE_EXTRACT_OK, "%s: %s", hone_slots_name(slot), hone_extract_status_name(st));
            free(code);
            free(fenced);
            void *fn = compile_point(slot, src, pick[k]);
            CHECK_MSG(fn != NULL, "%s point %d does not compile", hone_slots_name(slot), pick[k]);
            free(src);
            if (!fn) continue;
            for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
                int64_t rows = shapes[sh][0], cols = shapes[sh][1], nt = shapes[sh][2];
                if (hone_dtype_block_size(dt) > 1) cols = (cols + 31) / 32 * 32;
                void *W = make_weights(dt, rows, cols);
                float *X = malloc((size_t)(nt * cols) * sizeof(float));
                float *a = malloc((size_t)(nt * rows) * sizeof(float)), *b = malloc((size_t)(nt * rows) * sizeof(float));
                for (int64_t i = 0; i < nt * cols; i++) X[i] = frand();
                for (int nth = 1; nth <= 3; nth += 2)
                    for (int ith = 0; ith < nth; ith++) {
                        if (is_mm) {
                            hone_slots_matmul(&base, dt)(a, W, X, nt, rows, cols, ith, nth);
                            ((hone_slot_matmul_fn)fn)(b, W, X, nt, rows, cols, ith, nth);
                        } else {
                            hone_slots_matvec(&base, dt)(a, W, X, rows, cols, ith, nth);
                            ((hone_slot_matvec_fn)fn)(b, W, X, rows, cols, ith, nth);
                        }
                    }
                CHECK_MSG(memcmp(a, b, (size_t)((is_mm ? nt : 1) * rows) * sizeof(float)) == 0,
                          "%s point %d not bitwise equal on %lldx%lld", hone_slots_name(slot), pick[k],
                          (long long)rows, (long long)cols);
                checked++;
                free(W); free(X); free(a); free(b);
            }
        }
    }
    CHECK(checked >= 100);
    /* slots without a template say so */
    char *src = NULL;
    CHECK_EQ_INT(hone_search_supports(HONE_SLOT_SWIGLU), 0);
    CHECK_EQ_INT(hone_search_render(HONE_SLOT_SWIGLU, hone_search_incumbent(HONE_SLOT_SWIGLU), &src), HONE_EUNSUPPORTED);
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
    static const harness_case cases[] = {TEST_CASE(test_space_and_exactness)};
    return harness_run(cases, 1, argc, argv);
}
