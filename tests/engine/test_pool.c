/* The thread pool: every share runs exactly once (also with more shares than threads, and
 * on a one-thread pool), jobs back to back do not mix, and the default thread count follows
 * the affinity mask and the cgroup quota (fake cgroup files in a temporary directory). */
#include "harness.h"

#include <sched.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/pool.h"

#define MAXS 4096

typedef struct {
    atomic_int hits[MAXS];
    atomic_int bad_nth;
    int nth;
    int job;
    atomic_int last_job[MAXS];
} count_job;

static void count_fn(void *arg, int ith, int nth)
{
    count_job *j = arg;
    if (nth != j->nth || ith < 0 || ith >= nth) { atomic_fetch_add(&j->bad_nth, 1); return; }
    atomic_fetch_add(&j->hits[ith], 1);
    atomic_store(&j->last_job[ith], j->job);
}

static void check_pool(int threads, int nth)
{
    hone_pool *p = NULL;
    CHECK_EQ_INT(hone_pool_new(&p, threads), 0);
    if (!p) return;
    CHECK_EQ_INT(hone_pool_size(p), threads);
    static count_job j;
    memset(&j, 0, sizeof j);
    int want = nth <= 0 ? threads : nth;
    j.nth = want;
    int reps = 2000, bad = 0;
    for (int r = 0; r < reps; r++) {
        j.job = r;
        hone_pool_run(p, count_fn, &j, nth);
        /* every share of this job has run by the time run returns */
        for (int i = 0; i < want; i++)
            if (atomic_load(&j.last_job[i]) != r) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(atomic_load(&j.bad_nth), 0);
    int wrong = 0;
    for (int i = 0; i < want; i++)
        if (atomic_load(&j.hits[i]) != reps) wrong++;
    CHECK_EQ_INT(wrong, 0);
    hone_pool_free(p);
}

static void test_shares_equal_threads(void) { check_pool(4, 0); }
static void test_more_shares_than_threads(void) { check_pool(3, 37); check_pool(2, 4096); }
static void test_fewer_shares_than_threads(void) { check_pool(6, 2); }
static void test_one_thread_many_shares(void) { check_pool(1, 9); }

/* More threads than CPUs (the oversubscribed case): still correct, and it finishes. */
static void test_oversubscribed(void)
{
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    check_pool((int)(c > 0 ? c : 1) * 4 > 64 ? 64 : (int)(c > 0 ? c : 1) * 4, 0);
}

static void test_fit_threads(void)
{
    CHECK_EQ_INT(hone_pool_fit_threads(16, 16, 0), 16);
    CHECK_EQ_INT(hone_pool_fit_threads(16, 1, 0), 1);   /* taskset -c 0 */
    CHECK_EQ_INT(hone_pool_fit_threads(16, 4, 1.5), 2); /* quota rounds up */
    CHECK_EQ_INT(hone_pool_fit_threads(16, 16, 3.0), 3);
    CHECK_EQ_INT(hone_pool_fit_threads(16, 0, 0.2), 1); /* a fifth of a CPU: one thread */
    CHECK_EQ_INT(hone_pool_fit_threads(2, 8, 4), 2);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void test_cgroup_files(void)
{
    char v2[] = "/tmp/hone_cg2_XXXXXX", v1[] = "/tmp/hone_cg1_XXXXXX";
    CHECK(mkdtemp(v2) != NULL);
    CHECK(mkdtemp(v1) != NULL);
    CHECK_NEAR(hone_pool_cgroup_cpus(v2), 0, 0); /* no files: no limit */
    write_file(v2, "cpu.max", "max 100000\n");
    CHECK_NEAR(hone_pool_cgroup_cpus(v2), 0, 0);
    write_file(v2, "cpu.max", "150000 100000\n");
    CHECK_NEAR(hone_pool_cgroup_cpus(v2), 1.5, 1e-12);
    write_file(v1, "cpu.cfs_quota_us", "-1\n");
    write_file(v1, "cpu.cfs_period_us", "100000\n");
    CHECK_NEAR(hone_pool_cgroup_cpus(v1), 0, 0);
    write_file(v1, "cpu.cfs_quota_us", "50000\n");
    CHECK_NEAR(hone_pool_cgroup_cpus(v1), 0.5, 1e-12);

    /* the default honours HONE_CGROUP_DIR and the affinity mask */
    cpu_set_t set;
    CHECK_EQ_INT(sched_getaffinity(0, sizeof set, &set), 0);
    int aff = CPU_COUNT(&set);
    write_file(v2, "cpu.max", "100000 100000\n");
    setenv("HONE_CGROUP_DIR", v2, 1);
    CHECK_EQ_INT(hone_pool_default_threads(), 1);
    write_file(v2, "cpu.max", "max 100000\n");
    CHECK_EQ_INT(hone_pool_default_threads(), aff);
    unsetenv("HONE_CGROUP_DIR");

    cpu_set_t one;
    CPU_ZERO(&one);
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &set)) { CPU_SET(i, &one); break; }
    CHECK_EQ_INT(sched_setaffinity(0, sizeof one, &one), 0);
    CHECK_EQ_INT(hone_pool_default_threads(), 1);
    hone_pool *p = NULL;
    CHECK_EQ_INT(hone_pool_new(&p, 0), 0);
    CHECK_EQ_INT(p ? hone_pool_size(p) : -1, 1);
    hone_pool_free(p);
    CHECK_EQ_INT(sched_setaffinity(0, sizeof set, &set), 0);

    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", v1, v2);
    CHECK_EQ_INT(system(cmd), 0);
}

TEST_MAIN(TEST_CASE(test_shares_equal_threads), TEST_CASE(test_more_shares_than_threads),
          TEST_CASE(test_fewer_shares_than_threads), TEST_CASE(test_one_thread_many_shares),
          TEST_CASE(test_oversubscribed), TEST_CASE(test_fit_threads), TEST_CASE(test_cgroup_files))
