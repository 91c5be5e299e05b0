#pragma once
// The attention KV cache: per layer, a K and a V cache of `capacity` positions of F16 (default),
// F32 or Q8_0 in the layout ops::attention reads (ops/attention.h: each KV head's positions
// contiguous, K transposed in blocks of 16 positions). Owned memory, allocated once for
// the requested context after checking that it fits.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

#include "loader/model_config.h"
#include "ops/attention.h"
#include "ops/types.h"

namespace pacer::runtime {

// The cache (or another session buffer) does not fit in available memory, or bad sizes.
class MemoryError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// MemAvailable from /proc/meminfo in bytes, or -1 when it cannot be read.
int64_t mem_available_bytes();

// Throws MemoryError "<what> needs X GiB but only Y GiB is available (MemAvailable in
// /proc/meminfo)..." when bytes > available. available < 0: read mem_available_bytes() (and skip
// the check when that is unknown).
void check_fits_in_memory(int64_t bytes, const std::string& what, int64_t available = -1,
                          const std::string& advice = "use a smaller context (-c)");

class KvCache {
 public:
  // Checks KV bytes (plus `extra_bytes` the caller also needs, e.g. activations) against
  // `available` (< 0: MemAvailable) before allocating. type: F16, F32 or Q8_0 (head_dim a multiple
  // of 32).
  KvCache(const loader::ModelConfig& c, int64_t capacity, ops::WeightType type,
          int64_t extra_bytes = 0, int64_t available = -1);

  static int64_t bytes_needed(const loader::ModelConfig& c, int64_t capacity, ops::WeightType type);

  // The cache's shape and layout as ops::attention and ops::kv_store take it (scale 1; the
  // caller sets the layer's scale, window and softcap).
  ops::AttentionParams params() const noexcept { return params_; }

  int64_t capacity() const noexcept { return capacity_; }
  ops::WeightType type() const noexcept { return type_; }
  int64_t bytes() const noexcept { return layer_bytes_ * 2 * n_layers_; }
  int64_t row_bytes() const noexcept { return row_bytes_; }  // one position of one layer's K
  std::byte* k(int64_t layer) noexcept { return base() + (2 * layer) * layer_bytes_; }
  std::byte* v(int64_t layer) noexcept { return base() + (2 * layer + 1) * layer_bytes_; }
  // The whole cache (NUMA placement binds or interleaves its pages).
  std::span<std::byte> memory() noexcept { return {base(), static_cast<size_t>(bytes())}; }
  // Maps every page of the cache in now, if it is at most `max_bytes` (else nothing: a large
  // context keeps committing on first write); returns whether it did. Contents are kept.
  bool commit(int64_t max_bytes) noexcept;

 private:
  struct Free {
    size_t mapped;  // bytes of an anonymous mapping to unmap; 0 (value-initialized): aligned_alloc
    void operator()(std::byte* p) const noexcept;
  };
  static ops::AttentionParams layout(const loader::ModelConfig& c, int64_t capacity,
                                     ops::WeightType type);
  static int64_t layer_bytes(const loader::ModelConfig& c, int64_t capacity, ops::WeightType type);
  std::byte* base() noexcept { return data_.get(); }
  int64_t capacity_ = 0, n_layers_ = 0, row_bytes_ = 0, layer_bytes_ = 0;
  ops::WeightType type_ = ops::WeightType::F16;
  ops::AttentionParams params_;
  std::unique_ptr<std::byte, Free> data_;  // (n_layers, {K,V}, layer_bytes_), 64-byte aligned
};

}  // namespace pacer::runtime
