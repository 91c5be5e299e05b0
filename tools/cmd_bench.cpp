// `pacer bench`: llama-bench style pp/tg benchmark with repeatability checks and the roofline.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loader/synth.h"
#include "ops/types.h"
#include "runtime/bench.h"
#include "runtime/model.h"
#include "runtime/topology.h"
#include "tools/commands.h"

namespace pacer::tools {
namespace {

struct BenchArgs {
  std::string model;
  std::string synthetic;  // ARCH:TYPE
  std::string prompts = "512";
  std::string gens = "128";
  std::string depths = "0";
  std::string threads = "-1";
  std::vector<std::string> pins;
  int reps = 5;
  std::string output = "md";
  std::string events_dir;
  std::string kv_type = "f16";
  bool no_warmup = false;
  bool no_roofline = false;
  double cv_flag = 5.0;
  double drift_flag = 5.0;
  int64_t bandwidth_mb = 1024;
  int overhead_pairs = 0;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// A comma list of integers, each >= min (or -1 where allow_auto).
std::vector<int64_t> parse_int_list(const std::string& s, const char* flag, int64_t min = 0,
                                    bool allow_auto = false) {
  std::vector<int64_t> out;
  for (const std::string& item : split(s, ',')) {
    long long v = 0;
    try {
      size_t used = 0;
      v = std::stoll(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw std::invalid_argument(fmt::format("{}: '{}' is not an integer list", flag, s));
    }
    if (v < min && !(allow_auto && v == -1)) {
      throw std::invalid_argument(fmt::format("{}: {} out of range: each value must be >= {}{}",
                                              flag, v, min, allow_auto ? " (or -1: auto)" : ""));
    }
    out.push_back(v);
  }
  return out;
}

// "none,compact,list:0,2,cores": the numbers after a "list:" belong to it.
std::vector<runtime::PinSpec> parse_pins(const std::vector<std::string>& args) {
  std::vector<runtime::PinSpec> out;
  for (const std::string& arg : args) {
    std::vector<std::string> items;
    for (const std::string& tok : split(arg, ',')) {
      const bool numeric =
          !tok.empty() && tok.find_first_not_of("0123456789-") == std::string::npos;
      if (numeric && !items.empty() && items.back().rfind("list:", 0) == 0) {
        items.back() += "," + tok;
      } else {
        items.push_back(tok);
      }
    }
    for (const std::string& item : items) out.push_back(runtime::PinSpec::parse(item));
  }
  if (out.empty()) out.push_back(runtime::PinSpec{});
  return out;
}

std::filesystem::path cache_dir() {
  if (const char* d = std::getenv("PACER_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d)
    return std::filesystem::path(d) / "pacer";
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::filesystem::path(h) / ".cache" / "pacer";
  return std::filesystem::temp_directory_path() / "pacer-cache";
}

// --synthetic ARCH:TYPE -> a generated model file, cached (same arch, type and seed = same bytes).
std::filesystem::path synthetic_model(const std::string& spec_text) {
  const auto colon = spec_text.find(':');
  if (colon == std::string::npos) {
    throw std::invalid_argument(
        fmt::format("--synthetic '{}': expected ARCH:TYPE, e.g. qwen2.5-0.5b:q8_0", spec_text));
  }
  const std::string arch = spec_text.substr(0, colon), type = spec_text.substr(colon + 1);
  loader::SynthSpec spec = loader::synth_preset(arch);
  auto wt = ops::weight_type_from_name(type);
  if (!wt) throw std::invalid_argument(fmt::format("--synthetic: unknown type '{}'", type));
  spec.type = *wt;
  spec.seed = 1;
  const std::filesystem::path dir = cache_dir() / "models";
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / fmt::format("{}-{}-seed1.gguf", arch, type);
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr, "bench: generating %s (cached for later runs)\n", path.c_str());
    loader::write_synthetic_model(spec, path);
  }
  return path;
}

void progress_bar(int done, int total, const std::string& label) {
  const int width = 30;
  const int filled = total > 0 ? done * width / total : width;
  std::fprintf(stderr, "\r[%.*s%*s] %d/%d %-40s", filled,
               "==============================", width - filled, "", done, total, label.c_str());
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

void run(const BenchArgs& a) {
  if (a.model.empty() == a.synthetic.empty()) {
    throw std::invalid_argument("bench: give exactly one of -m MODEL or --synthetic ARCH:TYPE");
  }
  const std::filesystem::path path =
      a.model.empty() ? synthetic_model(a.synthetic) : std::filesystem::path(a.model);
  const runtime::Model model = runtime::Model::load(path);

  runtime::BenchOptions o;
  o.n_prompt = parse_int_list(a.prompts, "-p");
  o.n_gen = parse_int_list(a.gens, "-n");
  o.n_depth = parse_int_list(a.depths, "-d");
  o.threads.clear();
  for (int64_t t : parse_int_list(a.threads, "-t", 1, true))
    o.threads.push_back(static_cast<int>(t));
  o.pins = parse_pins(a.pins);
  o.reps = a.reps;
  o.warmup = !a.no_warmup;
  o.events_dir = a.events_dir;
  o.cv_flag = a.cv_flag / 100.0;
  o.freq_drift_flag = a.drift_flag / 100.0;
  o.roofline = !a.no_roofline;
  o.bandwidth_bytes = static_cast<size_t>(a.bandwidth_mb) << 20;
  auto kv = ops::weight_type_from_name(a.kv_type);
  if (!kv || (*kv != ops::WeightType::F16 && *kv != ops::WeightType::F32)) {
    throw std::invalid_argument(fmt::format("--kv-type '{}': expected f16 or f32", a.kv_type));
  }
  o.kv_type = *kv;
  if (isatty(STDERR_FILENO)) o.progress = progress_bar;

  const runtime::BenchResult r = runtime::run_bench(model, o);
  if (a.output == "md") {
    std::cout << runtime::render_bench_markdown(r);
  } else if (a.output == "csv") {
    std::cout << runtime::render_bench_csv(r);
  } else if (a.output == "json") {
    std::cout << runtime::bench_json(r).dump(2) << "\n";
  } else {
    std::cout << runtime::render_bench_jsonl(r);
  }
  std::cout.flush();
  if (a.overhead_pairs > 0) {
    const std::filesystem::path log =
        a.events_dir.empty() ? std::filesystem::temp_directory_path() /
                                   fmt::format("pacer-overhead-{}.jsonl", getpid())
                             : std::filesystem::path(a.events_dir) / "recording-overhead.jsonl";
    const auto rows = runtime::measure_recording_overhead(model, o, a.overhead_pairs, log.string());
    if (a.events_dir.empty()) std::filesystem::remove(log);
    std::cout << runtime::render_overhead_markdown(rows);
    std::cout.flush();
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "llama-bench style pp/tg benchmark with roofline");
  cmd->add_option("-m,--model", args->model, "GGUF model file");
  cmd->add_option("--synthetic", args->synthetic,
                  "bench a generated model ARCH:TYPE (e.g. qwen2.5-0.5b:q8_0), cached");
  cmd->add_option("-p,--n-prompt", args->prompts, "prompt sizes, comma list (0: no pp test)")
      ->capture_default_str();
  cmd->add_option(
         "-d,--n-depth", args->depths,
         "context depths, comma list: each test runs after that many tokens (llama-bench's "
         "-d)")
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", args->gens, "generation lengths, comma list (0: no tg test)")
      ->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "thread counts, comma list (-1: physical cores)")
      ->capture_default_str();
  cmd->add_option("--pin", args->pins,
                  "pin policies, comma list: none,compact,scatter,cores,list:0,2");
  cmd->add_option("-r,--reps", args->reps, "repetitions per row")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("-o,--output", args->output, "md | csv | json | jsonl")
      ->check(CLI::IsMember({"md", "csv", "json", "jsonl"}))
      ->capture_default_str();
  cmd->add_option("--events-out", args->events_dir,
                  "record the last rep of every row into DIR/<arch>-<test>-t<T>-<pin>.jsonl");
  cmd->add_option("--kv-type", args->kv_type, "f16 | f32")->capture_default_str();
  cmd->add_flag("--no-warmup", args->no_warmup, "skip the untimed warm-up run");
  cmd->add_flag("--no-roofline", args->no_roofline, "skip the bandwidth probe");
  cmd->add_option("--cv-flag", args->cv_flag, "flag rows whose CV exceeds this %")
      ->capture_default_str();
  cmd->add_option("--drift-flag", args->drift_flag,
                  "flag rows whose frequency range exceeds this % of the mean")
      ->capture_default_str();
  cmd->add_option("--bandwidth-mb", args->bandwidth_mb, "bandwidth probe buffer (MiB)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--recording-overhead", args->overhead_pairs,
                  "after the table: N off/on pairs per tg row, decode tok/s with full recording vs "
                  "without (medians and ratio)")
      ->check(CLI::Range(0, 1000));
  cmd->callback([args] { run(*args); });
}

}  // namespace pacer::tools
