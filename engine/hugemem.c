/* Anonymous memory advised for transparent huge pages. */
#include "hugemem.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int hone_huge_enabled(void)
{
    const char *env = getenv("HONE_HUGEPAGES");
    if (env && !strcmp(env, "0")) return 0;
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char buf[128] = "";
    if (!f) return 0;
    int ok = fgets(buf, sizeof buf, f) && !strstr(buf, "[never]");
    fclose(f);
    return ok;
}

void *hone_huge_alloc(size_t n, hone_huge_map *map)
{
    memset(map, 0, sizeof *map);
    if (n < HONE_HUGE_PAGE || !hone_huge_enabled()) return NULL;
    /* room to align the start to a huge page, and the end rounded up to one */
    size_t len = (n + HONE_HUGE_PAGE - 1) / HONE_HUGE_PAGE * HONE_HUGE_PAGE + HONE_HUGE_PAGE;
    void *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED) return NULL;
    uint8_t *p = (uint8_t *)(((uintptr_t)a + HONE_HUGE_PAGE - 1) & ~(uintptr_t)(HONE_HUGE_PAGE - 1));
    madvise(p, n, MADV_HUGEPAGE);
    map->base = a;
    map->len = len;
    return p;
}

void hone_huge_free(hone_huge_map *map)
{
    if (map->base) munmap(map->base, map->len);
    memset(map, 0, sizeof *map);
}
