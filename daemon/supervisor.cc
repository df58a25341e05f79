// Supervisor ownership, start-up recovery, shutdown and notifications (see
// supervisor.h).
#include "daemon/supervisor.h"

#include <signal.h>
#include <systemd/sd-daemon.h>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "daemon/base/journal.h"
#include "daemon/base/status_macros.h"
#include "daemon/source_info.h"

namespace opencode::daemon {
namespace {

LogFields UnitFields(std::string_view unit) {
  LogFields f;
  f.unit = unit;
  return f;
}

}  // namespace

Supervisor::Supervisor(sd_event* event, UniqueFd listen_socket)
    : event_(event),
      tracker_(event),
      lingerer_(event),
      listener_(event, std::move(listen_socket), this, &lingerer_) {}

// Sessions and reapers go first (they hold slots on the connection), the
// connection last.
Supervisor::~Supervisor() {
  finished_.clear();
  sessions_.clear();
  reapers_.clear();
  list_call_.reset();
}

absl::Status Supervisor::Start() {
  connection_ = std::make_unique<SystemdConnection>(event_);
  RETURN_IF_ERROR(connection_->Connect());
  systemd_ = NewBusSystemdApi(connection_.get());
  // Once, at start: without SO_PEERPIDFD every connection is refused
  // (kernel_unsupported), so say so where an operator looks first.
  BusAuthConfig auth{.peer_pidfd = true, .main_pid_cache = &main_pid_cache_};
  if (absl::Status st = ProbePeerPidfd(); !st.ok()) {
    auth.peer_pidfd = false;
    Log(LOG_CRIT, absl::StrCat("SO_PEERPIDFD is not available (", st.message(),
                               "): every connection will be refused with kernel_unsupported; "
                               "Linux 6.5 or later is required (docs/SECURITY.md)"));
  }
  authenticator_ = NewBusAuthenticator(connection_.get(), auth);
  RETURN_IF_ERROR(tracker_.Init());
  auto on_error = [](absl::Status st) {
    // Without signals the poll tick still finds every state change.
    static LogLimiter limiter;
    LogLimited(limiter, LOG_WARNING, absl::StrCat("cannot subscribe to systemd signals: ", st.message()));
  };
  tracker_.SetOnSystemdAppeared([this] { RetryUnproven(); });
  RETURN_IF_ERROR(tracker_.AttachBus(connection_->bus(), on_error));
  // systemd re-executed: the new connection gets the matches, Subscribe,
  // a query of every watched unit and a retry of every unproven unit.
  connection_->SetOnReconnected([this, on_error] {
    if (absl::Status st = tracker_.AttachBus(connection_->bus(), on_error); !st.ok()) {
      Log(LOG_ERR, absl::StrCat("cannot watch units on the new connection to systemd: ", st.message()));
      sd_event_exit(event_, EXIT_FAILURE);
    }
  });
  return StartCommon();
}

absl::Status Supervisor::StartWith(std::unique_ptr<SystemdApi> systemd,
                                   std::unique_ptr<Authenticator> authenticator) {
  systemd_ = std::move(systemd);
  authenticator_ = std::move(authenticator);
  RETURN_IF_ERROR(tracker_.Init());
  return StartCommon();
}

absl::Status Supervisor::StartCommon() {
  RETURN_IF_ERROR(listener_.Init());
  int r;

  context_.event = event_;
  context_.systemd = systemd_.get();
  context_.tracker = &tracker_;
  context_.authenticator = authenticator_.get();
  context_.lingerer = &lingerer_;
  context_.revision = std::string(SourceRevision());
  context_.source = std::string(SourceSha256());

  sd_event_source* s = nullptr;
  r = sd_event_add_signal(event_, &s, SIGTERM, &Supervisor::OnSignal, this);
  if (r < 0) return SdError(r, "sd_event_add_signal(SIGTERM)");
  sigterm_.reset(s);
  r = sd_event_add_signal(event_, &s, SIGINT, &Supervisor::OnSignal, this);
  if (r < 0) return SdError(r, "sd_event_add_signal(SIGINT)");
  sigint_.reset(s);
  r = sd_event_add_defer(event_, &s, &Supervisor::OnDefer, this);
  if (r < 0) return SdError(r, "sd_event_add_defer(housekeeping)");
  defer_.reset(s);
  sd_event_source_set_priority(s, kReapPriority);
  sd_event_source_set_enabled(s, SD_EVENT_OFF);
  r = sd_event_add_time_relative(event_, &s, CLOCK_MONOTONIC, limits::kUnprovenRetryIntervalUsec,
                                 0, &Supervisor::OnRetryTimer, this);
  if (r < 0) return SdError(r, "sd_event_add_time(retry)");
  retry_timer_.reset(s);
  sd_event_source_set_enabled(s, SD_EVENT_OFF);

  sd_notify(0, "STATUS=recovering leftover PTY units");
  ASSIGN_OR_RETURN(list_call_,
                   systemd_->ListSessionUnits([this](absl::StatusOr<std::vector<std::string>> units) {
                     list_call_.reset();
                     if (!units.ok()) {
                       // Without the list nothing can be proven; exit, and
                       // systemd's restart tries again.
                       Log(LOG_ERR, absl::StrCat("cannot list leftover PTY units: ",
                                                 units.status().message()));
                       sd_event_exit(event_, EXIT_FAILURE);
                       return;
                     }
                     Recover(std::move(*units));
                   }));
  return absl::OkStatus();
}

void Supervisor::Recover(std::vector<std::string> units) noexcept {
  // A reaper that cannot start reports at once, from inside Reap(): with
  // `recovering_` set, that report cannot declare readiness before the
  // leftovers after it had their attempt.
  for (const std::string& unit : units) {
    Log(LOG_NOTICE, UnitFields(unit), "stopping leftover PTY unit of an earlier process");
    Reap(unit, /*retry=*/false);
  }
  recovering_ = false;
  if (reapers_.empty()) BecomeReady();
}

void Supervisor::Reap(const std::string& unit, bool retry) noexcept {
  if (reapers_.contains(unit)) return;  // one attempt at a time
  auto reaper = std::make_unique<Reaper>(
      systemd_.get(), &tracker_, event_, unit,
      [this, unit, retry](absl::Status st) { OnReaped(unit, retry, std::move(st)); });
  Reaper* raw = reaper.get();
  reapers_.emplace(unit, std::move(reaper));
  if (absl::Status st = raw->Start(); !st.ok()) OnReaped(unit, retry, st);
}

void Supervisor::OnReaped(const std::string& unit, bool retry, absl::Status status) noexcept {
  // A Reaper may be destroyed from its own completion callback (it touches
  // nothing after calling it); copy the name before erasing it.
  std::string name = unit;
  static LogLimiter proven_limiter, unproven_limiter;
  if (status.ok()) {
    LogLimited(proven_limiter, LOG_INFO, UnitFields(name),
        retry ? "PTY unit on the retry list proven gone" : "leftover PTY unit proven gone");
    unproven_.erase(name);
  } else {
    LogLimited(unproven_limiter, LOG_ERR, UnitFields(name),
        absl::StrCat(retry ? "PTY unit on the retry list" : "leftover PTY unit",
                     " still not proven gone: ", status.message()));
    KeepUnproven(name);
  }
  reapers_.erase(name);
  if (reapers_.empty() && !recovering_) BecomeReady();
  ScheduleHousekeeping();
}

void Supervisor::KeepUnproven(const std::string& unit) noexcept {
  static LogLimiter limiter;
  if (unproven_.insert(unit).second)
    LogLimited(limiter, LOG_WARNING, UnitFields(unit),
        absl::StrCat("PTY unit kept on the retry list (", unproven_.size(), " listed)"));
  ArmRetry();
}

void Supervisor::ArmRetry() noexcept {
  if (!retry_timer_ || unproven_.empty() || shutting_down_) return;
  ArmTimerIfOff(retry_timer_.get(), limits::kUnprovenRetryIntervalUsec);
}

int Supervisor::OnRetryTimer(sd_event_source* /*s*/, uint64_t /*usec*/, void* userdata) noexcept {
  static_cast<Supervisor*>(userdata)->RetryUnproven();
  return 0;
}

void Supervisor::RetryUnproven() noexcept {
  if (!ready_ || shutting_down_) return;
  // Reap() may finish synchronously and edit the list: iterate over a copy.
  std::vector<std::string> units(unproven_.begin(), unproven_.end());
  for (const std::string& unit : units) {
    static LogLimiter limiter;
    LogLimited(limiter, LOG_NOTICE, UnitFields(unit), "retrying: stopping PTY unit on the retry list");
    Reap(unit, /*retry=*/true);
  }
}

void Supervisor::BecomeReady() noexcept {
  if (ready_ || shutting_down_) return;
  ready_ = true;
  listener_.Enable(true);
  Log(LOG_INFO, "ready: accepting connections");
  sd_notify(0, "READY=1");
  UpdateStatus();
}

size_t Supervisor::HandshakeCount() const noexcept {
  size_t n = 0;
  for (const auto& [ptr, session] : sessions_)
    if (session->in_handshake()) ++n;
  return n;
}

void Supervisor::OnConnection(UniqueFd conn) noexcept {
  auto session = std::make_unique<Session>(context_, this, std::move(conn));
  Session* raw = session.get();
  sessions_.emplace(raw, std::move(session));
  if (absl::Status st = raw->Start(); !st.ok()) {
    Log(LOG_ERR, absl::StrCat("cannot start session: ", st.message()));
    // Not inside any of its callbacks: safe to destroy now. No unit exists.
    sessions_.erase(raw);
  }
  ScheduleHousekeeping();
}

void Supervisor::OnSessionChanged(Session* /*s*/) noexcept { ScheduleHousekeeping(); }

void Supervisor::OnSessionFinished(Session* s) noexcept {
  auto it = sessions_.find(s);
  if (it == sessions_.end()) return;
  if (s->unit_unproven()) KeepUnproven(s->unit());
  finished_.push_back(std::move(it->second));
  sessions_.erase(it);
  ScheduleHousekeeping();
}

void Supervisor::ForEachSession(absl::FunctionRef<void(Session&)> fn) noexcept {
  for (const auto& [ptr, session] : sessions_) fn(*session);
}

void Supervisor::ScheduleHousekeeping() noexcept {
  if (defer_) sd_event_source_set_enabled(defer_.get(), SD_EVENT_ONESHOT);
}

int Supervisor::OnDefer(sd_event_source* /*s*/, void* userdata) noexcept {
  static_cast<Supervisor*>(userdata)->Housekeeping();
  return 0;
}

void Supervisor::Housekeeping() noexcept {
  // Destroyed sessions close their descriptors: a listener paused on EMFILE
  // may accept again.
  if (!finished_.empty()) {
    finished_.clear();
    listener_.DescriptorsFreed();
  }
  UpdateStatus();
  if (shutting_down_ && sessions_.empty()) {
    Log(LOG_INFO, "every session ended; exiting");
    sd_event_exit(event_, EXIT_SUCCESS);
  }
}

void Supervisor::UpdateStatus() noexcept {
  size_t detached = 0;
  for (const auto& [ptr, session] : sessions_)
    if (session->detached()) ++detached;
  std::string status = absl::StrCat(shutting_down_ ? "stopping: " : "", sessions_.size(),
                                    " sessions, ", HandshakeCount(), " handshakes");
  if (detached > 0) absl::StrAppend(&status, ", ", detached, " detached");
  if (!unproven_.empty())
    absl::StrAppend(&status, ", ", unproven_.size(), " units not proven gone (retrying)");
  if (status == last_status_) return;
  last_status_ = status;
  sd_notify(0, absl::StrCat("STATUS=", status).c_str());
}

int Supervisor::OnSignal(sd_event_source* /*s*/, const struct signalfd_siginfo* /*si*/,
                         void* userdata) noexcept {
  static_cast<Supervisor*>(userdata)->Shutdown();
  return 0;
}

void Supervisor::Shutdown() noexcept {
  if (shutting_down_) return;
  shutting_down_ = true;
  sd_notify(0, "STOPPING=1");
  Log(LOG_INFO, "stopping: ending every session");
  listener_.Enable(false);
  sd_event_source* s = nullptr;
  if (sd_event_add_time_relative(event_, &s, CLOCK_MONOTONIC, limits::kShutdownDeadlineUsec, 0,
                                 &Supervisor::OnShutdownDeadline, this) >= 0)
    shutdown_deadline_.reset(s);
  retry_timer_.reset();
  if (!unproven_.empty())
    Log(LOG_WARNING, absl::StrCat(unproven_.size(),
                                  " PTY units still not proven gone at exit "
                                  "(the next start recovers them)"));
  std::vector<Session*> all;
  for (const auto& [ptr, session] : sessions_) all.push_back(ptr);
  for (Session* session : all) session->Terminate();
  ScheduleHousekeeping();
}

int Supervisor::OnShutdownDeadline(sd_event_source* /*s*/, uint64_t /*usec*/, void* userdata) noexcept {
  auto* self = static_cast<Supervisor*>(userdata);
  Log(LOG_ERR, absl::StrCat("stopping: ", self->sessions_.size(),
                            " sessions not finished within the shutdown deadline; exiting anyway "
                            "(the next start recovers their units)"));
  sd_event_exit(self->event_, EXIT_FAILURE);
  return 0;
}

}  // namespace opencode::daemon
