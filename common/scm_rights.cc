// SCM_RIGHTS with exactly-one semantics. Invariant: RecvWithFd owns every
// descriptor the kernel installs: it returns at most one (CLOEXEC) to the
// caller and hands all others to the caller's discard before returning, on
// every path.
#include "common/scm_rights.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace opencode {

ssize_t SendWithFd(int sock, const void* data, size_t len, int fd) noexcept {
  if (len == 0) return -EINVAL;  // a descriptor must travel with at least one byte
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  memset(control, 0, sizeof control);
  struct iovec iov = {const_cast<void*>(data), len};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  struct cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  ssize_t n;
  do {
    n = sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n < 0 ? -errno : n;
}

namespace {

void Discard(UniqueFd fd, DiscardFd discard) noexcept {
  if (discard != nullptr && fd) discard(std::move(fd));
}

ssize_t Recv(int sock, void* buf, size_t len, int flags, struct msghdr* msg, void* control) noexcept {
  struct iovec iov = {buf, len};
  *msg = {};
  msg->msg_iov = &iov;
  msg->msg_iovlen = 1;
  msg->msg_control = control;
  msg->msg_controllen = kRecvControlBytes;
  ssize_t n;
  do {
    n = recvmsg(sock, msg, MSG_CMSG_CLOEXEC | flags);
  } while (n < 0 && errno == EINTR);
  msg->msg_iov = nullptr;  // `iov` dies here
  msg->msg_iovlen = 0;
  return n < 0 ? -errno : n;
}

}  // namespace

RecvFdResult RecvWithFd(int sock, void* buf, size_t len, int flags, DiscardFd discard) noexcept {
  RecvFdResult r;
  alignas(struct cmsghdr) char control[kRecvControlBytes];
  struct msghdr msg;
  ssize_t n = Recv(sock, buf, len, flags, &msg, control);
  r.bytes = n;
  if (n < 0) return r;
  // Take ownership of every descriptor first, so that no return path leaks one.
  UniqueFd first;
  size_t count = 0;
  bool foreign = ForEachReceivedFd(&msg, [&](UniqueFd fd, bool rights) {
    if (rights && count++ == 0) {
      first = std::move(fd);
    } else {
      Discard(std::move(fd), discard);
    }
  });
  if (msg.msg_flags & MSG_CTRUNC) {
    r.error = ErrorCode::kTruncatedControl;
  } else if (foreign) {
    r.error = ErrorCode::kBadControl;
  } else if (count > 1) {
    r.error = ErrorCode::kExtraDescriptor;
  } else {
    r.fd = std::move(first);
  }
  Discard(std::move(first), discard);
  return r;
}

ssize_t RecvPacket(int sock, void* buf, size_t len, int flags, bool* refused,
                   DiscardFd discard) noexcept {
  alignas(struct cmsghdr) char control[kRecvControlBytes];
  struct msghdr msg;
  ssize_t n = Recv(sock, buf, len, flags, &msg, control);
  if (n < 0) return n;
  bool any = false;
  bool foreign = ForEachReceivedFd(&msg, [&](UniqueFd fd, bool) {
    any = true;
    Discard(std::move(fd), discard);
  });
  *refused = any || foreign || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  return n;
}

}  // namespace opencode
