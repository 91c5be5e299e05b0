// Attention microbenchmarks: one decode query token against a KV cache of `depth` positions, per
// Isa and cache type, at Llama-3.2-1B's and TinyLlama's shapes (each K/V row is read once for a
// group of 4 or 8 query heads). Decode at long context is bound by reading the
// cache: bytes_per_second counts the K and V bytes visited, to set against the read bandwidth.
// One thread (SerialParallel), so the figure is the kernel's, not the partition's. `huge`: the
// cache on transparent huge pages (as the runtime's KvCache asks for) or on 4 KiB pages.
#include <benchmark/benchmark.h>

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "ops/attention.h"
#include "ops/isa.h"
#include "ops/kernel_set.h"
#include "ops/parallel.h"
#include "runtime/executor.h"

namespace pacer::bench {
namespace {

using ops::Isa;
using ops::WeightType;

struct FreeBytes {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};

// 2 MiB-aligned bytes, on huge pages when asked (and the kernel allows THP).
std::unique_ptr<std::byte, FreeBytes> cache_bytes(int64_t bytes, bool huge) {
  constexpr int64_t kHuge = 2 << 20;
  const int64_t size = (bytes + kHuge - 1) / kHuge * kHuge;
  auto* p = static_cast<std::byte*>(std::aligned_alloc(kHuge, static_cast<size_t>(size)));
  ::madvise(p, static_cast<size_t>(size), huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  std::memset(p, 0, static_cast<size_t>(size));  // the last K block's unwritten lanes too
  return std::unique_ptr<std::byte, FreeBytes>(p);
}

// The `shape` argument: 0 is Llama-3.2-1B (32 query heads over 8 KV heads: groups of 4), 1 is
// TinyLlama-1.1B (32 over 4: groups of 8), 2 is Qwen2.5-0.5B (14 over 2: groups of 7), all of 64
// dims.
struct Shape {
  int n_heads, n_kv_heads, head_dim;
};
constexpr Shape kShapes[] = {{32, 8, 64}, {32, 4, 64}, {14, 2, 64}};

// The shape's attention over a cache of `positions` positions.
ops::AttentionParams shape_params(int64_t shape, WeightType kv_type, int64_t positions) {
  ops::AttentionParams p;
  p.kv_positions = positions;
  p.n_heads = kShapes[shape].n_heads;
  p.n_kv_heads = kShapes[shape].n_kv_heads;
  p.head_dim = kShapes[shape].head_dim;
  p.scale = 0.125f;
  p.kv_type = kv_type;
  return p;
}

int64_t cache_row_bytes(const ops::AttentionParams& p) {
  return ops::kv_row_bytes(p.kv_type, static_cast<int64_t>(p.n_kv_heads) * p.head_dim);
}

// A K and a V cache of p.kv_positions random positions, written one position at a time (no
// positions x row buffer).
struct Caches {
  std::unique_ptr<std::byte, FreeBytes> k, v;
};
Caches random_caches(const ops::AttentionParams& p, bool huge, const ops::KernelSet& kernels,
                     std::mt19937& rng) {
  const int64_t bytes = ops::kv_cache_bytes(p), positions = p.kv_positions;
  Caches c{cache_bytes(bytes, huge), cache_bytes(bytes, huge)};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> k(static_cast<size_t>(p.n_kv_heads) * p.head_dim), v(k.size());
  for (int64_t pos = 0; pos < positions; ++pos) {
    for (float& e : k) e = normal(rng);
    for (float& e : v) e = normal(rng);
    ops::kv_store(p, k, v, pos, 1, c.k.get(), c.v.get(), kernels);
  }
  return c;
}

// `layers` caches of `depth` positions each, attended in turn as a decode step does layer after
// layer: with many of them the step's cache bytes outgrow the LLC and come from DRAM, as in the
// runtime at depth; with one they stay in cache and the figure is the arithmetic's. The runtime's
// decode path: keys split into segments merged by their log-sum-exp.
struct DecodeStep {
  ops::AttentionParams p;
  int64_t depth;
  std::vector<Caches> caches;
  std::vector<float> q, out, scratch;

  DecodeStep(const ops::AttentionParams& params, int64_t depth_, int64_t layers, bool huge,
             const ops::KernelSet& kernels)
      : p(params), depth(depth_) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t layer = 0; layer < layers; ++layer) {
      caches.push_back(random_caches(p, huge, kernels, rng));
    }
    q.resize(static_cast<size_t>(p.n_heads) * p.head_dim);
    out.resize(q.size());
    for (float& e : q) e = normal(rng);
    scratch.resize(static_cast<size_t>(ops::attention_scratch_floats(p, 1, depth)));
  }
  // Runs the step; returns the cache bytes it visited.
  int64_t run(const ops::Parallel& par, const ops::KernelSet& kernels) {
    for (const Caches& c : caches) {
      ops::attention(p, q, depth - 1, 1, c.k.get(), c.v.get(), out, par, kernels, scratch);
      benchmark::DoNotOptimize(out.data());
      benchmark::ClobberMemory();
    }
    return static_cast<int64_t>(caches.size()) * 2 * depth * cache_row_bytes(p);
  }
};

void BM_attention(benchmark::State& state, WeightType kv_type, Isa isa) {
  if (!ops::isa_supported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const ops::KernelSet kernels = ops::KernelSet::for_isa(isa);
  DecodeStep step(shape_params(state.range(2), kv_type, state.range(0)), state.range(0),
                  state.range(3), state.range(1) != 0, kernels);
  const ops::SerialParallel serial;
  int64_t bytes = 0;
  for (auto _ : state) bytes += step.run(serial, kernels);
  state.SetBytesProcessed(bytes);
}

// BM_attention's step with q scaled by `sharpness` (scores' standard deviation: 1 in BM_attention):
// a peaked softmax, as in the heads of trained models that attend to a few keys. At 30, about a
// quarter of the weights e^(s - max) fall between e^-104 and e^-87, where a float is subnormal,
// and most of the rest are 0: the arithmetic on subnormals that x86 cores without
// flush-to-zero may take a microcode assist for.
void BM_attention_peaked(benchmark::State& state, Isa isa) {
  if (!ops::isa_supported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const ops::KernelSet kernels = ops::KernelSet::for_isa(isa);
  const int64_t depth = state.range(0);
  DecodeStep step(shape_params(1, WeightType::F16, depth), depth, 1, true, kernels);
  for (float& e : step.q) e *= static_cast<float>(state.range(1));
  const ops::SerialParallel serial;
  int64_t bytes = 0;
  for (auto _ : state) bytes += step.run(serial, kernels);
  state.SetBytesProcessed(bytes);
}

// The same decode step over `layers` caches on `threads` workers (runtime::Executor, the runtime's
// split into key segments x head groups): how the cache reads scale with the cores sharing them.
// TinyLlama's shape (groups of 8), F16; bytes_per_second as BM_attention's.
void BM_attention_threads(benchmark::State& state, Isa isa) {
  if (!ops::isa_supported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const ops::KernelSet kernels = ops::KernelSet::for_isa(isa);
  const int threads = static_cast<int>(state.range(2));
  DecodeStep step(shape_params(1, WeightType::F16, state.range(0)), state.range(0), state.range(1),
                  true, kernels);
  const runtime::Executor par(runtime::ExecutorSettings{}.set_threads(threads));
  int64_t bytes = 0;
  for (auto _ : state) bytes += step.run(par, kernels);
  state.SetBytesProcessed(bytes);
}

// A prefill batch: `tokens` query tokens at positions depth .. depth + tokens - 1 (causal: each
// sees the keys up to its own), against one cache from cache memory; bytes_per_second counts the
// K and V bytes each query token visits, as if each read them alone.
void BM_attention_prefill(benchmark::State& state, WeightType kv_type, Isa isa) {
  if (!ops::isa_supported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const ops::KernelSet kernels = ops::KernelSet::for_isa(isa);
  const int64_t depth = state.range(0), tokens = state.range(1);
  const ops::AttentionParams p = shape_params(state.range(2), kv_type, depth + tokens);
  const int64_t row_bytes = cache_row_bytes(p);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const Caches cache = random_caches(p, true, kernels, rng);
  std::vector<float> q(static_cast<size_t>(tokens * p.n_heads * p.head_dim)), out(q.size());
  for (float& e : q) e = normal(rng);
  const ops::SerialParallel serial;
  for (auto _ : state) {
    ops::attention(p, q, depth, tokens, cache.k.get(), cache.v.get(), out, serial, kernels);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const int64_t keys_seen = tokens * depth + tokens * (tokens + 1) / 2;
  state.SetBytesProcessed(state.iterations() * 2 * keys_seen * row_bytes);
}

void prefill_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"depth", "tokens", "shape"});
  for (int64_t shape : {0, 1}) {
    b->Args({0, 512, shape});
    b->Args({2048, 64, shape});
  }
}

void depths(benchmark::internal::Benchmark* b) {
  b->ArgNames({"depth", "huge", "shape", "layers"});
  for (int64_t shape : {0, 1}) {
    for (int64_t depth : {512, 4096, 16384}) b->Args({depth, 1, shape, 1});
    b->Args({16384, 0, shape, 1});
    b->Args({2048, 1, shape, 32});  // 32 x 2048 positions: 64 MiB (Llama-3.2-1B, F16) from DRAM
  }
  b->Args({512, 1, 2, 1});  // groups of 7: one pass on every tier (heads_per_pass)
  b->Args({2048, 1, 2, 32});
}

void thread_counts(benchmark::internal::Benchmark* b) {
  b->ArgNames({"depth", "layers", "threads"});
  for (int64_t threads : {1, 2, 4, 8, 16})
    b->Args({4096, 22, threads});  // TinyLlama at 4096: 92 MB
  // 22 x 16384 positions: 369 MB, past a 300 MB L3, as a decode step's caches are once the
  // weights (GBs) have streamed through it since the previous token.
  for (int64_t threads : {1, 4, 16}) b->Args({16384, 22, threads});
  // A short context (a decode right after a short prompt): 22 x 64 positions, all in cache, so
  // what is left is the split's and the dispatch's own cost per layer.
  for (int64_t threads : {1, 2}) b->Args({64, 22, threads});
  b->UseRealTime();
}

#define PACER_ATTENTION(name, TYPE)                                                         \
  BENCHMARK_CAPTURE(BM_attention, name##_avx2, WeightType::TYPE, Isa::Avx2)->Apply(depths); \
  BENCHMARK_CAPTURE(BM_attention, name##_avx512, WeightType::TYPE, Isa::Avx512)->Apply(depths)
PACER_ATTENTION(f16, F16);
BENCHMARK_CAPTURE(BM_attention_prefill, f16_avx2, WeightType::F16, Isa::Avx2)
    ->Apply(prefill_shapes);
BENCHMARK_CAPTURE(BM_attention_prefill, f16_avx512, WeightType::F16, Isa::Avx512)
    ->Apply(prefill_shapes);
BENCHMARK_CAPTURE(BM_attention_threads, f16_avx512, Isa::Avx512)->Apply(thread_counts);
BENCHMARK_CAPTURE(BM_attention_peaked, f16_avx2, Isa::Avx2)
    ->ArgNames({"depth", "sharpness"})
    ->Args({4096, 1})
    ->Args({4096, 30});
BENCHMARK_CAPTURE(BM_attention_peaked, f16_avx512, Isa::Avx512)
    ->ArgNames({"depth", "sharpness"})
    ->Args({4096, 1})
    ->Args({4096, 30});
PACER_ATTENTION(q8_0, Q8_0);
PACER_ATTENTION(f32, F32);
#undef PACER_ATTENTION

}  // namespace
}  // namespace pacer::bench
