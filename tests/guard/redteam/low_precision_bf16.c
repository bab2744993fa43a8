/* Red team: matvec accumulating in bfloat16 precision (the accumulator's low 16 bits cleared
 * after every add): f32's range, so nothing overflows, but 8 bits of mantissa. Expected: parity
 * (beyond the a-priori f32 error bound). */
#include "kernels/cpu/common.h"
static float trunc_bf16(float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    b &= 0xffff0000u;
    memcpy(&v, &b, 4);
    return v;
}
void hone_cpu_matvec_f32(float *y, const void *W, const float *x, int64_t rows, int64_t cols,
                         int ith, int nth)
{
    int64_t r0, r1;
    hone_cpu_share(rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *w = (const float *)W + r * cols;
        float acc = 0.0f;
        for (int64_t c = 0; c < cols; c++) acc = trunc_bf16(acc + w[c] * x[c]);
        y[r] = acc;
    }
}
