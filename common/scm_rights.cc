// SCM_RIGHTS with exactly-one semantics. Invariant: RecvWithFd owns every
// descriptor the kernel installs: it returns at most one (CLOEXEC) to the
// caller and closes all others before returning, on every path.
#include "common/scm_rights.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace opencode {
namespace {

// Room for two descriptors: one is the allowed case, a second one proves the
// sender broke the rule; anything beyond that sets MSG_CTRUNC, which is also
// an error (the kernel closes descriptors that did not fit).
constexpr size_t kRecvFdSlots = 2;

}  // namespace

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

RecvFdResult RecvWithFd(int sock, void* buf, size_t len, int flags) noexcept {
  RecvFdResult r;
  // Also room for one SCM_CREDENTIALS message, so that a foreign control
  // message is reported as such rather than as truncation.
  alignas(struct cmsghdr) char control[CMSG_SPACE(kRecvFdSlots * sizeof(int)) +
                                       CMSG_SPACE(sizeof(struct ucred))];
  struct iovec iov = {buf, len};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    r.bytes = -errno;
    return r;
  }
  r.bytes = n;
  // Take ownership of every descriptor first, so that no return path leaks one.
  UniqueFd received[kRecvFdSlots];
  size_t count = 0;
  bool foreign = false;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      size_t nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < nfds; ++i) {
        int fd;
        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (count < kRecvFdSlots) {
          received[count].reset(fd);
        } else {
          UniqueFd extra(fd);  // cannot happen with our buffer size; close anyway
        }
        ++count;
      }
    } else {
      // SCM_CREDENTIALS etc. carry no descriptor; SCM_RIGHTS is the only type
      // that installs them, so nothing to close here.
      foreign = true;
    }
  }
  if (msg.msg_flags & MSG_CTRUNC) {
    r.error = ErrorCode::kTruncatedControl;
  } else if (foreign) {
    r.error = ErrorCode::kBadControl;
  } else if (count > 1) {
    r.error = ErrorCode::kExtraDescriptor;
  } else if (count == 1) {
    r.fd = std::move(received[0]);
  }
  return r;  // `received` closes whatever was not handed out
}

ssize_t RecvPacket(int sock, void* buf, size_t len, int flags, bool* refused) noexcept {
  struct iovec iov = {buf, len};
  struct msghdr mh = {};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | flags);
  if (n < 0) return -errno;
  *refused = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  return n;
}

}  // namespace opencode
