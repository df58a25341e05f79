// The owner of one watched PTY unit, as UnitTracker (unit_tracker.h) sees it:
// something to tell "ask systemd again". Invariant: a hint carries no state;
// what the unit is doing is learnt only from the query the watcher sends.
#pragma once

namespace opencode::daemon {

class UnitWatcher {
 public:
  // A hint (signal, queue overflow or poll tick) says: ask systemd again.
  virtual void OnUnitHint() noexcept = 0;

 protected:
  ~UnitWatcher() = default;
};

}  // namespace opencode::daemon
