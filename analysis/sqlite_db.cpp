// RAII over the SQLite C API (sqlite_db.h).
#include "analysis/sqlite_db.h"

#include <cmath>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace pacer::analysis::sql {

Database::Database(std::string path, int flags) : path_(std::move(path)) {
  const int rc = sqlite3_open_v2(path_.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw std::runtime_error(fmt::format("{}: cannot open: {}", path_, msg));
  }
  sqlite3_extended_result_codes(db_, 1);
}

Database::~Database() {
  sqlite3_close_v2(db_);
}

void Database::fail(std::string_view what) const {
  throw std::runtime_error(fmt::format("{}: {}: {}", path_, what, sqlite3_errmsg(db_)));
}

void Database::exec(std::string_view sql) {
  char* err = nullptr;
  const std::string text(sql);
  if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    throw std::runtime_error(fmt::format("{}: {}", path_, msg));
  }
}

Statement Database::prepare(std::string_view sql) {
  return Statement(*this, sql);
}

int64_t Database::last_insert_rowid() const noexcept {
  return sqlite3_last_insert_rowid(db_);
}

int Database::changes() const noexcept {
  return sqlite3_changes(db_);
}

Statement::Statement(Database& db, std::string_view sql) : db_(&db) {
  if (sqlite3_prepare_v2(db.handle(), sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr) !=
      SQLITE_OK) {
    db.fail("preparing a statement");
  }
}

Statement::Statement(Statement&& o) noexcept : db_(o.db_), stmt_(std::exchange(o.stmt_, nullptr)) {}

Statement::~Statement() {
  sqlite3_finalize(stmt_);
}

Statement& Statement::bind(int i, std::string_view text) {
  if (sqlite3_bind_text64(stmt_, i, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8) !=
      SQLITE_OK)
    db_->fail("binding a value");
  return *this;
}

Statement& Statement::bind(int i, int64_t v) {
  if (sqlite3_bind_int64(stmt_, i, v) != SQLITE_OK) db_->fail("binding a value");
  return *this;
}

Statement& Statement::bind(int i, double v) {
  if (!std::isfinite(v)) return bind_null(i);
  if (sqlite3_bind_double(stmt_, i, v) != SQLITE_OK) db_->fail("binding a value");
  return *this;
}

Statement& Statement::bind(int i, std::optional<double> v) {
  return v ? bind(i, *v) : bind_null(i);
}

Statement& Statement::bind_blob(int i, std::string_view bytes) {
  if (sqlite3_bind_blob64(stmt_, i, bytes.data(), bytes.size(), SQLITE_TRANSIENT) != SQLITE_OK)
    db_->fail("binding a value");
  return *this;
}

Statement& Statement::bind_null(int i) {
  if (sqlite3_bind_null(stmt_, i) != SQLITE_OK) db_->fail("binding a value");
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_->fail("executing a statement");
}

void Statement::run() {
  while (step()) {
  }
  reset();
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::is_null(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}

bool Statement::holds_text(int col) const {
  const int type = sqlite3_column_type(stmt_, col);
  return type == SQLITE_TEXT || type == SQLITE_BLOB;
}

std::string Statement::text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  const int n = sqlite3_column_bytes(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

int64_t Statement::int64(int col) const {
  return sqlite3_column_int64(stmt_, col);
}

double Statement::real(int col) const {
  return is_null(col) ? std::nan("") : sqlite3_column_double(stmt_, col);
}

std::optional<double> Statement::optional_real(int col) const {
  if (is_null(col)) return std::nullopt;
  return sqlite3_column_double(stmt_, col);
}

std::string Statement::blob(int col) const {
  const void* p = sqlite3_column_blob(stmt_, col);
  const int n = sqlite3_column_bytes(stmt_, col);
  return p ? std::string(static_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

Transaction::Transaction(Database& db) : db_(db) {
  db_.exec("BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace pacer::analysis::sql
