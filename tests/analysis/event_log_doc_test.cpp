// docs/event-log.md against the schema and the reader: its JSON examples are read from the doc
// file itself, every key they use must be one the schema (eventlog/schema.h) names, and the reader
// must hand back exactly the values the doc shows. A doc edit that drifts from the code fails here.
#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/event_log.h"
#include "eventlog/schema.h"
#include "tests/analysis/doc_examples.h"

namespace pacer::analysis {
namespace {

using nlohmann::json;
using testing::event_log_doc_example;
using testing::event_log_doc_examples;

template <class Keys>
bool contains(const Keys& keys, std::string_view key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// The typed records the reader produced, copied out of its reused buffers.
struct Collect : LogVisitor {
  std::vector<Header> headers;
  std::vector<OpEvent> ops;
  std::vector<StepEvent> steps;
  std::vector<Footer> footers;
  std::vector<BenchEvent> benches;
  // Per op, per worker: its counters, copied while the reader lives (Counter::name views the
  // reader's interned names, which go with it).
  std::vector<std::vector<std::map<std::string, double>>> worker_counters;
  void on_header(const Header& h) override { headers.push_back(h); }
  void on_op(const OpEvent& e) override {
    ops.push_back(e);
    auto& per_worker = worker_counters.emplace_back();
    for (const WorkerSample& w : e.workers) {
      auto& m = per_worker.emplace_back();
      for (const Counter& c : w.counters) m[std::string(c.name)] = c.value;
    }
  }
  void on_step(const StepEvent& e) override { steps.push_back(e); }
  void on_footer(const Footer& e) override { footers.push_back(e); }
  void on_bench(const BenchEvent& e) override { benches.push_back(e); }
};

TEST(EventLogDoc, EveryJsonExampleIsOneRecordTheReaderAcceptsWithoutWarnings) {
  const std::vector<std::string> examples = event_log_doc_examples();
  ASSERT_EQ(examples.size(), 5u) << "header, op, step, footer, bench";
  // A log in the doc's order, the header first as the reader demands.
  std::string log = event_log_doc_example("header");
  for (const std::string& e : examples) {
    if (e != log) log += e;
  }
  Collect c;
  const ReadSummary s = LogReader::read_text(log, c, "docs/event-log.md");
  EXPECT_EQ(s.malformed_count, 0) << (s.warnings().empty() ? "" : s.warnings().front());
  EXPECT_EQ(s.n_unknown, 0);
  EXPECT_EQ(s.n_header, 1);
  EXPECT_EQ(s.n_op, 1);
  EXPECT_EQ(s.n_step, 1);
  EXPECT_EQ(s.n_footer, 1);
  EXPECT_EQ(s.n_bench, 1);
  EXPECT_EQ(s.schema, eventlog::kSchemaVersion);
  EXPECT_TRUE(s.warnings().empty());
}

TEST(EventLogDoc, OpExampleUsesSchemaKeysAndReadsBackItsValues) {
  const json doc = json::parse(event_log_doc_example("op"));
  for (const auto& [k, v] : doc.items()) {
    if (k != eventlog::record::kType) {
      EXPECT_TRUE(contains(eventlog::op_key::kAll, k)) << k;
    }
  }
  EXPECT_NE(eventlog::parse_phase(doc["phase"].get<std::string>()), Phase::Other);
  EXPECT_NE(eventlog::parse_op_kind(doc["kind"].get<std::string>()), OpKind::Other);

  Collect c;
  LogReader::read_text(event_log_doc_example("header") + event_log_doc_example("op"), c);
  ASSERT_EQ(c.ops.size(), 1u);
  const OpEvent& op = c.ops[0];
  EXPECT_EQ(op.step, doc["step"].get<int64_t>());
  EXPECT_EQ(phase_name(op.phase), doc["phase"].get<std::string>());
  EXPECT_EQ(op.name, doc["name"].get<std::string>());
  EXPECT_EQ(op.layer, doc["layer"].get<int>());
  EXPECT_EQ(op_kind_name(op.kind), doc["kind"].get<std::string>());
  EXPECT_EQ(op.wtype, doc["wtype"].get<std::string>());
  EXPECT_EQ(op.rows, doc["rows"].get<int64_t>());
  EXPECT_EQ(op.cols, doc["cols"].get<int64_t>());
  EXPECT_EQ(op.tokens, doc["tokens"].get<int64_t>());
  EXPECT_EQ(op.weight_bytes, doc["weight_bytes"].get<int64_t>());
  EXPECT_EQ(op.t0_ns, doc["t0_ns"].get<int64_t>());
  EXPECT_EQ(op.t1_ns, doc["t1_ns"].get<int64_t>());
  ASSERT_EQ(op.workers.size(), doc["workers"].size());
  for (size_t i = 0; i < op.workers.size(); ++i) {
    const json& dw = doc["workers"][i];
    const WorkerSample& w = op.workers[i];
    for (const auto& [k, v] : dw.items()) EXPECT_TRUE(contains(eventlog::op_key::kAll, k)) << k;
    EXPECT_EQ(w.w, dw["w"].get<int>());
    EXPECT_EQ(w.cpu, dw["cpu"].get<int>());
    EXPECT_EQ(w.cpu_end, dw["cpu_end"].get<int>());
    EXPECT_EQ(w.t0_ns, dw["t0_ns"].get<int64_t>());
    EXPECT_EQ(w.t1_ns, dw["t1_ns"].get<int64_t>());
    EXPECT_EQ(w.freq_mhz, dw["freq_mhz"].get<double>());
    EXPECT_EQ(w.runq_ns, dw["runq_ns"].get<int64_t>());
    EXPECT_EQ(w.oncpu_ns, dw["oncpu_ns"].get<int64_t>());
    const std::map<std::string, double>& counters = c.worker_counters[0][i];
    ASSERT_EQ(counters.size(), dw["counters"].size());
    for (const auto& [k, v] : dw["counters"].items()) {
      EXPECT_TRUE(contains(eventlog::counter_key::kStandard, k)) << k;
      ASSERT_TRUE(counters.count(k)) << k;
      EXPECT_EQ(counters.at(k), v.get<double>()) << k;
    }
  }
}

TEST(EventLogDoc, StepExampleUsesSchemaKeysAndReadsBackItsValues) {
  const json doc = json::parse(event_log_doc_example("step"));
  for (const auto& [k, v] : doc.items()) {
    if (k != eventlog::record::kType) {
      EXPECT_TRUE(contains(eventlog::step_key::kAll, k)) << k;
    }
  }
  Collect c;
  LogReader::read_text(event_log_doc_example("header") + event_log_doc_example("step"), c);
  ASSERT_EQ(c.steps.size(), 1u);
  const StepEvent& st = c.steps[0];
  EXPECT_EQ(st.step, doc["step"].get<int64_t>());
  EXPECT_EQ(phase_name(st.phase), doc["phase"].get<std::string>());
  EXPECT_EQ(st.n_past, doc["n_past"].get<int64_t>());
  EXPECT_EQ(st.token, doc["token"].get<int64_t>());
  EXPECT_EQ(st.piece, doc["piece"].get<std::string>());
  EXPECT_EQ(st.t0_ns, doc["t0_ns"].get<int64_t>());
  EXPECT_EQ(st.t1_ns, doc["t1_ns"].get<int64_t>());
  EXPECT_EQ(st.step_ms, doc["step_ms"].get<double>());
  EXPECT_EQ(st.tok_s, doc["tok_s"].get<double>());
  ASSERT_EQ(st.freq.size(), doc["freq"].size());
  EXPECT_EQ(st.freq[0].w, doc["freq"][0]["w"].get<int>());
  EXPECT_EQ(st.freq[0].cpu, doc["freq"][0]["cpu"].get<int>());
  EXPECT_EQ(st.freq[0].mhz, doc["freq"][0]["mhz"].get<double>());
  EXPECT_EQ(st.runq_ns, doc["sched"]["runq_ns"].get<int64_t>());
  EXPECT_EQ(st.oncpu_ns, doc["sched"]["oncpu_ns"].get<int64_t>());
  EXPECT_EQ(st.nvcsw, doc["sched"]["nvcsw"].get<int64_t>());
  EXPECT_EQ(st.nivcsw, doc["sched"]["nivcsw"].get<int64_t>());
  EXPECT_EQ(st.process_cpu_usage, doc["process_cpu_usage"].get<double>());
  EXPECT_EQ(st.host_cpu_usage, doc["host_cpu_usage"].get<double>());
}

TEST(EventLogDoc, FooterExampleUsesSchemaKeysAndReadsBackItsValues) {
  const json doc = json::parse(event_log_doc_example("footer"));
  for (const auto& [k, v] : doc.items()) {
    if (k != eventlog::record::kType) {
      EXPECT_TRUE(contains(eventlog::footer_key::kAll, k)) << k;
    }
  }
  Collect c;
  LogReader::read_text(event_log_doc_example("header") + event_log_doc_example("footer"), c);
  ASSERT_EQ(c.footers.size(), 1u);
  const Footer& f = c.footers[0];
  EXPECT_EQ(f.steps, doc["steps"].get<int64_t>());
  EXPECT_EQ(f.n_prompt, doc["n_prompt"].get<int64_t>());
  EXPECT_EQ(f.n_generated, doc["n_generated"].get<int64_t>());
  EXPECT_EQ(f.load_ms, doc["load_ms"].get<double>());
  EXPECT_EQ(f.ttft_ms, doc["ttft_ms"].get<double>());
  EXPECT_EQ(f.prefill_tok_s, doc["prefill_tok_s"].get<double>());
  EXPECT_EQ(f.decode_tok_s, doc["decode_tok_s"].get<double>());
  EXPECT_EQ(f.wall_ms, doc["wall_ms"].get<double>());
  EXPECT_EQ(f.peak_rss_kb, doc["peak_rss_kb"].get<int64_t>());
  EXPECT_EQ(f.tokenize_ms, doc["tokenize_ms"].get<double>());
  EXPECT_EQ(f.detokenize_ms, doc["detokenize_ms"].get<double>());
  EXPECT_EQ(f.freq_after_mhz, doc["freq_after_mhz"].get<std::vector<double>>());
  EXPECT_EQ(f.stop, doc["stop"].get<std::string>());
}

TEST(EventLogDoc, BenchExampleUsesSchemaKeysAndReadsBackItsValues) {
  const json doc = json::parse(event_log_doc_example("bench"));
  for (const auto& [k, v] : doc.items()) {
    if (k != eventlog::record::kType) {
      EXPECT_TRUE(contains(eventlog::bench_key::kAll, k)) << k;
    }
  }
  Collect c;
  LogReader::read_text(event_log_doc_example("header") + event_log_doc_example("bench"), c);
  ASSERT_EQ(c.benches.size(), 1u);
  const BenchEvent& b = c.benches[0];
  EXPECT_EQ(b.test, doc["test"].get<std::string>());
  EXPECT_EQ(b.n_prompt, doc["n_prompt"].get<int64_t>());
  EXPECT_EQ(b.n_gen, doc["n_gen"].get<int64_t>());
  EXPECT_EQ(b.threads, doc["threads"].get<int64_t>());
  EXPECT_EQ(b.pin, doc["pin"].get<std::string>());
  EXPECT_EQ(b.reps, doc["reps"].get<int64_t>());
  EXPECT_EQ(b.tok_s_mean, doc["tok_s_mean"].get<double>());
  EXPECT_EQ(b.tok_s_sd, doc["tok_s_sd"].get<double>());
  EXPECT_EQ(b.cv, doc["cv"].get<double>());
  EXPECT_EQ(b.freq_mhz_mean, doc["freq_mhz_mean"].get<double>());
  EXPECT_EQ(b.roofline_pct, doc["roofline_pct"].get<double>());
  EXPECT_EQ(b.flags, doc["flags"].get<std::vector<std::string>>());
}

TEST(EventLogDoc, HeaderExampleNamesCountersAsTheRecorderWritesThem) {
  const json doc = json::parse(event_log_doc_example("header"));
  EXPECT_EQ(doc["schema"].get<int>(), eventlog::kSchemaVersion);
  // counters.live lists counter keys exactly as op lines carry them (task_clock_ns, not
  // task_clock); the run-queue source's key is the one addition.
  for (const json& k : doc["counters"]["live"]) {
    const std::string key = k.get<std::string>();
    EXPECT_TRUE(contains(eventlog::counter_key::kStandard, key) ||
                key == eventlog::counter_key::kRunqNs)
        << key;
  }
  for (const json& u : doc["counters"]["unavailable"]) {
    EXPECT_TRUE(contains(eventlog::counter_key::kStandard, u["event"].get<std::string>()))
        << u["event"];
  }
  Collect c;
  LogReader::read_text(event_log_doc_example("header"), c);
  ASSERT_EQ(c.headers.size(), 1u);
  const Header& h = c.headers[0];
  EXPECT_EQ(h.counters.live, doc["counters"]["live"].get<std::vector<std::string>>());
  EXPECT_EQ(h.model.path, doc["model"]["path"].get<std::string>());
  EXPECT_EQ(h.run.threads, doc["run"]["threads"].get<int64_t>());
  EXPECT_EQ(h.host.tsc_mhz, doc["host"]["tsc_mhz"].get<double>());
  EXPECT_EQ(h.frequency.source, doc["frequency"]["source"].get<std::string>());
  EXPECT_EQ(h.freq_before_mhz, doc["freq_before_mhz"].get<std::vector<double>>());
  // run.numa: every key the schema's, the policy read back.
  const json& numa = doc["run"][std::string(eventlog::numa_key::kNuma)];
  ASSERT_TRUE(numa.is_object());
  for (const auto& [k, v] : numa.items()) {
    EXPECT_TRUE(contains(eventlog::numa_key::kAll, k)) << k;
  }
  EXPECT_EQ(h.run.numa, numa["policy"].get<std::string>());
}

TEST(EventLogDoc, AHeaderWithoutNumaReadsAsNone) {
  Collect c;
  LogReader::read_text(R"({"type":"header","schema":1,"run":{"threads":1}})"
                       "\n",
                       c);
  ASSERT_EQ(c.headers.size(), 1u);
  EXPECT_EQ(c.headers[0].run.numa, "none");
}

// Every key of the header example, top level and in its objects, is one the schema names.
TEST(EventLogDoc, HeaderExampleUsesSchemaKeys) {
  const json doc = json::parse(event_log_doc_example("header"));
  auto check = [](const json& obj, const auto& keys, const std::string& where) {
    ASSERT_TRUE(obj.is_object()) << where;
    for (const auto& [k, v] : obj.items()) EXPECT_TRUE(contains(keys, k)) << where << k;
  };
  json top = doc;
  top.erase(std::string(eventlog::record::kType));
  check(top, eventlog::header_key::kAll, "");
  check(doc["model"], eventlog::model_key::kAll, "model.");
  check(doc["run"], eventlog::run_key::kAll, "run.");
  check(doc["host"], eventlog::host_key::kAll, "host.");
  check(doc["host"]["topology"], eventlog::host_key::kTopologyAll, "host.topology.");
  check(doc["counters"], eventlog::counters_key::kAll, "counters.");
  check(doc["frequency"], eventlog::frequency_key::kAll, "frequency.");
  check(doc["thermal"], eventlog::thermal_key::kAll, "thermal.");
}

// The quoted names in the doc's text between `from` and the next `}` after it.
std::set<std::string> quoted_names_after(const std::string& from) {
  std::ifstream in(testing::event_log_doc_path());
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const size_t at = text.find(from);
  if (at == std::string::npos) return {};
  const size_t end = text.find('}', at);
  std::set<std::string> names;
  for (size_t q = text.find('"', at); q < end; q = text.find('"', q + 1)) {
    const size_t close = text.find('"', q + 1);
    names.insert(text.substr(q + 1, close - q - 1));
    q = close;
  }
  return names;
}

// The doc lists the step's and the footer's `recorder` keys in its text; they are the schema's.
TEST(EventLogDoc, RecorderKeysAreTheSchemas) {
  const auto as_set = [](const auto& keys) {
    return std::set<std::string>(keys.begin(), keys.end());
  };
  EXPECT_EQ(quoted_names_after("- `recorder`: `{"), as_set(eventlog::step_recorder_key::kAll));
  EXPECT_EQ(quoted_names_after("`recorder: {"), as_set(eventlog::footer_recorder_key::kAll));
}

}  // namespace
}  // namespace pacer::analysis
