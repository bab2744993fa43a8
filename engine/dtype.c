/* Dtype table and the slow-path conversions (f32 -> f16/bf16, row dequantisation). */
#include "dtype.h"

#include <strings.h>

#include "kernels/cpu/common.h"

_Static_assert(sizeof(hone_block_q5_0) == 22 && sizeof(hone_block_q5_1) == 24, "q5 blocks");
_Static_assert(sizeof(hone_block_q2_k) == 84 && sizeof(hone_block_q3_k) == 110, "q2_K/q3_K blocks");
_Static_assert(sizeof(hone_block_q4_k) == 144 && sizeof(hone_block_q5_k) == 176, "q4_K/q5_K blocks");
_Static_assert(sizeof(hone_block_q6_k) == 210 && sizeof(hone_block_mxfp4) == 17, "q6_K/mxfp4 blocks");

static const int ALL[] = {HONE_DTYPE_F32,  HONE_DTYPE_F16,  HONE_DTYPE_BF16, HONE_DTYPE_Q8_0,
                          HONE_DTYPE_Q4_0, HONE_DTYPE_Q4_1, HONE_DTYPE_Q5_0, HONE_DTYPE_Q5_1,
                          HONE_DTYPE_Q2_K, HONE_DTYPE_Q3_K, HONE_DTYPE_Q4_K, HONE_DTYPE_Q5_K,
                          HONE_DTYPE_Q6_K, HONE_DTYPE_MXFP4};

int hone_dtype_supported(int t)
{
    for (size_t i = 0; i < sizeof ALL / sizeof ALL[0]; i++)
        if (ALL[i] == t) return 1;
    return 0;
}

const char *hone_dtype_name(int t)
{
    switch (t) {
    case HONE_DTYPE_F32: return "f32";
    case HONE_DTYPE_F16: return "f16";
    case HONE_DTYPE_BF16: return "bf16";
    case HONE_DTYPE_Q8_0: return "q8_0";
    case HONE_DTYPE_Q4_0: return "q4_0";
    case HONE_DTYPE_Q4_1: return "q4_1";
    case HONE_DTYPE_Q5_0: return "q5_0";
    case HONE_DTYPE_Q5_1: return "q5_1";
    case HONE_DTYPE_Q2_K: return "q2_k";
    case HONE_DTYPE_Q3_K: return "q3_k";
    case HONE_DTYPE_Q4_K: return "q4_k";
    case HONE_DTYPE_Q5_K: return "q5_k";
    case HONE_DTYPE_Q6_K: return "q6_k";
    case HONE_DTYPE_MXFP4: return "mxfp4";
    default: return "unknown";
    }
}

int hone_dtype_from_name(const char *name)
{
    for (size_t i = 0; i < sizeof ALL / sizeof ALL[0]; i++)
        if (strcasecmp(name, hone_dtype_name(ALL[i])) == 0) return ALL[i];
    return -1;
}

uint16_t hone_f32_to_fp16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
    if (absx >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00);
    if (absx < 0x38800000u) { /* below 2^-14: subnormal half or zero */
        if (absx < 0x33000000u) return (uint16_t)sign; /* < 2^-25 rounds to 0 */
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t h = ((absx >> 13) - (112u << 10)); /* rebias exponent */
    uint32_t rem = absx & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

uint16_t hone_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

void hone_dtype_dequant_row(int t, const void *w, int64_t row, int64_t cols, float *out)
{
    const uint8_t *base = (const uint8_t *)w + row * hone_dtype_row_bytes(t, cols);
    switch (t) {
    case HONE_DTYPE_F32:
        memcpy(out, base, (size_t)cols * 4);
        break;
    case HONE_DTYPE_F16: {
        const uint16_t *p = (const uint16_t *)base;
        for (int64_t i = 0; i < cols; i++) out[i] = hone_fp16_to_f32(p[i]);
        break;
    }
    case HONE_DTYPE_BF16: {
        const uint16_t *p = (const uint16_t *)base;
        for (int64_t i = 0; i < cols; i++) out[i] = hone_bf16_to_f32(p[i]);
        break;
    }
    case HONE_DTYPE_Q8_0: {
        const hone_block_q8_0 *b = (const hone_block_q8_0 *)base;
        for (int64_t i = 0; i < cols / HONE_QK; i++) {
            float d = hone_fp16_to_f32(b[i].d);
            for (int j = 0; j < HONE_QK; j++) out[i * HONE_QK + j] = (float)b[i].qs[j] * d;
        }
        break;
    }
    case HONE_DTYPE_Q4_0: {
        const hone_block_q4_0 *b = (const hone_block_q4_0 *)base;
        for (int64_t i = 0; i < cols / HONE_QK; i++) {
            float d = hone_fp16_to_f32(b[i].d);
            for (int j = 0; j < 16; j++) {
                out[i * HONE_QK + j] = (float)((b[i].qs[j] & 0xF) - 8) * d;
                out[i * HONE_QK + j + 16] = (float)((b[i].qs[j] >> 4) - 8) * d;
            }
        }
        break;
    }
    case HONE_DTYPE_Q4_1: {
        const hone_block_q4_1 *b = (const hone_block_q4_1 *)base;
        for (int64_t i = 0; i < cols / HONE_QK; i++) {
            float d = hone_fp16_to_f32(b[i].d), m = hone_fp16_to_f32(b[i].m);
            for (int j = 0; j < 16; j++) {
                out[i * HONE_QK + j] = (float)(b[i].qs[j] & 0xF) * d + m;
                out[i * HONE_QK + j + 16] = (float)(b[i].qs[j] >> 4) * d + m;
            }
        }
        break;
    }
    default: {
        /* the further block formats: chunk by chunk through the kernels' own dequantisers */
        hone_cpu_deq_fn deq = hone_cpu_deqr_for(t);
        if (deq)
            for (int64_t c = 0; c < cols; c += 32) deq(base, c, 32, out + c);
        break;
    }
    }
}
