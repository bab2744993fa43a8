/* The profiler: per-(slot, dtype, shape) times from the forward pass's slot hook (CPU) or
 * from CUPTI kernel activity records (CUDA), a byte and flop model per slot call, the
 * roofline of the machine, and the ranking of slots by expected end-to-end gain.
 *
 * Byte model per call (f32 activations, weights as stored):
 *   matvec  rows * row_bytes(dt, cols) + (cols + rows) * 4        flops 2 rows cols
 *   matmul  rows * row_bytes(dt, cols) + n (cols + rows) * 4      flops 2 n rows cols
 *   attention  K and V of every visible key, 2 n_kv kv_heads hd 4, + q and out
 *   elementwise (rmsnorm, rope, swiglu, add, embed)  bytes in + bytes out
 * A row's fraction of roofline is the time the roofline allows, max(bytes / peak bandwidth,
 * flops / peak flops), over the time it took; its expected gain is share * (1 - fraction).
 *
 * GPU attribution: every CUDA kernel the engine launches is named hone_cuda_<slot> (extern
 * "C", so unmangled; a mangled or suffixed name is matched by its longest slot name). CUPTI's
 * CONCURRENT_KERNEL records carry the kernel's name for eager launches and for kernels that
 * run as nodes of a CUDA graph alike (graph nodes have graphId != 0; their correlationId is the
 * graph launch's), so attribution by name needs no correlation with host launches and is
 * correct inside graphs. Records carry no shapes, so GPU rows are per slot, and their bytes and
 * flops come from the model: step_begin(n, pos0) enumerates the step's slot calls as
 * engine/forward.c makes them and adds each one's cost to its slot. */
#include "profile.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "engine/backend.h"
#include "engine/error.h"
#include "engine/layers.h"
#include "membw.h"

#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif

#ifdef HONE_HAVE_CUDA
/* cupti.h needs the toolkit's cuda.h (driver types only; nothing links libcuda), which
 * engine/cuda.h shadows on the include path: CMake passes the toolkit's by full path. */
#ifdef HONE_TOOLKIT_CUDA_H
#include HONE_TOOLKIT_CUDA_H
#else
#include <cuda.h>
#endif
#include <cuda_runtime_api.h>
#include <cupti.h>

#include "engine/cuda.h"
#endif

#define TABLE_SIZE 1024 /* open addressing, power of two; a model makes a few dozen keys */
#define TABLE_FULL (TABLE_SIZE * 3 / 4)

typedef struct {
    int used;
    int slot, dtype;
    int64_t key[HONE_SLOT_MAX_DIMS]; /* the descriptor's key dims (others 0) */
    int64_t bmin, bmax;      /* attention: the range of n_kv seen */
    int64_t calls, graph_calls;
    uint64_t ns;
    double bytes, flops;
    char name[64];           /* GPU: the kernel's name for OTHER_KERNEL rows */
} entry;

struct hone_profile {
    hone_profile_opts o;
    hone_hparams hp;
    const hone_model *model;
    int have_hp;
    entry *tab;              /* [TABLE_SIZE] */
    int n_entries;
    uint64_t step_t0, step_ns;
    int64_t steps, prefill_steps, decode_steps, calls;
    int64_t cur_n, cur_pos0;
    double peak_gbps, peak_gflops, hook_ns;
    /* GPU: modelled bytes and flops of each slot over the profiled steps */
    double model_bytes[HONE_SLOT_MAX], model_flops[HONE_SLOT_MAX];
    int64_t dropped;
    int gpu_active;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Bytes moved and flops of one slot call, from the slot's descriptor. */
static void call_cost(int slot, const hone_slot_shape *s, double *bytes, double *flops)
{
    const hone_slot_desc *d = hone_slots_desc(slot);
    *bytes = 0;
    *flops = 0;
    if (d && d->cost) d->cost(d, s, bytes, flops);
}

/* The profile key of a shape: its descriptor's key dims, the others zero. */
static void shape_key(int slot, const hone_slot_shape *s, int64_t *key)
{
    const hone_slot_desc *d = hone_slots_desc(slot);
    for (int i = 0; i < HONE_SLOT_MAX_DIMS; i++)
        key[i] = s && d && i < d->n_dims && (d->key_dims >> i & 1u) ? s->d[i] : 0;
}

/* The key of a row with no shape (GPU rows, the fold of absurdly many shapes). */
static const int64_t zero_key[HONE_SLOT_MAX_DIMS];

static entry *find(hone_profile *p, int slot, int dtype, const int64_t *key, const char *name)
{
    uint64_t h = (uint64_t)(slot + 3) * 0x9E3779B97F4A7C15ull + (uint64_t)(dtype + 1);
    int any = 0;
    for (int i = 0; i < HONE_SLOT_MAX_DIMS; i++) {
        h = (h ^ (uint64_t)key[i]) * 0xC2B2AE3D27D4EB4Full;
        any |= key[i] != 0;
    }
    if (name)
        for (const char *s = name; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001B3ull;
    for (unsigned i = (unsigned)(h ^ (h >> 29)) & (TABLE_SIZE - 1);; i = (i + 1) & (TABLE_SIZE - 1)) {
        entry *e = &p->tab[i];
        if (!e->used) {
            if (p->n_entries >= TABLE_FULL) {
                /* absurdly many shapes: fold the rest into the slot's zero shape */
                if (any || name) return find(p, slot, dtype, zero_key, NULL);
            }
            e->used = 1;
            e->slot = slot; e->dtype = dtype;
            memcpy(e->key, key, sizeof e->key);
            e->bmin = INT64_MAX; e->bmax = INT64_MIN;
            if (name) snprintf(e->name, sizeof e->name, "%s", name);
            p->n_entries++;
            return e;
        }
        if (e->slot == slot && e->dtype == dtype && !memcmp(e->key, key, sizeof e->key) &&
            (!name || !strcmp(e->name, name)))
            return e;
    }
}

void hone_profile_hook(void *user, int id, uint64_t ns, const hone_slot_shape *shape)
{
    hone_profile *p = user;
    const hone_slot_desc *d = hone_slots_desc(id);
    if (!d) return;
    int64_t key[HONE_SLOT_MAX_DIMS];
    shape_key(id, shape, key);
    entry *e = find(p, id, shape->dtype, key, NULL);
    double bytes, flops;
    call_cost(id, shape, &bytes, &flops);
    e->calls++;
    e->ns += ns;
    e->bytes += bytes;
    e->flops += flops;
    if (d->range_dim >= 0) {
        int64_t b = shape->d[d->range_dim];
        if (b < e->bmin) e->bmin = b;
        if (b > e->bmax) e->bmax = b;
    }
    p->calls++;
}

/* ---- the roofline ---- */


/* Measured once per process and thread count, then cached for the run. */
static pthread_mutex_t roof_mu = PTHREAD_MUTEX_INITIALIZER;
static struct { int n_threads; double gbps, gflops; } roof_cache[8];
static int roof_cached;

static int cpu_roofline(int n_threads, double *gbps, double *gflops)
{
    int rc = 0;
    pthread_mutex_lock(&roof_mu);
    for (int i = 0; i < roof_cached; i++)
        if (roof_cache[i].n_threads == n_threads) {
            *gbps = roof_cache[i].gbps;
            *gflops = roof_cache[i].gflops;
            goto done;
        }
    hone_membw_opts mo = HONE_MEMBW_OPTS_INIT;
    mo.buffer_bytes = (size_t)256 << 20;
    mo.repetitions = 3;
    mo.copy_triad = 0;
    mo.n_threads = n_threads;
    hone_membw_result r;
    if ((rc = hone_membw_run(&r, &mo))) goto done;
    *gbps = r.read_gbps;
    *gflops = hone_membw_fma_peak_gflops() * r.n_threads;
    if (roof_cached < 8) {
        roof_cache[roof_cached].n_threads = n_threads;
        roof_cache[roof_cached].gbps = *gbps;
        roof_cache[roof_cached].gflops = *gflops;
        roof_cached++;
    }
done:
    pthread_mutex_unlock(&roof_mu);
    return rc;
}

/* The cost one hooked slot call adds to a step: two clock reads and the hook itself, on a
 * scratch profile; best of three batches. */
static double calibrate_hook_ns(const hone_profile *p)
{
    hone_profile *t = malloc(sizeof *t);
    entry *tab = calloc(TABLE_SIZE, sizeof *tab);
    double best = 0;
    if (!t || !tab) goto done;
    *t = *p;
    t->tab = tab;
    t->n_entries = 0;
    const int iters = 20000;
    for (int rep = 0; rep < 3; rep++) {
        uint64_t t0 = now_ns();
        for (int i = 0; i < iters; i++) {
            uint64_t s = now_ns();
            hone_slot_shape sh = {.d = {576 + (i & 7), 576}, .dtype = i % 3 ? -1 : HONE_DTYPE_F32};
            hone_profile_hook(t, i % 3 ? HONE_SLOT_ADD : HONE_SLOT_MATVEC_F32, now_ns() - s, &sh);
        }
        double ns = (double)(now_ns() - t0) / iters;
        if (rep == 0 || ns < best) best = ns;
    }
done:
    free(tab);
    free(t);
    return best;
}

/* ---- CUDA: CUPTI activity records ---- */

#ifdef HONE_HAVE_CUDA

#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 kernel_record;
#else
typedef CUpti_ActivityKernel9 kernel_record;
#endif

#define CUPTI_BUFFER_BYTES ((size_t)8 << 20)

static pthread_mutex_t gpu_mu = PTHREAD_MUTEX_INITIALIZER; /* guards gpu_profile and its table */
static hone_profile *gpu_profile;
static int gpu_callbacks_registered;

/* CUPTI's member of the library-error family (engine/error.h). */
static int cupti_check(CUptiResult r, const char *expr, const char *file, int line)
{
    if (r == CUPTI_SUCCESS) return 0;
    const char *m = NULL;
    cuptiGetResultString(r, &m);
    return hone_error_lib(HONE_EINTERNAL, "CUPTI", m, expr, file, line);
}
#define HONE_CUPTI(expr) cupti_check((expr), #expr, __FILE__, __LINE__)

/* The slot a kernel name names: the longest slot name right after "hone_cuda_"; -1 if none. */
static int kernel_slot(const char *name)
{
    const char *s = name ? strstr(name, "hone_cuda_") : NULL;
    if (!s) return -1;
    s += strlen("hone_cuda_");
    int best = -1;
    size_t best_len = 0;
    for (int id = 0; id < hone_slots_count(); id++) {
        const char *sn = hone_slots_name(id);
        size_t len = strlen(sn);
        if (len > best_len && !strncmp(s, sn, len) &&
            (s[len] == 0 || s[len] == '_' || (s[len] >= '0' && s[len] <= '9'))) {
            best = id;
            best_len = len;
        }
    }
    return best;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, CUPTI_BUFFER_BYTES);
    *size = *buffer ? CUPTI_BUFFER_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                      size_t size, size_t valid)
{
    (void)size;
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&gpu_mu);
    hone_profile *p = gpu_profile;
    while (valid && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (!p || (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
                   rec->kind != CUPTI_ACTIVITY_KIND_KERNEL))
            continue;
        const kernel_record *k = (const kernel_record *)rec;
        int slot = kernel_slot(k->name);
        entry *e = slot >= 0 ? find(p, slot, hone_slots_desc(slot)->dtype, zero_key, NULL)
                             : find(p, HONE_PROFILE_OTHER_KERNEL, -1, zero_key,
                                    k->name ? k->name : "(unnamed kernel)");
        e->calls++;
        e->graph_calls += k->graphId != 0;
        e->ns += k->end > k->start ? k->end - k->start : 0;
        p->calls++;
    }
    size_t dropped = 0;
    if (p && cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
        p->dropped += (int64_t)dropped;
    pthread_mutex_unlock(&gpu_mu);
    free(buffer);
}

static int gpu_start(hone_profile *p)
{
    int rc = 0, n = 0, dev = 0, mem_khz = 0, bus_bits = 0, sms = 0, clk_khz = 0, major = 0, minor = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0)
        return hone_error_set(HONE_EUNSUPPORTED, "no usable CUDA device (%s)",
                              e != cudaSuccess ? cudaGetErrorString(e) : "device count 0");
    if ((rc = HONE_CUDART(cudaGetDevice(&dev)))) goto done;
    if ((rc = HONE_CUDART(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev)))) goto done;
    if ((rc = HONE_CUDART(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev)))) goto done;
    if ((rc = HONE_CUDART(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)))) goto done;
    if ((rc = HONE_CUDART(cudaDeviceGetAttribute(&clk_khz, cudaDevAttrClockRate, dev)))) goto done;
    if ((rc = HONE_CUDART(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev)))) goto done;
    if ((rc = HONE_CUDART(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev)))) goto done;
    /* double data rate: two transfers per memory clock over the bus */
    if (p->o.peak_gbps <= 0) p->peak_gbps = 2.0 * mem_khz * 1e3 * (bus_bits / 8.0) * 1e-9;
    /* f32 lanes per SM: 64 on sm_80 and sm_60/70, 128 on sm_86/89/90 and later */
    int lanes = (major == 8 && minor == 0) || major < 8 ? 64 : 128;
    if (p->o.peak_gflops <= 0) p->peak_gflops = 2.0 * sms * lanes * clk_khz * 1e3 * 1e-9;
    pthread_mutex_lock(&gpu_mu);
    if (gpu_profile) {
        pthread_mutex_unlock(&gpu_mu);
        return hone_error_set(HONE_EINVAL, "another CUDA profile is active");
    }
    gpu_profile = p;
    pthread_mutex_unlock(&gpu_mu);
    p->gpu_active = 1;
    if (!gpu_callbacks_registered) {
        if ((rc = HONE_CUPTI(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed)))) goto done;
        gpu_callbacks_registered = 1;
    }
    if ((rc = HONE_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)))) goto done;
done:
    if (rc && p->gpu_active) {
        pthread_mutex_lock(&gpu_mu);
        gpu_profile = NULL;
        pthread_mutex_unlock(&gpu_mu);
        p->gpu_active = 0;
    }
    return rc;
}

static void gpu_flush(void)
{
    cudaDeviceSynchronize();
    cuptiActivityFlushAll(0);
}

static void gpu_stop(hone_profile *p)
{
    if (!p->gpu_active) return;
    cudaDeviceSynchronize();
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    pthread_mutex_lock(&gpu_mu);
    gpu_profile = NULL;
    pthread_mutex_unlock(&gpu_mu);
    p->gpu_active = 0;
}

#else

static int gpu_start(hone_profile *p)
{
    (void)p;
    return hone_error_set(HONE_EUNSUPPORTED, "this build has no CUDA support (no GPU profile)");
}
static void gpu_flush(void) {}
static void gpu_stop(hone_profile *p) { (void)p; }

#endif

/* ---- the model's slot calls of one step (the GPU byte model) ----
 * The layer sequence (engine/layers.h) run over the cost model: every operation adds the
 * bytes and flops of the slot call it stands for to that slot's totals. */

typedef struct {
    hone_profile *p;
    int64_t pos0;
} model_run;

static void model_emit(hone_profile *p, int slot, const hone_slot_shape *s)
{
    double bytes, flops;
    if (slot < 0) return;
    call_cost(slot, s, &bytes, &flops);
    p->model_bytes[slot] += bytes;
    p->model_flops[slot] += flops;
}

static hone_slot_shape model_shape(int32_t dtype, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    hone_slot_shape s = {.d = {d0, d1, d2, d3}, .dtype = dtype};
    return s;
}

static int cost_embed_op(void *c, hone_act out, int64_t n)
{
    model_run *r = c;
    const hone_weight *e = hone_model_tok_embd(r->p->model);
    (void)out;
    hone_slot_shape s = model_shape(e->dtype, n, r->p->hp.dim, e->rows, 0);
    model_emit(r->p, HONE_SLOT_EMBED, &s);
    return 0;
}

static int cost_rmsnorm_op(void *c, hone_act y, hone_act x, int64_t layer, hone_wsel w, int64_t n)
{
    model_run *r = c;
    (void)y; (void)x; (void)layer; (void)w;
    hone_slot_shape s = model_shape(-1, n, r->p->hp.dim, 0, 0);
    model_emit(r->p, HONE_SLOT_RMSNORM, &s);
    return 0;
}

static int cost_matmul_op(void *c, hone_act y, int64_t layer, hone_wsel w, hone_act x, int64_t n)
{
    model_run *r = c;
    const hone_weight *W = hone_layers_weight(r->p->model, layer, w);
    (void)y; (void)x;
    hone_slot_shape s = n == 1 ? model_shape(W->dtype, W->rows, W->cols, 0, 0)
                               : model_shape(W->dtype, n, W->rows, W->cols, 0);
    model_emit(r->p, n == 1 ? hone_slots_matvec_id(W->dtype) : hone_slots_matmul_id(W->dtype), &s);
    return 0;
}

static int cost_bias_op(void *c, hone_act y, int64_t layer, hone_wsel w, int64_t n)
{
    model_run *r = c;
    (void)y;
    hone_slot_shape s = model_shape(-1, hone_layers_weight(r->p->model, layer, w)->cols, 0, 0, 0);
    for (int64_t t = 0; t < n; t++) model_emit(r->p, HONE_SLOT_ADD, &s);
    return 0;
}

static int cost_rope_op(void *c, hone_act x, int64_t n, int64_t heads)
{
    model_run *r = c;
    (void)x;
    hone_slot_shape s = model_shape(-1, n, heads, r->p->hp.head_dim, r->p->hp.n_rot);
    model_emit(r->p, HONE_SLOT_ROPE, &s);
    return 0;
}

static int cost_store_op(void *c, int64_t layer, int64_t n)
{
    (void)c; (void)layer; (void)n;
    return 0; /* a copy, not a slot */
}

static int cost_attention_op(void *c, int64_t layer, int64_t n)
{
    model_run *r = c;
    const hone_hparams *hp = &r->p->hp;
    (void)layer;
    hone_slot_shape s = model_shape(-1, n, r->pos0, r->pos0 + n, 16);
    s.d[4] = hp->n_heads; s.d[5] = hp->n_kv_heads; s.d[6] = hp->head_dim;
    model_emit(r->p, n == 1 ? HONE_SLOT_ATTENTION_DECODE : HONE_SLOT_ATTENTION_PREFILL, &s);
    return 0;
}

static int cost_add_op(void *c, hone_act y, hone_act a, hone_act b, int64_t elems)
{
    model_run *r = c;
    (void)y; (void)a; (void)b;
    hone_slot_shape s = model_shape(-1, elems, 0, 0, 0);
    model_emit(r->p, HONE_SLOT_ADD, &s);
    return 0;
}

static int cost_swiglu_op(void *c, hone_act out, hone_act g, hone_act u, int64_t elems)
{
    model_run *r = c;
    (void)out; (void)g; (void)u;
    hone_slot_shape s = model_shape(-1, elems, 0, 0, 0);
    model_emit(r->p, HONE_SLOT_SWIGLU, &s);
    return 0;
}

static int64_t cost_gather_op(void *c, int64_t n)
{
    (void)c; (void)n;
    return 1; /* a step wants the last token's logits */
}

static const hone_layer_ops cost_ops = {
    .embed = cost_embed_op, .rmsnorm = cost_rmsnorm_op, .matmul = cost_matmul_op,
    .bias = cost_bias_op, .rope = cost_rope_op, .store_kv = cost_store_op,
    .attention = cost_attention_op, .add = cost_add_op, .swiglu = cost_swiglu_op,
    .gather = cost_gather_op,
};

/* The slot calls the forward pass makes for n tokens at pos0 (one chunk), with the last
 * token's logits. */
static void model_step(hone_profile *p, int64_t n, int64_t pos0)
{
    if (!p->model || n <= 0) return;
    model_run r = {p, pos0};
    hone_layers_run(p->model, &cost_ops, &r, n);
}

/* ---- lifecycle ---- */

static void set_model(hone_profile *p, const hone_model *m)
{
    p->model = m;
    p->have_hp = m != NULL;
    if (m) p->hp = *hone_model_hparams(m);
}

int hone_profile_new(hone_profile **out, const hone_profile_opts *opts)
{
    hone_profile_opts dflt = HONE_PROFILE_OPTS_INIT;
    int rc = 0;
    *out = NULL;
    hone_profile *p = calloc(1, sizeof *p);
    if (!p) return hone_error_set(HONE_ENOMEM, "out of memory");
    p->o = opts ? *opts : dflt;
    if (!(p->tab = calloc(TABLE_SIZE, sizeof *p->tab))) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory");
        goto done;
    }
    set_model(p, p->o.model);
    p->peak_gbps = p->o.peak_gbps;
    p->peak_gflops = p->o.peak_gflops;
    if (p->o.source == HONE_PROFILE_CUDA) {
        rc = gpu_start(p);
    } else if (p->o.source == HONE_PROFILE_CPU) {
        double gbps = 0, gflops = 0;
        if ((p->peak_gbps <= 0 || p->peak_gflops <= 0) &&
            (rc = cpu_roofline(p->o.n_threads, &gbps, &gflops)))
            goto done;
        if (p->peak_gbps <= 0) p->peak_gbps = gbps;
        if (p->peak_gflops <= 0) p->peak_gflops = gflops;
        p->hook_ns = calibrate_hook_ns(p);
    } else {
        rc = hone_error_set(HONE_EINVAL, "unknown profile source %d", (int)p->o.source);
    }
done:
    if (rc) {
        hone_profile_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void hone_profile_free(hone_profile *p)
{
    if (!p) return;
    gpu_stop(p);
    free(p->tab);
    free(p);
}

int hone_profile_attach(hone_profile *p, hone_backend *be)
{
    if (p->o.source != HONE_PROFILE_CPU)
        return hone_error_set(HONE_EINVAL, "a CUDA profile does not attach to a slot hook (CUPTI "
                              "records the kernels)");
    set_model(p, hone_backend_model(be));
    return hone_backend_set_slot_hook(be, hone_profile_hook, p);
}

void hone_profile_detach(hone_profile *p, hone_backend *be)
{
    (void)p;
    if (be) hone_backend_set_slot_hook(be, NULL, NULL);
}

void hone_profile_step_begin(hone_profile *p, int64_t n, int64_t pos0)
{
    p->cur_n = n;
    p->cur_pos0 = pos0;
    p->step_t0 = now_ns();
}

void hone_profile_step_end(hone_profile *p)
{
    if (p->o.source == HONE_PROFILE_CUDA) {
        gpu_flush();
        model_step(p, p->cur_n, p->cur_pos0);
    }
    p->step_ns += now_ns() - p->step_t0;
    p->steps++;
    if (p->cur_n > 1) p->prefill_steps++;
    else p->decode_steps++;
}

void hone_profile_reset(hone_profile *p)
{
#ifdef HONE_HAVE_CUDA
    if (p->gpu_active) {
        gpu_flush();
        pthread_mutex_lock(&gpu_mu);
    }
#endif
    memset(p->tab, 0, TABLE_SIZE * sizeof *p->tab);
    p->n_entries = 0;
    p->step_ns = 0;
    p->steps = p->prefill_steps = p->decode_steps = p->calls = p->dropped = 0;
    memset(p->model_bytes, 0, sizeof p->model_bytes);
    memset(p->model_flops, 0, sizeof p->model_flops);
#ifdef HONE_HAVE_CUDA
    if (p->gpu_active) pthread_mutex_unlock(&gpu_mu);
#endif
}

/* ---- rows ---- */

/* "rows=576 cols=576", "n=1 heads=9 kv_heads=3 head_dim=64 n_kv=5..6": the key dims and
 * the aggregated one's range, named as the slot's descriptor names them. */
static void shape_text(const entry *e, char *buf, size_t cap)
{
    const hone_slot_desc *d = hone_slots_desc(e->slot);
    size_t n = 0;
    buf[0] = 0;
    if (!d) {
        snprintf(buf, cap, "-");
        return;
    }
    for (int i = 0; i < d->n_dims && n < cap; i++)
        if (d->key_dims >> i & 1u)
            n += (size_t)snprintf(buf + n, cap - n, "%s%s=%lld", n ? " " : "", d->dims[i],
                                  (long long)e->key[i]);
    if (d->range_dim >= 0 && e->bmin <= e->bmax && n < cap) {
        const char *nm = d->dims[d->range_dim];
        if (e->bmin == e->bmax)
            snprintf(buf + n, cap - n, "%s%s=%lld", n ? " " : "", nm, (long long)e->bmin);
        else
            snprintf(buf + n, cap - n, "%s%s=%lld..%lld", n ? " " : "", nm, (long long)e->bmin,
                     (long long)e->bmax);
    }
}

static double total_step_ns(const hone_profile *p, double slot_ns)
{
    return p->step_ns > 0 ? (double)p->step_ns : slot_ns;
}

static void finish_row(const hone_profile *p, hone_profile_row *r, double ns, double step_ns)
{
    r->total_ms = ns * 1e-6;
    r->share = step_ns > 0 ? ns / step_ns : 0;
    double s = ns * 1e-9;
    r->gbps = s > 0 ? r->bytes / s * 1e-9 : 0;
    r->gflops = s > 0 ? r->flops / s * 1e-9 : 0;
    if (r->bytes > 0 && s > 0 && p->peak_gbps > 0) {
        double bound = r->bytes / (p->peak_gbps * 1e9);
        if (p->peak_gflops > 0 && r->flops / (p->peak_gflops * 1e9) > bound)
            bound = r->flops / (p->peak_gflops * 1e9);
        r->roofline = bound / s;
    } else {
        r->roofline = -1;
    }
    double headroom = r->roofline < 0 ? 1 : r->roofline >= 1 ? 0 : 1 - r->roofline;
    r->gain = r->slot == HONE_PROFILE_OUTSIDE ? 0 : r->share * headroom;
}

/* All rows (unsorted) in a malloc'd array; *n rows. */
static int build_rows(const hone_profile *p, hone_profile_row **out, int *n)
{
    hone_profile_row *rows = calloc((size_t)p->n_entries + 1, sizeof *rows);
    if (!rows) return hone_error_set(HONE_ENOMEM, "out of memory");
    double slot_ns = 0;
    int k = 0;
    for (int i = 0; i < TABLE_SIZE; i++)
        if (p->tab[i].used) slot_ns += (double)p->tab[i].ns;
    double step_ns = total_step_ns(p, slot_ns);
    for (int i = 0; i < TABLE_SIZE; i++) {
        const entry *e = &p->tab[i];
        if (!e->used) continue;
        hone_profile_row *r = &rows[k++];
        r->slot = e->slot;
        r->dtype = e->dtype;
        memcpy(r->dims, e->key, sizeof r->dims);
        r->calls = e->calls;
        r->graph_calls = e->graph_calls;
        if (e->slot >= 0) snprintf(r->name, sizeof r->name, "%s", hone_slots_name(e->slot));
        else snprintf(r->name, sizeof r->name, "%s", e->name);
        if (p->o.source == HONE_PROFILE_CUDA) {
            snprintf(r->shape, sizeof r->shape, "(all shapes)");
            if (e->slot >= 0) {
                r->bytes = p->model_bytes[e->slot];
                r->flops = p->model_flops[e->slot];
            }
        } else {
            shape_text(e, r->shape, sizeof r->shape);
            r->bytes = e->bytes;
            r->flops = e->flops;
        }
        finish_row(p, r, (double)e->ns, step_ns);
    }
    hone_profile_row *o = &rows[k++];
    o->slot = HONE_PROFILE_OUTSIDE;
    o->dtype = -1;
    snprintf(o->name, sizeof o->name, "(outside slots)");
    snprintf(o->shape, sizeof o->shape, "-");
    o->calls = p->steps;
    finish_row(p, o, step_ns > slot_ns ? step_ns - slot_ns : 0, step_ns);
    *out = rows;
    *n = k;
    return 0;
}

static int by_share(const void *x, const void *y)
{
    const hone_profile_row *a = x, *b = y;
    return a->total_ms < b->total_ms ? 1 : a->total_ms > b->total_ms ? -1 : strcmp(a->name, b->name);
}

static int by_gain(const void *x, const void *y)
{
    const hone_profile_row *a = x, *b = y;
    return a->gain < b->gain ? 1 : a->gain > b->gain ? -1 : by_share(x, y);
}

/* ---- fused slots in the ranking --------------------------------------------------------
 * A fused slot that did not run (the baseline table does not provide it) still ranks: its row
 * is what its components spent in the profile on the work it would take over, so the tuner can
 * pick it. Components: the decode matvec rows of its weights (the part of a (dtype, shape) row
 * that those weights make, counted from layer 0's weights times the layers, and the head once
 * a step: SmolLM2's Wq shares its shape with Wo, so half that row is q's), for ffn the decode
 * swiglu row (n = ffn), for rmsnorm_matvec one in 2 * layers + 1 of the one-row rmsnorm calls
 * (the final norm). The components' time includes their pool dispatches and barriers, which
 * the fused call saves too: the row's headroom counts them. CPU profiles with a model only. */

static const hone_wsel MAT_ROLES[] = {HONE_W_Q, HONE_W_K, HONE_W_V, HONE_W_O, HONE_W_GATE,
                                      HONE_W_UP, HONE_W_DOWN, HONE_W_OUTPUT};

static int fused_role(hone_slot_kind kind, hone_wsel w)
{
    if (kind == HONE_SLOT_KIND_QKV) return w == HONE_W_Q || w == HONE_W_K || w == HONE_W_V;
    if (kind == HONE_SLOT_KIND_FFN) return w == HONE_W_GATE || w == HONE_W_UP;
    return w == HONE_W_OUTPUT;
}

/* The part of matvec row r's calls that the fused kind's weights make; *roles |= the bit of
 * each such weight (its index in MAT_ROLES). */
static double matvec_part(const hone_model *m, const hone_profile_row *r, hone_slot_kind kind,
                          unsigned *roles)
{
    double mine = 0, all = 0;
    int64_t layers = hone_model_hparams(m)->n_layers;
    for (size_t i = 0; i < sizeof MAT_ROLES / sizeof MAT_ROLES[0]; i++) {
        const hone_weight *w = hone_layers_weight(m, 0, MAT_ROLES[i]);
        if (w->dtype != r->dtype || w->rows != r->dims[0] || w->cols != r->dims[1]) continue;
        double times = MAT_ROLES[i] == HONE_W_OUTPUT ? 1.0 : (double)layers;
        all += times;
        if (fused_role(kind, MAT_ROLES[i])) {
            mine += times;
            *roles |= 1u << i;
        }
    }
    return all > 0 ? mine / all : 0;
}

/* The row of fused slot id from the profile's rows[n] (slot rows); 0 when its components did
 * not all run or the slot ran itself. */
static int fused_row(const hone_profile *p, int id, const hone_profile_row *rows, int n,
                     double step_ns, hone_profile_row *out)
{
    const hone_slot_desc *d = hone_slots_desc(id);
    const hone_model *m = p->model;
    const hone_hparams *hp = hone_model_hparams(m);
    unsigned need = 0, roles = 0;
    for (size_t i = 0; i < sizeof MAT_ROLES / sizeof MAT_ROLES[0]; i++)
        if (fused_role(d->kind, MAT_ROLES[i])) {
            if (hone_layers_weight(m, 0, MAT_ROLES[i])->dtype != d->dtype) return 0;
            need |= 1u << i;
        }
    int mv = hone_slots_matvec_id(d->dtype), other = d->kind == HONE_SLOT_KIND_QKV;
    double ns = 0, calls = 0;
    memset(out, 0, sizeof *out);
    for (int i = 0; i < n; i++) {
        const hone_profile_row *r = &rows[i];
        double f = 0;
        if (r->slot == id) return 0;
        if (r->slot == mv) f = matvec_part(m, r, d->kind, &roles);
        else if (d->kind == HONE_SLOT_KIND_FFN && r->slot == HONE_SLOT_SWIGLU && r->dims[0] == hp->ffn)
            f = 1, other = 1;
        else if (d->kind == HONE_SLOT_KIND_RMSNORM_MATVEC && r->slot == HONE_SLOT_RMSNORM &&
                 r->dims[0] == 1 && r->dims[1] == hp->dim)
            f = 1.0 / (double)(2 * hp->n_layers + 1), other = 1;
        if (f <= 0) continue;
        ns += f * r->total_ms * 1e6;
        out->bytes += f * r->bytes;
        out->flops += f * r->flops;
        if (r->slot == mv) calls += f * (double)r->calls;
    }
    if (roles != need || !other) return 0;
    const hone_layer *L = hone_model_layer(m, 0);
    const hone_weight *W = d->kind == HONE_SLOT_KIND_FFN ? &L->w_gate : hone_model_output(m);
    out->slot = id;
    out->dtype = d->dtype;
    if (d->kind == HONE_SLOT_KIND_QKV) {
        int64_t k[4] = {L->wq.rows, L->wk.rows, L->wv.rows, L->wq.cols};
        memcpy(out->dims, k, sizeof k);
    } else {
        out->dims[0] = W->rows;
        out->dims[1] = W->cols;
    }
    int nw = __builtin_popcount(need);
    out->calls = (int64_t)(calls / nw + 0.5);
    snprintf(out->name, sizeof out->name, "%s", d->name);
    if (d->kind == HONE_SLOT_KIND_QKV)
        snprintf(out->shape, sizeof out->shape, "rq=%lld rk=%lld rv=%lld cols=%lld (unfused)",
                 (long long)out->dims[0], (long long)out->dims[1], (long long)out->dims[2],
                 (long long)out->dims[3]);
    else
        snprintf(out->shape, sizeof out->shape, "rows=%lld cols=%lld (unfused)",
                 (long long)out->dims[0], (long long)out->dims[1]);
    finish_row(p, out, ns, step_ns);
    return 1;
}

/* Appends the fused slots' rows to rows[*n] (room for HONE_SLOT_COUNT - HONE_SLOT_FUSED_FIRST
 * more). */
static void add_fused_rows(const hone_profile *p, hone_profile_row *rows, int *n)
{
    if (p->o.source != HONE_PROFILE_CPU || !p->model) return;
    double slot_ns = 0;
    for (int i = 0; i < TABLE_SIZE; i++)
        if (p->tab[i].used) slot_ns += (double)p->tab[i].ns;
    double step_ns = total_step_ns(p, slot_ns);
    int k = *n;
    for (int id = HONE_SLOT_FUSED_FIRST; id < HONE_SLOT_COUNT; id++)
        k += fused_row(p, id, rows, *n, step_ns, &rows[k]);
    *n = k;
}

static int sorted(const hone_profile *p, hone_profile_row *out, int cap, int *n, int ranking)
{
    hone_profile_row *rows;
    int total, rc = build_rows(p, &rows, &total);
    if (rc) return rc;
    if (ranking) {
        int k = 0;
        for (int i = 0; i < total; i++)
            if (rows[i].slot >= 0) rows[k++] = rows[i];
        total = k;
        hone_profile_row *more = realloc(rows, sizeof *rows * (size_t)(total + HONE_SLOT_COUNT - HONE_SLOT_FUSED_FIRST + 1));
        if (!more) {
            free(rows);
            return hone_error_set(HONE_ENOMEM, "out of memory");
        }
        rows = more;
        add_fused_rows(p, rows, &total);
    }
    qsort(rows, (size_t)total, sizeof *rows, ranking ? by_gain : by_share);
    for (int i = 0; i < total && i < cap; i++) out[i] = rows[i];
    *n = total;
    free(rows);
    return 0;
}

int hone_profile_rows(const hone_profile *p, hone_profile_row *rows, int cap, int *n)
{
    return sorted(p, rows, cap, n, 0);
}

int hone_profile_ranking(const hone_profile *p, hone_profile_row *rows, int cap, int *n)
{
    return sorted(p, rows, cap, n, 1);
}

void hone_profile_summary_get(const hone_profile *p, hone_profile_summary *out)
{
    memset(out, 0, sizeof *out);
    double slot_ns = 0;
    for (int i = 0; i < TABLE_SIZE; i++)
        if (p->tab[i].used) slot_ns += (double)p->tab[i].ns;
    double step_ns = total_step_ns(p, slot_ns);
    out->steps = p->steps;
    out->prefill_steps = p->prefill_steps;
    out->decode_steps = p->decode_steps;
    out->calls = p->calls;
    out->step_ms = step_ns * 1e-6;
    out->slot_ms = slot_ns * 1e-6;
    out->outside_ms = step_ns > slot_ns ? (step_ns - slot_ns) * 1e-6 : 0;
    out->peak_gbps = p->peak_gbps;
    out->peak_gflops = p->peak_gflops;
    out->hook_ns = p->hook_ns;
    out->overhead = step_ns > 0 ? (double)p->calls * p->hook_ns / step_ns : 0;
    out->dropped = p->dropped;
}

const char *hone_profile_source_name(hone_profile_source s)
{
    return s == HONE_PROFILE_CUDA ? "cuda" : "cpu";
}

static const char *dtype_text(int dt) { return dt < 0 ? "-" : hone_dtype_name(dt); }

void hone_profile_print(const hone_profile *p, FILE *f)
{
    hone_profile_summary s;
    hone_profile_summary_get(p, &s);
    hone_profile_row *rows = NULL;
    int n = 0;
    if (build_rows(p, &rows, &n)) {
        fprintf(f, "profile: %s\n", hone_error_last());
        return;
    }
    qsort(rows, (size_t)n, sizeof *rows, by_share);
    fprintf(f, "profile (%s): %lld steps (%lld prefill, %lld decode), %.2f ms, %lld slot calls\n",
            hone_profile_source_name(p->o.source), (long long)s.steps, (long long)s.prefill_steps,
            (long long)s.decode_steps, s.step_ms, (long long)s.calls);
    fprintf(f, "roofline: %.1f GB/s read bandwidth, %.1f GFLOP/s f32 FMA peak\n", s.peak_gbps,
            s.peak_gflops);
    if (p->o.source == HONE_PROFILE_CPU)
        fprintf(f, "profiler overhead: %.1f ns per slot call, %.2f%% of step time\n", s.hook_ns,
                100 * s.overhead);
    if (s.dropped) fprintf(f, "warning: CUPTI dropped %lld records\n", (long long)s.dropped);
    fprintf(f, "\n%-18s %-5s %-22s %7s %10s %7s %8s %9s %7s %7s\n", "slot", "dtype", "shape",
            "calls", "total ms", "share%", "GB/s", "GFLOP/s", "%roof", "gain%");
    for (int i = 0; i < n; i++) {
        const hone_profile_row *r = &rows[i];
        char roof[16] = "-", gbps[16] = "-", gfl[16] = "-";
        if (r->roofline >= 0) snprintf(roof, sizeof roof, "%.1f", 100 * r->roofline);
        if (r->bytes > 0) snprintf(gbps, sizeof gbps, "%.2f", r->gbps);
        if (r->flops > 0) snprintf(gfl, sizeof gfl, "%.2f", r->gflops);
        fprintf(f, "%-18s %-5s %-22s %7lld %10.3f %7.2f %8s %9s %7s %7.2f\n", r->name,
                dtype_text(r->dtype), r->shape, (long long)r->calls, r->total_ms, 100 * r->share,
                gbps, gfl, roof, 100 * r->gain);
    }
    free(rows);
    hone_profile_row top[3];
    int nt = 0;
    if (hone_profile_ranking(p, top, 3, &nt) == 0 && nt > 0) {
        fprintf(f, "\nhot slots by expected gain:");
        for (int i = 0; i < nt && i < 3; i++)
            fprintf(f, " %d. %s %s (%.2f%%)", i + 1, top[i].name, top[i].shape, 100 * top[i].gain);
        fputc('\n', f);
    }
}

static cJSON *row_json(const hone_profile_row *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "slot", r->name);
    cJSON_AddStringToObject(o, "dtype", dtype_text(r->dtype));
    cJSON_AddStringToObject(o, "shape", r->shape);
    cJSON *sh = cJSON_AddArrayToObject(o, "dims");
    const hone_slot_desc *d = hone_slots_desc(r->slot);
    for (int i = 0; sh && d && i < d->n_dims; i++)
        if (d->key_dims >> i & 1u) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)r->dims[i]));
    cJSON_AddNumberToObject(o, "calls", (double)r->calls);
    cJSON_AddNumberToObject(o, "graph_calls", (double)r->graph_calls);
    cJSON_AddNumberToObject(o, "total_ms", r->total_ms);
    cJSON_AddNumberToObject(o, "share", r->share);
    cJSON_AddNumberToObject(o, "bytes", r->bytes);
    cJSON_AddNumberToObject(o, "flops", r->flops);
    cJSON_AddNumberToObject(o, "gbps", r->gbps);
    cJSON_AddNumberToObject(o, "gflops", r->gflops);
    if (r->roofline >= 0) cJSON_AddNumberToObject(o, "roofline", r->roofline);
    else cJSON_AddNullToObject(o, "roofline");
    cJSON_AddNumberToObject(o, "gain", r->gain);
    return o;
}

int hone_profile_json(const hone_profile *p, cJSON **out)
{
    hone_profile_summary s;
    hone_profile_row *rows = NULL;
    int n = 0, rc;
    *out = NULL;
    hone_profile_summary_get(p, &s);
    if ((rc = build_rows(p, &rows, &n))) return rc;
    cJSON *root = cJSON_CreateObject();
    if (!root) {
        free(rows);
        return hone_error_set(HONE_ENOMEM, "out of memory");
    }
    cJSON_AddStringToObject(root, "source", hone_profile_source_name(p->o.source));
    cJSON *js = cJSON_AddObjectToObject(root, "summary");
    if (js) {
        cJSON_AddNumberToObject(js, "steps", (double)s.steps);
        cJSON_AddNumberToObject(js, "prefill_steps", (double)s.prefill_steps);
        cJSON_AddNumberToObject(js, "decode_steps", (double)s.decode_steps);
        cJSON_AddNumberToObject(js, "calls", (double)s.calls);
        cJSON_AddNumberToObject(js, "step_ms", s.step_ms);
        cJSON_AddNumberToObject(js, "slot_ms", s.slot_ms);
        cJSON_AddNumberToObject(js, "outside_ms", s.outside_ms);
        cJSON_AddNumberToObject(js, "peak_gbps", s.peak_gbps);
        cJSON_AddNumberToObject(js, "peak_gflops", s.peak_gflops);
        cJSON_AddNumberToObject(js, "hook_ns", s.hook_ns);
        cJSON_AddNumberToObject(js, "overhead", s.overhead);
        cJSON_AddNumberToObject(js, "dropped", (double)s.dropped);
    }
    qsort(rows, (size_t)n, sizeof *rows, by_share);
    cJSON *jr = cJSON_AddArrayToObject(root, "rows");
    for (int i = 0; jr && i < n; i++) cJSON_AddItemToArray(jr, row_json(&rows[i]));
    int k = 0;
    for (int i = 0; i < n; i++)
        if (rows[i].slot >= 0) rows[k++] = rows[i];
    qsort(rows, (size_t)k, sizeof *rows, by_gain);
    cJSON *rk = cJSON_AddArrayToObject(root, "ranking");
    for (int i = 0; rk && i < k; i++) cJSON_AddItemToArray(rk, row_json(&rows[i]));
    free(rows);
    *out = root;
    return 0;
}
