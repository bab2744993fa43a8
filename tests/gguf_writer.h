/* Test support shared by the GGUF and model tests: a little-endian byte writer for building
 * GGUF files by hand, and temp files in one directory of the test's own, removed at exit. */
#ifndef HONE_TEST_GGUF_WRITER_H
#define HONE_TEST_GGUF_WRITER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    uint8_t *p;
    size_t n, cap;
} wbuf;

static inline void w_raw(wbuf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) abort();
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}

static inline void w_u8(wbuf *b, uint8_t v) { w_raw(b, &v, 1); }
static inline void w_u16(wbuf *b, uint16_t v) { w_raw(b, &v, 2); }
static inline void w_u32(wbuf *b, uint32_t v) { w_raw(b, &v, 4); }
static inline void w_u64(wbuf *b, uint64_t v) { w_raw(b, &v, 8); }
static inline void w_f32(wbuf *b, float v) { w_raw(b, &v, 4); }
static inline void w_f64(wbuf *b, double v) { w_raw(b, &v, 8); }
static inline void w_zeros(wbuf *b, size_t n) { while (n--) w_u8(b, 0); }

/* A GGUF string: u64 length, then the bytes. */
static inline void w_str(wbuf *b, const char *s)
{
    w_u64(b, strlen(s));
    w_raw(b, s, strlen(s));
}

static char tmp_dir[64];
static char tmp_files[256][128];
static int n_tmp_files;

static inline void cleanup_tmp(void)
{
    for (int i = 0; i < n_tmp_files; i++) unlink(tmp_files[i]);
    if (tmp_dir[0]) rmdir(tmp_dir);
}

/* Path of `name` in the test's temp dir (created on first use, removed at exit). */
static inline const char *tmp_path(const char *name)
{
    if (!tmp_dir[0]) {
        snprintf(tmp_dir, sizeof tmp_dir, "/tmp/hone_test_XXXXXX");
        if (!mkdtemp(tmp_dir)) {
            perror("mkdtemp");
            exit(1);
        }
        atexit(cleanup_tmp);
    }
    for (int i = 0; i < n_tmp_files; i++)
        if (strcmp(strrchr(tmp_files[i], '/') + 1, name) == 0) return tmp_files[i];
    if (n_tmp_files == (int)(sizeof tmp_files / sizeof tmp_files[0])) abort();
    snprintf(tmp_files[n_tmp_files], sizeof tmp_files[0], "%s/%s", tmp_dir, name);
    return tmp_files[n_tmp_files++];
}

#endif
