// GgufWriter and GgufFile: exact bytes against a hand-built file, every value type, nested
// arrays, v2, alignment, streamed tensors, mmap views, and the reader's structural checks.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <unistd.h>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "loader/gguf_file.h"
#include "loader/gguf_writer.h"
#include "tests/loader/gguf_test_util.h"

namespace pacer::loader {
namespace {

using ops::WeightType;
using testing::RawGguf;

std::vector<std::byte> f32_bytes(std::vector<float> v) {
  std::vector<std::byte> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::filesystem::path temp_dir() {
  auto d =
      std::filesystem::temp_directory_path() / ("pacer_loader_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

TEST(GgufWriter, BytesMatchHandBuiltFile) {
  GgufWriter w;
  w.set_u32("a.count", 7);
  w.set_string("general.name", "xy");
  w.add_tensor("t", WeightType::F32, {4}, f32_bytes({1, 2, 3, 4}));
  w.add_tensor("u", WeightType::F32, {2, 3}, f32_bytes({1, 2, 3, 4, 5, 6}));

  RawGguf r;
  r.header(3, 2, 2);
  r.str("a.count").u32(4).u32(7);
  r.str("general.name").u32(8).str("xy");
  r.str("t").u32(1).i64(4).u32(0).u64(0);
  r.str("u").u32(2).i64(2).i64(3).u32(0).u64(32);  // 16 bytes of t, padded to 32
  r.pad_to(32);
  for (float x : {1.f, 2.f, 3.f, 4.f}) r.pod(x);
  r.pad_to(32);
  for (float x : {1.f, 2.f, 3.f, 4.f, 5.f, 6.f}) r.pod(x);
  r.pad_to(32);

  const auto bytes = w.to_bytes();
  EXPECT_EQ(bytes.size(), w.file_size());
  ASSERT_EQ(bytes.size(), r.size());
  EXPECT_TRUE(bytes == r.bytes);
}

TEST(GgufFile, EveryScalarTypeRoundTrips) {
  GgufWriter w;
  w.set_u8("k.u8", 250);
  w.set_i8("k.i8", -100);
  w.set_u16("k.u16", 65000);
  w.set_i16("k.i16", -32000);
  w.set_u32("k.u32", 4000000000u);
  w.set_i32("k.i32", -2000000000);
  w.set_f32("k.f32", 1.5f);
  w.set_bool("k.bool", true);
  w.set_string("k.str", "héllo");
  w.set_u64("k.u64", 18000000000000000000ull);
  w.set_i64("k.i64", -9000000000000000000ll);
  w.set_f64("k.f64", -2.25);
  const auto bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse(bytes, "mem");
  ASSERT_EQ(f.metadata().size(), 12u);
  EXPECT_EQ(f.find("k.u8")->type, GgufValueType::U8);
  EXPECT_EQ(f.get_int("k.u8"), 250);
  EXPECT_EQ(f.get_int("k.i8"), -100);
  EXPECT_EQ(f.get_int("k.u16"), 65000);
  EXPECT_EQ(f.get_int("k.i16"), -32000);
  EXPECT_EQ(f.get_int("k.u32"), 4000000000ll);
  EXPECT_EQ(f.get_int("k.i32"), -2000000000);
  EXPECT_EQ(f.get_float("k.f32"), 1.5);
  EXPECT_EQ(f.find("k.bool")->u, 1u);
  EXPECT_EQ(f.get_string("k.str"), "héllo");
  EXPECT_EQ(f.find("k.u64")->u, 18000000000000000000ull);
  EXPECT_FALSE(f.find("k.u64")->as_int().has_value());  // does not fit int64
  EXPECT_EQ(f.get_int("k.i64"), -9000000000000000000ll);
  EXPECT_EQ(f.get_float("k.f64"), -2.25);
  EXPECT_EQ(f.metadata()[0].offset, 24u);  // first key right after the header
  EXPECT_EQ(f.version(), 3u);
}

TEST(GgufFile, ArraysOfScalarsStringsAndNestedArrays) {
  GgufWriter w;
  w.set_array<float>("a.f32", std::vector<float>{0.5f, -1.0f, 3.0f});
  w.set_array<int32_t>("a.i32", std::vector<int32_t>{-7, 8});
  w.set_array<uint64_t>("a.u64", std::vector<uint64_t>{});
  const std::vector<std::string> strs = {"one", "", "three"};
  w.set_string_array("a.str", strs);
  const bool bools[] = {true, false, true};
  w.set("a.bool", GgufMetaValue::bool_array(bools));
  const std::vector<GgufMetaValue> inner = {
      GgufMetaValue::array<int16_t>(std::vector<int16_t>{1, 2}),
      GgufMetaValue::array<int16_t>(std::vector<int16_t>{3}),
  };
  const std::vector<GgufMetaValue> outer = {GgufMetaValue::array_of(GgufValueType::ARRAY, inner),
                                            GgufMetaValue::array_of(GgufValueType::ARRAY, {})};
  w.set("a.nested", GgufMetaValue::array_of(GgufValueType::ARRAY, outer));
  const auto bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse(bytes, "mem");

  const GgufValue* a = f.find("a.f32");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->elem_type, GgufValueType::F32);
  ASSERT_EQ(a->count, 3u);
  EXPECT_EQ(a->array_number(1), -1.0);
  EXPECT_EQ(a->array_number(2), 3.0);
  EXPECT_FALSE(a->array_number(3).has_value());
  EXPECT_EQ(f.find("a.i32")->array_number(0), -7.0);
  EXPECT_EQ(f.find("a.u64")->count, 0u);
  const GgufValue* s = f.find("a.str");
  ASSERT_EQ(s->count, 3u);
  EXPECT_EQ(s->array_string(0), "one");
  EXPECT_EQ(s->array_string(1), "");
  EXPECT_EQ(s->array_string(2), "three");
  EXPECT_EQ(f.find("a.bool")->array_number(1), 0.0);
  EXPECT_EQ(f.find("a.bool")->array_number(2), 1.0);
  const GgufValue* n = f.find("a.nested");
  ASSERT_EQ(n->elem_type, GgufValueType::ARRAY);
  ASSERT_EQ(n->items.size(), 2u);
  ASSERT_EQ(n->items[0].items.size(), 2u);
  EXPECT_EQ(n->items[0].items[1].elem_type, GgufValueType::I16);
  EXPECT_EQ(n->items[0].items[0].array_number(1), 2.0);
  EXPECT_EQ(n->items[0].items[1].array_number(0), 3.0);
  EXPECT_EQ(n->items[1].count, 0u);

  // Re-encoding what was read gives the same file (copy_metadata is lossless).
  GgufWriter copy;
  copy.copy_metadata(f);
  EXPECT_TRUE(copy.to_bytes() == bytes);
}

TEST(GgufWriter, RejectsMixedNestedArraysAndBadTensors) {
  const std::vector<GgufMetaValue> mixed = {GgufMetaValue::u8(1), GgufMetaValue::i8(1)};
  EXPECT_THROW(GgufMetaValue::array_of(GgufValueType::U8, mixed), std::invalid_argument);
  GgufWriter w;
  EXPECT_THROW(w.set_alignment(48), std::invalid_argument);
  EXPECT_THROW(w.set_alignment(0), std::invalid_argument);
  EXPECT_THROW(w.set_u64("general.alignment", 64), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("q", WeightType::Q8_0, {16, 2}, std::vector<std::byte>(34)),
               std::invalid_argument);  // 16 is not a multiple of 32
  EXPECT_THROW(w.add_tensor("z", WeightType::F32, {0}, std::vector<std::byte>{}),
               std::invalid_argument);
  EXPECT_THROW(w.add_tensor("f", WeightType::F32, {3}, std::vector<std::byte>(8)),
               std::invalid_argument);  // 12 bytes needed
  EXPECT_EQ(w.n_tensors(), 0u);
  w.add_tensor("f", WeightType::F32, {2}, std::vector<std::byte>(8));
  EXPECT_THROW(w.add_tensor("f", WeightType::F32, {2}, std::vector<std::byte>(8)),
               std::invalid_argument);
  EXPECT_THROW(w.add_tensor(std::string(64, 'n'), WeightType::F32, {2}, std::vector<std::byte>(8)),
               std::invalid_argument);
}

TEST(GgufFile, Version2AndCustomAlignment) {
  GgufWriter w(2);
  w.set_alignment(64);
  w.set_u32("x", 1);
  w.add_tensor("a", WeightType::F32, {3}, f32_bytes({1, 2, 3}));
  w.add_tensor("b", WeightType::F16, {32, 2}, std::vector<std::byte>(128, std::byte{0x3c}));
  const auto bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse(bytes, "v2");
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  const GgufTensor& b = f.require_tensor("b");
  EXPECT_EQ(b.offset, 64u);  // 12 bytes of a, padded to 64
  EXPECT_EQ(b.file_offset, f.data_offset() + 64);
  EXPECT_EQ(b.bytes, 128u);
  EXPECT_EQ(b.type, WeightType::F16);
  EXPECT_EQ(b.matrix().rows, 2);
  EXPECT_EQ(b.matrix().cols, 32);
  EXPECT_EQ(bytes.size() % 64, 0u);
}

TEST(GgufWriter, StreamedTensorIsFilledInRowChunks) {
  // 3 rows of 1M floats: more than one 8 MB chunk, so the callback runs several times.
  const int64_t cols = 1 << 20, rows = 3;
  int64_t next_row = 0, calls = 0;
  GgufWriter w;
  w.add_tensor("big", WeightType::F32, {cols, rows},
               [&](int64_t r0, int64_t r1, std::span<std::byte> dst) {
                 EXPECT_EQ(r0, next_row);  // in order, no gaps
                 ASSERT_EQ(dst.size(), static_cast<size_t>((r1 - r0) * cols * 4));
                 for (int64_t r = r0; r < r1; ++r) {
                   for (int64_t c = 0; c < cols; c += 4096) {
                     const float v = static_cast<float>(r * 10 + c);
                     std::memcpy(dst.data() + ((r - r0) * cols + c) * 4, &v, 4);
                   }
                 }
                 next_row = r1;
                 ++calls;
               });
  const auto dir = temp_dir();
  const auto path = dir / "streamed.gguf";
  w.write(path);
  EXPECT_EQ(next_row, rows);
  EXPECT_GE(calls, 2);
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.file_size(), std::filesystem::file_size(path));
  const GgufTensor& t = f.require_tensor("big");
  for (int64_t r = 0; r < rows; ++r) {
    float v;
    std::memcpy(&v, t.data.data() + (r * cols + 8192) * 4, 4);
    EXPECT_EQ(v, static_cast<float>(r * 10 + 8192));
  }
  // The data view points into the mapping, aligned like the file offset.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data.data()) % 32, 0u);
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }
  std::filesystem::remove_all(dir);
}

// Resident bytes of this process (file-backed mapped pages included), from /proc/self/statm.
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// A file with one 64 MiB F32 tensor "big" of 0, 1, 2, ... in a new temp dir.
std::filesystem::path write_big_file(std::vector<float>* values) {
  values->resize(16 << 20);
  std::iota(values->begin(), values->end(), 0.0f);
  GgufWriter w;
  w.add_tensor_view("big", WeightType::F32, {static_cast<int64_t>(values->size())},
                    std::as_bytes(std::span<const float>(values->data(), values->size())));
  const auto dir = temp_dir();
  w.write(dir / "big.gguf");
  return dir;
}

TEST(GgufFile, DropPagesLeavesTheResidentSetAndLosesNothing) {
  std::vector<float> values;
  const auto dir = write_big_file(&values);
  values = {};
  const GgufFile f = GgufFile::open(dir / "big.gguf");
  const std::span<const std::byte> data = f.require_tensor("big").data;
  auto checksum = [&] {
    double sum = 0;
    for (size_t i = 0; i < data.size(); i += 4096)
      sum += std::to_integer<int>(data[i]) * static_cast<double>(i);
    return sum;
  };
  const double before = checksum();  // every page of the tensor now mapped in
  const int64_t resident_mapped = resident_bytes();
  f.drop_pages(data);
  const int64_t resident_dropped = resident_bytes();
  // All but the two partial pages at the ends leave (other allocations are noise of KiB).
  EXPECT_GT(resident_mapped - resident_dropped, static_cast<int64_t>(data.size()) * 9 / 10)
      << "resident " << resident_mapped << " -> " << resident_dropped;
  EXPECT_EQ(checksum(), before);  // read back from the file: nothing lost
  f.drop_pages({});               // empty and foreign ranges are ignored
  const std::vector<std::byte> elsewhere(64);
  f.drop_pages(elsewhere);
  std::filesystem::remove_all(dir);
}

TEST(GgufFile, PopulateMapsTheTensorInWithoutReadingIt) {
  std::vector<float> values;
  const auto dir = write_big_file(&values);
  const auto n = static_cast<int64_t>(values.size());
  const GgufFile f = GgufFile::open(dir / "big.gguf");
  const std::span<const std::byte> data = f.require_tensor("big").data;
  const int64_t resident_opened = resident_bytes();
  f.populate(data);
  const int64_t resident_populated = resident_bytes();
  // Every page of the tensor is in the resident set without this process reading one.
  EXPECT_GT(resident_populated - resident_opened, static_cast<int64_t>(data.size()) * 9 / 10)
      << "resident " << resident_opened << " -> " << resident_populated;
  const auto* floats = reinterpret_cast<const float*>(data.data());
  for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(floats[i], values[static_cast<size_t>(i)]);
  f.populate({});  // empty and foreign ranges are ignored
  const std::vector<std::byte> elsewhere(64);
  f.populate(elsewhere);
  std::filesystem::remove_all(dir);
}

// Fraction of the pages of `bytes` (inside a file mapping) that are in the page cache.
double cached_fraction(std::span<const std::byte> bytes) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<uintptr_t>(bytes.data()) / page * page;
  const auto last =
      (reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size() + page - 1) / page * page;
  std::vector<unsigned char> vec((last - first) / page);
  if (::mincore(reinterpret_cast<void*>(first), last - first, vec.data()) != 0) return -1;
  int64_t in = 0;
  for (unsigned char v : vec) in += v & 1;
  return static_cast<double>(in) / static_cast<double>(vec.size());
}

TEST(GgufFile, ReadAheadFillsThePageCacheWithoutMappingIn) {
  std::vector<float> values;
  const auto dir = write_big_file(&values);
  const auto path = dir / "big.gguf";
  {  // Write the file back and evict it from the page cache.
    const int fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  const GgufFile f = GgufFile::open(path);
  const std::span<const std::byte> data = f.require_tensor("big").data;
  const double before = cached_fraction(data);
  ASSERT_GE(before, 0.0) << "mincore failed";
  if (before > 0.5) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "the page cache kept " << before * 100
                 << " % of the file after POSIX_FADV_DONTNEED (tmpfs?): nothing to read ahead";
  }
  const int64_t resident_opened = resident_bytes();
  f.read_ahead(data);
  // The read runs in the background: wait (bounded) until the pages are cached.
  double after = cached_fraction(data);
  for (int i = 0; i < 200 && after < 0.95; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    after = cached_fraction(data);
  }
  EXPECT_GE(after, 0.95) << "cached before " << before;
  // Cached, not mapped: the resident set did not take the 64 MiB.
  EXPECT_LT(resident_bytes() - resident_opened, static_cast<int64_t>(data.size()) / 10);
  const auto* floats = reinterpret_cast<const float*>(data.data());
  for (size_t i = 0; i < values.size(); i += 4099) ASSERT_EQ(floats[i], values[i]);
  f.read_ahead({});  // empty and foreign ranges are ignored
  const std::vector<std::byte> elsewhere(64);
  f.read_ahead(elsewhere);
  std::filesystem::remove_all(dir);
}

TEST(GgufWriter, WriteFailureNamesPathAndLeavesNothing) {
  GgufWriter w;
  w.set_u32("x", 1);
  EXPECT_THROW(
      {
        try {
          w.write("/nonexistent-dir-pacer/x.gguf");
        } catch (const std::runtime_error& e) {
          EXPECT_NE(std::string(e.what()).find("/nonexistent-dir-pacer/x.gguf"), std::string::npos);
          throw;
        }
      },
      std::runtime_error);
}

// A device node is written in place, never replaced by a regular file (as root, -o /dev/null
// must not destroy /dev/null). Uses a private copy of /dev/full (char 1:7) made with mknod.
TEST(GgufWriter, ADeviceNodeIsWrittenInPlaceNotReplaced) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pacer-dev-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path full = dir / "full", null = dir / "null";
  if (::mknod(full.c_str(), S_IFCHR | 0666, ::makedev(1, 7)) != 0 ||
      ::mknod(null.c_str(), S_IFCHR | 0666, ::makedev(1, 3)) != 0) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "mknod needs root (CAP_MKNOD): " << std::strerror(errno);
  }
  GgufWriter w;
  w.set_u32("x", 1);
  try {
    w.write(full);
    ADD_FAILURE() << "writing to a full device succeeded";
  } catch (const std::runtime_error& e) {
    // The reason, not just "write failed".
    EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::filesystem::is_character_file(full));
  EXPECT_NO_THROW(w.write(null));
  EXPECT_TRUE(std::filesystem::is_character_file(null));
  // Nothing else was left in the folder (no temporary).
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 2);
  std::filesystem::remove_all(dir);
}

TEST(GgufFile, OpenMissingFileIsLoadError) {
  try {
    GgufFile::open("/nonexistent-pacer.gguf");
    FAIL() << "no exception";
  } catch (const LoadError& e) {
    EXPECT_EQ(e.file(), "/nonexistent-pacer.gguf");
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos);
  }
}

// Structural defects, each built byte by byte; the error must name the field and its offset.
struct Defect {
  const char* name;
  std::vector<std::byte> bytes;
  const char* field;  // substring of LoadError::field()
  int64_t offset;
};

std::vector<Defect> defects() {
  std::vector<Defect> d;
  d.push_back({"truncated", RawGguf().header(3, 0, 0).bytes, "", 0});
  d.back().bytes.resize(10);
  d.back().field = "header.n_tensors";
  d.back().offset = 8;
  d.push_back(
      {"bad magic", RawGguf().u32(0x46554747 + 1).u32(3).u64(0).u64(0).bytes, "header.magic", 0});
  d.push_back({"version 1", RawGguf().header(1, 0, 0).bytes, "header.version", 4});
  d.push_back({"version 4", RawGguf().header(4, 0, 0).bytes, "header.version", 4});
  d.push_back({"huge kv count", RawGguf().header(3, 0, ~0ull >> 1).bytes, "header.n_kv", 16});
  d.push_back({"huge tensor count", RawGguf().header(3, ~0ull, 0).bytes, "header.n_tensors", 8});
  d.push_back(
      {"string past end", RawGguf().header(3, 0, 1).u64(1000).zeros(8).bytes, "kv[0].key", 24});
  d.push_back({"bad value type", RawGguf().header(3, 0, 1).str("k").u32(13).bytes,
               "kv[0] 'k' value type", 33});
  d.push_back({"duplicate key",
               RawGguf().header(3, 0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(2).bytes,
               "kv[1] 'k'", 41});
  d.push_back({"array count past end",
               RawGguf().header(3, 0, 1).str("k").u32(9).u32(6).u64(1ull << 62).bytes,
               "kv[0] 'k' count", 41});
  d.push_back({"string array count past end",
               RawGguf().header(3, 0, 1).str("k").u32(9).u32(8).u64(1000).u64(0).bytes,
               "kv[0] 'k' count", 41});
  d.push_back({"bool not 0/1", RawGguf().header(3, 0, 1).str("k").u32(7).pod<uint8_t>(2).bytes,
               "kv[0] 'k'", 37});
  {
    // Nesting deeper than the reader allows: 9 levels of array-of-array.
    RawGguf r;
    r.header(3, 0, 1).str("k").u32(9);
    for (int i = 0; i < 9; ++i) r.u32(9).u64(1);
    r.u32(4).u64(0);
    d.push_back({"deep nesting", r.bytes, "kv[0] 'k'", -2});
  }
  auto one_tensor = [](uint32_t n_dims, std::vector<int64_t> ne, uint32_t type, uint64_t offset,
                       size_t data_bytes, uint32_t alignment_kv = 0) {
    RawGguf r;
    r.header(3, 1, alignment_kv ? 1 : 0);
    if (alignment_kv) r.str("general.alignment").u32(4).u32(alignment_kv);
    r.str("w").u32(n_dims);
    for (int64_t x : ne) r.i64(x);
    r.u32(type).u64(offset);
    r.pad_to(32).zeros(data_bytes);
    return r.bytes;
  };
  // Tensor info of "w" starts at 24; n_dims at 33, ne[0] at 37.
  d.push_back({"n_dims 5", one_tensor(5, {1, 1, 1, 1, 1}, 0, 0, 32), "tensor 'w' n_dims", 33});
  d.push_back({"ne 0", one_tensor(1, {0}, 0, 0, 32), "tensor 'w' ne[0]", 37});
  d.push_back(
      {"ne overflow", one_tensor(2, {1ll << 40, 1ll << 40}, 0, 0, 32), "tensor 'w' ne[1]", 45});
  // type 4: ggml's removed Q4_2, which no file may use.
  d.push_back({"unknown type", one_tensor(1, {8}, 4, 0, 32), "tensor 'w' type", 45});
  d.push_back({"row not block multiple", one_tensor(1, {16}, 8, 0, 64), "tensor 'w' ne[0]", 24});
  d.push_back({"misaligned offset", one_tensor(1, {4}, 0, 4, 64), "tensor 'w' offset", 49});
  d.push_back({"offset past end", one_tensor(1, {4}, 0, 1024, 64), "tensor 'w' offset", 49});
  d.push_back({"extent past end", one_tensor(1, {64}, 0, 0, 64), "tensor 'w' offset", 49});
  d.push_back({"offset overflow", one_tensor(1, {4}, 0, ~0ull - 31, 64), "tensor 'w' offset", 49});
  d.push_back({"alignment 48", one_tensor(1, {4}, 0, 0, 64, 48), "general.alignment", 24});
  d.push_back({"alignment not a power of two", one_tensor(1, {4}, 0, 0, 64, 0x80000000u + 1),
               "general.alignment", 24});
  {
    RawGguf r;
    r.header(3, 2, 0);
    r.str("w").u32(1).i64(4).u32(0).u64(0);
    r.str("w").u32(1).i64(4).u32(0).u64(32);
    r.pad_to(32).zeros(64);
    d.push_back({"duplicate tensor", r.bytes, "tensor 'w'", 24 + 33});
  }
  return d;
}

TEST(GgufFile, StructuralDefectsAreLoadErrorsWithFieldAndOffset) {
  for (const Defect& d : defects()) {
    SCOPED_TRACE(d.name);
    try {
      GgufFile::parse(d.bytes, "bad.gguf");
      ADD_FAILURE() << "parsed without error";
    } catch (const LoadError& e) {
      EXPECT_EQ(e.file(), "bad.gguf");
      EXPECT_NE(e.field().find(d.field), std::string::npos) << e.what();
      if (d.offset != -2) {
        EXPECT_EQ(e.offset(), d.offset) << e.what();
      }
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos);
      EXPECT_EQ(what.rfind("bad.gguf", 0), 0u) << what;
    }
  }
}

TEST(GgufFile, AKnownTypePacerDoesNotReadIsNamedWithTheTypesItReads) {
  // ggml type 18 (iq3_xxs) in tensor "w", whose type field is at offset 45.
  RawGguf r;
  r.header(3, 1, 0).str("w").u32(1).i64(256).u32(18).u64(0);
  r.pad_to(32).zeros(128);
  try {
    GgufFile::parse(r.bytes, "iq3.gguf");
    FAIL() << "parsed without error";
  } catch (const LoadError& e) {
    EXPECT_EQ(e.field(), "tensor 'w' type");
    EXPECT_EQ(e.offset(), 45);
    const std::string what = e.what();
    EXPECT_NE(what.find("unsupported ggml type id 18 (iq3_xxs)"), std::string::npos) << what;
    for (const char* t : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl",
                          "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_xs"}) {
      EXPECT_NE(what.find(std::string(t) + (std::string_view(t) == "iq4_xs" ? "" : ",")),
                std::string::npos)
          << t << ": " << what;
    }
    EXPECT_EQ(what.find("q8_K"), std::string::npos) << what;  // activations only
  }
}

TEST(GgufFile, EveryTruncationOfAValidFileIsALoadError) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  const std::vector<std::string> toks = {"a", "bb", "ccc"};
  w.set_string_array("tokenizer.ggml.tokens", toks);
  w.add_tensor("t", WeightType::Q8_0, {32, 2}, std::vector<std::byte>(68, std::byte{1}));
  const auto bytes = w.to_bytes();
  ASSERT_NO_THROW(GgufFile::parse(bytes, "ok"));
  const GgufFile ok = GgufFile::parse(bytes, "ok");
  const size_t data_end = ok.require_tensor("t").file_offset + 68;
  for (size_t n = 0; n < data_end; ++n) {
    EXPECT_THROW(GgufFile::parse(std::span(bytes).first(n), "cut"), LoadError) << n;
  }
}

TEST(GgufFile, TypedGettersNameTheKey) {
  GgufWriter w;
  w.set_string("s", "text");
  w.set_f32("f", 2.5f);
  w.set_f32("fi", 3.0f);
  const auto bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse(bytes, "m.gguf");
  EXPECT_EQ(f.get_int("fi"), 3);
  EXPECT_EQ(f.find_int("absent"), std::nullopt);
  EXPECT_EQ(f.find_string("s"), "text");
  try {
    f.get_int("s");
    FAIL();
  } catch (const LoadError& e) {
    EXPECT_EQ(e.field(), "s");
    EXPECT_EQ(e.offset(), 24);
  }
  EXPECT_THROW(f.get_int("f"), LoadError);  // 2.5 is not an integer
  EXPECT_THROW(f.get_string("missing"), LoadError);
  EXPECT_THROW(f.require_tensor("nope"), LoadError);
}

}  // namespace
}  // namespace pacer::loader
