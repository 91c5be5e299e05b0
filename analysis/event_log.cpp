// Event-log reader: line splitting, the typed fast path for op/step/footer/bench lines, and the
// header (nlohmann::json, once per file).
#include "analysis/event_log.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <istream>

#include <fmt/format.h>

#include "analysis/json_scan.h"

namespace pacer::analysis {

using detail::JsonScanner;
using detail::ScanError;
namespace op_key = eventlog::op_key;
namespace step_key = eventlog::step_key;
namespace footer_key = eventlog::footer_key;
namespace bench_key = eventlog::bench_key;

LogError::LogError(const std::string& file, int64_t line, int64_t offset, const std::string& what)
    : std::runtime_error(line > 0 ? (offset >= 0 ? fmt::format("{}:{}: {} (byte offset {})", file,
                                                               line, what, offset)
                                                 : fmt::format("{}:{}: {}", file, line, what))
                                  : fmt::format("{}: {}", file, what)),
      file_(file),
      line_(line),
      offset_(offset) {}

std::optional<double> WorkerSample::counter(std::string_view name) const noexcept {
  for (const Counter& c : counters)
    if (c.name == name) return c.value;
  return std::nullopt;
}

std::vector<std::string> ReadSummary::warnings() const {
  std::vector<std::string> out;
  for (const LineIssue& issue : malformed)
    out.push_back(fmt::format("{}:{}: skipped malformed line (byte offset {}): {}", path,
                              issue.line, issue.offset, issue.message));
  if (malformed_count > static_cast<int64_t>(malformed.size()))
    out.push_back(fmt::format("{}: ... and {} more malformed lines", path,
                              malformed_count - static_cast<int64_t>(malformed.size())));
  if (malformed_count > 0)
    out.push_back(
        fmt::format("{}: {} of {} lines skipped as malformed", path, malformed_count, lines));
  if (truncated_last_line)
    out.push_back(
        fmt::format("{}:{}: the last line is truncated (the writer was killed "
                    "mid-line); it was ignored",
                    path, truncated_line));
  if (!has_footer)
    out.push_back(
        fmt::format("{}: no footer: incomplete run (killed or crashed); the report "
                    "covers the {} steps recorded",
                    path, n_step));
  if (n_unknown > 0)
    out.push_back(fmt::format("{}: {} lines of unknown type ignored (written by a newer pacer?)",
                              path, n_unknown));
  return out;
}

namespace {

constexpr size_t kMaxCounterNames = 1024;
constexpr size_t kMaxOpNameBytes = 128;  // longest op name a log may carry

// Rewraps a scanner error with the field it happened in, so messages read
// `field "workers": field "freq_mhz": expected a number`.
template <class F>
void in_field(std::string_view key, F&& body) {
  try {
    body();
  } catch (const ScanError& e) {
    throw ScanError(e.offset(), fmt::format("field \"{}\": {}", key, e.what()));
  }
}

void read_opt(JsonScanner& sc, std::optional<double>& out) {
  if (sc.null()) {
    out.reset();
  } else {
    out = sc.number();
  }
}
void read_opt(JsonScanner& sc, std::optional<int64_t>& out) {
  if (sc.null()) {
    out.reset();
  } else {
    out = sc.integer();
  }
}
void read_str(JsonScanner& sc, std::string& out) {
  if (sc.null()) {
    out.clear();
  } else {
    out.assign(sc.string());
  }
}
int read_int32(JsonScanner& sc) {
  const int64_t v = sc.integer();
  if (v < INT32_MIN || v > INT32_MAX) sc.fail(sc.pos(), "integer out of range");
  return static_cast<int>(v);
}

}  // namespace

struct LogReader::Impl {
  std::string path;
  LogVisitor* visitor = nullptr;
  ReadSummary summary;
  bool header_seen = false;

  // Records reused across lines so steady-state parsing does not allocate.
  OpEvent op;
  StepEvent step;
  Footer footer;
  BenchEvent bench;
  std::string type;

  // Counter names, interned: Counter::name views point here.
  std::vector<std::unique_ptr<std::string>> counter_names;

  std::string_view intern(std::string_view name, JsonScanner& sc) {
    for (const auto& n : counter_names)
      if (*n == name) return *n;
    if (counter_names.size() >= kMaxCounterNames)
      sc.fail(sc.pos(), "too many distinct counter names");
    counter_names.push_back(std::make_unique<std::string>(name));
    return *counter_names.back();
  }

  // Finds the top-level "type" without validating the rest of the line.
  void find_type(std::string_view line) {
    JsonScanner sc(line);
    sc.expect('{');
    if (sc.peek() == '}') sc.fail(sc.pos(), "object has no \"type\"");
    for (;;) {
      const bool is_type = sc.string() == eventlog::record::kType;
      sc.expect(':');
      if (is_type) {
        type.assign(sc.string());
        return;
      }
      sc.skip_value();
      const char c = sc.peek();
      if (c == '}') sc.fail(sc.pos(), "object has no \"type\"");
      sc.expect(',');
    }
  }

  void parse_worker(JsonScanner& sc, WorkerSample& w) {
    w.w = w.cpu = w.cpu_end = -1;
    w.t0_ns = w.t1_ns = 0;
    w.freq_mhz.reset();
    w.runq_ns.reset();
    w.oncpu_ns.reset();
    w.chunks.reset();
    w.counters.clear();
    sc.object([&](std::string_view key) {
      in_field(key, [&] {
        if (key == op_key::kWorker) {
          w.w = read_int32(sc);
        } else if (key == op_key::kCpu) {
          w.cpu = sc.null() ? -1 : read_int32(sc);
        } else if (key == op_key::kCpuEnd) {
          w.cpu_end = sc.null() ? -1 : read_int32(sc);
        } else if (key == op_key::kT0Ns) {
          w.t0_ns = sc.integer();
        } else if (key == op_key::kT1Ns) {
          w.t1_ns = sc.integer();
        } else if (key == op_key::kFreqMhz) {
          read_opt(sc, w.freq_mhz);
        } else if (key == op_key::kRunqNs) {
          read_opt(sc, w.runq_ns);
        } else if (key == op_key::kOncpuNs) {
          read_opt(sc, w.oncpu_ns);
        } else if (key == op_key::kChunks) {
          if (!sc.null()) w.chunks = read_int32(sc);
        } else if (key == op_key::kCounters) {
          sc.object([&](std::string_view name) {
            in_field(name, [&] {
              if (sc.null()) return;  // not measured
              const std::string_view interned = intern(name, sc);
              bool integral = true;
              const double value = sc.number(integral);
              w.counters.push_back(Counter{interned, value, integral});
            });
          });
        } else {
          sc.skip_value();
        }
      });
    });
  }

  // Parses the line as an op (the common case: one pass, no type pre-scan). Returns false, with
  // `type` set, when the line turns out to be another record type.
  bool parse_op(std::string_view line, int64_t lineno) {
    JsonScanner sc(line);
    OpEvent& e = op;
    e.line = lineno;
    e.step = 0;
    e.phase = Phase::Other;
    e.name.clear();
    e.layer = -1;
    e.kind = OpKind::Other;
    e.wtype.clear();
    e.rows = e.cols = e.tokens = e.weight_bytes = e.kv_bytes = e.attention_flops = 0;
    e.optional_keys = 0;
    e.t0_ns = e.t1_ns = 0;
    size_t n_workers = 0;
    bool has_name = false, has_phase = false, has_t0 = false, has_t1 = false, has_step = false;
    type.clear();
    sc.object([&](std::string_view key) {
      in_field(key, [&] {
        switch (key.empty() ? '\0' : key[0]) {
          case 's':
            if (key == op_key::kStep) {
              e.step = sc.integer();
              has_step = true;
              return;
            }
            break;
          case 'p':
            if (key == op_key::kPhase) {
              e.phase = parse_phase(sc.string());
              has_phase = true;
              return;
            }
            break;
          case 'a':
            if (key == op_key::kAttentionFlops) {
              const size_t at = sc.pos();
              e.attention_flops = sc.integer();
              if (e.attention_flops < 0) sc.fail(at, "negative attention_flops");
              e.optional_keys |= OpEvent::kAttentionFlops;
              return;
            }
            break;
          case 'n':
            if (key == op_key::kName) {
              e.name.assign(sc.string());
              has_name = true;
              return;
            }
            break;
          case 'l':
            if (key == op_key::kLayer) {
              e.layer = read_int32(sc);
              return;
            }
            break;
          case 'k':
            if (key == op_key::kKind) {
              e.kind = parse_op_kind(sc.string());
              return;
            }
            if (key == op_key::kKvBytes) {
              const size_t at = sc.pos();
              e.kv_bytes = sc.integer();
              if (e.kv_bytes < 0) sc.fail(at, "negative kv_bytes");
              e.optional_keys |= OpEvent::kKvBytes;
              return;
            }
            break;
          case 'r':
            if (key == op_key::kRows) {
              e.rows = sc.integer();
              e.optional_keys |= OpEvent::kRows;
              return;
            }
            break;
          case 'c':
            if (key == op_key::kCols) {
              e.cols = sc.integer();
              e.optional_keys |= OpEvent::kCols;
              return;
            }
            break;
          case 't':
            if (key == op_key::kT0Ns) {
              e.t0_ns = sc.integer();
              has_t0 = true;
              return;
            }
            if (key == op_key::kT1Ns) {
              e.t1_ns = sc.integer();
              has_t1 = true;
              return;
            }
            if (key == op_key::kTokens) {
              e.tokens = sc.integer();
              e.optional_keys |= OpEvent::kTokens;
              return;
            }
            if (key == eventlog::record::kType) {
              type.assign(sc.string());
              return;
            }
            break;
          case 'w':
            if (key == op_key::kWtype) {
              read_str(sc, e.wtype);
              e.optional_keys |= OpEvent::kWtype;
              return;
            }
            if (key == op_key::kWeightBytes) {
              e.weight_bytes = sc.integer();
              e.optional_keys |= OpEvent::kWeightBytes;
              return;
            }
            if (key == op_key::kWorkers) {
              sc.array([&] {
                if (n_workers == e.workers.size()) e.workers.emplace_back();
                parse_worker(sc, e.workers[n_workers++]);
              });
              return;
            }
            break;
          default:
            break;
        }
        sc.skip_value();
      });
    });
    sc.expect_end();
    e.workers.resize(n_workers);
    if (type != eventlog::record::kOp) return false;
    const char* missing = !has_name    ? "name"
                          : !has_phase ? "phase"
                          : !has_step  ? "step"
                          : !has_t0    ? "t0_ns"
                          : !has_t1    ? "t1_ns"
                                       : nullptr;
    if (missing) sc.fail(0, fmt::format("op line has no \"{}\"", missing));
    if (e.t1_ns < e.t0_ns) sc.fail(0, "op line has t1_ns < t0_ns");
    // pacer's op names are short identifiers; a huge one would widen every report table to it.
    if (e.name.size() > kMaxOpNameBytes)
      sc.fail(0, fmt::format("op name of {} bytes (at most {})", e.name.size(), kMaxOpNameBytes));
    visitor->on_op(e);
    return true;
  }

  static void parse_sched_worker(JsonScanner& sc, StepSchedWorker& w) {
    sc.object([&](std::string_view k) {
      in_field(k, [&] {
        if (k == step_key::kWorker) {
          w.w = read_int32(sc);
        } else if (k == step_key::kTid) {
          w.tid = sc.integer();
        } else if (k == step_key::kRunqNs) {
          w.runq_ns = sc.integer();
        } else if (k == step_key::kOncpuNs) {
          w.oncpu_ns = sc.integer();
        } else if (k == step_key::kNvcsw) {
          w.nvcsw = sc.integer();
        } else if (k == step_key::kNivcsw) {
          w.nivcsw = sc.integer();
        } else {
          sc.skip_value();
        }
      });
    });
  }

  void parse_step(std::string_view line, int64_t lineno) {
    JsonScanner sc(line);
    StepEvent& e = step;
    {
      // Reset to defaults but keep the piece and freq buffers' capacity.
      std::string piece = std::move(e.piece);
      std::vector<StepFreq> freq = std::move(e.freq);
      std::vector<StepSchedWorker> sched_workers = std::move(e.sched_workers);
      e = StepEvent{};
      e.sched_workers = std::move(sched_workers);
      e.sched_workers.clear();
      e.line = lineno;
      e.piece = std::move(piece);
      e.piece.clear();
      e.freq = std::move(freq);
      e.freq.clear();
    }
    bool has_step = false, has_phase = false, has_t0 = false, has_t1 = false;
    sc.object([&](std::string_view key) {
      in_field(key, [&] {
        if (key == step_key::kStep) {
          e.step = sc.integer();
          has_step = true;
        } else if (key == step_key::kPhase) {
          e.phase = parse_phase(sc.string());
          has_phase = true;
        } else if (key == step_key::kNPast) {
          e.n_past = sc.integer();
        } else if (key == step_key::kNTokens) {
          read_opt(sc, e.n_tokens);
        } else if (key == step_key::kToken) {
          read_opt(sc, e.token);
        } else if (key == step_key::kPiece) {
          read_str(sc, e.piece);
        } else if (key == step_key::kT0Ns) {
          e.t0_ns = sc.integer();
          has_t0 = true;
        } else if (key == step_key::kT1Ns) {
          e.t1_ns = sc.integer();
          has_t1 = true;
        } else if (key == step_key::kStepMs) {
          read_opt(sc, e.step_ms);
        } else if (key == step_key::kTokS) {
          read_opt(sc, e.tok_s);
        } else if (key == step_key::kFreq) {
          sc.array([&] {
            StepFreq f;
            sc.object([&](std::string_view k) {
              in_field(k, [&] {
                if (k == step_key::kWorker) {
                  f.w = read_int32(sc);
                } else if (k == step_key::kCpu) {
                  f.cpu = sc.null() ? -1 : read_int32(sc);
                } else if (k == step_key::kMhz) {
                  f.mhz = sc.null() ? 0.0 : sc.number();
                } else {
                  sc.skip_value();
                }
              });
            });
            if (f.mhz > 0) e.freq.push_back(f);
          });
        } else if (key == step_key::kSched) {
          if (sc.null()) return;
          sc.object([&](std::string_view k) {
            in_field(k, [&] {
              if (k == step_key::kRunqNs) {
                read_opt(sc, e.runq_ns);
              } else if (k == step_key::kOncpuNs) {
                read_opt(sc, e.oncpu_ns);
              } else if (k == step_key::kNvcsw) {
                read_opt(sc, e.nvcsw);
              } else if (k == step_key::kNivcsw) {
                read_opt(sc, e.nivcsw);
              } else if (k == step_key::kSchedWorkers) {
                if (sc.null()) return;
                sc.array([&] { parse_sched_worker(sc, e.sched_workers.emplace_back()); });
              } else {
                sc.skip_value();
              }
            });
          });
        } else if (key == step_key::kCgroup) {
          if (sc.null()) return;
          sc.object([&](std::string_view k) {
            in_field(k, [&] {
              if (k == step_key::kThrottledNs) {
                read_opt(sc, e.cgroup_throttled_ns);
              } else {
                sc.skip_value();
              }
            });
          });
        } else if (key == step_key::kStealMs) {
          read_opt(sc, e.steal_ms);
        } else if (key == step_key::kStealCpus) {
          if (sc.null()) return;
          e.steal_cpus_ms.emplace();
          sc.array([&] {
            int cpu = -1;
            double ms = 0;
            sc.object([&](std::string_view k) {
              in_field(k, [&] {
                if (k == step_key::kCpu) {
                  cpu = read_int32(sc);
                } else if (k == step_key::kMs) {
                  ms = sc.number();
                } else {
                  sc.skip_value();
                }
              });
            });
            if (cpu >= 0) e.steal_cpus_ms->emplace_back(cpu, ms);
          });
        } else if (key == step_key::kEnergyJ) {
          read_opt(sc, e.energy_j);
        } else if (key == step_key::kPowerW) {
          read_opt(sc, e.power_w);
        } else if (key == step_key::kProcessCpuUsage) {
          read_opt(sc, e.process_cpu_usage);
        } else if (key == step_key::kHostCpuUsage) {
          read_opt(sc, e.host_cpu_usage);
        } else {
          sc.skip_value();
        }
      });
    });
    sc.expect_end();
    const char* missing = !has_step    ? "step"
                          : !has_phase ? "phase"
                          : !has_t0    ? "t0_ns"
                          : !has_t1    ? "t1_ns"
                                       : nullptr;
    if (missing) sc.fail(0, fmt::format("step line has no \"{}\"", missing));
    if (e.t1_ns < e.t0_ns) sc.fail(0, "step line has t1_ns < t0_ns");
    visitor->on_step(e);
  }

  void parse_footer(std::string_view line, int64_t lineno) {
    JsonScanner sc(line);
    Footer& e = footer;
    e = Footer{};
    e.line = lineno;
    sc.object([&](std::string_view key) {
      in_field(key, [&] {
        if (key == footer_key::kSteps) {
          read_opt(sc, e.steps);
        } else if (key == footer_key::kNPrompt) {
          read_opt(sc, e.n_prompt);
        } else if (key == footer_key::kNGenerated) {
          read_opt(sc, e.n_generated);
        } else if (key == footer_key::kPeakRssKb) {
          read_opt(sc, e.peak_rss_kb);
        } else if (key == footer_key::kLoadMs) {
          read_opt(sc, e.load_ms);
        } else if (key == footer_key::kTtftMs) {
          read_opt(sc, e.ttft_ms);
        } else if (key == footer_key::kPrefillTokS) {
          read_opt(sc, e.prefill_tok_s);
        } else if (key == footer_key::kDecodeTokS) {
          read_opt(sc, e.decode_tok_s);
        } else if (key == footer_key::kWallMs) {
          read_opt(sc, e.wall_ms);
        } else if (key == footer_key::kTokenizeMs) {
          read_opt(sc, e.tokenize_ms);
        } else if (key == footer_key::kDetokenizeMs) {
          read_opt(sc, e.detokenize_ms);
        } else if (key == footer_key::kFreqAfterMhz) {
          if (sc.null()) return;
          sc.array([&] {
            if (!sc.null()) e.freq_after_mhz.push_back(sc.number());
          });
        } else if (key == footer_key::kStop) {
          read_str(sc, e.stop);
        } else {
          sc.skip_value();
        }
      });
    });
    sc.expect_end();
    summary.has_footer = true;
    visitor->on_footer(e);
  }

  void parse_bench(std::string_view line, int64_t lineno) {
    JsonScanner sc(line);
    BenchEvent& e = bench;
    e = BenchEvent{};
    e.line = lineno;
    sc.object([&](std::string_view key) {
      in_field(key, [&] {
        if (key == bench_key::kTest) {
          read_str(sc, e.test);
        } else if (key == bench_key::kNPrompt) {
          read_opt(sc, e.n_prompt);
        } else if (key == bench_key::kNGen) {
          read_opt(sc, e.n_gen);
        } else if (key == bench_key::kThreads) {
          read_opt(sc, e.threads);
        } else if (key == bench_key::kReps) {
          read_opt(sc, e.reps);
        } else if (key == bench_key::kPin) {
          read_str(sc, e.pin);
        } else if (key == bench_key::kTokSMean) {
          read_opt(sc, e.tok_s_mean);
        } else if (key == bench_key::kTokSSd) {
          read_opt(sc, e.tok_s_sd);
        } else if (key == bench_key::kCv) {
          read_opt(sc, e.cv);
        } else if (key == bench_key::kFreqMhzMean) {
          read_opt(sc, e.freq_mhz_mean);
        } else if (key == bench_key::kRooflinePct) {
          read_opt(sc, e.roofline_pct);
        } else if (key == bench_key::kFlags) {
          if (sc.null()) return;
          sc.array([&] { e.flags.emplace_back(sc.string()); });
        } else {
          sc.skip_value();
        }
      });
    });
    sc.expect_end();
    visitor->on_bench(e);
  }

  [[noreturn]] static void sc_fail_no_type() { throw ScanError(0, "object has no \"type\""); }

  void note_issue(int64_t lineno, int64_t offset, std::string message) {
    ++summary.malformed_count;
    if (summary.malformed.size() < ReadSummary::kMaxIssues)
      summary.malformed.push_back(LineIssue{lineno, offset, std::move(message)});
  }

  // One line without its '\n'. `unterminated`: the file's last bytes, with no newline after.
  void process_line(std::string_view line, int64_t lineno, int64_t offset, bool unterminated) {
    ++summary.lines;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) {
      ++summary.n_blank;
      return;
    }
    if (!header_seen) {
      header_seen = true;
      parse_header_line(line, lineno, offset, unterminated);
      return;
    }
    try {
      bool is_op = false;
      try {
        is_op = parse_op(line, lineno);
      } catch (const ScanError&) {
        // Malformed as an op; if it is not an op line, its own parser decides.
        find_type(line);
        if (type == eventlog::record::kOp) throw;
        if (type != eventlog::record::kStep && type != eventlog::record::kFooter &&
            type != eventlog::record::kBench && type != eventlog::record::kHeader) {
          JsonScanner sc(line);  // an unknown type must still be well-formed JSON
          sc.skip_value();
          sc.expect_end();
        }
      }
      if (is_op) {
        ++summary.n_op;
      } else if (type == eventlog::record::kStep) {
        parse_step(line, lineno);
        ++summary.n_step;
      } else if (type == eventlog::record::kFooter) {
        parse_footer(line, lineno);
        ++summary.n_footer;
      } else if (type == eventlog::record::kBench) {
        parse_bench(line, lineno);
        ++summary.n_bench;
      } else if (type == eventlog::record::kHeader) {
        note_issue(lineno, offset, "a second header (concatenated logs?) was ignored");
      } else if (type.empty()) {
        sc_fail_no_type();
      } else {
        ++summary.n_unknown;
        visitor->on_unknown(type, lineno);
      }
    } catch (const ScanError& e) {
      if (unterminated) {
        summary.truncated_last_line = true;
        summary.truncated_line = lineno;
        return;
      }
      note_issue(lineno, offset + static_cast<int64_t>(e.offset()), e.what());
    }
  }

  void parse_header_line(std::string_view line, int64_t lineno, int64_t offset, bool unterminated);

  // A log whose every record after the header was malformed is not a run to report on (an empty
  // profile with exit 0 would pass for one): an error naming the first bad line.
  void require_valid_records() const {
    const ReadSummary& s = summary;
    if (s.malformed_count == 0 || s.n_op + s.n_step + s.n_footer + s.n_bench > 0) return;
    const LineIssue& first = s.malformed.front();
    throw LogError(path, first.line, first.offset,
                   fmt::format("no valid record: all {} lines after the header are malformed "
                               "(the first: {})",
                               s.malformed_count, first.message));
  }
};

// Header parsing lives in event_log_header.cpp.
void parse_header_json(const nlohmann::json& j, Header& h);  // throws std::runtime_error

void LogReader::Impl::parse_header_line(std::string_view line, int64_t lineno, int64_t offset,
                                        bool unterminated) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw LogError(path, lineno, offset + static_cast<int64_t>(e.byte) - 1,
                   unterminated
                       ? "the log ends inside its header line (no complete header)"
                       : fmt::format("the first line is not a valid JSON header: {}", e.what()));
  }
  const auto type_it = j.is_object() ? j.find(eventlog::record::kType) : j.end();
  if (type_it == j.end() || *type_it != eventlog::record::kHeader) {
    throw LogError(path, lineno, offset,
                   "the first record is not a header (\"type\":\"header\"): not a pacer event log");
  }
  const auto schema_it = j.find(eventlog::header_key::kSchema);
  if (schema_it == j.end() || !schema_it->is_number_integer()) {
    throw LogError(path, lineno, offset, "header field \"schema\" is missing or not an integer");
  }
  const int64_t schema = schema_it->get<int64_t>();
  if (schema > kSchemaVersion) {
    throw LogError(path, lineno, offset,
                   fmt::format("event log schema {} is newer than this reader's schema {}; "
                               "read it with a newer pacer",
                               schema, kSchemaVersion));
  }
  if (schema < 1) {
    throw LogError(path, lineno, offset, fmt::format("header has invalid schema {}", schema));
  }
  Header h;
  h.line = lineno;
  try {
    parse_header_json(j, h);
  } catch (const std::exception& e) {
    throw LogError(path, lineno, offset, fmt::format("bad header: {}", e.what()));
  }
  h.raw = std::move(j);
  summary.schema = h.schema;
  ++summary.n_header;
  visitor->on_header(h);
}

LogReader::LogReader(std::string path) : path_(std::move(path)) {}
LogReader::~LogReader() = default;

namespace {

// Splits `text` (starting at file offset `base`) into lines; returns bytes consumed. With `at_eof`
// the remainder without a newline is the last line.
template <class F>
size_t split_lines(std::string_view text, bool at_eof, F&& on_line) {
  size_t start = 0;
  for (;;) {
    const void* nl = std::memchr(text.data() + start, '\n', text.size() - start);
    if (!nl) break;
    const size_t end = static_cast<const char*>(nl) - text.data();
    on_line(text.substr(start, end - start), start, false);
    start = end + 1;
  }
  if (at_eof && start < text.size()) {
    on_line(text.substr(start), start, true);
    start = text.size();
  }
  return start;
}

}  // namespace

namespace {

// Hands `on_line(line, lineno, offset, unterminated)` every line of a source read in chunks;
// returns the bytes read. `fill(dst, n, offset)` copies up to n bytes into dst and returns how
// many (fewer only at the end); it throws on a read error. A line longer than a chunk grows the
// buffer.
template <class Fill, class OnLine>
int64_t read_chunked(Fill&& fill, OnLine&& on_line) {
  constexpr size_t kChunk = 1 << 20;
  std::vector<char> buf(2 * kChunk);
  size_t len = 0;        // bytes in buf
  int64_t buf_base = 0;  // file offset of buf[0]
  int64_t lineno = 0;
  bool eof = false;
  while (!eof) {
    if (buf.size() - len < kChunk) buf.resize(len + kChunk);  // a line longer than a chunk
    const size_t got = fill(buf.data() + len, kChunk, buf_base + static_cast<int64_t>(len));
    eof = got < kChunk;
    len += got;
    const size_t used =
        split_lines(std::string_view(buf.data(), len), eof,
                    [&](std::string_view line, size_t at, bool unterminated) {
                      on_line(line, ++lineno, buf_base + static_cast<int64_t>(at), unterminated);
                    });
    std::memmove(buf.data(), buf.data() + used, len - used);
    len -= used;
    buf_base += static_cast<int64_t>(used);
  }
  return buf_base;
}

}  // namespace

ReadSummary LogReader::read(LogVisitor& visitor) {
  std::FILE* f = std::fopen(path_.c_str(), "rb");
  if (!f) throw LogError(path_, 0, -1, fmt::format("cannot open: {}", std::strerror(errno)));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, &std::fclose);
  impl_ = std::make_unique<Impl>();
  Impl& im = *impl_;
  im.path = path_;
  im.summary.path = path_;
  im.visitor = &visitor;
  im.summary.bytes = read_chunked(
      [&](char* dst, size_t n, int64_t offset) {
        const size_t got = std::fread(dst, 1, n, f);
        if (got < n && std::ferror(f))
          throw LogError(path_, 0, offset, fmt::format("read error: {}", std::strerror(errno)));
        return got;
      },
      [&](std::string_view line, int64_t lineno, int64_t offset, bool unterminated) {
        im.process_line(line, lineno, offset, unterminated);
      });
  if (!im.header_seen) throw LogError(im.path, 0, -1, "empty event log (no header)");
  im.require_valid_records();
  return std::move(im.summary);
}

ReadSummary LogReader::read_stream(std::istream& in, LogVisitor& visitor, std::string name) {
  Impl im;
  im.path = name;
  im.summary.path = name;
  im.visitor = &visitor;
  im.summary.bytes = read_chunked(
      [&](char* dst, size_t n, int64_t offset) {
        in.read(dst, static_cast<std::streamsize>(n));
        const auto got = static_cast<size_t>(in.gcount());
        if (got < n && in.bad()) throw LogError(name, 0, offset, "read error");
        return got;
      },
      [&](std::string_view line, int64_t lineno, int64_t offset, bool unterminated) {
        im.process_line(line, lineno, offset, unterminated);
      });
  if (!im.header_seen) throw LogError(im.path, 0, -1, "empty event log (no header)");
  im.require_valid_records();
  return std::move(im.summary);
}

ReadSummary LogReader::read_text(std::string_view text, LogVisitor& visitor, std::string name) {
  Impl im;
  im.path = name;
  im.summary.path = name;
  im.visitor = &visitor;
  int64_t lineno = 0;
  split_lines(text, true, [&](std::string_view line, size_t at, bool unterminated) {
    im.process_line(line, ++lineno, static_cast<int64_t>(at), unterminated);
  });
  im.summary.bytes = static_cast<int64_t>(text.size());
  if (!im.header_seen) throw LogError(name, 0, -1, "empty event log (no header)");
  im.require_valid_records();
  return std::move(im.summary);
}

}  // namespace pacer::analysis
