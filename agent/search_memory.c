/* The search memory (agent/search_memory.h): one JSON file of records, cJSON in and out. */
#include "search_memory.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "candidates/store.h"
#include "engine/error.h"
#include "engine/file.h"

#define MEMORY_MAX 512

struct hone_search_memory {
    char path[4200];
    char slot[64], shapes[512], machine[512];
    cJSON *others;                          /* records of other keys, written back unchanged */
    hone_search_memory_entry e[MEMORY_MAX]; /* this key's */
    int n;
};

static const char *str_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

int hone_search_memory_open(hone_search_memory **out, const char *dir, const char *slot,
                            const char *shapes, const char *machine)
{
    *out = NULL;
    hone_search_memory *m = calloc(1, sizeof *m);
    if (!m) return hone_error_set(HONE_ENOMEM, "out of memory");
    snprintf(m->path, sizeof m->path, "%s/search-memory.json", dir);
    snprintf(m->slot, sizeof m->slot, "%s", slot);
    snprintf(m->shapes, sizeof m->shapes, "%s", shapes);
    snprintf(m->machine, sizeof m->machine, "%s", machine);
    m->others = cJSON_CreateArray();
    char *txt = NULL;
    size_t len = 0;
    if (hone_file_read(m->path, &txt, &len) == 0) {
        cJSON *root = cJSON_Parse(txt);
        const cJSON *recs = root ? cJSON_GetObjectItemCaseSensitive(root, "records") : NULL;
        const cJSON *r;
        cJSON_ArrayForEach(r, recs)
        {
            if (strcmp(str_of(r, "slot"), m->slot) || strcmp(str_of(r, "shapes"), m->shapes) ||
                strcmp(str_of(r, "machine"), m->machine) || m->n >= MEMORY_MAX) {
                cJSON_AddItemToArray(m->others, cJSON_Duplicate(r, 1));
                continue;
            }
            hone_search_memory_entry *e = &m->e[m->n++];
            snprintf(e->point, sizeof e->point, "%s", str_of(r, "point"));
            const cJSON *sp = cJSON_GetObjectItemCaseSensitive(r, "speedup");
            e->speedup = cJSON_IsNumber(sp) ? sp->valuedouble : NAN;
            const cJSON *reps = cJSON_GetObjectItemCaseSensitive(r, "reps");
            e->reps = cJSON_IsNumber(reps) ? reps->valueint : 0;
            snprintf(e->verdict, sizeof e->verdict, "%s", str_of(r, "verdict"));
            snprintf(e->tier, sizeof e->tier, "%s", str_of(r, "tier"));
        }
        cJSON_Delete(root);
        free(txt);
    }
    *out = m;
    return 0;
}

void hone_search_memory_free(hone_search_memory *m)
{
    if (!m) return;
    cJSON_Delete(m->others);
    free(m);
}

const hone_search_memory_entry *hone_search_memory_find(const hone_search_memory *m, const char *point)
{
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->e[i].point, point)) return &m->e[i];
    return NULL;
}

/* Best first: a screened speedup above none (NAN), then larger. */
static int cmp_entry(const void *a, const void *b)
{
    double x = ((const hone_search_memory_entry *)a)->speedup, y = ((const hone_search_memory_entry *)b)->speedup;
    if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
    return (x < y) - (x > y);
}

const hone_search_memory_entry *hone_search_memory_ranked(hone_search_memory *m, int *n)
{
    qsort(m->e, (size_t)m->n, sizeof m->e[0], cmp_entry);
    *n = m->n;
    return m->e;
}

int hone_search_memory_put(hone_search_memory *m, const char *point, double speedup, int reps,
                           const char *verdict, const char *tier)
{
    hone_search_memory_entry *e = (hone_search_memory_entry *)hone_search_memory_find(m, point);
    if (!e) {
        if (m->n >= MEMORY_MAX) return hone_error_set(HONE_ENOMEM, "search memory full");
        e = &m->e[m->n++];
        memset(e, 0, sizeof *e);
        snprintf(e->point, sizeof e->point, "%s", point);
        e->speedup = NAN;
    }
    if (!isnan(speedup) || !strcmp(verdict, "screened")) {
        e->speedup = speedup;
        e->reps = reps;
    }
    snprintf(e->verdict, sizeof e->verdict, "%s", verdict);
    snprintf(e->tier, sizeof e->tier, "%s", tier ? tier : "");
    return 0;
}

int hone_search_memory_save(const hone_search_memory *m)
{
    cJSON *root = cJSON_CreateObject(), *recs = cJSON_Duplicate(m->others, 1);
    cJSON_AddNumberToObject(root, "version", 1);
    for (int i = 0; i < m->n; i++) {
        const hone_search_memory_entry *e = &m->e[i];
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "slot", m->slot);
        cJSON_AddStringToObject(r, "shapes", m->shapes);
        cJSON_AddStringToObject(r, "machine", m->machine);
        cJSON_AddStringToObject(r, "point", e->point);
        if (!isnan(e->speedup)) cJSON_AddNumberToObject(r, "speedup", e->speedup);
        cJSON_AddNumberToObject(r, "reps", e->reps);
        cJSON_AddStringToObject(r, "verdict", e->verdict);
        cJSON_AddStringToObject(r, "tier", e->tier);
        cJSON_AddItemToArray(recs, r);
    }
    cJSON_AddItemToObject(root, "records", recs);
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    if (!txt) return hone_error_set(HONE_ENOMEM, "out of memory");
    int rc = hone_store_atomic_write(m->path, txt, strlen(txt));
    free(txt);
    return rc;
}

void hone_search_memory_machine(char *buf, size_t cap)
{
    char model[128] = "unknown CPU", cc[256] = "unknown compiler";
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the flags line */
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[4096];
        int got_model = 0, got_flags = 0;
        while ((!got_model || !got_flags) && fgets(line, sizeof line, f)) {
            char *c = strchr(line, ':');
            if (!c) continue;
            c += c[1] == ' ' ? 2 : 1;
            c[strcspn(c, "\n")] = 0;
            if (!got_model && !strncmp(line, "model name", 10)) {
                snprintf(model, sizeof model, "%s", c);
                got_model = 1;
            } else if (!got_flags && !strncmp(line, "flags", 5)) {
                for (const char *p = c; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
                got_flags = 1;
            }
        }
        fclose(f);
    }
    const char *ccname = getenv("HONE_CC");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "%s --version 2>/dev/null", ccname && *ccname ? ccname : "cc");
    FILE *p = popen(cmd, "r");
    if (p) {
        if (fgets(cc, sizeof cc, p)) cc[strcspn(cc, "\n")] = 0;
        pclose(p);
    }
    snprintf(buf, cap, "%s; flags %016llx; %s", model, (unsigned long long)h, cc);
}
