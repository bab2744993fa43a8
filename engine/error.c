/* Thread-local last-error buffer shared by every module. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_msg[1024];

int hone_error_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    return code;
}

int hone_error_lib(int code, const char *lib, const char *msg, const char *expr, const char *file,
                   int line)
{
    return hone_error_set(code, "%s failed at %s:%d: %s: %s", expr, file, line, lib,
                          msg ? msg : "unknown error");
}

const char *hone_error_last(void) { return last_msg; }

const char *hone_error_name(int code)
{
    switch (code) {
    case HONE_OK: return "ok";
    case HONE_EINVAL: return "invalid argument";
    case HONE_ENOMEM: return "out of memory";
    case HONE_EIO: return "i/o error";
    case HONE_EFORMAT: return "format error";
    case HONE_EUNSUPPORTED: return "unsupported";
    case HONE_ERANGE: return "out of range";
    case HONE_EINTERNAL: return "internal error";
    case HONE_ECANCELED: return "cancelled";
    default: return "unknown error";
    }
}
