/* The kernel loader: an approved kernel that differs from the baseline is compiled, checked and
 * installed (the slot pointer changes, the outputs and the model's logits match); one that does
 * not compile, does not define the slot or computes the wrong thing is refused with a clear
 * reason and the baseline keeps serving. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "candidates/compile.h"
#include "candidates/kernel_loader.h"
#include "guard/evidence.h"
#include "engine/error.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "engine/slots.h"
#include "harness.h"

static char *tmpdir(void)
{
    char *d = strdup("/tmp/hone-test-loader-XXXXXX");
    if (!mkdtemp(d)) { perror("mkdtemp"); exit(1); }
    return d;
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char p[8400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = 0;
    fclose(f);
    return b;
}

/* DIR/cpu/ of a fresh kernels directory, and a cache directory beside it. */
typedef struct { char *root; char cpu[4200], cache[4200]; } kdir;

static kdir kdir_new(void)
{
    kdir k;
    k.root = tmpdir();
    snprintf(k.cpu, sizeof k.cpu, "%s/kernels/cpu", k.root);
    snprintf(k.cache, sizeof k.cache, "%s/cache", k.root);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", k.cpu);
    CHECK_EQ_INT(system(cmd), 0);
    return k;
}

static void kdir_free(kdir *k)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", k->root);
    if (system(cmd)) {}
    free(k->root);
}

static hone_kernel_loader_opts opts_for(const kdir *k)
{
    hone_kernel_loader_opts o = HONE_KERNEL_LOADER_OPTS_INIT;
    static char kernels[4200];
    snprintf(kernels, sizeof kernels, "%s/kernels", k->root);
    o.kernels_dir = kernels;
    o.cache_dir = k->cache;
    o.quiet = 1;
    return o;
}

/* A matvec_f32 with the baseline's math, written out in plain C (no SIMD path): the fixed
 * 16-lane order, so it gives the baseline's bits. */
static const char good_matvec[] =
    "/* matvec_f32, plain C in the fixed lane order of common.h (a test kernel). */\n"
    "#include \"kernels/cpu/common.h\"\n"
    "void hone_cpu_matvec_f32(float *y, const void *W, const float *x, int64_t rows, int64_t cols,\n"
    "                         int ith, int nth)\n"
    "{\n"
    "    int64_t r0, r1;\n"
    "    hone_cpu_share(rows, ith, nth, &r0, &r1);\n"
    "    for (int64_t r = r0; r < r1; r++) {\n"
    "        const float *w = (const float *)W + r * cols;\n"
    "        float acc[HONE_LANES] = {0};\n"
    "        for (int64_t c = 0; c < cols; c++) acc[c % HONE_LANES] = fmaf(w[c], x[c], acc[c % HONE_LANES]);\n"
    "        y[r] = hone_cpu_lanes_sum(acc);\n"
    "    }\n"
    "}\n";

static const char syntax_error[] =
    "#include \"kernels/cpu/common.h\"\n"
    "void hone_cpu_matvec_f16(float *y, const void *W, const float *x, int64_t rows, int64_t cols,\n"
    "                         int ith, int nth)\n"
    "{\n"
    "    this is not C;\n"
    "}\n";

/* Right shape, wrong result: 1% too large. */
static const char wrong_result[] =
    "#include \"kernels/cpu/common.h\"\n"
    "void hone_cpu_matvec_bf16(float *y, const void *W, const float *x, int64_t rows, int64_t cols,\n"
    "                          int ith, int nth)\n"
    "{\n"
    "    int64_t r0, r1;\n"
    "    hone_cpu_share(rows, ith, nth, &r0, &r1);\n"
    "    for (int64_t r = r0; r < r1; r++) {\n"
    "        const uint16_t *w = (const uint16_t *)W + r * cols;\n"
    "        float s = 0.0f;\n"
    "        for (int64_t c = 0; c < cols; c++) s += hone_bf16_to_f32(w[c]) * x[c];\n"
    "        y[r] = s * 1.01f;\n"
    "    }\n"
    "}\n";

/* Computes only the first half of its rows: leaves NaN poison behind. */
static const char partial[] =
    "#include \"kernels/cpu/common.h\"\n"
    "void hone_cpu_add(float *y, const float *a, const float *b, int64_t n, int ith, int nth)\n"
    "{\n"
    "    int64_t i0, i1;\n"
    "    hone_cpu_share(n, ith, nth, &i0, &i1);\n"
    "    for (int64_t i = i0; i < i0 + (i1 - i0) / 2; i++) y[i] = a[i] + b[i];\n"
    "}\n";

static const char wrong_symbol[] =
    "#include \"kernels/cpu/common.h\"\n"
    "void matvec_q8_0(void) {}\n";

static void fill(float *x, int64_t n, unsigned seed)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

static void test_installs_good_kernel(void)
{
    kdir k = kdir_new();
    write_file(k.cpu, "matvec_f32.c", good_matvec);
    hone_kernel_loader_opts o = opts_for(&k);
    hone_slot_table t, base;
    hone_slots_cpu_baseline(&t);
    base = t;
    hone_kernel_loader *l = NULL;
    int rc = hone_kernel_loader_new(&l, &t, &o);
    CHECK_MSG(rc == 0, "%s", hone_error_last());
    CHECK_EQ_INT(hone_kernel_loader_state(l, HONE_SLOT_MATVEC_F32), HONE_KERNEL_INSTALLED);
    CHECK_MSG(hone_kernel_loader_state(l, HONE_SLOT_MATVEC_F32) == HONE_KERNEL_INSTALLED, "%s",
              hone_kernel_loader_detail(l, HONE_SLOT_MATVEC_F32));
    CHECK_EQ_INT(hone_kernel_loader_n_installed(l), 1);
    CHECK_EQ_INT(hone_kernel_loader_n_refused(l), 0);
    CHECK(t.fn[HONE_SLOT_MATVEC_F32] != base.fn[HONE_SLOT_MATVEC_F32]);
    CHECK_STR_CONTAINS(hone_kernel_loader_detail(l, HONE_SLOT_MATVEC_F32), k.cache);
    /* every other slot still the baseline */
    for (int i = 0; i < HONE_SLOT_COUNT; i++)
        if (i != HONE_SLOT_MATVEC_F32) CHECK(hone_slots_get(&t, i) == hone_slots_get(&base, i));

    /* Same bits as the baseline on inputs of its own (odd shape, 3 shares). */
    enum { ROWS = 37, COLS = 291 };
    float *W = malloc(sizeof(float) * ROWS * COLS), x[COLS], yb[ROWS], yc[ROWS];
    fill(W, ROWS * COLS, 1);
    fill(x, COLS, 2);
    ((hone_slot_matvec_fn)base.fn[HONE_SLOT_MATVEC_F32])(yb, W, x, ROWS, COLS, 0, 1);
    for (int ith = 0; ith < 3; ith++) ((hone_slot_matvec_fn)t.fn[HONE_SLOT_MATVEC_F32])(yc, W, x, ROWS, COLS, ith, 3);
    CHECK(memcmp(yb, yc, sizeof yb) == 0);
    free(W);

    /* A second load reuses the compiled object. */
    char so[4400];
    snprintf(so, sizeof so, "%s", hone_kernel_loader_detail(l, HONE_SLOT_MATVEC_F32));
    struct stat s1, s2;
    CHECK_EQ_INT(stat(so, &s1), 0);
    hone_slot_table t2;
    hone_slots_cpu_baseline(&t2);
    hone_kernel_loader *l2 = NULL;
    CHECK_EQ_INT(hone_kernel_loader_new(&l2, &t2, &o), 0);
    CHECK(strcmp(hone_kernel_loader_detail(l2, HONE_SLOT_MATVEC_F32), so) == 0);
    CHECK_EQ_INT(stat(so, &s2), 0);
    CHECK(s1.st_ino == s2.st_ino && s1.st_mtime == s2.st_mtime);
    hone_kernel_loader_free(l2);
    hone_kernel_loader_free(l);
    kdir_free(&k);
}

static void test_baseline_copy_is_not_compiled(void)
{
    kdir k = kdir_new();
    char src[4096], *text;
    snprintf(src, sizeof src, "%s/kernels/cpu/rmsnorm.c", HONE_SOURCE_DIR);
    CHECK((text = read_text(src)) != NULL);
    if (text) write_file(k.cpu, "rmsnorm.c", text);
    hone_kernel_loader_opts o = opts_for(&k);
    hone_slot_table t, base;
    hone_slots_cpu_baseline(&t);
    base = t;
    hone_kernel_loader *l = NULL;
    CHECK_EQ_INT(hone_kernel_loader_new(&l, &t, &o), 0);
    CHECK_EQ_INT(hone_kernel_loader_state(l, HONE_SLOT_RMSNORM), HONE_KERNEL_BASELINE);
    CHECK(t.fn[HONE_SLOT_RMSNORM] == base.fn[HONE_SLOT_RMSNORM]);
    CHECK(access(k.cache, F_OK) != 0); /* nothing compiled */
    hone_kernel_loader_free(l);

    /* A copy of the baseline with one changed byte is compiled and gives the baseline's bits
     * (the loader's flags are the engine's). */
    if (text) {
        size_t n = strlen(text);
        char *mod = malloc(n + 64);
        snprintf(mod, n + 64, "%s/* approved */\n", text);
        write_file(k.cpu, "rmsnorm.c", mod);
        free(mod);
        CHECK_EQ_INT(hone_kernel_loader_new(&l, &t, &o), 0);
        CHECK_MSG(hone_kernel_loader_state(l, HONE_SLOT_RMSNORM) == HONE_KERNEL_INSTALLED, "%s",
                  hone_kernel_loader_detail(l, HONE_SLOT_RMSNORM));
        CHECK(t.fn[HONE_SLOT_RMSNORM] != base.fn[HONE_SLOT_RMSNORM]);
        enum { N = 3, DIM = 200 };
        float x[N * DIM], w[DIM], yb[N * DIM], yc[N * DIM];
        fill(x, N * DIM, 3);
        fill(w, DIM, 4);
        HONE_SLOTS_FN(&base, HONE_SLOT_RMSNORM, hone_slot_rmsnorm_fn)(yb, x, w, N, DIM, 1e-5f, 0, 1);
        HONE_SLOTS_FN(&t, HONE_SLOT_RMSNORM, hone_slot_rmsnorm_fn)(yc, x, w, N, DIM, 1e-5f, 0, 1);
        CHECK(memcmp(yb, yc, sizeof yb) == 0);
        hone_kernel_loader_free(l);
    }
    free(text);
    kdir_free(&k);
}

/* Runs the loader with stderr captured into *log. */
static int load_logged(hone_kernel_loader **l, hone_slot_table *t, hone_kernel_loader_opts *o,
                       const kdir *k, char **log)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/stderr.txt", k->root);
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(path, "w");
    dup2(fileno(f), 2);
    o->quiet = 0;
    int rc = hone_kernel_loader_new(l, t, o);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(f);
    *log = read_text(path);
    return rc;
}

static int count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static void test_refusals(void)
{
    kdir k = kdir_new();
    write_file(k.cpu, "matvec_f16.c", syntax_error);
    write_file(k.cpu, "matvec_bf16.c", wrong_result);
    write_file(k.cpu, "add.c", partial);
    write_file(k.cpu, "matvec_q8_0.c", wrong_symbol);
    write_file(k.cpu, "matvec_f32.c", good_matvec);
    write_file(k.cpu, "not_a_slot.c", "int x;\n");
    hone_kernel_loader_opts o = opts_for(&k);
    hone_slot_table t, base;
    hone_slots_cpu_baseline(&t);
    base = t;
    hone_kernel_loader *l = NULL;
    char *log = NULL;
    int rc = load_logged(&l, &t, &o, &k, &log);
    CHECK_MSG(rc == 0, "%s", hone_error_last());
    fprintf(stderr, "--- loader log:\n%s---\n", log ? log : "");

    /* The syntax error: refused with the compiler's message. */
    CHECK_EQ_INT(hone_kernel_loader_state(l, HONE_SLOT_MATVEC_F16), HONE_KERNEL_REFUSED);
    const char *d = hone_kernel_loader_detail(l, HONE_SLOT_MATVEC_F16);
    CHECK_STR_CONTAINS(d, "matvec_f16.c:5");
    CHECK_STR_CONTAINS(d, "error:");
    CHECK(t.fn[HONE_SLOT_MATVEC_F16] == base.fn[HONE_SLOT_MATVEC_F16]);

    /* The wrong result: refused by the self-check. */
    CHECK_EQ_INT(hone_kernel_loader_state(l, HONE_SLOT_MATVEC_BF16), HONE_KERNEL_REFUSED);
    d = hone_kernel_loader_detail(l, HONE_SLOT_MATVEC_BF16);
    CHECK_STR_CONTAINS(d, "self-check against the baseline failed: matvec_bf16 rows=");
    CHECK_STR_CONTAINS(d, "baseline");
    CHECK(t.fn[HONE_SLOT_MATVEC_BF16] == base.fn[HONE_SLOT_MATVEC_BF16]);

    /* Unwritten outputs: the NaN poison shows. */
    CHECK_EQ_INT(hone_kernel_loader_state(l, HONE_SLOT_ADD), HONE_KERNEL_REFUSED);
    CHECK_STR_CONTAINS(hone_kernel_loader_detail(l, HONE_SLOT_ADD), "is NaN (not written?)");
    CHECK(t.fn[HONE_SLOT_ADD] == base.fn[HONE_SLOT_ADD]);

    /* No slot function. */
    CHECK_EQ_INT(hone_kernel_loader_state(l, HONE_SLOT_MATVEC_Q8_0), HONE_KERNEL_REFUSED);
    CHECK_STR_CONTAINS(hone_kernel_loader_detail(l, HONE_SLOT_MATVEC_Q8_0),
                       "does not define the slot function hone_cpu_matvec_q8_0");
    CHECK(t.fn[HONE_SLOT_MATVEC_Q8_0] == base.fn[HONE_SLOT_MATVEC_Q8_0]);

    /* The good one still goes in; the counts and the log: one line per refusal. */
    CHECK_EQ_INT(hone_kernel_loader_state(l, HONE_SLOT_MATVEC_F32), HONE_KERNEL_INSTALLED);
    CHECK_EQ_INT(hone_kernel_loader_n_installed(l), 1);
    CHECK_EQ_INT(hone_kernel_loader_n_refused(l), 4);
    CHECK_EQ_INT(count_lines_with(log, "refused, the baseline serves"), 4);
    CHECK_STR_CONTAINS(log, "matvec_f16.c refused, the baseline serves: ");
    CHECK_STR_CONTAINS(log, "does not compile");
    CHECK_STR_CONTAINS(log, "error:");
    CHECK_STR_CONTAINS(log, "not_a_slot.c ignored: 'not_a_slot' is not a slot");
    CHECK_STR_CONTAINS(log, "matvec_f32.c installed");

    /* The baseline keeps serving the refused slots. */
    enum { ROWS = 9, COLS = 64 };
    uint16_t Wh[ROWS * COLS];
    float Wf[ROWS * COLS], x[COLS], yb[ROWS], yc[ROWS];
    fill(Wf, ROWS * COLS, 5);
    for (int i = 0; i < ROWS * COLS; i++) Wh[i] = hone_f32_to_fp16(Wf[i]);
    fill(x, COLS, 6);
    ((hone_slot_matvec_fn)base.fn[HONE_SLOT_MATVEC_F16])(yb, Wh, x, ROWS, COLS, 0, 1);
    ((hone_slot_matvec_fn)t.fn[HONE_SLOT_MATVEC_F16])(yc, Wh, x, ROWS, COLS, 0, 1);
    CHECK(memcmp(yb, yc, sizeof yb) == 0);

    hone_kernel_loader_free(l);
    free(log);
    kdir_free(&k);
}

static void test_compile_and_check_api(void)
{
    kdir k = kdir_new();
    write_file(k.cpu, "matvec_f16.c", syntax_error);
    hone_kernel_loader_opts o = opts_for(&k);
    char so[4400], src[4400];
    snprintf(src, sizeof src, "%s/matvec_f16.c", k.cpu);
    CHECK(hone_kernel_loader_compile(so, sizeof so, src, &o) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "does not compile");
    CHECK_STR_CONTAINS(hone_error_last(), HONE_COMPILE_CPU_FLAGS);
    CHECK_STR_CONTAINS(hone_error_last(), "error:");

    /* The baselines pass their own check, for every slot (a fused slot's is its descriptor's:
     * the baseline table does not provide it). */
    hone_slot_table t;
    hone_slots_cpu_baseline(&t);
    for (int i = 0; i < HONE_SLOT_COUNT; i++) {
        int rc = hone_kernel_loader_check((hone_slot_id)i, hone_slots_desc(i)->cpu_baseline, &o);
        CHECK_MSG(rc == 0, "%s: %s", hone_slots_name(i), hone_error_last());
    }
    /* A function of the wrong slot fails it (swiglu is not add). */
    CHECK(hone_kernel_loader_check(HONE_SLOT_ADD, (void *)t.fn[HONE_SLOT_SWIGLU], &o) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "add n=");

    setenv("HONE_CC", "/nonexistent/cc", 1); /* the one compiler choice */
    snprintf(src, sizeof src, "%s/good.c", k.cpu);
    write_file(k.cpu, "good.c", good_matvec);
    CHECK(hone_kernel_loader_compile(so, sizeof so, src, &o) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "cannot run the C compiler '/nonexistent/cc'");
    unsetenv("HONE_CC");

    hone_kernel_loader *l = NULL;
    o.kernels_dir = "/nonexistent/kernels";
    CHECK(hone_kernel_loader_new(&l, &t, &o) != 0);
    CHECK_STR_CONTAINS(hone_error_last(), "kernels directory '/nonexistent/kernels' does not exist");
    CHECK(l == NULL);
    kdir_free(&k);
}

/* With a model: the self-check uses its shapes, and the installed kernel gives the same logits. */
static void test_model_logits(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tiny-llama-f32.gguf", HONE_TEST_DATA_DIR);
    hone_model *m = NULL;
    if (hone_model_load(&m, path)) {
        CHECK_MSG(0, "the tiny model (a test fixture): %s", hone_error_last());
        return;
    }
    kdir k = kdir_new();
    write_file(k.cpu, "matvec_f32.c", good_matvec);
    hone_kernel_loader_opts o = opts_for(&k);
    o.model = m;
    hone_ctx_opts co = HONE_CTX_OPTS_INIT;
    co.n_threads = 3;
    co.n_ctx = 32;
    hone_ctx *a = NULL, *b = NULL;
    CHECK_EQ_INT(hone_ctx_new(&a, m, &co), 0);
    CHECK_EQ_INT(hone_ctx_new(&b, m, &co), 0);
    hone_kernel_loader *l = NULL;
    CHECK_EQ_INT(hone_kernel_loader_new(&l, hone_ctx_slots(b), &o), 0);
    CHECK_EQ_INT(hone_kernel_loader_state(l, HONE_SLOT_MATVEC_F32), HONE_KERNEL_INSTALLED);
    CHECK(hone_ctx_slots(b)->fn[HONE_SLOT_MATVEC_F32] != hone_ctx_slots(a)->fn[HONE_SLOT_MATVEC_F32]);
    int64_t nv = hone_model_hparams(m)->n_vocab;
    float *la = malloc((size_t)nv * sizeof *la), *lb = malloc((size_t)nv * sizeof *lb);
    int32_t toks[5] = {1, 17, 300, 411, 65};
    hone_kv_seq sa = {0}, sb = {0};
    CHECK_EQ_INT(hone_ctx_forward(a, &sa, toks, 5, la, 0), 0);
    CHECK_EQ_INT(hone_ctx_forward(b, &sb, toks, 5, lb, 0), 0);
    int32_t next = 7;
    CHECK_EQ_INT(hone_ctx_forward(a, &sa, &next, 1, la, 0), 0); /* decode: matvec */
    CHECK_EQ_INT(hone_ctx_forward(b, &sb, &next, 1, lb, 0), 0);
    CHECK(memcmp(la, lb, (size_t)nv * sizeof *la) == 0);
    hone_kv_cache_release(hone_ctx_kv(a), &sa);
    hone_kv_cache_release(hone_ctx_kv(b), &sb);
    hone_ctx_free(a);
    hone_ctx_free(b);
    hone_kernel_loader_free(l);
    free(la);
    free(lb);
    hone_model_free(m);
    kdir_free(&k);
}

#ifndef HONE_BIN
#define HONE_BIN "hone"
#endif

static int files_equal(const char *a, const char *b)
{
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "cmp -s %s %s", a, b);
    return system(cmd) == 0;
}

/* `hone logits --kernels DIR`: the approved kernel serves and the logits do not change; a broken
 * one is refused on stderr and the baseline serves. */
static void test_cli_kernels_flag(void)
{
    char model[4096];
    snprintf(model, sizeof model, "%s/tiny-llama-f32.gguf", HONE_TEST_DATA_DIR);
    if (access(model, R_OK) != 0) {
        SKIP_CASE("no %s", model);
        return;
    }
    kdir k = kdir_new();
    char cmd[20000], out0[4400], out1[4400], out2[4400], err1[4400], err2[4400];
    snprintf(out0, sizeof out0, "%s/base.lgt", k.root);
    snprintf(out1, sizeof out1, "%s/good.lgt", k.root);
    snprintf(out2, sizeof out2, "%s/bad.lgt", k.root);
    snprintf(err1, sizeof err1, "%s/good.err", k.root);
    snprintf(err2, sizeof err2, "%s/bad.err", k.root);
    const char *args = "--prompt-tokens 1,17,300,411 --steps 4 -t 2";
    snprintf(cmd, sizeof cmd, "%s logits -m %s %s --out %s 2>/dev/null", HONE_BIN, model, args, out0);
    CHECK_EQ_INT(system(cmd), 0);
    write_file(k.cpu, "matvec_f32.c", good_matvec);
    snprintf(cmd, sizeof cmd, "HONE_KERNEL_CACHE=%s %s logits -m %s %s --kernels %s/kernels --out %s 2>%s",
             k.cache, HONE_BIN, model, args, k.root, out1, err1);
    CHECK_EQ_INT(system(cmd), 0);
    char *e1 = read_text(err1);
    CHECK_STR_CONTAINS(e1, "matvec_f32.c installed for matvec_f32");
    CHECK(files_equal(out0, out1));
    write_file(k.cpu, "matvec_f32.c", wrong_symbol);
    snprintf(cmd, sizeof cmd, "HONE_KERNEL_CACHE=%s %s logits -m %s %s --kernels %s/kernels --out %s 2>%s",
             k.cache, HONE_BIN, model, args, k.root, out2, err2);
    CHECK_EQ_INT(system(cmd), 0);
    char *e2 = read_text(err2);
    CHECK_STR_CONTAINS(e2, "matvec_f32.c refused, the baseline serves: the object verifier refused it: does not define the slot function hone_cpu_matvec_f32");
    CHECK(files_equal(out0, out2));
    snprintf(cmd, sizeof cmd, "%s logits -m %s %s --kernels /nonexistent/k --out %s 2>&1 | grep -q "
             "\"kernels directory '/nonexistent/k' does not exist\"", HONE_BIN, model, args, out2);
    CHECK_EQ_INT(system(cmd), 0);
    free(e1);
    free(e2);
    kdir_free(&k);
}

/* A copy of every shipped baseline, compiled through the one compile path, gives the baseline's
 * bits on every self-check case (exact: bitwise, not a tolerance). */
static void test_every_baseline_copy_is_bitwise(void)
{
    kdir k = kdir_new();
    for (int i = 0; i < HONE_SLOT_COUNT; i++) {
        char src[4096], name[128], *text;
        snprintf(src, sizeof src, "%s/kernels/cpu/%s.c", HONE_SOURCE_DIR, hone_slots_name(i));
        CHECK((text = read_text(src)) != NULL);
        if (!text) continue;
        size_t n = strlen(text);
        char *mod = malloc(n + 64);
        snprintf(mod, n + 64, "%s/* a copy */\n", text);
        snprintf(name, sizeof name, "%s.c", hone_slots_name(i));
        write_file(k.cpu, name, mod);
        free(mod);
        free(text);
    }
    hone_kernel_loader_opts o = opts_for(&k);
    o.exact = 1;
    hone_slot_table t;
    hone_slots_cpu_baseline(&t);
    hone_kernel_loader *l = NULL;
    CHECK_EQ_INT(hone_kernel_loader_new(&l, &t, &o), 0);
    CHECK_EQ_INT(hone_kernel_loader_n_installed(l), HONE_SLOT_COUNT);
    for (int i = 0; i < HONE_SLOT_COUNT; i++)
        CHECK_MSG(hone_kernel_loader_state(l, i) == HONE_KERNEL_INSTALLED, "%s: %s", hone_slots_name(i),
                  hone_kernel_loader_detail(l, i));
    /* an approved kernels/cpu/qkv_q4_1.c (hone_cpu_qkv_q4_1) provides the fused slot */
    CHECK(hone_slots_get(&t, HONE_SLOT_QKV_Q4_1) != NULL);
    CHECK(hone_slots_get(&t, HONE_SLOT_QKV_Q4_1) != hone_slots_desc(HONE_SLOT_QKV_Q4_1)->cpu_baseline);
    hone_kernel_loader_free(l);
    kdir_free(&k);
}

/* src compiled as the guard compiles it (another path, another name: k's store/source.c). */
static void guard_compile(hone_compile_cpu_result *r, const kdir *k, const char *src)
{
    char gdir[4300], gsrc[4400], gso[4400];
    snprintf(gdir, sizeof gdir, "%s/store", k->root);
    mkdir(gdir, 0755);
    write_file(gdir, "source.c", src);
    snprintf(gsrc, sizeof gsrc, "%s/source.c", gdir);
    snprintf(gso, sizeof gso, "%s/candidate.so", gdir);
    CHECK_EQ_INT(hone_compile_cpu(r, gsrc, gso, NULL), 0);
    CHECK_EQ_INT((int)strlen(r->so_hash), 64);
}

/* With evidence beside k's kernel of slot id: refused for a reason containing why, and the
 * baseline serves. */
static void check_refused(const kdir *k, hone_slot_id id, const char *evidence, const char *why)
{
    char name[128];
    snprintf(name, sizeof name, "%s.evidence.json", hone_slots_name(id));
    write_file(k->cpu, name, evidence);
    hone_kernel_loader_opts o = opts_for(k);
    hone_slot_table t, base;
    hone_slots_cpu_baseline(&t);
    base = t;
    hone_kernel_loader *l = NULL;
    CHECK_EQ_INT(hone_kernel_loader_new(&l, &t, &o), 0);
    CHECK_EQ_INT(hone_kernel_loader_state(l, id), HONE_KERNEL_REFUSED);
    CHECK_STR_CONTAINS(hone_kernel_loader_detail(l, id), why);
    CHECK(t.fn[id] == base.fn[id]);
    hone_kernel_loader_free(l);
}

/* Served = vetted: the object compiled as the guard compiles it (another path, another name) has
 * the same SHA-256 as the loader's; evidence with another hash refuses the kernel. */
static void test_evidence_object_hash(void)
{
    kdir k = kdir_new();
    write_file(k.cpu, "matvec_f32.c", good_matvec);
    char ev[600];
    hone_compile_cpu_result r;
    guard_compile(&r, &k, good_matvec);

    /* the evidence as the review commit writes it beside the kernel */
    hone_evidence rev = HONE_EVIDENCE_INIT;
    rev.so_hash = r.so_hash;
    char *json = NULL;
    CHECK_EQ_INT(hone_evidence_to_json(&json, &rev, "matvec_f32", "cpu"), 0);
    if (json) write_file(k.cpu, "matvec_f32.evidence.json", json);
    free(json);
    hone_kernel_loader_opts o = opts_for(&k);
    hone_slot_table t;
    hone_slots_cpu_baseline(&t);
    hone_kernel_loader *l = NULL;
    CHECK_EQ_INT(hone_kernel_loader_new(&l, &t, &o), 0);
    CHECK_MSG(hone_kernel_loader_state(l, HONE_SLOT_MATVEC_F32) == HONE_KERNEL_INSTALLED, "%s",
              hone_kernel_loader_detail(l, HONE_SLOT_MATVEC_F32));
    char served[65] = "";
    CHECK_EQ_INT(hone_compile_file_hash(served, hone_kernel_loader_detail(l, HONE_SLOT_MATVEC_F32)), 0);
    CHECK(strcmp(served, r.so_hash) == 0);
    hone_kernel_loader_free(l);

    /* evidence for another object: refused, the baseline serves */
    snprintf(ev, sizeof ev, "{\"candidate\": {\"so_hash\": \"%064d\"}}\n", 0);
    check_refused(&k, HONE_SLOT_MATVEC_F32, ev, "not the one the guard vetted");
    /* unreadable evidence is refused too */
    check_refused(&k, HONE_SLOT_MATVEC_F32, "{not json", "is not JSON");
    hone_compile_cpu_result_clear(&r);
    kdir_free(&k);
}

/* A kernel vetted against another revision of its slot's contract is refused: the attention
 * slots are at revision 3 (rows in segments of HONE_ATT_SEG keys, after revision 2's KV layout
 * of engine/kv_layout.h), and evidence without slot_rev
 * (written before the field, under the old layout) is revision 1. The kernel is a byte-different
 * copy of the baseline, so the loader compiles it and reads its evidence. */
static void test_evidence_contract_rev(void)
{
    kdir k = kdir_new();
    char path[4400];
    snprintf(path, sizeof path, "%s/kernels/cpu/attention_decode.c", HONE_SOURCE_DIR);
    char *base_src = read_text(path);
    CHECK(base_src != NULL);
    if (!base_src) return;
    size_t n = strlen(base_src) + 64;
    char *src = malloc(n);
    snprintf(src, n, "%s/* a reviewed copy */\n", base_src);
    free(base_src);
    write_file(k.cpu, "attention_decode.c", src);
    hone_compile_cpu_result r;
    guard_compile(&r, &k, src);
    CHECK_EQ_INT(hone_slots_rev(HONE_SLOT_ATTENTION_DECODE), 3);
    CHECK_EQ_INT(hone_slots_rev(HONE_SLOT_ADD), 1);

    /* evidence as the guard writes it now: slot_rev 3, installed */
    hone_evidence ev = HONE_EVIDENCE_INIT;
    ev.so_hash = r.so_hash;
    char *json = NULL;
    CHECK_EQ_INT(hone_evidence_to_json(&json, &ev, "attention_decode", "cpu"), 0);
    cJSON *parsed = json ? cJSON_Parse(json) : NULL;
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(parsed, "slot_rev")) == 3.0);
    cJSON_Delete(parsed);
    if (json) write_file(k.cpu, "attention_decode.evidence.json", json);
    free(json);
    hone_kernel_loader_opts o = opts_for(&k);
    hone_slot_table t;
    hone_slots_cpu_baseline(&t);
    hone_kernel_loader *l = NULL;
    CHECK_EQ_INT(hone_kernel_loader_new(&l, &t, &o), 0);
    CHECK_MSG(hone_kernel_loader_state(l, HONE_SLOT_ATTENTION_DECODE) == HONE_KERNEL_INSTALLED, "%s",
              hone_kernel_loader_detail(l, HONE_SLOT_ATTENTION_DECODE));
    hone_kernel_loader_free(l);

    /* the same object's evidence from before slot_rev: refused, the baseline serves */
    char old[600];
    snprintf(old, sizeof old, "{\"slot\": \"attention_decode\", \"candidate\": {\"so_hash\": \"%s\"}}\n", r.so_hash);
    check_refused(&k, HONE_SLOT_ATTENTION_DECODE, old,
                  "revision 1 of the attention_decode contract, which is now at revision 3 (engine/slots.h; "
                  "rows of more than 512 keys are computed in segments of 512 keys");
    /* and evidence of revision 2 (the single softmax over any number of keys) */
    snprintf(old, sizeof old, "{\"slot\": \"attention_decode\", \"slot_rev\": 2, \"candidate\": {\"so_hash\": \"%s\"}}\n",
             r.so_hash);
    check_refused(&k, HONE_SLOT_ATTENTION_DECODE, old, "revision 2 of the attention_decode contract, which is now at revision 3");
    /* a slot_rev that is not a number is refused too */
    check_refused(&k, HONE_SLOT_ATTENTION_DECODE, "{\"slot_rev\": \"2\"}", "not a number");
    hone_compile_cpu_result_clear(&r);
    free(src);
    kdir_free(&k);
}

/* The guard's object verifier runs before an approved object is mapped: a kernel whose machine
 * code reads the time stamp counter, or holds a mutable counter, is refused and the baseline
 * serves, though it compiles and would compute the right numbers. */
static void test_verifier_refuses(void)
{
    kdir k = kdir_new();
    write_file(k.cpu, "swiglu.c",
               "#include \"kernels/cpu/common.h\"\n"
               "void hone_cpu_swiglu(float *out, const float *g, const float *u, int64_t n, int ith, int nth)\n"
               "{\n"
               "    int64_t i0, i1;\n"
               "    hone_cpu_share(n, ith, nth, &i0, &i1);\n"
               "    unsigned long long t = __builtin_ia32_rdtsc();\n"
               "    for (int64_t i = i0; i < i1; i++) out[i] = g[i] / (1.0f + expf(-g[i])) * u[i] + (float)(t & 0);\n"
               "}\n");
    write_file(k.cpu, "add.c",
               "#include \"kernels/cpu/common.h\"\n"
               "static long calls;\n"
               "void hone_cpu_add(float *y, const float *a, const float *b, int64_t n, int ith, int nth)\n"
               "{\n"
               "    int64_t i0, i1;\n"
               "    calls++;\n"
               "    hone_cpu_share(n, ith, nth, &i0, &i1);\n"
               "    for (int64_t i = i0; i < i1; i++) y[i] = a[i] + b[i] + (float)(calls & 0);\n"
               "}\n");
    hone_kernel_loader_opts o = opts_for(&k);
    hone_slot_table t, base;
    hone_slots_cpu_baseline(&t);
    base = t;
    hone_kernel_loader *l = NULL;
    CHECK_EQ_INT(hone_kernel_loader_new(&l, &t, &o), 0);
    CHECK_EQ_INT(hone_kernel_loader_state(l, HONE_SLOT_SWIGLU), HONE_KERNEL_REFUSED);
    CHECK_STR_CONTAINS(hone_kernel_loader_detail(l, HONE_SLOT_SWIGLU), "the object verifier refused it");
    CHECK_STR_CONTAINS(hone_kernel_loader_detail(l, HONE_SLOT_SWIGLU), "rdtsc");
    CHECK_EQ_INT(hone_kernel_loader_state(l, HONE_SLOT_ADD), HONE_KERNEL_REFUSED);
    CHECK_STR_CONTAINS(hone_kernel_loader_detail(l, HONE_SLOT_ADD), "mutable global");
    CHECK(t.fn[HONE_SLOT_SWIGLU] == base.fn[HONE_SLOT_SWIGLU] && t.fn[HONE_SLOT_ADD] == base.fn[HONE_SLOT_ADD]);
    hone_kernel_loader_free(l);
    kdir_free(&k);
}

/* The file that serves a slot: the tree's when it has one, else the shipped baseline. */
static void test_source_path(void)
{
    char *root = tmpdir(), cpu[4200], buf[4400], want[4400];
    snprintf(cpu, sizeof cpu, "%s/cpu", root);
    CHECK_EQ_INT(mkdir(cpu, 0700), 0);
    write_file(cpu, "swiglu.c", "/* served */\n");
    CHECK_EQ_INT(hone_kernel_loader_source(buf, sizeof buf, root, "/src", "swiglu"), 1);
    snprintf(want, sizeof want, "%s/cpu/swiglu.c", root);
    CHECK_MSG(!strcmp(buf, want), "%s", buf);
    CHECK_EQ_INT(hone_kernel_loader_source(buf, sizeof buf, root, "/src", "rmsnorm"), 0);
    CHECK_MSG(!strcmp(buf, "/src/kernels/cpu/rmsnorm.c"), "%s", buf);
    CHECK_EQ_INT(hone_kernel_loader_source(buf, sizeof buf, NULL, "/src", "swiglu"), 0);
    CHECK_MSG(!strcmp(buf, "/src/kernels/cpu/swiglu.c"), "%s", buf);
    snprintf(buf, sizeof buf, "rm -rf %s", root);
    CHECK_EQ_INT(system(buf), 0);
    free(root);
}

TEST_MAIN(TEST_CASE(test_source_path), TEST_CASE(test_verifier_refuses), TEST_CASE(test_installs_good_kernel), TEST_CASE(test_baseline_copy_is_not_compiled),
          TEST_CASE(test_refusals), TEST_CASE(test_compile_and_check_api), TEST_CASE(test_model_logits),
          TEST_CASE(test_cli_kernels_flag), TEST_CASE(test_every_baseline_copy_is_bitwise),
          TEST_CASE(test_evidence_object_hash), TEST_CASE(test_evidence_contract_rev))
