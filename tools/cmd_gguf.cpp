// `pacer gguf synth | quantize | inspect`: write synthetic models with real shapes, quantize a
// model to Q8_0/Q4_0, and show what a GGUF file holds (metadata, tensors, parameter count).
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "loader/gguf_file.h"
#include "loader/model_config.h"
#include "loader/quantize.h"
#include "loader/synth.h"
#include "loader/weights.h"
#include "tools/commands.h"

namespace pacer::tools {
namespace {

using loader::GgufFile;
using loader::GgufValue;
using loader::GgufValueType;

std::string human_bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.2f} {}", v, units[u]);
}

std::string human_count(int64_t n) {
  if (n >= 1000000000) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1000000) return fmt::format("{:.2f} M", n / 1e6);
  if (n >= 1000) return fmt::format("{:.2f} K", n / 1e3);
  return std::to_string(n);
}

ops::WeightType parse_type(const std::string& name,
                           std::initializer_list<ops::WeightType> allowed) {
  const auto t = ops::weight_type_from_name(name);
  for (ops::WeightType a : allowed) {
    if (t && *t == a) return a;
  }
  std::vector<std::string_view> names;
  for (ops::WeightType a : allowed) names.push_back(ops::type_name(a));
  const std::string list = fmt::format("{}", fmt::join(names, "|"));
  throw CLI::ValidationError("--type", fmt::format("'{}': expected one of {}", name, list));
}

// Strings from a file may hold anything: control bytes are escaped, long ones shortened.
std::string printable(std::string_view s, size_t max_len) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i >= max_len) {
      out += "...";
      break;
    }
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string quoted(std::string_view s, size_t max_len = 60) {
  return "\"" + printable(s, max_len) + "\"";
}

constexpr uint64_t kArrayHead = 8;  // elements shown of a long array

std::string scalar_text(const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::STRING:
      return quoted(v.str);
    case GgufValueType::BOOL:
      return v.u ? "true" : "false";
    case GgufValueType::F32:
    case GgufValueType::F64:
      return fmt::format("{:g}", v.f);
    case GgufValueType::I8:
    case GgufValueType::I16:
    case GgufValueType::I32:
    case GgufValueType::I64:
      return std::to_string(v.i);
    default:
      return std::to_string(v.u);
  }
}

std::string value_text(const GgufValue& v) {
  if (v.type != GgufValueType::ARRAY) return scalar_text(v);
  std::string out = "[";
  const uint64_t shown = std::min(v.count, kArrayHead);
  for (uint64_t k = 0; k < shown; ++k) {
    if (k) out += ", ";
    if (v.elem_type == GgufValueType::STRING) {
      out += quoted(v.array_string(k), 24);
    } else if (!v.items.empty()) {
      out += fmt::format("array[{}]", v.items[k].count);
    } else {
      out += fmt::format("{:g}", v.array_number(k).value_or(0));
    }
  }
  if (v.count > shown) out += fmt::format(", ... {} more", v.count - shown);
  return out + "]";
}

std::string type_text(const GgufValue& v) {
  if (v.type != GgufValueType::ARRAY) return std::string(loader::value_type_name(v.type));
  return fmt::format("[{}; {}]", loader::value_type_name(v.elem_type), v.count);
}

nlohmann::json value_json(const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::STRING:
      return std::string(v.str);
    case GgufValueType::BOOL:
      return v.u != 0;
    case GgufValueType::F32:
    case GgufValueType::F64:
      return v.f;
    case GgufValueType::I8:
    case GgufValueType::I16:
    case GgufValueType::I32:
    case GgufValueType::I64:
      return v.i;
    case GgufValueType::ARRAY:
      break;
    default:
      return v.u;
  }
  nlohmann::json head = nlohmann::json::array();
  const uint64_t shown = std::min(v.count, kArrayHead);
  for (uint64_t k = 0; k < shown; ++k) {
    if (v.elem_type == GgufValueType::STRING) {
      head.push_back(std::string(v.array_string(k)));
    } else if (!v.items.empty()) {
      head.push_back(value_json(v.items[k]));
    } else {
      head.push_back(v.array_number(k).value_or(0));
    }
  }
  return {{"elem_type", loader::value_type_name(v.elem_type)},
          {"count", v.count},
          {"head", head},
          {"truncated", v.count > shown}};
}

std::string shape_text(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

void inspect(const std::string& path, bool json) {
  const GgufFile f = GgufFile::open(path);
  int64_t n_params = 0;
  uint64_t tensor_bytes = 0;
  std::map<std::string, std::pair<int64_t, uint64_t>> by_type;  // name -> (count, bytes)
  for (const auto& t : f.tensors()) {
    n_params += t.elements();
    tensor_bytes += t.bytes;
    auto& e = by_type[std::string(ops::type_name(t.type))];
    ++e.first;
    e.second += t.bytes;
  }
  // The model view is optional: vocab-only or foreign files are still inspectable.
  std::optional<loader::ModelConfig> cfg;
  std::optional<loader::Weights> weights;
  std::string model_error;
  try {
    cfg = loader::ModelConfig::from_gguf(f);
    weights = loader::Weights::bind(f, *cfg);
  } catch (const loader::LoadError& e) {
    model_error = e.what();
  }

  if (json) {
    nlohmann::json j;
    j["file"] = path;
    j["version"] = f.version();
    j["file_size"] = f.file_size();
    j["alignment"] = f.alignment();
    j["data_offset"] = f.data_offset();
    auto& meta = j["metadata"] = nlohmann::json::array();
    for (const auto& kv : f.metadata()) {
      meta.push_back({{"key", std::string(kv.key)},
                      {"type", loader::value_type_name(kv.value.type)},
                      {"value", value_json(kv.value)}});
    }
    auto& tensors = j["tensors"] = nlohmann::json::array();
    for (const auto& t : f.tensors()) {
      tensors.push_back({{"name", std::string(t.name)},
                         {"type", ops::type_name(t.type)},
                         {"shape", t.ne},
                         {"offset", t.file_offset},
                         {"bytes", t.bytes}});
    }
    j["n_tensors"] = f.tensors().size();
    j["tensor_bytes"] = tensor_bytes;
    j["n_params"] = n_params;
    auto& types = j["bytes_by_type"] = nlohmann::json::object();
    for (const auto& [name, e] : by_type) types[name] = {{"tensors", e.first}, {"bytes", e.second}};
    if (cfg) {
      nlohmann::json& model = j["model"] = *cfg;
      model["main_type"] = ops::type_name(weights->main_type);
      model["llama_desc"] = loader::llama_model_desc(f, *cfg);
      model["matmul_bytes_per_token"] = weights->matmul_bytes;
    } else {
      j["model"] = nullptr;
      j["model_error"] = model_error;
    }
    std::puts(j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return;
  }

  fmt::print("{}: GGUF v{}, {} ({} bytes), alignment {}, data at offset {}\n", path, f.version(),
             human_bytes(f.file_size()), f.file_size(), f.alignment(), f.data_offset());
  fmt::print("\nmetadata ({} keys)\n", f.metadata().size());
  size_t key_w = 0;
  for (const auto& kv : f.metadata()) key_w = std::max(key_w, std::min<size_t>(kv.key.size(), 48));
  for (const auto& kv : f.metadata()) {
    std::string value = value_text(kv.value);
    if (kv.key == "general.file_type" && kv.value.as_int()) {  // as llama.cpp names it
      value += fmt::format(" ({})", loader::llama_file_type_name(*kv.value.as_int()));
    }
    fmt::print("  {:<{}}  {:<16}  {}\n", printable(kv.key, 48), key_w, type_text(kv.value), value);
  }
  fmt::print("\ntensors ({})\n", f.tensors().size());
  size_t name_w = 4;
  for (const auto& t : f.tensors()) name_w = std::max(name_w, std::min<size_t>(t.name.size(), 48));
  fmt::print("  {:<{}}  {:<5}  {:<20}  {:>12}  {:>12}\n", "name", name_w, "type", "shape", "offset",
             "bytes");
  for (const auto& t : f.tensors()) {
    fmt::print("  {:<{}}  {:<5}  {:<20}  {:>12}  {:>12}\n", printable(t.name, 48), name_w,
               ops::type_name(t.type), shape_text(t.ne), t.file_offset, t.bytes);
  }
  fmt::print("\ntotals: {} tensors, {} of tensor data, {} parameters ({})\n", f.tensors().size(),
             human_bytes(tensor_bytes), human_count(n_params), n_params);
  for (const auto& [name, e] : by_type) {
    fmt::print("  {:<5} {:>5} tensors  {}\n", name, e.first, human_bytes(e.second));
  }
  if (cfg) {
    fmt::print(
        "\nmodel: {} '{}': {} layers, n_embd {}, heads {}/{} (head_dim {}), n_ff {}, vocab {}, "
        "ctx {}\n",
        loader::arch_name(cfg->arch), cfg->name, cfg->n_layers, cfg->n_embd, cfg->n_heads,
        cfg->n_kv_heads, cfg->head_dim, cfg->n_ff, cfg->n_vocab, cfg->n_ctx_train);
    fmt::print(
        "  rope base {:g}{}, rms eps {:g}, {} embeddings{}{}\n", cfg->rope_base,
        cfg->arch == loader::Arch::Gemma3 ? fmt::format(" (local {:g})", cfg->rope_base_local) : "",
        cfg->norm_eps, cfg->tied_embeddings ? "tied" : "separate output",
        cfg->qkv_bias ? ", qkv bias" : "",
        cfg->sliding_window > 0 ? fmt::format(", sliding window {} (1 global layer in {})",
                                              cfg->sliding_window, cfg->sliding_window_pattern)
                                : "");
    fmt::print("  weights streamed per decode token: {} (mostly {})\n",
               human_bytes(static_cast<uint64_t>(weights->matmul_bytes)),
               ops::type_name(weights->main_type));
    fmt::print("  llama.cpp describes it as: {}\n", loader::llama_model_desc(f, *cfg));
  } else {
    fmt::print("\nmodel: not loadable by pacer: {}\n", model_error);
  }
}

struct SynthOptions {
  std::string arch, type = "f16", output, vocab_from;
  uint64_t seed = 0;
};
struct QuantizeOptions {
  std::string in, out, type;
};
struct InspectOptions {
  std::string file;
  bool json = false;
};

}  // namespace

void add_gguf_command(CLI::App& app) {
  auto* gguf = app.add_subcommand("gguf", "Write synthetic models, quantize, inspect GGUF files");
  gguf->require_subcommand(1);

  auto so = std::make_shared<SynthOptions>();
  const std::string presets = fmt::format("{}", fmt::join(loader::synth_preset_names(), "|"));
  auto* synth = gguf->add_subcommand("synth", "Write a synthetic model with real shapes");
  synth->add_option("--arch", so->arch, presets)->required()->check(CLI::IsMember([] {
    std::vector<std::string> names;
    for (std::string_view n : loader::synth_preset_names()) names.emplace_back(n);
    return names;
  }()));
  synth->add_option("--type", so->type,
                    "f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|iq4_nl|q2_k|q3_k|q4_k|q5_k|q6_k|iq4_xs "
                    "(matmuls and embedding; rows must fit the type's block)");
  synth->add_option("-o,--output", so->output, "output .gguf")->required();
  synth->add_option("--seed", so->seed, "weight seed (same seed, same bytes)");
  synth->add_option("--vocab-from", so->vocab_from, "copy the tokenizer.* keys of this GGUF");
  synth->callback([so] {
    check_output_path("--output", so->output, {{"--vocab-from", so->vocab_from}});
    loader::SynthSpec spec = loader::synth_preset(so->arch);
    spec.type = parse_type(so->type,
                           {ops::WeightType::F32, ops::WeightType::F16, ops::WeightType::BF16,
                            ops::WeightType::Q8_0, ops::WeightType::Q4_0, ops::WeightType::Q4_1,
                            ops::WeightType::Q5_0, ops::WeightType::Q5_1, ops::WeightType::IQ4_NL,
                            ops::WeightType::Q2_K, ops::WeightType::Q3_K, ops::WeightType::Q4_K,
                            ops::WeightType::Q5_K, ops::WeightType::Q6_K, ops::WeightType::IQ4_XS});
    spec.seed = so->seed;
    std::optional<GgufFile> vocab;
    if (!so->vocab_from.empty()) vocab = GgufFile::open(so->vocab_from);
    const auto t0 = std::chrono::steady_clock::now();
    loader::write_synthetic_model(spec, so->output, vocab ? &*vocab : nullptr);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const GgufFile f = GgufFile::open(so->output);
    const loader::ModelConfig c = loader::ModelConfig::from_gguf(f);
    fmt::print("wrote {}: {} {} ({} layers, vocab {}), {} parameters, {} in {:.1f} s\n", so->output,
               so->arch, ops::type_name(spec.type), c.n_layers, c.n_vocab, human_count(c.n_params),
               human_bytes(f.file_size()), s);
  });

  auto qo = std::make_shared<QuantizeOptions>();
  auto* quant = gguf->add_subcommand(
      "quantize",
      "Quantize an F32/F16/BF16 model: one type for every matmul, or a llama-quantize "
      "K-quant mix with its per-tensor rules");
  quant->add_option("in", qo->in, "input .gguf")->required();
  quant->add_option("out", qo->out, "output .gguf")->required();
  quant
      ->add_option(
          "--type", qo->type,
          "q8_0|q4_0|q4_1|q5_0|q5_1|iq4_nl|q2_k|q3_k|q4_k|q5_k|q6_k|iq4_xs (every matmul), "
          "or the mixes q4_k_m|q5_k_m|q6_k")
      ->required();
  quant->callback([qo] {
    check_output_path("out", qo->out, {{"model (in)", qo->in}});
    const auto target = loader::QuantTarget::parse(qo->type);
    if (!target) {
      throw CLI::ValidationError(
          "--type",
          fmt::format(
              "'{}': not a quantized type or mix (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_k, "
              "q3_k, q4_k, q5_k, q6_k, iq4_xs; mixes q4_k_m, q5_k_m, q6_k)",
              qo->type));
    }
    const GgufFile in = GgufFile::open(qo->in);
    const auto t0 = std::chrono::steady_clock::now();
    const loader::QuantizeStats st = loader::quantize_gguf(in, qo->out, *target);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<std::string> per_type;
    for (const auto& [t, n] : st.tensors_by_type) {
      per_type.push_back(fmt::format("{} {}", n, ops::type_name(t)));
    }
    fmt::print(
        "wrote {}: {} tensors quantized ({}{}), {} copied; tensor data {} -> {} in {:.1f} s\n",
        qo->out, st.tensors_quantized, target->name(),
        per_type.empty() ? "" : ": " + fmt::format("{}", fmt::join(per_type, ", ")),
        st.tensors_copied, human_bytes(st.bytes_in), human_bytes(st.bytes_out), s);
    if (st.fallbacks > 0) {
      fmt::print("{} tensors took llama-quantize's fallback type (rows not a multiple of 256)\n",
                 st.fallbacks);
    }
  });

  auto io = std::make_shared<InspectOptions>();
  auto* insp = gguf->add_subcommand("inspect", "Metadata, tensor table, totals, parameter count");
  insp->add_option("file", io->file, ".gguf file")->required();
  insp->add_flag("--json", io->json, "machine-readable output");
  insp->callback([io] { inspect(io->file, io->json); });
}

}  // namespace pacer::tools
