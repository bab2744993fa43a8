/* The prompt that asks an LLM for a faster kernel: the slot's contract (from engine/slots.h),
 * the incumbent source and the helpers it uses, the loaded model's shapes, the profile, the
 * device, the hard rules, and this slot's earlier rejected candidates with their reasons, so
 * each round learns from the last. */
#ifndef HONE_PROMPT_H
#define HONE_PROMPT_H

#include "engine/slots.h"

typedef struct {
    const char *summary;   /* e.g. "candidate 3f2a91c0 (rows=8)" */
    const char *reason;    /* the guard's reason, compiler errors, parity diffs, speed figures */
} hone_prompt_history;

typedef struct {
    hone_slot_id slot;
    const char *backend;        /* "cpu" or "cuda" */
    const char *shapes;         /* one line per call shape, e.g. "rows 576 cols 576 (q4_1), 60 calls/token" */
    const char *profile;        /* e.g. "46% of decode step time, 18.2 GB/s = 41% of roofline" */
    const char *device;         /* e.g. "AMD EPYC, 2 cores, AVX-512 (F, BW, VL, BF16, VNNI), 40 GB/s read" */
    const hone_prompt_history *history;
    int n_history;
    const char *source_dir;     /* where engine/ and kernels/ are; NULL: the build's source dir */
    const char *kernels_dir;    /* the served kernels tree (--kernels DIR): its DIR/cpu/<slot>.c,
                                 * when there, is the incumbent shown; NULL: the shipped baseline */
    const char *best_source;    /* the best kernel accepted so far in this run (NULL: none) */
    const char *best_summary;   /* e.g. "candidate 3f2a91c0: exact tier, 1.31x" */
    int level;                  /* how much of the helpers to show: 0 the definitions of the ones the
                                 * incumbent uses (transitively), 1 only their names (a small
                                 * context); see hone_prompt_helpers */
} hone_prompt_opts;

#define HONE_PROMPT_LEVELS 2

#define HONE_PROMPT_OPTS_INIT {.slot = HONE_SLOT_MATVEC_Q4_1, .backend = "cpu"}

/* Builds the system and user messages (both malloc'd). Errors: HONE_EIO if the incumbent
 * source cannot be read. */
int hone_prompt_build(const hone_prompt_opts *o, char **out_system, char **out_user);

/* The slot's contract from its descriptor (malloc'd), or NULL for an unknown slot: the rules
 * every slot obeys, the math, each argument's role and shape, the share axis, and the typedef
 * of its function. */
char *hone_prompt_contract(int slot);

/* The part of header (the text of kernels/cpu/common.h) that source uses: every top-level
 * definition (function, macro, typedef) whose name source mentions, and those the chosen ones
 * mention in turn, with their leading comments and the header's preprocessor conditionals, in
 * the header's order (malloc'd; NULL when out of memory). */
char *hone_prompt_helpers(const char *header, const char *source);

/* A one-line description of this CPU: model name, online CPUs, SIMD features. */
void hone_prompt_cpu_device(char *buf, int cap);

#endif
