/* The candidate store: content-addressed, on disk, crash-safe. One directory per candidate,
 * named by the SHA-256 of its source: <state>/candidates/<hash>/ holds source.c (or .cu),
 * meta.json (slot, backend, origin, the incumbent it challenges, timestamps, the state with its
 * history, reason and evidence), compile.log and the compiled artifact.
 * States: proposed -> compiled -> kernel-parity -> model-parity -> speed -> accepted | rejected.
 * Every write is atomic (temp file, fsync, rename, fsync of the directory): a crash mid-write
 * leaves the previous version of the file, never a torn one. Several processes (two guards) may
 * work on one store and one candidate at once: writes never share a temp file, and the
 * read-change-write of meta.json holds an flock on the candidate's .lock. */
#ifndef HONE_STORE_H
#define HONE_STORE_H

#include <stddef.h>

typedef struct hone_store hone_store;

typedef enum {
    HONE_STORE_PROPOSED,
    HONE_STORE_COMPILED,
    HONE_STORE_KERNEL_PARITY,
    HONE_STORE_MODEL_PARITY,
    HONE_STORE_SPEED,
    HONE_STORE_ACCEPTED,
    HONE_STORE_REJECTED,
} hone_store_state;

/* What a candidate is and where it came from (strings borrowed; NULL: unknown). */
typedef struct {
    const char *slot;          /* "swiglu", "matvec_q4_1", ... */
    const char *backend;       /* "cpu" or "cuda" */
    const char *origin_kind;   /* "llm", "search" or "file" */
    const char *origin;        /* LLM model + prompt hash, search parameters, or file path */
    const char *incumbent;     /* content hash of the kernel it challenges */
} hone_store_meta;

/* The default state directory: $XDG_CACHE_HOME/hone, else $HOME/.cache/hone. */
int hone_store_default_dir(char *buf, size_t cap);

/* Opens (creating as needed) the store under dir (NULL: the default). */
int hone_store_open(hone_store **out, const char *dir);
void hone_store_free(hone_store *s);
const char *hone_store_dir(const hone_store *s);

/* Adds a candidate: hashes src, writes source.<ext> and meta.json (state proposed) unless the
 * candidate is already there (then only a new "proposed" history entry is recorded).
 * out_hash receives the 64-hex content hash. */
int hone_store_put(hone_store *s, char out_hash[65], const char *src, size_t len,
                   const hone_store_meta *meta);

/* Moves a candidate to state, with a reason (may be NULL) and an evidence JSON text (may be
 * NULL; stored as a JSON object under "evidence"). Appends to the history. */
int hone_store_set_state(hone_store *s, const char *hash, hone_store_state state,
                         const char *reason, const char *evidence_json);

/* Writes a file of the candidate's directory atomically (e.g. "compile.log"). */
int hone_store_write(hone_store *s, const char *hash, const char *name, const void *data,
                     size_t len);

/* The path of a file of the candidate's directory (it need not exist). */
int hone_store_path(const hone_store *s, const char *hash, const char *name, char *buf,
                    size_t cap);

/* The candidate's meta.json text (malloc'd; caller frees). */
int hone_store_read_meta(const hone_store *s, const char *hash, char **out);

const char *hone_store_state_name(hone_store_state st);

/* Writes path atomically: a temp file of its own (path.tmp.<pid>.XXXXXX), fsync, rename over path,
 * fsync of the directory. Concurrent writers of one path (processes or threads) all succeed; the
 * last rename wins, and a reader sees one whole version. */
int hone_store_atomic_write(const char *path, const void *data, size_t len);

#endif
