// Attention microbenchmarks: one decode query token against a KV cache of `depth` positions, per
// Isa and cache type, at Llama-3.2-1B's shape (32 query heads over 8 KV heads of 64 dims, so each
// K/V row is read once for a group of 4 heads). Decode at long context is bound by reading the
// cache: bytes_per_second counts the K and V bytes visited, to set against the read bandwidth.
// One thread (SerialParallel), so the figure is the kernel's, not the partition's.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "ops/attention.h"
#include "ops/isa.h"
#include "ops/kernel_set.h"
#include "ops/parallel.h"

namespace pacer::bench {
namespace {

using ops::Isa;
using ops::WeightType;

void BM_attention(benchmark::State& state, WeightType kv_type, Isa isa) {
  if (!ops::isa_supported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const ops::KernelSet kernels = ops::KernelSet::for_isa(isa);
  const int64_t depth = state.range(0);
  ops::AttentionParams p;
  p.n_heads = 32;
  p.n_kv_heads = 8;
  p.head_dim = 64;
  p.scale = 0.125f;
  p.kv_type = kv_type;
  const int64_t row = static_cast<int64_t>(p.n_kv_heads) * p.head_dim;
  const int64_t row_bytes = ops::kv_row_bytes(kv_type, row);
  std::vector<std::byte> k_cache(static_cast<size_t>(depth * row_bytes));
  std::vector<std::byte> v_cache(k_cache.size());
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> k(static_cast<size_t>(row)), v(k.size());
  for (int64_t pos = 0; pos < depth; ++pos) {  // one position at a time: no depth x row buffer
    for (float& e : k) e = normal(rng);
    for (float& e : v) e = normal(rng);
    ops::kv_store(p, k, v, pos, 1, k_cache.data(), v_cache.data(), kernels);
  }
  std::vector<float> q(static_cast<size_t>(p.n_heads) * p.head_dim), out(q.size());
  for (float& e : q) e = normal(rng);
  const ops::SerialParallel serial;
  for (auto _ : state) {
    ops::attention(p, q, depth - 1, 1, k_cache.data(), v_cache.data(), out, serial, kernels);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * depth * row_bytes);
}

void depths(benchmark::internal::Benchmark* b) {
  b->ArgNames({"depth"})->Arg(512)->Arg(4096)->Arg(16384);
}

#define PACER_ATTENTION(name, TYPE)                                                         \
  BENCHMARK_CAPTURE(BM_attention, name##_avx2, WeightType::TYPE, Isa::Avx2)->Apply(depths); \
  BENCHMARK_CAPTURE(BM_attention, name##_avx512, WeightType::TYPE, Isa::Avx512)->Apply(depths)
PACER_ATTENTION(f16, F16);
PACER_ATTENTION(q8_0, Q8_0);
PACER_ATTENTION(f32, F32);
#undef PACER_ATTENTION

}  // namespace
}  // namespace pacer::bench
