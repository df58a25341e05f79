// Stop, reset and prove gone (see reaper.h).
#include "daemon/systemd/reaper.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "daemon/base/status_macros.h"

namespace opencode::daemon {

Reaper::Reaper(SystemdApi* api, UnitTracker* tracker, sd_event* event, std::string unit, Done done)
    : api_(api), tracker_(tracker), event_(event), unit_(std::move(unit)), done_(std::move(done)) {}

absl::Status Reaper::Start(How how) {
  ASSIGN_OR_RETURN(watch_, tracker_->Add(unit_, this));
  watch_->SetPolling(true);
  sd_event_source* s = nullptr;
  int r = sd_event_add_time_relative(event_, &s, CLOCK_MONOTONIC, limits::kCleanupDeadlineUsec, 0,
                                     &Reaper::OnDeadline, this);
  if (r < 0) return SdError(r, "sd_event_add_time(cleanup deadline)");
  deadline_.reset(s);
  sd_event_now(event_, CLOCK_MONOTONIC, &started_usec_);
  if (how == How::kProveOnly) {
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
      tracker_->NoteStopProgress();
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
  // systemd's jobs on PTY units moved within the window (a unit proven gone,
  // removed or done with a job: a mass close), so this one's turn may still
  // come. Wait for the window after that, never past the hard deadline.
  uint64_t hard = self->started_usec_ + limits::kCleanupHardDeadlineUsec;
  if (uint64_t next = self->tracker_->ProgressDeadline(usec, limits::kCleanupDeadlineUsec, hard)) {
    sd_event_source_set_time(s, next);
    sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
    return 0;
  }
  bool at_hard = usec >= hard;
  self->Finish(absl::DeadlineExceededError(absl::StrCat(
      self->unit_, " not proven gone within the cleanup deadline",
      at_hard ? " (the hard deadline)" : " (no progress on PTY units meanwhile)",
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
