/* Model loading: Llama-family hyperparameters and weight validation. */
#include "model.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "error.h"
#include "hugemem.h"

struct hone_model {
    hone_gguf *g;
    hone_hparams hp;
    hone_weight tok_embd, output_norm, output;
    hone_weight rope_freqs;   /* [n_rot / 2] f32 (llama3) or data NULL */
    hone_layer *layers;
    char name[128];
    pthread_mutex_t lock;   /* guards the move into resident memory */
    int resident_done;
    hone_huge_map arena;    /* the tensor data in anonymous huge pages (base NULL: none) */
};

/* The weights of one layer, for walks over all of them. */
#define LAYER_WEIGHTS 16
static void layer_weights(hone_layer *L, hone_weight *w[LAYER_WEIGHTS])
{
    hone_weight *all[LAYER_WEIGHTS] = {&L->attn_norm, &L->wq,  &L->wk,       &L->wv,
                                       &L->bq,        &L->bk,  &L->bv,       &L->wo,
                                       &L->ffn_norm,  &L->w_gate, &L->w_up, &L->w_down,
                                       &L->q_norm,    &L->k_norm, &L->post_attn_norm,
                                       &L->post_ffn_norm};
    memcpy(w, all, sizeof all);
}

static const char *const supported_archs[] = {"llama", "mistral", "qwen2", "qwen3", "gemma3"};

/* Reads "<arch>.<suffix>" as an integer; required unless opt. */
static int arch_i64(const hone_gguf *g, const char *arch, const char *suffix, int64_t *out, int opt)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return opt ? hone_gguf_get_i64_opt(g, key, out) : hone_gguf_get_i64(g, key, out);
}

static int arch_f64(const hone_gguf *g, const char *arch, const char *suffix, double *out, int opt)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return opt ? hone_gguf_get_f64_opt(g, key, out) : hone_gguf_get_f64(g, key, out);
}

/* Binds w to tensor `name`, checking its shape (rows x cols; rows 1 with n_dims 1 for vectors)
 * and, for vectors, that it is f32. Missing tensors are an error unless optional. */
static int bind(hone_model *m, hone_weight *w, const char *name, int64_t rows, int64_t cols,
                int vector, int optional)
{
    const hone_gguf_tensor *t = hone_gguf_find_tensor(m->g, name);
    memset(w, 0, sizeof *w);
    if (!t) {
        if (optional) return 0;
        return hone_error_set(HONE_EFORMAT, "%s: missing tensor '%s'", hone_gguf_path(m->g), name);
    }
    int64_t t_rows = t->ne[1] * t->ne[2] * t->ne[3];
    if (t->ne[0] != cols || t_rows != rows || (vector && t->n_dims != 1))
        return hone_error_set(HONE_EFORMAT,
                              "%s: tensor '%s' has shape [%lld, %lld], expected [%lld, %lld] "
                              "(ne0 = cols, ne1 = rows)",
                              hone_gguf_path(m->g), name, (long long)t->ne[0], (long long)t_rows,
                              (long long)cols, (long long)rows);
    if (vector && t->dtype != HONE_DTYPE_F32)
        return hone_error_set(HONE_EUNSUPPORTED, "%s: tensor '%s' is %s; norms and biases must be f32",
                              hone_gguf_path(m->g), name, hone_dtype_name(t->dtype));
    w->data = t->data;
    w->dtype = t->dtype;
    w->rows = rows;
    w->cols = cols;
    w->name = t->name;
    return 0;
}

/* The features beyond Llama's that the architecture and the file say (hone_hparams' second
 * half): QK norm, Gemma 3's post-norms, GELU FFN, embedding scale, attention scale and
 * interleaved sliding-window layers, the sliding window of any architecture, llama3 RoPE
 * frequency factors. What changes the function and is not served is refused by name. */
static int read_arch_features(hone_model *m)
{
    const hone_gguf *g = m->g;
    hone_hparams *hp = &m->hp;
    const char *a = hp->arch, *path = hone_gguf_path(g);
    int gemma3 = strcmp(a, "gemma3") == 0;
    int rc;
    hp->attn_scale = (float)(1.0 / sqrt((double)hp->head_dim));
    hp->qk_norm = strcmp(a, "qwen3") == 0 || gemma3;
    hp->rope_freqs = hone_gguf_find_tensor(g, "rope_freqs.weight") != NULL;
    int64_t swa = 0;
    if ((rc = arch_i64(g, a, "attention.sliding_window", &swa, 1))) return rc;
    if (swa < 0 || swa > (1 << 24))
        return hone_error_set(HONE_EFORMAT, "%s: %s.attention.sliding_window = %lld is out of range",
                              path, a, (long long)swa);
    hp->swa = swa;
    double cap = 0;
    if ((rc = arch_f64(g, a, "final_logit_softcapping", &cap, 1))) return rc;
    if (!(cap >= 0 && cap < 1e6))
        return hone_error_set(HONE_EFORMAT, "%s: %s.final_logit_softcapping %g is out of range", path,
                              a, cap);
    hp->final_softcap = (float)cap;
    char key[96];
    snprintf(key, sizeof key, "%s.attn_logit_softcapping", a);
    if (hone_gguf_find_key(g, key) >= 0)
        return hone_error_set(HONE_EUNSUPPORTED, "%s: attention logit soft-capping (%s) is not "
                              "supported", path, key);
    if (gemma3) {
        hp->post_norms = 1;
        hp->geglu = 1;
        hp->embd_scale = sqrtf((float)hp->dim);
        hp->rope_base_swa = 10000.0f;
        int64_t pattern = 6;
        if ((rc = arch_i64(g, a, "attention.sliding_window_pattern", &pattern, 1))) return rc;
        if (pattern < 1 || pattern > 1024)
            return hone_error_set(HONE_EFORMAT, "%s: %s.attention.sliding_window_pattern = %lld is "
                                  "out of range", path, a, (long long)pattern);
        hp->swa_pattern = (int)pattern;
        /* llama.cpp's rule: the 27B (62 layers) scales by query_pre_attn_scalar = dim / heads */
        if (hp->n_layers == 62) hp->attn_scale = (float)(1.0 / sqrt((double)hp->dim / (double)hp->n_heads));
        if (!hp->swa)
            return hone_error_set(HONE_EFORMAT, "%s: gemma3 without %s.attention.sliding_window", path, a);
    }
    return 0;
}

int64_t hone_model_layer_window(const hone_model *m, int64_t l)
{
    const hone_hparams *hp = &m->hp;
    if (!hp->swa) return 0;
    if (hp->swa_pattern && l % hp->swa_pattern == hp->swa_pattern - 1) return 0;
    return hp->swa;
}

float hone_model_layer_rope_base(const hone_model *m, int64_t l)
{
    const hone_hparams *hp = &m->hp;
    if (hp->swa_pattern && hone_model_layer_window(m, l)) return hp->rope_base_swa;
    return hp->rope_base;
}

static int read_hparams(hone_model *m)
{
    const hone_gguf *g = m->g;
    hone_hparams *hp = &m->hp;
    hone_gguf_str arch;
    int rc;
    if ((rc = hone_gguf_get_str(g, "general.architecture", &arch))) return rc;
    if (memchr(arch.ptr, 0, arch.len))
        return hone_error_set(HONE_EFORMAT, "%s: general.architecture contains a NUL byte",
                              hone_gguf_path(g));
    if (arch.len >= sizeof hp->arch) arch.len = sizeof hp->arch - 1;
    memcpy(hp->arch, arch.ptr, arch.len);
    hp->arch[arch.len] = 0;
    int ok = 0;
    for (size_t i = 0; i < sizeof supported_archs / sizeof supported_archs[0]; i++)
        ok |= strcmp(hp->arch, supported_archs[i]) == 0;
    if (!ok)
        return hone_error_set(HONE_EUNSUPPORTED,
                              "%s: unsupported architecture '%s' (Hone serves llama, mistral, "
                              "qwen2, qwen3, gemma3)",
                              hone_gguf_path(g), hp->arch);
    const char *a = hp->arch;
    double base = 10000.0, eps = 1e-5;
    if ((rc = arch_i64(g, a, "block_count", &hp->n_layers, 0)) ||
        (rc = arch_i64(g, a, "embedding_length", &hp->dim, 0)) ||
        (rc = arch_i64(g, a, "feed_forward_length", &hp->ffn, 0)) ||
        (rc = arch_i64(g, a, "attention.head_count", &hp->n_heads, 0)))
        return rc;
    hp->n_kv_heads = hp->n_heads;
    hp->n_ctx_train = 2048;
    if ((rc = arch_i64(g, a, "attention.head_count_kv", &hp->n_kv_heads, 1)) ||
        (rc = arch_i64(g, a, "context_length", &hp->n_ctx_train, 1)) ||
        (rc = arch_f64(g, a, "rope.freq_base", &base, 1)) ||
        (rc = arch_f64(g, a, "attention.layer_norm_rms_epsilon", &eps, 0)))
        return rc;
    const char *path = hone_gguf_path(g);
/* key: the metadata key's suffix, so the message names what the file says */
#define RANGE(v, key, lo, hi)                                                                    \
    if ((v) < (lo) || (v) > (hi))                                                                \
        return hone_error_set(HONE_EFORMAT, "%s: %s.%s = %lld is out of range [%lld, %lld]", path, a, \
                              key, (long long)(v), (long long)(lo), (long long)(hi));
    RANGE(hp->n_layers, "block_count", 1, 1024)
    RANGE(hp->dim, "embedding_length", 1, 1 << 20)
    RANGE(hp->ffn, "feed_forward_length", 1, 1 << 22)
    RANGE(hp->n_heads, "attention.head_count", 1, 4096)
    RANGE(hp->n_kv_heads, "attention.head_count_kv", 1, hp->n_heads)
    RANGE(hp->n_ctx_train, "context_length", 1, 1 << 24)
    if (hp->n_heads % hp->n_kv_heads)
        return hone_error_set(HONE_EFORMAT, "%s: %lld heads are not a multiple of %lld KV heads", path,
                              (long long)hp->n_heads, (long long)hp->n_kv_heads);
    hp->head_dim = hp->dim / hp->n_heads;
    if ((rc = arch_i64(g, a, "attention.key_length", &hp->head_dim, 1))) return rc;
    RANGE(hp->head_dim, "attention.key_length (head dim)", 2, 1024)
    hp->n_rot = hp->head_dim;
    if ((rc = arch_i64(g, a, "rope.dimension_count", &hp->n_rot, 1))) return rc;
    RANGE(hp->n_rot, "rope.dimension_count", 2, hp->head_dim)
    if (hp->n_rot % 2)
        return hone_error_set(HONE_EFORMAT, "%s: rope.dimension_count %lld is odd", path,
                              (long long)hp->n_rot);
#undef RANGE
    if (!(base > 0 && base < 1e12) || !(eps > 0 && eps < 1))
        return hone_error_set(HONE_EFORMAT, "%s: rope.freq_base %g or rms epsilon %g is out of range",
                              path, base, eps);
    hp->rope_base = (float)base;
    hp->norm_eps = (float)eps;
    hp->rope_neox = strcmp(a, "qwen2") == 0 || strcmp(a, "qwen3") == 0 || strcmp(a, "gemma3") == 0;
    const hone_gguf_tensor *emb = hone_gguf_find_tensor(g, "token_embd.weight");
    if (!emb) return hone_error_set(HONE_EFORMAT, "%s: missing tensor 'token_embd.weight'", path);
    hp->n_vocab = emb->ne[1];
    hp->tied = hone_gguf_find_tensor(g, "output.weight") == NULL;
    hp->has_qkv_bias = hone_gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL ||
                       hone_gguf_find_tensor(g, "blk.0.attn_k.bias") != NULL ||
                       hone_gguf_find_tensor(g, "blk.0.attn_v.bias") != NULL;
    if ((rc = read_arch_features(m))) return rc;
    /* features that change the function: refused rather than silently ignored */
    char key[96];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    int64_t ki = hone_gguf_find_key(g, key);
    hone_gguf_str st;
    if (ki >= 0 && (hone_gguf_kv_str(g, ki, &st) || !(st.len == 4 && !memcmp(st.ptr, "none", 4))))
        return hone_error_set(HONE_EUNSUPPORTED, "%s: RoPE scaling (%s) is not supported", path, key);
    return 0;
}

int hone_model_load(hone_model **out, const char *path)
{
    int rc;
    hone_model *m = calloc(1, sizeof *m);
    *out = NULL;
    if (!m) return hone_error_set(HONE_ENOMEM, "out of memory");
    pthread_mutex_init(&m->lock, NULL);
    if ((rc = hone_gguf_open(&m->g, path)) || (rc = read_hparams(m))) goto done;
    const hone_hparams *hp = &m->hp;
    int64_t qd = hp->n_heads * hp->head_dim, kvd = hp->n_kv_heads * hp->head_dim;
    if ((rc = bind(m, &m->tok_embd, "token_embd.weight", hp->n_vocab, hp->dim, 0, 0)) ||
        (rc = bind(m, &m->output_norm, "output_norm.weight", 1, hp->dim, 1, 0)))
        goto done;
    if (hp->tied)
        m->output = m->tok_embd;
    else if ((rc = bind(m, &m->output, "output.weight", hp->n_vocab, hp->dim, 0, 0)))
        goto done;
    if (hp->rope_freqs &&
        (rc = bind(m, &m->rope_freqs, "rope_freqs.weight", 1, hp->n_rot / 2, 1, 0)))
        goto done;
    m->layers = calloc((size_t)hp->n_layers, sizeof *m->layers);
    if (!m->layers) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < hp->n_layers; i++) {
        hone_layer *L = &m->layers[i];
        char nm[96];
#define BIND(field, suffix, rows, cols, vec, opt)                                  \
    snprintf(nm, sizeof nm, "blk.%lld.%s", (long long)i, suffix);                  \
    if ((rc = bind(m, &L->field, nm, rows, cols, vec, opt))) goto done;
        BIND(attn_norm, "attn_norm.weight", 1, hp->dim, 1, 0)
        BIND(wq, "attn_q.weight", qd, hp->dim, 0, 0)
        BIND(wk, "attn_k.weight", kvd, hp->dim, 0, 0)
        BIND(wv, "attn_v.weight", kvd, hp->dim, 0, 0)
        BIND(bq, "attn_q.bias", 1, qd, 1, !hp->has_qkv_bias)
        BIND(bk, "attn_k.bias", 1, kvd, 1, !hp->has_qkv_bias)
        BIND(bv, "attn_v.bias", 1, kvd, 1, !hp->has_qkv_bias)
        BIND(wo, "attn_output.weight", hp->dim, qd, 0, 0)
        BIND(ffn_norm, "ffn_norm.weight", 1, hp->dim, 1, 0)
        BIND(w_gate, "ffn_gate.weight", hp->ffn, hp->dim, 0, 0)
        BIND(w_up, "ffn_up.weight", hp->ffn, hp->dim, 0, 0)
        BIND(w_down, "ffn_down.weight", hp->dim, hp->ffn, 0, 0)
        BIND(q_norm, "attn_q_norm.weight", 1, hp->head_dim, 1, !hp->qk_norm)
        BIND(k_norm, "attn_k_norm.weight", 1, hp->head_dim, 1, !hp->qk_norm)
        BIND(post_attn_norm, "post_attention_norm.weight", 1, hp->dim, 1, !hp->post_norms)
        BIND(post_ffn_norm, "post_ffw_norm.weight", 1, hp->dim, 1, !hp->post_norms)
        if (!hp->qk_norm) L->q_norm.data = L->k_norm.data = NULL;
        if (!hp->post_norms) L->post_attn_norm.data = L->post_ffn_norm.data = NULL;
#undef BIND
    }
    hone_gguf_str nm;
    const char *base = strrchr(path, '/');
    snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : path);
    if (hone_gguf_find_key(m->g, "general.name") >= 0 && hone_gguf_get_str(m->g, "general.name", &nm) == 0)
        snprintf(m->name, sizeof m->name, "%.*s", (int)(nm.len < 127 ? nm.len : 127), nm.ptr);
    *out = m;
    m = NULL;
done:
    hone_model_free(m);
    return rc;
}

void hone_model_free(hone_model *m)
{
    if (!m) return;
    hone_huge_free(&m->arena);
    pthread_mutex_destroy(&m->lock);
    hone_gguf_free(m->g);
    free(m->layers);
    free(m);
}

const hone_hparams *hone_model_hparams(const hone_model *m) { return &m->hp; }
const hone_gguf *hone_model_gguf(const hone_model *m) { return m->g; }
const hone_layer *hone_model_layer(const hone_model *m, int64_t i) { return &m->layers[i]; }
const hone_weight *hone_model_tok_embd(const hone_model *m) { return &m->tok_embd; }
const hone_weight *hone_model_output_norm(const hone_model *m) { return &m->output_norm; }
const hone_weight *hone_model_output(const hone_model *m) { return &m->output; }
const hone_weight *hone_model_rope_freqs(const hone_model *m) { return &m->rope_freqs; }
const char *hone_model_name(const hone_model *m) { return m->name; }

static int64_t wbytes(const hone_weight *w)
{
    return w->data ? w->rows * hone_dtype_row_bytes(w->dtype, w->cols) : 0;
}

int64_t hone_model_weight_bytes(const hone_model *m)
{
    int64_t b = wbytes(&m->output) + wbytes(&m->output_norm);
    for (int64_t i = 0; i < m->hp.n_layers; i++) {
        hone_weight *w[LAYER_WEIGHTS];
        layer_weights(&m->layers[i], w);
        for (int j = 0; j < LAYER_WEIGHTS; j++) b += wbytes(w[j]);
    }
    return b;
}

/* MemAvailable of /proc/meminfo in bytes (the page cache counts as available), or -1. */
static int64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long long kb = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    fclose(f);
    return kb < 0 ? -1 : (int64_t)kb * 1024;
}

static void rebase(hone_weight *w, const uint8_t *lo, const uint8_t *hi, uint8_t *to)
{
    const uint8_t *p = w->data;
    if (p && p >= lo && p < hi) w->data = to + (p - lo);
}

const char *hone_model_make_resident(const hone_model *cm)
{
    hone_model *m = (hone_model *)cm; /* the weights' values never change, only their address */
    pthread_mutex_lock(&m->lock);
    if (m->resident_done) goto done;
    m->resident_done = 1;
    if (!hone_huge_enabled()) goto done;
    const uint8_t *lo = NULL, *hi = NULL;
    for (int64_t i = 0; i < hone_gguf_n_tensors(m->g); i++) {
        const hone_gguf_tensor *t = hone_gguf_tensor_at(m->g, i);
        const uint8_t *p = t->data;
        if (!lo || p < lo) lo = p;
        if (!hi || p + t->nbytes > hi) hi = p + t->nbytes;
    }
    size_t n = (size_t)(hi - lo);
    if (!lo || n < HONE_HUGE_PAGE) goto done; /* too small to matter */
    /* the copy must fit beside everything else with room to spare: the file's own pages are
     * reclaimable page cache, the copy is not */
    int64_t avail = mem_available();
    if (avail >= 0 && (int64_t)n > avail / 2) goto done;
    hone_huge_map map;
    uint8_t *to = hone_huge_alloc(n, &map);
    if (!to) goto done; /* the file mapping serves as before */
    memcpy(to, lo, n);
    mprotect(map.base, map.len, PROT_READ);
    rebase(&m->tok_embd, lo, hi, to);
    rebase(&m->output_norm, lo, hi, to);
    rebase(&m->output, lo, hi, to);
    rebase(&m->rope_freqs, lo, hi, to);
    for (int64_t i = 0; i < m->hp.n_layers; i++) {
        hone_weight *w[LAYER_WEIGHTS];
        layer_weights(&m->layers[i], w);
        for (int j = 0; j < LAYER_WEIGHTS; j++) rebase(w[j], lo, hi, to);
    }
    /* the file's pages are not read again through this mapping: let the page cache have them */
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t p0 = ((uintptr_t)lo + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1), p1 = (uintptr_t)hi & ~(uintptr_t)(pg - 1);
    if (p1 > p0) madvise((void *)p0, p1 - p0, MADV_DONTNEED);
    m->arena = map;
done:
    pthread_mutex_unlock(&m->lock);
    return hone_model_weight_memory(m);
}

const char *hone_model_weight_memory(const hone_model *m)
{
    pthread_mutex_lock(&((hone_model *)m)->lock);
    const char *where = m->arena.base ? "anonymous huge pages" : "file mapping";
    pthread_mutex_unlock(&((hone_model *)m)->lock);
    return where;
}
