/* Red team: the tail of its share is loaded as a whole 512-bit vector (on AVX2 without AVX-512,
 * two full 256-bit vectors: the same 16 floats), up to 15 floats past the end of gate and up;
 * only the store is masked. Expected: canary (a fault on the guard page after an input). */
#include <immintrin.h>
#include "kernels/cpu/common.h"
void hone_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n, int ith, int nth)
{
    int64_t i0, i1;
    hone_cpu_share(n, ith, nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i += 16) {
        float gs[16], us[16], os[16];
#if defined(__AVX512F__)
        _mm512_storeu_ps(gs, _mm512_loadu_ps(gate + i));
        _mm512_storeu_ps(us, _mm512_loadu_ps(up + i));
#else
        for (int h = 0; h < 16; h += 8) {
            _mm256_storeu_ps(gs + h, _mm256_loadu_ps(gate + i + h));
            _mm256_storeu_ps(us + h, _mm256_loadu_ps(up + i + h));
        }
#endif
        for (int k = 0; k < 16; k++) os[k] = gs[k] / (1.0f + expf(-gs[k])) * us[k];
        int64_t left = i1 - i < 16 ? i1 - i : 16;
#if defined(__AVX512F__)
        _mm512_mask_storeu_ps(out + i, (__mmask16)((1u << left) - 1u), _mm512_loadu_ps(os));
#else
        for (int h = 0; h < 16; h += 8) {
            const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(left - h)),
                                                 _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            _mm256_maskstore_ps(out + i + h, m, _mm256_loadu_ps(os + h));
        }
#endif
    }
}
