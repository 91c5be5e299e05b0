#include "hwcounters/perf_group.h"

// libpfm4's perf_event.h defines perf_event_attr and perf_event_mmap_page (it clashes with
// <linux/perf_event.h>, so that one is never included here).
#include <perfmon/pfmlib_perf_event.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <fmt/format.h>

#include "hwcounters/pfm_encoding.h"

namespace pacer::hwcounters {
namespace {

#ifndef PERF_FLAG_FD_CLOEXEC
#define PERF_FLAG_FD_CLOEXEC (1UL << 3)
#endif

int sys_perf_event_open(perf_event_attr* attr, int group_fd) noexcept {
  // pid 0, cpu -1: the calling thread, on whichever CPU it runs.
  for (;;) {
    const long fd = syscall(SYS_perf_event_open, attr, 0, -1, group_fd, PERF_FLAG_FD_CLOEXEC);
    if (fd >= 0 || errno != EINTR) return static_cast<int>(fd);
  }
}

const char* errno_name(int err) noexcept {
  switch (err) {
    case ENOENT:
      return "ENOENT";
    case EOPNOTSUPP:
      return "EOPNOTSUPP";
    case EACCES:
      return "EACCES";
    case EPERM:
      return "EPERM";
    case ENODEV:
      return "ENODEV";
    case EINVAL:
      return "EINVAL";
    case ENOSPC:
      return "ENOSPC";
    case EBUSY:
      return "EBUSY";
    case EMFILE:
      return "EMFILE";
    case ENOSYS:
      return "ENOSYS";
    case E2BIG:
      return "E2BIG";
    default:
      return "errno";
  }
}

void compiler_barrier() noexcept {
  asm volatile("" ::: "memory");
}

void busy_wait_ns(int64_t ns) noexcept {
  timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do {
    clock_gettime(CLOCK_MONOTONIC, &b);
  } while ((b.tv_sec - a.tv_sec) * 1'000'000'000 + (b.tv_nsec - a.tv_nsec) < ns);
}

}  // namespace

std::optional<int> perf_event_paranoid() noexcept {
  std::FILE* f = std::fopen("/proc/sys/kernel/perf_event_paranoid", "r");
  if (!f) return std::nullopt;
  int v = 0;
  const bool ok = std::fscanf(f, "%d", &v) == 1;
  std::fclose(f);
  return ok ? std::optional<int>(v) : std::nullopt;
}

std::string perf_open_reason(int err, bool hardware) {
  const char* name = errno_name(err);
  switch (err) {
    case ENOENT:
      return hardware ? fmt::format("no hardware PMU exposed (perf_event_open: {})", name)
                      : fmt::format("event not known to this kernel (perf_event_open: {})", name);
    case EOPNOTSUPP:
      return fmt::format("not supported by this PMU or kernel (perf_event_open: {})", name);
    case EACCES:
    case EPERM: {
      const auto p = perf_event_paranoid();
      return fmt::format("not permitted (perf_event_paranoid={}; perf_event_open: {})",
                         p ? std::to_string(*p) : "?", name);
    }
    case ENODEV:
      return fmt::format("no such PMU on this machine (perf_event_open: {})", name);
    case EINVAL:
      return fmt::format("invalid event for this PMU (perf_event_open: {})", name);
    case ENOSPC:
    case EBUSY:
      return fmt::format("no free counter (perf_event_open: {})", name);
    case ENOSYS:
      return fmt::format("perf_event_open is not available in this kernel ({})", name);
    default:
      return fmt::format("perf_event_open failed: {} (errno {})", std::strerror(err), err);
  }
}

std::unique_ptr<PerfGroupSource> PerfGroupSource::open_for_calling_thread(
    std::string name, std::span<const EventRequest> events, Options opts) {
  std::unique_ptr<PerfGroupSource> src(new PerfGroupSource(std::move(name)));
  src->count_kernel_ = opts.count_kernel;
  bool all_hardware = true;
  for (const EventRequest& ev : events) {
    if (static_cast<int>(src->fds_.size()) >= kMaxEventsPerSource) {
      src->unavailable_.push_back(
          {ev.key, fmt::format("more than {} events in one group", kMaxEventsPerSource)});
      continue;
    }
    const EncodeResult enc = encode_event(ev.pfm_name);
    if (!enc.ok) {
      src->unavailable_.push_back({ev.key, fmt::format("libpfm4 cannot encode {}", enc.error)});
      continue;
    }
    const bool hardware = enc.encoding.type != kPerfTypeSoftware;
    perf_event_attr attr;
    std::memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = enc.encoding.type;
    attr.config = enc.encoding.config;
    attr.config1 = enc.encoding.config1;
    attr.config2 = enc.encoding.config2;
    attr.read_format =
        PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    attr.exclude_hv = 1;
    attr.exclude_user = enc.encoding.exclude_user;
    attr.exclude_kernel = enc.encoding.exclude_kernel || !src->count_kernel_;
    const int group = src->fds_.empty() ? -1 : src->fds_[0];
    int fd = sys_perf_event_open(&attr, group);
    if (fd < 0 && (errno == EACCES || errno == EPERM) && !attr.exclude_kernel) {
      // perf_event_paranoid >= 2 forbids kernel-mode counting for unprivileged users; count user
      // mode only, for the whole group, and say so in the header.
      attr.exclude_kernel = 1;
      fd = sys_perf_event_open(&attr, group);
      if (fd >= 0) src->count_kernel_ = false;
    }
    if (fd < 0) {
      src->unavailable_.push_back({ev.key, perf_open_reason(errno, hardware)});
      continue;
    }
    all_hardware = all_hardware && hardware;
    src->fds_.push_back(fd);
    src->keys_.push_back(ev.key);
  }
  if (src->fds_.empty()) return src;
  if (all_hardware) {
    src->drop_unschedulable();
    if (opts.use_rdpmc && !src->fds_.empty()) src->try_map_for_rdpmc();
  }
  return src;
}

PerfGroupSource::~PerfGroupSource() {
  close_all();
}

void PerfGroupSource::close_all() noexcept {
  const long page = sysconf(_SC_PAGESIZE);
  for (void* p : pages_) munmap(p, static_cast<size_t>(page));
  pages_.clear();
  rdpmc_ = false;
  for (int fd : fds_) close(fd);
  fds_.clear();
}

// A hardware group larger than the PMU's free counters is never scheduled (time_running stays 0).
// Drop members from the end until it runs, so the first events (cycles, instructions) survive.
void PerfGroupSource::drop_unschedulable() {
  while (!fds_.empty()) {
    Reading r;
    busy_wait_ns(50'000);
    if (read_syscall(r) && r.time_running_ns > 0) return;
    const size_t last = fds_.size() - 1;
    const std::string reason =
        last == 0 ? "never scheduled: no free hardware counter (NMI watchdog or another user?)"
                  : "group does not fit the PMU's counters";
    if (last == 0) {
      unavailable_.push_back({keys_[0], reason});
      close_all();
      keys_.clear();
      return;
    }
    // Removing a member from a group needs the group rebuilt; closing the fd detaches it.
    close(fds_[last]);
    fds_.pop_back();
    unavailable_.push_back({keys_[last], reason});
    keys_.pop_back();
  }
}

void PerfGroupSource::try_map_for_rdpmc() {
  const long page = sysconf(_SC_PAGESIZE);
  for (int fd : fds_) {
    void* p = mmap(nullptr, static_cast<size_t>(page), PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) break;
    pages_.push_back(p);
  }
  bool usable = pages_.size() == fds_.size();
  for (void* p : pages_) {
    const auto* pc = static_cast<const perf_event_mmap_page*>(p);
    usable = usable && pc->cap_usr_rdpmc && pc->cap_user_time;
  }
  if (!usable) {
    for (void* p : pages_) munmap(p, static_cast<size_t>(page));
    pages_.clear();
    return;
  }
  rdpmc_ = true;
}

bool PerfGroupSource::read(Reading& out) noexcept {
  if (fds_.empty()) return false;
  return rdpmc_ ? read_rdpmc(out) : read_syscall(out);
}

bool PerfGroupSource::read_syscall(Reading& out) noexcept {
  // PERF_FORMAT_GROUP layout: nr, time_enabled, time_running, value[nr].
  uint64_t buf[3 + kMaxEventsPerSource];
  const size_t want = (3 + fds_.size()) * sizeof(uint64_t);
  ssize_t got;
  do {
    got = ::read(fds_[0], buf, sizeof buf);
  } while (got < 0 && errno == EINTR);
  if (got < static_cast<ssize_t>(want) || buf[0] != fds_.size()) return false;
  out.time_enabled_ns = buf[1];
  out.time_running_ns = buf[2];
  for (size_t i = 0; i < fds_.size(); ++i) out.values[i] = buf[3 + i];
  return true;
}

// The self-monitoring sequence documented in perf_event_mmap_page: retry while the kernel updates
// the page (lock changes), add the live PMC value to the kernel's offset, and extend the enabled/
// running times by the TSC time since the kernel last wrote them.
bool PerfGroupSource::read_rdpmc(Reading& out) noexcept {
  for (size_t i = 0; i < pages_.size(); ++i) {
    const auto* pc = static_cast<const volatile perf_event_mmap_page*>(pages_[i]);
    uint32_t seq;
    uint64_t count, enabled = 0, running = 0;
    do {
      seq = pc->lock;
      compiler_barrier();
      const uint32_t idx = pc->index;
      count = static_cast<uint64_t>(pc->offset);
      if (idx != 0) {
        const unsigned width = pc->pmc_width;
        const uint64_t raw = __rdpmc(static_cast<int>(idx - 1));
        count += static_cast<uint64_t>(static_cast<int64_t>(raw << (64 - width)) >> (64 - width));
      }
      if (i == 0) {
        enabled = pc->time_enabled;
        running = pc->time_running;
        if (pc->cap_user_time && enabled != 0) {
          uint64_t cyc = __rdtsc();
          if (pc->cap_user_time_short) {
            cyc = pc->time_cycles + ((cyc - pc->time_cycles) & pc->time_mask);
          }
          const uint16_t shift = pc->time_shift;
          const uint32_t mult = pc->time_mult;
          const uint64_t quot = cyc >> shift;
          const uint64_t rem = cyc & ((uint64_t{1} << shift) - 1);
          const uint64_t delta = pc->time_offset + quot * mult + ((rem * mult) >> shift);
          enabled += delta;
          if (idx != 0) running += delta;
        }
      }
      compiler_barrier();
    } while (pc->lock != seq);
    out.values[i] = count;
    if (i == 0) {
      out.time_enabled_ns = enabled;
      out.time_running_ns = running;
    }
  }
  return true;
}

}  // namespace pacer::hwcounters
