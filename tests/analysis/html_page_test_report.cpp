// The run report of html_page_test.cpp's hostile log (see there).
#include <sstream>
#include <string>

#include "analysis/report.h"
#include "event_log_testlog.h"
#include "html_page_test.h"

namespace pacer::analysis {

std::string hostile_report() {
  testlog::SyntheticRun run;
  run.n_decode = 6;
  std::ostringstream s;
  testlog::write_synthetic(s, run);
  std::string log = s.str();
  const std::string op = "\"output_norm\"";
  // Appended in place: g++ 12 at -O1 misreads `std::string("\"") + ... + "\""` as an overflow
  // (-Warray-bounds, GCC bug 105329).
  std::string hostile = "\"";
  hostile.append(kHostileHtml).append("\"");
  for (size_t at = 0; (at = log.find(op, at)) != std::string::npos; at += hostile.size())
    log.replace(at, op.size(), hostile);
  return render_html(build_report_from_text(log, kHostileHtml));
}

}  // namespace pacer::analysis
