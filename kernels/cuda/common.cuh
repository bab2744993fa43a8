/* Device helpers shared by the CUDA baseline kernels (and allowed in CUDA candidates). The
 * engine passes this file to NVRTC as the header "common.cuh"; nothing else can be included
 * (no toolkit headers at run time), so the few types and conversions needed are defined here.
 *
 * The dot-product order is the CPU one (kernels/cpu/common.h), so a GPU dot product gives the
 * CPU's bits: element c of a row is accumulated into lane c % 16 with one fused multiply-add,
 * in increasing c; the 16 lanes are then summed as the fixed tree (l + 8, + 4, + 2, + 1).
 * On the GPU the 16 lanes are the 16 threads of a half-warp (thread l holds lane l), and the
 * tree is the shuffle-down butterfly with offsets 8, 4, 2, 1, which adds exactly those pairs.
 * Every kernel is compiled with --fmad=false: a * b + c is never contracted silently; fused
 * multiply-adds are written as __fmaf_rn where the contract wants them. */
#ifndef HONE_KERNELS_CUDA_COMMON_CUH
#define HONE_KERNELS_CUDA_COMMON_CUH

typedef long long hone_i64;
typedef int hone_i32;
typedef unsigned int hone_u32;
typedef unsigned short hone_u16;
typedef unsigned char hone_u8;
typedef signed char hone_i8;

#define HONE_LANES 16
#define HONE_FULL_MASK 0xffffffffu

/* Weight dtypes, numbered as engine/dtype.h (GGML numbering). */
#define HONE_DT_F32 0
#define HONE_DT_F16 1
#define HONE_DT_Q4_0 2
#define HONE_DT_Q4_1 3
#define HONE_DT_Q5_0 6
#define HONE_DT_Q5_1 7
#define HONE_DT_Q8_0 8
#define HONE_DT_Q2_K 10
#define HONE_DT_Q3_K 11
#define HONE_DT_Q4_K 12
#define HONE_DT_Q5_K 13
#define HONE_DT_Q6_K 14
#define HONE_DT_BF16 30
#define HONE_DT_MXFP4 39

/* Block formats: 32 values per block; bytes per block. The blocks are 2-byte aligned only
 * (34, 18 and 20 bytes), so every multi-byte field is read with 2-byte loads. */
#define HONE_QK 32
#define HONE_Q8_0_BYTES 34 /* f16 d; i8 qs[32]          w = q * d       */
#define HONE_Q4_0_BYTES 18 /* f16 d; u8 qs[16]          w = (q - 8) * d */
#define HONE_Q4_1_BYTES 20 /* f16 d, m; u8 qs[16]       w = q * d + m   */
/* The further formats (engine/dtype.h has their layouts): 32-value blocks, and the K formats'
 * 256-value blocks (at most 2-byte aligned; mxfp4's 17 bytes are not aligned at all). */
#define HONE_QK_K 256
#define HONE_Q5_0_BYTES 22   /* f16 d; u8 qh[4]; u8 qs[16]                  */
#define HONE_Q5_1_BYTES 24   /* f16 d, m; u8 qh[4]; u8 qs[16]               */
#define HONE_MXFP4_BYTES 17  /* u8 e; u8 qs[16]                             */
#define HONE_Q2_K_BYTES 84   /* u8 scales[16]; qs[64]; f16 d, dmin          */
#define HONE_Q3_K_BYTES 110  /* u8 hmask[32]; qs[64]; scales[12]; f16 d     */
#define HONE_Q4_K_BYTES 144  /* f16 d, dmin; u8 scales[12]; qs[128]         */
#define HONE_Q5_K_BYTES 176  /* f16 d, dmin; u8 scales[12]; qh[32]; qs[128] */
#define HONE_Q6_K_BYTES 210  /* u8 ql[128]; qh[64]; i8 scales[16]; f16 d    */

/* Bytes of a row of `cols` values of dtype dt (cols % 32 == 0 for the block formats). */
__device__ __forceinline__ hone_i64 hone_row_bytes(int dt, hone_i64 cols)
{
    switch (dt) {
    case HONE_DT_F32: return cols * 4;
    case HONE_DT_F16: case HONE_DT_BF16: return cols * 2;
    case HONE_DT_Q8_0: return cols / HONE_QK * HONE_Q8_0_BYTES;
    case HONE_DT_Q4_0: return cols / HONE_QK * HONE_Q4_0_BYTES;
    case HONE_DT_Q4_1: return cols / HONE_QK * HONE_Q4_1_BYTES;
    case HONE_DT_Q5_0: return cols / HONE_QK * HONE_Q5_0_BYTES;
    case HONE_DT_Q5_1: return cols / HONE_QK * HONE_Q5_1_BYTES;
    case HONE_DT_MXFP4: return cols / HONE_QK * HONE_MXFP4_BYTES;
    case HONE_DT_Q2_K: return cols / HONE_QK_K * HONE_Q2_K_BYTES;
    case HONE_DT_Q3_K: return cols / HONE_QK_K * HONE_Q3_K_BYTES;
    case HONE_DT_Q4_K: return cols / HONE_QK_K * HONE_Q4_K_BYTES;
    case HONE_DT_Q5_K: return cols / HONE_QK_K * HONE_Q5_K_BYTES;
    case HONE_DT_Q6_K: return cols / HONE_QK_K * HONE_Q6_K_BYTES;
    default: return 0;
    }
}

/* IEEE half -> float, exact (subnormals included): the hardware conversion. */
__device__ __forceinline__ float hone_half(hone_u16 h)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

/* bfloat16 -> float, exact. */
__device__ __forceinline__ float hone_bf16(hone_u16 h)
{
    return __uint_as_float((hone_u32)h << 16);
}

__device__ __forceinline__ hone_u16 hone_ld_u16(const hone_u8 *p)
{
    return *(const hone_u16 *)p;
}

/* ---- the further formats: element c, as kernels/cpu/common.h's hone_cpu_deq_<dt> computes it
 * (the same f32 products, exact, and the same single rounding: __fmaf_rn where the CPU has
 * fmaf, __fmul_rn where it multiplies). */

/* q4_K / q5_K: scale and min of chunk j (ggml's get_scale_min_k4). */
__device__ __forceinline__ void hone_scale_min_k4(const hone_u8 *q, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* q3_K's scale s (0..15), signed. */
__device__ __forceinline__ int hone_scale_q3_k(const hone_u8 *sc, int s)
{
    int lo = s < 8 ? sc[s] & 0xF : sc[s - 8] >> 4;
    int hi = (sc[8 + (s & 3)] >> (2 * (s >> 2))) & 3;
    return (lo | (hi << 4)) - 32;
}

__device__ __forceinline__ hone_u32 hone_ld_u32_bytes(const hone_u8 *p)
{
    return (hone_u32)p[0] | ((hone_u32)p[1] << 8) | ((hone_u32)p[2] << 16) | ((hone_u32)p[3] << 24);
}

template <int DT>
__device__ __forceinline__ float hone_w_more(const hone_u8 *row, hone_i64 c)
{
    int j = (int)(c & 31);
    if (DT == HONE_DT_Q5_0 || DT == HONE_DT_Q5_1) {
        const hone_u8 *b = row + (c >> 5) * (DT == HONE_DT_Q5_0 ? HONE_Q5_0_BYTES : HONE_Q5_1_BYTES);
        const hone_u8 *qh = b + (DT == HONE_DT_Q5_0 ? 2 : 4), *qs = qh + 4;
        int q = qs[j & 15];
        q = (j < 16 ? (q & 0xF) : (q >> 4)) | (int)(((hone_ld_u32_bytes(qh) >> j) & 1) << 4);
        if (DT == HONE_DT_Q5_0) return __fmul_rn((float)(q - 16), hone_half(hone_ld_u16(b)));
        return __fmaf_rn((float)q, hone_half(hone_ld_u16(b)), hone_half(hone_ld_u16(b + 2)));
    }
    if (DT == HONE_DT_MXFP4) {
        const hone_u8 *b = row + (c >> 5) * HONE_MXFP4_BYTES;
        const int kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
        int q = b[1 + (j & 15)];
        q = j < 16 ? (q & 0xF) : (q >> 4);
        hone_u32 e = b[0];
        float d = __uint_as_float(e < 2 ? 0x00200000u << e : (e - 1) << 23);
        return __fmul_rn((float)kv[q], d);
    }
    int k = (int)((c >> 5) & 7); /* K formats: chunk k of block c / 256, value j of the chunk */
    if (DT == HONE_DT_Q4_K || DT == HONE_DT_Q5_K) {
        const hone_u8 *b = row + (c >> 8) * (DT == HONE_DT_Q4_K ? HONE_Q4_K_BYTES : HONE_Q5_K_BYTES);
        int sc, m;
        hone_scale_min_k4(b + 4, k, &sc, &m);
        float d1 = __fmul_rn(hone_half(hone_ld_u16(b)), (float)sc);
        float m1 = __fmul_rn(hone_half(hone_ld_u16(b + 2)), (float)m);
        const hone_u8 *qs = b + 16 + (DT == HONE_DT_Q5_K ? 32 : 0);
        int q = (qs[(k >> 1) * 32 + j] >> ((k & 1) * 4)) & 0xF;
        if (DT == HONE_DT_Q5_K) q |= ((b[16 + j] >> k) & 1) << 4;
        return __fmaf_rn((float)q, d1, -m1);
    }
    if (DT == HONE_DT_Q6_K) {
        const hone_u8 *b = row + (c >> 8) * HONE_Q6_K_BYTES;
        int h = k >> 2, p = k & 3;
        int ql = b[64 * h + 32 * (p & 1) + j], qh = b[128 + 32 * h + j];
        int q = (((ql >> ((p >> 1) * 4)) & 0xF) | (((qh >> (2 * p)) & 3) << 4)) - 32;
        float ds = __fmul_rn(hone_half(hone_ld_u16(b + 208)), (float)(hone_i8)b[192 + 8 * h + 2 * p + (j >> 4)]);
        return __fmul_rn(ds, (float)q);
    }
    if (DT == HONE_DT_Q3_K) {
        const hone_u8 *b = row + (c >> 8) * HONE_Q3_K_BYTES;
        int h = k >> 2, jj = k & 3;
        int q = ((b[32 + 32 * h + j] >> (2 * jj)) & 3) - (((b[j] >> (4 * h + jj)) & 1) ? 0 : 4);
        float dl = __fmul_rn(hone_half(hone_ld_u16(b + 108)), (float)hone_scale_q3_k(b + 96, 8 * h + 2 * jj + (j >> 4)));
        return __fmul_rn(dl, (float)q);
    }
    if (DT == HONE_DT_Q2_K) {
        const hone_u8 *b = row + (c >> 8) * HONE_Q2_K_BYTES;
        int h = k >> 2, jj = k & 3;
        int s = b[8 * h + 2 * jj + (j >> 4)];
        int q = (b[16 + 32 * h + j] >> (2 * jj)) & 3;
        float dl = __fmul_rn(hone_half(hone_ld_u16(b + 80)), (float)(s & 0xF));
        float ml = __fmul_rn(hone_half(hone_ld_u16(b + 82)), (float)(s >> 4));
        return __fmaf_rn((float)q, dl, -ml);
    }
    return __int_as_float(0x7fc00000);
}

/* Element c of a weight row of dtype DT, dequantised exactly as the CPU does it:
 * q8_0 q * d, q4_0 (q - 8) * d (both exact in f32), q4_1 fma(q, d, m) (one rounding). In q4
 * blocks element j < 16 is the low nibble of qs[j], element j + 16 its high nibble. */
template <int DT>
__device__ __forceinline__ float hone_w(const hone_u8 *row, hone_i64 c)
{
    if (DT == HONE_DT_F32) return ((const float *)row)[c];
    if (DT == HONE_DT_F16) return hone_half(((const hone_u16 *)row)[c]);
    if (DT == HONE_DT_BF16) return hone_bf16(((const hone_u16 *)row)[c]);
    int j = (int)(c & 31);
    if (DT == HONE_DT_Q8_0) {
        const hone_u8 *b = row + (c >> 5) * HONE_Q8_0_BYTES;
        return __fmul_rn((float)(hone_i8)b[2 + j], hone_half(hone_ld_u16(b)));
    }
    if (DT == HONE_DT_Q4_0) {
        const hone_u8 *b = row + (c >> 5) * HONE_Q4_0_BYTES;
        int q = b[2 + (j & 15)];
        q = j < 16 ? (q & 0xF) : (q >> 4);
        return __fmul_rn((float)(q - 8), hone_half(hone_ld_u16(b)));
    }
    if (DT == HONE_DT_Q4_1) {
        const hone_u8 *b = row + (c >> 5) * HONE_Q4_1_BYTES;
        int q = b[4 + (j & 15)];
        q = j < 16 ? (q & 0xF) : (q >> 4);
        return __fmaf_rn((float)q, hone_half(hone_ld_u16(b)), hone_half(hone_ld_u16(b + 2)));
    }
    if (DT == HONE_DT_Q5_0 || DT == HONE_DT_Q5_1 || DT == HONE_DT_MXFP4 || DT == HONE_DT_Q2_K ||
        DT == HONE_DT_Q3_K || DT == HONE_DT_Q4_K || DT == HONE_DT_Q5_K || DT == HONE_DT_Q6_K)
        return hone_w_more<DT>(row, c);
    return __int_as_float(0x7fc00000); /* unsupported dtype: NaN */
}

/* Element c of a weight row for a runtime dtype (embed serves every dtype with one kernel). */
__device__ __forceinline__ float hone_w_dt(int dt, const hone_u8 *row, hone_i64 c)
{
    switch (dt) {
    case HONE_DT_F32: return hone_w<HONE_DT_F32>(row, c);
    case HONE_DT_F16: return hone_w<HONE_DT_F16>(row, c);
    case HONE_DT_BF16: return hone_w<HONE_DT_BF16>(row, c);
    case HONE_DT_Q8_0: return hone_w<HONE_DT_Q8_0>(row, c);
    case HONE_DT_Q4_0: return hone_w<HONE_DT_Q4_0>(row, c);
    case HONE_DT_Q4_1: return hone_w<HONE_DT_Q4_1>(row, c);
    case HONE_DT_Q5_0: return hone_w<HONE_DT_Q5_0>(row, c);
    case HONE_DT_Q5_1: return hone_w<HONE_DT_Q5_1>(row, c);
    case HONE_DT_MXFP4: return hone_w<HONE_DT_MXFP4>(row, c);
    case HONE_DT_Q2_K: return hone_w<HONE_DT_Q2_K>(row, c);
    case HONE_DT_Q3_K: return hone_w<HONE_DT_Q3_K>(row, c);
    case HONE_DT_Q4_K: return hone_w<HONE_DT_Q4_K>(row, c);
    case HONE_DT_Q5_K: return hone_w<HONE_DT_Q5_K>(row, c);
    case HONE_DT_Q6_K: return hone_w<HONE_DT_Q6_K>(row, c);
    default: return __int_as_float(0x7fc00000);
    }
}

/* The CPU's lane tree over the 16 threads of a half-warp: thread l holds lane l on entry;
 * lane 0 of each half-warp holds (((a0+a8)+(a4+a12)) + ((a2+a10)+(a6+a14))) + ... on exit,
 * i.e. s8 = l + (l + 8), s4 = s8 + s8(+4), s2a = s4[0] + s4[2], s2b = s4[1] + s4[3],
 * sum = s2a + s2b: hone_cpu_lanes_sum exactly. All 32 threads of the warp must call it. */
__device__ __forceinline__ float hone_lanes_sum16(float v)
{
    v = __fadd_rn(v, __shfl_down_sync(HONE_FULL_MASK, v, 8, 16));
    v = __fadd_rn(v, __shfl_down_sync(HONE_FULL_MASK, v, 4, 16));
    v = __fadd_rn(v, __shfl_down_sync(HONE_FULL_MASK, v, 2, 16));
    v = __fadd_rn(v, __shfl_down_sync(HONE_FULL_MASK, v, 1, 16));
    return v;
}

/* The same tree over 16 lanes held by one thread (hone_cpu_lanes_sum). */
__device__ __forceinline__ float hone_lanes_sum_regs(const float acc[HONE_LANES])
{
    float s8[8], s4[4];
#pragma unroll
    for (int l = 0; l < 8; l++) s8[l] = __fadd_rn(acc[l], acc[l + 8]);
#pragma unroll
    for (int l = 0; l < 4; l++) s4[l] = __fadd_rn(s8[l], s8[l + 4]);
    return __fadd_rn(__fadd_rn(s4[0], s4[2]), __fadd_rn(s4[1], s4[3]));
}

/* expf rounded once from the double exponential: matches a correctly rounded expf (as the
 * CPU's libm gives to within its 0.5 ulp) except at double-rounding ties, which are rarer than
 * 1 in 2^28 inputs; CUDA's own expf is off by up to 2 ulp. */
__device__ __forceinline__ float hone_expf(float x)
{
    return (float)exp((double)x);
}

/* Block-wide reductions for blocks of up to 1024 threads (a multiple of 32). Deterministic:
 * a fixed tree for a fixed blockDim. Every thread of the block must call them, and gets the
 * result. They reuse one shared buffer: each begins and ends with a barrier. */
__device__ __forceinline__ double hone_block_sum_f64(double v)
{
    __shared__ double part[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(HONE_FULL_MASK, v, o);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nw ? part[lane] : 0.0;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(HONE_FULL_MASK, v, o);
        if (lane == 0) part[0] = v;
    }
    __syncthreads();
    v = part[0];
    __syncthreads();
    return v;
}

/* Maximum ignoring NaN (as `if (s > mx) mx = s` does from mx = -inf). */
__device__ __forceinline__ float hone_block_max(float v)
{
    __shared__ float partm[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(HONE_FULL_MASK, v, o));
    if (lane == 0) partm[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nw ? partm[lane] : -__int_as_float(0x7f800000);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(HONE_FULL_MASK, v, o));
        if (lane == 0) partm[0] = v;
    }
    __syncthreads();
    v = partm[0];
    __syncthreads();
    return v;
}

/* ---- matvec / matmul: the 16 lanes of a row on the 16 threads of a half-warp ---------------- */

#define HONE_MV_UNROLL 16

/* y[r] = W[r] . x for rows r = blockIdx.x * (blockDim.x / 16) + threadIdx.x / 16: thread l of
 * the row's half-warp accumulates the elements c = l, l + 16, l + 32, ... in order (lane l of
 * the CPU order). Loads are issued HONE_MV_UNROLL at a time before their FMAs, so a thread
 * keeps that many weight loads in flight; a half-warp's load covers 16 consecutive elements
 * (32-64 contiguous bytes of a plain row; the 2-byte fields of quantised blocks). */
template <int DT>
__device__ __forceinline__ void hone_matvec(float *y, const hone_u8 *W, const float *x,
                                            hone_i64 rows, hone_i64 cols)
{
    hone_i64 r = (hone_i64)blockIdx.x * (blockDim.x >> 4) + (threadIdx.x >> 4);
    hone_i64 lane = threadIdx.x & 15;
    bool ok = r < rows;
    float acc = 0.0f;
    if (ok) {
        const hone_u8 *row = W + r * hone_row_bytes(DT, cols);
        for (hone_i64 c0 = lane; c0 < cols; c0 += 16 * HONE_MV_UNROLL) {
            float w[HONE_MV_UNROLL], xv[HONE_MV_UNROLL];
#pragma unroll
            for (int u = 0; u < HONE_MV_UNROLL; u++) {
                hone_i64 c = c0 + 16 * u;
                w[u] = 0.0f;
                xv[u] = 0.0f;
                if (c < cols) {
                    w[u] = hone_w<DT>(row, c);
                    xv[u] = x[c];
                }
            }
#pragma unroll
            for (int u = 0; u < HONE_MV_UNROLL; u++)
                if (c0 + 16 * u < cols) acc = __fmaf_rn(w[u], xv[u], acc);
        }
    }
    acc = hone_lanes_sum16(acc);
    if (ok && lane == 0) y[r] = acc;
}

#define HONE_MM_UNROLL 4

/* Y[t][r] = W[r] . X[t] for a tile of TT tokens t = blockIdx.y * TT + i and the rows of
 * hone_matvec: each weight element is dequantised once and used for the TT tokens, and every
 * (t, r) follows the matvec order exactly, so Y[t] is bitwise the matvec of X[t]. */
template <int DT, int TT>
__device__ __forceinline__ void hone_matmul(float *Y, const hone_u8 *W, const float *X,
                                            hone_i64 n, hone_i64 rows, hone_i64 cols)
{
    hone_i64 r = (hone_i64)blockIdx.x * (blockDim.x >> 4) + (threadIdx.x >> 4);
    hone_i64 lane = threadIdx.x & 15;
    hone_i64 t0 = (hone_i64)blockIdx.y * TT;
    bool ok = r < rows;
    float acc[TT];
#pragma unroll
    for (int t = 0; t < TT; t++) acc[t] = 0.0f;
    if (ok) {
        const hone_u8 *row = W + r * hone_row_bytes(DT, cols);
        for (hone_i64 c0 = lane; c0 < cols; c0 += 16 * HONE_MM_UNROLL) {
            float w[HONE_MM_UNROLL];
#pragma unroll
            for (int u = 0; u < HONE_MM_UNROLL; u++) {
                hone_i64 c = c0 + 16 * u;
                w[u] = c < cols ? hone_w<DT>(row, c) : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < HONE_MM_UNROLL; u++) {
                hone_i64 c = c0 + 16 * u;
                if (c >= cols) break;
#pragma unroll
                for (int t = 0; t < TT; t++)
                    if (t0 + t < n) acc[t] = __fmaf_rn(w[u], X[(t0 + t) * cols + c], acc[t]);
            }
        }
    }
#pragma unroll
    for (int t = 0; t < TT; t++) {
        float s = hone_lanes_sum16(acc[t]);
        if (ok && lane == 0 && t0 + t < n) Y[(t0 + t) * rows + r] = s;
    }
}

/* ---- attention --------------------------------------------------------------------------- */

#define HONE_ATT_UNROLL 4

/* The paged KV cache's layout, as engine/kv_layout.h (NVRTC sees this header alone): block b
 * holds [n_kv_heads][block_size][head_dim] f32; the first float of token j's row of kv head
 * kvh. */
__device__ __forceinline__ hone_i64 hone_kv_offset(const hone_i32 *block_table, hone_i64 j,
                                                   hone_i64 block_size, hone_i64 n_kv_heads,
                                                   hone_i64 kvh, hone_i64 head_dim)
{
    return (((hone_i64)block_table[j / block_size] * n_kv_heads + kvh) * block_size + j % block_size) * head_dim;
}

/* Rows of more than HONE_ATT_SEG keys go in segments of HONE_ATT_SEG keys, folded in order
 * (engine/kv_layout.h, revision 3 of the attention contract). */
#define HONE_ATT_SEG 512

/* One attention row, computed by a whole block: out[d] = sum_j softmax_j(scale q . K_j) V_j[d]
 * over keys j < n_kv of the paged cache (kv head kvh), the CPU's hone_cpu_attend_row step by
 * step, a segment of HONE_ATT_SEG keys at a time: (1) one thread per key computes its score in
 * the 16-lane order, times scale, into scores[j]; the block takes the segment's max m; (2)
 * scores[j] = expf(s - m), their sum l in double (a block tree instead of the CPU's sequence: a
 * difference of double roundings only); (3) one thread per dimension d accumulates p_j V_j[d]
 * over the segment's j in key order with one fma each. The first segment's (A, M, L) is the
 * row's state; each further one is folded in as hone_cpu_att_fold does (M = the larger max, a =
 * expf(M_old - M), b = expf(m - M), L = L a + l b, A[d] = fma(o[d], b, A[d] a)), and at the end
 * out[d] = A[d] * (float)(1 / L). A[d] waits in out[d] (each thread owns its dimensions).
 * scores: this row's n_kv floats of global scratch. */
__device__ __forceinline__ void hone_attend_row(float *out, const float *q, const float *k_cache,
                                                const float *v_cache, const hone_i32 *block_table,
                                                hone_i64 n_kv, hone_i64 block_size,
                                                hone_i64 n_kv_heads, hone_i64 kvh,
                                                hone_i64 head_dim, float scale, float *scores)
{
    for (hone_i64 j = threadIdx.x; j < n_kv; j += blockDim.x) {
        const float *k = k_cache + hone_kv_offset(block_table, j, block_size, n_kv_heads, kvh, head_dim);
        float acc[HONE_LANES];
#pragma unroll
        for (int l = 0; l < HONE_LANES; l++) acc[l] = 0.0f;
        for (hone_i64 c0 = 0; c0 < head_dim; c0 += HONE_LANES) {
#pragma unroll
            for (int l = 0; l < HONE_LANES; l++)
                if (c0 + l < head_dim) acc[l] = __fmaf_rn(k[c0 + l], q[c0 + l], acc[l]);
        }
        scores[j] = __fmul_rn(hone_lanes_sum_regs(acc), scale);
    }
    float M = 0.0f;
    double L = 0.0;
    int nk = (int)n_kv, hd = (int)head_dim;
#pragma unroll 1
    for (int k0 = 0; k0 < nk || k0 == 0; k0 += HONE_ATT_SEG) {
        int k1 = nk - k0 < HONE_ATT_SEG ? nk : k0 + HONE_ATT_SEG;
        float mx = -__int_as_float(0x7f800000);
        for (int j = k0 + (int)threadIdx.x; j < k1; j += blockDim.x) mx = fmaxf(mx, scores[j]);
        mx = hone_block_max(mx); /* (its first barrier publishes the scores) */
        double part = 0.0;
        for (int j = k0 + (int)threadIdx.x; j < k1; j += blockDim.x) {
            float p = hone_expf(__fsub_rn(scores[j], mx));
            scores[j] = p;
            part += (double)p;
        }
        double sum = hone_block_sum_f64(part); /* its barriers also publish scores[] to the block */
        float a = 1.0f, b = 1.0f;
        if (k0 > 0) { /* every thread the same values */
            float M2 = mx > M ? mx : M, e[2];
#pragma unroll 1
            for (int t = 0; t < 2; t++) e[t] = hone_expf(__fsub_rn(t ? mx : M, M2)); /* one exp site */
            a = e[0], b = e[1];
            L = __dadd_rn(__dmul_rn(L, (double)a), __dmul_rn(sum, (double)b));
            M = M2;
        } else {
            L = sum;
            M = mx;
        }
        for (int d = threadIdx.x; d < hd; d += blockDim.x) {
            float o = 0.0f;
            int j = k0;
            for (; j + HONE_ATT_UNROLL <= k1; j += HONE_ATT_UNROLL) {
                float vv[HONE_ATT_UNROLL], pp[HONE_ATT_UNROLL];
#pragma unroll
                for (int u = 0; u < HONE_ATT_UNROLL; u++) {
                    int jj = j + u;
                    vv[u] = v_cache[hone_kv_offset(block_table, jj, block_size, n_kv_heads, kvh, head_dim) + d];
                    pp[u] = scores[jj];
                }
#pragma unroll
                for (int u = 0; u < HONE_ATT_UNROLL; u++) o = __fmaf_rn(pp[u], vv[u], o);
            }
            for (; j < k1; j++)
                o = __fmaf_rn(scores[j], v_cache[hone_kv_offset(block_table, j, block_size, n_kv_heads, kvh, head_dim) + d], o);
            out[d] = k0 > 0 ? __fmaf_rn(o, b, __fmul_rn(out[d], a)) : o;
        }
        if (k1 >= nk) break;
    }
    float inv = (float)(1.0 / L);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) out[d] = __fmul_rn(out[d], inv);
}

#endif
