/* The search proposer's memory: what was tried per (slot, shape set, machine), kept in the
 * candidate store's directory as search-memory.json, so a second `hone tune` neither screens
 * the same points again nor forgets which were best. A record: the point ("rows=2
 * prefetch=8192"), its screened speedup estimate and reps, and the last verdict ("screened",
 * "accepted", or the guard's code name of a rejection) with the parity tier. */
#ifndef HONE_SEARCH_MEMORY_H
#define HONE_SEARCH_MEMORY_H

#include <stddef.h>

typedef struct {
    char point[96];
    double speedup;            /* the screened estimate (candidate / incumbent); NAN: none */
    int reps;                  /* timed pairs behind it */
    char verdict[24];          /* "screened", "accepted", "slower", "parity", ... */
    char tier[16];             /* "exact", "faithful", "" */
} hone_search_memory_entry;

typedef struct hone_search_memory hone_search_memory;

/* Loads dir/search-memory.json (absent: empty) and selects the records of (slot, shapes,
 * machine); others are kept and written back by save. */
int hone_search_memory_open(hone_search_memory **out, const char *dir, const char *slot,
                            const char *shapes, const char *machine);
void hone_search_memory_free(hone_search_memory *m);

/* The record of point for this key, or NULL (a borrow, valid until the next put). */
const hone_search_memory_entry *hone_search_memory_find(const hone_search_memory *m, const char *point);
/* The records of this key, best screened speedup first (n: their count; a borrow). */
const hone_search_memory_entry *hone_search_memory_ranked(hone_search_memory *m, int *n);
/* Records (or replaces) point's result; a verdict other than "screened" keeps the speedup
 * already recorded when speedup is NAN. */
int hone_search_memory_put(hone_search_memory *m, const char *point, double speedup, int reps,
                           const char *verdict, const char *tier);
/* Writes the file atomically. */
int hone_search_memory_save(const hone_search_memory *m);

/* This machine's key: the CPU model, a hash of its flags, the C compiler's first --version
 * line ($HONE_CC, else cc). */
void hone_search_memory_machine(char *buf, size_t cap);

#endif
