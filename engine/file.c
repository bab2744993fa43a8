/* Whole-file reads, and removing a directory tree. */
#include "file.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"

int hone_file_read(const char *path, char **out, size_t *out_len)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        int rc = hone_error_set(HONE_EIO, "%s: %s", path, strerror(e));
        errno = e;
        return rc;
    }
    size_t cap = 16384, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *nb = realloc(buf, cap *= 2);
        if (!nb) {
            free(buf);
            buf = NULL;
        } else {
            buf = nb;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) return hone_error_set(HONE_ENOMEM, "out of memory reading %s", path);
    if (err) {
        free(buf);
        return hone_error_set(HONE_EIO, "%s: read error", path);
    }
    buf[n] = 0;
    *out = buf;
    if (out_len) *out_len = n;
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) ? errno : 0;
}

int hone_file_remove_tree(const char *path)
{
    /* depth first, links not followed: a link inside is removed, never what it points to */
    int e = nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (e == 0 || (e < 0 && errno == ENOENT)) return 0;
    return hone_error_set(HONE_EIO, "cannot remove %s: %s", path, strerror(e > 0 ? e : errno));
}
