#pragma once
// A byte-level GGUF builder for tests, written independently of loader::GgufWriter: it appends
// fields exactly as the format describes them, so tests can compare the writer's output with it
// and craft malformed files field by field.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace pacer::loader::testing {

class RawGguf {
 public:
  template <class T>
  RawGguf& pod(T v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof v);
    return *this;
  }
  RawGguf& u32(uint32_t v) { return pod(v); }
  RawGguf& u64(uint64_t v) { return pod(v); }
  RawGguf& i64(int64_t v) { return pod(v); }
  RawGguf& str(std::string_view s) {
    u64(s.size());
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    bytes.insert(bytes.end(), p, p + s.size());
    return *this;
  }
  RawGguf& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    bytes.push_back(std::byte{'G'});
    bytes.push_back(std::byte{'G'});
    bytes.push_back(std::byte{'U'});
    bytes.push_back(std::byte{'F'});
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  RawGguf& pad_to(size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(std::byte{0});
    return *this;
  }
  RawGguf& zeros(size_t n) {
    bytes.insert(bytes.end(), n, std::byte{0});
    return *this;
  }
  size_t size() const { return bytes.size(); }

  std::vector<std::byte> bytes;
};

}  // namespace pacer::loader::testing
