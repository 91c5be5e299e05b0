#pragma once
// Facts about the machine that decide whether two runs are comparable: CPU model, microcode,
// kernel, governor, SMT, virtualization, TSC rate. Read from /proc, /sys and CPUID; anything that
// cannot be read stays empty / nullopt (the log then leaves it out or writes null).
#include <optional>
#include <string>
#include <vector>

namespace pacer::hwcounters {

struct HostFacts {
  std::string hostname;
  std::string cpu_model;                // /proc/cpuinfo "model name"
  std::string microcode;                // /proc/cpuinfo "microcode"
  // "family 23 model 1 stepping 2" (/proc/cpuinfo "cpu family", "model", "stepping", decimal as
  // lscpu prints them; empty where the kernel gives none): tells CPUs apart that a VM names alike
  // ("AMD EPYC" for a Zen 1 and a Zen 4 guest); ops/isa.h's kernel table reads the same CPUID.
  std::string cpu_signature;
  std::string kernel;                   // uname release
  std::optional<std::string> governor;  // cpufreq scaling_governor of cpu0; nullopt: no cpufreq
  std::optional<bool> smt;              // /sys/devices/system/cpu/smt/active
  bool virtualized = false;             // CPUID hypervisor bit
  std::string hypervisor;               // CPUID 0x40000000 vendor ("KVMKVMKVM"), empty on metal
  double tsc_mhz = 0;
  std::string tsc_source;
  std::optional<double> nominal_mhz;  // CPUID 0x16 base, or the "@ x.xxGHz" of the model name
  std::vector<int> allowed_cpus;      // sched_getaffinity of the calling thread
  int online_cpus = 0;
  std::optional<int> perf_event_paranoid;
};

HostFacts collect_host_facts();

// Parses "0-3,8,10-11" (sysfs CPU lists); stops at the first malformed item.
std::vector<int> parse_cpu_list(const std::string& s);

// The signature of /proc/cpuinfo's text (its first processor): "family F model M stepping S", or
// "" when any of the three is missing.
std::string cpu_signature_from_cpuinfo(const std::string& cpuinfo);

}  // namespace pacer::hwcounters
