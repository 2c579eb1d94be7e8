// hemx native kernels: the per-instruction-set entry points and how ffi.cc picks them.
#pragma once

#include <cstddef>
#include <cstdint>

#define HEMX_CAT2(a, b) a##b
#define HEMX_CAT(a, b) HEMX_CAT2(a, b)
#define HEMX_STR2(a) #a
#define HEMX_STR(a) HEMX_STR2(a)

namespace hemx {

// Basis-conversion tables for ops_impl.h's bconv_block (see there): source (L,) and target (L',) moduli, the
// known products with their Shoup companions, c / c_s / ncorr as (L', L) row-major.
struct BConvTables {
  size_t L = 0, Lp = 0;
  const uint32_t *q = nullptr, *half = nullptr, *qhinv = nullptr, *qhinv_s = nullptr;  // (L,)
  const uint32_t* p = nullptr;                                                        // (L',)
  const uint32_t *c = nullptr, *c_s = nullptr, *ncorr = nullptr;                      // (L', L): row j
  bool centered = false;
  // the 64-bit accumulating path (instruction sets with kWide): kq (L', L) = [-q_i]_{p_j}; pr (L', 3) =
  // {[2^32]_{p_j}, its Shoup companion, floor(2^32 / p_j)}; wide_terms = how many products a 64-bit sum holds
  const uint32_t *kq = nullptr, *pr = nullptr;
  size_t wide_terms = 0;
  // target row j is written at row j of the output below gap_at, at row j + gap from there on (the fused ModUp
  // writes a digit's conversion around the digit's own rows of the extended digit)
  size_t gap_at = ~size_t{0}, gap = 0;
  size_t out_row(size_t j) const { return j < gap_at ? j : j + gap; }
};

// One polynomial (n residues, one modulus q < 2^31) per call; in place. Tables are one limb's rows of the
// Python-side ButterflyTables (see ntt_impl.h for the convention).
struct Kernels {
  const char* name = nullptr;
  size_t width = 1;  // SIMD lanes; the transforms need n >= 2 * width (ffi.cc falls back to scalar below)
  void (*forward)(uint32_t* a, size_t n, uint32_t q, const uint32_t* w, const uint32_t* ws) = nullptr;
  // scal = {1/N, shoup(1/N), psi^-1/N, shoup(psi^-1/N)}
  void (*inverse)(uint32_t* a, size_t n, uint32_t q, const uint32_t* w, const uint32_t* ws,
                  const uint32_t* scal) = nullptr;
  void (*mul_shoup)(uint32_t* out, const uint32_t* a, const uint32_t* w, const uint32_t* ws, size_t n,
                    uint32_t q) = nullptr;
  uint64_t (*butterfly_probe)(uint32_t* a, size_t n, uint32_t q, uint32_t w, uint32_t ws, uint64_t reps) = nullptr;
  // ops_impl.h: basis conversion of coefficients [lo, lo + cnt) (cnt a multiple of width), the key-switching
  // inner product of one limb, the automorphism's gather of one polynomial
  void (*bconv_block)(const BConvTables& t, const uint32_t* x, uint32_t* out, size_t n, size_t lo, size_t cnt,
                      uint32_t* ybuf) = nullptr;
  void (*inner_product)(uint32_t* out, size_t o_kstride, const uint32_t* a, size_t a_stride, const uint32_t* b,
                        size_t b_dstride, size_t b_kstride, size_t D, size_t K, size_t n, uint32_t q, uint32_t qinv,
                        uint32_t r, uint32_t rs) = nullptr;
  void (*gather)(uint32_t* out, const uint32_t* in, const int32_t* map, size_t n) = nullptr;
};

Kernels kernels_scalar();
Kernels kernels_avx2();
Kernels kernels_avx512();

// Scalar traits (one lane) and the generic tails. Internal linkage (anonymous namespace / static): each
// translation unit is compiled with its own -m flags, so none may share an out-of-line copy with another.
namespace {
struct ScalarV {
  using reg = uint32_t;
  static constexpr size_t W = 1;
  static inline reg load(const uint32_t* p) { return *p; }
  static inline void store(uint32_t* p, reg v) { *p = v; }
  static inline reg set1(uint32_t v) { return v; }
  static inline reg add(reg a, reg b) { return a + b; }
  static inline reg sub(reg a, reg b) { return a - b; }
  static inline reg min(reg a, reg b) { return a < b ? a : b; }
  static inline reg mullo(reg a, reg b) { return a * b; }
  static inline reg mulhi(reg a, reg b) { return (uint32_t)(((uint64_t)a * b) >> 32); }
  static inline reg gt_mask(reg a, reg b) { return a > b ? ~0u : 0u; }  // a, b < 2^31
  static inline reg band(reg a, reg b) { return a & b; }
  static constexpr bool kWide = false;  // no 64-bit lane helpers (ops_impl.h's wide basis conversion)
};
}  // namespace

}  // namespace hemx
