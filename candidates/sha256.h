/* SHA-256 (FIPS 180-4): the content hash of the candidate store. Small and dependency-free. */
#ifndef HONE_SHA256_H
#define HONE_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t len;       /* bytes hashed so far */
    uint8_t buf[64];
    size_t nbuf;
} hone_sha256_ctx;

void hone_sha256_init(hone_sha256_ctx *c);
void hone_sha256_update(hone_sha256_ctx *c, const void *data, size_t n);
void hone_sha256_final(hone_sha256_ctx *c, uint8_t out[32]);
/* hone_sha256_final as hex: 64 characters and a NUL. */
void hone_sha256_final_hex(hone_sha256_ctx *c, char out[65]);
/* The hex digest (64 characters and a NUL) of data[n].
 * Example: hone_sha256_hex("abc", 3, hex) gives "ba7816bf...f20015ad". */
void hone_sha256_hex(const void *data, size_t n, char out[65]);

#endif
