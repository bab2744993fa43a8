// attention_decode: one query per head over the paged KV cache, GQA. Contract: engine/slots.h
// and kernels/cuda/README.md.
//   out: [n_heads][head_dim] f32; q: [n_heads][head_dim] f32; k_cache, v_cache: one layer's
//   pools [n_blocks][n_kv_heads][block_size][head_dim] f32; block_table: the sequence's block
//   ids; n_kv: ONE int32 in device memory (keys j < *n_kv), so a captured decode graph attends
//   over the step's length; scratch: [n_heads][scratch_stride] f32 (stride >= *n_kv);
//   kv head of head h: h / (n_heads / n_kv_heads).
// Ideas:
//   - one block per head; the row is common.cuh's hone_attend_row, shared with
//     attention_prefill so a prefilled row equals the decoded one bit for bit;
//   - scores in the CPU's 16-lane order; softmax max-shifted with expf rounded from double and
//     the normaliser summed in double; V accumulated in key order with one fma per key.
// hone-launch: block=128 x=1 y=1
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(128)
hone_cuda_attention_decode(float *__restrict__ out, const float *__restrict__ q,
                           const float *__restrict__ k_cache, const float *__restrict__ v_cache,
                           const hone_i32 *__restrict__ block_table, const hone_i32 *__restrict__ n_kv,
                           hone_i64 block_size, hone_i64 n_heads, hone_i64 n_kv_heads,
                           hone_i64 head_dim, float scale, float *scratch, hone_i64 scratch_stride)
{
    hone_i64 h = blockIdx.x;
    if (h >= n_heads) return;
    hone_i64 group = n_heads / n_kv_heads;
    hone_attend_row(out + h * head_dim, q + h * head_dim, k_cache, v_cache, block_table, *n_kv,
                    block_size, n_kv_heads, h / group, head_dim, scale, scratch + h * scratch_stride);
}
