// Keeping one unit's state in view for its owner (a session): a query of
// its properties on every hint (unit_tracker.h), tick or request, at most one
// in flight. Invariant: the owner decides only from the snapshots it is
// given, never from the hint that caused one.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/systemd/systemd_api.h"
#include "daemon/systemd/unit_tracker.h"
#include "daemon/systemd/unit_watcher.h"

namespace opencode::daemon {

// Re-queries one unit's properties whenever told to (hint, tick, or the owner's
// own reason such as EOF of the PTY stream); coalesces to at most one query in
// flight plus one pending. The owner decides from each snapshot.
class UnitMonitor final : public UnitWatcher {
 public:
  using OnSnapshot = std::function<void(absl::StatusOr<UnitSnapshot>)>;
  UnitMonitor(SystemdApi* api, UnitTracker* tracker, std::string unit, OnSnapshot on_snapshot);
  ~UnitMonitor();
  UnitMonitor(const UnitMonitor&) = delete;
  UnitMonitor& operator=(const UnitMonitor&) = delete;

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
  // While the owner's callback runs: where to say that it destroyed us.
  bool* destroyed_ = nullptr;
};

}  // namespace opencode::daemon
