/* embed: rows of the token-embedding table, dequantised exactly to f32. Contract: engine/slots.h.
 * Ideas: one row per token, block by block with the shared dequantisers. */
#include "kernels/cpu/common.h"

void hone_cpu_embed(float *out, const void *table, int32_t dtype, const int32_t *ids, int64_t n,
                    int64_t dim, int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(n, ith, nth, &r0, &r1);
    int64_t rb = hone_dtype_row_bytes(dtype, dim);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)table + (int64_t)ids[r] * rb;
        float *o = out + r * dim;
        switch (dtype) {
        case HONE_DTYPE_F32: memcpy(o, row, (size_t)dim * sizeof(float)); break;
        case HONE_DTYPE_F16: hone_cpu_deq_f16((const uint16_t *)row, o, (int)dim); break;
        case HONE_DTYPE_BF16: hone_cpu_deq_bf16((const uint16_t *)row, o, (int)dim); break;
        case HONE_DTYPE_Q8_0:
            for (int64_t b = 0; b < dim / 32; b++) hone_cpu_deq_q8_0((const hone_block_q8_0 *)row + b, o + b * 32);
            break;
        case HONE_DTYPE_Q4_0:
            for (int64_t b = 0; b < dim / 32; b++) hone_cpu_deq_q4_0((const hone_block_q4_0 *)row + b, o + b * 32);
            break;
        case HONE_DTYPE_Q4_1:
            for (int64_t b = 0; b < dim / 32; b++) hone_cpu_deq_q4_1((const hone_block_q4_1 *)row + b, o + b * 32);
            break;
        /* q5_0 .. mxfp4: 32 values at a time (direct calls: a kernel object has no indirect one) */
#define EMBED_CHUNKS(DT, dt)                                                                    \
        case DT:                                                                                \
            for (int64_t c = 0; c < dim; c += 32) hone_cpu_deqr_##dt(row, c, 32, o + c);        \
            break;
        EMBED_CHUNKS(HONE_DTYPE_Q5_0, q5_0)
        EMBED_CHUNKS(HONE_DTYPE_Q5_1, q5_1)
        EMBED_CHUNKS(HONE_DTYPE_Q4_K, q4_k)
        EMBED_CHUNKS(HONE_DTYPE_Q5_K, q5_k)
        EMBED_CHUNKS(HONE_DTYPE_Q6_K, q6_k)
        EMBED_CHUNKS(HONE_DTYPE_Q3_K, q3_k)
        EMBED_CHUNKS(HONE_DTYPE_Q2_K, q2_k)
        EMBED_CHUNKS(HONE_DTYPE_MXFP4, mxfp4)
#undef EMBED_CHUNKS
        default:
            break;
        }
    }
}
