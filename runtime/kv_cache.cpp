#include "runtime/kv_cache.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "ops/attention.h"
#include "ops/q8_0.h"

namespace pacer::runtime {
namespace {

std::string human_bytes(int64_t bytes) {
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  return mib < 1024.0 ? fmt::format("{:.1f} MiB", mib) : fmt::format("{:.2f} GiB", mib / 1024.0);
}

}  // namespace

int64_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    int64_t kb = -1;
    std::string unit;
    if (fields >> kb >> unit && kb >= 0 && unit == "kB") return kb * 1024;
    return -1;
  }
  return -1;
}

void check_fits_in_memory(int64_t bytes, const std::string& what, int64_t available,
                          const std::string& advice) {
  if (available < 0) available = mem_available_bytes();
  if (available < 0 || bytes <= available) return;
  throw MemoryError(
      fmt::format("{} needs {} but only {} is available (MemAvailable in /proc/meminfo); {}", what,
                  human_bytes(bytes), human_bytes(available), advice));
}

void KvCache::Free::operator()(std::byte* p) const noexcept {
  if (mapped > 0) {
    ::munmap(p, mapped);
  } else {
    std::free(p);
  }
}

int64_t KvCache::bytes_needed(const loader::ModelConfig& c, int64_t capacity,
                              ops::WeightType type) {
  if (type != ops::WeightType::F16 && type != ops::WeightType::F32 &&
      type != ops::WeightType::Q8_0) {
    throw MemoryError(
        fmt::format("KV cache type {} is not supported (f16, f32 or q8_0)", ops::type_name(type)));
  }
  if (type == ops::WeightType::Q8_0 && c.head_dim % ops::kQ8_0BlockElems != 0) {
    // A head must be whole Q8_0 blocks so attention reads each head's blocks on its own.
    throw MemoryError(fmt::format(
        "--kv-type q8_0 needs head_dim a multiple of 32; this model's head_dim is {}", c.head_dim));
  }
  if (capacity <= 0) throw MemoryError(fmt::format("context size {} must be positive", capacity));
  const int64_t row = ops::kv_row_bytes(type, c.n_kv_heads * c.head_dim);
  // capacity is user input: refuse sizes whose product would overflow before comparing (the
  // layout rounds it up to whole blocks, and each layer's K and V to 64 bytes).
  const int64_t per_position = row * 2 * c.n_layers;
  if (per_position <= 0 ||
      capacity > std::numeric_limits<int64_t>::max() / per_position - 2 * ops::kKvBlock) {
    throw MemoryError(fmt::format("context size {} is too large", capacity));
  }
  return layer_bytes(c, capacity, type) * 2 * c.n_layers;
}

ops::AttentionParams KvCache::layout(const loader::ModelConfig& c, int64_t capacity,
                                     ops::WeightType type) {
  return {.n_heads = static_cast<int>(c.n_heads),
          .n_kv_heads = static_cast<int>(c.n_kv_heads),
          .head_dim = static_cast<int>(c.head_dim),
          .scale = 1.0f,
          .kv_type = type,
          .kv_positions = capacity};
}

int64_t KvCache::layer_bytes(const loader::ModelConfig& c, int64_t capacity, ops::WeightType type) {
  return (ops::kv_cache_bytes(layout(c, capacity, type)) + 63) / 64 * 64;
}

KvCache::KvCache(const loader::ModelConfig& c, int64_t capacity, ops::WeightType type,
                 int64_t extra_bytes, int64_t available)
    : capacity_(capacity), n_layers_(c.n_layers), type_(type), params_(layout(c, capacity, type)) {
  const int64_t total = bytes_needed(c, capacity, type);
  check_fits_in_memory(
      total + extra_bytes,
      fmt::format("the KV cache for a context of {} ({} layers x K,V x {} x {} {}){}", capacity,
                  c.n_layers, capacity, c.n_kv_heads * c.head_dim, ops::type_name(type),
                  extra_bytes > 0 ? " plus activations" : ""),
      available,
      type == ops::WeightType::F32 ? "use a smaller context (-c) or an f16 KV cache (--kv-type f16)"
      : type == ops::WeightType::F16
          ? "use a smaller context (-c) or a q8_0 KV cache (--kv-type q8_0)"
          : "use a smaller context (-c)");
  row_bytes_ = ops::kv_row_bytes(type, c.n_kv_heads * c.head_dim);
  layer_bytes_ = layer_bytes(c, capacity, type);
  // Pages are committed on first write (or by commit(), which a Session calls for caches up to
  // 1 GiB), so a large context costs only what the run touches.
  // Caches of 2 MiB or more sit on transparent huge pages where the kernel allows them: attention
  // reads one KV head's slice of every row, a stride that at long context touches every 4 KiB
  // page of the layer once per head and misses the TLB on most of them.
  // Those are mapped afresh (not taken from the heap, where a freed block may still be
  // resident), so that what the run never touches is never committed.
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t used = static_cast<size_t>(layer_bytes_ * 2 * n_layers_);
  if (used < kHugePage) {
    data_.reset(static_cast<std::byte*>(std::aligned_alloc(64, (used + 63) / 64 * 64)));
    if (!data_) {
      throw MemoryError(fmt::format("cannot allocate {} for the KV cache", human_bytes(bytes())));
    }
    // Attention reads a transposed K in whole blocks, the positions not yet written included
    // (their scores are masked): zeros, as the mapped pages of a larger cache are.
    std::memset(data_.get(), 0, used);
    return;
  }
  const size_t size = (used + kHugePage - 1) / kHugePage * kHugePage;
  // One huge page more than needed, then the unaligned head and the tail unmapped.
  void* m =
      ::mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    throw MemoryError(fmt::format("cannot map {} for the KV cache: {}", human_bytes(bytes()),
                                  std::strerror(errno)));
  }
  const auto start = reinterpret_cast<uintptr_t>(m);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) ::munmap(m, aligned - start);
  const uintptr_t tail = aligned + size, end = start + size + kHugePage;
  if (end > tail) ::munmap(reinterpret_cast<void*>(tail), end - tail);
  data_ = std::unique_ptr<std::byte, Free>(reinterpret_cast<std::byte*>(aligned), Free{size});
  ::madvise(data_.get(), size, MADV_HUGEPAGE);  // advice only: 4 KiB pages otherwise
}

bool KvCache::commit(int64_t max_bytes) noexcept {
  const int64_t n = bytes();
  if (n <= 0 || n > max_bytes) return false;
  std::byte* p = base();
  // madvise wants a page-aligned start; the cache is only 64-byte aligned when small.
  constexpr uintptr_t kPage = 4096;
  const auto begin = reinterpret_cast<uintptr_t>(p) / kPage * kPage;
  const auto end = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(n);
#ifdef MADV_POPULATE_WRITE
  if (::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0) {
    return true;
  }
#endif
  // Kernels before 5.14: rewrite one byte of each page with its own value.
  for (uintptr_t q = reinterpret_cast<uintptr_t>(p); q < end; q = (q / kPage + 1) * kPage) {
    auto* byte = reinterpret_cast<volatile unsigned char*>(q);
    *byte = *byte;
  }
  return true;
}

}  // namespace pacer::runtime
