// `pacer history` as text, Markdown, CSV, JSON and OpenMetrics (history_render.h); the HTML page
// is in history_render_html.cpp.
#include "analysis/history_render.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace pacer::analysis {
namespace {

std::string num(double v, int digits) {
  return std::isfinite(v) && v != 0 ? fmt::format("{:.{}f}", v, digits) : "-";
}

std::string short_sha(const std::string& sha) {
  return sha.substr(0, 12);
}

// The table both text and Markdown print.
struct Table {
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> numeric;  // right-aligned
};

Table history_table(const std::vector<StoredRun>& runs) {
  Table t;
  t.head = {"time (UTC)", "host", "model", "type", "test",   "t",      "pin",
            "tok/s",      "± sd", "cv %",  "MHz",  "roof %", "commit", "run"};
  t.numeric = {false, false, false, false, false, true,  false,
               true,  true,  true,  true,  true,  false, false};
  for (const StoredRun& s : runs) {
    const BenchRecord& r = s.record;
    t.rows.push_back({r.time_utc, r.host, r.model_name.empty() ? r.model_path : r.model_name,
                      r.type, r.test, std::to_string(r.threads), r.pin, num(r.tok_s_mean, 2),
                      num(r.tok_s_sd, 2), num(100 * r.cv, 1), num(r.freq_mean_mhz, 0),
                      num(r.roofline_pct, 1), short_sha(r.git_sha), r.run_uuid.substr(0, 8)});
    if (!r.flags.empty()) t.rows.back()[4] += "*";  // a flagged row: see --format json/csv
  }
  return t;
}

// Columns padded to their widest cell ('±' counts as one character), two spaces apart.
std::string aligned(const Table& t) {
  auto shown = [](const std::string& s) { return s.size() - (s.find("±") != std::string::npos); };
  std::vector<size_t> width(t.head.size());
  for (size_t c = 0; c < t.head.size(); ++c) {
    width[c] = shown(t.head[c]);
    for (const auto& row : t.rows) width[c] = std::max(width[c], shown(row[c]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string o;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - std::min(width[c], shown(cells[c])), ' ');
      if (c) o += "  ";
      o += t.numeric[c] ? pad + cells[c] : cells[c] + (c + 1 < cells.size() ? pad : "");
    }
    return o + "\n";
  };
  std::string out = line(t.head);
  for (const auto& row : t.rows) out += line(row);
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) {
    if (c == '"') o.push_back('"');
    o.push_back(c);
  }
  return o + "\"";
}

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string o;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) o += sep;
    o += v[i];
  }
  return o;
}

std::string csv_number(double v) {
  return std::isfinite(v) ? fmt::format("{}", v) : "";
}

nlohmann::json json_number(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

// OpenMetrics label value: backslash, double quote and newline escaped.
std::string label_value(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\\' || c == '"') {
      o.push_back('\\');
      o.push_back(c);
    } else if (c == '\n') {
      o += "\\n";
    } else {
      o.push_back(c);
    }
  }
  return o;
}

// Seconds since the epoch of "YYYY-MM-DDTHH:MM:SSZ" (the form bench writes); NaN otherwise.
double epoch_seconds(const std::string& iso) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%d", &y, &mo, &d, &h, &mi, &s) != 6)
    return std::nan("");
  // Days from civil (H. Hinnant's algorithm).
  y -= mo <= 2;
  const int era = (y >= 0 ? y : y - 399) / 400;
  const int yoe = y - era * 400;
  const int doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const double days = static_cast<double>(era) * 146097 + doe - 719468;
  return days * 86400 + h * 3600 + mi * 60 + s;
}

// One line per host whose CPU changed between two of its runs (oldest first, as listed): the
// brand or the signature, where both runs recorded one. A rate that steps there is the CPU's.
std::vector<std::string> cpu_changes(const std::vector<StoredRun>& runs) {
  std::map<std::string, const BenchRecord*> last;  // per host
  std::vector<std::string> out;
  for (const StoredRun& s : runs) {
    const BenchRecord& r = s.record;
    const BenchRecord*& prev = last[r.host];
    if (prev && !same_cpu(*prev, r)) {
      out.push_back(fmt::format("CPU changed on {} at {} (run {}): {} -> {}", r.host, r.time_utc,
                                r.run_uuid.substr(0, 8), cpu_label(*prev), cpu_label(r)));
    }
    // An unsigned row (schema 1) matches either side: keep the last one that names its CPU.
    if (!prev || !r.cpu_signature.empty() || prev->cpu_signature.empty()) prev = &r;
  }
  return out;
}

}  // namespace

HistoryFormat parse_history_format(std::string_view s) {
  if (s == "text" || s == "txt") return HistoryFormat::Text;
  if (s == "md" || s == "markdown") return HistoryFormat::Markdown;
  if (s == "csv") return HistoryFormat::Csv;
  if (s == "json") return HistoryFormat::Json;
  if (s == "html") return HistoryFormat::Html;
  if (s == "openmetrics" || s == "prom") return HistoryFormat::OpenMetrics;
  throw std::invalid_argument(
      fmt::format("unknown history format '{}' (text, md, csv, json, html, openmetrics)", s));
}

std::string render_history(const std::vector<StoredRun>& runs, HistoryFormat f) {
  switch (f) {
    case HistoryFormat::Text:
      return render_history_text(runs);
    case HistoryFormat::Markdown:
      return render_history_markdown(runs);
    case HistoryFormat::Csv:
      return render_history_csv(runs);
    case HistoryFormat::Json:
      return render_history_json(runs);
    case HistoryFormat::Html:
      return render_history_html(runs);
    case HistoryFormat::OpenMetrics:
      return render_history_openmetrics(runs);
  }
  return {};
}

std::string render_history_text(const std::vector<StoredRun>& runs) {
  if (runs.empty()) return "no runs match\n";
  std::string out = aligned(history_table(runs));
  size_t flagged = 0;
  for (const StoredRun& s : runs) flagged += !s.record.flags.empty();
  out += fmt::format("{} run{}", runs.size(), runs.size() == 1 ? "" : "s");
  if (flagged) out += fmt::format("; * = flagged ({}), see --format json for the reasons", flagged);
  out += "\n";
  for (const std::string& line : cpu_changes(runs)) out += line + "\n";
  return out;
}

std::string render_history_markdown(const std::vector<StoredRun>& runs) {
  if (runs.empty()) return "_no runs match_\n";
  const Table t = history_table(runs);
  std::string out = "| " + join(t.head, " | ") + " |\n|";
  for (size_t c = 0; c < t.head.size(); ++c) out += t.numeric[c] ? "---:|" : "---|";
  out += "\n";
  for (auto row : t.rows) {
    for (auto& cell : row) {
      std::string e;
      for (char ch : cell) e += ch == '|' ? std::string("\\|") : std::string(1, ch);
      cell = e;
    }
    out += "| " + join(row, " | ") + " |\n";
  }
  const std::vector<std::string> changes = cpu_changes(runs);
  if (!changes.empty()) out += "\n";
  for (const std::string& line : changes) out += "- " + line + "\n";
  return out;
}

std::string render_history_csv(const std::vector<StoredRun>& runs) {
  std::string out =
      "run_uuid,time_utc,host,host_id,cpu_model,cpu_signature,kernel,governor,microcode,pacer_"
      "version,git_sha,"
      "model_name,model_path,model_hash,model_bytes,params,arch,type,kv_type,test,n_prompt,n_gen,"
      "n_depth,threads,pin,cpus,tok_s,tok_s_mean,tok_s_sd,cv,freq_min_mhz,freq_mean_mhz,"
      "freq_max_mhz,bandwidth_gbs,roofline_pct,kernel_ceiling_tok_s,flags,has_log\n";
  for (const StoredRun& s : runs) {
    const BenchRecord& r = s.record;
    std::vector<std::string> cpus, rates;
    for (int c : r.cpus) cpus.push_back(std::to_string(c));
    for (double v : r.tok_s) rates.push_back(csv_number(v));
    const std::vector<std::string> f = {r.run_uuid,
                                        r.time_utc,
                                        r.host,
                                        r.host_id,
                                        r.cpu_model,
                                        r.cpu_signature,
                                        r.kernel,
                                        r.governor,
                                        r.microcode,
                                        r.pacer_version,
                                        r.git_sha,
                                        r.model_name,
                                        r.model_path,
                                        r.model_hash,
                                        std::to_string(r.model_bytes),
                                        std::to_string(r.params),
                                        r.arch,
                                        r.type,
                                        r.kv_type,
                                        r.test,
                                        std::to_string(r.n_prompt),
                                        std::to_string(r.n_gen),
                                        std::to_string(r.n_depth),
                                        std::to_string(r.threads),
                                        r.pin,
                                        join(cpus, ";"),
                                        join(rates, ";"),
                                        csv_number(r.tok_s_mean),
                                        csv_number(r.tok_s_sd),
                                        csv_number(r.cv),
                                        csv_number(r.freq_min_mhz),
                                        csv_number(r.freq_mean_mhz),
                                        csv_number(r.freq_max_mhz),
                                        csv_number(r.bandwidth_gbs),
                                        csv_number(r.roofline_pct),
                                        csv_number(r.kernel_ceiling_tok_s),
                                        join(r.flags, ";"),
                                        s.has_log ? "1" : "0"};
    std::vector<std::string> quoted;
    for (const auto& v : f) quoted.push_back(csv_field(v));
    out += join(quoted, ",") + "\n";
  }
  return out;
}

std::string render_history_json(const std::vector<StoredRun>& runs) {
  nlohmann::json arr = nlohmann::json::array();
  for (const StoredRun& s : runs) {
    const BenchRecord& r = s.record;
    nlohmann::json rates = nlohmann::json::array();
    for (double v : r.tok_s) rates.push_back(json_number(v));
    arr.push_back({{"run_uuid", r.run_uuid},
                   {"time_utc", r.time_utc},
                   {"host", r.host},
                   {"host_id", r.host_id},
                   {"cpu_model", r.cpu_model},
                   {"cpu_signature", r.cpu_signature},
                   {"kernel", r.kernel},
                   {"governor", r.governor},
                   {"microcode", r.microcode},
                   {"pacer_version", r.pacer_version},
                   {"git_sha", r.git_sha},
                   {"model_name", r.model_name},
                   {"model_path", r.model_path},
                   {"model_hash", r.model_hash},
                   {"model_bytes", r.model_bytes},
                   {"params", r.params},
                   {"arch", r.arch},
                   {"type", r.type},
                   {"kv_type", r.kv_type},
                   {"test", r.test},
                   {"n_prompt", r.n_prompt},
                   {"n_gen", r.n_gen},
                   {"n_depth", r.n_depth},
                   {"threads", r.threads},
                   {"pin", r.pin},
                   {"cpus", r.cpus},
                   {"tok_s", rates},
                   {"tok_s_mean", json_number(r.tok_s_mean)},
                   {"tok_s_sd", json_number(r.tok_s_sd)},
                   {"cv", json_number(r.cv)},
                   {"freq_min_mhz", json_number(r.freq_min_mhz)},
                   {"freq_mean_mhz", json_number(r.freq_mean_mhz)},
                   {"freq_max_mhz", json_number(r.freq_max_mhz)},
                   {"bandwidth_gbs", json_number(r.bandwidth_gbs)},
                   {"roofline_pct", json_number(r.roofline_pct)},
                   {"kernel_ceiling_tok_s", json_number(r.kernel_ceiling_tok_s)},
                   {"flags", r.flags},
                   {"has_log", s.has_log}});
  }
  return arr.dump(2) + "\n";
}

std::string render_op_summary(const StoredRun& run, const std::vector<OpSummary>& ops,
                              HistoryFormat f) {
  auto opt = [](const std::optional<double>& v, int digits) {
    return v ? num(*v, digits) : std::string("-");
  };
  if (f == HistoryFormat::Json) {
    nlohmann::json arr = nlohmann::json::array();
    auto opt_json = [](const std::optional<double>& v) {
      return v ? json_number(*v) : nlohmann::json(nullptr);
    };
    for (const OpSummary& o : ops) {
      arr.push_back({{"phase", o.phase},
                     {"op", o.op},
                     {"count", o.count},
                     {"mean_ns", json_number(o.mean_ns)},
                     {"p50_ns", json_number(o.p50_ns)},
                     {"p95_ns", json_number(o.p95_ns)},
                     {"mean_mhz", opt_json(o.mean_mhz)},
                     {"gbs", opt_json(o.gbs)},
                     {"offcpu_share", opt_json(o.offcpu_share)}});
    }
    return nlohmann::json{{"run_uuid", run.record.run_uuid}, {"ops", arr}}.dump(2) + "\n";
  }
  if (f == HistoryFormat::Csv) {
    std::string out = "phase,op,count,mean_ns,p50_ns,p95_ns,mean_mhz,gbs,offcpu_share\n";
    auto c = [](const std::optional<double>& v) { return v ? csv_number(*v) : std::string(); };
    for (const OpSummary& o : ops) {
      out += fmt::format("{},{},{},{},{},{},{},{},{}\n", csv_field(o.phase), csv_field(o.op),
                         o.count, csv_number(o.mean_ns), csv_number(o.p50_ns), csv_number(o.p95_ns),
                         c(o.mean_mhz), c(o.gbs), c(o.offcpu_share));
    }
    return out;
  }
  if (f != HistoryFormat::Text && f != HistoryFormat::Markdown) {
    throw std::invalid_argument("the per-op summary is text, md, csv or json");
  }
  Table t;
  t.head = {"phase", "op", "count", "mean us", "p50 us", "p95 us", "MHz", "GB/s", "off-CPU %"};
  t.numeric = {false, false, true, true, true, true, true, true, true};
  for (const OpSummary& o : ops) {
    t.rows.push_back({o.phase, o.op, std::to_string(o.count), num(o.mean_ns / 1e3, 2),
                      num(o.p50_ns / 1e3, 2), num(o.p95_ns / 1e3, 2), opt(o.mean_mhz, 0),
                      opt(o.gbs, 2),
                      o.offcpu_share ? fmt::format("{:.1f}", 100 * *o.offcpu_share) : "-"});
  }
  const BenchRecord& r = run.record;
  const std::string title =
      fmt::format("run {} ({}, {}, {} {}, {}, {} thread{}, pin {})", r.run_uuid, r.time_utc, r.host,
                  r.model_name, r.type, r.test, r.threads, r.threads == 1 ? "" : "s", r.pin);
  if (f == HistoryFormat::Markdown) {
    std::string out = "**" + title + "**\n\n| " + join(t.head, " | ") + " |\n|";
    for (size_t c = 0; c < t.head.size(); ++c) out += t.numeric[c] ? "---:|" : "---|";
    out += "\n";
    for (const auto& row : t.rows) out += "| " + join(row, " | ") + " |\n";
    return out;
  }
  return title + "\n" + aligned(t);
}

std::string render_history_openmetrics(const std::vector<StoredRun>& runs) {
  // The latest run of each series (runs come oldest first, so the last one seen wins).
  using Key = std::tuple<std::string, std::string, std::string, std::string, int, std::string>;
  std::map<Key, const StoredRun*> latest;
  for (const StoredRun& s : runs) {
    const BenchRecord& r = s.record;
    latest[{r.host, r.model_name.empty() ? r.model_path : r.model_name, r.type, r.test, r.threads,
            r.pin}] = &s;
  }
  auto labels = [](const Key& k) {
    return fmt::format(R"(host="{}",model="{}",type="{}",test="{}",threads="{}",pin="{}")",
                       label_value(std::get<0>(k)), label_value(std::get<1>(k)),
                       label_value(std::get<2>(k)), label_value(std::get<3>(k)), std::get<4>(k),
                       label_value(std::get<5>(k)));
  };
  struct Family {
    const char* name;
    const char* unit;  // "" when the value has no unit
    const char* help;
    double (*value)(const BenchRecord&);
  };
  static const Family kFamilies[] = {
      {"pacer_bench_tokens_per_second", "",
       "Mean tokens per second over the repetitions of the latest pacer bench run.",
       [](const BenchRecord& r) { return r.tok_s_mean; }},
      {"pacer_bench_tokens_per_second_sd", "",
       "Sample standard deviation of tokens per second over the repetitions.",
       [](const BenchRecord& r) { return r.tok_s_sd; }},
      {"pacer_bench_cv_ratio", "ratio", "Coefficient of variation of tokens per second.",
       [](const BenchRecord& r) { return r.cv; }},
      {"pacer_bench_cpu_frequency_hertz", "hertz",
       "Mean effective clock of the workers' CPUs during the repetitions.",
       [](const BenchRecord& r) { return r.freq_mean_mhz > 0 ? r.freq_mean_mhz * 1e6 : NAN; }},
      {"pacer_bench_roofline_ratio", "ratio",
       "Decode tokens per second as a share of the memory-bandwidth roofline.",
       [](const BenchRecord& r) { return r.roofline_pct > 0 ? r.roofline_pct / 100 : NAN; }},
      {"pacer_bench_kernel_ceiling_tokens_per_second", "",
       "Decode matmul kernels' rate with their weights in cache, on the run's threads.",
       [](const BenchRecord& r) {
         return r.kernel_ceiling_tok_s > 0 ? r.kernel_ceiling_tok_s : NAN;
       }},
      {"pacer_bench_flags", "", "Reasons not to trust the run (noisy, drifting clock, ...).",
       [](const BenchRecord& r) { return static_cast<double>(r.flags.size()); }},
      {"pacer_bench_run_timestamp_seconds", "seconds",
       "When the latest run started, seconds since the Unix epoch.",
       [](const BenchRecord& r) { return epoch_seconds(r.time_utc); }},
  };
  std::string out;
  for (const Family& f : kFamilies) {
    std::string samples;
    for (const auto& [key, run] : latest) {
      const double v = f.value(run->record);
      if (!std::isfinite(v)) continue;
      samples += fmt::format("{}{{{}}} {}\n", f.name, labels(key), v);
    }
    if (samples.empty()) continue;
    out += fmt::format("# TYPE {} gauge\n", f.name);
    if (*f.unit) out += fmt::format("# UNIT {} {}\n", f.name, f.unit);
    out += fmt::format("# HELP {} {}\n", f.name, f.help);
    out += samples;
  }
  if (!latest.empty()) {
    out += "# TYPE pacer_bench_run_labels gauge\n";
    out += "# HELP pacer_bench_run_labels Facts of the latest run of each series (value 1).\n";
    for (const auto& [key, run] : latest) {
      const BenchRecord& r = run->record;
      out += fmt::format(
          "pacer_bench_run_labels{{{},run_uuid=\"{}\",pacer_version=\"{}\",git_sha=\"{}\","
          "cpu_model=\"{}\",cpu_signature=\"{}\",kernel=\"{}\",governor=\"{}\",microcode=\"{}\"}} "
          "1\n",
          labels(key), label_value(r.run_uuid), label_value(r.pacer_version),
          label_value(r.git_sha), label_value(r.cpu_model), label_value(r.cpu_signature),
          label_value(r.kernel), label_value(r.governor), label_value(r.microcode));
    }
  }
  return out + "# EOF\n";
}

}  // namespace pacer::analysis
