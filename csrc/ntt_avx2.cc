// AVX2 build of the kernels (this file alone is compiled with -mavx2); 8 lanes. The stages with half-width h < 8
// run in registers on blocks of 16 residues (below): 128-bit lane swaps, 64-bit unpacks and blends regroup the
// butterflies' x and y operands between stages, as the AVX-512 build's two-source permutes do.
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
  // the automorphism's gather (ops_impl.h's gather_span): lanes chosen by the low 3 bits of idx; all lanes equal
  static constexpr bool kPermute = true;
  static inline reg permute(reg idx, reg v) { return _mm256_permutevar8x32_epi32(v, idx); }
  static inline bool all_equal(reg a, reg b) { return _mm256_movemask_epi8(_mm256_cmpeq_epi32(a, b)) == -1; }
  // 64-bit lanes for the wide basis conversion and inner product (ops_impl.h): products of the even 32-bit lanes
  // (vpmuludq), the odd lanes moved down, 64-bit adds, and the low / high words of two vectors of 4 64-bit sums
  static constexpr bool kWide = true;
  static constexpr size_t kWideTargets = 4;  // targets per pass of the wide basis conversion
  static inline reg mul_even(reg a, reg b) { return _mm256_mul_epu32(a, b); }
  static inline reg mul_even_s(reg a, reg b) { return _mm256_mul_epi32(a, b); }  // signed even lanes
  static inline reg set1_64(uint64_t v) { return _mm256_set1_epi64x((long long)v); }
  static inline reg odd(reg a) { return _mm256_srli_epi64(a, 32); }
  static inline reg add64(reg a, reg b) { return _mm256_add_epi64(a, b); }
  static inline reg join_lo(reg e, reg o) { return _mm256_blend_epi32(e, _mm256_slli_epi64(o, 32), 0xAA); }
  static inline reg join_hi(reg e, reg o) { return _mm256_blend_epi32(_mm256_srli_epi64(e, 32), o, 0xAA); }
  static inline reg even_part(reg r) { return _mm256_blend_epi32(r, _mm256_setzero_si256(), 0xAA); }
  static constexpr bool kGenericTail = false;  // its own in-register tails (below; gtail where they do not apply)
  HEMX_OWN_TAILS
};
}  // namespace HEMX_ISA
}  // namespace hemx

#include "ntt_impl.h"

namespace hemx {
namespace HEMX_ISA {

// The tail on a block of 16 residues a_0..a_15, held as two registers (X, Y) of butterfly operands:
//   h = 4: X = (a_0..3, a_8..11),          Y = (a_4..7, a_12..15)        twiddle lanes (g, g, g, g, g+1, ...)
//   h = 2: X = (a_0,1, a_4,5, a_8,9, a_12,13), Y = (a_2,3, a_6,7, ...)    twiddle lanes (g, g, g+1, g+1, ...)
//   h = 1: X = (a_0, a_2, ..., a_14),      Y = (a_1, a_3, ..., a_15)     twiddle lanes g .. g+7
// The h = 4 and h = 2 arrangements convert into each other by 64-bit unpacks both ways, the h = 2 and h = 1 ones
// by a shift and a blend both ways; the natural order comes from (goes to) the h = 4 one by 128-bit lane swaps and
// from (to) the h = 1 one by 32-bit unpacks. Group g of the stage of half-width h in block b is (16 / (2h)) b.
static inline void swap128(R& x, R& y) {
  const R lo = _mm256_permute2x128_si256(x, y, 0x20), hi = _mm256_permute2x128_si256(x, y, 0x31);
  x = lo, y = hi;
}
static inline void unpack64(R& x, R& y) {
  const R lo = _mm256_unpacklo_epi64(x, y), hi = _mm256_unpackhi_epi64(x, y);
  x = lo, y = hi;
}
static inline void pairs32(R& x, R& y) {  // (h = 2) <-> (h = 1)
  const R e = _mm256_blend_epi32(x, _mm256_slli_epi64(y, 32), 0xAA);
  const R o = _mm256_blend_epi32(_mm256_srli_epi64(x, 32), y, 0xAA);
  x = e, y = o;
}
// the twiddles (values and Shoup companions) of the stage of half-width h for block b, one per lane
template <size_t H>
static inline void tail_tw(const uint32_t* w, const uint32_t* ws, size_t off, size_t b, R& tv, R& ts) {
  if constexpr (H == 1) {
    tv = V::load(w + off + 8 * b), ts = V::load(ws + off + 8 * b);
  } else if constexpr (H == 2) {
    const R idx = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    tv = _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i*)(w + off + 4 * b))), idx);
    ts = _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i*)(ws + off + 4 * b))), idx);
  } else {
    const R idx = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    tv = _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(_mm_loadl_epi64((const __m128i*)(w + off + 2 * b))), idx);
    ts = _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(_mm_loadl_epi64((const __m128i*)(ws + off + 2 * b))), idx);
  }
}

constexpr size_t kTailBlocks = 2;  // blocks of 16 in flight (independent chains for the out-of-order core)

// forward stages h = 4, 2, 1 on NB blocks from block b (every stage an A stage, as gtail's), then the reduction
template <int Mode, size_t NB>
static inline void forward_tail_group(uint32_t* a, size_t b, const size_t* off, const uint32_t* w,
                                      const uint32_t* ws, const Consts& c) {
  R X[NB], Y[NB], tv, ts;
  for (size_t j = 0; j < NB; ++j) X[j] = V::load(a + 16 * (b + j)), Y[j] = V::load(a + 16 * (b + j) + 8);
  for (size_t j = 0; j < NB; ++j) {
    swap128(X[j], Y[j]);
    tail_tw<4>(w, ws, off[0], b + j, tv, ts);
    fwd_bf<Mode>(X[j], Y[j], tv, ts, c);
  }
  for (size_t j = 0; j < NB; ++j) {
    unpack64(X[j], Y[j]);
    tail_tw<2>(w, ws, off[1], b + j, tv, ts);
    fwd_bf<Mode>(X[j], Y[j], tv, ts, c);
  }
  for (size_t j = 0; j < NB; ++j) {
    pairs32(X[j], Y[j]);
    tail_tw<1>(w, ws, off[2], b + j, tv, ts);
    fwd_bf<Mode>(X[j], Y[j], tv, ts, c);
    const R x = fwd_reduce<Mode>(X[j], c), y = fwd_reduce<Mode>(Y[j], c);
    R lo = _mm256_unpacklo_epi32(x, y), hi = _mm256_unpackhi_epi32(x, y);
    swap128(lo, hi);
    V::store(a + 16 * (b + j), lo), V::store(a + 16 * (b + j) + 8, hi);
  }
}

// forward stages h = 4, 2, 1 of a segment (len / 16 blocks of 16), then the reduction to [0, q); gtail's where the
// segment is not whole blocks of 16 entering at h = 4
template <int Mode>
void V::forward_tail(uint32_t* a, size_t len, size_t base, uint32_t qs, const uint32_t* w, const uint32_t* ws,
                     size_t h) {
  if (h != 4 || len % 16) return gtail::forward<Mode>(a, len, base, qs, w, ws, h);
  const Consts c(qs);
  const size_t off[3] = {(len / 8) * base, (len / 4) * base, (len / 2) * base};  // h = 4, 2, 1: len / (2h) groups
  const size_t nblk = len / 16;
  size_t b = 0;
  for (; b + kTailBlocks <= nblk; b += kTailBlocks) forward_tail_group<Mode, kTailBlocks>(a, b, off, w, ws, c);
  for (; b < nblk; ++b) forward_tail_group<Mode, 1>(a, b, off, w, ws, c);
}

// inverse stages h = 1, 2, 4 on NB blocks from block b
template <bool Lazy, size_t NB>
static inline void inverse_tail_group(uint32_t* a, size_t b, const size_t* off, const uint32_t* w,
                                      const uint32_t* ws, R q, R q2) {
  R X[NB], Y[NB], tv, ts;
  for (size_t j = 0; j < NB; ++j) {
    R lo = V::load(a + 16 * (b + j)), hi = V::load(a + 16 * (b + j) + 8);
    swap128(lo, hi);  // (a_0..3, a_8..11), (a_4..7, a_12..15): the inverse of the forward's closing unpacks
    lo = _mm256_shuffle_epi32(lo, 0xD8), hi = _mm256_shuffle_epi32(hi, 0xD8);  // lanes (0, 2, 1, 3) per half
    X[j] = _mm256_unpacklo_epi64(lo, hi), Y[j] = _mm256_unpackhi_epi64(lo, hi);
    tail_tw<1>(w, ws, off[0], b + j, tv, ts);
    inv_bf<Lazy>(X[j], Y[j], tv, ts, q, q2);
  }
  for (size_t j = 0; j < NB; ++j) {
    pairs32(X[j], Y[j]);
    tail_tw<2>(w, ws, off[1], b + j, tv, ts);
    inv_bf<Lazy>(X[j], Y[j], tv, ts, q, q2);
  }
  for (size_t j = 0; j < NB; ++j) {
    unpack64(X[j], Y[j]);
    tail_tw<4>(w, ws, off[2], b + j, tv, ts);
    inv_bf<Lazy>(X[j], Y[j], tv, ts, q, q2);
    swap128(X[j], Y[j]);
    V::store(a + 16 * (b + j), X[j]), V::store(a + 16 * (b + j) + 8, Y[j]);
  }
}

// inverse stages h = 1, 2, 4 of a segment (len / 16 blocks of 16); returns the next h (8); gtail's where the
// segment is not whole blocks of 16
template <bool Lazy>
size_t V::inverse_tail(uint32_t* a, size_t len, size_t base, uint32_t qs, const uint32_t* w, const uint32_t* ws) {
  if (len % 16) return gtail::inverse<Lazy>(a, len, base, qs, w, ws, W);
  const R q = set1(qs), q2 = set1(2 * qs);
  const size_t off[3] = {(len / 2) * base, (len / 4) * base, (len / 8) * base};  // h = 1, 2, 4
  const size_t nblk = len / 16;
  size_t b = 0;
  for (; b + kTailBlocks <= nblk; b += kTailBlocks) inverse_tail_group<Lazy, kTailBlocks>(a, b, off, w, ws, q, q2);
  for (; b < nblk; ++b) inverse_tail_group<Lazy, 1>(a, b, off, w, ws, q, q2);
  return 8;
}

}  // namespace HEMX_ISA
}  // namespace hemx
