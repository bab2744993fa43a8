/* The CUDA profiler (CUPTI activity records): kernels named hone_cuda_<slot> are attributed
 * to their slots whether launched eagerly or as nodes of a CUDA graph, other kernels get rows
 * of their own, the slowest slot ranks first, the rows add up to the step time, and the
 * roofline comes from the device. The kernels' times add up to the GPU-side span of the steps
 * (CUDA events on the stream: what the GPU did, not the host's wall time around it, which
 * holds launch and synchronisation latency). Kernels are compiled here with NVRTC (no CUDA backend
 * needed). Exit 77 without NVRTC in the build, without HONE_HAVE_CUDA, or without a device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "harness.h"
#include "profiler/profile.h"

#ifndef HONE_TEST_NVRTC
int main(void)
{
    fprintf(stderr, "skip: built without NVRTC\n");
    return 77;
}
#else

#include <cuda_runtime_api.h>
#include <nvrtc.h>

static const char *kernels_src =
    "extern \"C\" __global__ void hone_cuda_add(float *y, const float *a, const float *b, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a[i] + b[i]; }\n"
    "extern \"C\" __global__ void hone_cuda_rope(float *x, int n, long long spin)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; long long t0 = clock64();\n"
    "  while (clock64() - t0 < spin) {}\n"
    "  if (i < n) x[i] = x[i] * 0.5f; }\n"
    "extern \"C\" __global__ void not_a_slot_kernel(float *x, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }\n";

static cudaKernel_t k_add, k_rope, k_other;
static cudaStream_t stream;
static float *d_a, *d_b, *d_y;
static const int N = 1 << 16;

#define CU(expr)                                                                             \
    do {                                                                                     \
        cudaError_t e_ = (expr);                                                             \
        CHECK_MSG(e_ == cudaSuccess, "%s: %s", #expr, cudaGetErrorString(e_));               \
        if (e_ != cudaSuccess) return -1;                                                    \
    } while (0)

static int setup(void)
{
    int dev = 0, major = 0, minor = 0;
    CU(cudaGetDevice(&dev));
    CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CU(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    nvrtcProgram prog;
    char arch[64];
    snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d", major, minor);
    const char *opts[] = {arch};
    if (nvrtcCreateProgram(&prog, kernels_src, "profile_test.cu", 0, NULL, NULL) != NVRTC_SUCCESS)
        return -1;
    nvrtcResult r = nvrtcCompileProgram(prog, 1, opts);
    if (r != NVRTC_SUCCESS) {
        size_t n = 0;
        nvrtcGetProgramLogSize(prog, &n);
        char *log = malloc(n + 1);
        if (log && nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS) fprintf(stderr, "%s\n", log);
        free(log);
        CHECK_MSG(0, "nvrtc: %s", nvrtcGetErrorString(r));
        return -1;
    }
    size_t size = 0;
    nvrtcGetCUBINSize(prog, &size);
    char *cubin = malloc(size);
    nvrtcGetCUBIN(prog, cubin);
    nvrtcDestroyProgram(&prog);
    cudaLibrary_t lib;
    CU(cudaLibraryLoadData(&lib, cubin, NULL, NULL, 0, NULL, NULL, 0));
    free(cubin);
    CU(cudaLibraryGetKernel(&k_add, lib, "hone_cuda_add"));
    CU(cudaLibraryGetKernel(&k_rope, lib, "hone_cuda_rope"));
    CU(cudaLibraryGetKernel(&k_other, lib, "not_a_slot_kernel"));
    CU(cudaStreamCreate(&stream));
    CU(cudaMalloc((void **)&d_a, N * sizeof(float)));
    CU(cudaMalloc((void **)&d_b, N * sizeof(float)));
    CU(cudaMalloc((void **)&d_y, N * sizeof(float)));
    CU(cudaMemset(d_a, 0, N * sizeof(float)));
    CU(cudaMemset(d_b, 0, N * sizeof(float)));
    return 0;
}

/* adds eager (or captured) launches: n_add adds, n_rope slow ropes, n_other others */
static int launch(int n_add, int n_rope, int n_other)
{
    int n = N;
    long long spin = 2000000; /* ~1 ms at ~2 GHz: rope is the slowest slot */
    dim3 grid = {(unsigned)(N / 256), 1, 1}, block = {256, 1, 1};
    void *add_args[] = {&d_y, &d_a, &d_b, &n};
    void *rope_args[] = {&d_y, &n, &spin};
    void *other_args[] = {&d_y, &n};
    for (int i = 0; i < n_add; i++) CU(cudaLaunchKernel((const void *)k_add, grid, block, add_args, 0, stream));
    for (int i = 0; i < n_rope; i++) CU(cudaLaunchKernel((const void *)k_rope, grid, block, rope_args, 0, stream));
    for (int i = 0; i < n_other; i++) CU(cudaLaunchKernel((const void *)k_other, grid, block, other_args, 0, stream));
    return 0;
}

static const hone_profile_row *find_row(const hone_profile_row *rows, int n, int slot, const char *name)
{
    for (int i = 0; i < n; i++)
        if (rows[i].slot == slot && (!name || strstr(rows[i].name, name))) return &rows[i];
    return NULL;
}

/* Each kernel once, before the profile exists: module loading and first-launch costs stay
 * out of the measured steps (and out of the counts). */
static int warm_up(void)
{
    if (launch(1, 0, 1)) return -1;
    int n = N;
    long long spin = 0;
    dim3 grid = {(unsigned)(N / 256), 1, 1}, block = {256, 1, 1};
    void *rope_args[] = {&d_y, &n, &spin};
    CU(cudaLaunchKernel((const void *)k_rope, grid, block, rope_args, 0, stream));
    CU(cudaStreamSynchronize(stream));
    return 0;
}

static int run_test(hone_profile *prof)
{
    cudaEvent_t ev[4];
    for (int i = 0; i < 4; i++) CU(cudaEventCreate(&ev[i]));
    /* step 1: eager launches */
    hone_profile_step_begin(prof, 1, 0);
    CU(cudaEventRecord(ev[0], stream));
    if (launch(10, 2, 3)) return -1;
    CU(cudaEventRecord(ev[1], stream));
    hone_profile_step_end(prof);
    /* step 2: the same kinds of kernels as graph nodes */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CU(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    if (launch(5, 1, 0)) return -1;
    CU(cudaStreamEndCapture(stream, &graph));
    CU(cudaGraphInstantiate(&exec, graph, 0));
    hone_profile_step_begin(prof, 1, 1);
    CU(cudaEventRecord(ev[2], stream));
    CU(cudaGraphLaunch(exec, stream));
    CU(cudaEventRecord(ev[3], stream));
    hone_profile_step_end(prof);
    float span1 = 0, span2 = 0;
    CU(cudaEventElapsedTime(&span1, ev[0], ev[1]));
    CU(cudaEventElapsedTime(&span2, ev[2], ev[3]));
    double gpu_span = (double)span1 + (double)span2;
    for (int i = 0; i < 4; i++) cudaEventDestroy(ev[i]);

    hone_profile_row rows[64], top[8];
    int n = 0, nt = 0;
    CHECK_EQ_INT(hone_profile_rows(prof, rows, 64, &n), 0);
    const hone_profile_row *add = find_row(rows, n, HONE_SLOT_ADD, NULL);
    const hone_profile_row *rope = find_row(rows, n, HONE_SLOT_ROPE, NULL);
    const hone_profile_row *other = find_row(rows, n, HONE_PROFILE_OTHER_KERNEL, "not_a_slot_kernel");
    CHECK(add && rope && other);
    if (!add || !rope || !other) return -1;
    CHECK_EQ_INT(add->calls, 15);
    CHECK_EQ_INT(add->graph_calls, 5);
    CHECK_EQ_INT(rope->calls, 3);
    CHECK_EQ_INT(rope->graph_calls, 1);
    CHECK_EQ_INT(other->calls, 3);
    CHECK(rope->total_ms > add->total_ms);
    CHECK_EQ_INT(hone_profile_ranking(prof, top, 8, &nt), 0);
    CHECK(nt >= 2 && top[0].slot == HONE_SLOT_ROPE);
    for (int i = 0; i < nt && i < 8; i++) CHECK(top[i].slot >= 0); /* no "other" kernels */
    hone_profile_summary s;
    hone_profile_summary_get(prof, &s);
    /* one stream: the kernels ran one after another inside the span, with only the gaps between
     * launches (a few us each, ~1% of the ~3 ms the ropes spin) left over */
    double kernels = 0;
    for (int i = 0; i < n; i++)
        if (rows[i].slot != HONE_PROFILE_OUTSIDE) kernels += rows[i].total_ms;
    fprintf(stderr, "kernels %.4f ms, GPU span %.4f ms, host wall %.4f ms\n", kernels, gpu_span, s.step_ms);
    CHECK_MSG(kernels >= 0.95 * gpu_span && kernels <= 1.01 * gpu_span + 0.005,
              "kernel time %.4f ms against a GPU span of %.4f ms", kernels, gpu_span);
    CHECK_NEAR(s.slot_ms, kernels, 1e-6 + 1e-9 * kernels);
    CHECK_MSG(s.step_ms >= 0.99 * gpu_span, "host wall %.4f ms < GPU span %.4f ms", s.step_ms, gpu_span);
    CHECK_EQ_INT(s.dropped, 0);
    CHECK_EQ_INT(s.steps, 2);
    CHECK_MSG(s.peak_gbps > 500 && s.peak_gbps < 20000, "peak %g GB/s", s.peak_gbps);
    CHECK_MSG(s.peak_gflops > 1000, "peak %g GFLOP/s", s.peak_gflops);
    hone_profile_print(prof, stderr);
    return 0;
}

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        fprintf(stderr, "skip: no CUDA device\n");
        return 77;
    }
    if (setup() || warm_up()) {
        fprintf(stderr, "%d checks, %d failed\n", harness_checks, harness_failures);
        return 1;
    }
    hone_profile_opts po = HONE_PROFILE_OPTS_INIT;
    po.source = HONE_PROFILE_CUDA;
    hone_profile *prof = NULL;
    int rc = hone_profile_new(&prof, &po);
    if (rc == HONE_EUNSUPPORTED) {
        fprintf(stderr, "skip: %s\n", hone_error_last());
        return 77;
    }
    CHECK_MSG(rc == 0, "hone_profile_new: %s", hone_error_last());
    if (rc == 0) run_test(prof);
    hone_profile_free(prof);
    fprintf(stderr, "%d checks, %d failed\n", harness_checks, harness_failures);
    return harness_failures ? 1 : 0;
}

#endif
