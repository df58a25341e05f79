// The supervisor's end of one session's unit channel: an anonymous AF_UNIX
// SOCK_SEQPACKET socketpair whose other end the launcher's monitor holds
// inside the PTY unit (docs/SECURITY.md "The unit channel"; packets in
// common/channel_message.h).
// Owns: our end of the pair (the 'V' packet is written at creation and
// never again), at most one window size and one signal not yet written,
// and what the unit reported
// (at most kUnitReports packets: the exec, then the exit or a launch failure).
// Invariants: a write never blocks the loop (the socket is nonblocking; a full
// channel keeps what is pending and waits for EPOLLOUT); a new size replaces
// the pending one, so memory is O(1) however many RESIZE frames arrive; writes
// happen only from the loop, never from inside the frame decoder. What comes
// from inside the unit is only believed about the unit's own command: it is
// parsed with exact lengths and ranges, each kind once and in order, and the
// first packet that is not stops the reading for good (the unit's exit status
// from systemd is the fallback). Nothing here ever decides a unit's cleanup.
#pragma once

#include <sys/types.h>
#include <systemd/sd-event.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/channel_message.h"
#include "common/launch.h"
#include "common/unique_fd.h"
#include "daemon/base/sd_ptr.h"
#include "daemon/session/exit_report.h"

namespace opencode::daemon {

// Creates the pair, writes `env_packet` (the one 'V' packet, vetted: empty
// or built by FilterEnvList) into our end, where it waits for --exec, and
// sends the unit's end on `stream` (the supervisor's end of the PTY stream,
// before StartTransientUnit) as exactly one byte kChannelHandoffByte with one
// SCM_RIGHTS descriptor; our copy of the unit's end is closed before this
// returns. Returns our end (nonblocking, CLOEXEC).
absl::StatusOr<UniqueFd> CreateUnitChannel(int stream, std::span<const uint8_t> env_packet);

class UnitChannel {
 public:
  class Delegate {
   public:
    // The command's execve succeeded; `pid` is its pid (the unit's word).
    virtual void OnCommandExecuted(pid_t pid) noexcept = 0;
    // The pending signal was written to the channel (true) or cannot be: the
    // monitor is gone (the command already ended), or the channel stayed full
    // for kSignalWriteDeadlineUsec (the monitor does not read). Written is
    // not delivered: only OnSignalDelivered says the monitor's kill() ran.
    virtual void OnSignalHandled(uint8_t signo, bool written) noexcept = 0;
    // The monitor answered a written signal: its kill() of the command
    // succeeded.
    virtual void OnSignalDelivered(uint8_t signo) noexcept = 0;
    // The unit reported the command's end (`X`) or a launcher failure (`F`):
    // nothing in the unit reads input for the command any more.
    virtual void OnCommandEnded() noexcept = 0;

   protected:
    ~Delegate() = default;
  };

  UnitChannel(sd_event* event, UniqueFd fd, Delegate* delegate);
  ~UnitChannel();
  UnitChannel(const UnitChannel&) = delete;
  UnitChannel& operator=(const UnitChannel&) = delete;

  absl::Status Init();
  // Stores cols x rows (already validated) as the pending size, replacing
  // any pending one, and asks the loop to write it.
  void RequestSize(uint16_t cols, uint16_t rows) noexcept;
  // Stores `signo` (from the allowlist) as the pending signal. The caller
  // sends at most one at a time (it pauses the client's input until
  // OnSignalHandled); a second one while one is pending, or any once the
  // channel is broken, is refused (false) and OnSignalHandled is not called.
  bool RequestSignal(uint8_t signo) noexcept;
  // Reads every packet the unit has sent so far (the unit is gone: all of
  // them are in the socket). Bounded by kUnitReports.
  void Drain() noexcept;

  bool has_pending_size() const noexcept { return size_pending_; }
  bool has_pending_signal() const noexcept { return signal_pending_; }
  // Writing is over (the monitor is gone, or a write failed otherwise).
  bool broken() const noexcept { return !writable_; }
  size_t sizes_written() const noexcept { return sizes_written_; }
  const std::optional<pid_t>& executed() const noexcept { return executed_; }
  const std::optional<CommandExit>& command_exit() const noexcept { return exit_; }
  const std::optional<uint8_t>& launch_failure() const noexcept { return failure_; }
  // Packets refused (malformed, repeated, out of order): 0 or 1.
  size_t refused() const noexcept { return refused_; }

 private:
  static int OnIo(sd_event_source* s, int fd, uint32_t revents, void* userdata) noexcept;
  static int OnSignalDeadline(sd_event_source* s, uint64_t usec, void* userdata) noexcept;
  void SignalDone(bool written) noexcept;
  void Flush() noexcept;
  // One packet; false when there is nothing (more) to read.
  bool ReadOne() noexcept;
  void StopWriting() noexcept;
  void UpdateEvents() noexcept;

  sd_event* event_;
  UniqueFd fd_;
  Delegate* delegate_;
  EventSourcePtr source_;  // declared after fd_: removed from epoll first
  EventSourcePtr signal_deadline_;  // armed while a signal is pending
  bool writable_ = true;
  bool reading_ = true;
  // One size, not a queue: a new RESIZE replaces the one not yet written
  // (the last size wins, as a terminal emulator's own resize does), so a
  // flood of 10,000 resizes in one read costs O(1) memory and one write and
  // never holds up INPUT or OUTPUT.
  bool size_pending_ = false;
  uint16_t cols_ = 0;
  uint16_t rows_ = 0;
  // One signal, not a queue: while it is pending the client's frames wait in
  // its own socket (Session pauses input), so a SIGNAL flood costs O(1) and
  // reaches the command in order.
  bool signal_pending_ = false;
  uint8_t signo_ = 0;
  size_t sizes_written_ = 0;
  size_t reports_ = 0;
  // Signals written and not yet answered: an answer ('D') is believed only
  // for one of these, so the unit cannot send more answers than signals.
  size_t unanswered_signals_ = 0;
  size_t refused_ = 0;
  std::optional<pid_t> executed_;
  std::optional<CommandExit> exit_;
  std::optional<uint8_t> failure_;
};

}  // namespace opencode::daemon
