#pragma once
// Shared by html_page_test.cpp and html_page_test_report.cpp.
#include <string>

namespace pacer::analysis {

// Closes a script element and opens an image whose error handler would run script.
inline constexpr const char* kHostileHtml = "</script><img src=x onerror=alert(1)>";

// The run report of a log named kHostileHtml with an op named kHostileHtml (in its own file,
// html_page_test_report.cpp).
std::string hostile_report();

}  // namespace pacer::analysis
