// hemx native kernels: XLA FFI handlers, runtime CPU dispatch and the work split over XLA's thread pool.
//
// Handlers (registered from Python with jax.ffi.register_ffi_target(..., platform="cpu")):
//   hemx_ntt_forward(x (..., L, N), q (L,), w (R, N), ws (R, N), rows (L,) s32) -> (..., L, N)
//   hemx_ntt_inverse(x (..., L, N), q (L,), w (R, N), ws (R, N), scal (L, 4), rows (L,) s32) -> (..., L, N)
//   hemx_mul_shoup(x (..., L, N), q (L,), w (L, N), ws (L, N)) -> (..., L, N)     (x * w mod q)
//   hemx_butterfly_probe(x (K, n), q (K,), tw (K, 2); reps) -> (K, n)           (roofline probe)
//   hemx_automorphism(x (..., L, N), map (N,) s32) -> (..., L, N)                 (out = x[..., map])
//   hemx_inner_product(a (..., D, m, N), b (D, K, m, N), q (m,)) -> (..., K, m, N)  (sum_d a_d b_d mod q)
//   hemx_plain_sums(q (m,), x_i (..., K, m, N) ..., w_d blocks (r, N / b) ...; parts, pieces, groups)
//                   -> G x (..., K, m, N)                                      (grouped plaintext products, PlainSums)
//   hemx_bconv(x (..., L, N), q (L,), qhinv (L,), p (L',), c (L, L'), corr (L, L'); centered) -> (..., L', N)
//   hemx_uniform(digits (D,) s32, key (8,), q (m,); n, xof) -> (D, m, n)           (seeded rows, see Uniform)
//   hemx_key_product(a (..., D, m, N), b (Dk, K, Mk, N), key (8,), q (m,), map (N,) s32; seeded, permuted, xof)
//                    -> (..., 2, m, N)                                            (key-switching product, KeyProduct)
//   hemx_modup(x (..., nq, N) or (..., P, nq, N), q (m,), w, ws, wi, wis (R, N), scal (m, 4), rows (m,),
//              digits (D, 2), qhinv (nq,), c, corr (flat), map (N,) or (0,); centered, part)
//              -> (..., D, m, N)                                                 (fused ModUp, see ModUp)
//   hemx_divide(x (..., M, N), keep (K,), drop (Dd,), qk, qd, w, ws, rows_k, wi, wis, scal_d, rows_d, qhinv,
//               c (Dd, K), corr (Dd, K), inv (K,), addend (..., A, K, N) or (0,), map (N,) or (0,);
//               addend_part, centered) -> (..., K, N)                            (ModDown / rescale, see Divide)
// All uint32. Each (batch, limb) polynomial is one unit of work; units are claimed from an atomic counter by
// the calling thread and by helpers scheduled on the thread pool XLA hands the handler, so no thread is ever
// created per call and a helper that starts late finds nothing left and returns (no waiting on the pool).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "conv_tables.h"
#include "kernels.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace hemx {
namespace {

std::atomic<int> g_max_threads{0};  // 0: as many as XLA's pool has

struct Work {
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::atomic<bool> failed{false};
  size_t total = 0, chunk = 1;
  std::mutex mu;
  std::condition_variable cv;
};

// Below this many residues of work a call runs on the caller's thread alone. Handing a few microseconds of work
// to a pool helper costs a wake-up, and on a loaded machine the caller then waits for a helper that was preempted
// mid-chunk (measured at N = 2^12: Rotate and HE-Mult+Rescale medians of 0.6-7 ms against 0.45-0.7 ms). 2^16
// residues is one limb at N = 2^16, 16 limbs at N = 2^12: under a millisecond of work on one core.
constexpr size_t kInlineResidues = size_t(1) << 16;
std::atomic<size_t> g_inline_residues{kInlineResidues};  // hemx_native_set_inline_residues (tests: 0 threads all)

// Run body(unit) for unit in [0, total) on the caller plus up to threads - 1 pool helpers; `residues` is the
// call's whole work (the caller's estimate, in residues touched), for the inline rule above. A body that throws
// (an allocation failure in a per-thread buffer) stops the work and the call returns an error: an exception never
// leaves a pool thread (that would end the process) and the caller never waits for units that will not be done.
template <class F>
ffi::Error parallel_for(ffi::ThreadPool& pool, size_t total, size_t chunk, size_t residues, F body) {
  int64_t threads = pool.num_threads();
  const int cap = g_max_threads.load();
  if (cap > 0) threads = std::min<int64_t>(threads, cap);
  const size_t chunks = (total + chunk - 1) / chunk;
  if (threads <= 1 || chunks <= 1 || residues < g_inline_residues.load()) {
    try {
      for (size_t u = 0; u < total; ++u) body(u);
    } catch (const std::bad_alloc&) {
      return ffi::Error(ffi::ErrorCode::kResourceExhausted, "hemx native: out of memory");
    } catch (const std::exception& e) {
      return ffi::Error::Internal(std::string("hemx native: ") + e.what());
    }
    return ffi::Error::Success();
  }
  std::shared_ptr<Work> work;
  try {
    work = std::make_shared<Work>();
  } catch (const std::bad_alloc&) {
    return ffi::Error(ffi::ErrorCode::kResourceExhausted, "hemx native: out of memory");
  }
  work->total = total;
  work->chunk = chunk;
  auto run = [work, chunk, total, body]() noexcept {
    for (;;) {
      const size_t c = work->next.fetch_add(1);
      const size_t lo = c * chunk;
      if (lo >= total) return;
      const size_t hi = std::min(total, lo + chunk);
      if (!work->failed.load(std::memory_order_relaxed)) {
        try {
          for (size_t u = lo; u < hi; ++u) body(u);
        } catch (...) {
          work->failed.store(true);
        }
      }
      if (work->done.fetch_add(hi - lo) + (hi - lo) == total) {
        std::lock_guard<std::mutex> lock(work->mu);
        work->cv.notify_all();
      }
    }
  };
  const int64_t helpers = std::min<int64_t>(threads - 1, (int64_t)chunks - 1);
  for (int64_t t = 0; t < helpers; ++t) pool.Schedule(decltype(run)(run));
  run();
  {
    std::unique_lock<std::mutex> lock(work->mu);
    work->cv.wait(lock, [&] { return work->done.load() == total; });
  }
  if (work->failed.load()) return ffi::Error(ffi::ErrorCode::kResourceExhausted, "hemx native: a work unit failed (out of memory)");
  return ffi::Error::Success();
}

// Catches what a handler's own allocations throw, so a failure is an ffi::Error and never std::terminate.
template <class F>
ffi::Error guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return ffi::Error(ffi::ErrorCode::kResourceExhausted, "hemx native: out of memory");
  } catch (const std::exception& e) {
    return ffi::Error::Internal(std::string("hemx native: ") + e.what());
  } catch (...) {
    return ffi::Error::Internal("hemx native: unexpected exception");
  }
}

// The result buffer must be exactly `want` (its dtype is checked by the binding): XLA allocates it from the
// shape the caller declared, which any user's jax.ffi.ffi_call can get wrong.
ffi::Error check_out(const ffi::AnyBuffer::Dimensions& got, const std::vector<int64_t>& want, const char* what) {
  bool ok = got.size() == want.size();
  for (size_t i = 0; ok && i < want.size(); ++i) ok = got[i] == want[i];
  if (ok) return ffi::Error::Success();
  std::string msg = std::string("hemx native: ") + what + " output must be shaped (";
  for (size_t i = 0; i < want.size(); ++i) msg += (i ? ", " : "") + std::to_string(want[i]);
  msg += "), got (";
  for (size_t i = 0; i < got.size(); ++i) msg += (i ? ", " : "") + std::to_string(got[i]);
  return ffi::Error::InvalidArgument(msg + ")");
}

std::vector<int64_t> dims_of(const ffi::AnyBuffer::Dimensions& d) { return std::vector<int64_t>(d.begin(), d.end()); }

// No axis of a data buffer may be empty (a degenerate call is a caller's bug, reported rather than ignored).
ffi::Error check_nonempty(const ffi::AnyBuffer::Dimensions& d, const char* what) {
  for (int64_t v : d)
    if (v <= 0) return ffi::Error::InvalidArgument(std::string("hemx native: ") + what + " has an empty axis");
  return ffi::Error::Success();
}

// Shape checks shared by the handlers: x (..., L, N) and the per-limb tables.
ffi::Error check(const ffi::AnyBuffer::Dimensions& xd, size_t q_count, size_t w_count, size_t& limbs, size_t& n,
                 size_t& batch, bool check_w = true) {
  if (xd.size() < 2) return ffi::Error::InvalidArgument("hemx native: data must be shaped (..., L, N)");
  if (auto e = check_nonempty(xd, "data"); e.failure()) return e;
  n = (size_t)xd[xd.size() - 1];
  limbs = (size_t)xd[xd.size() - 2];
  batch = 1;
  for (size_t i = 0; i + 2 < xd.size(); ++i) batch *= (size_t)xd[i];
  if (n < 2 || (n & (n - 1))) return ffi::Error::InvalidArgument("hemx native: N must be a power of two >= 2");
  if (q_count != limbs || (check_w && w_count != limbs * n))
    return ffi::Error::InvalidArgument("hemx native: tables do not match the data's (L, N)");
  return ffi::Error::Success();
}

// Every modulus of a per-limb table q (L,) odd and in [3, 2^31) (the kernels' ranges assume it).
ffi::Error check_moduli(ffi::Buffer<ffi::U32>& q) {
  const uint32_t* qs = q.typed_data();
  for (size_t i = 0; i < q.element_count(); ++i)
    if (bad_modulus(qs[i])) return ffi::Error::InvalidArgument("hemx native: moduli must be odd, in [3, 2^31)");
  return ffi::Error::Success();
}

// A ConvTables::prepare result as an ffi::Error.
ffi::Error conv_error(const char* why) {
  return why ? ffi::Error::InvalidArgument(std::string("hemx native: ") + why) : ffi::Error::Success();
}

size_t chunk_for(size_t n) { return std::max<size_t>(1, 8192 / n); }

// The table a transform of n residues runs on: the active one (taken once by the handler) where n >= 2 width.
const Kernels& for_size(const Kernels& ka, size_t n) { return n >= 2 * ka.width ? ka : scalar_kernels(); }

// The table a basis conversion of rows of n residues runs on (its blocks are multiples of 2 width).
const Kernels& for_conv(const Kernels& ka, size_t n) { return n % (2 * ka.width) == 0 ? ka : scalar_kernels(); }

// The twiddle tables w / ws hold R >= L rows of N (a ring's full tables): limb l of the data uses row rows[l], so
// a kernel on a subset of a ring's limbs reads the ring's own tables in place (no sliced copy per call).
ffi::Error check_rows(ffi::Buffer<ffi::S32>& rows, size_t limbs, size_t n, size_t w_count, size_t ws_count) {
  if (w_count % n || ws_count != w_count || rows.element_count() != limbs)
    return ffi::Error::InvalidArgument("hemx native: twiddle tables must be (R, N) with one row index per limb");
  const int32_t* r = rows.typed_data();
  for (size_t l = 0; l < limbs; ++l)
    if (r[l] < 0 || (size_t)r[l] >= w_count / n) return ffi::Error::InvalidArgument("hemx native: row index out of range");
  return ffi::Error::Success();
}

ffi::Error NttForward(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::U32> q,
                      ffi::Buffer<ffi::U32> w, ffi::Buffer<ffi::U32> ws, ffi::Buffer<ffi::S32> rows,
                      ffi::ResultBuffer<ffi::U32> y) {
  size_t limbs, n, batch;
  if (auto e = check(x.dimensions(), q.element_count(), 0, limbs, n, batch, false); e.failure()) return e;
  if (auto e = check_out(y->dimensions(), dims_of(x.dimensions()), "NTT"); e.failure()) return e;
  if (auto e = check_rows(rows, limbs, n, w.element_count(), ws.element_count()); e.failure()) return e;
  if (auto e = check_moduli(q); e.failure()) return e;
  const Kernels& k = for_size(active_kernels(), n);
  const uint32_t *xs = x.typed_data(), *qs = q.typed_data(), *wt = w.typed_data(), *st = ws.typed_data();
  const int32_t* rw = rows.typed_data();
  uint32_t* out = y->typed_data();
  return parallel_for(pool, batch * limbs, chunk_for(n), batch * limbs * n, [=, &k](size_t u) {
    const size_t l = u % limbs, r = (size_t)rw[l];
    uint32_t* a = out + u * n;
    if (a != xs + u * n) std::memcpy(a, xs + u * n, n * sizeof(uint32_t));
    k.forward(a, n, qs[l], wt + r * n, st + r * n);
  });
}

ffi::Error NttInverse(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::U32> q,
                      ffi::Buffer<ffi::U32> w, ffi::Buffer<ffi::U32> ws, ffi::Buffer<ffi::U32> scal,
                      ffi::Buffer<ffi::S32> rows, ffi::ResultBuffer<ffi::U32> y) {
  size_t limbs, n, batch;
  if (auto e = check(x.dimensions(), q.element_count(), 0, limbs, n, batch, false); e.failure()) return e;
  if (auto e = check_out(y->dimensions(), dims_of(x.dimensions()), "inverse NTT"); e.failure()) return e;
  if (auto e = check_rows(rows, limbs, n, w.element_count(), ws.element_count()); e.failure()) return e;
  if (auto e = check_moduli(q); e.failure()) return e;
  if (scal.element_count() != limbs * 4) return ffi::Error::InvalidArgument("hemx native: inverse tables shape");
  const Kernels& k = for_size(active_kernels(), n);
  const uint32_t *xs = x.typed_data(), *qs = q.typed_data(), *wt = w.typed_data(), *st = ws.typed_data();
  const uint32_t* sc = scal.typed_data();
  const int32_t* rw = rows.typed_data();
  uint32_t* out = y->typed_data();
  return parallel_for(pool, batch * limbs, chunk_for(n), batch * limbs * n, [=, &k](size_t u) {
    const size_t l = u % limbs, r = (size_t)rw[l];
    uint32_t* a = out + u * n;
    if (a != xs + u * n) std::memcpy(a, xs + u * n, n * sizeof(uint32_t));
    k.inverse(a, n, qs[l], wt + r * n, st + r * n, sc + 4 * l);
  });
}

ffi::Error MulShoup(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::U32> q,
                    ffi::Buffer<ffi::U32> w, ffi::Buffer<ffi::U32> ws, ffi::ResultBuffer<ffi::U32> y) {
  size_t limbs, n, batch;
  if (auto e = check(x.dimensions(), q.element_count(), w.element_count(), limbs, n, batch); e.failure()) return e;
  if (auto e = check_out(y->dimensions(), dims_of(x.dimensions()), "mul_shoup"); e.failure()) return e;
  if (ws.element_count() != limbs * n) return ffi::Error::InvalidArgument("hemx native: shoup table shape");
  if (auto e = check_moduli(q); e.failure()) return e;
  const Kernels& k = active_kernels();
  const uint32_t *xs = x.typed_data(), *qs = q.typed_data(), *wt = w.typed_data(), *st = ws.typed_data();
  uint32_t* out = y->typed_data();
  return parallel_for(pool, batch * limbs, chunk_for(n), batch * limbs * n, [=, &k](size_t u) {
    const size_t l = u % limbs;
    k.mul_shoup(out + u * n, xs + u * n, wt + l * n, st + l * n, n, qs[l]);
  });
}

ffi::Error ButterflyProbe(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::U32> q,
                          ffi::Buffer<ffi::U32> tw, ffi::ResultBuffer<ffi::U32> y, int64_t reps) {
  auto xd = x.dimensions();
  if (xd.size() != 2) return ffi::Error::InvalidArgument("hemx native: probe data must be (K, n)");
  const size_t rows = (size_t)xd[0], n = (size_t)xd[1];
  const Kernels& k = active_kernels();
  if (rows == 0 || n < 4 * k.width || (n & (n - 1)) || q.element_count() != rows || tw.element_count() != 2 * rows ||
      reps < 0)
    return ffi::Error::InvalidArgument("hemx native: bad probe arguments");
  if (auto e = check_out(y->dimensions(), dims_of(xd), "butterfly probe"); e.failure()) return e;
  if (auto e = check_moduli(q); e.failure()) return e;
  const uint32_t *xs = x.typed_data(), *qs = q.typed_data(), *tws = tw.typed_data();
  for (size_t r = 0; r < rows; ++r)
    if (tws[2 * r] >= qs[r]) return ffi::Error::InvalidArgument("hemx native: probe twiddle not reduced");
  uint32_t* out = y->typed_data();
  return parallel_for(pool, rows, 1, SIZE_MAX, [=, &k](size_t r) {  // a probe: always threaded
    std::memcpy(out + r * n, xs + r * n, n * sizeof(uint32_t));
    k.butterfly_probe(out + r * n, n, qs[r], tws[2 * r], tws[2 * r + 1], (uint64_t)reps);
  });
}


// ------------------------------------------------------------------------------ ops beyond the NTT

// An index map of N entries within [0, N), or none (0 entries; `optional`: the fused passes' "no permutation").
ffi::Error check_index_map(const ffi::Buffer<ffi::S32>& map, size_t n, bool optional = true) {
  if (optional && map.element_count() == 0) return ffi::Error::Success();
  if (map.element_count() != n) return ffi::Error::InvalidArgument("hemx native: index map length != N");
  const int32_t* mp = map.typed_data();
  for (size_t j = 0; j < n; ++j)
    if (mp[j] < 0 || (size_t)mp[j] >= n) return ffi::Error::InvalidArgument("hemx native: index map out of range");
  return ffi::Error::Success();
}

// out[..., l, :] = x[..., l, map] for every (batch, limb) polynomial; map must index within [0, N).
ffi::Error Automorphism(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::S32> map,
                        ffi::ResultBuffer<ffi::U32> y) {
  auto xd = x.dimensions();
  if (xd.size() < 2) return ffi::Error::InvalidArgument("hemx native: automorphism data must be (..., L, N)");
  if (auto e = check_nonempty(xd, "automorphism data"); e.failure()) return e;
  if (auto e = check_out(y->dimensions(), dims_of(xd), "automorphism"); e.failure()) return e;
  const size_t n = (size_t)xd[xd.size() - 1];
  if (auto e = check_index_map(map, n, false); e.failure()) return e;
  const int32_t* mp = map.typed_data();
  const size_t polys = x.element_count() / n;
  const Kernels& k = active_kernels();
  const uint32_t* xs = x.typed_data();
  uint32_t* out = y->typed_data();
  return parallel_for(pool, polys, chunk_for(n), polys * n,
                      [=, &k](size_t u) { k.gather(out + u * n, xs + u * n, mp, n); });
}

// Per-limb constants of the Montgomery-style inner products: q^-1 mod 2^32, [2^32]_q, its Shoup companion.
ffi::Error montgomery_consts(const uint32_t* qs, size_t m, std::vector<uint32_t>& consts) {
  consts.resize(3 * m);
  for (size_t l = 0; l < m; ++l) {
    const uint32_t ql = qs[l];
    if (bad_modulus(ql)) return ffi::Error::InvalidArgument("hemx native: moduli must be odd, in [3, 2^31)");
    uint32_t inv = ql;  // Newton's iteration for q^-1 mod 2^32: each step doubles the correct low bits
    for (int it = 0; it < 5; ++it) inv *= 2u - ql * inv;
    const uint32_t r = (uint32_t)((uint64_t{1} << 32) % ql);
    consts[3 * l] = inv, consts[3 * l + 1] = r, consts[3 * l + 2] = shoup_of(r, ql);
  }
  return ffi::Error::Success();
}

// out (..., K, m, N) = sum_d a (..., D, m, N)[d] * b (D, K, m, N)[d] mod q (m,); residues in [0, q).
ffi::Error InnerProduct(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> a, ffi::Buffer<ffi::U32> b,
                        ffi::Buffer<ffi::U32> q, ffi::ResultBuffer<ffi::U32> y) {
  auto ad = a.dimensions(), bd = b.dimensions();
  if (ad.size() < 3 || bd.size() != 4)
    return ffi::Error::InvalidArgument("hemx native: inner product needs a (..., D, m, N) and b (D, K, m, N)");
  const size_t n = (size_t)ad[ad.size() - 1], m = (size_t)ad[ad.size() - 2], D = (size_t)ad[ad.size() - 3];
  const size_t K = (size_t)bd[1];
  if (auto e = check_nonempty(ad, "inner product a"); e.failure()) return e;
  if (auto e = check_nonempty(bd, "inner product b"); e.failure()) return e;
  if ((size_t)bd[0] != D || (size_t)bd[2] != m || (size_t)bd[3] != n || q.element_count() != m || D == 0)
    return ffi::Error::InvalidArgument("hemx native: inner product shapes do not match");
  std::vector<int64_t> want(ad.begin(), ad.end() - 3);
  want.insert(want.end(), {bd[1], bd[2], bd[3]});
  if (auto e = check_out(y->dimensions(), want, "inner product"); e.failure()) return e;
  size_t batch = 1;
  for (size_t i = 0; i + 3 < ad.size(); ++i) batch *= (size_t)ad[i];
  const uint32_t* qs = q.typed_data();
  std::vector<uint32_t> consts;  // per limb: q^-1 mod 2^32, [2^32]_q, its Shoup companion
  if (auto e = montgomery_consts(qs, m, consts); e.failure()) return e;
  const Kernels& ka = active_kernels();
  const Kernels& k = n % ka.width == 0 ? ka : scalar_kernels();
  const uint32_t *as = a.typed_data(), *bs = b.typed_data(), *cs = consts.data();
  uint32_t* out = y->typed_data();
  return parallel_for(pool, batch * m, 1, batch * m * n, [=, &k](size_t u) {
    const size_t bi = u / m, l = u % m;
    k.inner_product(out + (bi * K * m + l) * n, m * n, as + (bi * D * m + l) * n, m * n, bs + l * n, K * m * n,
                    m * n, D, K, n, qs[l], cs[3 * l], cs[3 * l + 1], cs[3 * l + 2]);
  });
}

// Column chunk of a plaintext-product sum's work unit: the B ciphertext rows of a chunk (B K 8 KiB) stay in cache
// while every group reads them.
constexpr size_t kPlainChunk = 2048;

// Sums of plaintext products (modarith.plain_sums; the giant steps' sums of a baby-step / giant-step transform).
// q (m,); then the B parts x_i (..., K, m, N); then per diagonal its `pieces` row blocks (r, N / b), their rows
// summing to m (each entry stands for b equal consecutive residues: a diagonal periodic in the slots). Attributes:
// parts = B, pieces, groups = [G, then per group its term count T >= 1 and T pairs (part index, diagonal index)].
// Returns G arrays (..., K, m, N): out_g = sum over g's terms of x_i * widen(w_d) mod q, residues in [0, q).
// One unit of work is (batch, row, column chunk) with every group done on it, so each chunk of the parts is read
// from memory once for all the groups (XLA's fusions read every part once per group).
ffi::Error PlainSums(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> q, ffi::RemainingArgs args, ffi::RemainingRets rets,
                     int64_t parts, int64_t pieces, ffi::Span<const int64_t> groups) {
  const size_t m = q.element_count();
  if (parts < 1 || pieces < 1 || (size_t)parts > args.size() || (args.size() - (size_t)parts) % (size_t)pieces)
    return ffi::Error::InvalidArgument("hemx native: plain sums need parts >= 1 and whole diagonals of `pieces` blocks");
  const size_t B = (size_t)parts, P = (size_t)pieces, Dn = (args.size() - B) / P;
  std::vector<const uint32_t*> xs(B);
  std::vector<int64_t> dims;
  for (size_t i = 0; i < B; ++i) {
    auto x = args.get<ffi::Buffer<ffi::U32>>(i);
    if (!x.has_value()) return x.error();
    auto xd = x->dimensions();
    if (i == 0) {
      dims.assign(xd.begin(), xd.end());
      if (dims.size() < 3 || (size_t)dims[dims.size() - 2] != m)
        return ffi::Error::InvalidArgument("hemx native: plain sums' parts must be (..., K, m, N), m = len(q)");
      if (auto e = check_nonempty(xd, "plain sums' part"); e.failure()) return e;
    } else if (std::vector<int64_t>(xd.begin(), xd.end()) != dims) {
      return ffi::Error::InvalidArgument("hemx native: plain sums' parts must all have one shape");
    }
    xs[i] = x->typed_data();
  }
  const size_t n = (size_t)dims.back(), K = (size_t)dims[dims.size() - 3];
  size_t batch = 1;
  for (size_t i = 0; i + 3 < dims.size(); ++i) batch *= (size_t)dims[i];
  // per diagonal: its block b and, per row, where the row's (N / b) entries start
  std::vector<size_t> block(Dn);
  std::vector<const uint32_t*> wrow(Dn * m);
  for (size_t d = 0; d < Dn; ++d) {
    size_t rows = 0;
    for (size_t k = 0; k < P; ++k) {
      auto w = args.get<ffi::Buffer<ffi::U32>>(B + d * P + k);
      if (!w.has_value()) return w.error();
      auto wd = w->dimensions();
      if (wd.size() != 2 || wd[1] < 1 || n % (size_t)wd[1] || rows + (size_t)wd[0] > m)
        return ffi::Error::InvalidArgument("hemx native: a diagonal's blocks must be (r, N / b), rows summing to m");
      const size_t b = n / (size_t)wd[1];
      if (k > 0 && b != block[d])
        return ffi::Error::InvalidArgument("hemx native: a diagonal's blocks must share one width");
      block[d] = b;
      for (size_t r = 0; r < (size_t)wd[0]; ++r) wrow[d * m + rows + r] = w->typed_data() + r * (size_t)wd[1];
      rows += (size_t)wd[0];
    }
    if (rows != m) return ffi::Error::InvalidArgument("hemx native: a diagonal's blocks must cover the m rows");
  }
  // the groups: offsets into a flat list of (part, diagonal) pairs
  if (groups.size() < 1 || groups[0] < 0 || (size_t)groups[0] != rets.size())
    return ffi::Error::InvalidArgument("hemx native: plain sums need one result per group");
  const size_t G = (size_t)groups[0];
  std::vector<size_t> start(G + 1);
  std::vector<size_t> term_x, term_d;
  size_t at = 1, tmax = 0;
  for (size_t g = 0; g < G; ++g) {
    if (at >= groups.size() || groups[at] < 1 || groups.size() - at - 1 < 2 * (size_t)groups[at])
      return ffi::Error::InvalidArgument("hemx native: malformed groups of plain sums");
    const size_t T = (size_t)groups[at++];
    start[g] = term_x.size();
    tmax = std::max(tmax, T);
    for (size_t t = 0; t < T; ++t, at += 2) {
      if (groups[at] < 0 || (size_t)groups[at] >= B || groups[at + 1] < 0 || (size_t)groups[at + 1] >= Dn)
        return ffi::Error::InvalidArgument("hemx native: a plain sums' term names no part or diagonal");
      term_x.push_back((size_t)groups[at]), term_d.push_back((size_t)groups[at + 1]);
    }
  }
  start[G] = term_x.size();
  if (at != groups.size()) return ffi::Error::InvalidArgument("hemx native: malformed groups of plain sums");
  std::vector<uint32_t*> outs(G);
  for (size_t g = 0; g < G; ++g) {
    auto y = rets.get<ffi::Buffer<ffi::U32>>(g);
    if (!y.has_value()) return y.error();
    if (auto e = check_out((*y)->dimensions(), dims, "plain sums"); e.failure()) return e;
    outs[g] = (*y)->typed_data();
  }
  const uint32_t* qs = q.typed_data();
  std::vector<uint32_t> consts;  // per limb: q^-1 mod 2^32, [2^32]_q, its Shoup companion
  if (auto e = montgomery_consts(qs, m, consts); e.failure()) return e;
  const Kernels& ka = active_kernels();
  const Kernels& k = n % ka.width == 0 ? ka : scalar_kernels();
  const size_t chunk = std::min(n, kPlainChunk - kPlainChunk % k.width), chunks = (n + chunk - 1) / chunk;
  const uint32_t* cs = consts.data();
  const size_t row = n, poly = m * n;  // strides of one row and one (K-)polynomial of a part
  return parallel_for(pool, batch * m * chunks, 1, batch * m * n * start[G] * K, [&, cs, qs, chunk, chunks](size_t u) {
    const size_t bi = u / (m * chunks), l = (u / chunks) % m, j0 = (u % chunks) * chunk;
    const size_t cnt = std::min(chunk, n - j0), off = bi * K * poly + l * row + j0;
    thread_local std::vector<uint32_t> wide;  // the periodic diagonals of one group, widened over the chunk
    thread_local std::vector<const uint32_t*> xp, wp;
    if (wide.size() < tmax * chunk) wide.resize(tmax * chunk);
    xp.resize(tmax), wp.resize(tmax);
    for (size_t g = 0; g < G; ++g) {
      const size_t T = start[g + 1] - start[g];
      for (size_t t = 0; t < T; ++t) {
        const size_t d = term_d[start[g] + t], b = block[d];
        const uint32_t* w = wrow[d * m + l];
        xp[t] = xs[term_x[start[g] + t]] + off;
        if (b == 1) {
          wp[t] = w + j0;
        } else {  // entry j of the row stands for residues [j b, (j + 1) b)
          uint32_t* o = wide.data() + t * chunk;
          for (size_t j = 0; j < cnt;) {
            const size_t e = (j0 + j) / b, end = std::min(cnt, (e + 1) * b - j0);
            for (const uint32_t v = w[e]; j < end; ++j) o[j] = v;
          }
          wp[t] = o;
        }
      }
      k.plain_sum(outs[g] + off, poly, xp.data(), poly, wp.data(), T, K, cnt, qs[l], cs[3 * l], cs[3 * l + 1],
                  cs[3 * l + 2]);
    }
  });
}

// The round keys of a stream key's "aes128ctr" expansion (xof 1: its first 4 words), or none (xof 0: ChaCha20).
ffi::Error stream_xof(int64_t xof, const uint32_t* key, uint32_t* rk, const uint32_t*& aes_rk) {
  if (xof == 0) {
    aes_rk = nullptr;
    return ffi::Error::Success();
  }
  if (xof != 1) return ffi::Error::InvalidArgument("hemx native: xof must be 0 (chacha20) or 1 (aes128ctr)");
  aes_expand_key(key, rk);
  aes_rk = rk;
  return ffi::Error::Success();
}

// Seeded uniform rows (prng_impl.h): out (D, m, N), row (i, l) the stream of (key, digits[i], q_l, N). digits (D,) s32
// (each >= 0), key (8,), q (m,); n (attribute) = N; xof (attribute): 0 ChaCha20, 1 AES-128 counter mode.
ffi::Error Uniform(ffi::ThreadPool pool, ffi::Buffer<ffi::S32> digits, ffi::Buffer<ffi::U32> key,
                   ffi::Buffer<ffi::U32> q, ffi::ResultBuffer<ffi::U32> y, int64_t n_attr, int64_t xof) {
  auto yd = y->dimensions();
  if (auto e = check_nonempty(digits.dimensions(), "seeded uniform digits"); e.failure()) return e;
  if (auto e = check_nonempty(q.dimensions(), "seeded uniform moduli"); e.failure()) return e;
  if (n_attr < 1 || n_attr >= (int64_t{1} << 32)) return ffi::Error::InvalidArgument("hemx native: bad ring degree");
  const size_t D = digits.element_count(), m = q.element_count(), n = (size_t)n_attr;
  if (auto e = check_out(yd, {(int64_t)D, (int64_t)m, n_attr}, "seeded uniform"); e.failure()) return e;
  if (key.element_count() != 8) return ffi::Error::InvalidArgument("hemx native: a stream key has 8 words");
  const int32_t* ds = digits.typed_data();
  for (size_t i = 0; i < D; ++i)
    if (ds[i] < 0) return ffi::Error::InvalidArgument("hemx native: digit indices must be >= 0");
  const uint32_t *ks = key.typed_data(), *qs = q.typed_data();
  for (size_t l = 0; l < m; ++l)
    if (bad_modulus(qs[l])) return ffi::Error::InvalidArgument("hemx native: moduli must be odd, in [3, 2^31)");
  uint32_t rk[kAesRoundKeyWords];
  const uint32_t* aes_rk;
  if (auto e = stream_xof(xof, ks, rk, aes_rk); e.failure()) return e;
  const Kernels& k = active_kernels();
  uint32_t* out = y->typed_data();
  return parallel_for(pool, D * m, 1, D * m * n * 8, [=, &k](size_t u) {
    k.uniform_row(out + u * n, n, ks, aes_rk, (uint32_t)ds[u / m], qs[u % m]);
  });
}

// The key-switching inner product, in one pass: a (..., D, m, N) extended digits, b (Dk, K, Mk, N) the key's data of
// which rows [:D, :, :m] are read in place (D <= Dk, m <= Mk: a key stored for more digits or rows), q (m,)
// -> (..., 2, m, N) = [sum_d x_d b_d0, sum_d x_d b_d1], where
//   * seeded != 0: b_d1 is the uniform row (d, q_l, N) of the stream key `key` (8,) by the expansion `xof` (0
//     ChaCha20, 1 AES-128 counter mode), generated here (a compact key: K >= 1); else b_d1 = b[d, 1] (K >= 2; `key`
//     and `xof` unused);
//   * permuted != 0: x_d = a_d read through the automorphism's index map `map` (N,), x_d[j] = a_d[map[j]] (the
//     digits of a hoisted rotation, never stored permuted); else x_d = a_d (`map` unused).
// One limb per unit of work, the whole batch each (a row is generated, and a piece permuted, once per limb).
ffi::Error KeyProduct(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> a, ffi::Buffer<ffi::U32> b,
                      ffi::Buffer<ffi::U32> key, ffi::Buffer<ffi::U32> q, ffi::Buffer<ffi::S32> map,
                      ffi::ResultBuffer<ffi::U32> y, int64_t seeded, int64_t permuted, int64_t xof) {
  auto ad = a.dimensions(), bd = b.dimensions();
  if (ad.size() < 3 || bd.size() != 4)
    return ffi::Error::InvalidArgument("hemx native: key product needs a (..., D, m, N) and b (Dk, K, Mk, N)");
  if (auto e = check_nonempty(ad, "key product a"); e.failure()) return e;
  if (auto e = check_nonempty(bd, "key product b"); e.failure()) return e;
  const size_t n = (size_t)ad[ad.size() - 1], m = (size_t)ad[ad.size() - 2], D = (size_t)ad[ad.size() - 3];
  const size_t Dk = (size_t)bd[0], Kb = (size_t)bd[1], Mk = (size_t)bd[2];
  if (D > Dk || m > Mk || (size_t)bd[3] != n || q.element_count() != m || Kb < (seeded ? 1u : 2u))
    return ffi::Error::InvalidArgument("hemx native: key product shapes do not match");
  if (seeded && key.element_count() != 8)
    return ffi::Error::InvalidArgument("hemx native: a stream key has 8 words");
  if (n >= (size_t{1} << 32)) return ffi::Error::InvalidArgument("hemx native: ring degree too large");
  const int32_t* mp = map.typed_data();
  if (permuted) {
    if (map.element_count() != n) return ffi::Error::InvalidArgument("hemx native: index map length != N");
    for (size_t j = 0; j < n; ++j)
      if (mp[j] < 0 || (size_t)mp[j] >= n) return ffi::Error::InvalidArgument("hemx native: index map out of range");
  }
  std::vector<int64_t> want(ad.begin(), ad.end() - 3);
  want.insert(want.end(), {2, (int64_t)m, (int64_t)n});
  if (auto e = check_out(y->dimensions(), want, "key product"); e.failure()) return e;
  size_t batch = 1;
  for (size_t i = 0; i + 3 < ad.size(); ++i) batch *= (size_t)ad[i];
  const uint32_t* qs = q.typed_data();
  std::vector<uint32_t> consts;
  if (auto e = montgomery_consts(qs, m, consts); e.failure()) return e;
  const Kernels& ka = active_kernels();
  const Kernels& k = n % ka.width == 0 ? ka : scalar_kernels();
  const uint32_t *as = a.typed_data(), *bs = b.typed_data(), *cs = consts.data();
  const uint32_t* ks = seeded ? key.typed_data() : nullptr;
  uint32_t rk[kAesRoundKeyWords];
  const uint32_t* aes_rk = nullptr;
  if (seeded)
    if (auto e = stream_xof(xof, ks, rk, aes_rk); e.failure()) return e;
  const int32_t* maps = permuted ? mp : nullptr;
  uint32_t* out = y->typed_data();
  const size_t scratch_words = D * kKeyScratchPerDigit + kSeedScratchAlign;
  return parallel_for(pool, m, 1, batch * m * n * D, [=, &k](size_t l) {
    thread_local std::vector<uint32_t> scratch;  // D streams and row pieces: a few KiB a digit
    if (scratch.size() < scratch_words) scratch.resize(scratch_words);
    k.key_product(out + l * n, 2 * m * n, m * n, as + l * n, D * m * n, m * n, bs + l * n, Kb * Mk * n, Mk * n, D,
                  batch, n, ks, aes_rk, maps, qs[l], cs[3 * l], cs[3 * l + 1], cs[3 * l + 2], scratch.data());
  });
}

// Fast basis conversion (hemx/kernels/bconv.py): x (..., L, N) mod q (L,) -> (..., L', N) mod p (L',), with
// qhinv (L,) = [qhat_i^-1]_{q_i}, c (L, L') = [qhat_i]_{p_j}, corr (L, L') = [q_i qhat_i]_{p_j} (used when
// centered != 0).
ffi::Error BConv(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::U32> q, ffi::Buffer<ffi::U32> qhinv,
                 ffi::Buffer<ffi::U32> p, ffi::Buffer<ffi::U32> c, ffi::Buffer<ffi::U32> corr,
                 ffi::ResultBuffer<ffi::U32> y, int64_t centered) {
  auto xd = x.dimensions();
  if (xd.size() < 2) return ffi::Error::InvalidArgument("hemx native: conversion data must be (..., L, N)");
  const size_t n = (size_t)xd[xd.size() - 1], L = (size_t)xd[xd.size() - 2], Lp = p.element_count();
  if (L == 0 || Lp == 0 || q.element_count() != L || qhinv.element_count() != L || c.element_count() != L * Lp ||
      corr.element_count() != L * Lp)
    return ffi::Error::InvalidArgument("hemx native: conversion tables do not match the data's L");
  if (auto e = check_nonempty(xd, "conversion data"); e.failure()) return e;
  std::vector<int64_t> want = dims_of(xd);
  want[want.size() - 2] = (int64_t)Lp;
  if (auto e = check_out(y->dimensions(), want, "basis conversion"); e.failure()) return e;
  size_t batch = 1;
  for (size_t i = 0; i + 2 < xd.size(); ++i) batch *= (size_t)xd[i];
  const Kernels& k = for_conv(active_kernels(), n);
  ConvTables ct;
  if (auto e = conv_error(ct.prepare(L, Lp, q.typed_data(), qhinv.typed_data(), p.typed_data(), c.typed_data(),
                                     corr.typed_data(), centered != 0, k.conv_tiles));
      e.failure())
    return e;
  const BConvTables& T = ct.T;
  const size_t blk = conv_block(L, n, k.width), blocks = (n + blk - 1) / blk, rows = T.ybuf_rows;
  const uint32_t* xs = x.typed_data();
  uint32_t* out = y->typed_data();
  return parallel_for(pool, batch * blocks, 1, batch * L * n, [=, &k, &T](size_t u) {
    thread_local std::vector<uint32_t> ybuf;  // rows * blk <= about 8192 words (conv_block): bounded per thread
    if (ybuf.size() < rows * blk) ybuf.resize(rows * blk);
    const size_t bi = u / blocks, lo = (u % blocks) * blk;
    k.bconv_block(T, xs + bi * L * n, out + bi * Lp * n, n, lo, std::min(blk, n - lo), ybuf.data());
  });
}

// ------------------------------------------------------------------------ fused key-switching passes
// (hemx/ckks/keyswitch.py: modup and divide_by_dropped, each one custom call writing its result in place.)

// Sizes of data shaped (..., rows, N): the product of the leading axes.
size_t lead_size(const ffi::AnyBuffer::Dimensions& d, size_t tail) {
  size_t b = 1;
  for (size_t i = 0; i + tail < d.size(); ++i) b *= (size_t)d[i];
  return b;
}

// The NTT tables of a set of limbs: q (L,), rows (L,) into forward / inverse twiddles (R, N), scal (L, 4).
ffi::Error check_ntt_tables(size_t limbs, size_t n, size_t q_count, ffi::Buffer<ffi::S32>& rows, size_t w_count,
                            size_t ws_count, size_t wi_count, size_t wis_count) {
  if (q_count != limbs) return ffi::Error::InvalidArgument("hemx native: one modulus per limb expected");
  if (wi_count != w_count) return ffi::Error::InvalidArgument("hemx native: inverse twiddles must match forward");
  if (auto e = check_rows(rows, limbs, n, w_count, ws_count); e.failure()) return e;
  return check_rows(rows, limbs, n, wi_count, wis_count);
}

// ModUp of x (..., nq, N) over Q_l, NTT domain, into the extended digits (..., D, m, N), m = np + nq, NTT
// domain. q (m,), rows (m,), scal (m, 4): the limbs [P, Q_l]; digits (D, 2) s32: the digits' [lo, hi) ranges
// of Q_l (contiguous, covering it); qhinv (nq,): each digit's [qhat^-1]_q; c / corr: each digit's (L_d, m - L_d)
// conversion tables to [P, Q_<lo, Q_>=hi], concatenated. With part >= 0, x is (..., P, nq, N) and its part `part`
// is the data (a ciphertext's c1, read in place: no sliced copy); with a map (N,), x's limbs are read permuted,
// x[..., l, map] (a rotation's automorphism, fused into the copies below). Three passes over the output:
//   1. each limb of x copied into its digit's own rows of the output and inverse-transformed there;
//   2. each digit's basis conversion from those rows into the other rows of its extended digit;
//   3. the forward NTT of every converted row, and x copied back into the digits' own rows.
ffi::Error ModUp(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::U32> q, ffi::Buffer<ffi::U32> w,
                 ffi::Buffer<ffi::U32> ws, ffi::Buffer<ffi::U32> wi, ffi::Buffer<ffi::U32> wis,
                 ffi::Buffer<ffi::U32> scal, ffi::Buffer<ffi::S32> rows, ffi::Buffer<ffi::S32> digits,
                 ffi::Buffer<ffi::U32> qhinv, ffi::Buffer<ffi::U32> c, ffi::Buffer<ffi::U32> corr,
                 ffi::Buffer<ffi::S32> map, ffi::ResultBuffer<ffi::U32> y, int64_t centered, int64_t part) {
  auto xd = x.dimensions(), yd = y->dimensions();
  // part >= 0: x is (..., P, num_q, N) and its part `part` is extended (a ciphertext's c1 read in place)
  const size_t lead = part < 0 ? 2 : 3;
  if (xd.size() < lead)
    return ffi::Error::InvalidArgument(part < 0 ? "hemx native: ModUp data must be (..., num_q, N)"
                                                : "hemx native: ModUp of a part needs data (..., P, num_q, N)");
  const size_t parts = part < 0 ? 1 : (size_t)xd[xd.size() - 3], pick = part < 0 ? 0 : (size_t)part;
  if (part >= 0 && pick >= parts) return ffi::Error::InvalidArgument("hemx native: ModUp part out of range");
  const size_t n = (size_t)xd[xd.size() - 1], nq = (size_t)xd[xd.size() - 2], m = q.element_count();
  const size_t D = digits.element_count() / 2;
  if (n < 2 || (n & (n - 1))) return ffi::Error::InvalidArgument("hemx native: N must be a power of two >= 2");
  if (nq == 0 || m <= nq || D == 0 || digits.element_count() != 2 * D || qhinv.element_count() != nq ||
      scal.element_count() != 4 * m)
    return ffi::Error::InvalidArgument("hemx native: ModUp tables do not match the data");
  if (auto e = check_nonempty(xd, "ModUp data"); e.failure()) return e;
  std::vector<int64_t> want(xd.begin(), xd.end() - lead);
  want.insert(want.end(), {(int64_t)D, (int64_t)m, (int64_t)n});
  if (auto e = check_out(yd, want, "ModUp (..., D, num_p + num_q, N)"); e.failure()) return e;
  // map (N,): x's limbs read permuted, x[..., l, map] (the automorphism of a rotation, fused); (0,): as they are
  if (auto e = check_index_map(map, n); e.failure()) return e;
  const int32_t* mp = map.element_count() ? map.typed_data() : nullptr;
  if (auto e = check_ntt_tables(m, n, m, rows, w.element_count(), ws.element_count(), wi.element_count(),
                                wis.element_count());
      e.failure())
    return e;
  const size_t np = m - nq, batch = lead_size(xd, lead);
  const int32_t* dg = digits.typed_data();
  const uint32_t *qs = q.typed_data(), *hs = qhinv.typed_data(), *cs = c.typed_data(), *rs = corr.typed_data();
  std::vector<size_t> lo(D), hi(D), digit_of(nq);
  std::vector<ConvTables> conv(D);
  std::vector<uint32_t> targets(m);
  const Kernels& ka = active_kernels();
  const Kernels& kn = for_size(ka, n);
  const Kernels& kb = for_conv(ka, n);
  size_t at = 0, offset = 0, maxL = 0, ybuf_rows = 0;
  for (size_t d = 0; d < D; ++d) {
    lo[d] = (size_t)dg[2 * d], hi[d] = (size_t)dg[2 * d + 1];
    if (dg[2 * d] < 0 || lo[d] != at || hi[d] <= lo[d] || hi[d] > nq)
      return ffi::Error::InvalidArgument("hemx native: ModUp digits must be contiguous ranges covering Q_l");
    at = hi[d];
    const size_t L = hi[d] - lo[d], Lp = m - L;
    for (size_t l = lo[d]; l < hi[d]; ++l) digit_of[l] = d;
    if (offset + L * Lp > c.element_count() || offset + L * Lp > corr.element_count())
      return ffi::Error::InvalidArgument("hemx native: ModUp conversion tables too short");
    // targets: P, Q_<lo, Q_>=hi (the rows of the extended digit around its own rows)
    std::memcpy(targets.data(), qs, (np + lo[d]) * sizeof(uint32_t));
    std::memcpy(targets.data() + np + lo[d], qs + np + hi[d], (nq - hi[d]) * sizeof(uint32_t));
    if (auto e = conv_error(conv[d].prepare(L, Lp, qs + np + lo[d], hs + lo[d], targets.data(), cs + offset,
                                            rs + offset, centered != 0, kb.conv_tiles));
        e.failure())
      return e;
    conv[d].T.gap_at = np + lo[d], conv[d].T.gap = L;
    offset += L * Lp, maxL = std::max(maxL, L), ybuf_rows = std::max(ybuf_rows, conv[d].T.ybuf_rows);
  }
  if (at != nq || offset != c.element_count() || offset != corr.element_count())
    return ffi::Error::InvalidArgument("hemx native: ModUp digits or conversion tables do not match num_q");
  for (size_t j = 0; j < m; ++j)
    if (bad_modulus(qs[j])) return ffi::Error::InvalidArgument("hemx native: moduli must be odd, in [3, 2^31)");

  const uint32_t *xs = x.typed_data(), *wt = w.typed_data(), *st = ws.typed_data(), *wit = wi.typed_data(),
                 *sit = wis.typed_data(), *sc = scal.typed_data();
  const int32_t* rw = rows.typed_data();
  uint32_t* out = y->typed_data();
  const size_t *lo_p = lo.data(), *hi_p = hi.data(), *dof = digit_of.data();
  const ConvTables* cv = conv.data();
  // limb l of batch member b of the extended data, copied (or gathered through the map) into `a`
  auto load = [=, &ka](uint32_t* a, size_t b, size_t l) {
    const uint32_t* src = xs + ((b * parts + pick) * nq + l) * n;
    if (mp)
      ka.gather(a, src, mp, n);
    else
      std::memcpy(a, src, n * sizeof(uint32_t));
  };
  // 1. x's limbs to coefficients, in their digits' own rows
  if (auto e = parallel_for(pool, batch * nq, chunk_for(n), batch * nq * n, [=, &kn](size_t u) {
        const size_t b = u / nq, l = u % nq, r = (size_t)rw[np + l];
        uint32_t* a = out + ((b * D + dof[l]) * m + np + l) * n;
        load(a, b, l);
        kn.inverse(a, n, qs[np + l], wit + r * n, sit + r * n, sc + 4 * (np + l));
      });
      e.failure())
    return e;
  // 2. each digit's conversion, block by block
  const size_t blk = conv_block(maxL, n, kb.width), blocks = (n + blk - 1) / blk;
  if (auto e = parallel_for(pool, batch * D * blocks, 1, batch * D * maxL * n, [=, &kb](size_t u) {
        thread_local std::vector<uint32_t> ybuf;  // bounded (conv_block)
        if (ybuf.size() < ybuf_rows * blk) ybuf.resize(ybuf_rows * blk);
        const size_t bd = u / blocks, d = bd % D, s = (u % blocks) * blk;
        uint32_t* ext = out + bd * m * n;
        kb.bconv_block(cv[d].T, ext + (np + lo_p[d]) * n, ext, n, s, std::min(blk, n - s), ybuf.data());
      });
      e.failure())
    return e;
  // 3. the converted rows to the NTT domain; the digits' own rows back to x
  return parallel_for(pool, batch * D * m, chunk_for(n), batch * D * m * n, [=, &kn](size_t u) {
    const size_t bd = u / m, j = u % m, d = bd % D, b = bd / D;
    uint32_t* a = out + u * n;
    if (j >= np + lo_p[d] && j < np + hi_p[d]) {
      load(a, b, j - np);
    } else {
      const size_t r = (size_t)rw[j];
      kn.forward(a, n, qs[j], wt + r * n, st + r * n);
    }
  });
}

// Rounding division by the product of dropped limbs (ModDown, rescale): x (..., M, N) in the NTT domain, keep (K,)
// and drop (Dd,) s32 row indices into its M rows -> (..., K, N):
//   out_k = (x_keep_k - NTT(Conv_{drop -> keep}(INTT(x_drop)))_k) * inv_k  mod q_keep_k
// qk / rows_k (K,): the kept limbs' moduli and forward twiddle rows; qd / rows_d (Dd,), scal_d (Dd, 4): the
// dropped limbs' moduli and inverse tables; qhinv (Dd,), c / corr (Dd, K): the conversion; inv (K,) = D^-1 mod q_k.
ffi::Error Divide(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::S32> keep,
                  ffi::Buffer<ffi::S32> drop, ffi::Buffer<ffi::U32> qk, ffi::Buffer<ffi::U32> qd,
                  ffi::Buffer<ffi::U32> w, ffi::Buffer<ffi::U32> ws, ffi::Buffer<ffi::S32> rows_k,
                  ffi::Buffer<ffi::U32> wi, ffi::Buffer<ffi::U32> wis, ffi::Buffer<ffi::U32> scal_d,
                  ffi::Buffer<ffi::S32> rows_d, ffi::Buffer<ffi::U32> qhinv, ffi::Buffer<ffi::U32> c,
                  ffi::Buffer<ffi::U32> corr, ffi::Buffer<ffi::U32> inv, ffi::Buffer<ffi::U32> addend,
                  ffi::Buffer<ffi::S32> map, ffi::ResultBuffer<ffi::U32> y, int64_t addend_part,
                  int64_t centered) {
  auto xd = x.dimensions(), yd = y->dimensions();
  if (xd.size() < 2) return ffi::Error::InvalidArgument("hemx native: division data must be (..., M, N)");
  const size_t n = (size_t)xd[xd.size() - 1], M = (size_t)xd[xd.size() - 2];
  const size_t K = keep.element_count(), Dd = drop.element_count();
  if (n < 2 || (n & (n - 1))) return ffi::Error::InvalidArgument("hemx native: N must be a power of two >= 2");
  if (K == 0 || Dd == 0 || qk.element_count() != K || qd.element_count() != Dd || inv.element_count() != K ||
      scal_d.element_count() != 4 * Dd || qhinv.element_count() != Dd || c.element_count() != Dd * K ||
      corr.element_count() != Dd * K)
    return ffi::Error::InvalidArgument("hemx native: division tables do not match");
  if (auto e = check_nonempty(xd, "division data"); e.failure()) return e;
  std::vector<int64_t> want = dims_of(xd);
  want[want.size() - 2] = (int64_t)K;
  if (auto e = check_out(yd, want, "division (..., K, N)"); e.failure()) return e;
  // addend_part >= 0: the output is (..., S, K, N) and addend (..., A, K, N); out[..., 0, :, :] gets
  // addend[..., addend_part, :, :] added mod q (permuted through map where it has N entries; residues in [0, q) like
  // every input): a rotation's c0 term added as the switched pair is written. addend_part < 0: no addend (addend
  // and map empty).
  size_t S = 1, A = 0, apick = 0;
  const int32_t* mp = nullptr;
  if (addend_part < 0) {
    if (addend.element_count() || map.element_count())
      return ffi::Error::InvalidArgument("hemx native: a division without an addend takes an empty addend and map");
  } else {
    auto ad = addend.dimensions();
    if (yd.size() < 3 || ad.size() != yd.size())
      return ffi::Error::InvalidArgument("hemx native: a division's addend must be (..., A, K, N) beside (..., S, K, N)");
    S = (size_t)yd[yd.size() - 3], A = (size_t)ad[ad.size() - 3], apick = (size_t)addend_part;
    std::vector<int64_t> awant(yd.begin(), yd.end());
    awant[awant.size() - 3] = (int64_t)A;
    if (std::vector<int64_t>(ad.begin(), ad.end()) != awant || apick >= A)
      return ffi::Error::InvalidArgument("hemx native: a division's addend must be (..., A, K, N) beside (..., S, K, N), "
                                         "addend_part < A");
    if (auto e = check_index_map(map, n); e.failure()) return e;
    mp = map.element_count() ? map.typed_data() : nullptr;
  }
  if (auto e = check_rows(rows_k, K, n, w.element_count(), ws.element_count()); e.failure()) return e;
  if (auto e = check_rows(rows_d, Dd, n, wi.element_count(), wis.element_count()); e.failure()) return e;
  const int32_t *ki = keep.typed_data(), *di = drop.typed_data();
  for (size_t i = 0; i < K; ++i)
    if (ki[i] < 0 || (size_t)ki[i] >= M) return ffi::Error::InvalidArgument("hemx native: kept row out of range");
  for (size_t i = 0; i < Dd; ++i)
    if (di[i] < 0 || (size_t)di[i] >= M) return ffi::Error::InvalidArgument("hemx native: dropped row out of range");
  const uint32_t *qks = qk.typed_data(), *qds = qd.typed_data(), *iv = inv.typed_data();
  for (size_t i = 0; i < Dd; ++i)
    if (bad_modulus(qds[i])) return ffi::Error::InvalidArgument("hemx native: moduli must be odd, in [3, 2^31)");
  std::vector<uint32_t> inv_s(K);
  for (size_t i = 0; i < K; ++i) {
    if (iv[i] >= qks[i]) return ffi::Error::InvalidArgument("hemx native: D^-1 not reduced");
    inv_s[i] = shoup_of(iv[i], qks[i]);
  }
  const Kernels& ka = active_kernels();
  const Kernels& kn = for_size(ka, n);
  const Kernels& kb = for_conv(ka, n);
  ConvTables ct;
  if (auto e = conv_error(ct.prepare(Dd, K, qds, qhinv.typed_data(), qks, c.typed_data(), corr.typed_data(),
                                     centered != 0, kb.conv_tiles));
      e.failure())
    return e;
  const BConvTables& T = ct.T;
  const size_t batch = lead_size(xd, 2);
  // the dropped rows' coefficients: the calling thread's scratch (it waits until the helpers finish), kept for
  // the next call up to kKeepScratch words and allocated for this call alone above that
  constexpr size_t kKeepScratch = size_t(1) << 22;  // 16 MiB
  thread_local std::vector<uint32_t> scratch;
  std::unique_ptr<uint32_t[]> big;
  uint32_t* tmp;
  if (batch * Dd * n <= kKeepScratch) {
    if (scratch.size() < batch * Dd * n) scratch.resize(batch * Dd * n);
    tmp = scratch.data();
  } else {
    big.reset(new uint32_t[batch * Dd * n]);
    tmp = big.get();
  }
  const uint32_t *xs = x.typed_data(), *wt = w.typed_data(), *st = ws.typed_data(), *wit = wi.typed_data(),
                 *sit = wis.typed_data(), *sc = scal_d.typed_data(), *ivs = inv_s.data();
  const int32_t *rk = rows_k.typed_data(), *rd = rows_d.typed_data();
  const uint32_t* as = addend_part < 0 ? nullptr : addend.typed_data();
  uint32_t* out = y->typed_data();
  // 1. the dropped rows to coefficients
  if (auto e = parallel_for(pool, batch * Dd, chunk_for(n), batch * Dd * n, [=, &kn](size_t u) {
        const size_t b = u / Dd, i = u % Dd, r = (size_t)rd[i];
        uint32_t* a = tmp + u * n;
        std::memcpy(a, xs + (b * M + (size_t)di[i]) * n, n * sizeof(uint32_t));
        kn.inverse(a, n, qds[i], wit + r * n, sit + r * n, sc + 4 * i);
      });
      e.failure())
    return e;
  // 2. their centered conversion to the kept limbs, into the output
  const size_t blk = conv_block(Dd, n, kb.width), blocks = (n + blk - 1) / blk, rows = T.ybuf_rows;
  if (auto e = parallel_for(pool, batch * blocks, 1, batch * Dd * n, [=, &kb, &T](size_t u) {
        thread_local std::vector<uint32_t> ybuf;  // bounded (conv_block)
        if (ybuf.size() < rows * blk) ybuf.resize(rows * blk);
        const size_t b = u / blocks, s = (u % blocks) * blk;
        kb.bconv_block(T, tmp + b * Dd * n, out + b * K * n, n, s, std::min(blk, n - s), ybuf.data());
      });
      e.failure())
    return e;
  // 3. per kept row: forward NTT of the conversion, then (x_keep - conv) * inv, as (x_keep + q - conv) * inv
  // (below 2q < 2^32: the Shoup product takes any uint32) by the Shoup kernel on a block of the constant
  // the addend's row for output row u (nullptr: none), gathered through the map into a per-thread row
  return parallel_for(pool, batch * K, chunk_for(n), batch * K * n, [=, &kn, &ka](size_t u) {
    constexpr size_t CH = 1024;
    thread_local std::vector<uint32_t> cst, arow;
    if (cst.size() < 2 * CH) cst.resize(2 * CH);
    const size_t b = u / K, k = u % K, r = (size_t)rk[k];
    const uint32_t qv = qks[k];
    uint32_t* a = out + u * n;
    const uint32_t* xk = xs + (b * M + (size_t)ki[k]) * n;
    const uint32_t* add = nullptr;
    if (as && b % S == 0) {
      add = as + (((b / S) * A + apick) * K + k) * n;
      if (mp) {
        if (arow.size() < n) arow.resize(n);
        ka.gather(arow.data(), add, mp, n);
        add = arow.data();
      }
    }
    kn.forward(a, n, qv, wt + r * n, st + r * n);
    std::fill(cst.begin(), cst.begin() + CH, iv[k]);
    std::fill(cst.begin() + CH, cst.begin() + 2 * CH, ivs[k]);
    for (size_t s = 0; s < n; s += CH) {
      const size_t cnt = std::min(CH, n - s);
      uint32_t* o = a + s;
      const uint32_t* v = xk + s;
      for (size_t j = 0; j < cnt; ++j) o[j] = v[j] + qv - o[j];
      kn.mul_shoup(o, o, cst.data(), cst.data() + CH, cnt, qv);
      if (add) {
        const uint32_t* t = add + s;
        for (size_t j = 0; j < cnt; ++j) {
          const uint32_t z = o[j] + t[j];  // both below q < 2^31
          o[j] = z >= qv ? z - qv : z;
        }
      }
    }
  });
}

// Guard<H>::call: handler H with every exception it could throw turned into an ffi::Error (guarded above).
template <auto H>
struct Guard;
template <class... A, ffi::Error (*H)(A...)>
struct Guard<H> {
  static ffi::Error call(A... args) {
    return guarded([&]() { return H(std::move(args)...); });
  }
};

}  // namespace
}  // namespace hemx

// The handlers, exported (the library is built with -fvisibility=hidden; only these and the extern "C" entry
// points are visible).
#define HEMX_HANDLER(sym, impl, ...)                                                                   \
  extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* sym(XLA_FFI_CallFrame* call_frame); \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(sym, hemx::Guard<impl>::call, __VA_ARGS__)

HEMX_HANDLER(HemxNttForward, &hemx::NttForward,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>());

HEMX_HANDLER(HemxNttInverse, &hemx::NttInverse,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>());

HEMX_HANDLER(HemxMulShoup, &hemx::MulShoup,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>());

HEMX_HANDLER(HemxButterflyProbe, &hemx::ButterflyProbe,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>()
                                  .Attr<int64_t>("reps"));

HEMX_HANDLER(HemxAutomorphism, &hemx::Automorphism,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>());

HEMX_HANDLER(HemxInnerProduct, &hemx::InnerProduct,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>());

HEMX_HANDLER(HemxPlainSums, &hemx::PlainSums,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()   // q
                                  .RemainingArgs()                // the parts, then the diagonals' blocks
                                  .RemainingRets()                // one sum per group
                                  .Attr<int64_t>("parts")
                                  .Attr<int64_t>("pieces")
                                  .Attr<ffi::Span<const int64_t>>("groups"));

HEMX_HANDLER(HemxUniform, &hemx::Uniform,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::S32>>()   // digits
                                  .Arg<ffi::Buffer<ffi::U32>>()   // key
                                  .Arg<ffi::Buffer<ffi::U32>>()   // q
                                  .Ret<ffi::Buffer<ffi::U32>>()
                                  .Attr<int64_t>("n")
                                  .Attr<int64_t>("xof"));

HEMX_HANDLER(HemxKeyProduct, &hemx::KeyProduct,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()   // a
                                  .Arg<ffi::Buffer<ffi::U32>>()   // b
                                  .Arg<ffi::Buffer<ffi::U32>>()   // key
                                  .Arg<ffi::Buffer<ffi::U32>>()   // q
                                  .Arg<ffi::Buffer<ffi::S32>>()   // map
                                  .Ret<ffi::Buffer<ffi::U32>>()
                                  .Attr<int64_t>("seeded")
                                  .Attr<int64_t>("permuted")
                                  .Attr<int64_t>("xof"));

HEMX_HANDLER(HemxBConv, &hemx::BConv,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>()
                                  .Attr<int64_t>("centered"));

HEMX_HANDLER(HemxModUp, &hemx::ModUp,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()   // x
                                  .Arg<ffi::Buffer<ffi::U32>>()   // q
                                  .Arg<ffi::Buffer<ffi::U32>>()   // w
                                  .Arg<ffi::Buffer<ffi::U32>>()   // ws
                                  .Arg<ffi::Buffer<ffi::U32>>()   // wi
                                  .Arg<ffi::Buffer<ffi::U32>>()   // wis
                                  .Arg<ffi::Buffer<ffi::U32>>()   // scal
                                  .Arg<ffi::Buffer<ffi::S32>>()   // rows
                                  .Arg<ffi::Buffer<ffi::S32>>()   // digits
                                  .Arg<ffi::Buffer<ffi::U32>>()   // qhinv
                                  .Arg<ffi::Buffer<ffi::U32>>()   // c
                                  .Arg<ffi::Buffer<ffi::U32>>()   // corr
                                  .Arg<ffi::Buffer<ffi::S32>>()   // map: (N,) or (0,)
                                  .Ret<ffi::Buffer<ffi::U32>>()
                                  .Attr<int64_t>("centered")
                                  .Attr<int64_t>("part"));

HEMX_HANDLER(HemxDivide, &hemx::Divide,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()   // x
                                  .Arg<ffi::Buffer<ffi::S32>>()   // keep
                                  .Arg<ffi::Buffer<ffi::S32>>()   // drop
                                  .Arg<ffi::Buffer<ffi::U32>>()   // qk
                                  .Arg<ffi::Buffer<ffi::U32>>()   // qd
                                  .Arg<ffi::Buffer<ffi::U32>>()   // w
                                  .Arg<ffi::Buffer<ffi::U32>>()   // ws
                                  .Arg<ffi::Buffer<ffi::S32>>()   // rows_k
                                  .Arg<ffi::Buffer<ffi::U32>>()   // wi
                                  .Arg<ffi::Buffer<ffi::U32>>()   // wis
                                  .Arg<ffi::Buffer<ffi::U32>>()   // scal_d
                                  .Arg<ffi::Buffer<ffi::S32>>()   // rows_d
                                  .Arg<ffi::Buffer<ffi::U32>>()   // qhinv
                                  .Arg<ffi::Buffer<ffi::U32>>()   // c
                                  .Arg<ffi::Buffer<ffi::U32>>()   // corr
                                  .Arg<ffi::Buffer<ffi::U32>>()   // inv
                                  .Arg<ffi::Buffer<ffi::U32>>()   // addend: (..., A, K, N) or (0,)
                                  .Arg<ffi::Buffer<ffi::S32>>()   // map: (N,) or (0,)
                                  .Ret<ffi::Buffer<ffi::U32>>()
                                  .Attr<int64_t>("addend_part")
                                  .Attr<int64_t>("centered"));

// Plain C entry points for ctypes (the instruction-set ones are in dispatch.cc, the self-test in selftest.cc).
extern "C" {
// Upper bound on the threads one call uses (0: XLA's pool size).
__attribute__((visibility("default"))) void hemx_native_set_max_threads(int n) { hemx::g_max_threads.store(n); }

// Work (in residues) below which one call runs on the caller's thread alone; a negative value restores the default.
__attribute__((visibility("default"))) void hemx_native_set_inline_residues(long long n) {
  hemx::g_inline_residues.store(n < 0 ? hemx::kInlineResidues : (size_t)n);
}
}
