/* What the matvec and matmul families share: the dtype of a slot, its scalar dequantiser
 * body and the upper-case dtype name the templates print. */
#ifndef HONE_SEARCH_LINEAR_H
#define HONE_SEARCH_LINEAR_H

#include <stddef.h>

#include "agent/search_family.h"
#include "engine/slots.h"

/* "matvec_q4_1" -> "q4_1" */
const char *hone_search_linear_dtype(hone_slot_id slot);
/* The body of the template's scalar deq(row, c0, n, out) for dtype dt. */
const char *hone_search_linear_deq_body(const char *dt);
/* Renders tmpl (printf arguments: dtype, v[0], v[1], deq body, DTYPE) for slot at p, whose two
 * params are 1..16 and 0..8192 (HONE_EINVAL otherwise). */
int hone_search_linear_render(const char *tmpl, hone_slot_id slot, hone_search_point p, char **out_src);

#endif
