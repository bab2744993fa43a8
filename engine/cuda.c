/* CUDA error macros and device discovery (engine/cuda.h). Without HONE_HAVE_CUDA only the
 * discovery functions exist, reporting that the build has no CUDA. */
#include "cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#ifdef HONE_HAVE_CUDA

static int rt_code(cudaError_t e)
{
    switch (e) {
    case cudaErrorMemoryAllocation: return HONE_ENOMEM;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion: return HONE_EUNSUPPORTED;
    default: return HONE_EINTERNAL;
    }
}

int hone_cuda_check_rt(cudaError_t e, const char *expr, const char *file, int line)
{
    if (e == cudaSuccess) return 0;
    char msg[256];
    snprintf(msg, sizeof msg, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    return hone_error_lib(rt_code(e), "CUDA runtime", msg, expr, file, line);
}

int hone_cuda_check_nvrtc(nvrtcResult e, const char *expr, const char *file, int line)
{
    if (e == NVRTC_SUCCESS) return 0;
    return hone_error_lib(e == NVRTC_ERROR_OUT_OF_MEMORY ? HONE_ENOMEM : HONE_EINTERNAL, "NVRTC",
                          nvrtcGetErrorString(e), expr, file, line);
}

static const char *cublas_message(cublasStatus_t e)
{
    switch (e) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "cuBLAS not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "cuBLAS allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_MAPPING_ERROR: return "mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "license error";
    default: return "unknown cuBLAS status";
    }
}

int hone_cuda_check_cublas(cublasStatus_t e, const char *expr, const char *file, int line)
{
    if (e == CUBLAS_STATUS_SUCCESS) return 0;
    char msg[160];
    snprintf(msg, sizeof msg, "%s (status %d)", cublas_message(e), (int)e);
    return hone_error_lib(e == CUBLAS_STATUS_ALLOC_FAILED ? HONE_ENOMEM : HONE_EINTERNAL, "cuBLAS",
                          msg, expr, file, line);
}

int hone_cuda_sync_enabled(void)
{
    const char *v = getenv("HONE_CUDA_SYNC");
    return v && *v && strcmp(v, "0") != 0;
}

int hone_cuda_sync_check(cudaStream_t stream, const char *what, const char *file, int line)
{
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    char expr[256];
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess && cudaStreamIsCapturing(stream, &cap) == cudaSuccess && cap != cudaStreamCaptureStatusNone)
        return 0; /* a capturing stream cannot be synchronised (the backend turns graphs off) */
    if (e == cudaSuccess) {
        e = cudaStreamSynchronize(stream);
        snprintf(expr, sizeof expr, "%s (HONE_CUDA_SYNC: synchronised after the launch)", what);
    } else {
        snprintf(expr, sizeof expr, "launch of %s (HONE_CUDA_SYNC)", what);
    }
    return hone_cuda_check_rt(e, expr, file, line);
}

int hone_cuda_probe(int *out_count, char *why, int cap)
{
    int n = 0;
    *out_count = 0;
    if (cap > 0) why[0] = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        /* no driver, no device, or a driver older than the runtime: no GPU, not an error */
        if (cap > 0) snprintf(why, (size_t)cap, "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        (void)cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
        return 0;
    }
    if (n <= 0) {
        if (cap > 0) snprintf(why, (size_t)cap, "no CUDA device");
        return 0;
    }
    *out_count = n;
    return 0;
}

int hone_cuda_device_get(hone_cuda_device *out, int ordinal)
{
    int rc, major = 0, minor = 0, sms = 0, clock_khz = 0, bus_bits = 0;
    memset(out, 0, sizeof *out);
    struct cudaDeviceProp prop;
    if ((rc = HONE_CUDART(cudaGetDeviceProperties(&prop, ordinal)))) return rc;
    if ((rc = HONE_CUDART(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ordinal))) ||
        (rc = HONE_CUDART(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ordinal))) ||
        (rc = HONE_CUDART(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ordinal))))
        return rc;
    /* optional: some devices report 0 */
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, ordinal) != cudaSuccess ||
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, ordinal) != cudaSuccess) {
        (void)cudaGetLastError();
        clock_khz = bus_bits = 0;
    }
    out->ordinal = ordinal;
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    out->sm = major * 10 + minor;
    out->n_sms = sms;
    out->total_mem = (int64_t)prop.totalGlobalMem;
    out->peak_gbps = 2.0 * (double)clock_khz * 1e3 * (double)(bus_bits / 8) / 1e9;
    return 0;
}

#else /* !HONE_HAVE_CUDA */

int hone_cuda_probe(int *out_count, char *why, int cap)
{
    *out_count = 0;
    if (cap > 0) snprintf(why, (size_t)cap, "this build has no CUDA support");
    return 0;
}

int hone_cuda_device_get(hone_cuda_device *out, int ordinal)
{
    memset(out, 0, sizeof *out);
    (void)ordinal;
    return hone_error_set(HONE_EUNSUPPORTED, "this build has no CUDA support");
}

#endif
