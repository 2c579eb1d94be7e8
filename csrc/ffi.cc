// hemx native kernels: XLA FFI handlers, runtime CPU dispatch and the work split over XLA's thread pool.
//
// Handlers (registered from Python with jax.ffi.register_ffi_target(..., platform="cpu")):
//   hemx_ntt_forward(x (..., L, N), q (L,), w (L, N), ws (L, N)) -> (..., L, N)
//   hemx_ntt_inverse(x (..., L, N), q (L,), w (L, N), ws (L, N), scal (L, 4)) -> (..., L, N)
//   hemx_mul_shoup(x (..., L, N), q (L,), w (L, N), ws (L, N)) -> (..., L, N)     (x * w mod q)
//   hemx_butterfly_probe(x (K, n), q (K,), tw (K, 2); reps) -> (K, n)           (roofline probe)
// All uint32. Each (batch, limb) polynomial is one unit of work; units are claimed from an atomic counter by
// the calling thread and by helpers scheduled on the thread pool XLA hands the handler, so no thread is ever
// created per call and a helper that starts late finds nothing left and returns (no waiting on the pool).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "kernels.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace hemx {
namespace {

Kernels pick_best() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
    return kernels_avx512();
  if (__builtin_cpu_supports("avx2")) return kernels_avx2();
  return kernels_scalar();
}

const Kernels kScalar = kernels_scalar();
std::atomic<const Kernels*> g_active{nullptr};
Kernels g_slots[3];

const Kernels& active() {
  const Kernels* k = g_active.load(std::memory_order_acquire);
  if (!k) {
    g_slots[0] = pick_best();
    g_active.store(&g_slots[0], std::memory_order_release);
    k = &g_slots[0];
  }
  return *k;
}

std::atomic<int> g_max_threads{0};  // 0: as many as XLA's pool has

struct Work {
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  size_t total = 0, chunk = 1;
  std::mutex mu;
  std::condition_variable cv;
};

// Run body(unit) for unit in [0, total) on the caller plus up to threads - 1 pool helpers.
template <class F>
void parallel_for(ffi::ThreadPool& pool, size_t total, size_t chunk, F body) {
  int64_t threads = pool.num_threads();
  const int cap = g_max_threads.load();
  if (cap > 0) threads = std::min<int64_t>(threads, cap);
  const size_t chunks = (total + chunk - 1) / chunk;
  if (threads <= 1 || chunks <= 1) {
    for (size_t u = 0; u < total; ++u) body(u);
    return;
  }
  auto work = std::make_shared<Work>();
  work->total = total;
  work->chunk = chunk;
  auto run = [work, chunk, total, body]() {
    for (;;) {
      const size_t c = work->next.fetch_add(1);
      const size_t lo = c * chunk;
      if (lo >= total) return;
      const size_t hi = std::min(total, lo + chunk);
      for (size_t u = lo; u < hi; ++u) body(u);
      if (work->done.fetch_add(hi - lo) + (hi - lo) == total) {
        std::lock_guard<std::mutex> lock(work->mu);
        work->cv.notify_all();
      }
    }
  };
  const int64_t helpers = std::min<int64_t>(threads - 1, (int64_t)chunks - 1);
  for (int64_t t = 0; t < helpers; ++t) pool.Schedule(decltype(run)(run));
  run();
  std::unique_lock<std::mutex> lock(work->mu);
  work->cv.wait(lock, [&] { return work->done.load() == total; });
}

// Shape checks shared by the handlers: x (..., L, N) and the per-limb tables.
ffi::Error check(const ffi::AnyBuffer::Dimensions& xd, size_t q_count, size_t w_count, size_t& limbs, size_t& n,
                 size_t& batch) {
  if (xd.size() < 2) return ffi::Error::InvalidArgument("hemx native: data must be shaped (..., L, N)");
  n = (size_t)xd[xd.size() - 1];
  limbs = (size_t)xd[xd.size() - 2];
  batch = 1;
  for (size_t i = 0; i + 2 < xd.size(); ++i) batch *= (size_t)xd[i];
  if (n < 2 || (n & (n - 1))) return ffi::Error::InvalidArgument("hemx native: N must be a power of two >= 2");
  if (q_count != limbs || w_count != limbs * n)
    return ffi::Error::InvalidArgument("hemx native: tables do not match the data's (L, N)");
  return ffi::Error::Success();
}

size_t chunk_for(size_t n) { return std::max<size_t>(1, 8192 / n); }

const Kernels& for_size(size_t n) {
  const Kernels& k = active();
  return n >= 2 * k.width ? k : kScalar;
}

ffi::Error NttForward(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::U32> q,
                      ffi::Buffer<ffi::U32> w, ffi::Buffer<ffi::U32> ws, ffi::ResultBuffer<ffi::U32> y) {
  size_t limbs, n, batch;
  if (auto e = check(x.dimensions(), q.element_count(), w.element_count(), limbs, n, batch); e.failure()) return e;
  if (ws.element_count() != limbs * n) return ffi::Error::InvalidArgument("hemx native: shoup table shape");
  const Kernels& k = for_size(n);
  const uint32_t *xs = x.typed_data(), *qs = q.typed_data(), *wt = w.typed_data(), *st = ws.typed_data();
  uint32_t* out = y->typed_data();
  parallel_for(pool, batch * limbs, chunk_for(n), [=, &k](size_t u) {
    const size_t l = u % limbs;
    uint32_t* a = out + u * n;
    if (a != xs + u * n) std::memcpy(a, xs + u * n, n * sizeof(uint32_t));
    k.forward(a, n, qs[l], wt + l * n, st + l * n);
  });
  return ffi::Error::Success();
}

ffi::Error NttInverse(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::U32> q,
                      ffi::Buffer<ffi::U32> w, ffi::Buffer<ffi::U32> ws, ffi::Buffer<ffi::U32> scal,
                      ffi::ResultBuffer<ffi::U32> y) {
  size_t limbs, n, batch;
  if (auto e = check(x.dimensions(), q.element_count(), w.element_count(), limbs, n, batch); e.failure()) return e;
  if (ws.element_count() != limbs * n || scal.element_count() != limbs * 4)
    return ffi::Error::InvalidArgument("hemx native: inverse tables shape");
  const Kernels& k = for_size(n);
  const uint32_t *xs = x.typed_data(), *qs = q.typed_data(), *wt = w.typed_data(), *st = ws.typed_data();
  const uint32_t* sc = scal.typed_data();
  uint32_t* out = y->typed_data();
  parallel_for(pool, batch * limbs, chunk_for(n), [=, &k](size_t u) {
    const size_t l = u % limbs;
    uint32_t* a = out + u * n;
    if (a != xs + u * n) std::memcpy(a, xs + u * n, n * sizeof(uint32_t));
    k.inverse(a, n, qs[l], wt + l * n, st + l * n, sc + 4 * l);
  });
  return ffi::Error::Success();
}

ffi::Error MulShoup(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::U32> q,
                    ffi::Buffer<ffi::U32> w, ffi::Buffer<ffi::U32> ws, ffi::ResultBuffer<ffi::U32> y) {
  size_t limbs, n, batch;
  if (auto e = check(x.dimensions(), q.element_count(), w.element_count(), limbs, n, batch); e.failure()) return e;
  if (ws.element_count() != limbs * n) return ffi::Error::InvalidArgument("hemx native: shoup table shape");
  const Kernels& k = active();
  const uint32_t *xs = x.typed_data(), *qs = q.typed_data(), *wt = w.typed_data(), *st = ws.typed_data();
  uint32_t* out = y->typed_data();
  parallel_for(pool, batch * limbs, chunk_for(n), [=, &k](size_t u) {
    const size_t l = u % limbs;
    k.mul_shoup(out + u * n, xs + u * n, wt + l * n, st + l * n, n, qs[l]);
  });
  return ffi::Error::Success();
}

ffi::Error ButterflyProbe(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::U32> q,
                          ffi::Buffer<ffi::U32> tw, ffi::ResultBuffer<ffi::U32> y, int64_t reps) {
  auto xd = x.dimensions();
  if (xd.size() != 2) return ffi::Error::InvalidArgument("hemx native: probe data must be (K, n)");
  const size_t rows = (size_t)xd[0], n = (size_t)xd[1];
  const Kernels& k = active();
  if (n < 4 * k.width || (n & (n - 1)) || q.element_count() != rows || tw.element_count() != 2 * rows || reps < 0)
    return ffi::Error::InvalidArgument("hemx native: bad probe arguments");
  const uint32_t *xs = x.typed_data(), *qs = q.typed_data(), *tws = tw.typed_data();
  uint32_t* out = y->typed_data();
  parallel_for(pool, rows, 1, [=, &k](size_t r) {
    std::memcpy(out + r * n, xs + r * n, n * sizeof(uint32_t));
    k.butterfly_probe(out + r * n, n, qs[r], tws[2 * r], tws[2 * r + 1], (uint64_t)reps);
  });
  return ffi::Error::Success();
}

}  // namespace
}  // namespace hemx

XLA_FFI_DEFINE_HANDLER_SYMBOL(HemxNttForward, hemx::NttForward,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(HemxNttInverse, hemx::NttInverse,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(HemxMulShoup, hemx::MulShoup,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(HemxButterflyProbe, hemx::ButterflyProbe,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>()
                                  .Attr<int64_t>("reps"));

// Plain C entry points for ctypes: which instruction set runs, forcing a lower one (tests), a thread cap.
extern "C" {
__attribute__((visibility("default"))) const char* hemx_native_isa() { return hemx::active().name; }

// name: "avx512", "avx2", "scalar" or "auto"; returns 0 on success, -1 if unknown or unsupported here.
__attribute__((visibility("default"))) int hemx_native_set_isa(const char* name) {
  using namespace hemx;
  __builtin_cpu_init();
  Kernels k;
  if (!std::strcmp(name, "auto")) k = pick_best();
  else if (!std::strcmp(name, "scalar")) k = kernels_scalar();
  else if (!std::strcmp(name, "avx2") && __builtin_cpu_supports("avx2")) k = kernels_avx2();
  else if (!std::strcmp(name, "avx512") && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
    k = kernels_avx512();
  else return -1;
  static std::atomic<int> slot{1};
  Kernels* dst = &g_slots[1 + (slot.fetch_add(1) & 1)];  // not the slot currently active
  if (dst == g_active.load()) dst = &g_slots[dst == &g_slots[1] ? 2 : 1];
  *dst = k;
  g_active.store(dst, std::memory_order_release);
  return 0;
}

// Upper bound on the threads one call uses (0: XLA's pool size).
__attribute__((visibility("default"))) void hemx_native_set_max_threads(int n) { hemx::g_max_threads.store(n); }
}
