// Socket activation and admission control (see listener.h).
#include "daemon/listener.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

#include "common/envelope.h"
#include "common/errors.h"
#include "common/frame.h"
#include "common/limits.h"
#include "daemon/journal.h"
#include "daemon/status_macros.h"

namespace opencode::daemon {
namespace {

void Refuse(UniqueFd conn, ErrorCode code) noexcept {
  EnvelopeWriter w("error");
  w.Str("code", ErrorCodeName(code))
      .Str("message", code == ErrorCode::kTooManySessions ? "too many sessions"
                                                          : "too many pending connections");
  std::string frame;
  AppendFrame(FrameType::kEvent, w.Finish(), &frame);
  // A fresh socket's send buffer always holds one small envelope; if not,
  // the peer loses the reason, never the refusal.
  (void)send(conn.get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  LogFields f;
  f.error = code;
  Log(LOG_WARNING, f, "connection refused at admission");
}

}  // namespace

absl::StatusOr<UniqueFd> Listener::FromSystemd() {
  // unset_environment=1: nothing we might start later sees LISTEN_*; the
  // passed descriptors are made close-on-exec by sd_listen_fds itself.
  int n = sd_listen_fds(1);
  if (n < 0) return SdError(n, "sd_listen_fds");
  if (n != 1)
    return absl::FailedPreconditionError(
        "expected exactly one socket from opencode-pty-supervisor.socket");
  int fd = SD_LISTEN_FDS_START;
  int r = sd_is_socket_unix(fd, SOCK_STREAM, /*listening=*/1, nullptr, 0);
  if (r < 0) return SdError(r, "sd_is_socket_unix");
  if (r == 0) return absl::FailedPreconditionError("passed socket is not a listening AF_UNIX stream");
  return UniqueFd(fd);
}

Listener::Listener(sd_event* event, UniqueFd socket, Delegate* delegate)
    : event_(event), socket_(std::move(socket)), delegate_(delegate) {}

absl::Status Listener::Init() {
  // systemd passes the listening socket in blocking mode; accepting a burst
  // from a blocking socket would block the loop on the first empty accept.
  int flags = fcntl(socket_.get(), F_GETFL);
  if (flags < 0 || fcntl(socket_.get(), F_SETFL, flags | O_NONBLOCK) < 0)
    return Errno(errno, "fcntl(listening socket, O_NONBLOCK)");
  sd_event_source* s = nullptr;
  int r = sd_event_add_io(event_, &s, socket_.get(), EPOLLIN, &Listener::OnReadable, this);
  if (r < 0) return SdError(r, "sd_event_add_io(listener)");
  source_.reset(s);
  sd_event_source_set_priority(s, kDefaultPriority);
  sd_event_source_set_enabled(s, SD_EVENT_OFF);
  return absl::OkStatus();
}

void Listener::Enable(bool enabled) noexcept {
  if (source_) sd_event_source_set_enabled(source_.get(), enabled ? SD_EVENT_ON : SD_EVENT_OFF);
}

int Listener::OnReadable(sd_event_source* /*s*/, int /*fd*/, uint32_t /*revents*/,
                         void* userdata) noexcept {
  static_cast<Listener*>(userdata)->AcceptSome();
  return 0;
}

void Listener::AcceptSome() noexcept {
  // A bounded burst per wakeup keeps accepting fair to running sessions.
  for (size_t i = 0; i < limits::kAcceptBurst; ++i) {
    UniqueFd conn(accept4(socket_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn) {
      if (errno == EAGAIN || errno == EINTR) return;
      // ECONNABORTED and friends concern one peer; EMFILE/ENFILE are logged
      // and retried at the next wakeup (the peer waits in the backlog).
      if (errno != ECONNABORTED)
        Log(LOG_WARNING, absl::StrCat("accept4: ", strerror(errno)));
      return;
    }
    if (delegate_->SessionCount() >= limits::kMaxSessions) {
      Refuse(std::move(conn), ErrorCode::kTooManySessions);
      continue;
    }
    if (delegate_->HandshakeCount() >= limits::kMaxPendingHandshakes) {
      Refuse(std::move(conn), ErrorCode::kTooManyHandshakes);
      continue;
    }
    delegate_->OnConnection(std::move(conn));
  }
}

}  // namespace opencode::daemon
