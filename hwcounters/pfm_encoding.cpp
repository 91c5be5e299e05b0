#include "hwcounters/pfm_encoding.h"

#include <perfmon/pfmlib_perf_event.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

namespace pacer::hwcounters {
namespace {

// libpfm4 keeps its own process-wide tables; initialising them twice is harmless but wasteful,
// so the result of the one pfm_initialize() call is cached here.
struct PfmInit {
  int rc = PFM_ERR_NOINIT;
};

const PfmInit& pfm_init() {
  static PfmInit init;
  static std::once_flag once;
  std::call_once(once, [] { init.rc = pfm_initialize(); });
  return init;
}

}  // namespace

bool pfm_ready(std::string* why) {
  const int rc = pfm_init().rc;
  if (rc == PFM_SUCCESS) return true;
  if (why) *why = fmt::format("libpfm4 pfm_initialize failed: {}", pfm_strerror(rc));
  return false;
}

EncodeResult encode_event(std::string_view name) {
  EncodeResult r;
  std::string why;
  if (!pfm_ready(&why)) {
    r.error = fmt::format("{}: {}", name, why);
    return r;
  }
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  pfm_perf_encode_arg_t arg;
  std::memset(&arg, 0, sizeof arg);
  arg.attr = &attr;
  arg.size = sizeof arg;
  char* fstr = nullptr;
  arg.fstr = &fstr;
  const std::string name_z(name);
  const int rc =
      pfm_get_os_event_encoding(name_z.c_str(), PFM_PLM0 | PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &arg);
  if (rc != PFM_SUCCESS) {
    r.error = fmt::format("{}: {}", name, pfm_strerror(rc));
    std::free(fstr);
    return r;
  }
  r.ok = true;
  r.encoding.type = attr.type;
  r.encoding.config = attr.config;
  r.encoding.config1 = attr.config1;
  r.encoding.config2 = attr.config2;
  r.encoding.exclude_user = attr.exclude_user;
  r.encoding.exclude_kernel = attr.exclude_kernel;
  r.encoding.exclude_hv = attr.exclude_hv;
  if (fstr) r.encoding.fstr = fstr;
  std::free(fstr);
  return r;
}

std::vector<PmuDescription> detected_pmus() {
  std::vector<PmuDescription> out;
  if (!pfm_ready()) return out;
  for (int p = PFM_PMU_NONE; p < PFM_PMU_MAX; ++p) {
    pfm_pmu_info_t info;
    std::memset(&info, 0, sizeof info);
    info.size = sizeof info;
    if (pfm_get_pmu_info(static_cast<pfm_pmu_t>(p), &info) != PFM_SUCCESS || !info.is_present) {
      continue;
    }
    out.push_back({info.name ? info.name : "", info.desc ? info.desc : "",
                   info.type == PFM_PMU_TYPE_CORE, info.nevents});
  }
  return out;
}

std::vector<std::string> pmu_event_names(std::string_view pmu, int max) {
  std::vector<std::string> out;
  if (!pfm_ready()) return out;
  for (int p = PFM_PMU_NONE; p < PFM_PMU_MAX && static_cast<int>(out.size()) < max; ++p) {
    pfm_pmu_info_t info;
    std::memset(&info, 0, sizeof info);
    info.size = sizeof info;
    if (pfm_get_pmu_info(static_cast<pfm_pmu_t>(p), &info) != PFM_SUCCESS || !info.is_present ||
        !info.name || pmu != info.name) {
      continue;
    }
    for (int e = info.first_event; e != -1 && static_cast<int>(out.size()) < max;
         e = pfm_get_event_next(e)) {
      pfm_event_info_t ev;
      std::memset(&ev, 0, sizeof ev);
      ev.size = sizeof ev;
      if (pfm_get_event_info(e, PFM_OS_NONE, &ev) == PFM_SUCCESS && ev.name) {
        out.push_back(fmt::format("{}::{}", info.name, ev.name));
      }
    }
  }
  return out;
}

}  // namespace pacer::hwcounters
