#pragma once
// A thin RAII layer over the SQLite C API: one connection, prepared statements and transactions,
// with SQLite's own error messages returned as absl::Status.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct sqlite3;
struct sqlite3_stmt;

namespace specd::trainer {

class SqliteStatement {
 public:
  SqliteStatement(SqliteStatement&& other) noexcept;
  SqliteStatement& operator=(SqliteStatement&&) = delete;
  ~SqliteStatement();

  // Parameters are 1-based, as in SQL. A failed bind is reported by the next Step or Run.
  void Bind(int index, int64_t value);
  void Bind(int index, double value);
  void Bind(int index, const std::string& text);
  void Bind(int index, std::optional<int64_t> value);  // nullopt: NULL
  void Bind(int index, std::optional<double> value);

  // Advances to the next row: true with a row to read, false when the statement is done.
  absl::StatusOr<bool> Step();
  // Steps until done, for statements that return no rows.
  absl::Status Run();

  // Columns are 0-based, as in SQLite's C API.
  bool IsNull(int column) const;
  int64_t Int(int column) const;
  double Double(int column) const;
  std::string Text(int column) const;

 private:
  friend class SqliteDatabase;
  SqliteStatement(sqlite3* db, sqlite3_stmt* statement) : db_(db), statement_(statement) {}
  void Check(int result);

  sqlite3* db_;
  sqlite3_stmt* statement_;
  absl::Status bind_error_;
};

class SqliteDatabase {
 public:
  // Opens (creating if missing) a database file in WAL mode, waiting up to 5 s on a lock.
  static absl::StatusOr<std::unique_ptr<SqliteDatabase>> Open(const std::filesystem::path& file);
  ~SqliteDatabase();
  SqliteDatabase(const SqliteDatabase&) = delete;
  SqliteDatabase& operator=(const SqliteDatabase&) = delete;

  // Runs one or more statements that return no rows.
  absl::Status Execute(const std::string& sql);
  absl::StatusOr<SqliteStatement> Prepare(const std::string& sql);

 private:
  explicit SqliteDatabase(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless Commit() succeeded.
class SqliteTransaction {
 public:
  static absl::StatusOr<SqliteTransaction> Begin(SqliteDatabase& db);
  SqliteTransaction(SqliteTransaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  SqliteTransaction& operator=(SqliteTransaction&&) = delete;
  ~SqliteTransaction();
  absl::Status Commit();

 private:
  explicit SqliteTransaction(SqliteDatabase* db) : db_(db) {}
  SqliteDatabase* db_;
};

}  // namespace specd::trainer
