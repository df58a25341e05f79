// The final close of every descriptor an unprivileged process can reach, off
// the loop thread. Invariant: the loop never calls close() on a peer's
// connection, the PTY stream, the unit channel or any descriptor that arrived
// with SCM_RIGHTS; it hands them here, and one closer thread closes them in
// order. A close that a peer can make sleep (a lingering TCP socket, a FUSE
// file's flush, the purge of an unread SCM_RIGHTS message holding either)
// then stalls the closer, never the loop; the listener stops accepting while
// the closer is kCloseBacklogPause descriptors behind (docs/SECURITY.md,
// "Closing what a peer supplied").
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "common/unique_fd.h"

namespace opencode::daemon {

// Starts the closer thread. Called once by main after the signals are blocked
// (the thread inherits that mask); tests may call it any number of times.
absl::Status StartAsyncClose();

// Queues `fd` for the closer (never blocks: the lock is held only to push).
// Before StartAsyncClose, or if the thread could not be started, it closes
// inline. Accepts an invalid fd and does nothing.
void AsyncClose(UniqueFd fd) noexcept;

// A descriptor whose final close must not run on the loop, for a scope with
// several exits: whichever one is taken hands it to AsyncClose.
struct OffLoopFd {
  UniqueFd fd;
  ~OffLoopFd() { AsyncClose(std::move(fd)); }
};

// The same, shaped for common/scm_rights.h's DiscardFd.
void AsyncCloseDiscard(UniqueFd fd) noexcept;

// One wakeup of a lingering close (docs/PROTOCOL.md section 1): reads and
// drops at most kLingerReadsPerWakeup segments of what the client still sends
// on `conn`, handing every descriptor that came with them to the closer.
// True once the client is done (its EOF was read, or nothing is left on a
// connection that hung up or failed); false while it may still send.
bool DiscardUntilEof(int conn, uint32_t revents) noexcept;

// Descriptors queued and not yet closed.
size_t AsyncCloseBacklog() noexcept;

// An eventfd that becomes readable when the backlog falls below
// kCloseBacklogResume after it had reached kCloseBacklogPause (the listener
// watches it), or -1 before StartAsyncClose. Reading it is the watcher's job.
int AsyncCloseWakeFd() noexcept;

// Tests only: skip the defusing step (SO_LINGER {1,0}, draining a socket's
// own in-flight descriptors), so that a close really blocks in the closer.
void AsyncCloseSetDefuseForTesting(bool defuse) noexcept;

}  // namespace opencode::daemon
