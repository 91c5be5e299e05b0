// Elementwise microbenchmarks: rmsnorm, swiglu, softmax and the residual add per Isa, over Llama
// widths (n_embd 896 / 2048, n_ff 4864 / 8192, a 128256-entry vocabulary for softmax). These ops
// are small next to the matmuls, but they run on one core between parallel regions, so their
// latency adds straight to every decode step. bytes_per_second counts the floats read and written.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "ops/elementwise.h"
#include "ops/isa.h"
#include "ops/kernel_set.h"

namespace pacer::bench {
namespace {

using ops::Isa;

enum class Op { Rmsnorm, Swiglu, Softmax, Add };

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& e : v) e = d(rng);
  return v;
}

void BM_elementwise(benchmark::State& state, Op op, Isa isa) {
  if (!ops::isa_supported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const ops::KernelSet kernels = ops::KernelSet::for_isa(isa);
  const int64_t n = state.range(0);
  const std::vector<float> a = random_floats(n, 1), b = random_floats(n, 2);
  std::vector<float> out(static_cast<size_t>(n)), x = a;
  int64_t floats = 0;  // read + written per call
  for (auto _ : state) {
    switch (op) {
      case Op::Rmsnorm:
        ops::rmsnorm(a, b, 1e-6f, out, kernels);
        floats = 4 * n;  // x twice, w, out
        break;
      case Op::Swiglu:
        ops::swiglu(a, b, out, kernels);
        floats = 3 * n;
        break;
      case Op::Softmax:
        ops::softmax(x, kernels);  // values stay finite: softmax of a softmax is well defined
        floats = 5 * n;            // read for the max, read + write exp, read + write the scale
        break;
      case Op::Add:
        ops::add(a, b, out, kernels);
        floats = 3 * n;
        break;
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::DoNotOptimize(x.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * floats * static_cast<int64_t>(sizeof(float)));
}

#define PACER_ELEMENTWISE(name, OP, widths)                                                   \
  BENCHMARK_CAPTURE(BM_elementwise, name##_avx2, Op::OP, Isa::Avx2)->ArgNames({"n"})->widths; \
  BENCHMARK_CAPTURE(BM_elementwise, name##_avx512, Op::OP, Isa::Avx512)->ArgNames({"n"})->widths
PACER_ELEMENTWISE(rmsnorm, Rmsnorm, Args({896})->Args({2048}));
PACER_ELEMENTWISE(swiglu, Swiglu, Args({4864})->Args({8192}));
PACER_ELEMENTWISE(softmax, Softmax, Args({4096})->Args({128256}));
PACER_ELEMENTWISE(add, Add, Args({896})->Args({2048}));
#undef PACER_ELEMENTWISE

}  // namespace
}  // namespace pacer::bench
