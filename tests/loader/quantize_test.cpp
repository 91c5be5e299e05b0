// The quantizer: Q8_0 / Q4_0 blocks against bytes worked out here from ggml's rules, round-trip
// error bounds, and `quantize_gguf` on a synthetic model (metadata, untouched norms, file type).
#include <gtest/gtest.h>

#include <cctype>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "loader/gguf_file.h"
#include "loader/gguf_writer.h"
#include "loader/model_config.h"
#include "loader/quantize.h"
#include "loader/synth.h"
#include "loader/weights.h"
#include "ops/fp16.h"
#include "ops/quantize.h"
#include "ops/weight_matrix.h"

namespace pacer::loader {
namespace {

using ops::WeightType;

uint16_t le16(const std::byte* p) {
  return static_cast<uint16_t>(std::to_integer<unsigned>(p[0]) |
                               (std::to_integer<unsigned>(p[1]) << 8));
}

// Q8_0 block (34 bytes): fp16 d | int8 q[32];  d = amax / 127, q = round(x / d).
TEST(LlamaFileType, NamesAreLlamaCpps) {
  // As llama-bench (c392e50) printed them in model_type for files llama-quantize wrote: Q4_K_M,
  // Q2_K, IQ4_XS, Q3_K_M, BF16 (general.file_type 15, 10, 30, 12, 32).
  EXPECT_EQ(llama_file_type_name(15), "Q4_K - Medium");
  EXPECT_EQ(llama_file_type_name(10), "Q2_K - Medium");
  EXPECT_EQ(llama_file_type_name(30), "IQ4_XS - 4.25 bpw");
  EXPECT_EQ(llama_file_type_name(12), "Q3_K - Medium");
  EXPECT_EQ(llama_file_type_name(32), "BF16");
  // llama.h: 14 Q4_K_S, 17 Q5_K_M, 21 Q2_K_S, 0 all F32; bit 1024 marks a guessed type.
  EXPECT_EQ(llama_file_type_name(14), "Q4_K - Small");
  EXPECT_EQ(llama_file_type_name(17), "Q5_K - Medium");
  EXPECT_EQ(llama_file_type_name(21), "Q2_K - Small");
  EXPECT_EQ(llama_file_type_name(0), "all F32");
  EXPECT_EQ(llama_file_type_name(1024 + 2), "Q4_0 (guessed)");
  // Removed (4-6, 33-35) or never defined values.
  for (int64_t v : {4, 5, 6, 33, 34, 35, 38, 1023, -2}) {
    EXPECT_EQ(llama_file_type_name(v), "unknown, may not work") << v;
  }
}

TEST(LlamaFileType, AFileWithoutOneGetsTheTypeMostTensorsHaveAsLlamaCppGuesses) {
  // Tensors added out of name order; llama.cpp counts them in name order and a type leads only
  // once its count passes the leader's: a F32, b Q4_0, c Q4_0 (leads at 2), d F32 (ties, stays
  // behind), e Q8_0.
  const auto file = [](std::vector<std::pair<std::string, ops::WeightType>> tensors) {
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    for (const auto& [name, type] : tensors) {
      w.add_tensor(name, type, {256, 2},
                   std::vector<std::byte>(ops::row_bytes(type, 256) * 2, std::byte{0}));
    }
    return w.to_bytes();
  };
  using ops::WeightType;
  const auto tie = file({{"e", WeightType::Q8_0},
                         {"d", WeightType::F32},
                         {"c", WeightType::Q4_0},
                         {"a", WeightType::F32},
                         {"b", WeightType::Q4_0}});
  const uint32_t guess = llama_guessed_file_type(GgufFile::parse(tie, "tie.gguf"));
  EXPECT_EQ(guess, 1024u + 2u);  // LLAMA_FTYPE_MOSTLY_Q4_0 | LLAMA_FTYPE_GUESSED
  EXPECT_EQ(llama_file_type_name(guess), "Q4_0 (guessed)");
  // Most tensors Q4_K: llama.cpp assumes the Medium mix; all F32: "all F32 (guessed)".
  const auto k = file({{"a", WeightType::Q4_K}, {"b", WeightType::F32}, {"c", WeightType::Q4_K}});
  EXPECT_EQ(llama_file_type_name(llama_guessed_file_type(GgufFile::parse(k, "k.gguf"))),
            "Q4_K - Medium (guessed)");
  const auto f32 = file({{"a", WeightType::F32}});
  EXPECT_EQ(llama_file_type_name(llama_guessed_file_type(GgufFile::parse(f32, "f.gguf"))),
            "all F32 (guessed)");
}

TEST(LlamaFileType, EveryTargetTypesFileTypeNamesThatType) {
  // The file type pacer's quantizer writes for each target names the target's own type first
  // (Q4_K -> "Q4_K - Medium", IQ4_NL -> "IQ4_NL - 4.5 bpw"), upper-cased as llama.cpp writes it.
  for (ops::WeightType t : {ops::WeightType::F16, ops::WeightType::BF16, ops::WeightType::Q4_0,
                            ops::WeightType::Q4_1, ops::WeightType::Q5_0, ops::WeightType::Q5_1,
                            ops::WeightType::Q8_0, ops::WeightType::IQ4_NL, ops::WeightType::Q2_K,
                            ops::WeightType::Q3_K, ops::WeightType::Q4_K, ops::WeightType::Q5_K,
                            ops::WeightType::Q6_K, ops::WeightType::IQ4_XS}) {
    std::string upper(ops::type_name(t));
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(llama_file_type_name(llama_file_type(t)).rfind(upper, 0), 0u) << upper;
  }
}

TEST(QuantizeBlocks, Q8_0MatchesHandComputedBytes) {
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>((i - 16) * 0.3);
  x[5] = -15.875f;  // amax = 15.875 = 127 * 0.125, so d = 0.125 exactly (fp16 0x3000)
  std::byte out[34];
  ops::quantize_row(WeightType::Q8_0, x, out, 32);
  EXPECT_EQ(le16(out), 0x3000);
  for (int i = 0; i < 32; ++i) {
    // x / d = 8x = 2.4 (i - 16): never a tie, so round() is unambiguous.
    const int want = i == 5 ? -127 : static_cast<int>(std::lround(8.0 * (i - 16) * 0.3));
    EXPECT_EQ(static_cast<int8_t>(std::to_integer<uint8_t>(out[2 + i])), want) << i;
  }
  EXPECT_EQ(static_cast<int8_t>(std::to_integer<uint8_t>(out[2 + 16])), 0);   // x = 0
  EXPECT_EQ(static_cast<int8_t>(std::to_integer<uint8_t>(out[2 + 31])), 36);  // 8 * 4.5
}

// Q4_0 block (18 bytes): fp16 d | u8 qs[16]; max = the value of largest magnitude (signed),
// d = max / -8, q = min(15, (int8)(x / d + 8.5)); byte j = q[j] | q[j + 16] << 4.
TEST(QuantizeBlocks, Q4_0MatchesHandComputedBytes) {
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(((i % 13) - 6) * 0.3);
  x[3] = 2.0f;     // max = +2 -> d = -0.25 (fp16 0xb400), x / d = -4x
  x[20] = -1.95f;  // -4x + 8.5 = 16.3 -> 16 -> clamped to 15
  std::byte out[18];
  ops::quantize_row(WeightType::Q4_0, x, out, 32);
  EXPECT_EQ(le16(out), 0xb400);
  int q[32];
  for (int i = 0; i < 32; ++i) q[i] = std::min(15, static_cast<int>(std::trunc(8.5 - 4.0 * x[i])));
  EXPECT_EQ(q[3], 0);
  EXPECT_EQ(q[20], 15);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(std::to_integer<int>(out[2 + j]), q[j] | (q[j + 16] << 4)) << j;
  }
  // Dequantized: (q - 8) * d.
  float back[32];
  ops::dequantize_row(WeightType::Q4_0, out, back, 32);
  for (int i = 0; i < 32; ++i) EXPECT_FLOAT_EQ(back[i], (q[i] - 8) * -0.25f) << i;
}

// Largest |dequantized - x| in a block whose largest magnitude is amax. Q8_0: half a step of
// d = amax/127, plus up to 127 steps times the fp16 rounding of d (relative 2^-11). Q4_0: steps of
// amax/8, and the end opposite the max clamps at 7 steps, a full step away (plus 8 x fp16 error).
float error_bound(WeightType t, float amax) {
  const float fp16_rel = 1.0f / 2048;
  return t == WeightType::Q8_0 ? amax / 127 * (0.5f + 127 * fp16_rel) * 1.001f
                               : amax / 8 * (1.0f + 8 * fp16_rel) * 1.001f;
}

TEST(QuantizeBlocks, RoundTripErrorWithinHalfAStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int n = 32 * 64;
  std::vector<float> x(n), back(n);
  for (float& v : x) v = dist(rng) * (1 + (&v - x.data()) % 7);  // blocks of varied scale
  for (WeightType t : {WeightType::Q8_0, WeightType::Q4_0}) {
    SCOPED_TRACE(std::string(ops::type_name(t)));
    std::vector<std::byte> q(static_cast<size_t>(ops::row_bytes(t, n)));
    ops::quantize_row(t, x.data(), q.data(), n);
    ops::dequantize_row(t, q.data(), back.data(), n);
    for (int b = 0; b < n / 32; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
      const float bound = error_bound(t, amax);
      for (int i = 0; i < 32; ++i) {
        ASSERT_LE(std::fabs(back[b * 32 + i] - x[b * 32 + i]), bound)
            << "block " << b << " i " << i;
      }
    }
  }
}

class QuantizeFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("pacer_quantize_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    SynthSpec s = synth_preset("tiny-qwen2");
    s.type = WeightType::F16;
    write_synthetic_model(s, dir_ / "f16.gguf");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(QuantizeFile, Q8_0AndQ4_0KeepMetadataAndNorms) {
  const GgufFile in = GgufFile::open(dir_ / "f16.gguf");
  for (WeightType t : {WeightType::Q8_0, WeightType::Q4_0}) {
    SCOPED_TRACE(std::string(ops::type_name(t)));
    const auto out_path = dir_ / (std::string(ops::type_name(t)) + ".gguf");
    const QuantizeStats st = quantize_gguf(in, out_path, t);
    const GgufFile out = GgufFile::open(out_path);
    // 2 layers x 7 matmuls + token_embd (tied: no output.weight).
    EXPECT_EQ(st.tensors_quantized, 15);
    EXPECT_EQ(st.tensors_quantized + st.tensors_copied, static_cast<int64_t>(in.tensors().size()));
    EXPECT_EQ(out.get_int("general.file_type"), t == WeightType::Q8_0 ? 7 : 2);
    EXPECT_EQ(out.get_int("general.quantization_version"), 2);
    for (const GgufKv& kv : in.metadata()) {
      if (kv.key == "general.file_type") continue;
      const GgufValue* v = out.find(kv.key);
      ASSERT_NE(v, nullptr) << kv.key;
      EXPECT_EQ(v->type, kv.value.type) << kv.key;
      EXPECT_EQ(v->count, kv.value.count) << kv.key;
    }
    EXPECT_EQ(out.find("tokenizer.ggml.tokens")->array_string(300),
              in.find("tokenizer.ggml.tokens")->array_string(300));
    for (const GgufTensor& ti : in.tensors()) {
      const GgufTensor& to = out.require_tensor(ti.name);
      EXPECT_EQ(to.ne, ti.ne);
      if (ti.ne.size() == 1) {  // norms and biases: byte-identical F32
        EXPECT_EQ(to.type, WeightType::F32) << ti.name;
        EXPECT_EQ(std::memcmp(to.data.data(), ti.data.data(), ti.bytes), 0) << ti.name;
        continue;
      }
      ASSERT_EQ(to.type, t) << ti.name;
      // Every row equals quantize_row of the F16 row, and stays within the block error bound.
      const ops::WeightMatrix a = ti.matrix(), b = to.matrix();
      std::vector<float> src(a.cols), back(a.cols);
      std::vector<std::byte> want(static_cast<size_t>(ops::row_bytes(t, a.cols)));
      for (int64_t r = 0; r < a.rows; r += 37) {
        ops::dequantize_row(a.type, a.row(r), src.data(), a.cols);
        ops::quantize_row(t, src.data(), want.data(), a.cols);
        ASSERT_EQ(std::memcmp(b.row(r), want.data(), want.size()), 0) << ti.name << " row " << r;
        ops::dequantize_row(t, b.row(r), back.data(), a.cols);
        float amax = 0, worst = 0;
        for (int64_t c = 0; c < a.cols; ++c) {
          amax = std::max(amax, std::fabs(src[c]));
          worst = std::max(worst, std::fabs(back[c] - src[c]));
        }
        EXPECT_LE(worst, error_bound(t, amax)) << ti.name;
      }
    }
    const ModelConfig c = ModelConfig::from_gguf(out);
    const Weights w = Weights::bind(out, c);
    EXPECT_EQ(w.main_type, t);
  }
}

TEST_F(QuantizeFile, RefusesToRequantizeAndUnsupportedTargets) {
  const GgufFile in = GgufFile::open(dir_ / "f16.gguf");
  quantize_gguf(in, dir_ / "q8.gguf", WeightType::Q8_0);
  const GgufFile q8 = GgufFile::open(dir_ / "q8.gguf");
  try {
    quantize_gguf(q8, dir_ / "q4.gguf", WeightType::Q4_0);
    FAIL() << "no error";
  } catch (const LoadError& e) {
    EXPECT_NE(e.field().find("token_embd.weight"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "q4.gguf"));
  // Same type: copied unchanged.
  const QuantizeStats st = quantize_gguf(q8, dir_ / "q8b.gguf", WeightType::Q8_0);
  EXPECT_EQ(st.tensors_quantized, 0);
  EXPECT_EQ(st.bytes_in, st.bytes_out);
  EXPECT_THROW(quantize_gguf(in, dir_ / "x.gguf", WeightType::F16), std::invalid_argument);
}

}  // namespace
}  // namespace pacer::loader
