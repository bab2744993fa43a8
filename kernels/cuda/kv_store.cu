// kv_store (an engine kernel, not a slot: the CPU engine does this with memcpy): copies the
// chunk's K and V rows into the sequence's blocks of one layer's paged cache.
//   k_cache, v_cache: [n_blocks][n_kv_heads][block_size][head_dim] f32 (common.cuh's
//   hone_kv_offset, engine/kv_layout.h); k, v: [n][row] f32 (row = n_kv_heads * head_dim),
//   block_table: the sequence's block ids; pos: [n] int32 positions in
//   device memory (token t goes to block block_table[pos[t] / block_size], slot
//   pos[t] % block_size), so a captured decode graph stores at the step's position.
// Ideas: one thread per element (grid x over the row, grid y over tokens), coalesced.
// hone-launch: block=256 x=256 y=1
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256)
hone_cuda_kv_store(float *__restrict__ k_cache, float *__restrict__ v_cache,
                   const float *__restrict__ k, const float *__restrict__ v,
                   const hone_i32 *__restrict__ block_table, const hone_i32 *__restrict__ pos,
                   hone_i64 n, hone_i64 block_size, hone_i64 n_kv_heads, hone_i64 head_dim)
{
    hone_i64 e = (hone_i64)blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y, row = n_kv_heads * head_dim;
    if (e >= row || t >= n) return;
    hone_i64 off = hone_kv_offset(block_table, pos[t], block_size, n_kv_heads, e / head_dim, head_dim) + e % head_dim;
    k_cache[off] = k[t * row + e];
    v_cache[off] = v[t * row + e];
}
