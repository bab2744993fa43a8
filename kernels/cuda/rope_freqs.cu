// rope_freqs: rotary position embedding in place with per-pair frequency factors (llama3).
// Contract: engine/slots.h and kernels/cuda/README.md.
//   x: [n][n_heads][head_dim] f32, in place; pos: [n] int32 positions in device memory;
//   freqs: [n_rot/2] f32; rotates the first n_rot dims of every head by
//   theta_i = pos[t] * (freq_base^(-2i/n_rot) / freqs[i]), i < n_rot/2; normal pairs
//   (2i, 2i+1), NeoX pairs (i, i + n_rot/2); (a, b) -> (a cos - b sin, a sin + b cos).
// Ideas:
//   - rope.cu's: one warp per (token, head) row, one thread per pair (4 rows per block of 128);
//   - the inverse frequency, theta, cos and sin in double, rounded to f32 once, as the CPU does;
//   - the rotation in f32 with separate multiply and subtract/add roundings (no fma).
// hone-launch: block=128 x=4 y=1
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(128)
hone_cuda_rope_freqs(float *x, const hone_i32 *__restrict__ pos, const float *__restrict__ freqs,
                     hone_i64 n, hone_i64 n_heads, hone_i64 head_dim, hone_i64 n_rot,
                     float freq_base, hone_i32 neox)
{
    hone_i64 r = (hone_i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= n * n_heads) return;
    hone_i64 t = r / n_heads, half = n_rot / 2;
    float *v = x + r * head_dim;
    for (hone_i64 i = threadIdx.x & 31; i < half; i += 32) {
        double inv = pow((double)freq_base, -2.0 * (double)i / (double)n_rot) / (double)freqs[i];
        double theta = (double)pos[t] * inv;
        float cs = (float)cos(theta), sn = (float)sin(theta);
        hone_i64 ia = neox ? i : 2 * i, ib = neox ? i + half : 2 * i + 1;
        float a = v[ia], b = v[ib];
        v[ia] = __fsub_rn(__fmul_rn(a, cs), __fmul_rn(b, sn));
        v[ib] = __fadd_rn(__fmul_rn(a, sn), __fmul_rn(b, cs));
    }
}
