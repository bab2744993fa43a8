/* CUDA plumbing shared by the CUDA backend, the kernel loader, the tests and (later) the
 * profiler and the candidate compiler: one macro family that turns a failed CUDA runtime,
 * NVRTC or cuBLAS call into a hone error (the expression, file, line and the library's own
 * message), and device discovery that never crashes where there is no driver or no GPU.
 * The binary links cudart, NVRTC and cuBLAS, never libcuda: cudart loads the driver lazily,
 * so the same binary starts and serves on the CPU of a machine without one. */
#ifndef HONE_CUDA_H
#define HONE_CUDA_H

#include <stdint.h>

typedef struct {
    int ordinal;
    char name[256];
    int sm;               /* compute capability major * 10 + minor, e.g. 90 */
    int n_sms;
    int64_t total_mem;    /* bytes */
    double peak_gbps;     /* DRAM peak: 2 x memory clock x bus width (0 if not reported) */
} hone_cuda_device;

/* *out_count = the number of usable CUDA devices. Without a driver, without a device, or in a
 * build without CUDA it is 0 and `why` says why (returns 0 all the same: no GPU is not an
 * error). Example: "no CUDA driver (CUDA driver version is insufficient for CUDA runtime
 * version)". */
int hone_cuda_probe(int *out_count, char *why, int cap);

/* Fills *out for device `ordinal`; HONE_EUNSUPPORTED in a build without CUDA. */
int hone_cuda_device_get(hone_cuda_device *out, int ordinal);

#ifdef HONE_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>

/* The macro family: each evaluates a call once and returns 0, or records
 * "<expr> failed at <file>:<line>: <library message>" and returns a negative HONE_E* code
 * (HONE_ENOMEM for allocation failures, HONE_EUNSUPPORTED for a missing driver or device,
 * HONE_EINTERNAL otherwise). Usage: `if ((rc = HONE_CUDART(cudaMalloc(&p, n)))) goto done;` */
#define HONE_CUDART(expr) hone_cuda_check_rt((expr), #expr, __FILE__, __LINE__)
#define HONE_NVRTC(expr) hone_cuda_check_nvrtc((expr), #expr, __FILE__, __LINE__)
#define HONE_CUBLAS(expr) hone_cuda_check_cublas((expr), #expr, __FILE__, __LINE__)

int hone_cuda_check_rt(cudaError_t e, const char *expr, const char *file, int line);
int hone_cuda_check_nvrtc(nvrtcResult e, const char *expr, const char *file, int line);
int hone_cuda_check_cublas(cublasStatus_t e, const char *expr, const char *file, int line);

/* Whether HONE_CUDA_SYNC is set (and not "0"): a debugging mode in which the caller checks
 * every launch with hone_cuda_sync_check, so an asynchronous fault (an illegal address, a
 * launch failure) is reported at the kernel that caused it rather than at the next copy. */
int hone_cuda_sync_enabled(void);

/* After a launch on `stream` (not capturing): the launch error, then the stream's completion,
 * each as a hone error whose expression names `what` (e.g. "hone_cuda_rmsnorm over 1 x 1
 * items"); 0 when both are fine or the stream is capturing (it cannot be synchronised).
 * Usage: `if (sync && (rc = hone_cuda_sync_check(s, what, __FILE__, __LINE__))) ...` */
int hone_cuda_sync_check(cudaStream_t stream, const char *what, const char *file, int line);
#endif

#endif
