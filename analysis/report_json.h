#pragma once
// The report as a JSON value (render_json.cpp); the HTML renderer embeds it for its plots.
#include <nlohmann/json.hpp>

#include "analysis/report.h"

namespace pacer::analysis::detail {

nlohmann::json report_json(const Report& r);
nlohmann::json dist_json(const Dist& d);
nlohmann::json cpu_json(const CpuMetrics& c);
nlohmann::json steps_json(const Report& r);

}  // namespace pacer::analysis::detail
