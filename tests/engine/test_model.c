/* Tests for engine/model: the generated tiny models load with the hyperparameters and weight
 * shapes tools/make_tiny_model.py gave them; synthetic GGUFs check defaults, tying, biases and
 * every refusal (unsupported architecture, missing or misshapen tensors, bad head counts, a norm
 * stored as f16, out-of-range hyperparameters), each by its message.
 * Exits 77 when everything else passed but the tiny models are absent. */
#include "gguf_writer.h"
#include "harness.h"

#include "engine/dtype.h"
#include "engine/error.h"
#include "engine/model.h"

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ synthetic models */

/* A small Llama-family model description; the *_key / *_tensor fields inject one defect. */
typedef struct {
    const char *arch;          /* general.architecture; NULL leaves the key out */
    int n_layers, n_heads, n_kv_heads, head_dim, ffn, n_vocab;
    int tied, bias;
    const char *name;          /* general.name, or NULL */
    const char *skip_key;      /* "<arch>.<skip_key>" is left out */
    const char *override_key;  /* "<arch>.<override_key>" is written as override_val instead */
    int64_t override_val;
    const char *string_key;    /* "<arch>.<string_key>" is written as a string */
    float rope_base;           /* 0: 10000 */
    const char *skip_tensor;   /* left out */
    const char *wide_tensor;   /* gets one extra row (vectors: a second dimension of 2) */
    const char *f16_tensor;    /* stored as f16 */
    const char *flat2d_tensor; /* vector stored as 2-D [n, 1] */
    const char *arch_u32;      /* write general.architecture as a uint32 */
} mspec;

static mspec base_spec(void)
{
    mspec s = {0};
    s.arch = "llama";
    s.n_layers = 2;
    s.n_heads = 2;
    s.n_kv_heads = 1;
    s.head_dim = 4;
    s.ffn = 12;
    s.n_vocab = 10;
    s.name = "synthetic";
    return s;
}

typedef struct {
    char name[48];
    int64_t rows, cols;
    int vector;
} tdesc;

static int list_tensors(const mspec *s, tdesc *t)
{
    int n = 0, dim = s->n_heads * s->head_dim, kvd = s->n_kv_heads * s->head_dim;
#define T(nm, r, c, v)                                                   \
    do {                                                                 \
        snprintf(t[n].name, sizeof t[n].name, "%s", nm);                 \
        t[n].rows = r;                                                   \
        t[n].cols = c;                                                   \
        t[n].vector = v;                                                 \
        n++;                                                             \
    } while (0)
    T("token_embd.weight", s->n_vocab, dim, 0);
    for (int l = 0; l < s->n_layers; l++) {
        char nm[48];
#define TL(suffix, r, c, v)                                              \
    do {                                                                 \
        snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix);                 \
        T(nm, r, c, v);                                                  \
    } while (0)
        TL("attn_norm.weight", 1, dim, 1);
        TL("attn_q.weight", dim, dim, 0);
        TL("attn_k.weight", kvd, dim, 0);
        TL("attn_v.weight", kvd, dim, 0);
        if (s->bias) {
            TL("attn_q.bias", 1, dim, 1);
            TL("attn_k.bias", 1, kvd, 1);
            TL("attn_v.bias", 1, kvd, 1);
        }
        TL("attn_output.weight", dim, dim, 0);
        TL("ffn_norm.weight", 1, dim, 1);
        TL("ffn_gate.weight", s->ffn, dim, 0);
        TL("ffn_up.weight", s->ffn, dim, 0);
        TL("ffn_down.weight", dim, s->ffn, 0);
#undef TL
    }
    T("output_norm.weight", 1, dim, 1);
    if (!s->tied) T("output.weight", s->n_vocab, dim, 0);
#undef T
    return n;
}

static int is(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* Writes the model described by s; element j of tensor i holds i + j / 1024 (f32). */
static const char *write_model(const char *fname, const mspec *s)
{
    tdesc t[256];
    int nt = list_tensors(s, t), nk = 0;
    wbuf kv = {0}, info = {0}, data = {0};
    const char *a = s->arch ? s->arch : "llama";
    char key[128];
    if (s->arch_u32) {
        w_str(&kv, "general.architecture");
        w_u32(&kv, 4);
        w_u32(&kv, 7);
        nk++;
    } else if (s->arch) {
        w_str(&kv, "general.architecture");
        w_u32(&kv, 8);
        w_str(&kv, s->arch);
        nk++;
    }
    if (s->name) {
        w_str(&kv, "general.name");
        w_u32(&kv, 8);
        w_str(&kv, s->name);
        nk++;
    }
    const struct { const char *suffix; int64_t v; int is_f32; } hp[] = {
        {"block_count", s->n_layers, 0},
        {"context_length", 64, 0},
        {"embedding_length", s->n_heads * s->head_dim, 0},
        {"feed_forward_length", s->ffn, 0},
        {"attention.head_count", s->n_heads, 0},
        {"attention.head_count_kv", s->n_kv_heads, 0},
        {"rope.dimension_count", s->head_dim, 0},
        {"rope.freq_base", 0, 1},
        {"attention.layer_norm_rms_epsilon", 0, 1},
    };
    for (size_t i = 0; i < sizeof hp / sizeof hp[0]; i++) {
        if (is(s->skip_key, hp[i].suffix)) continue;
        snprintf(key, sizeof key, "%s.%s", a, hp[i].suffix);
        w_str(&kv, key);
        nk++;
        if (is(s->string_key, hp[i].suffix)) {
            w_u32(&kv, 8);
            w_str(&kv, "12");
        } else if (is(s->override_key, hp[i].suffix)) {
            w_u32(&kv, 11); /* int64, so negative and huge values fit */
            w_u64(&kv, (uint64_t)s->override_val);
        } else if (hp[i].is_f32) {
            w_u32(&kv, 6);
            w_f32(&kv, strcmp(hp[i].suffix, "rope.freq_base") == 0
                           ? (s->rope_base ? s->rope_base : 10000.0f) : 1e-5f);
        } else {
            w_u32(&kv, 4);
            w_u32(&kv, (uint32_t)hp[i].v);
        }
    }
    int written = 0;
    for (int i = 0; i < nt; i++) {
        if (is(s->skip_tensor, t[i].name)) continue;
        int f16 = is(s->f16_tensor, t[i].name);
        int64_t rows = t[i].rows, cols = t[i].cols;
        uint64_t ne[2] = {(uint64_t)cols, (uint64_t)rows};
        uint32_t nd = t[i].vector ? 1 : 2;
        if (is(s->wide_tensor, t[i].name)) {
            if (t[i].vector) nd = 2, ne[1] = 2;
            else ne[1]++;
        }
        if (is(s->flat2d_tensor, t[i].name)) nd = 2;
        uint64_t count = ne[0] * (nd == 2 ? ne[1] : 1);
        while (data.n % 32) w_raw(&data, "", 1);
        w_str(&info, t[i].name);
        w_u32(&info, nd);
        for (uint32_t d = 0; d < nd; d++) w_u64(&info, ne[d]);
        w_u32(&info, f16 ? HONE_DTYPE_F16 : HONE_DTYPE_F32);
        w_u64(&info, data.n);
        for (uint64_t j = 0; j < count; j++) {
            float v = (float)i + (float)j / 1024.0f;
            if (f16) {
                uint16_t h = hone_f32_to_fp16(v);
                w_raw(&data, &h, 2);
            } else {
                w_f32(&data, v);
            }
        }
        written++;
    }
    wbuf file = {0};
    w_raw(&file, "GGUF", 4);
    w_u32(&file, 3);
    w_u64(&file, (uint64_t)written);
    w_u64(&file, (uint64_t)nk);
    w_raw(&file, kv.p, kv.n);
    w_raw(&file, info.p, info.n);
    while (file.n % 32) w_raw(&file, "", 1);
    w_raw(&file, data.p, data.n);
    const char *path = tmp_path(fname);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(file.p, 1, file.n, f) != file.n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
    free(kv.p);
    free(info.p);
    free(data.p);
    free(file.p);
    return path;
}

static void expect_refused_at(int line, const char *fname, const mspec *s, int code, const char *needle)
{
    const char *path = write_model(fname, s);
    hone_model *m = (hone_model *)&m;
    int rc = hone_model_load(&m, path);
    CHECK_MSG(rc == code, "line %d: rc %d (%s), expected %d; message: %s", line, rc,
              hone_error_name(rc), code, hone_error_last());
    CHECK_MSG(m == NULL, "line %d: out not NULL on failure", line);
    const char *msg = hone_error_last();
    CHECK_MSG(strstr(msg, needle), "line %d: \"%s\" does not contain \"%s\"", line, msg, needle);
    CHECK_MSG(strstr(msg, path), "line %d: \"%s\" does not name the file", line, msg);
    if (rc == 0) hone_model_free(m);
}
#define EXPECT_REFUSED(fname, spec, code, needle) expect_refused_at(__LINE__, fname, spec, code, needle)

static hone_model *load_ok_at(int line, const char *path)
{
    hone_model *m = NULL;
    int rc = hone_model_load(&m, path);
    CHECK_MSG(rc == 0 && m, "line %d: %s: rc %d: %s", line, path, rc, hone_error_last());
    return rc == 0 ? m : NULL;
}
#define LOAD_OK(path) load_ok_at(__LINE__, path)

static float f32_at(const hone_weight *w, int64_t i)
{
    float v;
    memcpy(&v, (const float *)w->data + i, 4);
    return v;
}

/* Checks that every weight is bound to the tensor of its name with the expected shape. */
static void check_weight(const hone_model *m, const hone_weight *w, const char *name, int64_t rows,
                         int64_t cols)
{
    const hone_gguf_tensor *t = hone_gguf_find_tensor(hone_model_gguf(m), name);
    CHECK_MSG(t && w->data == t->data && w->name && strcmp(w->name, name) == 0, "%s not bound", name);
    CHECK_MSG(w->rows == rows && w->cols == cols, "%s: %lld x %lld, expected %lld x %lld", name,
              (long long)w->rows, (long long)w->cols, (long long)rows, (long long)cols);
    if (t) CHECK_EQ_INT(w->dtype, t->dtype);
}

static int64_t wb(const hone_weight *w)
{
    return w->data ? w->rows * hone_dtype_row_bytes(w->dtype, w->cols) : 0;
}

/* Sum of the weights read per decode step, computed independently of hone_model_weight_bytes. */
static int64_t expected_weight_bytes(const hone_model *m)
{
    const hone_hparams *hp = hone_model_hparams(m);
    int64_t b = wb(hone_model_output(m)) + wb(hone_model_output_norm(m));
    for (int64_t i = 0; i < hp->n_layers; i++) {
        const hone_layer *L = hone_model_layer(m, i);
        const hone_weight *all[] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->bq, &L->bk, &L->bv,
                                    &L->wo, &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) b += wb(all[k]);
    }
    return b;
}

static void check_layers(const hone_model *m)
{
    const hone_hparams *hp = hone_model_hparams(m);
    int64_t qd = hp->n_heads * hp->head_dim, kvd = hp->n_kv_heads * hp->head_dim;
    for (int64_t i = 0; i < hp->n_layers; i++) {
        const hone_layer *L = hone_model_layer(m, i);
        char nm[64];
#define W(field, suffix, r, c)                                    \
    snprintf(nm, sizeof nm, "blk.%lld.%s", (long long)i, suffix); \
    check_weight(m, &L->field, nm, r, c);
        W(attn_norm, "attn_norm.weight", 1, hp->dim)
        W(wq, "attn_q.weight", qd, hp->dim)
        W(wk, "attn_k.weight", kvd, hp->dim)
        W(wv, "attn_v.weight", kvd, hp->dim)
        W(wo, "attn_output.weight", hp->dim, qd)
        W(ffn_norm, "ffn_norm.weight", 1, hp->dim)
        W(w_gate, "ffn_gate.weight", hp->ffn, hp->dim)
        W(w_up, "ffn_up.weight", hp->ffn, hp->dim)
        W(w_down, "ffn_down.weight", hp->dim, hp->ffn)
        if (hp->has_qkv_bias) {
            W(bq, "attn_q.bias", 1, qd)
            W(bk, "attn_k.bias", 1, kvd)
            W(bv, "attn_v.bias", 1, kvd)
        } else {
            CHECK(L->bq.data == NULL && L->bk.data == NULL && L->bv.data == NULL);
        }
#undef W
        CHECK_EQ_INT(L->attn_norm.dtype, HONE_DTYPE_F32);
        CHECK_EQ_INT(L->ffn_norm.dtype, HONE_DTYPE_F32);
    }
    check_weight(m, hone_model_tok_embd(m), "token_embd.weight", hp->n_vocab, hp->dim);
    check_weight(m, hone_model_output_norm(m), "output_norm.weight", 1, hp->dim);
    if (hp->tied) {
        CHECK(hone_model_output(m)->data == hone_model_tok_embd(m)->data);
        CHECK(hone_gguf_find_tensor(hone_model_gguf(m), "output.weight") == NULL);
    } else {
        check_weight(m, hone_model_output(m), "output.weight", hp->n_vocab, hp->dim);
        CHECK(hone_model_output(m)->data != hone_model_tok_embd(m)->data);
    }
    CHECK_EQ_INT(hone_model_weight_bytes(m), expected_weight_bytes(m));
}

/* ------------------------------------------------------------ synthetic: accepted */

static void test_synthetic_llama(void)
{
    mspec s = base_spec();
    hone_model *m = LOAD_OK(write_model("llama.gguf", &s));
    if (!m) return;
    const hone_hparams *hp = hone_model_hparams(m);
    CHECK(strcmp(hp->arch, "llama") == 0);
    CHECK_EQ_INT(hp->n_layers, 2);
    CHECK_EQ_INT(hp->dim, 8);
    CHECK_EQ_INT(hp->n_heads, 2);
    CHECK_EQ_INT(hp->n_kv_heads, 1);
    CHECK_EQ_INT(hp->head_dim, 4);
    CHECK_EQ_INT(hp->n_rot, 4);
    CHECK_EQ_INT(hp->ffn, 12);
    CHECK_EQ_INT(hp->n_vocab, 10);
    CHECK_EQ_INT(hp->n_ctx_train, 64);
    CHECK_NEAR(hp->rope_base, 10000.0, 0);
    CHECK_NEAR(hp->norm_eps, 1e-5f, 0);
    CHECK_EQ_INT(hp->rope_neox, 0);
    CHECK_EQ_INT(hp->tied, 0);
    CHECK_EQ_INT(hp->has_qkv_bias, 0);
    CHECK(strcmp(hone_model_name(m), "synthetic") == 0);
    check_layers(m);
    /* the bound data is the file's: tensor 0 (token_embd) element 3 = 0 + 3/1024,
     * tensor 2 (blk.0.attn_q) element 1 = 2 + 1/1024 */
    CHECK_NEAR(f32_at(hone_model_tok_embd(m), 3), 3.0 / 1024, 0);
    CHECK_NEAR(f32_at(&hone_model_layer(m, 0)->wq, 1), 2.0 + 1.0 / 1024, 0);
    /* f32 throughout: 4 bytes per element of every matrix and norm except the embedding */
    int64_t per_layer = 8 + 64 + 32 + 32 + 64 + 8 + 96 + 96 + 96;
    CHECK_EQ_INT(hone_model_weight_bytes(m), 4 * (80 + 8 + 2 * per_layer));
    hone_model_free(m);
    hone_model_free(NULL);
}

static void test_synthetic_variants(void)
{
    /* tied output, no general.name (the file's basename names it), larger rope base */
    mspec s = base_spec();
    s.tied = 1;
    s.name = NULL;
    s.rope_base = 500000.0f;
    hone_model *m = LOAD_OK(write_model("tied_noname.gguf", &s));
    if (m) {
        CHECK_EQ_INT(hone_model_hparams(m)->tied, 1);
        CHECK_NEAR(hone_model_hparams(m)->rope_base, 500000.0, 0);
        CHECK(strcmp(hone_model_name(m), "tied_noname.gguf") == 0);
        check_layers(m);
        hone_model_free(m);
    }
    /* qwen2: NeoX rope and QKV biases */
    s = base_spec();
    s.arch = "qwen2";
    s.bias = 1;
    m = LOAD_OK(write_model("qwen2.gguf", &s));
    if (m) {
        const hone_hparams *hp = hone_model_hparams(m);
        CHECK(strcmp(hp->arch, "qwen2") == 0);
        CHECK_EQ_INT(hp->rope_neox, 1);
        CHECK_EQ_INT(hp->has_qkv_bias, 1);
        const hone_layer *L = hone_model_layer(m, 1);
        CHECK(L->bq.data && L->bq.rows == 1 && L->bq.cols == 8);
        CHECK(L->bk.data && L->bk.cols == 4 && L->bv.cols == 4);
        check_layers(m);
        hone_model_free(m);
    }
    /* mistral is served, with the normal rope layout */
    s = base_spec();
    s.arch = "mistral";
    m = LOAD_OK(write_model("mistral.gguf", &s));
    if (m) {
        CHECK(strcmp(hone_model_hparams(m)->arch, "mistral") == 0);
        CHECK_EQ_INT(hone_model_hparams(m)->rope_neox, 0);
        hone_model_free(m);
    }
    /* optional keys take their defaults: KV heads = heads, context 2048, rope base 10000,
     * rotated dims = head dim */
    s = base_spec();
    s.n_kv_heads = 2;
    s.skip_key = "attention.head_count_kv";
    m = LOAD_OK(write_model("no_kv_heads.gguf", &s));
    if (m) {
        CHECK_EQ_INT(hone_model_hparams(m)->n_kv_heads, 2);
        hone_model_free(m);
    }
    s = base_spec();
    s.skip_key = "context_length";
    m = LOAD_OK(write_model("no_ctx.gguf", &s));
    if (m) {
        CHECK_EQ_INT(hone_model_hparams(m)->n_ctx_train, 2048);
        hone_model_free(m);
    }
    s = base_spec();
    s.skip_key = "rope.freq_base";
    m = LOAD_OK(write_model("no_rope_base.gguf", &s));
    if (m) {
        CHECK_NEAR(hone_model_hparams(m)->rope_base, 10000.0, 0);
        hone_model_free(m);
    }
    s = base_spec();
    s.skip_key = "rope.dimension_count";
    m = LOAD_OK(write_model("no_rot.gguf", &s));
    if (m) {
        CHECK_EQ_INT(hone_model_hparams(m)->n_rot, 4);
        hone_model_free(m);
    }
    /* partial rotary: 2 of 4 dims */
    s = base_spec();
    s.override_key = "rope.dimension_count";
    s.override_val = 2;
    m = LOAD_OK(write_model("rot2.gguf", &s));
    if (m) {
        CHECK_EQ_INT(hone_model_hparams(m)->n_rot, 2);
        hone_model_free(m);
    }
}

/* ------------------------------------------------------------ synthetic: refused */

static void test_unsupported_arch(void)
{
    static const char *const archs[] = {"gpt2", "falcon", "llama4", "Llama", "qwen2moe"};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        mspec s = base_spec();
        s.arch = archs[i];
        char want[128];
        snprintf(want, sizeof want, "unsupported architecture '%s' (Hone serves llama, mistral, "
                 "qwen2, qwen3, gemma3)",
                 archs[i]);
        EXPECT_REFUSED("arch.gguf", &s, HONE_EUNSUPPORTED, want);
    }
    mspec s = base_spec();
    s.arch = NULL;
    EXPECT_REFUSED("noarch.gguf", &s, HONE_EFORMAT, "missing metadata key 'general.architecture'");
    s = base_spec();
    s.arch_u32 = "yes";
    EXPECT_REFUSED("arch_u32.gguf", &s, HONE_EFORMAT,
                   "metadata key 'general.architecture' is uint32, expected a string");
}

static void test_missing_tensors(void)
{
    static const char *const names[] = {"token_embd.weight", "output_norm.weight", "output.weight",
                                        "blk.0.attn_norm.weight", "blk.0.attn_q.weight",
                                        "blk.1.ffn_up.weight", "blk.1.ffn_down.weight",
                                        "blk.1.attn_output.weight"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        mspec s = base_spec();
        s.skip_tensor = names[i];
        char want[96];
        snprintf(want, sizeof want, "missing tensor '%s'", names[i]);
        if (strcmp(names[i], "output.weight") == 0) {
            /* no output.weight means tied: that loads */
            hone_model *m = LOAD_OK(write_model("missing.gguf", &s));
            if (m) CHECK_EQ_INT(hone_model_hparams(m)->tied, 1);
            hone_model_free(m);
            continue;
        }
        EXPECT_REFUSED("missing.gguf", &s, HONE_EFORMAT, want);
    }
    /* blk.0 has QKV biases, so every layer must */
    mspec s = base_spec();
    s.arch = "qwen2";
    s.bias = 1;
    s.skip_tensor = "blk.1.attn_v.bias";
    EXPECT_REFUSED("missing_bias.gguf", &s, HONE_EFORMAT, "missing tensor 'blk.1.attn_v.bias'");
}

static void test_wrong_shapes(void)
{
    static const struct { const char *name, *want; } cases[] = {
        {"blk.0.attn_k.weight", "tensor 'blk.0.attn_k.weight' has shape [8, 5], expected [8, 4]"},
        {"blk.1.attn_q.weight", "tensor 'blk.1.attn_q.weight' has shape [8, 9], expected [8, 8]"},
        {"blk.1.ffn_down.weight", "tensor 'blk.1.ffn_down.weight' has shape [12, 9], expected [12, 8]"},
        {"output.weight", "tensor 'output.weight' has shape [8, 11], expected [8, 10]"},
        {"blk.0.ffn_norm.weight", "tensor 'blk.0.ffn_norm.weight' has shape [8, 2], expected [8, 1]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mspec s = base_spec();
        s.wide_tensor = cases[i].name;
        EXPECT_REFUSED("shape.gguf", &s, HONE_EFORMAT, cases[i].want);
    }
    /* a norm stored as a 2-D [8, 1] matrix is not a vector */
    mspec s = base_spec();
    s.flat2d_tensor = "output_norm.weight";
    EXPECT_REFUSED("norm2d.gguf", &s, HONE_EFORMAT, "tensor 'output_norm.weight' has shape [8, 1]");
    /* the vocabulary comes from token_embd; output must agree with it */
    s = base_spec();
    s.wide_tensor = "token_embd.weight";
    EXPECT_REFUSED("embd.gguf", &s, HONE_EFORMAT, "tensor 'output.weight' has shape [8, 10], expected [8, 11]");
}

static void test_heads(void)
{
    mspec s = base_spec();
    s.n_heads = 4;
    s.head_dim = 2;
    s.n_kv_heads = 3;
    EXPECT_REFUSED("heads43.gguf", &s, HONE_EFORMAT, "4 heads are not a multiple of 3 KV heads");
    s = base_spec();
    s.n_kv_heads = 4;
    EXPECT_REFUSED("kv_gt_heads.gguf", &s, HONE_EFORMAT,
                   "llama.attention.head_count_kv = 4 is out of range [1, 2]");
    s = base_spec();
    s.override_key = "attention.head_count_kv";
    s.override_val = 0;
    EXPECT_REFUSED("kv0.gguf", &s, HONE_EFORMAT, "llama.attention.head_count_kv = 0 is out of range");
    s = base_spec();
    s.override_key = "attention.head_count";
    s.override_val = 0;
    EXPECT_REFUSED("heads0.gguf", &s, HONE_EFORMAT, "llama.attention.head_count = 0 is out of range [1, 4096]");
}

static void test_f16_norm(void)
{
    static const char *const names[] = {"blk.0.attn_norm.weight", "blk.1.ffn_norm.weight",
                                        "output_norm.weight"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        mspec s = base_spec();
        s.f16_tensor = names[i];
        char want[128];
        snprintf(want, sizeof want, "tensor '%s' is f16; norms and biases must be f32", names[i]);
        EXPECT_REFUSED("f16norm.gguf", &s, HONE_EUNSUPPORTED, want);
    }
    mspec s = base_spec();
    s.arch = "qwen2";
    s.bias = 1;
    s.f16_tensor = "blk.0.attn_k.bias";
    EXPECT_REFUSED("f16bias.gguf", &s, HONE_EUNSUPPORTED,
                   "tensor 'blk.0.attn_k.bias' is f16; norms and biases must be f32");
    /* an f16 matrix is fine */
    s = base_spec();
    s.f16_tensor = "blk.0.attn_q.weight";
    hone_model *m = LOAD_OK(write_model("f16matrix.gguf", &s));
    if (m) {
        CHECK_EQ_INT(hone_model_layer(m, 0)->wq.dtype, HONE_DTYPE_F16);
        check_layers(m);
        hone_model_free(m);
    }
}

static void test_bad_hparams(void)
{
    static const struct { const char *skip; const char *want; } missing[] = {
        {"block_count", "missing metadata key 'llama.block_count'"},
        {"embedding_length", "missing metadata key 'llama.embedding_length'"},
        {"feed_forward_length", "missing metadata key 'llama.feed_forward_length'"},
        {"attention.head_count", "missing metadata key 'llama.attention.head_count'"},
        {"attention.layer_norm_rms_epsilon",
         "missing metadata key 'llama.attention.layer_norm_rms_epsilon'"},
    };
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        mspec s = base_spec();
        s.skip_key = missing[i].skip;
        EXPECT_REFUSED("hp_missing.gguf", &s, HONE_EFORMAT, missing[i].want);
    }
    static const struct { const char *key; int64_t v; const char *want; } range[] = {
        {"block_count", 0, "llama.block_count = 0 is out of range [1, 1024]"},
        {"block_count", 1025, "llama.block_count = 1025 is out of range [1, 1024]"},
        {"block_count", -1, "llama.block_count = -1 is out of range"},
        {"embedding_length", 0, "llama.embedding_length = 0 is out of range"},
        {"feed_forward_length", 1ll << 40, "llama.feed_forward_length = 1099511627776 is out of range"},
        {"context_length", 0, "llama.context_length = 0 is out of range [1, 16777216]"},
        {"rope.dimension_count", 3, "rope.dimension_count 3 is odd"},
        {"rope.dimension_count", 6, "llama.rope.dimension_count = 6 is out of range [2, 4]"},
        {"rope.dimension_count", 0, "llama.rope.dimension_count = 0 is out of range"},
    };
    for (size_t i = 0; i < sizeof range / sizeof range[0]; i++) {
        mspec s = base_spec();
        s.override_key = range[i].key;
        s.override_val = range[i].v;
        EXPECT_REFUSED("hp_range.gguf", &s, HONE_EFORMAT, range[i].want);
    }
    /* head dim 1 (dim 2 over 2 heads) */
    mspec s = base_spec();
    s.head_dim = 1;
    EXPECT_REFUSED("hd1.gguf", &s, HONE_EFORMAT, "attention.key_length (head dim) = 1 is out of range");
    s = base_spec();
    s.string_key = "block_count";
    EXPECT_REFUSED("hp_str.gguf", &s, HONE_EFORMAT, "metadata key 'llama.block_count' is string, "
                                                    "expected an integer");
    s = base_spec();
    s.string_key = "rope.freq_base";
    EXPECT_REFUSED("hp_str2.gguf", &s, HONE_EFORMAT, "metadata key 'llama.rope.freq_base' is string, "
                                                     "expected a number");
    s = base_spec();
    s.rope_base = -1.0f;
    EXPECT_REFUSED("rope_neg.gguf", &s, HONE_EFORMAT, "rope.freq_base -1 or rms epsilon");
}

static void test_file_errors(void)
{
    hone_model *m = (hone_model *)&m;
    const char *missing = tmp_path("nope.gguf");
    CHECK_EQ_INT(hone_model_load(&m, missing), HONE_EIO);
    CHECK(m == NULL);
    CHECK_STR_CONTAINS(hone_error_last(), missing);
    /* a truncated model is a format error from the reader */
    mspec s = base_spec();
    const char *path = write_model("trunc.gguf", &s);
    struct stat st;
    CHECK(stat(path, &st) == 0 && truncate(path, st.st_size - 10) == 0);
    CHECK_EQ_INT(hone_model_load(&m, path), HONE_EFORMAT);
    CHECK(m == NULL);
    CHECK_STR_CONTAINS(hone_error_last(), "truncated file: tensor 'output.weight' data");
}

/* ------------------------------------------------------------ the tiny models */

static int models_missing;

static hone_model *load_tiny(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", HONE_TEST_DATA_DIR, name);
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "  %s not found\n", path);
        models_missing = 1;
        return NULL;
    }
    hone_model *m = LOAD_OK(path);
    if (m) CHECK(strcmp(hone_model_name(m), name) == 0);
    return m;
}

typedef struct {
    const char *name, *arch;
    int64_t n_kv_heads, n_vocab;
    double rope_base, eps;
    int neox, tied, bias;
} tiny_expect;

static void test_tiny_models(void)
{
    /* tools/make_tiny_model.py: 2 layers, 4 heads of 16 (dim 64), ffn 96, context 256; the BPE
     * vocabulary has 2048 tokens, the SentencePiece one 512 */
    static const tiny_expect ex[] = {
        {"tiny-llama-f32", "llama", 2, 2048, 10000.0, 1e-5, 0, 0, 0},
        {"tiny-llama-mha-tied-f32", "llama", 4, 2048, 10000.0, 1e-5, 0, 1, 0},
        {"tiny-qwen2-f32", "qwen2", 2, 2048, 1000000.0, 1e-6, 1, 1, 1},
        {"tiny-mistral-f32", "mistral", 2, 512, 10000.0, 1e-5, 0, 0, 0},
        {"tiny-llama-spm-f32", "llama", 2, 512, 10000.0, 1e-5, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++) {
        hone_model *m = load_tiny(ex[i].name);
        if (!m) continue;
        const hone_hparams *hp = hone_model_hparams(m);
        CHECK_MSG(strcmp(hp->arch, ex[i].arch) == 0, "%s: arch %s", ex[i].name, hp->arch);
        CHECK_EQ_INT(hp->n_layers, 2);
        CHECK_EQ_INT(hp->dim, 64);
        CHECK_EQ_INT(hp->n_heads, 4);
        CHECK_EQ_INT(hp->n_kv_heads, ex[i].n_kv_heads);
        CHECK_EQ_INT(hp->head_dim, 16);
        CHECK_EQ_INT(hp->n_rot, 16);
        CHECK_EQ_INT(hp->ffn, 96);
        CHECK_EQ_INT(hp->n_vocab, ex[i].n_vocab);
        CHECK_EQ_INT(hp->n_ctx_train, 256);
        CHECK_NEAR(hp->rope_base, ex[i].rope_base, 0);
        CHECK_NEAR(hp->norm_eps, (float)ex[i].eps, 0);
        CHECK_EQ_INT(hp->rope_neox, ex[i].neox);
        CHECK_EQ_INT(hp->tied, ex[i].tied);
        CHECK_EQ_INT(hp->has_qkv_bias, ex[i].bias);
        check_layers(m);
        if (strcmp(ex[i].name, "tiny-llama-f32") == 0) {
            /* output 2048x64 + norm 64 + 2 x (norms 2x64, q/o 2x64x64, k/v 2x32x64, ffn 3x96x64), x4 */
            CHECK_EQ_INT(hone_model_weight_bytes(m), 771328);
            CHECK_EQ_INT(hone_model_layer(m, 1)->wk.rows, 32);
        }
        if (strcmp(ex[i].name, "tiny-llama-mha-tied-f32") == 0)
            CHECK_EQ_INT(hone_model_weight_bytes(m), 804096);
        if (ex[i].bias) {
            CHECK_EQ_INT(hone_model_layer(m, 0)->bq.cols, 64);
            CHECK_EQ_INT(hone_model_layer(m, 0)->bk.cols, 32);
            CHECK_EQ_INT(hone_model_layer(m, 0)->bv.cols, 32);
        }
        hone_model_free(m);
    }
}

/* The dtype variants carry the f32 model's weights, each within its format's rounding. */
static void test_tiny_dtypes(void)
{
    static const struct { const char *name; int dtype; double tol; } v[] = {
        {"tiny-llama-f16", HONE_DTYPE_F16, 1e-3},   {"tiny-llama-bf16", HONE_DTYPE_BF16, 1e-2},
        {"tiny-llama-q8_0", HONE_DTYPE_Q8_0, 2e-2}, {"tiny-llama-q4_0", HONE_DTYPE_Q4_0, 0.2},
        {"tiny-llama-q4_1", HONE_DTYPE_Q4_1, 0.2},
    };
    hone_model *ref = load_tiny("tiny-llama-f32");
    if (!ref) return;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        hone_model *m = load_tiny(v[i].name);
        if (!m) continue;
        const hone_hparams *hp = hone_model_hparams(m);
        CHECK_EQ_INT(hp->n_vocab, 2048);
        CHECK_EQ_INT(hp->tied, 0);
        check_layers(m);
        const hone_layer *L = hone_model_layer(m, 1), *R = hone_model_layer(ref, 1);
        CHECK_EQ_INT(L->wq.dtype, v[i].dtype);
        CHECK_EQ_INT(L->w_down.dtype, v[i].dtype);
        CHECK_EQ_INT(hone_model_tok_embd(m)->dtype, v[i].dtype);
        CHECK_EQ_INT(L->attn_norm.dtype, HONE_DTYPE_F32);
        CHECK_EQ_INT(hone_model_output_norm(m)->dtype, HONE_DTYPE_F32);
        /* norms are shipped as f32 in every variant: identical */
        CHECK(memcmp(L->ffn_norm.data, R->ffn_norm.data, 64 * 4) == 0);
        /* a row of each matrix kind dequantises to the f32 model's row */
        const hone_weight *pairs[][2] = {{&L->wq, &R->wq}, {&L->w_down, &R->w_down},
                                         {hone_model_tok_embd(m), hone_model_tok_embd(ref)}};
        for (size_t p = 0; p < 3; p++) {
            const hone_weight *w = pairs[p][0], *r = pairs[p][1];
            float got[128], want[128];
            double maxerr = 0;
            for (int64_t row = 0; row < w->rows; row += w->rows / 4) {
                hone_dtype_dequant_row(w->dtype, w->data, row, w->cols, got);
                hone_dtype_dequant_row(r->dtype, r->data, row, r->cols, want);
                for (int64_t c = 0; c < w->cols; c++) maxerr = fmax(maxerr, fabs(got[c] - want[c]));
            }
            CHECK_MSG(maxerr <= v[i].tol && maxerr > 0, "%s %s: max error %g (tol %g)", v[i].name,
                      w->name, maxerr, v[i].tol);
        }
        hone_model_free(m);
    }
    hone_model_free(ref);
}

int main(int argc, char **argv)
{
    static const harness_case cases[] = {
        TEST_CASE(test_synthetic_llama), TEST_CASE(test_synthetic_variants),
        TEST_CASE(test_unsupported_arch), TEST_CASE(test_missing_tensors),
        TEST_CASE(test_wrong_shapes), TEST_CASE(test_heads), TEST_CASE(test_f16_norm),
        TEST_CASE(test_bad_hparams), TEST_CASE(test_file_errors), TEST_CASE(test_tiny_models),
        TEST_CASE(test_tiny_dtypes),
    };
    int rc = harness_run(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
    if (rc == 0 && models_missing) {
        fprintf(stderr, "tiny models missing from %s: skipped\n", HONE_TEST_DATA_DIR);
        return 77;
    }
    return rc;
}
