#include "common/rpc/shared_memory_region.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"

namespace specd::rpc {
namespace {

constexpr char kShmDirectory[] = "/dev/shm";

// Names differ by pid across processes and by this counter within one.
std::atomic<uint64_t> next_region_number{0};

// The name prefix (without the leading slash, as /dev/shm lists it) of every object this process
// creates; the reaper unlinks exactly these.
std::string EntryPrefixFor(pid_t pid) { return absl::StrCat("specd.", pid, "."); }

}  // namespace

SharedMemoryRegion::SharedMemoryRegion(std::string name, std::byte* data, uint64_t size, bool owner)
    : name_(std::move(name)), data_(data), size_(size), owner_(owner) {}

SharedMemoryRegion::SharedMemoryRegion(SharedMemoryRegion&& other) noexcept
    : name_(std::move(other.name_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      owner_(std::exchange(other.owner_, false)) {}

SharedMemoryRegion& SharedMemoryRegion::operator=(SharedMemoryRegion&& other) noexcept {
  if (this != &other) {
    Reset();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owner_ = std::exchange(other.owner_, false);
  }
  return *this;
}

SharedMemoryRegion::~SharedMemoryRegion() { Reset(); }

void SharedMemoryRegion::Reset() {
  if (data_ == nullptr) return;
  if (owner_) shm_unlink(name_.c_str());
  munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
  owner_ = false;
  name_.clear();
}

absl::StatusOr<SharedMemoryRegion> SharedMemoryRegion::Create(uint64_t size_bytes) {
  if (size_bytes == 0) {
    return absl::InvalidArgumentError("shared-memory region size must be positive");
  }
  // tmpfs accepts any ftruncate and only fails when pages are touched, with SIGBUS; refusing a
  // region the file system cannot hold at all turns the common case (a container's small
  // /dev/shm) into an error that says what to change.
  struct statvfs file_system {};
  if (statvfs(kShmDirectory, &file_system) == 0) {
    const uint64_t available = static_cast<uint64_t>(file_system.f_bavail) * file_system.f_frsize;
    if (size_bytes > available) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "shared-memory region of ", size_bytes, " bytes does not fit in ", kShmDirectory, " (",
          available, " bytes available; a container needs a larger --shm-size)"));
    }
  }
  // A name can be taken by an object that a previous process with our pid left behind (it died
  // without a reaper); skip past it rather than reuse its memory.
  constexpr int kAttempts = 64;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    std::string name = absl::StrCat("/", EntryPrefixFor(getpid()), next_region_number.fetch_add(1));
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("shm_open(", name, ") to create"));
    if (ftruncate(fd, static_cast<off_t>(size_bytes)) != 0) {
      const int error_number = errno;
      close(fd);
      shm_unlink(name.c_str());
      return absl::ErrnoToStatus(error_number,
                                 absl::StrCat("ftruncate(", name, ", ", size_bytes, " bytes)"));
    }
    void* address = mmap(nullptr, size_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int error_number = errno;
    close(fd);
    if (address == MAP_FAILED) {
      shm_unlink(name.c_str());
      return absl::ErrnoToStatus(error_number,
                                 absl::StrCat("mmap(", name, ", ", size_bytes, " bytes)"));
    }
    return SharedMemoryRegion(std::move(name), static_cast<std::byte*>(address), size_bytes,
                              /*owner=*/true);
  }
  return absl::AlreadyExistsError(
      absl::StrCat("no free shared-memory name after ", kAttempts, " attempts: ", kShmDirectory,
                   " holds stale objects named ", EntryPrefixFor(getpid()), "*"));
}

absl::StatusOr<SharedMemoryRegion> SharedMemoryRegion::OpenReadOnly(const std::string& name,
                                                                    uint64_t size_bytes) {
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared-memory name \"", name, "\" is not of the form \"/name\" (one leading slash)"));
  }
  if (size_bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("size to map of shared-memory region ", name, " must be positive"));
  }
  const int fd = shm_open(name.c_str(), O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("shm_open(", name, ") to read"));
  struct stat status {};
  if (fstat(fd, &status) != 0) {
    const int error_number = errno;
    close(fd);
    return absl::ErrnoToStatus(error_number, absl::StrCat("fstat(", name, ")"));
  }
  if (static_cast<uint64_t>(status.st_size) < size_bytes) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("shared-memory region ", name, " holds ",
                                                   status.st_size, " bytes, fewer than the ",
                                                   size_bytes, " to map"));
  }
  void* address = mmap(nullptr, size_bytes, PROT_READ, MAP_SHARED, fd, 0);
  const int error_number = errno;
  close(fd);
  if (address == MAP_FAILED) {
    return absl::ErrnoToStatus(error_number,
                               absl::StrCat("mmap(", name, ", ", size_bytes, " bytes)"));
  }
  return SharedMemoryRegion(name, static_cast<std::byte*>(address), size_bytes, /*owner=*/false);
}

namespace {

// The reaper's side, after fork: only async-signal-safe calls from here on (no malloc, no
// stdio, no opendir), because the parent may have had other threads holding locks.

struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

bool HasPrefix(const char* text, const char* prefix) {
  for (; *prefix != '\0'; ++text, ++prefix) {
    if (*text != *prefix) return false;
  }
  return true;
}

// One pass over /dev/shm; returns how many entries it unlinked.
int UnlinkEntriesWithPrefix(int directory_fd, const char* prefix) {
  alignas(8) char buffer[8192];
  int unlinked = 0;
  for (;;) {
    const long bytes = syscall(SYS_getdents64, directory_fd, buffer, sizeof(buffer));
    if (bytes <= 0) return unlinked;
    for (long offset = 0; offset < bytes;) {
      const auto* entry = reinterpret_cast<const LinuxDirent64*>(buffer + offset);
      if (HasPrefix(entry->d_name, prefix) && unlinkat(directory_fd, entry->d_name, 0) == 0) {
        ++unlinked;
      }
      offset += entry->d_reclen;
    }
  }
}

[[noreturn]] void RunReaper(int read_fd, const char* prefix, int max_fd) {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (const int signal_number : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) {
    sigaction(signal_number, &ignore, nullptr);
  }
  // Holding any inherited descriptor would keep someone else's pipe or socket open.
  if (syscall(SYS_close_range, 0, read_fd - 1, 0) != 0 ||
      syscall(SYS_close_range, read_fd + 1, ~0U, 0) != 0) {
    for (int fd = 0; fd < max_fd; ++fd) {
      if (fd != read_fd) close(fd);
    }
  }
  char byte;
  for (;;) {
    const ssize_t result = read(read_fd, &byte, 1);
    if (result == 0 || (result < 0 && errno != EINTR)) break;
  }
  const int directory_fd = open(kShmDirectory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory_fd >= 0) {
    // Removing entries while reading a directory may make getdents64 skip some; rescan until a
    // pass finds nothing left to remove.
    while (UnlinkEntriesWithPrefix(directory_fd, prefix) > 0) {
      lseek(directory_fd, 0, SEEK_SET);
    }
  }
  _exit(0);
}

}  // namespace

absl::Status StartSharedMemoryReaper() {
  static std::mutex mutex;
  static pid_t started_for_pid = 0;
  std::lock_guard<std::mutex> lock(mutex);
  const pid_t pid = getpid();
  if (started_for_pid == pid) return absl::OkStatus();

  // Everything the reaper needs is prepared here, before fork.
  const std::string prefix = EntryPrefixFor(pid);
  struct rlimit fd_limit {};
  const int max_fd = getrlimit(RLIMIT_NOFILE, &fd_limit) == 0 && fd_limit.rlim_cur < 65536
                         ? static_cast<int>(fd_limit.rlim_cur)
                         : 65536;
  int pipe_fds[2];
  // Close-on-exec: a program this process execs must not hold the write end, or the reaper
  // would wait for that program too.
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::ErrnoToStatus(errno, "pipe2 for the shm reaper");
  }
  const int read_fd = pipe_fds[0];
  const int write_fd = pipe_fds[1];

  const pid_t intermediate = fork();
  if (intermediate < 0) {
    const int error_number = errno;
    close(read_fd);
    close(write_fd);
    return absl::ErrnoToStatus(error_number, "fork for the shm reaper");
  }
  if (intermediate == 0) {
    // A new session: signals to this process's group (Ctrl-C) do not reach the reaper. The
    // second fork re-parents the reaper to init, so it is never this process's child.
    close(write_fd);
    setsid();
    const pid_t reaper = fork();
    if (reaper == 0) RunReaper(read_fd, prefix.c_str(), max_fd);
    _exit(reaper < 0 ? 1 : 0);
  }
  close(read_fd);
  int wait_status = 0;
  pid_t waited;
  do {
    waited = waitpid(intermediate, &wait_status, 0);
  } while (waited < 0 && errno == EINTR);
  // ECHILD: this process ignores SIGCHLD, so the status is gone; the reaper's pipe still works.
  if (waited == intermediate && !(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0)) {
    close(write_fd);
    return absl::InternalError("could not fork the shm reaper process");
  }
  // write_fd stays open for the rest of this process's life: its closing, by exit or kill, is
  // the reaper's signal.
  started_for_pid = pid;
  return absl::OkStatus();
}

}  // namespace specd::rpc
