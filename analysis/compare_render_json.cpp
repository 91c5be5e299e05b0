// JSON rendering of a Comparison: every number the other renderers show, unrounded, in stored
// units (ns, MHz, counts; β in % of the cycle). NaN / infinity become null.
#include <cmath>

#include <nlohmann/json.hpp>

#include "analysis/compare_render.h"

namespace pacer::analysis {
namespace {

using Json = nlohmann::ordered_json;

Json num(double v) {
  return std::isfinite(v) ? Json(v) : Json(nullptr);
}

Json summary_json(const stats::Summary& s) {
  return Json{{"n", s.n}, {"mean", num(s.mean)}, {"sd", num(s.sd())}};
}

Json pair_json(const std::array<double, 2>& v) {
  return Json::array({num(v[0]), num(v[1])});
}

Json parts_json(const std::array<double, kPartCount>& parts) {
  Json j = Json::object();
  for (int p = 0; p < kPartCount; ++p)
    j[std::string(part_name(static_cast<Part>(p)))] = num(parts[p]);
  return j;
}

std::string_view level_name(SplitLevel l) {
  switch (l) {
    case SplitLevel::Counters:
      return "counters";
    case SplitLevel::Frequency:
      return "frequency";
    case SplitLevel::OnCpu:
      return "oncpu";
    case SplitLevel::None:
      return "none";
  }
  return "none";
}

std::string_view flag_name(FlagKind k) {
  switch (k) {
    case FlagKind::FrequencyDrop:
      return "frequency_drop";
    case FlagKind::RunQueue:
      return "run_queue";
    case FlagKind::IpcLoss:
      return "ipc_loss";
    case FlagKind::Instructions:
      return "instructions";
  }
  return "?";
}

Json cycles_json(const CycleStats& c) {
  return Json{
      {"n", c.ms.n},          {"mean_ms", num(c.ms.mean)}, {"sd_ms", num(c.ms.sd())},
      {"min_ms", num(c.min)}, {"p50_ms", num(c.p50)},      {"p90_ms", num(c.p90)},
      {"p99_ms", num(c.p99)}, {"max_ms", num(c.max)},      {"sorted_desc_ms", c.sorted_desc_ms}};
}

}  // namespace

std::string render_json(const Comparison& c, const CompareRenderOptions& ro) {
  Json j;
  j["type"] = "pacer_compare";
  j["schema"] = 1;
  j["runs"] = Json::array();
  for (int i = 0; i < 2; ++i) {
    j["runs"].push_back(
        {{"label", c.label[i]},
         {"path", c.path[i]},
         {"model", {{"arch", c.header[i].model.arch}, {"type", c.header[i].model.type}}},
         {"cpu_model", c.header[i].host.cpu_model},
         {"counters_mode", c.header[i].counters.mode},
         {"frequency_source", c.header[i].frequency.source},
         {"cycles", cycles_json(c.cycles[i])},
         {"step_ms", c.step_ms[i]},
         {"step_freq_mhz", Json::array()},
         {"notes", c.notes[i]}});
    for (double f : c.step_freq_mhz[i]) j["runs"][i]["step_freq_mhz"].push_back(num(f));
  }
  j["compatibility"] = {
      {"forced", c.forced}, {"errors", c.compat.errors}, {"warnings", c.compat.warnings}};
  j["verdict"] = c.verdict;
  j["significant"] = c.significant;
  j["main_cause"] = c.main_cause ? Json(std::string(part_name(*c.main_cause))) : Json(nullptr);
  j["main_cause_pts"] = num(c.main_cause_pts);
  j["leading_cause"] = leading_cause(c);
  j["steal_ns"] = pair_json(c.steal_ns);
  j["steal_scope"] = c.steal_scope;
  j["membw_contention"] = c.membw_contention;
  j["stream_gbs"] = pair_json(c.stream_gbs);
  j["delta_pct"] = num(c.delta_pct());
  j["step_test"] = {{"welch_t", num(c.step_welch.t)}, {"welch_df", num(c.step_welch.df)},
                    {"welch_p", num(c.step_welch.p)}, {"u", num(c.step_u.u)},
                    {"u_p", num(c.step_u.p)},         {"u_exact", c.step_u.exact}};
  j["flags"] = Json::array();
  for (const Flag& f : c.flags)
    j["flags"].push_back({{"kind", flag_name(f.kind)},
                          {"text", f.text},
                          {"devices", f.devices},
                          {"op", f.op},
                          {"pct_change", num(f.pct_change)}});
  const Attribution& a = c.attribution;
  Json attr = {{"mean_step_ns", pair_json(a.mean_ns)},
               {"delta_ns", num(a.delta_ns())},
               {"sum_of_parts_ns", num(a.sum_of_parts())},
               {"parts_ns", parts_json(a.parts)},
               {"residual_sync_ns", num(a.residual_sync_ns)},
               {"residual_dispatch_ns", num(a.residual_dispatch_ns)},
               {"residual_join_ns", num(a.residual_join_ns)},
               {"span_excess_ns", pair_json(a.span_excess_ns)},
               {"runq_outside_ns", num(a.runq_outside_ns)},
               {"residual_outside_ns", num(a.residual_outside_ns)},
               {"residual_unmeasured_ns", num(a.residual_unmeasured_ns)},
               {"level", level_name(a.level)},
               {"runq_measured", a.runq_measured},
               {"not_measured", a.not_measured},
               {"ops", Json::array()}};
  for (const OpAttribution& o : a.ops)
    attr["ops"].push_back({{"op", o.op},
                           {"mean_ns", pair_json(o.mean_ns)},
                           {"delta_ns", num(o.delta_ns())},
                           {"parts_ns", parts_json(o.parts)},
                           {"level", level_name(o.level)},
                           {"runq_measured", o.runq_measured},
                           {"oncpu_ns", pair_json(o.oncpu_ns)},
                           {"runq_ns", pair_json(o.runq_ns)},
                           {"offcpu_ns", pair_json(o.offcpu_ns)},
                           {"sync_ns", pair_json(o.sync_ns)},
                           {"excess_ns", pair_json(o.excess_ns)},
                           {"freq_mhz", pair_json(o.freq_mhz)},
                           {"cpi", pair_json(o.cpi)},
                           {"instructions", pair_json(o.instructions)}});
  j["attribution"] = std::move(attr);
  j["frequency"] = Json::array();
  for (const DeviceFrequency& f : c.frequency)
    j["frequency"].push_back({{"device", device_label(f.device)},
                              {"normal", summary_json(f.mhz[0])},
                              {"abnormal", summary_json(f.mhz[1])},
                              {"pct_change", num(f.pct_change)},
                              {"p", num(f.p_welch)},
                              {"u_p", num(f.p_u)}});
  j["rows"] = Json::array();
  for (const MetricRow& r : c.rows) {
    Json row = {
        {"op", r.op},
        {"metric", r.metric ? Json(std::string(metric_info(*r.metric).name)) : Json(nullptr)},
        {"device", device_label(r.device)},
        {"pseudo", r.pseudo},
        {"score", num(r.score)},
        {"impact_pts", num(r.impact_pts)},
        {"flagged", r.flagged},
        {"beta", {summary_json(r.beta[0]), summary_json(r.beta[1])}},
        {"d_beta", num(r.d_beta)},
        {"z_beta", num(r.z_beta)},
        {"p_beta", num(r.p_beta)},
        {"u_p_beta", num(r.u_p_beta)}};
    if (r.metric) {
      row["mu"] = {summary_json(r.mu[0]), summary_json(r.mu[1])};
      row["d_mu"] = num(r.d_mu);
      row["z_mu"] = num(r.z_mu);
      row["z_log_mu"] = num(r.z_log_mu);
      row["p_mu"] = num(r.p_mu);
      row["u_p_mu"] = num(r.u_p_mu);
    }
    j["rows"].push_back(std::move(row));
  }
  j["overview"] = c.overview;
  j["findings"] = c.findings;
  j["recommendation"] = c.recommendation;
  j["legend"] = Json::object();
  for (const auto& [term, text] : compare_legend(ro.compare)) j["legend"][term] = text;
  return j.dump(1) + "\n";
}

}  // namespace pacer::analysis
