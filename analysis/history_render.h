#pragma once
// `pacer history`: stored runs (history_db.h) as a table (text, Markdown, CSV, JSON), as a
// self-contained HTML page with a trend plot per (host, model, test), or as OpenMetrics text for
// the Prometheus node_exporter textfile collector (the latest run of every series).
#include <string>
#include <string_view>
#include <vector>

#include "analysis/history_db.h"

namespace pacer::analysis {

enum class HistoryFormat { Text, Markdown, Csv, Json, Html, OpenMetrics };
// text|txt, md|markdown, csv, json, html, openmetrics|prom; throws std::invalid_argument.
HistoryFormat parse_history_format(std::string_view s);

std::string render_history(const std::vector<StoredRun>& runs, HistoryFormat f);
std::string render_history_text(const std::vector<StoredRun>& runs);
std::string render_history_markdown(const std::vector<StoredRun>& runs);
std::string render_history_csv(const std::vector<StoredRun>& runs);
std::string render_history_json(const std::vector<StoredRun>& runs);
// One <figure class="trend"> per (host, model, type, test) with two SVG panels over time: mean
// tok/s (with the min-max of the repetitions) and mean clock (MHz), one line per thread count.
// Static SVG, no script, no external resource.
std::string render_history_html(const std::vector<StoredRun>& runs);
// Gauges per series (host, model, type, test, threads, pin) from its latest run, no timestamps
// (the textfile collector refuses them; pacer_bench_run_timestamp_seconds says when), ending in
// "# EOF".
std::string render_history_openmetrics(const std::vector<StoredRun>& runs);

// One stored run's per-op summary (phase, op, count, mean/p50/p95 time, MHz, GB/s, off-CPU
// share): text, md, csv or json (html and openmetrics: std::invalid_argument).
std::string render_op_summary(const StoredRun& run, const std::vector<OpSummary>& ops,
                              HistoryFormat f);

}  // namespace pacer::analysis
