// The read-bandwidth probe: threads stream disjoint slices of one large buffer between two
// barriers; the pass time is the slowest thread's, as for a GEMV whose rows are split the same
// way. Every read-loop variant runs on the same buffer and threads; the best pass wins.
#include "ops/bandwidth.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/isa.h"
#include "ops/probe_threads.h"

namespace pacer::ops {
namespace {

struct Variant {
  Isa isa;
  int streams;
  size_t burst;     // lines of one stream before the next
  size_t prefetch;  // bytes ahead, 0: none
  size_t page_touch = 0;  // bytes ahead, 0: none
  std::string name() const {
    const char* w = isa == Isa::Avx512 ? "avx512" : isa == Isa::Avx2 ? "avx2" : "scalar";
    return std::string(w) + " x" + std::to_string(streams) + " stream" + (streams > 1 ? "s" : "") +
           (burst > 1 ? " in bursts of " + std::to_string(burst) + " lines" : "") +
           (prefetch ? ", prefetch " + std::to_string(prefetch) + " B" : "") +
           (page_touch ? ", page touch " + std::to_string(page_touch) + " B" : "");
  }
};

uint64_t sum_words_scalar(const std::byte* p, size_t bytes) {
  uint64_t s = 0;
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    s += w;
  }
  return s;
}

uint64_t run_variant(const Variant& v, const std::byte* p, size_t bytes) {
  switch (v.isa) {
    case Isa::Avx512:
      return sum_words_avx512(p, bytes, v.streams, v.burst, v.prefetch, v.page_touch);
    case Isa::Avx2:
      return sum_words_avx2(p, bytes, v.streams, v.burst, v.prefetch, v.page_touch);
    case Isa::Scalar:
      break;
  }
  return sum_words_scalar(p, bytes);
}

// The read loops worth trying on this CPU. Load width matters on CPUs whose 512-bit loads cost
// more (Zen 4 splits them), stream count on every CPU (the L2 streamer tracks a few streams per
// core), the lines read from one stream before the next (on one Zen 4 core, 4 streams read a line
// at a time reach ~12 GB/s where one stream, or 4 in bursts of 16 lines as the interleaved GEMVs
// read them, reach 25-30 GB/s), prefetch distance where the hardware prefetchers stop short, and
// the page touch the 16-row GEMVs use on AMD Zen 5 (ops/isa.h X16GemvPlan): there one stream
// prefetching 1-2 KiB and touching each page 8 KiB ahead read 1.05-1.08x the best loop without
// it, so a probe without it would be beaten by the decode it is the ceiling of.
std::vector<Variant> variants(bool search) {
  const Isa best = detect_isa();
  if (best == Isa::Scalar) return {{Isa::Scalar, 1, 1, 0}};
  if (!search) return {{best, 4, 16, 0}};
  std::vector<Variant> v;
  for (int s : {1, 2, 4, 8, 16}) {
    for (size_t pf : {size_t{0}, size_t{1024}}) v.push_back({best, s, 1, pf});
  }
  for (int s : {2, 4, 8}) v.push_back({best, s, 16, 0});
  for (int s : {1, 2, 4}) v.push_back({best, s, 1, 1024, kZen5PageTouchBytes});
  if (best == Isa::Avx512) {
    for (int s : {1, 4}) v.push_back({Isa::Avx2, s, 1, 0});
    // 256-bit loads in bursts as well: on a Zen 4 guest with AVX-512 the best loop was 2 streams
    // of them in bursts of 16 or 32 lines (33-34.5 GB/s at 1 thread, where the 512-bit loop of
    // the same shape read 25-28 and one stream 30-31), and the 16-row GEMVs, whose long runs
    // read 2-3.4 KiB of one stream at a time (ops/isa.h x16_gemv_long_runs), read 32-34: without
    // these the probe read ~30 and F16 decode ran at 105 % of it (session 51).
    for (int s : {2, 4}) v.push_back({Isa::Avx2, s, 16, 0});
    v.push_back({Isa::Avx2, 2, 32, 0});
  }
  // Bursts of 32 lines (2 KiB): the F16/BF16 GEMVs' long runs.
  for (int s : {2, 4}) v.push_back({best, s, 32, 0});
  return v;
}

// The second stage of the search: other prefetch distances for the stream count and load width of
// the best prefetching loop of the first (the best distance differs between CPUs and with the
// memory's loaded latency; on the 2-vCPU Sapphire Rapids dev VM 512-2048 B were within a few %
// of each other, 0 B 10-25 % behind at 8 streams).
constexpr size_t kRefinedPrefetch[] = {256, 512, 2048, 4096};
void append_refinement(Variant around, std::vector<Variant>& vs) {  // a copy: vs may reallocate
  for (size_t pf : kRefinedPrefetch) {
    vs.push_back({around.isa, around.streams, 1, pf, around.page_touch});
  }
}

// Every loop a name can select (BandwidthOptions::variant): the first stage's and every
// refinement the second stage could add.
std::vector<Variant> named_variants() {
  std::vector<Variant> v = variants(true);
  const size_t first_stage = v.size();
  for (size_t i = 0; i < first_stage; ++i) {
    if (v[i].prefetch != 0) append_refinement(v[i], v);
  }
  return v;
}

bool thp_available() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(in, s);
  return s.find("[always]") != std::string::npos || s.find("[madvise]") != std::string::npos;
}

struct FreeDeleter {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};

}  // namespace

BandwidthProbe probe_read_bandwidth(const BandwidthOptions& opts) {
  const int threads = opts.threads;
  if (threads < 1 || opts.reps < 1 ||
      opts.bytes < (size_t{64} << 10) * static_cast<size_t>(threads)) {
    throw std::invalid_argument(
        "probe_read_bandwidth: need threads >= 1, reps >= 1 and bytes >= 64 KiB * threads (got "
        "threads=" +
        std::to_string(threads) + ", bytes=" + std::to_string(opts.bytes) +
        ", reps=" + std::to_string(opts.reps) + ")");
  }
  if (opts.reads_per_pass < 1) {
    throw std::invalid_argument("probe_read_bandwidth: reads_per_pass must be >= 1 (got " +
                                std::to_string(opts.reads_per_pass) + ")");
  }
  const int reads = opts.reads_per_pass;
  std::vector<Variant> vs = opts.variant.empty() ? variants(opts.search) : named_variants();
  // The prefetch distances of the second stage are added once the first has run (below).
  const size_t first_stage = vs.size();
  const bool refine =
      opts.variant.empty() && opts.search &&
      std::any_of(vs.begin(), vs.end(), [](const Variant& v) { return v.prefetch; });
  if (!opts.variant.empty()) {
    std::erase_if(vs, [&](const Variant& v) { return v.name() != opts.variant; });
    if (vs.empty()) {
      throw std::invalid_argument("probe_read_bandwidth: no read loop named '" + opts.variant +
                                  "' on this CPU");
    }
  }
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t slice = opts.bytes / static_cast<size_t>(threads) / 64 * 64;
  const size_t total = slice * static_cast<size_t>(threads);
  const size_t alloc = (total + kHugePage - 1) / kHugePage * kHugePage;
  std::unique_ptr<std::byte, FreeDeleter> buf(
      static_cast<std::byte*>(std::aligned_alloc(kHugePage, alloc)));
  if (!buf) throw std::bad_alloc();
  BandwidthProbe probe;
  probe.huge_pages = thp_available() && ::madvise(buf.get(), alloc, MADV_HUGEPAGE) == 0;

  // Sized for both stages up front (the refinement appends to vs between passes).
  vs.reserve(vs.size() + std::size(kRefinedPrefetch));
  std::vector<double> best_seconds(vs.size() + std::size(kRefinedPrefetch), 1e300);
  // Per variant one warm-up pass (TLB, frequency) and `reps` timed passes.
  const size_t per_variant = static_cast<size_t>(opts.reps) + 1;
  std::vector<uint64_t> sink(static_cast<size_t>(threads));
  auto mine = [&](int t) { return buf.get() + slice * static_cast<size_t>(t); };
  run_timed_passes(
      threads, opts.cpus,
      // First touch by the reader: pages are mapped and local.
      [&](int t) { std::memset(mine(t), t + 1, slice); },
      [&](int t, size_t pass) {
        for (int k = 0; k < reads; ++k)
          sink[static_cast<size_t>(t)] += run_variant(vs[pass / per_variant], mine(t), slice);
      },
      [&](size_t pass, double seconds) noexcept {
        if (pass % per_variant != 0) {
          double& best = best_seconds[pass / per_variant];
          best = std::min(best, seconds);
        }
        // After the first stage's last pass: the second stage's loops around its best
        // prefetching one.
        if (refine && pass + 1 == first_stage * per_variant) {
          size_t around = first_stage;
          for (size_t i = 0; i < first_stage; ++i) {
            if (vs[i].prefetch != 0 &&
                (around == first_stage || best_seconds[i] < best_seconds[around])) {
              around = i;
            }
          }
          append_refinement(vs[around], vs);
        }
        return pass + 1 < vs.size() * per_variant;
      });

  size_t best = 0;
  for (size_t i = 0; i < vs.size(); ++i) {
    probe.trials.push_back(
        {vs[i].name(), static_cast<double>(total) * reads / best_seconds[i] / 1e9});
    if (probe.trials[i].gbs > probe.trials[best].gbs) best = i;
  }
  probe.gbs = probe.trials[best].gbs;
  probe.variant = probe.trials[best].variant;
  probe.method = (vs.size() > 1 ? "best of " + std::to_string(vs.size()) + " read loops: " : "") +
                 vs[best].name() + " per thread, " + std::to_string(threads) + " thread" +
                 (threads > 1 ? "s" : "") + (opts.cpus.empty() ? ", unpinned" : ", pinned") + ", " +
                 std::to_string(total >> 20) + " MiB" +
                 (probe.huge_pages ? ", huge pages requested" : "");
  return probe;
}

size_t cache_reach_of(const std::vector<std::pair<size_t, double>>& sizes, double dram_gbs,
                      double factor) {
  size_t reach = 0;
  for (const auto& [bytes, gbs] : sizes) {
    if (gbs >= factor * dram_gbs) reach = std::max(reach, bytes);
  }
  return reach;
}

CacheReach measure_cache_reach(const CacheReachOptions& opts) {
  if (opts.min_bytes > opts.max_bytes || opts.min_bytes == 0) {
    throw std::invalid_argument("measure_cache_reach: need 0 < min_bytes <= max_bytes (got " +
                                std::to_string(opts.min_bytes) + ", " +
                                std::to_string(opts.max_bytes) + ")");
  }
  constexpr size_t kPassBytes = size_t{256} << 20;
  auto reads = [](size_t bytes) {
    return static_cast<int>(std::max<size_t>(1, (kPassBytes + bytes - 1) / bytes));
  };
  CacheReach reach;
  std::vector<std::pair<size_t, double>> measured;
  for (size_t bytes = opts.min_bytes; bytes <= opts.max_bytes; bytes *= 2) {
    const BandwidthProbe p = probe_read_bandwidth({.threads = opts.threads,
                                                   .bytes = bytes,
                                                   .reps = 3,
                                                   .cpus = opts.cpus,
                                                   .search = reach.variant.empty(),
                                                   .variant = reach.variant,
                                                   .reads_per_pass = reads(bytes)});
    if (reach.variant.empty()) reach.variant = p.variant;
    measured.emplace_back(bytes, p.gbs);
    reach.sizes.push_back({std::to_string(bytes >> 20) + " MiB", p.gbs});
  }
  reach.bytes = cache_reach_of(measured, opts.dram_gbs, opts.factor);
  reach.at_max = reach.bytes > 0 && reach.bytes == measured.back().first;
  return reach;
}

double measure_read_bandwidth_gbs(int threads, size_t bytes, int reps) {
  return probe_read_bandwidth({.threads = threads, .bytes = bytes, .reps = reps}).gbs;
}

}  // namespace pacer::ops
