// The x16 layouts (interleaved.h): repack from row-major Q4_0/Q8_0, the scalar reference GEMVs
// and the InterleavedMatrix owner (matmul.h).
#include "ops/interleaved.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include <sys/mman.h>

#include <tbb/parallel_for.h>

#include "ops/matmul.h"
#include "ops/q4_0.h"
#include "ops/q8_0.h"

namespace pacer::ops {

void x16_repack_group(WeightType t, const std::byte* src, int64_t rows, int64_t cols, int64_t g,
                      std::byte* dst) {
  const int64_t nb = cols / 32;
  const int64_t stride = row_bytes(t, cols);
  const int64_t qs_bytes = x16_block_qs_bytes(t);
  std::memset(dst, 0, static_cast<size_t>(x16_group_bytes(t, cols)));
  for (int64_t i = 0; i < kX16Rows; ++i) {
    const int64_t r = g * kX16Rows + i;
    if (r >= rows) break;  // padding rows stay zero: d = 0
    const std::byte* row = src + r * stride;
    for (int64_t b = 0; b < nb; ++b) {
      std::byte* pair = dst + (b / 2) * x16_pair_bytes(t);
      std::byte* qs = pair + 64 + qs_bytes * (b % 2);
      if (t == WeightType::Q4_0) {
        const auto& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
        std::memcpy(pair + 32 * (b % 2) + 2 * i, &blk.d, 2);
        for (int m = 0; m < 4; ++m) std::memcpy(qs + 64 * m + 4 * i, blk.qs + 4 * m, 4);
      } else {
        const auto& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
        std::memcpy(pair + 32 * (b % 2) + 2 * i, &blk.d, 2);
        for (int j = 0; j < 8; ++j) std::memcpy(qs + 64 * j + 4 * i, blk.qs + 4 * j, 4);
      }
    }
  }
  if (t == WeightType::Q8_0) {  // q -> q + 128, one pass over the group's quants (vectorizes)
    const int64_t pairs = (nb + 1) / 2;
    for (int64_t p = 0; p < pairs; ++p) {
      auto* q = reinterpret_cast<uint8_t*>(dst + p * x16_pair_bytes(t) + 64);
      for (int64_t k = 0; k < 2 * qs_bytes; ++k) q[k] ^= 0x80;
    }
  }
}

namespace {

// Row i of every group: sum over blocks of fp16(d) * d_x * isum, in block order, as the
// row-major references compute it; `block_isum(qs, i, q)` is the integer dot of row i's quants
// (at qs, the block's chunks) with the activation quants q.
template <class BlockIsum>
void gemv_x16_ref(WeightType t, int64_t n, const std::byte* groups, int64_t n_groups,
                  const std::byte* act, float* out, BlockIsum block_isum) {
  const int64_t nb = n / 32;
  const ActQ8Row x = act_q8_row(act, n);
  for (int64_t g = 0; g < n_groups; ++g) {
    const std::byte* grp = groups + g * x16_group_bytes(t, n);
    for (int64_t i = 0; i < kX16Rows; ++i) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const std::byte* pair = grp + (b / 2) * x16_pair_bytes(t);
        fp16_t d;
        std::memcpy(&d, pair + 32 * (b % 2) + 2 * i, 2);
        const auto* qs =
            reinterpret_cast<const uint8_t*>(pair + 64 + x16_block_qs_bytes(t) * (b % 2));
        acc += fp16_to_fp32(d) * x.d[b] * static_cast<float>(block_isum(qs, i, x.q + 32 * b));
      }
      out[g * kX16Rows + i] = acc;
    }
  }
}

}  // namespace

void gemv_q4_0x16_q8_0_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out) {
  gemv_x16_ref(WeightType::Q4_0, n, groups, n_groups, act, out,
               [](const uint8_t* qs, int64_t i, const int8_t* q) {
                 int32_t isum = 0;
                 for (int e = 0; e < 16; ++e) {  // element e (low nibble) and e + 16 (high)
                   const uint8_t byte = qs[64 * (e / 4) + 4 * i + e % 4];
                   isum += ((byte & 0x0F) - 8) * q[e] + ((byte >> 4) - 8) * q[e + 16];
                 }
                 return isum;
               });
}

void gemv_q8_0x16_q8_0_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out) {
  gemv_x16_ref(WeightType::Q8_0, n, groups, n_groups, act, out,
               [](const uint8_t* qs, int64_t i, const int8_t* q) {
                 int32_t isum = 0;
                 for (int e = 0; e < 32; ++e) {
                   isum += (static_cast<int32_t>(qs[64 * (e / 4) + 4 * i + e % 4]) - 128) * q[e];
                 }
                 return isum;
               });
}

void InterleavedMatrix::Free::operator()(std::byte* p) const noexcept {
  std::free(p);
}

bool InterleavedMatrix::pays(const WeightMatrix& w, Isa isa) {
  return x16_supported(w.type) && w.layout == WeightLayout::RowMajor && isa == Isa::Avx512 &&
         isa_supported(Isa::Avx512) && detect_cpu_features().avx512_vnni;
}

InterleavedMatrix InterleavedMatrix::repack(const WeightMatrix& w) {
  check_matrix(w);
  if (!x16_supported(w.type) || w.layout != WeightLayout::RowMajor) {
    throw MatmulError("repack: weight " + std::string(type_name(w.type)) +
                      " [cols=" + std::to_string(w.cols) + ", rows=" + std::to_string(w.rows) +
                      "] is not a row-major q4_0 or q8_0 matrix");
  }
  const int64_t group_bytes = x16_group_bytes(w.type, w.cols);
  const int64_t n_groups = x16_groups(w.rows);
  InterleavedMatrix m;
  m.storage_bytes_ = group_bytes * n_groups;
  // 2 MiB-aligned and asked for transparent huge pages: the repack writes the copy with ~500x
  // fewer page faults, and the decode GEMVs stream it with fewer TLB misses. (Advice only: where
  // THP is off, this is plain memory.)
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t alloc_bytes =
      (static_cast<size_t>(m.storage_bytes_) + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, alloc_bytes);
  if (p == nullptr) throw std::bad_alloc();
  ::madvise(p, alloc_bytes, MADV_HUGEPAGE);
  m.data_.reset(static_cast<std::byte*>(p));
  std::byte* dst = m.data_.get();
  tbb::parallel_for(int64_t{0}, n_groups, [&](int64_t g) {
    x16_repack_group(w.type, w.data, w.rows, w.cols, g, dst + g * group_bytes);
  });
  m.view_ = w;
  m.view_.data = dst;
  m.view_.layout = WeightLayout::Interleaved16;
  return m;
}

}  // namespace pacer::ops
