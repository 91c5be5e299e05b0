// pacer trace: an event log written by the recorder becomes a Chrome/Perfetto trace with one
// track per worker, step slices and counter tracks.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <tuple>

#include "analysis/chrome_trace.h"
#include "analysis/event_log.h"
#include "tests/runtime/recorder_fakes.h"

namespace pacer::analysis {
namespace {

using nlohmann::json;
using runtime::CounterSourceFactory;
using runtime::OpKind;
using runtime::Phase;
using runtime::Recorder;
using runtime::testing::fake_options;
using runtime::testing::FakeCounterSource;
using runtime::testing::read_log;
using runtime::testing::temp_log_path;
using runtime::testing::TwoWorkers;

CounterSourceFactory fakes() {
  return [](int worker) {
    std::vector<std::unique_ptr<hwcounters::CounterSource>> v;
    v.push_back(std::make_unique<FakeCounterSource>(
        std::vector<std::string>{"instructions", "task_clock_ns"},
        std::vector<uint64_t>{100u * static_cast<uint64_t>(worker + 1), 5000}));
    v.push_back(std::make_unique<FakeCounterSource>(std::vector<std::string>{"runq_ns"},
                                                    std::vector<uint64_t>{7}));
    return v;
  };
}

// Two decode steps of two ops on two workers (the second op serial), written by the recorder.
std::string write_log(const std::string& tag, bool footer = true) {
  const std::string path = temp_log_path(tag);
  Recorder rec(fake_options(path, 2, fakes()));
  rec.write_header({{"command", "run"}, {"model", {{"path", "m.gguf"}}}});
  TwoWorkers pool(rec);
  for (int step = 0; step < 2; ++step) {
    rec.begin_step(Phase::Decode, step);
    {
      auto s = rec.op({.name = "ffn_gate_up", .layer = 1, .kind = OpKind::Matmul, .rows = 64});
      pool.run(1, 1);
    }
    { auto s = rec.op({.name = "residual", .layer = 1, .kind = OpKind::Elementwise}); }
    rec.end_step({.phase = Phase::Decode, .step = step, .token = 9, .piece = "x"});
  }
  if (footer) rec.write_footer(json::object());
  return path;
}

json convert(const std::string& log, ChromeTraceSummary* summary = nullptr) {
  std::ifstream in(log);
  std::ostringstream out;
  ChromeTraceSummary s = convert_to_chrome_trace(in, out, log);
  if (summary) *summary = s;
  json t = json::parse(out.str(), nullptr, false);
  EXPECT_FALSE(t.is_discarded()) << "trace is not valid JSON";
  return t;
}

std::vector<json> events(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == ph) out.push_back(e);
  }
  return out;
}

TEST(ChromeTrace, OneSlicePerWorkerChunkOnItsOwnTrack) {
  const std::string log = write_log("trace");
  ChromeTraceSummary s;
  const json trace = convert(log, &s);
  EXPECT_TRUE(s.complete);
  EXPECT_EQ(s.ops, 4);
  EXPECT_EQ(s.steps, 2);
  EXPECT_EQ(s.workers, 2);
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_EQ(trace["displayTimeUnit"], "ns");
  EXPECT_EQ(trace["otherData"]["complete"], true);

  // Expected slices, straight from the log: (tid, name, ts us, dur us).
  std::multimap<int, std::tuple<std::string, double, double>> want;
  for (const json& j : read_log(log)) {
    if (j["type"] == "op") {
      for (const json& w : j["workers"]) {
        want.insert({w["w"].get<int>() + 1,
                     {j["name"], w["t0_ns"].get<double>() / 1000,
                      (w["t1_ns"].get<double>() - w["t0_ns"].get<double>()) / 1000}});
      }
    } else if (j["type"] == "step") {
      want.insert(
          {0,
           {"decode " + std::to_string(j["step"].get<int>()), j["t0_ns"].get<double>() / 1000,
            (j["t1_ns"].get<double>() - j["t0_ns"].get<double>()) / 1000}});
    }
  }
  const auto slices = events(trace, "X");
  ASSERT_EQ(slices.size(), want.size());
  for (const json& x : slices) {
    EXPECT_EQ(x["pid"], 1);
    bool found = false;
    const auto [b, e] = want.equal_range(x["tid"].get<int>());
    for (auto it = b; it != e; ++it) {
      const auto& [name, ts, dur] = it->second;
      if (name == x["name"] && std::abs(ts - x["ts"].get<double>()) < 1e-3 &&
          std::abs(dur - x["dur"].get<double>()) < 1e-3) {
        found = true;
      }
    }
    EXPECT_TRUE(found) << x.dump();
    if (x["tid"] != 0) {
      EXPECT_EQ(x["cat"], "decode");
      EXPECT_EQ(x["args"]["layer"], 1);
      EXPECT_TRUE(x["args"].contains("instructions"));
    }
  }
  // Worker 1's slices carry its own counts (200 per chunk) and its run-queue delay.
  for (const json& x : slices) {
    if (x["tid"] == 2) {
      EXPECT_EQ(x["args"]["instructions"], 200);
      EXPECT_EQ(x["args"]["runq_ns"], 7);
    }
  }

  std::map<int, std::string> names;
  for (const json& m : events(trace, "M")) {
    if (m["name"] == "thread_name") names[m["tid"].get<int>()] = m["args"]["name"];
    if (m["name"] == "process_name") {
      EXPECT_NE(m["args"]["name"].get<std::string>().find("m.gguf"), std::string::npos);
    }
  }
  EXPECT_EQ(names[0], "steps");
  EXPECT_EQ(names[1].rfind("worker 0 (cpu ", 0), 0u) << names[1];
  EXPECT_EQ(names[2].rfind("worker 1 (cpu ", 0), 0u) << names[2];

  // Counter tracks: a frequency sample per slice, tok/s per step.
  int freq = 0, tok_s = 0;
  for (const json& c : events(trace, "C")) {
    const std::string n = c["name"];
    if (n.rfind("freq w", 0) == 0) {
      ++freq;
      EXPECT_DOUBLE_EQ(c["args"]["MHz"].get<double>(), 2345.0);
    }
    if (n == "decode") {
      ++tok_s;
      EXPECT_GT(c["args"]["tok/s"].get<double>(), 0.0);
    }
  }
  EXPECT_EQ(freq, 6);  // 2 steps x (2 parallel slices + 1 serial)
  EXPECT_EQ(tok_s, 2);
}

TEST(ChromeTrace, TruncatedLastLineAndMalformedLinesAreSkippedAndReported) {
  const std::string log = write_log("trace", /*footer=*/false);
  {
    std::vector<std::string> lines;
    std::ifstream in(log);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    std::ofstream out(log);
    for (size_t i = 0; i < lines.size(); ++i) {
      out << lines[i] << "\n";
      if (i == 1) out << "{not json\n";  // becomes line 3
    }
    out << R"({"type":"op","step":2,"na)";  // killed mid-write: no newline
  }
  ChromeTraceSummary s;
  const json trace = convert(log, &s);
  EXPECT_FALSE(s.complete);
  EXPECT_EQ(s.ops, 4);
  // The trace reads through the one log reader: its warnings are the reader's, word for word.
  // Lines: header, 2 x (2 ops + step) with the malformed line after line 2, the cut op last.
  LogVisitor ignore;
  EXPECT_EQ(s.warnings, LogReader(log).read(ignore).warnings());
  ASSERT_EQ(s.warnings.size(), 4u);
  EXPECT_NE(s.warnings[0].find(":3: skipped malformed line"), std::string::npos) << s.warnings[0];
  EXPECT_NE(s.warnings[1].find("1 of 9 lines skipped as malformed"), std::string::npos)
      << s.warnings[1];
  EXPECT_NE(s.warnings[2].find(":9: the last line is truncated"), std::string::npos)
      << s.warnings[2];
  EXPECT_NE(s.warnings[3].find("no footer"), std::string::npos) << s.warnings[3];
  EXPECT_EQ(trace["otherData"]["complete"], false);
}

TEST(ChromeTrace, RejectsLogsWithoutHeaderOrFromANewerSchema) {
  std::istringstream no_header(R"({"type":"op","step":0})"
                               "\n");
  std::ostringstream out;
  try {
    convert_to_chrome_trace(no_header, out, "x.jsonl");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("x.jsonl:1:"), std::string::npos) << e.what();
  }
  std::istringstream newer(R"({"type":"header","schema":2})"
                           "\n");
  try {
    convert_to_chrome_trace(newer, out, "y.jsonl");
    FAIL();
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("schema 2"), std::string::npos) << m;
    EXPECT_NE(m.find("schema 1"), std::string::npos) << m;
  }
}

TEST(ChromeTrace, BadInputFailsWithTheReadersErrorAndWritesNothing) {
  const std::vector<std::string> bad = {
      "",                                                    // empty
      "{\"type\":\"op\",\"step\":0}\n",                      // no header
      "{\"type\":\"header\",\"schema\":2}\n",                // newer schema
      "{\"type\":\"header\",\"schema\":1,\"command\":\"ru",  // cut inside the header
      "not json\n"};
  for (const std::string& text : bad) {
    std::string reader_error;
    try {
      LogVisitor ignore;
      LogReader::read_text(text, ignore, "bad.jsonl");
    } catch (const LogError& e) {
      reader_error = e.what();
    }
    ASSERT_FALSE(reader_error.empty()) << text;
    std::istringstream in(text);
    std::ostringstream out;
    try {
      convert_to_chrome_trace(in, out, "bad.jsonl");
      ADD_FAILURE() << "no error for " << text;
    } catch (const LogError& e) {
      EXPECT_EQ(std::string(e.what()), reader_error);
    }
    EXPECT_EQ(out.str(), "") << text;
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// tests/data/trace/golden_events.jsonl is a fixed log (prefill and decode steps, parallel and
// serial ops, a multi-chunk worker with mux < 1, escaped piece text, RAPL, sched workers, a bench
// row and an unknown record type); golden_trace*.json are the traces the converter wrote for it
// before it became a visitor of the one log reader. Any change to the trace shows up here.
TEST(ChromeTrace, FixedLogGivesTheGoldenTraceByteForByte) {
  const std::string dir = std::string(PACER_TEST_DATA) + "/trace/";
  for (const bool counters : {true, false}) {
    std::ifstream in(dir + "golden_events.jsonl");
    ASSERT_TRUE(in);
    std::ostringstream out;
    ChromeTraceOptions opts;
    opts.counters = counters;
    const ChromeTraceSummary s = convert_to_chrome_trace(in, out, "golden_events.jsonl", opts);
    const std::string golden =
        read_file(dir + (counters ? "golden_trace.json" : "golden_trace_no_counters.json"));
    EXPECT_EQ(out.str(), golden) << "counters " << counters;
    EXPECT_TRUE(s.complete);
    EXPECT_EQ(s.ops, 6);
    EXPECT_EQ(s.steps, 2);
    EXPECT_EQ(s.slices, 8);
    EXPECT_EQ(s.workers, 2);
    EXPECT_EQ(s.events, counters ? 37 : 17);
  }
}

int run(const std::string& cmd, std::string* output) {
  const std::string full = cmd + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(TraceCommand, WritesAPerfettoTraceAndSaysWhatItWrote) {
  const std::string log = write_log("trace");
  const std::string out = log + ".trace.json";
  std::string output;
  ASSERT_EQ(run(std::string(PACER_BINARY) + " trace " + log + " -o " + out, &output), 0) << output;
  EXPECT_NE(output.find("4 ops on 2 worker tracks, 2 steps"), std::string::npos) << output;
  std::ifstream in(out);
  const json t = json::parse(in, nullptr, false);
  ASSERT_FALSE(t.is_discarded());
  EXPECT_EQ(events(t, "X").size(), 8u);  // 6 op slices + 2 steps
}

TEST(TraceCommand, MissingLogIsOneLineError) {
  std::string output;
  EXPECT_EQ(
      run(std::string(PACER_BINARY) + " trace /nonexistent/events.jsonl -o /tmp/x.json", &output),
      1);
  EXPECT_NE(output.find("/nonexistent/events.jsonl"), std::string::npos) << output;
  EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;
}

}  // namespace
}  // namespace pacer::analysis
