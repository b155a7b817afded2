#pragma once
// A job's log, <output_dir>/job.log: its process's stdout and stderr as lines, appended across
// attempts, with the trainer's own lines ("[trainer] ...") between them. Progress output that
// overwrites itself with '\r' becomes one line per update, so every line is a complete record.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace specd::trainer {

class JobLogWriter {
 public:
  // Opens for appending, creating the file (and its directory) if missing.
  static absl::StatusOr<JobLogWriter> Open(const std::filesystem::path& path);
  JobLogWriter(JobLogWriter&& other) noexcept;
  JobLogWriter& operator=(JobLogWriter&&) = delete;
  ~JobLogWriter();

  // Appends the lines `data` completes (ended by '\n' or '\r'; empty ones dropped, trailing
  // blanks trimmed) and returns them; an unfinished line waits for the next call.
  std::vector<std::string> AppendOutput(std::string_view data);
  // Appends the unfinished line, if any, and returns it.
  std::vector<std::string> FlushOutput();
  // Appends a line of the trainer's, prefixed "[trainer] ".
  void AppendTrainerLine(std::string_view text);

  // The last non-empty line of the process's output; empty before one.
  const std::string& last_output_line() const { return last_output_line_; }

 private:
  explicit JobLogWriter(int fd) : fd_(fd) {}
  void Write(std::string_view line);

  int fd_;
  std::string partial_;
  std::string last_output_line_;
};

class JobLogReader {
 public:
  explicit JobLogReader(std::filesystem::path path) : path_(std::move(path)) {}

  // The complete lines appended since the previous call (at first, every line); none while the
  // file does not exist.
  std::vector<std::string> ReadNewLines();

 private:
  std::filesystem::path path_;
  uint64_t offset_ = 0;  // bytes of complete lines already returned
};

}  // namespace specd::trainer
