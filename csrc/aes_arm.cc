// AES-128 counter stream on AArch64's AES instructions (FEAT_AES; this file alone is compiled with
// -march=armv8-a+crypto; dispatch.cc calls it only where the kernel reports HWCAP_AES). AESE is AddRoundKey then
// SubBytes and ShiftRows, AESMC MixColumns: nine AESE + AESMC pairs, a last AESE and the last round key's XOR.
#include <arm_neon.h>

#include "kernels.h"

namespace hemx {
namespace aes_arm {

void aes_blocks(uint32_t* out, const uint32_t* rk, uint32_t c0, uint32_t d, uint32_t q, uint32_t n, size_t blocks) {
  uint8x16_t k[11];
  for (int r = 0; r < 11; ++r) k[r] = vreinterpretq_u8_u32(vld1q_u32(rk + 4 * r));
  constexpr size_t B = 4;
  size_t i = 0;
  for (; i < blocks; i += B) {
    const size_t m = blocks - i < B ? blocks - i : B;
    uint8x16_t s[B];
    for (size_t j = 0; j < m; ++j) {
      const uint32_t w[4] = {c0 + (uint32_t)(i + j), d, q, n};
      s[j] = vreinterpretq_u8_u32(vld1q_u32(w));
    }
    for (int r = 0; r < 9; ++r)
      for (size_t j = 0; j < m; ++j) s[j] = vaesmcq_u8(vaeseq_u8(s[j], k[r]));
    for (size_t j = 0; j < m; ++j) vst1q_u32(out + 4 * (i + j), vreinterpretq_u32_u8(veorq_u8(vaeseq_u8(s[j], k[9]), k[10])));
  }
}

}  // namespace aes_arm
}  // namespace hemx
