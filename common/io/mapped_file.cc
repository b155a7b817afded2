#include "common/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace specd::io {

absl::StatusOr<std::shared_ptr<const MappedFile>> MappedFile::Open(
    const std::filesystem::path& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path.string()));
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    const int error = errno;
    close(fd);
    return absl::ErrnoToStatus(error, absl::StrCat("cannot stat ", path.string()));
  }
  if (!S_ISREG(info.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path.string(), " is not a regular file"));
  }
  const auto size = static_cast<size_t>(info.st_size);
  void* address = nullptr;
  if (size > 0) {  // mmap rejects a zero length
    address = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) {
      const int error = errno;
      close(fd);
      return absl::ErrnoToStatus(error, absl::StrCat("cannot map ", path.string()));
    }
  }
  close(fd);  // the mapping stays valid without the descriptor
  return std::shared_ptr<const MappedFile>(
      new MappedFile(std::span(static_cast<const std::byte*>(address), size)));
}

MappedFile::~MappedFile() {
  if (!bytes_.empty()) munmap(const_cast<std::byte*>(bytes_.data()), bytes_.size());
}

void ReleaseResidentPages(std::span<const std::byte> bytes) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(bytes.data()) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size()) / page * page;
  // Advice only: a failure leaves the pages resident, which is correct, just larger.
  if (begin < end) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace specd::io
