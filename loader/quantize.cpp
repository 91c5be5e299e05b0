#include "loader/quantize.h"

#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "loader/gguf_writer.h"
#include "ops/matmul.h"

namespace pacer::loader {

uint32_t llama_file_type(ops::WeightType t) {
  switch (t) {
    case ops::WeightType::F32:
      return 0;  // LLAMA_FTYPE_ALL_F32
    case ops::WeightType::F16:
      return 1;  // LLAMA_FTYPE_MOSTLY_F16
    case ops::WeightType::Q4_0:
      return 2;  // LLAMA_FTYPE_MOSTLY_Q4_0
    case ops::WeightType::Q8_0:
      return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    case ops::WeightType::Q4_K:
      return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    case ops::WeightType::Q5_K:
      return 17;  // LLAMA_FTYPE_MOSTLY_Q5_K_M
    case ops::WeightType::Q6_K:
      return 18;  // LLAMA_FTYPE_MOSTLY_Q6_K
    case ops::WeightType::BF16:
      return 32;  // LLAMA_FTYPE_MOSTLY_BF16
    case ops::WeightType::Q3_K:
      return 12;  // LLAMA_FTYPE_MOSTLY_Q3_K_M
    case ops::WeightType::Q2_K:
      return 10;  // LLAMA_FTYPE_MOSTLY_Q2_K
    case ops::WeightType::IQ4_XS:
      return 30;  // LLAMA_FTYPE_MOSTLY_IQ4_XS
    case ops::WeightType::Q8_K:
      break;
  }
  throw std::invalid_argument(fmt::format("no llama.cpp file type for {}", ops::type_name(t)));
}

bool is_quantizable(const GgufTensor& t) noexcept {
  int64_t dims = 0;
  for (int64_t d : t.ne) dims += d > 1 ? 1 : 0;
  return t.ne.size() >= 2 && dims >= 2;
}

QuantizeStats quantize_gguf(const GgufFile& in, const std::filesystem::path& out,
                            ops::WeightType type) {
  if (type != ops::WeightType::Q8_0 && type != ops::WeightType::Q4_0) {
    throw std::invalid_argument(
        fmt::format("quantize: target type {} not supported (q8_0, q4_0)", ops::type_name(type)));
  }
  const std::string file = in.path().string();
  GgufWriter w(in.version());
  w.copy_metadata(in);
  w.set_u32("general.file_type", llama_file_type(type));
  w.set_u32("general.quantization_version", 2);

  QuantizeStats stats;
  const int64_t block = ops::type_info(type).block_elems;
  for (const GgufTensor& t : in.tensors()) {
    stats.bytes_in += t.bytes;
    const bool convert = is_quantizable(t) && t.type != type;
    if (!convert) {
      w.add_tensor_view(t.name, t.type, t.ne, t.data);
      stats.bytes_out += t.bytes;
      ++stats.tensors_copied;
      continue;
    }
    const std::string field = fmt::format("tensor '{}'", t.name);
    if (t.type != ops::WeightType::F32 && t.type != ops::WeightType::F16 &&
        t.type != ops::WeightType::BF16) {
      throw LoadError(file, field, static_cast<int64_t>(t.info_offset),
                      fmt::format("is {}; only f32, f16 and bf16 tensors can be quantized",
                                  ops::type_name(t.type)));
    }
    if (t.ne[0] % block != 0) {
      throw LoadError(file, field, static_cast<int64_t>(t.info_offset),
                      fmt::format("row length {} is not a multiple of {}'s block size {}", t.ne[0],
                                  ops::type_name(type), block));
    }
    const ops::WeightMatrix src = t.matrix();
    const int64_t out_row_bytes = ops::row_bytes(type, src.cols);
    w.add_tensor(t.name, type, t.ne,
                 [src, type, out_row_bytes](int64_t r0, int64_t r1, std::span<std::byte> dst) {
                   tbb::parallel_for(
                       tbb::blocked_range<int64_t>(r0, r1, 16),
                       [&](const tbb::blocked_range<int64_t>& rr) {
                         std::vector<float> row(static_cast<size_t>(src.cols));
                         for (int64_t r = rr.begin(); r < rr.end(); ++r) {
                           ops::dequantize_row(src.type, src.row(r), row.data(), src.cols);
                           ops::quantize_row(type, row.data(),
                                             dst.data() + (r - r0) * out_row_bytes, src.cols);
                         }
                       });
                 });
    stats.bytes_out += static_cast<uint64_t>(out_row_bytes) * static_cast<uint64_t>(src.rows);
    ++stats.tensors_quantized;
  }
  w.write(out);
  return stats;
}

}  // namespace pacer::loader
