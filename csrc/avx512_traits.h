// The AVX-512 vector traits (16 lanes) that ntt_impl.h's kernels are templated on, for the files compiled with the
// AVX-512 flags: ntt_avx512.cc (the AVX-512 build of every kernel) and ntt_amx.cc (the tile kernels, whose
// element-wise steps run in AVX-512). The including file defines HEMX_ISA first; everything here lives in
// hemx::HEMX_ISA with internal linkage or as members of the traits struct, so each object keeps its own copy
// (kernels.h states the rule). V's in-register tails are declared here and defined by ntt_avx512.cc alone.
#pragma once

#include <immintrin.h>

#include "kernels.h"

namespace hemx {
namespace HEMX_ISA {

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
  // high words of the 32 x 32-bit products: the odd lanes' products already hold theirs in the odd lanes; a
  // masked in-lane shuffle moves the even lanes' high words down into them (one cheap op, no shift + blend)
  static inline reg mulhi(reg a, reg b) { return mulhi2(a, b, _mm512_srli_epi64(b, 32)); }
  static inline reg mulhi2(reg a, reg b, reg b_odd) {  // b_odd: b's odd lanes moved down (b itself if pairs)
    const reg even = _mm512_mul_epu32(a, b);
    const reg odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), b_odd);
    return _mm512_mask_shuffle_epi32(odd, (__mmask16)0x5555, even, _MM_PERM_DDBB);
  }
  static inline reg gt_mask(reg a, reg b) { return _mm512_movm_epi32(_mm512_cmpgt_epu32_mask(a, b)); }
  static inline reg band(reg a, reg b) { return _mm512_and_si512(a, b); }
  static inline reg bxor(reg a, reg b) { return _mm512_xor_si512(a, b); }
  template <int k>
  static inline reg rotl(reg a) { return _mm512_rol_epi32(a, k); }
  // the lanes of v below q, packed to the front of a register and stored whole (out has 16 words of slack): a
  // register compress and a plain store (vpcompressd with a memory operand is microcoded on some cores)
  static constexpr bool kCompress = true;
  static inline size_t compress_below(uint32_t* out, reg v, reg q) {
    const __mmask16 m = _mm512_cmplt_epu32_mask(v, q);
    _mm512_storeu_si512((void*)out, _mm512_maskz_compress_epi32(m, v));
    return (size_t)__builtin_popcount((unsigned)m);
  }
  // the automorphism's gather (ops_impl.h's gather_span): the lanes of v chosen by the low 4 bits of idx, and
  // whether two registers are equal in every lane
  static constexpr bool kPermute = true;
  static inline reg permute(reg idx, reg v) { return _mm512_permutexvar_epi32(idx, v); }
  static inline bool all_equal(reg a, reg b) { return _mm512_cmpneq_epi32_mask(a, b) == 0; }
  // 64-bit lanes for the wide basis conversion: products of the even 32-bit lanes, the odd lanes moved down,
  // 64-bit adds, and the 16 low / high words of two vectors of 8 64-bit sums (even lanes, odd lanes)
  static constexpr bool kWide = true;
  static constexpr size_t kWideTargets = 4;  // targets per pass of the wide basis conversion
  static constexpr bool kGenericTail = false;  // its own in-register tails (below)
  static inline reg mul_even(reg a, reg b) { return _mm512_mul_epu32(a, b); }
  static inline reg mul_even_s(reg a, reg b) { return _mm512_mul_epi32(a, b); }  // signed even lanes
  static inline reg set1_64(uint64_t v) { return _mm512_set1_epi64((long long)v); }
  static inline reg odd(reg a) { return _mm512_srli_epi64(a, 32); }
  static inline reg add64(reg a, reg b) { return _mm512_add_epi64(a, b); }
  static inline reg join_lo(reg e, reg o) { return _mm512_mask_blend_epi32((__mmask16)0xAAAA, e, _mm512_slli_epi64(o, 32)); }
  static inline reg join_hi(reg e, reg o) { return _mm512_mask_blend_epi32((__mmask16)0xAAAA, _mm512_srli_epi64(e, 32), o); }
  static inline reg even_part(reg r) { return _mm512_maskz_mov_epi32((__mmask16)0x5555, r); }
  HEMX_OWN_TAILS
};

}  // namespace HEMX_ISA
}  // namespace hemx
