// One connection = one PTY session: the state machine of docs/PROTOCOL.md
// section 6 (ACCEPTED -> AWAIT_START -> STARTING -> RUNNING -> ENDING).
// Invariants: nothing is read from the connection before the peer is
// authenticated; once StartTransientUnit was sent, the session does not end
// until its unit is proven gone (or the cleanup bound is hit and logged), even
// if the client left while the call was in flight; the exit envelope is sent
// only after the PTY stream reached EOF, all its output was written to the
// client and the unit's exit status was read.
#pragma once

#include <sys/types.h>
#include <systemd/sd-event.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "common/errors.h"
#include "common/frame.h"
#include "common/unique_fd.h"
#include "daemon/auth/peer_auth.h"
#include "daemon/base/journal.h"
#include "daemon/base/lingerer.h"
#include "daemon/base/sd_ptr.h"
#include "daemon/session/exit_report.h"
#include "daemon/session/pump.h"
#include "daemon/session/unit_channel.h"
#include "daemon/systemd/reaper.h"
#include "daemon/systemd/systemd_api.h"
#include "daemon/systemd/unit_monitor.h"
#include "daemon/systemd/unit_properties.h"
#include "daemon/systemd/unit_state.h"
#include "daemon/systemd/unit_tracker.h"

namespace opencode::daemon {

class Session;

// What every session shares (owned by the Supervisor).
struct SessionContext {
  sd_event* event = nullptr;
  SystemdApi* systemd = nullptr;
  UnitTracker* tracker = nullptr;
  Authenticator* authenticator = nullptr;
  std::string revision;  // 40 hex (source_identity.h)
  std::string source;    // 64 hex
  // Takes a connection refused while its peer was authenticated, once its
  // error envelope is out; null: such a connection closes at once (tests).
  Lingerer* lingerer = nullptr;
};

class SessionObserver {
 public:
  // State changed (for STATUS= counts).
  virtual void OnSessionChanged(Session* s) noexcept = 0;
  // The session is completely done; destroy it later (never synchronously).
  virtual void OnSessionFinished(Session* s) noexcept = 0;
  // Every session not yet finished (LIST, ATTACH and the detachable bounds
  // of docs/PROTOCOL.md section 10).
  virtual void ForEachSession(absl::FunctionRef<void(Session&)> fn) noexcept = 0;

 protected:
  ~SessionObserver() = default;
};

class Session final : private Pump::Delegate, private UnitChannel::Delegate {
 public:
  enum class State { kAuthenticating, kAwaitStart, kStarting, kRunning, kEnding };

  Session(const SessionContext& ctx, SessionObserver* observer, UniqueFd conn);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Generates the session id, arms the START deadline, starts authenticating.
  absl::Status Start();
  // Supervisor shutdown: end with an error envelope and stop the unit.
  void Terminate() noexcept;

  State state() const noexcept { return state_; }
  // Detachable (docs/PROTOCOL.md section 10): from START on, its scrollback
  // is reserved against kMaxScrollbackTotalBytes until it is finished.
  bool detachable() const noexcept { return detach_.detachable(); }
  size_t scrollback() const noexcept { return detach_.scrollback; }
  // Detached: running (or exited) with no connection, the grace timer armed.
  bool detached() const noexcept { return detached_; }
  // Listed by LIST: detachable and RUNNING (attached or detached).
  bool listable() const noexcept { return detachable() && state_ == State::kRunning && !terminal_queued_; }
  // LIST's `session` envelope for this session (at most kMaxListEntryBytes);
  // only for a listable() one.
  std::string ListEntry() const;
  // ATTACH by `from` (a session that just read the frame): takes its
  // connection and its peer, or says why not (no_such_session,
  // session_attached, bad_cursor) and touches nothing.
  ErrorCode Attach(Session& from, uint64_t cursor) noexcept;
  // Still authenticating or waiting for START (the handshake budget).
  bool in_handshake() const noexcept {
    return state_ == State::kAuthenticating || state_ == State::kAwaitStart;
  }
  const std::string& id() const noexcept { return id_; }
  const std::string& unit() const noexcept { return unit_; }
  // A finished session whose unit was requested but not proven gone within
  // the cleanup bound: the Supervisor keeps the unit on its retry list.
  bool unit_unproven() const noexcept { return unit_requested_ && !unit_proven_gone_; }
  size_t MemoryBytes() const noexcept;
  const Pump* pump() const noexcept { return pump_.get(); }
  const UnitChannel* unit_channel() const noexcept { return channel_.get(); }

 private:
  enum class Deadline { kNone, kStartFrame, kUnitStart, kStop, kStreamEof, kFlush };

  // Pump::Delegate
  void OnStartFrame(std::span<const uint8_t> payload, UniqueFd dir) noexcept override;
  void OnEnvFrame(std::span<const uint8_t> payload) noexcept override;
  void OnControlFrame(FrameType type, uint8_t arg) noexcept override;
  void OnResize(uint16_t cols, uint16_t rows) noexcept override;
  void OnSessionRequest(FrameType type, std::span<const uint8_t> payload) noexcept override;
  void OnClientError(ErrorCode code) noexcept override;
  void OnClientEof() noexcept override;
  void OnClientGone() noexcept override;
  void OnOutputComplete() noexcept override;
  void OnFlushed() noexcept override;

  // UnitChannel::Delegate
  void OnCommandExecuted(pid_t pid) noexcept override;
  void OnSignalHandled(uint8_t signo, bool written) noexcept override;
  void OnSignalDelivered(uint8_t signo) noexcept override;
  void OnCommandEnded() noexcept override;

  void OnAuthenticated(AuthResult result) noexcept;
  void StartUnit(StartRequest request, UniqueFd dir, std::span<const uint8_t> env_packet) noexcept;
  void OnStartReply(absl::Status status) noexcept;
  void OnSnapshot(absl::StatusOr<UnitSnapshot> snapshot) noexcept;
  void OnStarting(const UnitSnapshot& snapshot) noexcept;
  void OnRunningSnapshot(const UnitSnapshot& snapshot) noexcept;
  void SendSignal(uint8_t signo) noexcept;
  void HoldInput(uint8_t reason, bool hold) noexcept;
  void RequestStop() noexcept;
  bool ExtendStopDeadline() noexcept;
  void LowerCpuWeight() noexcept;
  void BeginReap(Reaper::How how = Reaper::How::kStopFirst) noexcept;
  void OnReaped(absl::Status status) noexcept;
  void MaybeSendExit() noexcept;
  std::string FinalEnvelope() noexcept;
  bool CanDetach() const noexcept;
  void Detach(std::string_view why) noexcept;
  static int OnGraceEnd(sd_event_source* s, uint64_t usec, void* userdata) noexcept;
  ErrorCode ReserveDetachable(const DetachOptions& options) noexcept;
  void AnswerList() noexcept;
  void QueueTerminal(std::string envelope) noexcept;
  void Fail(ErrorCode code, std::string_view detail) noexcept;
  void DropClient() noexcept;
  void ReleaseAllButTheConnection() noexcept;
  void MaybeFinish() noexcept;
  void SetState(State s) noexcept;
  void Arm(Deadline kind, uint64_t usec) noexcept;
  static int OnDeadline(sd_event_source* s, uint64_t usec, void* userdata) noexcept;
  absl::Status WatchPeer() noexcept;
  static int OnPeerExit(sd_event_source* s, int fd, uint32_t revents, void* userdata) noexcept;
  void Notice(std::string_view code, std::string_view signal = {}) noexcept;
  LogFields Fields(ErrorCode code = ErrorCode::kOk) const noexcept;

  // Declared first, so destroyed last: once every buffer of this session is
  // freed, the free pages of the heap go back to the kernel. glibc keeps
  // freed chunks otherwise: after 50 stalled streaming sessions (issue #17)
  // an idle supervisor kept 7 MB of RssAnon (baseline 0.4 MB) it would only
  // reuse. Per session end, not per queue drain: the pump's queues are
  // freed and reallocated on every drain and must stay cheap.
  struct HeapTrim {
    ~HeapTrim();
  } heap_trim_;
  SessionContext ctx_;
  SessionObserver* observer_;
  UniqueFd initial_conn_;
  std::unique_ptr<Pump> pump_;
  State state_ = State::kAuthenticating;
  // Why the client's frames are not decoded: a signal waits to be written
  // (one at a time), a StopUnit is in flight. Each owner lifts only its own
  // bit, so one's end never resumes input while the other still holds it.
  static constexpr uint8_t kHoldSignal = 1;
  static constexpr uint8_t kHoldStop = 2;
  uint8_t input_holds_ = 0;

  std::string id_;
  std::string unit_;
  std::string invocation_;
  AuthenticatedPeer peer_;
  pid_t raw_peer_pid_ = 0;
  // The process that connected (SO_PEERPIDFD). Authentication names that
  // process, so it holds only while it lives: from OnAuthenticated on, its
  // exit ends the session (unauthenticated), whoever else holds the
  // connection (docs/SECURITY.md, "Supervisor"). Declared before the watch
  // so that the watch goes first.
  UniqueFd peer_pidfd_;
  EventSourcePtr peer_watch_;

  std::unique_ptr<PendingCall> auth_;
  bool auth_finished_ = false;
  EventSourcePtr timer_;
  Deadline deadline_ = Deadline::kNone;

  // AWAIT_START after a START with kStartFlagEnv: the request and its
  // directory wait for the ENV frame (same deadline as START).
  std::optional<StartRequest> pending_start_;
  UniqueFd pending_dir_;
  // STARTING: the request stays until the read-back compared it.
  std::optional<UnitRequest> request_;
  UniqueFd pty_stream_;  // our end, attached to the pump at RUNNING
  // Our end of the unit channel, created with the stream (the unit's end
  // travels on the stream before StartTransientUnit); dropped with it.
  std::unique_ptr<UnitChannel> channel_;
  Pending start_call_;
  bool unit_requested_ = false;  // StartTransientUnit was sent
  std::unique_ptr<UnitMonitor> monitor_;
  Pending control_call_;
  Pending weight_call_;  // SetCpuWeight at the command's exec
  bool stop_requested_ = false;
  uint64_t stop_requested_usec_ = 0;  // CLOCK_MONOTONIC of the accepted STOP
  std::unique_ptr<Reaper> reaper_;
  bool reap_done_ = false;
  bool unit_proven_gone_ = false;

  std::optional<UnitExit> exit_;
  bool output_complete_ = false;
  bool terminal_queued_ = false;
  bool client_gone_ = false;
  bool finished_ = false;
  // Refused while its peer was authenticated: once the error envelope is
  // out, the connection goes to ctx_.lingerer instead of the closer.
  bool refused_ = false;

  // Detachable sessions (docs/PROTOCOL.md section 10).
  DetachOptions detach_;
  bool detached_ = false;
  EventSourcePtr grace_timer_;
  int64_t started_usec_ = 0;  // CLOCK_REALTIME when `started` was queued
  pid_t command_pid_ = 0;     // from the unit's 'E' report
  // The terminal envelope once decided (exit or launch_failed): kept while
  // detached, sent at the next attach after the replay.
  std::optional<std::string> final_envelope_;
  std::optional<ExitReport> final_report_;
};

}  // namespace opencode::daemon
