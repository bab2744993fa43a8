/* Serving approved kernels: `--kernels DIR` replaces a CPU baseline with DIR/cpu/<slot>.c when
 * that file differs from the shipped one. Each such file is compiled through the one CPU compile
 * path (candidates/compile.h: $HONE_CC, HONE_COMPILE_CPU_FLAGS; cached by its content key), its
 * object's SHA-256 matched with candidate.so_hash of DIR/cpu/<slot>.evidence.json when that file
 * is there (the review commit puts it beside the kernel: served = vetted), loaded, checked
 * against the baseline on random inputs of the model's shapes, and only then installed in the
 * slot table. A kernel that does not compile, load or pass the check is refused with one log line
 * and the baseline keeps serving: a bad kernels directory never stops the engine. */
#ifndef HONE_KERNEL_LOADER_H
#define HONE_KERNEL_LOADER_H

#include <stddef.h>

#include "engine/model.h"
#include "engine/slots.h"

typedef struct {
    const char *kernels_dir;   /* DIR: DIR/cpu/<slot>.c (a kernels repository's kernels/) */
    const char *source_dir;    /* the engine's sources: shipped baselines (kernels/cpu/<slot>.c)
                                  and the include root; NULL: HONE_SOURCE_DIR */
    const char *cache_dir;     /* compiled objects; NULL: $HONE_KERNEL_CACHE, else
                                  $XDG_CACHE_HOME/hone/kernels, $HOME/.cache/hone/kernels, or
                                  /tmp/hone-kernels-<uid> */
    const hone_model *model;   /* the self-check uses its shapes; NULL: small default shapes */
    int quiet;                 /* 1: no log lines on stderr */
    int exact;                 /* 1: the self-check demands the baseline's bits, not a tolerance */
} hone_kernel_loader_opts;

#define HONE_KERNEL_LOADER_OPTS_INIT {.kernels_dir = NULL, .model = NULL, .quiet = 0, .exact = 0}

typedef enum {
    HONE_KERNEL_BASELINE = 0,  /* no file, or the same bytes as the shipped baseline */
    HONE_KERNEL_INSTALLED = 1, /* compiled, checked and installed in the slot table */
    HONE_KERNEL_REFUSED = 2    /* did not compile, match its evidence's object hash, load or
                                  pass the self-check */
} hone_kernel_state;

/* The loaded shared objects (owned) and what happened to every slot. */
typedef struct hone_kernel_loader hone_kernel_loader;

/* Installs into t every approved kernel of opts->kernels_dir that differs from its baseline and
 * passes; refuses the rest (one line on stderr each, unless quiet). Fails only when the directory
 * cannot be read or memory runs out; t is then unchanged. The installed functions live in the
 * loader's shared objects: free the loader only once t no longer calls them.
 * Example: hone_kernel_loader_new(&kl, hone_ctx_slots(ctx), &(hone_kernel_loader_opts){
 *              .kernels_dir = "/srv/kernels/kernels", .model = m}). */
int hone_kernel_loader_new(hone_kernel_loader **out, hone_slot_table *t,
                           const hone_kernel_loader_opts *opts);
void hone_kernel_loader_free(hone_kernel_loader *l);

struct hone_backend;

/* --kernels DIR for a backend (generate, logits, serve, tune): the approved CPU kernels of dir
 * installed in be's slot table as hone_kernel_loader_new does (with m's shapes; quiet: no log
 * lines); *out owns their objects and is freed after the backend. dir NULL: nothing, *out
 * untouched. A backend without a CPU slot table keeps its own kernels (a line on stderr unless
 * quiet). Returns 0 or a negative HONE_E* code. */
int hone_kernel_loader_serve(hone_kernel_loader **out, struct hone_backend *be, const hone_model *m,
                             const char *dir, int quiet);

int hone_kernel_loader_n_installed(const hone_kernel_loader *l);
int hone_kernel_loader_n_refused(const hone_kernel_loader *l);
hone_kernel_state hone_kernel_loader_state(const hone_kernel_loader *l, hone_slot_id id);
/* Why a slot was refused (the compiler's output, the loader's or the check's message), or the
 * shared object an installed slot runs from; "" for a baseline. Borrowed from l. */
const char *hone_kernel_loader_detail(const hone_kernel_loader *l, hone_slot_id id);

/* The CPU kernel file that serves slot: kernels_dir/cpu/<slot>.c when kernels_dir holds a readable
 * one, else the shipped baseline source_dir/kernels/cpu/<slot>.c (source_dir NULL:
 * HONE_SOURCE_DIR), into buf. Returns 1 for the tree's file, 0 for the baseline. (Which file is
 * meant; whether the loader installs it is hone_kernel_loader_state's.) */
int hone_kernel_loader_source(char *buf, size_t cap, const char *kernels_dir, const char *source_dir,
                              const char *slot);

/* Compiles the CPU kernel file src_path through hone_compile_cpu_cached into the loader's cache
 * (reused when already there) and writes the object's path into so_path. On failure the error
 * message holds the compiler's first error line. */
int hone_kernel_loader_compile(char *so_path, size_t cap, const char *src_path,
                               const hone_kernel_loader_opts *opts);

/* Checks fn, a function with slot id's signature, against the baseline on the slot descriptor's
 * shape set for opts->model (its shapes, the reference and edge shapes), inputs made by the
 * descriptor's roles: outputs NaN-free where the baseline's are, within a small relative
 * tolerance of them (opts->exact: bitwise equal to them), and bitwise the same whether the work
 * is split in shares or not.
 * 0 if it passes; else an error saying where it differs. */
int hone_kernel_loader_check(int id, void *fn, const hone_kernel_loader_opts *opts);

#endif
