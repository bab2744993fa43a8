/* Compiling candidates at run time: CPU candidates with the system C compiler to a shared
 * object, CUDA candidates with NVRTC (loaded on demand with dlopen, so no GPU, driver or link
 * dependency is needed) to cubins for sm_80 and sm_90 plus PTX for the guard's scan.
 * The compiler's output is returned so the store can keep it for the agent's next prompt. */
#ifndef HONE_COMPILE_H
#define HONE_COMPILE_H

#include <stddef.h>

#include "engine/cuda_nvrtc.h"

/* The one CPU compile path: the guard (into the store), the kernel loader (into its cache) and
 * the tuner all compile a CPU kernel here, so what is served is the build that was vetted.
 * The flags are the engine's own for its kernels (so a copy of a baseline gives the baseline's
 * bits) plus -nostartfiles (no crt objects: no load-time code for the guard's ELF scan) and the
 * warnings the agent reads; they are recorded in the evidence. For the object verifier
 * (verify.h): -fno-jump-tables makes a switch compares and direct branches, so every
 * register-indirect jump can be refused (a jump table's `jmp *%rax` looks like a
 * function-pointer tail call); -z now binds the GOT at load time, under RELRO, so the code
 * cannot rewrite its own PLT slots. */
#define HONE_COMPILE_CPU_FLAGS                                                                     \
    "-std=c11 -O3 -march=native -D_GNU_SOURCE -fno-jump-tables -fPIC -shared -nostartfiles "     \
    "-Wl,-z,now -Wall -Wextra"

/* The include root's headers a CPU kernel may include, NULL-ended: the guard's scan allows
 * exactly these as "..." includes (guard/scan.c), and the cache key hashes their text. */
extern const char *const hone_compile_cpu_root_headers[];

/* The largest object accepted: the file, every section (.bss included) and the loaded sections
 * together. A kernel is a few KiB; a 256 MiB table is not a kernel. */
#define HONE_COMPILE_CPU_MAX_BYTES ((size_t)16 << 20)

typedef struct {
    const char *src_root;   /* the one include root: -I<src_root> (the engine's sources, whose
                               kernels/cpu/common.h kernels include); NULL: HONE_SOURCE_DIR */
    double timeout_s;       /* the compiler's process group is killed after it; <= 0: 60 s */
    size_t max_bytes;       /* the size cap; 0: HONE_COMPILE_CPU_MAX_BYTES */
    const int *cancel;      /* non-NULL: the compiler's group is killed once *cancel is nonzero
                               (polled every 100 ms); the compile then fails with HONE_ECANCELED */
} hone_compile_cpu_opts;

#define HONE_COMPILE_CPU_OPTS_INIT {.src_root = NULL, .timeout_s = 60.0, .max_bytes = 0}

/* What a CPU compile produced. log is owned: hone_compile_cpu_result_clear frees it. */
typedef struct {
    char key[65];           /* SHA-256 over the source bytes, HONE_COMPILE_CPU_FLAGS, the include
                               root and hone_compile_cpu_root_headers' text in it, the
                               compiler's name and the first line of its --version: the cache
                               key */
    char so_hash[65];       /* SHA-256 of the object's bytes (what the evidence records) */
    size_t so_bytes;        /* the object's size */
    int cached;             /* 1: an object under this key was already there (not recompiled) */
    char cmd[4600];         /* the command line as run */
    char *log;              /* the compiler's stdout + stderr (malloc'd; NULL when reused) */
} hone_compile_cpu_result;

void hone_compile_cpu_result_clear(hone_compile_cpu_result *r);

/* Compiles the C file src_path with $HONE_CC (else cc) and HONE_COMPILE_CPU_FLAGS into so_path.
 * The source bytes are read once, copied under a fixed name into a private directory beside
 * so_path, compiled there (posix_spawn, no shell; its own process group, killed after the
 * timeout), checked against the size cap, hashed, and only then renamed onto so_path: so_path
 * is never a partial object, two processes compiling the same source at once both succeed, and a
 * refused object leaves nothing behind. The same source, flags and compiler give the same bytes
 * wherever src_path and so_path are.
 * 0 on success; HONE_EFORMAT when the candidate is at fault (compile error, timeout, size cap;
 * out->log has the compiler's output); HONE_EIO when the compiler cannot be run.
 * Example: hone_compile_cpu(&r, "cand/source.c", "cand/candidate.so", NULL); ...;
 *          hone_compile_cpu_result_clear(&r); */
int hone_compile_cpu(hone_compile_cpu_result *out, const char *src_path, const char *so_path,
                     const hone_compile_cpu_opts *opts);

/* The same into a cache: so_path becomes cache_dir/<name>-<key prefix>.so (cache_dir is created;
 * <name> is src_path's base name up to the first '.'), compiled only when it is not there yet;
 * an object found there is hashed and size-checked again (out->cached = 1). */
int hone_compile_cpu_cached(hone_compile_cpu_result *out, char *so_path, size_t cap,
                            const char *src_path, const char *cache_dir,
                            const hone_compile_cpu_opts *opts);

/* The SHA-256 of a file's bytes (e.g. an object to compare with evidence). */
int hone_compile_file_hash(char out[65], const char *path);

/* The CPU compiler hone_compile_cpu runs, as "<name>: <first line of its --version>"
 * ("cc: gcc (Debian 12.2.0-14) 12.2.0"): what the evidence records as the compiler. 0, or
 * HONE_EIO when it cannot be run. */
int hone_compile_cpu_compiler(char *out, size_t cap);

/* The NVRTC options of every CUDA candidate, besides the architecture: the engine's own, so
 * the compile gate compiles what the engine would run. */
#define HONE_COMPILE_CUDA_FLAGS HONE_CUDA_NVRTC_FLAGS

/* NVRTC available in this process? (dlopen of libnvrtc succeeded). why: the reason if not. */
int hone_compile_nvrtc_available(char *why, size_t cap);

/* Compiles CUDA source for arch ("sm_80", "sm_90": a cubin; "compute_80": PTX text).
 * header: the text of kernels/cuda/common.cuh, which src may then include as "common.cuh"
 * (NULL: none). *out (malloc'd) is the cubin or the NUL-terminated PTX, *out_n its size;
 * *out_log the NVRTC log (malloc'd). HONE_EFORMAT when NVRTC reports a compile error (log says
 * why), HONE_EUNSUPPORTED when NVRTC cannot be loaded. */
int hone_compile_cuda(void **out, size_t *out_n, char **out_log, const char *src,
                      const char *name, const char *arch, const char *header);

#endif
