/* GGUF reader: maps the file read-only, parses the header, metadata and tensor infos
 * through a bounds-checked cursor, and validates every tensor's extent against the file.
 * Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md (versions 2 and 3). */
#include "gguf.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_KEY_LEN 65535
#define GGUF_MAX_DIM ((int64_t)1 << 40)
#define GGUF_MAX_NESTING 16 /* array-of-array levels; models use none */

typedef struct {
    char *key;
    hone_gguf_type type;
    const uint8_t *val;        /* scalar value bytes, or array element data */
    hone_gguf_str str;         /* STRING */
    hone_gguf_type arr_type;   /* ARRAY */
    uint64_t arr_len;
    hone_gguf_str *arr_strs;   /* ARRAY of STRING: one entry per element */
} gguf_kv;

/* A name -> position set with open addressing: duplicate checks and lookups in O(1), so a
 * file with a million tensors parses in linear time. Slots hold borrowed names. */
typedef struct {
    const char *name;
    int64_t i;
} name_slot;

typedef struct {
    name_slot *slots;
    uint64_t mask; /* capacity - 1, a power of two at least twice the entries */
} name_index;

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static int name_index_init(name_index *x, uint64_t n)
{
    uint64_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    x->slots = calloc(cap, sizeof *x->slots);
    x->mask = cap - 1;
    return x->slots ? 0 : hone_error_set(HONE_ENOMEM, "out of memory");
}

/* Inserts name at position i; returns the earlier position of the same name, or -1. */
static int64_t name_index_add(name_index *x, const char *name, int64_t i)
{
    for (uint64_t h = name_hash(name) & x->mask;; h = (h + 1) & x->mask) {
        name_slot *sl = &x->slots[h];
        if (!sl->name) {
            sl->name = name;
            sl->i = i;
            return -1;
        }
        if (strcmp(sl->name, name) == 0) return sl->i;
    }
}

static int64_t name_index_find(const name_index *x, const char *name)
{
    if (!x->slots) return -1;
    for (uint64_t h = name_hash(name) & x->mask;; h = (h + 1) & x->mask) {
        const name_slot *sl = &x->slots[h];
        if (!sl->name) return -1;
        if (strcmp(sl->name, name) == 0) return sl->i;
    }
}

struct hone_gguf {
    char *path;
    const uint8_t *map;
    uint64_t size;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_start;
    int64_t n_kv;
    gguf_kv *kv;
    int64_t n_tensors;
    hone_gguf_tensor *tensors;
    name_index kv_index, tensor_index; /* name -> position, built while parsing */
};

typedef struct {
    const hone_gguf *g;
    uint64_t pos;
} cursor;

static int scalar_size(hone_gguf_type t)
{
    switch (t) {
    case HONE_GGUF_TYPE_UINT8: case HONE_GGUF_TYPE_INT8: case HONE_GGUF_TYPE_BOOL: return 1;
    case HONE_GGUF_TYPE_UINT16: case HONE_GGUF_TYPE_INT16: return 2;
    case HONE_GGUF_TYPE_UINT32: case HONE_GGUF_TYPE_INT32: case HONE_GGUF_TYPE_FLOAT32: return 4;
    case HONE_GGUF_TYPE_UINT64: case HONE_GGUF_TYPE_INT64: case HONE_GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

const char *hone_gguf_type_name(hone_gguf_type t)
{
    static const char *names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                  "bool", "string", "array", "uint64", "int64", "float64"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "invalid";
}

/* Names of GGML tensor types the engine does not serve, for clearer refusals. */
static const char *ggml_type_name(uint32_t t)
{
    static const char *names[] = {"f32", "f16", "q4_0", "q4_1", "q4_2", "q4_3", "q5_0", "q5_1",
                                  "q8_0", "q8_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q8_K",
                                  "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s",
                                  "iq2_s", "iq4_xs", "i8", "i16", "i32", "i64", "f64", "iq1_m",
                                  "bf16", "q4_0_4_4", "q4_0_4_8", "q4_0_8_8", "tq1_0", "tq2_0"};
    return t < sizeof names / sizeof names[0] ? names[t] : NULL;
}

static int need(cursor *c, uint64_t n, const char *what)
{
    if (n > c->g->size || c->pos > c->g->size - n)
        return hone_error_set(HONE_EFORMAT,
                              "%s: truncated file: %s at byte %llu needs %llu bytes but the file "
                              "has %llu",
                              c->g->path, what, (unsigned long long)c->pos, (unsigned long long)n,
                              (unsigned long long)c->g->size);
    return 0;
}

static int rd_u32(cursor *c, uint32_t *out, const char *what)
{
    int rc = need(c, 4, what);
    if (rc) return rc;
    memcpy(out, c->g->map + c->pos, 4);
    c->pos += 4;
    return 0;
}

static int rd_u64(cursor *c, uint64_t *out, const char *what)
{
    int rc = need(c, 8, what);
    if (rc) return rc;
    memcpy(out, c->g->map + c->pos, 8);
    c->pos += 8;
    return 0;
}

static int rd_str(cursor *c, hone_gguf_str *out, const char *what)
{
    uint64_t len;
    int rc = rd_u64(c, &len, what);
    if (rc) return rc;
    if ((rc = need(c, len, what))) return rc;
    out->ptr = (const char *)c->g->map + c->pos;
    out->len = len;
    c->pos += len;
    return 0;
}

static char *dup_str(hone_gguf_str s)
{
    char *p = malloc(s.len + 1);
    if (!p) return NULL;
    memcpy(p, s.ptr, s.len);
    p[s.len] = 0;
    return p;
}

/* Reads one metadata value of type t (for arrays: recursively skips nested arrays, at most
 * GGUF_MAX_NESTING deep, so a crafted file cannot exhaust the stack). */
static int rd_value(cursor *c, gguf_kv *kv, hone_gguf_type t, const char *key, int depth)
{
    char what[160];
    snprintf(what, sizeof what, "value of key '%s'", key);
    if (t == HONE_GGUF_TYPE_STRING) return rd_str(c, &kv->str, what);
    if (t != HONE_GGUF_TYPE_ARRAY) {
        int sz = scalar_size(t);
        if (!sz)
            return hone_error_set(HONE_EFORMAT, "%s: key '%s' has unknown value type %u at byte %llu",
                                  c->g->path, key, (unsigned)t, (unsigned long long)c->pos);
        int rc = need(c, (uint64_t)sz, what);
        if (rc) return rc;
        kv->val = c->g->map + c->pos;
        c->pos += (uint64_t)sz;
        return 0;
    }
    uint32_t at;
    uint64_t n;
    int rc;
    if ((rc = rd_u32(c, &at, what)) || (rc = rd_u64(c, &n, what))) return rc;
    kv->arr_type = (hone_gguf_type)at;
    kv->arr_len = n;
    if (at == HONE_GGUF_TYPE_STRING) {
        /* each element takes at least 8 bytes: reject absurd counts before allocating */
        if (n > (c->g->size - c->pos) / 8)
            return hone_error_set(HONE_EFORMAT,
                                  "%s: key '%s' claims %llu strings, more than the %llu bytes left "
                                  "can hold",
                                  c->g->path, key, (unsigned long long)n,
                                  (unsigned long long)(c->g->size - c->pos));
        kv->arr_strs = malloc((n ? n : 1) * sizeof *kv->arr_strs);
        if (!kv->arr_strs) return hone_error_set(HONE_ENOMEM, "out of memory reading '%s'", key);
        for (uint64_t j = 0; j < n; j++)
            if ((rc = rd_str(c, &kv->arr_strs[j], what))) return rc;
        return 0;
    }
    if (at == HONE_GGUF_TYPE_ARRAY) {
        /* nested arrays are legal GGUF but unused by models: skip them element by element */
        if (depth >= GGUF_MAX_NESTING)
            return hone_error_set(HONE_EFORMAT, "%s: key '%s' nests arrays deeper than %d levels "
                                  "at byte %llu", c->g->path, key, GGUF_MAX_NESTING,
                                  (unsigned long long)c->pos);
        if (n > (c->g->size - c->pos) / 12)
            return hone_error_set(HONE_EFORMAT, "%s: key '%s' claims %llu nested arrays, more than "
                                  "the file can hold", c->g->path, key, (unsigned long long)n);
        for (uint64_t j = 0; j < n; j++) {
            gguf_kv tmp = {0};
            rc = rd_value(c, &tmp, HONE_GGUF_TYPE_ARRAY, key, depth + 1);
            free(tmp.arr_strs);
            if (rc) return rc;
        }
        return 0;
    }
    int sz = scalar_size((hone_gguf_type)at);
    if (!sz)
        return hone_error_set(HONE_EFORMAT, "%s: key '%s' is an array of unknown type %u",
                              c->g->path, key, at);
    if (n > (c->g->size - c->pos) / (uint64_t)sz)
        return hone_error_set(HONE_EFORMAT,
                              "%s: truncated file: array '%s' of %llu %s needs more bytes than the "
                              "%llu left",
                              c->g->path, key, (unsigned long long)n,
                              hone_gguf_type_name((hone_gguf_type)at),
                              (unsigned long long)(c->g->size - c->pos));
    kv->val = c->g->map + c->pos;
    c->pos += n * (uint64_t)sz;
    return 0;
}

static int parse(hone_gguf *g)
{
    cursor c = {g, 0};
    uint32_t magic;
    uint64_t n_tensors, n_kv;
    int rc;
    if (g->size < 4) return hone_error_set(HONE_EFORMAT, "%s: not a GGUF file (%llu bytes)", g->path,
                                           (unsigned long long)g->size);
    if ((rc = rd_u32(&c, &magic, "magic"))) return rc;
    if (magic != GGUF_MAGIC)
        return hone_error_set(HONE_EFORMAT, "%s: not a GGUF file (bad magic 0x%08x)", g->path, magic);
    if ((rc = rd_u32(&c, &g->version, "version"))) return rc;
    if (g->version != 2 && g->version != 3)
        return hone_error_set(HONE_EUNSUPPORTED, "%s: GGUF version %u is not supported (2 and 3 are)",
                              g->path, g->version);
    if ((rc = rd_u64(&c, &n_tensors, "tensor count")) || (rc = rd_u64(&c, &n_kv, "metadata count")))
        return rc;
    /* a key/value takes at least 12 bytes, a tensor info at least 28 */
    if (n_kv > (g->size - c.pos) / 12)
        return hone_error_set(HONE_EFORMAT, "%s: metadata count %llu is impossible for a %llu-byte file",
                              g->path, (unsigned long long)n_kv, (unsigned long long)g->size);
    if (n_tensors > (g->size - c.pos) / 28)
        return hone_error_set(HONE_EFORMAT, "%s: tensor count %llu is impossible for a %llu-byte file",
                              g->path, (unsigned long long)n_tensors, (unsigned long long)g->size);
    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) return hone_error_set(HONE_ENOMEM, "out of memory");
    if ((rc = name_index_init(&g->kv_index, n_kv)) || (rc = name_index_init(&g->tensor_index, n_tensors)))
        return rc;

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_kv *kv = &g->kv[i];
        hone_gguf_str key;
        uint32_t t;
        char what[64];
        snprintf(what, sizeof what, "key of metadata entry %llu", (unsigned long long)i);
        if ((rc = rd_str(&c, &key, what))) return rc;
        if (key.len == 0 || key.len > GGUF_MAX_KEY_LEN || memchr(key.ptr, 0, key.len))
            return hone_error_set(HONE_EFORMAT, "%s: metadata entry %llu has an invalid key (length %llu)",
                                  g->path, (unsigned long long)i, (unsigned long long)key.len);
        if (!(kv->key = dup_str(key))) return hone_error_set(HONE_ENOMEM, "out of memory");
        g->n_kv = (int64_t)i + 1;
        if (name_index_add(&g->kv_index, kv->key, (int64_t)i) >= 0)
                return hone_error_set(HONE_EFORMAT, "%s: duplicate metadata key '%s'", g->path, kv->key);
        if ((rc = rd_u32(&c, &t, "value type"))) return rc;
        kv->type = (hone_gguf_type)t;
        if (t > HONE_GGUF_TYPE_FLOAT64)
            return hone_error_set(HONE_EFORMAT, "%s: key '%s' has unknown value type %u", g->path,
                                  kv->key, t);
        if ((rc = rd_value(&c, kv, kv->type, kv->key, 0))) return rc;
        if (strcmp(kv->key, "general.alignment") == 0) {
            int64_t a;
            if (hone_gguf_kv_i64(g, (int64_t)i, &a) || a <= 0 || (a & (a - 1)) || a > 65536)
                return hone_error_set(HONE_EFORMAT, "%s: general.alignment must be a power of two "
                                      "<= 65536", g->path);
            g->alignment = (uint64_t)a;
        }
    }

    for (uint64_t i = 0; i < n_tensors; i++) {
        hone_gguf_tensor *t = &g->tensors[i];
        hone_gguf_str name;
        uint32_t n_dims, dtype;
        char what[64];
        snprintf(what, sizeof what, "info of tensor %llu", (unsigned long long)i);
        if ((rc = rd_str(&c, &name, what))) return rc;
        if (name.len == 0 || name.len > 64 * 1024 || memchr(name.ptr, 0, name.len))
            return hone_error_set(HONE_EFORMAT, "%s: tensor %llu has an invalid name", g->path,
                                  (unsigned long long)i);
        if (!(t->name = dup_str(name))) return hone_error_set(HONE_ENOMEM, "out of memory");
        g->n_tensors = (int64_t)i + 1;
        if ((rc = rd_u32(&c, &n_dims, what))) return rc;
        if (n_dims < 1 || n_dims > HONE_GGUF_MAX_DIMS)
            return hone_error_set(HONE_EFORMAT, "%s: tensor '%s' has %u dimensions (1 to %d allowed)",
                                  g->path, t->name, n_dims, HONE_GGUF_MAX_DIMS);
        t->n_dims = (int)n_dims;
        uint64_t count = 1;
        for (int d = 0; d < HONE_GGUF_MAX_DIMS; d++) {
            uint64_t ne = 1;
            if (d < (int)n_dims && (rc = rd_u64(&c, &ne, what))) return rc;
            if (ne < 1 || (int64_t)ne > GGUF_MAX_DIM || ne > (uint64_t)GGUF_MAX_DIM / count)
                return hone_error_set(HONE_EFORMAT, "%s: tensor '%s' has an absurd dimension %d = %llu",
                                      g->path, t->name, d, (unsigned long long)ne);
            count *= ne;
            t->ne[d] = (int64_t)ne;
        }
        if ((rc = rd_u32(&c, &dtype, what)) || (rc = rd_u64(&c, &t->offset, what))) return rc;
        if (!hone_dtype_supported((int)dtype)) {
            const char *nm = ggml_type_name(dtype);
            if (nm)
                return hone_error_set(HONE_EUNSUPPORTED, "%s: tensor '%s' has dtype %s (%u), which "
                                      "Hone does not serve (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                                      "q2_K .. q6_K, mxfp4)",
                                      g->path, t->name, nm, dtype);
            return hone_error_set(HONE_EFORMAT, "%s: tensor '%s' has unknown dtype %u", g->path,
                                  t->name, dtype);
        }
        t->dtype = (hone_dtype)dtype;
        int64_t bs = hone_dtype_block_size((int)dtype);
        if (t->ne[0] % bs)
            return hone_error_set(HONE_EFORMAT, "%s: tensor '%s' row length %lld is not a multiple of "
                                  "the %s block size %lld", g->path, t->name, (long long)t->ne[0],
                                  hone_dtype_name((int)dtype), (long long)bs);
        t->nbytes = count / (uint64_t)bs * (uint64_t)hone_dtype_type_size((int)dtype);
        if (name_index_add(&g->tensor_index, t->name, (int64_t)i) >= 0)
                return hone_error_set(HONE_EFORMAT, "%s: duplicate tensor name '%s'", g->path, t->name);
    }

    uint64_t data_start = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (n_tensors > 0 && data_start > g->size)
        return hone_error_set(HONE_EFORMAT, "%s: truncated file: tensor data would start at byte %llu "
                              "past the end (%llu bytes)", g->path, (unsigned long long)data_start,
                              (unsigned long long)g->size);
    g->data_start = data_start;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        hone_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment)
            return hone_error_set(HONE_EFORMAT, "%s: tensor '%s' offset %llu is not aligned to %llu",
                                  g->path, t->name, (unsigned long long)t->offset,
                                  (unsigned long long)g->alignment);
        uint64_t avail = g->size - data_start;
        if (t->offset > avail || t->nbytes > avail - t->offset)
            return hone_error_set(HONE_EFORMAT, "%s: truncated file: tensor '%s' data [%llu, %llu) "
                                  "ends past the end of the file (%llu bytes)", g->path, t->name,
                                  (unsigned long long)(data_start + t->offset),
                                  (unsigned long long)(data_start + t->offset + t->nbytes),
                                  (unsigned long long)g->size);
        t->data = g->map + data_start + t->offset;
    }
    return 0;
}

int hone_gguf_open(hone_gguf **out, const char *path)
{
    int rc = 0, fd = -1;
    struct stat st;
    hone_gguf *g = calloc(1, sizeof *g);
    *out = NULL;
    if (!g || !(g->path = strdup(path))) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory");
        goto done;
    }
    /* O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer; such a path is
     * refused by the fstat check before anything is read */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        rc = hone_error_set(HONE_EIO, "%s: cannot open: %s", path, strerror(errno));
        goto done;
    }
    if (fstat(fd, &st) != 0) {
        rc = hone_error_set(HONE_EIO, "%s: cannot stat: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = hone_error_set(HONE_EIO, "%s: not a regular file (%s), not a GGUF model", path,
                            S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a directory"
                            : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "a special file");
        goto done;
    }
    g->size = (uint64_t)st.st_size;
    if (g->size == 0) {
        rc = hone_error_set(HONE_EFORMAT, "%s: empty file, not a GGUF model", path);
        goto done;
    }
    void *m = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
        rc = hone_error_set(HONE_EIO, "%s: mmap failed: %s", path, strerror(errno));
        goto done;
    }
    g->map = m;
    if ((rc = parse(g))) goto done;
    *out = g;
    g = NULL;
done:
    if (fd >= 0) close(fd);
    hone_gguf_free(g);
    return rc;
}

void hone_gguf_free(hone_gguf *g)
{
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].arr_strs);
    }
    for (int64_t i = 0; i < g->n_tensors; i++) free((char *)g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    free(g->kv_index.slots);
    free(g->tensor_index.slots);
    if (g->map) munmap((void *)g->map, g->size);
    free(g->path);
    free(g);
}

uint32_t hone_gguf_version(const hone_gguf *g) { return g->version; }
uint64_t hone_gguf_alignment(const hone_gguf *g) { return g->alignment; }
uint64_t hone_gguf_file_size(const hone_gguf *g) { return g->size; }
const char *hone_gguf_path(const hone_gguf *g) { return g->path; }
int64_t hone_gguf_n_kv(const hone_gguf *g) { return g->n_kv; }
const char *hone_gguf_kv_key(const hone_gguf *g, int64_t i) { return g->kv[i].key; }
hone_gguf_type hone_gguf_kv_type(const hone_gguf *g, int64_t i) { return g->kv[i].type; }

int64_t hone_gguf_find_key(const hone_gguf *g, const char *key)
{
    return name_index_find(&g->kv_index, key);
}

/* Reads a scalar of type t at p as int64 (integers, bool) or double (all numerics). */
static int scalar_i64(hone_gguf_type t, const uint8_t *p, int64_t *out)
{
    switch (t) {
    case HONE_GGUF_TYPE_UINT8: case HONE_GGUF_TYPE_BOOL: *out = *p; return 0;
    case HONE_GGUF_TYPE_INT8: *out = (int8_t)*p; return 0;
    case HONE_GGUF_TYPE_UINT16: { uint16_t v; memcpy(&v, p, 2); *out = v; return 0; }
    case HONE_GGUF_TYPE_INT16: { int16_t v; memcpy(&v, p, 2); *out = v; return 0; }
    case HONE_GGUF_TYPE_UINT32: { uint32_t v; memcpy(&v, p, 4); *out = v; return 0; }
    case HONE_GGUF_TYPE_INT32: { int32_t v; memcpy(&v, p, 4); *out = v; return 0; }
    case HONE_GGUF_TYPE_UINT64: {
        uint64_t v;
        memcpy(&v, p, 8);
        if (v > (uint64_t)INT64_MAX) return -1;
        *out = (int64_t)v;
        return 0;
    }
    case HONE_GGUF_TYPE_INT64: memcpy(out, p, 8); return 0;
    default: return -1;
    }
}

static int scalar_f64(hone_gguf_type t, const uint8_t *p, double *out)
{
    if (t == HONE_GGUF_TYPE_FLOAT32) { float v; memcpy(&v, p, 4); *out = v; return 0; }
    if (t == HONE_GGUF_TYPE_FLOAT64) { memcpy(out, p, 8); return 0; }
    if (t == HONE_GGUF_TYPE_UINT64) { uint64_t v; memcpy(&v, p, 8); *out = (double)v; return 0; }
    int64_t v;
    if (scalar_i64(t, p, &v)) return -1;
    *out = (double)v;
    return 0;
}

static int type_error(const hone_gguf *g, int64_t i, const char *want)
{
    return hone_error_set(HONE_EFORMAT, "%s: metadata key '%s' is %s, expected %s", g->path,
                          g->kv[i].key, hone_gguf_type_name(g->kv[i].type), want);
}

int hone_gguf_kv_i64(const hone_gguf *g, int64_t i, int64_t *out)
{
    const gguf_kv *kv = &g->kv[i];
    if (kv->type == HONE_GGUF_TYPE_BOOL || scalar_i64(kv->type, kv->val, out))
        return type_error(g, i, "an integer");
    return 0;
}

int hone_gguf_kv_f64(const hone_gguf *g, int64_t i, double *out)
{
    const gguf_kv *kv = &g->kv[i];
    if (kv->type == HONE_GGUF_TYPE_BOOL || scalar_f64(kv->type, kv->val, out))
        return type_error(g, i, "a number");
    return 0;
}

int hone_gguf_kv_bool(const hone_gguf *g, int64_t i, int *out)
{
    const gguf_kv *kv = &g->kv[i];
    if (kv->type != HONE_GGUF_TYPE_BOOL) return type_error(g, i, "a bool");
    *out = *kv->val != 0;
    return 0;
}

int hone_gguf_kv_str(const hone_gguf *g, int64_t i, hone_gguf_str *out)
{
    if (g->kv[i].type != HONE_GGUF_TYPE_STRING) return type_error(g, i, "a string");
    *out = g->kv[i].str;
    return 0;
}

hone_gguf_type hone_gguf_arr_type(const hone_gguf *g, int64_t i) { return g->kv[i].arr_type; }

uint64_t hone_gguf_arr_len(const hone_gguf *g, int64_t i)
{
    return g->kv[i].type == HONE_GGUF_TYPE_ARRAY ? g->kv[i].arr_len : 0;
}

const void *hone_gguf_arr_data(const hone_gguf *g, int64_t i)
{
    return g->kv[i].type == HONE_GGUF_TYPE_ARRAY ? g->kv[i].val : NULL;
}

static int arr_check(const hone_gguf *g, int64_t i, uint64_t j)
{
    const gguf_kv *kv = &g->kv[i];
    if (kv->type != HONE_GGUF_TYPE_ARRAY) return type_error(g, i, "an array");
    if (j >= kv->arr_len)
        return hone_error_set(HONE_ERANGE, "%s: index %llu past the end of array '%s' (%llu)",
                              g->path, (unsigned long long)j, kv->key, (unsigned long long)kv->arr_len);
    return 0;
}

int hone_gguf_arr_i64(const hone_gguf *g, int64_t i, uint64_t j, int64_t *out)
{
    int rc = arr_check(g, i, j);
    if (rc) return rc;
    const gguf_kv *kv = &g->kv[i];
    int sz = scalar_size(kv->arr_type);
    if (!sz || kv->arr_type == HONE_GGUF_TYPE_FLOAT32 || kv->arr_type == HONE_GGUF_TYPE_FLOAT64 ||
        scalar_i64(kv->arr_type, kv->val + j * (uint64_t)sz, out))
        return hone_error_set(HONE_EFORMAT, "%s: array '%s' holds %s, expected integers", g->path,
                              kv->key, hone_gguf_type_name(kv->arr_type));
    return 0;
}

int hone_gguf_arr_f64(const hone_gguf *g, int64_t i, uint64_t j, double *out)
{
    int rc = arr_check(g, i, j);
    if (rc) return rc;
    const gguf_kv *kv = &g->kv[i];
    int sz = scalar_size(kv->arr_type);
    if (!sz || scalar_f64(kv->arr_type, kv->val + j * (uint64_t)sz, out))
        return hone_error_set(HONE_EFORMAT, "%s: array '%s' holds %s, expected numbers", g->path,
                              kv->key, hone_gguf_type_name(kv->arr_type));
    return 0;
}

int hone_gguf_arr_str(const hone_gguf *g, int64_t i, uint64_t j, hone_gguf_str *out)
{
    int rc = arr_check(g, i, j);
    if (rc) return rc;
    if (g->kv[i].arr_type != HONE_GGUF_TYPE_STRING)
        return hone_error_set(HONE_EFORMAT, "%s: array '%s' holds %s, expected strings", g->path,
                              g->kv[i].key, hone_gguf_type_name(g->kv[i].arr_type));
    *out = g->kv[i].arr_strs[j];
    return 0;
}

static int64_t find_required(const hone_gguf *g, const char *key)
{
    int64_t i = hone_gguf_find_key(g, key);
    if (i < 0) hone_error_set(HONE_EFORMAT, "%s: missing metadata key '%s'", g->path, key);
    return i;
}

int hone_gguf_get_i64(const hone_gguf *g, const char *key, int64_t *out)
{
    int64_t i = find_required(g, key);
    return i < 0 ? HONE_EFORMAT : hone_gguf_kv_i64(g, i, out);
}

int hone_gguf_get_f64(const hone_gguf *g, const char *key, double *out)
{
    int64_t i = find_required(g, key);
    return i < 0 ? HONE_EFORMAT : hone_gguf_kv_f64(g, i, out);
}

int hone_gguf_get_str(const hone_gguf *g, const char *key, hone_gguf_str *out)
{
    int64_t i = find_required(g, key);
    return i < 0 ? HONE_EFORMAT : hone_gguf_kv_str(g, i, out);
}

int hone_gguf_get_i64_opt(const hone_gguf *g, const char *key, int64_t *out)
{
    int64_t i = hone_gguf_find_key(g, key);
    return i < 0 ? 0 : hone_gguf_kv_i64(g, i, out);
}

int hone_gguf_get_f64_opt(const hone_gguf *g, const char *key, double *out)
{
    int64_t i = hone_gguf_find_key(g, key);
    return i < 0 ? 0 : hone_gguf_kv_f64(g, i, out);
}

int hone_gguf_get_bool_opt(const hone_gguf *g, const char *key, int *out)
{
    int64_t i = hone_gguf_find_key(g, key);
    return i < 0 ? 0 : hone_gguf_kv_bool(g, i, out);
}

int64_t hone_gguf_n_tensors(const hone_gguf *g) { return g->n_tensors; }
const hone_gguf_tensor *hone_gguf_tensor_at(const hone_gguf *g, int64_t i) { return &g->tensors[i]; }

const hone_gguf_tensor *hone_gguf_find_tensor(const hone_gguf *g, const char *name)
{
    int64_t i = name_index_find(&g->tensor_index, name);
    return i < 0 ? NULL : &g->tensors[i];
}
