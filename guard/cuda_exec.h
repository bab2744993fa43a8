/* Running CUDA code for the guard. Everything here that touches the GPU does it in a child
 * worker (candidates/worker.h: fork, rlimits, watchdog; no seccomp, which the driver's ioctls
 * and threads would not survive): the calling process never initialises CUDA, so a candidate
 * that faults, hangs or corrupts its context takes only its child with it, and every child
 * starts with a context of its own (a child forked after its parent initialised CUDA could not
 * use it at all). Kernels are compiled by the caller (hone_cuda_kernels_compile: NVRTC needs no
 * GPU) into the cubin cache, which the children only read.
 *
 * This module runs and reports; it does not judge. Outputs go back into the case sets' shared
 * regions (guard/cases.h) exactly where a CPU candidate's would be, with the canaries and the
 * inputs as the device left them, so guard.c applies the same checks to both backends. */
#ifndef HONE_GUARD_CUDA_EXEC_H
#define HONE_GUARD_CUDA_EXEC_H

#include <stddef.h>

#include "candidates/worker.h"
#include "engine/backend.h"
#include "engine/cuda.h"
#include "guard/cases.h"

#define HONE_CUDA_EXEC_MAX_REPS 256
#define HONE_CUDA_EXEC_GUARD 4096 /* bytes of 0xff before and after the device attention scratch */

typedef struct {
    int available;          /* 1: a device that NVRTC can target */
    char why[256];          /* when not, why: "no CUDA-capable device is detected (...)" */
    hone_cuda_device dev;   /* when available: the device HONE_CUDA_DEVICE names (default 0) */
} hone_cuda_exec_device;

/* Looks for the GPU in a child process. Always returns 0: no GPU, no driver, a build without
 * CUDA or a probe that crashed all give available = 0 with the reason in why. */
int hone_cuda_exec_probe(hone_cuda_exec_device *out);

/* How a child ended. */
typedef enum {
    HONE_CUDA_EXEC_OK = 0,
    HONE_CUDA_EXEC_KILLED,  /* a signal or the watchdog (w says which) */
    HONE_CUDA_EXEC_LOAD,    /* the kernels did not load on the device (why: the CUDA error) */
    HONE_CUDA_EXEC_FAULT,   /* a CUDA error at or after a launch: launch failure, illegal
                             * address, misaligned access, ... (why names the case) */
    HONE_CUDA_EXEC_OOB,     /* wrote into the guard of its scratch or into another output */
    HONE_CUDA_EXEC_MUTATED, /* changed attention_decode's n_kv (an input kept on the device) */
    HONE_CUDA_EXEC_SETUP,   /* the child itself failed (device memory, a mismatch of the sets):
                             * not the kernel's doing */
} hone_cuda_exec_end;

typedef struct {
    hone_cuda_exec_end end;
    hone_worker_result w;
    char why[768];
} hone_cuda_exec_status;

/* Makes a kernels root for the candidate: a new directory (mkdtemp under $TMPDIR, else /tmp)
 * whose cuda/ holds a symbolic link to every file of the engine's CUDA kernels directory
 * (hone_cuda_kernels_dir) except <slot>.cu, which holds src. The engine reads it through
 * $HONE_KERNELS_DIR = root. root: a buffer of cap bytes. */
int hone_cuda_exec_kernels_new(char *root, size_t cap, const char *slot, const char *src, size_t len);
/* Removes such a root and what it holds (links, not their targets). "" and NULL: nothing. */
void hone_cuda_exec_kernels_free(const char *root);

/* Kernel parity runs of the slot's kernel of kernels root `root` (NULL: the engine's) on the
 * device of architecture sm, in a child killed after timeout_s. Every call gets a fresh device
 * copy of its case's span (hone_cases_span: inputs, outputs and canaries, the output poisoned
 * first) plus the attention scratch between two guards, and afterwards the output, its
 * canaries and the inputs come back into the shared region. runs = 1: one call per case of cs
 * into output 0, then one per case of fresh into its output 0 (the incumbent's outputs).
 * runs = 3: calls into outputs 0, 1 and 2 of cs, each on a copy at another device address, then
 * the same case of fresh (the same shapes, other inputs) into its output 0 on the copy of the
 * third call: the same addresses with new contents, so a result cached by address, by call
 * count or in a __device__ global comes back stale. fresh may be NULL. Returns 0 when the
 * child ran (whatever became of it: st), a negative HONE_E* code when it could not. */
int hone_cuda_exec_parity(hone_cuda_exec_status *st, int sm, const char *root, hone_slot_id slot,
                          hone_case_set *cs, hone_case_set *fresh, int runs, double timeout_s);

/* The speed runs, in one child: the timing case of cs (its `timing` flag) on `inner` device
 * copies (calibrated so that one rep lasts about 50 us, at most 16), the incumbent (inc_root)
 * and the candidate (cand_root) interleaved A/B then B/A, 3 warm-up pairs and `reps` timed
 * pairs, each rep timed by cudaEvents after an L2 flush (a memset of twice the L2) and a reset
 * of the persisting-L2 lines; inc_ns / cand_ns receive the nanoseconds per call of each rep,
 * *inner the copies per rep. Then every case of cs once more into output 7 (the re-check after
 * the timing loop). reps <= HONE_CUDA_EXEC_MAX_REPS. */
int hone_cuda_exec_time(hone_cuda_exec_status *st, int sm, const char *inc_root, const char *cand_root,
                        hone_slot_id slot, hone_case_set *cs, int reps, double *inc_ns, double *cand_ns,
                        int *inner, double timeout_s);

/* Runs fn(user, b) in a child on a CUDA backend of model m (opts as for hone_backend_new) whose
 * kernels come from root (NULL: the engine's); fn writes its results into memory shared with
 * the caller (hone_worker_shared_new) and returns 0, or a negative code with the error set. */
int hone_cuda_exec_model(hone_cuda_exec_status *st, const char *root, const hone_model *m,
                         const hone_ctx_opts *opts, int (*fn)(void *user, hone_backend *b), void *user,
                         double timeout_s);

#endif
