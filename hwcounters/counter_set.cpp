#include "hwcounters/counter_set.h"

#include <algorithm>

#include "hwcounters/event_table.h"
#include "hwcounters/perf_group.h"
#include "hwcounters/pfm_encoding.h"
#include "hwcounters/sched.h"

namespace pacer::hwcounters {
namespace {

std::vector<EventRequest> requests(std::span<const EventDef> defs) {
  std::vector<EventRequest> out;
  for (const EventDef& d : defs) out.push_back({std::string(d.key), std::string(d.pfm_name)});
  return out;
}

bool has_key(const std::vector<EventRequest>& v, const std::string& key) {
  return std::any_of(v.begin(), v.end(), [&](const EventRequest& r) { return r.key == key; });
}

}  // namespace

CounterSet::CounterSet(std::vector<std::unique_ptr<CounterSource>> sources,
                       std::vector<Unavailable> extra_unavailable)
    : sources_(std::move(sources)), extra_unavailable_(std::move(extra_unavailable)) {}

CounterSet CounterSet::open_for_calling_thread(const CounterSpec& spec) {
  std::vector<EventRequest> hw = requests(default_hardware_events());
  std::vector<EventRequest> sw = requests(software_events());
  std::vector<Unavailable> rejected;
  // User events go to the group their encoding says they belong to; one that does not encode is
  // rejected here with libpfm4's message.
  for (const std::string& name : spec.extra_events) {
    const EncodeResult enc = encode_event(name);
    if (!enc.ok) {
      rejected.push_back({name, "libpfm4 cannot encode " + enc.error});
      continue;
    }
    auto& group = enc.encoding.type == kPerfTypeSoftware ? sw : hw;
    if (!has_key(group, name)) group.push_back({name, name});
  }
  if (!spec.hardware) {
    for (const EventRequest& r : hw) rejected.push_back({r.key, "hardware counters disabled"});
    hw.clear();
  }

  std::vector<std::unique_ptr<CounterSource>> sources;
  bool kernel_mode = true;
  PerfGroupSource::Options opts;
  opts.use_rdpmc = spec.use_rdpmc;
  if (!hw.empty()) {
    auto g = PerfGroupSource::open_for_calling_thread("perf_hardware", hw, opts);
    for (const Unavailable& u : g->unavailable()) rejected.push_back(u);
    if (!g->keys().empty()) {
      kernel_mode = g->counts_kernel();
      sources.push_back(std::move(g));
    }
  }
  // Software events keep their own scope: user-only context-switches never count (the switch
  // happens in kernel mode), so they fall back to user mode only if the kernel insists.
  opts.count_kernel = true;
  auto s = PerfGroupSource::open_for_calling_thread("perf_software", sw, opts);
  const bool software_kernel_mode = s->counts_kernel();
  for (const Unavailable& u : s->unavailable()) rejected.push_back(u);
  const bool have_task_clock =
      std::find(s->keys().begin(), s->keys().end(), "task_clock_ns") != s->keys().end();
  if (!s->keys().empty()) sources.push_back(std::move(s));
  if (!have_task_clock) {
    // perf_event_open refused even software events (seccomp, paranoid 3, no perf in the kernel):
    // the thread CPU clock still gives on-CPU time.
    rejected.erase(std::remove_if(rejected.begin(), rejected.end(),
                                  [](const Unavailable& u) { return u.event == "task_clock_ns"; }),
                   rejected.end());
    sources.push_back(std::make_unique<ThreadClockSource>());
  }
  if (spec.schedstat) {
    std::string why;
    auto sched = SchedstatSource::open_for_calling_thread(&why);
    if (sched) {
      sources.push_back(std::move(sched));
    } else {
      rejected.push_back({"runq_ns", why});
    }
  }
  CounterSet set(std::move(sources), std::move(rejected));
  set.kernel_mode_ = kernel_mode;
  set.software_kernel_mode_ = software_kernel_mode;
  return set;
}

CounterSetStatus CounterSet::status() const {
  CounterSetStatus st;
  st.kernel_mode = kernel_mode_;
  st.software_kernel_mode = software_kernel_mode_;
  bool hardware = false, software = false;
  for (const auto& src : sources_) {
    for (const std::string& k : src->keys()) st.live.push_back(k);
    for (const Unavailable& u : src->unavailable()) st.unavailable.push_back(u);
    hardware = hardware || src->name() == "perf_hardware";
    software = software || src->name() == "perf_software";
    if (!st.read.empty()) st.read += "+";
    st.read += src->read_method();
  }
  // Unavailable entries of sources that opened are already in their lists; add those that never
  // became a source, without duplicates.
  for (const Unavailable& u : extra_unavailable_) {
    const bool dup = std::any_of(st.unavailable.begin(), st.unavailable.end(),
                                 [&](const Unavailable& x) { return x.event == u.event; });
    if (!dup) st.unavailable.push_back(u);
  }
  st.mode = hardware ? "hardware" : software ? "software" : "clock";
  return st;
}

}  // namespace pacer::hwcounters
