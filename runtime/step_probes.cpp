#include "runtime/step_probes.h"

#include <unistd.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "runtime/event_log.h"

namespace pacer::runtime {

StepProbes::StepProbes(int online_cpus, bool probe_energy) : online_cpus_(online_cpus) {
  throttle_ = hwcounters::ThrottleCounters::open(&throttle_why_);
  cgroup_ = hwcounters::CgroupCpu::detect(&cgroup_why_);
  if (probe_energy) {
    energy_ = hwcounters::EnergyMeter::open(&energy_why_);
  } else {
    energy_why_ = "not probed";
  }
}

StepProbes::~StepProbes() = default;

void StepProbes::describe(RunHeader& h) const {
  h.thermal.throttle_counters = throttle_ != nullptr;
  h.thermal.throttle_reason = throttle_why_;
  h.thermal.rapl = energy_ ? energy_->name() : std::string();
  h.thermal.rapl_reason = energy_why_;
  if (cgroup_) {
    const auto st = cgroup_->read();
    h.cgroup = RunHeader::Cgroup{cgroup_->version(),        cgroup_->dir().string(),
                                 cgroup_->quota_us(),       cgroup_->period_us(),
                                 cgroup_->quota_cpus(),     st ? st->nr_periods : 0,
                                 st ? st->nr_throttled : 0, st ? st->throttled_ns : 0};
  } else {
    h.cgroup.reset();
    h.cgroup_reason = cgroup_why_;
  }
}

void StepProbes::begin_slow(std::vector<int> throttle_cpus) {
  if (energy_) energy0_ = energy_->joules();
  if (cgroup_) {
    if (const auto st = cgroup_->read()) cgroup0_ = *st;
  }
  if (throttle_) {
    throttle_cpus_ = std::move(throttle_cpus);
    throttle0_ = throttle_->read(throttle_cpus_);
  }
}

void StepProbes::begin_host() noexcept {
  host0_ = hwcounters::read_host_cpu_times(/*per_cpu=*/true);
}

void StepProbes::begin_process() noexcept {
  process0_ns_ = hwcounters::process_cpu_ns();
}

void StepProbes::end_process() noexcept {
  process1_ns_ = hwcounters::process_cpu_ns();
}

void StepProbes::end_host() noexcept {
  host1_ = hwcounters::read_host_cpu_times(/*per_cpu=*/true);
}

void StepProbes::finish(StepRecord& r, int64_t step_ns) {
  const auto dt = static_cast<double>(step_ns);
  if (process1_ns_ >= 0 && process0_ns_ >= 0 && step_ns > 0) {
    r.process_cpu_usage = static_cast<double>(process1_ns_ - process0_ns_) / dt;
  }
  r.host_cpu_usage = hwcounters::host_cpus_busy(host0_, host1_, online_cpus_);
  if (host0_.ok && host1_.ok && host1_.steal >= host0_.steal) {
    // VM steal over all CPUs, /proc/stat ticks (USER_HZ) to ms.
    static const long kTicksPerSecond = sysconf(_SC_CLK_TCK);
    r.steal_ms = static_cast<double>(host1_.steal - host0_.steal) * 1000.0 /
                 static_cast<double>(kTicksPerSecond);
    // Per CPU: where the workers ran is what slowed them (steal on an idle CPU costs nothing).
    const auto& a = host0_.steal_per_cpu;
    const auto& b = host1_.steal_per_cpu;
    if (!a.empty() && a.size() == b.size()) {
      std::vector<std::pair<int, double>> cpus;
      for (size_t cpu = 0; cpu < a.size(); ++cpu)
        if (b[cpu] > a[cpu])
          cpus.emplace_back(static_cast<int>(cpu), static_cast<double>(b[cpu] - a[cpu]) * 1000.0 /
                                                       static_cast<double>(kTicksPerSecond));
      r.steal_cpus_ms = std::move(cpus);
    }
  }
  if (energy_ && energy0_) {
    if (auto j = energy_->joules()) {
      r.energy_j = *j - *energy0_;
      if (step_ns > 0) r.power_w = (*j - *energy0_) * 1e9 / dt;
    }
  }
  if (cgroup_) {
    if (const auto st = cgroup_->read()) {
      r.cgroup = StepRecord::Cgroup{st->nr_periods - cgroup0_.nr_periods,
                                    st->nr_throttled - cgroup0_.nr_throttled,
                                    st->throttled_ns - cgroup0_.throttled_ns};
    }
  }
  if (throttle_) {
    const hwcounters::ThrottleCounts c = throttle_->read(throttle_cpus_);
    r.throttle = StepRecord::Throttle{c.core - throttle0_.core, c.package - throttle0_.package};
  }
}

}  // namespace pacer::runtime
