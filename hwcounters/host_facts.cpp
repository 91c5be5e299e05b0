#include "hwcounters/host_facts.h"

#include <cpuid.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "hwcounters/frequency.h"
#include "hwcounters/perf_group.h"

namespace pacer::hwcounters {
namespace {

std::optional<std::string> first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (!f || !std::getline(f, line)) return std::nullopt;
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line;
}

// The value of the first "key<tabs>: value" line of /proc/cpuinfo.
std::string cpuinfo_field(const std::string& cpuinfo, const std::string& key) {
  std::istringstream in(cpuinfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    // The key must be followed only by blanks before the colon ("model" vs "model name").
    if (line.find_first_not_of(" \t", key.size()) != colon) continue;
    size_t v = line.find_first_not_of(' ', colon + 1);
    return v == std::string::npos ? std::string() : line.substr(v);
  }
  return {};
}

std::optional<double> nominal_from_model_name(const std::string& model) {
  const size_t at = model.find('@');
  if (at == std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(model.c_str() + at + 1, &end);
  if (end == model.c_str() + at + 1 || v <= 0) return std::nullopt;
  return std::string(end).find("GHz") != std::string::npos ? v * 1000.0 : v;
}

}  // namespace

std::vector<int> parse_cpu_list(const std::string& s) {
  std::vector<int> out;
  size_t i = 0;
  while (i < s.size()) {
    char* end = nullptr;
    const long a = std::strtol(s.c_str() + i, &end, 10);
    if (end == s.c_str() + i) break;
    long b = a;
    i = static_cast<size_t>(end - s.c_str());
    if (i < s.size() && s[i] == '-') {
      b = std::strtol(s.c_str() + i + 1, &end, 10);
      i = static_cast<size_t>(end - s.c_str());
    }
    for (long c = a; c <= b; ++c) out.push_back(static_cast<int>(c));
    if (i >= s.size() || s[i] != ',') break;
    ++i;
  }
  return out;
}

std::string cpu_signature_from_cpuinfo(const std::string& cpuinfo) {
  const std::string family = cpuinfo_field(cpuinfo, "cpu family"),
                    model = cpuinfo_field(cpuinfo, "model"),
                    stepping = cpuinfo_field(cpuinfo, "stepping");
  if (family.empty() || model.empty() || stepping.empty()) return {};
  return "family " + family + " model " + model + " stepping " + stepping;
}

HostFacts collect_host_facts() {
  HostFacts h;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) h.hostname = host;
  {
    std::ifstream f("/proc/cpuinfo");
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string cpuinfo = ss.str();
    h.cpu_model = cpuinfo_field(cpuinfo, "model name");
    h.microcode = cpuinfo_field(cpuinfo, "microcode");
    h.cpu_signature = cpu_signature_from_cpuinfo(cpuinfo);
  }
  utsname u;
  if (uname(&u) == 0) h.kernel = u.release;
  h.governor = first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
  if (auto smt = first_line("/sys/devices/system/cpu/smt/active")) h.smt = *smt == "1";

  unsigned a = 0, b = 0, c = 0, d = 0;
  __cpuid(1, a, b, c, d);
  h.virtualized = (c & (1u << 31)) != 0;
  if (h.virtualized) {
    __cpuid(0x40000000, a, b, c, d);
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &c, 4);
    std::memcpy(vendor + 8, &d, 4);
    h.hypervisor = vendor;
  }
  if (__get_cpuid_max(0, nullptr) >= 0x16) {
    __cpuid_count(0x16, 0, a, b, c, d);
    if ((a & 0xffff) != 0) h.nominal_mhz = static_cast<double>(a & 0xffff);
  }
  if (!h.nominal_mhz) h.nominal_mhz = nominal_from_model_name(h.cpu_model);

  const TscInfo& tsc = tsc_info();
  h.tsc_mhz = tsc.mhz;
  h.tsc_source = tsc.source;

  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) h.allowed_cpus.push_back(cpu);
    }
  }
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  h.online_cpus = online > 0 ? static_cast<int>(online) : 1;
  h.perf_event_paranoid = perf_event_paranoid();
  return h;
}

}  // namespace pacer::hwcounters
