/* Run-time compilation of CUDA kernels: NVRTC turns a kernel file (device code only, plus the
 * shared header common.cuh) into a cubin for one architecture; the declared launch
 * configuration is read from the file; cubins are cached on disk. Needs no GPU (NVRTC is a
 * compiler), so CI compiles every kernel for sm_80 and sm_90 on a CPU-only machine.
 *
 * The launch convention (kernels/cuda/README.md): each kernel file carries one line
 *     // hone-launch: block=B x=X y=Y [smem=S]
 * B threads per block (a multiple of 32, <= 1024); each block covers X items of the slot's
 * x axis and Y items of its y axis (the axes are defined per slot in the README); the grid is
 * (ceil(items_x / X), ceil(items_y / Y)); S bytes of dynamic shared memory (default 0).
 *
 * The cache: $XDG_CACHE_HOME/hone/cubin (or ~/.cache/hone/cubin), one file per key, the key a
 * 128-bit hash of the NVRTC version, the architecture, the options, the kernel's name, source
 * and header. A file holds a magic, its key, the payload size and a payload checksum: a file
 * that fails any check is reported, recompiled and rewritten. Files are written to a temporary
 * name and renamed, so readers never see a partial file. */
#ifndef HONE_CUDA_NVRTC_H
#define HONE_CUDA_NVRTC_H

#include <stddef.h>
#include <string.h>

/* The engine's NVRTC options besides the architecture: IEEE division and square root, no flush
 * to zero, no silent FMA contraction (kernels state every rounding). The candidate compiler
 * (candidates/compile.c) uses them too, so the compile gate compiles what the engine runs. */
#define HONE_CUDA_NVRTC_FLAGS "--std=c++17 --fmad=false --ftz=false --prec-div=true --prec-sqrt=true"

/* Cuts a copy of HONE_CUDA_NVRTC_FLAGS in buf (at least sizeof HONE_CUDA_NVRTC_FLAGS bytes)
 * into up to cap options at opts; returns how many. */
static inline int hone_cuda_nvrtc_flags(const char **opts, int cap, char *buf)
{
    int n = 0;
    char *save = NULL;
    memcpy(buf, HONE_CUDA_NVRTC_FLAGS, sizeof HONE_CUDA_NVRTC_FLAGS);
    for (char *t = strtok_r(buf, " ", &save); t && n < cap; t = strtok_r(NULL, " ", &save)) opts[n++] = t;
    return n;
}

typedef struct {
    int block;  /* threads per block */
    int x, y;   /* items per block along the slot's x and y axes */
    int smem;   /* dynamic shared memory bytes */
} hone_cuda_launch;

/* Parses the hone-launch line of src. HONE_EFORMAT naming `name` when it is missing, repeated
 * or out of range. Example: "// hone-launch: block=256 x=16 y=1" -> {256, 16, 1, 0}. */
int hone_cuda_nvrtc_parse_launch(hone_cuda_launch *out, const char *src, const char *name);

typedef struct {
    int sm;                /* target architecture: 80 -> --gpu-architecture=sm_80 */
    const char *header;    /* text of common.cuh (made includable as "common.cuh"), or NULL */
    int strict;            /* 1: any compile-log output (a warning) is an error */
    int use_cache;         /* 1: read and write the cubin cache */
    const char *cache_dir; /* NULL: the default directory (hone_cuda_nvrtc_cache_dir) */
} hone_cuda_nvrtc_opts;

#define HONE_CUDA_NVRTC_OPTS_INIT {.sm = 90, .header = NULL, .strict = 0, .use_cache = 1, .cache_dir = NULL}

typedef struct {
    void *cubin;
    size_t size;
    int from_cache;     /* 1: read from the cache, not compiled */
    int cache_rejected; /* 1: a cache file existed but failed its checks (then recompiled) */
    char *log;          /* the NVRTC log ("" when read from the cache) */
} hone_cuda_cubin;

/* Compiles src (the file `name`, e.g. "matvec_f16.cu") for o->sm with the engine's options
 * (--fmad=false, C++17, -default-device off). On a compile error the message holds the log. */
int hone_cuda_nvrtc_compile(hone_cuda_cubin *out, const char *name, const char *src,
                            const hone_cuda_nvrtc_opts *o);
void hone_cuda_cubin_free(hone_cuda_cubin *c);

/* 1 if the ELF cubin defines a function symbol `sym`, 0 if not, HONE_EFORMAT if it is not a
 * well-formed ELF64 file. */
int hone_cuda_nvrtc_has_symbol(const void *cubin, size_t size, const char *sym);

/* The cache directory (created on demand by compile); HONE_ERANGE if it does not fit. */
int hone_cuda_nvrtc_cache_dir(char *buf, size_t cap);
/* The cache file compile uses for (name, src, o): for tests and tools. */
int hone_cuda_nvrtc_cache_path(char *buf, size_t cap, const char *name, const char *src,
                               const hone_cuda_nvrtc_opts *o);

#endif
