// TempListener: a listening AF_UNIX stream socket at a fresh path under /tmp,
// blocking and close-on-exec as systemd passes one; the socket file and its
// directory go with the object. For the tests that need a real listening
// socket (the listener, the closer, peer credentials, the client helper).
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>
#include <utility>

#include "common/unique_fd.h"

namespace opencode {

class TempListener {
 public:
  explicit TempListener(int backlog = 64) {
    if (mkdtemp(dir_) == nullptr) return;
    path_ = std::string(dir_) + "/s";
    addr_.sun_family = AF_UNIX;
    snprintf(addr_.sun_path, sizeof addr_.sun_path, "%s", path_.c_str());
    UniqueFd l(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (bind(l.get(), reinterpret_cast<const sockaddr*>(&addr_), sizeof addr_) == 0 &&
        listen(l.get(), backlog) == 0)
      fd_ = std::move(l);
  }
  ~TempListener() {
    if (!path_.empty()) unlink(path_.c_str());
    rmdir(dir_);
  }
  TempListener(const TempListener&) = delete;
  TempListener& operator=(const TempListener&) = delete;

  // False when mkdtemp, socket, bind or listen failed.
  bool ok() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  // The listening socket, for an owner such as the Listener; the path stays
  // until this object goes.
  UniqueFd Take() { return std::move(fd_); }
  const std::string& path() const { return path_; }
  const char* dir() const { return dir_; }
  const sockaddr_un& addr() const { return addr_; }
  // A new client connection to it (invalid if connect failed).
  UniqueFd Connect() const {
    UniqueFd c(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (connect(c.get(), reinterpret_cast<const sockaddr*>(&addr_), sizeof addr_) != 0) c.reset();
    return c;
  }

 private:
  char dir_[32] = "/tmp/opencode-test-XXXXXX";
  std::string path_;
  sockaddr_un addr_{};
  UniqueFd fd_;
};

}  // namespace opencode
