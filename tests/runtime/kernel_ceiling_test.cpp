// The kernels' ceiling with their weights in cache (runtime/kernel_ceiling.h): the sum rule on
// hand values, every decode matmul of a model timed by kind, and a real decode of a cache-resident
// model no faster than the ceiling of its matmuls alone.
#include "runtime/kernel_ceiling.h"

#include <chrono>
#include <filesystem>

#include <gtest/gtest.h>

#include "loader/synth.h"
#include "ops/isa.h"
#include "ops/kernel_set.h"
#include "runtime/model.h"
#include "runtime/session.h"

namespace pacer::runtime {
namespace {

TEST(KernelCeiling, TheCeilingIsOneOverTheSumOfEachKindsTime) {
  // 1 GB at 10 GB/s (0.1 s) and 0.5 GB at 5 GB/s (0.1 s): 0.2 s a token, 5 tok/s.
  std::vector<KernelRate> kinds(2);
  kinds[0].bytes_per_token = 1'000'000'000;
  kinds[0].gbs = 10;
  kinds[1].bytes_per_token = 500'000'000;
  kinds[1].gbs = 5;
  EXPECT_DOUBLE_EQ(kernel_ceiling_tok_s(kinds), 5.0);
  // A kind without bytes adds nothing; a kind with bytes but no rate leaves no ceiling.
  kinds.push_back({});
  EXPECT_DOUBLE_EQ(kernel_ceiling_tok_s(kinds), 5.0);
  kinds.back().bytes_per_token = 1;
  EXPECT_EQ(kernel_ceiling_tok_s(kinds), 0.0);
  EXPECT_EQ(kernel_ceiling_tok_s({}), 0.0);
}

std::filesystem::path tiny_model(ops::WeightType type, const char* name) {
  const auto dir = std::filesystem::temp_directory_path() / "pacer-kernel-ceiling-test";
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  if (!std::filesystem::exists(path)) {
    loader::SynthSpec spec = loader::synth_preset("tiny");
    spec.type = type;
    spec.seed = 11;
    loader::write_synthetic_model(spec, path);
  }
  return path;
}

TEST(KernelCeiling, EveryDecodeMatmulIsTimedAndADecodeIsNoFaster) {
  for (const auto& [type, name] : {std::pair{ops::WeightType::Q8_0, "tiny-q8_0.gguf"},
                                   std::pair{ops::WeightType::Q4_0, "tiny-q4_0.gguf"}}) {
    SCOPED_TRACE(name);
    const Model model = Model::load(tiny_model(type, name));
    const ops::KernelSet kernels = ops::KernelSet::for_isa(ops::detect_isa());
    const KernelCeiling c = measure_kernel_ceiling(model.weights(), kernels);
    ASSERT_FALSE(c.kinds.empty());
    // Every matmul byte of a token belongs to exactly one kind; 7 matrices a layer and the output.
    int64_t bytes = 0, matrices = 0;
    for (const KernelRate& k : c.kinds) {
      SCOPED_TRACE(std::string(ops::type_name(k.type)) + " " + std::to_string(k.cols));
      bytes += k.bytes_per_token;
      matrices += k.matrices;
      EXPECT_GT(k.gbs, 0.0);
      EXPECT_GT(k.slice_bytes, 0);
      EXPECT_LE(k.slice_bytes, k.bytes_per_token);
      EXPECT_NE(c.method.find(std::string(ops::type_name(k.type))), std::string::npos) << c.method;
    }
    EXPECT_EQ(bytes, model.weights().matmul_bytes);
    EXPECT_EQ(matrices, 7 * model.config().n_layers + 1);
    for (size_t i = 1; i < c.kinds.size(); ++i)
      EXPECT_GE(c.kinds[i - 1].bytes_per_token, c.kinds[i].bytes_per_token);
    EXPECT_DOUBLE_EQ(c.tok_s, kernel_ceiling_tok_s(c.kinds));

    // A whole decode on one thread (the same matmuls plus attention, norms and the executor's
    // regions) of a model that stays in cache cannot beat its matmuls alone; 1.5x for a host
    // that slowed the ceiling's passes more than the decode's.
    SessionOptions so;
    so.threads = 1;
    so.ctx = 64;
    Session s(model, so);
    s.decode(1);
    const int n = 32;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) s.decode(2 + i);
    const double rate =
        n / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(rate, 1.5 * c.tok_s) << "decode " << rate << " tok/s, matmuls alone " << c.tok_s;
  }
}

// A Parallel of `n` workers that runs its chunks one after another on the calling thread and
// notes what it was asked to run.
class CountingSerial final : public ops::Parallel {
 public:
  explicit CountingSerial(int n) : n_(n) {}
  int workers() const noexcept override { return n_; }
  void run_chunks(int64_t n, int64_t align, const ops::ChunkFn& body) const override {
    ++passes_;
    sizes_ok_ = sizes_ok_ && n == n_ && align == 1;
    for (int c = 0; c < n_; ++c) {
      body(c, c, c + 1);
      ++chunks_run_;
    }
  }
  int passes() const { return passes_; }
  int64_t chunks_run() const { return chunks_run_; }
  bool sizes_ok() const { return sizes_ok_; }

 private:
  int n_;
  mutable int passes_ = 0;
  mutable int64_t chunks_run_ = 0;
  mutable bool sizes_ok_ = true;
};

TEST(KernelCeiling, OnWorkersEveryWorkerRunsEachPassAndTheRateIsTheirsTogether) {
  const Model model = Model::load(tiny_model(ops::WeightType::Q8_0, "tiny-q8_0.gguf"));
  const ops::KernelSet kernels = ops::KernelSet::for_isa(ops::detect_isa());
  const KernelCeiling one = measure_kernel_ceiling(model.weights(), kernels);
  EXPECT_EQ(one.workers, 1);
  EXPECT_NE(one.method.find("on 1 thread:"), std::string::npos) << one.method;

  // Three "workers" that take turns on one thread: each pass runs every worker's calls, and the
  // bytes of all three over the pass's time are what one thread reads: about one thread's
  // ceiling, not three times it (the rule before session 58 multiplied one core's rate by the
  // row's threads). Slack for a shared host: 0.5-1.5x.
  CountingSerial turns(3);
  KernelCeilingOptions o;
  o.workers = &turns;
  o.placement = "3 turns on one thread";
  const KernelCeiling three = measure_kernel_ceiling(model.weights(), kernels, o);
  EXPECT_EQ(three.workers, 3);
  ASSERT_EQ(three.kinds.size(), one.kinds.size());
  EXPECT_TRUE(turns.sizes_ok()) << "one chunk per worker, unsplittable";
  // Per kind: a warm-up pass for the other workers' caches, then the timed passes.
  EXPECT_EQ(turns.passes(), static_cast<int>(three.kinds.size()) * (o.passes + 1));
  EXPECT_EQ(turns.chunks_run(), 3 * turns.passes());
  EXPECT_NE(three.method.find("on 3 turns on one thread, each running the slice at once"),
            std::string::npos)
      << three.method;
  EXPECT_GT(three.tok_s, 0.5 * one.tok_s);
  EXPECT_LT(three.tok_s, 1.5 * one.tok_s);
}

}  // namespace
}  // namespace pacer::runtime
