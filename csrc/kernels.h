// hemx native kernels: the per-instruction-set entry points and the table dispatch.cc builds from them.
//
// The rule every file here follows (docs/kernels.md, "Native code and instruction sets"; checked by
// tests/kernels/native/test_native_build.py on the built objects): nothing compiled for an instruction set runs
// before that instruction set is detected.
//   * An ISA file (ntt_avx2.cc, ntt_avx512.cc, ntt_neon.cc) has no namespace-scope object with a dynamic
//     initializer (its tables are constexpr) and defines nothing outside its own namespace hemx::<isa>.
//   * Code shared by several ISA files has internal linkage (static, anonymous namespace) or is instantiated in
//     the per-ISA namespace: an inline function with external linkage would be emitted by every ISA object as a
//     weak symbol, and the linker would keep one copy -- possibly the AVX-512 one -- for every caller.
//   * This header holds declarations and plain structs only (no member functions, no inline functions).
//   * The tables of entry points, their names and widths are built in the baseline file dispatch.cc, which is
//     also the only place that asks the CPU what it supports.
//   * The library is built with -fvisibility=hidden: only the FFI handlers and the extern "C" entry points
//     (ffi.cc, dispatch.cc, selftest.cc) are exported.
#pragma once

#include <cstddef>
#include <cstdint>

#define HEMX_CAT2(a, b) a##b
#define HEMX_CAT(a, b) HEMX_CAT2(a, b)
#define HEMX_STR2(a) #a
#define HEMX_STR(a) HEMX_STR2(a)

// Inside a vector traits struct whose kGenericTail is false: its own tails of the NTT (the stages with h < W,
// ntt_impl.h's tail_forward / tail_inverse), defined in that instruction set's file after ntt_impl.h.
#define HEMX_OWN_TAILS                                                                                            \
  template <int Mode>                                                                                             \
  static void forward_tail(uint32_t* a, size_t len, size_t base, uint32_t q, const uint32_t* w,                  \
                           const uint32_t* ws, size_t h);                                                         \
  template <bool Lazy>                                                                                            \
  static size_t inverse_tail(uint32_t* a, size_t len, size_t base, uint32_t q, const uint32_t* w,                \
                             const uint32_t* ws);

namespace hemx {

// Basis-conversion tables for ops_impl.h's bconv_block (see there): source (L,) and target (L',) moduli, the
// known products with their Shoup companions, c / c_s / ncorr as (L', L) row-major.
struct BConvTables {
  size_t L = 0, Lp = 0;
  const uint32_t *q = nullptr, *half = nullptr, *qhinv = nullptr, *qhinv_s = nullptr;  // (L,)
  const uint32_t* p = nullptr;                                                        // (L',)
  const uint32_t *c = nullptr, *c_s = nullptr, *ncorr = nullptr;                      // (L', L): row j
  bool centered = false;
  // the 64-bit accumulating path (instruction sets with kWide; ops_impl.h's bconv_wide_rows): pr (L', 3) =
  // {[2^32]_{p_j}, its Shoup companion, floor(2^32 / p_j)}; wide_terms (L',) = how many signed products target j's
  // 64-bit sum holds between two folds (each target its own bound); wide_bias (L',) = a multiple of p_j, at least
  // wide_terms[j] times the largest |product| when centered (0 otherwise), that keeps the sum nonnegative
  const uint32_t *pr = nullptr, *wide_terms = nullptr;
  const uint64_t* wide_bias = nullptr;
  // target row j is written at row j of the output below gap_at, at row j + gap from there on (the fused ModUp
  // writes a digit's conversion around the digit's own rows of the extended digit)
  size_t gap_at = ~size_t{0}, gap = 0;  // (ops_impl.h's out_row reads these)
  // the tile path (ntt_amx.cc; prepared only for a table whose conv_tiles is set, else null): the known products'
  // signed 8-bit digits as AMX A tiles, (ceil(L'/16), ceil(L/16), 4, 16, 64) int8 -- tile (jb, ib, l) row r, column
  // 4 i + k holds digit l of the centered [2^(8k) c_ij]_{p_j}, j = 16 jb + r, i = 16 ib + i, zero past L' or L --
  // and per target j the combination's constants tile_consts (L', 4) = {M_j, [2^16]_{p_j}, its Shoup companion,
  // floor(2^32 / p_j)}, M_j the least multiple of p_j >= kTileSumBound
  const int8_t* tiles = nullptr;
  const uint32_t* tile_consts = nullptr;
  // rows of the scratch ybuf a block needs (bconv_block's contract: ybuf holds ybuf_rows * cnt words): L, or L
  // rounded up to whole tiles of 16 rows for the tile path (the rows past L are read, and multiplied by zero)
  size_t ybuf_rows = 0;
};

// Sources a tile conversion takes (two B tiles of 16 rows), and the bound on |C0 + 2^8 C1| its digit sums reach
// there: |C_l| <= 4 L 128 255 < 2^22 with L <= 32 unsigned bytes of y against signed digits.
constexpr size_t kTileMaxSources = 32;
// Below these a conversion stays on the vector path (ConvTables::prepare makes no tiles): a block of 16 targets
// costs the tiles the same whatever L, and the vector path's cost grows with L (measured on a Sapphire Rapids
// core, docs/results/amx-cpu.md: at N = 2^16 the tiles win from about 6 sources and 12 targets).
constexpr size_t kTileMinSources = 6, kTileMinTargets = 12;
constexpr uint32_t kTileSumBound = (1u << 30) + (1u << 22);

// The entry points of one instruction set, as function pointer types. One polynomial (n residues, one modulus
// q < 2^31) per call; in place. Tables are one limb's rows of the Python-side ButterflyTables (see ntt_impl.h).
using ForwardFn = void (*)(uint32_t* a, size_t n, uint32_t q, const uint32_t* w, const uint32_t* ws);
// scal = {1/N, shoup(1/N), psi^-1/N, shoup(psi^-1/N)}
using InverseFn = void (*)(uint32_t* a, size_t n, uint32_t q, const uint32_t* w, const uint32_t* ws,
                           const uint32_t* scal);
using MulShoupFn = void (*)(uint32_t* out, const uint32_t* a, const uint32_t* w, const uint32_t* ws, size_t n,
                            uint32_t q);
using ProbeFn = uint64_t (*)(uint32_t* a, size_t n, uint32_t q, uint32_t w, uint32_t ws, uint64_t reps);
// ops_impl.h: basis conversion of coefficients [lo, lo + cnt) (cnt a multiple of width), the key-switching inner
// product of one limb, a row of summed plaintext products (plain_sum_t), the automorphism's gather of one polynomial
using BConvBlockFn = void (*)(const BConvTables& t, const uint32_t* x, uint32_t* out, size_t n, size_t lo, size_t cnt,
                              uint32_t* ybuf);
using InnerProductFn = void (*)(uint32_t* out, size_t o_kstride, const uint32_t* a, size_t a_stride,
                                const uint32_t* b, size_t b_dstride, size_t b_kstride, size_t D, size_t K, size_t n,
                                uint32_t q, uint32_t qinv, uint32_t r, uint32_t rs);
using PlainSumFn = void (*)(uint32_t* out, size_t o_kstride, const uint32_t* const* x, size_t x_kstride,
                            const uint32_t* const* w, size_t T, size_t K, size_t n, uint32_t q, uint32_t qinv,
                            uint32_t r, uint32_t rs);
using GatherFn = void (*)(uint32_t* out, const uint32_t* in, const int32_t* map, size_t n);
// prng_impl.h: one row of a seeded uniform polynomial (the ChaCha20 stream of (key, d, q, n), masked rejection),
// and the key-switching inner product of one limb with a key (a compact key's uniform rows generated on the fly,
// the digits optionally read through an automorphism's index map). Its scratch: kKeyScratchPerDigit words per digit
// plus kSeedScratchAlign (any alignment).
constexpr size_t kSeedStreamWords = 576, kSeedChunkWords = 1024, kSeedScratchAlign = 16;
constexpr size_t kKeyScratchPerDigit = kSeedStreamWords + 2 * kSeedChunkWords;
// aes_rk: nullptr for a ChaCha20 stream under key; the AES-128 round keys of key (aes_expand_key) for "aes128ctr".
using UniformRowFn = void (*)(uint32_t* out, size_t n, const uint32_t* key, const uint32_t* aes_rk, uint32_t d,
                              uint32_t q);
using KeyProductFn = void (*)(uint32_t* out, size_t o_bstride, size_t o_kstride, const uint32_t* ext,
                              size_t e_bstride, size_t e_dstride, const uint32_t* b, size_t b_dstride,
                              size_t b_kstride, size_t D, size_t batch, size_t n, const uint32_t* key,
                              const uint32_t* aes_rk, const int32_t* map, uint32_t q, uint32_t qinv, uint32_t r,
                              uint32_t rs, uint32_t* scratch);

// One instruction set's table (immutable; dispatch.cc holds one constexpr table per instruction set built).
struct Kernels {
  const char* name;
  size_t width;  // SIMD lanes; the transforms need n >= 2 * width (the handlers fall back to scalar below)
  ForwardFn forward;
  InverseFn inverse;
  MulShoupFn mul_shoup;
  ProbeFn butterfly_probe;
  BConvBlockFn bconv_block;
  InnerProductFn inner_product;
  PlainSumFn plain_sum;
  GatherFn gather;
  UniformRowFn uniform_row;
  KeyProductFn key_product;
  bool conv_tiles;  // bconv_block reads BConvTables::tiles (ConvTables::prepare must make them)
};

// The AES-128 engines of the "aes128ctr" seed expansion, one file each (aes_soft.cc: portable, every CPU, and the
// key expansion; aes_ni.cc: x86 AES-NI; aes_vaes.cc: x86 VAES on AVX-512 registers; aes_arm.cc: AArch64's AES
// instructions). The stream of a row (prng_impl.h): block c is AES-128 under the row's key K (the first 4 words of
// its stream key, as little-endian bytes) of the 16 bytes of the words (c, d, q, n), little-endian, and gives the
// stream's words 4c .. 4c + 3 in order. An engine's blocks() writes out[4 i .. 4 i + 3] for the block c0 + i,
// i < blocks, under the round keys rk (kAesRoundKeyWords: the 11 round keys in FIPS 197's byte order).
constexpr size_t kAesRoundKeyWords = 44;
using AesBlocksFn = void (*)(uint32_t* out, const uint32_t* rk, uint32_t c0, uint32_t d, uint32_t q, uint32_t n,
                             size_t blocks);
struct AesEngine {
  const char* name;
  AesBlocksFn blocks;
};
void aes_expand_key(const uint32_t* key, uint32_t* rk);  // aes_soft.cc: key (4 words) -> rk (44 words)
namespace aes_soft {
void aes_blocks(uint32_t* out, const uint32_t* rk, uint32_t c0, uint32_t d, uint32_t q, uint32_t n, size_t blocks);
}
#if defined(__x86_64__) || defined(_M_X64)
namespace aes_ni {
void aes_blocks(uint32_t* out, const uint32_t* rk, uint32_t c0, uint32_t d, uint32_t q, uint32_t n, size_t blocks);
}
#if !defined(HEMX_NO_VAES)
namespace aes_vaes {
void aes_blocks(uint32_t* out, const uint32_t* rk, uint32_t c0, uint32_t d, uint32_t q, uint32_t n, size_t blocks);
}
#endif
#elif defined(__aarch64__)
namespace aes_arm {
void aes_blocks(uint32_t* out, const uint32_t* rk, uint32_t c0, uint32_t d, uint32_t q, uint32_t n, size_t blocks);
}
#endif
// dispatch.cc: the engine in use (the best this CPU runs unless one was forced), and the i-th this CPU runs.
const AesEngine& active_aes();
const AesEngine* runnable_aes(size_t i);

// Lanes of each instruction set (its file static_asserts its traits' width against these).
constexpr size_t kWidthScalar = 1, kWidthAvx2 = 8, kWidthAvx512 = 16, kWidthNeon = 4;

// The entry points each ISA file defines in its namespace (ntt_impl.h's tail), declared for dispatch.cc.
#define HEMX_DECLARE_ISA(ns)                                                                                    \
  namespace ns {                                                                                               \
  void forward(uint32_t* a, size_t n, uint32_t q, const uint32_t* w, const uint32_t* ws);                      \
  void inverse(uint32_t* a, size_t n, uint32_t q, const uint32_t* w, const uint32_t* ws, const uint32_t* scal); \
  void mul_shoup(uint32_t* out, const uint32_t* a, const uint32_t* w, const uint32_t* ws, size_t n, uint32_t q); \
  uint64_t butterfly_probe(uint32_t* a, size_t n, uint32_t q, uint32_t w, uint32_t ws, uint64_t reps);          \
  void bconv_block(const BConvTables& t, const uint32_t* x, uint32_t* out, size_t n, size_t lo, size_t cnt,      \
                   uint32_t* ybuf);                                                                            \
  void inner_product(uint32_t* out, size_t o_kstride, const uint32_t* a, size_t a_stride, const uint32_t* b,    \
                     size_t b_dstride, size_t b_kstride, size_t D, size_t K, size_t n, uint32_t q,              \
                     uint32_t qinv, uint32_t r, uint32_t rs);                                                  \
  void plain_sum(uint32_t* out, size_t o_kstride, const uint32_t* const* x, size_t x_kstride,                   \
                 const uint32_t* const* w, size_t T, size_t K, size_t n, uint32_t q, uint32_t qinv, uint32_t r, \
                 uint32_t rs);                                                                                 \
  void gather(uint32_t* out, const uint32_t* in, const int32_t* map, size_t n);                                \
  void uniform_row(uint32_t* out, size_t n, const uint32_t* key, const uint32_t* aes_rk, uint32_t d, uint32_t q); \
  void key_product(uint32_t* out, size_t o_bstride, size_t o_kstride, const uint32_t* ext, size_t e_bstride,    \
                   size_t e_dstride, const uint32_t* b, size_t b_dstride, size_t b_kstride, size_t D,           \
                   size_t batch, size_t n, const uint32_t* key, const uint32_t* aes_rk, const int32_t* map,     \
                   uint32_t q, uint32_t qinv, uint32_t r, uint32_t rs, uint32_t* scratch);                       \
  }

HEMX_DECLARE_ISA(scalar)
#if defined(__x86_64__) || defined(_M_X64)
#define HEMX_ARCH_X86 1
HEMX_DECLARE_ISA(avx2)
HEMX_DECLARE_ISA(avx512)
// The AMX tile kernels (ntt_amx.cc): what the "amx" table takes from them; every other entry is avx512's.
#if !defined(HEMX_NO_AMX)
#define HEMX_HAVE_AMX 1
namespace amx {
void bconv_block(const BConvTables& t, const uint32_t* x, uint32_t* out, size_t n, size_t lo, size_t cnt,
                 uint32_t* ybuf);
}
#endif
#elif defined(__aarch64__)
#define HEMX_ARCH_ARM64 1
HEMX_DECLARE_ISA(neon)
#endif

// dispatch.cc: the active table (taken once per handler call), the scalar table, and the instruction sets.
const Kernels& active_kernels();
const Kernels& scalar_kernels();
const Kernels* runnable_kernels(size_t i);  // the i-th built table this CPU runs, best first; nullptr past the end

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
  static inline reg bxor(reg a, reg b) { return a ^ b; }
  template <int k>
  static inline reg rotl(reg a) { return (a << k) | (a >> (32 - k)); }
  static constexpr bool kWide = false;  // no 64-bit lane helpers (ops_impl.h's wide basis conversion)
  static constexpr bool kCompress = false;  // prng_impl.h keeps values one at a time
  static constexpr bool kPermute = false;   // ops_impl.h's gather_span goes one word at a time
};
}  // namespace

}  // namespace hemx
