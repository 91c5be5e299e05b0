#include "loader/quantize.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "loader/gguf_writer.h"
#include "ops/quantize.h"
#include "ops/tbb_for.h"
#include "ops/weight_matrix.h"

namespace pacer::loader {

namespace {

// llama.h's enum llama_ftype and llama_model_ftype_name() (llama.cpp c392e50).
constexpr std::pair<int64_t, std::string_view> kLlamaFileTypeNames[] = {
    {0, "all F32"},
    {1, "F16"},
    {2, "Q4_0"},
    {3, "Q4_1"},
    {7, "Q8_0"},
    {8, "Q5_0"},
    {9, "Q5_1"},
    {10, "Q2_K - Medium"},
    {11, "Q3_K - Small"},
    {12, "Q3_K - Medium"},
    {13, "Q3_K - Large"},
    {14, "Q4_K - Small"},
    {15, "Q4_K - Medium"},
    {16, "Q5_K - Small"},
    {17, "Q5_K - Medium"},
    {18, "Q6_K"},
    {19, "IQ2_XXS - 2.0625 bpw"},
    {20, "IQ2_XS - 2.3125 bpw"},
    {21, "Q2_K - Small"},
    {22, "IQ3_XS - 3.3 bpw"},
    {23, "IQ3_XXS - 3.0625 bpw"},
    {24, "IQ1_S - 1.5625 bpw"},
    {25, "IQ4_NL - 4.5 bpw"},
    {26, "IQ3_S - 3.4375 bpw"},
    {27, "IQ3_S mix - 3.66 bpw"},
    {28, "IQ2_S - 2.5 bpw"},
    {29, "IQ2_M - 2.7 bpw"},
    {30, "IQ4_XS - 4.25 bpw"},
    {31, "IQ1_M - 1.75 bpw"},
    {32, "BF16"},
    {36, "TQ1_0 - 1.69 bpw ternary"},
    {37, "TQ2_0 - 2.06 bpw ternary"},
};

}  // namespace

std::string llama_file_type_name(int64_t ftype) {
  constexpr int64_t kGuessed = 1024;  // LLAMA_FTYPE_GUESSED: not in the file, counted by llama.cpp
  if (ftype > 0 && (ftype & kGuessed) != 0) {
    return llama_file_type_name(ftype & ~kGuessed) + " (guessed)";
  }
  for (const auto& [value, name] : kLlamaFileTypeNames) {
    if (value == ftype) return std::string(name);
  }
  return "unknown, may not work";
}

uint32_t llama_guessed_file_type(const GgufFile& f) {
  // llama.cpp's model loader walks its tensors in a std::map by name, counting each type and
  // taking a type only when its count passes the leader's.
  std::vector<const GgufTensor*> by_name;
  for (const GgufTensor& t : f.tensors()) by_name.push_back(&t);
  std::sort(by_name.begin(), by_name.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->name < b->name; });
  std::map<ops::WeightType, int64_t> count;
  ops::WeightType lead = ops::WeightType::F32;
  int64_t lead_count = 0;
  for (const GgufTensor* t : by_name) {
    if (++count[t->type] > lead_count) {
      lead_count = count[t->type];
      lead = t->type;
    }
  }
  constexpr uint32_t kGuessed = 1024;
  try {
    return llama_file_type(lead) | kGuessed;
  } catch (const std::invalid_argument&) {
    return kGuessed;  // a type llama.cpp has no file type for: it says "all F32", as here
  }
}

std::string llama_model_desc(const GgufFile& f, const ModelConfig& c) {
  return fmt::format(
      "{} {} {}", arch_name(c.arch), llama_size_class(c),
      llama_file_type_name(c.file_type >= 0 ? c.file_type : llama_guessed_file_type(f)));
}

uint32_t llama_file_type(ops::WeightType t) {
  switch (t) {
    case ops::WeightType::F32:
      return 0;  // LLAMA_FTYPE_ALL_F32
    case ops::WeightType::F16:
      return 1;  // LLAMA_FTYPE_MOSTLY_F16
    case ops::WeightType::Q4_0:
      return 2;  // LLAMA_FTYPE_MOSTLY_Q4_0
    case ops::WeightType::Q4_1:
      return 3;  // LLAMA_FTYPE_MOSTLY_Q4_1
    case ops::WeightType::Q8_0:
      return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    case ops::WeightType::Q5_0:
      return 8;  // LLAMA_FTYPE_MOSTLY_Q5_0
    case ops::WeightType::Q5_1:
      return 9;  // LLAMA_FTYPE_MOSTLY_Q5_1
    case ops::WeightType::IQ4_NL:
      return 25;  // LLAMA_FTYPE_MOSTLY_IQ4_NL
    case ops::WeightType::Q4_K:
      return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    case ops::WeightType::Q5_K:
      return 17;  // LLAMA_FTYPE_MOSTLY_Q5_K_M
    case ops::WeightType::Q6_K:
      return 18;  // LLAMA_FTYPE_MOSTLY_Q6_K
    case ops::WeightType::BF16:
      return 32;  // LLAMA_FTYPE_MOSTLY_BF16
    case ops::WeightType::Q3_K:
      return 12;  // LLAMA_FTYPE_MOSTLY_Q3_K_M
    case ops::WeightType::Q2_K:
      return 10;  // LLAMA_FTYPE_MOSTLY_Q2_K
    case ops::WeightType::IQ4_XS:
      return 30;  // LLAMA_FTYPE_MOSTLY_IQ4_XS
    case ops::WeightType::Q8_K:
      break;
  }
  throw std::invalid_argument(fmt::format("no llama.cpp file type for {}", ops::type_name(t)));
}

bool is_quantizable(const GgufTensor& t) noexcept {
  int64_t dims = 0;
  for (int64_t d : t.ne) dims += d > 1 ? 1 : 0;
  return t.ne.size() >= 2 && dims >= 2;
}

namespace {

// llama-quantize's use_more_bits: the first and last eighth of the layers, and every third layer
// between, get the bigger type.
bool use_more_bits(int64_t i_layer, int64_t n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// The block index of "blk.<i>.<rest>", or -1.
int64_t layer_of(std::string_view name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  int64_t i = 0;
  size_t k = 4;
  if (k >= name.size() || name[k] < '0' || name[k] > '9') return -1;
  for (; k < name.size() && name[k] >= '0' && name[k] <= '9'; ++k) i = i * 10 + (name[k] - '0');
  return i;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::optional<QuantTarget> QuantTarget::parse(std::string_view name) {
  std::string n(name);
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "q4_k_m") return QuantTarget{QuantMix::Q4_K_M, ops::WeightType::Q4_K};
  if (n == "q5_k_m") return QuantTarget{QuantMix::Q5_K_M, ops::WeightType::Q5_K};
  if (n == "q6_k") return QuantTarget{QuantMix::Q6_K, ops::WeightType::Q6_K};
  const auto t = ops::weight_type_from_name(n);
  if (!t || *t == ops::WeightType::F32 || *t == ops::WeightType::F16 ||
      *t == ops::WeightType::BF16 || *t == ops::WeightType::Q8_K) {
    return std::nullopt;
  }
  return QuantTarget{QuantMix::Pure, *t};
}

std::string QuantTarget::name() const {
  switch (mix) {
    case QuantMix::Q4_K_M:
      return "q4_k_m";
    case QuantMix::Q5_K_M:
      return "q5_k_m";
    case QuantMix::Q6_K:
      return "q6_k";
    case QuantMix::Pure:
      break;
  }
  return std::string(ops::type_name(type));
}

uint32_t QuantTarget::file_type() const {
  switch (mix) {
    case QuantMix::Q4_K_M:
      return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    case QuantMix::Q5_K_M:
      return 17;  // LLAMA_FTYPE_MOSTLY_Q5_K_M
    case QuantMix::Q6_K:
      return 18;  // LLAMA_FTYPE_MOSTLY_Q6_K
    case QuantMix::Pure:
      break;
  }
  return llama_file_type(type);
}

ops::WeightType mix_tensor_type(const QuantTarget& target, std::string_view name,
                                const std::vector<int64_t>& ne, int64_t n_layers,
                                bool tied_embeddings) {
  using ops::WeightType;
  if (target.mix == QuantMix::Pure) return target.type;
  const bool output = name == "output.weight" || (tied_embeddings && name == "token_embd.weight");
  if (output) {
    // The output (or a tied embedding) gets Q6_K, Q8_0 where its rows do not fit 256 blocks.
    return ne[0] % 256 != 0 ? WeightType::Q8_0 : WeightType::Q6_K;
  }
  const bool k_m = target.mix == QuantMix::Q4_K_M || target.mix == QuantMix::Q5_K_M;
  const int64_t il = layer_of(name);
  if (k_m && il >= 0 &&
      (ends_with(name, ".attn_v.weight") || ends_with(name, ".ffn_down.weight"))) {
    if (use_more_bits(il, n_layers)) return WeightType::Q6_K;
  }
  if (ends_with(name, ".attn_qkv.weight")) {
    if (target.mix == QuantMix::Q4_K_M) return WeightType::Q5_K;
    if (target.mix == QuantMix::Q5_K_M) return WeightType::Q6_K;
  }
  return target.type;
}

ops::WeightType row_fallback(ops::WeightType t, int64_t row_length) {
  using ops::WeightType;
  if (row_length % ops::type_info(t).block_elems == 0) return t;
  WeightType f = WeightType::F16;
  switch (t) {
    case WeightType::Q2_K:
    case WeightType::Q3_K:
      f = WeightType::Q4_0;
      break;
    case WeightType::Q4_K:
      f = WeightType::Q5_0;
      break;
    case WeightType::Q5_K:
      f = WeightType::Q5_1;
      break;
    case WeightType::Q6_K:
      f = WeightType::Q8_0;
      break;
    case WeightType::IQ4_XS:
      f = WeightType::IQ4_NL;
      break;
    default:
      break;
  }
  return row_length % ops::type_info(f).block_elems == 0 ? f : WeightType::F16;
}

QuantizeStats quantize_gguf(const GgufFile& in, const std::filesystem::path& out,
                            const QuantTarget& target) {
  const std::string file = in.path().string();
  GgufWriter w(in.version());
  w.copy_metadata(in);
  w.set_u32("general.file_type", target.file_type());
  w.set_u32("general.quantization_version", 2);

  // The mix rules need the layer count and whether the embedding doubles as the output.
  int64_t n_layers = 0;
  bool has_output = false;
  for (const GgufTensor& t : in.tensors()) {
    n_layers = std::max(n_layers, layer_of(t.name) + 1);
    has_output = has_output || t.name == "output.weight";
  }

  QuantizeStats stats;
  for (const GgufTensor& t : in.tensors()) {
    stats.bytes_in += t.bytes;
    ops::WeightType type = t.type;
    if (is_quantizable(t)) {
      const ops::WeightType wanted = mix_tensor_type(target, t.name, t.ne, n_layers, !has_output);
      type = target.mix == QuantMix::Pure ? wanted : row_fallback(wanted, t.ne[0]);
      if (type != wanted) ++stats.fallbacks;
    }
    if (type == t.type) {
      w.add_tensor_view(t.name, t.type, t.ne, t.data);
      stats.bytes_out += t.bytes;
      ++stats.tensors_copied;
      continue;
    }
    const std::string field = fmt::format("tensor '{}'", t.name);
    if (t.type != ops::WeightType::F32 && t.type != ops::WeightType::F16 &&
        t.type != ops::WeightType::BF16) {
      throw LoadError(file, field, static_cast<int64_t>(t.info_offset),
                      fmt::format("is {}; only f32, f16 and bf16 tensors can be quantized",
                                  ops::type_name(t.type)));
    }
    const int64_t block = ops::type_info(type).block_elems;
    if (t.ne[0] % block != 0) {
      throw LoadError(file, field, static_cast<int64_t>(t.info_offset),
                      fmt::format("row length {} is not a multiple of {}'s block size {}", t.ne[0],
                                  ops::type_name(type), block));
    }
    const ops::WeightMatrix src = t.matrix();
    const int64_t out_row_bytes = ops::row_bytes(type, src.cols);
    w.add_tensor(t.name, type, t.ne,
                 [src, type, out_row_bytes](int64_t r0, int64_t r1, std::span<std::byte> dst) {
                   ops::tbb_for_each_range(
                       tbb::blocked_range<int64_t>(r0, r1, 16),
                       [&](const tbb::blocked_range<int64_t>& rr) {
                         std::vector<float> row(static_cast<size_t>(src.cols));
                         for (int64_t r = rr.begin(); r < rr.end(); ++r) {
                           ops::dequantize_row(src.type, src.row(r), row.data(), src.cols);
                           ops::quantize_row(type, row.data(),
                                             dst.data() + (r - r0) * out_row_bytes, src.cols);
                         }
                       });
                 });
    stats.bytes_out += static_cast<uint64_t>(out_row_bytes) * static_cast<uint64_t>(src.rows);
    ++stats.tensors_quantized;
    ++stats.tensors_by_type[type];
  }
  w.write(out);
  return stats;
}

QuantizeStats quantize_gguf(const GgufFile& in, const std::filesystem::path& out,
                            ops::WeightType type) {
  if (!QuantTarget::parse(ops::type_name(type))) {
    throw std::invalid_argument(
        fmt::format("quantize: {} is not a quantized weight type", ops::type_name(type)));
  }
  return quantize_gguf(in, out, QuantTarget{QuantMix::Pure, type});
}

}  // namespace pacer::loader
