/* UTF-8 checks for text that leaves the engine as JSON (model output may hold raw bytes of a
 * character split across tokens). */
#ifndef HONE_UTF8_H
#define HONE_UTF8_H

#include <stddef.h>

/* 1 if s[0..n) is valid UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
int hone_utf8_valid(const unsigned char *s, size_t n);

/* A malloc'd, NUL-terminated copy of s[0..n) with each byte that does not start a valid
 * sequence replaced by U+FFFD; NULL when out of memory. */
char *hone_utf8_sanitize(const char *s, size_t n);

#endif
