// Socket activation and admission control (see listener.h).
#include "daemon/listener.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

#include "common/envelope.h"
#include "common/errors.h"
#include "common/frame.h"
#include "common/limits.h"
#include "daemon/base/async_close.h"
#include "daemon/base/journal.h"
#include "daemon/base/status_macros.h"

namespace opencode::daemon {
namespace {

// SO_PEERCRED's pid, or 0. Only ever used to refuse: a pid from the time of
// connect() may since belong to another process.
pid_t PeerPid(int conn) noexcept {
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred)) return 0;
  return cred.pid;
}

// A drop-in on the socket unit (PassCredentials=, PassPIDFD=, PassSecurity=)
// would make the kernel attach control data to every message a peer sends,
// SCM_PIDFD even a descriptor; accepted sockets inherit these flags from the
// listener, so clearing them here clears them for every connection.
absl::Status ClearPassOptions(int sock) {
  constexpr int kSoPassPidfd = 76;  // Linux 6.5; the C library's headers may predate it
  for (int option : {SO_PASSCRED, SO_PASSSEC, kSoPassPidfd}) {
    int value = 0;
    socklen_t len = sizeof value;
    if (getsockopt(sock, SOL_SOCKET, option, &value, &len) < 0) {
      if (errno == ENOPROTOOPT) continue;  // a kernel without it cannot set it either
      return Errno(errno, absl::StrCat("getsockopt(listening socket, ", option, ")"));
    }
    if (value == 0) continue;
    value = 0;
    if (setsockopt(sock, SOL_SOCKET, option, &value, sizeof value) < 0)
      return Errno(errno, absl::StrCat("clearing socket option ", option, " on the listening socket"));
    Log(LOG_WARNING, absl::StrCat("the listening socket had socket option ", option,
                                  " set (a drop-in on opencode-pty-supervisor.socket?); cleared"));
  }
  return absl::OkStatus();
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

Listener::Listener(sd_event* event, UniqueFd socket, Delegate* delegate, Lingerer* lingerer)
    : event_(event), socket_(std::move(socket)), delegate_(delegate), lingerer_(lingerer) {}

absl::Status Listener::Init() {
  // systemd passes the listening socket in blocking mode; accepting a burst
  // from a blocking socket would block the loop on the first empty accept.
  int flags = fcntl(socket_.get(), F_GETFL);
  if (flags < 0 || fcntl(socket_.get(), F_SETFL, flags | O_NONBLOCK) < 0)
    return Errno(errno, "fcntl(listening socket, O_NONBLOCK)");
  RETURN_IF_ERROR(ClearPassOptions(socket_.get()));
  sd_event_source* s = nullptr;
  int r;
  if (int wake = AsyncCloseWakeFd(); wake >= 0) {
    r = sd_event_add_io(event_, &s, wake, EPOLLIN, &Listener::OnCloserCaughtUp, this);
    if (r < 0) return SdError(r, "sd_event_add_io(closer wake)");
    closer_wake_.reset(s);
    sd_event_source_set_priority(s, kDefaultPriority);
  }
  r = sd_event_add_io(event_, &s, socket_.get(), EPOLLIN, &Listener::OnReadable, this);
  if (r < 0) return SdError(r, "sd_event_add_io(listener)");
  source_.reset(s);
  sd_event_source_set_priority(s, kDefaultPriority);
  sd_event_source_set_enabled(s, SD_EVENT_OFF);
  r = sd_event_add_time_relative(event_, &s, CLOCK_MONOTONIC, limits::kAcceptBackoffMinUsec, 0,
                                 &Listener::OnBackoff, this);
  if (r < 0) return SdError(r, "sd_event_add_time(listener backoff)");
  backoff_.reset(s);
  sd_event_source_set_enabled(s, SD_EVENT_OFF);
  // The yield runs at the housekeeping's priority: sd-event dispatches the
  // highest-priority pending source first, so a listening socket that stays
  // readable would otherwise keep idle-priority work from ever running.
  r = sd_event_add_defer(event_, &s, &Listener::OnYielded, this);
  if (r < 0) return SdError(r, "sd_event_add_defer(listener yield)");
  yield_.reset(s);
  sd_event_source_set_priority(s, kReapPriority);
  sd_event_source_set_enabled(s, SD_EVENT_OFF);
  backoff_usec_ = limits::kAcceptBackoffMinUsec;
  return absl::OkStatus();
}

void Listener::Enable(bool enabled) noexcept {
  enabled_ = enabled;
  Apply();
}

void Listener::Apply() noexcept {
  if (!source_) return;
  bool on = enabled_ && !paused_ && !yielding_ && !closer_behind_;
  sd_event_source_set_enabled(source_.get(), on ? SD_EVENT_ON : SD_EVENT_OFF);
}

void Listener::DescriptorsFreed() noexcept {
  if (!paused_) return;
  paused_ = false;
  if (backoff_) sd_event_source_set_enabled(backoff_.get(), SD_EVENT_OFF);
  Apply();
}

int Listener::OnReadable(sd_event_source* /*s*/, int /*fd*/, uint32_t /*revents*/,
                         void* userdata) noexcept {
  static_cast<Listener*>(userdata)->AcceptSome();
  return 0;
}

int Listener::OnCloserCaughtUp(sd_event_source* /*s*/, int fd, uint32_t /*revents*/,
                               void* userdata) noexcept {
  eventfd_t ignored;
  (void)eventfd_read(fd, &ignored);
  auto* self = static_cast<Listener*>(userdata);
  self->closer_behind_ = AsyncCloseBacklog() >= limits::kCloseBacklogPause;
  self->Apply();
  return 0;
}

int Listener::OnBackoff(sd_event_source* /*s*/, uint64_t /*usec*/, void* userdata) noexcept {
  auto* self = static_cast<Listener*>(userdata);
  self->paused_ = false;
  self->Apply();
  return 0;
}

int Listener::OnYielded(sd_event_source* /*s*/, void* userdata) noexcept {
  auto* self = static_cast<Listener*>(userdata);
  self->yielding_ = false;
  self->Apply();
  return 0;
}

void Listener::Pause() noexcept {
  paused_ = true;
  Apply();
  if (backoff_) {
    sd_event_source_set_time_relative(backoff_.get(), backoff_usec_);
    sd_event_source_set_enabled(backoff_.get(), SD_EVENT_ONESHOT);
  }
  backoff_usec_ = std::min(2 * backoff_usec_, limits::kAcceptBackoffMaxUsec);
}

void Listener::AcceptSome() noexcept {
  // A bounded burst per wakeup keeps accepting fair to running sessions.
  for (size_t i = 0; i < limits::kAcceptBurst; ++i) {
    if (AsyncCloseBacklog() >= limits::kCloseBacklogPause) {
      // Each refusal hands the closer one more descriptor: while it is this
      // far behind (a close that sleeps), peers wait in the backlog instead.
      static LogLimiter limiter;
      LogLimited(limiter, LOG_WARNING,
                 absl::StrCat("not accepting: ", AsyncCloseBacklog(),
                              " descriptors wait for the closer thread"));
      closer_behind_ = true;
      Apply();
      return;
    }
    UniqueFd conn(accept4(socket_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (conn) {
      backoff_usec_ = limits::kAcceptBackoffMinUsec;
      Admit(std::move(conn));
      continue;
    }
    if (errno == EAGAIN || errno == EINTR) return;
    if (errno == EMFILE || errno == ENFILE) {
      // The peer waits in the backlog and the socket stays readable: stop
      // watching it until the timer or a freed descriptor.
      static LogLimiter limiter;
      LogLimited(limiter, LOG_WARNING,
                 absl::StrCat("accept4: ", strerror(errno), ": not accepting for ",
                              backoff_usec_ / 1000, " ms or until a session ends"));
      Pause();
      return;
    }
    // ECONNABORTED and friends concern one peer.
    if (errno != ECONNABORTED) {
      static LogLimiter limiter;
      LogLimited(limiter, LOG_WARNING, absl::StrCat("accept4: ", strerror(errno)));
    }
    return;
  }
  // A full burst: more may wait. Let everything pending (down to the idle
  // housekeeping) run before the next one.
  yielding_ = true;
  Apply();
  if (yield_) sd_event_source_set_enabled(yield_.get(), SD_EVENT_ONESHOT);
}

void Listener::Refuse(UniqueFd conn, ErrorCode code, std::string_view message) noexcept {
  EnvelopeWriter w("error");
  w.Str("code", ErrorCodeName(code)).Str("message", message);
  std::string frame;
  AppendFrame(FrameType::kEvent, w.Finish(), &frame);
  // A fresh socket's send buffer always holds one small envelope; if not,
  // the peer loses the reason, never the refusal.
  (void)send(conn.get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  // A lingering close, so that a client that has not yet seen its connect
  // complete gets the envelope, not a reset.
  lingerer_->Close(std::move(conn));
  // A same-UID connect loop reaches this line at will.
  static LogLimiter limiter;
  LogFields f;
  f.error = code;
  LogLimited(limiter, LOG_WARNING, f, absl::StrCat("connection refused at admission: ", absl::string_view(message.data(), message.size())));
}

void Listener::Admit(UniqueFd conn) noexcept {
  if (delegate_->SessionCount() >= limits::kMaxSessions)
    return Refuse(std::move(conn), ErrorCode::kTooManySessions, "too many sessions");
  size_t handshakes = delegate_->HandshakeCount();
  if (handshakes >= limits::kMaxPendingHandshakes)
    return Refuse(std::move(conn), ErrorCode::kTooManyHandshakes, "too many pending connections");
  // Near the cap, a peer that systemd's latest answer says is not the MainPID
  // does not get a slot; one that matches still goes through the full check.
  const MainPidCache* cache = delegate_->main_pid_cache();
  if (handshakes >= limits::kHandshakePressure && cache != nullptr &&
      cache->NamesAnotherProcess(PeerPid(conn.get())))
    return Refuse(std::move(conn), ErrorCode::kTooManyHandshakes,
                  "too many pending connections; the rest are kept for the application's MainPID");
  delegate_->OnConnection(std::move(conn));
}

}  // namespace opencode::daemon
