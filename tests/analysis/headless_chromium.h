#pragma once
// Shared by the HTML page tests: load a page in headless Chromium and read back the DOM after its
// scripts ran. Chromium is a test dependency (scripts/install-deps.sh --tests); tests skip the
// browser checks where it is not installed.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "history_test_util.h"

namespace pacer::analysis::chromium {

inline constexpr const char* kPath = "/usr/bin/chromium";

inline bool installed() {
  return std::filesystem::exists(kPath);
}

using TempDir = history_test::TempDir;

// Writes `html` to a file in `dir`, runs headless Chromium on it and returns the DOM after its
// scripts ran ("" when Chromium failed; the test fails then too).
inline std::string dump_dom(const std::string& html, const TempDir& dir) {
  const std::filesystem::path page = dir.path() / "page.html";
  const std::filesystem::path dom = dir.path() / "dom.html";
  std::ofstream(page, std::ios::binary) << html;
  const std::string cmd =
      std::string("timeout 120 ") + kPath +
      " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
      " --disable-background-networking --disable-component-update --disable-sync"
      " --user-data-dir=" +
      (dir.path() / "profile").string() + " --dump-dom file://" + page.string() + " > " +
      dom.string() + " 2>/dev/null";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  std::ifstream f(dom, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace pacer::analysis::chromium
