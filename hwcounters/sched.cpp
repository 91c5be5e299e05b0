#include "hwcounters/sched.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <string_view>

#include <fmt/format.h>

namespace pacer::hwcounters {
namespace {

ssize_t pread_retry(int fd, char* buf, size_t n) noexcept {
  ssize_t got;
  do {
    got = pread(fd, buf, n, 0);
  } while (got < 0 && errno == EINTR);
  return got;
}

// Parses up to n unsigned decimal fields separated by spaces; returns how many it parsed.
int parse_u64_fields(std::string_view s, uint64_t* out, int n) noexcept {
  int count = 0;
  const char* p = s.data();
  const char* end = s.data() + s.size();
  while (count < n && p < end) {
    while (p < end && (*p == ' ' || *p == '\t')) ++p;
    if (p >= end || *p == '\n') break;
    auto [next, ec] = std::from_chars(p, end, out[count]);
    if (ec != std::errc()) break;
    ++count;
    p = next;
  }
  return count;
}

bool parse_schedstat(std::string_view s, ThreadSched& t) noexcept {
  uint64_t f[3];
  if (parse_u64_fields(s, f, 3) != 3) return false;
  t.oncpu_ns = static_cast<int64_t>(f[0]);
  t.runq_ns = static_cast<int64_t>(f[1]);
  t.timeslices = static_cast<int64_t>(f[2]);
  return true;
}

int64_t status_field(std::string_view text, std::string_view key) noexcept {
  const size_t at = text.find(key);
  if (at == std::string_view::npos) return -1;
  uint64_t v = 0;
  if (parse_u64_fields(text.substr(at + key.size()), &v, 1) != 1) return -1;
  return static_cast<int64_t>(v);
}

// status is ~1.5 KB; the context-switch lines are near its end.
constexpr size_t kStatusBytes = 4096;

ThreadSched parse_thread_sched(std::string_view schedstat, std::string_view status) noexcept {
  ThreadSched t;
  if (!parse_schedstat(schedstat, t)) return t;
  t.nvcsw = status_field(status, "\nvoluntary_ctxt_switches:");
  t.nivcsw = status_field(status, "nonvoluntary_ctxt_switches:");
  t.ok = t.nvcsw >= 0 && t.nivcsw >= 0;
  return t;
}

}  // namespace

int current_tid() noexcept {
  return static_cast<int>(syscall(SYS_gettid));
}

std::unique_ptr<SchedstatSource> SchedstatSource::open_for_calling_thread(std::string* why_not) {
  const std::string path = fmt::format("/proc/self/task/{}/schedstat", current_tid());
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (why_not) *why_not = fmt::format("{}: {}", path, std::strerror(errno));
    return nullptr;
  }
  std::unique_ptr<SchedstatSource> src(new SchedstatSource(fd));
  Reading probe;
  if (!src->read(probe)) {
    if (why_not) *why_not = fmt::format("{}: unexpected format", path);
    return nullptr;
  }
  return src;
}

SchedstatSource::~SchedstatSource() {
  close(fd_);
}

bool SchedstatSource::read(Reading& out) noexcept {
  char buf[128];
  const ssize_t got = pread_retry(fd_, buf, sizeof buf - 1);
  if (got <= 0) return false;
  ThreadSched t;
  if (!parse_schedstat(std::string_view(buf, static_cast<size_t>(got)), t)) return false;
  out.values[0] = static_cast<uint64_t>(t.runq_ns);
  out.time_enabled_ns = out.time_running_ns = 0;  // not a multiplexed group
  return true;
}

bool ThreadClockSource::read(Reading& out) noexcept {
  timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return false;
  out.values[0] =
      static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
  out.time_enabled_ns = out.time_running_ns = 0;
  return true;
}

ThreadSched read_thread_sched(int tid) noexcept {
  ThreadSchedReader r(tid);
  return r.read();
}

ThreadSchedReader::ThreadSchedReader(int tid) noexcept {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
  schedstat_fd_ = open(path, O_RDONLY | O_CLOEXEC);
  std::snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
  status_fd_ = open(path, O_RDONLY | O_CLOEXEC);
}

ThreadSchedReader::~ThreadSchedReader() {
  if (schedstat_fd_ >= 0) close(schedstat_fd_);
  if (status_fd_ >= 0) close(status_fd_);
}

ThreadSched ThreadSchedReader::read() const noexcept {
  if (schedstat_fd_ < 0 || status_fd_ < 0) return {};
  char sbuf[128];
  char status[kStatusBytes];
  const ssize_t n = pread_retry(schedstat_fd_, sbuf, sizeof sbuf - 1);
  const ssize_t m = pread_retry(status_fd_, status, sizeof status - 1);
  if (n <= 0 || m <= 0) return {};
  return parse_thread_sched(std::string_view(sbuf, static_cast<size_t>(n)),
                            std::string_view(status, static_cast<size_t>(m)));
}

int64_t thread_cpu_ns(pthread_t thread) noexcept {
  clockid_t clock;
  if (pthread_getcpuclockid(thread, &clock) != 0) return -1;
  timespec ts;
  if (clock_gettime(clock, &ts) != 0) return -1;
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int64_t process_cpu_ns() noexcept {
  timespec ts;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return -1;
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

HostCpuTimes parse_proc_stat(std::string_view text, bool per_cpu) {
  HostCpuTimes h;
  // "cpu  user nice system idle iowait irq softirq steal ...", then "cpuN ..." per CPU.
  if (text.size() < 5 || text.substr(0, 4) != "cpu ") return h;
  uint64_t f[8] = {};
  const size_t eol = std::min(text.find('\n'), text.size());
  const int n = parse_u64_fields(text.substr(4, eol - 4), f, 8);
  if (n < 5) return h;
  const uint64_t idle = f[3] + f[4];
  h.busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
  h.steal = n >= 8 ? f[7] : 0;
  h.total = h.busy + idle;
  h.ok = true;
  if (!per_cpu) return h;
  for (size_t pos = eol + 1; pos < text.size();) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() < 4 || line.substr(0, 3) != "cpu") break;  // the per-CPU lines come first
    size_t d = 3;
    int cpu = 0;
    while (d < line.size() && line[d] >= '0' && line[d] <= '9') cpu = cpu * 10 + (line[d++] - '0');
    if (d == 3 || cpu > 65535) continue;
    uint64_t g[8] = {};
    if (parse_u64_fields(line.substr(d), g, 8) < 8) continue;
    if (h.steal_per_cpu.size() <= static_cast<size_t>(cpu)) h.steal_per_cpu.resize(cpu + 1, 0);
    h.steal_per_cpu[static_cast<size_t>(cpu)] = g[7];
  }
  return h;
}

HostCpuTimes read_host_cpu_times(bool per_cpu) noexcept {
  // The totals line fits 512 bytes; the per-CPU lines take ~100 bytes per CPU.
  std::string buf(per_cpu ? 1 << 16 : 512, '\0');
  const int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  const ssize_t got = pread_retry(fd, buf.data(), buf.size() - 1);
  close(fd);
  if (got < 5) return {};
  try {
    return parse_proc_stat(std::string_view(buf.data(), static_cast<size_t>(got)), per_cpu);
  } catch (...) {  // an allocation failure: report nothing rather than terminate
    return {};
  }
}

std::optional<double> host_cpus_busy(const HostCpuTimes& a, const HostCpuTimes& b,
                                     int online_cpus) noexcept {
  if (!a.ok || !b.ok || b.total <= a.total) return std::nullopt;
  return static_cast<double>(b.busy - a.busy) / static_cast<double>(b.total - a.total) *
         online_cpus;
}

}  // namespace pacer::hwcounters
