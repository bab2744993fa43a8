/* Red team: the tail of its share is loaded as a whole 512-bit vector (up to 15 floats past the
 * end of gate and up), only the store is masked. Expected: canary (a fault on the guard page
 * after an input). */
#include <immintrin.h>
#include "kernels/cpu/common.h"
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i += 16) {
        __m512 g = _mm512_loadu_ps(gate + i), u = _mm512_loadu_ps(up + i);
        float gs[16], us[16], os[16];
        _mm512_storeu_ps(gs, g);
        _mm512_storeu_ps(us, u);
        for (int k = 0; k < 16; k++) os[k] = gs[k] / (1.0f + expf(-gs[k])) * us[k];
        int64_t left = i1 - i < 16 ? i1 - i : 16;
        _mm512_mask_storeu_ps(out + i, (__mmask16)((1u << left) - 1u), _mm512_loadu_ps(os));
    }
}
