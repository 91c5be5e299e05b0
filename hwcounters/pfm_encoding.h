#pragma once
// Event names -> perf_event_attr fields, through libpfm4 (pfm_get_os_event_encoding with
// PFM_OS_PERF_EVENT_EXT). Encoding needs no PMU access: libpfm4 knows the CPU's PMU tables from
// CPUID, and perf's generic names ("cycles", "task-clock") always encode, so this works (and is
// tested) even where perf_event_open of hardware events is refused.
//
// This header deliberately exposes no libpfm4/perf types: libpfm4 ships its own perf_event.h that
// clashes with <linux/perf_event.h>.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pacer::hwcounters {

// perf_event_attr.type values pacer cares about (same numbers as the kernel ABI).
inline constexpr uint32_t kPerfTypeHardware = 0;
inline constexpr uint32_t kPerfTypeSoftware = 1;
inline constexpr uint32_t kPerfTypeHwCache = 3;
inline constexpr uint32_t kPerfTypeRaw = 4;

struct EventEncoding {
  uint32_t type = 0;
  uint64_t config = 0, config1 = 0, config2 = 0;
  bool exclude_user = false, exclude_kernel = false, exclude_hv = false;
  std::string
      fstr;  // libpfm4's fully qualified name, e.g. "perf::PERF_COUNT_HW_CPU_CYCLES:u=1:k=1"
};

struct EncodeResult {
  bool ok = false;
  EventEncoding encoding;
  std::string error;  // "<name>: <libpfm4 message>" when !ok
};

// Counts user and kernel mode unless the name carries its own modifiers (":u", ":k").
EncodeResult encode_event(std::string_view name);

// pfm_initialize, once per process; false (and the reason) if libpfm4 cannot start.
bool pfm_ready(std::string* why = nullptr);

struct PmuDescription {
  std::string name;  // "spr", "perf", "rapl", ...
  std::string desc;
  bool core = false;  // a CPU core PMU (not uncore/OS)
  int nevents = 0;
};

// PMUs libpfm4 detected on this machine (from CPUID; present even when the kernel exposes none).
std::vector<PmuDescription> detected_pmus();
// Up to `max` fully qualified event names ("spr::INST_RETIRED") of a detected PMU.
std::vector<std::string> pmu_event_names(std::string_view pmu, int max);

}  // namespace pacer::hwcounters
