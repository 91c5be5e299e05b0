#include "hwcounters/cgroup_cpu.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace pacer::hwcounters {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<int64_t> to_int(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<CgroupCpuStat> parse_cgroup_cpu_stat(std::string_view text) {
  CgroupCpuStat s;
  bool any = false;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, sp);
    const auto v = to_int(line.substr(sp + 1));
    if (!v) continue;
    if (key == "nr_periods") s.nr_periods = *v, any = true;
    if (key == "nr_throttled") s.nr_throttled = *v, any = true;
    if (key == "throttled_time") s.throttled_ns = *v, any = true;         // v1: ns
    if (key == "throttled_usec") s.throttled_ns = *v * 1000, any = true;  // v2: us
  }
  if (!any) return std::nullopt;
  return s;
}

CgroupPath parse_proc_self_cgroup(std::string_view text) {
  CgroupPath v1, v2;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string_view::npos || b == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(a + 1, b - a - 1);
    const std::string path(line.substr(b + 1));
    if (controllers.empty() && line.substr(0, a) == "0") {
      v2 = {2, path};
      continue;
    }
    // "cpu" alone or within a comma list ("cpu,cpuacct"), not "cpuacct" or "cpuset".
    std::string_view rest = controllers;
    while (!rest.empty()) {
      const size_t c = rest.find(',');
      if (rest.substr(0, c) == "cpu") v1 = {1, path};
      rest = c == std::string_view::npos ? std::string_view() : rest.substr(c + 1);
    }
  }
  return v1.version ? v1 : v2;
}

std::optional<std::pair<int64_t, int64_t>> parse_cpu_max(std::string_view text) {
  const size_t sp = text.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  const auto period = to_int(text.substr(sp + 1));
  if (!period) return std::nullopt;
  if (text.substr(0, sp) == "max") return std::pair<int64_t, int64_t>{-1, *period};
  const auto quota = to_int(text.substr(0, sp));
  if (!quota) return std::nullopt;
  return std::pair<int64_t, int64_t>{*quota, *period};
}

std::optional<CgroupCpu> CgroupCpu::at(const std::filesystem::path& dir, int version,
                                       std::string* why) {
  CgroupCpu c;
  c.dir_ = dir;
  c.version_ = version;
  if (!c.read()) {
    if (why) *why = (dir / "cpu.stat").string() + " has no throttling counters";
    return std::nullopt;
  }
  if (version == 1) {
    c.quota_us_ = to_int(slurp(dir / "cpu.cfs_quota_us")).value_or(-1);
    c.period_us_ = to_int(slurp(dir / "cpu.cfs_period_us")).value_or(0);
  } else if (const auto m = parse_cpu_max(slurp(dir / "cpu.max"))) {
    c.quota_us_ = m->first;
    c.period_us_ = m->second;
  }
  return c;
}

std::optional<CgroupCpu> CgroupCpu::detect(std::string* why) {
  const CgroupPath p = parse_proc_self_cgroup(slurp("/proc/self/cgroup"));
  if (p.version == 0) {
    if (why) *why = "no cpu controller in /proc/self/cgroup";
    return std::nullopt;
  }
  const std::filesystem::path rel = std::filesystem::path(p.path).relative_path();
  if (p.version == 1) {
    for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
      if (auto c = at(std::filesystem::path(mount) / rel, 1, why)) return c;
    }
    return std::nullopt;
  }
  for (const char* mount : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    if (auto c = at(std::filesystem::path(mount) / rel, 2, why)) return c;
  }
  return std::nullopt;
}

std::optional<CgroupCpuStat> CgroupCpu::read() const {
  return parse_cgroup_cpu_stat(slurp(dir_ / "cpu.stat"));
}

}  // namespace pacer::hwcounters
