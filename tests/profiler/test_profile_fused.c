/* Fused slots in the profile's ranking: on the tiny q4_1 model (2 layers, dim 64, q 64 rows,
 * k and v 32, ffn 96, vocab 2048, every matrix q4_1), a decode profile ranks qkv_q4_1,
 * ffn_q4_1 and rmsnorm_matvec_q4_1 with their components' shares: Wq shares its 64x64 shape
 * with Wo (half that row is q's), Wk and Wv make the whole 32x64 row; gate and up the 96x64 row
 * plus the decode swiglu; the head its 2048x64 row plus one in 5 one-row rmsnorm calls. The
 * measured rows (hone_profile_rows) stay as they were; a fused slot that ran has its measured
 * row only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/model.h"
#include "harness.h"
#include "profiler/profile.h"

#define N_DECODE 8

/* A 6-token prompt (not profiled), then N_DECODE profiled decode steps. */
static void decode(hone_backend *b, hone_profile *p)
{
    hone_kv_seq seq = {0};
    int32_t toks[6] = {1, 17, 300, 411, 65, 123};
    float *lg = malloc(2048 * sizeof *lg);
    CHECK_EQ_INT(hone_backend_forward(b, &seq, toks, 6, lg, 0), 0);
    CHECK_EQ_INT(hone_profile_attach(p, b), 0);
    for (int s = 0; s < N_DECODE; s++) {
        hone_profile_step_begin(p, 1, seq.n_tokens);
        CHECK_EQ_INT(hone_backend_forward(b, &seq, &toks[s % 6], 1, lg, 0), 0);
        hone_profile_step_end(p);
    }
    hone_profile_detach(p, b);
    hone_backend_release(b, &seq);
    free(lg);
}

/* The row of slot with key dims d0, d1 in rows[n] (NULL if none). */
static const hone_profile_row *find(const hone_profile_row *rows, int n, int slot, int64_t d0, int64_t d1)
{
    for (int i = 0; i < n; i++)
        if (rows[i].slot == slot && rows[i].dims[0] == d0 && (d1 < 0 || rows[i].dims[1] == d1)) return &rows[i];
    return NULL;
}

static double share(const hone_profile_row *r) { return r ? r->share : NAN; }

static void profile(int install_qkv, hone_profile_row *rows, int *n, hone_profile_row *rank, int *nr)
{
    hone_model *m = NULL;
    hone_backend *b = NULL;
    hone_profile *p = NULL;
    hone_ctx_opts o = HONE_CTX_OPTS_INIT;
    o.n_threads = 1;
    o.n_ctx = 64;
    hone_profile_opts po = HONE_PROFILE_OPTS_INIT;
    po.n_threads = 1;
    po.peak_gbps = 1e4; /* a roof no tiny step reaches: every row has headroom */
    po.peak_gflops = 1e4;
    CHECK_EQ_INT(hone_model_load(&m, HONE_TEST_DATA_DIR "/tiny-llama-q4_1.gguf"), 0);
    CHECK_EQ_INT(hone_backend_new(&b, m, HONE_DEVICE_CPU, &o), 0);
    CHECK_EQ_INT(hone_profile_new(&p, &po), 0);
    if (!m || !b || !p) return;
    if (install_qkv)
        hone_slots_set(hone_backend_slots(b), HONE_SLOT_QKV_Q4_1, hone_slots_desc(HONE_SLOT_QKV_Q4_1)->cpu_baseline);
    decode(b, p);
    CHECK_EQ_INT(hone_profile_rows(p, rows, 64, n), 0);
    CHECK_EQ_INT(hone_profile_ranking(p, rank, 64, nr), 0);
    hone_profile_free(p);
    hone_backend_free(b);
    hone_model_free(m);
}

static void test_fused_rows_from_components(void)
{
    hone_profile_row rows[64], rank[64];
    int n = 0, nr = 0;
    profile(0, rows, &n, rank, &nr);
    CHECK(n <= 64 && nr <= 64);
    for (int i = 0; i < n; i++) CHECK_MSG(!hone_slots_is_fused(rows[i].slot), "measured row %s", rows[i].name);
    const hone_profile_row *qkv = find(rank, nr, HONE_SLOT_QKV_Q4_1, 64, 32);
    const hone_profile_row *ffn = find(rank, nr, HONE_SLOT_FFN_Q4_1, 96, 64);
    const hone_profile_row *head = find(rank, nr, HONE_SLOT_RMSNORM_MATVEC_Q4_1, 2048, 64);
    CHECK(qkv && ffn && head);
    if (!qkv || !ffn || !head) return;
    int mv = HONE_SLOT_MATVEC_Q4_1;
    double e_qkv = 0.5 * share(find(rows, n, mv, 64, 64)) + share(find(rows, n, mv, 32, 64));
    double e_ffn = share(find(rows, n, mv, 96, 64)) + share(find(rows, n, HONE_SLOT_SWIGLU, 96, -1));
    double e_head = share(find(rows, n, mv, 2048, 64)) + share(find(rows, n, HONE_SLOT_RMSNORM, 1, 64)) / 5;
    CHECK_NEAR(qkv->share, e_qkv, 1e-12);
    CHECK_NEAR(ffn->share, e_ffn, 1e-12);
    CHECK_NEAR(head->share, e_head, 1e-12);
    CHECK(qkv->share > 0 && ffn->share > 0 && head->share > 0);
    CHECK_EQ_INT((int)qkv->calls, 2 * N_DECODE);
    CHECK_EQ_INT((int)ffn->calls, 2 * N_DECODE);
    CHECK_EQ_INT((int)head->calls, N_DECODE);
    CHECK(qkv->gain > 0 && qkv->gain <= qkv->share);
    CHECK_STR_CONTAINS(qkv->shape, "rq=64 rk=32 rv=32 cols=64");
    /* the ranking keeps every measured slot row too */
    int measured = 0;
    for (int i = 0; i < nr; i++) measured += !hone_slots_is_fused(rank[i].slot);
    CHECK_EQ_INT(measured, n - 1); /* all but the outside row */
    for (int i = 0; i < nr && i < 5; i++)
        fprintf(stderr, "  %d. %-20s %-34s share %5.1f%% gain %5.1f%%\n", i + 1, rank[i].name, rank[i].shape,
                100 * rank[i].share, 100 * rank[i].gain);
}

static void test_installed_fused_slot_is_measured(void)
{
    hone_profile_row rows[64], rank[64];
    int n = 0, nr = 0;
    profile(1, rows, &n, rank, &nr);
    const hone_profile_row *qkv = find(rows, n, HONE_SLOT_QKV_Q4_1, 64, 32);
    CHECK(qkv != NULL);
    if (qkv) CHECK_EQ_INT((int)qkv->calls, 2 * N_DECODE);
    int in_rank = 0;
    for (int i = 0; i < nr; i++)
        if (rank[i].slot == HONE_SLOT_QKV_Q4_1) {
            in_rank++;
            CHECK(strstr(rank[i].shape, "(unfused)") == NULL);
        }
    CHECK_EQ_INT(in_rank, 1);
    CHECK(find(rank, nr, HONE_SLOT_FFN_Q4_1, 96, 64) != NULL); /* not installed: from components */
}

TEST_MAIN(TEST_CASE(test_fused_rows_from_components), TEST_CASE(test_installed_fused_slot_is_measured))
