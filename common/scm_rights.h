// Sending and receiving one descriptor with SCM_RIGHTS. Invariant: received
// descriptors are close-on-exec at birth (MSG_CMSG_CLOEXEC) and every one of
// them is either returned to the caller in a UniqueFd or closed here; zero or
// several descriptors, truncated control data and foreign control messages are
// reported, never silently tolerated.
#pragma once

#include <sys/types.h>

#include <cstddef>

#include "common/errors.h"
#include "common/unique_fd.h"

namespace opencode {

// Sends `len` bytes with exactly one descriptor `fd` in ONE sendmsg call.
// Returns bytes sent (may be short on a stream socket: the descriptor went with
// the first byte, send the rest with plain send) or -errno. MSG_NOSIGNAL.
ssize_t SendWithFd(int sock, const void* data, size_t len, int fd) noexcept;

struct RecvFdResult {
  ssize_t bytes = 0;        // >0 data, 0 EOF, <0 -errno (then nothing else is set)
  ErrorCode error = ErrorCode::kOk;  // descriptor-level problem (all fds closed)
  UniqueFd fd;              // the one descriptor in this segment, if any
};

// One recvmsg(MSG_CMSG_CLOEXEC | flags) of at most `len` bytes. A segment with
// one SCM_RIGHTS descriptor returns it in `fd`; two or more ->
// kExtraDescriptor; MSG_CTRUNC -> kTruncatedControl; another control message
// type -> kBadControl. On every error path all received descriptors are closed.
RecvFdResult RecvWithFd(int sock, void* buf, size_t len, int flags = 0) noexcept;

// One packet of a SOCK_SEQPACKET socket that must carry no descriptor:
// recvmsg(MSG_CMSG_CLOEXEC | flags) with no room for control data, so a
// descriptor sent along is discarded by the kernel (never installed here).
// Returns the byte count (0: EOF) or -errno; *refused is set when the packet
// was longer than `len` or carried control data (MSG_TRUNC / MSG_CTRUNC).
ssize_t RecvPacket(int sock, void* buf, size_t len, int flags, bool* refused) noexcept;

}  // namespace opencode
