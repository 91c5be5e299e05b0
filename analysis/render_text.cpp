// Plain-text report: aligned tables, one section after another (the default of `pacer report`).
#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "analysis/report.h"
#include "analysis/report_sections.h"

namespace pacer::analysis {
namespace {

using detail::Section;
using detail::Table;

void append_table(std::string& out, const Table& t) {
  std::vector<size_t> width(t.head.size(), 0);
  for (size_t c = 0; c < t.head.size(); ++c) width[c] = t.head[c].size();
  for (const auto& row : t.rows)
    for (size_t c = 0; c < row.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], row[c].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = " ";
    for (size_t c = 0; c < width.size(); ++c) {
      const std::string& v = c < cells.size() ? cells[c] : std::string();
      s += ' ';
      if (t.numeric[c]) {
        s += std::string(width[c] - std::min(width[c], v.size()), ' ') + v;
      } else {
        s += v + std::string(width[c] - std::min(width[c], v.size()), ' ');
      }
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out += s + '\n';
  };
  line(t.head);
  size_t total = 1;
  for (size_t w : width) total += w + 1;
  out += "  " + std::string(total - 1, '-') + '\n';
  for (const auto& row : t.rows) line(row);
  if (t.omitted > 0)
    out += fmt::format("  ... {} more rows (--top 0 shows all; --format json has every row)\n",
                       t.omitted);
}

}  // namespace

std::string render_text(const Report& r, const RenderOptions& opts) {
  std::string out = fmt::format("=== pacer report: {} ===\n", r.source);
  for (const Section& s : detail::build_sections(r, opts.top)) {
    out += fmt::format("\n{}\n{}\n", s.title, std::string(s.title.size(), '='));
    size_t key_width = 0;
    for (const auto& [k, v] : s.facts) key_width = std::max(key_width, k.size());
    for (const auto& [k, v] : s.facts)
      out += fmt::format("  {:<{}}  {}\n", k + ":", key_width + 1, v);
    for (const auto& [caption, table] : s.tables) {
      if (!caption.empty()) out += fmt::format("\n {}:\n", caption);
      if (table.rows.empty()) {
        out += "  (none)\n";
        continue;
      }
      append_table(out, table);
    }
    if (!s.notes.empty() && (!s.tables.empty() || !s.facts.empty())) out += '\n';
    for (const std::string& n : s.notes) out += "  " + n + '\n';
  }
  return out;
}

Format parse_format(std::string_view s) {
  if (s == "text" || s == "txt") return Format::Text;
  if (s == "md" || s == "markdown") return Format::Markdown;
  if (s == "json") return Format::Json;
  if (s == "html") return Format::Html;
  throw std::invalid_argument(fmt::format("unknown report format '{}' (text|md|json|html)", s));
}

std::string render(const Report& r, Format f, const RenderOptions& opts) {
  switch (f) {
    case Format::Text:
      return render_text(r, opts);
    case Format::Markdown:
      return render_markdown(r, opts);
    case Format::Json:
      return render_json(r);
    case Format::Html:
      return render_html(r);
  }
  return render_text(r, opts);
}

}  // namespace pacer::analysis
