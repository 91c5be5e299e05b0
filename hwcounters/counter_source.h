#pragma once
// The one interface every per-thread counter source implements (LIKWID style: one module per
// source, the same small surface). A source is opened on, and read from, the thread it measures;
// it never throws after construction and reports what it could not count instead of aborting.
//
//   auto src = PerfGroupSource::open_for_calling_thread("perf_software", software_events());
//   Reading a, b;
//   src->read(a); work(); src->read(b);
//   for (size_t i = 0; i < src->keys().size(); ++i) delta(a, b, i);  // mux-scaled
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pacer::hwcounters {

// Events one source can hold (a perf group larger than this is split by the caller).
inline constexpr int kMaxEventsPerSource = 12;

// Cumulative values since the source was opened, plus the group's enabled/running times. When a
// hardware group is multiplexed, time_running < time_enabled and counts must be scaled.
struct Reading {
  uint64_t time_enabled_ns = 0;
  uint64_t time_running_ns = 0;
  std::array<uint64_t, kMaxEventsPerSource> values{};
};

// An event the source was asked for but does not count, and why ("unsupported: <reason>").
struct Unavailable {
  std::string event;
  std::string reason;
};

class CounterSource {
 public:
  virtual ~CounterSource() = default;
  // Which module this is: "perf_hardware", "perf_software", "thread_clock", "schedstat", ...
  virtual std::string_view name() const noexcept = 0;
  // How a read gets its values: "rdpmc", "read()", "clock_gettime", "pread(schedstat)".
  virtual std::string_view read_method() const noexcept = 0;
  // Log keys of the live events, in Reading::values order (docs/event-log.md `counters` keys).
  virtual const std::vector<std::string>& keys() const noexcept = 0;
  virtual const std::vector<Unavailable>& unavailable() const noexcept = 0;
  // Fills `out` with cumulative values; false when the read failed (values are then absent).
  // Must be called on the thread the source was opened on.
  virtual bool read(Reading& out) noexcept = 0;
};

// The multiplexing-scaled difference of event i between two readings of one source: the raw
// delta times (delta enabled / delta running). Equal to the raw delta when the group ran the
// whole time; 0 when it never ran (no information, callers check mux_ratio first).
inline uint64_t scaled_delta(const Reading& a, const Reading& b, int i) noexcept {
  const uint64_t raw = b.values[static_cast<size_t>(i)] - a.values[static_cast<size_t>(i)];
  const uint64_t enabled = b.time_enabled_ns - a.time_enabled_ns;
  const uint64_t running = b.time_running_ns - a.time_running_ns;
  if (running == 0 || running >= enabled) return raw;
  return static_cast<uint64_t>(static_cast<double>(raw) * static_cast<double>(enabled) /
                               static_cast<double>(running));
}

// Fraction of the interval the group was counting (1 = not multiplexed).
inline double mux_ratio(const Reading& a, const Reading& b) noexcept {
  const uint64_t enabled = b.time_enabled_ns - a.time_enabled_ns;
  const uint64_t running = b.time_running_ns - a.time_running_ns;
  if (enabled == 0 || running >= enabled) return 1.0;
  return static_cast<double>(running) / static_cast<double>(enabled);
}

}  // namespace pacer::hwcounters
