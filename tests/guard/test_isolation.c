/* The candidate store (SHA-256, atomic writes, crash safety), the isolated worker (crash, hang,
 * seccomp strict and filter modes), and the compile stage (cc, NVRTC, the CUDA scans). */
#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "candidates/compile.h"
#include "candidates/sha256.h"
#include "candidates/store.h"
#include "candidates/worker.h"
#include "engine/error.h"
#include "guard/scan.h"

static char DIR_[256];

static void setup(void)
{
    if (DIR_[0]) return;
    snprintf(DIR_, sizeof DIR_, "/tmp/hone-iso-test-XXXXXX");
    if (!mkdtemp(DIR_)) exit(1);
}

static void test_sha256(void)
{
    char h[65];
    hone_sha256_hex("abc", 3, h);
    CHECK(strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
    hone_sha256_hex("", 0, h);
    CHECK(strcmp(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0);
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hone_sha256_hex(m, strlen(m), h);
    CHECK(strcmp(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0);
}

static void test_store(void)
{
    setup();
    hone_store *s = NULL;
    CHECK_EQ_INT(hone_store_open(&s, DIR_), 0);
    const char *src = "void f(void) {}\n";
    hone_store_meta meta = {"swiglu", "cpu", "llm", "model-x prompt sha256:abcd", NULL};
    char hash[65];
    CHECK_EQ_INT(hone_store_put(s, hash, src, strlen(src), &meta), 0);
    char expect[65];
    hone_sha256_hex(src, strlen(src), expect);
    CHECK(strcmp(hash, expect) == 0);
    CHECK_EQ_INT(hone_store_set_state(s, hash, HONE_STORE_COMPILED, NULL, NULL), 0);
    CHECK_EQ_INT(hone_store_set_state(s, hash, HONE_STORE_REJECTED, "parity: too wrong", "{\"x\": 1}"), 0);
    char *m = NULL;
    CHECK_EQ_INT(hone_store_read_meta(s, hash, &m), 0);
    CHECK_STR_CONTAINS(m, "\"state\":\t\"rejected\"");
    CHECK_STR_CONTAINS(m, "parity: too wrong");
    CHECK_STR_CONTAINS(m, "model-x prompt sha256:abcd");
    CHECK_STR_CONTAINS(m, "\"x\":\t1");
    free(m);
    /* a writer that crashed mid-way left a partial temp file: the record is intact */
    char path[1024], tmp[1100];
    hone_store_path(s, hash, "meta.json", path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.99999", path);
    FILE *f = fopen(tmp, "w");
    fputs("{\"state\": \"acc", f);
    fclose(f);
    CHECK_EQ_INT(hone_store_read_meta(s, hash, &m), 0);
    CHECK_STR_CONTAINS(m, "\"state\":\t\"rejected\"");
    free(m);
    /* a writer killed mid-write (big file, SIGKILL after a few ms): old or new, never torn */
    char big[1024];
    snprintf(big, sizeof big, "%s/big", DIR_);
    size_t n = (size_t)64 << 20;
    char *a = malloc(n);
    memset(a, 'A', n);
    CHECK_EQ_INT(hone_store_atomic_write(big, a, n), 0);
    for (int round = 0; round < 3; round++) {
        pid_t p = fork();
        if (p == 0) {
            memset(a, 'B', n);
            for (;;) hone_store_atomic_write(big, a, n);
        }
        struct timespec ts = {0, (5 + 20 * round) * 1000000L};
        nanosleep(&ts, NULL);
        kill(p, SIGKILL);
        waitpid(p, NULL, 0);
        int fd = open(big, O_RDONLY);
        off_t sz = lseek(fd, 0, SEEK_END);
        char first = 0, last = 0;
        pread(fd, &first, 1, 0);
        pread(fd, &last, 1, sz - 1);
        close(fd);
        CHECK_MSG(sz == (off_t)n && first == last && (first == 'A' || first == 'B'),
                  "torn file after a killed writer: size %lld, first %c last %c", (long long)sz, first, last);
    }
    free(a);
    hone_store_free(s);
}

static int w_crash(void *a) { (void)a; volatile int *p = NULL; return *p; }
static int w_hang(void *a) { (void)a; for (;;) {} return 0; }
static int w_ok(void *a) { *(int *)a = 42; return 0; }
static int w_strict_syscall(void *a)
{
    (void)a;
    hone_worker_enter_strict();
    return (int)getppid(); /* not allowed under strict mode */
}
static int w_strict_ok(void *a)
{
    hone_worker_enter_strict();
    ((volatile int *)a)[0] = 7;
    return 0;
}
static int w_filter_socket(void *a)
{
    (void)a;
    hone_worker_enter_filter(-1);
    return socket(AF_INET, SOCK_STREAM, 0) >= 0 ? 0 : 1;
}
static int w_timing_clock(void *a)
{
    hone_worker_enter_timing();
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    ((volatile int *)a)[0] = 1;
    return 0;
}
static int w_net(void *a)
{
    (void)a;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return 0;
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(80);
    sa.sin_addr.s_addr = htonl(0x01010101);
    return connect(s, (struct sockaddr *)&sa, sizeof sa) == 0 ? 1 : 0;
}

static void test_worker(void)
{
    hone_worker_result r;
    hone_worker_opts o = HONE_WORKER_OPTS_INIT;
    o.timeout_s = 1;
    CHECK_EQ_INT(hone_worker_run(&r, &o, w_crash, NULL), 0);
    CHECK(!r.ok && r.signal == SIGSEGV);
    CHECK_STR_CONTAINS(r.reason, "killed by SIGSEGV");
    CHECK_EQ_INT(hone_worker_run(&r, &o, w_hang, NULL), 0);
    CHECK(!r.ok && r.timed_out);
    CHECK_STR_CONTAINS(r.reason, "timed out after 1 s");
    CHECK(r.wall_s < 3);
    int *shm = hone_worker_shared_new(4096);
    CHECK_EQ_INT(hone_worker_run(&r, &o, w_ok, shm), 0);
    CHECK(r.ok && shm[0] == 42);
    CHECK_EQ_INT(hone_worker_run(&r, &o, w_strict_ok, shm), 0);
    CHECK(r.ok && shm[0] == 7);
    CHECK_EQ_INT(hone_worker_run(&r, &o, w_strict_syscall, NULL), 0);
    CHECK(!r.ok && r.signal == SIGKILL);
    CHECK_EQ_INT(hone_worker_run(&r, &o, w_filter_socket, NULL), 0);
    CHECK(!r.ok && r.signal == SIGSYS);
    shm[0] = 0;
    CHECK_EQ_INT(hone_worker_run(&r, &o, w_timing_clock, shm), 0);
    CHECK(r.ok && shm[0] == 1);
    CHECK_EQ_INT(hone_worker_run(&r, &o, w_net, NULL), 0);
    CHECK_MSG(r.ok, "the worker reached the network: %s", r.reason);
    hone_worker_shared_free(shm, 4096);
}

static int cancel_flag;

static void *set_cancel_later(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    __atomic_store_n(&cancel_flag, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* opts.cancel: a hanging worker is killed as soon as the flag is set, long before its watchdog,
 * and says so (cancelled, not timed out); a compile with the flag set fails with HONE_ECANCELED
 * and leaves neither an object nor its private directory. */
static void test_worker_cancel(void)
{
    hone_worker_result r;
    hone_worker_opts o = HONE_WORKER_OPTS_INIT;
    o.timeout_s = 30;
    o.cancel = &cancel_flag;
    cancel_flag = 0;
    pthread_t th;
    CHECK_EQ_INT(pthread_create(&th, NULL, set_cancel_later, NULL), 0);
    CHECK_EQ_INT(hone_worker_run(&r, &o, w_hang, NULL), 0);
    pthread_join(th, NULL);
    CHECK(!r.ok && r.cancelled && !r.timed_out && r.signal == SIGKILL);
    CHECK_STR_CONTAINS(r.reason, "cancelled");
    CHECK_MSG(r.wall_s >= 0.09 && r.wall_s < 2, "killed %.3f s after the start (flag at 0.1 s)", r.wall_s);

    setup();
    char sub[300], src[512], so[512];
    snprintf(sub, sizeof sub, "%s/cancel", DIR_);
    mkdir(sub, 0700);
    snprintf(src, sizeof src, "%s/k.c", sub);
    snprintf(so, sizeof so, "%s/k.so", sub);
    FILE *f = fopen(src, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("void hone_cpu_nothing(void) {}\n", f);
    fclose(f);
    hone_compile_cpu_result cr;
    hone_compile_cpu_opts co = HONE_COMPILE_CPU_OPTS_INIT;
    co.cancel = &cancel_flag; /* still set */
    CHECK_EQ_INT(hone_compile_cpu(&cr, src, so, &co), HONE_ECANCELED);
    CHECK_STR_CONTAINS(hone_error_last(), "cancelled");
    hone_compile_cpu_result_clear(&cr);
    CHECK(access(so, F_OK) != 0);
    int left = 0;
    DIR *d = opendir(sub);
    for (struct dirent *e; d && (e = readdir(d));)
        left += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "k.c");
    if (d) closedir(d);
    CHECK_EQ_INT(left, 0);
}

static void test_compile_cpu(void)
{
    setup();
    char src[512], so[512];
    snprintf(src, sizeof src, "%s/k.c", DIR_);
    snprintf(so, sizeof so, "%s/k.so", DIR_);
    FILE *f = fopen(src, "w");
    fputs("#include \"kernels/cpu/common.h\"\nvoid hone_cpu_add(float *y, const float *a, const float *b, "
          "int64_t n, int ith, int nth) { int64_t i0, i1; hone_cpu_share(n, ith, nth, &i0, &i1);"
          " for (int64_t i = i0; i < i1; i++) y[i] = a[i] + b[i]; }\n", f);
    fclose(f);
    hone_compile_cpu_result r;
    CHECK_EQ_INT(hone_compile_cpu(&r, src, so, NULL), 0);
    CHECK_STR_CONTAINS(r.cmd, "-nostartfiles");
    hone_compile_cpu_result_clear(&r);
    char why[256];
    CHECK_EQ_INT(hone_scan_elf(so, "hone_cpu_add", why, sizeof why), 0);
    CHECK(hone_scan_elf(so, "hone_cpu_swiglu", why, sizeof why) != 0);
    CHECK_STR_CONTAINS(why, "does not define");
}

static void test_compile_cuda(void)
{
    char why[256];
    const char *good = "extern \"C\" __global__ void k(float *y, const float *a, int n) {\n"
                       "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a[i] * 2.0f; }\n";
    const char *bad = "extern \"C\" __global__ void k(float *y) { y[0] = undefined_thing; }\n";
    const char *forbidden = "extern \"C\" __global__ void k(float *y) { y[0] = (float)clock64(); printf(\"x\"); }\n";
    CHECK_EQ_INT(hone_scan_cuda_source(good, why, sizeof why), 0);
    CHECK(hone_scan_cuda_source(forbidden, why, sizeof why) != 0);
    CHECK_STR_CONTAINS(why, "clock64");
    CHECK(hone_scan_ptx("mov.u64 %rd1, %globaltimer;", why, sizeof why) != 0);
    if (!hone_compile_nvrtc_available(why, sizeof why)) {
        fprintf(stderr, "  (NVRTC unavailable: %s; compile cases skipped)\n", why);
        return;
    }
    const char *archs[] = {"sm_80", "sm_90", "compute_80"};
    for (int i = 0; i < 3; i++) {
        void *out = NULL;
        size_t n = 0;
        char *log = NULL;
        CHECK_EQ_INT(hone_compile_cuda(&out, &n, &log, good, "good.cu", archs[i], NULL), 0);
        CHECK(n > 100);
        if (i == 2 && out) CHECK_EQ_INT(hone_scan_ptx(out, why, sizeof why), 0);
        free(out);
        free(log);
    }
    void *out = NULL;
    size_t n = 0;
    char *log = NULL;
    CHECK(hone_compile_cuda(&out, &n, &log, bad, "bad.cu", "sm_80", NULL) != 0);
    CHECK_STR_CONTAINS(log, "undefined_thing");
    free(out);
    free(log);
}

TEST_MAIN(TEST_CASE(test_sha256), TEST_CASE(test_store), TEST_CASE(test_worker), TEST_CASE(test_worker_cancel),
          TEST_CASE(test_compile_cpu), TEST_CASE(test_compile_cuda))
