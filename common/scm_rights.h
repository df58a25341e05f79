// Sending and receiving one descriptor with SCM_RIGHTS. Invariant: every
// descriptor the kernel installs on a receive (any SCM_RIGHTS count up to the
// kernel's maximum, an SCM_PIDFD) is either returned to the caller in a
// UniqueFd or handed to the caller's discard function (closed here when there
// is none); zero or several descriptors, truncated control data and foreign
// control messages are reported, never silently tolerated. The receive buffer
// always has room for everything the kernel can attach to one message, so it
// never drops a descriptor in the receiving thread (where its last close
// would run).
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>
#include <cstring>

#include "common/errors.h"
#include "common/limits.h"
#include "common/unique_fd.h"

namespace opencode {

// SCM_PIDFD (Linux 6.5): a listener with SO_PASSPIDFD attaches the sender's
// pidfd to every message; the C library's headers may predate it.
inline constexpr int kScmPidfd = 0x04;

// Control room for one receive: every SCM_RIGHTS descriptor one message can
// carry, an SCM_PIDFD, SCM_CREDENTIALS and a security label.
inline constexpr size_t kRecvControlBytes = CMSG_SPACE(limits::kMaxRightsPerMessage * sizeof(int)) +
                                            CMSG_SPACE(sizeof(int)) +
                                            CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(256);

// Where a receive puts every descriptor it does not return. The supervisor
// passes its asynchronous closer (daemon/base/async_close.h), so that no final
// close of a peer's descriptor runs on its loop; nullptr closes at once.
using DiscardFd = void (*)(UniqueFd fd) noexcept;

// Calls f(UniqueFd fd, bool rights) for every descriptor installed by the
// receive that filled `msg` (rights: it came with SCM_RIGHTS, else it is an
// SCM_PIDFD). Returns true if a control message of another kind was there.
template <typename F>
bool ForEachReceivedFd(struct msghdr* msg, F&& f) noexcept {
  bool foreign = false;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr; c = CMSG_NXTHDR(msg, c)) {
    bool rights = c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS;
    bool pidfd = c->cmsg_level == SOL_SOCKET && c->cmsg_type == kScmPidfd;
    if (!rights && !pidfd) {
      foreign = true;  // SCM_CREDENTIALS, a label: no descriptor in it
      continue;
    }
    if (pidfd) foreign = true;
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      f(UniqueFd(fd), rights);
    }
  }
  return foreign;
}

// Sends `len` bytes with exactly one descriptor `fd` in ONE sendmsg call.
// Returns bytes sent (may be short on a stream socket: the descriptor went with
// the first byte, send the rest with plain send) or -errno. MSG_NOSIGNAL.
ssize_t SendWithFd(int sock, const void* data, size_t len, int fd) noexcept;

struct RecvFdResult {
  ssize_t bytes = 0;        // >0 data, 0 EOF, <0 -errno (then nothing else is set)
  ErrorCode error = ErrorCode::kOk;  // descriptor-level problem (all fds discarded)
  UniqueFd fd;              // the one descriptor in this segment, if any
};

// One recvmsg(MSG_CMSG_CLOEXEC | flags) of at most `len` bytes. A segment with
// one SCM_RIGHTS descriptor returns it in `fd`; two or more ->
// kExtraDescriptor; MSG_CTRUNC -> kTruncatedControl; another control message
// type -> kBadControl. On every error path all received descriptors go to
// `discard`.
RecvFdResult RecvWithFd(int sock, void* buf, size_t len, int flags = 0,
                        DiscardFd discard = nullptr) noexcept;

// One packet of a SOCK_SEQPACKET socket that must carry no descriptor.
// Returns the byte count (0: EOF) or -errno; *refused is set when the packet
// was longer than `len` or carried control data (every descriptor in it goes
// to `discard`).
ssize_t RecvPacket(int sock, void* buf, size_t len, int flags, bool* refused,
                   DiscardFd discard = nullptr) noexcept;

}  // namespace opencode
