/* Loading and launching the engine's CUDA kernels (engine/cuda_kernels.h). */
#include "cuda_kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "file.h"

const char *hone_cuda_kernels_name(int k)
{
    if (k >= 0 && k < HONE_SLOT_FUSED_FIRST) return hone_slots_name((hone_slot_id)k);
    if (k == HONE_CUDA_KV_STORE) return "kv_store";
    return NULL;
}

int hone_cuda_kernels_dir(char *buf, int cap)
{
    const char *env = getenv("HONE_KERNELS_DIR");
    int n = env && *env ? snprintf(buf, (size_t)cap, "%s/cuda", env)
                        : snprintf(buf, (size_t)cap, "%s/kernels/cuda", HONE_SOURCE_DIR);
    if (n < 0 || n >= cap) return hone_error_set(HONE_ERANGE, "kernels directory path too long");
    return 0;
}

int hone_cuda_kernels_read_file(char **out, const char *path)
{
    return hone_file_read(path, out, NULL);
}

/* The text of dir/common.cuh (malloc'd). */
static int read_header(char **out, const char *dir)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/common.cuh", dir);
    return hone_cuda_kernels_read_file(out, path);
}

/* Reads kernel k of dir, parses its launch line into *cfg and compiles it for o->sm (through
 * the cubin cache) into *cub. */
static int compile_kernel(hone_cuda_cubin *cub, hone_cuda_launch *cfg, const char *dir, int k,
                          const hone_cuda_nvrtc_opts *o)
{
    char file[128], path[4400];
    char *src = NULL;
    snprintf(file, sizeof file, "%s.cu", hone_cuda_kernels_name(k));
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int rc = hone_cuda_kernels_read_file(&src, path);
    if (!rc) rc = hone_cuda_nvrtc_parse_launch(cfg, src, file);
    if (!rc) rc = hone_cuda_nvrtc_compile(cub, file, src, o);
    free(src);
    return rc;
}

int hone_cuda_kernels_compile(const char *dir, int sm)
{
    char *header = NULL;
    int rc = read_header(&header, dir);
    hone_cuda_nvrtc_opts o = HONE_CUDA_NVRTC_OPTS_INIT;
    o.sm = sm;
    o.header = header;
    for (int k = 0; k < HONE_CUDA_KERNEL_COUNT && !rc; k++) {
        hone_cuda_cubin cub = {0};
        hone_cuda_launch cfg;
        rc = compile_kernel(&cub, &cfg, dir, k, &o);
        hone_cuda_cubin_free(&cub);
    }
    free(header);
    return rc;
}

#ifdef HONE_HAVE_CUDA

#include "cuda.h"

struct hone_cuda_kernels {
    cudaLibrary_t lib[HONE_CUDA_KERNEL_COUNT];
    cudaKernel_t fn[HONE_CUDA_KERNEL_COUNT];
    hone_cuda_launch cfg[HONE_CUDA_KERNEL_COUNT];
    int n_cached;
};

int hone_cuda_kernels_new(hone_cuda_kernels **out, int sm, const char *dir)
{
    int rc;
    char dbuf[4096], sym[128];
    char *header = NULL;
    hone_cuda_cubin cub = {0};
    *out = NULL;
    if (!dir) {
        if ((rc = hone_cuda_kernels_dir(dbuf, sizeof dbuf))) return rc;
        dir = dbuf;
    }
    hone_cuda_kernels *ks = calloc(1, sizeof *ks);
    if (!ks) return hone_error_set(HONE_ENOMEM, "out of memory");
    if ((rc = read_header(&header, dir))) goto done;
    hone_cuda_nvrtc_opts o = HONE_CUDA_NVRTC_OPTS_INIT;
    o.sm = sm;
    o.header = header;
    for (int k = 0; k < HONE_CUDA_KERNEL_COUNT; k++) {
        const char *name = hone_cuda_kernels_name(k);
        char file[128];
        snprintf(file, sizeof file, "%s.cu", name);
        if ((rc = compile_kernel(&cub, &ks->cfg[k], dir, k, &o))) goto done;
        ks->n_cached += cub.from_cache;
        if ((rc = HONE_CUDART(cudaLibraryLoadData(&ks->lib[k], cub.cubin, NULL, NULL, 0, NULL, NULL, 0))))
            goto done;
        snprintf(sym, sizeof sym, "hone_cuda_%s", name);
        if ((rc = HONE_CUDART(cudaLibraryGetKernel(&ks->fn[k], ks->lib[k], sym)))) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", hone_error_last());
            rc = hone_error_set(rc, "%s: entry point %s not found: %s", file, sym, msg);
            goto done;
        }
        /* loads the kernel now (not lazily at a first launch, which may be inside a graph
         * capture) and checks the declared block against what the compiled kernel allows */
        struct cudaFuncAttributes attr;
        if ((rc = HONE_CUDART(cudaFuncGetAttributes(&attr, (const void *)ks->fn[k])))) goto done;
        if (attr.maxThreadsPerBlock < ks->cfg[k].block) {
            rc = hone_error_set(HONE_EFORMAT, "%s: hone-launch block=%d but the kernel allows at most %d "
                                "threads per block (__launch_bounds__ or registers)", file, ks->cfg[k].block,
                                attr.maxThreadsPerBlock);
            goto done;
        }
        if (ks->cfg[k].smem > 48 * 1024 &&
            (rc = HONE_CUDART(cudaFuncSetAttribute((const void *)ks->fn[k],
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   ks->cfg[k].smem))))
            goto done;
        hone_cuda_cubin_free(&cub);
    }
    *out = ks;
    ks = NULL;
done:
    hone_cuda_cubin_free(&cub);
    free(header);
    hone_cuda_kernels_free(ks);
    return rc;
}

void hone_cuda_kernels_free(hone_cuda_kernels *ks)
{
    if (!ks) return;
    for (int k = 0; k < HONE_CUDA_KERNEL_COUNT; k++)
        if (ks->lib[k]) cudaLibraryUnload(ks->lib[k]);
    free(ks);
}

const hone_cuda_launch *hone_cuda_kernels_launch_cfg(const hone_cuda_kernels *ks, int k)
{
    return &ks->cfg[k];
}

int hone_cuda_kernels_n_cached(const hone_cuda_kernels *ks) { return ks->n_cached; }

int hone_cuda_kernels_launch(const hone_cuda_kernels *ks, int k, int64_t items_x, int64_t items_y,
                             void **args, cudaStream_t stream)
{
    const hone_cuda_launch *c = &ks->cfg[k];
    if (items_x <= 0 || items_y <= 0) return 0;
    int64_t gx = (items_x + c->x - 1) / c->x, gy = (items_y + c->y - 1) / c->y;
    if (gx > 0x7fffffff || gy > 65535)
        return hone_error_set(HONE_ERANGE, "%s: grid %lld x %lld out of range",
                              hone_cuda_kernels_name(k), (long long)gx, (long long)gy);
    dim3 grid = {(unsigned)gx, (unsigned)gy, 1}, block = {(unsigned)c->block, 1, 1};
    return HONE_CUDART(cudaLaunchKernel((const void *)ks->fn[k], grid, block, args, (size_t)c->smem, stream));
}

#endif
