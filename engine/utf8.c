/* UTF-8 validation and sanitising (engine/utf8.h). */
#include "engine/utf8.h"

#include <stdlib.h>
#include <string.h>

int hone_utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        unsigned cp;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
        else return 0;
        if (i + len > n) return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += len;
    }
    return 1;
}

char *hone_utf8_sanitize(const char *s, size_t n)
{
    char *out = malloc(n * 3 + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t len = 1;
        unsigned c = (unsigned char)s[i];
        if (c >= 0x80) {
            len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            if (i + len > n || !hone_utf8_valid((const unsigned char *)s + i, len)) {
                memcpy(out + o, "\xEF\xBF\xBD", 3);
                o += 3;
                i++;
                continue;
            }
        }
        memcpy(out + o, s + i, len);
        o += len;
        i += len;
    }
    out[o] = 0;
    return out;
}
