// embed: out[n][dim] = table[ids[t]][:] dequantised exactly to f32. Contract: engine/slots.h and
// kernels/cuda/README.md.
//   out: [n][dim] f32; table: [n_vocab][dim] of dtype (engine/dtype.h numbering; dim % 32 == 0
//   for the block formats); ids: [n] int32 token ids in device memory (valid, checked by the
//   engine); dtype: one kernel serves every weight dtype.
// Ideas:
//   - one thread per output element (grid x over dim, grid y over tokens), coalesced writes;
//   - the element dequantised by the same exact rule as the matvec kernels (common.cuh).
// hone-launch: block=256 x=256 y=1
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256)
hone_cuda_embed(float *__restrict__ out, const void *__restrict__ table, hone_i32 dtype,
                const hone_i32 *__restrict__ ids, hone_i64 n, hone_i64 dim)
{
    hone_i64 c = (hone_i64)blockIdx.x * blockDim.x + threadIdx.x;
    hone_i64 t = blockIdx.y;
    if (c >= dim || t >= n) return;
    const hone_u8 *row = (const hone_u8 *)table + (hone_i64)ids[t] * hone_row_bytes(dtype, dim);
    out[t * dim + c] = hone_w_dt(dtype, row, c);
}
