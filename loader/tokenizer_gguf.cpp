// Tokenizer::from_gguf: the tokenizer.* keys of a GGUF file into a Vocab, with every type and
// length checked and errors pointing at the key's byte offset.
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "loader/error.h"
#include "loader/gguf_file.h"
#include "loader/tokenizer.h"
#include "loader/tokenizer_internal.h"

namespace pacer::loader {

namespace {

namespace keys = tokenizer_keys;

class VocabReader {
 public:
  explicit VocabReader(const GgufFile& f) : f_(f), name_(f.path().string()) {
    if (name_.empty()) name_ = "<gguf>";
  }

  const std::string& name() const { return name_; }

  int64_t offset_of(std::string_view key) const {
    for (const GgufKv& kv : f_.metadata()) {
      if (kv.key == key) return static_cast<int64_t>(kv.offset);
    }
    return -1;
  }

  [[noreturn]] void fail(std::string_view key, const std::string& what) const {
    throw LoadError(name_, std::string(key), offset_of(key), what);
  }

  // An array value with the given element kind, or nullptr when the key is absent.
  const GgufValue* array(std::string_view key, bool strings) const {
    const GgufValue* v = f_.find(key);
    if (!v) return nullptr;
    if (v->type != GgufValueType::ARRAY) {
      fail(key, "has type " + std::string(value_type_name(v->type)) + ", expected an array");
    }
    const bool is_string = v->elem_type == GgufValueType::STRING;
    const bool is_number = !is_string && v->elem_type != GgufValueType::ARRAY;
    if (strings ? !is_string : !is_number) {
      fail(key, "is an array of " + std::string(value_type_name(v->elem_type)) +
                    (strings ? ", expected strings" : ", expected numbers"));
    }
    return v;
  }

  std::vector<std::string> strings(std::string_view key) const {
    std::vector<std::string> out;
    const GgufValue* v = array(key, /*strings=*/true);
    if (!v) return out;
    out.reserve(v->count);
    for (uint64_t k = 0; k < v->count; ++k) out.emplace_back(v->array_string(k));
    return out;
  }

  template <class T>
  std::vector<T> numbers(std::string_view key) const {
    std::vector<T> out;
    const GgufValue* v = array(key, /*strings=*/false);
    if (!v) return out;
    out.resize(v->count);
    if constexpr (std::is_same_v<T, float>) {
      if (v->elem_type == GgufValueType::F32 && v->raw.size() == v->count * sizeof(float)) {
        std::memcpy(out.data(), v->raw.data(), v->raw.size());  // GGUF is little endian, as x86
        return out;
      }
    }
    for (uint64_t k = 0; k < v->count; ++k) {
      const std::optional<double> x = v->array_number(k);
      if (!x) fail(key, "element " + std::to_string(k) + " is not a number");
      if constexpr (std::is_integral_v<T>) {
        if (!(*x >= static_cast<double>(std::numeric_limits<T>::min()) &&
              *x <= static_cast<double>(std::numeric_limits<T>::max()))) {
          fail(key,
               "element " + std::to_string(k) + " (" + std::to_string(*x) + ") is out of range");
        }
      }
      out[k] = static_cast<T>(*x);
    }
    return out;
  }

  std::optional<bool> flag(std::string_view key) const {
    const GgufValue* v = f_.find(key);
    if (!v) return std::nullopt;
    if (v->type == GgufValueType::BOOL) return v->u != 0;
    if (const std::optional<int64_t> i = v->is_integer() ? v->as_int() : std::nullopt) {
      return *i != 0;
    }
    fail(key, "has type " + std::string(value_type_name(v->type)) + ", expected bool");
  }

  std::optional<int64_t> id(std::string_view key) const { return f_.find_int(key); }

  std::string string(std::string_view key) const {
    const std::optional<std::string_view> s = f_.find_string(key);
    return s ? std::string(*s) : std::string();
  }

 private:
  const GgufFile& f_;
  std::string name_;
};

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& file) {
  const VocabReader r(file);
  if (!file.find(keys::kModel)) {
    r.fail(keys::kModel, "missing: the file has no tokenizer (tokenizer.ggml.model)");
  }
  if (!file.find(keys::kTokens)) r.fail(keys::kTokens, "missing: the file has no vocabulary");
  Vocab v;
  v.model = r.string(keys::kModel);
  v.pre = r.string(keys::kPre);
  v.name = r.string("general.name");
  v.tokens = r.strings(keys::kTokens);
  v.scores = r.numbers<float>(keys::kScores);
  v.token_types = r.numbers<int32_t>(keys::kTokenType);
  v.merges = r.strings(keys::kMerges);
  v.bos_id = r.id(keys::kBos);
  v.eos_id = r.id(keys::kEos);
  v.unk_id = r.id(keys::kUnk);
  v.pad_id = r.id(keys::kPad);
  v.eot_id = r.id(keys::kEot);
  v.eom_id = r.id(keys::kEom);
  v.add_bos = r.flag(keys::kAddBos);
  v.add_eos = r.flag(keys::kAddEos);
  v.add_space_prefix = r.flag(keys::kAddSpacePrefix);
  return Tokenizer(
      build_tokenizer_tables(v, r.name(), [&r](std::string_view key) { return r.offset_of(key); }));
}

}  // namespace pacer::loader
