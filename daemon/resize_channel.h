// The supervisor's end of one session's resize channel: an anonymous
// AF_UNIX SOCK_SEQPACKET socketpair whose other end the launcher's resizer
// holds inside the PTY unit (docs/SECURITY.md, "Live resize").
// Owns: our end of the pair and at most kPendingResizes (one) window size not
// yet written. Invariants: a write never blocks the loop (the socket is
// nonblocking, a full channel keeps the one pending size and waits for
// EPOLLOUT); a new size replaces the pending one, so memory is O(1) however
// many RESIZE frames arrive; sizes are written only from the loop, never from
// inside the frame decoder, so a burst of frames costs one write.
#pragma once

#include <systemd/sd-event.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "daemon/sd_ptr.h"

namespace opencode::daemon {

// The one byte that precedes the handoff descriptor on the PTY stream.
inline constexpr char kResizeHandoffByte = 'R';

// Creates the pair and sends the unit's end on `stream` (the supervisor's
// end of the PTY stream, before StartTransientUnit) as exactly one byte
// kResizeHandoffByte with one SCM_RIGHTS descriptor; our copy of the unit's
// end is closed before this returns. Returns our end (nonblocking, CLOEXEC).
absl::StatusOr<UniqueFd> CreateResizeChannel(int stream);

class ResizeChannel {
 public:
  ResizeChannel(sd_event* event, UniqueFd fd);
  ~ResizeChannel();
  ResizeChannel(const ResizeChannel&) = delete;
  ResizeChannel& operator=(const ResizeChannel&) = delete;

  absl::Status Init();
  // Stores cols x rows (already validated) as the pending size, replacing
  // any pending one, and asks the loop to write it.
  void Request(uint16_t cols, uint16_t rows) noexcept;

  bool has_pending() const noexcept { return pending_; }
  // The channel is gone (the resizer exited, or a write failed otherwise):
  // later requests are dropped; the session itself goes on.
  bool broken() const noexcept { return !fd_; }
  size_t sizes_written() const noexcept { return written_; }

 private:
  static int OnIo(sd_event_source* s, int fd, uint32_t revents, void* userdata) noexcept;
  void Flush() noexcept;

  sd_event* event_;
  UniqueFd fd_;
  EventSourcePtr source_;  // declared after fd_: removed from epoll first
  bool pending_ = false;
  uint16_t cols_ = 0;
  uint16_t rows_ = 0;
  size_t written_ = 0;
};

}  // namespace opencode::daemon
