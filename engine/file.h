/* Whole-file reads, the one helper every module uses for sources, logs, metadata and
 * binaries. */
#ifndef HONE_FILE_H
#define HONE_FILE_H

#include <stddef.h>

/* Reads path (any kind of file, pipes included) into a malloc'd buffer with a NUL byte after
 * the last one, so text can be used as a string; *out_len (may be NULL) gets the length.
 * Errors: HONE_EIO "path: <strerror>" when it cannot be opened (errno is left as fopen set
 * it, so callers can tell ENOENT apart), HONE_ENOMEM, HONE_EIO "path: read error". */
int hone_file_read(const char *path, char **out, size_t *out_len);

/* Removes path and, when it is a directory, everything below it (as `rm -rf`, without a shell;
 * symbolic links are removed, never followed). A missing path is not an error. Errors: HONE_EIO
 * "cannot remove path: <strerror>". */
int hone_file_remove_tree(const char *path);

#endif
