/* The guard's test cases for one slot: the shape set (the loaded model's shapes, the
 * SmolLM2-135M reference shapes and edge shapes), fresh random inputs from a seed, laid out in
 * one shared-memory region where every input, output and scratch buffer ends exactly at a
 * PROT_NONE guard page and starts after one (so an over-read or over-write by one element, or
 * a 64-byte tail load past the end, faults), with a canary before every output and scratch
 * buffer, and a call of any slot function on a case (share ith of nth). */
#ifndef HONE_GUARD_CASES_H
#define HONE_GUARD_CASES_H

#include <stddef.h>
#include <stdint.h>

#include "engine/model.h"
#include "engine/slots.h"

#define HONE_CASES_NOUT 8      /* 0..2: three runs nth = 1; 3: nth = 2; 4..6: the shares of nth = 3
                                * each alone; 7: the re-check after the timing loop */
#define HONE_CASES_CANARY 256  /* bytes of canary before every output / scratch buffer */
#define HONE_CASES_MAX_RANGES (HONE_SLOT_MAX_ARGS + HONE_CASES_NOUT + 1)
#define HONE_CASES_POISON 0x7fedcba9u /* the NaN outputs are filled with before a call */

/* One case: a shape of a slot (from its descriptor's shape set), its inputs laid out in the
 * shared region, and the slot's output laid out HONE_CASES_NOUT times between canaries. */
typedef struct {
    int slot;
    const hone_slot_desc *d;
    hone_slot_shape shape;
    char desc[160];                          /* "matvec_q4_1 rows=1536 cols=576" */
    size_t in_off[HONE_SLOT_MAX_ARGS];       /* per argument: its input bytes (0 for the output, */
    size_t in_bytes[HONE_SLOT_MAX_ARGS];     /* the scratch and scalars); INOUT: the initial x */
    int out_arg;                             /* the OUT or INOUT argument */
    int scratch_arg;                         /* the SCRATCH argument or -1 */
    int inplace;                             /* INOUT: out starts as a copy of its input */
    int64_t n_kv;                            /* attention: keys (cuda_exec checks it is kept) */
    int64_t out_len;                         /* floats */
    int64_t cmp_rows, cmp_row_len;           /* the output as rows for the error metrics */
    int64_t share_units, share_unit_len;     /* the share unit: element k belongs to unit
                                              * (k / unit_len) % units */
    size_t out_off[HONE_CASES_NOUT];         /* each preceded and followed by a canary */
    int64_t scratch_len;                     /* floats (attention) */
    int64_t scratch_row;                     /* floats of a CUDA scratch row: the dims' product */
    size_t scratch_off;
    uint64_t in_hash;                        /* FNV-1a of all inputs after generation */
    int timing;                              /* 1: the case the speed gate times */
} hone_case;

typedef struct {
    hone_case *c;
    int n;
    uint8_t *base;       /* the shared region */
    size_t bytes;
    uint64_t seed;
    uint8_t canary[HONE_CASES_CANARY];
} hone_case_set;

/* Builds the cases of slot (its descriptor's shape set for model m; NULL: reference and edge
 * shapes only), allocates the shared region and fills inputs and canaries from seed: each
 * input by its argument's role (weights of the slot's dtype, activations in the argument's
 * range, edge values in edge shapes, ids below their bound, paged caches holding NaN wherever
 * no key should be read). */
int hone_cases_new(hone_case_set *out, int slot, const hone_model *m, uint64_t seed);
void hone_cases_free(hone_case_set *s);

/* The case the speed gate times (the largest non-edge one: its `timing` flag). */
const hone_case *hone_cases_timing(const hone_case_set *s);

/* Fills output buffer k of case c with the poison NaN (or the in-place initial content). */
void hone_cases_poison(const hone_case_set *s, const hone_case *c, float *out);
float *hone_cases_out(const hone_case_set *s, const hone_case *c, int k);
float *hone_cases_scratch(const hone_case_set *s, const hone_case *c);
/* 1 if every canary of case c is intact; what: where it was broken. */
int hone_cases_canaries_ok(const hone_case_set *s, const hone_case *c, char *what, size_t cap);
uint64_t hone_cases_hash_inputs(const hone_case_set *s, const hone_case *c);

/* Calls fn (a slot function of c->slot) on case c with inputs from base (any copy laid out like
 * the shared region), writing out and using scratch, through the descriptor's generic caller. */
void hone_cases_call(void *fn, const hone_case *c, const uint8_t *base, float *out,
                     float *scratch, int ith, int nth);

/* The bytes of case c in the shared region, [*lo, *hi): its inputs, outputs and scratch with
 * every canary and the guard pages between them (cases lie one after the other, so the spans
 * of two cases do not overlap). Only the ranges below are readable. */
void hone_cases_span(const hone_case *c, size_t *lo, size_t *hi);
/* The readable ranges of case c's span, [lo[i], hi[i]) for i < the count returned (<= cap):
 * each buffer's pages, from its first page (canary included) to its end. */
int hone_cases_ranges(const hone_case *c, size_t *lo, size_t *hi, int cap);
/* Where address addr (a fault's) lies in the region of s: 1 and a text naming the buffer
 * ("4 bytes past the end of output 0 (swiglu n=1)"), or 0 when it is outside the region. */
int hone_cases_where(const hone_case_set *s, uintptr_t addr, char *buf, size_t cap);
/* Copies (swap: exchanges) case c's readable ranges between two regions laid out alike (the
 * shared region, a copy of it, a fresh case set's). */
void hone_cases_copy(uint8_t *dst, const uint8_t *src, const hone_case *c, int swap);

/* One launch of the slot's CUDA kernel on case c: the arguments of kernels/cuda/README.md's
 * table in cudaLaunchKernel's form (args[i] points at the i-th argument's value, kept in this
 * struct: fill it where it will be used and do not copy it) and the items along the slot's
 * x and y axes (hone_cuda_kernels_launch's items_x, items_y). */
typedef struct {
    void *args[16];
    int n_args;
    int64_t items_x, items_y;
    void *ptr[8];        /* the values behind args */
    int64_t i64[10];
    float f32[2];
    int32_t i32[2];
} hone_cases_cuda_launch;

/* Floats of attention scratch a CUDA kernel needs for case c ([n * heads][n_kv]; the CPU's is
 * one row, scratch_row); 0 for the other slots. */
int64_t hone_cases_cuda_scratch_len(const hone_case *c);

/* Fills *out for case c. dev: the device address of byte lo of a device copy of the case's
 * span (hone_cases_span), so an input at offset off is at dev + (off - lo); out: the device
 * output (in place for rope: it holds x); scratch: hone_cases_cuda_scratch_len(c) device
 * floats; n_kv: a device int32 holding c->n_kv (attention_decode reads its length from device
 * memory). scratch and n_kv may be NULL for the slots that take neither. No CUDA call. */
void hone_cases_cuda_args(hone_cases_cuda_launch *out, const hone_case *c, uint8_t *dev, size_t lo,
                          float *dev_out, float *scratch, int32_t *n_kv);

/* The f64 oracle of case c (ref: out_len doubles): guard/oracle.h's for the built-in kinds, the
 * descriptor's own for a registered slot. */
void hone_cases_oracle(const hone_case *c, const uint8_t *base, double *ref);

/* The a-priori error bound of every output element of case c (guard/oracle.h), given its
 * oracle ref (hone_cases_oracle): 1 when the slot's kind has one (bound: out_len doubles), 0 for
 * a registered slot without one. */
int hone_cases_bound(const hone_case *c, const uint8_t *base, const double *ref, double *bound);

/* Bytes a call of case c must move at least, and (flops: NULL or) its flops: the descriptor's
 * cost model. */
double hone_cases_cost(const hone_case *c, double *flops);

#endif
