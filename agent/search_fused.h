/* The search family of the fused slots (qkv_<dt>, ffn_<dt>, rmsnorm_matvec_<dt>): the
 * composition's matvec rows with several rows in flight across the fused matrices (ffn: as many
 * gate rows as up rows, then swiglu) and a software-prefetch distance. Every point keeps each
 * row's matvec_<dt> order and the swiglu / rmsnorm formulas (exact tier); the incumbent's point,
 * one row at a time without prefetch, is last. Params: "rows", "prefetch" (bytes ahead). */
#ifndef HONE_SEARCH_FUSED_H
#define HONE_SEARCH_FUSED_H

#include "search_family.h"

extern const hone_search_family hone_search_fused_family;

#endif
