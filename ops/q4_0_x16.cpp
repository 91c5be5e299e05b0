// q4_0x16 (q4_0_x16.h): the repack from row-major Q4_0, the scalar reference GEMV and the
// InterleavedMatrix owner.
#include "ops/q4_0_x16.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include <tbb/parallel_for.h>

#include "ops/q4_0.h"
#include "ops/q8_0.h"

namespace pacer::ops {
namespace {

// Group g of `src` (row-major Q4_0, rows x cols) into dst (x16_group_bytes(cols) bytes).
void repack_group(const std::byte* src, int64_t rows, int64_t cols, int64_t g, std::byte* dst) {
  const int64_t nb = cols / 32;
  const int64_t stride = row_bytes(WeightType::Q4_0, cols);
  std::memset(dst, 0, static_cast<size_t>(x16_group_bytes(cols)));
  for (int64_t i = 0; i < kX16Rows; ++i) {
    const int64_t r = g * kX16Rows + i;
    if (r >= rows) break;  // padding rows stay zero: d = 0
    const auto* blocks = reinterpret_cast<const BlockQ4_0*>(src + r * stride);
    for (int64_t b = 0; b < nb; ++b) {
      std::byte* pair = dst + (b / 2) * kX16PairBytes;
      const int64_t h = b % 2;
      std::memcpy(pair + 32 * h + 2 * i, &blocks[b].d, 2);
      std::byte* qs = pair + 64 + 256 * h;
      for (int m = 0; m < 4; ++m) std::memcpy(qs + 64 * m + 4 * i, blocks[b].qs + 4 * m, 4);
    }
  }
}

}  // namespace

void gemv_q4_0x16_q8_0_ref(int64_t n, const std::byte* groups, int64_t n_groups,
                           const std::byte* act, float* out) {
  const int64_t nb = n / 32;
  const ActQ8Row x = act_q8_row(act, n);
  for (int64_t g = 0; g < n_groups; ++g) {
    const std::byte* grp = groups + g * x16_group_bytes(n);
    for (int64_t i = 0; i < kX16Rows; ++i) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const std::byte* pair = grp + (b / 2) * kX16PairBytes;
        fp16_t d;
        std::memcpy(&d, pair + 32 * (b % 2) + 2 * i, 2);
        const auto* qs = reinterpret_cast<const uint8_t*>(pair + 64 + 256 * (b % 2));
        const int8_t* q = x.q + 32 * b;
        int32_t isum = 0;
        for (int e = 0; e < 16; ++e) {  // element e (low nibble) and e + 16 (high nibble)
          const uint8_t byte = qs[64 * (e / 4) + 4 * i + e % 4];
          isum += ((byte & 0x0F) - 8) * q[e] + ((byte >> 4) - 8) * q[e + 16];
        }
        acc += fp16_to_fp32(d) * x.d[b] * static_cast<float>(isum);
      }
      out[g * kX16Rows + i] = acc;
    }
  }
}

void InterleavedMatrix::Free::operator()(std::byte* p) const noexcept {
  std::free(p);
}

bool InterleavedMatrix::pays(const WeightMatrix& w, Isa isa) {
  return w.type == WeightType::Q4_0 && w.layout == WeightLayout::RowMajor && isa == Isa::Avx512 &&
         detect_cpu_features().avx512_vnni;
}

InterleavedMatrix InterleavedMatrix::repack(const WeightMatrix& w) {
  check_matrix(w);
  if (w.type != WeightType::Q4_0 || w.layout != WeightLayout::RowMajor) {
    throw MatmulError("repack: weight " + std::string(type_name(w.type)) +
                      " [cols=" + std::to_string(w.cols) + ", rows=" + std::to_string(w.rows) +
                      "] is not a row-major q4_0 matrix");
  }
  const int64_t group_bytes = x16_group_bytes(w.cols);
  const int64_t n_groups = x16_groups(w.rows);
  InterleavedMatrix m;
  m.storage_bytes_ = group_bytes * n_groups;
  void* p = std::aligned_alloc(64, static_cast<size_t>(m.storage_bytes_));
  if (p == nullptr) throw std::bad_alloc();
  m.data_.reset(static_cast<std::byte*>(p));
  std::byte* dst = m.data_.get();
  tbb::parallel_for(int64_t{0}, n_groups, [&](int64_t g) {
    repack_group(w.data, w.rows, w.cols, g, dst + g * group_bytes);
  });
  m.view_ = w;
  m.view_.data = dst;
  m.view_.layout = WeightLayout::Q4_0x16;
  return m;
}

}  // namespace pacer::ops
