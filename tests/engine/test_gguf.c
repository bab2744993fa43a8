/* Tests for engine/gguf: every metadata type through the typed getters (and their type
 * errors), v2/v3 headers, alignment, tensor infos; and every kind of corrupt file, each
 * refused with the right code and a message naming the problem, never a crash. */
#include "gguf_writer.h"
#include "harness.h"

#include "engine/error.h"
#include "engine/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static void w_hdr(wbuf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    w_raw(b, "GGUF", 4);
    w_u32(b, version);
    w_u64(b, n_tensors);
    w_u64(b, n_kv);
}

/* Key and type tag; the caller writes the value. */
static void w_key(wbuf *b, const char *key, uint32_t type)
{
    w_str(b, key);
    w_u32(b, type);
}

static void w_kv_u32(wbuf *b, const char *key, uint32_t v)
{
    w_key(b, key, HONE_GGUF_TYPE_UINT32);
    w_u32(b, v);
}

static void w_kv_str(wbuf *b, const char *key, const char *v)
{
    w_key(b, key, HONE_GGUF_TYPE_STRING);
    w_str(b, v);
}

static void w_tinfo(wbuf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t dtype,
                    uint64_t offset)
{
    w_str(b, name);
    w_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims && d < 5; d++) w_u64(b, ne[d]); /* callers pass <= 5 */
    w_u32(b, dtype);
    w_u64(b, offset);
}

static void w_pad(wbuf *b, size_t align)
{
    while (b->n % align) w_u8(b, 0);
}

static const char *write_file(const char *name, const void *data, size_t n)
{
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
    return path;
}

/* Writes b to the temp dir and frees it. */
static const char *write_buf(const char *name, wbuf *b)
{
    const char *path = write_file(name, b->p, b->n);
    free(b->p);
    memset(b, 0, sizeof *b);
    return path;
}

static uint8_t *read_whole(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc(sz > 0 ? (size_t)sz : 1);
    if (!p || fread(p, 1, (size_t)sz, f) != (size_t)sz) abort();
    fclose(f);
    *n = (size_t)sz;
    return p;
}

/* ------------------------------------------------------------ expectations */

/* Opens path expecting failure with `code` and a message containing needle (and the path). */
static void expect_fail_at(int line, const char *path, int code, const char *needle)
{
    hone_gguf *g = (hone_gguf *)&g; /* must be reset to NULL */
    int rc = hone_gguf_open(&g, path);
    CHECK_MSG(rc == code, "line %d: %s: rc %d (%s), expected %d; message: %s", line, path, rc,
              hone_error_name(rc), code, hone_error_last());
    CHECK_MSG(g == NULL, "line %d: out not NULL on failure", line);
    const char *msg = hone_error_last();
    CHECK_MSG(strstr(msg, needle), "line %d: \"%s\" does not contain \"%s\"", line, msg, needle);
    CHECK_MSG(strstr(msg, path), "line %d: \"%s\" does not name the file", line, msg);
    if (rc == 0) hone_gguf_free(g);
}
#define EXPECT_FAIL(path, code, needle) expect_fail_at(__LINE__, path, code, needle)

static hone_gguf *open_ok_at(int line, const char *path)
{
    hone_gguf *g = NULL;
    int rc = hone_gguf_open(&g, path);
    CHECK_MSG(rc == 0 && g, "line %d: %s: rc %d: %s", line, path, rc, hone_error_last());
    return rc == 0 ? g : NULL;
}
#define OPEN_OK(path) open_ok_at(__LINE__, path)

static int str_eq(hone_gguf_str s, const char *c)
{
    return s.len == strlen(c) && memcmp(s.ptr, c, s.len) == 0;
}

/* A file with one f32-style tensor described by the arguments and `data_bytes` of data. */
static const char *one_tensor_file(const char *fname, uint32_t n_dims, const uint64_t *ne,
                                   uint32_t dtype, uint64_t offset, size_t data_bytes)
{
    wbuf b = {0};
    w_hdr(&b, 3, 1, 0);
    w_tinfo(&b, "w", n_dims, ne, dtype, offset);
    w_pad(&b, 32);
    w_zeros(&b, data_bytes);
    return write_buf(fname, &b);
}

/* ------------------------------------------------------------ positive tests */

/* Every scalar type, arrays of each, a nested array, then three tensors. Used by the
 * positive test and by the truncation sweep (every proper prefix must be refused). */
static void build_full(wbuf *b, uint32_t version)
{
    w_hdr(b, version, 3, 27);
    w_key(b, "t.u8", HONE_GGUF_TYPE_UINT8); w_u8(b, 200);
    w_key(b, "t.i8", HONE_GGUF_TYPE_INT8); w_u8(b, (uint8_t)(int8_t)-100);
    w_key(b, "t.u16", HONE_GGUF_TYPE_UINT16); w_u16(b, 60000);
    w_key(b, "t.i16", HONE_GGUF_TYPE_INT16); w_u16(b, (uint16_t)(int16_t)-30000);
    w_key(b, "t.u32", HONE_GGUF_TYPE_UINT32); w_u32(b, 4000000000u);
    w_key(b, "t.i32", HONE_GGUF_TYPE_INT32); w_u32(b, (uint32_t)(int32_t)-2000000000);
    w_key(b, "t.f32", HONE_GGUF_TYPE_FLOAT32); w_f32(b, 1.5f);
    w_key(b, "t.bool", HONE_GGUF_TYPE_BOOL); w_u8(b, 1);
    w_kv_str(b, "t.str", "hello");
    w_key(b, "t.u64", HONE_GGUF_TYPE_UINT64); w_u64(b, UINT64_MAX);
    w_key(b, "t.i64", HONE_GGUF_TYPE_INT64); w_u64(b, (uint64_t)INT64_MIN);
    w_key(b, "t.f64", HONE_GGUF_TYPE_FLOAT64); w_f64(b, 3.141592653589793);
    /* arrays */
    w_key(b, "a.u8", HONE_GGUF_TYPE_ARRAY); w_u32(b, HONE_GGUF_TYPE_UINT8); w_u64(b, 3);
    w_u8(b, 1); w_u8(b, 2); w_u8(b, 255);
    w_key(b, "a.i8", HONE_GGUF_TYPE_ARRAY); w_u32(b, HONE_GGUF_TYPE_INT8); w_u64(b, 2);
    w_u8(b, (uint8_t)(int8_t)-1); w_u8(b, 127);
    w_key(b, "a.u16", HONE_GGUF_TYPE_ARRAY); w_u32(b, HONE_GGUF_TYPE_UINT16); w_u64(b, 2);
    w_u16(b, 65535); w_u16(b, 7);
    w_key(b, "a.i16", HONE_GGUF_TYPE_ARRAY); w_u32(b, HONE_GGUF_TYPE_INT16); w_u64(b, 1);
    w_u16(b, (uint16_t)(int16_t)-32768);
    w_key(b, "a.u32", HONE_GGUF_TYPE_ARRAY); w_u32(b, HONE_GGUF_TYPE_UINT32); w_u64(b, 1);
    w_u32(b, 4294967295u);
    w_key(b, "a.i32", HONE_GGUF_TYPE_ARRAY); w_u32(b, HONE_GGUF_TYPE_INT32); w_u64(b, 3);
    w_u32(b, (uint32_t)-5); w_u32(b, 0); w_u32(b, 2147483647u);
    w_key(b, "a.f32", HONE_GGUF_TYPE_ARRAY); w_u32(b, HONE_GGUF_TYPE_FLOAT32); w_u64(b, 2);
    w_f32(b, -0.25f); w_f32(b, 1e10f);
    w_key(b, "a.bool", HONE_GGUF_TYPE_ARRAY); w_u32(b, HONE_GGUF_TYPE_BOOL); w_u64(b, 2);
    w_u8(b, 0); w_u8(b, 1);
    w_key(b, "a.str", HONE_GGUF_TYPE_ARRAY); w_u32(b, HONE_GGUF_TYPE_STRING); w_u64(b, 3);
    w_str(b, "a"); w_str(b, ""); w_str(b, "ccc");
    w_key(b, "a.u64", HONE_GGUF_TYPE_ARRAY); w_u32(b, HONE_GGUF_TYPE_UINT64); w_u64(b, 2);
    w_u64(b, 1ull << 40); w_u64(b, UINT64_MAX);
    w_key(b, "a.i64", HONE_GGUF_TYPE_ARRAY); w_u32(b, HONE_GGUF_TYPE_INT64); w_u64(b, 2);
    w_u64(b, (uint64_t)INT64_MIN); w_u64(b, 12345678901234ull);
    w_key(b, "a.f64", HONE_GGUF_TYPE_ARRAY); w_u32(b, HONE_GGUF_TYPE_FLOAT64); w_u64(b, 1);
    w_f64(b, -2.5);
    /* [[1, 2], ["x"], []] : nested arrays are skipped but the next key still reads */
    w_key(b, "a.nested", HONE_GGUF_TYPE_ARRAY); w_u32(b, HONE_GGUF_TYPE_ARRAY); w_u64(b, 3);
    w_u32(b, HONE_GGUF_TYPE_UINT32); w_u64(b, 2); w_u32(b, 1); w_u32(b, 2);
    w_u32(b, HONE_GGUF_TYPE_STRING); w_u64(b, 1); w_str(b, "x");
    w_u32(b, HONE_GGUF_TYPE_INT64); w_u64(b, 0);
    w_key(b, "a.empty", HONE_GGUF_TYPE_ARRAY); w_u32(b, HONE_GGUF_TYPE_INT64); w_u64(b, 0);
    w_kv_u32(b, "after.nested", 42);
    /* tensors: f32 [3, 2] at 0, f16 [4] at 32, q4_0 [32, 2, 1] at 64 */
    uint64_t ne_a[2] = {3, 2}, ne_b[1] = {4}, ne_c[3] = {32, 2, 1};
    w_tinfo(b, "a", 2, ne_a, HONE_DTYPE_F32, 0);
    w_tinfo(b, "b.weight", 1, ne_b, HONE_DTYPE_F16, 32);
    w_tinfo(b, "c", 3, ne_c, HONE_DTYPE_Q4_0, 64);
    w_pad(b, 32);
    for (int i = 0; i < 6; i++) w_f32(b, (float)i + 0.5f);
    w_zeros(b, 32 - 24);
    for (int i = 0; i < 4; i++) w_u16(b, (uint16_t)(0x3c00 + i)); /* f16 1.0, ... */
    w_zeros(b, 32 - 8);
    for (int i = 0; i < 36; i++) w_u8(b, (uint8_t)(i * 7)); /* 2 q4_0 blocks, no trailing pad */
}

static void check_full(hone_gguf *g, uint32_t version, uint64_t size)
{
    int64_t v = 0;
    double d = 0;
    int bl = -1;
    hone_gguf_str s;
    CHECK_EQ_INT(hone_gguf_version(g), version);
    CHECK_EQ_INT(hone_gguf_alignment(g), 32);
    CHECK_EQ_INT(hone_gguf_file_size(g), size);
    CHECK_EQ_INT(hone_gguf_n_kv(g), 27);
    CHECK(strcmp(hone_gguf_kv_key(g, 0), "t.u8") == 0);
    CHECK(strcmp(hone_gguf_kv_key(g, 26), "after.nested") == 0);
    CHECK_EQ_INT(hone_gguf_find_key(g, "t.str"), 8);
    CHECK_EQ_INT(hone_gguf_find_key(g, "nope"), -1);
    CHECK_EQ_INT(hone_gguf_kv_type(g, 0), HONE_GGUF_TYPE_UINT8);
    CHECK_EQ_INT(hone_gguf_kv_type(g, 8), HONE_GGUF_TYPE_STRING);
    CHECK_EQ_INT(hone_gguf_kv_type(g, 12), HONE_GGUF_TYPE_ARRAY);

    /* scalars through get_i64 / get_f64 */
    static const struct { const char *key; int64_t want; } ints[] = {
        {"t.u8", 200}, {"t.i8", -100}, {"t.u16", 60000}, {"t.i16", -30000},
        {"t.u32", 4000000000ll}, {"t.i32", -2000000000ll}, {"t.i64", INT64_MIN},
        {"after.nested", 42}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        v = 0;
        CHECK_MSG(hone_gguf_get_i64(g, ints[i].key, &v) == 0 && v == ints[i].want,
                  "%s: %lld vs %lld (%s)", ints[i].key, (long long)v, (long long)ints[i].want,
                  hone_error_last());
        d = 0;
        CHECK_MSG(hone_gguf_get_f64(g, ints[i].key, &d) == 0 && d == (double)ints[i].want,
                  "%s as f64: %g", ints[i].key, d);
    }
    CHECK(hone_gguf_get_f64(g, "t.f32", &d) == 0 && d == 1.5);
    CHECK(hone_gguf_get_f64(g, "t.f64", &d) == 0 && d == 3.141592653589793);
    CHECK(hone_gguf_get_f64(g, "t.u64", &d) == 0 && d == 18446744073709551615.0);
    CHECK(hone_gguf_get_str(g, "t.str", &s) == 0 && str_eq(s, "hello"));
    CHECK(hone_gguf_get_bool_opt(g, "t.bool", &bl) == 0 && bl == 1);
    CHECK(hone_gguf_kv_bool(g, hone_gguf_find_key(g, "t.bool"), &bl) == 0 && bl == 1);

    /* type errors name the key, the stored type and the wanted one */
    v = 7;
    CHECK_EQ_INT(hone_gguf_get_i64(g, "t.u64", &v), HONE_EFORMAT); /* does not fit */
    CHECK_STR_CONTAINS(hone_error_last(), "metadata key 't.u64' is uint64, expected an integer");
    CHECK_EQ_INT(hone_gguf_get_i64(g, "t.str", &v), HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "metadata key 't.str' is string, expected an integer");
    CHECK_EQ_INT(hone_gguf_get_i64(g, "t.f32", &v), HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "'t.f32' is float32, expected an integer");
    CHECK_EQ_INT(hone_gguf_get_i64(g, "t.bool", &v), HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "'t.bool' is bool, expected an integer");
    CHECK_EQ_INT(hone_gguf_get_i64(g, "a.u8", &v), HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "'a.u8' is array, expected an integer");
    CHECK_EQ_INT(v, 7);
    CHECK_EQ_INT(hone_gguf_get_f64(g, "t.str", &d), HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "'t.str' is string, expected a number");
    CHECK_EQ_INT(hone_gguf_get_f64(g, "t.bool", &d), HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "'t.bool' is bool, expected a number");
    CHECK_EQ_INT(hone_gguf_get_str(g, "t.u32", &s), HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "'t.u32' is uint32, expected a string");
    CHECK_EQ_INT(hone_gguf_get_str(g, "a.str", &s), HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "'a.str' is array, expected a string");
    CHECK_EQ_INT(hone_gguf_get_bool_opt(g, "t.u8", &bl), HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "'t.u8' is uint8, expected a bool");

    /* missing keys: required forms fail with the key's name, _opt forms leave *out alone */
    CHECK_EQ_INT(hone_gguf_get_i64(g, "no.such", &v), HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "missing metadata key 'no.such'");
    CHECK_EQ_INT(hone_gguf_get_f64(g, "no.such2", &d), HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "missing metadata key 'no.such2'");
    CHECK_EQ_INT(hone_gguf_get_str(g, "no.such3", &s), HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "missing metadata key 'no.such3'");
    v = 5; d = 2.5; bl = 9;
    CHECK(hone_gguf_get_i64_opt(g, "no.such", &v) == 0 && v == 5);
    CHECK(hone_gguf_get_f64_opt(g, "no.such", &d) == 0 && d == 2.5);
    CHECK(hone_gguf_get_bool_opt(g, "no.such", &bl) == 0 && bl == 9);
    CHECK(hone_gguf_get_i64_opt(g, "t.i16", &v) == 0 && v == -30000);
    CHECK(hone_gguf_get_f64_opt(g, "t.f32", &d) == 0 && d == 1.5);
    CHECK_EQ_INT(hone_gguf_get_i64_opt(g, "t.str", &v), HONE_EFORMAT);
    CHECK_EQ_INT(hone_gguf_get_f64_opt(g, "t.str", &d), HONE_EFORMAT);

    /* arrays */
    int64_t k;
#define ARR(key)                                                                          \
    k = hone_gguf_find_key(g, key);                                                       \
    CHECK_MSG(k >= 0, "no key %s", key);                                                  \
    if (k < 0) return;
    ARR("a.u8");
    CHECK_EQ_INT(hone_gguf_arr_type(g, k), HONE_GGUF_TYPE_UINT8);
    CHECK_EQ_INT(hone_gguf_arr_len(g, k), 3);
    CHECK(hone_gguf_arr_data(g, k) && memcmp(hone_gguf_arr_data(g, k), "\x01\x02\xff", 3) == 0);
    CHECK(hone_gguf_arr_i64(g, k, 2, &v) == 0 && v == 255);
    CHECK(hone_gguf_arr_f64(g, k, 0, &d) == 0 && d == 1.0);
    CHECK_EQ_INT(hone_gguf_arr_i64(g, k, 3, &v), HONE_ERANGE);
    CHECK_STR_CONTAINS(hone_error_last(), "index 3 past the end of array 'a.u8' (3)");
    CHECK_EQ_INT(hone_gguf_arr_str(g, k, 0, &s), HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "array 'a.u8' holds uint8, expected strings");
    ARR("a.i8");
    CHECK(hone_gguf_arr_i64(g, k, 0, &v) == 0 && v == -1);
    CHECK(hone_gguf_arr_i64(g, k, 1, &v) == 0 && v == 127);
    ARR("a.u16");
    CHECK(hone_gguf_arr_i64(g, k, 0, &v) == 0 && v == 65535);
    CHECK(hone_gguf_arr_i64(g, k, 1, &v) == 0 && v == 7);
    {
        uint16_t raw[2];
        memcpy(raw, hone_gguf_arr_data(g, k), 4);
        CHECK(raw[0] == 65535 && raw[1] == 7);
    }
    ARR("a.i16");
    CHECK(hone_gguf_arr_i64(g, k, 0, &v) == 0 && v == -32768);
    ARR("a.i32");
    CHECK_EQ_INT(hone_gguf_arr_type(g, k), HONE_GGUF_TYPE_INT32);
    CHECK(hone_gguf_arr_i64(g, k, 0, &v) == 0 && v == -5);
    CHECK(hone_gguf_arr_i64(g, k, 2, &v) == 0 && v == 2147483647);
    CHECK(hone_gguf_arr_f64(g, k, 0, &d) == 0 && d == -5.0);
    ARR("a.f32");
    CHECK(hone_gguf_arr_f64(g, k, 0, &d) == 0 && d == -0.25);
    CHECK(hone_gguf_arr_f64(g, k, 1, &d) == 0 && d == (double)1e10f);
    CHECK_EQ_INT(hone_gguf_arr_i64(g, k, 0, &v), HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "array 'a.f32' holds float32, expected integers");
    ARR("a.bool");
    CHECK(hone_gguf_arr_i64(g, k, 0, &v) == 0 && v == 0);
    CHECK(hone_gguf_arr_i64(g, k, 1, &v) == 0 && v == 1);
    ARR("a.str");
    CHECK_EQ_INT(hone_gguf_arr_type(g, k), HONE_GGUF_TYPE_STRING);
    CHECK_EQ_INT(hone_gguf_arr_len(g, k), 3);
    CHECK(hone_gguf_arr_str(g, k, 0, &s) == 0 && str_eq(s, "a"));
    CHECK(hone_gguf_arr_str(g, k, 1, &s) == 0 && str_eq(s, ""));
    CHECK(hone_gguf_arr_str(g, k, 2, &s) == 0 && str_eq(s, "ccc"));
    CHECK_EQ_INT(hone_gguf_arr_str(g, k, 3, &s), HONE_ERANGE);
    CHECK_EQ_INT(hone_gguf_arr_f64(g, k, 0, &d), HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "array 'a.str' holds string, expected numbers");
    CHECK_EQ_INT(hone_gguf_arr_i64(g, k, 0, &v), HONE_EFORMAT);
    ARR("a.u64");
    CHECK(hone_gguf_arr_i64(g, k, 0, &v) == 0 && v == (int64_t)1 << 40);
    CHECK_EQ_INT(hone_gguf_arr_i64(g, k, 1, &v), HONE_EFORMAT); /* UINT64_MAX does not fit */
    CHECK(hone_gguf_arr_f64(g, k, 1, &d) == 0 && d == 18446744073709551615.0);
    ARR("a.u32");
    CHECK(hone_gguf_arr_i64(g, k, 0, &v) == 0 && v == 4294967295ll);
    ARR("a.i64");
    CHECK(hone_gguf_arr_i64(g, k, 0, &v) == 0 && v == INT64_MIN);
    CHECK(hone_gguf_arr_i64(g, k, 1, &v) == 0 && v == 12345678901234ll);
    CHECK(hone_gguf_arr_f64(g, k, 1, &d) == 0 && d == 12345678901234.0);
    ARR("a.f64");
    CHECK(hone_gguf_arr_f64(g, k, 0, &d) == 0 && d == -2.5);
    ARR("a.nested");
    CHECK_EQ_INT(hone_gguf_kv_type(g, k), HONE_GGUF_TYPE_ARRAY);
    CHECK_EQ_INT(hone_gguf_arr_type(g, k), HONE_GGUF_TYPE_ARRAY);
    CHECK_EQ_INT(hone_gguf_arr_len(g, k), 3);
    CHECK_EQ_INT(hone_gguf_arr_i64(g, k, 0, &v), HONE_EFORMAT);
    CHECK_EQ_INT(hone_gguf_arr_str(g, k, 0, &s), HONE_EFORMAT);
    ARR("a.empty");
    CHECK_EQ_INT(hone_gguf_arr_len(g, k), 0);
    CHECK_EQ_INT(hone_gguf_arr_i64(g, k, 0, &v), HONE_ERANGE);
    ARR("t.u32");
    CHECK_EQ_INT(hone_gguf_arr_len(g, k), 0);
    CHECK(hone_gguf_arr_data(g, k) == NULL);
    CHECK_EQ_INT(hone_gguf_arr_i64(g, k, 0, &v), HONE_EFORMAT);
    CHECK_STR_CONTAINS(hone_error_last(), "'t.u32' is uint32, expected an array");
#undef ARR

    /* tensors */
    CHECK_EQ_INT(hone_gguf_n_tensors(g), 3);
    const hone_gguf_tensor *a = hone_gguf_tensor_at(g, 0), *b = hone_gguf_tensor_at(g, 1),
                           *c = hone_gguf_tensor_at(g, 2);
    CHECK(strcmp(a->name, "a") == 0 && strcmp(b->name, "b.weight") == 0 && strcmp(c->name, "c") == 0);
    CHECK(hone_gguf_find_tensor(g, "b.weight") == b);
    CHECK(hone_gguf_find_tensor(g, "b") == NULL);
    CHECK_EQ_INT(a->n_dims, 2);
    CHECK(a->ne[0] == 3 && a->ne[1] == 2 && a->ne[2] == 1 && a->ne[3] == 1);
    CHECK_EQ_INT(a->dtype, HONE_DTYPE_F32);
    CHECK_EQ_INT(a->offset, 0);
    CHECK_EQ_INT(a->nbytes, 24);
    CHECK_EQ_INT(b->n_dims, 1);
    CHECK(b->ne[0] == 4 && b->ne[1] == 1);
    CHECK_EQ_INT(b->dtype, HONE_DTYPE_F16);
    CHECK_EQ_INT(b->offset, 32);
    CHECK_EQ_INT(b->nbytes, 8);
    CHECK_EQ_INT(c->n_dims, 3);
    CHECK(c->ne[0] == 32 && c->ne[1] == 2 && c->ne[2] == 1 && c->ne[3] == 1);
    CHECK_EQ_INT(c->dtype, HONE_DTYPE_Q4_0);
    CHECK_EQ_INT(c->nbytes, 36);
    CHECK((const uint8_t *)b->data - (const uint8_t *)a->data == 32);
    CHECK((const uint8_t *)c->data - (const uint8_t *)a->data == 64);
    CHECK((uintptr_t)a->data % 32 == 0); /* the mapping is page-aligned */
    float f[6];
    memcpy(f, a->data, sizeof f);
    for (int i = 0; i < 6; i++) CHECK_NEAR(f[i], i + 0.5, 0);
    uint16_t h[4];
    memcpy(h, b->data, sizeof h);
    CHECK(h[0] == 0x3c00 && h[3] == 0x3c03);
    CHECK(((const uint8_t *)c->data)[35] == (uint8_t)(35 * 7));
    /* the last tensor ends exactly at the end of the file */
    CHECK((const uint8_t *)c->data + c->nbytes - (const uint8_t *)a->data == 64 + 36);
}

static void test_all_metadata_types(void)
{
    for (uint32_t version = 2; version <= 3; version++) {
        wbuf b = {0};
        build_full(&b, version);
        size_t n = b.n;
        const char *path = write_buf(version == 2 ? "full_v2.gguf" : "full_v3.gguf", &b);
        hone_gguf *g = OPEN_OK(path);
        if (!g) continue;
        CHECK(strcmp(hone_gguf_path(g), path) == 0);
        check_full(g, version, n);
        hone_gguf_free(g);
    }
}

static void test_type_names(void)
{
    CHECK(strcmp(hone_gguf_type_name(HONE_GGUF_TYPE_UINT8), "uint8") == 0);
    CHECK(strcmp(hone_gguf_type_name(HONE_GGUF_TYPE_STRING), "string") == 0);
    CHECK(strcmp(hone_gguf_type_name(HONE_GGUF_TYPE_FLOAT64), "float64") == 0);
    CHECK(strcmp(hone_gguf_type_name((hone_gguf_type)13), "invalid") == 0);
    CHECK(strcmp(hone_gguf_type_name((hone_gguf_type)-1), "invalid") == 0);
    hone_gguf_free(NULL); /* accepts NULL */
}

static void test_header_only(void)
{
    wbuf b = {0};
    w_hdr(&b, 3, 0, 0);
    hone_gguf *g = OPEN_OK(write_buf("header_only.gguf", &b));
    if (!g) return;
    CHECK_EQ_INT(hone_gguf_n_kv(g), 0);
    CHECK_EQ_INT(hone_gguf_n_tensors(g), 0);
    CHECK_EQ_INT(hone_gguf_file_size(g), 24);
    CHECK(hone_gguf_find_tensor(g, "x") == NULL);
    hone_gguf_free(g);
}

/* general.alignment moves the data section and every tensor offset's granularity. */
static void test_alignment(void)
{
    static const uint32_t aligns[] = {1, 8, 64, 256, 4096};
    for (size_t ai = 0; ai < sizeof aligns / sizeof aligns[0]; ai++) {
        uint32_t al = aligns[ai];
        wbuf b = {0};
        uint64_t ne[1] = {5};
        w_hdr(&b, 3, 2, 1);
        w_kv_u32(&b, "general.alignment", al);
        uint64_t off1 = (20 + al - 1) / al * al;
        w_tinfo(&b, "x", 1, ne, HONE_DTYPE_F32, 0);
        w_tinfo(&b, "y", 1, ne, HONE_DTYPE_F32, off1);
        size_t header_end = b.n;
        w_pad(&b, al);
        size_t data_start = b.n;
        for (int i = 0; i < 5; i++) w_f32(&b, (float)(10 + i));
        while (b.n < data_start + off1) w_u8(&b, 0xee);
        for (int i = 0; i < 5; i++) w_f32(&b, (float)(-i));
        char name[32];
        snprintf(name, sizeof name, "align_%u.gguf", al);
        hone_gguf *g = OPEN_OK(write_buf(name, &b));
        if (!g) continue;
        CHECK_EQ_INT(hone_gguf_alignment(g), al);
        const hone_gguf_tensor *x = hone_gguf_tensor_at(g, 0), *y = hone_gguf_tensor_at(g, 1);
        CHECK_EQ_INT(y->offset, off1);
        CHECK((uintptr_t)x->data % al == 0);
        CHECK((uintptr_t)y->data % al == 0);
        CHECK((const uint8_t *)y->data - (const uint8_t *)x->data == (ptrdiff_t)off1);
        float fx[5], fy[5];
        memcpy(fx, x->data, sizeof fx);
        memcpy(fy, y->data, sizeof fy);
        for (int i = 0; i < 5; i++) {
            CHECK_NEAR(fx[i], 10 + i, 0);
            CHECK_NEAR(fy[i], -i, 0);
        }
        CHECK_MSG(data_start >= header_end && data_start % al == 0, "al %u", al);
        hone_gguf_free(g);
    }
    /* alignment given as another integer type still counts */
    wbuf b = {0};
    uint64_t ne[1] = {1};
    w_hdr(&b, 3, 1, 1);
    w_key(&b, "general.alignment", HONE_GGUF_TYPE_UINT64);
    w_u64(&b, 128);
    w_tinfo(&b, "x", 1, ne, HONE_DTYPE_F32, 0);
    w_pad(&b, 128);
    w_f32(&b, 7.0f);
    hone_gguf *g = OPEN_OK(write_buf("align_u64.gguf", &b));
    if (g) {
        CHECK_EQ_INT(hone_gguf_alignment(g), 128);
        CHECK((uintptr_t)hone_gguf_tensor_at(g, 0)->data % 128 == 0);
        hone_gguf_free(g);
    }
}

/* Every supported dtype with its byte count; unused dims read as 1. */
static void test_dtypes_and_nbytes(void)
{
    static const struct { uint32_t dt; uint64_t ne0, ne1; uint64_t nbytes; } cases[] = {
        {HONE_DTYPE_F32, 7, 3, 84},    {HONE_DTYPE_F16, 7, 3, 42},   {HONE_DTYPE_BF16, 5, 1, 10},
        {HONE_DTYPE_Q8_0, 64, 2, 136}, {HONE_DTYPE_Q4_0, 32, 3, 54}, {HONE_DTYPE_Q4_1, 96, 1, 60},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t ne[4] = {cases[i].ne0, cases[i].ne1, 1, 1};
        char name[32];
        snprintf(name, sizeof name, "dtype_%u.gguf", cases[i].dt);
        const char *path = one_tensor_file(name, 4, ne, cases[i].dt, 0, cases[i].nbytes);
        hone_gguf *g = OPEN_OK(path);
        if (!g) continue;
        const hone_gguf_tensor *t = hone_gguf_tensor_at(g, 0);
        CHECK_EQ_INT(t->n_dims, 4);
        CHECK_EQ_INT(t->dtype, cases[i].dt);
        CHECK_EQ_INT(t->nbytes, cases[i].nbytes);
        CHECK(t->ne[0] == (int64_t)cases[i].ne0 && t->ne[1] == (int64_t)cases[i].ne1 &&
              t->ne[2] == 1 && t->ne[3] == 1);
        hone_gguf_free(g);
        /* one byte short of the data is refused */
        snprintf(name, sizeof name, "dtype_%u_short.gguf", cases[i].dt);
        EXPECT_FAIL(one_tensor_file(name, 4, ne, cases[i].dt, 0, cases[i].nbytes - 1), HONE_EFORMAT,
                    "ends past the end of the file");
    }
}

/* ------------------------------------------------------------ corrupt files */

static void test_io_errors(void)
{
    const char *missing = tmp_path("does_not_exist.gguf");
    EXPECT_FAIL(missing, HONE_EIO, "No such file");
    EXPECT_FAIL(missing, HONE_EIO, "cannot open");
    EXPECT_FAIL(tmp_dir, HONE_EIO, "not a regular file");
    EXPECT_FAIL("/dev/null", HONE_EIO, "not a regular file");
}

/* A FIFO as the model path: refused at once (opening it must not wait for a writer). The
 * alarm turns a regression (a hang) into a failed test instead of a stuck suite. */
static void test_fifo(void)
{
    const char *fifo = tmp_path("model.fifo");
    CHECK_EQ_INT(mkfifo(fifo, 0600), 0);
    alarm(20);
    EXPECT_FAIL(fifo, HONE_EIO, "not a regular file (a FIFO)");
    alarm(0);
}

/* Many names: the duplicate checks and lookups are hashed, so 300k tensors and 300k keys
 * parse in well under a second (quadratic checks took minutes; the alarm catches that), the
 * last of each duplicated is still found, and lookups land on the right entry. */
#define MANY 300000
static void test_many_names(void)
{
    uint64_t ne[1] = {8};
    char name[32];
    for (int dup = 0; dup < 2; dup++) {
        wbuf b = {0};
        w_hdr(&b, 3, MANY, 0);
        for (int i = 0; i < MANY; i++) {
            snprintf(name, sizeof name, "t%d", dup && i == MANY - 1 ? 17 : i);
            w_tinfo(&b, name, 1, ne, 0, 0); /* every tensor may share the same data */
        }
        w_pad(&b, 32);
        w_zeros(&b, 32);
        const char *path = write_buf(dup ? "many_dup.gguf" : "many.gguf", &b);
        alarm(30);
        if (dup) {
            EXPECT_FAIL(path, HONE_EFORMAT, "duplicate tensor name 't17'");
        } else {
            hone_gguf *g = OPEN_OK(path);
            CHECK_EQ_INT(g ? hone_gguf_n_tensors(g) : -1, MANY);
            const hone_gguf_tensor *t = g ? hone_gguf_find_tensor(g, "t123456") : NULL;
            CHECK(t && t == hone_gguf_tensor_at(g, 123456));
            CHECK(!g || hone_gguf_find_tensor(g, "t300000") == NULL);
            hone_gguf_free(g);
        }
        alarm(0);
    }
    for (int dup = 0; dup < 2; dup++) {
        wbuf b = {0};
        w_hdr(&b, 3, 0, MANY);
        for (int i = 0; i < MANY; i++) {
            snprintf(name, sizeof name, "k.%d", dup && i == MANY - 1 ? 5 : i);
            w_str(&b, name);
            w_u32(&b, HONE_GGUF_TYPE_UINT32);
            w_u32(&b, (uint32_t)i);
        }
        const char *path = write_buf(dup ? "many_kdup.gguf" : "many_k.gguf", &b);
        alarm(30);
        if (dup) {
            EXPECT_FAIL(path, HONE_EFORMAT, "duplicate metadata key 'k.5'");
        } else {
            hone_gguf *g = OPEN_OK(path);
            CHECK_EQ_INT(g ? hone_gguf_find_key(g, "k.299999") : -2, MANY - 1);
            CHECK_EQ_INT(g ? hone_gguf_find_key(g, "k.300000") : -2, -1);
            hone_gguf_free(g);
        }
        alarm(0);
    }
}

static void test_empty_and_magic(void)
{
    EXPECT_FAIL(write_file("empty.gguf", "", 0), HONE_EFORMAT, "empty file");
    EXPECT_FAIL(write_file("three.gguf", "GGU", 3), HONE_EFORMAT, "not a GGUF file (3 bytes)");
    EXPECT_FAIL(write_file("magic_only.gguf", "GGUF", 4), HONE_EFORMAT, "truncated file: version");
    wbuf b = {0};
    w_hdr(&b, 3, 0, 0);
    memcpy(b.p, "GGML", 4);
    EXPECT_FAIL(write_buf("ggml.gguf", &b), HONE_EFORMAT, "not a GGUF file (bad magic 0x4c4d4747)");
    static const char text[] = "{\"this\": \"is json, not a model\"}\n";
    EXPECT_FAIL(write_file("json.gguf", text, sizeof text - 1), HONE_EFORMAT, "bad magic");
    /* big-endian GGUF reads as a huge version */
    w_hdr(&b, 0x03000000u, 0, 0);
    EXPECT_FAIL(write_buf("bigendian.gguf", &b), HONE_EUNSUPPORTED,
                "GGUF version 50331648 is not supported");
}

static void test_versions(void)
{
    static const uint32_t bad[] = {0, 1, 4, 0xffffffffu};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        wbuf b = {0};
        w_hdr(&b, bad[i], 0, 0);
        char want[64], name[32];
        snprintf(want, sizeof want, "GGUF version %u is not supported (2 and 3 are)", bad[i]);
        snprintf(name, sizeof name, "version_%zu.gguf", i);
        EXPECT_FAIL(write_buf(name, &b), HONE_EUNSUPPORTED, want);
    }
    for (uint32_t v = 2; v <= 3; v++) {
        wbuf b = {0};
        w_hdr(&b, v, 0, 1);
        w_kv_str(&b, "general.architecture", "llama");
        hone_gguf *g = OPEN_OK(write_buf(v == 2 ? "ok_v2.gguf" : "ok_v3.gguf", &b));
        if (!g) continue;
        hone_gguf_str s;
        CHECK_EQ_INT(hone_gguf_version(g), v);
        CHECK(hone_gguf_get_str(g, "general.architecture", &s) == 0 && str_eq(s, "llama"));
        hone_gguf_free(g);
    }
}

static void test_absurd_counts(void)
{
    wbuf b = {0};
    w_hdr(&b, 3, 1ull << 60, 0);
    w_zeros(&b, 64);
    EXPECT_FAIL(write_buf("tcount.gguf", &b), HONE_EFORMAT,
                "tensor count 1152921504606846976 is impossible for a 88-byte file");
    w_hdr(&b, 3, 0, 1ull << 60);
    w_zeros(&b, 64);
    EXPECT_FAIL(write_buf("kvcount.gguf", &b), HONE_EFORMAT,
                "metadata count 1152921504606846976 is impossible for a 88-byte file");
    w_hdr(&b, 3, UINT64_MAX, UINT64_MAX);
    EXPECT_FAIL(write_buf("maxcount.gguf", &b), HONE_EFORMAT, "is impossible");
    /* more tensor infos than the bytes after the header can hold (28 bytes each, minimum) */
    w_hdr(&b, 3, 4, 0);
    w_zeros(&b, 100);
    EXPECT_FAIL(write_buf("tcount4.gguf", &b), HONE_EFORMAT, "tensor count 4 is impossible");

    /* a key's length */
    w_hdr(&b, 3, 0, 1);
    w_u64(&b, 1ull << 62);
    w_zeros(&b, 16);
    EXPECT_FAIL(write_buf("keylen.gguf", &b), HONE_EFORMAT,
                "truncated file: key of metadata entry 0 at byte 32 needs 4611686018427387904 bytes");
    w_hdr(&b, 3, 0, 1);
    w_u64(&b, UINT64_MAX);
    w_zeros(&b, 16);
    EXPECT_FAIL(write_buf("keylen_max.gguf", &b), HONE_EFORMAT, "needs 18446744073709551615 bytes");
    /* a string value's length */
    w_hdr(&b, 3, 0, 1);
    w_key(&b, "s", HONE_GGUF_TYPE_STRING);
    w_u64(&b, 1ull << 62);
    w_zeros(&b, 16);
    EXPECT_FAIL(write_buf("strlen.gguf", &b), HONE_EFORMAT,
                "truncated file: value of key 's' at byte 45 needs 4611686018427387904 bytes");
    /* numeric arrays, including lengths whose byte count overflows 64 bits */
    static const struct { uint32_t t; uint64_t n; const char *want; } arrs[] = {
        {HONE_GGUF_TYPE_UINT32, 1ull << 40, "array 'arr' of 1099511627776 uint32 needs more bytes"},
        {HONE_GGUF_TYPE_UINT64, 1ull << 61, "array 'arr' of 2305843009213693952 uint64"},
        {HONE_GGUF_TYPE_INT16, 1ull << 63, "array 'arr' of 9223372036854775808 int16"},
        {HONE_GGUF_TYPE_UINT8, UINT64_MAX, "array 'arr' of 18446744073709551615 uint8"},
        {HONE_GGUF_TYPE_UINT8, 20, "array 'arr' of 20 uint8 needs more bytes than the 16 left"},
        {HONE_GGUF_TYPE_STRING, 1ull << 60, "key 'arr' claims 1152921504606846976 strings"},
        {HONE_GGUF_TYPE_STRING, 3, "key 'arr' claims 3 strings, more than the 16 bytes left"},
        {HONE_GGUF_TYPE_ARRAY, 1ull << 60, "key 'arr' claims 1152921504606846976 nested arrays"},
    };
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) {
        w_hdr(&b, 3, 0, 1);
        w_key(&b, "arr", HONE_GGUF_TYPE_ARRAY);
        w_u32(&b, arrs[i].t);
        w_u64(&b, arrs[i].n);
        w_zeros(&b, 16);
        char name[32];
        snprintf(name, sizeof name, "arrlen_%zu.gguf", i);
        EXPECT_FAIL(write_buf(name, &b), HONE_EFORMAT, arrs[i].want);
    }
    /* an array of strings whose element claims 2^62 bytes */
    w_hdr(&b, 3, 0, 1);
    w_key(&b, "arr", HONE_GGUF_TYPE_ARRAY);
    w_u32(&b, HONE_GGUF_TYPE_STRING);
    w_u64(&b, 2);
    w_str(&b, "ok");
    w_u64(&b, 1ull << 62);
    w_zeros(&b, 16);
    EXPECT_FAIL(write_buf("arrstrlen.gguf", &b), HONE_EFORMAT,
                "value of key 'arr' at byte 69 needs 4611686018427387904 bytes");
    /* a tensor name's length */
    w_hdr(&b, 3, 1, 0);
    w_u64(&b, 1ull << 62);
    w_zeros(&b, 40);
    EXPECT_FAIL(write_buf("tnamelen.gguf", &b), HONE_EFORMAT,
                "truncated file: info of tensor 0 at byte 32 needs 4611686018427387904 bytes");
}

static void test_bad_types(void)
{
    static const uint32_t types[] = {13, 100, 0xffffffffu};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        wbuf b = {0};
        char name[32], want[80];
        w_hdr(&b, 3, 0, 2);
        w_kv_u32(&b, "ok", 1);
        w_key(&b, "weird", types[i]);
        w_zeros(&b, 16);
        snprintf(name, sizeof name, "vtype_%zu.gguf", i);
        snprintf(want, sizeof want, "key 'weird' has unknown value type %u", types[i]);
        EXPECT_FAIL(write_buf(name, &b), HONE_EFORMAT, want);

        w_hdr(&b, 3, 0, 1);
        w_key(&b, "weird", HONE_GGUF_TYPE_ARRAY);
        w_u32(&b, types[i]);
        w_u64(&b, 1);
        w_zeros(&b, 16);
        snprintf(name, sizeof name, "atype_%zu.gguf", i);
        snprintf(want, sizeof want, "key 'weird' is an array of unknown type %u", types[i]);
        EXPECT_FAIL(write_buf(name, &b), HONE_EFORMAT, want);

        /* inside a nested array */
        w_hdr(&b, 3, 0, 1);
        w_key(&b, "weird", HONE_GGUF_TYPE_ARRAY);
        w_u32(&b, HONE_GGUF_TYPE_ARRAY);
        w_u64(&b, 1);
        w_u32(&b, types[i]);
        w_u64(&b, 1);
        w_zeros(&b, 16);
        snprintf(name, sizeof name, "ntype_%zu.gguf", i);
        EXPECT_FAIL(write_buf(name, &b), HONE_EFORMAT, want);
    }
}

static void test_bad_keys(void)
{
    wbuf b = {0};
    w_hdr(&b, 3, 0, 1);
    w_key(&b, "", HONE_GGUF_TYPE_UINT8);
    w_u8(&b, 0);
    w_zeros(&b, 8);
    EXPECT_FAIL(write_buf("emptykey.gguf", &b), HONE_EFORMAT,
                "metadata entry 0 has an invalid key (length 0)");
    w_hdr(&b, 3, 0, 1);
    w_u64(&b, 3);
    w_raw(&b, "a\0b", 3);
    w_u32(&b, HONE_GGUF_TYPE_UINT8);
    w_u8(&b, 0);
    w_zeros(&b, 8);
    EXPECT_FAIL(write_buf("nulkey.gguf", &b), HONE_EFORMAT,
                "metadata entry 0 has an invalid key (length 3)");
    w_hdr(&b, 3, 0, 3);
    w_kv_u32(&b, "a.b", 1);
    w_kv_u32(&b, "c", 2);
    w_kv_str(&b, "a.b", "again");
    EXPECT_FAIL(write_buf("dupkey.gguf", &b), HONE_EFORMAT, "duplicate metadata key 'a.b'");
}

static void test_bad_alignment(void)
{
    static const struct { uint32_t type; uint64_t v; } bad[] = {
        {HONE_GGUF_TYPE_UINT32, 0},      {HONE_GGUF_TYPE_UINT32, 3},
        {HONE_GGUF_TYPE_UINT32, 48},     {HONE_GGUF_TYPE_UINT32, 131072},
        {HONE_GGUF_TYPE_INT32, (uint32_t)-32}, {HONE_GGUF_TYPE_UINT64, UINT64_MAX},
        {HONE_GGUF_TYPE_FLOAT32, 0},     {HONE_GGUF_TYPE_BOOL, 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        wbuf b = {0};
        w_hdr(&b, 3, 0, 1);
        w_key(&b, "general.alignment", bad[i].type);
        if (bad[i].type == HONE_GGUF_TYPE_UINT64) w_u64(&b, bad[i].v);
        else if (bad[i].type == HONE_GGUF_TYPE_BOOL) w_u8(&b, (uint8_t)bad[i].v);
        else if (bad[i].type == HONE_GGUF_TYPE_FLOAT32) w_f32(&b, 32.0f);
        else w_u32(&b, (uint32_t)bad[i].v);
        char name[32];
        snprintf(name, sizeof name, "badalign_%zu.gguf", i);
        EXPECT_FAIL(write_buf(name, &b), HONE_EFORMAT, "general.alignment must be a power of two");
    }
    wbuf b = {0};
    w_hdr(&b, 3, 0, 1);
    w_kv_str(&b, "general.alignment", "32");
    EXPECT_FAIL(write_buf("badalign_str.gguf", &b), HONE_EFORMAT,
                "general.alignment must be a power of two <= 65536");
}

static void test_bad_tensor_infos(void)
{
    uint64_t ne[5] = {4, 4, 4, 4, 4};
    EXPECT_FAIL(one_tensor_file("ndims0.gguf", 0, ne, 0, 0, 64), HONE_EFORMAT,
                "tensor 'w' has 0 dimensions (1 to 4 allowed)");
    EXPECT_FAIL(one_tensor_file("ndims5.gguf", 5, ne, 0, 0, 4096), HONE_EFORMAT,
                "tensor 'w' has 5 dimensions (1 to 4 allowed)");
    uint64_t big_ne[5] = {4, 4, 4, 4, 4};
    ne[0] = UINT32_MAX;
    EXPECT_FAIL(one_tensor_file("ndimsmax.gguf", UINT32_MAX, ne, 0, 0, 64), HONE_EFORMAT,
                "tensor 'w' has 4294967295 dimensions");

    static const struct { int d; uint64_t v; const char *want; } dims[] = {
        {0, 0, "tensor 'w' has an absurd dimension 0 = 0"},
        {1, 0, "tensor 'w' has an absurd dimension 1 = 0"},
        {0, 1ull << 50, "tensor 'w' has an absurd dimension 0 = 1125899906842624"},
        {2, 1ull << 41, "absurd dimension 2 = 2199023255552"},
        {3, UINT64_MAX, "absurd dimension 3 = 18446744073709551615"},
        {1, 1ull << 63, "absurd dimension 1 = 9223372036854775808"},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        uint64_t n4[4] = {32, 4, 4, 4};
        n4[dims[i].d] = dims[i].v;
        char name[32];
        snprintf(name, sizeof name, "dim_%zu.gguf", i);
        EXPECT_FAIL(one_tensor_file(name, 4, n4, 0, 0, 64), HONE_EFORMAT, dims[i].want);
    }
    /* each dimension fine alone, but the element count overflows the limit */
    big_ne[0] = 1ull << 30;
    big_ne[1] = 1ull << 30;
    EXPECT_FAIL(one_tensor_file("dimprod.gguf", 2, big_ne, 0, 0, 64), HONE_EFORMAT,
                "absurd dimension 1 = 1073741824");
    big_ne[0] = 1ull << 20; big_ne[1] = 1ull << 10; big_ne[2] = 1ull << 10; big_ne[3] = 1ull << 10;
    EXPECT_FAIL(one_tensor_file("dimprod4.gguf", 4, big_ne, 0, 0, 64), HONE_EFORMAT,
                "absurd dimension 3 = 1024");

    /* dtypes: unknown numbers, and known GGML types Hone does not serve (named) */
    uint64_t n2[2] = {256, 2};
    EXPECT_FAIL(one_tensor_file("dtype77.gguf", 2, n2, 77, 0, 4096), HONE_EFORMAT,
                "tensor 'w' has unknown dtype 77");
    EXPECT_FAIL(one_tensor_file("dtype36.gguf", 2, n2, 36, 0, 4096), HONE_EFORMAT, "unknown dtype 36");
    EXPECT_FAIL(one_tensor_file("dtypemax.gguf", 2, n2, UINT32_MAX, 0, 4096), HONE_EFORMAT,
                "unknown dtype 4294967295");
    static const struct { uint32_t dt; const char *nm; } unsup[] = {
        {15, "q8_K"}, {16, "iq2_xxs"}, {9, "q8_1"}, {4, "q4_2"}, {26, "i32"}, {28, "f64"}, {35, "tq2_0"},
    };
    for (size_t i = 0; i < sizeof unsup / sizeof unsup[0]; i++) {
        char name[32], want[96];
        snprintf(name, sizeof name, "unsup_%u.gguf", unsup[i].dt);
        snprintf(want, sizeof want, "tensor 'w' has dtype %s (%u), which Hone does not serve",
                 unsup[i].nm, unsup[i].dt);
        EXPECT_FAIL(one_tensor_file(name, 2, n2, unsup[i].dt, 0, 4096), HONE_EUNSUPPORTED, want);
    }

    /* block formats need whole blocks per row */
    uint64_t q[2] = {48, 2};
    EXPECT_FAIL(one_tensor_file("q4rows.gguf", 2, q, HONE_DTYPE_Q4_0, 0, 4096), HONE_EFORMAT,
                "tensor 'w' row length 48 is not a multiple of the q4_0 block size 32");
    q[0] = 16;
    EXPECT_FAIL(one_tensor_file("q8rows.gguf", 2, q, HONE_DTYPE_Q8_0, 0, 4096), HONE_EFORMAT,
                "row length 16 is not a multiple of the q8_0 block size 32");
    q[0] = 33;
    EXPECT_FAIL(one_tensor_file("q41rows.gguf", 2, q, HONE_DTYPE_Q4_1, 0, 4096), HONE_EFORMAT,
                "row length 33 is not a multiple of the q4_1 block size 32");

    /* offsets: misaligned, past the end, and so large that offset + size would wrap */
    uint64_t v[1] = {8};
    EXPECT_FAIL(one_tensor_file("misaligned.gguf", 1, v, 0, 4, 64), HONE_EFORMAT,
                "tensor 'w' offset 4 is not aligned to 32");
    EXPECT_FAIL(one_tensor_file("pastend.gguf", 1, v, 0, 32, 48), HONE_EFORMAT,
                "tensor 'w' data [96, 128) ends past the end of the file (112 bytes)");
    EXPECT_FAIL(one_tensor_file("hugeoff.gguf", 1, v, 0, 1ull << 62, 64), HONE_EFORMAT,
                "ends past the end of the file");
    EXPECT_FAIL(one_tensor_file("maxoff.gguf", 1, v, 0, UINT64_MAX - 31, 64), HONE_EFORMAT,
                "ends past the end of the file");
    /* just fits */
    hone_gguf *g = OPEN_OK(one_tensor_file("fits.gguf", 1, v, 0, 32, 64));
    if (g) {
        CHECK_EQ_INT(hone_gguf_tensor_at(g, 0)->offset, 32);
        hone_gguf_free(g);
    }
    /* with a larger alignment, an offset aligned to 32 is not enough */
    wbuf b = {0};
    w_hdr(&b, 3, 1, 1);
    w_kv_u32(&b, "general.alignment", 64);
    w_tinfo(&b, "w", 1, v, 0, 32);
    w_pad(&b, 64);
    w_zeros(&b, 128);
    EXPECT_FAIL(write_buf("misaligned64.gguf", &b), HONE_EFORMAT,
                "tensor 'w' offset 32 is not aligned to 64");

    /* names: empty, embedded NUL, duplicated */
    w_hdr(&b, 3, 1, 0);
    w_tinfo(&b, "", 1, v, 0, 0);
    w_pad(&b, 32);
    w_zeros(&b, 32);
    EXPECT_FAIL(write_buf("tname_empty.gguf", &b), HONE_EFORMAT, "tensor 0 has an invalid name");
    w_hdr(&b, 3, 1, 0);
    w_u64(&b, 3);
    w_raw(&b, "w\0x", 3);
    w_u32(&b, 1);
    w_u64(&b, 8);
    w_u32(&b, 0);
    w_u64(&b, 0);
    w_pad(&b, 32);
    w_zeros(&b, 32);
    EXPECT_FAIL(write_buf("tname_nul.gguf", &b), HONE_EFORMAT, "tensor 0 has an invalid name");
    w_hdr(&b, 3, 3, 0);
    w_tinfo(&b, "w", 1, v, 0, 0);
    w_tinfo(&b, "x", 1, v, 0, 32);
    w_tinfo(&b, "w", 1, v, 0, 64);
    w_pad(&b, 32);
    w_zeros(&b, 96);
    EXPECT_FAIL(write_buf("dup_tensor.gguf", &b), HONE_EFORMAT, "duplicate tensor name 'w'");

    /* a file whose tensor infos end, but the data section would start past the end */
    w_hdr(&b, 3, 1, 0);
    w_tinfo(&b, "w", 1, v, 0, 0);
    EXPECT_FAIL(write_buf("nodata.gguf", &b), HONE_EFORMAT, "tensor data would start at byte 64");
}

/* Arrays nested far deeper than any model uses must be refused, not recursed into until the
 * stack runs out. */
static void test_deep_nesting(void)
{
    const uint64_t depth = 1000000;
    wbuf b = {0};
    w_hdr(&b, 3, 0, 1);
    w_key(&b, "deep", HONE_GGUF_TYPE_ARRAY);
    for (uint64_t i = 0; i < depth; i++) {
        w_u32(&b, HONE_GGUF_TYPE_ARRAY);
        w_u64(&b, 1);
    }
    w_u32(&b, HONE_GGUF_TYPE_UINT8);
    w_u64(&b, 0);
    EXPECT_FAIL(write_buf("deep.gguf", &b), HONE_EFORMAT, "key 'deep' nests arrays deeper than");
    /* the limit is 16 array-of-array levels: 17 is refused, 16 and fewer are read */
    w_hdr(&b, 3, 0, 1);
    w_key(&b, "deep17", HONE_GGUF_TYPE_ARRAY);
    for (int i = 0; i < 17; i++) {
        w_u32(&b, HONE_GGUF_TYPE_ARRAY);
        w_u64(&b, 1);
    }
    w_u32(&b, HONE_GGUF_TYPE_UINT8);
    w_u64(&b, 0);
    EXPECT_FAIL(write_buf("deep17.gguf", &b), HONE_EFORMAT, "key 'deep17' nests arrays deeper than 16");
    w_hdr(&b, 3, 0, 2);
    w_key(&b, "nest", HONE_GGUF_TYPE_ARRAY);
    for (int i = 0; i < 16; i++) {
        w_u32(&b, HONE_GGUF_TYPE_ARRAY);
        w_u64(&b, 1);
    }
    w_u32(&b, HONE_GGUF_TYPE_UINT16);
    w_u64(&b, 1);
    w_u16(&b, 9);
    w_kv_u32(&b, "next", 5);
    hone_gguf *g = OPEN_OK(write_buf("nest3.gguf", &b));
    if (g) {
        int64_t v = 0;
        CHECK(hone_gguf_get_i64(g, "next", &v) == 0 && v == 5);
        hone_gguf_free(g);
    }
}

/* ------------------------------------------------------------ truncation sweeps */

static int truncation_message_ok(const char *msg, const char *path)
{
    static const char *const kinds[] = {"truncated file", "is impossible for a", "claims",
                                        "empty file", "not a GGUF file"};
    if (!strstr(msg, path)) return 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strstr(msg, kinds[i])) return 1;
    return 0;
}

/* Shrinks the file at path to each size in sizes[] (descending) and checks that each is refused
 * with HONE_EFORMAT and a message naming the file and the truncation. Returns failures. */
static int sweep_truncations(const char *path, const uint64_t *sizes, size_t n, int check_kind)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (truncate(path, (off_t)sizes[i]) != 0) {
            perror("truncate");
            return 1;
        }
        hone_gguf *g = NULL;
        int rc = hone_gguf_open(&g, path);
        const char *msg = hone_error_last();
        int ok = rc == HONE_EFORMAT && g == NULL && (!check_kind || truncation_message_ok(msg, path));
        if (!ok && bad++ < 5)
            fprintf(stderr, "truncated at %llu: rc %d: %s\n", (unsigned long long)sizes[i], rc, msg);
        hone_gguf_free(g);
    }
    return bad;
}

static void test_truncated_synthetic(void)
{
    for (uint32_t version = 2; version <= 3; version++) {
        wbuf b = {0};
        build_full(&b, version);
        size_t n = b.n;
        const char *path = write_buf("trunc_full.gguf", &b);
        uint64_t *sizes = malloc(n * sizeof *sizes);
        for (size_t i = 0; i < n; i++) sizes[i] = n - 1 - i; /* every proper prefix, descending */
        CHECK_EQ_INT(sweep_truncations(path, sizes, n, 1), 0);
        free(sizes);
    }
}

/* Walks a GGUF header independently of the reader: returns the offset of the data section. */
static int walk_value(const uint8_t *p, size_t n, size_t *pos, uint32_t t, uint64_t *align, int is_align)
{
    static const int sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (t == HONE_GGUF_TYPE_STRING) {
        uint64_t len;
        memcpy(&len, p + *pos, 8);
        *pos += 8 + len;
    } else if (t == HONE_GGUF_TYPE_ARRAY) {
        uint32_t at;
        uint64_t len;
        memcpy(&at, p + *pos, 4);
        memcpy(&len, p + *pos + 4, 8);
        *pos += 12;
        for (uint64_t j = 0; j < len; j++)
            if (walk_value(p, n, pos, at, align, 0)) return -1;
    } else if (t <= 12) {
        if (is_align && t == HONE_GGUF_TYPE_UINT32) {
            uint32_t a;
            memcpy(&a, p + *pos, 4);
            *align = a;
        }
        *pos += (size_t)sz[t];
    } else {
        return -1;
    }
    return *pos <= n ? 0 : -1;
}

static uint64_t walk_data_start(const uint8_t *p, size_t n)
{
    uint64_t n_tensors, n_kv, align = 32;
    memcpy(&n_tensors, p + 8, 8);
    memcpy(&n_kv, p + 16, 8);
    size_t pos = 24;
    for (uint64_t i = 0; i < n_kv; i++) {
        uint64_t klen;
        memcpy(&klen, p + pos, 8);
        int is_align = klen == 17 && memcmp(p + pos + 8, "general.alignment", 17) == 0;
        pos += 8 + klen;
        uint32_t t;
        memcpy(&t, p + pos, 4);
        pos += 4;
        if (walk_value(p, n, &pos, t, &align, is_align)) return 0;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        uint64_t nlen;
        uint32_t nd;
        memcpy(&nlen, p + pos, 8);
        pos += 8 + nlen;
        memcpy(&nd, p + pos, 4);
        pos += 4 + 8 * (size_t)nd + 4 + 8;
    }
    return (pos + align - 1) / align * align;
}

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* A real tiny model, cut at every byte of its first 1 KiB, at every 13th byte of the rest of
 * its header, around the start of the data section, and at the edges of every tensor. */
static void test_truncated_real_model(void)
{
    char src[512];
    snprintf(src, sizeof src, "%s/tiny-llama-f32.gguf", HONE_TEST_DATA_DIR);
    if (access(src, R_OK) != 0) {
        SKIP_CASE("%s not found", src);
        return;
    }
    size_t n = 0;
    uint8_t *file = read_whole(src, &n);
    hone_gguf *g = OPEN_OK(src);
    if (!g) {
        free(file);
        return;
    }
    uint64_t data_start = walk_data_start(file, n);
    CHECK_MSG(data_start > 1024 && data_start < n, "data_start %llu", (unsigned long long)data_start);
    /* every tensor's data pointer lands where the file says, with the file's bytes */
    uint64_t data_end = 0;
    for (int64_t i = 0; i < hone_gguf_n_tensors(g); i++) {
        const hone_gguf_tensor *t = hone_gguf_tensor_at(g, i);
        CHECK_MSG(data_start + t->offset + t->nbytes <= n &&
                      memcmp(t->data, file + data_start + t->offset, t->nbytes) == 0,
                  "tensor %s bytes differ", t->name);
        if (t->offset + t->nbytes > data_end) data_end = t->offset + t->nbytes;
    }
    data_end += data_start;
    CHECK_MSG(data_end <= n && data_end + 32 > n, "data_end %llu, size %zu",
              (unsigned long long)data_end, n);

    size_t cap = 4096 + data_start / 13 + 200 + 4 * (size_t)hone_gguf_n_tensors(g), k = 0;
    uint64_t *sizes = malloc(cap * sizeof *sizes);
    for (uint64_t s = 0; s < 1024; s++) sizes[k++] = s;
    for (uint64_t s = 1024; s < data_start; s += 13) sizes[k++] = s;
    for (uint64_t s = data_start - 64; s <= data_start + 64; s++) sizes[k++] = s;
    for (int64_t i = 0; i < hone_gguf_n_tensors(g); i++) {
        const hone_gguf_tensor *t = hone_gguf_tensor_at(g, i);
        uint64_t beg = data_start + t->offset, end = beg + t->nbytes;
        sizes[k++] = beg;
        sizes[k++] = beg + 1;
        sizes[k++] = end - 1;
    }
    sizes[k++] = data_end - 1;
    qsort(sizes, k, sizeof *sizes, cmp_desc);
    hone_gguf_free(g);

    const char *path = write_file("trunc_real.gguf", file, n);
    /* the untouched copy opens */
    g = OPEN_OK(path);
    hone_gguf_free(g);
    CHECK_EQ_INT(sweep_truncations(path, sizes, k, 1), 0);
    fprintf(stderr, "  %zu truncation points of a %zu-byte model (data at %llu)\n", k, n,
            (unsigned long long)data_start);
    free(sizes);
    free(file);
}

/* The generated tiny models read back with the metadata make_tiny_model.py wrote. */
static void test_real_models(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tiny-llama-f32.gguf", HONE_TEST_DATA_DIR);
    if (access(path, R_OK) != 0) {
        SKIP_CASE("%s not found", path);
        return;
    }
    hone_gguf *g = OPEN_OK(path);
    if (!g) return;
    hone_gguf_str s;
    int64_t v = 0;
    double d = 0;
    CHECK_EQ_INT(hone_gguf_version(g), 3);
    CHECK_EQ_INT(hone_gguf_alignment(g), 32);
    CHECK(hone_gguf_get_str(g, "general.architecture", &s) == 0 && str_eq(s, "llama"));
    CHECK(hone_gguf_get_str(g, "general.name", &s) == 0 && str_eq(s, "tiny-llama-f32"));
    CHECK(hone_gguf_get_i64(g, "llama.block_count", &v) == 0 && v == 2);
    CHECK(hone_gguf_get_i64(g, "llama.embedding_length", &v) == 0 && v == 64);
    CHECK(hone_gguf_get_i64(g, "llama.attention.head_count_kv", &v) == 0 && v == 2);
    CHECK(hone_gguf_get_f64(g, "llama.rope.freq_base", &d) == 0 && d == 10000.0);
    CHECK(hone_gguf_get_f64(g, "llama.attention.layer_norm_rms_epsilon", &d) == 0 && d == (double)1e-5f);
    int b = -1;
    CHECK(hone_gguf_get_bool_opt(g, "tokenizer.ggml.add_eos_token", &b) == 0 && b == 0);
    int64_t k = hone_gguf_find_key(g, "tokenizer.ggml.tokens");
    CHECK(k >= 0);
    if (k >= 0) {
        CHECK_EQ_INT(hone_gguf_arr_type(g, k), HONE_GGUF_TYPE_STRING);
        CHECK_EQ_INT(hone_gguf_arr_len(g, k), 2048);
        CHECK(hone_gguf_arr_str(g, k, 2047, &s) == 0 && s.len > 0);
    }
    k = hone_gguf_find_key(g, "tokenizer.ggml.token_type");
    CHECK(k >= 0 && hone_gguf_arr_len(g, k) == 2048);
    CHECK(k >= 0 && hone_gguf_arr_i64(g, k, 0, &v) == 0 && v >= 1 && v <= 6);
    /* token_embd, 2 x 9 per layer, output_norm, output */
    CHECK_EQ_INT(hone_gguf_n_tensors(g), 21);
    const hone_gguf_tensor *t = hone_gguf_find_tensor(g, "token_embd.weight");
    CHECK(t && t->n_dims == 2 && t->ne[0] == 64 && t->ne[1] == 2048 && t->dtype == HONE_DTYPE_F32 &&
          t->nbytes == 2048 * 64 * 4);
    t = hone_gguf_find_tensor(g, "blk.1.ffn_down.weight");
    CHECK(t && t->ne[0] == 96 && t->ne[1] == 64 && t->nbytes == 96 * 64 * 4);
    t = hone_gguf_find_tensor(g, "output_norm.weight");
    CHECK(t && t->n_dims == 1 && t->ne[0] == 64 && t->ne[1] == 1);
    hone_gguf_free(g);

    snprintf(path, sizeof path, "%s/tiny-llama-q4_0.gguf", HONE_TEST_DATA_DIR);
    if (access(path, R_OK) != 0) return;
    g = OPEN_OK(path);
    if (!g) return;
    t = hone_gguf_find_tensor(g, "blk.0.attn_q.weight");
    CHECK(t && t->dtype == HONE_DTYPE_Q4_0 && t->nbytes == 64 * 2 * 18);
    t = hone_gguf_find_tensor(g, "blk.0.attn_norm.weight");
    CHECK(t && t->dtype == HONE_DTYPE_F32);
    for (int64_t i = 0; i < hone_gguf_n_tensors(g); i++)
        CHECK((uintptr_t)hone_gguf_tensor_at(g, i)->data % 32 == 0);
    hone_gguf_free(g);
}

/* Flipping bytes in the header must never crash: the reader either refuses with a message or
 * opens a file whose every tensor still lies inside it. */
static void test_corrupted_bytes(void)
{
    wbuf b = {0};
    build_full(&b, 3);
    size_t n = b.n;
    uint8_t *orig = b.p;
    static const uint8_t vals[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
    const char *path = tmp_path("flip.gguf");
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t v = 0; v < sizeof vals; v++) {
            if (orig[i] == vals[v]) continue;
            uint8_t save = orig[i];
            orig[i] = vals[v];
            write_file("flip.gguf", orig, n);
            orig[i] = save;
            hone_gguf *g = NULL;
            int rc = hone_gguf_open(&g, path);
            if (rc == 0) {
                for (int64_t t = 0; t < hone_gguf_n_tensors(g); t++) {
                    const hone_gguf_tensor *ti = hone_gguf_tensor_at(g, t);
                    volatile uint8_t last = ((const uint8_t *)ti->data)[ti->nbytes ? ti->nbytes - 1 : 0];
                    (void)last;
                }
                hone_gguf_free(g);
            } else if ((rc != HONE_EFORMAT && rc != HONE_EUNSUPPORTED) || !strstr(hone_error_last(), path)) {
                if (bad++ < 5)
                    fprintf(stderr, "byte %zu = 0x%02x: rc %d: %s\n", i, vals[v], rc, hone_error_last());
            }
        }
    }
    CHECK_EQ_INT(bad, 0);
    free(orig);
}

TEST_MAIN(TEST_CASE(test_all_metadata_types), TEST_CASE(test_type_names), TEST_CASE(test_header_only),
          TEST_CASE(test_alignment), TEST_CASE(test_dtypes_and_nbytes), TEST_CASE(test_io_errors), TEST_CASE(test_fifo), TEST_CASE(test_many_names),
          TEST_CASE(test_empty_and_magic), TEST_CASE(test_versions), TEST_CASE(test_absurd_counts),
          TEST_CASE(test_bad_types), TEST_CASE(test_bad_keys), TEST_CASE(test_bad_alignment),
          TEST_CASE(test_bad_tensor_infos), TEST_CASE(test_deep_nesting),
          TEST_CASE(test_truncated_synthetic), TEST_CASE(test_truncated_real_model),
          TEST_CASE(test_real_models),
          TEST_CASE(test_corrupted_bytes))
