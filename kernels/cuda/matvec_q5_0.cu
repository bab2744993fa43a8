// matvec_q5_0: y[rows] = W[rows][cols] x[cols] (decode), W of dtype q5_0 (cols % 32 == 0).
// Contract: engine/slots.h and kernels/cuda/README.md (CUDA argument list and launch convention).
//   y: [rows] f32 out; W: [rows][cols] q5_0 GGUF rows; x: [cols] f32; no aliasing.
// Ideas:
//   - q5_0 blocks (22 bytes): (q - 16) * d, exact in f32 as on the CPU;
//   - one row per half-warp, 16 rows per block of 256 threads: thread l holds lane l of the CPU
//     order (elements l, l + 16, ... with one fma each), so y is bitwise the CPU's matvec_q5_0;
//   - the lanes are summed by the shuffle butterfly 8, 4, 2, 1 = the CPU's fixed tree;
//   - 16 loads in flight per thread before their fmas; a half-warp load is 16 consecutive elements.
// hone-launch: block=256 x=16 y=1
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256)
hone_cuda_matvec_q5_0(float *__restrict__ y, const void *__restrict__ W, const float *__restrict__ x,
                        hone_i64 rows, hone_i64 cols)
{
    hone_matvec<HONE_DT_Q5_0>(y, (const hone_u8 *)W, x, rows, cols);
}
