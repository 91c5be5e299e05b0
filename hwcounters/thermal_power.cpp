#include "hwcounters/thermal_power.h"

#include <perfmon/pfmlib_perf_event.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "hwcounters/host_facts.h"

namespace pacer::hwcounters {
namespace {

// A small sysfs file's first number; nullopt when absent or not a number.
std::optional<double> read_number(const std::string& path) noexcept {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[64];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  char* end = nullptr;
  const double v = std::strtod(buf, &end);
  if (end == buf) return std::nullopt;
  return v;
}

std::optional<std::string> read_text(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[256];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return std::nullopt;
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::unique_ptr<ThrottleCounters> ThrottleCounters::open(std::string* why_not) {
  const char* probe = "/sys/devices/system/cpu/cpu0/thermal_throttle/core_throttle_count";
  if (!read_number(probe)) {
    if (why_not) *why_not = fmt::format("{}: not present", probe);
    return nullptr;
  }
  return std::unique_ptr<ThrottleCounters>(new ThrottleCounters());
}

ThrottleCounts ThrottleCounters::read(std::span<const int> cpus) const noexcept {
  ThrottleCounts c;
  std::map<int, int64_t> package_counts;  // one value per package, shared by its CPUs
  for (int cpu : cpus) {
    const std::string base = fmt::format("/sys/devices/system/cpu/cpu{}/", cpu);
    if (auto v = read_number(base + "thermal_throttle/core_throttle_count")) {
      c.core += static_cast<int64_t>(*v);
    }
    const auto pkg = read_number(base + "topology/physical_package_id");
    if (auto v = read_number(base + "thermal_throttle/package_throttle_count")) {
      package_counts[pkg ? static_cast<int>(*pkg) : 0] = static_cast<int64_t>(*v);
    }
  }
  for (const auto& [pkg, v] : package_counts) c.package += v;
  return c;
}

std::unique_ptr<EnergyMeter> EnergyMeter::open(std::string* why_not, int probe_ms) {
  std::unique_ptr<EnergyMeter> m(new EnergyMeter());
  std::string reasons;
  // powercap: top-level zones intel-rapl:N are packages (intel-rapl:N:M are their sub-domains).
  if (DIR* d = opendir("/sys/class/powercap")) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind("intel-rapl:", 0) != 0 || name.find(':', 11) != std::string::npos) continue;
      const std::string base = "/sys/class/powercap/" + name + "/";
      const auto uj = read_number(base + "energy_uj");
      if (!uj) continue;
      m->files_.push_back(base + "energy_uj");
      m->ranges_j_.push_back(read_number(base + "max_energy_range_uj").value_or(0) / 1e6);
    }
    closedir(d);
    if (m->files_.empty())
      reasons = "powercap: no readable intel-rapl:N/energy_uj";
    else
      m->name_ = fmt::format("powercap intel-rapl ({} package domains)", m->files_.size());
  } else {
    reasons = "powercap: /sys/class/powercap absent";
  }
  if (m->files_.empty()) {
    // perf's power PMU: system-wide events on one CPU per package (its cpumask).
    const std::string pmu = "/sys/bus/event_source/devices/power/";
    const auto type = read_number(pmu + "type");
    std::string event;
    for (const char* ev : {"energy-pkg", "energy-psys"}) {
      if (read_text(pmu + "events/" + ev)) {
        event = ev;
        break;
      }
    }
    if (!type || event.empty()) {
      reasons += "; perf power PMU: no energy-pkg/energy-psys event";
    } else {
      const std::string cfg = read_text(pmu + "events/" + event).value_or("");
      const size_t eq = cfg.find("event=");
      const uint64_t config =
          eq == std::string::npos ? 0 : std::strtoull(cfg.c_str() + eq + 6, nullptr, 0);
      m->scale_ = read_number(pmu + "events/" + event + ".scale").value_or(0);
      for (int cpu : parse_cpu_list(read_text(pmu + "cpumask").value_or("0"))) {
        perf_event_attr attr;
        std::memset(&attr, 0, sizeof attr);
        attr.size = sizeof attr;
        attr.type = static_cast<uint32_t>(*type);
        attr.config = config;
        const long fd = syscall(SYS_perf_event_open, &attr, -1, cpu, -1, 0);
        if (fd >= 0) {
          m->fds_.push_back(static_cast<int>(fd));
        } else if (reasons.find("perf power") == std::string::npos) {
          reasons += fmt::format("; perf power/{}/: {}", event, std::strerror(errno));
        }
      }
      if (!m->fds_.empty()) m->name_ = fmt::format("perf power/{}/", event);
    }
  }
  if (m->files_.empty() && m->fds_.empty()) {
    if (why_not) *why_not = reasons;
    return nullptr;
  }
  const auto first = m->joules();
  std::this_thread::sleep_for(std::chrono::milliseconds(probe_ms));
  const auto second = m->joules();
  if (!first || !second || *second <= *first) {
    if (why_not) {
      *why_not = fmt::format("{} present but does not advance ({} J over {} ms; virtualized?)",
                             m->name_, second && first ? *second - *first : 0.0, probe_ms);
    }
    return nullptr;
  }
  return m;
}

EnergyMeter::~EnergyMeter() {
  for (int fd : fds_) close(fd);
}

std::optional<double> EnergyMeter::joules() noexcept {
  const size_t domains = files_.empty() ? fds_.size() : files_.size();
  if (last_j_.empty()) last_j_.assign(domains, -1.0);
  for (size_t i = 0; i < domains; ++i) {
    double j;
    if (!files_.empty()) {
      const auto uj = read_number(files_[i]);
      if (!uj) return std::nullopt;
      j = *uj / 1e6;
    } else {
      uint64_t count = 0;
      if (::read(fds_[i], &count, sizeof count) != sizeof count) return std::nullopt;
      j = static_cast<double>(count) * scale_;
    }
    if (last_j_[i] >= 0) {
      double delta = j - last_j_[i];
      if (delta < 0 && i < ranges_j_.size() && ranges_j_[i] > 0) delta += ranges_j_[i];  // wrap
      if (delta > 0) total_j_ += delta;
    }
    last_j_[i] = j;
  }
  return total_j_;
}

}  // namespace pacer::hwcounters
