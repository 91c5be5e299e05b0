#pragma once
// The JSON examples of docs/event-log.md, read from the doc itself at test time (the path comes
// from CMake: PACER_EVENT_LOG_DOC), so tests hold the doc to what the reader accepts and the doc
// cannot drift from the code.
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pacer::analysis::testing {

inline const char* event_log_doc_path() {
  return PACER_EVENT_LOG_DOC;
}

// Every ```json block of the doc, as one '\n'-terminated log line each (the doc wraps an object
// over several lines; JSON strings in it never span lines, so joining the lines is exact).
inline std::vector<std::string> event_log_doc_examples() {
  std::ifstream in(event_log_doc_path());
  if (!in) throw std::runtime_error(std::string(event_log_doc_path()) + ": cannot open");
  std::vector<std::string> blocks;
  std::string line, block;
  bool in_block = false;
  while (std::getline(in, line)) {
    if (!in_block && line.rfind("```json", 0) == 0) {
      in_block = true;
      block.clear();
    } else if (in_block && line.rfind("```", 0) == 0) {
      in_block = false;
      blocks.push_back(block + "\n");
    } else if (in_block) {
      block += line;
    }
  }
  if (in_block) throw std::runtime_error(std::string(event_log_doc_path()) + ": unclosed ```json");
  return blocks;
}

// The doc's example line whose "type" is `type` (exactly one must exist).
inline std::string event_log_doc_example(const std::string& type) {
  std::string found;
  for (const std::string& block : event_log_doc_examples()) {
    const nlohmann::json j = nlohmann::json::parse(block, nullptr, false);
    if (j.is_object() && j.value("type", "") == type) {
      if (!found.empty()) throw std::runtime_error("two doc examples of type " + type);
      found = block;
    }
  }
  if (found.empty()) {
    throw std::runtime_error(std::string(event_log_doc_path()) + ": no example of type " + type);
  }
  return found;
}

}  // namespace pacer::analysis::testing
