// The op recorder: per-thread counter brackets on the hot path, serialisation at step end. Its
// parts by job: the attached threads and their bracket reads (thread_registry.h, the hot path),
// the per-step machine probes (step_probes.h), and the line serializers over typed records
// (event_log.h). This file holds the op/step bookkeeping that ties them together.
//
// Hot path (per op, per worker): one pthread_self() lookup in a short array, two CLOCK_MONOTONIC
// reads, two sched_getcpu() (vDSO/rseq), and the counter sources' reads at each chunk boundary
// (rdpmc or one read() per group, the begin reading reused from the thread's previous bracket
// when that ended under 2 us ago; the schedstat pread only after the thread was switched out).
// Nothing allocates: op records and worker slices live in per-step buffers that reach their size
// in the first step and are reused. ~1.4 us of CPU per op on the 2-vCPU KVM dev machine.
#include "runtime/recorder.h"

#include <pthread.h>
#include <sched.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hwcounters/counter_set.h"
#include "hwcounters/event_table.h"
#include "hwcounters/frequency.h"
#include "hwcounters/host_facts.h"
#include "hwcounters/sched.h"
#include "runtime/event_log.h"
#include "runtime/step_probes.h"
#include "runtime/thread_registry.h"
#include "runtime/topology.h"

namespace pacer::runtime {

static_assert(kMaxThreads >= kMaxWorkerThreads,
              "the recorder brackets every worker a session runs");

namespace {

using json = nlohmann::json;

int64_t now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Ops whose kind or name says which phase they belong to regardless of the step around them.
Phase op_phase(const OpInfo& info, Phase step_phase) noexcept {
  if (info.kind == OpKind::Sample) return Phase::Sample;
  if (info.name == "tokenize") return Phase::Tokenize;
  if (info.name == "detokenize") return Phase::Detokenize;
  return step_phase;
}

// What the counter reads of one op bracket cost on this thread: a begin and an end reading with
// their run-queue checks, as on_chunk_begin/on_chunk_end do them inside a slice (the clock
// reads bound the slice, so one of them counts too). Median of 31. Leaves the thread's reuse
// state alone and does not count in runq_reads.
int64_t measure_bracket_ns(ThreadState& ts) noexcept {
  constexpr int kReps = 31;
  std::array<int64_t, kReps> d{};
  const int64_t runq_reads = ts.runq_reads;
  Readings a, b;
  for (int64_t& x : d) {
    const int64_t t0 = now_ns();
    const uint32_t ok_a = read_sources(ts, a);
    runq_now(ts, a, ok_a);
    const uint32_t ok_b = read_sources(ts, b);
    runq_now(ts, b, ok_b);
    x = now_ns() - t0;
  }
  ts.runq_reads = runq_reads;
  std::nth_element(d.begin(), d.begin() + kReps / 2, d.end());
  return d[kReps / 2];
}

}  // namespace

// Tokens and time per phase over the run: the steps' running decode throughput and the footer's.
class RunTotals {
 public:
  // Adds one step; returns the running decode throughput after a decode step.
  std::optional<double> add_step(Phase phase, int64_t n_tokens, int64_t dt_ns) noexcept {
    if (phase == Phase::Decode) {
      decode_tokens_ += n_tokens;
      decode_ns_ += dt_ns;
      return decode_tok_s();
    }
    if (phase == Phase::Prefill) {
      prefill_tokens_ += n_tokens;
      prefill_ns_ += dt_ns;
    }
    return std::nullopt;
  }
  std::optional<double> decode_tok_s() const noexcept { return rate(decode_tokens_, decode_ns_); }
  std::optional<double> prefill_tok_s() const noexcept {
    return rate(prefill_tokens_, prefill_ns_);
  }

 private:
  static std::optional<double> rate(int64_t tokens, int64_t ns) noexcept {
    if (ns <= 0) return std::nullopt;
    return static_cast<double>(tokens) * 1e9 / static_cast<double>(ns);
  }
  int64_t decode_tokens_ = 0, decode_ns_ = 0, prefill_tokens_ = 0, prefill_ns_ = 0;
};

// What end_step reads the moment the step ends, before serialising anything.
struct StepEnd {
  int64_t t1 = 0;
  std::vector<std::pair<hwcounters::ThreadSched, int64_t>> threads;  // schedstat, CPU ns
};

struct Recorder::Impl {
  RecorderOptions opts;
  std::unique_ptr<EventLogWriter> writer;
  hwcounters::HostFacts host;
  double tsc_mhz = 0;
  std::shared_ptr<hwcounters::FrequencySource> freq;  // null: frequency from counters
  std::vector<hwcounters::Unavailable> freq_rejected;
  hwcounters::CounterSetStatus counter_status;  // of the constructing thread
  std::unique_ptr<StepProbes> probes;
  int n_slots = 1;

  // The threads that bracket ops and chunks, and the counter key table.
  std::unique_ptr<ThreadRegistry> registry;

  // Per-step buffers.
  std::vector<OpRecord> ops;
  std::vector<WorkerSlice> slices;  // ops.size() x n_slots
  std::array<std::vector<uint8_t>, eventlog::kPhaseCount>
      parallel_hint;  // op ordinal -> ran chunks last time
  size_t n_ops = 0;
  std::array<int, kMaxDepth> op_stack{};
  int depth = 0, overflow_depth = 0;
  std::atomic<int> cur_op{-1};
  std::atomic<int64_t> step_serial{0};
  std::atomic<int64_t> dropped{0}, unattributed{0};

  // Current step.
  Phase phase = Phase::Prefill;
  int64_t step = 0;
  int64_t step_t0 = 0;

  // Totals.
  int64_t steps_written = 0, ops_written = 0;
  RunTotals totals;
  std::vector<int> freq_cpus;
  std::string line_buf;

  // The thread's once-per-step frequency sample (per-step sources), at its first bracket of the
  // step or earlier while it waits (on_idle). freq_step is released after the sample: the caller
  // reads it at end_step.
  void maybe_sample_frequency(ThreadState& ts, int cpu) noexcept {
    // Acquire: pairs with begin_step's release, so the caller's reads of the previous step's
    // sample (end_step) happen before this thread overwrites it.
    const int64_t serial = step_serial.load(std::memory_order_acquire);
    if (ts.freq_from_counters || !freq || ts.freq_step.load(std::memory_order_relaxed) == serial) {
      return;
    }
    const int64_t t0 = now_ns();
    ts.step_mhz = static_cast<float>(freq->sample_mhz(cpu));
    ts.calibrate_ns = now_ns() - t0;
    ts.freq_step.store(serial, std::memory_order_release);
  }

  WorkerSlice* slice(int op, int worker) noexcept {
    return &slices[static_cast<size_t>(op) * static_cast<size_t>(n_slots) +
                   static_cast<size_t>(worker)];
  }

  void grow_buffers() {
    const size_t cap = std::max<size_t>(64, ops.size() * 2);
    ops.resize(cap);
    slices.resize(cap * static_cast<size_t>(n_slots));
    for (auto& h : parallel_hint) h.resize(cap, 0);
  }

  // Appends the closed ops (all but those still open, which a well-formed forward pass never
  // leaves across a step boundary) to line_buf; returns how many.
  size_t serialize_ops() {
    const size_t n = depth > 0 ? static_cast<size_t>(op_stack[0]) : n_ops;
    for (size_t k = 0; k < n; ++k) {
      append_op_line(
          line_buf, ops[k],
          std::span<const WorkerSlice>(slice(static_cast<int>(k), 0), static_cast<size_t>(n_slots)),
          registry->keys(), registry->frequency_keys());
    }
    ops_written += static_cast<int64_t>(n);
    return n;
  }

  // Drops the first n ops; ops still open move to the front. Only between parallel regions.
  void forget_ops(size_t n) noexcept {
    if (n == 0) return;
    const size_t rest = n_ops - n;
    const size_t per = static_cast<size_t>(n_slots);
    std::copy_n(ops.begin() + static_cast<std::ptrdiff_t>(n), rest, ops.begin());
    std::copy_n(slices.begin() + static_cast<std::ptrdiff_t>(n * per), rest * per, slices.begin());
    for (int d = 0; d < depth; ++d) op_stack[static_cast<size_t>(d)] -= static_cast<int>(n);
    cur_op.store(depth > 0 ? op_stack[static_cast<size_t>(depth - 1)] : -1,
                 std::memory_order_relaxed);
    n_ops = rest;
  }

  RunHeader::Frequency header_frequency() const;
  StepEnd read_step_end();
  StepRecord step_record(const StepInfo& info, const StepEnd& end, int64_t serialize_ns,
                         size_t ops_in_step);
};

RunHeader::Frequency Recorder::Impl::header_frequency() const {
  RunHeader::Frequency f;
  const bool any_thread = registry->size() > 0;
  if (!freq) {
    const bool ref = any_thread && registry->frequency_keys().ref_cycles >= 0;
    f.source = ref ? "cycles/ref-cycles" : "cycles/task-clock";
    f.detail = ref ? "per op per worker: cycles / ref_cycles x TSC MHz"
                   : "per op per worker: cycles / task_clock_ns";
    f.granularity = "per_op";
  } else {
    f.source = std::string(freq->name());
    f.detail = freq->detail();
    f.granularity = "per_step";
  }
  f.nominal_mhz = host.nominal_mhz.value_or(host.tsc_mhz);
  f.tsc_mhz = host.tsc_mhz;
  f.tsc_source = host.tsc_source;
  f.rejected = freq_rejected;
  return f;
}

StepEnd Recorder::Impl::read_step_end() {
  StepEnd e;
  e.t1 = now_ns();
  probes->end_process();
  for (ThreadState* ts : registry->threads()) {
    e.threads.emplace_back(ts->sched_reader->read(), hwcounters::thread_cpu_ns(ts->thread));
  }
  probes->end_host();
  return e;
}

StepRecord Recorder::Impl::step_record(const StepInfo& info, const StepEnd& end,
                                       int64_t serialize_ns, size_t ops_in_step) {
  StepRecord r;
  r.step = info.step;
  r.phase = info.phase;
  r.n_past = info.n_past;
  if (info.phase == Phase::Prefill || info.n_tokens != 1) {
    r.n_tokens = info.n_tokens;
  } else if (info.token >= 0) {
    r.token = info.token;
    r.piece = info.piece;
  }
  r.t0_ns = step_t0;
  r.t1_ns = end.t1;
  const int64_t dt = end.t1 - step_t0;
  r.tok_s = totals.add_step(info.phase, info.n_tokens, dt);

  // Per-worker frequency: counter-derived over this step's ops, else the step estimate.
  const FrequencyKeys& fkeys = registry->frequency_keys();
  const int64_t serial = step_serial.load(std::memory_order_relaxed);
  const std::span<ThreadState* const> all = registry->threads();
  for (size_t i = 0; i < all.size(); ++i) {
    ThreadState* ts = all[i];
    double mhz = NAN;
    if (ts->freq_from_counters) {
      WorkerSlice sum;
      bool any = false;
      for (size_t k = 0; k < ops_in_step; ++k) {
        if (ts->worker >= n_slots) break;
        const WorkerSlice& sl = *slice(static_cast<int>(k), ts->worker);
        if (sl.chunks == 0) continue;
        any = true;
        sum.present |= sl.present;
        for (int key : {fkeys.cycles, fkeys.ref_cycles, fkeys.task_clock}) {
          if (key >= 0)
            sum.counters[static_cast<size_t>(key)] += sl.counters[static_cast<size_t>(key)];
        }
      }
      if (any) mhz = slice_frequency_mhz(sum, fkeys);
    } else if (ts->freq_step.load(std::memory_order_acquire) == serial) {
      mhz = ts->step_mhz;
      r.calibrate_ns = std::max(r.calibrate_ns, ts->calibrate_ns);
    }
    if (std::isfinite(mhz)) r.freq.push_back({ts->worker, ts->last_cpu, mhz});
    if (i >= end.threads.size()) continue;  // attached after the step ended
    const auto& [now, cpu_ns] = end.threads[i];
    if (now.ok && ts->sched_begin.ok) {
      // On-CPU time from the thread's CPU clock (exact); schedstat's lags by up to a tick.
      const int64_t oncpu = cpu_ns >= 0 && ts->cpu_begin_ns >= 0
                                ? cpu_ns - ts->cpu_begin_ns
                                : now.oncpu_ns - ts->sched_begin.oncpu_ns;
      r.sched.push_back({ts->worker, ts->tid, now.runq_ns - ts->sched_begin.runq_ns, oncpu,
                         now.nvcsw - ts->sched_begin.nvcsw, now.nivcsw - ts->sched_begin.nivcsw});
    }
  }
  probes->finish(r, dt);
  r.ops = ops_in_step;
  r.serialize_ns = serialize_ns;
  return r;
}

Recorder::Recorder() = default;

Recorder::Recorder(const RecorderOptions& opts) {
  if (opts.events_path.empty()) return;
  auto im = std::make_unique<Impl>();
  im->opts = opts;
  im->n_slots = std::max(1, opts.workers);
  im->writer = std::make_unique<EventLogWriter>(opts.events_path);
  im->host = hwcounters::collect_host_facts();
  im->tsc_mhz = im->host.tsc_mhz;
  im->registry = std::make_unique<ThreadRegistry>(im->opts, im->tsc_mhz);
  im->grow_buffers();
  // The constructing thread is the executor's slot 0 (it also runs the serial ops).
  ThreadState* main = im->registry->attach(0);
  if (main) im->counter_status = main->set.status();
  {
    if (!main || !main->freq_from_counters) {
      if (opts.frequency_source) {
        im->freq = opts.frequency_source;
      } else {
        hwcounters::FrequencyChoice c = hwcounters::choose_frequency_source(im->tsc_mhz);
        im->freq = std::move(c.source);
        im->freq_rejected = std::move(c.rejected);
      }
    }
  }
  im->probes = std::make_unique<StepProbes>(im->host.online_cpus, opts.probe_energy);
  impl_ = std::move(im);
  enabled_ = true;
}

Recorder::~Recorder() = default;

void Recorder::attach_current_thread(int worker) noexcept {
  if (enabled_) impl_->registry->lookup(worker);
}

void Recorder::write_header(const nlohmann::json& fields) {
  if (!enabled_) return;
  Impl& im = *impl_;
  RunHeader h;
  h.time_utc = utc_now();
  h.caller_fields = &fields;
  h.host = im.host;
  h.counters = im.counter_status;
  h.sched_per_op = im.opts.sched_per_op;
  h.frequency = im.header_frequency();
  im.probes->describe(h);
  if (ThreadState* ts = im.registry->find_current(); ts && ts->n_sources > 0) {
    h.bracket_ns = measure_bracket_ns(*ts);
  }

  // Frequency before the run, on the run's CPUs (or every allowed CPU when unpinned).
  im.freq_cpus.clear();
  namespace key = eventlog::header_key;
  const std::string_view cpus_key = eventlog::run_key::kCpus;
  if (fields.is_object() && fields.contains(key::kRun) && fields[key::kRun].is_object() &&
      fields[key::kRun].contains(cpus_key) && fields[key::kRun][cpus_key].is_array()) {
    for (const auto& c : fields[key::kRun][cpus_key]) {
      if (c.is_number_integer()) im.freq_cpus.push_back(c.get<int>());
    }
  }
  if (im.freq_cpus.empty()) im.freq_cpus = im.host.allowed_cpus;
  if (im.opts.measure_freq_before_after) {
    h.freq_before_mhz = measure_per_cpu_mhz(im.freq_cpus);
    h.freq_cpus = im.freq_cpus;
  }
  im.writer->write_json(header_json(h));
  im.writer->flush();
}

void Recorder::begin_step(Phase phase, int64_t step) {
  if (!enabled_) return;
  Impl& im = *impl_;
  im.phase = phase;
  im.step = step;
  im.step_serial.fetch_add(1, std::memory_order_release);
  // Thermal throttle counts on the CPUs the workers last ran on (else the run's CPUs).
  std::vector<int> throttle_cpus;
  if (im.probes->has_throttle_counters()) {
    for (ThreadState* ts : im.registry->threads()) {
      if (ts->last_cpu >= 0) throttle_cpus.push_back(ts->last_cpu);
    }
    if (throttle_cpus.empty()) throttle_cpus = im.freq_cpus;
  }
  im.probes->begin_slow(std::move(throttle_cpus));
  // Last, fastest nearest to t0, so the windows they cover are the step's own (/proc/stat
  // alone takes tens of microseconds).
  im.probes->begin_host();
  for (ThreadState* ts : im.registry->threads()) {
    ts->sched_begin = ts->sched_reader->read();
    ts->cpu_begin_ns = hwcounters::thread_cpu_ns(ts->thread);
  }
  im.probes->begin_process();
  im.step_t0 = now_ns();
}

void Recorder::end_step(const StepInfo& info) {
  if (!enabled_) return;
  Impl& im = *impl_;
  const StepEnd end = im.read_step_end();
  const int64_t ser0 = now_ns();
  im.line_buf.clear();
  const size_t written = im.serialize_ops();
  const int64_t serialize_ns = now_ns() - ser0;
  const json s = step_json(im.step_record(info, end, serialize_ns, written));
  im.forget_ops(written);
  im.writer->write_raw(im.line_buf);
  im.writer->write_json(s);
  im.writer->flush();
  ++im.steps_written;
}

void Recorder::write_footer(const nlohmann::json& fields) {
  if (!enabled_) return;
  Impl& im = *impl_;
  im.line_buf.clear();
  im.forget_ops(im.serialize_ops());  // ops recorded after the last step (detokenize, ...)
  im.writer->write_raw(im.line_buf);
  FooterRecord f;
  f.caller_fields = &fields;
  f.steps = im.steps_written;
  f.decode_tok_s = im.totals.decode_tok_s();
  f.prefill_tok_s = im.totals.prefill_tok_s();
  const bool caller_has_freq_after =
      fields.is_object() && fields.contains(eventlog::footer_key::kFreqAfterMhz);
  if (im.opts.measure_freq_before_after && !caller_has_freq_after) {
    f.freq_after_mhz = measure_per_cpu_mhz(im.freq_cpus);
  }
  f.recorder.ops = im.ops_written;
  f.recorder.dropped_slices = im.dropped.load();
  f.recorder.unattributed_chunks = im.unattributed.load();
  f.recorder.threads = im.registry->size();
  for (ThreadState* ts : im.registry->threads()) f.recorder.runq_reads += ts->runq_reads;
  f.recorder.bytes = im.writer->bytes_written();
  im.writer->write_json(footer_json(f));
  im.writer->flush();
}

void Recorder::open_op(const OpInfo& info) noexcept {
  Impl& im = *impl_;
  if (im.depth >= kMaxDepth) {
    ++im.overflow_depth;
    return;
  }
  if (im.n_ops >= im.ops.size()) {
    try {
      im.grow_buffers();
    } catch (...) {
      ++im.overflow_depth;  // no memory: this op goes unrecorded
      return;
    }
  }
  const size_t idx = im.n_ops++;
  OpRecord& r = im.ops[idx];
  const size_t len = std::min(info.name.size(), r.name.size() - 1);
  std::memcpy(r.name.data(), info.name.data(), len);
  r.name[len] = '\0';
  r.layer = info.layer;
  r.kind = info.kind;
  r.phase = op_phase(info, im.phase);
  r.wtype = info.wtype;
  r.rows = info.rows;
  r.cols = info.cols;
  r.tokens = info.tokens;
  r.weight_bytes = info.weight_bytes;
  r.kv_bytes = info.kv_bytes;
  r.attention_flops = info.attention_flops;
  r.step = im.step;
  std::fill_n(im.slice(static_cast<int>(idx), 0), im.n_slots, WorkerSlice{});
  const int d = im.depth++;
  im.op_stack[static_cast<size_t>(d)] = static_cast<int>(idx);
  im.cur_op.store(static_cast<int>(idx), std::memory_order_relaxed);

  ThreadState* ts = im.registry->lookup(0);
  // Ops that ran on the executor last time will bracket their own chunks: skip the serial read.
  const bool predicted_parallel = im.parallel_hint[static_cast<size_t>(r.phase)][idx] != 0;
  if (ts) {
    const int cpu = sched_getcpu();
    ts->last_cpu = cpu;
    ts->serial_cpu[static_cast<size_t>(d)] = cpu;
    ts->serial_taken[static_cast<size_t>(d)] = !predicted_parallel;
    im.maybe_sample_frequency(*ts, cpu);
  }
  r.t0_ns = now_ns();
  if (ts && !predicted_parallel) {
    Readings& begin = ts->serial_begin[static_cast<size_t>(d)];
    const uint32_t ok = begin_reading(*ts, begin, r.t0_ns, im.opts.reuse_reading_ns);
    ts->serial_ok[static_cast<size_t>(d)] = ok;
    ts->serial_runq[static_cast<size_t>(d)] = runq_now(*ts, begin, ok);
  }
}

void Recorder::close_op() noexcept {
  Impl& im = *impl_;
  if (im.overflow_depth > 0) {
    --im.overflow_depth;
    return;
  }
  if (im.depth == 0) return;
  const int d = --im.depth;
  const int idx = im.op_stack[static_cast<size_t>(d)];
  OpRecord& r = im.ops[static_cast<size_t>(idx)];
  bool had_chunks = false;
  for (int w = 0; w < im.n_slots; ++w) had_chunks = had_chunks || im.slice(idx, w)->chunks > 0;
  if (had_chunks) {
    r.t1_ns = now_ns();
  } else {
    // A serial op: the calling thread (slot 0) did the work between open and close.
    ThreadState* ts = im.registry->lookup(0);
    WorkerSlice& s = *im.slice(idx, 0);
    uint32_t ok = 0;
    const bool taken = ts && ts->serial_taken[static_cast<size_t>(d)];
    int64_t runq = -1;
    if (taken) {
      ok = read_sources(*ts, ts->chunk_end);
      runq = runq_now(*ts, ts->chunk_end, ok);
    }
    r.t1_ns = now_ns();
    if (taken) note_end_reading(*ts, ts->chunk_end, ok, r.t1_ns);
    s.chunks = 1;
    s.t0_ns = r.t0_ns;
    s.t1_ns = r.t1_ns;
    s.cpu = ts ? ts->serial_cpu[static_cast<size_t>(d)] : -1;
    s.cpu_end = sched_getcpu();
    if (ts) s.freq_mhz = ts->step_mhz;
    if (taken) {
      accumulate(*ts, ts->serial_begin[static_cast<size_t>(d)],
                 ts->serial_ok[static_cast<size_t>(d)], ts->chunk_end, ok, s);
      add_runq(ts->serial_runq[static_cast<size_t>(d)], runq, s);
    }
  }
  im.parallel_hint[static_cast<size_t>(r.phase)][static_cast<size_t>(idx)] = had_chunks ? 1 : 0;
  im.cur_op.store(d > 0 ? im.op_stack[static_cast<size_t>(d - 1)] : -1, std::memory_order_relaxed);
}

void Recorder::on_chunk_begin(int worker) noexcept {
  if (!enabled_) return;
  Impl& im = *impl_;
  ThreadState* ts = im.registry->lookup(worker);
  if (!ts) return;
  const int cpu = sched_getcpu();
  im.maybe_sample_frequency(*ts, cpu);
  ts->chunk_cpu = cpu;
  ts->last_cpu = cpu;
  ts->chunk_t0 = now_ns();
  ts->chunk_ok = begin_reading(*ts, ts->chunk_begin, ts->chunk_t0, im.opts.reuse_reading_ns);
  ts->chunk_runq = runq_now(*ts, ts->chunk_begin, ts->chunk_ok);
}

void Recorder::on_idle(int /*worker*/) noexcept {
  if (!enabled_) return;
  // Only a thread already attached (at its first chunk): attaching opens counters, and lookup()
  // would write the slot the caller reads at end_step.
  ThreadState* ts = impl_->registry->find_current();
  if (ts) impl_->maybe_sample_frequency(*ts, sched_getcpu());
}

void Recorder::on_chunk_end(int worker) noexcept {
  if (!enabled_) return;
  Impl& im = *impl_;
  ThreadState* ts = im.registry->lookup(worker);
  if (!ts) return;
  const uint32_t ok = read_sources(*ts, ts->chunk_end);
  const int64_t runq = runq_now(*ts, ts->chunk_end, ok);
  const int64_t t1 = now_ns();
  note_end_reading(*ts, ts->chunk_end, ok, t1);
  const int cpu = sched_getcpu();
  const int op = im.cur_op.load(std::memory_order_relaxed);
  if (op < 0) {
    im.unattributed.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (worker < 0 || worker >= im.n_slots) {
    im.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  WorkerSlice& s = *im.slice(op, worker);
  if (s.chunks == 0) {
    s.t0_ns = ts->chunk_t0;
    s.cpu = ts->chunk_cpu;
  }
  s.t1_ns = t1;
  s.cpu_end = cpu;
  ++s.chunks;
  s.freq_mhz = ts->step_mhz;
  accumulate(*ts, ts->chunk_begin, ts->chunk_ok, ts->chunk_end, ok, s);
  add_runq(ts->chunk_runq, runq, s);
}

}  // namespace pacer::runtime
