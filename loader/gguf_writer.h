#pragma once
// GGUF writer: metadata of every GGUF value type, tensors given as bytes or as a row-filling
// callback that runs at write time (so a multi-GB synthetic model streams to disk in chunks and
// is never held in memory), written atomically (temporary file in the same directory + rename).
//
// The output is what llama.cpp's gguf reader accepts (ggml/src/gguf.cpp): header
// "GGUF" | u32 version | u64 n_tensors | u64 n_kv, the key/value pairs in insertion order, the
// tensor infos in insertion order, zero padding to general.alignment, then each tensor's bytes
// at consecutive offsets, each tensor padded with zeros to the alignment (llama.cpp requires
// offset[i] == offset[i-1] + pad(bytes[i-1])). general.alignment is always a u32 (llama.cpp reads
// it with gguf_get_val_u32). Nested arrays are valid GGUF but llama.cpp refuses them; the writer
// supports them for pacer's own reader and tests.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loader/gguf_file.h"
#include "ops/types.h"

namespace pacer::loader {

// One metadata value, held as its exact GGUF encoding (the bytes that follow the value-type tag),
// so arrays of millions of floats or strings cost one buffer and writing is a copy.
class GgufMetaValue {
 public:
  static GgufMetaValue u8(uint8_t v);
  static GgufMetaValue i8(int8_t v);
  static GgufMetaValue u16(uint16_t v);
  static GgufMetaValue i16(int16_t v);
  static GgufMetaValue u32(uint32_t v);
  static GgufMetaValue i32(int32_t v);
  static GgufMetaValue f32(float v);
  static GgufMetaValue boolean(bool v);
  static GgufMetaValue string(std::string_view v);
  static GgufMetaValue u64(uint64_t v);
  static GgufMetaValue i64(int64_t v);
  static GgufMetaValue f64(double v);

  // Arrays of scalars. T is one of uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float,
  // uint64_t, int64_t, double (the element type follows from T).
  template <class T>
  static GgufMetaValue array(std::span<const T> values);
  template <class T>
  static GgufMetaValue array(const std::vector<T>& values) {
    return array(std::span<const T>(values));
  }
  static GgufMetaValue bool_array(std::span<const bool> values);
  static GgufMetaValue string_array(std::span<const std::string> values);
  static GgufMetaValue string_array(std::span<const std::string_view> values);
  // Array whose elements are themselves values of one type (e.g. arrays: nested arrays). Throws
  // std::invalid_argument when the items' types differ. `elem_type` is used when items is empty.
  static GgufMetaValue array_of(GgufValueType elem_type, std::span<const GgufMetaValue> items);

  // A value read by GgufFile, re-encoded (for copying metadata between files).
  static GgufMetaValue from(const GgufValue& v);

  GgufValueType type() const noexcept { return type_; }
  GgufValueType elem_type() const noexcept { return elem_type_; }  // arrays only
  // The encoded body (for arrays: u32 elem_type | u64 count | elements).
  std::span<const std::byte> encoded() const noexcept { return body_; }

 private:
  GgufMetaValue(GgufValueType type, GgufValueType elem_type, std::vector<std::byte> body)
      : type_(type), elem_type_(elem_type), body_(std::move(body)) {}
  GgufValueType type_ = GgufValueType::U8;
  GgufValueType elem_type_ = GgufValueType::U8;
  std::vector<std::byte> body_;
};

class GgufWriter {
 public:
  // Called at write time for rows [row_begin, row_end) of a tensor (a row = ne[0] elements, rows =
  // product of ne[1..]); must fill dst (exactly (row_end - row_begin) * row_bytes bytes) with the
  // encoded rows. Rows are requested in order, in chunks of a few MB.
  using RowFill = std::function<void(int64_t row_begin, int64_t row_end, std::span<std::byte> dst)>;

  static constexpr uint32_t kDefaultAlignment = 32;
  static constexpr size_t kMaxTensorName = 63;  // llama.cpp: name.length() < GGML_MAX_NAME (64)

  explicit GgufWriter(uint32_t version = 3);

  // Metadata, written in insertion order; setting an existing key replaces its value in place.
  void set(std::string_view key, GgufMetaValue value);
  void set_u8(std::string_view key, uint8_t v) { set(key, GgufMetaValue::u8(v)); }
  void set_i8(std::string_view key, int8_t v) { set(key, GgufMetaValue::i8(v)); }
  void set_u16(std::string_view key, uint16_t v) { set(key, GgufMetaValue::u16(v)); }
  void set_i16(std::string_view key, int16_t v) { set(key, GgufMetaValue::i16(v)); }
  void set_u32(std::string_view key, uint32_t v) { set(key, GgufMetaValue::u32(v)); }
  void set_i32(std::string_view key, int32_t v) { set(key, GgufMetaValue::i32(v)); }
  void set_f32(std::string_view key, float v) { set(key, GgufMetaValue::f32(v)); }
  void set_bool(std::string_view key, bool v) { set(key, GgufMetaValue::boolean(v)); }
  void set_string(std::string_view key, std::string_view v) { set(key, GgufMetaValue::string(v)); }
  void set_u64(std::string_view key, uint64_t v) { set(key, GgufMetaValue::u64(v)); }
  void set_i64(std::string_view key, int64_t v) { set(key, GgufMetaValue::i64(v)); }
  void set_f64(std::string_view key, double v) { set(key, GgufMetaValue::f64(v)); }
  template <class T>
  void set_array(std::string_view key, std::span<const T> values) {
    set(key, GgufMetaValue::array(values));
  }
  template <class T>
  void set_array(std::string_view key, const std::vector<T>& values) {
    set(key, GgufMetaValue::array(std::span<const T>(values)));
  }
  void set_string_array(std::string_view key, std::span<const std::string> values) {
    set(key, GgufMetaValue::string_array(values));
  }
  void set_string_array(std::string_view key, std::span<const std::string_view> values) {
    set(key, GgufMetaValue::string_array(values));
  }
  // Copies every key/value of a parsed file (the tensors are not copied).
  void copy_metadata(const GgufFile& from);
  bool has(std::string_view key) const noexcept;
  void remove(std::string_view key);
  size_t n_kv() const noexcept { return kvs_.size(); }

  // general.alignment (u32). Must be a nonzero power of two (std::invalid_argument otherwise).
  // Setting the key through set() with a U32 value has the same effect; any other type for that
  // key is rejected, since llama.cpp reads it as u32.
  void set_alignment(uint32_t alignment);
  uint32_t alignment() const noexcept { return alignment_; }
  void set_version(uint32_t version) { version_ = version; }  // 2 or 3 (same layout)

  // Tensors, written in insertion order. `ne` is in GGUF order (ne[0] = contiguous row length),
  // 1 to 4 dims, every ne > 0, ne[0] a multiple of the type's block size; names are unique and at
  // most 63 bytes. Violations throw std::invalid_argument naming the tensor.
  // Owned bytes (size must equal the tensor's byte count):
  void add_tensor(std::string_view name, ops::WeightType type, std::vector<int64_t> ne,
                  std::vector<std::byte> data);
  // Borrowed bytes: `data` must stay valid until write() returns.
  void add_tensor_view(std::string_view name, ops::WeightType type, std::vector<int64_t> ne,
                       std::span<const std::byte> data);
  // Streamed: `fill` is called during write().
  void add_tensor(std::string_view name, ops::WeightType type, std::vector<int64_t> ne,
                  RowFill fill);
  size_t n_tensors() const noexcept { return tensors_.size(); }
  // The tensors added so far (no data), e.g. to count parameters without writing.
  struct TensorInfo {
    std::string name;
    ops::WeightType type;
    std::vector<int64_t> ne;
    uint64_t bytes;
  };
  std::vector<TensorInfo> tensor_infos() const;

  // Bytes of the whole file that write() would produce.
  uint64_t file_size() const;
  // Writes `path` atomically: <path>.tmp.<pid> in the same directory, then rename(). Throws
  // std::runtime_error naming the path on I/O errors (the temporary file is removed).
  void write(const std::filesystem::path& path) const;
  // The whole file in memory (tests, fuzzer seeds; not for large models).
  std::vector<std::byte> to_bytes() const;

 private:
  struct Kv {
    std::string key;
    GgufMetaValue value;
  };
  struct Tensor {
    std::string name;
    ops::WeightType type;
    std::vector<int64_t> ne;
    uint64_t bytes = 0;
    int64_t rows = 0;
    uint64_t row_bytes = 0;
    std::vector<std::byte> owned;
    std::span<const std::byte> view;
    RowFill fill;
  };
  class Sink;
  Tensor& add_tensor_common(std::string_view name, ops::WeightType type, std::vector<int64_t> ne);
  void emit(Sink& out) const;

  uint32_t version_ = 3;
  uint32_t alignment_ = kDefaultAlignment;
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace pacer::loader
