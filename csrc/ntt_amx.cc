// AMX build: the kernels whose work is a product by a known integer matrix, run as int8 tile matmuls on the CPU's
// matrix engine (AMX-TILE + AMX-INT8, Sapphire Rapids and later Xeons), their element-wise steps in AVX-512. This
// file alone is compiled with -mamx-tile -mamx-int8 and the AVX-512 flags; dispatch.cc runs it only on a CPU with
// AVX-512 and AMX-INT8 whose kernel granted this process the tile state (arch_prctl ARCH_REQ_XCOMP_PERM), and the
// "amx" table takes every other entry from the AVX-512 build.
//
// Basis conversion (BAT, CROSS Sec. IV-A): the products out_j = sum_i y_i c_ij mod p_j of a block of 16
// coefficients and 16 targets are one matrix product over the integers,
//     sum_l 2^(8l) C_l,   C_l[j, t] = sum_(i, k) A_l[j, 4 i + k] B[i, 4 t + k],
// where B[i, 4 t + k] = byte k of y_i at coefficient t -- exactly the bytes of the uint32 rows of y in memory, so
// a B tile is loaded straight from them -- and A_l holds digit l of the centered [2^(8k) c_ij]_{p_j} (prepared on
// the host, conv_tables.h). Each C_l is one TDPBSUD per 16 sources (unsigned bytes of y against signed digits);
// a centered conversion (y_i - q_i where y_i > q_i / 2) gives the B tile signed digits instead and uses TDPBSSD.
// Then t = C0 + 2^8 C1 and u = C2 + 2^8 C3 (|t|, |u| < kTileSumBound) are made non-negative by adding M_j, a
// multiple of p_j, and out_j = t + [2^16]_{p_j} u mod p_j by two Shoup products. Every output is the exact residue
// in [0, p_j), bit-identical to the vector kernels.
#include <immintrin.h>

#include "kernels.h"

#define HEMX_ISA amx
#define HEMX_ISA_WIDTH kWidthAvx512
#include "avx512_traits.h"
#include "lazy_ops.h"

namespace hemx {
namespace HEMX_ISA {

// The tile configuration (palette 1): every tile 16 rows of 64 bytes. Tiles 0-3 hold C_0..C_3, 4 and 5 the B
// tiles of sources 0-15 and 16-31, 6 and 7 the A tiles (two, so a load overlaps the product before it).
struct alignas(64) TileConfig {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

static inline void load_config() {
  TileConfig c = {};
  c.palette = 1;
  for (int t = 0; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = 16;
  _tile_loadconfig(&c);
}

// C_l += A_l B for the four digits l of one B tile (tile index B, a literal: the intrinsics name tile registers),
// A tiles at a (4 x 1 KiB), signed (TDPBSSD) or unsigned (TDPBSUD) bytes in B.
#define HEMX_TILE_DP(S, C, A, B) \
  do {                             \
    if constexpr (S)               \
      _tile_dpbssd(C, A, B);       \
    else                           \
      _tile_dpbsud(C, A, B);       \
  } while (0)
#define HEMX_TILE_PRODUCTS(S, B, a)                 \
  do {                                              \
    _tile_loadd(6, (a), 64);                        \
    HEMX_TILE_DP(S, 0, 6, B);                       \
    _tile_loadd(7, (a) + 1024, 64);                 \
    HEMX_TILE_DP(S, 1, 7, B);                       \
    _tile_loadd(6, (a) + 2048, 64);                 \
    HEMX_TILE_DP(S, 2, 6, B);                       \
    _tile_loadd(7, (a) + 3072, 64);                 \
    HEMX_TILE_DP(S, 3, 7, B);                       \
  } while (0)

// v mod p for a signed 32-bit v with |v| < kTileSumBound: v + M (a multiple of p) where v < 0, then a Shoup product
// by w (w = 1: ws = floor(2^32 / p)) and one conditional subtraction: [v w]_p in [0, p).
static inline R reduce_signed(R v, R m, R w, R ws, R p) {
  const R a = _mm512_mask_add_epi32(v, _mm512_movepi32_mask(v), v, m);
  return csub(mul_lazy(a, w, ws, p), p);
}

template <bool Centered>
static void bconv_tiles(const BConvTables& T, const uint32_t* x, uint32_t* out, size_t n, size_t lo, size_t cnt,
                        uint32_t* ybuf) {
  constexpr size_t W = V::W;
  const size_t L = T.L, nb = (L + 15) / 16, jbs = (T.Lp + 15) / 16;
  // 1. y_i = [x_i qhat_i^-1]_{q_i} in rows of cnt words; centered: y_i - q_i where y_i > q_i / 2, as the balanced
  //    digits byte_k(y + 0x80808080) - 128 (the bytes of (y + 0x80808080) ^ 0x80808080 read as int8)
  const R bias = V::set1(0x80808080u);
  for (size_t i = 0; i < L; ++i) {
    const R q = V::set1(T.q[i]), w = V::set1(T.qhinv[i]), ws = V::set1(T.qhinv_s[i]), h = V::set1(T.half[i]);
    const uint32_t* xi = x + i * n + lo;
    uint32_t* yi = ybuf + i * cnt;
    for (size_t k = 0; k < cnt; k += W) {
      R y = csub(mul_lazy(V::load(xi + k), w, ws, q), q);
      if constexpr (Centered) {
        y = _mm512_mask_sub_epi32(y, _mm512_cmpgt_epu32_mask(y, h), y, q);
        y = V::bxor(V::add(y, bias), bias);
      }
      V::store(yi + k, y);
    }
  }
  // 2. per block of 16 coefficients: the B tiles once, then each block of 16 targets
  load_config();
  alignas(64) int32_t acc[4][16][16];
  const R one = V::set1(1);
  const size_t stride = cnt * sizeof(uint32_t);
  for (size_t cb = 0; cb < cnt; cb += 16) {
    _tile_loadd(4, ybuf + cb, stride);
    if (nb > 1) _tile_loadd(5, ybuf + 16 * cnt + cb, stride);
    for (size_t jb = 0; jb < jbs; ++jb) {
      const int8_t* a = T.tiles + jb * nb * 4096;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      HEMX_TILE_PRODUCTS(Centered, 4, a);
      if (nb > 1) HEMX_TILE_PRODUCTS(Centered, 5, a + 4096);
      _tile_stored(0, acc[0], 64);
      _tile_stored(1, acc[1], 64);
      _tile_stored(2, acc[2], 64);
      _tile_stored(3, acc[3], 64);
      const size_t rows = T.Lp - 16 * jb < 16 ? T.Lp - 16 * jb : 16;  // (not std::min: a weak symbol at -O0)
      for (size_t r = 0; r < rows; ++r) {
        const size_t j = 16 * jb + r;
        const uint32_t* k4 = T.tile_consts + 4 * j;
        const R p = V::set1(T.p[j]), m = V::set1(k4[0]), ps = V::set1(k4[3]);
        const R c0 = V::load((const uint32_t*)acc[0][r]), c1 = V::load((const uint32_t*)acc[1][r]);
        const R c2 = V::load((const uint32_t*)acc[2][r]), c3 = V::load((const uint32_t*)acc[3][r]);
        const R t = V::add(c0, _mm512_slli_epi32(c1, 8)), u = V::add(c2, _mm512_slli_epi32(c3, 8));
        const R lo_part = reduce_signed(t, m, one, ps, p);
        const R hi_part = reduce_signed(u, m, V::set1(k4[1]), V::set1(k4[2]), p);
        V::store(out + (j < T.gap_at ? j : j + T.gap) * n + lo + cb,  // ops_impl.h's out_row
                  csub(V::add(lo_part, hi_part), p));
      }
    }
  }
  _tile_release();  // the tile state back to its initial state: nothing for the kernel to save on a switch
}

void bconv_block(const BConvTables& t, const uint32_t* x, uint32_t* out, size_t n, size_t lo, size_t cnt,
                 uint32_t* ybuf) {
  if (!t.tiles || t.L > kTileMaxSources || cnt % 16) return avx512::bconv_block(t, x, out, n, lo, cnt, ybuf);
  if (t.centered) bconv_tiles<true>(t, x, out, n, lo, cnt, ybuf);
  else bconv_tiles<false>(t, x, out, n, lo, cnt, ybuf);
}

}  // namespace HEMX_ISA
}  // namespace hemx
