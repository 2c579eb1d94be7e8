// hemx native kernels: host-side helpers shared by the baseline files (ffi.cc, selftest.cc): modulus checks, the
// per-call tables of a basis conversion, its block size. Baseline code only: no ISA file includes this header
// (internal linkage all the same, so no copy is ever shared with another object).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels.h"

namespace hemx {
namespace {

bool bad_modulus(uint32_t q) { return q < 3 || !(q & 1) || q >= (1u << 31); }
uint32_t shoup_of(uint32_t w, uint32_t q) { return (uint32_t)(((uint64_t)w << 32) / q); }

// The per-call tables of one basis conversion in the layout ops_impl.h's bconv_block reads (L * L' entries:
// halves, Shoup companions, the target-major layout, the wide path's constants). Source moduli qs (L,) and
// qhinv (L,) = [qhat_i^-1]_{q_i}; target moduli ps (L',); c, corr (L, L') row-major = [qhat_i]_{p_j},
// [q_i qhat_i]_{p_j} (corr used when centered). qs must outlive the tables; ps is copied.
// tiles: also make the tile path's digit tiles and constants (for a table whose conv_tiles is set; kernels.h).
struct ConvTables {  // prepare() returns nullptr, or what is wrong with the tables
  std::vector<uint32_t> tab;
  std::vector<uint64_t> bias;  // BConvTables::wide_bias
  std::vector<int8_t> tile_digits;
  BConvTables T;

  const char* prepare(size_t L, size_t Lp, const uint32_t* qs, const uint32_t* hs, const uint32_t* ps_in,
                     const uint32_t* cs, const uint32_t* rs, bool centered, bool tiles = false) {
    if (L == 0 || Lp == 0) return "empty basis conversion";
    const bool with_tiles = tiles && L >= kTileMinSources && L <= kTileMaxSources && Lp >= kTileMinTargets;
    tab.assign(3 * L + 3 * L * Lp + 5 * Lp + (with_tiles ? 4 * Lp : 0), 0);
    bias.assign(Lp, 0);
    uint32_t *half = tab.data(), *hsh = half + L, *ct = hsh + L, *cst = ct + L * Lp, *nct = cst + L * Lp;
    uint32_t *pr = nct + L * Lp, *wt = pr + 3 * Lp, *ps = wt + Lp;  // ps last: the tile constants follow
    std::memcpy(ps, ps_in, Lp * sizeof(uint32_t));
    uint64_t amax = 0;  // bound on |a_i| (the wide path's multiplicand: y_i, or y_i - q_i when centered and y_i > q_i / 2)
    for (size_t i = 0; i < L; ++i) {
      if (bad_modulus(qs[i]) || hs[i] >= qs[i])
        return "bad source modulus or [qhat^-1]_q table";
      half[i] = qs[i] >> 1, hsh[i] = shoup_of(hs[i], qs[i]);
      amax = std::max<uint64_t>(amax, centered ? half[i] : qs[i] - 1);
    }
    for (size_t j = 0; j < Lp; ++j) {
      if (bad_modulus(ps[j])) return "bad target modulus";
      uint64_t cmax = 0;  // this target's bound on c_ij
      for (size_t i = 0; i < L; ++i) {
        const uint32_t cv = cs[i * Lp + j], rv = rs[i * Lp + j];
        if (cv >= ps[j] || rv >= ps[j]) return "conversion table not reduced";
        ct[j * L + i] = cv, cst[j * L + i] = shoup_of(cv, ps[j]), nct[j * L + i] = rv ? ps[j] - rv : 0;
        cmax = std::max<uint64_t>(cmax, cv);
      }
      // t products, each |a_i c_ij| <= amax cmax < 2^62, on top of a carried residue below p_j and the bias: the sum
      // stays in [0, 2^64) when t amax cmax + bias + p_j < 2^64, and bias = ceil(t amax cmax / p_j) p_j is below
      // t amax cmax + p_j (centered; no bias otherwise: every product is nonnegative)
      const uint64_t prod = amax * cmax, room = ~uint64_t{0} - 2 * uint64_t{ps[j]};
      const uint64_t t = prod == 0 ? L : std::min<uint64_t>(L, room / (centered ? 2 * prod : prod));
      wt[j] = (uint32_t)t;
      bias[j] = centered ? (t * prod + ps[j] - 1) / ps[j] * ps[j] : 0;
      const uint32_t r = (uint32_t)((uint64_t{1} << 32) % ps[j]);
      pr[3 * j] = r, pr[3 * j + 1] = shoup_of(r, ps[j]), pr[3 * j + 2] = (uint32_t)((uint64_t{1} << 32) / ps[j]);
    }
    T = BConvTables{};
    T.L = L, T.Lp = Lp, T.q = qs, T.half = half, T.qhinv = hs, T.qhinv_s = hsh, T.p = ps, T.c = ct, T.c_s = cst;
    T.ncorr = nct, T.centered = centered;
    T.pr = pr, T.wide_terms = wt, T.wide_bias = bias.data();
    T.ybuf_rows = L;
    if (with_tiles) prepare_tiles(cs, ps + Lp);
    return nullptr;
  }

  // The tile path's tables (kernels.h, BConvTables::tiles): balanced 8-bit digits of each centered known product
  // [2^(8k) c_ij]_{p_j}, so that sum_l 2^(8l) sum_(i,k) byte_k(y_i) digit_l(...) = sum_i y_i c_ij mod p_j.
  // consts: the (L', 4) words after T.p in tab.
  void prepare_tiles(const uint32_t* cs, uint32_t* consts) {
    const size_t L = T.L, Lp = T.Lp, nb = (L + 15) / 16, jbs = (Lp + 15) / 16;
    tile_digits.assign(jbs * nb * 4 * 1024, 0);
    for (size_t j = 0; j < Lp; ++j) {
      const uint32_t p = T.p[j];
      for (size_t i = 0; i < L; ++i) {
        uint64_t v = cs[i * Lp + j];
        for (size_t k = 0; k < 4; ++k, v = (v << 8) % p) {
          const int64_t centered = v > p / 2 ? (int64_t)v - p : (int64_t)v;  // |centered| < 2^30
          const uint32_t z = (uint32_t)centered + 0x80808080u;               // digits d_l = byte_l(z) - 128
          for (size_t l = 0; l < 4; ++l) {
            const size_t at = (((j / 16) * nb + i / 16) * 4 + l) * 1024 + (j % 16) * 64 + (i % 16) * 4 + k;
            tile_digits[at] = (int8_t)((int)((z >> (8 * l)) & 0xFF) - 128);
          }
        }
      }
      const uint64_t m = ((uint64_t)kTileSumBound + p - 1) / p * p;
      const uint32_t r16 = (uint32_t)((uint64_t{1} << 16) % p);
      uint32_t* c4 = consts + 4 * j;
      c4[0] = (uint32_t)m, c4[1] = r16, c4[2] = shoup_of(r16, p), c4[3] = (uint32_t)((uint64_t{1} << 32) / p);
    }
    T.tiles = tile_digits.data(), T.tile_consts = consts;
    T.ybuf_rows = nb * 16;
  }
};

// Coefficient block of a conversion from L sources: the L scaled source rows stay in L1.
size_t conv_block(size_t L, size_t n, size_t width) {
  size_t blk = std::max<size_t>(2 * width, 4096 / L);
  blk = std::min(n, size_t{1} << (63 - __builtin_clzll((unsigned long long)blk)));
  return std::max(blk, std::min(n, 2 * width));
}


}  // namespace
}  // namespace hemx
