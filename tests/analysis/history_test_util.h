#pragma once
// Shared by the history tests: a temporary directory, whole-file reads, and a bench record with
// plausible values that each test changes where it matters.
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/history_db.h"

namespace pacer::analysis::history_test {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("pacer_history_test_{}_{}", ::getpid(), counter++);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A tg64 row of host-a with these repetitions (mean, sd and cv computed from them).
inline BenchRecord make_record(const std::string& time_utc, const std::vector<double>& tok_s) {
  BenchRecord r;
  r.time_utc = time_utc;
  r.host = "host-a";
  r.host_id = "id-host-a";
  r.cpu_model = "Given CPU";
  r.kernel = "6.1.0-test";
  r.governor = "performance";
  r.microcode = "0x1";
  r.pacer_version = "0.1.0";
  r.git_sha = "aaaaaaaaaaaa";
  r.model_name = "tiny";
  r.model_path = "/models/tiny.gguf";
  r.model_hash = "fp64:0123456789abcdef";
  r.model_bytes = 1 << 20;
  r.params = 1000;
  r.arch = "llama";
  r.type = "q8_0";
  r.kv_type = "f16";
  r.test = "tg64";
  r.n_gen = 64;
  r.threads = 2;
  r.pin = "compact";
  r.cpus = {0, 1};
  r.tok_s = tok_s;
  const double n = static_cast<double>(tok_s.size());
  r.tok_s_mean = std::accumulate(tok_s.begin(), tok_s.end(), 0.0) / n;
  double ss = 0;
  for (double v : tok_s) ss += (v - r.tok_s_mean) * (v - r.tok_s_mean);
  r.tok_s_sd = tok_s.size() > 1 ? std::sqrt(ss / (n - 1)) : 0;
  r.cv = r.tok_s_mean > 0 ? r.tok_s_sd / r.tok_s_mean : 0;
  r.freq_mean_mhz = 3000;
  return r;
}

}  // namespace pacer::analysis::history_test
