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
    EXPECT_DOUBLE_EQ(c.core_tok_s, kernel_ceiling_tok_s(c.kinds));

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
    EXPECT_LT(rate, 1.5 * c.core_tok_s)
        << "decode " << rate << " tok/s, matmuls alone " << c.core_tok_s;
  }
}

}  // namespace
}  // namespace pacer::runtime
