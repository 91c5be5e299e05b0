#pragma once
// Internal to analysis/: the prose of a comparison (verdict, overview, findings, recommendation).
#include "analysis/compare.h"

namespace pacer::analysis::detail {

// Fills c.verdict, main_cause, significant, overview, findings and recommendation from the
// numbers already in `c`.
void write_words(Comparison& c, const CompareOptions& opts);

// "3.10 GHz" / "850 MHz".
std::string format_mhz(double mhz);

}  // namespace pacer::analysis::detail
