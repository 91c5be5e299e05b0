#pragma once
// One perf_event_open group measuring the calling thread (google/benchmark's perf_counters
// pattern): the first event that opens leads, the rest join it, every read returns all of them at
// once with PERF_FORMAT_GROUP | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING. Hardware groups are read
// in user space with rdpmc through each event's perf mmap page when the kernel allows it
// (cap_user_rdpmc); otherwise, and always for software events, with one read() of the leader.
// Events that fail to encode or open are reported, never fatal.
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hwcounters/counter_source.h"

namespace pacer::hwcounters {

struct EventRequest {
  std::string key;       // log key
  std::string pfm_name;  // libpfm4 name
};

class PerfGroupSource final : public CounterSource {
 public:
  struct Options {
    bool use_rdpmc = true;     // try user-space reads (hardware groups only)
    bool count_kernel = true;  // fall back to user-only when the kernel refuses (paranoid >= 2)
  };

  // Opens what it can of `events` (at most kMaxEventsPerSource) for the calling thread. Never
  // throws for an unsupported event; keys() is empty when nothing opened.
  static std::unique_ptr<PerfGroupSource> open_for_calling_thread(
      std::string name, std::span<const EventRequest> events, Options opts);
  static std::unique_ptr<PerfGroupSource> open_for_calling_thread(
      std::string name, std::span<const EventRequest> events) {
    return open_for_calling_thread(std::move(name), events, Options{});
  }
  ~PerfGroupSource() override;
  PerfGroupSource(const PerfGroupSource&) = delete;
  PerfGroupSource& operator=(const PerfGroupSource&) = delete;

  std::string_view name() const noexcept override { return name_; }
  std::string_view read_method() const noexcept override { return rdpmc_ ? "rdpmc" : "read()"; }
  const std::vector<std::string>& keys() const noexcept override { return keys_; }
  const std::vector<Unavailable>& unavailable() const noexcept override { return unavailable_; }
  bool read(Reading& out) noexcept override;

  // False when the kernel refused kernel-mode counting and the group counts user mode only.
  bool counts_kernel() const noexcept { return count_kernel_; }

 private:
  explicit PerfGroupSource(std::string name) : name_(std::move(name)) {}
  bool read_syscall(Reading& out) noexcept;
  bool read_rdpmc(Reading& out) noexcept;
  void try_map_for_rdpmc();
  void drop_unschedulable();
  void close_all() noexcept;

  std::string name_;
  std::vector<std::string> keys_;
  std::vector<Unavailable> unavailable_;
  std::vector<int> fds_;      // fds_[0] leads
  std::vector<void*> pages_;  // perf mmap pages, only when rdpmc_ is on
  bool rdpmc_ = false;
  bool count_kernel_ = true;
};

// Why perf_event_open failed, in words ("no hardware PMU exposed (perf_event_open: ENOENT)").
std::string perf_open_reason(int err, bool hardware);
// /proc/sys/kernel/perf_event_paranoid; nullopt when unreadable.
std::optional<int> perf_event_paranoid() noexcept;

}  // namespace pacer::hwcounters
