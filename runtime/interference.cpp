#include "runtime/interference.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

namespace pacer::runtime {
namespace {

namespace fs = std::filesystem;

// Writes `text` to a control file; false with the reason in *why.
bool write_control(const fs::path& file, const std::string& text, std::string* why) {
  std::ofstream out(file);
  out << text;
  out.flush();
  if (!out) {
    if (why)
      *why = fmt::format("cannot write '{}' to {}: {}", text, file.string(), std::strerror(errno));
    return false;
  }
  return true;
}

std::string read_first_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

void pin_current_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (const int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); rc != 0)
    throw std::runtime_error(
        fmt::format("cannot pin a thread to CPU {}: {}", cpu, std::strerror(rc)));
}

CpuHogs::CpuHogs(const std::vector<int>& cpus, int per_cpu) {
  for (int cpu : cpus)
    for (int k = 0; k < per_cpu; ++k)
      threads_.emplace_back([this, cpu] {
        try {
          pin_current_thread(cpu);
        } catch (const std::exception&) {
          return;  // the CPU left the affinity mask meanwhile: no hog there
        }
        // Spin without yielding: a runnable thread the scheduler must share the CPU with.
        volatile uint64_t sink = 0;
        while (!stop_.load(std::memory_order_relaxed)) sink = sink + 1;
      });
}

CpuHogs::~CpuHogs() {
  stop_.store(true);
  for (std::thread& t : threads_) t.join();
}

MemoryStreamers::MemoryStreamers(const std::vector<int>& cpus, size_t bytes_per_thread) {
  for (int cpu : cpus)
    threads_.emplace_back([this, cpu, bytes_per_thread] {
      try {
        pin_current_thread(cpu);
      } catch (const std::exception&) {
        return;
      }
      // Buffers allocated and touched on the streamer's own CPU (its NUMA node).
      std::vector<char> a(bytes_per_thread, 1), b(bytes_per_thread, 2);
      constexpr size_t kChunk = size_t{4} << 20;  // checks the stop flag every 4 MiB
      while (!stop_.load(std::memory_order_relaxed)) {
        for (size_t off = 0; off < bytes_per_thread && !stop_.load(std::memory_order_relaxed);
             off += kChunk) {
          const size_t n = std::min(kChunk, bytes_per_thread - off);
          std::memcpy(b.data() + off, a.data() + off, n);
          copied_.fetch_add(n, std::memory_order_relaxed);
        }
        a.swap(b);
      }
    });
}

MemoryStreamers::~MemoryStreamers() {
  stop_.store(true);
  for (std::thread& t : threads_) t.join();
}

std::optional<CpuQuotaGroup> CpuQuotaGroup::create(double cpus, std::string* why) {
  constexpr int64_t kPeriodUs = 100000;
  const int64_t quota_us = cpus > 0 ? static_cast<int64_t>(std::llround(cpus * kPeriodUs)) : -1;
  // Unique per process and group (a scenario makes two: the control's and the quota's).
  const std::string name = fmt::format("pacer-scenario-{}-{}", getpid(),
                                       std::chrono::steady_clock::now().time_since_epoch().count());
  std::string reasons;
  // cgroup v1: the cpu controller's own hierarchy (mounted as cpu or cpu,cpuacct).
  for (const char* root : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
    if (!fs::exists(fs::path(root) / "cpu.cfs_quota_us")) continue;
    CpuQuotaGroup g;
    g.version_ = 1;
    g.cpus_ = cpus;
    g.dir_ = fs::path(root) / name;
    std::error_code ec;
    if (!fs::create_directory(g.dir_, ec) && ec) {
      reasons += fmt::format("cannot create {}: {}; ", g.dir_.string(), ec.message());
      continue;
    }
    std::string w;
    if (write_control(g.dir_ / "cpu.cfs_period_us", std::to_string(kPeriodUs), &w) &&
        write_control(g.dir_ / "cpu.cfs_quota_us", std::to_string(quota_us), &w)) {
      g.procs_file_ = (g.dir_ / "cgroup.procs").string();
      return g;
    }
    reasons += w + "; ";
    fs::remove(g.dir_, ec);
    g.dir_.clear();
  }
  // cgroup v2: needs the cpu controller in the root's subtree_control.
  for (const char* root : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
    const fs::path controllers = fs::path(root) / "cgroup.controllers";
    if (!fs::exists(controllers)) continue;
    if (read_first_line(controllers).find("cpu") == std::string::npos) {
      reasons += fmt::format("cgroup v2 at {} has no cpu controller (it is bound to v1); ", root);
      continue;
    }
    std::string w;
    const std::string subtree = read_first_line(fs::path(root) / "cgroup.subtree_control");
    if (subtree.find("cpu") == std::string::npos &&
        !write_control(fs::path(root) / "cgroup.subtree_control", "+cpu", &w)) {
      reasons += w + "; ";
      continue;
    }
    CpuQuotaGroup g;
    g.version_ = 2;
    g.cpus_ = cpus;
    g.dir_ = fs::path(root) / name;
    std::error_code ec;
    if (!fs::create_directory(g.dir_, ec) && ec) {
      reasons += fmt::format("cannot create {}: {}; ", g.dir_.string(), ec.message());
      continue;
    }
    const std::string max =
        quota_us > 0 ? fmt::format("{} {}", quota_us, kPeriodUs) : fmt::format("max {}", kPeriodUs);
    if (write_control(g.dir_ / "cpu.max", max, &w)) {
      g.procs_file_ = (g.dir_ / "cgroup.procs").string();
      return g;
    }
    reasons += w + "; ";
    fs::remove(g.dir_, ec);
    g.dir_.clear();
  }
  if (why) {
    if (reasons.empty()) reasons = "no cgroup cpu controller is mounted; ";
    *why = fmt::format("cannot set up a CPU quota ({}{})", reasons.substr(0, reasons.size() - 2),
                       geteuid() != 0 ? "; creating cgroups needs root" : "");
  }
  return std::nullopt;
}

CpuQuotaGroup::CpuQuotaGroup(CpuQuotaGroup&& o) noexcept
    : dir_(std::move(o.dir_)),
      procs_file_(std::move(o.procs_file_)),
      version_(o.version_),
      cpus_(o.cpus_) {
  o.dir_.clear();
}

CpuQuotaGroup& CpuQuotaGroup::operator=(CpuQuotaGroup&& o) noexcept {
  if (this != &o) {
    if (!dir_.empty()) ::rmdir(dir_.c_str());
    dir_ = std::move(o.dir_);
    procs_file_ = std::move(o.procs_file_);
    version_ = o.version_;
    cpus_ = o.cpus_;
    o.dir_.clear();
  }
  return *this;
}

CpuQuotaGroup::~CpuQuotaGroup() {
  if (dir_.empty()) return;
  // The processes moved in have exited by now (the caller waited for them); an empty group is
  // removed with rmdir, its control files go with it.
  if (::rmdir(dir_.c_str()) != 0) {
    // Still populated (a child outlived us): leave it rather than kill anything.
  }
}

std::string CpuQuotaGroup::describe() const {
  return fmt::format("cgroup v{} {}: quota {:.2f} CPUs per 100 ms period", version_, dir_.string(),
                     cpus_);
}

}  // namespace pacer::runtime
