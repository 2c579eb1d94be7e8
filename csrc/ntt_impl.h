// hemx native kernels: negacyclic NTT on uint32 residues, templated on a SIMD "vector traits" type.
//
// Included once per instruction set by ntt_scalar.cc / ntt_avx2.cc / ntt_avx512.cc / ntt_neon.cc, each compiled
// with its own -m flags (separate translation units; dispatch.cc picks one at run time, after asking the CPU).
// The including file defines HEMX_ISA (a namespace name), HEMX_ISA_WIDTH (its kWidth* constant) and the traits
// type `V` before including this header; everything here has internal linkage except the entry points at the
// end, which live in namespace hemx::HEMX_ISA (kernels.h states the rule).
//
// Convention (the same as hemx/kernels/ntt.py, butterfly method): forward = Cooley-Tukey with twiddles
// w[m + i] = psi^brv(m + i) for the i-th group of the stage with m groups; the output is in bit-reversed
// order and fully reduced. Inverse = Gentleman-Sande with w[m + i] = psi^-brv(m + i); its last stage
// multiplies the sum by 1/N and the difference by psi^-1/N. Every product by a twiddle is a Shoup product
// with the precomputed w' = floor(w 2^32 / q), so the result is bit-identical to the JAX kernel.
//
// Ranges (Harvey's lazy butterflies). Moduli below 2^30 ("lazy" path): forward values stay in [0, 4q),
// inverse values in [0, 2q). Moduli in [2^30, 2^31) ("reduced" path): 4q overflows a uint32, so the forward
// values stay in [0, 2q) and inverse values in [0, q) (one more conditional subtraction per butterfly).
// Moduli below 2^29 run the forward lazier still, in [0, 8q) (kLazier below).
//
// Memory order (cache blocking). A transform of n > kBlock residues first runs the stages whose butterflies
// span more than a block (half-width h >= kBlock) as sweeps over the whole array, then finishes every
// kBlock-residue block on its own (all its remaining stages while it sits in L1) before moving on; the
// inverse runs the same in reverse (blocks first, then the wide stages). Twiddle addressing inside a block:
// a segment of `len` residues at twiddle base `base` is the set of groups {base * k + i} of the whole
// transform, so its stage with mloc groups uses w[mloc * base + i], i < mloc (base = 1 for the whole array,
// base = n / kBlock + b for block b).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels.h"
#include "lazy_ops.h"

namespace hemx {
namespace HEMX_ISA {

// Forward ranges by modulus (the `Mode` of the forward functions). Between stages the values stay in
//   kReduced (q in [2^30, 2^31)): [0, 2q); every butterfly reduces x and t = w y to [0, q);
//   kLazy    (q in [2^29, 2^30)): [0, 4q); every butterfly reduces x to [0, 2q) (Harvey);
//   kLazier  (q < 2^29, so 8q fits a uint32): [0, 8q) at the boundaries of stage pairs (the radix-4 sweeps);
//            the first stage of a pair (A) reduces x to [0, 4q) and outputs [0, 6q), the second (B) reduces
//            nothing and outputs [0, 8q): one conditional subtraction per two butterflies instead of one each.
// A lone stage is an A stage (its output [0, 6q) is inside the pair boundary's range).
enum { kReduced = 0, kLazy = 1, kLazier = 2 };

struct Consts {
  R q, q2, q4;  // q, 2q, 4q
  explicit Consts(uint32_t qs) : q(V::set1(qs)), q2(V::set1(2 * qs)), q4(V::set1(4 * qs)) {}
};

// Forward butterfly given t = w y mod q in [0, 2q) (any lazy Shoup product): (x, y) -> (x + t, x - t).
template <int Mode, bool A = true>
static inline void fwd_bf_t(R& x, R& y, R t, const Consts& c) {
  if (Mode == kReduced) {  // [0, 2q) -> [0, 2q)
    x = csub(x, c.q);
    t = csub(t, c.q);
    y = V::add(V::sub(x, t), c.q);
  } else {
    if (Mode == kLazy) x = csub(x, c.q2);       // [0, 4q) -> [0, 2q): outputs [0, 4q)
    if (Mode == kLazier && A) x = csub(x, c.q4);  // [0, 8q) -> [0, 4q): outputs [0, 6q); B: [0, 6q) -> [0, 8q)
    y = V::add(V::sub(x, t), c.q2);
  }
  x = V::add(x, t);
}

template <int Mode, bool A = true>
static inline void fwd_bf(R& x, R& y, R w, R ws, const Consts& c) {
  fwd_bf_t<Mode, A>(x, y, mul_lazy(y, w, ws, c.q), c);
}

// A forward value in its mode's range -> [0, q).
template <int Mode>
static inline R fwd_reduce(R x, const Consts& c) {
  if (Mode == kLazier) x = csub(x, c.q4);
  if (Mode >= kLazy) x = csub(x, c.q2);
  return csub(x, c.q);
}

// Inverse ranges: q < 2^30 ("lazy"): values in [0, 2q); q in [2^30, 2^31) ("reduced"): [0, q).
template <bool Lazy>
static inline void inv_bf(R& x, R& y, R w, R ws, R q, R q2) {
  if (Lazy) {  // x, y in [0, 2q) -> [0, 2q)
    R s = csub(V::add(x, y), q2);
    R t = V::add(V::sub(x, y), q2);
    y = mul_lazy(t, w, ws, q);
    x = s;
  } else {  // x, y in [0, q) -> [0, q)
    R s = csub(V::add(x, y), q);
    R t = V::add(V::sub(x, y), q);
    y = csub(mul_lazy(t, w, ws, q), q);
    x = s;
  }
}

// Residues per cache block (16 KiB of uint32: half of a 32 KiB L1 data cache, the rest for the twiddles).
// Must be a power of two; transforms of n <= kBlock run unblocked.
constexpr size_t kBlock = 4096;

// ------------------------------------------------------------------------------------- generic tails
// The stages with h < W one lane at a time (the tails of the builds whose traits set kGenericTail: scalar, AVX2, NEON). Forward: stages h, h/2, ..., 1 of a
// segment, then the reduction to [0, q); inverse: stages h = 1, 2, ... while h < hmax, returns the next h.
namespace gtail {
static inline uint32_t csub1(uint32_t x, uint32_t c) { return x >= c ? x - c : x; }
static inline uint32_t mul1(uint32_t a, uint32_t w, uint32_t ws, uint32_t q) {
  uint32_t hi = (uint32_t)(((uint64_t)a * ws) >> 32);
  return a * w - hi * q;
}
// one forward stage of half-width h (H: h as a compile-time constant when small, 0 otherwise); every stage here
// is an A stage (kLazier: x reduced to [0, 4q), outputs [0, 6q))
template <int Mode, size_t H>
static void forward_stage(uint32_t* a, size_t len, size_t base, uint32_t q, const uint32_t* w, const uint32_t* ws,
                          size_t h_rt) {
  const size_t h = H ? H : h_rt;
  const uint32_t q2 = 2 * q, q4 = 4 * q;
  const size_t m = len / (2 * h), t = m * base;
  for (size_t i = 0; i < m; ++i) {
    const uint32_t wi = w[t + i], si = ws[t + i];
    uint32_t* p = a + 2 * i * h;
    for (size_t j = 0; j < h; ++j) {
      uint32_t x = p[j], y = p[j + h];
      if (Mode == kReduced) {
        x = csub1(x, q);
        uint32_t tt = csub1(mul1(y, wi, si, q), q);
        p[j] = x + tt, p[j + h] = x - tt + q;
      } else {
        x = Mode == kLazier ? csub1(x, q4) : csub1(x, q2);
        uint32_t tt = mul1(y, wi, si, q);
        p[j] = x + tt, p[j + h] = x - tt + q2;
      }
    }
  }
}
template <int Mode>
static void forward(uint32_t* a, size_t len, size_t base, uint32_t q, const uint32_t* w, const uint32_t* ws,
                    size_t h) {
  for (; h >= 1; h /= 2) {
    if (h == 4) forward_stage<Mode, 4>(a, len, base, q, w, ws, h);
    else if (h == 2) forward_stage<Mode, 2>(a, len, base, q, w, ws, h);
    else if (h == 1) forward_stage<Mode, 1>(a, len, base, q, w, ws, h);
    else forward_stage<Mode, 0>(a, len, base, q, w, ws, h);
  }
  const uint32_t q2 = 2 * q, q4 = 4 * q;
  for (size_t j = 0; j < len; ++j) {
    uint32_t x = a[j];
    if (Mode == kLazier) x = csub1(x, q4);
    if (Mode >= kLazy) x = csub1(x, q2);
    a[j] = csub1(x, q);
  }
}
// one inverse stage of half-width h (H as in forward_stage)
template <bool Lazy, size_t H>
static void inverse_stage(uint32_t* a, size_t len, size_t base, uint32_t q, const uint32_t* w, const uint32_t* ws,
                          size_t h_rt) {
  const size_t h = H ? H : h_rt;
  const uint32_t q2 = 2 * q;
  const size_t m = len / (2 * h), t = m * base;
  for (size_t i = 0; i < m; ++i) {
    const uint32_t wi = w[t + i], si = ws[t + i];
    uint32_t* p = a + 2 * i * h;
    for (size_t j = 0; j < h; ++j) {
      uint32_t x = p[j], y = p[j + h];
      if (Lazy) {
        p[j] = csub1(x + y, q2);
        p[j + h] = mul1(x - y + q2, wi, si, q);
      } else {
        p[j] = csub1(x + y, q);
        p[j + h] = csub1(mul1(x - y + q, wi, si, q), q);
      }
    }
  }
}
template <bool Lazy>
static size_t inverse(uint32_t* a, size_t len, size_t base, uint32_t q, const uint32_t* w, const uint32_t* ws,
                      size_t hmax) {
  size_t h = 1;
  for (; h < hmax && h < len; h *= 2) {
    if (h == 1) inverse_stage<Lazy, 1>(a, len, base, q, w, ws, h);
    else if (h == 2) inverse_stage<Lazy, 2>(a, len, base, q, w, ws, h);
    else if (h == 4) inverse_stage<Lazy, 4>(a, len, base, q, w, ws, h);
    else inverse_stage<Lazy, 0>(a, len, base, q, w, ws, h);
  }
  return h;
}
}  // namespace gtail

// The stages with h < W: the traits' own tails, or gtail's where the traits set kGenericTail (VV is a template
// parameter so that the branch not taken is never instantiated).
template <class VV, int Mode>
static inline void tail_forward(uint32_t* a, size_t len, size_t base, uint32_t q, const uint32_t* w,
                                const uint32_t* ws, size_t h) {
  if constexpr (VV::kGenericTail) gtail::forward<Mode>(a, len, base, q, w, ws, h);
  else VV::template forward_tail<Mode>(a, len, base, q, w, ws, h);
}
template <class VV, bool Lazy>
static inline size_t tail_inverse(uint32_t* a, size_t len, size_t base, uint32_t q, const uint32_t* w,
                                  const uint32_t* ws) {
  if constexpr (VV::kGenericTail) return gtail::inverse<Lazy>(a, len, base, q, w, ws, VV::W);
  else return VV::template inverse_tail<Lazy>(a, len, base, q, w, ws);
}

// ---------------------------------------------------------------------------------------------- forward
// Stages (m, h), (2m, h/2), ... of a segment while h >= hmin (and h >= W), radix 4 where two stages remain.
// Stage (mloc, h) of the segment uses twiddles w[mloc * base + i]. Returns the next (m, h) through m / h.
template <int Mode>
static void forward_sweeps(uint32_t* a, size_t base, uint32_t qs, const uint32_t* w, const uint32_t* ws,
                           size_t& m, size_t& h, size_t hmin) {
  constexpr size_t W = V::W;
  const Consts c(qs);
  while (h / 2 >= hmin && h / 2 >= W && h >= 2) {  // radix-4: stages (m, h) and (2m, h/2) in one sweep
    const size_t h2 = h / 2, t1 = m * base, t2 = 2 * m * base;
    for (size_t i = 0; i < m; ++i) {
      const R w1 = V::set1(w[t1 + i]), s1 = V::set1(ws[t1 + i]);
      const R wa = V::set1(w[t2 + 2 * i]), sa = V::set1(ws[t2 + 2 * i]);
      const R wb = V::set1(w[t2 + 2 * i + 1]), sb = V::set1(ws[t2 + 2 * i + 1]);
      uint32_t* p = a + 2 * i * h;
      for (size_t j = 0; j < h2; j += W) {
        R x0 = V::load(p + j), x1 = V::load(p + j + h2), x2 = V::load(p + j + h), x3 = V::load(p + j + h + h2);
        fwd_bf<Mode, true>(x0, x2, w1, s1, c);
        fwd_bf<Mode, true>(x1, x3, w1, s1, c);
        fwd_bf<Mode, false>(x0, x1, wa, sa, c);
        fwd_bf<Mode, false>(x2, x3, wb, sb, c);
        V::store(p + j, x0), V::store(p + j + h2, x1), V::store(p + j + h, x2), V::store(p + j + h + h2, x3);
      }
    }
    m *= 4;
    h /= 4;
  }
  if (h >= hmin && h >= W && h >= 1) {  // one radix-2 stage
    const size_t t1 = m * base;
    for (size_t i = 0; i < m; ++i) {
      const R w1 = V::set1(w[t1 + i]), s1 = V::set1(ws[t1 + i]);
      uint32_t* p = a + 2 * i * h;
      for (size_t j = 0; j < h; j += W) {
        R x = V::load(p + j), y = V::load(p + j + h);
        fwd_bf<Mode, true>(x, y, w1, s1, c);
        V::store(p + j, x), V::store(p + j + h, y);
      }
    }
    m *= 2;
    h /= 2;
  }
}

// Every stage of a segment of len residues at twiddle base `base`, then the reduction to [0, q).
template <int Mode>
static void forward_segment(uint32_t* a, size_t len, size_t base, uint32_t qs, const uint32_t* w,
                            const uint32_t* ws) {
  constexpr size_t W = V::W;
  size_t m = 1, h = len / 2;
  forward_sweeps<Mode>(a, base, qs, w, ws, m, h, 1);
  if (h >= 1) {  // the last stages (h < W) in registers; they also reduce to [0, q)
    tail_forward<V, Mode>(a, len, base, qs, w, ws, h);
  } else {
    const Consts c(qs);
    for (size_t j = 0; j < len; j += W) V::store(a + j, fwd_reduce<Mode>(V::load(a + j), c));
  }
}

template <int Mode>
static void forward_t(uint32_t* a, size_t n, uint32_t qs, const uint32_t* w, const uint32_t* ws) {
  constexpr size_t blk = kBlock;
  if (n <= blk) {
    forward_segment<Mode>(a, n, 1, qs, w, ws);
    return;
  }
  // the stages that span more than a block, over the whole array; then each block on its own
  size_t m = 1, h = n / 2;
  forward_sweeps<Mode>(a, 1, qs, w, ws, m, h, blk);
  for (size_t b = 0; b < m; ++b) forward_segment<Mode>(a + b * blk, blk, m + b, qs, w, ws);
}

// ---------------------------------------------------------------------------------------------- inverse
// Stages m = m_hi, m_hi / 2, ..., m_lo (h = len / (2m) >= W) of a segment, radix 4 where two remain.
template <bool Lazy>
static void inverse_sweeps(uint32_t* a, size_t base, uint32_t qs, const uint32_t* w, const uint32_t* ws,
                           size_t m, size_t h, size_t m_lo) {
  constexpr size_t W = V::W;
  const R q = V::set1(qs), q2 = V::set1(2 * qs);
  while (m / 2 >= m_lo && m >= 2) {  // radix-4 passes over stages (m, h) and (m/2, 2h)
    const size_t half = m / 2, t1 = m * base, t2 = half * base;
    for (size_t i = 0; i < half; ++i) {
      const R wa = V::set1(w[t1 + 2 * i]), sa = V::set1(ws[t1 + 2 * i]);
      const R wb = V::set1(w[t1 + 2 * i + 1]), sb = V::set1(ws[t1 + 2 * i + 1]);
      const R w2 = V::set1(w[t2 + i]), s2 = V::set1(ws[t2 + i]);
      uint32_t* p = a + 4 * i * h;
      for (size_t j = 0; j < h; j += W) {
        R x0 = V::load(p + j), x1 = V::load(p + j + h), x2 = V::load(p + j + 2 * h), x3 = V::load(p + j + 3 * h);
        inv_bf<Lazy>(x0, x1, wa, sa, q, q2);
        inv_bf<Lazy>(x2, x3, wb, sb, q, q2);
        inv_bf<Lazy>(x0, x2, w2, s2, q, q2);
        inv_bf<Lazy>(x1, x3, w2, s2, q, q2);
        V::store(p + j, x0), V::store(p + j + h, x1), V::store(p + j + 2 * h, x2), V::store(p + j + 3 * h, x3);
      }
    }
    m /= 4;
    h *= 4;
  }
  if (m >= m_lo && m >= 1) {  // one radix-2 stage
    const size_t t1 = m * base;
    for (size_t i = 0; i < m; ++i) {
      const R w1 = V::set1(w[t1 + i]), s1 = V::set1(ws[t1 + i]);
      uint32_t* p = a + 2 * i * h;
      for (size_t j = 0; j < h; j += W) {
        R x = V::load(p + j), y = V::load(p + j + h);
        inv_bf<Lazy>(x, y, w1, s1, q, q2);
        V::store(p + j, x), V::store(p + j + h, y);
      }
    }
  }
}

// Stages m = len/2 ... m_lo of a segment at twiddle base `base` (the first ones, h < W, in registers).
template <bool Lazy>
static void inverse_segment(uint32_t* a, size_t len, size_t base, uint32_t qs, const uint32_t* w,
                            const uint32_t* ws, size_t m_lo) {
  size_t h = 1;
  if (V::W > 1) h = tail_inverse<V, Lazy>(a, len, base, qs, w, ws);
  inverse_sweeps<Lazy>(a, base, qs, w, ws, len / (2 * h), h, m_lo);
}

template <bool Lazy>
static void inverse_t(uint32_t* a, size_t n, uint32_t qs, const uint32_t* w, const uint32_t* ws,
                      const uint32_t* scal) {
  constexpr size_t W = V::W;
  const R q = V::set1(qs), q2 = V::set1(2 * qs);
  constexpr size_t blk = kBlock;
  // the last two stages (m = 2, 1) run as one radix-4 pass with the scaling where each quarter holds a vector
  const bool last4 = n / 4 >= W;
  const size_t m_lo = last4 ? 4 : 2;
  if (n <= blk) {
    inverse_segment<Lazy>(a, n, 1, qs, w, ws, m_lo);
  } else {  // each block on its own, then the stages that span more than a block
    const size_t nb = n / blk;  // with two blocks, their own last stage (global m = 2) joins the final pass
    for (size_t b = 0; b < nb; ++b) inverse_segment<Lazy>(a + b * blk, blk, nb + b, qs, w, ws, nb == 2 ? 2 : 1);
    inverse_sweeps<Lazy>(a, 1, qs, w, ws, nb / 2, blk, m_lo);
  }
  // last stage: X = (x + y) / N, Y = (x - y) psi^-1 / N, fully reduced
  const R ni = V::set1(scal[0]), nis = V::set1(scal[1]), wl = V::set1(scal[2]), wls = V::set1(scal[3]);
  const R off = Lazy ? q2 : q;
  auto last = [&](R x, R y, R& s, R& d) {
    s = csub(mul_lazy(V::add(x, y), ni, nis, q), q);
    d = csub(mul_lazy(V::add(V::sub(x, y), off), wl, wls, q), q);
  };
  if (last4) {  // stage m = 2 (twiddles w[2], w[3]) on the quarters, then the last stage
    const size_t h = n / 4;
    const R wa = V::set1(w[2]), sa = V::set1(ws[2]), wb = V::set1(w[3]), sb = V::set1(ws[3]);
    for (size_t j = 0; j < h; j += W) {
      R x0 = V::load(a + j), x1 = V::load(a + j + h), x2 = V::load(a + j + 2 * h), x3 = V::load(a + j + 3 * h);
      inv_bf<Lazy>(x0, x1, wa, sa, q, q2);
      inv_bf<Lazy>(x2, x3, wb, sb, q, q2);
      R s0, d0, s1, d1;
      last(x0, x2, s0, d0);
      last(x1, x3, s1, d1);
      V::store(a + j, s0), V::store(a + j + h, s1), V::store(a + j + 2 * h, d0), V::store(a + j + 3 * h, d1);
    }
  } else {
    const size_t h = n / 2;
    for (size_t j = 0; j < h; j += W) {
      R s, d;
      last(V::load(a + j), V::load(a + j + h), s, d);
      V::store(a + j, s), V::store(a + j + h, d);
    }
  }
}


// a * w mod q, fully reduced, streaming (the roofline's memory probe and a kernel of its own)
static void mul_shoup_t(uint32_t* out, const uint32_t* a, const uint32_t* w, const uint32_t* ws, size_t n,
                        uint32_t qs) {
  const R q = V::set1(qs);
  size_t j = 0;
  for (; j + V::W <= n; j += V::W)
    V::store(out + j, csub(mul_lazy(V::load(a + j), V::load(w + j), V::load(ws + j), q), q));
  for (; j < n; ++j) {
    uint32_t hi = (uint32_t)(((uint64_t)a[j] * ws[j]) >> 32);
    uint32_t r = a[j] * w[j] - hi * qs;
    out[j] = r >= qs ? r - qs : r;
  }
}

// in-L1 probe: `reps` radix-4 sweeps of forward butterflies over a 2^k block, in the mode the forward NTT
// uses for this modulus (the same butterflies as its sweeps); returns butterflies done
template <int Mode>
static void probe_sweeps(uint32_t* a, size_t n, uint32_t qs, uint32_t wv, uint32_t wsv, uint64_t reps) {
  constexpr size_t W = V::W;
  const Consts c(qs);
  const R w = V::set1(wv), s = V::set1(wsv);
  const size_t h = n / 4;
  for (uint64_t r = 0; r < reps; ++r) {
    for (size_t j = 0; j < h; j += W) {
      R x0 = V::load(a + j), x1 = V::load(a + j + h), x2 = V::load(a + j + 2 * h), x3 = V::load(a + j + 3 * h);
      fwd_bf<Mode, true>(x0, x2, w, s, c);
      fwd_bf<Mode, true>(x1, x3, w, s, c);
      fwd_bf<Mode, false>(x0, x1, w, s, c);
      fwd_bf<Mode, false>(x2, x3, w, s, c);
      V::store(a + j, x0), V::store(a + j + h, x1), V::store(a + j + 2 * h, x2), V::store(a + j + 3 * h, x3);
    }
  }
}
static uint64_t butterfly_probe_t(uint32_t* a, size_t n, uint32_t qs, uint32_t wv, uint32_t wsv, uint64_t reps) {
  if (qs < (1u << 29)) {
    probe_sweeps<kLazier>(a, n, qs, wv, wsv, reps);
    const R q4 = V::set1(4 * qs);  // [0, 8q) -> the lazy range [0, 4q) the probe's output promises
    for (size_t j = 0; j < n; j += V::W) V::store(a + j, csub(V::load(a + j), q4));
  } else {
    probe_sweeps<kLazy>(a, n, qs, wv, wsv, reps);
  }
  return reps * (n / 2) * 2;
}

#include "ops_impl.h"
#include "prng_impl.h"

// The entry points of this instruction set (declared by HEMX_DECLARE_ISA in kernels.h; dispatch.cc builds the
// table). External linkage inside this ISA's own namespace, hidden visibility: no other object defines them.
static_assert(V::W == HEMX_ISA_WIDTH, "vector width disagrees with kernels.h");

void forward(uint32_t* a, size_t n, uint32_t q, const uint32_t* w, const uint32_t* ws) {
  if (q < (1u << 29)) forward_t<kLazier>(a, n, q, w, ws);
  else if (q < (1u << 30)) forward_t<kLazy>(a, n, q, w, ws);
  else forward_t<kReduced>(a, n, q, w, ws);
}
void inverse(uint32_t* a, size_t n, uint32_t q, const uint32_t* w, const uint32_t* ws, const uint32_t* s) {
  if (q < (1u << 30)) inverse_t<true>(a, n, q, w, ws, s);
  else inverse_t<false>(a, n, q, w, ws, s);
}
void mul_shoup(uint32_t* out, const uint32_t* a, const uint32_t* w, const uint32_t* ws, size_t n, uint32_t q) {
  mul_shoup_t(out, a, w, ws, n, q);
}
uint64_t butterfly_probe(uint32_t* a, size_t n, uint32_t q, uint32_t w, uint32_t ws, uint64_t reps) {
  return butterfly_probe_t(a, n, q, w, ws, reps);
}
void bconv_block(const BConvTables& t, const uint32_t* x, uint32_t* out, size_t n, size_t lo, size_t cnt,
                 uint32_t* ybuf) {
  bconv_block_t<>(t, x, out, n, lo, cnt, ybuf);
}
void inner_product(uint32_t* out, size_t o_kstride, const uint32_t* a, size_t a_stride, const uint32_t* b,
                   size_t b_dstride, size_t b_kstride, size_t D, size_t K, size_t n, uint32_t q, uint32_t qinv,
                   uint32_t r, uint32_t rs) {
  inner_product_t<>(out, o_kstride, a, a_stride, b, b_dstride, b_kstride, D, K, n, q, qinv, r, rs);
}
void plain_sum(uint32_t* out, size_t o_kstride, const uint32_t* const* x, size_t x_kstride, const uint32_t* const* w,
               size_t T, size_t K, size_t n, uint32_t q, uint32_t qinv, uint32_t r, uint32_t rs) {
  plain_sum_t<>(out, o_kstride, x, x_kstride, w, T, K, n, q, qinv, r, rs);
}
void gather(uint32_t* out, const uint32_t* in, const int32_t* map, size_t n) { gather_t(out, in, map, n); }
void uniform_row(uint32_t* out, size_t n, const uint32_t* key, const uint32_t* aes_rk, uint32_t d, uint32_t q) {
  uniform_row_t(out, n, key, aes_rk, d, q);
}
void key_product(uint32_t* out, size_t o_bstride, size_t o_kstride, const uint32_t* ext, size_t e_bstride,
                 size_t e_dstride, const uint32_t* b, size_t b_dstride, size_t b_kstride, size_t D, size_t batch,
                 size_t n, const uint32_t* key, const uint32_t* aes_rk, const int32_t* map, uint32_t q, uint32_t qinv,
                 uint32_t r, uint32_t rs, uint32_t* scratch) {
  // scratch: D row streams (64-byte aligned), then D pieces of the uniform rows, then D pieces of permuted digits
  const uintptr_t at = ((uintptr_t)scratch + 63) & ~(uintptr_t)63;
  RowStream* streams = reinterpret_cast<RowStream*>(at);  // trivial type: key_product_t initializes each it uses
  uint32_t* abuf = reinterpret_cast<uint32_t*>(at) + D * kSeedStreamWords;
  uint32_t* xbuf = abuf + D * kSeedChunk;
  key_product_t<>(out, o_bstride, o_kstride, ext, e_bstride, e_dstride, b, b_dstride, b_kstride, D, batch, n, key,
                  aes_rk, map, q, qinv, r, rs, streams, abuf, xbuf);
}

}  // namespace HEMX_ISA
}  // namespace hemx
