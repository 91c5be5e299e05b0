#pragma once
// A generation session over a loaded model: the KV cache for the requested context, the pinned
// executor, the sampler, and the loop prompt -> batched prefill -> decode until EOS, a stop string
// or n tokens, streaming text as it comes and timing every phase.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ops/sampling.h"
#include "runtime/executor.h"
#include "runtime/kv_cache.h"
#include "runtime/model.h"
#include "runtime/numa.h"
#include "runtime/recorder.h"
#include "runtime/run_state.h"

namespace pacer::runtime {

// How long the executor's idle workers spin before they sleep in a session that records: longer
// than the recorder's work between two steps (serializing the step's ops, the per-step probes:
// ~0.4 ms on the 2-vCPU dev VM), so that recording does not change how the workers wait. With
// the executor's default 100 us they slept through every step boundary, and the step's first
// matmul then ran on a worker woken from the futex: TinyLlama Q4_0's layer-0 attn_qkv read
// ~20 GB/s at 2 threads in recorded decode steps instead of ~60 (~0.1 ms, 1 % of a step, all of
// it in one op the report then shows as slow); with this spin, 45-53. An unrecorded decode's
// steps are ~25 us apart, under either spin.
inline constexpr int kRecordingSpinUs = 2000;

struct SessionOptions {
  int64_t ctx = -1;  // KV cache positions; -1: min(4096, the model's training context)
  int threads = -1;  // -1: one per allowed physical core (or the pin list's length)
  PinSpec pin;       // default none
  // NUMA placement (runtime/numa.h). With pin none the session plans the workers itself
  // (plan_numa from the CPU it runs on now); a caller that needs the worker count first (to size
  // a Recorder) plans, and passes plan.pin() with the policy. Memory follows the workers' nodes.
  NumaPolicy numa = NumaPolicy::None;
  ops::SamplerParams sampler;
  ops::WeightType kv_type = ops::WeightType::F16;  // F16 or F32
  int64_t max_batch = 512;  // prompt tokens per prefill step (longer prompts take several steps)
  int64_t max_logits = 1;   // logit rows eval() can return per batch (perplexity: the batch)
  Recorder* recorder = nullptr;  // nullptr: no recording
  int64_t mem_available = -1;    // memory check against this instead of MemAvailable (tests)
};

struct GenerateOptions {
  int64_t n_predict = 128;        // tokens to generate at most (< 0: until EOS or ctx full)
  std::vector<std::string> stop;  // stop strings (not printed)
  bool add_special = true;        // BOS/EOS as the vocabulary asks
  bool parse_special = false;     // "<|im_start|>" in the prompt becomes a control token
  bool ignore_eos = false;        // keep going past end-of-generation tokens
  nlohmann::json header;          // extra event-log header fields (command, argv, ...)
  // When not empty: the prompt as token ids (the text argument is ignored and not tokenized).
  // `pacer bench` feeds random ids this way, as llama-bench does.
  std::vector<int32_t> prompt_tokens;
};

struct Timings {
  double load_ms = 0;  // model load (mmap, parse, bind)
  double tokenize_ms = 0;
  double ttft_ms = 0;     // generate() start to first generated token (tokenize + prefill + sample)
  double prefill_ms = 0;  // prompt forward passes
  double decode_ms = 0;   // decode steps (forward + sample)
  double detokenize_ms = 0;
  double wall_ms = 0;
  int64_t n_prompt = 0;
  int64_t n_generated = 0;  // tokens sampled (including the first, which comes from prefill)
  int64_t n_decode_steps = 0;
  int64_t peak_rss_kb = 0;  // getrusage ru_maxrss at the end
  double prefill_tok_s() const { return prefill_ms > 0 ? n_prompt * 1000.0 / prefill_ms : 0; }
  double decode_tok_s() const { return decode_ms > 0 ? n_decode_steps * 1000.0 / decode_ms : 0; }
};

struct Generation {
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> tokens;  // generated ids (without a final EOG token)
  std::string text;             // generated text, cut before a stop string
  std::string stop_reason;      // "eos" | "stop_string" | "n_predict" | "context_full"
  Timings timings;
};

// Receives generated text as soon as it is known: whole UTF-8 characters only, never a byte of a
// stop string.
using TextCallback = std::function<void(std::string_view)>;

class Session {
 public:
  // Throws MemoryError when the cache does not fit, TopologyError for impossible pinning.
  Session(const Model& model, SessionOptions opts);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Low level: feed tokens at the current position (prompt: in max_batch steps; one token:
  // a decode step) and return the last token's logits (valid until the next call).
  std::span<const float> prefill(std::span<const int32_t> tokens);
  std::span<const float> decode(int32_t token);
  // One forward pass of a batch (<= max_batch tokens) at the current position, recorded as one
  // prefill step: returns the logits of its last n_logits tokens (n_logits * n_vocab floats, row
  // by row; n_logits <= max_logits), valid until the next call. `consume`, when given, runs on
  // those logits inside the step as an op named "score" with the session's workers (so a
  // perplexity run's scoring shows in its profile).
  using LogitsConsumer = std::function<void(std::span<const float>, const ops::Parallel&)>;
  std::span<const float> eval(std::span<const int32_t> tokens, int64_t n_logits,
                              const LogitsConsumer& consume = nullptr);
  // Event-log header (model, run, host facts) and footer for callers that drive eval() themselves
  // (perplexity); generate() writes its own. No-ops when recording is off.
  void write_log_header(const nlohmann::json& extra, int64_t n_prompt, int64_t n_predict);
  void write_log_footer(const nlohmann::json& fields);
  void reset() noexcept { n_past_ = 0; }  // forget the cached positions
  int64_t n_past() const noexcept { return n_past_; }
  int64_t ctx() const noexcept { return kv_.capacity(); }

  // Tokenizes the prompt, prefills, then samples and decodes until a stop condition. Starts from
  // an empty cache. on_text streams the text; nullptr: collect only.
  Generation generate(std::string_view prompt, const GenerateOptions& opts,
                      const TextCallback& on_text = nullptr);

  const Model& model() const noexcept { return model_; }
  Executor& executor() noexcept { return *executor_; }
  const SessionOptions& options() const noexcept { return opts_; }
  // What --numa did (policy none: workers' nodes only, memory left to the kernel).
  const NumaPlacement& numa() const noexcept { return numa_; }

 private:
  std::span<const float> run(std::span<const int32_t> tokens);
  std::span<float> last_logits() noexcept {
    return {state_.logits.data(), static_cast<size_t>(model_.config().n_vocab)};
  }

  const Model& model_;
  SessionOptions opts_;
  std::unique_ptr<Executor> executor_;
  KvCache kv_;
  RunState state_;
  ops::Sampler sampler_;
  NumaPlacement numa_;
  Recorder off_;  // inert recorder used when none was given
  Recorder* rec_;
  int64_t n_past_ = 0;
  int64_t step_ = 0;  // recorder step counter
};

// The event log header's run.x16_gemv and bench's JSON x16_gemv: each interleaved GEMV's plan
// (ops/isa.h X16GemvPlan) by type name, {"q4_0": {"streams": 1, "prefetch": true,
// "page_touch": 8192}, ...}.
nlohmann::json x16_gemv_json(const std::vector<ops::X16GemvChoice>& choices);

// Default context for a model: min(4096, n_ctx_train).
int64_t default_ctx(const loader::ModelConfig& c) noexcept;

// Text streaming helper (public for tests): holds back an incomplete UTF-8 sequence at the end
// and any tail that could still become one of the stop strings.
class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop) : stop_(std::move(stop)) {}
  // Appends a token's bytes; returns true when a stop string completed (text() is then cut
  // before it). ready() gives the bytes safe to print now.
  bool push(std::string_view piece);
  std::string take_ready();  // printable bytes not yet taken
  std::string flush();       // at the end: everything not yet taken
  const std::string& text() const noexcept { return text_; }

 private:
  std::vector<std::string> stop_;
  std::string text_;
  size_t emitted_ = 0;
  bool stopped_ = false;
};

}  // namespace pacer::runtime
