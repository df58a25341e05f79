// Watching PTY units over D-Bus: signals (UnitRemoved, JobRemoved,
// PropertiesChanged) become hints in one bounded coalescing queue, and hints
// only ever trigger re-queries by the unit's watcher (unit_watcher.h).
// Invariants: nothing here concludes anything from a signal; a unit is
// "finished" or "gone" only by the answer of an explicit query (unit_monitor.h,
// reaper.h). Signals arrive only on the direct connection to systemd
// (SystemdConnection), where no other peer can send; a signal counts as a hint
// only with the sender systemd sets there (org.freedesktop.systemd1), and
// costs one comparison otherwise. Hints never spend a Reaper's budget (only
// time does).
#pragma once

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/limits.h"
#include "daemon/base/sd_ptr.h"
#include "daemon/systemd/hint_queue.h"
#include "daemon/systemd/systemd_api.h"
#include "daemon/systemd/unit_watcher.h"

namespace opencode::daemon {

class UnitTracker {
 public:
  explicit UnitTracker(sd_event* event, size_t capacity = limits::kSignalQueueCapacity);
  ~UnitTracker();
  UnitTracker(const UnitTracker&) = delete;
  UnitTracker& operator=(const UnitTracker&) = delete;

  absl::Status Init();
  // Matches for Manager.UnitRemoved / JobRemoved and PropertiesChanged of unit
  // objects on the direct connection to systemd, then SystemdConnected().
  // Called again with the new connection after a reconnection. `on_error`
  // reports a failed Subscribe.
  absl::Status AttachBus(sd_bus* bus, std::function<void(absl::Status)> on_error);
  // systemd is (again) at the other end: Subscribe is sent, every watched
  // unit is re-queried and `on_systemd_appeared` (SetOnSystemdAppeared) runs,
  // once per burst of calls.
  void SystemdConnected();
  void SetOnSystemdAppeared(std::function<void()> cb) { on_systemd_appeared_ = std::move(cb); }
  // systemd's jobs on PTY units are moving: a reaper proved one gone, or
  // systemd said it removed a watched PTY unit or finished a job on one
  // (UnitRemoved, JobRemoved: only systemd sends on the direct connection).
  // Every reaper's no-progress window (kCleanupDeadlineUsec) counts from the
  // last: in a mass close systemd answers the proofs' GetUnit calls late, once
  // its job queue drained, but it sends these signals as it goes.
  void NoteStopProgress() noexcept;
  uint64_t last_stop_progress_usec() const noexcept { return last_stop_progress_usec_; }
  // A deadline that counts no progress (the reaper's cleanup deadline, a
  // STOP's): when it fires at `now`, the time it should fire again, `window`
  // after the last progress but never past `hard`; 0 if it has expired.
  uint64_t ProgressDeadline(uint64_t now, uint64_t window, uint64_t hard) const noexcept;
  size_t systemd_appearances() const noexcept { return systemd_appearances_; }
  // The sender systemd's signals carry ("" until connected: then no signal
  // is a hint and only the poll tick re-queries).
  const std::string& systemd_owner() const noexcept { return systemd_owner_; }
  // Signals dropped because of their sender (for tests and STATUS=).
  uint64_t foreign_signals() const noexcept { return foreign_signals_; }
  // PropertiesChanged signals not taken as hints (Watch::SetJobHintsOnly).
  uint64_t property_signals_skipped() const noexcept { return property_signals_skipped_; }

  // One watched unit; destroying it unregisters.
  class Watch {
   public:
    ~Watch();
    // Polling watchers are also re-queried every kRequeryIntervalUsec: the
    // safety net for a lost or dropped hint while waiting for a state change.
    // A tick asks only while every call to systemd has been answered (or
    // after kRequeryQuietWaitUsec of waiting for that): see OnTick.
    void SetPolling(bool polling);
    // With `on`, only the unit's JobRemoved and UnitRemoved are hints (the
    // tick, an overflow and a reconnection still are): a starting unit emits
    // several PropertiesChanged per start, and each would cost systemd two
    // GetAll while it runs the start job, whose end (JobRemoved) is the one
    // change the starting session waits for.
    void SetJobHintsOnly(bool on);

   private:
    friend class UnitTracker;
    Watch(UnitTracker* tracker, std::string unit) : tracker_(tracker), unit_(std::move(unit)) {}
    UnitTracker* tracker_;
    std::string unit_;
  };
  // At most one watcher per unit (a unit has exactly one owner at a time).
  absl::StatusOr<std::unique_ptr<Watch>> Add(const std::string& unit, UnitWatcher* watcher);

  // Entry point of every signal match (tests feed forged messages here).
  void OnSignal(sd_bus_message* m) noexcept;
  // Delivers the queued hints (normally from a deferred event source).
  void DispatchHints() noexcept;
  size_t queue_length() const noexcept { return queue_.size(); }
  // Whether no call to systemd waits for its answer (default: the throttle of
  // bus_call.h is empty); tests set their own.
  void SetCallsAnswered(std::function<bool()> answered) { calls_answered_ = std::move(answered); }
  // Ticks that asked nothing because calls were still unanswered.
  uint64_t ticks_deferred() const noexcept { return ticks_deferred_; }
  bool queue_overflowed() const noexcept { return queue_.overflowed(); }

 private:
  struct Entry {
    UnitWatcher* watcher = nullptr;
    bool polling = false;
    bool job_hints_only = false;
  };
  static int OnMatch(sd_bus_message* m, void* userdata, sd_bus_error* error) noexcept;
  static int OnMatchInstalled(sd_bus_message* m, void* userdata, sd_bus_error* error) noexcept;
  static int OnDefer(sd_event_source* s, void* userdata) noexcept;
  static int OnTick(sd_event_source* s, uint64_t usec, void* userdata) noexcept;
  void Remove(const std::string& unit);
  void ArmTick();
  absl::Status Subscribe();

  sd_event* event_;
  HintQueue queue_;
  std::map<std::string, Entry, std::less<>> watched_;
  EventSourcePtr defer_;
  EventSourcePtr tick_;
  SlotPtr unit_removed_match_, job_removed_match_, properties_match_;
  sd_bus* bus_ = nullptr;
  Pending subscribe_;
  std::function<void(absl::Status)> on_error_;
  std::function<void()> on_systemd_appeared_;
  bool systemd_appeared_ = false;
  size_t systemd_appearances_ = 0;
  std::string systemd_owner_;
  uint64_t foreign_signals_ = 0;
  uint64_t last_stop_progress_usec_ = 0;  // CLOCK_MONOTONIC; 0: none yet
  uint64_t property_signals_skipped_ = 0;
  std::function<bool()> calls_answered_;
  uint64_t deferred_since_usec_ = 0;  // CLOCK_MONOTONIC of the first deferred tick; 0: none
  uint64_t ticks_deferred_ = 0;
};

}  // namespace opencode::daemon
