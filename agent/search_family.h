/* One family of the search proposer's templates (agent/search.c holds the table of families):
 * a parameterised kernel template for the slots it supports, its space of points and how a
 * point renders to a candidate C file. A point is a few named integers (the family names them:
 * "rows", "prefetch", "tile", "unroll", ...). Every family's space contains the incumbent's own
 * point (last), and every point keeps each output element's operation order unless the family
 * says it targets the faithful tier. */
#ifndef HONE_SEARCH_FAMILY_H
#define HONE_SEARCH_FAMILY_H

#include "engine/slots.h"

#define HONE_SEARCH_MAX_PARAMS 6

typedef struct {
    int v[HONE_SEARCH_MAX_PARAMS];   /* the values of the family's params, in its order */
} hone_search_point;

typedef struct {
    const char *name;                               /* "matvec", "rmsnorm", "qkv", ... */
    const char *params[HONE_SEARCH_MAX_PARAMS + 1]; /* names of v[0..], NULL-terminated */
    int (*supports)(hone_slot_id slot);
    hone_search_point (*incumbent)(hone_slot_id slot); /* the baseline kernel's own point */
    /* Fills pts (up to cap), most promising first, the incumbent's point last; returns the count. */
    int (*space)(hone_slot_id slot, hone_search_point *pts, int cap);
    /* Renders the kernel file for p (malloc'd NUL-terminated C source into *out_src). */
    int (*render)(hone_slot_id slot, hone_search_point p, char **out_src);
} hone_search_family;

#endif
