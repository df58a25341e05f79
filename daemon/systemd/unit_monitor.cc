// One unit's snapshots for its owner (see unit_monitor.h).
#include "daemon/systemd/unit_monitor.h"

#include <utility>

#include "daemon/base/status_macros.h"

namespace opencode::daemon {

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

UnitMonitor::~UnitMonitor() {
  if (destroyed_ != nullptr) *destroyed_ = true;
}

absl::Status UnitMonitor::Send() noexcept {
  ++queries_;
  auto pending = api_->QueryUnit(unit_, [this](absl::StatusOr<UnitSnapshot> snapshot) {
    query_.reset();
    // The owner hears the answer before the coalesced re-query goes out: an
    // answer that ends its interest (the unit finished: the owner destroys
    // this monitor) then leaves nothing on the wire for systemd to answer in
    // vain ahead of the reaper's calls. A re-query that cannot even be sent
    // (systemd's connection is closing) is not reported from here: the owner
    // would hear of it inside its own callback and may destroy this monitor
    // there (issue #17's soak: a SIGSEGV in a daemon-reexec). It stays
    // pending instead: the next hint or tick asks again, and a reconnection
    // re-queries every watched unit.
    bool destroyed = false;
    destroyed_ = &destroyed;
    OnSnapshot cb = on_snapshot_;
    cb(std::move(snapshot));
    if (destroyed) return;
    destroyed_ = nullptr;
    if (requery_ && !query_) {
      requery_ = false;
      if (!Send().ok()) requery_ = true;
    }
  });
  if (!pending.ok()) return pending.status();
  query_ = std::move(*pending);
  return absl::OkStatus();
}

}  // namespace opencode::daemon
