// AES-128 counter stream on x86 AES-NI (this file alone is compiled with -maes -msse4.1; dispatch.cc calls it only
// where CPUID reports AES-NI). Eight blocks in flight: AESENC's latency is hidden behind the independent blocks.
#include <immintrin.h>

#include "kernels.h"

namespace hemx {
namespace aes_ni {

static inline __m128i block_of(uint32_t c, uint32_t d, uint32_t q, uint32_t n) {
  return _mm_set_epi32((int)n, (int)q, (int)d, (int)c);  // words (c, d, q, n), little-endian bytes
}

void aes_blocks(uint32_t* out, const uint32_t* rk, uint32_t c0, uint32_t d, uint32_t q, uint32_t n, size_t blocks) {
  __m128i k[11];
  for (int r = 0; r < 11; ++r) k[r] = _mm_loadu_si128((const __m128i*)(rk + 4 * r));
  constexpr size_t B = 8;
  size_t i = 0;
  for (; i + B <= blocks; i += B) {
    __m128i s[B];
    for (size_t j = 0; j < B; ++j) s[j] = _mm_xor_si128(block_of(c0 + (uint32_t)(i + j), d, q, n), k[0]);
    for (int r = 1; r < 10; ++r)
      for (size_t j = 0; j < B; ++j) s[j] = _mm_aesenc_si128(s[j], k[r]);
    for (size_t j = 0; j < B; ++j) _mm_storeu_si128((__m128i*)(out + 4 * (i + j)), _mm_aesenclast_si128(s[j], k[10]));
  }
  for (; i < blocks; ++i) {
    __m128i s = _mm_xor_si128(block_of(c0 + (uint32_t)i, d, q, n), k[0]);
    for (int r = 1; r < 10; ++r) s = _mm_aesenc_si128(s, k[r]);
    _mm_storeu_si128((__m128i*)(out + 4 * i), _mm_aesenclast_si128(s, k[10]));
  }
}

}  // namespace aes_ni
}  // namespace hemx
