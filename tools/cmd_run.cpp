// `pacer run`: load a model, generate text (streamed to stdout as it comes), then print one timing
// line to stderr: load, TTFT, prefill and decode throughput, peak RSS. --events-out records every
// op of every step to an event log.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/counter_summary.h"
#include "eventlog/schema.h"
#include "runtime/model.h"
#include "runtime/recorder.h"
#include "runtime/session.h"
#include "tools/commands.h"

namespace pacer::tools {
namespace {

struct RunOptions {
  std::string model;
  std::string prompt;
  std::string prompt_file;
  int64_t n_predict = 128;
  float temp = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  uint64_t seed = 0;
  int threads = -1;
  std::string pin = "none";
  std::string numa = "none";
  int64_t ctx = -1;
  int64_t batch = 512;
  std::string kv_type = "f16";
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool parse_special = false;
  bool print_prompt = false;
  std::string events_out;
  std::string events;  // extra libpfm4 events, comma separated
};

std::vector<std::string> process_argv() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> argv;
  std::string arg;
  while (std::getline(in, arg, '\0')) argv.push_back(arg);
  return argv;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

void run_generate(const RunOptions& o) {
  std::string prompt = o.prompt;
  if (!o.prompt_file.empty()) {
    std::error_code ec;
    if (std::filesystem::is_directory(o.prompt_file, ec)) {
      throw std::runtime_error(o.prompt_file + ": is a directory, not a prompt file (-f)");
    }
    std::ifstream in(o.prompt_file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read prompt file " + o.prompt_file);
    std::stringstream ss;
    ss << in.rdbuf();
    prompt = ss.str();
    if (prompt.empty()) throw std::runtime_error(o.prompt_file + ": the prompt file is empty (-f)");
  }
  const auto kv_type = ops::weight_type_from_name(o.kv_type);
  if (!kv_type || (*kv_type != ops::WeightType::F16 && *kv_type != ops::WeightType::F32 &&
                   *kv_type != ops::WeightType::Q8_0)) {
    throw CLI::ValidationError("--kv-type", "must be f16, f32 or q8_0, got '" + o.kv_type + "'");
  }

  runtime::SessionOptions so;
  so.ctx = o.ctx;
  so.threads = o.threads;
  so.pin = runtime::PinSpec::parse(o.pin);
  apply_numa(so, o.numa, o.pin);  // before the load: a bad combination fails fast
  so.kv_type = *kv_type;
  so.max_batch = o.batch;
  so.sampler.temperature = o.temp;
  so.sampler.top_k = o.top_k;
  so.sampler.top_p = o.top_p;
  so.sampler.min_p = o.min_p;
  so.sampler.repeat_penalty = o.repeat_penalty;
  so.sampler.repeat_last_n = o.repeat_last_n;
  so.sampler.seed = o.seed;

  const runtime::Model model = runtime::Model::load(o.model);

  std::unique_ptr<runtime::Recorder> recorder;
  if (!o.events_out.empty()) {
    runtime::RecorderOptions ro;
    ro.events_path = o.events_out;
    ro.extra_events = split_commas(o.events);
    // The recorder needs the worker count before the session builds its executor.
    ro.workers = runtime::resolve_threads(runtime::Topology::detect(), so.pin, so.threads);
    recorder = std::make_unique<runtime::Recorder>(ro);
    so.recorder = recorder.get();
  }

  // Between the load and the first token: the KV cache mapped in, the workers started and pinned
  // (load and TTFT do not cover it, so it is printed on its own).
  const auto setup_t0 = std::chrono::steady_clock::now();
  auto session_holder = std::make_unique<runtime::Session>(model, so);
  const double setup_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - setup_t0)
          .count();
  runtime::Session& session = *session_holder;
  warn_configuration(session.executor(), session.ctx(), model.config().n_ctx_train);
  runtime::GenerateOptions go;
  go.n_predict = o.n_predict;
  go.stop = o.stop;
  go.ignore_eos = o.ignore_eos;
  go.parse_special = o.parse_special;
  go.header = {{eventlog::header_key::kCommand, "run"},
               {eventlog::header_key::kArgv, process_argv()}};

  if (o.print_prompt) {
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    std::fflush(stdout);
  }
  const runtime::Generation g = session.generate(prompt, go, [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);

  const runtime::Timings& t = g.timings;
  const runtime::Executor& ex = session.executor();
  std::fprintf(
      stderr, "%s\n",
      fmt::format("load {:.1f} ms | session setup {:.1f} ms | TTFT {:.1f} ms | prefill {} "
                  "tok {:.1f} tok/s | decode {} tok {:.2f} tok/s | peak RSS {:.1f} MiB | "
                  "{} threads, pin {} | stop: {}",
                  t.load_ms, setup_ms, t.ttft_ms, t.n_prompt, t.prefill_tok_s(), t.n_decode_steps,
                  t.decode_tok_s(), static_cast<double>(t.peak_rss_kb) / 1024.0, ex.workers(),
                  ex.pin().to_string(), g.stop_reason)
          .c_str());
  if (recorder) {
    // As `perf stat` does at exit: what was counted, and what was not and why. The log is
    // complete once the session and the recorder are gone.
    session_holder.reset();
    recorder.reset();
    const std::string summary =
        analysis::render_counter_summary(analysis::summarize_counters(o.events_out));
    std::fputs(summary.c_str(), stderr);
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run",
                                 "Generate text, then print load/TTFT/prefill/decode "
                                 "timings and peak RSS");
  cmd->add_option("-m,--model", o->model, "GGUF model file")->required();
  auto* p = cmd->add_option("-p,--prompt", o->prompt, "Prompt text");
  auto* f = cmd->add_option("-f,--file", o->prompt_file, "Read the prompt from a file");
  p->excludes(f);
  cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate (-1: until EOS)")
      ->capture_default_str()
      ->check(at_least_or_auto(0, "until EOS"));
  cmd->add_option("--temp", o->temp, "Temperature (0: greedy)")
      ->capture_default_str()
      ->check(number_in(0, 1e6));
  cmd->add_option("--top-k", o->top_k, "Top-k (0: off)")->capture_default_str()->check(at_least(0));
  cmd->add_option("--top-p", o->top_p, "Top-p (1: off)")
      ->capture_default_str()
      ->check(number_in(0, 1));
  cmd->add_option("--min-p", o->min_p, "Min-p (0: off)")
      ->capture_default_str()
      ->check(number_in(0, 1));
  cmd->add_option("--repeat-penalty", o->repeat_penalty, "Repetition penalty (1: off)")
      ->capture_default_str()
      ->check(number_in(0, 1e6, true));
  cmd->add_option("--repeat-last-n", o->repeat_last_n, "History the penalty looks at")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--seed", o->seed, "Sampler seed")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Threads (default: one per allowed physical core)")
      ->check(thread_count());
  cmd->add_option("--pin", o->pin, "Pin policy: none | compact | scatter | cores | list:0,2,4")
      ->capture_default_str()
      ->check(pin_policy());
  add_numa_option(cmd, &o->numa, false)->capture_default_str();
  cmd->add_option("-c,--ctx", o->ctx,
                  "Context size (KV cache positions; default min(4096, the model's))")
      ->check(at_least_or_auto(1));
  cmd->add_option("-b,--batch", o->batch, "Prompt tokens per prefill step")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--kv-type", o->kv_type, "KV cache type: f16 | f32 | q8_0")
      ->capture_default_str();
  cmd->add_option("--stop", o->stop, "Stop string (repeatable; not printed)");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Keep generating past end-of-generation tokens");
  cmd->add_flag("--special", o->parse_special, "Parse special-token text in the prompt");
  cmd->add_flag("--print-prompt", o->print_prompt, "Echo the prompt before the generated text");
  cmd->add_option("--events-out", o->events_out, "Write the per-op event log (JSONL) here");
  cmd->add_option("--events", o->events, "Extra libpfm4 events to count, comma separated");
  cmd->callback([o] {
    if (o->prompt.empty() && o->prompt_file.empty()) {
      throw CLI::ValidationError("--prompt", "pacer run needs a prompt: -p TEXT or -f FILE");
    }
    check_output_path("--events-out", o->events_out,
                      {{"model (-m)", o->model}, {"prompt file (-f)", o->prompt_file}});
    run_generate(*o);
  });
}

}  // namespace pacer::tools
