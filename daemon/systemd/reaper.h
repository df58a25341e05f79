// Stopping a PTY unit and proving it gone (the owner's slot is freed only
// then). Invariant: a unit is gone only when GetUnit answers NoSuchUnit; hints
// (unit_tracker.h) only make it ask sooner, and only time ends the proof.
#pragma once

#include <systemd/sd-event.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "daemon/base/sd_ptr.h"
#include "daemon/systemd/systemd_api.h"
#include "daemon/systemd/unit_tracker.h"
#include "daemon/systemd/unit_watcher.h"

namespace opencode::daemon {

// Stops a unit and proves it gone: StopUnit("replace") -> (ResetFailedUnit,
// GetUnit) until GetUnit answers org.freedesktop.systemd1.NoSuchUnit, re-asking on hints and ticks
// (at most one query in flight plus one pending), and giving up only after
// kCleanupDeadlineUsec in which systemd made no progress on any PTY unit (none
// proven gone, removed or done with a job: UnitTracker::NoteStopProgress), or at
// kCleanupHardDeadlineUsec: time, never the number of hints, ends the proof.
class Reaper final : public UnitWatcher {
 public:
  // OK: proven gone. Otherwise why not (the owner logs it).
  using Done = std::function<void(absl::Status)>;
  Reaper(SystemdApi* api, UnitTracker* tracker, sd_event* event, std::string unit, Done done);

  // kProveOnly skips StopUnit: the unit is known to be released already.
  enum class How { kStopFirst, kProveOnly };
  absl::Status Start(How how = How::kStopFirst);
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
