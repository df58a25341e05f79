// The resize channel (see resize_channel.h). One pending size, written on
// EPOLLOUT from the loop: Request() only stores and enables the source.
#include "daemon/resize_channel.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>

#include "common/scm_rights.h"
#include "common/size_message.h"
#include "daemon/status_macros.h"

namespace opencode::daemon {

absl::StatusOr<UniqueFd> CreateResizeChannel(int stream) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
    return Errno(errno, "resize channel: creating the pair");
  UniqueFd ours(sv[0]);
  UniqueFd theirs(sv[1]);
  // The unit's end is a blocking socket: the resizer sleeps in poll anyway.
  int flags = fcntl(theirs.get(), F_GETFL);
  if (flags < 0 || fcntl(theirs.get(), F_SETFL, flags & ~O_NONBLOCK) < 0)
    return Errno(errno, "fcntl(resize channel)");
  // A fresh stream socket always has room for one byte.
  ssize_t n = SendWithFd(stream, &kResizeHandoffByte, 1, theirs.get());
  if (n < 0) return Errno(int(-n), "sendmsg(resize handoff)");
  if (n != 1) return Errno(EIO, "sendmsg(resize handoff)");
  return ours;  // `theirs` closes here: the in-flight message holds the only reference
}

ResizeChannel::ResizeChannel(sd_event* event, UniqueFd fd) : event_(event), fd_(std::move(fd)) {}

ResizeChannel::~ResizeChannel() = default;

absl::Status ResizeChannel::Init() {
  sd_event_source* s = nullptr;
  int r = sd_event_add_io(event_, &s, fd_.get(), EPOLLOUT, &ResizeChannel::OnIo, this);
  if (r < 0) return SdError(r, "sd_event_add_io(resize channel)");
  source_.reset(s);
  // Same priority as the pump: a size is part of the terminal's data path.
  sd_event_source_set_priority(s, kPumpPriority);
  sd_event_source_set_enabled(s, SD_EVENT_OFF);
  return absl::OkStatus();
}

void ResizeChannel::Request(uint16_t cols, uint16_t rows) noexcept {
  if (!fd_) return;
  cols_ = cols;
  rows_ = rows;
  pending_ = true;
  if (source_) sd_event_source_set_enabled(source_.get(), SD_EVENT_ON);
}

int ResizeChannel::OnIo(sd_event_source* /*s*/, int /*fd*/, uint32_t revents, void* userdata) noexcept {
  auto* self = static_cast<ResizeChannel*>(userdata);
  if ((revents & (EPOLLHUP | EPOLLERR)) != 0 && (revents & EPOLLOUT) == 0) {
    self->source_.reset();
    self->fd_.reset();
    self->pending_ = false;
    return 0;
  }
  self->Flush();
  return 0;
}

void ResizeChannel::Flush() noexcept {
  if (!pending_ || !fd_) {
    if (source_) sd_event_source_set_enabled(source_.get(), SD_EVENT_OFF);
    return;
  }
  uint8_t msg[limits::kResizePayload];
  EncodeSizeMessage(cols_, rows_, msg);
  ssize_t n = send(fd_.get(), msg, sizeof msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;  // stay armed for EPOLLOUT
  if (n != ssize_t(sizeof msg)) {
    // EPIPE/ECONNRESET: the resizer is gone (its command exited). Nothing
    // left to resize; drop the channel.
    source_.reset();
    fd_.reset();
    pending_ = false;
    return;
  }
  pending_ = false;
  ++written_;
  sd_event_source_set_enabled(source_.get(), SD_EVENT_OFF);
}

}  // namespace opencode::daemon
