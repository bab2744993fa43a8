/* The built-in search proposer: a table of template families (agent/search_family.h), one or
 * more per slot kind (agent/search_<kind>.c), each a parameterised kernel rendered to a
 * candidate C file that goes through the same gates as an LLM's. A family's points keep each
 * output's operation order (the exact tier) unless its file says which of its parameters
 * reorder (then the point targets the faithful tier). Every space includes the incumbent's own
 * point, last. */
#ifndef HONE_SEARCH_H
#define HONE_SEARCH_H

#include "agent/search_family.h"
#include "engine/slots.h"

/* The family that handles slot, or NULL (no template). */
const hone_search_family *hone_search_family_of(hone_slot_id slot);

/* The incumbent baseline's own point for slot (all zeros when the slot has no family). */
hone_search_point hone_search_incumbent(hone_slot_id slot);

/* 1 if slot has a search space. */
int hone_search_supports(hone_slot_id slot);

/* Fills pts (up to cap) with the space, most promising first, the incumbent's point last;
 * returns the number of points (0: no family). */
int hone_search_space(hone_slot_id slot, hone_search_point *pts, int cap);

/* Renders the kernel file for point p (malloc'd, caller frees); HONE_EUNSUPPORTED without a
 * family, HONE_EINVAL for a point out of the family's range. */
int hone_search_render(hone_slot_id slot, hone_search_point p, char **out_src);

/* "rows=8 prefetch=512": the family's params with p's values (the candidate's origin record
 * and the search memory's key). */
void hone_search_describe(hone_slot_id slot, hone_search_point p, char *buf, int cap);

/* 1 when a and b are the same point. */
int hone_search_point_eq(hone_search_point a, hone_search_point b);

/* Appends to a space: p unless it is already among pts[0..*n) or equals skip (the incumbent,
 * which goes last); returns *n. For the families' space functions. */
int hone_search_space_add(hone_search_point *pts, int *n, int cap, hone_search_point p,
                          hone_search_point skip);

/* The C text of the helper `hone_search_expf16(float *e, const float *x)`: 16 exps through
 * kernels/cpu/common.h's hone_cpu_expf16 (glibc's expf algorithm, bitwise libm's on every float
 * where libm is glibc's FMA build, as tests/kernels/test_expf.c checks). Templates that include
 * it still reach the exact tier only where the guard finds the bits equal. Returns a malloc'd
 * string. */
char *hone_search_expf_text(void);

/* 0 when lo[i] <= p.v[i] <= hi[i] for i < n, else HONE_EINVAL ("search point out of range"). */
int hone_search_check_range(hone_search_point p, const int *lo, const int *hi, int n);

/* The malloc'd result of printf-formatting fmt (NULL on failure): the families' renderers. */
char *hone_search_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
