// NEON (AArch64 Advanced SIMD) build of the kernels: 4 lanes, generic one-lane tails (gtail in ntt_impl.h) for
// the stages with h < 4. NEON is part of the AArch64 baseline, so this file needs no -m flag; it is still an ISA
// file under kernels.h's rule (its own namespace, nothing run at load time). dispatch.cc selects it only when
// asked (HEMX_NATIVE_ISA=neon / set_isa("neon")): its speed against the scalar build, which GCC auto-vectorizes
// for the same unit, has not been measured on AArch64 hardware yet (docs/kernels.md).
#include <arm_neon.h>

#include "kernels.h"

#define HEMX_ISA neon
#define HEMX_ISA_WIDTH kWidthNeon

namespace hemx {
namespace HEMX_ISA {
struct V {
  using reg = uint32x4_t;
  static constexpr size_t W = 4;
  static inline reg load(const uint32_t* p) { return vld1q_u32(p); }
  static inline void store(uint32_t* p, reg v) { vst1q_u32(p, v); }
  static inline reg set1(uint32_t v) { return vdupq_n_u32(v); }
  static inline reg add(reg a, reg b) { return vaddq_u32(a, b); }
  static inline reg sub(reg a, reg b) { return vsubq_u32(a, b); }
  static inline reg min(reg a, reg b) { return vminq_u32(a, b); }
  static inline reg mullo(reg a, reg b) { return vmulq_u32(a, b); }
  static inline reg mulhi(reg a, reg b) {  // high words of the four 64-bit products: the odd words of both halves
    const uint64x2_t lo = vmull_u32(vget_low_u32(a), vget_low_u32(b));
    const uint64x2_t hi = vmull_high_u32(a, b);
    return vuzp2q_u32(vreinterpretq_u32_u64(lo), vreinterpretq_u32_u64(hi));
  }
  static inline reg gt_mask(reg a, reg b) { return vcgtq_u32(a, b); }
  static inline reg band(reg a, reg b) { return vandq_u32(a, b); }
  static inline reg bxor(reg a, reg b) { return veorq_u32(a, b); }
  template <int k>
  static inline reg rotl(reg a) {
    if constexpr (k == 16) {
      return vreinterpretq_u32_u16(vrev32q_u16(vreinterpretq_u16_u32(a)));
    } else {
      return vsliq_n_u32(vshrq_n_u32(a, 32 - k), a, k);  // (a << k) inserted over a >> (32 - k)
    }
  }
  static constexpr bool kCompress = false;
  static constexpr bool kPermute = false;  // the automorphism's gather one word at a time (ops_impl.h)
  static constexpr bool kWide = false;
  static constexpr bool kGenericTail = true;  // the stages with h < W: ntt_impl.h's gtail, one lane at a time
};
}  // namespace HEMX_ISA
}  // namespace hemx

#include "ntt_impl.h"
