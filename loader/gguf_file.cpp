#include "loader/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

namespace pacer::loader {

static_assert(std::endian::native == std::endian::little, "GGUF is read little endian");

std::string_view value_type_name(GgufValueType t) noexcept {
  switch (t) {
    case GgufValueType::U8:
      return "u8";
    case GgufValueType::I8:
      return "i8";
    case GgufValueType::U16:
      return "u16";
    case GgufValueType::I16:
      return "i16";
    case GgufValueType::U32:
      return "u32";
    case GgufValueType::I32:
      return "i32";
    case GgufValueType::F32:
      return "f32";
    case GgufValueType::BOOL:
      return "bool";
    case GgufValueType::STRING:
      return "string";
    case GgufValueType::ARRAY:
      return "array";
    case GgufValueType::U64:
      return "u64";
    case GgufValueType::I64:
      return "i64";
    case GgufValueType::F64:
      return "f64";
  }
  return "?";
}

namespace {

// Bytes of one element of a scalar type; 0 for STRING and ARRAY (variable size).
uint64_t scalar_size(GgufValueType t) noexcept {
  switch (t) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::BOOL:
      return 1;
    case GgufValueType::U16:
    case GgufValueType::I16:
      return 2;
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::F32:
      return 4;
    case GgufValueType::U64:
    case GgufValueType::I64:
    case GgufValueType::F64:
      return 8;
    case GgufValueType::STRING:
    case GgufValueType::ARRAY:
      return 0;
  }
  return 0;
}

bool valid_value_type(uint32_t t) noexcept {
  return t <= static_cast<uint32_t>(GgufValueType::F64);
}

template <class T>
T load(const std::byte* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Decodes scalar k of `type` at p into a GgufValue's number fields.
void decode_scalar(GgufValueType type, const std::byte* p, GgufValue& v) noexcept {
  switch (type) {
    case GgufValueType::U8:
      v.u = load<uint8_t>(p);
      break;
    case GgufValueType::I8:
      v.i = load<int8_t>(p);
      break;
    case GgufValueType::U16:
      v.u = load<uint16_t>(p);
      break;
    case GgufValueType::I16:
      v.i = load<int16_t>(p);
      break;
    case GgufValueType::U32:
      v.u = load<uint32_t>(p);
      break;
    case GgufValueType::I32:
      v.i = load<int32_t>(p);
      break;
    case GgufValueType::F32:
      v.f = load<float>(p);
      break;
    case GgufValueType::BOOL:
      v.u = load<uint8_t>(p);
      break;
    case GgufValueType::U64:
      v.u = load<uint64_t>(p);
      break;
    case GgufValueType::I64:
      v.i = load<int64_t>(p);
      break;
    case GgufValueType::F64:
      v.f = load<double>(p);
      break;
    case GgufValueType::STRING:
    case GgufValueType::ARRAY:
      break;
  }
}

bool is_unsigned(GgufValueType t) noexcept {
  return t == GgufValueType::U8 || t == GgufValueType::U16 || t == GgufValueType::U32 ||
         t == GgufValueType::U64 || t == GgufValueType::BOOL;
}
bool is_signed(GgufValueType t) noexcept {
  return t == GgufValueType::I8 || t == GgufValueType::I16 || t == GgufValueType::I32 ||
         t == GgufValueType::I64;
}
bool is_float(GgufValueType t) noexcept {
  return t == GgufValueType::F32 || t == GgufValueType::F64;
}

// Nested arrays deeper than this are refused: each level costs the file only 12 bytes, so an
// unbounded depth would let a small file exhaust the stack.
constexpr int kMaxArrayDepth = 8;

// ggml's names for its type ids (ggml.h, enum ggml_type), to say which unsupported type a file
// holds; empty for ids ggml never assigned or retired.
std::string_view ggml_type_name(uint32_t id) noexcept {
  static constexpr std::string_view kNames[] = {
      "f32",     "f16",    "q4_0",    "q4_1",  "",       "",      "q5_0",  "q5_1",
      "q8_0",    "q8_1",   "q2_K",    "q3_K",  "q4_K",   "q5_K",  "q6_K",  "q8_K",
      "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs",
      "i8",      "i16",    "i32",     "i64",   "f64",    "iq1_m", "bf16",  "",
      "",        "",       "tq1_0",   "tq2_0", "",       "",      "",      "mxfp4"};
  return id < std::size(kNames) ? kNames[id] : std::string_view();
}
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kDefaultAlignment = 32;

}  // namespace

// ---- GgufValue / GgufTensor ---------------------------------------------------------------------

bool GgufValue::is_integer() const noexcept {
  return is_unsigned(type) || is_signed(type);
}

std::optional<int64_t> GgufValue::as_int() const noexcept {
  if (is_unsigned(type)) {
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (is_signed(type)) return i;
  if (is_float(type)) {
    // Only an exactly integral float converts (e.g. a context length written as f32).
    if (!std::isfinite(f) || f != std::trunc(f) || std::fabs(f) > 9.0e18) return std::nullopt;
    return static_cast<int64_t>(f);
  }
  return std::nullopt;
}

std::optional<double> GgufValue::as_double() const noexcept {
  if (is_unsigned(type)) return static_cast<double>(u);
  if (is_signed(type)) return static_cast<double>(i);
  if (is_float(type)) return f;
  return std::nullopt;
}

std::optional<double> GgufValue::array_number(uint64_t k) const noexcept {
  if (type != GgufValueType::ARRAY || k >= count) return std::nullopt;
  const uint64_t size = scalar_size(elem_type);
  if (size == 0 || raw.size() < (k + 1) * size) return std::nullopt;
  GgufValue tmp;
  tmp.type = elem_type;
  decode_scalar(elem_type, raw.data() + k * size, tmp);
  return tmp.as_double();
}

std::string_view GgufValue::array_string(uint64_t k) const noexcept {
  if (type != GgufValueType::ARRAY || elem_type != GgufValueType::STRING || k >= items.size()) {
    return {};
  }
  return items[k].str;
}

int64_t GgufTensor::elements() const noexcept {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;  // cannot overflow: checked when the file was parsed
  return n;
}

ops::WeightMatrix GgufTensor::matrix() const noexcept {
  ops::WeightMatrix w;
  w.type = type;
  w.data = data.data();
  w.cols = ne.empty() ? 0 : ne[0];
  w.rows = w.cols == 0 ? 0 : elements() / w.cols;
  return w;
}

// ---- parsing ------------------------------------------------------------------------------------

namespace {
// The parsed file; GgufFile::Impl is this plus nothing (the parser works on the base so it needs
// no access to GgufFile's private members).
struct Image {
  std::filesystem::path path;
  std::string name;  // for error messages
  void* map = nullptr;
  size_t map_len = 0;
  std::span<const std::byte> bytes;
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;
  std::vector<GgufKv> kvs;
  std::vector<GgufTensor> tensors;
  std::unordered_map<std::string_view, size_t> kv_index;
  std::unordered_map<std::string_view, size_t> tensor_index;

  Image() = default;
  Image(const Image&) = delete;
  Image& operator=(const Image&) = delete;
  ~Image() {
    if (map) ::munmap(map, map_len);
  }

  // offset < 0: none applies.
  [[noreturn]] void fail(std::string field, int64_t offset, const std::string& what) const {
    throw LoadError(name, std::move(field), offset, what);
  }
};

// Bounds-checked reading over the image; every failure names the field and its offset.
class Cursor {
 public:
  explicit Cursor(const Image& f) : f_(f), size_(f.bytes.size()) {}
  uint64_t pos() const noexcept { return pos_; }
  uint64_t remaining() const noexcept { return size_ - pos_; }

  void need(uint64_t n, const std::string& field) const {
    if (n > remaining()) {
      f_.fail(field, pos_,
              fmt::format("needs {} bytes but only {} remain in the {}-byte file", n, remaining(),
                          size_));
    }
  }
  template <class T>
  T read(const std::string& field) {
    need(sizeof(T), field);
    T v = load<T>(f_.bytes.data() + pos_);
    pos_ += sizeof(T);
    return v;
  }
  std::span<const std::byte> take(uint64_t n, const std::string& field) {
    need(n, field);
    auto s = f_.bytes.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  // Reads a string when it fits; returns false (consuming nothing) when it does not.
  bool try_read_string(std::string_view& out) noexcept {
    if (remaining() < 8) return false;
    const auto len = load<uint64_t>(f_.bytes.data() + pos_);
    if (len > remaining() - 8) return false;
    out = {reinterpret_cast<const char*>(f_.bytes.data() + pos_ + 8), static_cast<size_t>(len)};
    pos_ += 8 + len;
    return true;
  }
  std::string_view read_string(const std::string& field) {
    const uint64_t at = pos_;
    const auto len = read<uint64_t>(field + " length");
    if (len > remaining()) {
      f_.fail(field, at,
              fmt::format("string length {} runs past the end of the file ({} bytes remain)", len,
                          remaining()));
    }
    auto s = take(len, field);
    return {reinterpret_cast<const char*>(s.data()), s.size()};
  }

 private:
  const Image& f_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

GgufValueType read_value_type(Cursor& c, const Image& f, const std::string& field) {
  const uint64_t at = c.pos();
  const auto t = c.read<uint32_t>(field);
  if (!valid_value_type(t)) f.fail(field, at, fmt::format("unknown GGUF value type {}", t));
  return static_cast<GgufValueType>(t);
}

GgufValue read_value(Cursor& c, const Image& f, GgufValueType type, const std::string& field,
                     int depth);

// Reads the body of an array (after its ARRAY tag): u32 elem_type | u64 count | elements.
GgufValue read_array(Cursor& c, const Image& f, const std::string& field, int depth) {
  if (depth >= kMaxArrayDepth) {
    f.fail(field, c.pos(), fmt::format("arrays nested deeper than {}", kMaxArrayDepth));
  }
  GgufValue v;
  v.type = GgufValueType::ARRAY;
  v.elem_type = read_value_type(c, f, field + " element type");
  const uint64_t count_at = c.pos();
  v.count = c.read<uint64_t>(field + " count");
  const uint64_t elem = scalar_size(v.elem_type);
  if (elem != 0) {
    uint64_t n = 0;
    if (__builtin_mul_overflow(v.count, elem, &n) || n > c.remaining()) {
      f.fail(field + " count", count_at,
             fmt::format("{} elements of {} do not fit in the {} bytes that remain", v.count,
                         value_type_name(v.elem_type), c.remaining()));
    }
    v.raw = c.take(n, field);
    return v;
  }
  // Strings take at least 8 bytes each and nested arrays 12: refuse a count the file cannot
  // hold before reserving anything.
  const uint64_t min_elem = v.elem_type == GgufValueType::STRING ? 8 : 12;
  if (v.count > c.remaining() / min_elem) {
    f.fail(field + " count", count_at,
           fmt::format("{} elements of {} cannot fit in the {} bytes that remain", v.count,
                       value_type_name(v.elem_type), c.remaining()));
  }
  const uint64_t raw_begin = c.pos();
  v.items.resize(v.count);
  if (v.elem_type == GgufValueType::STRING) {
    // The vocabulary lives here (up to 262144 strings): no per-element field name unless an
    // element is bad.
    for (uint64_t k = 0; k < v.count; ++k) {
      GgufValue& item = v.items[k];
      item.type = GgufValueType::STRING;
      if (!c.try_read_string(item.str)) {
        c.read_string(fmt::format("{}[{}]", field, k));  // throws with the element's name
      }
    }
  } else {
    for (uint64_t k = 0; k < v.count; ++k) {
      v.items[k] = read_value(c, f, v.elem_type, fmt::format("{}[{}]", field, k), depth + 1);
    }
  }
  v.raw = f.bytes.subspan(raw_begin, c.pos() - raw_begin);
  return v;
}

GgufValue read_value(Cursor& c, const Image& f, GgufValueType type, const std::string& field,
                     int depth) {
  if (type == GgufValueType::ARRAY) return read_array(c, f, field, depth);
  GgufValue v;
  v.type = type;
  if (type == GgufValueType::STRING) {
    v.str = c.read_string(field);
    return v;
  }
  auto p = c.take(scalar_size(type), field);
  decode_scalar(type, p.data(), v);
  if (type == GgufValueType::BOOL && v.u > 1) {
    f.fail(field, c.pos() - 1, fmt::format("bool value {} is neither 0 nor 1", v.u));
  }
  return v;
}

void parse_into(Image& f) {
  Cursor c(f);
  // Header.
  if (f.bytes.size() < 4) f.fail("header.magic", 0, "file too short for the GGUF magic");
  const auto magic = c.take(4, "header.magic");
  if (std::memcmp(magic.data(), "GGUF", 4) != 0) {
    f.fail("header.magic", 0, "not a GGUF file (magic is not 'GGUF')");
  }
  f.version = c.read<uint32_t>("header.version");
  if (f.version != 2 && f.version != 3) {
    f.fail("header.version", 4,
           fmt::format("unsupported GGUF version {} (pacer reads v2 and v3{})", f.version,
                       f.version > 0xffff ? "; a big-endian file?" : ""));
  }
  const auto n_tensors = c.read<uint64_t>("header.n_tensors");
  const auto n_kv = c.read<uint64_t>("header.n_kv");
  // Minimum record sizes: a kv is key length (8) + type (4) + a 1-byte value; a tensor info is
  // name length (8) + n_dims (4) + one ne (8) + type (4) + offset (8).
  if (n_kv > c.remaining() / 13) {
    f.fail("header.n_kv", 16,
           fmt::format("{} key/value pairs cannot fit in the {} bytes that remain", n_kv,
                       c.remaining()));
  }
  if (n_tensors > c.remaining() / 32) {
    f.fail("header.n_tensors", 8,
           fmt::format("{} tensor infos cannot fit in the {} bytes that remain", n_tensors,
                       c.remaining()));
  }

  // Key/value pairs.
  f.kvs.reserve(n_kv);
  f.kv_index.reserve(n_kv);
  for (uint64_t k = 0; k < n_kv; ++k) {
    GgufKv kv;
    kv.offset = c.pos();
    kv.key = c.read_string(fmt::format("kv[{}].key", k));
    const std::string field = fmt::format("kv[{}] '{}'", k, kv.key);
    if (!f.kv_index.emplace(kv.key, f.kvs.size()).second) {
      f.fail(field, kv.offset, "duplicate key");
    }
    const GgufValueType type = read_value_type(c, f, field + " value type");
    kv.value = read_value(c, f, type, field, 0);
    f.kvs.push_back(std::move(kv));
  }

  // general.alignment: an integer, a nonzero power of two.
  if (auto it = f.kv_index.find("general.alignment"); it != f.kv_index.end()) {
    const GgufKv& kv = f.kvs[it->second];
    const auto a = kv.value.as_int();
    if (!kv.value.is_integer() || !a || *a <= 0 || (*a & (*a - 1)) != 0) {
      if (!kv.value.is_integer()) {
        f.fail("general.alignment", kv.offset,
               fmt::format("has type {}, expected an integer", value_type_name(kv.value.type)));
      }
      f.fail("general.alignment", kv.offset,
             fmt::format("alignment {} is not a nonzero power of two",
                         is_signed(kv.value.type) ? std::to_string(kv.value.i)
                                                  : std::to_string(kv.value.u)));
    }
    f.alignment = static_cast<uint64_t>(*a);
  }

  // Tensor infos.
  f.tensors.reserve(n_tensors);
  f.tensor_index.reserve(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t;
    t.info_offset = c.pos();
    t.name = c.read_string(fmt::format("tensor[{}].name", k));
    const std::string field = fmt::format("tensor '{}'", t.name);
    if (!f.tensor_index.emplace(t.name, f.tensors.size()).second) {
      f.fail(field, t.info_offset, "duplicate tensor name");
    }
    const uint64_t dims_at = c.pos();
    const auto n_dims = c.read<uint32_t>(field + " n_dims");
    if (n_dims == 0 || n_dims > kMaxDims) {
      f.fail(field + " n_dims", dims_at,
             fmt::format("n_dims {} (must be 1 to {})", n_dims, kMaxDims));
    }
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne_at = c.pos();
      const auto ne = c.read<int64_t>(fmt::format("{} ne[{}]", field, d));
      if (ne <= 0)
        f.fail(fmt::format("{} ne[{}]", field, d), ne_at, fmt::format("dimension {} <= 0", ne));
      if (__builtin_mul_overflow(elements, ne, &elements)) {
        f.fail(fmt::format("{} ne[{}]", field, d), ne_at, "element count overflows 64 bits");
      }
      t.ne.push_back(ne);
    }
    const uint64_t type_at = c.pos();
    const auto type_id = c.read<uint32_t>(field + " type");
    const auto type = ops::weight_type_from_id(type_id);
    if (!type) {
      const std::string_view known = ggml_type_name(type_id);
      f.fail(field + " type", type_at,
             known.empty() ? fmt::format("unknown ggml type id {}", type_id)
                           : fmt::format("unsupported ggml type id {} ({}); pacer reads {}",
                                         type_id, known, ops::weight_type_names()));
    }
    t.type = *type;
    const ops::TypeInfo& ti = ops::type_info(t.type);
    if (t.ne[0] % ti.block_elems != 0) {
      f.fail(field + " ne[0]", t.info_offset,
             fmt::format("row length {} is not a multiple of {}'s block size {}", t.ne[0], ti.name,
                         ti.block_elems));
    }
    const int64_t rows = elements / t.ne[0];
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(t.ne[0] / ti.block_elems),
                               static_cast<uint64_t>(ti.block_bytes), &bytes) ||
        __builtin_mul_overflow(bytes, static_cast<uint64_t>(rows), &bytes)) {
      f.fail(field, t.info_offset, "byte size overflows 64 bits");
    }
    t.bytes = bytes;
    const uint64_t off_at = c.pos();
    t.offset = c.read<uint64_t>(field + " offset");
    t.file_offset = off_at;  // temporarily: where the offset field is (for errors below)
    f.tensors.push_back(std::move(t));
  }

  // Data section: starts at the next multiple of the alignment.
  uint64_t data_offset = 0;
  if (__builtin_add_overflow(c.pos(), f.alignment - 1, &data_offset)) {
    f.fail("general.alignment", c.pos(), "data section offset overflows");
  }
  data_offset -= data_offset % f.alignment;
  f.data_offset = data_offset;
  if (!f.tensors.empty() && data_offset > f.bytes.size()) {
    f.fail("data section", c.pos(),
           fmt::format("starts at {} (aligned to {}), past the end of the {}-byte file",
                       data_offset, f.alignment, f.bytes.size()));
  }
  std::vector<uint64_t> offset_field_at(f.tensors.size());
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    GgufTensor& t = f.tensors[i];
    const uint64_t off_at = offset_field_at[i] = t.file_offset;
    const std::string field = fmt::format("tensor '{}' offset", t.name);
    if (t.offset % f.alignment != 0) {
      f.fail(field, off_at,
             fmt::format("data offset {} is not a multiple of the alignment {}", t.offset,
                         f.alignment));
    }
    uint64_t begin = 0, end = 0;
    if (__builtin_add_overflow(data_offset, t.offset, &begin) ||
        __builtin_add_overflow(begin, t.bytes, &end) || end > f.bytes.size()) {
      f.fail(field, off_at,
             fmt::format("data [{} + {}, +{} bytes) lies outside the {}-byte file", data_offset,
                         t.offset, t.bytes, f.bytes.size()));
    }
    t.file_offset = begin;
    t.data = f.bytes.subspan(begin, t.bytes);
  }
  // Two tensors sharing bytes: ggml's reader takes each tensor's data to start where the
  // previous one's (padded) ends, and refuses other offsets; a file whose tensors overlap would
  // otherwise load with one weight read as another.
  std::vector<size_t> order(f.tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return f.tensors[a].offset < f.tensors[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const GgufTensor& prev = f.tensors[order[k - 1]];
    const GgufTensor& t = f.tensors[order[k]];
    if (prev.bytes == 0 || t.bytes == 0 || prev.offset + prev.bytes <= t.offset) continue;
    f.fail(fmt::format("tensor '{}' offset", t.name), offset_field_at[order[k]],
           fmt::format("data [{}, +{} bytes) overlaps tensor '{}' [{}, +{} bytes)", t.offset,
                       t.bytes, prev.name, prev.offset, prev.bytes));
  }
}

}  // namespace

struct GgufFile::Impl : Image {};

// ---- GgufFile -----------------------------------------------------------------------------------

GgufFile::GgufFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::open(const std::filesystem::path& path) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->name = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) impl->fail("", -1, fmt::format("cannot open: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    impl->fail("", -1, fmt::format("cannot stat: {}", std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    impl->fail("", -1, "not a regular file");
  }
  if (st.st_size == 0) {
    ::close(fd);
    impl->fail("header.magic", 0, "empty file");
  }
  impl->map_len = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, impl->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
  const int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    impl->fail("", -1, fmt::format("cannot mmap: {}", std::strerror(e)));
  }
  impl->map = p;
  impl->bytes = {static_cast<const std::byte*>(p), impl->map_len};
  parse_into(*impl);
  return GgufFile(std::move(impl));
}

namespace {

// The pages of a file mapping that `bytes` covers: whole pages inside it (`inner`) or every page
// it touches; nullopt when bytes is empty or not inside the mapping [map, map + map_len).
struct PageRange {
  uintptr_t first, last, page;
};
std::optional<PageRange> page_range(const void* map, size_t map_len,
                                    std::span<const std::byte> bytes, bool inner) {
  if (map == nullptr || bytes.empty()) return std::nullopt;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(bytes.data());
  const auto end = begin + bytes.size();
  const auto map_begin = reinterpret_cast<uintptr_t>(map);
  if (begin < map_begin || end > map_begin + map_len) return std::nullopt;
  if (inner) return PageRange{(begin + page - 1) / page * page, end / page * page, page};
  return PageRange{begin / page * page, (end + page - 1) / page * page, page};
}

}  // namespace

void GgufFile::drop_pages(std::span<const std::byte> bytes) const noexcept {
  const auto r = page_range(impl_->map, impl_->map_len, bytes, true);
  if (r && r->first < r->last) {
    ::madvise(reinterpret_cast<void*>(r->first), r->last - r->first, MADV_DONTNEED);
  }
}

void GgufFile::populate(std::span<const std::byte> bytes) const noexcept {
  const auto r = page_range(impl_->map, impl_->map_len, bytes, false);
  if (!r) return;
  if (::madvise(reinterpret_cast<void*>(r->first), r->last - r->first, MADV_POPULATE_READ) == 0) {
    return;
  }
  if (errno != EINVAL) return;  // EFAULT / EIO / ENOMEM: the pages fault in when read instead
  // Kernels before 5.14: touch one byte of each page (inside `bytes`, which is mapped).
  const auto begin = reinterpret_cast<uintptr_t>(bytes.data()), end = begin + bytes.size();
  unsigned char sum = 0;
  for (uintptr_t p = begin; p < end; p = (p / r->page + 1) * r->page) {
    sum ^= *reinterpret_cast<const volatile unsigned char*>(p);
  }
  static_cast<void>(sum);
}

void GgufFile::read_ahead(std::span<const std::byte> bytes) const noexcept {
  const auto r = page_range(impl_->map, impl_->map_len, bytes, false);
  if (!r) return;
  // One call reads at most the device's readahead window (read_ahead_kb: 128 KiB by default, 8
  // MiB on the dev VM) and ignores the rest, so the range goes in pieces no larger than that.
  constexpr uintptr_t kPiece = uintptr_t{128} << 10;
  for (uintptr_t p = r->first; p < r->last; p += kPiece) {
    ::madvise(reinterpret_cast<void*>(p), std::min(kPiece, r->last - p), MADV_WILLNEED);
  }
}

GgufFile GgufFile::parse(std::span<const std::byte> bytes, std::string name) {
  auto impl = std::make_unique<Impl>();
  impl->path = name;
  impl->name = std::move(name);
  impl->bytes = bytes;
  parse_into(*impl);
  return GgufFile(std::move(impl));
}

const std::filesystem::path& GgufFile::path() const noexcept {
  return impl_->path;
}
uint32_t GgufFile::version() const noexcept {
  return impl_->version;
}
uint64_t GgufFile::file_size() const noexcept {
  return impl_->bytes.size();
}
uint64_t GgufFile::alignment() const noexcept {
  return impl_->alignment;
}
uint64_t GgufFile::data_offset() const noexcept {
  return impl_->data_offset;
}
const std::vector<GgufKv>& GgufFile::metadata() const noexcept {
  return impl_->kvs;
}
const std::vector<GgufTensor>& GgufFile::tensors() const noexcept {
  return impl_->tensors;
}

const GgufValue* GgufFile::find(std::string_view key) const noexcept {
  auto it = impl_->kv_index.find(key);
  return it == impl_->kv_index.end() ? nullptr : &impl_->kvs[it->second].value;
}

namespace {
const GgufKv* find_kv(const Image& f, std::string_view key) {
  auto it = f.kv_index.find(key);
  return it == f.kv_index.end() ? nullptr : &f.kvs[it->second];
}
}  // namespace

std::string_view GgufFile::get_string(std::string_view key) const {
  const GgufKv* kv = find_kv(*impl_, key);
  if (!kv) impl_->fail(std::string(key), -1, "missing key");
  if (kv->value.type != GgufValueType::STRING) {
    impl_->fail(std::string(key), kv->offset,
                fmt::format("has type {}, expected string", value_type_name(kv->value.type)));
  }
  return kv->value.str;
}

int64_t GgufFile::get_int(std::string_view key) const {
  const GgufKv* kv = find_kv(*impl_, key);
  if (!kv) impl_->fail(std::string(key), -1, "missing key");
  const auto v = kv->value.as_int();
  if (!v) {
    impl_->fail(
        std::string(key), kv->offset,
        fmt::format("has type {}, not an integer in range", value_type_name(kv->value.type)));
  }
  return *v;
}

double GgufFile::get_float(std::string_view key) const {
  const GgufKv* kv = find_kv(*impl_, key);
  if (!kv) impl_->fail(std::string(key), -1, "missing key");
  const auto v = kv->value.as_double();
  if (!v) {
    impl_->fail(std::string(key), kv->offset,
                fmt::format("has type {}, expected a number", value_type_name(kv->value.type)));
  }
  return *v;
}

std::optional<int64_t> GgufFile::find_int(std::string_view key) const {
  if (!find(key)) return std::nullopt;
  return get_int(key);
}

std::optional<double> GgufFile::find_float(std::string_view key) const {
  if (!find(key)) return std::nullopt;
  return get_float(key);
}

std::optional<std::string_view> GgufFile::find_string(std::string_view key) const {
  if (!find(key)) return std::nullopt;
  return get_string(key);
}

const GgufTensor* GgufFile::tensor(std::string_view name) const noexcept {
  auto it = impl_->tensor_index.find(name);
  return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

const GgufTensor& GgufFile::require_tensor(std::string_view name) const {
  const GgufTensor* t = tensor(name);
  if (!t) {
    impl_->fail(fmt::format("tensor '{}'", name), -1, "missing tensor");
  }
  return *t;
}

}  // namespace pacer::loader
