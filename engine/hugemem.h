/* Anonymous memory advised for transparent huge pages: one TLB entry per 2 MiB instead of per
 * 4 KiB for the large, long-lived arrays the decode step streams (the weights' copy, the KV
 * pool). */
#ifndef HONE_HUGEMEM_H
#define HONE_HUGEMEM_H

#include <stddef.h>

#define HONE_HUGE_PAGE ((size_t)2 << 20)

/* A mapping made by hone_huge_alloc: base and len as mmap returned them. */
typedef struct {
    void *base;
    size_t len;
} hone_huge_map;

/* Whether huge pages are wanted and possible: HONE_HUGEPAGES is not "0" and the kernel backs
 * madvise(MADV_HUGEPAGE) regions (transparent_hugepage/enabled is not [never]). */
int hone_huge_enabled(void);

/* n bytes, 2 MiB aligned and advised MADV_HUGEPAGE, zero-filled, in a private anonymous
 * read-write mapping recorded in *map; NULL (and *map zeroed) when huge pages are not enabled,
 * n is under 2 MiB, or the mapping fails: the caller then allocates as before. */
void *hone_huge_alloc(size_t n, hone_huge_map *map);

/* Unmaps what hone_huge_alloc mapped (nothing for a zeroed map). */
void hone_huge_free(hone_huge_map *map);

#endif
