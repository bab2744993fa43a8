/* The built-in search proposer: parameterised templates of the CPU matvec and matmul kernels
 * (rows in flight, software-prefetch distance, token tile), rendered to candidate C files
 * that go through the same gates as an LLM's. Every point keeps each output's reduction order,
 * so an accepted point reaches the exact tier. The space includes the incumbent's settings. */
#ifndef HONE_SEARCH_H
#define HONE_SEARCH_H

#include "engine/slots.h"

typedef struct {
    int rows;        /* matvec: weight rows interleaved (independent fma chains) */
    int prefetch;    /* bytes ahead of each row's current block to prefetch; 0 = none */
    int tile;        /* matmul: tokens per tile sharing one dequantised block */
} hone_search_point;

/* The incumbent baseline's own settings for slot. */
hone_search_point hone_search_incumbent(hone_slot_id slot);

/* 1 if slot has a search space (the matvec_* and matmul_* slots). */
int hone_search_supports(hone_slot_id slot);

/* Fills pts (up to cap) with the space, most promising first, the incumbent's point last;
 * returns the number of points. */
int hone_search_space(hone_slot_id slot, hone_search_point *pts, int cap);

/* Renders the kernel file for point p (malloc'd, caller frees). */
int hone_search_render(hone_slot_id slot, hone_search_point p, char **out_src);

/* "rows=8 prefetch=512" (for the candidate's origin record). */
void hone_search_describe(hone_slot_id slot, hone_search_point p, char *buf, int cap);

#endif
