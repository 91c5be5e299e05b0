#include "hwcounters/frequency.h"

#include <cpuid.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <limits>
#include <mutex>
#include <thread>

#include <fmt/format.h>

namespace pacer::hwcounters {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

int64_t monotonic_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Eight dependent 64-bit multiplies per iteration; the loop counter runs on other ports, so the
// chain alone sets the pace (3 cycles per imul).
__attribute__((noinline)) uint64_t imul_chain(uint64_t iters, uint64_t x) {
  for (uint64_t i = 0; i < iters; ++i) {
    asm volatile(
        "imul %0, %0\n\timul %0, %0\n\timul %0, %0\n\timul %0, %0\n\t"
        "imul %0, %0\n\timul %0, %0\n\timul %0, %0\n\timul %0, %0\n"
        : "+r"(x));
  }
  return x;
}

// Eight dependent crc32 (3 cycles each on Intel and AMD Zen): an independent cross-check of the
// multiply chain, executed by a different unit.
__attribute__((noinline)) uint64_t crc32_chain(uint64_t iters, uint64_t x) {
  for (uint64_t i = 0; i < iters; ++i) {
    asm volatile(
        "crc32q %0, %0\n\tcrc32q %0, %0\n\tcrc32q %0, %0\n\tcrc32q %0, %0\n\t"
        "crc32q %0, %0\n\tcrc32q %0, %0\n\tcrc32q %0, %0\n\tcrc32q %0, %0\n"
        : "+r"(x));
  }
  return x;
}

bool cpu_has_sse42() noexcept {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  return (c & bit_SSE4_2) != 0;
}

constexpr ChainKernel kImul{"imul", 3, imul_chain,
                            "dependent 64-bit imul chain, 3 cycles/link (Intel since Nehalem, "
                            "AMD Zen); measures the scalar clock, AVX-512-heavy code may run "
                            "slower on CPUs with AVX frequency licenses"};
constexpr ChainKernel kCrc32{"crc32", 3, crc32_chain,
                             "dependent crc32 chain, 3 cycles/link (Intel, AMD Zen)"};

// Ticks one run of the chain takes, TSC-fenced so the chain is inside the window.
uint64_t time_chain(const ChainKernel& k, uint64_t iters) noexcept {
  _mm_lfence();
  const uint64_t t0 = __rdtsc();
  _mm_lfence();
  const uint64_t x = k.run(iters, 3);
  unsigned aux;
  const uint64_t t1 = __rdtscp(&aux);
  _mm_lfence();
  asm volatile("" ::"r"(x));
  return t1 - t0;
}

TscInfo compute_tsc_info() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  // Leaf 0x15: TSC = crystal Hz x EBX / EAX (bare metal, recent Intel).
  if (__get_cpuid_max(0, nullptr) >= 0x15) {
    __cpuid_count(0x15, 0, a, b, c, d);
    if (a != 0 && b != 0 && c != 0) {
      return {static_cast<double>(c) * b / a / 1e6, "cpuid 0x15"};
    }
  }
  // Hypervisor timing leaf (VMware, some KVM configurations): EAX = TSC kHz.
  __cpuid(1, a, b, c, d);
  if (c & (1u << 31)) {
    __cpuid(0x40000000, a, b, c, d);
    if (a >= 0x40000010) {
      __cpuid(0x40000010, a, b, c, d);
      if (a != 0) return {a / 1000.0, "cpuid 0x40000010"};
    }
  }
  // Measure: three 3.3 ms windows against CLOCK_MONOTONIC; the median survives one window
  // stretched by a preemption between the clock and TSC reads.
  std::array<double, 3> mhz{};
  for (double& m : mhz) {
    const int64_t w0 = monotonic_ns();
    const uint64_t c0 = read_tsc();
    int64_t w1;
    do {
      w1 = monotonic_ns();
    } while (w1 - w0 < 3'300'000);
    const uint64_t c1 = read_tsc();
    m = static_cast<double>(c1 - c0) / static_cast<double>(w1 - w0) * 1000.0;
  }
  std::sort(mhz.begin(), mhz.end());
  const double best = mhz[1];
  return {best, "measured against CLOCK_MONOTONIC"};
}

class AperfMperfFrequency final : public FrequencySource {
 public:
  AperfMperfFrequency(double tsc_mhz, std::vector<int> fds)
      : tsc_mhz_(tsc_mhz), fds_(std::move(fds)), last_(fds_.size()) {}
  ~AperfMperfFrequency() override {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  std::string_view name() const noexcept override { return "aperf_mperf"; }
  std::string detail() const override {
    return "IA32_APERF/IA32_MPERF via /dev/cpu/N/msr: average unhalted MHz since the previous "
           "sample of the same CPU (all threads on that CPU)";
  }
  double sample_mhz(int cpu) noexcept override {
    if (cpu < 0 || cpu >= static_cast<int>(fds_.size()) || fds_[cpu] < 0) return kNaN;
    uint64_t aperf = 0, mperf = 0;
    if (pread(fds_[cpu], &aperf, 8, 0xE8) != 8 || pread(fds_[cpu], &mperf, 8, 0xE7) != 8) {
      return kNaN;
    }
    std::lock_guard<std::mutex> lock(mu_);
    Last& l = last_[static_cast<size_t>(cpu)];
    double mhz = kNaN;
    if (l.valid && mperf > l.mperf) {
      mhz = static_cast<double>(aperf - l.aperf) / static_cast<double>(mperf - l.mperf) * tsc_mhz_;
    }
    l = {aperf, mperf, true};
    return mhz;
  }

 private:
  struct Last {
    uint64_t aperf = 0, mperf = 0;
    bool valid = false;
  };
  double tsc_mhz_;
  std::vector<int> fds_;
  std::vector<Last> last_;
  std::mutex mu_;  // per-step samples only; two workers may share a CPU
};

class CpufreqFrequency final : public FrequencySource {
 public:
  std::string_view name() const noexcept override { return "cpufreq"; }
  std::string detail() const override {
    return "/sys/devices/system/cpu/cpuN/cpufreq/scaling_cur_freq (the driver's estimate; "
           "intel_pstate averages APERF/MPERF since its last update)";
  }
  double sample_mhz(int cpu) noexcept override {
    char path[96], buf[32];
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cpufreq/scaling_cur_freq", cpu);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return kNaN;
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return kNaN;
    buf[n] = '\0';
    const double khz = std::strtod(buf, nullptr);
    return khz > 0 ? khz / 1000.0 : kNaN;
  }
};

int online_cpu_count() noexcept {
  const long n = sysconf(_SC_NPROCESSORS_CONF);
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace

uint64_t read_tsc() noexcept {
  return __rdtsc();
}

const TscInfo& tsc_info() {
  // A machine constant: measured once per process.
  static TscInfo info;
  static std::once_flag once;
  std::call_once(once, [] { info = compute_tsc_info(); });
  return info;
}

std::span<const ChainKernel> chain_kernels() noexcept {
  static const std::array<ChainKernel, 2> with_crc{kImul, kCrc32};
  static const bool sse42 = cpu_has_sse42();
  return sse42 ? std::span<const ChainKernel>(with_crc) : std::span<const ChainKernel>(&kImul, 1);
}

double estimate_mhz(const ChainKernel& kernel, double tsc_mhz,
                    const CalibrationPlan& plan) noexcept {
  uint64_t small = ~uint64_t{0}, large = ~uint64_t{0};
  for (int t = 0; t < plan.trials; ++t) {
    small = std::min(small, time_chain(kernel, static_cast<uint64_t>(plan.small_iters)));
    large = std::min(large, time_chain(kernel, static_cast<uint64_t>(plan.large_iters)));
  }
  if (large <= small || tsc_mhz <= 0) return kNaN;
  const double links = 8.0 * (plan.large_iters - plan.small_iters);
  const double cycles = links * kernel.latency_cycles;
  const double us = static_cast<double>(large - small) / tsc_mhz;
  return cycles / us;
}

double measure_cpu_mhz(int cpu) {
  double mhz = kNaN;
  std::thread t([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) return;
    std::array<double, 3> v;
    for (double& x : v) x = estimate_mhz(chain_kernels()[0], tsc_info().mhz);
    std::sort(v.begin(), v.end());
    mhz = v[1];
  });
  t.join();
  return mhz;
}

std::string CalibratedLoopFrequency::detail() const {
  return fmt::format("{}; {} trials of {} and {} x8 links per step per worker", kernel_.detail,
                     plan_.trials, plan_.small_iters, plan_.large_iters);
}

std::unique_ptr<FrequencySource> make_aperf_mperf_frequency(double tsc_mhz, std::string* why_not) {
  const int n = online_cpu_count();
  std::vector<int> fds(static_cast<size_t>(n), -1);
  int opened = 0;
  std::string first_error;
  for (int cpu = 0; cpu < n; ++cpu) {
    char path[48];
    std::snprintf(path, sizeof path, "/dev/cpu/%d/msr", cpu);
    fds[static_cast<size_t>(cpu)] = open(path, O_RDONLY | O_CLOEXEC);
    if (fds[static_cast<size_t>(cpu)] >= 0) {
      ++opened;
    } else if (first_error.empty()) {
      first_error = fmt::format("{}: {}", path, std::strerror(errno));
    }
  }
  uint64_t probe = 0;
  const bool readable = opened > 0 && fds[0] >= 0 && pread(fds[0], &probe, 8, 0xE7) == 8;
  if (!readable) {
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
    if (why_not) {
      *why_not = !first_error.empty()
                     ? first_error + " (msr module not loaded, not root, or not passed to the VM)"
                     : "IA32_MPERF not readable through /dev/cpu/0/msr";
    }
    return nullptr;
  }
  return std::make_unique<AperfMperfFrequency>(tsc_mhz, std::move(fds));
}

std::unique_ptr<FrequencySource> make_cpufreq_frequency(std::string* why_not) {
  auto src = std::make_unique<CpufreqFrequency>();
  if (std::isnan(src->sample_mhz(0))) {
    if (why_not) *why_not = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq: not present";
    return nullptr;
  }
  return src;
}

FrequencyChoice choose_frequency_source(double tsc_mhz) {
  FrequencyChoice c;
  std::string why;
  if ((c.source = make_aperf_mperf_frequency(tsc_mhz, &why))) return c;
  c.rejected.push_back({"aperf_mperf", why});
  if ((c.source = make_cpufreq_frequency(&why))) return c;
  c.rejected.push_back({"cpufreq", why});
  c.source = std::make_unique<CalibratedLoopFrequency>(tsc_mhz, chain_kernels()[0]);
  return c;
}

}  // namespace pacer::hwcounters
