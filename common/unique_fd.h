// UniqueFd: the one owner of a file descriptor. Move-only; closes on
// destruction. Invariant: every descriptor of the project is held by exactly one
// UniqueFd (or handed to the kernel/systemd in the statement that made it), and
// every descriptor is created close-on-exec; release() is the TAKE_FD of
// systemd: ownership leaves explicitly.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <utility>

namespace opencode {

class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  ~UniqueFd() { reset(); }

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }

  // Gives up ownership; the caller now owns the returned descriptor.
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }

  // Closes the held descriptor (if any) and takes `fd`. close() errors are
  // ignored on purpose: the descriptor is gone either way on Linux, and errno
  // is preserved for the caller's own error reporting.
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) {
      int saved = errno;
      ::close(fd_);
      errno = saved;
    }
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace opencode
