// `pacer perplexity`: llama-perplexity's chunked perplexity and KL divergence, with the same
// options, the same per-chunk lines and the same summaries, so the two tools can be held side by
// side (and a base file from either scores the other).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/output_file.h"
#include "eventlog/schema.h"
#include "runtime/model.h"
#include "runtime/perplexity.h"
#include "runtime/recorder.h"
#include "runtime/session.h"
#include "tools/commands.h"

namespace pacer::tools {
namespace {

struct PerplexityCliOptions {
  std::string model;
  std::string text_file;
  int64_t ctx = 512;
  bool ctx_given = false;
  int64_t batch = 2048;
  int64_t chunks = -1;
  int threads = -1;
  std::string pin = "none";
  std::string numa = "none";
  std::string kv_type = "f16";
  std::string kld_base_out;
  std::string kld_base_in;
  std::string format;  // text | json; empty: from -o's extension, else text
  std::string output;  // -o FILE: the final figures go here
  std::string events_out;
};

std::string read_text(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw std::runtime_error(path + ": is a directory, not a text file (-f)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot read the text file (-f)");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void say(const std::string& s, bool json) {
  // Text mode: stdout, like llama-perplexity's LOG; with --format json the figures go to stdout as
  // one object and the progress lines to stderr.
  std::FILE* to = json ? stderr : stdout;
  std::fputs(s.c_str(), to);
  std::fflush(to);
}

nlohmann::json ve(const runtime::ValueAndError& v) {
  return {{"value", v.value}, {"error", v.error}};
}

// llama-perplexity --kl-divergence's final report, line for line.
std::string kld_report(const runtime::KldSummary& k) {
  std::string s;
  auto line = [&](const std::string& l) { s += l + "\n"; };
  line("====== Perplexity statistics ======");
  line(
      fmt::format("Mean PPL(Q)                   : {:10.6f} ± {:10.6f}", k.ppl.value, k.ppl.error));
  line(fmt::format("Mean PPL(base)                : {:10.6f} ± {:10.6f}", k.ppl_base.value,
                   k.ppl_base.error));
  line(fmt::format("Cor(ln(PPL(Q)), ln(PPL(base))): {:6.2f}%", 100.0 * k.log_ppl_correlation));
  line(fmt::format("Mean ln(PPL(Q)/PPL(base))     : {:10.6f} ± {:10.6f}", k.log_ppl_ratio.value,
                   k.log_ppl_ratio.error));
  line(fmt::format("Mean PPL(Q)/PPL(base)         : {:10.6f} ± {:10.6f}", k.ppl_ratio.value,
                   k.ppl_ratio.error));
  line(fmt::format("Mean PPL(Q)-PPL(base)         : {:10.6f} ± {:10.6f}", k.ppl_diff.value,
                   k.ppl_diff.error));
  line("");
  line("====== KL divergence statistics ======");
  line(fmt::format("Mean    KLD: {:10.6f} ± {:10.6f}", k.kld.value, k.kld.error));
  // llama.cpp's order: maximum, the upper percentiles, median, the lower ones, minimum.
  auto dist = [&](const runtime::Distribution& d, const char* what, auto fmt_value) {
    line(fmt::format("Maximum {}: {}", what, fmt_value(d.max)));
    for (const auto& [f, v] : d.percentiles) {
      if (f < 0.5) continue;
      line(fmt::format("{:4.1f}%   {}: {}", 100 * f, what, fmt_value(v)));
    }
    line(fmt::format("Median  {}: {}", what, fmt_value(d.median)));
    for (const auto& [f, v] : d.percentiles) {
      if (f < 0.5) line(fmt::format("{:4.1f}%   {}: {}", 100 * f, what, fmt_value(v)));
    }
    line(fmt::format("Minimum {}: {}", what, fmt_value(d.min)));
  };
  dist(k.kld_dist, "KLD", [](double v) { return fmt::format("{:10.6f}", v); });
  line("");
  line("====== Token probability statistics ======");
  line(fmt::format("Mean    Δp: {:6.3f} ± {:5.3f} %", 100.0 * k.p_diff.value,
                   100.0 * k.p_diff.error));
  dist(k.p_diff_dist, "Δp", [](double v) { return fmt::format("{:6.3f}%", 100.0 * v); });
  line(fmt::format("RMS Δp    : {:6.3f} ± {:5.3f} %", 100.0 * k.rms_p_diff.value,
                   100.0 * k.rms_p_diff.error));
  line(fmt::format("Same top p: {:6.3f} ± {:5.3f} %", 100.0 * k.same_top.value,
                   100.0 * k.same_top.error));
  return s;
}

// {"mean", "mean_error", "max", "p99_9", ..., "median", ..., "min"}
nlohmann::json dist_json(const runtime::Distribution& d, const runtime::ValueAndError& mean) {
  nlohmann::json j = {{"mean", mean.value},
                      {"mean_error", mean.error},
                      {"max", d.max},
                      {"median", d.median},
                      {"min", d.min}};
  for (const auto& [f, v] : d.percentiles) {
    std::string key = fmt::format("p{:g}", 100 * f);
    std::replace(key.begin(), key.end(), '.', '_');
    j[key] = v;
  }
  return j;
}

nlohmann::json kld_json(const runtime::KldSummary& k) {
  return {{"count", k.count},
          {"ppl", ve(k.ppl)},
          {"ppl_base", ve(k.ppl_base)},
          {"log_ppl_correlation", k.log_ppl_correlation},
          {"log_ppl_ratio", ve(k.log_ppl_ratio)},
          {"ppl_ratio", ve(k.ppl_ratio)},
          {"ppl_diff", ve(k.ppl_diff)},
          {"kld", dist_json(k.kld_dist, k.kld)},
          {"delta_p", dist_json(k.p_diff_dist, k.p_diff)},
          {"rms_delta_p", ve(k.rms_p_diff)},
          {"same_top", ve(k.same_top)}};
}

void run_perplexity(const PerplexityCliOptions& o) {
  // stdout is JSON with --format json only; the -o file is JSON with it or by its extension.
  const bool json = o.format == "json";
  const bool file_json =
      format_for_output(o.format, o.output, {{".json", "json"}}, "text") == "json";
  if (!o.format.empty() && o.format != "text" && o.format != "json") {
    throw std::runtime_error("--format must be text or json, got '" + o.format + "'");
  }
  if (o.ctx < 4) throw std::runtime_error(fmt::format("-c {}: must be at least 4", o.ctx));
  if (o.batch < 1) throw std::runtime_error(fmt::format("-b {}: must be at least 1", o.batch));
  if (o.chunks == 0 || o.chunks < -1) {
    throw std::runtime_error(fmt::format("--chunks {}: must be >= 1 (or -1: all)", o.chunks));
  }
  if (!o.kld_base_in.empty() && !o.kld_base_out.empty()) {
    throw std::runtime_error(
        "--kl-divergence-base writes a base, --kl-divergence reads one: "
        "give one of them");
  }
  const auto kv_type = ops::weight_type_from_name(o.kv_type);
  if (!kv_type || (*kv_type != ops::WeightType::F16 && *kv_type != ops::WeightType::F32 &&
                   *kv_type != ops::WeightType::Q8_0)) {
    throw CLI::ValidationError("--kv-type", "must be f16, f32 or q8_0, got '" + o.kv_type + "'");
  }

  // KL-divergence mode takes the text and the chunk size from the base file.
  std::unique_ptr<runtime::LogprobReader> base;
  int64_t n_ctx = o.ctx;
  if (!o.kld_base_in.empty()) {
    base = std::make_unique<runtime::LogprobReader>(o.kld_base_in);
    if (o.ctx_given && base->n_ctx() != o.ctx) {
      throw std::runtime_error(fmt::format(
          "{}: the base was computed with -c {}, this run asks for -c {} (omit -c to use the "
          "base's)",
          o.kld_base_in, base->n_ctx(), o.ctx));
    }
    n_ctx = base->n_ctx();
  } else if (o.text_file.empty()) {
    throw std::runtime_error("pacer perplexity needs a text: -f FILE (or --kl-divergence BASE)");
  }

  runtime::SessionOptions so;
  so.threads = o.threads;
  so.pin = runtime::PinSpec::parse(o.pin);
  apply_numa(so, o.numa, o.pin);  // before the load: a bad combination fails fast
  const runtime::Model model = runtime::Model::load(o.model);

  so.kv_type = *kv_type;
  runtime::perplexity_session_options(so, n_ctx, o.batch);
  std::unique_ptr<runtime::Recorder> recorder;
  if (!o.events_out.empty()) {
    runtime::RecorderOptions ro;
    ro.events_path = o.events_out;
    ro.workers = runtime::resolve_threads(runtime::Topology::detect(), so.pin, so.threads);
    recorder = std::make_unique<runtime::Recorder>(ro);
    so.recorder = recorder.get();
  }
  runtime::Session session(model, so);
  warn_configuration(session.executor(), n_ctx, model.config().n_ctx_train);

  std::vector<int32_t> tokens;
  if (!base) {
    const std::string text = read_text(o.text_file);
    tokens = model.tokenizer().encode(text, /*add_special=*/true);
    if (static_cast<int64_t>(tokens.size()) < 2 * n_ctx) {
      throw std::runtime_error(
          fmt::format("{}: the text tokenizes to {} tokens; -c {} needs at least {} (2 chunks)",
                      o.text_file, tokens.size(), n_ctx, 2 * n_ctx));
    }
  }
  const int64_t n_text =
      base ? static_cast<int64_t>(base->tokens().size()) : static_cast<int64_t>(tokens.size());
  session.write_log_header(
      {{eventlog::header_key::kCommand, "perplexity"},
       {"perplexity",
        {{"n_ctx", n_ctx}, {"n_batch", o.batch}, {"kl_divergence", base != nullptr}}}},
      n_text, 0);
  say(fmt::format("perplexity: {} tokens, {} chunks of {} (batch {}), {} threads, pin {}\n", n_text,
                  base ? base->n_chunk() : n_text / n_ctx, n_ctx, std::min(o.batch, n_ctx),
                  session.executor().workers(), session.executor().pin().to_string()),
      true);

  runtime::PerplexityOptions po;
  po.n_ctx = n_ctx;
  po.n_batch = o.batch;
  po.n_chunks = o.chunks;
  po.kld_base_out = o.kld_base_out;
  runtime::PerplexityResult r;
  if (base) {
    r = runtime::kl_divergence(session, *base, po, [&](const runtime::ChunkProgress& p) {
      if (p.chunk == 1) {
        say("\nchunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence   "
            "           Δp RMS            Same top p\n",
            json);
      }
      const runtime::KldSummary& k = *p.kld;
      say(fmt::format("{:4d}    {:9.4f} ± {:9.4f}    {:10.5f} ± {:10.5f}    {:10.5f} ± {:10.5f}  "
                      "  {:6.3f} ± {:6.3f} %    {:6.3f} ± {:6.3f} %\n",
                      p.chunk, k.ppl.value, k.ppl.error, k.log_ppl_ratio.value,
                      k.log_ppl_ratio.error, k.kld.value, k.kld.error, 100.0 * k.rms_p_diff.value,
                      100.0 * k.rms_p_diff.error, 100.0 * k.same_top.value,
                      100.0 * k.same_top.error),
          json);
    });
  } else {
    r = runtime::perplexity(session, tokens, po, [&](const runtime::ChunkProgress& p) {
      say(fmt::format("[{}]{:.4f},", p.chunk, p.ppl), json);
    });
    say("\n", json);
  }
  session.write_log_footer({{"n_prompt", n_text},
                            {"perplexity", r.ppl},
                            {"perplexity_error", r.ppl_error},
                            {"chunks", r.n_chunks},
                            {"prefill_tok_s", r.tokens_per_second}});

  nlohmann::json j = {{"model", o.model},
                      {"n_ctx", r.n_ctx},
                      {"n_batch", std::min(o.batch, n_ctx)},
                      {"chunks", r.n_chunks},
                      {"n_tokens", r.n_tokens},
                      {"scored", r.count},
                      {"ppl", r.ppl},
                      {"ppl_error", r.ppl_error},
                      {"nll_mean", r.nll_mean},
                      {"chunk_ppl", r.chunk_ppl},
                      {"seconds", r.seconds},
                      {"tokens_per_second", r.tokens_per_second},
                      {"threads", session.executor().workers()}};
  if (!o.kld_base_out.empty()) j["kl_divergence_base"] = o.kld_base_out;
  if (r.kld) j["kl_divergence"] = kld_json(*r.kld);
  const std::string json_text = j.dump(2) + "\n";
  std::string figures;
  if (r.kld) {
    if (r.count < 100) {
      figures +=
          fmt::format("({} scored positions: llama.cpp prints no statistics below 100)\n", r.count);
    }
    figures += kld_report(*r.kld);
  } else {
    figures = fmt::format("Final estimate: PPL = {:.4f} +/- {:.5f}\n", r.ppl, r.ppl_error);
  }
  if (json) {
    if (std::fwrite(json_text.data(), 1, json_text.size(), stdout) != json_text.size() ||
        std::fflush(stdout) != 0) {
      throw std::runtime_error("writing the JSON to stdout failed");
    }
  } else {
    say(r.kld ? "\n" + figures : figures, false);
  }
  if (!o.output.empty()) {
    analysis::write_file_atomically(o.output, file_json ? json_text : figures);
    say(fmt::format("perplexity: wrote {}\n", o.output), true);
  }
  if (!json)
    say(fmt::format("{} chunks of {} in {:.2f} s: {:.1f} tok/s\n", r.n_chunks, r.n_ctx, r.seconds,
                    r.tokens_per_second),
        true);
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  auto o = std::make_shared<PerplexityCliOptions>();
  auto* cmd = app.add_subcommand(
      "perplexity",
      "Perplexity of a text and KL divergence against a base (llama-perplexity's "
      "chunking, output and base-file format)");
  cmd->add_option("-m,--model", o->model, "GGUF model file")->required();
  cmd->add_option("-f,--file", o->text_file, "Text file to score");
  cmd->add_option("-c,--ctx-size", o->ctx, "Tokens per chunk (the second half is scored)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{4}, int64_t{1} << 24));
  cmd->add_option("-b,--batch-size", o->batch, "Tokens per forward pass")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--chunks", o->chunks, "Score at most this many chunks (-1: all)")
      ->capture_default_str()
      ->check(at_least_or_auto(1, "all"));
  cmd->add_option("-t,--threads", o->threads, "Threads (default: one per allowed physical core)")
      ->check(thread_count());
  cmd->add_option("--pin", o->pin, "Pin policy: none | compact | scatter | cores | list:0,2,4")
      ->capture_default_str()
      ->check(pin_policy());
  add_numa_option(cmd, &o->numa, false)->capture_default_str();
  cmd->add_option("--kv-type", o->kv_type, "KV cache type: f16 | f32 | q8_0")
      ->capture_default_str();
  cmd->add_option("--kl-divergence-base", o->kld_base_out,
                  "Base file (llama.cpp's format): written from this run's log-probabilities, or "
                  "read with --kl-divergence");
  cmd->add_option("--kl-divergence", o->kld_base_in,
                  "Compare with a base file written by pacer or llama-perplexity (as llama.cpp: "
                  "a flag reading --kl-divergence-base, or the file itself)")
      ->expected(0, 1);
  cmd->add_option("--format", o->format,
                  "text | json: json prints the figures as one object on stdout (progress to "
                  "stderr); default from -o's extension, else text")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("-o,--output", o->output,
                  "also write the final figures to FILE (JSON when it ends in .json or with "
                  "--format json)")
      ->check([](const std::string& v) -> std::string {
        if (v == "json" || v == "text")
          return "-o takes a file path; for the " + v + " format use --format " + v;
        return {};
      });
  cmd->add_option("--events-out", o->events_out, "Write the per-op event log (JSONL) here");
  cmd->callback([o, cmd] {
    o->ctx_given = cmd->count("-c") > 0;
    // llama-perplexity's spelling: --kl-divergence-base FILE --kl-divergence (flag) reads FILE.
    if (cmd->count("--kl-divergence") > 0 && o->kld_base_in.empty()) {
      if (o->kld_base_out.empty()) {
        throw std::runtime_error(
            "--kl-divergence needs a base file: --kl-divergence FILE or "
            "--kl-divergence-base FILE --kl-divergence");
      }
      o->kld_base_in = o->kld_base_out;
      o->kld_base_out.clear();
    }
    const std::initializer_list<std::pair<const char*, std::string>> inputs = {
        {"model (-m)", o->model},
        {"text file (-f)", o->text_file},
        {"base file (--kl-divergence)", o->kld_base_in}};
    check_output_path("--output", o->output, inputs);
    check_output_path("--kl-divergence-base", o->kld_base_out, inputs);
    check_output_path("--events-out", o->events_out, inputs);
    run_perplexity(*o);
  });
}

}  // namespace pacer::tools
