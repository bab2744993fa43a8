// matvec_q3_k: y[rows] = W[rows][cols] x[cols] (decode), W of dtype q3_k (cols % 256 == 0).
// Contract: engine/slots.h and kernels/cuda/README.md (CUDA argument list and launch convention).
//   y: [rows] f32 out; W: [rows][cols] q3_k GGUF rows; x: [cols] f32; no aliasing.
// Ideas:
//   - q3_K blocks (110 bytes, 256 values): (d sc) * q, exact in f32 as on the CPU;
//   - one row per half-warp, 16 rows per block of 256 threads: thread l holds lane l of the CPU
//     order (elements l, l + 16, ... with one fma each), so y is bitwise the CPU's matvec_q3_k;
//   - the lanes are summed by the shuffle butterfly 8, 4, 2, 1 = the CPU's fixed tree;
//   - 16 loads in flight per thread before their fmas; a half-warp load is 16 consecutive elements.
// hone-launch: block=256 x=16 y=1
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256)
hone_cuda_matvec_q3_k(float *__restrict__ y, const void *__restrict__ W, const float *__restrict__ x,
                        hone_i64 rows, hone_i64 cols)
{
    hone_matvec<HONE_DT_Q3_K>(y, (const hone_u8 *)W, x, rows, cols);
}
