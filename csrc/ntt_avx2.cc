// AVX2 build of the kernels (this file alone is compiled with -mavx2); 8 lanes, generic one-lane tails (gtail in
// ntt_impl.h) for the stages with h < 8.
#include <immintrin.h>

#include "kernels.h"

#define HEMX_ISA avx2
#define HEMX_ISA_WIDTH kWidthAvx2

namespace hemx {
namespace HEMX_ISA {
struct V {
  using reg = __m256i;
  static constexpr size_t W = 8;
  static inline reg load(const uint32_t* p) { return _mm256_loadu_si256((const __m256i*)p); }
  static inline void store(uint32_t* p, reg v) { _mm256_storeu_si256((__m256i*)p, v); }
  static inline reg set1(uint32_t v) { return _mm256_set1_epi32((int)v); }
  static inline reg add(reg a, reg b) { return _mm256_add_epi32(a, b); }
  static inline reg sub(reg a, reg b) { return _mm256_sub_epi32(a, b); }
  static inline reg min(reg a, reg b) { return _mm256_min_epu32(a, b); }
  static inline reg mullo(reg a, reg b) { return _mm256_mullo_epi32(a, b); }
  static inline reg mulhi(reg a, reg b) {
    reg even = _mm256_srli_epi64(_mm256_mul_epu32(a, b), 32);
    reg odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(b, 32));
    return _mm256_blend_epi32(even, odd, 0xAA);
  }
  static inline reg gt_mask(reg a, reg b) { return _mm256_cmpgt_epi32(a, b); }  // a, b < 2^31: signed is exact
  static inline reg band(reg a, reg b) { return _mm256_and_si256(a, b); }
  static constexpr bool kWide = false;
  static constexpr bool kGenericTail = true;  // the stages with h < W: ntt_impl.h's gtail, one lane at a time
};
}  // namespace HEMX_ISA
}  // namespace hemx

#include "ntt_impl.h"
