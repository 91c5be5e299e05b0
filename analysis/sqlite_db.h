#pragma once
// Internal to analysis/: a thin RAII layer over the SQLite C API for the results history
// (history_db.cpp). Every failure throws std::runtime_error naming the database file and carrying
// SQLite's own message, so the CLI prints one line that says which file and why.
#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pacer::analysis::sql {

class Statement;

class Database {
 public:
  // flags: SQLITE_OPEN_READONLY or SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE.
  Database(std::string path, int flags);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs one or more statements that return no rows we need.
  void exec(std::string_view sql);
  Statement prepare(std::string_view sql);
  int64_t last_insert_rowid() const noexcept;
  int changes() const noexcept;
  const std::string& path() const noexcept { return path_; }
  sqlite3* handle() const noexcept { return db_; }

  // "FILE: what: SQLite's message", as thrown.
  [[noreturn]] void fail(std::string_view what) const;

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

class Statement {
 public:
  Statement(Database& db, std::string_view sql);
  ~Statement();
  Statement(Statement&& o) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement& operator=(Statement&&) = delete;

  // Parameters are 1-based, as in SQLite. Text and blobs are copied (SQLITE_TRANSIENT).
  Statement& bind(int i, std::string_view text);
  Statement& bind(int i, const char* text) { return bind(i, std::string_view(text)); }
  Statement& bind(int i, int64_t v);
  Statement& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Statement& bind(int i, double v);  // NaN and infinities are stored as NULL
  Statement& bind(int i, std::optional<double> v);
  Statement& bind_blob(int i, std::string_view bytes);
  Statement& bind_null(int i);

  // Advances; true while there is a row to read.
  bool step();
  // Runs a statement that returns no rows (INSERT, UPDATE, DDL) and resets it for the next use.
  void run();
  void reset();

  bool is_null(int col) const;
  // Whether the value is text or a blob: what a number column holds when its text was not a
  // number (SQLite keeps it as written), which int64 and real would read as 0.
  bool holds_text(int col) const;
  std::string text(int col) const;  // "" for NULL
  int64_t int64(int col) const;     // 0 for NULL
  double real(int col) const;       // NaN for NULL
  std::optional<double> optional_real(int col) const;
  std::string blob(int col) const;

 private:
  Database* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE ... COMMIT; rolls back when destroyed uncommitted (an exception on the way).
// IMMEDIATE takes the write lock at once, so two writers wait on each other through the busy
// timeout instead of failing late with SQLITE_BUSY on an upgrade from a read lock.
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  Database& db_;
  bool done_ = false;
};

}  // namespace pacer::analysis::sql
