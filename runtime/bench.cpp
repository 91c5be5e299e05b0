#include "runtime/bench.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <mutex>
#include <numeric>
#include <string_view>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "eventlog/roofline.h"
#include "eventlog/schema.h"
#include "hwcounters/frequency.h"
#include "hwcounters/host_facts.h"
#include "loader/quantize.h"
#include "ops/attention.h"
#include "ops/bandwidth.h"
#include "ops/fma_probe.h"
#include "ops/isa.h"
#include "ops/kernel_set.h"
#include "ops/sampling.h"
#include "pacer/version.h"
#include "runtime/executor.h"
#include "runtime/kernel_ceiling.h"
#include "runtime/recorder.h"
#include "runtime/session.h"

namespace pacer::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Random token ids as llama-bench feeds them (no tokenizer, no sampling): the work per token does
// not depend on which ids they are.
class TokenStream {
 public:
  TokenStream(uint64_t seed, int64_t n_vocab) : state_(seed), n_vocab_(n_vocab) {}
  int32_t next() {
    state_ += 0x9e3779b97f4a7c15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<int32_t>(z % static_cast<uint64_t>(n_vocab_));
  }

 private:
  uint64_t state_;
  int64_t n_vocab_;
};

// Effective MHz on every worker of the executor, right after a rep (the frequency the work ran
// at, not the idle one): each worker runs the frequency source on its own CPU.
std::vector<double> sample_worker_mhz(Executor& ex, hwcounters::FrequencySource& src) {
  const int w = ex.workers();
  std::vector<double> mhz(static_cast<size_t>(w), std::nan(""));
  std::mutex mu;  // sources that keep per-CPU state (APERF/MPERF) are not thread-safe
  ex.run_chunks(w, 1, [&](int chunk, int64_t, int64_t) {
    const int cpu = current_cpu();
    std::lock_guard<std::mutex> lock(mu);
    mhz[static_cast<size_t>(chunk)] = src.sample_mhz(cpu);
  });
  return mhz;
}

std::string row_label(const BenchRow& r) {
  return fmt::format("{} t={} pin={}", r.test, r.threads, r.pin);
}

std::string utc_now_iso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string file_safe(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
  }
  return s;
}

// The pin a row runs with and the name its rows carry: the --numa plan for the row's thread
// count, or the listed pin policy.
std::pair<PinSpec, std::string> row_pin(const BenchOptions& opts, const PinSpec& pin,
                                        int threads_req, int start_cpu) {
  if (opts.numa == NumaPolicy::None) return {pin, pin.to_string()};
  const NumaPlan plan = plan_numa(Topology::detect(), opts.numa, threads_req, start_cpu);
  return {plan.pin(), "numa:" + std::string(numa_policy_name(opts.numa))};
}

}  // namespace

void summarize_rates(BenchRow& row) {
  const auto& v = row.tok_s;
  if (!v.empty()) {
    const double n = static_cast<double>(v.size());
    row.mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
    double ss = 0;
    for (double x : v) ss += (x - row.mean) * (x - row.mean);
    row.sd = v.size() > 1 ? std::sqrt(ss / (n - 1)) : 0.0;
    row.cv = row.mean > 0 ? row.sd / row.mean : 0.0;
  }
  if (!row.token_s.empty()) {
    std::vector<double> t = row.token_s;
    const size_t mid = t.size() / 2;
    std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(mid), t.end());
    double median = t[mid];
    if (t.size() % 2 == 0) {  // the mean of the two middle values
      median =
          (median + *std::max_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
    }
    row.tok_s_p50 = median > 0 ? 1.0 / median : 0.0;
  }
}

namespace {
double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

void pair_reps_with_probes(BenchRow& row, int64_t weight_bytes) {
  row.rep_roofline_pct.clear();
  row.roofline_rep_p50_pct = 0;
  std::vector<double> probes{row.bandwidth_before_gbs};
  probes.insert(probes.end(), row.bandwidth_between_gbs.begin(), row.bandwidth_between_gbs.end());
  probes.push_back(row.bandwidth_after_gbs);
  if (weight_bytes <= 0 || row.tok_s.empty() || probes.size() != row.tok_s.size() + 1) return;
  if (std::any_of(probes.begin(), probes.end(), [](double g) { return g <= 0; })) return;
  for (size_t i = 0; i < row.tok_s.size(); ++i) {
    const double ceiling = eventlog::decode_ceiling_tok_s(
        (probes[i] + probes[i + 1]) / 2, weight_bytes, row.kv_bytes_per_token,
        row.attention_flops_per_token, row.fma_gflops);
    row.rep_roofline_pct.push_back(100.0 * row.tok_s[i] / ceiling);
  }
  row.roofline_rep_p50_pct = median_of(row.rep_roofline_pct);
}

// The median token against the mean: a rep's rate hides whether every token was slow or a few
// were very slow (a host that takes the vCPU away for milliseconds). The mean is over the same
// tokens (the reps timed token by token, not a recorded one, which the recorder slows). A row
// whose weights fit the LLC has no roofline to quote a % of (flag_roofline runs first).
void flag_slow_tokens(BenchRow& row) {
  constexpr double kFlagBelow = 0.05;  // mean this far below the median token's rate
  // The row's own mean (the t/s printed beside the flag): every timed rep is an unrecorded one.
  if (row.tok_s_p50 <= 0 || row.token_s.empty() || row.mean <= 0) return;
  const double mean = row.mean;
  if (mean >= (1.0 - kFlagBelow) * row.tok_s_p50) return;
  row.flags.push_back(fmt::format(
      "mean {:.0f}% below the median token's {:.2f} t/s{}: a few tokens ran far slower than the "
      "rest (host steal, other load?)",
      100.0 * (1.0 - mean / row.tok_s_p50), row.tok_s_p50,
      row.roofline_applies && row.roofline_p50_pct > 0
          ? fmt::format(" ({:.0f}% of the roofline)", row.roofline_p50_pct)
          : std::string()));
}

void flag_roofline(BenchRow& row, int64_t weight_bytes, int64_t llc_bytes) {
  const auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
  if (llc_bytes > 0 && weight_bytes <= llc_bytes) {
    row.roofline_applies = false;
    row.flags.push_back(fmt::format(
        "weights ({:.0f} MiB) fit the LLC ({:.0f} MiB): cache-resident, the DRAM roofline does "
        "not apply",
        mib(weight_bytes), mib(llc_bytes)));
    return;
  }
  if (llc_bytes > 0 && weight_bytes <= 2 * llc_bytes) {
    row.flags.push_back(fmt::format(
        "weights ({:.0f} MiB) within 2x the LLC ({:.0f} MiB): part of them can stay cached "
        "between tokens, so the roofline % can read high{}",
        mib(weight_bytes), mib(llc_bytes),
        row.roofline_pct > 100.0 ? fmt::format(" (here {:.0f}%)", row.roofline_pct) : ""));
    return;
  }
  if (row.roofline_pct > 100.0) {
    // Where attention's flops bind the ceiling, the FMA probe may be the one that under-read.
    const bool flops_bind = row.ceiling_tok_s < 0.995 * row.bandwidth_ceiling_tok_s;
    row.flags.push_back(fmt::format(
        "{:.0f}% of the measured roofline: the {} under-read this machine (host noise while it "
        "ran?); the % is not trustworthy",
        row.roofline_pct, flops_bind ? "bandwidth or FMA probe" : "bandwidth probe"));
  }
}

namespace {
// The keys the queries of the tokens at positions first_pos .. first_pos + n - 1 see, summed over
// the tokens and every layer (all before each, or the sliding window's).
int64_t keys_seen(const loader::ModelConfig& cfg, int64_t first_pos, int64_t n) {
  int64_t keys = 0;
  for (int64_t pos = first_pos; pos < first_pos + n; ++pos) {
    for (int64_t il = 0; il < cfg.n_layers; ++il) {
      keys += cfg.is_swa_layer(il) ? std::min(pos + 1, cfg.sliding_window) : pos + 1;
    }
  }
  return keys;
}
}  // namespace

int64_t kv_read_bytes_per_token(const loader::ModelConfig& cfg, ops::WeightType kv_type,
                                int64_t first_pos, int64_t n) {
  if (n <= 0) return 0;
  const int64_t row = ops::kv_row_bytes(kv_type, cfg.n_kv_heads * cfg.head_dim);
  return (keys_seen(cfg, first_pos, n) * 2 * row + n / 2) / n;
}

int64_t attention_flops_per_token(const loader::ModelConfig& cfg, ops::WeightType kv_type,
                                  int64_t first_pos, int64_t n) {
  if (n <= 0 || kv_type == ops::WeightType::Q8_0) return 0;
  return (keys_seen(cfg, first_pos, n) * 4 * cfg.n_heads * cfg.head_dim + n / 2) / n;
}

BenchResult run_bench(const Model& model, const BenchOptions& opts) {
  if (opts.reps < 1) throw std::invalid_argument("bench: --reps must be at least 1");
  const loader::ModelConfig& cfg = model.config();
  BenchResult res;
  res.model_path = model.file().path().string();
  res.model_name = cfg.name;
  res.arch = std::string(loader::arch_name(cfg.arch));
  res.type = std::string(ops::type_name(model.weights().main_type));
  // As llama-bench's model_type names the file (a Q4_K_M file holds Q6_K and Q4_K matrices).
  res.file_type = loader::llama_file_type_name(
      cfg.file_type >= 0 ? cfg.file_type : loader::llama_guessed_file_type(model.file()));
  res.size_class = loader::llama_size_class(cfg);
  res.model_bytes = static_cast<int64_t>(model.file().file_size());
  for (const auto& t : model.file().tensors()) res.tensor_bytes += static_cast<int64_t>(t.bytes);
  res.params = cfg.n_params;
  res.matmul_bytes_per_token = model.weights().matmul_bytes;
  res.repacked_matrices = model.repacked_matrices();
  res.bf16_dot = model.bf16_dot_prefill(ops::detect_isa());
  const ops::KernelSet kernels = ops::KernelSet::for_isa(ops::detect_isa());
  res.gemv_streams = kernels.x16(ops::WeightType::Q4_0).gemv_streams;
  res.x16_gemv = kernels.x16_gemv_choices();
  res.attention_isa_avx2 = kernels.isa() == ops::Isa::Avx2;
  res.attention_one_pass = kernels.attention_one_pass();
  for (const ops::X16GemvChoice& c : kernels.for_workers(1).x16_gemv_choices()) {
    if (c.prefetch_far) res.x16_prefetch_far_one_worker.push_back(c.type);
  }
  const hwcounters::HostFacts host = hwcounters::collect_host_facts();
  res.cpu_model = host.cpu_model;
  res.cpu_signature = host.cpu_signature;
  res.kv_type = opts.kv_type;
  res.n_batch_opt = opts.n_batch;
  auto freq = hwcounters::choose_frequency_source(hwcounters::tsc_info().mhz);
  res.frequency_source = std::string(freq.source->name());

  struct Test {
    bool tg;
    int64_t n;  // pp: prompt tokens; tg: generated tokens
    int64_t depth;
    int64_t pg_gen = 0;  // > 0: a pp+tg test generating this many after the n-token prompt
  };
  std::vector<Test> tests;
  for (int64_t d : opts.n_depth) {
    if (d < 0) throw std::invalid_argument("bench: a depth (-d) must be >= 0");
    for (int64_t p : opts.n_prompt) {
      if (p > 0) tests.push_back({false, p, d});
    }
    for (int64_t g : opts.n_gen) {
      if (g > 0) tests.push_back({true, g, d});
    }
    for (const auto& [p, g] : opts.n_pg) {
      if (p < 0 || g < 0 || p + g == 0)
        throw std::invalid_argument("bench: a -pg test needs pp,tg >= 0, not both 0");
      if (g == 0) {
        tests.push_back({false, p, d});
      } else if (p == 0) {
        tests.push_back({true, g, d});
      } else {
        tests.push_back({false, p, d, g});
      }
    }
  }
  const int total = static_cast<int>(tests.size() * opts.threads.size() * opts.pins.size());
  if (total == 0) throw std::invalid_argument("bench: no tests (all -p and -n values are 0)");
  if (!opts.events_dir.empty()) std::filesystem::create_directories(opts.events_dir);

  // The roofline of a row: the read bandwidth of its thread count on its CPUs (probe_read_bandwidth
  // searches the read loops), measured once per placement.
  struct Measured {
    int threads;
    std::vector<int> cpus;
    ops::BandwidthProbe probe;
  };
  std::vector<Measured> bandwidth_cache;
  auto bandwidth_for = [&](int threads,
                           const std::vector<int>& cpus) -> const ops::BandwidthProbe& {
    for (const Measured& m : bandwidth_cache) {
      if (m.threads == threads && m.cpus == cpus) return m.probe;
    }
    bandwidth_cache.push_back(
        {threads, cpus,
         ops::probe_read_bandwidth(
             {.threads = threads, .bytes = opts.bandwidth_bytes, .reps = 3, .cpus = cpus})});
    return bandwidth_cache.back().probe;
  };
  // The best read loop of a placement measured again: a shared host's memory bandwidth moves by
  // tens of % over minutes (the dev VM's 2-thread figure read 28-43 GB/s within one session), so a
  // tg row is held against the bandwidth right before and right after its timed reps, not against
  // a search made rows earlier.
  auto bandwidth_now = [&](int threads, const std::vector<int>& cpus) {
    const ops::BandwidthProbe& found = bandwidth_for(threads, cpus);
    return ops::probe_read_bandwidth({.threads = threads,
                                      .bytes = opts.bandwidth_bytes,
                                      .reps = 3,
                                      .cpus = cpus,
                                      .variant = found.variant})
        .gbs;
  };
  // The compute side of a tg row's roofline: the fp32 multiply-add rate of its threads on its
  // CPUs, once per placement (a peak: the best pass of every loop, unlike the bandwidth, which a
  // shared host moves within minutes).
  struct Flops {
    int threads;
    std::vector<int> cpus;
    ops::FmaProbe probe;
  };
  std::vector<Flops> fma_cache;
  auto fma_for = [&](int threads, const std::vector<int>& cpus) -> const ops::FmaProbe& {
    for (const Flops& f : fma_cache) {
      if (f.threads == threads && f.cpus == cpus) return f.probe;
    }
    fma_cache.push_back({threads, cpus, ops::probe_fma_rate({.threads = threads, .cpus = cpus})});
    return fma_cache.back().probe;
  };
  // The last-level cache as the topology reports it (cpuid through hwloc), and as measured: a
  // tg row's weights are held against the working set its threads keep cached (re-read at 1.25x
  // DRAM speed or more), since a hypervisor's cpuid can claim any cache (the Oxide Turin-like
  // guest: 2 x 508 MiB of L3, where 128 MiB re-reads at DRAM speed) and the cache one thread
  // reaches can be one CCD's share of it. Measured once per placement, after its probe.
  int64_t topology_llc = 0;
  std::string topology_llc_text;
  for (const auto& c : Topology::detect().caches) {
    if (c.level != 3) continue;
    topology_llc = std::max<int64_t>(topology_llc, c.size_bytes * c.instances);
    topology_llc_text = fmt::format("{} x {} MiB", c.instances, c.size_bytes >> 20);
  }
  struct Reach {
    int threads;
    std::vector<int> cpus;
    int64_t llc = 0;  // what flag_roofline holds the weights against
    std::string method;
  };
  std::vector<Reach> reach_cache;
  auto cache_reach_for = [&](int threads, const std::vector<int>& cpus) -> const Reach& {
    for (const Reach& r : reach_cache) {
      if (r.threads == threads && r.cpus == cpus) return r;
    }
    const ops::BandwidthProbe& bw = bandwidth_for(threads, cpus);
    const size_t max_bytes =
        std::min(opts.bandwidth_bytes / 2,
                 std::max(size_t{256} << 20, std::bit_ceil(static_cast<size_t>(2 * topology_llc))));
    const size_t min_bytes = std::bit_ceil(
        std::max(size_t{4} << 20, static_cast<size_t>(threads) * (size_t{256} << 10)));
    const std::string topology = topology_llc > 0
                                     ? fmt::format("the topology reports {} MiB of L3 ({})",
                                                   topology_llc >> 20, topology_llc_text)
                                     : std::string("the topology reports no L3");
    Reach r{threads, cpus, topology_llc, {}};
    if (min_bytes > max_bytes) {  // a probe buffer this small leaves nothing to compare with
      r.method = fmt::format("not measured (probe buffer of {} MiB); {}",
                             opts.bandwidth_bytes >> 20, topology);
    } else {
      const ops::CacheReach reach = ops::measure_cache_reach({.threads = threads,
                                                              .cpus = cpus,
                                                              .dram_gbs = bw.gbs,
                                                              .min_bytes = min_bytes,
                                                              .max_bytes = max_bytes});
      // Below the smallest working set measured, the topology's figure stands (a model the size
      // of an L2 fits whatever the re-read of min_bytes showed).
      r.llc = std::max(static_cast<int64_t>(reach.bytes),
                       std::min(topology_llc, static_cast<int64_t>(min_bytes / 2)));
      std::string sizes;
      for (const ops::BandwidthTrial& t : reach.sizes) {
        sizes += fmt::format("{}{} {:.1f}", sizes.empty() ? "" : ", ", t.variant, t.gbs);
      }
      r.method = fmt::format(
          "{} MiB: {} thread{} re-read working sets at 1.25x the DRAM bandwidth ({:.1f} GB/s) or "
          "more up to {} MiB{} ({} GB/s; {}); {}",
          r.llc >> 20, threads, threads > 1 ? "s" : "", bw.gbs, reach.bytes >> 20,
          reach.at_max ? " (the largest size tried)" : "", sizes, reach.variant, topology);
    }
    reach_cache.push_back(std::move(r));
    return reach_cache.back();
  };

  // The kernels' ceiling with their weights in cache, once per placement, on the row's own
  // workers (its session's executor; kernel_ceiling.h), just before the first timed rep that needs
  // it (a tg row with a roofline).
  struct Ceiling {
    int threads;
    std::vector<int> cpus;
    KernelCeiling kc;
  };
  std::vector<Ceiling> kernel_cache;
  std::vector<std::string> kernel_methods;  // the rows' distinct ones, for res
  auto kernel_ceiling_for = [&](const BenchRow& row, const Executor& ex) -> const KernelCeiling& {
    for (const Ceiling& c : kernel_cache) {
      if (c.threads == row.threads && c.cpus == row.cpus) return c.kc;
    }
    KernelCeilingOptions ko;
    ko.workers = &ex;
    ko.placement = fmt::format("the row's {} thread{} (pin {})", row.threads,
                               row.threads > 1 ? "s" : "", row.pin);
    kernel_cache.push_back(
        {row.threads, row.cpus, measure_kernel_ceiling(model.weights(), kernels, ko)});
    return kernel_cache.back().kc;
  };
  const auto take_kernel_ceiling = [&](BenchRow& row, const Executor& ex) {
    if (row.kernel_ceiling_tok_s > 0) return;
    const KernelCeiling& kc = kernel_ceiling_for(row, ex);
    row.kernel_ceiling_tok_s = kc.tok_s;
    row.kernel_ceiling_method = kc.method;
  };

  int done = 0;
  const int start_cpu = current_cpu();  // --numa isolate's node
  for (const PinSpec& listed_pin : opts.pins) {
    for (int threads_req : opts.threads) {
      const auto [pin, pin_name] = row_pin(opts, listed_pin, threads_req, start_cpu);
      for (const Test& test : tests) {
        if (done > 0 && opts.delay_s > 0)
          std::this_thread::sleep_for(std::chrono::duration<double>(opts.delay_s));
        BenchRow row;
        row.test = fmt::format("{}{}", test.tg ? "tg" : "pp", test.n);
        if (test.pg_gen > 0) row.test += fmt::format("+tg{}", test.pg_gen);
        if (test.depth > 0) row.test += fmt::format(" @ d{}", test.depth);
        row.n_prompt = test.tg ? 0 : test.n;
        row.n_gen = test.tg ? test.n : test.pg_gen;
        row.n_depth = test.depth;
        row.test_time = utc_now_iso();
        row.pin = pin_name;
        if (opts.progress) opts.progress(done, total, row.test);

        // The context holds the test plus the BOS/first token.
        SessionOptions so;
        so.ctx = test.depth + test.n + test.pg_gen + 8;
        so.threads = threads_req;
        so.pin = pin;
        so.numa = opts.numa;
        so.kv_type = opts.kv_type;
        so.sampler.temperature = 0;  // greedy: tg measures the forward pass, not the sampler
        so.sampler.top_k = 0;
        so.sampler.top_p = 1;
        so.sampler.min_p = 0;
        so.max_batch = opts.n_batch > 0 ? opts.n_batch : std::max<int64_t>(512, test.n);
        row.n_batch = so.max_batch;

        std::unique_ptr<Recorder> rec;
        // With --events-out (or a results database) one more rep runs after the timed ones with
        // the recorder attached: recording costs time and the recorded rep runs generate()
        // (sampling, a prompt for tg), so its rate is not one of the row's samples.
        const bool recording = !opts.events_dir.empty();
        const int first_timed = opts.warmup ? 1 : 0;
        const int reps_total = first_timed + opts.reps + (recording ? 1 : 0);
        for (int rep = 0; rep < reps_total; ++rep) {
          if (opts.stop && opts.stop()) {  // keep the finished rows, drop this one
            res.interrupted = true;
            return res;
          }
          // Progress per repetition: a long prefill or a deep context fill is one rep.
          if (opts.progress && reps_total > 1)
            opts.progress(done, total,
                          fmt::format("{} rep {}/{}{}", row.test, rep + 1, reps_total,
                                      opts.warmup && rep == 0              ? " (warm-up)"
                                      : recording && rep == reps_total - 1 ? " (recorded)"
                                                                           : ""));
          const bool recorded = recording && rep == reps_total - 1;
          const bool timed = rep >= first_timed && !recorded;
          if (recorded) {
            row.events_path = (std::filesystem::path(opts.events_dir) /
                               file_safe(fmt::format("{}-{}-t{}-{}.jsonl", res.arch, row.test,
                                                     threads_req, row.pin)))
                                  .string();
          }
          // A fresh session per rep for the recorded one (its log starts with its own header);
          // the others share one session so thread start-up stays out of the timings.
          std::unique_ptr<Session> session;
          if (recorded) {
            RecorderOptions ro;
            ro.events_path = row.events_path;
            ro.workers = resolve_threads(Topology::detect(), pin, threads_req);
            rec = std::make_unique<Recorder>(ro);
            so.recorder = rec.get();
          } else {
            so.recorder = nullptr;
          }
          session = std::make_unique<Session>(model, so);
          row.threads = session->executor().workers();
          row.cpus = session->executor().cpus();
          row.idle_prefetch = session->executor().idle_prefetch();
          if (test.tg && opts.roofline && timed && row.bandwidth_before_gbs == 0) {
            take_kernel_ceiling(row, session->executor());
            row.bandwidth_before_gbs = bandwidth_now(row.threads, row.cpus);
          }

          double rate = 0;
          std::vector<double> token_s;  // this rep's decode tokens (the unrecorded tg path)
          // The context a test starts from: `depth` random tokens, prefilled untimed.
          auto fill_depth = [&](TokenStream& toks) {
            if (test.depth == 0) return;
            std::vector<int32_t> ctx(static_cast<size_t>(test.depth));
            for (auto& t : ctx) t = toks.next();
            session->prefill(ctx);
          };
          if (test.pg_gen > 0) {
            // pp+tg: the prompt, then the generated tokens, timed together (llama-bench -pg).
            // The recorded rep runs the same calls with the recorder attached.
            TokenStream toks(opts.seed + static_cast<uint64_t>(rep), cfg.n_vocab);
            std::vector<int32_t> prompt(static_cast<size_t>(test.n));
            for (auto& t : prompt) t = toks.next();
            session->reset();
            if (recorded)
              session->write_log_header({{eventlog::header_key::kCommand, "bench"},
                                         {eventlog::header_key::kBenchTest, row.test}},
                                        test.depth + test.n, test.pg_gen);
            fill_depth(toks);
            const auto t0 = Clock::now();
            session->prefill(prompt);
            for (int64_t i = 0; i < test.pg_gen; ++i) {
              if (opts.stop && i % 16 == 0 && opts.stop()) {
                res.interrupted = true;
                return res;
              }
              session->decode(toks.next());
            }
            rate = static_cast<double>(test.n + test.pg_gen) / seconds_since(t0);
            if (recorded)
              session->write_log_footer({{"n_prompt", test.depth + test.n},
                                         {"n_generated", test.pg_gen},
                                         {"stop", "n_predict"}});
          } else if (!test.tg && recorded && test.depth == 0) {
            // The recorded pp rep goes through generate() with the same kind of random prompt so
            // its log has a header, the prefill step and a footer; tok/s is its prefill rate.
            TokenStream toks(opts.seed + static_cast<uint64_t>(rep), cfg.n_vocab);
            GenerateOptions go;
            go.prompt_tokens.resize(static_cast<size_t>(test.n));
            for (auto& t : go.prompt_tokens) t = toks.next();
            go.n_predict = 1;
            go.ignore_eos = true;
            go.header = {{eventlog::header_key::kCommand, "bench"},
                         {eventlog::header_key::kBenchTest, row.test}};
            Generation g = session->generate("", go);
            rate = g.timings.prefill_tok_s();
          } else if (!test.tg) {
            TokenStream toks(opts.seed + static_cast<uint64_t>(rep), cfg.n_vocab);
            std::vector<int32_t> prompt(static_cast<size_t>(test.n));
            for (auto& t : prompt) t = toks.next();
            session->reset();
            // The recorded rep of a pp row at depth: header, the depth's prefill, the timed one,
            // footer (as a -pg row's log; without them the file stayed empty).
            if (recorded)
              session->write_log_header({{eventlog::header_key::kCommand, "bench"},
                                         {eventlog::header_key::kBenchTest, row.test}},
                                        test.depth + test.n, 0);
            fill_depth(toks);
            const auto t0 = Clock::now();
            session->prefill(prompt);
            rate = static_cast<double>(test.n) / seconds_since(t0);
            if (recorded)
              session->write_log_footer(
                  {{"n_prompt", test.depth + test.n}, {"n_generated", 0}, {"stop", "n_predict"}});
          } else if (recorded) {
            // The recorded rep goes through generate() so the log has every phase (tokenize,
            // prefill, decode, sample) and a footer; tok/s is its decode rate.
            GenerateOptions go;
            go.n_predict = test.n + 1;  // the first token comes from the prefill
            go.ignore_eos = true;
            go.header = {{eventlog::header_key::kCommand, "bench"},
                         {eventlog::header_key::kBenchTest, row.test}};
            if (test.depth > 0) {  // the depth is the prompt; decode starts after it
              TokenStream toks(opts.seed + static_cast<uint64_t>(rep), cfg.n_vocab);
              go.prompt_tokens.resize(static_cast<size_t>(test.depth));
              for (auto& t : go.prompt_tokens) t = toks.next();
            }
            if (opts.roofline) {
              const ops::BandwidthProbe& bw = bandwidth_for(row.threads, row.cpus);
              go.header[eventlog::header_key::kBandwidthGbs] = row.bandwidth_before_gbs;
              go.header[eventlog::header_key::kBandwidthMethod] =
                  bw.method + ", measured again just before the row";
              // The compute side of the report's decode roofline (attention's flops).
              const ops::FmaProbe& fma = fma_for(row.threads, row.cpus);
              go.header[eventlog::header_key::kFmaGflops] = fma.gflops;
              go.header[eventlog::header_key::kFmaMethod] = fma.method;
              // The compute side of the matmuls (kernel_ceiling.h), for the report's verdict.
              take_kernel_ceiling(row, session->executor());
              if (row.kernel_ceiling_tok_s > 0) {
                go.header[eventlog::header_key::kKernelCeilingTokS] = row.kernel_ceiling_tok_s;
                go.header[eventlog::header_key::kKernelCeilingMethod] = row.kernel_ceiling_method;
              }
            }
            Generation g = session->generate("The", go);
            rate = g.timings.decode_tok_s();
          } else {
            TokenStream toks(opts.seed + static_cast<uint64_t>(rep), cfg.n_vocab);
            session->reset();
            fill_depth(toks);
            if (test.depth == 0) session->decode(toks.next());  // as llama-bench starts from BOS
            token_s.reserve(static_cast<size_t>(test.n));
            const auto t0 = Clock::now();
            auto last = t0;
            for (int64_t i = 0; i < test.n; ++i) {
              if (opts.stop && i % 16 == 0 && opts.stop()) {  // prompt Ctrl-C on long tests
                res.interrupted = true;
                return res;
              }
              session->decode(toks.next());
              const auto now = Clock::now();
              token_s.push_back(std::chrono::duration<double>(now - last).count());
              last = now;
            }
            rate = static_cast<double>(test.n) / seconds_since(t0);
          }
          if (timed) {
            row.tok_s.push_back(rate);
            row.token_s.insert(row.token_s.end(), token_s.begin(), token_s.end());
            session->executor().set_observer(nullptr);  // the probe is not part of the run
            for (double mhz : sample_worker_mhz(session->executor(), *freq.source)) {
              if (!std::isfinite(mhz)) continue;
              row.freq_min_mhz = row.freq_min_mhz == 0 ? mhz : std::min(row.freq_min_mhz, mhz);
              row.freq_max_mhz = std::max(row.freq_max_mhz, mhz);
              row.freq_mean_mhz += mhz;
            }
            // The bandwidth again after each timed rep: between two of them, so that each rep
            // has a reading just before and just after it, and after the last one, before the
            // recorded rep (--events-out), which is not one of the row's samples.
            if (test.tg && opts.roofline) {
              const double gbs = bandwidth_now(row.threads, row.cpus);
              if (static_cast<int>(row.tok_s.size()) < opts.reps) {
                row.bandwidth_between_gbs.push_back(gbs);
              } else {
                row.bandwidth_after_gbs = gbs;
              }
            }
          }
          so.recorder = nullptr;
        }
        summarize_rates(row);
        const double n_freq = static_cast<double>(row.tok_s.size()) * row.threads;
        if (row.freq_max_mhz > 0 && n_freq > 0) row.freq_mean_mhz /= n_freq;
        if (test.tg && opts.roofline) {
          const ops::BandwidthProbe& bw = bandwidth_for(row.threads, row.cpus);
          const double before = row.bandwidth_before_gbs, after = row.bandwidth_after_gbs;
          row.bandwidth_gbs = (before + after) / 2;
          row.bandwidth_method =
              bw.method +
              "; the row's roofline: that loop measured again just before and just after the "
              "row's timed reps (best of 3 passes each), their mean; and between each two reps, "
              "for each rep's own % (pacer_roofline_rep_pct)";
          // The timed tokens: after the depth, or after the BOS decode at position 0.
          const int64_t first_pos = test.depth > 0 ? test.depth : 1;
          row.kv_bytes_per_token = kv_read_bytes_per_token(cfg, opts.kv_type, first_pos, test.n);
          row.attention_flops_per_token =
              attention_flops_per_token(cfg, opts.kv_type, first_pos, test.n);
          if (row.attention_flops_per_token > 0) {
            const ops::FmaProbe& fma = fma_for(row.threads, row.cpus);
            row.fma_gflops = fma.gflops;
            row.fma_method = fma.method;
          }
          if (res.matmul_bytes_per_token > 0 && row.bandwidth_gbs > 0) {
            row.bandwidth_ceiling_tok_s = eventlog::decode_ceiling_tok_s(
                row.bandwidth_gbs, res.matmul_bytes_per_token, row.kv_bytes_per_token, 0, 0);
            row.ceiling_tok_s = eventlog::decode_ceiling_tok_s(
                row.bandwidth_gbs, res.matmul_bytes_per_token, row.kv_bytes_per_token,
                row.attention_flops_per_token, row.fma_gflops);
            row.roofline_pct = 100.0 * row.mean / row.ceiling_tok_s;
            row.roofline_p50_pct = 100.0 * row.tok_s_p50 / row.ceiling_tok_s;
            pair_reps_with_probes(row, res.matmul_bytes_per_token);
          }
          if (row.kernel_ceiling_tok_s > 0) {
            row.kernel_pct = 100.0 * row.mean / row.kernel_ceiling_tok_s;
            if (std::find(kernel_methods.begin(), kernel_methods.end(),
                          row.kernel_ceiling_method) == kernel_methods.end()) {
              kernel_methods.push_back(row.kernel_ceiling_method);
              res.kernel_ceiling_method = fmt::format("{}", fmt::join(kernel_methods, " | "));
            }
          }
          if (std::abs(before - after) > opts.bandwidth_drift_flag * row.bandwidth_gbs) {
            std::string per_rep;
            if (row.rep_roofline_pct.size() > 1) {
              per_rep = fmt::format(
                  "; each rep against the probes just before and after it: {:.0f}% (median of "
                  "{:.0f}%)",
                  row.roofline_rep_p50_pct, fmt::join(row.rep_roofline_pct, "%, "));
            }
            row.flags.push_back(fmt::format(
                "read bandwidth {:.1f} -> {:.1f} GB/s across the row ({:+.0f}%): the host's "
                "memory bandwidth moved, the roofline % is uncertain{}",
                before, after, 100.0 * (after - before) / before, per_rep));
          }
          const Reach& reach = cache_reach_for(row.threads, row.cpus);
          row.llc_bytes = reach.llc;
          row.llc_method = reach.method;
          flag_roofline(row, res.matmul_bytes_per_token, row.llc_bytes);
        }
        if (test.tg) flag_slow_tokens(row);
        if (row.tok_s.size() < 2) {
          row.flags.push_back("1 rep: no CV (needs -r 2 or more)");
        } else if (row.cv > opts.cv_flag) {
          row.flags.push_back(fmt::format("cv {:.1f}% > {:.0f}%: noisy (other load? unpinned?)",
                                          100 * row.cv, 100 * opts.cv_flag));
        }
        if (row.freq_mean_mhz > 0) {
          const double drift = (row.freq_max_mhz - row.freq_min_mhz) / row.freq_mean_mhz;
          if (drift > opts.freq_drift_flag) {
            row.flags.push_back(fmt::format(
                "frequency drifted {:.0f}-{:.0f} MHz ({:.1f}% > {:.0f}%): turbo/thermal limits?",
                row.freq_min_mhz, row.freq_max_mhz, 100 * drift, 100 * opts.freq_drift_flag));
          }
        }
        res.rows.push_back(std::move(row));
        ++done;
        if (opts.on_row) opts.on_row(res, res.rows.back());
        if (opts.progress) opts.progress(done, total, row_label(res.rows.back()));
      }
    }
  }
  return res;
}

namespace {

// llama-bench's size column: the tensors' bytes, two decimals.
std::string size_text(int64_t bytes) {
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  return mib >= 1024 ? fmt::format("{:.2f} GiB", mib / 1024) : fmt::format("{:.2f} MiB", mib);
}

std::string params_text(int64_t p) {
  return p >= 1'000'000'000 ? fmt::format("{:.2f} B", p / 1e9) : fmt::format("{:.1f} M", p / 1e6);
}

// "q4_0 q8_0 ...: 1 stream, prefetch, page touch 8 KiB ahead; q4_K: 2 streams, prefetch": the
// types that share a plan, in x16_gemv_choices() order.
std::string x16_gemv_text(const std::vector<ops::X16GemvChoice>& choices) {
  std::vector<std::pair<std::string, std::string>> plans;  // plan -> its types
  for (const ops::X16GemvChoice& c : choices) {
    std::string plan = fmt::format("{} stream{}", c.streams, c.streams == 1 ? "" : "s");
    if (c.prefetch) plan += ", prefetch";
    if (c.page_touch > 0) {
      plan += c.page_touch % 1024 == 0
                  ? fmt::format(", page touch {} KiB ahead", c.page_touch / 1024)
                  : fmt::format(", page touch {} B ahead", c.page_touch);
    }
    if (c.run_bytes > 0) plan += fmt::format(", runs of {} B", c.run_bytes);
    if (c.avx2_kernel) plan += ", the AVX2 kernel";
    auto it =
        std::find_if(plans.begin(), plans.end(), [&](const auto& p) { return p.first == plan; });
    if (it == plans.end()) {
      plans.emplace_back(plan, std::string(ops::type_name(c.type)));
    } else {
      it->second += fmt::format(" {}", ops::type_name(c.type));
    }
  }
  std::string out;
  for (const auto& [plan, types] : plans) {
    out += fmt::format("{}{}: {}", out.empty() ? "" : "; ", types, plan);
  }
  return out;
}

std::string freq_text(const BenchRow& r) {
  if (r.freq_mean_mhz <= 0) return "-";
  return fmt::format("{:.0f} ({:.0f}-{:.0f})", r.freq_mean_mhz, r.freq_min_mhz, r.freq_max_mhz);
}

// The model column: the architecture and llama.cpp's size class ("llama 1B"), as llama-bench's
// model column starts.
std::string model_text(const BenchResult& r) {
  return r.size_class.empty() ? r.arch : fmt::format("{} {}", r.arch, r.size_class);
}

// The model's type as the tables show it: the file's (file_type), or the main matmul type
// where a result was built without one.
std::string type_text(const BenchResult& r) {
  return r.file_type.empty() ? r.type : r.file_type;
}

}  // namespace

std::string render_bench_markdown_header(const BenchResult& r) {
  std::string out = fmt::format(
      "model: {} ({}, {}, {}, {} params)  cpu: {}{}  frequency source: {}\n\n", r.model_path,
      r.arch, type_text(r), size_text(r.tensor_bytes), params_text(r.params), r.cpu_model,
      r.cpu_signature.empty() ? "" : " [" + r.cpu_signature + "]", r.frequency_source);
  out +=
      "| model | size | params | type | threads | pin | test | t/s | cv | freq MHz (min-max) | "
      "roofline | flags |\n"
      "|:--|--:|--:|:--|--:|:--|:--|--:|--:|--:|--:|:--|\n";
  return out;
}

std::string render_bench_markdown_row(const BenchResult& r, const BenchRow& row) {
  std::string roof = row.ceiling_tok_s <= 0 ? "-"
                     : !row.roofline_applies
                         ? fmt::format("n/a ({:.1f} GB/s)", row.bandwidth_gbs)
                         : fmt::format("{:.0f}% of {:.1f} t/s ({:.1f} GB/s)", row.roofline_pct,
                                       row.ceiling_tok_s, row.bandwidth_gbs);
  // Where the attention's flops bind (the ceiling is below the bandwidth-only one by more than
  // the rounding), the rate they bind at and the row against bandwidth alone.
  if (row.roofline_applies && row.ceiling_tok_s > 0 &&
      row.ceiling_tok_s < 0.995 * row.bandwidth_ceiling_tok_s) {
    roof.insert(roof.size() - 1,
                fmt::format(", attention at {:.0f} GFLOP/s; {:.0f}% of {:.1f} t/s by bandwidth "
                            "alone",
                            row.fma_gflops, 100.0 * row.mean / row.bandwidth_ceiling_tok_s,
                            row.bandwidth_ceiling_tok_s));
  }
  std::string rep_roof;
  if (row.roofline_applies && row.rep_roofline_pct.size() > 1) {
    const auto [lo, hi] =
        std::minmax_element(row.rep_roofline_pct.begin(), row.rep_roofline_pct.end());
    rep_roof = fmt::format("; reps {:.0f}-{:.0f}%", *lo, *hi);
  }
  // The kernels' own ceiling, weights in cache; below the DRAM ceiling the row is compute-bound.
  if (row.roofline_applies && row.kernel_ceiling_tok_s > 0) {
    rep_roof += fmt::format("; kernels from L2 {:.1f} t/s ({:.0f}%){}", row.kernel_ceiling_tok_s,
                            row.kernel_pct,
                            row.ceiling_tok_s > 0 && row.kernel_ceiling_tok_s < row.ceiling_tok_s
                                ? ": compute-bound on this CPU"
                                : "");
  }
  std::string flags;
  for (const auto& f : row.flags) flags += (flags.empty() ? "" : "; ") + f;
  const std::string cv = row.tok_s.size() < 2 ? "-" : fmt::format("{:.1f}%", 100 * row.cv);
  return fmt::format("| {} | {} | {} | {} | {} | {} | {} | {:.2f} ± {:.2f} | {} | {} | {} | {} |\n",
                     model_text(r), size_text(r.tensor_bytes), params_text(r.params), type_text(r),
                     row.threads, row.pin, row.test, row.mean, row.sd, cv, freq_text(row),
                     roof + rep_roof, flags.empty() ? "ok" : flags);
}

std::string render_bench_markdown_footer(const BenchResult& r) {
  std::string out;
  bool any_flag = false;
  for (const BenchRow& row : r.rows) any_flag = any_flag || !row.flags.empty();
  out += any_flag ? "\nflagged rows: do not trust them before the reason is gone.\n" : "";
  if (r.interrupted) out += "\ninterrupted: the rows above are the ones that finished.\n";
  out +=
      "\nt/s: mean ± sd over the repetitions (after one warm-up); cv = sd/mean. tg feeds random "
      "tokens one at a time (no sampling), as llama-bench; roofline = a token's ops in turn at "
      "the machine's measured limits: the matmul weight bytes at the read bandwidth, then "
      "attention at the slower of the KV-cache bytes it reads at that bandwidth and its fp32 "
      "flops at the measured multiply-add rate (a Q8_0 cache: bytes only); reps: each rep's "
      "rate against the bandwidth measured just before and just after it (a host whose memory "
      "bandwidth moves within a row moves these less than the row's %).\n";
  // One line per distinct non-empty text of `field` over the rows, in row order.
  auto distinct_lines = [&](std::string BenchRow::*field, std::string_view label) {
    std::vector<std::string> seen;
    for (const BenchRow& row : r.rows) {
      const std::string& text = row.*field;
      if (text.empty() || std::find(seen.begin(), seen.end(), text) != seen.end()) continue;
      seen.push_back(text);
      out += fmt::format("{}: {}.\n", label, text);
    }
  };
  distinct_lines(&BenchRow::bandwidth_method, "bandwidth");
  distinct_lines(&BenchRow::fma_method, "multiply-add rate (the roofline's attention flops)");
  distinct_lines(&BenchRow::llc_method, "cache (what the roofline's LLC rule uses)");
  distinct_lines(&BenchRow::kernel_ceiling_method,
                 "kernels from L2 (the matmuls alone, weights in cache, on the row's threads)");
  const bool pf_stream = ops::gemv_software_prefetch(ops::GemvKernelClass::Streaming);
  const bool pf_unpack = ops::gemv_software_prefetch(ops::GemvKernelClass::Unpacking);
  out += fmt::format(
      "row-major GEMV software prefetch: {} ({}; the rule in ops/isa.h, PACER_PREFETCH=0/1 "
      "overrides).\n",
      pf_stream == pf_unpack ? std::string(pf_stream ? "on" : "off")
                             : fmt::format("Q4_0 and K-quants {}, Q8_0 and F16/BF16 {}",
                                           pf_unpack ? "on" : "off", pf_stream ? "on" : "off"),
      ops::gemv_software_prefetch_reason(ops::detect_cpu_features(),
                                         std::getenv("PACER_PREFETCH")));
  if (std::any_of(r.rows.begin(), r.rows.end(),
                  [](const BenchRow& row) { return row.idle_prefetch; })) {
    out +=
        "idle prefetch: on in rows of 2+ threads: workers waiting between decode matmuls prefetch "
        "their share of the next one into L2 (runtime/executor.h; PACER_IDLE_PREFETCH=0 turns it "
        "off).\n";
  }
  if (r.attention_isa_avx2) {
    out += fmt::format(
        "attention (AVX2): {} (the rule in ops/isa.h attention_one_pass: one pass on AMD Zen 1 / "
        "Zen+; PACER_ATTENTION_PASS=all/4 overrides).\n",
        r.attention_one_pass ? "all of a KV head's query heads in one pass over each key tile"
                             : "at most 4 of a KV head's query heads a pass over each key tile");
  }
  if (r.repacked_matrices > 0) {
    out += fmt::format(
        "weights: {} matmul matrices repacked at load into 16-row interleaved groups "
        "(PACER_REPACK=0 keeps the file layout).\n",
        r.repacked_matrices);
    std::string far;
    for (ops::WeightType t : r.x16_prefetch_far_one_worker) {
      far += fmt::format("{}{}", far.empty() ? "" : " ", ops::type_name(t));
    }
    out += fmt::format(
        "16-row GEMVs: {}{} (the tables in ops/isa.h x16_gemv_plan and, for the runs, "
        "x16_gemv_long_runs; PACER_GEMV_STREAMS=1/2/4, PACER_PREFETCH=0/1, "
        "PACER_PAGE_TOUCH=0/<bytes> "
        "and PACER_GEMV_RUNS=short/long override).\n",
        x16_gemv_text(r.x16_gemv),
        far.empty()
            ? ""
            : fmt::format("; in 1-thread rows {} prefetch and touch pages twice as far", far));
  }
  return out;
}

std::string render_bench_markdown(const BenchResult& r) {
  std::string out = render_bench_markdown_header(r);
  for (const BenchRow& row : r.rows) out += render_bench_markdown_row(r, row);
  return out + render_bench_markdown_footer(r);
}

namespace {
// llama-bench's field order (tools/llama-bench: test::get_fields), then samples and pacer's own.
const std::vector<std::string>& llama_bench_fields() {
  static const std::vector<std::string> f = {
      "build_commit", "build_number", "cpu_info", "gpu_info", "backends", "model_filename",
      "model_type", "model_size", "model_n_params", "n_batch", "n_ubatch", "n_threads", "cpu_mask",
      "cpu_strict", "poll", "type_k", "type_v", "n_gpu_layers", "n_cpu_moe", "split_mode",
      "main_gpu", "no_kv_offload", "flash_attn", "devices", "tensor_split", "tensor_buft_overrides",
      "use_mmap", "load_mode", "embeddings", "no_op_offload", "no_host", "fit_target",
      "fit_min_ctx", "n_prompt", "n_gen", "n_depth", "test_time", "avg_ns", "stddev_ns", "avg_ts",
      "stddev_ts",
      // llama-bench's JSON adds the samples; then pacer's own
      "samples_ns", "samples_ts", "pacer_pin", "pacer_cpus", "pacer_cv", "pacer_freq_mhz_mean",
      "pacer_freq_mhz_min", "pacer_freq_mhz_max", "pacer_bandwidth_gbs",
      "pacer_bandwidth_before_gbs", "pacer_bandwidth_after_gbs", "pacer_bandwidth_method",
      "pacer_llc_bytes", "pacer_llc_method", "pacer_kv_bytes_per_token",
      "pacer_attention_flops_per_token", "pacer_fma_gflops", "pacer_fma_method",
      "pacer_ceiling_tok_s", "pacer_bandwidth_ceiling_tok_s", "pacer_roofline_pct",
      "pacer_roofline_applies", "pacer_tok_s_p50", "pacer_roofline_p50_pct",
      "pacer_bandwidth_between_gbs", "pacer_roofline_rep_pct", "pacer_roofline_rep_p50_pct",
      "pacer_kernel_ceiling_tok_s", "pacer_kernel_pct", "pacer_idle_prefetch", "pacer_flags"};
  return f;
}
}  // namespace

nlohmann::json llama_bench_row(const BenchResult& r, const BenchRow& row) {
  const int64_t n_tokens = row.n_prompt + row.n_gen;
  std::vector<int64_t> samples_ns;
  for (double ts : row.tok_s) {
    samples_ns.push_back(ts > 0 ? static_cast<int64_t>(std::llround(n_tokens / ts * 1e9)) : 0);
  }
  double avg_ns = 0, sd_ns = 0;
  for (int64_t v : samples_ns) avg_ns += static_cast<double>(v);
  if (!samples_ns.empty()) avg_ns /= static_cast<double>(samples_ns.size());
  for (int64_t v : samples_ns) sd_ns += (v - avg_ns) * (v - avg_ns);
  if (samples_ns.size() > 1) sd_ns = std::sqrt(sd_ns / static_cast<double>(samples_ns.size() - 1));
  const std::string kv(ops::type_name(r.kv_type));
  // The prefill step: -b's, else a prompt's max(512, pp) tokens; a tg row prefills nothing of
  // its own (its depth's context takes the same step), so llama-bench's default 512 stands.
  const int64_t step = r.n_batch_opt > 0 ? r.n_batch_opt : std::max<int64_t>(512, row.n_prompt);
  // What was not measured (a pp row's roofline, --no-roofline, no frequency source) is null,
  // never 0, as in the event log.
  const bool roofline = row.ceiling_tok_s > 0;
  const auto measured = [](double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(); };
  nlohmann::json j = {
      {"build_commit", kGitSha},
      {"build_number", 0},
      {"cpu_info", r.cpu_model},
      {"gpu_info", ""},
      {"backends", "CPU"},
      {"model_filename", r.model_path},
      // llama-bench's "llama 1B Q4_K - Medium" (its size class, not the parameter count), so
      // rows of the two join on it; a result built without the class shows the count.
      {"model_type",
       fmt::format("{} {} {}", r.arch, r.size_class.empty() ? params_text(r.params) : r.size_class,
                   type_text(r))},
      {"model_size", r.tensor_bytes},  // llama-bench's: the tensors' bytes, not the file's
      {"model_n_params", r.params},
      // n_ubatch: the prefill step. n_batch: llama-bench's default 2048 (its most tokens per
      // decode call; pacer hands over the whole prompt) unless -b set the step. Where the two
      // tools ran the same configuration their key fields agree, so compare-llama-bench.py pairs
      // the rows (checked against llama-bench c392e50's JSON of the same file).
      {"n_batch", r.n_batch_opt > 0 ? step : std::max<int64_t>(2048, step)},
      {"n_ubatch", step},
      {"n_cpu_moe", 0},
      {"devices", "auto"},
      {"tensor_buft_overrides", "none"},
      {"use_mmap", true},  // llama-bench before load_mode (compare-llama-bench.py keys on it)
      {"load_mode", "mmap"},
      {"no_op_offload", 0},
      {"no_host", 0},
      {"fit_target", 0},
      {"fit_min_ctx", 0},
      {"n_threads", row.threads},
      {"cpu_mask", "0x0"},
      {"cpu_strict", !row.cpus.empty()},
      {"poll", 50},
      {"type_k", kv},
      {"type_v", kv},
      {"n_gpu_layers", 99},  // llama-bench's default, which a CPU-only build writes too
      {"split_mode", "layer"},
      {"main_gpu", 0},
      {"no_kv_offload", false},
      {"flash_attn", 0},
      {"tensor_split", "0.00"},
      {"embeddings", false},
      {"n_prompt", row.n_prompt},
      {"n_gen", row.n_gen},
      {"n_depth", row.n_depth},
      {"test_time", row.test_time},
      {"avg_ns", static_cast<int64_t>(std::llround(avg_ns))},
      {"stddev_ns", static_cast<int64_t>(std::llround(sd_ns))},
      {"avg_ts", row.mean},
      {"stddev_ts", row.sd},
      {"samples_ns", samples_ns},
      {"samples_ts", row.tok_s},
      {"pacer_pin", row.pin},
      {"pacer_cpus", row.cpus},
      {"pacer_cv", row.tok_s.size() > 1 ? nlohmann::json(row.cv) : nlohmann::json()},
      {"pacer_freq_mhz_mean", measured(row.freq_mean_mhz)},
      {"pacer_freq_mhz_min", measured(row.freq_min_mhz)},
      {"pacer_freq_mhz_max", measured(row.freq_max_mhz)},
      {"pacer_bandwidth_gbs", roofline ? nlohmann::json(row.bandwidth_gbs) : nlohmann::json()},
      {"pacer_bandwidth_before_gbs", measured(row.bandwidth_before_gbs)},
      {"pacer_bandwidth_after_gbs", measured(row.bandwidth_after_gbs)},
      {"pacer_bandwidth_method", row.bandwidth_method},
      {"pacer_llc_bytes", row.llc_bytes > 0 ? nlohmann::json(row.llc_bytes) : nlohmann::json()},
      {"pacer_llc_method", row.llc_method},
      {"pacer_kv_bytes_per_token",
       roofline ? nlohmann::json(row.kv_bytes_per_token) : nlohmann::json()},
      {"pacer_attention_flops_per_token",
       roofline ? nlohmann::json(row.attention_flops_per_token) : nlohmann::json()},
      {"pacer_fma_gflops", measured(row.fma_gflops)},
      {"pacer_fma_method", row.fma_method},
      {"pacer_ceiling_tok_s", measured(row.ceiling_tok_s)},
      {"pacer_bandwidth_ceiling_tok_s", measured(row.bandwidth_ceiling_tok_s)},
      {"pacer_roofline_pct", roofline ? nlohmann::json(row.roofline_pct) : nlohmann::json()},
      {"pacer_roofline_applies", roofline && row.roofline_applies},
      {"pacer_tok_s_p50", row.tok_s_p50 > 0 ? nlohmann::json(row.tok_s_p50) : nlohmann::json()},
      {"pacer_roofline_p50_pct",
       row.roofline_p50_pct > 0 ? nlohmann::json(row.roofline_p50_pct) : nlohmann::json()},
      {"pacer_bandwidth_between_gbs", row.bandwidth_between_gbs},
      {"pacer_roofline_rep_pct", row.rep_roofline_pct},
      {"pacer_roofline_rep_p50_pct",
       row.roofline_rep_p50_pct > 0 ? nlohmann::json(row.roofline_rep_p50_pct) : nlohmann::json()},
      {"pacer_kernel_ceiling_tok_s", measured(row.kernel_ceiling_tok_s)},
      {"pacer_kernel_pct", measured(row.kernel_pct)},
      {"pacer_idle_prefetch", row.idle_prefetch},
      {"pacer_flags", row.flags}};
  return j;
}

std::string llama_bench_csv_header() {
  std::string out;
  for (const std::string& f : llama_bench_fields()) out += (out.empty() ? "" : ",") + f;
  return out + "\n";
}

std::string llama_bench_csv_row(const BenchResult& r, const BenchRow& row) {
  const nlohmann::json j = llama_bench_row(r, row);
  std::string out;
  for (const std::string& f : llama_bench_fields()) {
    const nlohmann::json& v = j.at(f);
    std::string cell;
    if (v.is_string()) {
      cell = v.get<std::string>();
    } else if (v.is_array()) {
      for (const auto& e : v) {
        if (!cell.empty()) cell.push_back(';');
        cell += e.is_string() ? e.get<std::string>() : e.dump();
      }
    } else if (v.is_boolean()) {
      cell = v.get<bool>() ? "1" : "0";  // as llama-bench's CSV writes them
    } else if (!v.is_null()) {
      cell = v.dump();
    }
    if (f != llama_bench_fields().front()) out.push_back(',');
    out.push_back('"');
    for (char c : cell) {
      if (c == '"') out.push_back('"');  // CSV doubles a quote inside a quoted cell
      out.push_back(c);
    }
    out.push_back('"');
  }
  return out + "\n";
}

std::string render_bench_csv(const BenchResult& r) {
  std::string out = llama_bench_csv_header();
  for (const BenchRow& row : r.rows) out += llama_bench_csv_row(r, row);
  return out;
}

namespace {
nlohmann::json row_json(const BenchRow& row) {
  namespace key = eventlog::bench_key;
  nlohmann::json j = {
      {key::kTest, row.test},      {key::kNPrompt, row.n_prompt},  {key::kNGen, row.n_gen},
      {key::kNDepth, row.n_depth}, {key::kThreads, row.threads},   {key::kPin, row.pin},
      {key::kCpus, row.cpus},      {key::kReps, row.tok_s.size()}, {key::kTokS, row.tok_s},
      {key::kTokSMean, row.mean},  {key::kTokSSd, row.sd},         {key::kCv, row.cv},
      {key::kFlags, row.flags}};
  if (row.freq_mean_mhz > 0) {
    j[key::kFreqMhzMean] = row.freq_mean_mhz;
    j[key::kFreqMhzMin] = row.freq_min_mhz;
    j[key::kFreqMhzMax] = row.freq_max_mhz;
  }
  if (row.ceiling_tok_s > 0) {
    j[key::kBandwidthGbs] = row.bandwidth_gbs;
    j[key::kCeilingTokS] = row.ceiling_tok_s;
    j[key::kRooflinePct] = row.roofline_pct;
    j[key::kRooflineApplies] = row.roofline_applies;
    j[key::kBandwidthMethod] = row.bandwidth_method;
    j[key::kBandwidthBeforeGbs] = row.bandwidth_before_gbs;
    j[key::kBandwidthAfterGbs] = row.bandwidth_after_gbs;
    if (!row.rep_roofline_pct.empty()) {
      j[key::kBandwidthBetweenGbs] = row.bandwidth_between_gbs;
      j[key::kRooflineRepPct] = row.rep_roofline_pct;
      j[key::kRooflineRepP50Pct] = row.roofline_rep_p50_pct;
    }
    j[key::kLlcBytes] = row.llc_bytes;
    j[key::kLlcMethod] = row.llc_method;
    j[key::kKvBytesPerToken] = row.kv_bytes_per_token;
    j[key::kAttentionFlopsPerToken] = row.attention_flops_per_token;
    j[key::kBandwidthCeilingTokS] = row.bandwidth_ceiling_tok_s;
    if (row.fma_gflops > 0) {
      j[key::kFmaGflops] = row.fma_gflops;
      j[key::kFmaMethod] = row.fma_method;
    }
    if (row.kernel_ceiling_tok_s > 0) {
      j[key::kKernelCeilingTokS] = row.kernel_ceiling_tok_s;
      j[key::kKernelPct] = row.kernel_pct;
      j[key::kKernelCeilingMethod] = row.kernel_ceiling_method;
    }
  }
  if (!row.events_path.empty()) j[key::kEvents] = row.events_path;
  return j;
}
}  // namespace

nlohmann::json bench_json(const BenchResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const BenchRow& row : r.rows) rows.push_back(row_json(row));
  return {{"model",
           {{"path", r.model_path},
            {"name", r.model_name},
            {"arch", r.arch},
            {"type", r.type},
            {"file_type", type_text(r)},
            {"size_class", r.size_class},
            {"bytes", r.model_bytes},
            {"params", r.params},
            {"matmul_bytes_per_token", r.matmul_bytes_per_token},
            {"repacked_matrices", r.repacked_matrices}}},
          {"cpu_model", r.cpu_model},
          {"cpu_signature", r.cpu_signature},
          {"frequency_source", r.frequency_source},
          {"kernel_ceiling_method", r.kernel_ceiling_method},
          {"gemv_prefetch", ops::gemv_software_prefetch(ops::GemvKernelClass::Streaming)},
          {"gemv_prefetch_unpacking", ops::gemv_software_prefetch(ops::GemvKernelClass::Unpacking)},
          {"gemv_streams", r.gemv_streams},
          {"x16_gemv", x16_gemv_json(r.x16_gemv)},
          {"bf16_dot", r.bf16_dot},
          {"attention_one_pass", r.attention_one_pass},
          {"rows", rows}};
}

std::string render_bench_jsonl(const BenchResult& r) {
  std::string out;
  for (const BenchRow& row : r.rows) {
    nlohmann::json j = row_json(row);
    j[eventlog::record::kType] = eventlog::record::kBench;
    j[eventlog::bench_key::kModel] = r.model_path;
    j[eventlog::bench_key::kArch] = r.arch;
    j[eventlog::bench_key::kWtype] = r.type;
    out += j.dump() + "\n";
  }
  return out;
}

std::vector<OverheadRow> measure_recording_overhead(const Model& model, const BenchOptions& opts,
                                                    int pairs, const std::string& events_path) {
  if (pairs < 1) throw std::invalid_argument("bench: --recording-overhead needs at least 1 pair");
  if (events_path.empty())
    throw std::invalid_argument("bench: recording overhead needs a log path");
  std::vector<OverheadRow> out;
  const int start_cpu = current_cpu();
  for (const PinSpec& listed_pin : opts.pins) {
    for (int threads_req : opts.threads) {
      // Not a structured binding: the lambda below captures `pin`, which clang before 16
      // rejects for a binding (the fuzz build compiles this file with clang).
      const std::pair<PinSpec, std::string> row_pinned =
          row_pin(opts, listed_pin, threads_req, start_cpu);
      const PinSpec& pin = row_pinned.first;
      const std::string& pin_name = row_pinned.second;
      for (int64_t n_gen : opts.n_gen) {
        if (n_gen <= 0) continue;
        OverheadRow row;
        row.test = fmt::format("tg{}", n_gen);
        row.pin = pin_name;
        SessionOptions so;
        so.ctx = n_gen + 8;
        so.threads = threads_req;
        so.pin = pin;
        so.numa = opts.numa;
        so.kv_type = opts.kv_type;
        so.sampler.temperature = 0;
        GenerateOptions go;
        go.n_predict = n_gen + 1;  // the first token comes from the prefill
        go.ignore_eos = true;
        go.header = {{eventlog::header_key::kCommand, "bench"},
                     {eventlog::header_key::kBenchTest, row.test},
                     {eventlog::header_key::kOverheadRun, true}};
        auto one = [&](bool recorded) {
          std::unique_ptr<Recorder> rec;
          if (recorded) {
            RecorderOptions ro;
            ro.events_path = events_path;
            ro.workers = resolve_threads(Topology::detect(), pin, threads_req);
            rec = std::make_unique<Recorder>(ro);
          }
          so.recorder = rec.get();
          Session session(model, so);
          row.threads = session.executor().workers();
          const double rate = session.generate("The", go).timings.decode_tok_s();
          (recorded ? row.on : row.off).push_back(rate);
        };
        if (opts.warmup) {
          one(false);
          row.off.clear();
        }
        for (int i = 0; i < pairs; ++i) {
          one(i % 2 == 1);
          one(i % 2 == 0);
        }
        row.off_median = median_of(row.off);
        row.on_median = median_of(row.on);
        row.ratio = row.off_median > 0 ? row.on_median / row.off_median : 0;
        for (size_t i = 0; i < row.on.size() && i < row.off.size(); ++i) {
          if (row.off[i] > 0) row.pair_ratios.push_back(row.on[i] / row.off[i]);
        }
        row.pair_ratio_median = median_of(row.pair_ratios);
        out.push_back(std::move(row));
      }
    }
  }
  return out;
}

std::string render_overhead_markdown(const std::vector<OverheadRow>& rows) {
  std::string s =
      "\nRecording overhead (decode tok/s, fresh session per run, off/on alternating):\n\n"
      "| test | threads | pin | runs | off median | on median | on/off | median of pair on/off | "
      "off runs | on runs |\n"
      "| ---- | ------: | --- | ---: | ---------: | --------: | -----: | ---: | -------- | ------- "
      "|\n";
  auto list = [](const std::vector<double>& v) {
    std::string o;
    for (double x : v) o += fmt::format("{}{:.2f}", o.empty() ? "" : " ", x);
    return o;
  };
  for (const OverheadRow& r : rows) {
    s += fmt::format("| {} | {} | {} | {}+{} | {:.2f} | {:.2f} | {:.1f}% | {:.1f}% | {} | {} |\n",
                     r.test, r.threads, r.pin, r.off.size(), r.on.size(), r.off_median, r.on_median,
                     100 * r.ratio, 100 * r.pair_ratio_median, list(r.off), list(r.on));
  }
  return s;
}

}  // namespace pacer::runtime
