#pragma once
// Deterministic stand-ins for the recorder's counter and frequency sources, and a log reader.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "hwcounters/counter_source.h"
#include "hwcounters/frequency.h"
#include "runtime/recorder.h"

namespace pacer::runtime::testing {

// Every read advances event j by increments[j] and the group's enabled time by 1000 ns and its
// running time by running_per_read: deltas between two reads are known exactly.
class FakeCounterSource final : public hwcounters::CounterSource {
 public:
  FakeCounterSource(std::vector<std::string> keys, std::vector<uint64_t> increments,
                    uint64_t running_per_read = 1000)
      : keys_(std::move(keys)), inc_(std::move(increments)), running_(running_per_read) {
    unavailable_.push_back({"fake_missing", "fake: never counted"});
  }
  std::string_view name() const noexcept override { return "fake"; }
  std::string_view read_method() const noexcept override { return "fake"; }
  const std::vector<std::string>& keys() const noexcept override { return keys_; }
  const std::vector<hwcounters::Unavailable>& unavailable() const noexcept override {
    return unavailable_;
  }
  bool read(hwcounters::Reading& out) noexcept override {
    if (spin_ns_ > 0) {  // a read that costs what a slow counter read would
      const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(spin_ns_);
      while (std::chrono::steady_clock::now() < until) {
      }
    }
    ++reads_;
    enabled_ += 1000;
    running_total_ += running_;
    for (size_t j = 0; j < inc_.size(); ++j) value_[j] += inc_[j];
    out.time_enabled_ns = enabled_;
    out.time_running_ns = running_total_;
    for (size_t j = 0; j < inc_.size(); ++j) out.values[j] = value_[j];
    return true;
  }
  int reads() const noexcept { return reads_; }
  void set_read_cost_ns(int64_t ns) noexcept { spin_ns_ = ns; }

 private:
  std::vector<std::string> keys_;
  std::vector<uint64_t> inc_;
  uint64_t running_;
  std::vector<hwcounters::Unavailable> unavailable_;
  std::array<uint64_t, hwcounters::kMaxEventsPerSource> value_{};
  uint64_t enabled_ = 0, running_total_ = 0;
  int reads_ = 0;
  int64_t spin_ns_ = 0;
};

class FakeFrequency final : public hwcounters::FrequencySource {
 public:
  explicit FakeFrequency(double mhz) : mhz_(mhz) {}
  std::string_view name() const noexcept override { return "fake_frequency"; }
  std::string detail() const override { return "fixed"; }
  double sample_mhz(int) noexcept override {
    ++samples;
    return mhz_;
  }
  std::atomic<int> samples{0};

 private:
  double mhz_;
};

// A stand-in for the executor: worker 1 is a thread of its own that brackets its chunks when
// the caller (worker 0) runs a parallel op.
class TwoWorkers {
 public:
  explicit TwoWorkers(Recorder& rec) : rec_(rec), thread_([this] { loop(); }) {}
  ~TwoWorkers() {
    {
      std::lock_guard<std::mutex> l(mu_);
      quit_ = true;
      ++generation_;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Worker 0 (the caller) runs chunks0 chunks, worker 1 chunks1, each calling body(worker).
  void run(int chunks0, int chunks1, std::function<void(int)> body = {}) {
    {
      std::lock_guard<std::mutex> l(mu_);
      chunks1_ = chunks1;
      body_ = body;
      done_ = false;
      ++generation_;
    }
    cv_.notify_all();
    for (int c = 0; c < chunks0; ++c) {
      rec_.on_chunk_begin(0);
      if (body) body(0);
      rec_.on_chunk_end(0);
    }
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return done_; });
  }

 private:
  void loop() {
    int seen = 0;
    for (;;) {
      int chunks;
      std::function<void(int)> body;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return generation_ != seen; });
        seen = generation_;
        if (quit_) return;
        chunks = chunks1_;
        body = body_;
      }
      for (int c = 0; c < chunks; ++c) {
        rec_.on_chunk_begin(1);
        if (body) body(1);
        rec_.on_chunk_end(1);
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        done_ = true;
      }
      cv_.notify_all();
    }
  }
  Recorder& rec_;
  std::mutex mu_;
  std::condition_variable cv_;
  int generation_ = 0, chunks1_ = 0;
  std::function<void(int)> body_;
  bool done_ = false, quit_ = false;
  std::thread thread_;
};

inline std::string temp_log_path(const std::string& tag) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return ::testing::TempDir() + "pacer_" + tag + "_" + info->test_suite_name() + "_" +
         info->name() + ".jsonl";
}

// Every line of the log, parsed; fails the test on a line that does not parse.
inline std::vector<nlohmann::json> read_log(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << path << ":" << n << ": " << line;
    out.push_back(std::move(j));
  }
  return out;
}

inline std::vector<nlohmann::json> of_type(const std::vector<nlohmann::json>& log,
                                           const std::string& type) {
  std::vector<nlohmann::json> out;
  for (const auto& j : log) {
    if (j.value("type", "") == type) out.push_back(j);
  }
  return out;
}

// Options for a recorder on fake sources: no machine probes, so the test is fast and exact.
inline RecorderOptions fake_options(const std::string& path, int workers,
                                    CounterSourceFactory factory, double mhz = 2345.0) {
  RecorderOptions o;
  o.events_path = path;
  o.workers = workers;
  o.probe_energy = false;
  o.measure_freq_before_after = false;
  o.counter_factory = std::move(factory);
  o.frequency_source = std::make_shared<FakeFrequency>(mhz);
  return o;
}

}  // namespace pacer::runtime::testing
