// hemx native kernels: negacyclic NTT on uint32 residues, templated on a SIMD "vector traits" type.
//
// Included once per instruction set by ntt_avx512.cc / ntt_avx2.cc / ntt_scalar.cc, each compiled with its
// own -m flags (separate translation units, chosen at load time by __builtin_cpu_supports in ffi.cc). The
// including file defines HEMX_ISA (a namespace name) and the traits type `V` before including this header.
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
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels.h"

namespace hemx {
namespace HEMX_ISA {

using R = V::reg;

// min(x, x - c) subtracts c when x >= c (unsigned wrap-around makes x - c huge otherwise); needs c <= 2^31.
static inline R csub(R x, R c) { return V::min(x, V::sub(x, c)); }

// a * w mod q in [0, 2q) for any uint32 a, known w < q and ws = floor(w 2^32 / q).
static inline R mul_lazy(R a, R w, R ws, R q) {
  R hi = V::mulhi(a, ws);
  return V::sub(V::mullo(a, w), V::mullo(hi, q));
}

template <bool Lazy>
static inline void fwd_bf(R& x, R& y, R w, R ws, R q, R q2) {
  if (Lazy) {  // x, y in [0, 4q) -> [0, 4q)
    x = csub(x, q2);
    R t = mul_lazy(y, w, ws, q);
    y = V::add(V::sub(x, t), q2);
    x = V::add(x, t);
  } else {  // x, y in [0, 2q) -> [0, 2q)
    x = csub(x, q);
    R t = csub(mul_lazy(y, w, ws, q), q);
    y = V::add(V::sub(x, t), q);
    x = V::add(x, t);
  }
}

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

// ---------------------------------------------------------------------------------------------- forward
template <bool Lazy>
static void forward_t(uint32_t* a, size_t n, uint32_t qs, const uint32_t* w, const uint32_t* ws) {
  constexpr size_t W = V::W;
  const R q = V::set1(qs), q2 = V::set1(2 * qs);
  size_t m = 1, h = n / 2;
  // radix-4 passes: stages (m, h) and (2m, h/2) in one sweep over memory
  while (h / 2 >= W && h >= 2) {
    const size_t h2 = h / 2;
    for (size_t i = 0; i < m; ++i) {
      const R w1 = V::set1(w[m + i]), s1 = V::set1(ws[m + i]);
      const R wa = V::set1(w[2 * m + 2 * i]), sa = V::set1(ws[2 * m + 2 * i]);
      const R wb = V::set1(w[2 * m + 2 * i + 1]), sb = V::set1(ws[2 * m + 2 * i + 1]);
      uint32_t* p = a + 2 * i * h;
      for (size_t j = 0; j < h2; j += W) {
        R x0 = V::load(p + j), x1 = V::load(p + j + h2), x2 = V::load(p + j + h), x3 = V::load(p + j + h + h2);
        fwd_bf<Lazy>(x0, x2, w1, s1, q, q2);
        fwd_bf<Lazy>(x1, x3, w1, s1, q, q2);
        fwd_bf<Lazy>(x0, x1, wa, sa, q, q2);
        fwd_bf<Lazy>(x2, x3, wb, sb, q, q2);
        V::store(p + j, x0), V::store(p + j + h2, x1), V::store(p + j + h, x2), V::store(p + j + h + h2, x3);
      }
    }
    m *= 4;
    h /= 4;
  }
  if (h >= W && h >= 1) {  // one radix-2 stage left
    for (size_t i = 0; i < m; ++i) {
      const R w1 = V::set1(w[m + i]), s1 = V::set1(ws[m + i]);
      uint32_t* p = a + 2 * i * h;
      for (size_t j = 0; j < h; j += W) {
        R x = V::load(p + j), y = V::load(p + j + h);
        fwd_bf<Lazy>(x, y, w1, s1, q, q2);
        V::store(p + j, x), V::store(p + j + h, y);
      }
    }
    m *= 2;
    h /= 2;
  }
  if (h >= 1) {  // the last stages (h < W) in registers; they also reduce to [0, q)
    V::template forward_tail<Lazy>(a, n, qs, w, ws, m, h);
  } else {
    for (size_t j = 0; j < n; j += W) {
      R x = V::load(a + j);
      if (Lazy) x = csub(x, q2);
      V::store(a + j, csub(x, q));
    }
  }
}

// ---------------------------------------------------------------------------------------------- inverse
template <bool Lazy>
static void inverse_t(uint32_t* a, size_t n, uint32_t qs, const uint32_t* w, const uint32_t* ws,
                      const uint32_t* scal) {
  constexpr size_t W = V::W;
  const R q = V::set1(qs), q2 = V::set1(2 * qs);
  size_t m = n / 2, h = 1;
  if (W > 1) {  // the first stages (h < W) in registers
    h = V::template inverse_tail<Lazy>(a, n, qs, w, ws);
    m = n / (2 * h);
  }
  // radix-4 passes over stages (m, h) and (m/2, 2h); the last stage (m = 1) is the scaling pass below
  while (m >= 4) {
    const size_t half = m / 2;
    for (size_t i = 0; i < half; ++i) {
      const R wa = V::set1(w[m + 2 * i]), sa = V::set1(ws[m + 2 * i]);
      const R wb = V::set1(w[m + 2 * i + 1]), sb = V::set1(ws[m + 2 * i + 1]);
      const R w2 = V::set1(w[half + i]), s2 = V::set1(ws[half + i]);
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
  if (m == 2) {
    for (size_t i = 0; i < 2; ++i) {
      const R w1 = V::set1(w[2 + i]), s1 = V::set1(ws[2 + i]);
      uint32_t* p = a + 2 * i * h;
      for (size_t j = 0; j < h; j += W) {
        R x = V::load(p + j), y = V::load(p + j + h);
        inv_bf<Lazy>(x, y, w1, s1, q, q2);
        V::store(p + j, x), V::store(p + j + h, y);
      }
    }
    m = 1;
    h *= 2;
  }
  // last stage: X = (x + y) / N, Y = (x - y) psi^-1 / N, fully reduced
  const R ni = V::set1(scal[0]), nis = V::set1(scal[1]), wl = V::set1(scal[2]), wls = V::set1(scal[3]);
  const R off = Lazy ? q2 : q;
  for (size_t j = 0; j < h; j += W) {
    R x = V::load(a + j), y = V::load(a + j + h);
    R s = csub(mul_lazy(V::add(x, y), ni, nis, q), q);
    R d = csub(mul_lazy(V::add(V::sub(x, y), off), wl, wls, q), q);
    V::store(a + j, s), V::store(a + j + h, d);
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

// in-L1 probe: `reps` radix-4 sweeps of lazy forward butterflies over a 2^k block; returns butterflies done
static uint64_t butterfly_probe_t(uint32_t* a, size_t n, uint32_t qs, uint32_t wv, uint32_t wsv, uint64_t reps) {
  constexpr size_t W = V::W;
  const R q = V::set1(qs), q2 = V::set1(2 * qs), w = V::set1(wv), s = V::set1(wsv);
  const size_t h = n / 4;
  for (uint64_t r = 0; r < reps; ++r) {
    for (size_t j = 0; j < h; j += W) {
      R x0 = V::load(a + j), x1 = V::load(a + j + h), x2 = V::load(a + j + 2 * h), x3 = V::load(a + j + 3 * h);
      fwd_bf<true>(x0, x2, w, s, q, q2);
      fwd_bf<true>(x1, x3, w, s, q, q2);
      fwd_bf<true>(x0, x1, w, s, q, q2);
      fwd_bf<true>(x2, x3, w, s, q, q2);
      V::store(a + j, x0), V::store(a + j + h, x1), V::store(a + j + 2 * h, x2), V::store(a + j + 3 * h, x3);
    }
  }
  return reps * (n / 2) * 2;
}

#include "ops_impl.h"

}  // namespace HEMX_ISA

// The table of entry points this instruction set exports (declared in kernels.h).
Kernels HEMX_CAT(kernels_, HEMX_ISA)() {
  Kernels k;
  k.name = HEMX_STR(HEMX_ISA);
  k.width = HEMX_ISA::V::W;
  k.forward = [](uint32_t* a, size_t n, uint32_t q, const uint32_t* w, const uint32_t* ws) {
    if (q < (1u << 30)) HEMX_ISA::forward_t<true>(a, n, q, w, ws);
    else HEMX_ISA::forward_t<false>(a, n, q, w, ws);
  };
  k.inverse = [](uint32_t* a, size_t n, uint32_t q, const uint32_t* w, const uint32_t* ws, const uint32_t* s) {
    if (q < (1u << 30)) HEMX_ISA::inverse_t<true>(a, n, q, w, ws, s);
    else HEMX_ISA::inverse_t<false>(a, n, q, w, ws, s);
  };
  k.mul_shoup = HEMX_ISA::mul_shoup_t;
  k.butterfly_probe = HEMX_ISA::butterfly_probe_t;
  k.bconv_block = HEMX_ISA::bconv_block_t<>;
  k.inner_product = HEMX_ISA::inner_product_t;
  k.gather = HEMX_ISA::gather_t;
  return k;
}

}  // namespace hemx
