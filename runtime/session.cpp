#include "runtime/session.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "eventlog/schema.h"
#include "loader/quantize.h"
#include "runtime/forward.h"

namespace pacer::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// KV caches up to this size are mapped in when the session is made (Session::Session).
constexpr int64_t kKvCommitBytes = int64_t{1} << 30;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int64_t peak_rss_kb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

// Length of the incomplete UTF-8 sequence at the end of s (0 if it ends on a whole character).
size_t incomplete_utf8_tail(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const auto b = static_cast<unsigned char>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const size_t len = b < 0x80             ? 1
                       : (b & 0xE0) == 0xC0 ? 2
                       : (b & 0xF0) == 0xE0 ? 3
                       : (b & 0xF8) == 0xF0 ? 4
                                            : 1;
    return len > back ? back : 0;
  }
  return 0;
}

// The options with a NUMA plan's CPUs as the pin list, when the policy asks for placement and the
// caller did not plan (pin none).
SessionOptions with_numa_pin(SessionOptions o) {
  if (o.numa != NumaPolicy::None && o.pin.policy == PinPolicy::None) {
    const NumaPlan plan = plan_numa(Topology::detect(), o.numa, o.threads, current_cpu());
    o.pin = plan.pin();
    o.threads = static_cast<int>(plan.cpus.size());
  }
  return o;
}

double round1(double v) {
  return static_cast<double>(static_cast<int64_t>(v * 10 + 0.5)) / 10;
}

}  // namespace

int64_t default_ctx(const loader::ModelConfig& c) noexcept {
  return c.n_ctx_train > 0 ? std::min<int64_t>(4096, c.n_ctx_train) : 4096;
}

// ---- TextStream

bool TextStream::push(std::string_view piece) {
  if (stopped_) return true;
  const size_t old = text_.size();
  text_.append(piece);
  size_t longest = 0;
  for (const auto& s : stop_) longest = std::max(longest, s.size());
  // A stop string can only complete in the new bytes (plus its length before them).
  const size_t from = old >= longest ? old - longest + 1 : 0;
  size_t cut = std::string::npos;
  for (const auto& s : stop_) {
    if (s.empty()) continue;
    const size_t at = text_.find(s, from);
    if (at != std::string::npos) cut = std::min(cut, at);
  }
  if (cut == std::string::npos) return false;
  text_.resize(cut);
  emitted_ = std::min(emitted_, cut);
  stopped_ = true;
  return true;
}

std::string TextStream::take_ready() {
  size_t end = text_.size();
  if (!stopped_) {
    // Hold back the longest tail that is a proper prefix of a stop string.
    size_t hold = 0;
    for (const auto& s : stop_) {
      for (size_t len = std::min(s.size() - (s.empty() ? 0 : 1), text_.size()); len > hold; --len) {
        if (text_.compare(text_.size() - len, len, s, 0, len) == 0) {
          hold = len;
          break;
        }
      }
    }
    end -= hold;
    end -= incomplete_utf8_tail(std::string_view(text_).substr(0, end));
  }
  if (end <= emitted_) return {};
  std::string out = text_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

std::string TextStream::flush() {
  std::string out = emitted_ < text_.size() ? text_.substr(emitted_) : std::string();
  emitted_ = text_.size();
  return out;
}

// ---- Session

Session::Session(const Model& model, SessionOptions opts)
    : model_(model),
      opts_(with_numa_pin(std::move(opts))),
      executor_(std::make_unique<Executor>(
          ExecutorSettings{}
              .set_threads(opts_.threads)
              .set_pin(opts_.pin)
              .set_spin_us(opts_.recorder && opts_.recorder->enabled() ? kRecordingSpinUs : -1))),
      kv_(model.config(), opts_.ctx > 0 ? opts_.ctx : default_ctx(model.config()), opts_.kv_type,
          RunState::bytes(
              model.config(),
              std::clamp<int64_t>(opts_.max_batch, 1,
                                  opts_.ctx > 0 ? opts_.ctx : default_ctx(model.config())),
              opts_.max_logits, opts_.ctx > 0 ? opts_.ctx : default_ctx(model.config())),
          opts_.mem_available),
      // detect_isa(): the best this machine runs, or the one PACER_ISA pins; kernels for the
      // executor's worker count (a lone worker's GEMV prefetches further).
      state_(model.config(),
             ops::KernelSet::for_isa(ops::detect_isa()).for_workers(executor_->workers()),
             std::clamp<int64_t>(opts_.max_batch, 1, kv_.capacity()), opts_.max_logits,
             kv_.capacity()),
      sampler_(opts_.sampler),
      rec_(opts_.recorder ? opts_.recorder : &off_) {
  if (rec_->enabled()) executor_->set_observer(rec_);
  const Topology& topo = executor_->topology();
  const std::vector<int> worker_node = nodes_of_cpus(topo, executor_->cpus());
  std::vector<int> memory_nodes;
  if (opts_.numa == NumaPolicy::Interleave) {
    memory_nodes = nodes_with_allowed_cpus(topo);
  } else {
    memory_nodes = worker_node;
    std::sort(memory_nodes.begin(), memory_nodes.end());
    memory_nodes.erase(std::unique(memory_nodes.begin(), memory_nodes.end()), memory_nodes.end());
    std::erase(memory_nodes, -1);
  }
  numa_ = place_memory(opts_.numa, worker_node, memory_nodes, model.weights(), kv_.memory());
  // Mapped in now, after its NUMA placement, so the first prefill (and TTFT) takes no page
  // fault per KV page: as llama.cpp, which clears its whole cache when the context is made.
  // A cache above kKvCommitBytes (a long context of a large model) commits on first write.
  kv_.commit(kKvCommitBytes);
}

Session::~Session() {
  executor_->set_observer(nullptr);
}

std::span<const float> Session::run(std::span<const int32_t> tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) throw std::invalid_argument("no tokens to run");
  if (n_past_ + n > kv_.capacity()) {
    throw std::length_error(
        fmt::format("{} tokens at position {} exceed the context of {} positions (-c)", n, n_past_,
                    kv_.capacity()));
  }
  for (int64_t off = 0; off < n; off += state_.max_batch) {
    const int64_t len = std::min(state_.max_batch, n - off);
    // A step per batch, as generate() writes them: the recorded runs of bench's pp-at-depth and
    // -pg rows come through here, and a log without steps puts its ops in no phase.
    const Phase phase = n == 1 ? Phase::Decode : Phase::Prefill;
    rec_->begin_step(phase, step_);
    forward(model_, kv_, state_, tokens.subspan(static_cast<size_t>(off), static_cast<size_t>(len)),
            n_past_, off + len == n, *executor_, *rec_);
    n_past_ += len;
    rec_->end_step({.phase = phase, .step = step_, .n_past = n_past_, .n_tokens = len});
    ++step_;
  }
  return last_logits();
}

std::span<const float> Session::eval(std::span<const int32_t> tokens, int64_t n_logits,
                                     const LogitsConsumer& consume) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0 || n > state_.max_batch) {
    throw std::invalid_argument(
        fmt::format("eval: a batch of {} tokens (1 to {} per pass)", n, state_.max_batch));
  }
  if (n_past_ + n > kv_.capacity()) {
    throw std::length_error(
        fmt::format("{} tokens at position {} exceed the context of {} positions (-c)", n, n_past_,
                    kv_.capacity()));
  }
  rec_->begin_step(Phase::Prefill, step_);
  forward(model_, kv_, state_, tokens, n_past_, n_logits, *executor_, *rec_);
  n_past_ += n;
  const std::span<const float> logits(state_.logits.data(),
                                      static_cast<size_t>(n_logits * model_.config().n_vocab));
  if (consume) {
    auto op = rec_->op({.name = "score", .kind = OpKind::Other});
    consume(logits, *executor_);
  }
  StepInfo info;
  info.phase = Phase::Prefill;
  info.step = step_;
  info.n_past = n_past_;
  info.n_tokens = n;
  rec_->end_step(info);
  ++step_;
  return logits;
}

std::span<const float> Session::prefill(std::span<const int32_t> tokens) {
  return run(tokens);
}

std::span<const float> Session::decode(int32_t token) {
  return run(std::span<const int32_t>(&token, 1));
}

void Session::write_log_header(const nlohmann::json& extra, int64_t n_prompt, int64_t n_predict) {
  const loader::ModelConfig& cfg = model_.config();
  if (!rec_->enabled()) return;
  {
    nlohmann::json fields = extra.is_object() ? extra : nlohmann::json::object();
    const Topology& topo = executor_->topology();
    int64_t l3 = 0;
    for (const auto& c : topo.caches) {
      if (c.level == 3) l3 = c.size_bytes * c.instances;
    }
    namespace key = eventlog::header_key;
    namespace mkey = eventlog::model_key;
    namespace rkey = eventlog::run_key;
    namespace hkey = eventlog::host_key;
    // The config's own keys (loader/model_config.cpp to_json), then what the file and weights say.
    nlohmann::json& model = fields[key::kModel] = cfg;
    model[mkey::kPath] = model_.file().path().string();
    model[mkey::kType] = ops::type_name(model_.weights().main_type);
    if (cfg.file_type >= 0) model[mkey::kFileType] = loader::llama_file_type_name(cfg.file_type);
    model[mkey::kBytes] = model_.file().file_size();
    model[mkey::kMatmulBytesPerToken] = model_.weights().matmul_bytes;
    const auto& sp = opts_.sampler;
    fields[key::kRun] = {
        {rkey::kThreads, executor_->workers()},
        {rkey::kPin, executor_->pin().to_string()},
        {rkey::kCpus, executor_->cpus().empty() ? topo.allowed_cpus : executor_->cpus()},
        {rkey::kPinned, !executor_->cpus().empty()},
        {rkey::kCtx, kv_.capacity()},
        {rkey::kMaxBatch, state_.max_batch},
        {rkey::kNPrompt, n_prompt},
        {rkey::kNPredict, n_predict},
        {rkey::kSeed, sp.seed},
        {rkey::kTemperature, sp.temperature},
        {rkey::kTopK, sp.top_k},
        {rkey::kTopP, sp.top_p},
        {rkey::kMinP, sp.min_p},
        {rkey::kRepeatPenalty, sp.repeat_penalty},
        {rkey::kIsa, ops::isa_name(state_.kernels.isa())},
        {rkey::kVnni,
         state_.kernels.isa() == ops::Isa::Avx512 && ops::detect_cpu_features().avx512_vnni},
        {rkey::kAmx,
         state_.kernels.isa() == ops::Isa::Avx512 && ops::detect_cpu_features().amx_int8},
        {rkey::kBf16Dot, model_.bf16_dot_prefill(state_.kernels.isa())},
        {rkey::kRepackedMatrices, model_.repacked_matrices()},
        {rkey::kGemvPrefetch, ops::gemv_software_prefetch(ops::GemvKernelClass::Streaming)},
        {rkey::kGemvPrefetchUnpacking,
         ops::gemv_software_prefetch(ops::GemvKernelClass::Unpacking)},
        {rkey::kGemvStreams, state_.kernels.x16(ops::WeightType::Q4_0).gemv_streams},
        {rkey::kX16Gemv, x16_gemv_json(state_.kernels.x16_gemv_choices())},
        {rkey::kWorkStealing, executor_->work_stealing()},
        {rkey::kWorkStealingBalanced, executor_->work_stealing_balanced()},
        {rkey::kIdlePrefetch, executor_->idle_prefetch()},
        {rkey::kKvType, ops::type_name(kv_.type())},
        {rkey::kAttentionOnePass, state_.kernels.attention_one_pass()},
        {rkey::kRecording, "full"}};
    fields[key::kRun][rkey::kNuma] = numa_json(numa_);
    fields[key::kHost][hkey::kTopology] = {{hkey::kPackages, topo.packages},
                                           {hkey::kNumaNodes, topo.numa_nodes.size()},
                                           {hkey::kCores, topo.cores.size()},
                                           {hkey::kPus, topo.pu_count()},
                                           {hkey::kL3Bytes, l3}};
    fields[key::kLoadMs] = round1(model_.load_ms());
    rec_->write_header(fields);
  }
}

nlohmann::json x16_gemv_json(const std::vector<ops::X16GemvChoice>& choices) {
  nlohmann::json j = nlohmann::json::object();
  for (const ops::X16GemvChoice& c : choices) {
    nlohmann::json& plan = j[std::string(ops::type_name(c.type))];
    plan = {{"streams", c.streams},
            {"prefetch", c.prefetch},
            {"page_touch", c.page_touch},
            {"prefetch_far", c.prefetch_far}};
    if (c.run_bytes > 0) plan["run_bytes"] = c.run_bytes;
    if (c.avx2_kernel) plan["kernel"] = "avx2";
  }
  return j;
}

void Session::write_log_footer(const nlohmann::json& fields) {
  if (rec_->enabled()) rec_->write_footer(fields);
}

Generation Session::generate(std::string_view prompt, const GenerateOptions& opts,
                             const TextCallback& on_text) {
  const loader::Tokenizer& tok = model_.tokenizer();
  Generation g;
  Timings& tm = g.timings;
  tm.load_ms = model_.load_ms();
  const auto t_start = Clock::now();
  reset();
  step_ = 0;

  // Tokenize.
  {
    const auto t0 = Clock::now();
    auto op = rec_->op({.name = "tokenize", .kind = OpKind::Other});
    g.prompt_tokens = opts.prompt_tokens.empty()
                          ? tok.encode(prompt, opts.add_special, opts.parse_special)
                          : opts.prompt_tokens;
    tm.tokenize_ms = ms_since(t0);
  }
  const int64_t n_prompt = static_cast<int64_t>(g.prompt_tokens.size());
  tm.n_prompt = n_prompt;
  if (n_prompt == 0) throw std::invalid_argument("the prompt is empty (no tokens to prefill)");
  if (n_prompt > kv_.capacity()) {
    throw std::length_error(fmt::format("the prompt has {} tokens but the context holds {} (-c)",
                                        n_prompt, kv_.capacity()));
  }

  write_log_header(opts.header, n_prompt, opts.n_predict);

  std::vector<int32_t> history = g.prompt_tokens;
  TextStream stream(opts.stop);
  auto emit = [&](std::string s) {
    if (!s.empty() && on_text) on_text(s);
  };
  auto detokenize = [&](int32_t id) {
    const auto t0 = Clock::now();
    auto op = rec_->op({.name = "detokenize", .kind = OpKind::Other});
    std::string piece = tok.piece(id);
    tm.detokenize_ms += ms_since(t0);
    return piece;
  };
  auto sample = [&] {
    auto op = rec_->op({.name = "sample", .kind = OpKind::Sample});
    // The sampler edits the logits in place (penalties, temperature): they are scratch until the
    // next forward pass overwrites them.
    return sampler_.sample(last_logits(), history);
  };

  // Prefill: the prompt in batches of max_batch tokens, one step each; the last batch's logits
  // give the first generated token.
  int32_t token = -1;
  std::string piece;
  const bool want_token = opts.n_predict != 0;
  for (int64_t off = 0; off < n_prompt; off += state_.max_batch) {
    const int64_t len = std::min(state_.max_batch, n_prompt - off);
    const bool last = off + len == n_prompt;
    rec_->begin_step(Phase::Prefill, step_);
    const auto t0 = Clock::now();
    forward(model_, kv_, state_,
            std::span<const int32_t>(g.prompt_tokens)
                .subspan(static_cast<size_t>(off), static_cast<size_t>(len)),
            n_past_, last && want_token, *executor_, *rec_);
    n_past_ += len;
    tm.prefill_ms += ms_since(t0);
    StepInfo info;
    info.phase = Phase::Prefill;
    info.step = step_;
    info.n_past = n_past_;
    info.n_tokens = len;
    if (last && want_token) {
      token = sample();
      tm.ttft_ms = ms_since(t_start);
      piece = detokenize(token);
      info.token = token;
      info.piece = piece;
    }
    rec_->end_step(info);
    ++step_;
  }

  // Decode: one token per step until a stop condition.
  g.stop_reason = "n_predict";
  while (want_token) {
    if (tok.is_eog(token) && !opts.ignore_eos) {
      g.stop_reason = "eos";
      break;
    }
    g.tokens.push_back(token);
    history.push_back(token);
    ++tm.n_generated;
    if (stream.push(piece)) {
      emit(stream.take_ready());
      g.stop_reason = "stop_string";
      break;
    }
    emit(stream.take_ready());
    if (opts.n_predict > 0 && tm.n_generated >= opts.n_predict) break;
    if (n_past_ >= kv_.capacity()) {
      g.stop_reason = "context_full";
      break;
    }
    rec_->begin_step(Phase::Decode, step_);
    const auto t0 = Clock::now();
    forward(model_, kv_, state_, std::span<const int32_t>(&token, 1), n_past_, true, *executor_,
            *rec_);
    ++n_past_;
    token = sample();
    tm.decode_ms += ms_since(t0);
    ++tm.n_decode_steps;
    piece = detokenize(token);
    StepInfo info;
    info.phase = Phase::Decode;
    info.step = step_;
    info.n_past = n_past_;
    info.token = token;
    info.piece = piece;
    rec_->end_step(info);
    ++step_;
  }
  if (g.stop_reason != "stop_string") emit(stream.flush());
  g.text = stream.text();
  tm.wall_ms = ms_since(t_start);
  tm.peak_rss_kb = peak_rss_kb();

  if (rec_->enabled()) {
    nlohmann::json workers = nlohmann::json::array();
    for (const WorkerPlacement& p : executor_->placements()) {
      workers.push_back({{"w", p.worker},
                         {"pinned_cpu", p.pinned_cpu},
                         {"first_cpu", p.first_cpu},
                         {"last_cpu", p.last_cpu},
                         {"chunks", p.chunks},
                         {"off_target_chunks", p.off_target}});
    }
    rec_->write_footer({{"n_prompt", tm.n_prompt},
                        {"n_generated", tm.n_generated},
                        {"load_ms", round1(tm.load_ms)},
                        {"ttft_ms", round1(tm.ttft_ms)},
                        {"prefill_tok_s", round1(tm.prefill_tok_s())},
                        {"decode_tok_s", round1(tm.decode_tok_s())},
                        {"wall_ms", round1(tm.wall_ms)},
                        {"peak_rss_kb", tm.peak_rss_kb},
                        {"tokenize_ms", tm.tokenize_ms},
                        {"detokenize_ms", tm.detokenize_ms},
                        {"stop", g.stop_reason},
                        {"workers", workers}});
  }
  return g;
}

}  // namespace pacer::runtime
