#pragma once
// Brackets every op of every step and writes the JSONL event log (docs/event-log.md).
//
// Use in the forward pass:
//   auto op = rec.op({.name = "attn_qkv", .layer = il, .kind = OpKind::Matmul, ...});
//   ops::matmul(...);            // parallel chunks reach the recorder through ChunkObserver
//   // op's destructor closes the event
// With recording off (no sink), op() returns an inert scope: one predictable branch, no clock
// reads, no allocation.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "eventlog/schema.h"
#include "ops/types.h"
#include "runtime/chunk_observer.h"

namespace pacer::hwcounters {
class CounterSource;
class FrequencySource;
}  // namespace pacer::hwcounters

namespace pacer::runtime {

// The log's enums and their names belong to the schema (eventlog/schema.h).
using eventlog::op_kind_name;
using eventlog::OpKind;
using eventlog::Phase;
using eventlog::phase_name;

struct OpInfo {
  std::string_view name{};  // stable op name (docs/event-log.md); copied when the op opens
  int layer = -1;
  OpKind kind = OpKind::Other;
  ops::WeightType wtype = ops::WeightType::F32;  // matmuls only
  int64_t rows = 0, cols = 0, tokens = 0;        // matmuls only
  int64_t weight_bytes = 0;                      // bytes of weights the op streams
  int64_t kv_bytes = 0;  // bytes of the KV cache the op reads (attention), each row counted once
  // attention over an F16/F32 cache: its fp32 flops (4 x head_dim per key and query head), what
  // the roofline holds against the FMA rate (eventlog/roofline.h); 0 for a Q8_0 cache
  int64_t attention_flops = 0;
};

struct StepInfo {
  Phase phase = Phase::Decode;
  int64_t step = 0;
  int64_t n_past = 0;
  int64_t n_tokens = 1;  // batch size (prefill) or 1
  int32_t token = -1;    // decode: the sampled token
  std::string piece{};   // its text, if known ({} keeps designated initializers warning-free)
};

class Recorder;

class OpScope {
 public:
  OpScope() = default;  // inert
  OpScope(Recorder* rec, const OpInfo& info) noexcept;
  OpScope(OpScope&& o) noexcept : rec_(o.rec_) { o.rec_ = nullptr; }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;
  OpScope& operator=(OpScope&&) = delete;
  ~OpScope() {
    if (rec_) close();
  }

 private:
  void close() noexcept;
  Recorder* rec_ = nullptr;
};

// Opens the counter sources for the calling thread (the worker's own thread); tests pass fakes.
using CounterSourceFactory =
    std::function<std::vector<std::unique_ptr<hwcounters::CounterSource>>(int worker)>;

struct RecorderOptions {
  std::string events_path;                // empty: recording off
  std::vector<std::string> extra_events;  // --events a,b,c (libpfm4 names)
  int workers = 1;
  // What each chunk bracket reads (docs/event-log.md, "Granularity").
  bool hardware_counters = true;  // try the PMU (software events and schedstat regardless)
  bool sched_per_op = true;       // per-op run-queue delay from schedstat (~0.8 us per chunk)
  // Machine probes done once: RAPL energy (20 ms) and the per-CPU frequency before/after the run.
  bool probe_energy = true;
  bool measure_freq_before_after = true;
  // A bracket that begins within this many ns of the same thread's previous bracket end reuses
  // that end reading instead of reading the counters again (0: always read). The time in
  // between (the recorder's own bookkeeping, or a worker's wait) counts to the later op.
  int64_t reuse_reading_ns = 2000;
  // Tests: replace the counter sources / the per-step frequency source (nullptr: the best one).
  CounterSourceFactory counter_factory;
  std::shared_ptr<hwcounters::FrequencySource> frequency_source;
};

class Recorder final : public ChunkObserver {
 public:
  Recorder();                                      // recording off
  explicit Recorder(const RecorderOptions& opts);  // opens the log and the counter sources
  ~Recorder() override;
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  bool enabled() const noexcept { return enabled_; }

  // Opens the calling thread's counters now instead of at its first chunk (the executor may call
  // this once per worker thread at start-up; optional).
  void attach_current_thread(int worker) noexcept;

  // The run header (docs/event-log.md `header`): the caller fills model/run/host fields it knows;
  // the recorder adds counter, frequency, thermal and host facts it measured itself.
  void write_header(const nlohmann::json& fields);
  void begin_step(Phase phase, int64_t step);
  void end_step(const StepInfo& info);  // writes the step line and flushes
  void write_footer(const nlohmann::json& fields);

  OpScope op(const OpInfo& info) noexcept { return enabled_ ? OpScope(this, info) : OpScope(); }

  // ChunkObserver: called by the executor on each worker thread.
  void on_chunk_begin(int worker) noexcept override;
  void on_chunk_end(int worker) noexcept override;
  // An idle worker takes the step's frequency sample here, before the step's first job, instead
  // of at the start of its first chunk (inside that op's window).
  void on_idle(int worker) noexcept override;

 private:
  friend class OpScope;
  void open_op(const OpInfo& info) noexcept;
  void close_op() noexcept;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool enabled_ = false;
};

inline OpScope::OpScope(Recorder* rec, const OpInfo& info) noexcept : rec_(rec) {
  rec_->open_op(info);
}
inline void OpScope::close() noexcept {
  rec_->close_op();
}

}  // namespace pacer::runtime
