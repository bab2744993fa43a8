/* The guard: accepts a candidate kernel only when it is exact or faithful, and faster.
 *
 * Gates, in order (the first failure rejects, with its reason code and text):
 *  1. freeze   the source is hashed (SHA-256) and stored; only then is the input seed drawn
 *              (getrandom), so no candidate can be tuned to its test inputs;
 *  2. scan     static scan of the source (guard/scan.h);
 *  3. compile  cc to a shared object (CPU) or NVRTC to cubins for sm_80 and sm_90 (CUDA);
 *              then the ELF scan (CPU) or the PTX scan (CUDA);
 *  4. kernel parity, in an isolated worker under seccomp strict mode: every case of the slot's
 *              shape set (the model's shapes, the SmolLM2-135M reference shapes, edge shapes:
 *              1, odd, non-power-of-two) on fresh random inputs plus an edge-value case; outputs
 *              poisoned with NaN, canaries around every output and scratch buffer, inputs hashed
 *              before and after; three runs into different buffers bitwise identical; nth = 1,
 *              2, 3 bitwise identical and each share alone writing only its own elements;
 *              all-zero / constant outputs refused where the oracle is not; then the tier:
 *              exact (bitwise equal to the incumbent everywhere) or faithful (per case, error
 *              against the f64 oracle: max <= 1.5 x the incumbent's and mean <= 1.25 x, plus
 *              2^-30 of the output's scale; NaN/Inf exactly where the oracle has them);
 *  5. model parity, in an isolated worker under a seccomp BPF filter: the candidate slotted
 *              into the whole model, teacher-forced over a prompt set, against the incumbent
 *              (guard/guard.c: judge_model for the bounds);
 *  6. speed    kernel level (worker, strict mode): the harness's monotonic clock, caches flushed
 *              (clflush of every buffer) before every rep, incumbent and candidate interleaved
 *              A/B, >= 30 reps after warm-up, median speedup >= threshold and the lower bound of
 *              its bootstrap 95% CI > 1.0; faster than the memory roofline or > 10x: suspect;
 *              correctness re-checked after the timing loop; then end to end: decode steps
 *              alternated between incumbent and candidate must not regress (guard.c: model_gates).
 * CUDA candidates (backend "cuda"): the same gates on the GPU, each step in a worker that alone
 * initialises CUDA (guard/cuda_exec.h): kernel parity on device copies of the same cases (three
 * runs at three device addresses, then fresh inputs at the same addresses) against the CUDA
 * incumbent, model parity on the CUDA backend with a kernels root holding the candidate, speed
 * timed with cudaEvents after an L2 flush against the device's DRAM peak; the judgements are
 * the CPU path's. Without a GPU only the compile gates run: "not evaluated".
 */
#ifndef HONE_GUARD_H
#define HONE_GUARD_H

#include <stdint.h>
#include <stdio.h>

#include "guard/evidence.h"

/* Why a candidate was rejected (HONE_GUARD_OK when accepted). */
typedef enum {
    HONE_GUARD_OK = 0,
    HONE_GUARD_USAGE,          /* bad options (not a verdict on the candidate) */
    HONE_GUARD_SCAN,           /* static source scan */
    HONE_GUARD_COMPILE,        /* the compiler refused it */
    HONE_GUARD_ELF,            /* mutable globals, load-time code, symbols off the list */
    HONE_GUARD_CRASH,          /* killed by a signal */
    HONE_GUARD_TIMEOUT,        /* the watchdog killed it */
    HONE_GUARD_CANARY,         /* wrote outside its output */
    HONE_GUARD_INPUT_MUTATED,  /* changed an input */
    HONE_GUARD_WROTE_NOTHING,  /* left the poisoned output untouched */
    HONE_GUARD_NONFINITE,      /* NaN/Inf where the oracle has none (or the reverse) */
    HONE_GUARD_CONSTANT,       /* constant output where the oracle is not */
    HONE_GUARD_PARITY,         /* error beyond the faithful bound */
    HONE_GUARD_NONDETERMINISTIC, /* three runs differ */
    HONE_GUARD_SHARE,          /* nth changes bits, or a share writes outside its part */
    HONE_GUARD_RECHECK,        /* different results after the timing loop */
    HONE_GUARD_MODEL_PARITY,   /* logits beyond the bounds */
    HONE_GUARD_SLOWER,         /* not faster by the threshold with confidence */
    HONE_GUARD_SUSPECT,        /* faster than the bandwidth or FLOP roofline of its shape */
    HONE_GUARD_E2E_REGRESSION, /* decode tokens/s regressed */
    HONE_GUARD_NOT_EVALUATED,  /* e.g. CUDA without a GPU: compile gates only */
    HONE_GUARD_INTERNAL,       /* the guard itself failed */
    HONE_GUARD_FP_STATE,       /* left MXCSR or the x87 control word changed after a call */
    HONE_GUARD_INCONCLUSIVE,   /* the speed or decode interval stayed too wide to decide within
                                * the time budget (a noisy machine): neither faster nor slower */
    HONE_GUARD_SCREENED,       /* opts.screen: the cheap gates passed and speedup holds an
                                * estimate; never an acceptance */
    HONE_GUARD_CANCELLED,      /* opts.cancel was set before a verdict: no verdict on the
                                * candidate (neither accepted nor rejected) */
} hone_guard_code;

const char *hone_guard_code_name(hone_guard_code c);

typedef struct {
    const char *model_path;     /* GGUF; required for the execution gates (CPU, or CUDA on a GPU) */
    const char *slot;           /* "swiglu", "matvec_q4_1", ... */
    const char *backend;        /* "cpu" or "cuda" */
    const char *source;         /* the candidate source text (need not be NUL-terminated) */
    size_t source_len;
    const char *name;           /* what the report and the evidence call it, e.g. its file path;
                                 * NULL: "(in memory)" */
    const char *state_dir;      /* NULL: the store's default */
    const char *kernels_dir;    /* CPU: the served kernels tree (--kernels DIR: DIR/cpu/<slot>.c,
                                 * loaded through the kernel loader, served = vetted); the
                                 * incumbent of every gate is then what that tree serves, for the
                                 * slot and for the rest of the model; NULL: the shipped baselines */
    const char *evidence_path;  /* NULL: none written besides the store */
    double threshold;           /* median speedup needed; default 1.05 */
    double e2e_slack;           /* end to end: accepted when the decode ratio's CI low >= 1 - this;
                                 * <= 0: 0.05 */
    int64_t seed;               /* < 0: drawn with getrandom after freezing (testing only) */
    int skip_scan;              /* testing only: skip the source and ELF scans (to show the
                                 * dynamic gates catch what the scans would) */
    int skip_speed;             /* testing only: stop after model parity (verdict accepted
                                 * means "parity passed") */
    int model_prompts, model_steps; /* 0: CPU defaults (see guard.c) */
    int reps;                   /* timed A/B pairs; 0: 41 */
    double kernel_timeout_s;    /* 0: 10 s per kernel worker (CUDA: 30 s, its start-up included) */
    const char *origin_kind, *origin;
    int quiet;                  /* no report */
    /* Screening (CPU): freeze, scan, compile, kernel parity, then one short interleaved A/B
     * timing of the timing case (reps pairs; 0: 9) with no roofline probe, no model and no
     * end-to-end gate. The verdict is code HONE_GUARD_SCREENED with speedup, ci_low and
     * ci_high the estimate and tier the parity tier reached, accepted always 0; the store
     * keeps the candidate without marking it accepted or rejected. A search uses it to rank
     * points before spending full guard runs on the best. */
    int screen;
    /* Called as each gate begins (end 0, status NULL) and ends (end 1, status "pass", "fail",
     * "skipped", ...), gate being "scan", "compile", "kernel-parity", "model-parity", "speed",
     * "speed-shapes", "e2e"; from the guard's thread. NULL: none. */
    void (*progress)(void *user, const char *gate, int end, const char *status);
    void *progress_user;
    /* Non-NULL: the run stops soon after *cancel becomes nonzero (read with an atomic load):
     * checked before each gate and each timing round, and polled by every CPU worker (2 ms)
     * and the compiler (100 ms), which are killed at once. The result is then code
     * HONE_GUARD_CANCELLED, not accepted and not a rejection: the store keeps the candidate at
     * the last state it reached (every write there is atomic), and no verdict, evidence.json
     * or evidence_path is written. How `hone serve --tune` stops within a second on SIGTERM.
     * (The CUDA gates' workers are not polled yet: they end at their watchdog.) */
    const int *cancel;
} hone_guard_opts;

#define HONE_GUARD_OPTS_INIT {.backend = "cpu", .threshold = 1.05, .seed = -1, .origin_kind = "file"}

typedef struct {
    int accepted;
    int evaluated;              /* 0: execution gates skipped (no GPU) */
    hone_guard_code code;
    char reason[512];
    char hash[65];
    char so_hash[65];           /* CPU: SHA-256 of the compiled object the gates ran ("" if none) */
    char tier[16];              /* "exact" / "faithful" / "" */
    double speedup, ci_low, ci_high;
    double seconds;
    hone_evidence ev;           /* filled for the review (strings point into this struct) */
    char ev_device[160], ev_model[256], ev_shapes[512], ev_origin[512];
} hone_guard_result;

/* Runs every gate on opts->source; prints a readable report to report (NULL: none). Returns 0
 * when the guard ran, whatever its verdict (out->accepted, out->code, out->reason), or a negative
 * HONE_E* code when it could not run (bad options, the store, the model, memory). */
int hone_guard_run(hone_guard_result *out, const hone_guard_opts *opts, FILE *report);

#endif
