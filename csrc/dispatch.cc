// hemx native kernels: which instruction set runs. Baseline code (no -m flag): the only file that asks the CPU
// what it supports, and the only place the per-ISA tables are built (constexpr: no code runs when the library
// loads). The active table is published through an atomic pointer to one of these immutable tables; a handler
// takes it once at entry (active_kernels()), so switching (set_isa) never changes a table a call is reading.
#include <atomic>
#include <cstring>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif
#endif

#include "kernels.h"

namespace hemx {
namespace {

#define HEMX_TABLE(ns, width)                                                                                      \
  Kernels {                                                                                                        \
    #ns, width, &ns::forward, &ns::inverse, &ns::mul_shoup, &ns::butterfly_probe, &ns::bconv_block,               \
        &ns::inner_product, &ns::plain_sum, &ns::gather, &ns::uniform_row, &ns::key_product, false              \
  }

constexpr Kernels kScalarTable = HEMX_TABLE(scalar, kWidthScalar);
#if HEMX_ARCH_X86
constexpr Kernels kAvx2Table = HEMX_TABLE(avx2, kWidthAvx2);
constexpr Kernels kAvx512Table = HEMX_TABLE(avx512, kWidthAvx512);
#if HEMX_HAVE_AMX
// AVX-512 with the basis conversion on AMX tiles (ntt_amx.cc)
constexpr Kernels kAmxTable = {"amx", kWidthAvx512, &avx512::forward, &avx512::inverse, &avx512::mul_shoup,
                               &avx512::butterfly_probe, &amx::bconv_block, &avx512::inner_product,
                               &avx512::plain_sum, &avx512::gather,
                               &avx512::uniform_row, &avx512::key_product, true};
#endif
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
#if HEMX_HAVE_AMX
    {&kAmxTable, false},  // chosen when asked (the planner asks where it measured it faster: hemx/plan/engine.py)
#endif
    {&kAvx512Table, true},
    {&kAvx2Table, true},
#elif HEMX_ARCH_ARM64
    {&kNeonTable, false},  // unmeasured on AArch64 hardware: chosen only when asked (ntt_neon.cc)
#endif
    {&kScalarTable, true},
};

#if HEMX_ARCH_X86
bool avx512_runs() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
}

// Bit `bit` of register `reg` (0 eax, 1 ebx, 2 ecx, 3 edx) of CPUID leaf `leaf`, subleaf `sub` (for the features
// older compilers' __builtin_cpu_supports does not name: VAES, AMX); false where the leaf is beyond the CPU's.
bool cpuid_bit(unsigned leaf, unsigned sub, int reg, int bit) {
  unsigned r[4];
  __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf & 0x80000000u), "c"(0));
  if (r[0] < leaf) return false;
  __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
  return (r[reg] >> bit) & 1;
}

#if HEMX_HAVE_AMX
// AMX-TILE and AMX-INT8 in CPUID (leaf 7, EDX bits 24 and 25), the tile state enabled by the OS in XCR0 (bits 17
// and 18), and this process granted the tile data by the kernel (Linux 5.16+: ARCH_REQ_XCOMP_PERM; process-wide,
// asked once). Until all of these hold no tile instruction may run: it would fault.
int ask_amx() {
#if defined(__linux__)
  if (!cpuid_bit(7, 0, 3, 24) || !cpuid_bit(7, 0, 3, 25)) return 0;  // AMX-TILE, AMX-INT8
  if (!cpuid_bit(1, 0, 2, 27)) return 0;                            // OSXSAVE: xgetbv is available
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return 0;
  constexpr long kReqXcompPerm = 0x1023, kGetXcompPerm = 0x1022, kXtileData = 18;
  if (syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) != 0) return 0;
  unsigned long long granted = 0;
  if (syscall(SYS_arch_prctl, kGetXcompPerm, &granted) != 0) return 0;
  return ((granted >> kXtileData) & 1) ? 1 : 0;
#else
  return 0;
#endif
}

bool amx_runs() {
  static std::atomic<int> state{-1};  // -1: not asked yet (a race asks twice; the answer is the same)
  int s = state.load(std::memory_order_acquire);
  if (s < 0) state.store(s = avx512_runs() ? ask_amx() : 0, std::memory_order_release);
  return s == 1;
}
#endif
#endif

bool cpu_runs(const Kernels* k) {
#if HEMX_ARCH_X86
#if HEMX_HAVE_AMX
  if (k == &kAmxTable) return amx_runs();
#endif
  if (k == &kAvx512Table) return avx512_runs();
  if (k == &kAvx2Table) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
  }
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

// ---------------------------------------------------------------------------------------------- AES engines
// Best first; each runnable where the CPU has its instructions (aes_soft everywhere).
constexpr AesEngine kAesSoft = {"soft", &aes_soft::aes_blocks};
#if HEMX_ARCH_X86
#if !defined(HEMX_NO_VAES)
constexpr AesEngine kAesVaes = {"vaes", &aes_vaes::aes_blocks};
#endif
constexpr AesEngine kAesNi = {"aesni", &aes_ni::aes_blocks};
constexpr const AesEngine* kAesBuilt[] = {
#if !defined(HEMX_NO_VAES)
    &kAesVaes,
#endif
    &kAesNi, &kAesSoft};
#elif HEMX_ARCH_ARM64
constexpr AesEngine kAesArm = {"armv8", &aes_arm::aes_blocks};
constexpr const AesEngine* kAesBuilt[] = {&kAesArm, &kAesSoft};
#else
constexpr const AesEngine* kAesBuilt[] = {&kAesSoft};
#endif

bool aes_runs(const AesEngine* e) {
#if HEMX_ARCH_X86
  __builtin_cpu_init();
#if !defined(HEMX_NO_VAES)
  if (e == &kAesVaes) return avx512_runs() && cpuid_bit(7, 0, 2, 9) && cpuid_bit(1, 0, 2, 25);  // VAES, AES-NI
#endif
  if (e == &kAesNi) return cpuid_bit(1, 0, 2, 25) && cpuid_bit(1, 0, 2, 19);  // AES-NI, SSE4.1
#elif HEMX_ARCH_ARM64
  if (e == &kAesArm) {
#if defined(__linux__)
    return (getauxval(AT_HWCAP) & HWCAP_AES) != 0;
#else
    return false;
#endif
  }
#endif
  (void)e;
  return true;
}

const AesEngine* best_aes() {
  for (const AesEngine* e : kAesBuilt)
    if (aes_runs(e)) return e;
  return &kAesSoft;
}

std::atomic<const AesEngine*> g_aes{nullptr};

}  // namespace

const AesEngine& active_aes() {
  const AesEngine* e = g_aes.load(std::memory_order_acquire);
  if (!e) {
    const AesEngine* picked = best_aes();
    g_aes.compare_exchange_strong(e, picked, std::memory_order_acq_rel);
    e = g_aes.load(std::memory_order_acquire);
  }
  return *e;
}

const AesEngine* runnable_aes(size_t i) {
  for (const AesEngine* e : kAesBuilt)
    if (aes_runs(e) && i-- == 0) return e;
  return nullptr;
}

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
#if HEMX_ARCH_X86 && HEMX_HAVE_AMX
  return "amx,avx512,avx2,scalar";
#elif HEMX_ARCH_X86
  return "avx512,avx2,scalar";
#elif HEMX_ARCH_ARM64
  return "neon,scalar";
#else
  return "scalar";
#endif
}

// The AES engine the "aes128ctr" streams run on ("vaes", "aesni", "armv8" or "soft"), and the ones this CPU runs,
// best first, comma-separated.
__attribute__((visibility("default"))) const char* hemx_native_aes() { return hemx::active_aes().name; }

__attribute__((visibility("default"))) int hemx_native_set_aes(const char* name) {
  using namespace hemx;
  if (!name) return -1;
  if (!std::strcmp(name, "auto")) {
    g_aes.store(best_aes(), std::memory_order_release);
    return 0;
  }
  for (const AesEngine* e : kAesBuilt) {
    if (std::strcmp(name, e->name) != 0) continue;
    if (!aes_runs(e)) return -2;
    g_aes.store(e, std::memory_order_release);
    return 0;
  }
  return -1;
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
