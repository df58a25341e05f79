// Watching PTY units over D-Bus: signals (UnitRemoved, JobRemoved,
// PropertiesChanged) become hints in one bounded coalescing queue, and hints
// only ever trigger re-queries by the unit's watcher. Invariants: nothing here
// concludes anything from a signal; a unit is "finished" or "gone" only by the
// answer of an explicit query (UnitMonitor, Reaper). Signals arrive only on
// the direct connection to systemd (SystemdConnection), where no other peer
// can send; a signal counts as a hint only with the sender systemd sets there
// (org.freedesktop.systemd1), and costs one comparison otherwise. Hints never
// spend a Reaper's budget (only time does).
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
#include "daemon/systemd/hint_queue.h"
#include "daemon/base/sd_ptr.h"
#include "daemon/systemd/systemd_api.h"

namespace opencode::daemon {

class UnitWatcher {
 public:
  // A hint (signal, queue overflow or poll tick) says: ask systemd again.
  virtual void OnUnitHint() noexcept = 0;

 protected:
  ~UnitWatcher() = default;
};

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
  // A reaper proved a PTY unit gone: systemd's stop jobs are moving. Every
  // reaper's no-progress window (kCleanupDeadlineUsec) counts from the last.
  void NoteUnitGone() noexcept;
  uint64_t last_unit_gone_usec() const noexcept { return last_unit_gone_usec_; }
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
  uint64_t last_unit_gone_usec_ = 0;  // CLOCK_MONOTONIC; 0: none yet
  uint64_t property_signals_skipped_ = 0;
};

// Re-queries one unit's properties whenever told to (hint, tick, or the owner's
// own reason such as EOF of the PTY stream); coalesces to at most one query in
// flight plus one pending. The owner decides from each snapshot.
class UnitMonitor final : public UnitWatcher {
 public:
  using OnSnapshot = std::function<void(absl::StatusOr<UnitSnapshot>)>;
  UnitMonitor(SystemdApi* api, UnitTracker* tracker, std::string unit, OnSnapshot on_snapshot);

  absl::Status Start();
  void SetPolling(bool polling);
  void SetJobHintsOnly(bool on);
  void QueryNow() noexcept;
  size_t queries() const noexcept { return queries_; }
  void OnUnitHint() noexcept override { QueryNow(); }

 private:
  SystemdApi* api_;
  UnitTracker* tracker_;
  std::string unit_;
  // Sends one query; its answer goes to on_snapshot_. A call that cannot be
  // sent is only returned, never reported to the owner from here.
  absl::Status Send() noexcept;

  OnSnapshot on_snapshot_;
  std::unique_ptr<UnitTracker::Watch> watch_;
  Pending query_;
  bool requery_ = false;
  size_t queries_ = 0;
};

// Stops a unit and proves it gone: StopUnit("replace") -> (ResetFailedUnit,
// GetUnit) until GetUnit answers org.freedesktop.systemd1.NoSuchUnit, re-asking on hints and ticks
// (at most one query in flight plus one pending), and giving up only after
// kCleanupDeadlineUsec in which no PTY unit at all was proven gone, or at
// kCleanupHardDeadlineUsec: time, never the number of hints, ends the proof.
class Reaper final : public UnitWatcher {
 public:
  // OK: proven gone. Otherwise why not (the owner logs it).
  using Done = std::function<void(absl::Status)>;
  Reaper(SystemdApi* api, UnitTracker* tracker, sd_event* event, std::string unit, Done done);

  // `stop_first` = false skips StopUnit (the unit is known to be
  // released already) and only proves.
  absl::Status Start(bool stop_first = true);
  bool gone() const noexcept { return gone_; }
  size_t queries() const noexcept { return queries_; }
  const std::string& unit() const noexcept { return unit_; }
  void OnUnitHint() noexcept override;

 private:
  static int OnDeadline(sd_event_source* s, uint64_t usec, void* userdata) noexcept;
  void Stop() noexcept;
  void Query() noexcept;
  void AskGone() noexcept;
  void Finish(absl::Status status) noexcept;

  SystemdApi* api_;
  UnitTracker* tracker_;
  sd_event* event_;
  std::string unit_;
  Done done_;
  std::unique_ptr<UnitTracker::Watch> watch_;
  EventSourcePtr deadline_;
  uint64_t started_usec_ = 0;
  Pending call_;
  bool querying_phase_ = false;
  bool requery_ = false;
  // StopUnit failed otherwise than "already gone" (systemd re-executing
  // never answered): sent again on the next hint or tick, at most once per
  // hint, while the unit is not proven gone.
  bool resend_ = false;
  bool gone_ = false;
  size_t queries_ = 0;
  absl::Status last_error_;
};

}  // namespace opencode::daemon
