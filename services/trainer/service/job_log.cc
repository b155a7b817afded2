#include "services/trainer/service/job_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace specd::trainer {
namespace {

std::string_view TrimTrailingBlanks(std::string_view line) {
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  return line;
}

}  // namespace

absl::StatusOr<JobLogWriter> JobLogWriter::Open(const std::filesystem::path& path) {
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", path.parent_path().string(), ": ", error.message()));
  }
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot open ", path.string(), ": ", std::strerror(errno)));
  }
  return JobLogWriter(fd);
}

JobLogWriter::JobLogWriter(JobLogWriter&& other) noexcept
    : fd_(other.fd_),
      partial_(std::move(other.partial_)),
      last_output_line_(std::move(other.last_output_line_)) {
  other.fd_ = -1;
}

JobLogWriter::~JobLogWriter() {
  if (fd_ >= 0) close(fd_);
}

void JobLogWriter::Write(std::string_view line) {
  // One write per line: a reader never sees half of one, however the file is followed.
  std::string record(line);
  record.push_back('\n');
  size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = write(fd_, record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a full disk must not stop the job; its own outputs will say so
    done += static_cast<size_t>(n);
  }
}

std::vector<std::string> JobLogWriter::AppendOutput(std::string_view data) {
  std::vector<std::string> lines;
  for (const char c : data) {
    if (c != '\n' && c != '\r') {
      partial_.push_back(c);
      continue;
    }
    const std::string_view line = TrimTrailingBlanks(partial_);
    if (!line.empty()) {
      Write(line);
      last_output_line_ = std::string(line);
      lines.emplace_back(line);
    }
    partial_.clear();
  }
  return lines;
}

std::vector<std::string> JobLogWriter::FlushOutput() {
  if (partial_.empty()) return {};
  return AppendOutput("\n");
}

void JobLogWriter::AppendTrainerLine(std::string_view text) {
  Write("[trainer] " + std::string(text));
}

std::vector<std::string> JobLogReader::ReadNewLines() {
  std::ifstream in(path_, std::ios::binary);
  if (!in) return {};
  in.seekg(static_cast<std::streamoff>(offset_));
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // not terminated yet: read it whole next time
    offset_ += line.size() + 1;
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace specd::trainer
