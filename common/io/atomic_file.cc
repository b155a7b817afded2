#include "common/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"

namespace specd::io {

absl::StatusOr<AtomicFile> AtomicFile::Create(const std::filesystem::path& path) {
  // The process id keeps concurrent writers of one path apart; O_EXCL refuses a stale leftover.
  std::filesystem::path temporary_path = path;
  temporary_path += absl::StrCat(".tmp.", getpid());
  const int fd = open(temporary_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", temporary_path.string()));
  }
  return AtomicFile(path, std::move(temporary_path), fd);
}

AtomicFile::AtomicFile(std::filesystem::path path, std::filesystem::path temporary_path, int fd)
    : path_(std::move(path)), temporary_path_(std::move(temporary_path)), fd_(fd) {}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)),
      temporary_path_(std::move(other.temporary_path_)),
      fd_(std::exchange(other.fd_, -1)) {}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;
  close(fd_);
  unlink(temporary_path_.c_str());
}

absl::Status AtomicFile::Append(std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t written = write(fd_, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", temporary_path_.string()));
    }
    bytes = bytes.subspan(static_cast<size_t>(written));
  }
  return absl::OkStatus();
}

absl::Status AtomicFile::Commit() {
  if (fsync(fd_) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot sync ", temporary_path_.string()));
  }
  const int fd = std::exchange(fd_, -1);
  if (close(fd) != 0) {
    const int error = errno;
    unlink(temporary_path_.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat("cannot close ", temporary_path_.string()));
  }
  if (rename(temporary_path_.c_str(), path_.c_str()) != 0) {
    const int error = errno;
    unlink(temporary_path_.c_str());
    return absl::ErrnoToStatus(
        error, absl::StrCat("cannot rename ", temporary_path_.string(), " to ", path_.string()));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::filesystem::path& path,
                                 std::span<const std::byte> bytes) {
  absl::StatusOr<AtomicFile> file = AtomicFile::Create(path);
  if (!file.ok()) return file.status();
  if (absl::Status status = file->Append(bytes); !status.ok()) return status;
  return file->Commit();
}

absl::Status WriteFileAtomically(const std::filesystem::path& path, std::string_view text) {
  return WriteFileAtomically(path, std::as_bytes(std::span(text.data(), text.size())));
}

}  // namespace specd::io
