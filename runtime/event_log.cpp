#include "runtime/event_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <ctime>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hwcounters/event_table.h"
#include "hwcounters/frequency.h"
#include "pacer/version.h"

namespace pacer::runtime {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json nan_to_null(double v) {
  return std::isfinite(v) ? nlohmann::json(std::round(v * 10) / 10) : nlohmann::json();
}

nlohmann::json header_json(const RunHeader& r) {
  namespace key = eventlog::header_key;
  namespace fkey = eventlog::frequency_key;
  namespace tkey = eventlog::thermal_key;
  namespace ckey = eventlog::cgroup_key;
  using nlohmann::json;
  json h = {{eventlog::record::kType, eventlog::record::kHeader},
            {key::kSchema, eventlog::kSchemaVersion},
            {key::kPacerVersion, kVersion},
            {key::kGitSha, kGitSha},
            {key::kTimeUtc, r.time_utc}};
  json host = host_json(r.host);
  if (r.caller_fields && r.caller_fields->is_object()) {
    for (const auto& [k, v] : r.caller_fields->items()) {
      if (k == key::kHost && v.is_object()) {
        for (const auto& [hk, hv] : v.items()) host[hk] = hv;
      } else {
        h[k] = v;
      }
    }
  }
  h[key::kHost] = std::move(host);
  h[key::kCounters] = counters_json(r.counters, r.sched_per_op);
  if (r.bracket_ns) h[key::kCounters][eventlog::counters_key::kBracketNs] = *r.bracket_ns;

  const RunHeader::Frequency& fr = r.frequency;
  json rejected = json::array();
  for (const auto& u : fr.rejected)
    rejected.push_back({{fkey::kSource, u.event}, {fkey::kReason, u.reason}});
  h[key::kFrequency] = {{fkey::kSource, fr.source},
                        {fkey::kDetail, fr.detail},
                        {fkey::kGranularity, fr.granularity},
                        {fkey::kNominalMhz, fr.nominal_mhz},
                        {fkey::kTscMhz, std::round(fr.tsc_mhz * 1000) / 1000},
                        {fkey::kTscSource, fr.tsc_source},
                        {fkey::kRejected, std::move(rejected)}};

  const RunHeader::Thermal& th = r.thermal;
  json& thermal =
      h[key::kThermal] = {{tkey::kThrottleCounters, th.throttle_counters ? "present" : "absent"},
                          {tkey::kRapl, th.rapl.empty() ? std::string("absent") : th.rapl}};
  if (!th.throttle_counters) thermal[tkey::kThrottleReason] = th.throttle_reason;
  if (th.rapl.empty()) thermal[tkey::kRaplReason] = th.rapl_reason;
  if (r.cgroup) {
    const RunHeader::Cgroup& c = *r.cgroup;
    h[key::kCgroup] = {{ckey::kVersion, c.version},          {ckey::kPath, c.path},
                       {ckey::kQuotaUs, c.quota_us},         {ckey::kPeriodUs, c.period_us},
                       {ckey::kQuotaCpus, c.quota_cpus},     {ckey::kNrPeriods, c.nr_periods},
                       {ckey::kNrThrottled, c.nr_throttled}, {ckey::kThrottledNs, c.throttled_ns}};
  } else {
    h[key::kCgroup] = {{ckey::kReason, r.cgroup_reason}};
  }
  if (!h.contains(key::kBandwidthGbs)) h[key::kBandwidthGbs] = nullptr;
  if (!h.contains(key::kFmaGflops)) h[key::kFmaGflops] = nullptr;
  if (r.freq_before_mhz) {
    json before = json::array();
    for (const double mhz : *r.freq_before_mhz) before.push_back(nan_to_null(mhz));
    h[key::kFreqBeforeMhz] = std::move(before);
    h[key::kFreqCpus] = r.freq_cpus;
    h[key::kFreqBeforeSource] = "calibrated_loop";
  }
  h[key::kDerivedMetrics] = derived_metrics_json();
  return h;
}

nlohmann::json host_json(const hwcounters::HostFacts& h) {
  namespace key = eventlog::host_key;
  using nlohmann::json;
  return {{key::kHostname, h.hostname},
          {key::kCpuModel, h.cpu_model},
          {key::kMicrocode, h.microcode},
          {key::kCpuSignature, h.cpu_signature},
          {key::kKernel, h.kernel},
          {key::kGovernor, h.governor ? json(*h.governor) : json()},
          {key::kSmt, h.smt ? json(*h.smt) : json()},
          {key::kVirtualized, h.virtualized},
          {key::kHypervisor, h.hypervisor},
          {key::kTscMhz, std::round(h.tsc_mhz * 1000) / 1000},
          {key::kOnlineCpus, h.online_cpus},
          {key::kAllowedCpus, h.allowed_cpus},
          {key::kPerfEventParanoid, h.perf_event_paranoid ? json(*h.perf_event_paranoid) : json()}};
}

nlohmann::json counters_json(const hwcounters::CounterSetStatus& st, bool sched_per_op) {
  namespace key = eventlog::counters_key;
  nlohmann::json unavailable = nlohmann::json::array();
  for (const auto& u : st.unavailable) {
    unavailable.push_back({{key::kEvent, u.event}, {key::kReason, u.reason}});
  }
  const bool runq_live =
      std::find(st.live.begin(), st.live.end(), eventlog::counter_key::kRunqNs) != st.live.end();
  return {{key::kMode, st.mode},
          {key::kLive, st.live},
          {key::kUnavailable, unavailable},
          {key::kRead, st.read},
          {key::kScope, st.kernel_mode ? "user+kernel" : "user"},
          {key::kSoftwareScope, st.software_kernel_mode ? "user+kernel" : "user"},
          {key::kRunq, sched_per_op && runq_live ? "per_op" : "per_step"}};
}

nlohmann::json derived_metrics_json() {
  nlohmann::json metrics = nlohmann::json::array();
  for (const auto& m : hwcounters::derived_metrics()) {
    metrics.push_back({{"name", m.name}, {"formula", m.formula}, {"caveat", m.caveat}});
  }
  return metrics;
}

nlohmann::json footer_json(const FooterRecord& r) {
  namespace key = eventlog::footer_key;
  using nlohmann::json;
  json f = {{eventlog::record::kType, eventlog::record::kFooter}, {key::kSteps, r.steps}};
  if (r.decode_tok_s) f[key::kDecodeTokS] = *r.decode_tok_s;
  if (r.prefill_tok_s) f[key::kPrefillTokS] = *r.prefill_tok_s;
  if (r.caller_fields && r.caller_fields->is_object()) {
    for (const auto& [k, v] : r.caller_fields->items()) f[k] = v;
  }
  if (r.freq_after_mhz && !f.contains(key::kFreqAfterMhz)) {
    json after = json::array();
    for (const double mhz : *r.freq_after_mhz) after.push_back(nan_to_null(mhz));
    f[key::kFreqAfterMhz] = std::move(after);
  }
  const FooterRecord::RecorderCounts& c = r.recorder;
  namespace rkey = eventlog::footer_recorder_key;
  f[key::kRecorder] = {{rkey::kOps, c.ops},
                       {rkey::kDroppedSlices, c.dropped_slices},
                       {rkey::kUnattributedChunks, c.unattributed_chunks},
                       {rkey::kThreads, c.threads},
                       {rkey::kRunqReads, c.runq_reads},
                       {rkey::kBytes, c.bytes}};
  return f;
}

std::vector<double> measure_per_cpu_mhz(const std::vector<int>& cpus) {
  std::vector<double> mhz;
  mhz.reserve(cpus.size());
  for (int cpu : cpus) mhz.push_back(hwcounters::measure_cpu_mhz(cpu));
  return mhz;
}

nlohmann::json step_json(const StepRecord& r) {
  namespace key = eventlog::step_key;
  using nlohmann::json;
  json s = {{eventlog::record::kType, eventlog::record::kStep},
            {key::kStep, r.step},
            {key::kPhase, phase_name(r.phase)},
            {key::kNPast, r.n_past}};
  if (r.n_tokens) {
    s[key::kNTokens] = *r.n_tokens;
  } else if (r.token) {
    s[key::kToken] = *r.token;
    s[key::kPiece] = r.piece;
  }
  const int64_t dt = r.t1_ns - r.t0_ns;
  s[key::kT0Ns] = r.t0_ns;
  s[key::kT1Ns] = r.t1_ns;
  s[key::kStepMs] = static_cast<double>(dt) / 1e6;
  if (r.tok_s) s[key::kTokS] = *r.tok_s;
  json freq = json::array();
  for (const StepRecord::Freq& f : r.freq) {
    freq.push_back({{key::kWorker, f.worker}, {key::kCpu, f.cpu}, {key::kMhz, nan_to_null(f.mhz)}});
  }
  s[key::kFreq] = std::move(freq);
  if (!r.sched.empty()) {
    json workers = json::array();
    int64_t runq = 0, oncpu = 0, nvcsw = 0, nivcsw = 0;
    for (const StepRecord::SchedWorker& w : r.sched) {
      workers.push_back({{key::kWorker, w.worker},
                         {key::kTid, w.tid},
                         {key::kRunqNs, w.runq_ns},
                         {key::kOncpuNs, w.oncpu_ns},
                         {key::kNvcsw, w.nvcsw},
                         {key::kNivcsw, w.nivcsw}});
      runq += w.runq_ns;
      oncpu += w.oncpu_ns;
      nvcsw += w.nvcsw;
      nivcsw += w.nivcsw;
    }
    s[key::kSched] = {{key::kRunqNs, runq},
                      {key::kOncpuNs, oncpu},
                      {key::kNvcsw, nvcsw},
                      {key::kNivcsw, nivcsw},
                      {key::kSchedWorkers, std::move(workers)}};
  }
  // CPUs busy to 0.001 CPU: /proc/stat ticks are coarser than that anyway.
  if (r.process_cpu_usage) {
    s[key::kProcessCpuUsage] = std::round(*r.process_cpu_usage * 1000) / 1000;
  }
  if (r.host_cpu_usage) s[key::kHostCpuUsage] = std::round(*r.host_cpu_usage * 1000) / 1000;
  if (r.steal_ms) s[key::kStealMs] = *r.steal_ms;
  if (r.steal_cpus_ms) {
    nlohmann::json cpus = nlohmann::json::array();
    for (const auto& [cpu, ms] : *r.steal_cpus_ms)
      cpus.push_back({{key::kCpu, cpu}, {key::kMs, ms}});
    s[key::kStealCpus] = std::move(cpus);
  }
  if (r.energy_j) s[key::kEnergyJ] = *r.energy_j;
  if (r.power_w) s[key::kPowerW] = *r.power_w;
  if (r.cgroup) {
    s[key::kCgroup] = {{key::kNrPeriods, r.cgroup->nr_periods},
                       {key::kNrThrottled, r.cgroup->nr_throttled},
                       {key::kThrottledNs, r.cgroup->throttled_ns}};
  }
  if (r.throttle) {
    s[key::kThrottle] = {{key::kThrottleCore, r.throttle->core},
                         {key::kThrottlePackage, r.throttle->package}};
  }
  namespace rkey = eventlog::step_recorder_key;
  s[key::kRecorder] = {{rkey::kOps, r.ops},
                       {rkey::kSerializeUs, static_cast<double>(r.serialize_ns) / 1e3},
                       {rkey::kCalibrateUs, static_cast<double>(r.calibrate_ns) / 1e3}};
  return s;
}

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

double slice_frequency_mhz(const WorkerSlice& s, const FrequencyKeys& fk) noexcept {
  auto has = [&](int k) { return k >= 0 && (s.present >> k & 1u); };
  if (has(fk.cycles) && has(fk.ref_cycles) && s.counters[fk.ref_cycles] > 0 && fk.tsc_mhz > 0) {
    return static_cast<double>(s.counters[fk.cycles]) /
           static_cast<double>(s.counters[fk.ref_cycles]) * fk.tsc_mhz;
  }
  if (has(fk.cycles) && has(fk.task_clock) && s.counters[fk.task_clock] > 0) {
    return static_cast<double>(s.counters[fk.cycles]) /
           static_cast<double>(s.counters[fk.task_clock]) * 1000.0;
  }
  return s.freq_mhz;
}

namespace {

// Writes into a buffer sized beforehand: literals, integers and fixed-point numbers without
// format-string parsing (fmt::format_to cost ~4x more per op line; this runs for every op of
// every step on the step's critical path).
// `,"key":` (or `"key":` when first) as a fixed array, built at compile time.
template <const std::string_view& Key, bool First>
constexpr auto key_text() {
  std::array<char, Key.size() + (First ? 3 : 4)> text{};
  size_t i = 0;
  if (!First) text[i++] = ',';
  text[i++] = '"';
  for (const char c : Key) text[i++] = c;
  text[i++] = '"';
  text[i++] = ':';
  return text;
}

class LineWriter {
 public:
  explicit LineWriter(char* p) : p_(p) {}
  template <size_t N>
  void lit(const char (&s)[N]) {
    std::memcpy(p_, s, N - 1);
    p_ += N - 1;
  }
  void str(std::string_view s) {
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void ch(char c) { *p_++ = c; }
  // A schema name (eventlog/schema.h: plain ASCII, nothing to escape) in quotes.
  void quoted(std::string_view s) {
    ch('"');
    str(s);
    ch('"');
  }
  // `"key":` opening an object (First) or `,"key":` after a member, for a schema key known at
  // compile time: one fixed-size copy, as cheap as a string literal.
  template <const std::string_view& Key, bool First = false>
  void key() {
    static constexpr auto text = key_text<Key, First>();
    std::memcpy(p_, text.data(), text.size());
    p_ += text.size();
  }
  template <typename Int>
  void num(Int v) {
    p_ = std::to_chars(p_, p_ + 24, v).ptr;
  }
  void fixed(double v, int decimals) {
    p_ = std::to_chars(p_, p_ + 48, v, std::chars_format::fixed, decimals).ptr;
  }
  // A JSON string whose characters need no escaping (checked by the caller) or escaped here.
  void json_str(std::string_view s) {
    bool plain = true;
    for (const char c : s)
      plain = plain && c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20;
    if (plain) {
      ch('"');
      str(s);
      ch('"');
    } else {
      std::string tmp;
      append_json_string(tmp, s);
      str(tmp);
    }
  }
  char* end() const { return p_; }

 private:
  char* p_;
};

// Bytes an op line can take: fixed fields plus, per worker, fixed fields and every counter key
// (escaping can at most sextuple a key: \u00XX).
size_t op_line_bound(std::string_view name, size_t workers, std::span<const std::string> keys) {
  size_t keys_bytes = 0;
  for (const std::string& k : keys) keys_bytes += 6 * k.size() + 32;
  return 512 + 6 * name.size() + workers * (320 + keys_bytes);
}

}  // namespace

void append_op_line(std::string& out, const OpRecord& op, std::span<const WorkerSlice> slices,
                    std::span<const std::string> counter_keys, const FrequencyKeys& fk) {
  const std::string_view name(op.name.data(), strnlen(op.name.data(), op.name.size()));
  size_t active = 0;
  for (const WorkerSlice& s : slices) active += s.chunks > 0 ? 1 : 0;
  const size_t start = out.size();
  out.resize(start + op_line_bound(name, active, counter_keys));
  LineWriter w(out.data() + start);
  namespace key = eventlog::op_key;
  w.ch('{');
  w.key<eventlog::record::kType, true>();
  w.quoted(eventlog::record::kOp);
  w.key<key::kStep>();
  w.num(op.step);
  w.key<key::kPhase>();
  w.quoted(phase_name(op.phase));
  w.key<key::kName>();
  w.json_str(name);
  w.key<key::kLayer>();
  w.num(op.layer);
  w.key<key::kKind>();
  w.quoted(op_kind_name(op.kind));
  if (op.kind == OpKind::Matmul) {
    w.key<key::kWtype>();
    w.quoted(ops::type_name(op.wtype));
    w.key<key::kRows>();
    w.num(op.rows);
    w.key<key::kCols>();
    w.num(op.cols);
    w.key<key::kTokens>();
    w.num(op.tokens);
  }
  if (op.kind == OpKind::Matmul || op.weight_bytes > 0) {
    w.key<key::kWeightBytes>();
    w.num(op.weight_bytes);
  }
  if (op.kv_bytes > 0) {
    w.key<key::kKvBytes>();
    w.num(op.kv_bytes);
  }
  if (op.attention_flops > 0) {
    w.key<key::kAttentionFlops>();
    w.num(op.attention_flops);
  }
  w.key<key::kT0Ns>();
  w.num(op.t0_ns);
  w.key<key::kT1Ns>();
  w.num(op.t1_ns);
  w.key<key::kWorkers>();
  w.ch('[');
  bool first = true;
  for (size_t i = 0; i < slices.size(); ++i) {
    const WorkerSlice& s = slices[i];
    if (s.chunks == 0) continue;
    if (!first) w.ch(',');
    first = false;
    w.ch('{');
    w.key<key::kWorker, true>();
    w.num(i);
    w.key<key::kCpu>();
    w.num(s.cpu);
    w.key<key::kCpuEnd>();
    w.num(s.cpu_end);
    w.key<key::kT0Ns>();
    w.num(s.t0_ns);
    w.key<key::kT1Ns>();
    w.num(s.t1_ns);
    if (s.chunks > 1) {
      w.key<key::kChunks>();
      w.num(s.chunks);
    }
    const double mhz = slice_frequency_mhz(s, fk);
    if (std::isfinite(mhz) && mhz > 0) {
      w.key<key::kFreqMhz>();
      w.fixed(mhz, 1);
    }
    if (s.runq_ns >= 0) {
      w.key<key::kRunqNs>();
      w.num(s.runq_ns);
    }
    if (s.oncpu_ns >= 0) {
      w.key<key::kOncpuNs>();
      w.num(s.oncpu_ns);
    }
    if (s.present != 0) {
      w.key<key::kCounters>();
      w.ch('{');
      bool first_key = true;
      for (size_t k = 0; k < counter_keys.size() && k < kMaxCounterKeys; ++k) {
        if (!(s.present >> k & 1u)) continue;
        if (!first_key) w.ch(',');
        first_key = false;
        w.json_str(counter_keys[k]);
        w.ch(':');
        w.num(s.counters[k]);
      }
      if (s.mux < 1.0f) {
        w.key<eventlog::counter_key::kMux>();
        w.fixed(s.mux, 4);
      }
      w.ch('}');
    }
    w.ch('}');
  }
  w.ch(']');
  w.ch('}');
  w.ch('\n');
  out.resize(static_cast<size_t>(w.end() - out.data()));
}

EventLogWriter::EventLogWriter(std::string path) : path_(std::move(path)) {
  // Opened (so a bad path fails before the run) but not truncated: an existing log is replaced
  // only when the first line is written, so a run that fails before recording keeps it.
  struct stat st {};
  const bool existed = ::stat(path_.c_str(), &st) == 0;
  if (existed && S_ISDIR(st.st_mode)) {
    throw std::runtime_error(fmt::format("events file '{}': is a directory", path_));
  }
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || !(file_ = ::fdopen(fd, "w"))) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    throw std::runtime_error(
        fmt::format("events file '{}': cannot open for writing: {}", path_, std::strerror(err)));
  }
  created_ = !existed;
  regular_ = !existed || S_ISREG(st.st_mode);
  // A step's lines are written in one go; a large buffer keeps that to one write(2).
  std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
}

EventLogWriter::~EventLogWriter() {
  if (file_) std::fclose(file_);
  if (bytes_ == 0 && created_) ::unlink(path_.c_str());  // nothing recorded: leave no empty file
}

void EventLogWriter::write_json(const nlohmann::json& line) {
  std::string s = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  s.push_back('\n');
  write_raw(s);
}

void EventLogWriter::write_raw(std::string_view lines) {
  if (lines.empty()) return;
  if (bytes_ == 0 && regular_ && !created_ && ::ftruncate(::fileno(file_), 0) != 0) {
    throw std::runtime_error(
        fmt::format("events file '{}': cannot truncate: {}", path_, std::strerror(errno)));
  }
  if (std::fwrite(lines.data(), 1, lines.size(), file_) != lines.size()) {
    throw std::runtime_error(
        fmt::format("events file '{}': write failed: {}", path_, std::strerror(errno)));
  }
  bytes_ += static_cast<int64_t>(lines.size());
}

void EventLogWriter::flush() {
  if (std::fflush(file_) != 0) {
    throw std::runtime_error(
        fmt::format("events file '{}': flush failed: {}", path_, std::strerror(errno)));
  }
}

}  // namespace pacer::runtime
