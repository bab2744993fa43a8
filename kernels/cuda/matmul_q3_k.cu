// matmul_q3_k: Y[n][rows] = X[n][cols] W^T (prefill), W of dtype q3_k (cols % 256 == 0).
// Contract: engine/slots.h and kernels/cuda/README.md (CUDA argument list and launch convention).
//   Y: [n][rows] f32 out; W: [rows][cols] q3_k GGUF rows; X: [n][cols] f32; no aliasing.
//   Y[t] is bitwise equal to matvec_q3_k of X[t] (and so to the CPU's).
// Ideas:
//   - q3_K blocks (110 bytes, 256 values): (d sc) * q, exact in f32 as on the CPU;
//   - one row per half-warp (16 rows per block) times a tile of 8 tokens (grid y): each weight
//     element is dequantised once per tile and feeds 8 independent fma chains;
//   - every (token, row) keeps the matvec lane order and tree, so prefill equals decode bit for bit.
// hone-launch: block=256 x=16 y=8
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256)
hone_cuda_matmul_q3_k(float *__restrict__ Y, const void *__restrict__ W, const float *__restrict__ X,
                        hone_i64 n, hone_i64 rows, hone_i64 cols)
{
    hone_matmul<HONE_DT_Q3_K, 8>(Y, (const hone_u8 *)W, X, n, rows, cols);
}
