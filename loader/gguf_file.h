#pragma once
// GGUF v2/v3 reader: the file is mmapped read-only and everything (strings, arrays of numbers,
// tensor data) is a view into the mapping; nothing is copied. Every count, length, offset and
// extent is checked against the file size with overflow-safe arithmetic before use.
//
// File layout (little endian):
//   u32 magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv x { string key | u32 value_type | value }
//   n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset }
//   padding to general.alignment (default 32) | tensor data (offsets relative to here)
//   string = u64 len | bytes;  array = u32 elem_type | u64 count | elems
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loader/error.h"
#include "ops/types.h"
#include "ops/weight_matrix.h"

namespace pacer::loader {

enum class GgufValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
std::string_view value_type_name(GgufValueType t) noexcept;

// A metadata value. Scalars are held by value; strings and arrays view the mapping.
struct GgufValue {
  GgufValueType type = GgufValueType::U8;
  // scalars
  uint64_t u = 0;        // U8/U16/U32/U64/BOOL
  int64_t i = 0;         // I8/I16/I32/I64
  double f = 0;          // F32/F64
  std::string_view str;  // STRING
  // ARRAY: element type, count, and for arrays of scalars the raw little-endian elements; arrays
  // of strings or of arrays are decoded into `items` (nested to any depth).
  GgufValueType elem_type = GgufValueType::U8;
  uint64_t count = 0;
  std::span<const std::byte> raw;
  std::vector<GgufValue> items;

  bool is_integer() const noexcept;
  // Numeric value of a scalar (any integer, float or bool type).
  std::optional<int64_t> as_int() const noexcept;
  std::optional<double> as_double() const noexcept;
  // Element k of an array of scalars, as a number.
  std::optional<double> array_number(uint64_t k) const noexcept;
  std::string_view array_string(uint64_t k) const noexcept;  // arrays of strings
};

struct GgufKv {
  std::string_view key;
  GgufValue value;
  uint64_t offset = 0;  // byte offset of the key in the file (for error messages)
};

struct GgufTensor {
  std::string_view name;
  ops::WeightType type = ops::WeightType::F32;
  std::vector<int64_t> ne;   // GGUF order: ne[0] is the contiguous (row) dimension
  uint64_t offset = 0;       // relative to the data section, as stored
  uint64_t file_offset = 0;  // absolute
  uint64_t bytes = 0;
  std::span<const std::byte> data;  // view into the mapping
  uint64_t info_offset = 0;         // where this tensor's info record starts (errors)

  int64_t elements() const noexcept;
  // As a matrix: rows = product of ne[1..], cols = ne[0].
  ops::WeightMatrix matrix() const noexcept;
};

class GgufFile {
 public:
  // Maps and parses `path`; throws LoadError naming the file, field and offset on any defect.
  static GgufFile open(const std::filesystem::path& path);
  // Parses an in-memory image (fuzzer, tests). `name` is used in error messages; `bytes` must
  // outlive the object.
  static GgufFile parse(std::span<const std::byte> bytes, std::string name);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::filesystem::path& path() const noexcept;
  uint32_t version() const noexcept;
  uint64_t file_size() const noexcept;
  uint64_t alignment() const noexcept;
  uint64_t data_offset() const noexcept;

  const std::vector<GgufKv>& metadata() const noexcept;
  const GgufValue* find(std::string_view key) const noexcept;
  // Typed getters: throw LoadError (field = key) when missing or of a non-convertible type.
  std::string_view get_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  std::optional<int64_t> find_int(std::string_view key) const;
  std::optional<double> find_float(std::string_view key) const;
  std::optional<std::string_view> find_string(std::string_view key) const;

  const std::vector<GgufTensor>& tensors() const noexcept;
  const GgufTensor* tensor(std::string_view name) const noexcept;
  // Throws LoadError naming the tensor when absent.
  const GgufTensor& require_tensor(std::string_view name) const;

  // Hints that `bytes` (inside the mapping) will not be read again soon: the whole pages inside
  // it leave this process's resident set (MADV_DONTNEED; a later read maps them back from the
  // page cache or the file, the data is never lost: the mapping is read-only). For weights that
  // were copied at load (repacked), so the copy does not count twice. No-op for parsed buffers.
  void drop_pages(std::span<const std::byte> bytes) const noexcept;
  // Maps every page that `bytes` (inside the mapping) touches into this process now
  // (MADV_POPULATE_READ; where the kernel lacks it, one read per page), reading it from the file
  // where it is not in the page cache, so the first forward pass does not take a page fault per
  // 4 KiB of weights (as llama.cpp populates its mapping at load). Best effort: a page that
  // cannot be populated now faults in when read, as without the call. No-op for parsed buffers.
  void populate(std::span<const std::byte> bytes) const noexcept;
  // Queues reads of every page that `bytes` touches into the page cache (MADV_WILLNEED, 128 KiB
  // at a time; the kernel returns once they are queued, waiting only while its I/O queue is
  // full) without mapping them into this process: for data read a little at a time, whose pages
  // should cost a minor fault when first touched rather than a read from the disk (the embedding
  // table, one row per token). Best effort; no-op for parsed buffers.
  void read_ahead(std::span<const std::byte> bytes) const noexcept;

 private:
  struct Impl;
  explicit GgufFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pacer::loader
