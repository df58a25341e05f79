// Signal hints, unit monitors and reapers (see unit_manager.h).
#include "daemon/systemd/unit_tracker.h"

#include <algorithm>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/systemd/constants.h"
#include "daemon/base/status_macros.h"
#include "daemon/systemd/unit_properties.h"

namespace opencode::daemon {

// ---------------------------------------------------------------- UnitTracker

UnitTracker::UnitTracker(sd_event* event, size_t capacity) : event_(event), queue_(capacity) {}

UnitTracker::~UnitTracker() = default;

absl::Status UnitTracker::Init() {
  sd_event_source* s = nullptr;
  int r = sd_event_add_defer(event_, &s, &UnitTracker::OnDefer, this);
  if (r < 0) return SdError(r, "sd_event_add_defer(hints)");
  defer_.reset(s);
  sd_event_source_set_enabled(s, SD_EVENT_OFF);
  sd_event_source_set_priority(s, kBusPriority);
  r = sd_event_add_time_relative(event_, &s, CLOCK_MONOTONIC, limits::kRequeryIntervalUsec, 0,
                                 &UnitTracker::OnTick, this);
  if (r < 0) return SdError(r, "sd_event_add_time(requery tick)");
  tick_.reset(s);
  sd_event_source_set_enabled(s, SD_EVENT_OFF);
  return absl::OkStatus();
}

absl::Status UnitTracker::AttachBus(sd_bus* bus, std::function<void(absl::Status)> on_error) {
  on_error_ = std::move(on_error);
  // A new connection (systemd re-executed): the old one's matches and its
  // Subscribe are gone with it.
  unit_removed_match_.reset();
  job_removed_match_.reset();
  properties_match_.reset();
  subscribe_.reset();
  bus_ = bus;
  sd_bus_slot* slot = nullptr;
  // The connection is direct (SystemdConnection): these matches are filters
  // inside sd-bus, nothing is sent, and only systemd can send on it. The
  // handler still treats what arrives as a hint only.
  int r = sd_bus_match_signal_async(bus, &slot, kSystemdService, kSystemdPath, kManagerInterface,
                                    "UnitRemoved", &UnitTracker::OnMatch,
                                    &UnitTracker::OnMatchInstalled, this);
  if (r < 0) return SdError(r, "match UnitRemoved");
  unit_removed_match_.reset(slot);
  r = sd_bus_match_signal_async(bus, &slot, kSystemdService, kSystemdPath, kManagerInterface,
                                "JobRemoved", &UnitTracker::OnMatch, &UnitTracker::OnMatchInstalled,
                                this);
  if (r < 0) return SdError(r, "match JobRemoved");
  job_removed_match_.reset(slot);
  // One match for every unit object, not one per session; other units'
  // signals are dropped by name in OnSignal.
  r = sd_bus_add_match_async(bus, &slot,
                             "type='signal',sender='org.freedesktop.systemd1',"
                             "interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',"
                             "path_namespace='/org/freedesktop/systemd1/unit'",
                             &UnitTracker::OnMatch, &UnitTracker::OnMatchInstalled, this);
  if (r < 0) return SdError(r, "match PropertiesChanged");
  properties_match_.reset(slot);
  SystemdConnected();
  return absl::OkStatus();
}

// systemd names itself org.freedesktop.systemd1 on its direct connections
// (sd_bus_set_sender). A (re)connection is an appearance: coalesced, it costs
// one Subscribe, one query per watched unit and one retry of the owner's
// unproven units.
void UnitTracker::SystemdConnected() {
  systemd_owner_ = kSystemdService;
  systemd_appeared_ = true;
  queue_.RequeryAll();
  if (defer_) sd_event_source_set_enabled(defer_.get(), SD_EVENT_ONESHOT);
}

// systemd sends its signals to every direct connection; Subscribe is what its
// D-Bus API asks of a client anyway, and costs one call per connection.
absl::Status UnitTracker::Subscribe() {
  if (subscribe_) return absl::OkStatus();  // one in flight is enough
  ASSIGN_OR_RETURN(MessagePtr m, NewManagerCall(bus_, "Subscribe"));
  ASSIGN_OR_RETURN(subscribe_, CallAsync(bus_, m.get(), [this](sd_bus_message* reply) {
                     subscribe_.reset();
                     absl::Status st = ReplyStatus(reply);
                     if (IsBusError(st, "org.freedesktop.systemd1.AlreadySubscribed")) return;
                     if (!st.ok() && on_error_) on_error_(st);
                   }));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<UnitTracker::Watch>> UnitTracker::Add(const std::string& unit,
                                                                     UnitWatcher* watcher) {
  if (watched_.contains(unit))
    return absl::AlreadyExistsError(absl::StrCat(unit, " is already watched"));
  std::unique_ptr<Watch> watch(new Watch(this, unit));
  watched_.emplace(unit, Entry{watcher, false});
  return watch;
}

UnitTracker::Watch::~Watch() { tracker_->Remove(unit_); }

void UnitTracker::Watch::SetPolling(bool polling) {
  auto it = tracker_->watched_.find(unit_);
  if (it == tracker_->watched_.end()) return;
  it->second.polling = polling;
  if (polling) tracker_->ArmTick();
}

void UnitTracker::Watch::SetJobHintsOnly(bool on) {
  auto it = tracker_->watched_.find(unit_);
  if (it != tracker_->watched_.end()) it->second.job_hints_only = on;
}

void UnitTracker::Remove(const std::string& unit) { watched_.erase(unit); }

void UnitTracker::ArmTick() {
  if (!tick_) return;
  ArmTimerIfOff(tick_.get(), limits::kRequeryIntervalUsec);
}

int UnitTracker::OnMatchInstalled(sd_bus_message* m, void* userdata,
                                  sd_bus_error* /*error*/) noexcept {
  auto* self = static_cast<UnitTracker*>(userdata);
  absl::Status st = ReplyStatus(m);
  // Without signals the poll tick and EOF-driven queries still find every
  // state change; report it and keep the connection.
  if (!st.ok() && self->on_error_) self->on_error_(st);
  return 0;
}

int UnitTracker::OnMatch(sd_bus_message* m, void* userdata, sd_bus_error* /*error*/) noexcept {
  static_cast<UnitTracker*>(userdata)->OnSignal(m);
  return 0;
}

void UnitTracker::OnSignal(sd_bus_message* m) noexcept {
  if (m == nullptr) return;
  // Only systemd can send on the direct connection, and it sets this sender;
  // anything else (or anything before the connection is up) is dropped.
  const char* sender = sd_bus_message_get_sender(m);
  std::string_view from = sender != nullptr ? sender : "";
  if (systemd_owner_.empty() || from != systemd_owner_) {
    ++foreign_signals_;
    return;
  }
  std::string unit;
  bool properties = false;
  if (sd_bus_message_is_signal(m, kManagerInterface, "UnitRemoved") > 0) {
    const char* id = nullptr;
    const char* path = nullptr;
    if (sd_bus_message_read(m, "so", &id, &path) <= 0) return;
    unit = id;
  } else if (sd_bus_message_is_signal(m, kManagerInterface, "JobRemoved") > 0) {
    uint32_t job = 0;
    const char *path = nullptr, *id = nullptr, *result = nullptr;
    if (sd_bus_message_read(m, "uoss", &job, &path, &id, &result) <= 0) return;
    unit = id;
  } else if (sd_bus_message_is_signal(m, kPropertiesInterface, "PropertiesChanged") > 0) {
    const char* path = sd_bus_message_get_path(m);
    char* decoded = nullptr;
    if (path == nullptr || sd_bus_path_decode(path, kUnitPathPrefix, &decoded) <= 0) return;
    unit = decoded;
    free(decoded);
    properties = true;
  } else {
    return;
  }
  // Only our own units, and only those someone waits for, cost anything.
  if (!IsSessionUnitName(unit)) return;
  auto it = watched_.find(unit);
  if (it == watched_.end()) return;
  if (properties && it->second.job_hints_only) {
    ++property_signals_skipped_;
    return;
  }
  queue_.Push(unit);
  if (defer_) sd_event_source_set_enabled(defer_.get(), SD_EVENT_ONESHOT);
}

int UnitTracker::OnDefer(sd_event_source* /*s*/, void* userdata) noexcept {
  static_cast<UnitTracker*>(userdata)->DispatchHints();
  return 0;
}

void UnitTracker::DispatchHints() noexcept {
  HintQueue::Batch batch = queue_.Take();
  if (systemd_appeared_) {
    systemd_appeared_ = false;
    ++systemd_appearances_;
    if (bus_ != nullptr)
      if (absl::Status st = Subscribe(); !st.ok() && on_error_) on_error_(st);
    if (on_systemd_appeared_) on_systemd_appeared_();
  }
  if (batch.overflowed) {
    // Lost hints are unknown: every watcher asks again.
    batch.units.clear();
    for (const auto& [unit, entry] : watched_) batch.units.push_back(unit);
  }
  // Watchers may add or remove registrations while being told; look each up.
  for (const std::string& unit : batch.units) {
    auto it = watched_.find(unit);
    if (it != watched_.end()) it->second.watcher->OnUnitHint();
  }
}

int UnitTracker::OnTick(sd_event_source* /*s*/, uint64_t /*usec*/, void* userdata) noexcept {
  auto* self = static_cast<UnitTracker*>(userdata);
  std::vector<std::string> polling;
  for (const auto& [unit, entry] : self->watched_)
    if (entry.polling) polling.push_back(unit);
  for (const std::string& unit : polling) {
    auto it = self->watched_.find(unit);
    if (it != self->watched_.end()) it->second.watcher->OnUnitHint();
  }
  for (const auto& [unit, entry] : self->watched_)
    if (entry.polling) {
      self->ArmTick();
      break;
    }
  return 0;
}

// ---------------------------------------------------------------- UnitMonitor

UnitMonitor::UnitMonitor(SystemdApi* api, UnitTracker* tracker, std::string unit,
                         OnSnapshot on_snapshot)
    : api_(api), tracker_(tracker), unit_(std::move(unit)), on_snapshot_(std::move(on_snapshot)) {}

absl::Status UnitMonitor::Start() {
  ASSIGN_OR_RETURN(watch_, tracker_->Add(unit_, this));
  return absl::OkStatus();
}

void UnitMonitor::SetPolling(bool polling) {
  if (watch_) watch_->SetPolling(polling);
}

void UnitMonitor::SetJobHintsOnly(bool on) {
  if (watch_) watch_->SetJobHintsOnly(on);
}

void UnitMonitor::QueryNow() noexcept {
  if (query_) {
    requery_ = true;  // coalesce: one more after the answer in flight
    return;
  }
  requery_ = false;
  if (absl::Status st = Send(); !st.ok()) {
    OnSnapshot cb = on_snapshot_;
    cb(std::move(st));  // may destroy *this; nothing of it is touched after
  }
}

absl::Status UnitMonitor::Send() noexcept {
  ++queries_;
  auto pending = api_->QueryUnit(unit_, [this](absl::StatusOr<UnitSnapshot> snapshot) {
    query_.reset();
    // Start the coalesced re-query before delivering: the owner may destroy
    // this monitor from its callback, which then cancels the new query too.
    // A re-query that cannot even be sent (systemd's connection is closing)
    // is not reported from here: the owner would hear of it inside this
    // callback, before the answer it waited for, and may destroy this
    // monitor there (issue #17's soak: a SIGSEGV in a daemon-reexec). It
    // stays pending instead: the next hint or tick asks again, and a
    // reconnection re-queries every watched unit.
    if (requery_) {
      requery_ = false;
      if (!Send().ok()) requery_ = true;
    }
    OnSnapshot cb = on_snapshot_;
    cb(std::move(snapshot));
  });
  if (!pending.ok()) return pending.status();
  query_ = std::move(*pending);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- Reaper

void UnitTracker::NoteUnitGone() noexcept {
  uint64_t now = 0;
  if (sd_event_now(event_, CLOCK_MONOTONIC, &now) >= 0) last_unit_gone_usec_ = now;
}

Reaper::Reaper(SystemdApi* api, UnitTracker* tracker, sd_event* event, std::string unit, Done done)
    : api_(api), tracker_(tracker), event_(event), unit_(std::move(unit)), done_(std::move(done)) {}

absl::Status Reaper::Start(bool stop_first) {
  ASSIGN_OR_RETURN(watch_, tracker_->Add(unit_, this));
  watch_->SetPolling(true);
  sd_event_source* s = nullptr;
  int r = sd_event_add_time_relative(event_, &s, CLOCK_MONOTONIC, limits::kCleanupDeadlineUsec, 0,
                                     &Reaper::OnDeadline, this);
  if (r < 0) return SdError(r, "sd_event_add_time(cleanup deadline)");
  deadline_.reset(s);
  sd_event_now(event_, CLOCK_MONOTONIC, &started_usec_);
  if (!stop_first) {
    Query();
    return absl::OkStatus();
  }
  Stop();
  return absl::OkStatus();
}

void Reaper::Stop() noexcept {
  auto pending = api_->StopUnit(unit_, [this](absl::Status st) {
    call_.reset();
    // NoSuchUnit: already gone (or never created); the proof below decides.
    if (!st.ok() && !IsBusError(st, "org.freedesktop.systemd1.NoSuchUnit")) {
      last_error_ = st;
      resend_ = true;
    }
    Query();
  });
  if (!pending.ok()) {
    last_error_ = pending.status();
    resend_ = true;
    Query();
    return;
  }
  call_ = std::move(*pending);
}

// One proof step: ResetFailedUnit, then GetUnit. PTY units hold no reference
// (CollectMode=inactive): systemd collects one as soon as it is inactive, but
// keeps a failed one loaded (its Result readable) until it is reset; a reset
// of a unit that is still running or already gone changes nothing.
void Reaper::Query() noexcept {
  querying_phase_ = true;
  if (call_) {
    requery_ = true;
    return;
  }
  // No count ends the proof: hints come only from systemd and coalesce to one
  // query in flight plus one pending; the cleanup deadline is the bound.
  requery_ = false;
  ++queries_;
  auto pending = api_->ResetFailedUnit(unit_, [this](absl::Status st) {
    call_.reset();
    if (!st.ok() && !IsBusError(st, "org.freedesktop.systemd1.NoSuchUnit")) last_error_ = st;
    AskGone();
  });
  if (!pending.ok()) {
    last_error_ = pending.status();
    return;
  }
  call_ = std::move(*pending);
}

void Reaper::AskGone() noexcept {
  auto pending = api_->QueryGone(unit_, [this](absl::StatusOr<bool> gone) {
    call_.reset();
    if (gone.ok() && *gone) {
      gone_ = true;
      tracker_->NoteUnitGone();
      return Finish(absl::OkStatus());
    }
    if (!gone.ok()) last_error_ = gone.status();
    if (requery_) Query();
    // Otherwise wait for the next hint or tick: a signal is never the proof.
  });
  if (!pending.ok()) {
    last_error_ = pending.status();
    return;
  }
  call_ = std::move(*pending);
}

void Reaper::OnUnitHint() noexcept {
  // Hints before StopUnit was answered are covered by the query
  // that follows them.
  if (!querying_phase_ || gone_ || !done_) return;
  // A stop that systemd lost (found by issue #17's soak: a daemon-reexec
  // while a session was reaped left the unit loaded until the retry list,
  // 10 s after the cleanup deadline): sent again once per hint or tick,
  // never from a reply, so a systemd away costs one failed call per tick.
  if (resend_ && !call_) {
    resend_ = false;
    querying_phase_ = false;
    return Stop();
  }
  Query();
}

int Reaper::OnDeadline(sd_event_source* s, uint64_t /*usec*/, void* userdata) noexcept {
  auto* self = static_cast<Reaper*>(userdata);
  uint64_t usec = 0;
  sd_event_now(self->event_, CLOCK_MONOTONIC, &usec);
  // Another PTY unit proven gone within the window: systemd's stop jobs move
  // (a mass close), so this one's turn may still come. Wait for the window
  // after that proof, never past the hard deadline.
  uint64_t hard = self->started_usec_ + limits::kCleanupHardDeadlineUsec;
  uint64_t last = self->tracker_->last_unit_gone_usec();
  uint64_t quiet_end = last + limits::kCleanupDeadlineUsec;
  if (last != 0 && quiet_end > usec && usec < hard) {
    sd_event_source_set_time(s, std::min(quiet_end, hard));
    sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
    return 0;
  }
  bool at_hard = usec >= hard;
  self->Finish(absl::DeadlineExceededError(absl::StrCat(
      self->unit_, " not proven gone within the cleanup deadline",
      at_hard ? " (the hard deadline)" : " (no PTY unit proven gone meanwhile)",
      self->last_error_.ok() ? "" : absl::StrCat(" (", self->last_error_.message(), ")"))));
  return 0;
}

void Reaper::Finish(absl::Status status) noexcept {
  if (!done_) return;
  watch_.reset();
  deadline_.reset();
  call_.reset();
  Done done = std::move(done_);
  done_ = nullptr;
  done(std::move(status));  // may destroy *this
}

}  // namespace opencode::daemon
