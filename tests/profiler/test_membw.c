/* Tests for profiler/membw: the figures are plausible (0.5 .. 2000 GB/s), two threads are
 * not absurdly slower than one, copy/triad are filled in, and bad options are refused.
 * Uses a 128 MiB buffer (above most LLCs, yet well under a second on a 2-core machine). */
#include "harness.h"

#include "engine/error.h"
#include "profiler/membw.h"

static int plausible(double gbps) { return gbps > 0.5 && gbps < 2000.0; }

static void test_defaults(void)
{
    hone_membw_opts o = HONE_MEMBW_OPTS_INIT;
    CHECK(o.buffer_bytes == ((size_t)512 << 20));
    CHECK_EQ_INT(o.n_threads, 0);
    CHECK_EQ_INT(o.repetitions, 5);
    CHECK_EQ_INT(o.copy_triad, 1);
    CHECK_EQ_INT(o.thread_cpu_time, 0);
}

/* The thread-CPU-clock figure (the guard's roof): one thread only, plausible, and never far
 * below the wall-clock figure of the same sweep (CPU time is at most the wall time, so the
 * figure can only be as high or higher, bar the noise between two runs). */
static void test_thread_cpu_time(void)
{
    hone_membw_opts o = HONE_MEMBW_OPTS_INIT;
    o.buffer_bytes = (size_t)64 << 20;
    o.repetitions = 3;
    o.copy_triad = 0;
    o.n_threads = 1;
    hone_membw_result wall, cpu;
    CHECK_EQ_INT(hone_membw_run(&wall, &o), 0);
    o.thread_cpu_time = 1;
    int rc = hone_membw_run(&cpu, &o);
    CHECK_MSG(rc == 0, "%d %s", rc, hone_error_last());
    fprintf(stderr, "  1 thread read: wall clock %.1f GB/s, thread CPU clock %.1f GB/s\n", wall.read_gbps,
            cpu.read_gbps);
    CHECK_MSG(plausible(cpu.read_gbps), "read %.3f GB/s", cpu.read_gbps);
    CHECK_MSG(cpu.read_gbps > 0.5 * wall.read_gbps, "CPU clock %.2f vs wall clock %.2f GB/s", cpu.read_gbps,
              wall.read_gbps);
    CHECK(cpu.copy_gbps == 0.0);
    o.n_threads = 2;
    CHECK_EQ_INT(hone_membw_run(&cpu, &o), HONE_EINVAL);
    CHECK_STR_CONTAINS(hone_error_last(), "thread_cpu_time needs n_threads 1");
    o.n_threads = 0;
    CHECK_EQ_INT(hone_membw_run(&cpu, &o), HONE_EINVAL);
}

static void test_read_copy_triad(void)
{
    hone_membw_opts o = HONE_MEMBW_OPTS_INIT;
    o.buffer_bytes = (size_t)128 << 20;
    o.repetitions = 3;
    o.n_threads = 1;
    hone_membw_result one, two;
    int rc = hone_membw_run(&one, &o);
    CHECK_MSG(rc == 0, "%d %s", rc, hone_error_last());
    o.n_threads = 2;
    rc = hone_membw_run(&two, &o);
    CHECK_MSG(rc == 0, "%d %s", rc, hone_error_last());
    fprintf(stderr, "  1 thread : read %.1f  copy %.1f  triad %.1f GB/s\n", one.read_gbps, one.copy_gbps,
            one.triad_gbps);
    fprintf(stderr, "  2 threads: read %.1f  copy %.1f  triad %.1f GB/s\n", two.read_gbps, two.copy_gbps,
            two.triad_gbps);
    CHECK_MSG(plausible(one.read_gbps), "read %.3f GB/s", one.read_gbps);
    CHECK_MSG(plausible(two.read_gbps), "read %.3f GB/s", two.read_gbps);
    CHECK_MSG(plausible(one.copy_gbps) && plausible(one.triad_gbps), "copy %.3f triad %.3f", one.copy_gbps,
              one.triad_gbps);
    CHECK_MSG(plausible(two.copy_gbps) && plausible(two.triad_gbps), "copy %.3f triad %.3f", two.copy_gbps,
              two.triad_gbps);
    /* More threads may not help (one core can saturate some memory systems), but a
     * halving means the threads are fighting, not streaming. */
    CHECK_MSG(two.read_gbps > 0.5 * one.read_gbps, "2 threads %.2f vs 1 thread %.2f GB/s", two.read_gbps,
              one.read_gbps);
    CHECK_EQ_INT(one.n_threads, 1);
    CHECK_EQ_INT(two.n_threads, 2);
    /* every byte the read test sweeps is counted: at most the buffer, at most a block per thread short */
    CHECK(one.buffer_bytes <= o.buffer_bytes && one.buffer_bytes + 2 * 128 >= o.buffer_bytes);
}

static void test_measure_wrapper(void)
{
    hone_membw_opts o = HONE_MEMBW_OPTS_INIT;
    o.buffer_bytes = (size_t)32 << 20;
    o.repetitions = 2;
    o.n_threads = 0; /* all online CPUs */
    double gbps = -1.0;
    int rc = hone_membw_measure(&gbps, &o);
    CHECK_MSG(rc == 0, "%d %s", rc, hone_error_last());
    CHECK_MSG(plausible(gbps), "read %.3f GB/s", gbps);
}

static void test_invalid_opts(void)
{
    hone_membw_opts o = HONE_MEMBW_OPTS_INIT;
    hone_membw_result r;
    o.buffer_bytes = 1000;
    CHECK_EQ_INT(hone_membw_run(&r, &o), HONE_EINVAL);
    CHECK_STR_CONTAINS(hone_error_last(), "buffer_bytes");
    o = (hone_membw_opts)HONE_MEMBW_OPTS_INIT;
    o.n_threads = -1;
    CHECK_EQ_INT(hone_membw_run(&r, &o), HONE_EINVAL);
    CHECK_STR_CONTAINS(hone_error_last(), "n_threads");
    o = (hone_membw_opts)HONE_MEMBW_OPTS_INIT;
    o.repetitions = 0;
    double gbps = 1.0;
    CHECK_EQ_INT(hone_membw_measure(&gbps, &o), HONE_EINVAL);
    CHECK_STR_CONTAINS(hone_error_last(), "repetitions");
    CHECK(gbps == 0.0);
}

TEST_MAIN(TEST_CASE(test_defaults), TEST_CASE(test_read_copy_triad), TEST_CASE(test_measure_wrapper), TEST_CASE(test_thread_cpu_time),
          TEST_CASE(test_invalid_opts))
