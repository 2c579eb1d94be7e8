// The lazy modular operations every vector kernel is built from, on the including file's traits V (defined before
// this header, in hemx::HEMX_ISA): conditional subtraction and the Shoup product. Internal linkage: each
// instruction set's object has its own copy (kernels.h states the rule).
#pragma once

#include "kernels.h"

namespace hemx {
namespace HEMX_ISA {

using R = V::reg;

// min(x, x - c) subtracts c when x >= c (unsigned wrap-around makes x - c huge otherwise); needs c <= 2^31.
static inline R csub(R x, R c) { return V::min(x, V::sub(x, c)); }

// a * w mod q in [0, 2q) for any uint32 a, known w < q and ws = floor(w 2^32 / q).
static inline R mul_lazy(R a, R w, R ws, R q) {
  R hi = V::mulhi(a, ws);
  return V::sub(V::mullo(a, w), V::mullo(hi, q));
}

}  // namespace HEMX_ISA
}  // namespace hemx
