// hemx native kernels: a self-test callable without JAX (ctypes, or the tools/selftest.cc driver under qemu).
// Baseline code. For every instruction set built into the library that this CPU runs, it checks against exact
// 64-bit references computed here and against the scalar build: forward NTTs at n = 64 (against the O(n^2)
// definition), 256 and 8192 (blocked path, against scalar) for one modulus in each range the kernels treat
// differently (below 2^29, [2^29, 2^30), [2^30, 2^31)), the inverse round trip, the Shoup product, the basis
// conversion (plain and centered; 3 -> 2 limbs, and 7, 16, 20 and 33 -> 37 over a block inside the row: the AMX
// tiles' partial, whole and two-tile sources and the hand-over past 32), the key-switching inner product and the
// automorphism's gather.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "conv_tables.h"
#include "kernels.h"

namespace hemx {
namespace {

uint64_t g_state = 0x9E3779B97F4A7C15ull;
uint64_t rnd() {  // xorshift64*: a fixed, reproducible sequence
  g_state ^= g_state >> 12, g_state ^= g_state << 25, g_state ^= g_state >> 27;
  return g_state * 0x2545F4914F6CDD1Dull;
}

uint32_t mulmod(uint64_t a, uint64_t b, uint32_t q) { return (uint32_t)(a * b % q); }
uint32_t powmod(uint64_t b, uint64_t e, uint32_t q) {
  uint64_t r = 1 % q;
  b %= q;
  for (; e; e >>= 1, b = b * b % q)
    if (e & 1) r = r * b % q;
  return (uint32_t)r;
}
bool is_prime(uint32_t n) {  // deterministic Miller-Rabin for n < 3,215,031,751 (bases 2, 3, 5, 7)
  if (n < 2) return false;
  for (uint32_t p : {2u, 3u, 5u, 7u})
    if (n % p == 0) return n == p;
  uint32_t d = n - 1;
  int s = 0;
  while (!(d & 1)) d >>= 1, ++s;
  for (uint32_t a : {2u, 3u, 5u, 7u}) {
    uint64_t x = powmod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int i = 1; i < s && composite; ++i) {
      x = x * x % n;
      if (x == n - 1) composite = false;
    }
    if (composite) return false;
  }
  return true;
}
// The largest prime below `bound` that is 1 mod `step`, at most `skip` such primes down.
uint32_t prime_below(uint64_t bound, uint32_t step, int skip = 0) {
  for (uint64_t q = (bound - 1) / step * step + 1; q > step; q -= step)
    if (q < bound && is_prime((uint32_t)q) && skip-- == 0) return (uint32_t)q;
  return 0;
}
// A primitive 2n-th root of unity mod q (q = 1 mod 2n): psi^n = -1.
uint32_t root_2n(uint32_t q, uint32_t n) {
  for (uint32_t g = 2; g < 1000; ++g) {
    const uint32_t psi = powmod(g, (q - 1) / (2 * n), q);
    if (powmod(psi, n, q) == q - 1) return psi;
  }
  return 0;
}
uint32_t brv(uint32_t i, uint32_t n) {
  uint32_t r = 0;
  for (uint32_t b = 1; b < n; b <<= 1) r = (r << 1) | (i & 1), i >>= 1;
  return r;
}

struct Report {
  std::string text;
  bool failed = false;
  void fail(const char* isa, const std::string& what) {
    if (!failed) text = std::string(isa) + ": FAILED " + what;
    failed = true;
  }
};

// Butterfly tables of one modulus (hemx/kernels/ntt.py's convention).
struct NttTables {
  std::vector<uint32_t> w, ws, wi, wis;
  uint32_t scal[4];
  NttTables(uint32_t q, uint32_t n, uint32_t psi) : w(n), ws(n), wi(n), wis(n) {
    const uint32_t psi_inv = powmod(psi, q - 2, q), ninv = powmod(n, q - 2, q);
    for (uint32_t i = 0; i < n; ++i) {
      w[i] = powmod(psi, brv(i, n), q), wi[i] = powmod(psi_inv, brv(i, n), q);
      ws[i] = shoup_of(w[i], q), wis[i] = shoup_of(wi[i], q);
    }
    const uint32_t last = mulmod(wi[n > 1 ? 1 : 0], ninv, q);
    scal[0] = ninv, scal[1] = shoup_of(ninv, q), scal[2] = last, scal[3] = shoup_of(last, q);
  }
};

std::vector<uint32_t> random_residues(size_t n, uint32_t q) {
  std::vector<uint32_t> v(n);
  for (auto& x : v) x = (uint32_t)(rnd() % q);
  return v;
}

void check_ntt(const Kernels& k, Report& rep, uint32_t q, uint32_t n, uint32_t psi_max, uint32_t n_max) {
  const uint32_t psi = powmod(psi_max, n_max / n, q);
  NttTables t(q, n, psi);
  const std::vector<uint32_t> x = random_residues(n, q);
  std::vector<uint32_t> y = x, ref = x;
  k.forward(y.data(), n, q, t.w.data(), t.ws.data());
  if (n <= 256) {  // the definition: position p holds sum_j x_j psi^((2 brv(p) + 1) j)
    for (uint32_t p = 0; p < n; ++p) {
      const uint32_t e = powmod(psi, 2 * brv(p, n) + 1, q);
      uint64_t acc = 0, pw = 1;
      for (uint32_t j = 0; j < n; ++j, pw = pw * e % q) acc = (acc + x[j] * pw) % q;
      ref[p] = (uint32_t)acc;
    }
  } else {
    scalar_kernels().forward(ref.data(), n, q, t.w.data(), t.ws.data());
  }
  if (y != ref) return rep.fail(k.name, "forward NTT n=" + std::to_string(n) + " q=" + std::to_string(q));
  k.inverse(y.data(), n, q, t.wi.data(), t.wis.data(), t.scal);
  if (y != x) rep.fail(k.name, "inverse NTT round trip n=" + std::to_string(n) + " q=" + std::to_string(q));
}

void check_mul_shoup(const Kernels& k, Report& rep, uint32_t q) {
  const size_t n = 256;
  const std::vector<uint32_t> a = random_residues(n, q), w = random_residues(n, q);
  std::vector<uint32_t> ws(n), out(n);
  for (size_t i = 0; i < n; ++i) ws[i] = shoup_of(w[i], q);
  k.mul_shoup(out.data(), a.data(), w.data(), ws.data(), n, q);
  for (size_t i = 0; i < n; ++i)
    if (out[i] != mulmod(a[i], w[i], q)) return rep.fail(k.name, "mul_shoup q=" + std::to_string(q));
}

// The conversion of the coefficients [lo, lo + cnt) of n (the rest of the output must stay untouched).
void check_bconv(const Kernels& k, Report& rep, const std::vector<uint32_t>& qs, const std::vector<uint32_t>& ps,
                 bool centered, size_t n = 256, size_t lo = 0, size_t cnt = 256) {
  const size_t L = qs.size(), Lp = ps.size();
  std::vector<uint32_t> qhinv(L), hats(L), c(L * Lp), corr(L * Lp);
  for (size_t i = 0; i < L; ++i) {
    uint64_t hat = 1;
    for (size_t t = 0; t < L; ++t)
      if (t != i) hat = hat * (qs[t] % qs[i]) % qs[i];
    hats[i] = (uint32_t)hat, qhinv[i] = powmod(hat, qs[i] - 2, qs[i]);
    for (size_t j = 0; j < Lp; ++j) {
      uint64_t h = 1;
      for (size_t t = 0; t < L; ++t)
        if (t != i) h = h * (qs[t] % ps[j]) % ps[j];
      c[i * Lp + j] = (uint32_t)h, corr[i * Lp + j] = mulmod(h, qs[i] % ps[j], ps[j]);
    }
  }
  std::vector<uint32_t> x(L * n), out(Lp * n, 0);
  for (size_t i = 0; i < L; ++i)
    for (size_t j = 0; j < n; ++j) x[i * n + j] = (uint32_t)(rnd() % qs[i]);
  // edge values first: 0, 1, q - 1 and the centering's boundary q / 2 and q / 2 + 1
  for (size_t i = 0; i < L; ++i) {
    const uint32_t edge[5] = {0, 1, qs[i] - 1, qs[i] / 2, qs[i] / 2 + 1};
    for (size_t e = 0; e < 5 && e < cnt; ++e) x[i * n + lo + (e + i) % cnt] = edge[e];
  }
  // the sums' worst column: every scaled source y_i = [x_i qhat_i^-1]_{q_i} at q_i - 1 (the largest addend a_i,
  // centered or not), so a 64-bit sum folded too late for some target would show here
  if (cnt > L + 5)
    for (size_t i = 0; i < L; ++i) x[i * n + lo + L + 5] = mulmod(qs[i] - 1, hats[i], qs[i]);
  ConvTables ct;
  if (const char* why = ct.prepare(L, Lp, qs.data(), qhinv.data(), ps.data(), c.data(), corr.data(), centered,
                                   k.conv_tiles))
    return rep.fail(k.name, std::string("bconv tables: ") + why);
  std::vector<uint32_t> ybuf(ct.T.ybuf_rows * cnt);
  k.bconv_block(ct.T, x.data(), out.data(), n, lo, cnt, ybuf.data());
  const std::string what = "basis conversion " + std::to_string(L) + " -> " + std::to_string(Lp) +
                           (centered ? " (centered)" : "");
  for (size_t j = 0; j < Lp; ++j)
    for (size_t t = 0; t < n; ++t) {
      if (t < lo || t >= lo + cnt) {
        if (out[j * n + t] != 0) return rep.fail(k.name, what + ": wrote outside its block");
        continue;
      }
      uint64_t acc = 0;
      for (size_t i = 0; i < L; ++i) {
        const uint32_t y = mulmod(x[i * n + t], qhinv[i], qs[i]);
        acc = (acc + (uint64_t)mulmod(y, c[i * Lp + j], ps[j])) % ps[j];
        if (centered && y > qs[i] / 2) acc = (acc + ps[j] - corr[i * Lp + j]) % ps[j];
      }
      if (out[j * n + t] != acc) return rep.fail(k.name, what);
    }
}

void check_inner_product(const Kernels& k, Report& rep, uint32_t q) {
  const size_t D = 3, K = 2, n = 64;
  std::vector<uint32_t> a = random_residues(D * n, q), b = random_residues(D * K * n, q), out(K * n);
  uint32_t inv = q;
  for (int it = 0; it < 5; ++it) inv *= 2u - q * inv;
  const uint32_t r = (uint32_t)((uint64_t{1} << 32) % q);
  k.inner_product(out.data(), n, a.data(), n, b.data(), K * n, n, D, K, n, q, inv, r, shoup_of(r, q));
  for (size_t kk = 0; kk < K; ++kk)
    for (size_t t = 0; t < n; ++t) {
      uint64_t acc = 0;
      for (size_t d = 0; d < D; ++d) acc = (acc + (uint64_t)mulmod(a[d * n + t], b[(d * K + kk) * n + t], q)) % q;
      if (out[kk * n + t] != acc) return rep.fail(k.name, "inner product q=" + std::to_string(q));
    }
}

// A row of summed plaintext products: T terms, the parts at stride K n, each term's plaintext its own row; the
// first column every factor q - 1 (the lane sums' largest addends, 40 of them past any fold interval's start).
void check_plain_sum(const Kernels& k, Report& rep, uint32_t q) {
  const size_t T = 40, K = 2, n = 64;
  std::vector<uint32_t> x = random_residues(T * K * n, q), w = random_residues(T * n, q), out(K * n);
  for (size_t t = 0; t < T; ++t) {
    w[t * n] = q - 1;
    for (size_t kk = 0; kk < K; ++kk) x[(t * K + kk) * n] = q - 1;
  }
  std::vector<const uint32_t*> xp(T), wp(T);
  for (size_t t = 0; t < T; ++t) xp[t] = x.data() + t * K * n, wp[t] = w.data() + t * n;
  uint32_t inv = q;
  for (int it = 0; it < 5; ++it) inv *= 2u - q * inv;
  const uint32_t r = (uint32_t)((uint64_t{1} << 32) % q);
  k.plain_sum(out.data(), n, xp.data(), n, wp.data(), T, K, n, q, inv, r, shoup_of(r, q));
  for (size_t kk = 0; kk < K; ++kk)
    for (size_t j = 0; j < n; ++j) {
      uint64_t acc = 0;
      for (size_t t = 0; t < T; ++t) acc = (acc + (uint64_t)mulmod(x[(t * K + kk) * n + j], w[t * n + j], q)) % q;
      if (out[kk * n + j] != acc) return rep.fail(k.name, "plain sum q=" + std::to_string(q));
    }
}

// A random permutation of [0, n) whose aligned blocks of 8 and of 16 positions each read one aligned input block of
// their size, as an automorphism's map does (the vector kernels' permute path): the 16-blocks shuffled, in each the
// two halves in either order, in each half the 8 positions shuffled.
std::vector<int32_t> block_map(size_t n) {
  std::vector<int32_t> blocks(n / 16), map(n);
  for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = (int32_t)b;
  for (size_t i = blocks.size() - 1; i > 0; --i) std::swap(blocks[i], blocks[rnd() % (i + 1)]);
  for (size_t b = 0; b < blocks.size(); ++b) {
    const size_t flip = rnd() % 2;
    for (size_t h = 0; h < 2; ++h) {
      int32_t lanes[8];
      for (int t = 0; t < 8; ++t) lanes[t] = t;
      for (int t = 7; t > 0; --t) std::swap(lanes[t], lanes[rnd() % (t + 1)]);
      for (size_t t = 0; t < 8; ++t) map[16 * b + 8 * h + t] = (int32_t)(16 * blocks[b] + 8 * (h ^ flip)) + lanes[t];
    }
  }
  return map;
}

void check_gather(const Kernels& k, Report& rep) {
  const size_t n = 256;
  std::vector<int32_t> shuffled(n);
  for (size_t i = 0; i < n; ++i) shuffled[i] = (int32_t)i;
  for (size_t i = n - 1; i > 0; --i) std::swap(shuffled[i], shuffled[rnd() % (i + 1)]);
  std::vector<int32_t> broken = block_map(n);
  std::swap(broken[3], broken[n - 5]);  // two vectors whose indices leave their block: one word at a time there
  const std::vector<std::vector<int32_t>> maps = {shuffled, block_map(n), broken};
  const std::vector<uint32_t> in = random_residues(n, 0xFFFFFFFFu);
  for (const auto& map : maps) {
    for (size_t len : {n, n - 3}) {  // n - 3: a tail shorter than a vector, and blocks that end past the input
      std::vector<uint32_t> out(len, 0);
      std::vector<int32_t> m(map.begin(), map.begin() + (long)len);
      for (auto& v : m) v = (int32_t)((size_t)v % len);  // within [0, len): the kernel's contract
      k.gather(out.data(), in.data(), m.data(), len);
      for (size_t i = 0; i < len; ++i)
        if (out[i] != in[(size_t)m[i]]) return rep.fail(k.name, "automorphism gather");
    }
  }
}

// ChaCha20's block (RFC 8439, 2.3), plainly: the reference for the seeded rows.
void chacha20_block_ref(const uint32_t key[8], uint32_t counter, const uint32_t nonce[3], uint32_t out[16]) {
  uint32_t s[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u};
  for (int i = 0; i < 8; ++i) s[4 + i] = key[i];
  s[12] = counter, s[13] = nonce[0], s[14] = nonce[1], s[15] = nonce[2];
  uint32_t x[16];
  for (int i = 0; i < 16; ++i) x[i] = s[i];
  auto rotl = [](uint32_t v, int c) { return (v << c) | (v >> (32 - c)); };
  auto qr = [&](int a, int b, int c, int d) {
    x[a] += x[b], x[d] = rotl(x[d] ^ x[a], 16), x[c] += x[d], x[b] = rotl(x[b] ^ x[c], 12);
    x[a] += x[b], x[d] = rotl(x[d] ^ x[a], 8), x[c] += x[d], x[b] = rotl(x[b] ^ x[c], 7);
  };
  for (int r = 0; r < 10; ++r) {
    qr(0, 4, 8, 12), qr(1, 5, 9, 13), qr(2, 6, 10, 14), qr(3, 7, 11, 15);
    qr(0, 5, 10, 15), qr(1, 6, 11, 12), qr(2, 7, 8, 13), qr(3, 4, 9, 14);
  }
  for (int i = 0; i < 16; ++i) out[i] = x[i] + s[i];
}

// The row (d, q, n) of a seeded uniform polynomial (prng_impl.h's definition, one word at a time).
std::vector<uint32_t> uniform_row_ref(const uint32_t key[8], uint32_t d, uint32_t q, uint32_t n) {
  uint32_t mask = 1;
  while (mask < q) mask = 2 * mask + 1;
  std::vector<uint32_t> out;
  const uint32_t nonce[3] = {d, q, n};
  for (uint32_t g = 0; out.size() < n; ++g) {
    uint32_t blocks[16][16];
    for (uint32_t i = 0; i < 16; ++i) chacha20_block_ref(key, 16 * g + i, nonce, blocks[i]);
    for (int w = 0; w < 16; ++w)
      for (int i = 0; i < 16; ++i)
        if ((blocks[i][w] & mask) < q && out.size() < n) out.push_back(blocks[i][w] & mask);
  }
  return out;
}

void check_chacha_reference(Report& rep) {  // RFC 8439, 2.3.2
  uint32_t key[8], out[16];
  for (int i = 0; i < 8; ++i) key[i] = (uint32_t)(4 * i) | (uint32_t)(4 * i + 1) << 8 | (uint32_t)(4 * i + 2) << 16 |
                                       (uint32_t)(4 * i + 3) << 24;
  const uint32_t nonce[3] = {0x09000000u, 0x4a000000u, 0};
  const uint32_t want[16] = {0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3, 0xc7f4d1c7, 0x0368c033,
                             0x9aaa2204, 0x4e6cd4c3, 0x466482d2, 0x09aa9f07, 0x05d7c214, 0xa2028bd9,
                             0xd19c12b5, 0xb94e16de, 0xe883d0cb, 0x4e3c50a2};
  chacha20_block_ref(key, 1, nonce, out);
  for (int i = 0; i < 16; ++i)
    if (out[i] != want[i]) return rep.fail("reference", "ChaCha20 block (RFC 8439 test vector)");
}

void check_uniform(const Kernels& k, Report& rep, uint32_t q) {
  uint32_t key[8];
  for (uint32_t& w : key) w = (uint32_t)rnd();
  for (uint32_t n : {64u, 1000u}) {
    std::vector<uint32_t> out(n);
    k.uniform_row(out.data(), n, key, nullptr, 3, q);
    if (out != uniform_row_ref(key, 3, q, n)) return rep.fail(k.name, "seeded row q=" + std::to_string(q));
  }
}

void check_key_product(const Kernels& k, Report& rep, uint32_t q) {
  const size_t D = 3, n = 2048, batch = 2;  // n: two of the kernel's row pieces
  uint32_t key[8];
  for (uint32_t& w : key) w = (uint32_t)rnd();
  std::vector<uint32_t> a = random_residues(batch * D * n, q), b = random_residues(D * n, q), out(batch * 2 * n);
  std::vector<uint32_t> scratch(D * kKeyScratchPerDigit + kSeedScratchAlign);
  uint32_t inv = q;
  for (int it = 0; it < 5; ++it) inv *= 2u - q * inv;
  const uint32_t r = (uint32_t)((uint64_t{1} << 32) % q);
  // a compact key of each seed expansion: ChaCha20 (rows from the reference above), AES-128 (rows from uniform_row,
  // itself checked against the portable engine by check_aes_row)
  uint32_t rk[kAesRoundKeyWords];
  aes_expand_key(key, rk);
  for (const uint32_t* aes_rk : {(const uint32_t*)nullptr, (const uint32_t*)rk}) {
    k.key_product(out.data(), 2 * n, n, a.data(), D * n, n, b.data(), n, 0, D, batch, n, key, aes_rk, nullptr, q, inv,
                  r, shoup_of(r, q), scratch.data());
    std::vector<std::vector<uint32_t>> u;
    for (size_t d = 0; d < D; ++d) {
      if (aes_rk) {
        u.emplace_back(n);
        k.uniform_row(u.back().data(), n, key, aes_rk, (uint32_t)d, q);
      } else {
        u.push_back(uniform_row_ref(key, (uint32_t)d, q, (uint32_t)n));
      }
    }
    for (size_t bi = 0; bi < batch; ++bi)
      for (size_t t = 0; t < n; ++t) {
        uint64_t acc0 = 0, acc1 = 0;
        for (size_t d = 0; d < D; ++d) {
          acc0 = (acc0 + (uint64_t)mulmod(a[(bi * D + d) * n + t], b[d * n + t], q)) % q;
          acc1 = (acc1 + (uint64_t)mulmod(a[(bi * D + d) * n + t], u[d][t], q)) % q;
        }
        if (out[bi * 2 * n + t] != acc0 || out[bi * 2 * n + n + t] != acc1)
          return rep.fail(k.name, std::string("seeded inner product (") + (aes_rk ? "aes128ctr" : "chacha20") +
                                      ") q=" + std::to_string(q));
      }
  }
  // a full key (both halves stored), the digits read through a random permutation
  std::vector<uint32_t> full = random_residues(D * 2 * n, q);
  std::vector<int32_t> map(n);
  for (size_t i = 0; i < n; ++i) map[i] = (int32_t)i;
  for (size_t i = n - 1; i > 0; --i) std::swap(map[i], map[rnd() % (i + 1)]);
  k.key_product(out.data(), 2 * n, n, a.data(), D * n, n, full.data(), 2 * n, n, D, batch, n, nullptr, nullptr,
                map.data(), q, inv, r, shoup_of(r, q), scratch.data());
  for (size_t bi = 0; bi < batch; ++bi)
    for (size_t t = 0; t < n; ++t) {
      uint64_t acc0 = 0, acc1 = 0;
      for (size_t d = 0; d < D; ++d) {
        const uint64_t x = a[(bi * D + d) * n + (size_t)map[t]];
        acc0 = (acc0 + (uint64_t)mulmod(x, full[(2 * d) * n + t], q)) % q;
        acc1 = (acc1 + (uint64_t)mulmod(x, full[(2 * d + 1) * n + t], q)) % q;
      }
      if (out[bi * 2 * n + t] != acc0 || out[bi * 2 * n + n + t] != acc1)
        return rep.fail(k.name, "permuted inner product q=" + std::to_string(q));
    }
}

// The AES-128 engines: FIPS 197's example (Appendix C.1) through the key expansion and each engine, then every
// engine against the portable one over block counts that reach each engine's tails, and a seeded row of the
// "aes128ctr" expansion on every instruction set against one assembled here from the portable engine.
void check_aes(Report& rep) {
  uint32_t key[4], rk[kAesRoundKeyWords], out[4];
  for (uint32_t i = 0; i < 4; ++i) key[i] = (4 * i) | (4 * i + 1) << 8 | (4 * i + 2) << 16 | (4 * i + 3) << 24;
  aes_expand_key(key, rk);
  const uint32_t want[4] = {0xd8e0c469u, 0x30047b6au, 0x80b7cdd8u, 0x5ac5b470u};  // 69c4e0d8 6a7b0430 d8cdb780 70b4c55a
  for (size_t i = 0;; ++i) {
    const AesEngine* e = runnable_aes(i);
    if (!e) break;
    e->blocks(out, rk, 0x33221100u, 0x77665544u, 0xbbaa9988u, 0xffeeddccu, 1);  // plaintext 00112233..eeff
    if (std::memcmp(out, want, sizeof want) != 0) return rep.fail(e->name, "AES-128 (FIPS 197 C.1)");
    for (size_t blocks : {1u, 3u, 4u, 7u, 8u, 15u, 16u, 17u, 37u, 64u}) {
      std::vector<uint32_t> a(4 * blocks), b(4 * blocks);
      e->blocks(a.data(), rk, 0xFFFFFFF0u, 5, 1234577, 4096, blocks);  // the counter wraps past 2^32
      aes_soft::aes_blocks(b.data(), rk, 0xFFFFFFF0u, 5, 1234577, 4096, blocks);
      if (a != b) return rep.fail(e->name, "AES-128 counter blocks, " + std::to_string(blocks));
    }
  }
}

void check_aes_row(const Kernels& k, Report& rep, uint32_t q) {
  uint32_t key[8], rk[kAesRoundKeyWords];
  for (uint32_t& w : key) w = (uint32_t)rnd();
  aes_expand_key(key, rk);
  uint32_t mask = 1;
  while (mask < q) mask = 2 * mask + 1;
  for (uint32_t n : {64u, 1000u}) {
    std::vector<uint32_t> out(n), ref;
    k.uniform_row(out.data(), n, key, rk, 3, q);
    for (uint32_t c = 0; ref.size() < n; ++c) {
      uint32_t w[4];
      aes_soft::aes_blocks(w, rk, c, 3, q, n, 1);
      for (uint32_t v : w)
        if ((v & mask) < q && ref.size() < n) ref.push_back(v & mask);
    }
    if (out != ref) return rep.fail(k.name, "aes128ctr row q=" + std::to_string(q));
  }
}

}  // namespace
}  // namespace hemx

extern "C" {
// Runs the self-test on every instruction set built into the library that this CPU runs. Writes one line into
// report (NUL-terminated, truncated to cap) and returns how many instruction sets passed, or -1 on the first
// failure (the line says which check, on which instruction set).
__attribute__((visibility("default"))) int hemx_native_selftest(char* report, size_t cap) {
  using namespace hemx;
  g_state = 0x9E3779B97F4A7C15ull;
  Report rep;
  constexpr uint32_t kMaxN = 8192;
  const uint64_t bounds[3] = {1ull << 29, 1ull << 30, 1ull << 31};
  uint32_t qs[3], psis[3];
  for (int i = 0; i < 3; ++i) {
    qs[i] = prime_below(bounds[i], 2 * kMaxN);
    psis[i] = qs[i] ? root_2n(qs[i], kMaxN) : 0;
    if (!qs[i] || !psis[i]) rep.fail("setup", "no NTT prime below 2^" + std::to_string(29 + i));
  }
  check_chacha_reference(rep);
  check_aes(rep);
  int passed = 0;
  std::string names;
  for (size_t i = 0; !rep.failed; ++i) {
    const Kernels* k = runnable_kernels(i);
    if (!k) break;
    for (int m = 0; m < 3 && !rep.failed; ++m) {
      for (uint32_t n : {64u, 256u, kMaxN}) check_ntt(*k, rep, qs[m], n, psis[m], kMaxN);
      check_mul_shoup(*k, rep, qs[m]);
      check_inner_product(*k, rep, qs[m]);
      check_plain_sum(*k, rep, qs[m]);
      check_uniform(*k, rep, qs[m]);
      check_aes_row(*k, rep, qs[m]);
      check_key_product(*k, rep, qs[m]);
    }
    const std::vector<uint32_t> src = {qs[0], qs[1], qs[2]};
    const std::vector<uint32_t> dst = {prime_below(1ull << 31, 2 * kMaxN, 1), prime_below(1ull << 28, 2 * kMaxN)};
    for (bool centered : {false, true})
      if (!rep.failed) check_bconv(*k, rep, src, dst, centered);
    // wider conversions: whole and partial tiles of 16 sources and targets (the tile path), and past its 32
    // sources (where it hands over to the vector path); moduli from every range, a block inside the row
    for (size_t L : {7u, 16u, 20u, 33u}) {
      std::vector<uint32_t> many_src, many_dst;
      for (size_t i = 0; i < L; ++i) many_src.push_back(prime_below(bounds[i % 3], 2 * kMaxN, (int)(i / 3)));
      for (size_t j = 0; j < 37; ++j) many_dst.push_back(prime_below(bounds[j % 3], 2 * kMaxN, (int)(j / 3) + 12));
      for (bool centered : {false, true})
        if (!rep.failed) check_bconv(*k, rep, many_src, many_dst, centered, 512, 128, 256);
    }
    if (!rep.failed) check_gather(*k, rep);
    if (!rep.failed) {
      names += (passed ? ", " : "") + std::string(k->name);
      ++passed;
    }
  }
  if (!rep.failed) rep.text = "ok: " + names;
  if (report && cap) {
    std::strncpy(report, rep.text.c_str(), cap - 1);
    report[cap - 1] = '\0';
  }
  return rep.failed ? -1 : passed;
}
}
