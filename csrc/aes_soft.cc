// AES-128 (FIPS 197) in portable C++: the key expansion every engine uses, and the engine of CPUs without AES
// instructions. Baseline code (no instruction-set flag). The S-box is computed from its definition (inverse in
// GF(2^8), then the affine map) by the compiler: constexpr, so nothing runs when the library loads.
//
// Not constant-time (table lookups indexed by state bytes). That is sound here: the stream expands a switching
// key's public uniform half from a seed that the key carries in the clear (a serialized compact key holds it), so
// the AES key is public.
#include <cstring>

#include "kernels.h"

namespace hemx {
namespace {

constexpr uint8_t xtime(uint8_t b) { return (uint8_t)((b << 1) ^ ((b & 0x80) ? 0x1B : 0)); }

constexpr uint8_t gmul(uint8_t a, uint8_t b) {
  uint8_t out = 0;
  for (int i = 0; i < 8; ++i) {
    if (b & 1) out ^= a;
    a = xtime(a);
    b >>= 1;
  }
  return out;
}

struct Sbox {
  uint8_t s[256];
};

constexpr Sbox make_sbox() {
  Sbox box{};
  for (int a = 0; a < 256; ++a) {
    uint8_t inv = 1, base = (uint8_t)a;  // a^254 = a^-1 in GF(2^8) (0 -> 0): few steps for any compiler's limit
    for (int e = 254; e; e >>= 1, base = gmul(base, base))
      if (e & 1) inv = gmul(inv, base);
    uint8_t y = inv;
    for (int k = 1; k < 5; ++k) y ^= (uint8_t)((inv << k) | (inv >> (8 - k)));
    box.s[a] = (uint8_t)(y ^ 0x63);
  }
  return box;
}

constexpr Sbox kSbox = make_sbox();
static_assert(kSbox.s[0x00] == 0x63 && kSbox.s[0x53] == 0xED && kSbox.s[0xFF] == 0x16, "S-box (FIPS 197, 5.1.1)");

void words_to_bytes(const uint32_t* w, size_t count, uint8_t* b) {
  for (size_t i = 0; i < count; ++i)
    for (int k = 0; k < 4; ++k) b[4 * i + k] = (uint8_t)(w[i] >> (8 * k));
}

uint32_t bytes_to_word(const uint8_t* b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

}  // namespace

// FIPS 197, 5.2: the 44 words of the AES-128 key schedule, each stored as its 4 bytes in order (so round key r is
// the 16 bytes rk[4r .. 4r + 3] in memory, as the AES instructions read it).
void aes_expand_key(const uint32_t* key, uint32_t* rk) {
  uint8_t w[176];
  words_to_bytes(key, 4, w);
  uint8_t rcon = 1;
  for (int i = 4; i < 44; ++i) {
    uint8_t t[4] = {w[4 * i - 4], w[4 * i - 3], w[4 * i - 2], w[4 * i - 1]};
    if (i % 4 == 0) {
      const uint8_t first = t[0];
      t[0] = (uint8_t)(kSbox.s[t[1]] ^ rcon), t[1] = kSbox.s[t[2]], t[2] = kSbox.s[t[3]], t[3] = kSbox.s[first];
      rcon = xtime(rcon);
    }
    for (int k = 0; k < 4; ++k) w[4 * i + k] = (uint8_t)(w[4 * (i - 4) + k] ^ t[k]);
  }
  for (int i = 0; i < 44; ++i) rk[i] = bytes_to_word(w + 4 * i);
}

namespace aes_soft {

void aes_blocks(uint32_t* out, const uint32_t* rk, uint32_t c0, uint32_t d, uint32_t q, uint32_t n, size_t blocks) {
  uint8_t keys[176];
  words_to_bytes(rk, kAesRoundKeyWords, keys);
  for (size_t blk = 0; blk < blocks; ++blk) {
    const uint32_t in[4] = {c0 + (uint32_t)blk, d, q, n};
    uint8_t s[16], t[16];
    words_to_bytes(in, 4, s);
    for (int i = 0; i < 16; ++i) s[i] ^= keys[i];
    for (int r = 1; r <= 10; ++r) {
      for (int c = 0; c < 4; ++c)  // SubBytes and ShiftRows: byte (row, col) of the state is s[4 col + row]
        for (int row = 0; row < 4; ++row) t[4 * c + row] = kSbox.s[s[4 * ((c + row) % 4) + row]];
      if (r < 10) {
        for (int c = 0; c < 4; ++c) {  // MixColumns
          const uint8_t a0 = t[4 * c], a1 = t[4 * c + 1], a2 = t[4 * c + 2], a3 = t[4 * c + 3];
          s[4 * c] = (uint8_t)(xtime(a0) ^ xtime(a1) ^ a1 ^ a2 ^ a3);
          s[4 * c + 1] = (uint8_t)(a0 ^ xtime(a1) ^ xtime(a2) ^ a2 ^ a3);
          s[4 * c + 2] = (uint8_t)(a0 ^ a1 ^ xtime(a2) ^ xtime(a3) ^ a3);
          s[4 * c + 3] = (uint8_t)(xtime(a0) ^ a0 ^ a1 ^ a2 ^ xtime(a3));
        }
      } else {
        std::memcpy(s, t, 16);
      }
      for (int i = 0; i < 16; ++i) s[i] ^= keys[16 * r + i];
    }
    for (int i = 0; i < 4; ++i) out[4 * blk + i] = bytes_to_word(s + 4 * i);
  }
}

}  // namespace aes_soft
}  // namespace hemx
