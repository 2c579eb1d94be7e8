// Portable build of the kernels (no SIMD flags): the fallback, and every transform with n < 2 * width.
#include "kernels.h"

#define HEMX_ISA scalar
#define HEMX_ISA_WIDTH kWidthScalar

namespace hemx {
namespace HEMX_ISA {
struct V : ScalarV {
  static constexpr bool kGenericTail = true;  // unused: with one lane the sweeps run every stage
};
}  // namespace HEMX_ISA
}  // namespace hemx

#include "ntt_impl.h"
