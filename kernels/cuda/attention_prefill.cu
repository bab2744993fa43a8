// attention_prefill: causal attention for n queries at positions pos0 .. pos0 + n - 1 over the
// paged KV cache (their K/V already stored), GQA. Contract: engine/slots.h and
// kernels/cuda/README.md.
//   out, q: [n][n_heads][head_dim] f32; k_cache, v_cache, block_table as attention_decode;
//   query t sees keys j <= pos0 + t; scratch: [n * n_heads][scratch_stride] f32
//   (stride >= pos0 + n).
// Ideas:
//   - one block per (head, token) (grid x heads, grid y tokens), each row common.cuh's
//     hone_attend_row with its own causal length: bitwise the attention_decode row.
// hone-launch: block=128 x=1 y=1
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(128)
hone_cuda_attention_prefill(float *__restrict__ out, const float *__restrict__ q,
                            const float *__restrict__ k_cache, const float *__restrict__ v_cache,
                            const hone_i32 *__restrict__ block_table, hone_i64 n, hone_i64 pos0,
                            hone_i64 block_size, hone_i64 n_heads, hone_i64 n_kv_heads,
                            hone_i64 head_dim, float scale, float *scratch, hone_i64 scratch_stride)
{
    hone_i64 h = blockIdx.x, t = blockIdx.y;
    if (h >= n_heads || t >= n) return;
    hone_i64 group = n_heads / n_kv_heads, r = t * n_heads + h;
    hone_attend_row(out + r * head_dim, q + r * head_dim, k_cache, v_cache, block_table,
                    pos0 + t + 1, block_size, n_kv_heads, h / group, head_dim, scale,
                    scratch + r * scratch_stride);
}
