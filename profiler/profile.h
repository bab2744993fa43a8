/* The engine's own profiler: times every slot call, turns shapes into bytes and flops,
 * compares each row with the machine's roofline and ranks the hot slots by expected gain.
 * Two sources behind one interface: the CPU (monotonic clock around each slot call, through
 * the forward pass's slot hook) and CUDA (CUPTI kernel activity records, in builds with
 * HONE_HAVE_CUDA). The tuning agent asks hone_profile_ranking() which slot to rewrite. */
#ifndef HONE_PROFILE_H
#define HONE_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "engine/backend.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "engine/slots.h"

struct cJSON;

typedef enum { HONE_PROFILE_CPU = 0, HONE_PROFILE_CUDA = 1 } hone_profile_source;

/* Pseudo-slots of rows that are not a slot call. */
#define HONE_PROFILE_OUTSIDE (-1)       /* "(outside slots)": step wall time - sum of slot time */
#define HONE_PROFILE_OTHER_KERNEL (-2)  /* a GPU kernel whose name names no slot (cuBLAS, ...) */

typedef struct {
    hone_profile_source source;
    const hone_model *model;  /* for the byte model of attention and of GPU steps; with
                               * HONE_PROFILE_CPU, hone_profile_attach() takes the ctx's */
    int n_threads;            /* CPU roofline: threads of the bandwidth probe (0: all CPUs) */
    double peak_gbps;         /* > 0: use this roofline instead of measuring it */
    double peak_gflops;       /* > 0: use this compute roof instead of measuring it */
} hone_profile_opts;

#define HONE_PROFILE_OPTS_INIT \
    {.source = HONE_PROFILE_CPU, .model = NULL, .n_threads = 0, .peak_gbps = 0.0, .peak_gflops = 0.0}

/* One row of the profile: a (slot, dtype, shape) on the CPU, a slot (all its shapes) on the
 * GPU, or the outside row. Figures are totals over every profiled step. */
typedef struct {
    int slot;              /* hone_slot_id, HONE_PROFILE_OUTSIDE or HONE_PROFILE_OTHER_KERNEL */
    char name[64];         /* "matvec_q4_1", "(outside slots)", or the kernel name */
    int dtype;             /* weight dtype (matvec, matmul, embed); -1: f32 activations only */
    int64_t dims[HONE_SLOT_MAX_DIMS]; /* the shape's key dims (the slot descriptor's key_dims;
                            * the others 0) */
    char shape[96];        /* readable: "rows=576 cols=1536", "n=1 heads=9 ... n_kv=1..96" */
    int64_t calls;
    int64_t graph_calls;   /* GPU: kernels that ran as CUDA graph nodes (included in calls) */
    double total_ms;
    double share;          /* of the profiled step wall time, 0..1 */
    double bytes, flops;   /* modelled totals (0 where unknown) */
    double gbps, gflops;   /* achieved: bytes / time, flops / time */
    double roofline;       /* fraction of the roofline reached: max(bytes/BW, flops/peak)/time;
                            * -1 where the bytes are unknown (outside row, other kernels) */
    double gain;           /* expected end-to-end gain: share * (1 - min(roofline, 1)); for an
                            * unknown roofline share * 1 (all of it is headroom) */
} hone_profile_row;

typedef struct {
    int64_t steps, prefill_steps, decode_steps;
    int64_t calls;             /* slot calls (CPU) or kernels (GPU) profiled */
    double step_ms;            /* total wall time of the profiled steps */
    double slot_ms;            /* sum of every slot row */
    double outside_ms;         /* step_ms - slot_ms (>= 0) */
    double peak_gbps;          /* the roofline: measured read bandwidth / the GPU's peak */
    double peak_gflops;        /* the compute roof (f32 FMA peak) */
    double hook_ns;            /* calibrated cost one hooked slot call adds (CPU) */
    double overhead;           /* calls * hook_ns / step_ms: the profiler's share of step time */
    int64_t dropped;           /* GPU: activity records CUPTI dropped */
} hone_profile_summary;

typedef struct hone_profile hone_profile;

/* Makes a profile. The CPU roofline is the read bandwidth of profiler/membw.h, measured once
 * per process and thread count and cached (about a second the first time), plus an f32 FMA
 * peak measured on one thread times n_threads; the CUDA one comes from the device
 * attributes. HONE_PROFILE_CUDA enables CUPTI kernel activity (one such profile at a time)
 * and fails with HONE_EUNSUPPORTED in builds without CUDA or without a device. */
int hone_profile_new(hone_profile **out, const hone_profile_opts *opts);
/* Detaches nothing: call hone_profile_detach() before freeing a ctx-attached profile. */
void hone_profile_free(hone_profile *p);

/* CPU: starts timing ctx's slot calls (sets its slot hook); detach unsets it, after which the
 * forward pass does no profiling work at all. The profile keeps its figures across both. */
int hone_profile_attach(hone_profile *p, hone_backend *be);
void hone_profile_detach(hone_profile *p, hone_backend *be);

/* Brackets one forward call of n tokens at positions pos0..: the step's wall time is what the
 * rows are shares of. GPU: step_end synchronises the device and flushes CUPTI's buffers, and
 * the slots' bytes and flops for the step come from the model (see profile.c). */
void hone_profile_step_begin(hone_profile *p, int64_t n, int64_t pos0);
void hone_profile_step_end(hone_profile *p);
/* Forgets every figure (keeps the roofline and the attachment). */
void hone_profile_reset(hone_profile *p);

/* The slot hook itself (hone_ctx_slot_hook), for backends that time their own slot calls:
 * user is the hone_profile. Attributes ns to slot id at shape (its key dims), with the bytes
 * and flops of the slot descriptor's cost model. */
void hone_profile_hook(void *user, int id, uint64_t ns, const hone_slot_shape *shape);

/* Every row, the outside row included, sorted by share of step time (largest first).
 * Writes min(cap, total) rows, *n = total. */
int hone_profile_rows(const hone_profile *p, hone_profile_row *rows, int cap, int *n);

/* The hot-slot ranking the tuning agent asks for: slot rows only (no outside row, no
 * unattributed kernels), sorted by expected gain = share * (1 - fraction of roofline),
 * largest first. A CPU profile adds a row for each fused slot that did not run but whose
 * components did (qkv_q4_1: the decode matvec_q4_1 calls of Wq, Wk, Wv; profile.c says how the
 * parts are counted): its figures are those components' together, its shape ends in
 * "(unfused)"; hone_profile_rows keeps only the measured rows. Writes min(cap, total) rows,
 * *n = total.
 *   hone_profile_row top[8]; int n;
 *   hone_profile_ranking(p, top, 8, &n);  // top[0].name: the slot to rewrite first */
int hone_profile_ranking(const hone_profile *p, hone_profile_row *rows, int cap, int *n);

void hone_profile_summary_get(const hone_profile *p, hone_profile_summary *out);

/* Prints the table sorted by share, with the summary (roofline, overhead) above it. */
void hone_profile_print(const hone_profile *p, FILE *f);

/* The same as a cJSON object ({"source", "summary": {...}, "rows": [...], "ranking": [...]});
 * the caller owns it (cJSON_Delete). */
int hone_profile_json(const hone_profile *p, struct cJSON **out);

/* "cpu" or "cuda". */
const char *hone_profile_source_name(hone_profile_source s);

#endif
