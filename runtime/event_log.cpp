#include "runtime/event_log.h"

#include <cerrno>
#include <cstring>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace pacer::runtime {

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
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

void append_op_line(std::string& out, const OpRecord& op, std::span<const WorkerSlice> slices,
                    std::span<const std::string> counter_keys, const FrequencyKeys& fk) {
  auto it = std::back_inserter(out);
  const std::string_view name(op.name.data(), strnlen(op.name.data(), op.name.size()));
  fmt::format_to(it, R"({{"type":"op","step":{},"phase":"{}","name":)", op.step,
                 phase_name(op.phase));
  append_json_string(out, name);
  fmt::format_to(it, R"(,"layer":{},"kind":"{}")", op.layer, op_kind_name(op.kind));
  if (op.kind == OpKind::Matmul) {
    fmt::format_to(it, R"(,"wtype":"{}","rows":{},"cols":{},"tokens":{})",
                   ops::type_name(op.wtype), op.rows, op.cols, op.tokens);
  }
  if (op.kind == OpKind::Matmul || op.weight_bytes > 0) {
    fmt::format_to(it, R"(,"weight_bytes":{})", op.weight_bytes);
  }
  fmt::format_to(it, R"(,"t0_ns":{},"t1_ns":{},"workers":[)", op.t0_ns, op.t1_ns);
  bool first = true;
  for (size_t w = 0; w < slices.size(); ++w) {
    const WorkerSlice& s = slices[w];
    if (s.chunks == 0) continue;
    if (!first) out.push_back(',');
    first = false;
    fmt::format_to(it, R"({{"w":{},"cpu":{},"cpu_end":{},"t0_ns":{},"t1_ns":{})", w, s.cpu,
                   s.cpu_end, s.t0_ns, s.t1_ns);
    if (s.chunks > 1) fmt::format_to(it, R"(,"chunks":{})", s.chunks);
    const double mhz = slice_frequency_mhz(s, fk);
    if (std::isfinite(mhz) && mhz > 0) fmt::format_to(it, R"(,"freq_mhz":{:.1f})", mhz);
    if (s.runq_ns >= 0) fmt::format_to(it, R"(,"runq_ns":{})", s.runq_ns);
    if (s.oncpu_ns >= 0) fmt::format_to(it, R"(,"oncpu_ns":{})", s.oncpu_ns);
    if (s.present != 0) {
      out += R"(,"counters":{)";
      bool first_key = true;
      for (size_t k = 0; k < counter_keys.size() && k < kMaxCounterKeys; ++k) {
        if (!(s.present >> k & 1u)) continue;
        if (!first_key) out.push_back(',');
        first_key = false;
        append_json_string(out, counter_keys[k]);
        fmt::format_to(it, ":{}", s.counters[k]);
      }
      if (s.mux < 1.0f) fmt::format_to(it, R"(,"mux":{:.4f})", s.mux);
      out.push_back('}');
    }
    out.push_back('}');
  }
  out += "]}\n";
}

EventLogWriter::EventLogWriter(std::string path) : path_(std::move(path)) {
  file_ = std::fopen(path_.c_str(), "w");
  if (!file_) {
    throw std::runtime_error(
        fmt::format("events file '{}': cannot open for writing: {}", path_, std::strerror(errno)));
  }
  // A step's lines are written in one go; a large buffer keeps that to one write(2).
  std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
}

EventLogWriter::~EventLogWriter() {
  if (file_) std::fclose(file_);
}

void EventLogWriter::write_json(const nlohmann::json& line) {
  std::string s = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  s.push_back('\n');
  write_raw(s);
}

void EventLogWriter::write_raw(std::string_view lines) {
  if (lines.empty()) return;
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
