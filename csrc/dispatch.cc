// hemx native kernels: which instruction set runs. Baseline code (no -m flag): the only file that asks the CPU
// what it supports, and the only place the per-ISA tables are built (constexpr: no code runs when the library
// loads). The active table is published through an atomic pointer to one of these immutable tables; a handler
// takes it once at entry (active_kernels()), so switching (set_isa) never changes a table a call is reading.
#include <atomic>
#include <cstring>

#include "kernels.h"

namespace hemx {
namespace {

#define HEMX_TABLE(ns, width)                                                                                      \
  Kernels {                                                                                                        \
    #ns, width, &ns::forward, &ns::inverse, &ns::mul_shoup, &ns::butterfly_probe, &ns::bconv_block,               \
        &ns::inner_product, &ns::gather, &ns::uniform_row, &ns::key_product                                        \
  }

constexpr Kernels kScalarTable = HEMX_TABLE(scalar, kWidthScalar);
#if HEMX_ARCH_X86
constexpr Kernels kAvx2Table = HEMX_TABLE(avx2, kWidthAvx2);
constexpr Kernels kAvx512Table = HEMX_TABLE(avx512, kWidthAvx512);
#elif HEMX_ARCH_ARM64
constexpr Kernels kNeonTable = HEMX_TABLE(neon, kWidthNeon);
#endif

// Every table built into this library, best first, with whether `auto` may pick it.
struct Entry {
  const Kernels* table;
  bool automatic;
};
constexpr Entry kBuilt[] = {
#if HEMX_ARCH_X86
    {&kAvx512Table, true},
    {&kAvx2Table, true},
#elif HEMX_ARCH_ARM64
    {&kNeonTable, false},  // unmeasured on AArch64 hardware: chosen only when asked (ntt_neon.cc)
#endif
    {&kScalarTable, true},
};

bool cpu_runs(const Kernels* k) {
#if HEMX_ARCH_X86
  __builtin_cpu_init();
  if (k == &kAvx512Table)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  if (k == &kAvx2Table) return __builtin_cpu_supports("avx2");
#endif
  (void)k;
  return true;  // scalar everywhere; NEON is part of the AArch64 baseline
}

const Kernels* best() {
  for (const Entry& e : kBuilt)
    if (e.automatic && cpu_runs(e.table)) return e.table;
  return &kScalarTable;
}

std::atomic<const Kernels*> g_active{nullptr};

}  // namespace

const Kernels& active_kernels() {
  const Kernels* k = g_active.load(std::memory_order_acquire);
  if (!k) {
    const Kernels* picked = best();
    // the first caller publishes; a racing one keeps what was published (both picked the same table)
    g_active.compare_exchange_strong(k, picked, std::memory_order_acq_rel);
    k = g_active.load(std::memory_order_acquire);
  }
  return *k;
}

const Kernels& scalar_kernels() { return kScalarTable; }

// For selftest.cc: the i-th table built into this library that this CPU runs (nullptr past the last).
const Kernels* runnable_kernels(size_t i) {
  for (const Entry& e : kBuilt)
    if (cpu_runs(e.table) && i-- == 0) return e.table;
  return nullptr;
}

}  // namespace hemx

// Plain C entry points for ctypes: which instruction set runs, which are built and runnable, forcing one.
extern "C" {
__attribute__((visibility("default"))) const char* hemx_native_isa() { return hemx::active_kernels().name; }

// Comma-separated names of the instruction sets built into this library, best first ("avx512,avx2,scalar").
__attribute__((visibility("default"))) const char* hemx_native_built_isas() {
#if HEMX_ARCH_X86
  return "avx512,avx2,scalar";
#elif HEMX_ARCH_ARM64
  return "neon,scalar";
#else
  return "scalar";
#endif
}

// name: one of hemx_native_built_isas() or "auto". Returns 0 on success, -1 for a name this library does not
// have, -2 for one this CPU cannot run (nothing changes then).
__attribute__((visibility("default"))) int hemx_native_set_isa(const char* name) {
  using namespace hemx;
  if (!name) return -1;
  if (!std::strcmp(name, "auto")) {
    g_active.store(best(), std::memory_order_release);
    return 0;
  }
  for (const Entry& e : kBuilt) {
    if (std::strcmp(name, e.table->name) != 0) continue;
    if (!cpu_runs(e.table)) return -2;
    g_active.store(e.table, std::memory_order_release);
    return 0;
  }
  return -1;
}
}
