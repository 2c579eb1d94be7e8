// Portable build of the kernels (no SIMD flags): the fallback, and every transform with n < 2 * width.
#include "kernels.h"

#define HEMX_ISA scalar
#define HEMX_ISA_WIDTH kWidthScalar

namespace hemx {
namespace HEMX_ISA {
struct V : ScalarV {
  template <int Mode>
  static void forward_tail(uint32_t*, size_t, size_t, uint32_t, const uint32_t*, const uint32_t*, size_t) {}
  template <bool Lazy>
  static size_t inverse_tail(uint32_t*, size_t, size_t, uint32_t, const uint32_t*, const uint32_t*) { return 1; }
};
}  // namespace HEMX_ISA
}  // namespace hemx

#include "ntt_impl.h"
