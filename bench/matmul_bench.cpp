// GEMV (decode) microbenchmarks: one BENCHMARK_CAPTURE per (weight type, Isa), over the matmul
// shapes of Qwen2.5-0.5B and TinyLlama-1.1B, at 1 and 2 threads on the runtime's executor
// (runtime::Executor, unpinned: the dispatch and work stealing a decode matmul runs on).
//
// Counters: bytes_per_second = weight bytes streamed per second (the decode roofline quantity);
// FLOP/s = 2 * rows * cols per call; %bw = bytes_per_second as a percentage of the read bandwidth
// measured by ops::measure_read_bandwidth_gbs at the same thread count (1 GiB buffer);
// call_min_us / call_p50_us = fastest and median single call, best_GB/s and best_%bw from the
// fastest call (robust on a machine shared with other work, where the loop mean is not).
// %read (cold=1): the kernel's rate against a plain read of as many bytes of another cold copy,
// the two timed alternately call by call after the timed loop, the median of the pairs' ratios
// (pct_of_read): the figure to compare two builds or kernels by on a host whose bandwidth drifts.
//
// cold=1 rotates over enough copies of the weights that they total >= 2x the last-level cache
// (cold_bytes(): this machine's LLC as sysfs reports it), so every call streams its weights from
// DRAM: that is a DRAM figure, the one to hold against the bandwidth. cold=0 reuses one copy, which
// stays cache-resident when it fits (that is how llama.cpp's test-backend-ops perf mode measures,
// so compare like with like). The timed call includes quantizing the activations, as a decode step
// does.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ops/bandwidth.h"
#include "ops/isa.h"
#include "ops/kernel_set.h"
#include "ops/matmul.h"
#include "ops/parallel.h"
#include "runtime/executor.h"

namespace pacer::bench {
namespace {

using ops::Isa;
using ops::WeightType;

// What cold=1 rotates over: 2x the largest cache sysfs reports for CPU 0 (a fixed figure was
// warm on a 300 MiB-L3 Sapphire Rapids guest), at least 256 MiB where sysfs says nothing.
int64_t cold_bytes() {
  static const int64_t bytes = [] {
    int64_t largest = 0;
    for (int i = 0; i < 8; ++i) {
      std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
      std::string s;
      if (!(in >> s) || s.empty()) continue;
      int64_t v = std::atoll(s.c_str());
      if (s.back() == 'K') v <<= 10;
      if (s.back() == 'M') v <<= 20;
      largest = std::max(largest, v);
    }
    return std::max<int64_t>(2 * largest, int64_t{256} << 20);
  }();
  return bytes;
}
constexpr size_t kBandwidthProbeBytes = size_t{1} << 30;

// Weight copies for one (type, shape, cold) setting; the last one built is kept so the thread
// and Isa variants of a shape reuse it instead of rebuilding hundreds of MiB.
struct WeightCopies {
  WeightType type = WeightType::F32;
  int64_t rows = 0, cols = 0, count = 0;
  std::vector<std::byte> bytes;  // count * matrix bytes
  // The same copies repacked 16 rows interleaved (the types of x16_supported(), built on first
  // use).
  std::vector<ops::InterleavedMatrix> interleaved;
  ops::WeightMatrix copy(int64_t i) const {
    const int64_t matrix_bytes = rows * ops::row_bytes(type, cols);
    return ops::WeightMatrix{type, bytes.data() + i * matrix_bytes, rows, cols};
  }
  ops::WeightMatrix interleaved_copy(int64_t i) {
    if (interleaved.empty()) {
      for (int64_t c = 0; c < count; ++c)
        interleaved.push_back(ops::InterleavedMatrix::repack(copy(c)));
    }
    return interleaved[static_cast<size_t>(i)].view();
  }
};

WeightCopies& weight_copies(WeightType type, int64_t rows, int64_t cols, bool cold) {
  static WeightCopies cache;  // benchmark-process scratch, single-threaded registration/run
  const int64_t row_bytes = ops::row_bytes(type, cols);
  const int64_t matrix_bytes = rows * row_bytes;
  const int64_t count =
      cold ? std::max<int64_t>(1, (cold_bytes() + matrix_bytes - 1) / matrix_bytes) : 1;
  if (cache.type == type && cache.rows == rows && cache.cols == cols && cache.count == count) {
    return cache;
  }
  cache = WeightCopies{type, rows, cols, count, {}, {}};
  cache.bytes.resize(static_cast<size_t>(count * matrix_bytes));
  // 64 distinct random rows, tiled: realistic scales and quants without quantizing 500 MiB.
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> src(static_cast<size_t>(cols));
  const int64_t distinct = std::min<int64_t>(64, rows * count);
  for (int64_t r = 0; r < distinct; ++r) {
    for (float& f : src) f = dist(rng);
    ops::quantize_row(type, src.data(), cache.bytes.data() + r * row_bytes, cols);
  }
  for (int64_t r = distinct; r < rows * count; ++r) {
    std::memcpy(cache.bytes.data() + r * row_bytes, cache.bytes.data() + (r % distinct) * row_bytes,
                static_cast<size_t>(row_bytes));
  }
  return cache;
}

// n activations ~ N(0, 1), the same for a given seed.
std::vector<float> normal_floats(int64_t n, uint32_t seed) {
  std::vector<float> x(static_cast<size_t>(n));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& f : x) f = dist(rng);
  return x;
}

// Best-of-3 read bandwidth at `threads` threads, measured once per thread count.
double read_bandwidth_gbs(int threads) {
  static std::map<int, double> measured;
  auto it = measured.find(threads);
  if (it == measured.end()) {
    it =
        measured.emplace(threads, ops::measure_read_bandwidth_gbs(threads, kBandwidthProbeBytes, 3))
            .first;
  }
  return it->second;
}

// A plain read of [p, p + bytes) on `par`'s workers, each share in one sequential pass (AVX-512
// or AVX2 loads, no prefetch: the probe's `x1 stream` loop); returns the words' sum.
// bytes: a multiple of 4 KiB.
uint64_t read_on(const ops::Parallel& par, const std::byte* p, int64_t bytes) {
  constexpr int64_t kPage = 4096;
  std::atomic<uint64_t> sum{0};
  const bool avx512 = ops::isa_supported(Isa::Avx512);
  par.run_chunks(bytes / kPage, 1, [&](int, int64_t begin, int64_t end) {
    const std::byte* q = p + begin * kPage;
    const auto n = static_cast<size_t>((end - begin) * kPage);
    sum += avx512 ? ops::sum_words_avx512(q, n, 1, 1, 0, 0) : ops::sum_words_avx2(q, n, 1, 1, 0, 0);
  });
  return sum;
}

// The %read counter: pairs (at least 16, then while ~0.3 s lasts, at most 256) of a call on one
// cold copy (call(k), k < count) and a plain read (read_on) of the next copy in turn (data(k): the
// layout and pages the call reads), each timed; returns 100 x the median of the read's time per
// byte / the call's. A pair's two halves run a few hundred microseconds apart, so a host whose
// DRAM bandwidth moves from minute to minute moves both alike. Zen 4 guest, two runs of the
// Q4_0, Q8_0 and Q4_K 16-row GEMVs (5632x2048, 1 and 2 threads): %read 95-101 in both, while
// %bw (against the one probe of each process) read 78-91 in the first and 49-85 in the second.
// Above 100: the kernel outreads one plain stream (two far-apart streams can).
template <class Call, class Data>
double pct_of_read(const Call& call, const Data& data, int64_t count, int64_t bytes,
                   const ops::Parallel& par) {
  constexpr int64_t kPage = 4096;  // read_on's unit
  const int64_t read_bytes = bytes / kPage * kPage;
  if (!ops::isa_supported(Isa::Avx2) || count < 2 || read_bytes == 0) return 0;
  using Clock = std::chrono::steady_clock;
  std::vector<double> ratio;
  const auto stop = Clock::now() + std::chrono::milliseconds(300);
  uint64_t sink = 0;
  for (int64_t i = 0; i < 256 && (ratio.size() < 16 || Clock::now() < stop); ++i) {
    // The copies in turn, as the timed loop: each is read again only after all the others.
    const auto t0 = Clock::now();
    call((2 * i) % count);
    const auto t1 = Clock::now();
    sink += read_on(par, data((2 * i + 1) % count), read_bytes);
    const auto t2 = Clock::now();
    const double read_s = std::chrono::duration<double>(t2 - t1).count();
    const double call_s = std::chrono::duration<double>(t1 - t0).count();
    ratio.push_back((read_s / static_cast<double>(read_bytes)) /
                    (call_s / static_cast<double>(bytes)));
  }
  benchmark::DoNotOptimize(sink);
  std::sort(ratio.begin(), ratio.end());
  return 100.0 * ratio[ratio.size() / 2];
}

// `interleaved`: the weights repacked as a model load does (ops::InterleavedMatrix).
void BM_gemv(benchmark::State& state, WeightType type, Isa isa, bool interleaved = false) {
  if (!ops::isa_supported(isa)) {
    state.SkipWithError((std::string(ops::isa_name(isa)) + " not supported by this CPU").c_str());
    return;
  }
  const int64_t rows = state.range(0), cols = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const bool cold = state.range(3) != 0;
  WeightCopies& w = weight_copies(type, rows, cols, cold);
  if (interleaved) w.interleaved_copy(0);  // built before timing
  const std::vector<float> x = normal_floats(cols, 2);
  std::vector<float> y(static_cast<size_t>(rows));
  ops::PackedActivations scratch;
  // The runtime's executor (unpinned, as `pacer bench` by default): its dispatch, shares and
  // work stealing are part of what a decode matmul costs at 2+ threads.
  const runtime::Executor par(runtime::ExecutorSettings{}.set_threads(threads));
  const ops::KernelSet kernels = ops::KernelSet::for_isa(isa);  // once, as a Session does
  int64_t next = 0;
  // Per-call wall times as well: their minimum is the figure least disturbed by other work on a
  // shared machine (the loop's mean, Time above, is the headline).
  std::vector<double> call_us;
  call_us.reserve(1 << 16);
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    ops::matmul(interleaved ? w.interleaved_copy(next) : w.copy(next), x, 1, y, scratch, par,
                kernels);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    const auto t1 = std::chrono::steady_clock::now();
    if (call_us.size() < call_us.capacity()) {
      call_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    next = next + 1 == w.count ? 0 : next + 1;
  }
  const double bytes = static_cast<double>(rows * ops::row_bytes(type, cols));
  const double calls = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes * calls));
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(rows * cols) * calls,
                                                benchmark::Counter::kIsRate);
  const double bw = read_bandwidth_gbs(threads) * 1e9;
  state.counters["%bw"] =
      benchmark::Counter(100.0 * bytes * calls / bw, benchmark::Counter::kIsRate);
  if (!call_us.empty()) {
    std::sort(call_us.begin(), call_us.end());
    state.counters["call_min_us"] = call_us.front();
    state.counters["call_p50_us"] = call_us[call_us.size() / 2];
    state.counters["best_GB/s"] = bytes / (call_us.front() * 1e-6) / 1e9;
    state.counters["best_%bw"] = 100.0 * bytes / (call_us.front() * 1e-6) / bw;
  }
  state.counters["copies"] = static_cast<double>(w.count);
  if (cold) {
    const double pct = pct_of_read(
        [&](int64_t k) {
          ops::matmul(interleaved ? w.interleaved_copy(k) : w.copy(k), x, 1, y, scratch, par,
                      kernels);
          benchmark::DoNotOptimize(y.data());
          benchmark::ClobberMemory();
        },
        [&](int64_t k) { return (interleaved ? w.interleaved_copy(k) : w.copy(k)).data; }, w.count,
        static_cast<int64_t>(bytes), par);
    if (pct > 0) state.counters["%read"] = pct;
  }
}

// (rows, cols) of every GEMV of a decode step: Qwen2.5-0.5B (q/o, gate/up, down, output) and
// TinyLlama-1.1B (the same four).
const int64_t kShapes[][2] = {{896, 896},   {4864, 896},  {896, 4864},  {151936, 896},
                              {2048, 2048}, {5632, 2048}, {2048, 5632}, {32000, 2048}};

void gemv_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "threads", "cold"});
  for (const auto& s : kShapes) {
    b->ArgsProduct({{s[0]}, {s[1]}, {1, 2}, {0, 1}});
  }
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
  // With --benchmark_repetitions, also report the fastest repetition: on a machine shared with
  // other work it is the figure least disturbed by them (the median is the headline figure).
  b->ComputeStatistics(
      "min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); });
}

// K-quants (Q4_K_M files) need cols % 256 == 0: TinyLlama's four GEMV shapes only.
void gemv_kquant_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "threads", "cold"});
  for (const auto& s : kShapes) {
    if (s[1] % 256 == 0) b->ArgsProduct({{s[0]}, {s[1]}, {1, 2}, {0, 1}});
  }
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
  b->ComputeStatistics(  // as gemv_args
      "min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); });
}

// One worker's share of a decode GEMV on a many-core machine: 128 or 64 rows (8 or 4 groups of
// the x16 layouts) of TinyLlama's 2048 columns, as 2048-row matrices give 16 or 32 threads, called
// back to back on cold copies. Against the full shapes above (cold:1, threads:1) this is what
// the start of every call costs: streams to set up and their first lines missed.
void gemv_share_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "threads", "cold"});
  b->ArgsProduct({{128, 64}, {2048}, {1}, {1}});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

#define PACER_GEMV(tname, TYPE)                                                                \
  BENCHMARK_CAPTURE(BM_gemv, tname##_scalar, WeightType::TYPE, Isa::Scalar)->Apply(gemv_args); \
  BENCHMARK_CAPTURE(BM_gemv, tname##_avx2, WeightType::TYPE, Isa::Avx2)->Apply(gemv_args);     \
  BENCHMARK_CAPTURE(BM_gemv, tname##_avx512, WeightType::TYPE, Isa::Avx512)->Apply(gemv_args)

PACER_GEMV(q4_0, Q4_0);
// Q4_0 and Q8_0 as pacer runs them on AVX-512 VNNI: repacked at load (ops/interleaved.h).
BENCHMARK_CAPTURE(BM_gemv, q4_0x16_avx512, WeightType::Q4_0, Isa::Avx512, true)->Apply(gemv_args);
BENCHMARK_CAPTURE(BM_gemv, q8_0x16_avx512, WeightType::Q8_0, Isa::Avx512, true)->Apply(gemv_args);
// The same layouts as pacer runs them on AVX2 (vpmaddubsw, interleaved_avx2.cpp).
BENCHMARK_CAPTURE(BM_gemv, q4_0x16_avx2, WeightType::Q4_0, Isa::Avx2, true)->Apply(gemv_args);
BENCHMARK_CAPTURE(BM_gemv, q8_0x16_avx2, WeightType::Q8_0, Isa::Avx2, true)->Apply(gemv_args);
PACER_GEMV(q8_0, Q8_0);
// The other 32-element block types, row-major and as pacer runs them on AVX-512 VNNI: repacked
// at load (ops/interleaved.h).
PACER_GEMV(q4_1, Q4_1);
PACER_GEMV(q5_0, Q5_0);
PACER_GEMV(q5_1, Q5_1);
PACER_GEMV(iq4_nl, IQ4_NL);
BENCHMARK_CAPTURE(BM_gemv, q4_1x16_avx512, WeightType::Q4_1, Isa::Avx512, true)->Apply(gemv_args);
BENCHMARK_CAPTURE(BM_gemv, q5_0x16_avx512, WeightType::Q5_0, Isa::Avx512, true)->Apply(gemv_args);
BENCHMARK_CAPTURE(BM_gemv, q5_1x16_avx512, WeightType::Q5_1, Isa::Avx512, true)->Apply(gemv_args);
BENCHMARK_CAPTURE(BM_gemv, iq4_nlx16_avx512, WeightType::IQ4_NL, Isa::Avx512, true)
    ->Apply(gemv_args);
// The same layouts as pacer runs them on AVX2 and on AVX-512 without VNNI (interleaved_avx2.cpp).
BENCHMARK_CAPTURE(BM_gemv, q4_1x16_avx2, WeightType::Q4_1, Isa::Avx2, true)->Apply(gemv_args);
BENCHMARK_CAPTURE(BM_gemv, q5_0x16_avx2, WeightType::Q5_0, Isa::Avx2, true)->Apply(gemv_args);
BENCHMARK_CAPTURE(BM_gemv, q5_1x16_avx2, WeightType::Q5_1, Isa::Avx2, true)->Apply(gemv_args);
BENCHMARK_CAPTURE(BM_gemv, iq4_nlx16_avx2, WeightType::IQ4_NL, Isa::Avx2, true)->Apply(gemv_args);
PACER_GEMV(f16, F16);
PACER_GEMV(bf16, BF16);
// F16 and BF16 as pacer runs them on AVX-512: repacked at load (ops/interleaved.h).
BENCHMARK_CAPTURE(BM_gemv, f16x16_avx512, WeightType::F16, Isa::Avx512, true)->Apply(gemv_args);
BENCHMARK_CAPTURE(BM_gemv, bf16x16_avx512, WeightType::BF16, Isa::Avx512, true)->Apply(gemv_args);
// And on AVX2 (interleaved_float_avx2.cpp).
BENCHMARK_CAPTURE(BM_gemv, f16x16_avx2, WeightType::F16, Isa::Avx2, true)->Apply(gemv_args);
BENCHMARK_CAPTURE(BM_gemv, bf16x16_avx2, WeightType::BF16, Isa::Avx2, true)->Apply(gemv_args);
PACER_GEMV(f32, F32);
BENCHMARK_CAPTURE(BM_gemv, q4_k_avx2, WeightType::Q4_K, Isa::Avx2)->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, q4_k_avx512, WeightType::Q4_K, Isa::Avx512)->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, q4_kx16_avx2, WeightType::Q4_K, Isa::Avx2, true)
    ->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, q5_k_avx2, WeightType::Q5_K, Isa::Avx2)->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, q5_kx16_avx2, WeightType::Q5_K, Isa::Avx2, true)
    ->Apply(gemv_kquant_args);
// Q4_K, Q5_K and Q6_K as pacer runs them on AVX-512 VNNI: repacked at load (ops/interleaved.h).
BENCHMARK_CAPTURE(BM_gemv, q4_kx16_avx512, WeightType::Q4_K, Isa::Avx512, true)
    ->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, q5_k_avx512, WeightType::Q5_K, Isa::Avx512)->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, q5_kx16_avx512, WeightType::Q5_K, Isa::Avx512, true)
    ->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, q6_kx16_avx512, WeightType::Q6_K, Isa::Avx512, true)
    ->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, q4_0x16_share_avx512, WeightType::Q4_0, Isa::Avx512, true)
    ->Apply(gemv_share_args);
BENCHMARK_CAPTURE(BM_gemv, q8_0x16_share_avx512, WeightType::Q8_0, Isa::Avx512, true)
    ->Apply(gemv_share_args);
BENCHMARK_CAPTURE(BM_gemv, q4_kx16_share_avx512, WeightType::Q4_K, Isa::Avx512, true)
    ->Apply(gemv_share_args);
BENCHMARK_CAPTURE(BM_gemv, q6_kx16_share_avx512, WeightType::Q6_K, Isa::Avx512, true)
    ->Apply(gemv_share_args);
BENCHMARK_CAPTURE(BM_gemv, f16x16_share_avx512, WeightType::F16, Isa::Avx512, true)
    ->Apply(gemv_share_args);
BENCHMARK_CAPTURE(BM_gemv, q6_k_avx2, WeightType::Q6_K, Isa::Avx2)->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, q6_kx16_avx2, WeightType::Q6_K, Isa::Avx2, true)
    ->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, q6_k_avx512, WeightType::Q6_K, Isa::Avx512)->Apply(gemv_kquant_args);
// Q3_K row-major and, as pacer runs it on AVX-512 VNNI, repacked (interleaved_q3_k_avx512vnni.cpp).
BENCHMARK_CAPTURE(BM_gemv, q3_k_avx512, WeightType::Q3_K, Isa::Avx512)->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, q3_kx16_avx512, WeightType::Q3_K, Isa::Avx512, true)
    ->Apply(gemv_kquant_args);
// Q2_K and IQ4_XS likewise (interleaved_q2_k_avx512vnni.cpp, interleaved_iq4_xs_avx512vnni.cpp).
BENCHMARK_CAPTURE(BM_gemv, q2_k_avx512, WeightType::Q2_K, Isa::Avx512)->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, q2_kx16_avx512, WeightType::Q2_K, Isa::Avx512, true)
    ->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, iq4_xs_avx512, WeightType::IQ4_XS, Isa::Avx512)->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, iq4_xsx16_avx512, WeightType::IQ4_XS, Isa::Avx512, true)
    ->Apply(gemv_kquant_args);
// IQ4_XS, Q3_K and Q2_K on AVX2, row-major and repacked (interleaved_iq4_xs_avx2.cpp,
// interleaved_q3_k_avx2.cpp, interleaved_q2_k_avx2.cpp).
BENCHMARK_CAPTURE(BM_gemv, q2_k_avx2, WeightType::Q2_K, Isa::Avx2)->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, q2_kx16_avx2, WeightType::Q2_K, Isa::Avx2, true)
    ->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, q3_k_avx2, WeightType::Q3_K, Isa::Avx2)->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, q3_kx16_avx2, WeightType::Q3_K, Isa::Avx2, true)
    ->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, iq4_xs_avx2, WeightType::IQ4_XS, Isa::Avx2)->Apply(gemv_kquant_args);
BENCHMARK_CAPTURE(BM_gemv, iq4_xsx16_avx2, WeightType::IQ4_XS, Isa::Avx2, true)
    ->Apply(gemv_kquant_args);

// A decode GEMV (TinyLlama's 2048 x 2048, Q4_0 repacked, cold copies) right after its caller spent
// `idle_us` on work that reads nothing from DRAM (a spin on the clock), on `threads` workers: what
// a serial phase between two matmuls (the norms, rope, attention at a short context, the
// recorder's bookkeeping) costs the next one beyond its own length. Only the call is timed.
// Zen 5 dev VM (session 34): a core that has read nothing from DRAM for ~25 us or more streams its
// next 2.4 MB ~10-27 us slower, under 20 us nothing. Here: call p50 1 worker 62-64 us after
// 0-40 us idle, 75 after 100; 2 workers 33-35 after 0-20 us, 44 after 40, 56 after 100 (a
// throwaway loop of 1000 calls per gap: 1 worker 58 -> 82-86 us from 25 us on). A trickle of one
// line every 0.2-10 us during the gap does not keep a core's reads fast, streaming does (1 worker),
// and a core keeps only its own reads fast (2 workers: the caller streaming through the gap left
// the other worker's penalty as it was).
void BM_gemv_after_idle(benchmark::State& state) {
  const Isa isa = ops::detect_isa();
  const int64_t rows = 2048, cols = 2048;
  const int64_t idle_us = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  WeightCopies& w = weight_copies(WeightType::Q4_0, rows, cols, true);
  w.interleaved_copy(0);  // built before timing
  const std::vector<float> x = normal_floats(cols, 4);
  std::vector<float> y(static_cast<size_t>(rows));
  ops::PackedActivations scratch;
  const runtime::Executor par(runtime::ExecutorSettings{}.set_threads(threads));
  const ops::KernelSet kernels = ops::KernelSet::for_isa(isa);
  int64_t next = 0;
  std::vector<double> call_us;
  call_us.reserve(1 << 16);
  for (auto _ : state) {
    const auto idle_end = std::chrono::steady_clock::now() + std::chrono::microseconds(idle_us);
    while (std::chrono::steady_clock::now() < idle_end) {
    }
    const auto t0 = std::chrono::steady_clock::now();
    ops::matmul(w.interleaved_copy(next), x, 1, y, scratch, par, kernels);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(us * 1e-6);
    if (call_us.size() < call_us.capacity()) call_us.push_back(us);
    next = next + 1 == w.count ? 0 : next + 1;
  }
  const double bytes = static_cast<double>(rows * ops::row_bytes(WeightType::Q4_0, cols));
  state.SetBytesProcessed(static_cast<int64_t>(bytes * static_cast<double>(state.iterations())));
  if (!call_us.empty()) {
    std::sort(call_us.begin(), call_us.end());
    state.counters["call_p50_us"] = call_us[call_us.size() / 2];
  }
}
BENCHMARK(BM_gemv_after_idle)
    ->ArgNames({"idle_us", "threads"})
    ->ArgsProduct({{0, 10, 20, 40, 100}, {1, 2}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// GEMM (prefill): `tokens` activations against one weight copy (cache-resident when it fits:
// prefill reuses each weight tile across the tokens, so it is compute-bound). FLOP/s is the
// headline; bytes_per_second still counts weight bytes once per call. `interleaved`: the
// weights repacked as a model load does.
void BM_gemm(benchmark::State& state, WeightType type, Isa isa, bool interleaved = false) {
  if (!ops::isa_supported(isa)) {
    state.SkipWithError((std::string(ops::isa_name(isa)) + " not supported by this CPU").c_str());
    return;
  }
  const int64_t rows = state.range(0), cols = state.range(1), tokens = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  WeightCopies& w = weight_copies(type, rows, cols, false);
  const ops::WeightMatrix matrix = interleaved ? w.interleaved_copy(0) : w.copy(0);
  const std::vector<float> x = normal_floats(cols * tokens, 3);
  std::vector<float> y(static_cast<size_t>(rows * tokens));
  ops::PackedActivations scratch;
  const runtime::Executor par(runtime::ExecutorSettings{}.set_threads(threads));
  const ops::KernelSet kernels = ops::KernelSet::for_isa(isa);
  for (auto _ : state) {
    ops::matmul(matrix, x, tokens, y, scratch, par, kernels);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double calls = static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(rows * ops::row_bytes(type, cols) * calls));
  state.counters["FLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(rows * cols * tokens) * calls, benchmark::Counter::kIsRate);
}

void gemm_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "tokens", "threads"});
  // TinyLlama's ffn_up and a square attention matrix at 16 and 128 tokens, and Qwen2.5-0.5B's
  // fused ffn_gate_up (9728 x 896) and ffn_down (896 x 4864) at pp64.
  for (int64_t threads : {1, 2}) {
    for (int64_t tokens : {16, 128}) {
      b->Args({2048, 2048, tokens, threads});
      b->Args({5632, 2048, tokens, threads});
    }
    b->Args({9728, 896, 64, threads});
    b->Args({896, 4864, 64, threads});
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_gemm, q4_0_avx512, WeightType::Q4_0, Isa::Avx512)->Apply(gemm_args);
BENCHMARK_CAPTURE(BM_gemm, q8_0_avx512, WeightType::Q8_0, Isa::Avx512)->Apply(gemm_args);
BENCHMARK_CAPTURE(BM_gemm, f16_avx512, WeightType::F16, Isa::Avx512)->Apply(gemm_args);
BENCHMARK_CAPTURE(BM_gemm, q4_0_avx2, WeightType::Q4_0, Isa::Avx2)->Apply(gemm_args);
BENCHMARK_CAPTURE(BM_gemm, q8_0_avx2, WeightType::Q8_0, Isa::Avx2)->Apply(gemm_args);
BENCHMARK_CAPTURE(BM_gemm, q4_0x16_avx2, WeightType::Q4_0, Isa::Avx2, true)->Apply(gemm_args);
BENCHMARK_CAPTURE(BM_gemm, q8_0x16_avx2, WeightType::Q8_0, Isa::Avx2, true)->Apply(gemm_args);
BENCHMARK_CAPTURE(BM_gemm, f16_avx2, WeightType::F16, Isa::Avx2)->Apply(gemm_args);
BENCHMARK_CAPTURE(BM_gemm, bf16_avx2, WeightType::BF16, Isa::Avx2)->Apply(gemm_args);
BENCHMARK_CAPTURE(BM_gemm, f16x16_avx2, WeightType::F16, Isa::Avx2, true)->Apply(gemm_args);
BENCHMARK_CAPTURE(BM_gemm, bf16x16_avx2, WeightType::BF16, Isa::Avx2, true)->Apply(gemm_args);
BENCHMARK_CAPTURE(BM_gemm, f32_avx2, WeightType::F32, Isa::Avx2)->Apply(gemm_args);

// The roofline itself: read-only streaming of 1 GiB (far beyond the LLC) at 1 and 2 threads.
void BM_read_bandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  double gbs = 0;
  for (auto _ : state) gbs = ops::measure_read_bandwidth_gbs(threads, kBandwidthProbeBytes, 3);
  state.counters["GB/s"] = gbs;
}
BENCHMARK(BM_read_bandwidth)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pacer::bench

BENCHMARK_MAIN();
