// hemx native kernels: seeded uniform polynomials and the key-switching inner product that expands them on the fly.
// Included by ntt_impl.h inside namespace hemx::HEMX_ISA (after ops_impl.h), so each instruction set gets its own
// copy, templated on the same vector traits V, which must also provide bxor(a, b), rotl<k>(a) and kCompress
// (with compress_below(out, v, q): the lanes of v below q stored contiguously at out, 16 words of slack, their
// count returned).
//
// The stream of one row (digit d, modulus q, ring degree n) under a 256-bit key K (8 little-endian words), by the
// key's seed expansion ("xof"):
//   * "chacha20": block c is the ChaCha20 block function of RFC 8439 with key K, block counter c and nonce words
//     (d, q, n); blocks are read in groups of 16 (counters 16 g .. 16 g + 15), word-major: position 16 k + i of
//     group g is word k of block 16 g + i (the order in which 16 lanes compute 16 blocks; every width emits the same);
//   * "aes128ctr": block c is AES-128 under K's first 4 words of the words (c, d, q, n) (kernels.h, the AES engines),
//     block c giving the words 4 c .. 4 c + 3; computed by the engine dispatch.cc picks, 64 blocks a group;
//   * each word w gives v = w & mask, mask = 2^bitlen(q) - 1, and v is kept when v < q (exactly uniform: every
//     residue has one preimage among the masked values), each q's row being the first n kept values.
// hemx/ckks/sampling.py defines the same stream in Python (expand_seed with the chacha20 label), and the tests
// check every instruction set against it and the block function against RFC 8439's test vector.
#pragma once
// (<cstring> and <algorithm> are included at the top of ntt_impl.h, outside the namespace)

static constexpr uint32_t kChachaConst[4] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u};
alignas(64) static constexpr uint32_t kLaneIndex[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
constexpr size_t kGroupWords = 256;  // 16 blocks of 16 words
constexpr int kChachaDoubleRounds = 10;  // ChaCha20

static inline void chacha_quarter(R& a, R& b, R& c, R& d) {
  a = V::add(a, b), d = V::template rotl<16>(V::bxor(d, a));
  c = V::add(c, d), b = V::template rotl<12>(V::bxor(b, c));
  a = V::add(a, b), d = V::template rotl<8>(V::bxor(d, a));
  c = V::add(c, d), b = V::template rotl<7>(V::bxor(b, c));
}

// words[16 k + i] = word k of block 16 g + i of the row (d, q, n) under key. The input words are broadcasts (or the
// counter vector), added again after the rounds rather than kept live: the 16 state registers then fit AVX-512's 32.
static void chacha_group(uint32_t* words, const uint32_t* key, uint32_t d, uint32_t q, uint32_t n, uint32_t g) {
  constexpr size_t W = V::W;
  for (size_t b0 = 0; b0 < 16; b0 += W) {
    const R ctr = V::add(V::set1(16u * g + (uint32_t)b0), V::load(kLaneIndex));
    R x0 = V::set1(kChachaConst[0]), x1 = V::set1(kChachaConst[1]), x2 = V::set1(kChachaConst[2]),
      x3 = V::set1(kChachaConst[3]);
    R x4 = V::set1(key[0]), x5 = V::set1(key[1]), x6 = V::set1(key[2]), x7 = V::set1(key[3]);
    R x8 = V::set1(key[4]), x9 = V::set1(key[5]), x10 = V::set1(key[6]), x11 = V::set1(key[7]);
    R x12 = ctr, x13 = V::set1(d), x14 = V::set1(q), x15 = V::set1(n);
    for (int r = 0; r < kChachaDoubleRounds; ++r) {
      chacha_quarter(x0, x4, x8, x12);
      chacha_quarter(x1, x5, x9, x13);
      chacha_quarter(x2, x6, x10, x14);
      chacha_quarter(x3, x7, x11, x15);
      chacha_quarter(x0, x5, x10, x15);
      chacha_quarter(x1, x6, x11, x12);
      chacha_quarter(x2, x7, x8, x13);
      chacha_quarter(x3, x4, x9, x14);
    }
    uint32_t* o = words + b0;
    V::store(o + 0 * 16, V::add(x0, V::set1(kChachaConst[0])));
    V::store(o + 1 * 16, V::add(x1, V::set1(kChachaConst[1])));
    V::store(o + 2 * 16, V::add(x2, V::set1(kChachaConst[2])));
    V::store(o + 3 * 16, V::add(x3, V::set1(kChachaConst[3])));
    V::store(o + 4 * 16, V::add(x4, V::set1(key[0])));
    V::store(o + 5 * 16, V::add(x5, V::set1(key[1])));
    V::store(o + 6 * 16, V::add(x6, V::set1(key[2])));
    V::store(o + 7 * 16, V::add(x7, V::set1(key[3])));
    V::store(o + 8 * 16, V::add(x8, V::set1(key[4])));
    V::store(o + 9 * 16, V::add(x9, V::set1(key[5])));
    V::store(o + 10 * 16, V::add(x10, V::set1(key[6])));
    V::store(o + 11 * 16, V::add(x11, V::set1(key[7])));
    V::store(o + 12 * 16, V::add(x12, ctr));
    V::store(o + 13 * 16, V::add(x13, V::set1(d)));
    V::store(o + 14 * 16, V::add(x14, V::set1(q)));
    V::store(o + 15 * 16, V::add(x15, V::set1(n)));
  }
}

// The kept values (w & mask < q) of words[0, cnt) appended at out; returns their count. out has cnt + 16 words.
// (A template so the branch a width lacks is never instantiated.)
template <class VV = V>
static size_t keep_below(uint32_t* out, const uint32_t* words, size_t cnt, uint32_t q, uint32_t mask) {
  if constexpr (VV::kCompress) {
    const R vq = VV::set1(q), vm = VV::set1(mask);
    size_t k = 0;
    for (size_t t = 0; t < cnt; t += VV::W) k += VV::compress_below(out + k, VV::band(VV::load(words + t), vm), vq);
    return k;
  } else {
    size_t k = 0;
    for (size_t t = 0; t < cnt; ++t) {
      const uint32_t v = words[t] & mask;
      out[k] = v;
      k += v < q;
    }
    return k;
  }
}

static inline uint32_t mask_for(uint32_t q) {
  uint32_t m = 1;
  while (m < q) m = 2 * m + 1;  // 2^bitlen(q) - 1 (q < 2^31)
  return m;
}

// (not std::min: at -O0 it is an out-of-line weak symbol this ISA's object would share with the others)
static inline size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

// One row's stream, read in pieces of any length (the kept values of one group wait in `kept`). Trivial (no
// constructor): the handler's scratch holds the streams, set up by stream_init.
struct RowStream {
  const uint32_t* key;  // ChaCha20: the 8-word stream key; AES-128: the 44 round-key words (aes is then set)
  AesBlocksFn aes;
  uint32_t d, q, n, mask, group;
  size_t have, off;  // kept[off, have) not handed out yet
  alignas(64) uint32_t words[kGroupWords];
  alignas(64) uint32_t kept[kGroupWords + 16];
};

static_assert(sizeof(RowStream) <= kSeedStreamWords * sizeof(uint32_t) && sizeof(RowStream) % 64 == 0,
              "kernels.h's kSeedStreamWords must hold one RowStream, in whole cache lines");

// aes_rk: the row's AES-128 round keys for an "aes128ctr" stream (kernels.h), nullptr for ChaCha20 under key.
static void stream_init(RowStream& s, const uint32_t* key, const uint32_t* aes_rk, uint32_t d, uint32_t q, uint32_t n) {
  s.key = aes_rk ? aes_rk : key, s.aes = aes_rk ? active_aes().blocks : nullptr;
  s.d = d, s.q = q, s.n = n, s.mask = mask_for(q), s.group = 0, s.have = 0, s.off = 0;
}

// The next group of the row's stream (kGroupWords words): 16 ChaCha20 blocks, or 64 AES-128 blocks.
static inline void next_group(RowStream& s) {
  if (s.aes) s.aes(s.words, s.key, s.group * (uint32_t)(kGroupWords / 4), s.d, s.q, s.n, kGroupWords / 4);
  else chacha_group(s.words, s.key, s.d, s.q, s.n, s.group);
  ++s.group;
}

// The next cnt values of the row into out.
static void stream_fill(RowStream& s, uint32_t* out, size_t cnt) {
  while (cnt) {
    if (s.off == s.have) {
      next_group(s);
      s.have = keep_below<>(s.kept, s.words, kGroupWords, s.q, s.mask), s.off = 0;
      continue;
    }
    const size_t take = min_size(cnt, s.have - s.off);
    std::memcpy(out, s.kept + s.off, take * sizeof(uint32_t));
    out += take, cnt -= take, s.off += take;
  }
}

static void uniform_row_t(uint32_t* out, size_t n, const uint32_t* key, const uint32_t* aes_rk, uint32_t d,
                          uint32_t q) {
  RowStream s;
  stream_init(s, key, aes_rk, d, q, (uint32_t)n);
  stream_fill(s, out, n);
}

// Columns per step of the key product: each digit's piece of kSeedChunk words (its uniform row, generated; its
// permuted digit, gathered) is made once and serves every ciphertext of the batch while it sits in L1.
constexpr size_t kSeedChunk = kSeedChunkWords;  // (kernels.h: the scratch the handler gives)
static_assert((kSeedChunk & (kSeedChunk - 1)) == 0, "the digits' pieces are aligned blocks of a power of two");

// The key-switching inner product of one limb: for every batch member bi,
//   out0[bi] = sum_d x_d * b_d,  out1[bi] = sum_d x_d * a_d
// with x_d = ext[bi][d], read through the index map when `map` is set (x_d[j] = ext[bi][d][map[j]]: the digits of
// an automorphism, never stored), b_d the key's first halves and a_d its second halves: the row (d, q, n) of the
// key's stream when `key` is set (a compact key: generated here), else read at b + b_kstride. ext row (bi, d) at
// ext + bi * e_bstride + d * e_dstride; b row d at b + d * b_dstride; out0 row bi at out + bi * o_bstride, out1 at
// that + o_kstride. Products as inner_product_t (ops_impl.h). streams / abuf / xbuf: D streams and D pieces each.
template <class VV = V>
static void key_product_t(uint32_t* out, size_t o_bstride, size_t o_kstride, const uint32_t* ext, size_t e_bstride,
                          size_t e_dstride, const uint32_t* b, size_t b_dstride, size_t b_kstride, size_t D,
                          size_t batch, size_t n, const uint32_t* key, const uint32_t* aes_rk, const int32_t* map,
                          uint32_t qv, uint32_t qinv, uint32_t r, uint32_t rs, RowStream* streams, uint32_t* abuf,
                          uint32_t* xbuf) {
  constexpr size_t W = VV::W;
  const R q = VV::set1(qv), rr = VV::set1(r), rrs = VV::set1(rs);
  if (key)
    for (size_t d = 0; d < D; ++d) stream_init(streams[d], key, aes_rk, (uint32_t)d, qv, (uint32_t)n);
  for (size_t j0 = 0; j0 < n; j0 += kSeedChunk) {
    const size_t c = min_size(kSeedChunk, n - j0);
    // the piece's key rows (and digits) are fetched (towards L2) while the uniform rows are generated: the two
    // would otherwise take turns, one bound by memory, the other by arithmetic
    for (size_t d = 0; d < D; ++d)
      for (size_t t = 0; t < c; t += 16) __builtin_prefetch(b + d * b_dstride + j0 + t, 0, 2);
    // the digits' piece: this one, or through an automorphism's map the aligned piece its first index falls in
    // (every output piece of a power-of-two size reads one such input piece: gather_span, ops_impl.h); a hint
    // only, so any other map costs nothing but the misses
    const size_t src0 = map ? ((size_t)(uint32_t)map[j0] & ~(kSeedChunk - 1)) : j0;
    const size_t src_c = src0 + c <= n ? c : n - src0;
    for (size_t bi = 0; bi < batch; ++bi)
      for (size_t d = 0; d < D; ++d)
        for (size_t t = 0; t < src_c; t += 16)
          __builtin_prefetch(ext + bi * e_bstride + d * e_dstride + src0 + t, 0, 2);
    if (key)
      for (size_t d = 0; d < D; ++d) stream_fill(streams[d], abuf + d * kSeedChunk, c);
    for (size_t bi = 0; bi < batch; ++bi) {
      const uint32_t* e = ext + bi * e_bstride;
      uint32_t* o = out + bi * o_bstride;
      if (map) {  // this piece of the permuted digits
        const int32_t* mp = map + j0;
        for (size_t d = 0; d < D; ++d) gather_span<VV>(xbuf + d * kSeedChunk, e + d * e_dstride, n, mp, c);
      }
      // digit d's values at column j: x(d, j)
      const uint32_t* xs = map ? xbuf : e + j0;
      const size_t xstride = map ? kSeedChunk : e_dstride;
      const uint32_t* as = key ? abuf : b + b_kstride + j0;
      const size_t astride = key ? kSeedChunk : b_dstride;
      if constexpr (VV::kWide) {  // 64-bit sums, folded every wide_terms products (ops_impl.h's inner_product_t)
        const R one_s = VV::set1((uint32_t)((uint64_t{1} << 32) / qv)), zero = VV::set1(0);
        const size_t terms = wide_terms(qv);
        for (size_t t = 0; t < c; t += W) {
          WideAcc s0{zero, zero, terms}, s1{zero, zero, terms};
          for (size_t d = 0; d < D; ++d) {
            const R x = VV::load(xs + d * xstride + t);
            wide_mac<VV>(s0, x, VV::load(b + d * b_dstride + j0 + t), terms, q, rr, rrs, one_s);
            wide_mac<VV>(s1, x, VV::load(as + d * astride + t), terms, q, rr, rrs, one_s);
          }
          VV::store(o + j0 + t, wide_reduce<VV>(s0.e, s0.o, q, rr, rrs, one_s));
          VV::store(o + o_kstride + j0 + t, wide_reduce<VV>(s1.e, s1.o, q, rr, rrs, one_s));
        }
      } else {
        const R qi = VV::set1(qinv);
        for (size_t t = 0; t < c; t += W) {
          R acc0 = VV::set1(0), acc1 = VV::set1(0);
          for (size_t d = 0; d < D; ++d) {
            const R x = VV::load(xs + d * xstride + t);
            const R y0 = VV::load(b + d * b_dstride + j0 + t), y1 = VV::load(as + d * astride + t);
            const R h0 = VV::mulhi(x, y0), m0 = VV::mullo(VV::mullo(x, y0), qi);
            const R h1 = VV::mulhi(x, y1), m1 = VV::mullo(VV::mullo(x, y1), qi);
            acc0 = csub(VV::add(acc0, csub(VV::add(VV::sub(h0, VV::mulhi(m0, q)), q), q)), q);
            acc1 = csub(VV::add(acc1, csub(VV::add(VV::sub(h1, VV::mulhi(m1, q)), q), q)), q);
          }
          VV::store(o + j0 + t, csub(mul_lazy(acc0, rr, rrs, q), q));
          VV::store(o + o_kstride + j0 + t, csub(mul_lazy(acc1, rr, rrs, q), q));
        }
      }
    }
  }
}
