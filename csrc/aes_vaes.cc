// AES-128 counter stream on x86 VAES with AVX-512 registers: four blocks per register, four registers in flight
// (this file alone is compiled with -mvaes and the AVX-512 flags; dispatch.cc calls it only where CPUID reports
// VAES and AVX-512F/VL/BW/DQ).
#include <immintrin.h>

#include "kernels.h"

namespace hemx {
namespace aes_vaes {

void aes_blocks(uint32_t* out, const uint32_t* rk, uint32_t c0, uint32_t d, uint32_t q, uint32_t n, size_t blocks) {
  __m512i k[11];
  for (int r = 0; r < 11; ++r) k[r] = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i*)(rk + 4 * r)));
  // lanes (c + j, d, q, n) for the register's blocks j = 0..3; the counter word is lane 4 j
  const __m512i base = _mm512_set_epi32((int)n, (int)q, (int)d, 3, (int)n, (int)q, (int)d, 2, (int)n, (int)q, (int)d,
                                        1, (int)n, (int)q, (int)d, 0);
  const __m512i step = _mm512_set_epi32(0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4);
  constexpr size_t R = 4;  // registers in flight: 16 blocks
  __m512i ctr = _mm512_add_epi32(base, _mm512_maskz_set1_epi32((__mmask16)0x1111, (int)c0));
  size_t i = 0;
  for (; i + 4 * R <= blocks; i += 4 * R) {
    __m512i s[R];
    for (size_t j = 0; j < R; ++j) {
      s[j] = _mm512_xor_si512(ctr, k[0]);
      ctr = _mm512_add_epi32(ctr, step);
    }
    for (int r = 1; r < 10; ++r)
      for (size_t j = 0; j < R; ++j) s[j] = _mm512_aesenc_epi128(s[j], k[r]);
    for (size_t j = 0; j < R; ++j) _mm512_storeu_si512((void*)(out + 4 * (i + 4 * j)), _mm512_aesenclast_epi128(s[j], k[10]));
  }
  for (; i < blocks; i += 4) {  // the rest, a register at a time (the last one stored in part)
    __m512i s = _mm512_xor_si512(ctr, k[0]);
    ctr = _mm512_add_epi32(ctr, step);
    for (int r = 1; r < 10; ++r) s = _mm512_aesenc_epi128(s, k[r]);
    s = _mm512_aesenclast_epi128(s, k[10]);
    const size_t left = blocks - i < 4 ? blocks - i : 4;
    _mm512_mask_storeu_epi32((void*)(out + 4 * i), (__mmask16)((1u << (4 * left)) - 1), s);
  }
}

}  // namespace aes_vaes
}  // namespace hemx
