// Markdown report: the same sections as the text report, as GitHub-flavoured tables.
#include <fmt/format.h>

#include "analysis/report.h"
#include "analysis/report_sections.h"

namespace pacer::analysis {

std::string render_markdown(const Report& r, const RenderOptions& opts) {
  auto esc = [](const std::string& s) {
    std::string o;
    for (char c : s) {
      if (c == '|')
        o += "\\|";
      else if (c == '\n')
        o += ' ';
      else
        o += c;
    }
    return o;
  };
  std::string out = fmt::format("# pacer report: `{}`\n", r.source);
  for (const detail::Section& s : detail::build_sections(r, opts.top)) {
    out += fmt::format("\n## {}\n\n", s.title);
    for (const auto& [k, v] : s.facts) out += fmt::format("- **{}**: {}\n", esc(k), esc(v));
    for (const auto& [caption, t] : s.tables) {
      if (!caption.empty()) out += fmt::format("\n### {}\n", caption);
      out += '\n';
      if (t.rows.empty()) {
        out += "_(none)_\n";
        continue;
      }
      out += "|";
      for (const std::string& h : t.head) out += fmt::format(" {} |", esc(h));
      out += "\n|";
      for (size_t c = 0; c < t.head.size(); ++c) out += t.numeric[c] ? "---:|" : "---|";
      out += '\n';
      for (const auto& row : t.rows) {
        out += "|";
        for (size_t c = 0; c < t.head.size(); ++c)
          out += fmt::format(" {} |", esc(c < row.size() ? row[c] : std::string()));
        out += '\n';
      }
      if (t.omitted > 0) out += fmt::format("\n_{} more rows: `--top 0` shows all._\n", t.omitted);
    }
    if (!s.notes.empty()) out += '\n';
    for (const std::string& n : s.notes) {
      if (n.starts_with("    - ")) {
        out += fmt::format("  - {}\n", esc(n.substr(6)));
      } else {
        out += fmt::format("- {}\n", esc(n));
      }
    }
  }
  return out;
}

}  // namespace pacer::analysis
