// The per-connection state machine (see session.h and docs/PROTOCOL.md
// section 6). Every path that ends a session goes through Fail(), DropClient()
// or the exit path, and all three converge on MaybeFinish(), which waits for
// the unit to be proven gone before the Supervisor may destroy the session.
#include "daemon/session/session.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/env_overlay.h"
#include "common/envelope.h"
#include "common/launch.h"
#include "common/limits.h"
#include "daemon/auth/identity.h"
#include "daemon/base/absl_compat.h"
#include "daemon/base/async_close.h"
#include "daemon/base/journal.h"
#include "daemon/base/status_macros.h"

namespace opencode::daemon {
namespace {

// What the client is told; the journal gets the detailed reason.
std::string_view ClientMessage(ErrorCode code) {
  switch (code) {
    case ErrorCode::kStartTimeout: return "START frame not complete within the deadline";
    case ErrorCode::kUnauthenticated: return "peer is not the main process of opencode-v2.service";
    case ErrorCode::kRootRefused: return "peer uid 0 is refused";
    case ErrorCode::kKernelUnsupported: return "this kernel has no SO_PEERPIDFD (Linux 6.5 or later is required)";
    case ErrorCode::kUnitStartFailed: return "systemd did not start the PTY unit";
    case ErrorCode::kUnitPropertyMismatch: return "systemd did not apply the PTY unit's properties";
    case ErrorCode::kNotDirectory: return "the descriptor is not a directory";
    case ErrorCode::kNoDescriptor: return "START arrived without its directory descriptor";
    case ErrorCode::kExtraDescriptor: return "unexpected descriptor";
    case ErrorCode::kBadUtf8: return "INPUT is not valid UTF-8";
    case ErrorCode::kBadSignal: return "signal not allowed";
    case ErrorCode::kBadEnv: return "ENV frame malformed or missing, or a name given twice";
    case ErrorCode::kBadEnvName: return "ENV frame: a name is not [A-Za-z_][A-Za-z0-9_]*";
    case ErrorCode::kEnvTooMany: return "ENV frame: too many variables";
    case ErrorCode::kEnvTooLong: return "ENV frame: a variable or all of them too long";
    case ErrorCode::kProtocolState: return "frame not allowed in this state";
    case ErrorCode::kStopFailed: return "systemd did not stop the PTY unit; it is being stopped and reaped";
    case ErrorCode::kLaunchFailed: return "the launcher refused or could not prepare the command; it did not run";
    case ErrorCode::kBadDetach: return "START's grace or scrollback is outside its bounds";
    case ErrorCode::kTooManyDetachable: return "too many detachable sessions";
    case ErrorCode::kScrollbackExhausted: return "the supervisor's scrollback memory is taken by other detachable sessions";
    case ErrorCode::kBadAttach: return "ATTACH payload malformed";
    case ErrorCode::kNoSuchSession: return "no detachable session has this id";
    case ErrorCode::kSessionAttached: return "the session has a connection";
    case ErrorCode::kBadCursor: return "the cursor is past the session's output";
    case ErrorCode::kInternal: return "supervisor-side failure";
    default: return "malformed frame";
  }
}

absl::StatusOr<std::string> NewSessionId() {
  uint8_t bytes[16];
  // GRND_NONBLOCK: never wait on the loop for the entropy pool; before it is
  // initialised (early boot only) the session fails instead.
  ssize_t n = getrandom(bytes, sizeof(bytes), GRND_NONBLOCK);
  if (n != static_cast<ssize_t>(sizeof(bytes))) return Errno(n < 0 ? errno : EIO, "getrandom");
  std::array<uint8_t, 16> id;
  std::copy(std::begin(bytes), std::end(bytes), id.begin());
  return HexId(id);
}

}  // namespace

Session::Session(const SessionContext& ctx, SessionObserver* observer, UniqueFd conn)
    : ctx_(ctx), observer_(observer), initial_conn_(std::move(conn)) {}

// The connection (before the pump takes it) and our end of the PTY stream are
// writable by unprivileged processes: closed off the loop (async_close.h).
Session::~Session() {
  AsyncClose(std::move(initial_conn_));
  AsyncClose(std::move(pty_stream_));
  AsyncClose(std::move(pending_dir_));
}

Session::HeapTrim::~HeapTrim() { malloc_trim(0); }

absl::Status Session::Start() {
  ASSIGN_OR_RETURN(id_, NewSessionId());
  // A peer already gone (or a kernel without SO_PEERPIDFD) leaves this
  // empty: the authenticator refuses it, and OnAuthenticated fails closed.
  if (absl::StatusOr<PeerCredentials> cred = ReadPeerCredentials(initial_conn_.get()); cred.ok())
    peer_pidfd_ = std::move(cred->pidfd);
  int sock = initial_conn_.get();
  pump_ = std::make_unique<Pump>(ctx_.event, std::move(initial_conn_),
                                 static_cast<Pump::Delegate*>(this));
  RETURN_IF_ERROR(pump_->Init());
  pump_->SetMode(Pump::Mode::kHold);  // not a byte is read before authentication
  sd_event_source* s = nullptr;
  int r = sd_event_add_time(ctx_.event, &s, CLOCK_MONOTONIC, 0, 0, &Session::OnDeadline, this);
  if (r < 0) return SdError(r, "sd_event_add_time(session deadline)");
  timer_.reset(s);
  sd_event_source_set_enabled(s, SD_EVENT_OFF);  // armed per phase by Arm()
  // The START deadline runs from accept, so a slow authentication counts too.
  Arm(Deadline::kStartFrame, limits::kStartFrameDeadlineUsec);
  auth_ = ctx_.authenticator->Authenticate(sock, [this](AuthResult result) {
    OnAuthenticated(std::move(result));
  });
  // A refusal from kernel facts alone arrives before Authenticate() returns.
  if (auth_finished_) auth_.reset();
  return absl::OkStatus();
}

LogFields Session::Fields(ErrorCode code) const noexcept {
  LogFields f;
  f.session = id_;
  f.unit = unit_;
  f.invocation = invocation_;
  f.client_invocation = peer_.client_invocation;
  f.peer_pid = peer_.pid;
  f.peer_uid = peer_.pid > 0 ? peer_.uid : static_cast<uid_t>(-1);
  f.error = code;
  return f;
}

void Session::SetState(State s) noexcept {
  state_ = s;
  observer_->OnSessionChanged(this);
}

void Session::Arm(Deadline kind, uint64_t usec) noexcept {
  deadline_ = kind;
  if (!timer_) return;
  if (kind == Deadline::kNone) {
    sd_event_source_set_enabled(timer_.get(), SD_EVENT_OFF);
    return;
  }
  uint64_t now = 0;
  sd_event_now(ctx_.event, CLOCK_MONOTONIC, &now);
  sd_event_source_set_time(timer_.get(), now + usec);
  sd_event_source_set_enabled(timer_.get(), SD_EVENT_ONESHOT);
}

int Session::OnDeadline(sd_event_source* /*s*/, uint64_t /*usec*/, void* userdata) noexcept {
  auto* self = static_cast<Session*>(userdata);
  Deadline kind = self->deadline_;
  self->deadline_ = Deadline::kNone;
  switch (kind) {
    case Deadline::kStartFrame:
      if (self->in_handshake()) self->Fail(ErrorCode::kStartTimeout, "START deadline passed");
      break;
    case Deadline::kUnitStart:
      if (self->state_ == State::kStarting)
        self->Fail(ErrorCode::kUnitStartFailed, "unit did not start within the deadline");
      break;
    case Deadline::kStop:
      // STOP accepted, but systemd never reported the unit finished.
      if (self->state_ == State::kRunning && !self->exit_ && !self->ExtendStopDeadline())
        self->Fail(ErrorCode::kStopFailed, "unit did not stop within the deadline");
      break;
    case Deadline::kStreamEof:
      // The unit is finished and reaped, but something outside it still holds
      // the PTY stream: stop waiting for an EOF that may never come.
      if (self->state_ == State::kRunning && !self->output_complete_) {
        self->Notice("output_incomplete");
        self->output_complete_ = true;
        self->pump_->DetachPty();
        self->MaybeSendExit();
      }
      break;
    case Deadline::kFlush:
      // The client did not read its last frames: the unit is handled
      // independently, the connection is not worth holding.
      self->DropClient();
      break;
    case Deadline::kNone:
      break;
  }
  return 0;
}

void Session::Notice(std::string_view code, std::string_view signal) noexcept {
  if (detached_) return;  // nobody to tell; the exit is kept for the next attach
  EnvelopeWriter w("notice");
  w.Str("code", code);
  if (!signal.empty()) w.Str("signal", signal);
  // The pump only decodes a control frame when a notice fits.
  static LogLimiter limiter;
  if (!pump_->QueueEnvelope(w.Finish()))
    LogLimited(limiter, LOG_WARNING, Fields(), "notice dropped: envelope queue full");
}

// ------------------------------------------------------------ handshake

void Session::OnAuthenticated(AuthResult result) noexcept {
  auth_finished_ = true;
  auth_.reset();
  peer_ = std::move(result.peer);
  if (result.code != ErrorCode::kOk) {
    static LogLimiter limiter;
    LogLimited(limiter, LOG_WARNING, Fields(result.code), absl::StrCat("connection refused: ", result.why));
    return Fail(result.code, result.why);
  }
  // From here on the connection is served only while the process that
  // authenticated lives: a START, input or a running PTY must not outlive
  // the MainPID for whoever else still holds the connection (its child, a
  // process it passed the descriptor to, after an application restart).
  if (!peer_pidfd_ || !PidfdAlive(peer_pidfd_.get()))
    return Fail(ErrorCode::kUnauthenticated, "the authenticated peer exited before its session began");
  if (absl::Status st = WatchPeer(); !st.ok()) return Fail(ErrorCode::kInternal, SV(st.message()));
  Log(LOG_INFO, Fields(),
      peer_.pidfd_witness
          ? "connection authenticated (MainPID, live pidfd, GetUnitByPIDFD)"
          : "connection authenticated (MainPID, live pidfd; this systemd has no GetUnitByPIDFD)");
  SetState(State::kAwaitStart);
  pump_->SetMode(Pump::Mode::kAwaitStart);
}

// The exit of the peer in peer_pidfd_ wakes OnPeerExit.
absl::Status Session::WatchPeer() noexcept {
  sd_event_source* watch = nullptr;
  int r = sd_event_add_io(ctx_.event, &watch, peer_pidfd_.get(), EPOLLIN, &Session::OnPeerExit, this);
  if (r < 0) return SdError(r, "sd_event_add_io(peer pidfd)");
  peer_watch_.reset(watch);
  return absl::OkStatus();
}

int Session::OnPeerExit(sd_event_source* /*s*/, int /*fd*/, uint32_t /*revents*/, void* userdata) noexcept {
  auto* self = static_cast<Session*>(userdata);
  self->peer_watch_.reset();
  // Ended already (its connection closed, or a terminal envelope queued):
  // that path stops and proves the unit as it is.
  if (self->terminal_queued_ || self->client_gone_) return 0;
  // The kernel closes an exiting process's descriptors before its pidfd
  // reports the exit. A connection nobody holds any more was closed by that
  // exit: the application went, and this is its disconnect, whose own event
  // may not have been dispatched yet (or cannot be: a half-closed client's
  // connection is not watched). Nothing more is read from it either way.
  if (self->pump_->PeerHungUp()) {
    self->OnClientGone();
    return 0;
  }
  if (self->CanDetach()) {
    self->Detach("the authenticated peer (MainPID) exited; session detached");
    return 0;
  }
  self->Fail(ErrorCode::kUnauthenticated, "the authenticated peer (MainPID) exited; its connection is no longer served");
  return 0;
}

void Session::OnStartFrame(std::span<const uint8_t> payload, UniqueFd dir) noexcept {
  if (state_ != State::kAwaitStart) return Fail(ErrorCode::kProtocolState, "START out of state");
  // The watch (OnPeerExit) may not have run yet when START and the peer's
  // exit arrive in the same loop pass: ask the pidfd itself before a unit.
  if (!peer_pidfd_ || !PidfdAlive(peer_pidfd_.get()))
    return Fail(ErrorCode::kUnauthenticated, "the authenticated peer exited before its START was read");
  StartRequest request;
  if (ErrorCode c = ParseStartPayload(payload, &request); c != ErrorCode::kOk) {
    AsyncClose(std::move(dir));
    return Fail(c, "bad START payload");
  }
  if (request.detach.detachable()) {
    if (ErrorCode c = ReserveDetachable(request.detach); c != ErrorCode::kOk) {
      AsyncClose(std::move(dir));
      return Fail(c, "detachable session refused");
    }
  }
  // The type from the inode the kernel already has (AT_STATX_DONT_SYNC): a
  // FUSE file's server is not asked, so it cannot make this call wait. An
  // inode's type never changes, so the cached answer is the true one.
  struct statx stx {};
  if (statx(dir.get(), "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &stx) < 0 ||
      (stx.stx_mask & STATX_TYPE) == 0 || !S_ISDIR(stx.stx_mode)) {
    AsyncClose(std::move(dir));
    return Fail(ErrorCode::kNotDirectory, "descriptor is not a directory");
  }
  if (request.env) {
    // The application's ENV frame comes next on this connection, before
    // anything is asked of systemd; the START deadline still runs.
    pending_start_ = std::move(request);
    pending_dir_ = std::move(dir);
    pump_->SetMode(Pump::Mode::kAwaitEnv);
    return;
  }
  uint8_t empty[kChannelEmptyEnvBytes];
  EncodeEmptyEnvironment(empty);
  StartUnit(std::move(request), std::move(dir), empty);
}

// The overlay is checked whole, the names the application's unit set for
// itself are dropped (common/env_overlay.h), and the rest goes into the 'V'
// packet on the unit channel: never into a unit property, argv, a file or
// the journal (no name or value is logged).
void Session::OnEnvFrame(std::span<const uint8_t> payload) noexcept {
  if (state_ != State::kAwaitStart || !pending_start_) return Fail(ErrorCode::kProtocolState, "ENV out of state");
  if (!peer_pidfd_ || !PidfdAlive(peer_pidfd_.get()))
    return Fail(ErrorCode::kUnauthenticated, "the authenticated peer exited before its ENV was read");
  if (ErrorCode c = CheckEnvList(payload.data(), payload.size()); c != ErrorCode::kOk)
    return Fail(c, "bad ENV payload");
  std::string packet(1 + payload.size(), '\0');
  packet[0] = char(ChannelKind::kEnvironment);
  size_t n = FilterEnvList(payload.data(), payload.size(), reinterpret_cast<uint8_t*>(packet.data() + 1));
  packet.resize(1 + n);
  StartRequest request = std::move(*pending_start_);
  pending_start_.reset();
  StartUnit(std::move(request), std::move(pending_dir_),
            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(packet.data()), packet.size()));
  explicit_bzero(packet.data(), packet.size());
}

void Session::StartUnit(StartRequest request, UniqueFd peer_dir, std::span<const uint8_t> env_packet) noexcept {
  OffLoopFd dir{std::move(peer_dir)};  // the peer's directory, whatever path is taken
  // The PTY stream. Both ends close-on-exec at birth; only ours is
  // nonblocking (the unit's stdin/stdout stay ordinary blocking sockets).
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    return Fail(ErrorCode::kInternal, absl::StrCat("socketpair: ", strerror(errno)));
  UniqueFd ours(sv[0]);
  UniqueFd theirs(sv[1]);
  int flags = fcntl(ours.get(), F_GETFL);
  if (flags < 0 || fcntl(ours.get(), F_SETFL, flags | O_NONBLOCK) < 0)
    return Fail(ErrorCode::kInternal, absl::StrCat("fcntl(O_NONBLOCK): ", strerror(errno)));
  // The unit channel's unit end goes first on the stream, so it is waiting
  // when the launcher starts (it reads it before anything else); the 'V'
  // packet waits in the channel for --exec.
  absl::StatusOr<UniqueFd> channel = CreateUnitChannel(ours.get(), env_packet);
  if (!channel.ok()) return Fail(ErrorCode::kInternal, SV(channel.status().message()));
  channel_ = std::make_unique<UnitChannel>(ctx_.event, std::move(*channel), static_cast<UnitChannel::Delegate*>(this));
  if (absl::Status st = channel_->Init(); !st.ok()) return Fail(ErrorCode::kInternal, SV(st.message()));

  UnitRequest req;
  req.session_id = id_;
  req.unit_name = SessionUnitName(id_);
  req.uid = peer_.uid;
  req.cols = request.cols;
  req.rows = request.rows;
  req.argv = std::move(request.argv);
  unit_ = req.unit_name;

  monitor_ = std::make_unique<UnitMonitor>(
      ctx_.systemd, ctx_.tracker, unit_,
      [this](absl::StatusOr<UnitSnapshot> s) { OnSnapshot(std::move(s)); });
  if (absl::Status st = monitor_->Start(); !st.ok())
    return Fail(ErrorCode::kInternal, SV(st.message()));
  monitor_->SetPolling(true);
  // STARTING waits for the start job's end: its JobRemoved is the hint, the
  // unit's PropertiesChanged during the job are not (each would be two GetAll
  // systemd answers while it runs the job); the tick stays the safety net.
  monitor_->SetJobHintsOnly(true);

  SetState(State::kStarting);
  Arm(Deadline::kUnitStart, limits::kUnitStartDeadlineUsec);
  auto pending = ctx_.systemd->StartUnit(req, theirs.get(), dir.fd.get(),
                                         [this](absl::Status st) { OnStartReply(std::move(st)); });
  // The message carrying duplicates of `theirs` and `dir` is released as
  // soon as it is sent (at once, or when the bus call throttle lets it go);
  // closing ours here leaves systemd's copies the only ones, so EOF of the
  // stream means the unit's processes are done with it.
  theirs.reset();
  AsyncClose(std::move(dir.fd));
  if (!pending.ok()) return Fail(ErrorCode::kUnitStartFailed, SV(pending.status().message()));
  start_call_ = std::move(*pending);
  unit_requested_ = true;
  request_ = std::move(req);
  pty_stream_ = std::move(ours);
  Log(LOG_INFO, Fields(), "starting PTY unit");
}

void Session::OnStartReply(absl::Status status) noexcept {
  start_call_.reset();
  if (state_ != State::kStarting) {
    // The session ended while the call was in flight (client gone, deadline):
    // whatever systemd made of it is stopped and proven gone now.
    BeginReap();
    return MaybeFinish();
  }
  if (!status.ok()) {
    // Only systemd's error; the request (argv) is never logged.
    return Fail(ErrorCode::kUnitStartFailed, SV(status.message()));
  }
  // No query now: systemd answers StartTransientUnit when the start job is
  // queued, and runs the job only after the calls already waiting in its
  // loop, so a query here would only delay the start it asks about. The
  // job's JobRemoved (after this reply on the same connection) is the hint;
  // the poll tick (kRequeryIntervalUsec) is the safety net.
}

void Session::OnSnapshot(absl::StatusOr<UnitSnapshot> snapshot) noexcept {
  if (!snapshot.ok()) {
    if (state_ == State::kStarting)
      return Fail(ErrorCode::kUnitStartFailed, SV(snapshot.status().message()));
    Log(LOG_WARNING, Fields(), absl::StrCat("unit query failed: ", snapshot.status().message()));
    return;  // RUNNING: the next hint or tick asks again
  }
  if (state_ == State::kStarting) return OnStarting(*snapshot);
  if (state_ == State::kRunning) return OnRunningSnapshot(*snapshot);
}

void Session::OnStarting(const UnitSnapshot& snapshot) noexcept {
  if (start_call_) return;  // StartTransientUnit not answered yet
  StartReading start = ReadStart(snapshot);
  if (start.state == StartState::kPending) return;
  if (start.state == StartState::kFailed) return Fail(ErrorCode::kUnitStartFailed, start.why);
  invocation_ = HexId(start.invocation_id);
  absl::Status verified =
      VerifyReadBack(BuildPropertySpecs(*request_), snapshot.unit, snapshot.service);
  if (!verified.ok()) return Fail(ErrorCode::kUnitPropertyMismatch, SV(verified.message()));
  request_.reset();  // argv is no longer needed
  // The gate: the launcher waits for this byte before it execs anything, and
  // it is the first byte on the stream, before any of the client's input (the
  // pump is attached below). A fresh stream's send buffer is empty: one byte
  // always fits. EPIPE/ECONNRESET: the launcher already refused what it was
  // given (every check comes before it waits for the go) and closed the
  // stream; the session goes on to RUNNING, where the unit's end brings the
  // launcher's report and the client gets launch_failed.
  if (send(pty_stream_.get(), &kLaunchGoByte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
    if (errno != EPIPE && errno != ECONNRESET)
      return Fail(ErrorCode::kInternal, absl::StrCat("cannot send the launcher its go: ", strerror(errno)));
    Log(LOG_INFO, Fields(), "the launcher ended before its go");
  }

  EnvelopeWriter w("started");
  w.Str("session", id_)
      .Str("unit", unit_)
      .Str("invocation", invocation_)
      .Str("revision", ctx_.revision)
      .Str("source", ctx_.source);
  if (!pump_->QueueEnvelope(w.Finish()))
    return Fail(ErrorCode::kInternal, "cannot queue the started envelope");
  if (detachable()) {
    pump_->EnableRing(detach_.scrollback);
    struct timespec ts {};
    clock_gettime(CLOCK_REALTIME, &ts);
    started_usec_ = int64_t(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
  }
  if (absl::Status st = pump_->AttachPty(std::move(pty_stream_)); !st.ok())
    return Fail(ErrorCode::kInternal, SV(st.message()));
  Arm(Deadline::kNone, 0);
  monitor_->SetPolling(false);  // until EOF or STOP, signals suffice as hints
  monitor_->SetJobHintsOnly(false);  // the unit's end comes as PropertiesChanged
  SetState(State::kRunning);
  pump_->SetMode(Pump::Mode::kRunning);
  Log(LOG_INFO, Fields(), "PTY unit running");
}

// ------------------------------------------------------------ running

void Session::OnControlFrame(FrameType type, uint8_t arg) noexcept {
  if (state_ != State::kRunning) return;
  switch (type) {
    case FrameType::kSignal:
      return SendSignal(arg);
    case FrameType::kStop:
      Notice("stopping");
      return RequestStop();
    case FrameType::kEof:
      return Notice("input_closed");
    default:
      return Fail(ErrorCode::kProtocolState, "unexpected control frame");
  }
}

void Session::OnResize(uint16_t cols, uint16_t rows) noexcept {
  // After the command exited the channel is gone: the size has nowhere to go.
  if (state_ != State::kRunning || !channel_) return;
  channel_->RequestSize(cols, rows);
}

void Session::SendSignal(uint8_t signo) noexcept {
  // To the command's process only, through its parent in the unit (the
  // monitor): never to script or anything else of the unit. One signal at a
  // time (the channel holds one): the frames behind it wait in the client's
  // socket, so a client cannot make the supervisor queue them.
  if (!channel_ || !channel_->RequestSignal(signo)) return Notice("signal_failed", SignalName(signo));
  HoldInput(kHoldSignal, true);
}

void Session::HoldInput(uint8_t reason, bool hold) noexcept {
  input_holds_ = hold ? (input_holds_ | reason) : (input_holds_ & ~reason);
  pump_->PauseInput(input_holds_ != 0);
}

void Session::OnSignalHandled(uint8_t signo, bool written) noexcept {
  HoldInput(kHoldSignal, false);
  if (state_ != State::kRunning || terminal_queued_) return;
  // Written is not yet sent: signal_sent waits for the monitor's answer.
  // Not written: the monitor is gone (the command already ended) or does
  // not read its channel.
  if (!written) Notice("signal_failed", SignalName(signo));
}

void Session::OnSignalDelivered(uint8_t signo) noexcept {
  if (state_ != State::kRunning || terminal_queued_) return;
  Notice("signal_sent", SignalName(signo));
}

// Input that arrives after the command's end has no reader: it is not
// forwarded, so a client that answers every output chunk with input (an echo
// loop) cannot keep script relaying and the session ends with the command.
void Session::OnCommandEnded() noexcept { pump_->EndPtyInput(); }

void Session::OnCommandExecuted(pid_t pid) noexcept {
  command_pid_ = pid;
  if (state_ == State::kRunning && !terminal_queued_) LowerCpuWeight();
  if (state_ != State::kRunning || terminal_queued_ || detached_) return;
  EnvelopeWriter w("notice");
  w.Str("code", "command_started").Int("pid", pid);
  static LogLimiter limiter;
  if (!pump_->QueueEnvelope(w.Finish()))
    LogLimited(limiter, LOG_WARNING, Fields(), "notice dropped: envelope queue full");
}

// The unit started at kUnitStartCpuWeight; from its command's exec on it
// weighs what every other session does (common/limits.h says why). A failure
// leaves it heavier than its siblings in the slice, nothing more: logged.
// NoSuchUnit: a short command's unit ended and was collected before systemd
// read the call; there is nothing left to weigh.
void Session::LowerCpuWeight() noexcept {
  auto warn = [this](const absl::Status& st) {
    Log(LOG_WARNING, Fields(), absl::StrCat("cannot lower the unit's CPUWeight: ", st.message()));
  };
  auto pending = ctx_.systemd->SetCpuWeight(unit_, limits::kUnitCpuWeight, [this, warn](absl::Status st) {
    weight_call_.reset();
    if (!st.ok() && !IsBusError(st, "org.freedesktop.systemd1.NoSuchUnit")) warn(st);
  });
  if (!pending.ok()) return warn(pending.status());
  weight_call_ = std::move(*pending);
}

void Session::RequestStop() noexcept {
  if (stop_requested_) return;
  stop_requested_ = true;
  (void)sd_event_now(ctx_.event, CLOCK_MONOTONIC, &stop_requested_usec_);
  // The stop job's end (JobRemoved) says when to ask; each PropertiesChanged
  // on the way (the job, deactivating, inactive) would cost systemd two
  // GetAll, and in a mass STOP on a loaded host those answers held back the
  // stop jobs themselves (unit_tracker.cc, OnTick, says why).
  if (monitor_) {
    monitor_->SetPolling(true);
    monitor_->SetJobHintsOnly(true);
  }
  HoldInput(kHoldStop, true);
  Arm(Deadline::kStop, limits::kStopRequestDeadlineUsec);
  auto pending = ctx_.systemd->StopUnit(unit_, [this](absl::Status st) {
    control_call_.reset();
    HoldInput(kHoldStop, false);
    // The client was promised an exit: tell it why there is none, and reap
    // (the reaper stops again and proves the unit gone).
    if (!st.ok()) return Fail(ErrorCode::kStopFailed, absl::StrCat("StopUnit failed: ", st.message()));
    if (monitor_) monitor_->QueryNow();
  });
  if (!pending.ok()) {
    // Not even sent (systemd's connection is closing: a daemon-reexec). The
    // same promise as a failed StopUnit: after `stopping`, stop_failed, and
    // the reaper still stops the unit and proves it gone.
    HoldInput(kHoldStop, false);
    return Fail(ErrorCode::kStopFailed, absl::StrCat("StopUnit not sent: ", pending.status().message()));
  }
  control_call_ = std::move(*pending);
}

// systemd runs stop jobs one after another: in a mass STOP a unit's turn
// comes after every unit queued before it, and on a loaded host 256 units
// took longer than kStopRequestDeadlineUsec (vm.scale.trixie: 20 stops a
// second, the last 22 s after the STOP). Like the reaper's cleanup deadline
// (docs/DESIGN.md, "The cleanup deadline counts no progress, not time"), the
// STOP's counts the time in which systemd made no progress on any PTY unit,
// never past kCleanupHardDeadlineUsec after the STOP. Returns whether the
// deadline was moved.
bool Session::ExtendStopDeadline() noexcept {
  uint64_t now = 0;
  if (!timer_ || ctx_.tracker == nullptr || sd_event_now(ctx_.event, CLOCK_MONOTONIC, &now) < 0) return false;
  uint64_t next = ctx_.tracker->ProgressDeadline(now, limits::kStopRequestDeadlineUsec,
                                                 stop_requested_usec_ + limits::kCleanupHardDeadlineUsec);
  if (next == 0) return false;
  deadline_ = Deadline::kStop;
  sd_event_source_set_time(timer_.get(), next);
  sd_event_source_set_enabled(timer_.get(), SD_EVENT_ONESHOT);
  return true;
}

void Session::OnOutputComplete() noexcept {
  output_complete_ = true;
  // EOF of the stream: the unit's processes are ending; ask until systemd
  // says it finished (hints and the poll tick both re-ask).
  if (monitor_) {
    monitor_->SetPolling(true);
    monitor_->QueryNow();
  }
  MaybeSendExit();
}

void Session::OnRunningSnapshot(const UnitSnapshot& snapshot) noexcept {
  if (exit_) return;
  if (IsUnitCollected(snapshot)) {
    // The command's own report, if any, is what the exit says.
    exit_ = CollectedUnitExit();
    Log(LOG_INFO, Fields(), "PTY unit finished and collected by systemd");
    return BeginReap(Reaper::How::kProveOnly);
  }
  if (!IsUnitFinished(snapshot)) return;
  auto info = ReadUnitExit(snapshot);
  if (!info.ok()) return Fail(ErrorCode::kInternal, SV(info.status().message()));
  exit_ = std::move(*info);
  Log(LOG_INFO, Fields(), absl::StrCat("PTY unit finished: ", AV(exit_->result.Text())));
  BeginReap(Reaper::How::kProveOnly);
}

void Session::MaybeSendExit() noexcept {
  if (state_ != State::kRunning || !exit_ || !output_complete_ || !reap_done_ || terminal_queued_)
    return;
  if (!final_envelope_) final_envelope_ = FinalEnvelope();
  if (detached_) {
    Log(LOG_INFO, Fields(), "the command of a detached session ended; its exit is kept for an attach");
    return;
  }
  QueueTerminal(*final_envelope_);
}

// The exit (or launch_failed) envelope, decided once the unit is gone:
// everything its monitor sent is in the channel.
std::string Session::FinalEnvelope() noexcept {
  ExitFacts facts;
  facts.unit = *exit_;
  facts.stop_requested = stop_requested_;
  if (channel_) {
    channel_->Drain();
    if (channel_->refused() > 0) {
      static LogLimiter limiter;
      LogLimited(limiter, LOG_WARNING, Fields(), "unit channel: a packet from inside the unit was refused");
    }
    facts.command = channel_->command_exit();
    facts.launch_failure = channel_->launch_failure();
    facts.executed = channel_->executed().has_value();
  }
  ExitReport report = DecideExit(facts);
  final_report_ = report;
  if (report.type == ExitReport::Type::kLaunchFailed) {
    static LogLimiter limiter;
    LogLimited(limiter, LOG_WARNING, Fields(report.error),
               absl::StrCat("launcher failed: ", AV(report.reason), " (status ", report.status, ")"));
    EnvelopeWriter w("error");
    w.Str("code", ErrorCodeName(report.error))
        .Str("message", ClientMessage(report.error))
        .Str("reason", report.reason)
        .Int("status", report.status);
    return w.Finish();
  }
  EnvelopeWriter w("exit");
  if (report.code) w.Int("code", *report.code); else w.Null("code");
  if (!report.signal.empty()) w.Str("signal", report.signal); else w.Null("signal");
  w.Str("result", report.result);
  w.Bool("exact", report.exact);
  return w.Finish();
}

// The one terminal envelope (exit or error): the session is ENDING and the
// client has kTerminalFlushDeadlineUsec to read what is left.
void Session::QueueTerminal(std::string envelope) noexcept {
  terminal_queued_ = true;
  pump_->QueueTerminal(std::move(envelope));
  SetState(State::kEnding);
  Arm(Deadline::kFlush, limits::kTerminalFlushDeadlineUsec);
}

// ------------------------------------------------------------ detachable

ErrorCode Session::ReserveDetachable(const DetachOptions& options) noexcept {
  size_t count = 0, bytes = 0;
  observer_->ForEachSession([&](Session& s) {
    if (&s == this || !s.detachable()) return;
    ++count;
    bytes += s.scrollback();
  });
  if (count >= limits::kMaxDetachableSessions) return ErrorCode::kTooManyDetachable;
  if (bytes + options.scrollback > limits::kMaxScrollbackTotalBytes) return ErrorCode::kScrollbackExhausted;
  detach_ = options;
  return ErrorCode::kOk;
}

// Detached instead of ended: RUNNING, nothing terminal decided for the
// client, and no STOP asked for (a client that stopped its session and
// closes wants it ended).
bool Session::CanDetach() const noexcept {
  return detachable() && !detached_ && state_ == State::kRunning && !terminal_queued_ &&
         !client_gone_ && !stop_requested_;
}

void Session::Detach(std::string_view why) noexcept {
  detached_ = true;
  // The old connection reaches nothing from here on, whoever still holds
  // it; the peer it was authenticated for is forgotten.
  peer_watch_.reset();
  AsyncClose(std::move(peer_pidfd_));
  AsyncClose(pump_->DetachConnection());
  if (!grace_timer_) {
    sd_event_source* s = nullptr;
    int r = sd_event_add_time(ctx_.event, &s, CLOCK_MONOTONIC, 0, 0, &Session::OnGraceEnd, this);
    if (r < 0) {
      detached_ = false;
      return DropClient();
    }
    grace_timer_.reset(s);
  }
  uint64_t now = 0;
  sd_event_now(ctx_.event, CLOCK_MONOTONIC, &now);
  sd_event_source_set_time(grace_timer_.get(), now + uint64_t{detach_.grace_sec} * 1000 * 1000);
  sd_event_source_set_enabled(grace_timer_.get(), SD_EVENT_ONESHOT);
  Log(LOG_INFO, Fields(), why);
  observer_->OnSessionChanged(this);
  MaybeSendExit();
}

int Session::OnGraceEnd(sd_event_source* /*s*/, uint64_t /*usec*/, void* userdata) noexcept {
  auto* self = static_cast<Session*>(userdata);
  if (!self->detached_) return 0;
  Log(LOG_INFO, self->Fields(), "detached session not attached within its grace period; ending it");
  self->detached_ = false;
  self->DropClient();
  return 0;
}

ErrorCode Session::Attach(Session& from, uint64_t cursor) noexcept {
  if (!detachable() || state_ != State::kRunning || terminal_queued_ || client_gone_ || finished_)
    return ErrorCode::kNoSuchSession;
  if (!detached_) return ErrorCode::kSessionAttached;
  const OutputRing* ring = pump_->ring();  // a detachable session has one from RUNNING on
  if (cursor > ring->next()) return ErrorCode::kBadCursor;
  // The new peer, watched as OnAuthenticated does (one source per
  // descriptor: `from`'s goes first).
  from.peer_watch_.reset();
  peer_pidfd_ = std::move(from.peer_pidfd_);
  peer_ = from.peer_;
  if (absl::Status st = WatchPeer(); !st.ok()) {
    Log(LOG_ERR, Fields(), absl::StrCat("attach failed: ", st.message()));
    return ErrorCode::kInternal;
  }
  uint64_t first = ring->first(), next = ring->next(), start = std::max(cursor, first);
  if (absl::Status st = pump_->AttachConnection(from.pump_->ReleaseConnection(), start); !st.ok()) {
    peer_watch_.reset();
    Log(LOG_ERR, Fields(), absl::StrCat("attach failed: ", st.message()));
    return ErrorCode::kInternal;
  }
  detached_ = false;
  if (grace_timer_) sd_event_source_set_enabled(grace_timer_.get(), SD_EVENT_OFF);
  // The replay comes before the exit, if there is one.
  output_complete_ = pump_->output_complete();
  EnvelopeWriter w("attached");
  w.Str("session", id_)
      .Str("unit", unit_)
      .Str("invocation", invocation_)
      .Str("revision", ctx_.revision)
      .Str("source", ctx_.source)
      .Int("cursor", int64_t(start))
      .Int("dropped", int64_t(start - cursor))
      .Int("next", int64_t(next));
  if (command_pid_ > 0) w.Int("pid", command_pid_); else w.Null("pid");
  pump_->QueueEnvelope(w.Finish());  // the notice queue is empty: no connection had it
  Log(LOG_INFO, Fields(), absl::StrCat("detached session attached at cursor ", start, " (", start - cursor,
                                       " bytes asked for are gone)"));
  observer_->OnSessionChanged(this);
  return ErrorCode::kOk;
}

std::string Session::ListEntry() const {
  const OutputRing* ring = pump_->ring();  // listable: detachable and RUNNING
  EnvelopeWriter w("session");
  w.Str("session", id_)
      .Str("unit", unit_)
      .Str("state", detached_ ? "detached" : "attached")
      .Int("started", started_usec_)
      .Int("grace", detach_.grace_sec)
      .Int("scrollback", detach_.scrollback)
      .Int("first", int64_t(ring->first()))
      .Int("next", int64_t(ring->next()))
      .Bool("exited", final_report_.has_value());
  if (final_report_ && final_report_->code) w.Int("code", *final_report_->code); else w.Null("code");
  if (final_report_ && !final_report_->signal.empty()) w.Str("signal", final_report_->signal); else w.Null("signal");
  if (command_pid_ > 0) w.Int("pid", command_pid_); else w.Null("pid");
  return w.Finish();
}

// LIST or ATTACH instead of START (docs/PROTOCOL.md section 10.4).
void Session::OnSessionRequest(FrameType type, std::span<const uint8_t> payload) noexcept {
  if (state_ != State::kAwaitStart) return Fail(ErrorCode::kProtocolState, "LIST or ATTACH out of state");
  if (!peer_pidfd_ || !PidfdAlive(peer_pidfd_.get()))
    return Fail(ErrorCode::kUnauthenticated, "the authenticated peer exited before its request was read");
  if (type == FrameType::kList) return AnswerList();
  std::string id;
  uint64_t cursor = 0;
  if (ErrorCode c = ParseAttachPayload(payload, &id, &cursor); c != ErrorCode::kOk)
    return Fail(c, "bad ATTACH payload");
  Session* target = nullptr;
  observer_->ForEachSession([&](Session& s) {
    if (&s != this && s.id() == id) target = &s;
  });
  ErrorCode c = target == nullptr ? ErrorCode::kNoSuchSession : target->Attach(*this, cursor);
  if (c != ErrorCode::kOk) return Fail(c, "ATTACH refused");
  // The connection and its peer belong to the attached session now; this
  // one held nothing else and is done.
  Log(LOG_INFO, Fields(), absl::StrCat("connection handed to session ", id));
  Arm(Deadline::kNone, 0);
  client_gone_ = true;
  SetState(State::kEnding);
  MaybeFinish();
}

void Session::AnswerList() noexcept {
  int64_t count = 0;
  observer_->ForEachSession([&](Session& s) {
    if (!s.listable()) return;
    // The bound that makes every entry fit the output queue (limits.h).
    std::string entry = s.ListEntry();
    if (entry.size() > limits::kMaxListEntryBytes)
      return Log(LOG_ERR, Fields(), "a LIST entry is above kMaxListEntryBytes; left out");
    if (pump_->QueueListEntry(entry)) ++count;
  });
  EnvelopeWriter w("listed");
  w.Int("count", count);
  Log(LOG_INFO, Fields(), absl::StrCat("detachable sessions listed: ", count));
  QueueTerminal(w.Finish());
  MaybeFinish();
}

// ------------------------------------------------------------ ending

// kProveOnly: systemd said the unit finished (inactive or failed, no job:
// its cgroup is empty) or no longer has it; a StopUnit would change nothing
// and only delay the proof, which is the same either way.
void Session::BeginReap(Reaper::How how) noexcept {
  if (!unit_requested_ || reaper_ || reap_done_) return;
  if (start_call_) return;  // OnStartReply reaps once systemd answered
  monitor_.reset();         // the unit has one watcher at a time
  reaper_ = std::make_unique<Reaper>(ctx_.systemd, ctx_.tracker, ctx_.event, unit_,
                                     [this](absl::Status st) { OnReaped(std::move(st)); });
  if (absl::Status st = reaper_->Start(how); !st.ok()) OnReaped(st);
}

void Session::OnReaped(absl::Status status) noexcept {
  reap_done_ = true;
  unit_proven_gone_ = status.ok();
  // Reaped while RUNNING (the unit finished): EOF is bounded from here on.
  if (state_ == State::kRunning && exit_ && !output_complete_ && !terminal_queued_)
    Arm(Deadline::kStreamEof, limits::kStreamEofDeadlineUsec);
  static LogLimiter unproven_limiter;
  if (status.ok())
    Log(LOG_INFO, Fields(), "PTY unit proven gone");
  else
    LogLimited(unproven_limiter, LOG_ERR, Fields(), absl::StrCat("PTY unit not proven gone: ", status.message()));
  // The exit's promise is "after the unit was proven gone": when the reaper
  // gave up, the client is told so before the exit (the unit stays on the
  // retry list, docs/SECURITY.md).
  if (!status.ok() && state_ == State::kRunning && !terminal_queued_ && pump_ && pump_->connected())
    Notice("unit_not_proven_gone");
  MaybeSendExit();
  MaybeFinish();
}

void Session::Fail(ErrorCode code, std::string_view detail) noexcept {
  if (detached_) {
    // Nobody to tell: ended as at the end of its grace period.
    Log(LOG_WARNING, Fields(code), absl::StrCat("detached session ended (", AV(ErrorCodeName(code)), "): ", AV(detail)));
    detached_ = false;
    return DropClient();
  }
  if (terminal_queued_ || client_gone_) {
    BeginReap();
    return MaybeFinish();
  }
  // A peer can end sessions as fast as it connects: both levels are limited,
  // separately, so a flood of its own errors cannot hide the supervisor's.
  static LogLimiter err_limiter, warning_limiter;
  bool ours = code == ErrorCode::kInternal || code == ErrorCode::kUnitStartFailed ||
              code == ErrorCode::kUnitPropertyMismatch;
  LogLimited(ours ? err_limiter : warning_limiter, ours ? LOG_ERR : LOG_WARNING, Fields(code),
             absl::StrCat("session failed (", AV(ErrorCodeName(code)), "): ", AV(detail)));
  ReleaseAllButTheConnection();
  // Refused before its session began: the client may not have seen its
  // connect complete yet; the connection ends with a lingering close.
  refused_ = state_ == State::kAuthenticating;
  EnvelopeWriter w("error");
  w.Str("code", ErrorCodeName(code)).Str("message", ClientMessage(code));
  QueueTerminal(w.Finish());
  BeginReap();
  MaybeFinish();
}

void Session::Terminate() noexcept {
  if (state_ == State::kRunning && exit_ && !detached_) return;  // exit is on its way
  Fail(ErrorCode::kInternal, "supervisor is stopping");
}

void Session::OnClientError(ErrorCode code) noexcept { Fail(code, "client protocol error"); }

void Session::OnClientEof() noexcept {
  if (CanDetach()) return Detach("client closed its connection; session detached");
  if (state_ == State::kRunning) {
    // The client ended the session but may still read: stop the unit and
    // deliver what remains, then the exit envelope.
    Log(LOG_INFO, Fields(), "client closed its sending side; stopping the PTY unit");
    return RequestStop();
  }
  if (terminal_queued_) return;  // ENDING: the flush or its deadline closes
  DropClient();
}

void Session::OnClientGone() noexcept {
  if (CanDetach()) return Detach("client hung up; session detached");
  DropClient();
}

void Session::OnFlushed() noexcept {
  Arm(Deadline::kNone, 0);
  if (refused_ && ctx_.lingerer != nullptr)
    ctx_.lingerer->Close(pump_->ReleaseConnection());
  else
    pump_->CloseConnection();
  MaybeFinish();
}

// What a session holds besides its connection, given up when it fails or its
// client goes: the pending calls, the directory, the PTY stream, the channel.
void Session::ReleaseAllButTheConnection() noexcept {
  auth_.reset();
  control_call_.reset();
  request_.reset();
  pending_start_.reset();
  AsyncClose(std::move(pending_dir_));
  AsyncClose(std::move(pty_stream_));
  channel_.reset();
  pump_->DetachPty();
}

void Session::DropClient() noexcept {
  if (client_gone_) return;
  client_gone_ = true;
  if (!terminal_queued_) Log(LOG_INFO, Fields(), "client disconnected");
  ReleaseAllButTheConnection();
  pump_->CloseConnection();
  Arm(Deadline::kNone, 0);
  if (state_ != State::kEnding) SetState(State::kEnding);
  BeginReap();
  MaybeFinish();
}

void Session::MaybeFinish() noexcept {
  if (finished_ || detached_) return;
  if (pump_ && pump_->connected()) return;
  if (start_call_) return;                  // in-flight StartTransientUnit
  if (unit_requested_ && !reap_done_) return;  // unit not yet proven gone
  finished_ = true;
  observer_->OnSessionFinished(this);
}

size_t Session::MemoryBytes() const noexcept {
  size_t n = pump_ ? pump_->MemoryBytes() : 0;
  if (request_)
    for (const auto& a : request_->argv) n += a.size();
  if (pending_start_)
    for (const auto& a : pending_start_->argv) n += a.size();
  return n;
}

}  // namespace opencode::daemon
