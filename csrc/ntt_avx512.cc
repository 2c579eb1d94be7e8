// AVX-512 build of the kernels (this file alone is compiled with -mavx512f -mavx512vl -mavx512bw -mavx512dq).
// 16 lanes; the stages with half-width h < 16 run in registers on blocks of 32 residues: two-source permutes
// (vpermt2d) gather the butterflies' x and y operands, and the permutes of consecutive stages are composed
// offline so each stage costs two permutes, not four. The tail works on kTailBlocks blocks at a time (four
// independent dependency chains for the out-of-order core; one twiddle load serves several blocks).
#include <immintrin.h>

#include "kernels.h"

#define HEMX_ISA avx512
#define HEMX_ISA_WIDTH kWidthAvx512
#include "avx512_traits.h"

namespace hemx {
namespace HEMX_ISA {

struct Perms {
  // in_x[s] / in_y[s]: lanes of (X, Y) of stage s taken from the previous stage's (X, Y) (from the natural
  // block (lo, hi) for s = 0); out_lo / out_hi: the natural block from the last stage's (X, Y).
  alignas(64) uint32_t in_x[4][16], in_y[4][16], out_lo[16], out_hi[16];
};

// Stage s of a block of 32 handles h = hs[s]: butterfly b (0..15) pairs positions x(b) = (b/h)*2h + b%h and
// x(b) + h. src(p) says where natural position p sits in (X, Y): X lane b -> b, Y lane b -> 16 + b.
static constexpr Perms make_perms(bool forward) {
  Perms P{};
  size_t hs[4] = {};
  for (int s = 0; s < 4; ++s) hs[s] = forward ? (8u >> s) : (1u << s);
  uint32_t prev_src[32] = {};
  for (int p = 0; p < 32; ++p) prev_src[p] = (uint32_t)p;  // stage 0 reads the natural block (lo = 0..15)
  for (int s = 0; s < 4; ++s) {
    const size_t h = hs[s];
    for (size_t b = 0; b < 16; ++b) {
      const size_t x = (b / h) * 2 * h + b % h;
      P.in_x[s][b] = prev_src[x];
      P.in_y[s][b] = prev_src[x + h];
    }
    for (size_t p = 0; p < 32; ++p) {
      const size_t g = p / (2 * h), r = p % (2 * h);
      prev_src[p] = (uint32_t)(r < h ? g * h + r : 16 + g * h + r - h);
    }
  }
  for (int p = 0; p < 16; ++p) P.out_lo[p] = prev_src[p], P.out_hi[p] = prev_src[16 + p];
  return P;
}
// constexpr: built by the compiler into .rodata. A namespace-scope object with a dynamic initializer here would
// run AVX-512 code when the library is loaded, before the CPU is asked (SIGILL on CPUs without AVX-512).
static constexpr Perms kFwd = make_perms(true), kInv = make_perms(false);

}  // namespace HEMX_ISA
}  // namespace hemx

#include "ntt_impl.h"

namespace hemx {
namespace HEMX_ISA {

// Twiddles of the tail: butterfly b (0..15) of block blk + j at the stage of half-width h uses
// w[off + (blk + j) * 16/h + b/h] (off: the stage's first entry). For h >= 2, h consecutive blocks share the 16
// entries from off + (blk + j - j % h) * 16/h, and idx[s][j] picks block j's (a permute); h = 1 reads the 16
// entries of each block as they are. blk is a multiple of kTailBlocks.
constexpr int kTailBlocks = 4;
struct TailIdx {
  alignas(64) uint32_t idx[4][kTailBlocks][16];  // [stage by h = 8, 4, 2, 1][block]
};
static constexpr TailIdx make_tail_idx() {
  TailIdx T{};
  for (int s = 0; s < 4; ++s)
    for (int j = 0; j < kTailBlocks; ++j)
      for (uint32_t b = 0; b < 16; ++b) {
        const uint32_t h = 8u >> s;
        T.idx[s][j][b] = (uint32_t)(j % h) * (16 / h) + b / h;
      }
  return T;
}
static constexpr TailIdx kTailIdx = make_tail_idx();  // constexpr: see kFwd

// Shoup product with the twiddle's companion given twice: ws (even lanes) and ws_odd (odd lanes moved down),
// so a twiddle whose lanes come in equal pairs (h >= 2) needs no shift.
static inline R mul_tw(R a, R w, R ws, R ws_odd, R q) {
  return V::sub(V::mullo(a, w), V::mullo(V::mulhi2(a, ws, ws_odd), q));
}
template <bool Lazy>
static inline void inv_bf_tw(R& x, R& y, R w, R ws, R wso, R q, R q2) {
  if (Lazy) {
    R s = csub(V::add(x, y), q2);
    R t = V::add(V::sub(x, y), q2);
    y = mul_tw(t, w, ws, wso, q);
    x = s;
  } else {
    R s = csub(V::add(x, y), q);
    R t = V::add(V::sub(x, y), q);
    y = csub(mul_tw(t, w, ws, wso, q), q);
    x = s;
  }
}

// The twiddles of the stage of half-width h for block blk + j: values, companions, companions' odd lanes.
static inline void tail_twiddles(const uint32_t* w, const uint32_t* ws, size_t off, size_t blk, size_t h,
                                 const __m512i& idx, int j, R& tv, R& ts, R& tso) {
  if (h == 1) {
    tv = ld(w + off + (blk + j) * 16), ts = ld(ws + off + (blk + j) * 16), tso = _mm512_srli_epi64(ts, 32);
  } else {
    const size_t at = off + (blk + (j / h) * h) * (16 / h);
    tv = _mm512_permutexvar_epi32(idx, ld(w + at));
    ts = _mm512_permutexvar_epi32(idx, ld(ws + at));
    tso = ts;
  }
}

// forward stage s (h = 8 >> s) on NB blocks of 32 held as (X, Y) pairs; even s are A stages, odd s B stages
// (kLazier: the tail's four stages are two pairs)
template <int Mode, int NB, int S>
static inline void forward_tail_stage(R* X, R* Y, size_t blk, const size_t* off, const uint32_t* w,
                                      const uint32_t* ws, const Consts& c, const __m512i* ix, const __m512i* iy,
                                      const __m512i (*it)[kTailBlocks]) {
  constexpr size_t h = 8u >> S;
  for (int j = 0; j < NB; ++j) {
    R nx = _mm512_permutex2var_epi32(X[j], ix[S], Y[j]), ny = _mm512_permutex2var_epi32(X[j], iy[S], Y[j]);
    R tv, ts, tso;
    tail_twiddles(w, ws, off[S], blk, h, it[S][j], j, tv, ts, tso);
    fwd_bf_t<Mode, S % 2 == 0>(nx, ny, mul_tw(ny, tv, ts, tso, c.q), c);
    X[j] = nx, Y[j] = ny;
  }
}

// forward stages h = 8, 4, 2, 1 on NB blocks of 32 from block blk, then the reduction to [0, q)
template <int Mode, int NB>
static inline void forward_tail_group(uint32_t* a, size_t blk, const size_t* off, const uint32_t* w,
                                      const uint32_t* ws, const Consts& c, const __m512i* ix, const __m512i* iy,
                                      const __m512i (*it)[kTailBlocks], __m512i olo, __m512i ohi) {
  R X[NB], Y[NB];
  for (int j = 0; j < NB; ++j) X[j] = ld(a + 32 * (blk + j)), Y[j] = ld(a + 32 * (blk + j) + 16);
  forward_tail_stage<Mode, NB, 0>(X, Y, blk, off, w, ws, c, ix, iy, it);
  forward_tail_stage<Mode, NB, 1>(X, Y, blk, off, w, ws, c, ix, iy, it);
  forward_tail_stage<Mode, NB, 2>(X, Y, blk, off, w, ws, c, ix, iy, it);
  forward_tail_stage<Mode, NB, 3>(X, Y, blk, off, w, ws, c, ix, iy, it);
  for (int j = 0; j < NB; ++j) {
    const R lo = _mm512_permutex2var_epi32(X[j], olo, Y[j]), hi = _mm512_permutex2var_epi32(X[j], ohi, Y[j]);
    V::store(a + 32 * (blk + j), fwd_reduce<Mode>(lo, c));
    V::store(a + 32 * (blk + j) + 16, fwd_reduce<Mode>(hi, c));
  }
}

// forward stages h = 8, 4, 2, 1 of a segment (len / 32 blocks of 32), then the reduction to [0, q)
template <int Mode>
void V::forward_tail(uint32_t* a, size_t len, size_t base, uint32_t qs, const uint32_t* w, const uint32_t* ws,
                     size_t) {
  const Consts c(qs);
  __m512i ix[4], iy[4], it[4][kTailBlocks];
  size_t off[4];
  for (int s = 0; s < 4; ++s) {
    ix[s] = ld(kFwd.in_x[s]), iy[s] = ld(kFwd.in_y[s]);
    for (int j = 0; j < kTailBlocks; ++j) it[s][j] = ld(kTailIdx.idx[s][j]);
    off[s] = (len / (16u >> s)) * base;  // stage h = 8 >> s has len / (2h) groups
  }
  const __m512i olo = ld(kFwd.out_lo), ohi = ld(kFwd.out_hi);
  const size_t nblk = len / 32;
  size_t blk = 0;
  for (; blk + kTailBlocks <= nblk; blk += kTailBlocks)
    forward_tail_group<Mode, kTailBlocks>(a, blk, off, w, ws, c, ix, iy, it, olo, ohi);
  for (; blk < nblk; ++blk) forward_tail_group<Mode, 1>(a, blk, off, w, ws, c, ix, iy, it, olo, ohi);
}

// inverse stage s (h = 1 << s) on NB blocks of 32 held as (X, Y) pairs
template <bool Lazy, int NB, int S>
static inline void inverse_tail_stage(R* X, R* Y, size_t blk, const size_t* off, const uint32_t* w,
                                      const uint32_t* ws, R q, R q2, const __m512i* ix, const __m512i* iy,
                                      const __m512i (*it)[kTailBlocks]) {
  constexpr size_t h = 1u << S;
  for (int j = 0; j < NB; ++j) {
    R nx = _mm512_permutex2var_epi32(X[j], ix[S], Y[j]), ny = _mm512_permutex2var_epi32(X[j], iy[S], Y[j]);
    R tv, ts, tso;
    tail_twiddles(w, ws, off[S], blk, h, it[3 - S][j], j, tv, ts, tso);
    inv_bf_tw<Lazy>(nx, ny, tv, ts, tso, q, q2);
    X[j] = nx, Y[j] = ny;
  }
}

// inverse stages h = 1, 2, 4, 8 on NB blocks of 32 from block blk
template <bool Lazy, int NB>
static inline void inverse_tail_group(uint32_t* a, size_t blk, const size_t* off, const uint32_t* w,
                                      const uint32_t* ws, R q, R q2, const __m512i* ix, const __m512i* iy,
                                      const __m512i (*it)[kTailBlocks], __m512i olo, __m512i ohi) {
  R X[NB], Y[NB];
  for (int j = 0; j < NB; ++j) X[j] = ld(a + 32 * (blk + j)), Y[j] = ld(a + 32 * (blk + j) + 16);
  inverse_tail_stage<Lazy, NB, 0>(X, Y, blk, off, w, ws, q, q2, ix, iy, it);
  inverse_tail_stage<Lazy, NB, 1>(X, Y, blk, off, w, ws, q, q2, ix, iy, it);
  inverse_tail_stage<Lazy, NB, 2>(X, Y, blk, off, w, ws, q, q2, ix, iy, it);
  inverse_tail_stage<Lazy, NB, 3>(X, Y, blk, off, w, ws, q, q2, ix, iy, it);
  for (int j = 0; j < NB; ++j)
    V::store(a + 32 * (blk + j), _mm512_permutex2var_epi32(X[j], olo, Y[j])),
        V::store(a + 32 * (blk + j) + 16, _mm512_permutex2var_epi32(X[j], ohi, Y[j]));
}

// inverse stages h = 1, 2, 4, 8 of a segment (len / 32 blocks of 32); returns the next h (16)
template <bool Lazy>
size_t V::inverse_tail(uint32_t* a, size_t len, size_t base, uint32_t qs, const uint32_t* w, const uint32_t* ws) {
  const R q = set1(qs), q2 = set1(2 * qs);
  __m512i ix[4], iy[4], it[4][kTailBlocks];
  size_t off[4];
  for (int s = 0; s < 4; ++s) {
    ix[s] = ld(kInv.in_x[s]), iy[s] = ld(kInv.in_y[s]);
    for (int j = 0; j < kTailBlocks; ++j) it[s][j] = ld(kTailIdx.idx[s][j]);
    off[s] = ((len / 2) >> s) * base;  // stage h = 1 << s has len / (2h) groups
  }
  const __m512i olo = ld(kInv.out_lo), ohi = ld(kInv.out_hi);
  const size_t nblk = len / 32;
  size_t blk = 0;
  for (; blk + kTailBlocks <= nblk; blk += kTailBlocks)
    inverse_tail_group<Lazy, kTailBlocks>(a, blk, off, w, ws, q, q2, ix, iy, it, olo, ohi);
  for (; blk < nblk; ++blk) inverse_tail_group<Lazy, 1>(a, blk, off, w, ws, q, q2, ix, iy, it, olo, ohi);
  return 16;
}

}  // namespace HEMX_ISA
}  // namespace hemx
