/* Compiling candidates at run time: CPU candidates with the system C compiler to a shared
 * object, CUDA candidates with NVRTC (loaded on demand with dlopen, so no GPU, driver or link
 * dependency is needed) to cubins for sm_80 and sm_90 plus PTX for the guard's scan.
 * The compiler's output is returned so the store can keep it for the agent's next prompt. */
#ifndef HONE_COMPILE_H
#define HONE_COMPILE_H

#include <stddef.h>

#include "engine/cuda_nvrtc.h"

/* The flags every CPU candidate is compiled with (recorded in the evidence). For the object
 * verifier (verify.h): -fno-jump-tables makes a switch compares and direct branches, so every
 * register-indirect jump can be refused (a jump table's `jmp *%rax` looks like a
 * function-pointer tail call); -z now binds the GOT at load time, under RELRO, so the code
 * cannot rewrite its own PLT slots. */
#define HONE_COMPILE_CPU_FLAGS \
    "-std=c11 -O3 -march=native -fno-jump-tables -fPIC -shared -nostartfiles -Wl,-z,now -Wall -Wextra"

/* cc (or $HONE_CC) HONE_COMPILE_CPU_FLAGS -I<src_root> -o so_path src_path.
 * On return *out_log holds the compiler's stdout+stderr (malloc'd, possibly empty) and cmd the
 * command line. 0 when the compiler succeeded; HONE_EFORMAT (with the log) when it failed;
 * HONE_EIO when it could not be run; it is killed after timeout_s seconds. */
int hone_compile_cpu(char **out_log, char *cmd, size_t cmd_cap, const char *src_path,
                     const char *so_path, const char *src_root, double timeout_s);

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
