#pragma once
// The report as a list of titled sections of key/value lines and tables, built once and laid out
// by the text, Markdown and HTML renderers (internal to analysis/render_*.cpp).
#include <optional>
#include <string>
#include <vector>

#include "analysis/report.h"

namespace pacer::analysis::detail {

struct Table {
  std::vector<std::string> head;
  std::vector<bool> numeric;  // right-aligned columns
  std::vector<std::vector<std::string>> rows;
  int64_t omitted = 0;  // rows left out by RenderOptions::top
};

struct Section {
  std::string id;  // stable anchor: "run", "phases", ...
  std::string title;
  std::vector<std::pair<std::string, std::string>> facts;  // key: value lines
  std::vector<std::pair<std::string, Table>> tables;       // optional caption, table
  std::vector<std::string> notes;                          // free lines after the tables
};

// top: rows per long table (0: all).
std::vector<Section> build_sections(const Report& r, int top);

// Formatting shared by the renderers.
std::string fmt_ms(double ns);                                          // "12.345"
std::string fmt_us(double ns);                                          // "12.3"
std::string fmt_opt(const std::optional<double>& v, const char* spec);  // "-" when absent
std::string op_label(const OpRow& row);  // "decode :: block_3 :: attn_qkv"

}  // namespace pacer::analysis::detail
