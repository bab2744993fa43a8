/* Error codes and the thread-local last-error message.
 * Every fallible function returns 0 or a negative HONE_E* code and records a message
 * with hone_error_set(); callers read it with hone_error_last(). */
#ifndef HONE_ERROR_H
#define HONE_ERROR_H

enum {
    HONE_OK = 0,
    HONE_EINVAL = -1,   /* bad argument or bad input (user error) */
    HONE_ENOMEM = -2,   /* allocation failed */
    HONE_EIO = -3,      /* read/write/open failed */
    HONE_EFORMAT = -4,  /* a file is corrupt, truncated or unsupported */
    HONE_EUNSUPPORTED = -5, /* valid input this build cannot handle */
    HONE_ERANGE = -6,   /* a size or index out of its allowed range */
    HONE_EINTERNAL = -7, /* a bug: an invariant did not hold */
    HONE_ECANCELED = -8 /* the caller's cancel flag stopped the work (a stopping server) */
};

/* Records a printf-style message for this thread and returns code, so that
 * `return hone_error_set(HONE_EINVAL, "bad %s", x);` reads naturally. */
int hone_error_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Library errors (CUDA runtime, NVRTC, cuBLAS, CUPTI, libgit2, curl, libmicrohttpd) go through
 * one family: a per-library macro HONE_<LIB>(expr) evaluates the call once and returns 0, or
 * calls this with the library's own message, which records
 * "<expr> failed at <file>:<line>: <lib>: <msg>" and returns code. Usage:
 *   if ((rc = HONE_CUDART(cudaMalloc(&p, n)))) goto done; */
int hone_error_lib(int code, const char *lib, const char *msg, const char *expr, const char *file,
                   int line);

/* The message of this thread's last error ("" if none). Borrowed; valid until the next set. */
const char *hone_error_last(void);

/* A short name for a code: "invalid argument", "format error", ... */
const char *hone_error_name(int code);

#endif
