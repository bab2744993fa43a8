/* Every CUDA kernel compiles with NVRTC for sm_80 and sm_90 without a single warning, declares
 * its launch configuration and defines its entry point hone_cuda_<name>; and the cubin cache
 * hits, detects corrupt files and rebuilds them. Runs without a GPU (NVRTC is a compiler). */
#include "harness.h"

#ifndef HONE_HAVE_CUDA
int main(void)
{
    fprintf(stderr, "skipped: this build has no CUDA toolkit\n");
    return 77;
}
#else

#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/cuda_kernels.h"
#include "engine/cuda_nvrtc.h"
#include "engine/error.h"

static char kdir[4096];
static char *header;

static void load_header(void)
{
    if (header) return;
    char path[4200];
    snprintf(path, sizeof path, "%s/common.cuh", kdir);
    CHECK_MSG(hone_cuda_kernels_read_file(&header, path) == 0, "%s", hone_error_last());
}

static int is_known_kernel(const char *base)
{
    for (int k = 0; k < HONE_CUDA_KERNEL_COUNT; k++)
        if (!strcmp(base, hone_cuda_kernels_name(k))) return 1;
    return 0;
}

static void test_every_kernel_has_a_file(void)
{
    for (int k = 0; k < HONE_CUDA_KERNEL_COUNT; k++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s.cu", kdir, hone_cuda_kernels_name(k));
        CHECK_MSG(access(path, R_OK) == 0, "missing %s", path);
    }
}

/* Every *.cu of the directory: strict compile (an empty log) for both architectures, a valid
 * launch line, the entry point in the cubin, and a name the engine knows. */
static void test_every_file_compiles_strictly(void)
{
    load_header();
    DIR *d = opendir(kdir);
    CHECK_MSG(d != NULL, "cannot open %s", kdir);
    if (!d || !header) return;
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".cu")) continue;
        char base[256], path[4400], sym[300];
        snprintf(base, sizeof base, "%.*s", (int)(len - 3), e->d_name);
        snprintf(path, sizeof path, "%s/%s", kdir, e->d_name);
        CHECK_MSG(is_known_kernel(base), "%s is neither a slot nor an engine kernel", e->d_name);
        char *src = NULL;
        if (hone_cuda_kernels_read_file(&src, path)) { CHECK_MSG(0, "%s", hone_error_last()); continue; }
        files++;
        hone_cuda_launch cfg;
        int rc = hone_cuda_nvrtc_parse_launch(&cfg, src, e->d_name);
        CHECK_MSG(rc == 0, "%s", hone_error_last());
        CHECK_MSG(strstr(src, "extern \"C\" __global__") != NULL, "%s: no extern \"C\" __global__ entry", e->d_name);
        /* device code only: nothing but common.cuh may be included */
        for (const char *p = strstr(src, "#include"); p; p = strstr(p + 1, "#include"))
            CHECK_MSG(!strncmp(p, "#include \"common.cuh\"", 21), "%s includes something else", e->d_name);
        snprintf(sym, sizeof sym, "hone_cuda_%s", base);
        static const int archs[] = {80, 90};
        for (int a = 0; a < 2; a++) {
            hone_cuda_nvrtc_opts o = HONE_CUDA_NVRTC_OPTS_INIT;
            o.sm = archs[a];
            o.header = header;
            o.strict = 1;
            o.use_cache = 0;
            hone_cuda_cubin c;
            rc = hone_cuda_nvrtc_compile(&c, e->d_name, src, &o);
            CHECK_MSG(rc == 0, "sm_%d: %s", archs[a], hone_error_last());
            if (rc) continue;
            CHECK(c.from_cache == 0);
            CHECK_MSG(c.log && c.log[0] == 0, "%s sm_%d log: %s", e->d_name, archs[a], c.log);
            CHECK_MSG(hone_cuda_nvrtc_has_symbol(c.cubin, c.size, sym) == 1, "%s sm_%d: no %s in the cubin",
                      e->d_name, archs[a], sym);
            CHECK(hone_cuda_nvrtc_has_symbol(c.cubin, c.size, "hone_cuda_no_such_kernel") == 0);
            hone_cuda_cubin_free(&c);
        }
        free(src);
    }
    closedir(d);
    CHECK_MSG(files >= HONE_CUDA_KERNEL_COUNT, "only %d kernel files", files);
}

static void test_launch_line(void)
{
    hone_cuda_launch c;
    CHECK(hone_cuda_nvrtc_parse_launch(&c, "// x\n// hone-launch: block=256 x=16 y=8\n", "a.cu") == 0);
    CHECK(c.block == 256 && c.x == 16 && c.y == 8 && c.smem == 0);
    CHECK(hone_cuda_nvrtc_parse_launch(&c, "// hone-launch: block=64 x=1 y=1 smem=4096", "a.cu") == 0);
    CHECK(c.block == 64 && c.smem == 4096);
    CHECK(hone_cuda_nvrtc_parse_launch(&c, "// nothing here\n", "a.cu") == HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "a.cu");
    CHECK(hone_cuda_nvrtc_parse_launch(&c, "// hone-launch: block=100 x=1 y=1\n", "a.cu") == HONE_EFORMAT);
    CHECK(hone_cuda_nvrtc_parse_launch(&c, "// hone-launch: block=2048 x=1 y=1\n", "a.cu") == HONE_EFORMAT);
    CHECK(hone_cuda_nvrtc_parse_launch(&c, "// hone-launch: block=128 x=0 y=1\n", "a.cu") == HONE_EFORMAT);
    CHECK(hone_cuda_nvrtc_parse_launch(&c, "// hone-launch: block=128 y=1\n", "a.cu") == HONE_EFORMAT);
    CHECK(hone_cuda_nvrtc_parse_launch(&c, "// hone-launch: block=128 x=1 y=1 threads=3\n", "a.cu") == HONE_EFORMAT);
    CHECK(hone_cuda_nvrtc_parse_launch(&c, "// hone-launch: block=128 x=1 y=1\n// hone-launch: block=64 x=1 y=1\n",
                                       "a.cu") == HONE_EFORMAT);
}

static void test_compile_errors_are_reported(void)
{
    hone_cuda_nvrtc_opts o = HONE_CUDA_NVRTC_OPTS_INIT;
    o.use_cache = 0;
    hone_cuda_cubin c;
    int rc = hone_cuda_nvrtc_compile(&c, "broken.cu", "extern \"C\" __global__ void hone_cuda_add(float *y)\n"
                                     "{ y[0] = undefined_thing; }\n", &o);
    CHECK(rc != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "broken.cu");
    CHECK_STR_CONTAINS(hone_error_last(), "undefined_thing");
    CHECK(c.cubin == NULL);
    /* a warning: an error when strict, accepted otherwise */
    const char *warn = "extern \"C\" __global__ void hone_cuda_add(float *y)\n{ int unused = 3; y[0] = 1.0f; }\n";
    o.strict = 1;
    rc = hone_cuda_nvrtc_compile(&c, "warn.cu", warn, &o);
    CHECK(rc == HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "warn.cu");
    o.strict = 0;
    rc = hone_cuda_nvrtc_compile(&c, "warn.cu", warn, &o);
    CHECK_MSG(rc == 0, "%s", hone_error_last());
    CHECK(c.log && c.log[0] != 0);
    hone_cuda_cubin_free(&c);
}

static long file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

static void test_cubin_cache(void)
{
    load_header();
    char tmpl[] = "/tmp/hone-cubin-test-XXXXXX";
    char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL);
    if (!dir || !header) return;
    char cache[4200], path[4400], src_path[4200];
    snprintf(cache, sizeof cache, "%s/nested/cubin", dir);
    snprintf(src_path, sizeof src_path, "%s/add.cu", kdir);
    char *src = NULL;
    CHECK(hone_cuda_kernels_read_file(&src, src_path) == 0);
    if (!src) return;
    hone_cuda_nvrtc_opts o = HONE_CUDA_NVRTC_OPTS_INIT;
    o.sm = 90;
    o.header = header;
    o.cache_dir = cache;
    hone_cuda_cubin a, b;
    CHECK(hone_cuda_nvrtc_cache_path(path, sizeof path, "add.cu", src, &o) == 0);
    CHECK_STR_CONTAINS(path, cache);

    /* miss, then hit with the same bytes */
    CHECK_MSG(hone_cuda_nvrtc_compile(&a, "add.cu", src, &o) == 0, "%s", hone_error_last());
    CHECK(a.from_cache == 0 && a.cache_rejected == 0);
    CHECK(file_size(path) > (long)a.size);
    CHECK_MSG(hone_cuda_nvrtc_compile(&b, "add.cu", src, &o) == 0, "%s", hone_error_last());
    CHECK(b.from_cache == 1 && b.cache_rejected == 0);
    CHECK(a.size == b.size && a.cubin && b.cubin && memcmp(a.cubin, b.cubin, a.size) == 0);
    hone_cuda_cubin_free(&b);

    /* another architecture, another entry */
    char path80[4400];
    o.sm = 80;
    CHECK(hone_cuda_nvrtc_cache_path(path80, sizeof path80, "add.cu", src, &o) == 0);
    CHECK(strcmp(path, path80) != 0);
    o.sm = 90;
    /* a changed source (even a comment) is another entry */
    size_t sl = strlen(src);
    char *src2 = malloc(sl + 16);
    memcpy(src2, src, sl);
    strcpy(src2 + sl, "\n// changed\n");
    char path2[4400];
    CHECK(hone_cuda_nvrtc_cache_path(path2, sizeof path2, "add.cu", src2, &o) == 0);
    CHECK(strcmp(path, path2) != 0);
    free(src2);

    /* a flipped payload byte: detected, rebuilt, rewritten */
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (f) {
        fseek(f, -10, SEEK_END);
        int ch = fgetc(f);
        fseek(f, -10, SEEK_END);
        fputc(ch ^ 0x5a, f);
        fclose(f);
    }
    CHECK(hone_cuda_nvrtc_compile(&b, "add.cu", src, &o) == 0);
    CHECK(b.from_cache == 0 && b.cache_rejected == 1);
    CHECK(hone_cuda_nvrtc_has_symbol(b.cubin, b.size, "hone_cuda_add") == 1);
    hone_cuda_cubin_free(&b);
    CHECK(hone_cuda_nvrtc_compile(&b, "add.cu", src, &o) == 0);
    CHECK(b.from_cache == 1 && b.cache_rejected == 0);
    hone_cuda_cubin_free(&b);

    /* a truncated file, and a file of garbage: both detected */
    CHECK(truncate(path, 40) == 0);
    CHECK(hone_cuda_nvrtc_compile(&b, "add.cu", src, &o) == 0);
    CHECK(b.from_cache == 0 && b.cache_rejected == 1);
    hone_cuda_cubin_free(&b);
    f = fopen(path, "wb");
    if (f) {
        fputs("not a cubin at all", f);
        fclose(f);
    }
    CHECK(hone_cuda_nvrtc_compile(&b, "add.cu", src, &o) == 0);
    CHECK(b.from_cache == 0 && b.cache_rejected == 1);
    hone_cuda_cubin_free(&b);
    CHECK(hone_cuda_nvrtc_compile(&b, "add.cu", src, &o) == 0);
    CHECK(b.from_cache == 1);
    hone_cuda_cubin_free(&b);
    hone_cuda_cubin_free(&a);

    /* the default directory follows XDG_CACHE_HOME, then HOME */
    char want[4300], got[4300];
    setenv("XDG_CACHE_HOME", dir, 1);
    CHECK(hone_cuda_nvrtc_cache_dir(got, sizeof got) == 0);
    snprintf(want, sizeof want, "%s/hone/cubin", dir);
    CHECK_MSG(!strcmp(got, want), "%s", got);
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/nonexistent-home", 1);
    CHECK(hone_cuda_nvrtc_cache_dir(got, sizeof got) == 0);
    CHECK_MSG(!strcmp(got, "/nonexistent-home/.cache/hone/cubin"), "%s", got);
    free(src);
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

int main(int argc, char **argv)
{
    if (hone_cuda_kernels_dir(kdir, sizeof kdir)) {
        fprintf(stderr, "%s\n", hone_error_last());
        return 1;
    }
    static const harness_case cases[] = {
        TEST_CASE(test_every_kernel_has_a_file), TEST_CASE(test_launch_line),
        TEST_CASE(test_compile_errors_are_reported), TEST_CASE(test_every_file_compiles_strictly),
        TEST_CASE(test_cubin_cache)};
    int rc = harness_run(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
    free(header);
    return rc;
}
#endif
