/* The guard's static checks of a candidate before any of its code runs: the source (CPU: a
 * whitelist of headers, then the preprocessed tokens: no asm, no system calls, threads,
 * clocks, allocation or process control; CUDA: no printf, clock/clock64/globaltimer reads,
 * device malloc/new, asm, and no #include but "common.cuh", the kernels' own header), the
 * compiled shared object (the object verifier, candidates/verify.h: allowed instructions
 * only, no writable data, no load-time code, imports from a whitelist, the slot's symbol
 * defined) and, for CUDA, the PTX. Each finding is a reason text naming what was found. */
#ifndef HONE_SCAN_H
#define HONE_SCAN_H

#include <stddef.h>

/* 0 if the C source passes; otherwise HONE_EINVAL and why[] says what was found first
 * ("line 3: forbidden identifier 'fopen' (files)", "line 1: header <stdio.h> not allowed").
 * The #include and other directive lines are read in src itself (headers on the whitelist,
 * no #include after a #define, no line markers, trigraphs or %: digraphs); the identifiers
 * are read after `cc -E` with the guard's compile flags (HONE_COMPILE_CPU_FLAGS,
 * -I include_root), in the lines the candidate's own file contributes, so token pasting and
 * macros cannot hide a name. HONE_EIO when the preprocessor cannot be run. */
int hone_scan_c_source(const char *src, const char *include_root, char *why, size_t cap);

/* 0 if the shared object at path passes the object verifier (hone_verify_object with
 * HONE_VERIFY_OPTS_INIT); otherwise HONE_EINVAL (or HONE_EFORMAT for a file that is not a
 * 64-bit ELF) with why[] its reason, or the verifier's own error code when it could not run.
 * symbol: the function the slot needs ("hone_cpu_swiglu"). */
int hone_scan_elf(const char *path, const char *symbol, char *why, size_t cap);

/* CUDA source and (when given) its PTX. */
int hone_scan_cuda_source(const char *src, char *why, size_t cap);
int hone_scan_ptx(const char *ptx, char *why, size_t cap);

#endif
