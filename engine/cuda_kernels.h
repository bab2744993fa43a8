/* The CUDA kernels the engine runs: every slot of engine/slots.h plus the engine's own
 * kv_store, read from <kernels>/cuda/<name>.cu, compiled by NVRTC for the device (through the
 * cubin cache), loaded with cudaLibraryLoadData (one library per kernel, so one kernel can be
 * replaced alone) and launched by their declared launch configuration. */
#ifndef HONE_CUDA_KERNELS_H
#define HONE_CUDA_KERNELS_H

#include <stdint.h>

#include "cuda_nvrtc.h"
#include "slots.h"

/* Kernel ids: the slot ids below HONE_SLOT_FUSED_FIRST (the fused slots have no CUDA kernel:
 * the backend runs their unfused sequence), then the engine's kernels that are not slots. */
enum { HONE_CUDA_KV_STORE = HONE_SLOT_FUSED_FIRST, HONE_CUDA_KERNEL_COUNT };

/* "matvec_f16", ..., "kv_store": the file kernels/cuda/<name>.cu and entry hone_cuda_<name>. */
const char *hone_cuda_kernels_name(int k);

/* The CUDA kernels directory: $HONE_KERNELS_DIR/cuda when set, else
 * HONE_SOURCE_DIR/kernels/cuda (HONE_KERNELS_DIR names the kernels/ root that holds cpu/ and
 * cuda/, the directory the review commits to). */
int hone_cuda_kernels_dir(char *buf, int cap);

/* Reads a whole text file into a malloc'd NUL-terminated string. */
int hone_cuda_kernels_read_file(char **out, const char *path);

/* Compiles every kernel of dir for architecture sm into the cubin cache without loading any:
 * NVRTC only, no GPU and no CUDA context, so a parent process can prepare what a child that
 * may not write files (candidates/worker.h) then loads from the cache with
 * hone_cuda_kernels_new. The error names the kernel that failed. HONE_EUNSUPPORTED in a build
 * without NVRTC. */
int hone_cuda_kernels_compile(const char *dir, int sm);

typedef struct hone_cuda_kernels hone_cuda_kernels;

#ifdef HONE_HAVE_CUDA
#include <cuda_runtime_api.h>

/* Compiles (or takes from the cache) and loads every kernel of dir (NULL: the default) for
 * architecture sm on the current device. The error names the kernel that failed. */
int hone_cuda_kernels_new(hone_cuda_kernels **out, int sm, const char *dir);
void hone_cuda_kernels_free(hone_cuda_kernels *ks);

const hone_cuda_launch *hone_cuda_kernels_launch_cfg(const hone_cuda_kernels *ks, int k);
/* How many kernels came from the cubin cache (the rest were compiled). */
int hone_cuda_kernels_n_cached(const hone_cuda_kernels *ks);

/* Launches kernel k over items_x x items_y work items (the slot's axes, kernels/cuda/README.md)
 * with the kernel's declared block and items per block, args as for cudaLaunchKernel. Nothing
 * is launched for an empty range. Safe inside stream capture. */
int hone_cuda_kernels_launch(const hone_cuda_kernels *ks, int k, int64_t items_x, int64_t items_y,
                             void **args, cudaStream_t stream);
#endif

#endif
