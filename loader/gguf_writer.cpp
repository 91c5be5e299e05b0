#include "loader/gguf_writer.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <type_traits>

#include <fmt/format.h>

namespace pacer::loader {

static_assert(std::endian::native == std::endian::little, "GGUF is written little endian");

namespace {

template <class T>
void append_pod(std::vector<std::byte>& out, T v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

void append_string(std::vector<std::byte>& out, std::string_view s) {
  append_pod<uint64_t>(out, s.size());
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  out.insert(out.end(), p, p + s.size());
}

template <class T>
constexpr GgufValueType value_type_of() {
  if constexpr (std::is_same_v<T, uint8_t>) return GgufValueType::U8;
  if constexpr (std::is_same_v<T, int8_t>) return GgufValueType::I8;
  if constexpr (std::is_same_v<T, uint16_t>) return GgufValueType::U16;
  if constexpr (std::is_same_v<T, int16_t>) return GgufValueType::I16;
  if constexpr (std::is_same_v<T, uint32_t>) return GgufValueType::U32;
  if constexpr (std::is_same_v<T, int32_t>) return GgufValueType::I32;
  if constexpr (std::is_same_v<T, float>) return GgufValueType::F32;
  if constexpr (std::is_same_v<T, uint64_t>) return GgufValueType::U64;
  if constexpr (std::is_same_v<T, int64_t>) return GgufValueType::I64;
  if constexpr (std::is_same_v<T, double>) return GgufValueType::F64;
}

void append_array_header(std::vector<std::byte>& out, GgufValueType elem, uint64_t count) {
  append_pod<uint32_t>(out, static_cast<uint32_t>(elem));
  append_pod<uint64_t>(out, count);
}

uint64_t pad_to(uint64_t x, uint64_t alignment) {
  return (x + alignment - 1) / alignment * alignment;
}

bool is_power_of_two(uint64_t x) {
  return x != 0 && (x & (x - 1)) == 0;
}

}  // namespace

// ---- GgufMetaValue ----------------------------------------------------------------------------

#define PACER_SCALAR_CTOR(fn, T, TAG)                                          \
  GgufMetaValue GgufMetaValue::fn(T v) {                                       \
    std::vector<std::byte> b;                                                  \
    append_pod<T>(b, v);                                                       \
    return GgufMetaValue(GgufValueType::TAG, GgufValueType::U8, std::move(b)); \
  }
PACER_SCALAR_CTOR(u8, uint8_t, U8)
PACER_SCALAR_CTOR(i8, int8_t, I8)
PACER_SCALAR_CTOR(u16, uint16_t, U16)
PACER_SCALAR_CTOR(i16, int16_t, I16)
PACER_SCALAR_CTOR(u32, uint32_t, U32)
PACER_SCALAR_CTOR(i32, int32_t, I32)
PACER_SCALAR_CTOR(f32, float, F32)
PACER_SCALAR_CTOR(u64, uint64_t, U64)
PACER_SCALAR_CTOR(i64, int64_t, I64)
PACER_SCALAR_CTOR(f64, double, F64)
#undef PACER_SCALAR_CTOR

GgufMetaValue GgufMetaValue::boolean(bool v) {
  std::vector<std::byte> b{std::byte{static_cast<uint8_t>(v ? 1 : 0)}};
  return GgufMetaValue(GgufValueType::BOOL, GgufValueType::U8, std::move(b));
}

GgufMetaValue GgufMetaValue::string(std::string_view v) {
  std::vector<std::byte> b;
  append_string(b, v);
  return GgufMetaValue(GgufValueType::STRING, GgufValueType::U8, std::move(b));
}

template <class T>
GgufMetaValue GgufMetaValue::array(std::span<const T> values) {
  constexpr GgufValueType elem = value_type_of<T>();
  std::vector<std::byte> b;
  b.reserve(12 + values.size_bytes());
  append_array_header(b, elem, values.size());
  const auto* p = reinterpret_cast<const std::byte*>(values.data());
  b.insert(b.end(), p, p + values.size_bytes());
  return GgufMetaValue(GgufValueType::ARRAY, elem, std::move(b));
}
template GgufMetaValue GgufMetaValue::array<uint8_t>(std::span<const uint8_t>);
template GgufMetaValue GgufMetaValue::array<int8_t>(std::span<const int8_t>);
template GgufMetaValue GgufMetaValue::array<uint16_t>(std::span<const uint16_t>);
template GgufMetaValue GgufMetaValue::array<int16_t>(std::span<const int16_t>);
template GgufMetaValue GgufMetaValue::array<uint32_t>(std::span<const uint32_t>);
template GgufMetaValue GgufMetaValue::array<int32_t>(std::span<const int32_t>);
template GgufMetaValue GgufMetaValue::array<float>(std::span<const float>);
template GgufMetaValue GgufMetaValue::array<uint64_t>(std::span<const uint64_t>);
template GgufMetaValue GgufMetaValue::array<int64_t>(std::span<const int64_t>);
template GgufMetaValue GgufMetaValue::array<double>(std::span<const double>);

GgufMetaValue GgufMetaValue::bool_array(std::span<const bool> values) {
  std::vector<std::byte> b;
  append_array_header(b, GgufValueType::BOOL, values.size());
  for (bool v : values) b.push_back(std::byte{static_cast<uint8_t>(v ? 1 : 0)});
  return GgufMetaValue(GgufValueType::ARRAY, GgufValueType::BOOL, std::move(b));
}

GgufMetaValue GgufMetaValue::string_array(std::span<const std::string> values) {
  std::vector<std::byte> b;
  size_t total = 12;
  for (const auto& s : values) total += 8 + s.size();
  b.reserve(total);
  append_array_header(b, GgufValueType::STRING, values.size());
  for (const auto& s : values) append_string(b, s);
  return GgufMetaValue(GgufValueType::ARRAY, GgufValueType::STRING, std::move(b));
}

GgufMetaValue GgufMetaValue::string_array(std::span<const std::string_view> values) {
  std::vector<std::byte> b;
  size_t total = 12;
  for (const auto& s : values) total += 8 + s.size();
  b.reserve(total);
  append_array_header(b, GgufValueType::STRING, values.size());
  for (const auto& s : values) append_string(b, s);
  return GgufMetaValue(GgufValueType::ARRAY, GgufValueType::STRING, std::move(b));
}

GgufMetaValue GgufMetaValue::array_of(GgufValueType elem_type,
                                      std::span<const GgufMetaValue> items) {
  if (!items.empty()) elem_type = items.front().type();
  std::vector<std::byte> b;
  append_array_header(b, elem_type, items.size());
  for (const auto& item : items) {
    if (item.type() != elem_type) {
      throw std::invalid_argument(fmt::format("GGUF array_of: items mix types {} and {}",
                                              value_type_name(elem_type),
                                              value_type_name(item.type())));
    }
    b.insert(b.end(), item.body_.begin(), item.body_.end());
  }
  return GgufMetaValue(GgufValueType::ARRAY, elem_type, std::move(b));
}

GgufMetaValue GgufMetaValue::from(const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::U8:
      return u8(static_cast<uint8_t>(v.u));
    case GgufValueType::I8:
      return i8(static_cast<int8_t>(v.i));
    case GgufValueType::U16:
      return u16(static_cast<uint16_t>(v.u));
    case GgufValueType::I16:
      return i16(static_cast<int16_t>(v.i));
    case GgufValueType::U32:
      return u32(static_cast<uint32_t>(v.u));
    case GgufValueType::I32:
      return i32(static_cast<int32_t>(v.i));
    case GgufValueType::F32:
      return f32(static_cast<float>(v.f));
    case GgufValueType::BOOL:
      return boolean(v.u != 0);
    case GgufValueType::STRING:
      return string(v.str);
    case GgufValueType::U64:
      return u64(v.u);
    case GgufValueType::I64:
      return i64(v.i);
    case GgufValueType::F64:
      return f64(v.f);
    case GgufValueType::ARRAY:
      break;
  }
  if (v.elem_type == GgufValueType::STRING) {
    std::vector<std::byte> b;
    append_array_header(b, GgufValueType::STRING, v.count);
    for (uint64_t k = 0; k < v.count; ++k) append_string(b, v.array_string(k));
    return GgufMetaValue(GgufValueType::ARRAY, GgufValueType::STRING, std::move(b));
  }
  if (v.elem_type == GgufValueType::ARRAY) {
    std::vector<GgufMetaValue> items;
    items.reserve(v.items.size());
    for (const auto& item : v.items) items.push_back(from(item));
    return array_of(GgufValueType::ARRAY, items);
  }
  // Array of scalars: the raw little-endian elements are already the encoding.
  std::vector<std::byte> b;
  append_array_header(b, v.elem_type, v.count);
  b.insert(b.end(), v.raw.begin(), v.raw.end());
  return GgufMetaValue(GgufValueType::ARRAY, v.elem_type, std::move(b));
}

// ---- GgufWriter ---------------------------------------------------------------------------------

// Where emit() sends bytes: a FILE* (write) or a vector (to_bytes).
class GgufWriter::Sink {
 public:
  Sink(std::FILE* f, std::string name) : file_(f), name_(std::move(name)) {}
  explicit Sink(std::vector<std::byte>* mem) : mem_(mem) {}
  void put(const void* p, size_t n) {
    if (n == 0) return;
    if (mem_) {
      const auto* b = static_cast<const std::byte*>(p);
      mem_->insert(mem_->end(), b, b + n);
    } else if (std::fwrite(p, 1, n, file_) != n) {
      throw std::runtime_error(
          fmt::format("{}: write failed at offset {}: {}", name_, pos_, std::strerror(errno)));
    }
    pos_ += n;
  }
  template <class T>
  void pod(T v) {
    put(&v, sizeof v);
  }
  void zeros(uint64_t n) {
    static constexpr std::byte kZero[64] = {};
    while (n > 0) {
      const uint64_t k = std::min<uint64_t>(n, sizeof kZero);
      put(kZero, k);
      n -= k;
    }
  }
  uint64_t pos() const noexcept { return pos_; }

 private:
  std::FILE* file_ = nullptr;
  std::vector<std::byte>* mem_ = nullptr;
  std::string name_;
  uint64_t pos_ = 0;
};

GgufWriter::GgufWriter(uint32_t version) : version_(version) {}

void GgufWriter::set(std::string_view key, GgufMetaValue value) {
  if (key == "general.alignment") {
    if (value.type() != GgufValueType::U32) {
      throw std::invalid_argument("general.alignment must be a u32 (llama.cpp reads it as u32)");
    }
    uint32_t a = 0;
    std::memcpy(&a, value.encoded().data(), sizeof a);
    if (!is_power_of_two(a)) {
      throw std::invalid_argument(
          fmt::format("general.alignment {} is not a nonzero power of two", a));
    }
    alignment_ = a;
  }
  for (auto& kv : kvs_) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  kvs_.push_back(Kv{std::string(key), std::move(value)});
}

void GgufWriter::copy_metadata(const GgufFile& from) {
  for (const auto& kv : from.metadata()) set(kv.key, GgufMetaValue::from(kv.value));
}

bool GgufWriter::has(std::string_view key) const noexcept {
  return std::any_of(kvs_.begin(), kvs_.end(), [&](const Kv& kv) { return kv.key == key; });
}

void GgufWriter::remove(std::string_view key) {
  std::erase_if(kvs_, [&](const Kv& kv) { return kv.key == key; });
  if (key == "general.alignment") alignment_ = kDefaultAlignment;
}

void GgufWriter::set_alignment(uint32_t alignment) {
  set("general.alignment", GgufMetaValue::u32(alignment));
}

GgufWriter::Tensor& GgufWriter::add_tensor_common(std::string_view name, ops::WeightType type,
                                                  std::vector<int64_t> ne) {
  if (name.empty() || name.size() > kMaxTensorName) {
    throw std::invalid_argument(
        fmt::format("tensor name '{}' must be 1 to {} bytes", name, kMaxTensorName));
  }
  for (const auto& t : tensors_) {
    if (t.name == name) throw std::invalid_argument(fmt::format("duplicate tensor '{}'", name));
  }
  if (ne.empty() || ne.size() > 4) {
    throw std::invalid_argument(fmt::format("tensor '{}': {} dims (1 to 4)", name, ne.size()));
  }
  const ops::TypeInfo& ti = ops::type_info(type);
  int64_t elements = 1;
  for (int64_t d : ne) {
    if (d <= 0 || __builtin_mul_overflow(elements, d, &elements)) {
      throw std::invalid_argument(fmt::format("tensor '{}': bad dimension {}", name, d));
    }
  }
  if (ne[0] % ti.block_elems != 0) {
    throw std::invalid_argument(
        fmt::format("tensor '{}': ne[0]={} is not a multiple of {}'s block {}", name, ne[0],
                    ti.name, ti.block_elems));
  }
  Tensor t;
  t.name = std::string(name);
  t.type = type;
  t.rows = elements / ne[0];
  if (__builtin_mul_overflow(static_cast<uint64_t>(ne[0] / ti.block_elems),
                             static_cast<uint64_t>(ti.block_bytes), &t.row_bytes) ||
      __builtin_mul_overflow(t.row_bytes, static_cast<uint64_t>(t.rows), &t.bytes)) {
    throw std::invalid_argument(fmt::format("tensor '{}': byte size overflows 64 bits", name));
  }
  t.ne = std::move(ne);
  tensors_.push_back(std::move(t));
  return tensors_.back();
}

void GgufWriter::add_tensor(std::string_view name, ops::WeightType type, std::vector<int64_t> ne,
                            std::vector<std::byte> data) {
  Tensor& t = add_tensor_common(name, type, std::move(ne));
  if (data.size() != t.bytes) {
    const uint64_t want = t.bytes;
    tensors_.pop_back();
    throw std::invalid_argument(
        fmt::format("tensor '{}': {} bytes given, shape needs {}", name, data.size(), want));
  }
  t.owned = std::move(data);
}

void GgufWriter::add_tensor_view(std::string_view name, ops::WeightType type,
                                 std::vector<int64_t> ne, std::span<const std::byte> data) {
  Tensor& t = add_tensor_common(name, type, std::move(ne));
  if (data.size() != t.bytes) {
    const uint64_t want = t.bytes;
    tensors_.pop_back();
    throw std::invalid_argument(
        fmt::format("tensor '{}': {} bytes given, shape needs {}", name, data.size(), want));
  }
  t.view = data;
}

void GgufWriter::add_tensor(std::string_view name, ops::WeightType type, std::vector<int64_t> ne,
                            RowFill fill) {
  if (!fill) throw std::invalid_argument(fmt::format("tensor '{}': empty fill function", name));
  Tensor& t = add_tensor_common(name, type, std::move(ne));
  t.fill = std::move(fill);
}

std::vector<GgufWriter::TensorInfo> GgufWriter::tensor_infos() const {
  std::vector<TensorInfo> out;
  out.reserve(tensors_.size());
  for (const auto& t : tensors_) out.push_back(TensorInfo{t.name, t.type, t.ne, t.bytes});
  return out;
}

uint64_t GgufWriter::file_size() const {
  uint64_t n = 4 + 4 + 8 + 8;
  for (const auto& kv : kvs_) n += 8 + kv.key.size() + 4 + kv.value.encoded().size();
  for (const auto& t : tensors_) n += 8 + t.name.size() + 4 + 8 * t.ne.size() + 4 + 8;
  n = pad_to(n, alignment_);
  for (const auto& t : tensors_) n += pad_to(t.bytes, alignment_);
  return n;
}

void GgufWriter::emit(Sink& out) const {
  out.put("GGUF", 4);
  out.pod<uint32_t>(version_);
  out.pod<uint64_t>(tensors_.size());
  out.pod<uint64_t>(kvs_.size());
  for (const auto& kv : kvs_) {
    out.pod<uint64_t>(kv.key.size());
    out.put(kv.key.data(), kv.key.size());
    out.pod<uint32_t>(static_cast<uint32_t>(kv.value.type()));
    const auto body = kv.value.encoded();
    out.put(body.data(), body.size());
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    out.pod<uint64_t>(t.name.size());
    out.put(t.name.data(), t.name.size());
    out.pod<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) out.pod<int64_t>(d);
    out.pod<uint32_t>(static_cast<uint32_t>(t.type));
    out.pod<uint64_t>(offset);
    offset += pad_to(t.bytes, alignment_);
  }
  out.zeros(pad_to(out.pos(), alignment_) - out.pos());

  // Streamed tensors are produced in chunks of whole rows of about this many bytes.
  constexpr uint64_t kChunkBytes = uint64_t{8} << 20;
  std::vector<std::byte> chunk;
  for (const auto& t : tensors_) {
    if (t.fill) {
      const int64_t rows_per_chunk =
          std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / t.row_bytes));
      for (int64_t r0 = 0; r0 < t.rows; r0 += rows_per_chunk) {
        const int64_t r1 = std::min(t.rows, r0 + rows_per_chunk);
        chunk.assign(static_cast<size_t>(r1 - r0) * t.row_bytes, std::byte{0});
        t.fill(r0, r1, chunk);
        out.put(chunk.data(), chunk.size());
      }
    } else if (!t.owned.empty()) {
      out.put(t.owned.data(), t.owned.size());
    } else {
      out.put(t.view.data(), t.view.size());
    }
    out.zeros(pad_to(t.bytes, alignment_) - t.bytes);
  }
}

void GgufWriter::write(const std::filesystem::path& path) const {
  // A temporary beside the target, renamed over it once complete, so a failure leaves nothing
  // half-written. Only a regular file (or nothing) is replaced that way: a device, FIFO or socket
  // (/dev/null, /dev/full, a pipe) is written in place, never replaced by a regular file.
  std::error_code st_ec;
  const auto st = std::filesystem::status(path, st_ec);
  if (std::filesystem::is_directory(st)) {
    throw std::runtime_error(fmt::format("{}: is a directory", path.string()));
  }
  const bool in_place = std::filesystem::exists(st) && !std::filesystem::is_regular_file(st);
  const std::filesystem::path tmp =
      in_place ? path : std::filesystem::path(path.string() + ".tmp." + std::to_string(::getpid()));
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    throw std::runtime_error(
        fmt::format("{}: cannot create: {}", tmp.string(), std::strerror(errno)));
  }
  try {
    Sink sink(f, path.string());
    emit(sink);
    if (std::fflush(f) != 0) {
      throw std::runtime_error(
          fmt::format("{}: write failed: {}", path.string(), std::strerror(errno)));
    }
    const int rc = std::fclose(f);
    f = nullptr;
    if (rc != 0) {
      throw std::runtime_error(
          fmt::format("{}: close failed: {}", path.string(), std::strerror(errno)));
    }
    if (!in_place) {
      std::error_code ec;
      std::filesystem::rename(tmp, path, ec);
      if (ec) {
        throw std::runtime_error(fmt::format("{}: cannot rename from {}: {}", path.string(),
                                             tmp.string(), ec.message()));
      }
    }
  } catch (...) {
    if (f) std::fclose(f);
    if (!in_place) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
    }
    throw;
  }
}

std::vector<std::byte> GgufWriter::to_bytes() const {
  std::vector<std::byte> mem;
  mem.reserve(file_size());
  Sink sink(&mem);
  emit(sink);
  return mem;
}

}  // namespace pacer::loader
