/* Search family "embed": rows of the token-embedding table dequantised to f32, with VEC (1:
 * each block of 32 through the AVX-512 dequantisers of kernels/cpu/common.h, which compute
 * every weight exactly as the scalar ones; 0: the baseline's scalar dequantisers) and AHEAD
 * (rows of the next tokens requested that many tokens ahead: the ids jump around the table, so
 * the hardware prefetcher cannot follow them). A dequantised weight is one exact value either
 * way: every point is the exact tier. */
#include <stdio.h>
#include <stdlib.h>

#include "agent/search.h"
#include "engine/error.h"

static int supports(hone_slot_id s) { return s == HONE_SLOT_EMBED; }

static hone_search_point incumbent(hone_slot_id slot)
{
    (void)slot;
    hone_search_point p = {{0, 0}};
    return p;
}

static int space(hone_slot_id slot, hone_search_point *pts, int cap)
{
    int n = 0;
    hone_search_point inc = incumbent(slot);
    static const int vec[] = {1, 0}, ahead[] = {2, 4, 1, 0};
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 4; j++) hone_search_space_add(pts, &n, cap, (hone_search_point){{vec[i], ahead[j]}}, inc);
    if (n < cap) pts[n++] = inc;
    return n;
}

static const char tmpl[] =
    "/* embed: rows of the token-embedding table, dequantised exactly to f32. Contract: engine/slots.h.\n"
    " * Search proposer point: AVX-512 dequantisers %1$d (the same exact values as the scalar ones),\n"
    " * rows requested %2$d tokens ahead (exact tier). */\n"
    "#include \"kernels/cpu/common.h\"\n"
    "\n"
    "#define VEC %1$d\n"
    "#define AHEAD %2$d\n"
    "\n"
    "/* every whole block of the row through deqv, stored as is */\n"
    "#define VEC_ROW(deqv)                                                                 \\\n"
    "    for (; b < dim / 32; b++) {                                                       \\\n"
    "        __m512 lo, hi;                                                                \\\n"
    "        deqv(row, b, &lo, &hi);                                                       \\\n"
    "        _mm512_storeu_ps(o + b * 32, lo);                                             \\\n"
    "        _mm512_storeu_ps(o + b * 32 + 16, hi);                                        \\\n"
    "    }\n"
    "\n"
    "void hone_cpu_embed(float *out, const void *table, int32_t dtype, const int32_t *ids, int64_t n,\n"
    "                    int64_t dim, int ith, int nth)\n"
    "{\n"
    "    int64_t r0, r1;\n"
    "    hone_cpu_share(n, ith, nth, &r0, &r1);\n"
    "    int64_t rb = hone_dtype_row_bytes(dtype, dim);\n"
    "    for (int64_t r = r0; r < r1; r++) {\n"
    "        const uint8_t *row = (const uint8_t *)table + (int64_t)ids[r] * rb;\n"
    "        float *o = out + r * dim;\n"
    "#ifdef HONE_CPU_SIMD\n"
    "        if (AHEAD && r + AHEAD < r1) {\n"
    "            const uint8_t *nx = (const uint8_t *)table + (int64_t)ids[r + AHEAD] * rb;\n"
    "            for (int64_t k = 0; k < rb; k += 64) _mm_prefetch((const char *)nx + k, _MM_HINT_T0);\n"
    "        }\n"
    "        if (VEC) {\n"
    "            int64_t b = 0;\n"
    "            switch (dtype) { /* compares, not a function pointer: the object allows no indirect call */\n"
    "            case HONE_DTYPE_F32: VEC_ROW(hone_cpu_deqv_f32); break;\n"
    "            case HONE_DTYPE_F16: VEC_ROW(hone_cpu_deqv_f16); break;\n"
    "            case HONE_DTYPE_BF16: VEC_ROW(hone_cpu_deqv_bf16); break;\n"
    "            case HONE_DTYPE_Q8_0: VEC_ROW(hone_cpu_deqv_q8_0); break;\n"
    "            case HONE_DTYPE_Q4_0: VEC_ROW(hone_cpu_deqv_q4_0); break;\n"
    "            case HONE_DTYPE_Q4_1: VEC_ROW(hone_cpu_deqv_q4_1); break;\n"
    "            case HONE_DTYPE_Q5_0: VEC_ROW(hone_cpu_deqv_q5_0); break;\n"
    "            case HONE_DTYPE_Q5_1: VEC_ROW(hone_cpu_deqv_q5_1); break;\n"
    "            case HONE_DTYPE_Q4_K: VEC_ROW(hone_cpu_deqv_q4_k); break;\n"
    "            case HONE_DTYPE_Q5_K: VEC_ROW(hone_cpu_deqv_q5_k); break;\n"
    "            case HONE_DTYPE_Q6_K: VEC_ROW(hone_cpu_deqv_q6_k); break;\n"
    "            case HONE_DTYPE_Q3_K: VEC_ROW(hone_cpu_deqv_q3_k); break;\n"
    "            case HONE_DTYPE_Q2_K: VEC_ROW(hone_cpu_deqv_q2_k); break;\n"
    "            case HONE_DTYPE_MXFP4: VEC_ROW(hone_cpu_deqv_mxfp4); break;\n"
    "            default: b = -1; break;\n"
    "            }\n"
    "            if (b >= 0) {\n"
    "                if (b * 32 < dim) { /* the tail of a plain float row */\n"
    "                    if (dtype == HONE_DTYPE_F32) memcpy(o + b * 32, (const float *)row + b * 32, (size_t)(dim - b * 32) * sizeof(float));\n"
    "                    else if (dtype == HONE_DTYPE_F16) hone_cpu_deq_f16((const uint16_t *)row + b * 32, o + b * 32, (int)(dim - b * 32));\n"
    "                    else if (dtype == HONE_DTYPE_BF16) hone_cpu_deq_bf16((const uint16_t *)row + b * 32, o + b * 32, (int)(dim - b * 32));\n"
    "                }\n"
    "                continue;\n"
    "            }\n"
    "        }\n"
    "#endif\n"
    "        switch (dtype) {\n"
    "        case HONE_DTYPE_F32: memcpy(o, row, (size_t)dim * sizeof(float)); break;\n"
    "        case HONE_DTYPE_F16: hone_cpu_deq_f16((const uint16_t *)row, o, (int)dim); break;\n"
    "        case HONE_DTYPE_BF16: hone_cpu_deq_bf16((const uint16_t *)row, o, (int)dim); break;\n"
    "        case HONE_DTYPE_Q8_0:\n"
    "            for (int64_t b = 0; b < dim / 32; b++) hone_cpu_deq_q8_0((const hone_block_q8_0 *)row + b, o + b * 32);\n"
    "            break;\n"
    "        case HONE_DTYPE_Q4_0:\n"
    "            for (int64_t b = 0; b < dim / 32; b++) hone_cpu_deq_q4_0((const hone_block_q4_0 *)row + b, o + b * 32);\n"
    "            break;\n"
    "        case HONE_DTYPE_Q4_1:\n"
    "            for (int64_t b = 0; b < dim / 32; b++) hone_cpu_deq_q4_1((const hone_block_q4_1 *)row + b, o + b * 32);\n"
    "            break;\n"
    "#define EMBED_CHUNKS(DT, dt) \\\n"
    "        case DT: for (int64_t c = 0; c < dim; c += 32) hone_cpu_deqr_##dt(row, c, 32, o + c); break;\n"
    "        EMBED_CHUNKS(HONE_DTYPE_Q5_0, q5_0)\n"
    "        EMBED_CHUNKS(HONE_DTYPE_Q5_1, q5_1)\n"
    "        EMBED_CHUNKS(HONE_DTYPE_Q4_K, q4_k)\n"
    "        EMBED_CHUNKS(HONE_DTYPE_Q5_K, q5_k)\n"
    "        EMBED_CHUNKS(HONE_DTYPE_Q6_K, q6_k)\n"
    "        EMBED_CHUNKS(HONE_DTYPE_Q3_K, q3_k)\n"
    "        EMBED_CHUNKS(HONE_DTYPE_Q2_K, q2_k)\n"
    "        EMBED_CHUNKS(HONE_DTYPE_MXFP4, mxfp4)\n"
    "#undef EMBED_CHUNKS\n"
    "        default:\n"
    "            break;\n"
    "        }\n"
    "    }\n"
    "}\n";

static int render(hone_slot_id slot, hone_search_point p, char **out_src)
{
    (void)slot;
    *out_src = NULL;
    static const int lo[] = {0, 0}, hi[] = {1, 16};
    int rc = hone_search_check_range(p, lo, hi, 2);
    if (rc) return rc;
    *out_src = hone_search_format(tmpl, p.v[0], p.v[1]);
    return *out_src ? 0 : HONE_ENOMEM;
}

const hone_search_family hone_search_family_embed = {
    .name = "embed",
    .params = {"vec", "ahead", NULL},
    .supports = supports,
    .incumbent = incumbent,
    .space = space,
    .render = render,
};
