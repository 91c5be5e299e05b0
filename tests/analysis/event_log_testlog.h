#pragma once
// Writes event logs for tests the way docs/event-log.md describes them, independently of the
// reader: lines are assembled by hand (keys in alphabetical order, as nlohmann::json writes them,
// so "type" is not first), never by the code under test.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace pacer::analysis::testlog {

// A synthetic Llama-style run: `n_prompt` prompt tokens in one prefill step, then `n_decode`
// decode steps, each with embed, 12 ops per layer, output_norm, output and a sample step.
struct SyntheticRun {
  int n_layers = 2;
  int n_prompt = 4;
  int n_decode = 3;
  int workers = 2;
  bool hw_counters = true;   // instructions + cycles per worker
  double freq_mhz = 2900.0;  // per-worker effective frequency
  int64_t op_ns = 1000;      // base duration of an op
  int64_t gap_ns = 100;      // idle gap between ops
  bool footer = true;
  double bandwidth_gbs = 0;  // 0: header says null
  // Variation for plots: op times vary by up to +-jitter (deterministic), and decode steps in the
  // middle fifth of the run run at throttle x freq_mhz (and take 1/throttle as long).
  double jitter = 0;
  double throttle = 1.0;
  // Disturbed decode steps (numbers as in the log: decode is 1..n_decode) at the run's clock:
  // layer 0's ffn_gate_up takes pause_ns longer (the workers paused as a whole), and every op
  // of the step takes spread x as long (everything slower: bandwidth taken by other work).
  // pause_steal: those steps' lines report the pause as VM steal.
  std::vector<int64_t> disturbed_steps{};
  int64_t pause_ns = 0;
  double spread = 1.0;
  bool pause_steal = false;
  // Decode step s's ops take (1 + growth x s) as long (a context that grows step by step).
  double growth = 0;
};

// Streams the log to `out` (1M-event logs never sit in memory). Returns the number of op lines.
int64_t write_synthetic(std::ostream& out, const SyntheticRun& run);

// A header line with the given schema and bandwidth (<=0: null).
std::string header_line(int schema = 1, double bandwidth_gbs = 0, int n_layers = 2);

}  // namespace pacer::analysis::testlog
