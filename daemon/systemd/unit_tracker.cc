// Signal hints for the watched units (see unit_tracker.h).
#include "daemon/systemd/unit_tracker.h"

#include <algorithm>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/systemd/bus_call.h"
#include "daemon/systemd/constants.h"
#include "daemon/systemd/unit_properties.h"

namespace opencode::daemon {

UnitTracker::UnitTracker(sd_event* event, size_t capacity)
    : event_(event), queue_(capacity),
      calls_answered_([] { return BusCallsInFlight() == 0 && BusCallsWaiting() == 0; }) {}

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
  if (!properties) NoteStopProgress();
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

// The tick is a safety net, never work in front of systemd's own. systemd
// runs its job queue only when nothing else is pending in its loop (the run
// queue is an idle-priority source), so a client that keeps calls in flight
// without a pause holds back every job, the stop jobs its sessions wait for
// included. Asking every polling unit again at each tick did that once a
// round of answers took longer than the tick: a mass STOP of 256 sessions on
// systemd 257, on a loaded host, had systemd answer GetAll for 20 s and start
// no stop job until the sessions' stop deadline passed (vm.scale.trixie).
// So a tick asks only once every call has been answered; it waits for that
// at most kRequeryQuietWaitUsec, after which it asks anyway (and waits again
// at the next tick).
int UnitTracker::OnTick(sd_event_source* /*s*/, uint64_t /*usec*/, void* userdata) noexcept {
  auto* self = static_cast<UnitTracker*>(userdata);
  std::vector<std::string> polling;
  for (const auto& [unit, entry] : self->watched_)
    if (entry.polling) polling.push_back(unit);
  if (polling.empty()) return 0;
  uint64_t now = 0;
  (void)sd_event_now(self->event_, CLOCK_MONOTONIC, &now);
  if (self->calls_answered_ && !self->calls_answered_()) {
    if (self->deferred_since_usec_ == 0) self->deferred_since_usec_ = now;
    if (now - self->deferred_since_usec_ < limits::kRequeryQuietWaitUsec) {
      ++self->ticks_deferred_;
      self->ArmTick();
      return 0;
    }
  }
  self->deferred_since_usec_ = 0;
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

uint64_t UnitTracker::ProgressDeadline(uint64_t now, uint64_t window, uint64_t hard) const noexcept {
  uint64_t last = last_stop_progress_usec_;
  if (last == 0 || last + window <= now || now >= hard) return 0;
  return std::min(last + window, hard);
}

void UnitTracker::NoteStopProgress() noexcept {
  uint64_t now = 0;
  if (sd_event_now(event_, CLOCK_MONOTONIC, &now) >= 0) last_stop_progress_usec_ = now;
}

}  // namespace opencode::daemon
