// The event-log reader against the examples of docs/event-log.md (read from the doc) and
// synthetic logs.
#include "analysis/event_log.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "event_log_testlog.h"
#include "tests/analysis/doc_examples.h"

namespace pacer::analysis {
namespace {

using ::testing::HasSubstr;

// Records everything it is handed, copying what the reader reuses.
struct Collect : LogVisitor {
  std::vector<Header> headers;
  std::vector<OpEvent> ops;
  std::vector<StepEvent> steps;
  std::vector<Footer> footers;
  std::vector<BenchEvent> benches;
  std::vector<std::map<std::string, double>> op_counters;  // worker 0's counters per op
  std::vector<std::string> unknown;
  void on_header(const Header& h) override { headers.push_back(h); }
  void on_op(const OpEvent& e) override {
    ops.push_back(e);
    std::map<std::string, double> c;
    if (!e.workers.empty())
      for (const Counter& k : e.workers[0].counters) c[std::string(k.name)] = k.value;
    op_counters.push_back(std::move(c));
  }
  void on_step(const StepEvent& e) override { steps.push_back(e); }
  void on_footer(const Footer& e) override { footers.push_back(e); }
  void on_bench(const BenchEvent& e) override { benches.push_back(e); }
  void on_unknown(std::string_view type, int64_t line) override {
    unknown.push_back(std::string(type) + "@" + std::to_string(line));
  }
};

// The examples of docs/event-log.md, one per line, read from the doc (the test below and the
// doc-driven tests in event_log_doc_test.cpp check them; the others use them as valid records).
const std::string kDocHeader = testing::event_log_doc_example("header");
const std::string kDocOp = testing::event_log_doc_example("op");
const std::string kDocStep = testing::event_log_doc_example("step");
const std::string kDocFooter = testing::event_log_doc_example("footer");
const std::string kDocBench = testing::event_log_doc_example("bench");

TEST(EventLogReader, ReadsEveryRecordOfTheDocExamples) {
  Collect c;
  const ReadSummary s =
      LogReader::read_text(kDocHeader + kDocOp + kDocStep + kDocBench + kDocFooter, c);
  ASSERT_EQ(c.headers.size(), 1u);
  const Header& h = c.headers[0];
  EXPECT_EQ(h.schema, 1);
  EXPECT_EQ(h.model.arch, "qwen2");
  EXPECT_EQ(h.model.type, "q8_0");
  EXPECT_EQ(h.model.file_type, "Q8_0");
  EXPECT_EQ(h.model.params, 494032768);
  EXPECT_EQ(h.model.matmul_bytes_per_token, 500000000);
  EXPECT_EQ(h.run.threads, 2);
  EXPECT_EQ(h.run.pin, "compact");
  EXPECT_EQ(h.run.cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(h.run.vnni, true);
  EXPECT_EQ(h.run.amx, true);
  EXPECT_EQ(h.run.repacked_matrices, 0);
  EXPECT_EQ(h.run.gemv_streams, 4);
  EXPECT_EQ(h.run.x16_gemv, "q4_0 4 streams, prefetch; q6_K 1 stream, prefetch, page touch 8192 B");
  EXPECT_EQ(h.run.gemv_prefetch, true);
  EXPECT_EQ(h.run.gemv_prefetch_unpacking, true);
  EXPECT_EQ(h.run.work_stealing, true);
  EXPECT_EQ(h.run.idle_prefetch, true);
  EXPECT_EQ(h.host.governor, "");  // null
  EXPECT_EQ(h.host.l3_bytes, 110100480);
  EXPECT_EQ(h.host.virtualized, true);
  EXPECT_EQ(h.counters.mode, "software");
  ASSERT_EQ(h.counters.unavailable.size(), 1u);
  EXPECT_EQ(h.counters.unavailable[0].event, "cycles");
  EXPECT_EQ(h.frequency.source, "calibrated_loop");
  EXPECT_EQ(h.frequency.nominal_mhz, 2100.0);
  EXPECT_FALSE(h.bandwidth_gbs.has_value());
  EXPECT_EQ(h.freq_before_mhz, (std::vector<double>{2995.1, 2994.8}));
  EXPECT_EQ(h.raw["host"]["hostname"], "h");

  ASSERT_EQ(c.ops.size(), 1u);
  const OpEvent& op = c.ops[0];
  EXPECT_EQ(op.line, 2);
  EXPECT_EQ(op.step, 3);
  EXPECT_EQ(op.phase, Phase::Decode);
  EXPECT_EQ(op.name, "attn_qkv");
  EXPECT_EQ(op.layer, 5);
  EXPECT_EQ(op.kind, OpKind::Matmul);
  EXPECT_EQ(op.wtype, "q8_0");
  EXPECT_EQ(op.rows, 1152);
  EXPECT_EQ(op.cols, 896);
  EXPECT_EQ(op.tokens, 1);
  EXPECT_EQ(op.weight_bytes, 1096704);
  EXPECT_EQ(op.duration_ns(), 333);
  ASSERT_EQ(op.workers.size(), 1u);
  EXPECT_EQ(op.workers[0].cpu_end, 0);
  EXPECT_EQ(op.workers[0].freq_mhz, 2990.0);
  EXPECT_EQ(op.workers[0].oncpu_ns, 315);
  EXPECT_EQ(op.workers[0].runq_ns, 0);
  EXPECT_EQ(c.op_counters[0],
            (std::map<std::string, double>{
                {"cycles", 900}, {"instructions", 1000}, {"task_clock_ns", 315}}));

  ASSERT_EQ(c.steps.size(), 1u);
  const StepEvent& st = c.steps[0];
  EXPECT_EQ(st.token, 1234);
  EXPECT_FALSE(st.n_tokens.has_value());
  EXPECT_EQ(st.tokens(), 1);
  EXPECT_EQ(st.piece, " the");
  EXPECT_EQ(st.tok_s, 25.1);
  ASSERT_EQ(st.freq.size(), 1u);
  EXPECT_EQ(st.freq[0].mhz, 2990.0);
  EXPECT_EQ(st.nivcsw, 1);
  EXPECT_EQ(st.oncpu_ns, 1600);
  EXPECT_EQ(st.host_cpu_usage, 2.0);

  ASSERT_EQ(c.benches.size(), 1u);
  EXPECT_EQ(c.benches[0].test, "tg128");
  EXPECT_EQ(c.benches[0].roofline_pct, 82.0);

  ASSERT_EQ(c.footers.size(), 1u);
  EXPECT_EQ(c.footers[0].n_generated, 64);
  EXPECT_EQ(c.footers[0].ttft_ms, 40.1);
  EXPECT_EQ(c.footers[0].freq_after_mhz, (std::vector<double>{2990.0, 2991.0}));
  EXPECT_EQ(c.footers[0].stop, "n_predict");

  EXPECT_TRUE(s.complete());
  EXPECT_EQ(s.malformed_count, 0);
  EXPECT_FALSE(s.truncated_last_line);
  EXPECT_EQ(s.n_op, 1);
  EXPECT_EQ(s.n_step, 1);
  EXPECT_TRUE(s.warnings().empty());
}

TEST(EventLogReader, DecodesStringEscapesAndIgnoresUnknownKeysAndTypes) {
  const std::string step =
      R"J({"type":"step","future":{"a":[1,{"b":null}]},"step":1,"phase":"decode","n_past":1,)J"
      R"J("piece":"\u00e9\n\"x\" \ud83d\ude00","t0_ns":1,"t1_ns":2})J"
      "\n";
  const std::string unknown = R"J({"type":"thermal_event","zone":3})J"
                              "\n";
  Collect c;
  const ReadSummary s = LogReader::read_text(kDocHeader + step + unknown + kDocFooter, c);
  ASSERT_EQ(c.steps.size(), 1u);
  EXPECT_EQ(c.steps[0].piece, "\xC3\xA9\n\"x\" \xF0\x9F\x98\x80");
  EXPECT_EQ(c.unknown, (std::vector<std::string>{"thermal_event@3"}));
  EXPECT_EQ(s.n_unknown, 1);
  EXPECT_EQ(s.malformed_count, 0);
}

TEST(EventLogReader, ALogOfNothingButMalformedRecordsIsAnError) {
  // Every op line has t1_ns < t0_ns: an empty profile would pass for a run.
  const std::string backwards =
      R"J({"type":"op","step":0,"phase":"decode","name":"x","t0_ns":5,"t1_ns":2})J"
      "\n";
  Collect c;
  try {
    (void)LogReader::read_text(kDocHeader + backwards + backwards, c, "all-bad.jsonl");
    ADD_FAILURE() << "read as a run";
  } catch (const LogError& e) {
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.offset(), static_cast<int64_t>(kDocHeader.size()));
    EXPECT_THAT(std::string(e.what()), HasSubstr("all 2 lines after the header are malformed"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("t1_ns < t0_ns"));
  }
  // One good op among them keeps the log readable, the others skipped.
  Collect ok;
  const ReadSummary s = LogReader::read_text(kDocHeader + backwards + kDocOp, ok);
  EXPECT_EQ(ok.ops.size(), 1u);
  EXPECT_EQ(s.malformed_count, 1);
}

TEST(EventLogReader, AnOpNameLongerThanAnyPacerWritesIsMalformed) {
  // A 10-million-byte name made the report pad every table row to it.
  const std::string huge = R"J({"type":"op","step":0,"phase":"decode","name":")J" +
                           std::string(129, 'n') + R"J(","t0_ns":1,"t1_ns":2})J" + "\n";
  Collect c;
  const ReadSummary s = LogReader::read_text(kDocHeader + huge + kDocOp + kDocFooter, c);
  EXPECT_EQ(c.ops.size(), 1u);
  ASSERT_EQ(s.malformed_count, 1);
  EXPECT_THAT(s.malformed[0].message, HasSubstr("op name of 129 bytes (at most 128)"));
}

TEST(EventLogReader, SkipsMalformedLinesAndCountsThemWithLineNumbers) {
  const std::string bad_json = R"J({"type":"op","step":3,"phase":"decode",)J"
                               "\n";  // line 3: cut object
  const std::string no_name = R"J({"type":"op","step":3,"phase":"decode","t0_ns":1,"t1_ns":2})J"
                              "\n";  // line 4
  const std::string wrong_type =
      R"J({"type":"op","step":"three","phase":"decode","name":"x","t0_ns":1,"t1_ns":2})J"
      "\n";                                       // line 6
  const std::string not_json = "garbage here\n";  // line 7
  Collect c;
  const ReadSummary s = LogReader::read_text(
      kDocHeader + kDocOp + bad_json + no_name + kDocOp + wrong_type + not_json + kDocFooter, c);
  EXPECT_EQ(c.ops.size(), 2u);
  EXPECT_EQ(c.ops[1].line, 5);
  EXPECT_EQ(s.malformed_count, 4);
  ASSERT_EQ(s.malformed.size(), 4u);
  EXPECT_EQ(s.malformed[0].line, 3);
  EXPECT_EQ(s.malformed[1].line, 4);
  EXPECT_THAT(s.malformed[1].message, HasSubstr("\"name\""));
  EXPECT_EQ(s.malformed[2].line, 6);
  EXPECT_THAT(s.malformed[2].message, HasSubstr("field \"step\""));
  EXPECT_EQ(s.malformed[3].line, 7);
  // Byte offsets point into the file: line 3 starts after the header and one op line.
  EXPECT_EQ(s.malformed[0].offset, static_cast<int64_t>(kDocHeader.size() + kDocOp.size()) +
                                       static_cast<int64_t>(bad_json.size()) - 1);
  EXPECT_EQ(s.malformed[3].offset,
            static_cast<int64_t>(kDocHeader.size() + 2 * kDocOp.size() + bad_json.size() +
                                 no_name.size() + wrong_type.size()));
  EXPECT_TRUE(s.complete());
  const auto warnings = s.warnings();
  ASSERT_FALSE(warnings.empty());
  EXPECT_THAT(warnings[0], HasSubstr("<memory>:3:"));
  EXPECT_THAT(warnings.back(), HasSubstr("4 of 8 lines skipped"));
}

TEST(EventLogReader, ToleratesATruncatedLastLineAndFlagsTheMissingFooter) {
  const std::string cut = kDocOp.substr(0, kDocOp.size() / 2);  // no newline: writer killed
  Collect c;
  const ReadSummary s = LogReader::read_text(kDocHeader + kDocOp + kDocStep + cut, c);
  EXPECT_EQ(c.ops.size(), 1u);
  EXPECT_EQ(c.steps.size(), 1u);
  EXPECT_EQ(s.malformed_count, 0);
  EXPECT_TRUE(s.truncated_last_line);
  EXPECT_EQ(s.truncated_line, 4);
  EXPECT_FALSE(s.complete());
  const auto warnings = s.warnings();
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_THAT(warnings[0], HasSubstr(":4: the last line is truncated"));
  EXPECT_THAT(warnings[1], HasSubstr("incomplete run"));
}

TEST(EventLogReader, AcceptsACompleteLastLineWithoutNewline) {
  Collect c;
  std::string text = kDocHeader + kDocOp + kDocFooter;
  text.pop_back();
  const ReadSummary s = LogReader::read_text(text, c);
  EXPECT_TRUE(s.complete());
  EXPECT_FALSE(s.truncated_last_line);
}

TEST(EventLogReader, RejectsANewerSchemaNamingBothVersions) {
  std::string header = kDocHeader;
  header.replace(header.find("\"schema\":1"), 10, "\"schema\":2");
  Collect c;
  try {
    LogReader::read_text(header + kDocOp, c, "new.jsonl");
    FAIL() << "a schema-2 log must be rejected";
  } catch (const LogError& e) {
    EXPECT_THAT(e.what(), HasSubstr("new.jsonl:1:"));
    EXPECT_THAT(e.what(), HasSubstr("schema 2"));
    EXPECT_THAT(e.what(), HasSubstr("schema 1"));
  }
  EXPECT_TRUE(c.ops.empty());
}

TEST(EventLogReader, RejectsLogsThatDoNotStartWithAHeader) {
  Collect c;
  EXPECT_THROW(LogReader::read_text(kDocOp + kDocHeader, c), LogError);
  EXPECT_THROW(LogReader::read_text("", c), LogError);
  EXPECT_THROW(LogReader::read_text("{not json\n", c), LogError);
  EXPECT_THROW(LogReader::read_text(kDocHeader.substr(0, 50), c), LogError);
  std::string bad_field = kDocHeader;
  bad_field.replace(bad_field.find("\"threads\":2"), 11, "\"threads\":\"two\"");
  try {
    LogReader::read_text(bad_field, c);
    FAIL();
  } catch (const LogError& e) {
    EXPECT_THAT(e.what(), HasSubstr("run.threads"));
  }
  // A GEMV that prefetches twice as far (a run on one worker) says so; logs from before the
  // field existed read as before.
  {
    std::string far = kDocHeader;
    const std::string q4 =
        R"("q4_0":{"streams":4,"prefetch":true,"page_touch":0,"prefetch_far":false})";
    ASSERT_NE(far.find(q4), std::string::npos);
    far.replace(
        far.find(q4), q4.size(),
        R"("q4_0":{"streams":1,"prefetch":true,"page_touch":8192,"prefetch_far":true,"run_bytes":2304,"kernel":"avx2"})");
    Collect f;
    LogReader::read_text(far, f);
    ASSERT_EQ(f.headers.size(), 1u);
    EXPECT_EQ(f.headers[0].run.x16_gemv,
              "q4_0 1 stream, prefetch twice as far, page touch 8192 B, runs of 2304 B, the avx2 "
              "kernel; q6_K 1 stream, prefetch, page touch 8192 B");
    std::string old_log = kDocHeader;
    for (size_t at; (at = old_log.find(",\"prefetch_far\":false")) != std::string::npos;) {
      old_log.erase(at, std::string_view(",\"prefetch_far\":false").size());
    }
    Collect o;
    LogReader::read_text(old_log, o);
    ASSERT_EQ(o.headers.size(), 1u);
    EXPECT_EQ(o.headers[0].run.x16_gemv,
              "q4_0 4 streams, prefetch; q6_K 1 stream, prefetch, page touch 8192 B");
  }
  // A wrong type inside run.x16_gemv is named down to the type and the field.
  for (const auto& [from, to, field] :
       {std::tuple{"\"streams\":4", "\"streams\":\"4\"", "run.x16_gemv.q4_0.streams"},
        std::tuple{"\"q6_K\":{", "\"q6_K\":7,\"x\":{", "run.x16_gemv.q6_K\""},
        std::tuple{"\"page_touch\":8192", "\"page_touch\":true", "run.x16_gemv.q6_K.page_touch"},
        std::tuple{"\"prefetch_far\":false", "\"prefetch_far\":1",
                   "run.x16_gemv.q4_0.prefetch_far"}}) {
    std::string bad = kDocHeader;
    bad.replace(bad.find(from), std::string_view(from).size(), to);
    try {
      LogReader::read_text(bad, c);
      ADD_FAILURE() << to;
    } catch (const LogError& e) {
      EXPECT_THAT(e.what(), HasSubstr(field)) << e.what();
    }
  }
}

TEST(EventLogReader, FileAndTextReadsAgreeAcrossChunkBoundaries) {
  // ~3 MB: several 1 MiB read chunks, so lines straddle chunk ends.
  testlog::SyntheticRun run;
  run.n_layers = 8;
  run.n_decode = 60;
  std::ostringstream text;
  const int64_t n_ops = testlog::write_synthetic(text, run);
  ASSERT_GT(text.str().size(), 2u << 20);
  const auto path = std::filesystem::temp_directory_path() /
                    ("pacer_event_log_test_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::ofstream f(path, std::ios::binary);
    f << text.str();
  }
  struct Sum : LogVisitor {
    int64_t ops = 0, dur = 0, workers = 0, last_line = 0;
    void on_op(const OpEvent& e) override {
      ++ops;
      dur += e.duration_ns();
      workers += static_cast<int64_t>(e.workers.size());
      last_line = e.line;
    }
  } a, b;
  LogReader reader(path.string());
  const ReadSummary sa = reader.read(a);
  const ReadSummary sb = LogReader::read_text(text.str(), b);
  std::filesystem::remove(path);
  EXPECT_EQ(a.ops, n_ops);
  EXPECT_EQ(a.ops, b.ops);
  EXPECT_EQ(a.dur, b.dur);
  EXPECT_EQ(a.workers, b.workers);
  EXPECT_EQ(a.last_line, b.last_line);
  EXPECT_EQ(sa.lines, sb.lines);
  EXPECT_EQ(sa.bytes, static_cast<int64_t>(text.str().size()));
  EXPECT_EQ(sa.malformed_count, 0);
  EXPECT_TRUE(sa.complete());
}

TEST(EventLogReader, MissingFileIsAClearError) {
  Collect c;
  LogReader reader("/nonexistent/events.jsonl");
  try {
    reader.read(c);
    FAIL();
  } catch (const LogError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/events.jsonl"));
    EXPECT_THAT(e.what(), HasSubstr("cannot open"));
  }
}

// Not a test: writes the 1M-op-event log used to time `pacer report` (see the report's notes).
//   PACER_BENCH_LOG=/tmp/1m.jsonl pacer_tests_analysis --gtest_also_run_disabled_tests
//       --gtest_filter='*DISABLED_Write1MOpLog*'
TEST(EventLogBench, DISABLED_Write1MOpLog) {
  const char* path = std::getenv("PACER_BENCH_LOG");
  if (!path) GTEST_SKIP() << "set PACER_BENCH_LOG to the output path";
  testlog::SyntheticRun run;
  run.n_layers = 22;  // tinyllama-1.1b: 268 ops per step
  run.n_decode = 3731;
  run.bandwidth_gbs = 20.0;
  std::ofstream f(path, std::ios::binary);
  const int64_t n = testlog::write_synthetic(f, run);
  EXPECT_GE(n, 1'000'000);
}

}  // namespace
}  // namespace pacer::analysis
