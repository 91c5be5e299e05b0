#pragma once
// The malformed-GGUF corpus committed in tests/data/malformed/: each file is a small valid GGUF
// (written by GgufWriter) with one field patched, so it fails at exactly one check. The generator
// here is deterministic; malformed_corpus_test.cpp checks the committed files equal its output
// (PACER_REGENERATE_MALFORMED=1 rewrites them), the CLI test runs `pacer gguf inspect` on each,
// and the fuzzer uses them as seeds.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "loader/gguf_file.h"
#include "loader/gguf_writer.h"

namespace pacer::loader::testing {

struct MalformedCase {
  std::string name;  // file stem
  std::vector<std::byte> bytes;
  std::string field;  // substring of the LoadError's field
  int64_t offset;     // expected LoadError offset
};

namespace detail {
template <class T>
void poke(std::vector<std::byte>& b, uint64_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}
// Byte offsets of the fields of one tensor info record.
struct InfoFields {
  uint64_t name, n_dims, ne0, type, offset;
};
inline InfoFields info_fields(const GgufTensor& t) {
  InfoFields f;
  f.name = t.info_offset + 8;
  f.n_dims = f.name + t.name.size();
  f.ne0 = f.n_dims + 4;
  f.type = f.ne0 + 8 * t.ne.size();
  f.offset = f.type + 4;
  return f;
}
}  // namespace detail

// The valid file every case starts from.
inline std::vector<std::byte> malformed_base() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_alignment(32);
  w.set_string("general.name", "malformed corpus base");
  const std::vector<std::string> tags = {"test"};
  w.set_string_array("general.tags", tags);
  const std::vector<std::string> toks = {"<unk>", "<s>", "</s>", "a"};
  w.set_string_array("tokenizer.ggml.tokens", toks);
  std::vector<std::byte> a(8 * 4, std::byte{0});
  w.add_tensor("tensor_a", ops::WeightType::F32, {8}, a);
  std::vector<std::byte> b(2 * 34, std::byte{0x11});
  w.add_tensor("tensor_b", ops::WeightType::Q8_0, {32, 2}, b);
  return w.to_bytes();
}

inline std::vector<MalformedCase> malformed_corpus() {
  using detail::poke;
  const std::vector<std::byte> base = malformed_base();
  const GgufFile f = GgufFile::parse(base, "base");
  const auto& kvs = f.metadata();
  const auto ta = detail::info_fields(f.tensors()[0]);
  const auto tb = detail::info_fields(f.tensors()[1]);
  const uint64_t align_value_at = kvs[1].offset + 8 + kvs[1].key.size() + 4;

  std::vector<MalformedCase> c;
  auto add = [&](std::string name, std::vector<std::byte> bytes, std::string field, int64_t off) {
    c.push_back({std::move(name), std::move(bytes), std::move(field), off});
  };
  auto patched = [&](auto fn) {
    std::vector<std::byte> b = base;
    fn(b);
    return b;
  };

  add("empty", {}, "header.magic", 0);
  add("truncated_header", std::vector<std::byte>(base.begin(), base.begin() + 12),
      "header.n_tensors", 8);
  add("bad_magic", patched([](auto& b) { b[3] = std::byte{'X'}; }), "header.magic", 0);
  add("unsupported_version", patched([](auto& b) { poke<uint32_t>(b, 4, 4); }), "header.version",
      4);
  add("version_1", patched([](auto& b) { poke<uint32_t>(b, 4, 1); }), "header.version", 4);
  add("huge_kv_count", patched([](auto& b) { poke<uint64_t>(b, 16, uint64_t{1} << 60); }),
      "header.n_kv", 16);
  add("huge_tensor_count", patched([](auto& b) { poke<uint64_t>(b, 8, uint64_t{1} << 62); }),
      "header.n_tensors", 8);
  add("string_length_past_end",
      patched([&](auto& b) { poke<uint64_t>(b, kvs[2].offset, uint64_t{1} << 40); }), "kv[2].key",
      static_cast<int64_t>(kvs[2].offset));
  add("array_count_past_end", patched([&](auto& b) {
        // tokenizer.ggml.tokens: key, u32 ARRAY, u32 STRING, then the count.
        poke<uint64_t>(b, kvs[4].offset + 8 + kvs[4].key.size() + 8, uint64_t{1} << 50);
      }),
      "tokenizer.ggml.tokens' count",
      static_cast<int64_t>(kvs[4].offset + 8 + kvs[4].key.size() + 8));
  add("unknown_value_type",
      patched([&](auto& b) { poke<uint32_t>(b, kvs[2].offset + 8 + kvs[2].key.size(), 13); }),
      "value type", static_cast<int64_t>(kvs[2].offset + 8 + kvs[2].key.size()));
  add("duplicate_key", patched([&](auto& b) {
        // "general.tags" renamed to the equally long "general.name" (the key before it).
        std::memcpy(b.data() + kvs[3].offset + 8, "general.name", 12);
      }),
      "kv[3] 'general.name'", static_cast<int64_t>(kvs[3].offset));
  add("bad_alignment", patched([&](auto& b) { poke<uint32_t>(b, align_value_at, 48); }),
      "general.alignment", static_cast<int64_t>(kvs[1].offset));
  add("zero_alignment", patched([&](auto& b) { poke<uint32_t>(b, align_value_at, 0); }),
      "general.alignment", static_cast<int64_t>(kvs[1].offset));
  add("n_dims_too_large", patched([&](auto& b) { poke<uint32_t>(b, ta.n_dims, 5); }),
      "tensor 'tensor_a' n_dims", static_cast<int64_t>(ta.n_dims));
  add("ne_zero", patched([&](auto& b) { poke<int64_t>(b, ta.ne0, 0); }), "tensor 'tensor_a' ne[0]",
      static_cast<int64_t>(ta.ne0));
  add("ne_overflow", patched([&](auto& b) {
        poke<int64_t>(b, tb.ne0, int64_t{1} << 40);
        poke<int64_t>(b, tb.ne0 + 8, int64_t{1} << 40);
      }),
      "tensor 'tensor_b' ne[1]", static_cast<int64_t>(tb.ne0 + 8));
  // 4 was ggml's Q4_2, removed from the format: never a valid type (3 is Q4_1 now).
  add("unknown_type_id", patched([&](auto& b) { poke<uint32_t>(b, tb.type, 4); }),
      "tensor 'tensor_b' type", static_cast<int64_t>(tb.type));
  add("row_not_block_multiple", patched([&](auto& b) { poke<int64_t>(b, tb.ne0, 16); }),
      "tensor 'tensor_b' ne[0]", static_cast<int64_t>(f.tensors()[1].info_offset));
  add("duplicate_tensor_names", patched([&](auto& b) { b[tb.name + 7] = std::byte{'a'}; }),
      "tensor 'tensor_a'", static_cast<int64_t>(f.tensors()[1].info_offset));
  add("misaligned_data_offset", patched([&](auto& b) { poke<uint64_t>(b, tb.offset, 36); }),
      "tensor 'tensor_b' offset", static_cast<int64_t>(tb.offset));
  // tensor_b's data at tensor_a's: every byte of a would be read as b's too.
  add("overlapping_tensor_data", patched([&](auto& b) { poke<uint64_t>(b, tb.offset, 0); }),
      "tensor 'tensor_b' offset", static_cast<int64_t>(tb.offset));
  add("tensor_offset_beyond_file",
      patched([&](auto& b) { poke<uint64_t>(b, tb.offset, uint64_t{1} << 20); }),
      "tensor 'tensor_b' offset", static_cast<int64_t>(tb.offset));
  add("tensor_offset_overflow",
      patched([&](auto& b) { poke<uint64_t>(b, tb.offset, ~uint64_t{0} - 31); }),
      "tensor 'tensor_b' offset", static_cast<int64_t>(tb.offset));
  add("tensor_data_truncated", std::vector<std::byte>(base.begin(), base.end() - 40),
      "tensor 'tensor_b' offset", static_cast<int64_t>(tb.offset));
  add("newline_in_tensor_name", patched([&](auto& b) {
        b[tb.name + 7] = std::byte{'\n'};
        poke<uint32_t>(b, tb.type, 99);
      }),
      "tensor 'tensor_\n' type", static_cast<int64_t>(tb.type));
  return c;
}

}  // namespace pacer::loader::testing
