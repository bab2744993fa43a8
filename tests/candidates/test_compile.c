/* The one CPU compile path: the same source gives the same object bytes wherever it lies (the
 * loader's object is the guard's), the cache reuses by content key, an object over the size cap is
 * refused before it is stored, a hanging compiler is killed, and compile errors name the file. */
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "candidates/compile.h"
#include "engine/error.h"
#include "harness.h"
#include "candidates_test.h"

static void write_at(char *path, size_t cap, const char *dir, const char *name, const char *text)
{
    snprintf(path, cap, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* Entries of dir other than . and .. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return n;
}

static void test_reproducible(void)
{
    char *d = candidates_test_tmpdir("compile");
    char sub[4200], a[4300], b[4300], sa[4300], sb[4300];
    snprintf(sub, sizeof sub, "%s/elsewhere", d);
    mkdir(sub, 0755);
    write_at(a, sizeof a, d, "source.c", candidates_test_add_src);
    write_at(b, sizeof b, sub, "add.c", candidates_test_add_src);
    snprintf(sa, sizeof sa, "%s/candidate.so", d);
    snprintf(sb, sizeof sb, "%s/other-name.so", sub);
    hone_compile_cpu_result ra, rb;
    CHECK_EQ_INT(hone_compile_cpu(&ra, a, sa, NULL), 0);
    CHECK_EQ_INT(hone_compile_cpu(&rb, b, sb, NULL), 0);
    /* another source path and object name, the same bytes */
    CHECK(strcmp(ra.so_hash, rb.so_hash) == 0);
    CHECK(strcmp(ra.key, rb.key) == 0);
    CHECK(ra.so_bytes > 0 && ra.so_bytes == rb.so_bytes);
    char ha[65], hb[65];
    CHECK_EQ_INT(hone_compile_file_hash(ha, sa), 0);
    CHECK_EQ_INT(hone_compile_file_hash(hb, sb), 0);
    CHECK(strcmp(ha, ra.so_hash) == 0 && strcmp(hb, ha) == 0);
    CHECK_STR_CONTAINS(ra.cmd, HONE_COMPILE_CPU_FLAGS);
    CHECK_EQ_INT(count_entries(d), 3); /* source.c, candidate.so, elsewhere/: no private dir left */

    /* the cache: compiled once, then reused under the same key with the same hash */
    char cache[4300], so1[4400], so2[4400];
    snprintf(cache, sizeof cache, "%s/cache/deep", d);
    hone_compile_cpu_result c1, c2;
    CHECK_EQ_INT(hone_compile_cpu_cached(&c1, so1, sizeof so1, b, cache, NULL), 0);
    CHECK_EQ_INT(c1.cached, 0);
    CHECK_EQ_INT(hone_compile_cpu_cached(&c2, so2, sizeof so2, b, cache, NULL), 0);
    CHECK_EQ_INT(c2.cached, 1);
    CHECK(strcmp(so1, so2) == 0);
    CHECK_STR_CONTAINS(so1, "/add-");
    CHECK(strcmp(c1.so_hash, ra.so_hash) == 0 && strcmp(c2.so_hash, ra.so_hash) == 0);
    /* another source: another key */
    write_at(b, sizeof b, sub, "add.c", "/* changed */\n");
    hone_compile_cpu_result c3;
    CHECK(hone_compile_cpu_cached(&c3, so2, sizeof so2, b, cache, NULL) == 0);
    CHECK(strcmp(c3.key, c1.key) != 0);
    hone_compile_cpu_result_clear(&ra);
    hone_compile_cpu_result_clear(&rb);
    hone_compile_cpu_result_clear(&c1);
    hone_compile_cpu_result_clear(&c2);
    hone_compile_cpu_result_clear(&c3);
    candidates_test_rm_rf(d);
}

/* A 64 MiB table (.rodata), a 64 MiB zeroed array (.bss: no file bytes, but memory when loaded)
 * and a 1 GiB table are refused at compile time; nothing but the source is left in the directory. */
static void test_size_cap(void)
{
    char *d = candidates_test_tmpdir("compile");
    char src[4300], so[4300];
    snprintf(so, sizeof so, "%s/candidate.so", d);
    const char *cases[][2] = {
        {"const char big[64 << 20] = {1};\nchar hone_big(int i) { return big[i]; }\n", ".rodata"},
        {"static char zero[64 << 20];\nchar *hone_zero(void) { return zero; }\n", ".bss"},
        /* 1 GiB: the compiler is stopped at its output-size limit before writing it all */
        {"const char huge[1 << 30] = {1};\nchar hone_huge(int i) { return huge[i]; }\n", "would be"},
    };
    for (int i = 0; i < 3; i++) {
        write_at(src, sizeof src, d, "source.c", cases[i][0]);
        hone_compile_cpu_result r;
        CHECK(hone_compile_cpu(&r, src, so, NULL) == HONE_EFORMAT);
        const char *e = hone_error_last();
        CHECK_STR_CONTAINS(e, "over the cap of 16777216 (16 MiB)");
        CHECK_MSG(strstr(e, cases[i][1]) || strstr(e, "the object is"), "%s", e);
        CHECK(access(so, F_OK) != 0);
        CHECK_EQ_INT(count_entries(d), 1);
        hone_compile_cpu_result_clear(&r);
    }
    /* a smaller cap from the options applies to a small object too */
    write_at(src, sizeof src, d, "source.c", candidates_test_add_src);
    hone_compile_cpu_opts o = HONE_COMPILE_CPU_OPTS_INIT;
    o.max_bytes = 1024;
    hone_compile_cpu_result r;
    CHECK(hone_compile_cpu(&r, src, so, &o) == HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "over the cap of 1024");
    hone_compile_cpu_result_clear(&r);
    candidates_test_rm_rf(d);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A compiler that hangs is killed after the timeout (with its children); errors name the file. */
static void test_timeout_and_errors(void)
{
    char *d = candidates_test_tmpdir("compile");
    char cc[4300], src[4300], so[4300];
    write_at(cc, sizeof cc, d, "slowcc",
             "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'slowcc 1.0'; exit 0; }\nsleep 30 & wait\n");
    chmod(cc, 0755);
    write_at(src, sizeof src, d, "source.c", candidates_test_add_src);
    snprintf(so, sizeof so, "%s/candidate.so", d);
    setenv("HONE_CC", cc, 1);
    hone_compile_cpu_opts o = HONE_COMPILE_CPU_OPTS_INIT;
    o.timeout_s = 1.0;
    hone_compile_cpu_result r;
    double t0 = now_s();
    CHECK(hone_compile_cpu(&r, src, so, &o) == HONE_EFORMAT);
    double dt = now_s() - t0;
    unsetenv("HONE_CC");
    CHECK_STR_CONTAINS(hone_error_last(), "timed out after 1 s");
    CHECK_MSG(dt < 10.0, "took %.1f s", dt);
    CHECK(access(so, F_OK) != 0);
    hone_compile_cpu_result_clear(&r);

    write_at(src, sizeof src, d, "source.c", "int f(void) { return not_declared; }\n");
    CHECK(hone_compile_cpu(&r, src, so, NULL) == HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "does not compile");
    CHECK(r.log != NULL);
    char where[4400];
    snprintf(where, sizeof where, "%s:1:", src);
    CHECK_STR_CONTAINS(r.log, where); /* the caller's file, not the private copy */
    CHECK_STR_CONTAINS(r.log, "not_declared");
    hone_compile_cpu_result_clear(&r);
    candidates_test_rm_rf(d);
}

TEST_MAIN(TEST_CASE(test_reproducible), TEST_CASE(test_size_cap), TEST_CASE(test_timeout_and_errors))
