// AVX-512 build of the kernels (this file alone is compiled with -mavx512f -mavx512vl -mavx512bw -mavx512dq).
// 16 lanes; the stages with half-width h < 16 run in registers on blocks of 32 residues: two-source permutes
// (vpermt2d) gather the butterflies' x and y operands, and the permutes of consecutive stages are composed
// offline so each stage costs two permutes, not four.
#include <immintrin.h>

#include "kernels.h"

#define HEMX_ISA avx512

namespace hemx {
namespace HEMX_ISA {

struct Perms {
  // in_x[s] / in_y[s]: lanes of (X, Y) of stage s taken from the previous stage's (X, Y) (from the natural
  // block (lo, hi) for s = 0); out_lo / out_hi: the natural block from the last stage's (X, Y).
  alignas(64) uint32_t in_x[4][16], in_y[4][16], tw[4][16], out_lo[16], out_hi[16];
};

// Stage s of a block of 32 handles h = hs[s]: butterfly b (0..15) pairs positions x(b) = (b/h)*2h + b%h and
// x(b) + h. src(p) says where natural position p sits in (X, Y): X lane b -> b, Y lane b -> 16 + b.
static Perms make_perms(bool forward) {
  Perms P{};
  size_t hs[4];
  for (int s = 0; s < 4; ++s) hs[s] = forward ? (8u >> s) : (1u << s);
  uint32_t prev_src[32];
  for (int p = 0; p < 32; ++p) prev_src[p] = (uint32_t)p;  // stage 0 reads the natural block (lo = 0..15)
  for (int s = 0; s < 4; ++s) {
    const size_t h = hs[s];
    for (size_t b = 0; b < 16; ++b) {
      const size_t x = (b / h) * 2 * h + b % h;
      P.in_x[s][b] = prev_src[x];
      P.in_y[s][b] = prev_src[x + h];
      P.tw[s][b] = (uint32_t)(b / h);
    }
    for (size_t p = 0; p < 32; ++p) {
      const size_t g = p / (2 * h), r = p % (2 * h);
      prev_src[p] = (uint32_t)(r < h ? g * h + r : 16 + g * h + r - h);
    }
  }
  for (int p = 0; p < 16; ++p) P.out_lo[p] = prev_src[p], P.out_hi[p] = prev_src[16 + p];
  return P;
}
static const Perms kFwd = make_perms(true), kInv = make_perms(false);

static inline __m512i ld(const uint32_t* p) { return _mm512_loadu_si512((const void*)p); }

struct V {
  using reg = __m512i;
  static constexpr size_t W = 16;
  static inline reg load(const uint32_t* p) { return ld(p); }
  static inline void store(uint32_t* p, reg v) { _mm512_storeu_si512((void*)p, v); }
  static inline reg set1(uint32_t v) { return _mm512_set1_epi32((int)v); }
  static inline reg add(reg a, reg b) { return _mm512_add_epi32(a, b); }
  static inline reg sub(reg a, reg b) { return _mm512_sub_epi32(a, b); }
  static inline reg min(reg a, reg b) { return _mm512_min_epu32(a, b); }
  static inline reg mullo(reg a, reg b) { return _mm512_mullo_epi32(a, b); }
  static inline reg mulhi(reg a, reg b) {
    reg even = _mm512_srli_epi64(_mm512_mul_epu32(a, b), 32);
    reg odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(b, 32));
    return _mm512_mask_blend_epi32((__mmask16)0xAAAA, even, odd);
  }
  static inline reg gt_mask(reg a, reg b) { return _mm512_movm_epi32(_mm512_cmpgt_epu32_mask(a, b)); }
  static inline reg band(reg a, reg b) { return _mm512_and_si512(a, b); }
  // 64-bit lanes for the wide basis conversion: products of the even 32-bit lanes, the odd lanes moved down,
  // 64-bit adds, and the 16 low / high words of two vectors of 8 64-bit sums (even lanes, odd lanes)
  static constexpr bool kWide = true;
  static inline reg mul_even(reg a, reg b) { return _mm512_mul_epu32(a, b); }
  static inline reg odd(reg a) { return _mm512_srli_epi64(a, 32); }
  static inline reg add64(reg a, reg b) { return _mm512_add_epi64(a, b); }
  static inline reg join_lo(reg e, reg o) { return _mm512_mask_blend_epi32((__mmask16)0xAAAA, e, _mm512_slli_epi64(o, 32)); }
  static inline reg join_hi(reg e, reg o) { return _mm512_mask_blend_epi32((__mmask16)0xAAAA, _mm512_srli_epi64(e, 32), o); }
  static inline reg even_part(reg r) { return _mm512_maskz_mov_epi32((__mmask16)0x5555, r); }
  template <bool Lazy>
  static void forward_tail(uint32_t* a, size_t n, uint32_t q, const uint32_t* w, const uint32_t* ws, size_t m,
                           size_t h);
  template <bool Lazy>
  static size_t inverse_tail(uint32_t* a, size_t n, uint32_t q, const uint32_t* w, const uint32_t* ws);
};

}  // namespace HEMX_ISA
}  // namespace hemx

#include "ntt_impl.h"

namespace hemx {
namespace HEMX_ISA {

// Twiddles of butterflies b = 0..15 of block `blk` at the stage with m groups and half-width h:
// w[m + blk * 16/h + b/h] (16/h consecutive entries, each used by h lanes).
static inline void stage_twiddles(const uint32_t* w, const uint32_t* ws, size_t m, size_t blk, size_t h,
                                  __m512i idx, __m512i& tv, __m512i& ts) {
  const size_t off = m + blk * (16 / h);
  tv = _mm512_permutexvar_epi32(idx, ld(w + off));
  ts = _mm512_permutexvar_epi32(idx, ld(ws + off));
}

// forward stages h = 8, 4, 2, 1 (m = n/16 ... n/2) on each block of 32, then the reduction to [0, q)
template <bool Lazy>
void V::forward_tail(uint32_t* a, size_t n, uint32_t qs, const uint32_t* w, const uint32_t* ws, size_t m0, size_t) {
  const R q = set1(qs), q2 = set1(2 * qs);
  __m512i ix[4], iy[4], it[4];
  for (int s = 0; s < 4; ++s) ix[s] = ld(kFwd.in_x[s]), iy[s] = ld(kFwd.in_y[s]), it[s] = ld(kFwd.tw[s]);
  const __m512i olo = ld(kFwd.out_lo), ohi = ld(kFwd.out_hi);
  for (size_t blk = 0; blk < n / 32; ++blk) {
    uint32_t* p = a + 32 * blk;
    __m512i X = ld(p), Y = ld(p + 16);
    for (int s = 0; s < 4; ++s) {
      __m512i nx = _mm512_permutex2var_epi32(X, ix[s], Y), ny = _mm512_permutex2var_epi32(X, iy[s], Y);
      __m512i tv, ts;
      stage_twiddles(w, ws, m0 << s, blk, 8u >> s, it[s], tv, ts);
      fwd_bf<Lazy>(nx, ny, tv, ts, q, q2);
      X = nx, Y = ny;
    }
    __m512i lo = _mm512_permutex2var_epi32(X, olo, Y), hi = _mm512_permutex2var_epi32(X, ohi, Y);
    if (Lazy) lo = csub(lo, q2), hi = csub(hi, q2);
    store(p, csub(lo, q)), store(p + 16, csub(hi, q));
  }
}

// inverse stages h = 1, 2, 4, 8 (m = n/2 ... n/16) on each block of 32; returns the next h (16)
template <bool Lazy>
size_t V::inverse_tail(uint32_t* a, size_t n, uint32_t qs, const uint32_t* w, const uint32_t* ws) {
  const R q = set1(qs), q2 = set1(2 * qs);
  __m512i ix[4], iy[4], it[4];
  for (int s = 0; s < 4; ++s) ix[s] = ld(kInv.in_x[s]), iy[s] = ld(kInv.in_y[s]), it[s] = ld(kInv.tw[s]);
  const __m512i olo = ld(kInv.out_lo), ohi = ld(kInv.out_hi);
  for (size_t blk = 0; blk < n / 32; ++blk) {
    uint32_t* p = a + 32 * blk;
    __m512i X = ld(p), Y = ld(p + 16);
    for (int s = 0; s < 4; ++s) {
      __m512i nx = _mm512_permutex2var_epi32(X, ix[s], Y), ny = _mm512_permutex2var_epi32(X, iy[s], Y);
      __m512i tv, ts;
      stage_twiddles(w, ws, (n / 2) >> s, blk, 1u << s, it[s], tv, ts);
      inv_bf<Lazy>(nx, ny, tv, ts, q, q2);
      X = nx, Y = ny;
    }
    store(p, _mm512_permutex2var_epi32(X, olo, Y)), store(p + 16, _mm512_permutex2var_epi32(X, ohi, Y));
  }
  return 16;
}

}  // namespace HEMX_ISA
}  // namespace hemx
