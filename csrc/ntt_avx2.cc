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
  static inline reg bxor(reg a, reg b) { return _mm256_xor_si256(a, b); }
  template <int k>
  static inline reg rotl(reg a) {
    if constexpr (k == 16) {  // byte shuffles for the whole-byte rotations (one op instead of three)
      return _mm256_shuffle_epi8(a, _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 2, 3, 0,
                                                     1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
    } else if constexpr (k == 8) {
      return _mm256_shuffle_epi8(a, _mm256_setr_epi8(3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14, 3, 0, 1,
                                                     2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14));
    } else {
      return _mm256_or_si256(_mm256_slli_epi32(a, k), _mm256_srli_epi32(a, 32 - k));
    }
  }
  static constexpr bool kCompress = false;
  // 64-bit lanes for the wide basis conversion and inner product (ops_impl.h): products of the even 32-bit lanes
  // (vpmuludq), the odd lanes moved down, 64-bit adds, and the low / high words of two vectors of 4 64-bit sums
  static constexpr bool kWide = true;
  static inline reg mul_even(reg a, reg b) { return _mm256_mul_epu32(a, b); }
  static inline reg odd(reg a) { return _mm256_srli_epi64(a, 32); }
  static inline reg add64(reg a, reg b) { return _mm256_add_epi64(a, b); }
  static inline reg join_lo(reg e, reg o) { return _mm256_blend_epi32(e, _mm256_slli_epi64(o, 32), 0xAA); }
  static inline reg join_hi(reg e, reg o) { return _mm256_blend_epi32(_mm256_srli_epi64(e, 32), o, 0xAA); }
  static inline reg even_part(reg r) { return _mm256_blend_epi32(r, _mm256_setzero_si256(), 0xAA); }
  static constexpr bool kGenericTail = true;  // the stages with h < W: ntt_impl.h's gtail, one lane at a time
};
}  // namespace HEMX_ISA
}  // namespace hemx

#include "ntt_impl.h"
