/* Weight data types (numbered as in GGML/GGUF) and the exact scalar conversions
 * every backend shares. Block formats: a row of `cols` values is cols/block_size
 * blocks of type_size bytes each. */
#ifndef HONE_DTYPE_H
#define HONE_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum {
    HONE_DTYPE_F32 = 0,
    HONE_DTYPE_F16 = 1,
    HONE_DTYPE_Q4_0 = 2,  /* block 32: f16 d; u8 qs[16]; w = (q - 8) * d            */
    HONE_DTYPE_Q4_1 = 3,  /* block 32: f16 d, m; u8 qs[16]; w = q * d + m            */
    HONE_DTYPE_Q5_0 = 6,  /* block 32: f16 d; u32 qh; u8 qs[16]; w = (q - 16) * d    */
    HONE_DTYPE_Q5_1 = 7,  /* block 32: f16 d, m; u32 qh; u8 qs[16]; w = q * d + m    */
    HONE_DTYPE_Q8_0 = 8,  /* block 32: f16 d; i8 qs[32]; w = q * d                   */
    HONE_DTYPE_Q2_K = 10, /* block 256: 16 x 16 of 2 bits, 4-bit scale and min       */
    HONE_DTYPE_Q3_K = 11, /* block 256: 16 x 16 of 3 bits, 6-bit signed scales       */
    HONE_DTYPE_Q4_K = 12, /* block 256: 8 x 32 of 4 bits, 6-bit scale and min        */
    HONE_DTYPE_Q5_K = 13, /* block 256: 8 x 32 of 5 bits, 6-bit scale and min        */
    HONE_DTYPE_Q6_K = 14, /* block 256: 16 x 16 of 6 bits, i8 scales                 */
    HONE_DTYPE_BF16 = 30,
    HONE_DTYPE_MXFP4 = 39, /* block 32: e8m0 e; u8 qs[16] of e2m1; w = kv[q] * 2^(e-128) */
    HONE_DTYPE_COUNT_MAX = 40 /* exclusive upper bound on the numbering, not a type */
} hone_dtype;

/* Nibble order in q4 blocks: element j (0..15) is qs[j] & 0xF, element j+16 is qs[j] >> 4. */
#define HONE_QK 32

typedef struct { uint16_t d; uint8_t qs[16]; } hone_block_q4_0;          /* 18 bytes */
typedef struct { uint16_t d, m; uint8_t qs[16]; } hone_block_q4_1;       /* 20 bytes */
typedef struct { uint16_t d; int8_t qs[32]; } hone_block_q8_0;           /* 34 bytes */

/* The further GGML block formats, byte for byte as ggml-common.h lays them out (all fields
 * byte arrays or u16, so no padding). Values are dequantised 32 at a time ("chunk" k of a
 * block: values 32k .. 32k + 31), each exactly as ggml's dequantize_row_* computes it in f32;
 * see kernels/cpu/common.h (hone_cpu_deq_<dt>) for the formula of each.
 * q5_0 / q5_1: value j's 5th bit is bit j of the little-endian u32 qh.
 * K formats (256 values): scales[12] of q4_K / q5_K hold 8 6-bit scales and 8 6-bit mins. */
#define HONE_QK_K 256
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } hone_block_q5_0;          /* 22 */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } hone_block_q5_1;       /* 24 */
typedef struct { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; } hone_block_q2_k; /* 84 */
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; } hone_block_q3_k; /* 110 */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } hone_block_q4_k; /* 144 */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } hone_block_q5_k; /* 176 */
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } hone_block_q6_k; /* 210 */
typedef struct { uint8_t e; uint8_t qs[16]; } hone_block_mxfp4;                          /* 17 */

/* 1 if the engine supports dtype t (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k,
 * q4_k, q5_k, q6_k, mxfp4). */
int hone_dtype_supported(int t);
/* "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", ..., "q4_k", ..., "mxfp4", or "unknown". */
const char *hone_dtype_name(int t);
/* Parses a name as above (case-insensitive: "q4_K" too); returns -1 if unknown. */
int hone_dtype_from_name(const char *name);
/* Values per block (1 for plain floats, 32 for the block formats, 256 for the K formats); 0 if
 * unsupported.
 * Inline, like the conversions below, so kernels compiled on their own need no engine symbol. */
static inline int64_t hone_dtype_block_size(int t)
{
    switch (t) {
    case HONE_DTYPE_F32: case HONE_DTYPE_F16: case HONE_DTYPE_BF16: return 1;
    case HONE_DTYPE_Q8_0: case HONE_DTYPE_Q4_0: case HONE_DTYPE_Q4_1: return HONE_QK;
    case HONE_DTYPE_Q5_0: case HONE_DTYPE_Q5_1: case HONE_DTYPE_MXFP4: return HONE_QK;
    case HONE_DTYPE_Q2_K: case HONE_DTYPE_Q3_K: case HONE_DTYPE_Q4_K: case HONE_DTYPE_Q5_K:
    case HONE_DTYPE_Q6_K: return HONE_QK_K;
    default: return 0;
    }
}

/* Bytes per block; 0 if unsupported. */
static inline int64_t hone_dtype_type_size(int t)
{
    switch (t) {
    case HONE_DTYPE_F32: return 4;
    case HONE_DTYPE_F16: case HONE_DTYPE_BF16: return 2;
    case HONE_DTYPE_Q8_0: return (int64_t)sizeof(hone_block_q8_0);
    case HONE_DTYPE_Q4_0: return (int64_t)sizeof(hone_block_q4_0);
    case HONE_DTYPE_Q4_1: return (int64_t)sizeof(hone_block_q4_1);
    case HONE_DTYPE_Q5_0: return (int64_t)sizeof(hone_block_q5_0);
    case HONE_DTYPE_Q5_1: return (int64_t)sizeof(hone_block_q5_1);
    case HONE_DTYPE_Q2_K: return (int64_t)sizeof(hone_block_q2_k);
    case HONE_DTYPE_Q3_K: return (int64_t)sizeof(hone_block_q3_k);
    case HONE_DTYPE_Q4_K: return (int64_t)sizeof(hone_block_q4_k);
    case HONE_DTYPE_Q5_K: return (int64_t)sizeof(hone_block_q5_k);
    case HONE_DTYPE_Q6_K: return (int64_t)sizeof(hone_block_q6_k);
    case HONE_DTYPE_MXFP4: return (int64_t)sizeof(hone_block_mxfp4);
    default: return 0;
    }
}
/* Bytes for a row of n values (n must be a multiple of the block size). */
static inline int64_t hone_dtype_row_bytes(int t, int64_t n)
{
    return n / hone_dtype_block_size(t) * hone_dtype_type_size(t);
}

/* IEEE half -> float, exact. */
static inline float hone_fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400));
            man &= 0x3ff;
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* float -> IEEE half, round to nearest even (used by tools and tests, not on hot paths). */
uint16_t hone_f32_to_fp16(float f);

/* bfloat16 -> float, exact. */
static inline float hone_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* float -> bfloat16, round to nearest even (NaN kept quiet). */
uint16_t hone_f32_to_bf16(float f);

/* The MXFP4 scale: e8m0 halved (the e2m1 table is stored doubled), ggml's
 * GGML_E8M0_TO_FP32_HALF: 2^(e - 128), as a subnormal for e < 2. Exact. */
static inline float hone_e8m0_half_to_f32(uint8_t e)
{
    uint32_t bits = e < 2 ? (uint32_t)0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Dequantises row `row` of an (rows x cols) weight of type t into out[cols], exactly. */
void hone_dtype_dequant_row(int t, const void *w, int64_t row, int64_t cols, float *out);

#endif
