#include "services/trainer/service/sqlite_database.h"

#include <sqlite3.h>

#include "absl/strings/str_cat.h"

namespace specd::trainer {
namespace {

absl::Status SqliteError(sqlite3* db, const std::string& what) {
  return absl::InternalError(absl::StrCat("sqlite: ", what, ": ", sqlite3_errmsg(db)));
}

}  // namespace

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : db_(other.db_), statement_(other.statement_), bind_error_(std::move(other.bind_error_)) {
  other.statement_ = nullptr;
}

SqliteStatement::~SqliteStatement() { sqlite3_finalize(statement_); }

void SqliteStatement::Check(int result) {
  if (result != SQLITE_OK && bind_error_.ok()) bind_error_ = SqliteError(db_, "bind");
}

void SqliteStatement::Bind(int index, int64_t value) {
  Check(sqlite3_bind_int64(statement_, index, value));
}

void SqliteStatement::Bind(int index, double value) {
  Check(sqlite3_bind_double(statement_, index, value));
}

void SqliteStatement::Bind(int index, const std::string& text) {
  Check(sqlite3_bind_text(statement_, index, text.data(), static_cast<int>(text.size()),
                          SQLITE_TRANSIENT));
}

void SqliteStatement::Bind(int index, std::optional<int64_t> value) {
  if (value.has_value()) {
    Bind(index, *value);
  } else {
    Check(sqlite3_bind_null(statement_, index));
  }
}

void SqliteStatement::Bind(int index, std::optional<double> value) {
  if (value.has_value()) {
    Bind(index, *value);
  } else {
    Check(sqlite3_bind_null(statement_, index));
  }
}

absl::StatusOr<bool> SqliteStatement::Step() {
  if (!bind_error_.ok()) return bind_error_;
  const int result = sqlite3_step(statement_);
  if (result == SQLITE_ROW) return true;
  if (result == SQLITE_DONE) return false;
  return SqliteError(db_, sqlite3_sql(statement_));
}

absl::Status SqliteStatement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

bool SqliteStatement::IsNull(int column) const {
  return sqlite3_column_type(statement_, column) == SQLITE_NULL;
}

int64_t SqliteStatement::Int(int column) const { return sqlite3_column_int64(statement_, column); }

double SqliteStatement::Double(int column) const {
  return sqlite3_column_double(statement_, column);
}

std::string SqliteStatement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(statement_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(statement_, column)));
}

absl::StatusOr<std::unique_ptr<SqliteDatabase>> SqliteDatabase::Open(
    const std::filesystem::path& file) {
  sqlite3* db = nullptr;
  const int result =
      sqlite3_open_v2(file.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (result != SQLITE_OK) {
    const std::string message =
        db != nullptr ? sqlite3_errmsg(db) : std::string(sqlite3_errstr(result));
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("cannot open ", file.string(), ": ", message));
  }
  std::unique_ptr<SqliteDatabase> database(new SqliteDatabase(db));
  sqlite3_busy_timeout(db, 5000);
  // WAL: readers never wait on the writer; NORMAL sync is durable across a process crash.
  if (absl::Status status =
          database->Execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
      !status.ok()) {
    return absl::Status(status.code(), absl::StrCat(file.string(), ": ", status.message()));
  }
  return database;
}

SqliteDatabase::~SqliteDatabase() { sqlite3_close(db_); }

absl::Status SqliteDatabase::Execute(const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string message = error != nullptr ? error : "unknown error";
    sqlite3_free(error);
    return absl::InternalError(absl::StrCat("sqlite: ", sql, ": ", message));
  }
  return absl::OkStatus();
}

absl::StatusOr<SqliteStatement> SqliteDatabase::Prepare(const std::string& sql) {
  sqlite3_stmt* statement = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &statement, nullptr) !=
      SQLITE_OK) {
    return SqliteError(db_, sql);
  }
  return SqliteStatement(db_, statement);
}

absl::StatusOr<SqliteTransaction> SqliteTransaction::Begin(SqliteDatabase& db) {
  if (absl::Status status = db.Execute("BEGIN IMMEDIATE"); !status.ok()) return status;
  return SqliteTransaction(&db);
}

SqliteTransaction::~SqliteTransaction() {
  if (db_ != nullptr) db_->Execute("ROLLBACK").IgnoreError();
}

absl::Status SqliteTransaction::Commit() {
  absl::Status status = db_->Execute("COMMIT");
  if (status.ok()) db_ = nullptr;
  return status;
}

}  // namespace specd::trainer
