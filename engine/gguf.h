/* GGUF reader (versions 2 and 3), memory-mapped and validated.
 * hone_gguf_open checks every count, offset and size against the file before
 * anything is returned, so later accessors never read outside the mapping. */
#ifndef HONE_GGUF_H
#define HONE_GGUF_H

#include <stdint.h>

#include "dtype.h"

typedef enum {
    HONE_GGUF_TYPE_UINT8 = 0,
    HONE_GGUF_TYPE_INT8 = 1,
    HONE_GGUF_TYPE_UINT16 = 2,
    HONE_GGUF_TYPE_INT16 = 3,
    HONE_GGUF_TYPE_UINT32 = 4,
    HONE_GGUF_TYPE_INT32 = 5,
    HONE_GGUF_TYPE_FLOAT32 = 6,
    HONE_GGUF_TYPE_BOOL = 7,
    HONE_GGUF_TYPE_STRING = 8,
    HONE_GGUF_TYPE_ARRAY = 9,
    HONE_GGUF_TYPE_UINT64 = 10,
    HONE_GGUF_TYPE_INT64 = 11,
    HONE_GGUF_TYPE_FLOAT64 = 12
} hone_gguf_type;

/* A string inside the mapping: not NUL-terminated. */
typedef struct {
    const char *ptr;
    uint64_t len;
} hone_gguf_str;

#define HONE_GGUF_MAX_DIMS 4

typedef struct {
    const char *name;                /* NUL-terminated copy, owned by the reader */
    int n_dims;                      /* 1..4 */
    int64_t ne[HONE_GGUF_MAX_DIMS];  /* ne[0] is the fastest-varying (row length); unused dims are 1 */
    hone_dtype dtype;
    uint64_t offset;                 /* from the start of the data section */
    uint64_t nbytes;
    const void *data;                /* into the mapping, aligned to the file's alignment */
} hone_gguf_tensor;

typedef struct hone_gguf hone_gguf;

/* Maps and validates path. Errors (HONE_EIO, HONE_EFORMAT, HONE_EUNSUPPORTED) name the
 * problem and its byte offset, e.g. "model.gguf: tensor 'blk.0.attn_q.weight' data
 * [1234, 5678) ends past the end of the file (4096 bytes)". */
int hone_gguf_open(hone_gguf **out, const char *path);
void hone_gguf_free(hone_gguf *g);

uint32_t hone_gguf_version(const hone_gguf *g);
uint64_t hone_gguf_alignment(const hone_gguf *g);
uint64_t hone_gguf_file_size(const hone_gguf *g);
const char *hone_gguf_path(const hone_gguf *g);

/* Metadata key/values, in file order. */
int64_t hone_gguf_n_kv(const hone_gguf *g);
const char *hone_gguf_kv_key(const hone_gguf *g, int64_t i);        /* NUL-terminated */
hone_gguf_type hone_gguf_kv_type(const hone_gguf *g, int64_t i);
int64_t hone_gguf_find_key(const hone_gguf *g, const char *key);    /* -1 if absent */

/* Scalar value i converted to the requested C type; returns HONE_EFORMAT if the stored
 * type is not numeric (or a string / array for get_str). Integers must fit. */
int hone_gguf_kv_i64(const hone_gguf *g, int64_t i, int64_t *out);
int hone_gguf_kv_f64(const hone_gguf *g, int64_t i, double *out);  /* any numeric type */
int hone_gguf_kv_bool(const hone_gguf *g, int64_t i, int *out);
int hone_gguf_kv_str(const hone_gguf *g, int64_t i, hone_gguf_str *out);

/* Arrays: element type, length, and elements. Numeric arrays are raw little-endian data
 * of the element type (may be unaligned: read with memcpy or the typed getters). */
hone_gguf_type hone_gguf_arr_type(const hone_gguf *g, int64_t i);
uint64_t hone_gguf_arr_len(const hone_gguf *g, int64_t i);
const void *hone_gguf_arr_data(const hone_gguf *g, int64_t i);
int hone_gguf_arr_i64(const hone_gguf *g, int64_t i, uint64_t j, int64_t *out);
int hone_gguf_arr_f64(const hone_gguf *g, int64_t i, uint64_t j, double *out);
int hone_gguf_arr_str(const hone_gguf *g, int64_t i, uint64_t j, hone_gguf_str *out);

/* Convenience by key: HONE_EFORMAT with "missing metadata key 'k'" if absent, or a type
 * error naming the key. The _opt forms leave *out unchanged and return 0 if absent. */
int hone_gguf_get_i64(const hone_gguf *g, const char *key, int64_t *out);
int hone_gguf_get_f64(const hone_gguf *g, const char *key, double *out);
int hone_gguf_get_str(const hone_gguf *g, const char *key, hone_gguf_str *out);
int hone_gguf_get_i64_opt(const hone_gguf *g, const char *key, int64_t *out);
int hone_gguf_get_f64_opt(const hone_gguf *g, const char *key, double *out);
int hone_gguf_get_bool_opt(const hone_gguf *g, const char *key, int *out);

/* Tensors, in file order. */
int64_t hone_gguf_n_tensors(const hone_gguf *g);
const hone_gguf_tensor *hone_gguf_tensor_at(const hone_gguf *g, int64_t i);
const hone_gguf_tensor *hone_gguf_find_tensor(const hone_gguf *g, const char *name); /* NULL if absent */

const char *hone_gguf_type_name(hone_gguf_type t);

#endif
