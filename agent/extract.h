/* Pulling a candidate kernel out of an LLM reply: the fenced code block that defines the
 * slot's entry point, with its signature checked against the slot's before anything is
 * compiled. */
#ifndef HONE_EXTRACT_H
#define HONE_EXTRACT_H

#include "engine/slots.h"

typedef enum {
    HONE_EXTRACT_OK = 0,
    HONE_EXTRACT_NO_CODE = 1,        /* no fenced code block at all (prose only) */
    HONE_EXTRACT_NO_ENTRY = 2,       /* code, but none defines the entry point */
    HONE_EXTRACT_BAD_SIGNATURE = 3,  /* the entry point's parameters differ from the slot's */
    HONE_EXTRACT_PARTIAL = 4         /* the block with the entry point is cut off: its fence never
                                      * closes and its braces do not balance */
} hone_extract_status;

/* The entry point a candidate for (slot, backend) must define: "hone_cpu_matvec_q4_1" or
 * "hone_cuda_matvec_q4_1". backend: "cpu" or "cuda". */
void hone_extract_entry(hone_slot_id slot, const char *backend, char *buf, int cap);

/* The parameter types of the CPU slot's signature, normalised ("float *,const void *,..."). */
const char *hone_extract_cpu_signature(int slot);

/* Finds the code block of reply that defines the entry point (```c, ```cpp, ```cuda or a
 * bare ``` fence; the last such block wins, as models often correct themselves) and, for the
 * CPU, checks its parameter types. A reply whose blocks define another slot's entry point says
 * which slot that is; a block cut off (an unterminated last fence with unbalanced braces) is
 * PARTIAL. *out_code (malloc'd) receives the block on OK, NULL
 * otherwise; *status says why not, and hone_error_last() has a sentence for the next prompt.
 * Returns 0, or HONE_ENOMEM. */
int hone_extract_code(const char *reply, hone_slot_id slot, const char *backend, char **out_code,
                      hone_extract_status *status);

const char *hone_extract_status_name(hone_extract_status s);

#endif
