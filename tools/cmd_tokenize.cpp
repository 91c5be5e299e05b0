// `pacer tokenize`: token ids and pieces of a text under a GGUF file's vocabulary (a model or a
// vocab-only file; tensors are never read), like llama.cpp's llama-tokenize.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loader/gguf_file.h"
#include "loader/tokenizer.h"
#include "tools/commands.h"

namespace pacer::tools {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string file;
  std::string text;
  bool json = false;
  bool no_bos = false;
  bool parse_special = false;
  bool ids_only = false;
};

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw std::runtime_error("cannot read text file " + path + ": no such file");
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw std::runtime_error("cannot read text file " + path + ": not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read text file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A piece for a terminal: printable bytes as they are, the rest escaped (\n, \t, \xNN for control
// bytes and for bytes that do not form valid UTF-8).
std::string printable(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b == '\n') {
      out += "\\n";
    } else if (b == '\t') {
      out += "\\t";
    } else if (b == '\r') {
      out += "\\r";
    } else if (b == '\'' || b == '\\') {
      out += '\\';
      out += static_cast<char>(b);
    } else if (b < 0x20 || b == 0x7F) {
      out += fmt::format("\\x{:02x}", b);
    } else if (b < 0x80) {
      out += static_cast<char>(b);
    } else {
      // Copy a whole valid UTF-8 sequence, else escape the byte.
      const size_t len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
      bool valid = len > 0 && i + len <= s.size();
      for (size_t k = 1; valid && k < len; ++k) {
        valid = (static_cast<uint8_t>(s[i + k]) & 0xC0) == 0x80;
      }
      if (valid) {
        out.append(s.substr(i, len));
        i += len;
        continue;
      }
      out += fmt::format("\\x{:02x}", b);
    }
    ++i;
  }
  return out;
}

void run_tokenize(const TokenizeOptions& o) {
  if (!o.file.empty() && !o.text.empty()) {
    throw CLI::ValidationError("--file",
                               "give the text either as an argument or with -f, not both");
  }
  const std::string text = o.file.empty() ? o.text : read_file(o.file);
  const loader::GgufFile gguf = loader::GgufFile::open(o.model);
  const loader::Tokenizer tok = loader::Tokenizer::from_gguf(gguf);
  const std::vector<int32_t> ids = tok.encode(text, !o.no_bos, o.parse_special);

  if (o.json) {
    nlohmann::json j;
    j["model"] = o.model;
    j["tokenizer"] = tok.model();
    j["pre"] = tok.pre();
    j["n_vocab"] = tok.n_vocab();
    j["n_bytes"] = text.size();
    j["n_tokens"] = ids.size();
    j["ids"] = ids;
    nlohmann::json pieces = nlohmann::json::array();
    for (int32_t id : ids) {
      const std::string p = tok.piece(id);
      nlohmann::json bytes = nlohmann::json::array();
      for (char c : p) bytes.push_back(static_cast<uint8_t>(c));
      pieces.push_back({{"id", id}, {"piece", p}, {"bytes", bytes}});
    }
    j["tokens"] = std::move(pieces);
    // Pieces can be partial UTF-8 sequences: replaced there (the exact bytes are in "bytes").
    std::fputs(j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str(), stdout);
    std::fputc('\n', stdout);
    return;
  }
  if (o.ids_only) {
    std::string line = "[";
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? ", " : "") + std::to_string(ids[i]);
    std::puts((line + "]").c_str());
    return;
  }
  for (int32_t id : ids) {
    std::fputs(fmt::format("{:>7} -> '{}'\n", id, printable(tok.piece(id))).c_str(), stdout);
  }
  std::fputs(fmt::format("{} tokens, {} bytes ({} tokenizer, {} tokens in vocabulary)\n",
                         ids.size(), text.size(), tok.model(), tok.n_vocab())
                 .c_str(),
             stderr);
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto opts = std::make_shared<TokenizeOptions>();
  auto* cmd = app.add_subcommand("tokenize",
                                 "Token ids and pieces of a text under a GGUF file's vocabulary");
  cmd->add_option("-m,--model", opts->model, "GGUF model or vocab-only file")->required();
  cmd->add_option("-f,--file", opts->file, "read the text from this file");
  cmd->add_option("text", opts->text, "the text (when no -f)");
  cmd->add_flag("--json", opts->json, "print JSON: ids and, per token, its piece and bytes");
  cmd->add_flag("--ids", opts->ids_only, "print only the ids, as [a, b, c]");
  cmd->add_flag("--no-bos", opts->no_bos, "do not add BOS/EOS even where the vocabulary asks");
  cmd->add_flag("--parse-special", opts->parse_special,
                "turn special-token text such as <|im_start|> into that token");
  cmd->callback([opts] { run_tokenize(*opts); });
}

}  // namespace pacer::tools
