// hemx native kernels beyond the NTT: basis conversion, the key-switching inner product, the NTT-domain
// automorphism. Included by ntt_impl.h inside namespace hemx::HEMX_ISA (after R, csub and mul_lazy), so each
// instruction set gets its own copy, templated on the same vector traits V (which must also provide
// gt_mask(a, b): all ones where a > b, for a, b < 2^31, and band(a, b): bitwise and).
//
// Every result is the exact residue in [0, q), so it is bit-identical to any other exact method (the JAX
// kernels, the Python-integer references).
#pragma once

// Row of the output that target row j of a conversion is written to (BConvTables::gap_at / gap, kernels.h).
static inline size_t out_row(const BConvTables& T, size_t j) { return j < T.gap_at ? j : j + T.gap; }

// ------------------------------------------------------------------------------------ basis conversion
// Fast basis conversion from L source moduli q_i to L' target moduli p_j (hemx/kernels/bconv.py):
//   y_i = [x_i * qhat_inv_i]_{q_i};  out_j = sum_i y_i * c_ij  (- corr_ij where centered and y_i > q_i / 2)
// all mod p_j, with c_ij = [qhat_i]_{p_j}, corr_ij = [q_i qhat_i]_{p_j}. The caller passes every known
// product with its Shoup companion, and ncorr_ij = (p_j - corr_ij) mod p_j (the correction as an addend).
// (BConvTables is declared in kernels.h.)

// The 64-bit accumulating variant of step 2 (instruction sets with V::kWide). ybuf holds the signed multiplicands
// a_i = y_i - [centered and y_i > q_i / 2] q_i (|a_i| <= q_i / 2 centered, else a_i = y_i < q_i < 2^31), so that
// out_j = sum_i a_i c_ij mod p_j, the centered correction included: each product is exact in a signed 64-bit
// lane, the sum starts at T.wide_bias[j] (a multiple of p_j that keeps it nonnegative) and is folded to [0, p_j)
// once every T.wide_terms[j] products: s = hi 2^32 + lo -> hi [2^32]_p + lo, two Shoup products. Targets go JB
// at a time, so that one load of a_i (and its odd lanes) feeds JB targets' sums.
template <class VV>
static inline R wide_reduce(R e, R o, R p, R r, R rs, R one_s) {
  const R hi = VV::join_hi(e, o), lo = VV::join_lo(e, o);
  const R a = csub(mul_lazy(hi, r, rs, p), p), b = csub(mul_lazy(lo, VV::set1(1), one_s, p), p);
  return csub(VV::add(a, b), p);
}

template <class VV, size_t JB>
static void bconv_wide_targets(const BConvTables& T, const uint32_t* ybuf, uint32_t* out, size_t n, size_t lo,
                               size_t cnt, size_t j0) {
  constexpr size_t W = VV::W;
  size_t terms = T.L;
  for (size_t b = 0; b < JB; ++b)  // (no std::min: an ISA object defines no symbol outside its namespace)
    if (T.wide_terms[j0 + b] < terms) terms = T.wide_terms[j0 + b];
  const uint32_t* cj[JB];
  for (size_t b = 0; b < JB; ++b) cj[b] = T.c + (j0 + b) * T.L;
  auto fold = [&](size_t b, R e, R o) {
    const size_t j = j0 + b;
    return wide_reduce<VV>(e, o, VV::set1(T.p[j]), VV::set1(T.pr[3 * j]), VV::set1(T.pr[3 * j + 1]),
                           VV::set1(T.pr[3 * j + 2]));
  };
  for (size_t k = 0; k < cnt; k += W) {
    R e[JB], o[JB];
    for (size_t b = 0; b < JB; ++b) e[b] = o[b] = VV::set1_64(T.wide_bias[j0 + b]);
    size_t left = terms;
    for (size_t i = 0; i < T.L; ++i) {
      if (left == 0) {  // fold each sum back to [0, p) (a residue in the low words), add the bias again, go on
        for (size_t b = 0; b < JB; ++b) {
          const R s = fold(b, e[b], o[b]), bias = VV::set1_64(T.wide_bias[j0 + b]);
          e[b] = VV::add64(VV::even_part(s), bias), o[b] = VV::add64(VV::odd(s), bias);
        }
        left = terms;
      }
      const R a = VV::load(ybuf + i * cnt + k), ao = VV::odd(a);
      for (size_t b = 0; b < JB; ++b) {
        const R c = VV::set1(cj[b][i]);
        e[b] = VV::add64(e[b], VV::mul_even_s(a, c));
        o[b] = VV::add64(o[b], VV::mul_even_s(ao, c));
      }
      --left;
    }
    for (size_t b = 0; b < JB; ++b) VV::store(out + out_row(T, j0 + b) * n + lo + k, fold(b, e[b], o[b]));
  }
}

template <class VV>
static void bconv_wide_rows(const BConvTables& T, const uint32_t* ybuf, uint32_t* out, size_t n, size_t lo,
                            size_t cnt) {
  constexpr size_t JB = VV::kWideTargets;
  size_t j = 0;
  for (; j + JB <= T.Lp; j += JB) bconv_wide_targets<VV, JB>(T, ybuf, out, n, lo, cnt, j);
  for (; j < T.Lp; ++j) bconv_wide_targets<VV, 1>(T, ybuf, out, n, lo, cnt, j);
}

// Coefficients [lo, lo + cnt) of one polynomial x (L rows of stride n) into out (L' rows of stride n, target j at
// row out_row(T, j));
// ybuf holds L * cnt words. cnt is a multiple of V::W.
template <class VV = V>
static void bconv_block_t(const BConvTables& T, const uint32_t* x, uint32_t* out, size_t n, size_t lo, size_t cnt,
                          uint32_t* ybuf) {
  constexpr size_t W = V::W;
  bool wide = false;  // the 64-bit path (bconv_wide_rows), which takes signed multiplicands when centered
  if constexpr (VV::kWide) wide = T.wide_terms && T.wide_bias && T.pr;
  const bool signed_y = wide && T.centered;  // y_i - q_i where y_i > q_i / 2
  for (size_t i = 0; i < T.L; ++i) {
    const R q = V::set1(T.q[i]), w = V::set1(T.qhinv[i]), ws = V::set1(T.qhinv_s[i]), h = V::set1(T.half[i]);
    const uint32_t* xi = x + i * n + lo;
    uint32_t* yi = ybuf + i * cnt;
    for (size_t k = 0; k < cnt; k += W) {
      R y = csub(mul_lazy(V::load(xi + k), w, ws, q), q);
      if (signed_y) y = V::sub(y, V::band(V::gt_mask(y, h), q));
      V::store(yi + k, y);
    }
  }
  if constexpr (VV::kWide) {
    if (wide) return bconv_wide_rows<VV>(T, ybuf, out, n, lo, cnt);
  }
  for (size_t j = 0; j < T.Lp; ++j) {
    const R p = V::set1(T.p[j]);
    const uint32_t *cj = T.c + j * T.L, *csj = T.c_s + j * T.L, *ncj = T.ncorr + j * T.L;
    uint32_t* oj = out + out_row(T, j) * n + lo;
    size_t k = 0;
    for (; k + 2 * W <= cnt; k += 2 * W) {  // two vectors at a time: independent chains for the pipeline
      R acc0 = V::set1(0), acc1 = V::set1(0);
      for (size_t i = 0; i < T.L; ++i) {
        const R w = V::set1(cj[i]), ws = V::set1(csj[i]);
        const R y0 = V::load(ybuf + i * cnt + k), y1 = V::load(ybuf + i * cnt + k + W);
        R t0 = csub(mul_lazy(y0, w, ws, p), p), t1 = csub(mul_lazy(y1, w, ws, p), p);
        if (T.centered) {
          const R h = V::set1(T.half[i]), nc = V::set1(ncj[i]);
          t0 = csub(V::add(t0, V::band(V::gt_mask(y0, h), nc)), p);
          t1 = csub(V::add(t1, V::band(V::gt_mask(y1, h), nc)), p);
        }
        acc0 = csub(V::add(acc0, t0), p);
        acc1 = csub(V::add(acc1, t1), p);
      }
      V::store(oj + k, acc0), V::store(oj + k + W, acc1);
    }
    for (; k < cnt; k += W) {
      R acc = V::set1(0);
      for (size_t i = 0; i < T.L; ++i) {
        const R y = V::load(ybuf + i * cnt + k);
        R t = csub(mul_lazy(y, V::set1(cj[i]), V::set1(csj[i]), p), p);
        if (T.centered) t = csub(V::add(t, V::band(V::gt_mask(y, V::set1(T.half[i])), V::set1(ncj[i]))), p);
        acc = csub(V::add(acc, t), p);
      }
      V::store(oj + k, acc);
    }
  }
}

// ------------------------------------------------------------------ key-switching inner product
// out[k] = sum_d a[d] * b[d][k] mod q over n residues, for digits d < D and outputs k < K; a, b in [0, q),
// q odd and below 2^31. a: D rows at stride a_stride; b: row (d, k) at b + d * b_dstride + k * b_kstride; out: row k
// at out + k * o_kstride.
//
// Instruction sets with 64-bit lanes (V::kWide): each product is exact in a 64-bit lane (two 32 x 32 -> 64
// multiplies per vector, even and odd lanes), the sum is carried in 64 bits and folded to [0, q) once every
// wide_terms(q) products (wide_reduce: two Shoup products), so a digit costs two multiplies, not six.
// Otherwise: each product is a signed Montgomery product (a b 2^-32 mod q, in (0, 2q) before one conditional
// subtraction), the sum is kept in [0, q), and one Shoup product by [2^32]_q undoes the 2^-32.

// Products below (q - 1)^2 that a 64-bit sum holds on top of a carried residue below 2^32.
static inline size_t wide_terms(uint32_t q) {
  const uint64_t p = uint64_t(q - 1) * (q - 1);
  return p == 0 ? ~size_t{0} : (size_t)((~uint64_t{0} - 0xFFFFFFFFull) / p);
}

// One output vector: acc (e, o) += x * y over the digits, folded to [0, q) as it goes and at the end.
struct WideAcc {
  R e, o;
  size_t left;
};

template <class VV>
static inline void wide_mac(WideAcc& s, R x, R y, size_t terms, R q, R r, R rs, R one_s) {
  if (s.left == 0) {
    const R f = wide_reduce<VV>(s.e, s.o, q, r, rs, one_s);
    s.e = VV::even_part(f), s.o = VV::odd(f), s.left = terms;
  }
  s.e = VV::add64(s.e, VV::mul_even(x, y));
  s.o = VV::add64(s.o, VV::mul_even(VV::odd(x), VV::odd(y)));
  --s.left;
}

// The exact sum of products of one output vector modulo q (odd, below 2^31; every factor in [0, q)), in either
// of the two ways above: start(), add(s, x, y) per product, finish(s) in [0, q).
template <class VV>
struct ProductSum {
  R q, r, rs, aux;  // aux: [2^32 / q] (64-bit lanes) or q^-1 mod 2^32 (Montgomery)
  size_t terms;
  ProductSum(uint32_t qv, uint32_t qinv, uint32_t rv, uint32_t rsv)
      : q(VV::set1(qv)), r(VV::set1(rv)), rs(VV::set1(rsv)), aux(VV::set1(qinv)), terms(0) {
    if constexpr (VV::kWide) aux = VV::set1((uint32_t)((uint64_t{1} << 32) / qv)), terms = wide_terms(qv);
  }
  WideAcc start() const { return WideAcc{VV::set1(0), VV::set1(0), terms}; }
  void add(WideAcc& s, R x, R y) const {
    if constexpr (VV::kWide) {
      wide_mac<VV>(s, x, y, terms, q, r, rs, aux);
    } else {  // a signed Montgomery product x y 2^-32 in (0, 2q), reduced once, summed in [0, q)
      const R hi = VV::mulhi(x, y), m = VV::mullo(VV::mullo(x, y), aux);
      const R t = csub(VV::add(VV::sub(hi, VV::mulhi(m, q)), q), q);
      s.e = csub(VV::add(s.e, t), q);
    }
  }
  R finish(const WideAcc& s) const {
    if constexpr (VV::kWide) {
      return wide_reduce<VV>(s.e, s.o, q, r, rs, aux);
    } else {
      return csub(mul_lazy(s.e, r, rs, q), q);  // one Shoup product by [2^32]_q undoes the 2^-32
    }
  }
};

template <class VV = V>
static void inner_product_t(uint32_t* out, size_t o_kstride, const uint32_t* a, size_t a_stride, const uint32_t* b,
                            size_t b_dstride, size_t b_kstride, size_t D, size_t K, size_t n, uint32_t qv,
                            uint32_t qinv, uint32_t r, uint32_t rs) {
  constexpr size_t W = VV::W;
  const ProductSum<VV> ps(qv, qinv, r, rs);
  for (size_t k = 0; k < K; ++k) {
    uint32_t* o = out + k * o_kstride;
    for (size_t j = 0; j < n; j += W) {
      WideAcc s = ps.start();
      for (size_t d = 0; d < D; ++d)
        ps.add(s, VV::load(a + d * a_stride + j), VV::load(b + d * b_dstride + k * b_kstride + j));
      VV::store(o + j, ps.finish(s));
    }
  }
}

// ----------------------------------------------------------------------------- sums of plaintext products
// out[k][j] = sum_t x[t][k x_kstride + j] * w[t][j] mod q for j < n (a multiple of W), k < K: one row of a group of
// ciphertext-by-plaintext products summed (the giant steps' sums of a baby-step / giant-step transform), every
// factor in [0, q). The caller keeps n small enough (a column chunk) that the x rows stay in cache across groups.
template <class VV = V>
static void plain_sum_t(uint32_t* out, size_t o_kstride, const uint32_t* const* x, size_t x_kstride,
                        const uint32_t* const* w, size_t T, size_t K, size_t n, uint32_t qv, uint32_t qinv,
                        uint32_t r, uint32_t rs) {
  constexpr size_t W = VV::W;
  const ProductSum<VV> ps(qv, qinv, r, rs);
  for (size_t k = 0; k < K; ++k) {
    uint32_t* o = out + k * o_kstride;
    const size_t xo = k * x_kstride;
    for (size_t j = 0; j < n; j += W) {
      WideAcc s = ps.start();
      for (size_t t = 0; t < T; ++t) ps.add(s, VV::load(x[t] + xo + j), VV::load(w[t] + j));
      VV::store(o + j, ps.finish(s));
    }
  }
}

// ---------------------------------------------------------------------------------- automorphism
// out[j] = in[map[j]] for j in [0, cnt), every map[j] in [0, in_len) (checked by the caller).
//
// An automorphism X -> X^g in the NTT domain's (bit-reversed) order sends evaluation point k to k g + (g - 1) / 2
// mod N; the low t bits of that depend only on the low t bits of k, which are the high bits of the position. So
// every aligned block of 2^s output positions reads exactly one aligned block of 2^s input positions, for every s.
// Where the W indices of an aligned output vector lie in one aligned input vector (all of them, for such a map),
// the vector is one load and one lane permute (VV::kPermute); elsewhere, and at the ends, one word at a time. Any
// map gives the same words: the test is made per vector, on the indices themselves.
template <class VV = V>
static void gather_span(uint32_t* out, const uint32_t* in, size_t in_len, const int32_t* map, size_t cnt) {
  size_t j = 0;
  if constexpr (VV::kPermute) {
    constexpr uint32_t W = (uint32_t)VV::W;
    const R high = VV::set1(~(W - 1));
    for (; j + W <= cnt; j += W) {
      const R m = VV::load(reinterpret_cast<const uint32_t*>(map) + j);
      const uint32_t base = (uint32_t)map[j] & ~(W - 1);
      if (base + W <= in_len && VV::all_equal(VV::band(m, high), VV::set1(base))) {
        VV::store(out + j, VV::permute(m, VV::load(in + base)));
      } else {
        for (size_t t = j; t < j + W; ++t) out[t] = in[(uint32_t)map[t]];
      }
    }
  }
  for (; j < cnt; ++j) out[j] = in[(uint32_t)map[j]];
}

// out[j] = in[map[j]] over n residues (map within [0, n), checked by the caller).
static void gather_t(uint32_t* out, const uint32_t* in, const int32_t* map, size_t n) {
  gather_span<>(out, in, n, map, n);
}
