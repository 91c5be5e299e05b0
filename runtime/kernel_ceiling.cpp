// The decode matmuls' rate with their weights in cache (kernel_ceiling.h).
#include "runtime/kernel_ceiling.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <tuple>

#include <fmt/format.h>

#include "ops/matmul.h"
#include "ops/matmul_rows.h"

namespace pacer::runtime {

double kernel_ceiling_tok_s(const std::vector<KernelRate>& kinds) noexcept {
  double s = 0;
  for (const KernelRate& k : kinds) {
    if (k.bytes_per_token <= 0) continue;
    if (!(k.gbs > 0)) return 0;
    s += static_cast<double>(k.bytes_per_token) / (k.gbs * 1e9);
  }
  return s > 0 ? 1 / s : 0;
}

namespace {

using Clock = std::chrono::steady_clock;

// Rows of the slice timed for `w`: whole 16-row groups (the interleaved layout's unit, and the
// workers' row alignment) of about `target` bytes, at least one, at most the matrix.
int64_t slice_rows(const ops::WeightMatrix& w, int64_t target) {
  const int64_t row_bytes = std::max<int64_t>(1, w.bytes() / std::max<int64_t>(1, w.rows));
  int64_t rows = target / row_bytes / ops::kMatmulRowAlign * ops::kMatmulRowAlign;
  rows = std::max(rows, ops::kMatmulRowAlign);
  return std::min(rows, w.rows);
}

// Best GB/s of `opts.passes` passes of repeated calls over rows [0, rows) of w: on the calling
// thread, or on every worker of opts.workers at once (each with its own output rows; the bytes of
// all of them over the pass's wall time).
double time_slice(const ops::WeightMatrix& w, int64_t rows, const ops::KernelSet& kernels,
                  const KernelCeilingOptions& opts, int64_t* slice_bytes) {
  std::mt19937 rng(12345);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(w.cols));
  for (float& v : x) v = normal(rng);
  ops::PackedActivations act;
  act.pack(w.type, x, w.cols, 1, kernels);
  const int workers = opts.workers != nullptr ? std::max(1, opts.workers->workers()) : 1;
  std::vector<std::vector<float>> ys(static_cast<size_t>(workers),
                                     std::vector<float>(static_cast<size_t>(w.rows)));
  const auto [first, last] = ops::row_byte_range(w, 0, rows);
  *slice_bytes = last - first;
  const auto call = [&](int worker) {
    ops::matmul_rows(w, act, ys[static_cast<size_t>(worker)], 0, rows, kernels);
  };
  // Size a pass on this thread (warming the slice into its cache).
  const auto t0 = Clock::now();
  int64_t calls = 0;
  do {
    call(0);
    ++calls;
  } while (std::chrono::duration<double>(Clock::now() - t0).count() < opts.pass_s / 4);
  const double per_call = std::chrono::duration<double>(Clock::now() - t0).count() / calls;
  const int64_t per_pass = std::max<int64_t>(1, static_cast<int64_t>(opts.pass_s / per_call));
  const auto pass = [&] {
    if (opts.workers == nullptr) {
      for (int64_t i = 0; i < per_pass; ++i) call(0);
      return;
    }
    // One chunk per worker (chunks of one element are never split or shared).
    opts.workers->run_chunks(workers, 1, [&](int chunk, int64_t, int64_t) {
      for (int64_t i = 0; i < per_pass; ++i) call(chunk);
    });
  };
  if (opts.workers != nullptr) pass();  // the other workers' caches
  double best = 0;
  for (int p = 0; p < opts.passes; ++p) {
    const auto start = Clock::now();
    pass();
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, static_cast<double>(*slice_bytes) * per_pass * workers / s / 1e9);
  }
  return best;
}

}  // namespace

KernelCeiling measure_kernel_ceiling(const loader::Weights& w, const ops::KernelSet& kernels,
                                     const KernelCeilingOptions& opts) {
  // Every decode matmul, grouped by what selects its kernel and its per-byte work.
  using Key = std::tuple<ops::WeightType, ops::WeightLayout, int64_t>;
  std::map<Key, std::pair<KernelRate, const ops::WeightMatrix*>> kinds;
  const auto add = [&](const ops::WeightMatrix& m) {
    if (m.data == nullptr || m.rows <= 0) return;
    auto [it, fresh] = kinds.try_emplace(Key{m.type, m.layout, m.cols});
    KernelRate& k = it->second.first;
    if (fresh) {
      k.type = m.type;
      k.layout = m.layout;
      k.cols = m.cols;
      it->second.second = &m;
    }
    ++k.matrices;
    k.bytes_per_token += m.bytes();
  };
  for (const loader::LayerWeights& l : w.layers) {
    for (const ops::WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      add(*m);
  }
  add(w.output);

  KernelCeiling c;
  c.workers = opts.workers != nullptr ? std::max(1, opts.workers->workers()) : 1;
  for (auto& [key, entry] : kinds) {
    KernelRate& k = entry.first;
    const ops::WeightMatrix& m = *entry.second;
    k.gbs = time_slice(m, slice_rows(m, opts.slice_bytes), kernels, opts, &k.slice_bytes);
    c.kinds.push_back(k);
  }
  std::stable_sort(c.kinds.begin(), c.kinds.end(), [](const KernelRate& a, const KernelRate& b) {
    return a.bytes_per_token > b.bytes_per_token;
  });
  c.tok_s = kernel_ceiling_tok_s(c.kinds);
  int64_t total = 0;
  for (const KernelRate& k : c.kinds) total += k.bytes_per_token;
  std::string per_kind;
  for (const KernelRate& k : c.kinds) {
    per_kind += fmt::format("{}{} {} cols{} {:.1f} GB/s ({:.0f}% of the bytes)",
                            per_kind.empty() ? "" : ", ", ops::type_name(k.type), k.cols,
                            k.layout == ops::WeightLayout::Interleaved16 ? " x16" : "", k.gbs,
                            100.0 * static_cast<double>(k.bytes_per_token) /
                                static_cast<double>(std::max<int64_t>(1, total)));
  }
  const std::string on = !opts.placement.empty()
                             ? opts.placement
                             : fmt::format("{} thread{}", c.workers, c.workers > 1 ? "s" : "");
  c.method = fmt::format(
      "each kind of decode matmul on a slice of its first matrix that stays in L2 (~{} KiB), best "
      "of {} passes on {}{}: {}",
      opts.slice_bytes >> 10, opts.passes, on,
      c.workers > 1 ? ", each running the slice at once (GB/s of all of them)" : "", per_kind);
  return c;
}

}  // namespace pacer::runtime
