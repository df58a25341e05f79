// The unit channel (see unit_channel.h). Writes happen on EPOLLOUT from the
// loop (Request*() only store and arm); reads take one packet per dispatch
// until the unit's report is complete or a packet is refused.
#include "daemon/session/unit_channel.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>

#include "common/limits.h"
#include "common/scm_rights.h"
#include "daemon/base/async_close.h"
#include "daemon/base/status_macros.h"

namespace opencode::daemon {

absl::StatusOr<UniqueFd> CreateUnitChannel(int stream, std::span<const uint8_t> env_packet) {
  if (env_packet.size() < kChannelEmptyEnvBytes || env_packet.size() > limits::kMaxEnvPacketBytes ||
      env_packet[0] != uint8_t(ChannelKind::kEnvironment))
    return Errno(EINVAL, "unit channel: not an environment packet");
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
    return Errno(errno, "unit channel: creating the pair");
  UniqueFd ours(sv[0]);
  UniqueFd theirs(sv[1]);
  // The 'V' packet waits in our send buffer until --exec reads it: a fixed
  // size that holds the largest one whatever wmem_default is (limits.h).
  // wmem_max may cap what we asked for: the kernel's answer is checked.
  int want = int(limits::kUnitChannelSendBufferBytes), got = 0;
  socklen_t len = sizeof got;
  if (setsockopt(ours.get(), SOL_SOCKET, SO_SNDBUF, &want, sizeof want) < 0 ||
      getsockopt(ours.get(), SOL_SOCKET, SO_SNDBUF, &got, &len) < 0)
    return Errno(errno, "unit channel: SO_SNDBUF");
  if (size_t(got) < env_packet.size() + 32)
    return Errno(EMSGSIZE, "unit channel: net.core.wmem_max is too small for the environment packet");
  // A fresh pair's queues are empty: the one packet fits at once (no EAGAIN).
  ssize_t sent = send(ours.get(), env_packet.data(), env_packet.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (sent < 0) return Errno(errno, "send(unit channel environment)");
  if (size_t(sent) != env_packet.size()) return Errno(EIO, "send(unit channel environment)");
  // The unit's end is a blocking socket: the monitor sleeps in poll anyway.
  int flags = fcntl(theirs.get(), F_GETFL);
  if (flags < 0 || fcntl(theirs.get(), F_SETFL, flags & ~O_NONBLOCK) < 0)
    return Errno(errno, "fcntl(unit channel)");
  // A fresh stream socket always has room for one byte.
  ssize_t n = SendWithFd(stream, &kChannelHandoffByte, 1, theirs.get());
  if (n < 0) return Errno(int(-n), "sendmsg(unit channel handoff)");
  if (n != 1) return Errno(EIO, "sendmsg(unit channel handoff)");
  return ours;  // `theirs` closes here: the in-flight message holds the only reference
}

UnitChannel::UnitChannel(sd_event* event, UniqueFd fd, Delegate* delegate)
    : event_(event), fd_(std::move(fd)), delegate_(delegate) {}

// The unit's end is held by a process of the session's user: the source
// leaves epoll, then the descriptor goes to the closer (async_close.h).
UnitChannel::~UnitChannel() {
  signal_deadline_.reset();
  source_.reset();
  AsyncClose(std::move(fd_));
}

absl::Status UnitChannel::Init() {
  sd_event_source* s = nullptr;
  int r = sd_event_add_io(event_, &s, fd_.get(), EPOLLIN, &UnitChannel::OnIo, this);
  if (r < 0) return SdError(r, "sd_event_add_io(unit channel)");
  source_.reset(s);
  // Same priority as the pump: sizes and signals are part of the terminal's
  // data path.
  sd_event_source_set_priority(s, kPumpPriority);
  r = sd_event_add_time_relative(event_, &s, CLOCK_MONOTONIC, limits::kSignalWriteDeadlineUsec, 0,
                                 &UnitChannel::OnSignalDeadline, this);
  if (r < 0) return SdError(r, "sd_event_add_time(signal deadline)");
  signal_deadline_.reset(s);
  sd_event_source_set_enabled(s, SD_EVENT_OFF);
  return absl::OkStatus();
}

void UnitChannel::UpdateEvents() noexcept {
  if (!source_) return;
  bool out = writable_ && (size_pending_ || signal_pending_);
  if (!out && !reading_) {
    sd_event_source_set_enabled(source_.get(), SD_EVENT_OFF);
    return;
  }
  uint32_t events = (reading_ ? uint32_t{EPOLLIN} : 0u) | (out ? uint32_t{EPOLLOUT} : 0u);
  sd_event_source_set_io_events(source_.get(), events);
  sd_event_source_set_enabled(source_.get(), SD_EVENT_ON);
}

void UnitChannel::RequestSize(uint16_t cols, uint16_t rows) noexcept {
  if (!writable_) return;
  cols_ = cols;
  rows_ = rows;
  size_pending_ = true;
  UpdateEvents();
}

bool UnitChannel::RequestSignal(uint8_t signo) noexcept {
  if (signal_pending_ || !writable_) return false;
  signo_ = signo;
  signal_pending_ = true;
  if (signal_deadline_) {
    sd_event_source_set_time_relative(signal_deadline_.get(), limits::kSignalWriteDeadlineUsec);
    sd_event_source_set_enabled(signal_deadline_.get(), SD_EVENT_ONESHOT);
  }
  UpdateEvents();
  return true;
}

int UnitChannel::OnSignalDeadline(sd_event_source* /*s*/, uint64_t /*usec*/, void* userdata) noexcept {
  auto* self = static_cast<UnitChannel*>(userdata);
  if (self->signal_pending_) self->SignalDone(false);
  self->UpdateEvents();
  return 0;
}

void UnitChannel::SignalDone(bool written) noexcept {
  signal_pending_ = false;
  if (signal_deadline_) sd_event_source_set_enabled(signal_deadline_.get(), SD_EVENT_OFF);
  delegate_->OnSignalHandled(signo_, written);
}

int UnitChannel::OnIo(sd_event_source* /*s*/, int /*fd*/, uint32_t revents, void* userdata) noexcept {
  auto* self = static_cast<UnitChannel*>(userdata);
  if ((revents & EPOLLIN) != 0) (void)self->ReadOne();
  if ((revents & EPOLLOUT) != 0) self->Flush();
  if ((revents & (EPOLLHUP | EPOLLERR)) != 0) {
    // Every holder of the unit's end is gone: what it sent is all here.
    self->Drain();
    self->reading_ = false;
    self->StopWriting();
  }
  self->UpdateEvents();
  return 0;
}

void UnitChannel::Drain() noexcept {
  // Every report and every answer still owed, and one more to see the end.
  for (size_t i = 0, n = limits::kUnitReports + unanswered_signals_; i <= n && ReadOne(); ++i) {
  }
  UpdateEvents();
}

bool UnitChannel::ReadOne() noexcept {
  if (!reading_ || !fd_) return false;
  uint8_t b[kChannelMaxBytes + 1];
  // A descriptor from inside the unit goes to the closer and the packet is
  // refused; so is one longer than any packet.
  bool refused = false;
  ssize_t n = RecvPacket(fd_.get(), b, sizeof b, MSG_DONTWAIT, &refused, &AsyncCloseDiscard);
  // Every holder of the unit's end closed it with our 'V' packet unread (the
  // launcher failed before --exec): the kernel says ECONNRESET once, and the
  // packets the unit sent before ('F') are still queued behind it.
  if (n == -ECONNRESET)
    n = RecvPacket(fd_.get(), b, sizeof b, MSG_DONTWAIT, &refused, &AsyncCloseDiscard);
  if (n == -EAGAIN || n == -EINTR) return false;
  if (n <= 0) {
    reading_ = false;
    return false;
  }
  ChannelMessage m;
  bool ok = !refused && ParseFromUnit(b, size_t(n), &m) == ErrorCode::kOk;
  // Each report kind once, in order: an exec report only before the end;
  // an answer only to a signal written and not yet answered.
  if (ok) {
    bool report_room = reports_ < limits::kUnitReports;
    switch (m.kind) {
      case ChannelKind::kExecuted: ok = report_room && !executed_ && !exit_ && !failure_; break;
      case ChannelKind::kExited: ok = report_room && !exit_ && !failure_; break;
      case ChannelKind::kLaunchFailed: ok = report_room && !executed_ && !exit_ && !failure_; break;
      case ChannelKind::kSignalDelivered: ok = unanswered_signals_ > 0 && !exit_ && !failure_; break;
      default: ok = false; break;
    }
  }
  if (!ok) {
    ++refused_;
    reading_ = false;
    return false;
  }
  if (m.kind == ChannelKind::kSignalDelivered) {
    --unanswered_signals_;
    delegate_->OnSignalDelivered(m.signo);
    return true;
  }
  ++reports_;
  switch (m.kind) {
    case ChannelKind::kExecuted:
      executed_ = m.pid;
      delegate_->OnCommandExecuted(m.pid);
      return true;
    case ChannelKind::kExited:
      exit_ = CommandExit{m.how, m.status, m.signo};
      reading_ = false;  // the report is complete
      delegate_->OnCommandEnded();
      return false;
    default:
      failure_ = m.status;
      reading_ = false;
      delegate_->OnCommandEnded();
      return false;
  }
}

void UnitChannel::StopWriting() noexcept {
  writable_ = false;
  size_pending_ = false;
  if (signal_pending_) SignalDone(false);
}

void UnitChannel::Flush() noexcept {
  if (!writable_ || !fd_) return;
  if (signal_pending_) {
    uint8_t m[kChannelSignalBytes];
    EncodeSignal(signo_, m);
    ssize_t n = send(fd_.get(), m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;  // stay armed for EPOLLOUT
    if (n != ssize_t(sizeof m)) return StopWriting();  // EPIPE: the monitor is gone
    ++unanswered_signals_;
    SignalDone(true);
  }
  if (size_pending_) {
    uint8_t m[kChannelSizeBytes];
    EncodeWindowSize(cols_, rows_, m);
    ssize_t n = send(fd_.get(), m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n != ssize_t(sizeof m)) return StopWriting();
    size_pending_ = false;
    ++sizes_written_;
  }
}

}  // namespace opencode::daemon
