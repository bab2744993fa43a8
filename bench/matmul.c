/* bench/matmul: the prefill / batched-decode matmul baselines (kernels/cpu/matmul_<dt>.c) on
 * SmolLM2-135M's layer shapes, one thread, against the f32 FMA peak of one thread measured in
 * the same run (profiler/membw's probe, before the first rep and after each). Prints JSON: per
 * dtype and shape the median, min and max GFLOP/s over the reps and the median fraction of the
 * peak (each rep against the higher probe on either side of it).
 *
 *   matmul [--dtypes f32,f16,bf16,q8_0,q4_0,q4_1] [-n TOKENS] [--reps N] [--ms MS_PER_REP]
 *          [--cold MB]
 *
 * --cold MB: the calls go round copies of the weights that fill MB MiB (one copy without it),
 * so with MB beyond the last-level cache each call reads its weights from memory, as the
 * engine's prefill does (a model's layers do not stay in cache between them).
 *
 * The weights are random, normal and finite: every 16-bit field (scales included) is, as f16
 * and as bf16, a normal number of magnitude 1/8 to 2, so no input takes a slow FP assist. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/dtype.h"
#include "profiler/membw.h"

typedef void (*matmul_fn)(float *, const void *, const float *, int64_t, int64_t, int64_t, int, int);
#define DECL(dt) void hone_cpu_matmul_##dt(float *, const void *, const float *, int64_t, int64_t, int64_t, int, int);
DECL(f32)
DECL(f16)
DECL(bf16)
DECL(q8_0)
DECL(q4_0)
DECL(q4_1)

static const struct {
    const char *name;
    int dtype;
    matmul_fn fn;
} kinds[] = {
    {"f32", HONE_DTYPE_F32, hone_cpu_matmul_f32},    {"f16", HONE_DTYPE_F16, hone_cpu_matmul_f16},
    {"bf16", HONE_DTYPE_BF16, hone_cpu_matmul_bf16}, {"q8_0", HONE_DTYPE_Q8_0, hone_cpu_matmul_q8_0},
    {"q4_0", HONE_DTYPE_Q4_0, hone_cpu_matmul_q4_0}, {"q4_1", HONE_DTYPE_Q4_1, hone_cpu_matmul_q4_1},
};

/* SmolLM2-135M: wq / wo, wk / wv, gate / up, down (rows x cols). */
static const int64_t shapes[][2] = {{576, 576}, {192, 576}, {1536, 576}, {576, 1536}};

/* The thread's CPU time: on a shared machine the time the kernel ran, not the time its thread
 * waited for a core (the FMA probe's windows are short enough that waits rarely fall in them). */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* 1 if name is one of the comma-separated items of list. */
static int in_list(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        size_t item = strcspn(p, ",");
        if (item == len && !strncmp(p, name, len)) return 1;
        p += item + (p[item] == ',');
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *dtypes = "f32,f16,bf16,q8_0,q4_0,q4_1";
    int64_t n = 64;
    int reps = 7;
    double ms = 200, cold_mb = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dtypes") && i + 1 < argc) dtypes = argv[++i];
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ms") && i + 1 < argc) ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--cold") && i + 1 < argc) cold_mb = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: matmul [--dtypes LIST] [-n TOKENS] [--reps N] [--ms MS] [--cold MB]\n");
            return 2;
        }
    }
    if (n < 1 || reps < 1 || cold_mb < 0 || cold_mb > 65536) return 2;
    cJSON *root = cJSON_CreateObject(), *results = cJSON_AddArrayToObject(root, "results");
    cJSON_AddNumberToObject(root, "tokens", (double)n);
    cJSON_AddNumberToObject(root, "threads", 1);
    cJSON_AddNumberToObject(root, "cold_mib", cold_mb);
    double *gf = malloc((size_t)reps * sizeof *gf), *fr = malloc((size_t)reps * sizeof *fr);
    double *probe = malloc((size_t)(reps + 1) * sizeof *probe), peak_max = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        if (!in_list(dtypes, kinds[k].name)) continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int64_t rows = shapes[s][0], cols = shapes[s][1];
            int64_t rb = hone_dtype_row_bytes(kinds[k].dtype, cols);
            size_t wbytes = (size_t)(rows * rb), wstride = (wbytes + 63) / 64 * 64;
            size_t copies = (size_t)(cold_mb * 1048576 / (double)wstride);
            if (copies < 1) copies = 1;
            uint16_t *W = aligned_alloc(64, wstride * copies); /* as the engine's arenas */
            float *X = aligned_alloc(64, (size_t)(n * cols + 15) / 16 * 64);
            float *Y = aligned_alloc(64, (size_t)(n * rows + 15) / 16 * 64);
            if (!W || !X || !Y) return 1;
            if (kinds[k].dtype == HONE_DTYPE_F32)
                for (size_t i = 0; i < wbytes / 4; i++) ((float *)W)[i] = (float)(next_u32() % 2001) / 1000 - 1;
            else
                for (size_t i = 0; i < wbytes / 2; i++) { /* normal as f16 and bf16: no FP assists */
                    uint32_t u = next_u32();
                    W[i] = (uint16_t)((u & 0x8000) | 0x3000 | (u & 0x0fff));
                }
            for (size_t c = 1; c < copies; c++) memcpy((char *)W + c * wstride, W, wbytes);
            size_t copy = 0;
            for (int64_t i = 0; i < n * cols; i++) X[i] = (float)(next_u32() % 2001) / 1000 - 1;
            double flop = 2.0 * (double)n * (double)rows * (double)cols;
            kinds[k].fn(Y, W, X, n, rows, cols, 0, 1); /* warm-up */
            probe[0] = hone_membw_fma_peak_gflops();
            for (int r = 0; r < reps; r++) {
                int calls = 0;
                double t0 = now_s(), t;
                do {
                    kinds[k].fn(Y, (const char *)W + copy * wstride, X, n, rows, cols, 0, 1);
                    copy = copy + 1 < copies ? copy + 1 : 0;
                    calls++;
                } while ((t = now_s() - t0) < ms / 1000);
                gf[r] = flop * calls / t / 1e9;
                probe[r + 1] = hone_membw_fma_peak_gflops();
                double pk = probe[r] > probe[r + 1] ? probe[r] : probe[r + 1];
                fr[r] = gf[r] / pk;
                if (pk > peak_max) peak_max = pk;
            }
            qsort(gf, (size_t)reps, sizeof *gf, cmp_double);
            qsort(fr, (size_t)reps, sizeof *fr, cmp_double);
            double med = gf[reps / 2], fmed = fr[reps / 2];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "dtype", kinds[k].name);
            cJSON_AddNumberToObject(o, "rows", (double)rows);
            cJSON_AddNumberToObject(o, "cols", (double)cols);
            cJSON *g = cJSON_AddObjectToObject(o, "gflops");
            cJSON_AddNumberToObject(g, "median", med);
            cJSON_AddNumberToObject(g, "min", gf[0]);
            cJSON_AddNumberToObject(g, "max", gf[reps - 1]);
            cJSON_AddNumberToObject(o, "fma_fraction", fmed);
            cJSON_AddItemToArray(results, o);
            fprintf(stderr, "matmul: %-5s %5lld x %-5lld n=%lld %6.1f GFLOP/s (%.1f-%.1f), %4.1f%% of the FMA peak\n",
                    kinds[k].name, (long long)rows, (long long)cols, (long long)n, med, gf[0], gf[reps - 1],
                    100 * fmed);
            free(W);
            free(X);
            free(Y);
        }
    }
    cJSON_AddNumberToObject(root, "fma_peak_gflops_1thread", peak_max);
    char *js = cJSON_Print(root);
    puts(js);
    free(js);
    cJSON_Delete(root);
    free(gf);
    free(fr);
    free(probe);
    return 0;
}
