// Owning handles for libsystemd objects. Invariant: every sd-event source,
// sd-bus connection, slot and message of the supervisor is held by one of these
// and released by its stateless deleter; no raw sd pointer outlives the
// statement that made it.
#pragma once

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include <cstdint>
#include <memory>

namespace opencode::daemon {

struct EventDeleter {
  void operator()(sd_event* e) const noexcept { sd_event_unref(e); }
};
// Disabling before the unref matters: a source still referenced elsewhere (by
// sd-event while it is being dispatched) must not fire again for a dead owner.
struct EventSourceDeleter {
  void operator()(sd_event_source* s) const noexcept { sd_event_source_disable_unref(s); }
};
// Flush so that a final reply or StopUnit already queued still reaches the bus.
struct BusDeleter {
  void operator()(sd_bus* b) const noexcept { sd_bus_flush_close_unref(b); }
};
// Unref'ing a slot cancels its pending call or removes its match.
struct SlotDeleter {
  void operator()(sd_bus_slot* s) const noexcept { sd_bus_slot_unref(s); }
};
struct MessageDeleter {
  void operator()(sd_bus_message* m) const noexcept { sd_bus_message_unref(m); }
};

using EventPtr = std::unique_ptr<sd_event, EventDeleter>;
using EventSourcePtr = std::unique_ptr<sd_event_source, EventSourceDeleter>;
using BusPtr = std::unique_ptr<sd_bus, BusDeleter>;
using SlotPtr = std::unique_ptr<sd_bus_slot, SlotDeleter>;
using MessagePtr = std::unique_ptr<sd_bus_message, MessageDeleter>;

// A one-shot timer source that is off fires `delay_usec` from the loop's now;
// one that is already armed keeps its time (repeated arming coalesces).
inline void ArmTimerIfOff(sd_event_source* s, uint64_t delay_usec) noexcept {
  int enabled = SD_EVENT_OFF;
  sd_event_source_get_enabled(s, &enabled);
  if (enabled != SD_EVENT_OFF) return;
  sd_event_source_set_time_relative(s, delay_usec);
  sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

// sd-event priorities: the PTY data path outranks the bus so output keeps
// flowing while systemd is slow (as systemd's own ptyfwd does). sd-event
// dispatches one source per iteration, the highest-priority pending one first,
// so a bus message waits for an iteration in which no pump is pending: each
// pump dispatch does bounded work (its queues are bounded, common/limits.h),
// but a data path that is ready on every iteration delays the bus for as long
// as it stays ready. The idle-priority housekeeping has the same rule, and the
// listener yields to it after each burst (Listener).
inline constexpr int64_t kPumpPriority = SD_EVENT_PRIORITY_IMPORTANT;
inline constexpr int64_t kBusPriority = SD_EVENT_PRIORITY_NORMAL;
inline constexpr int64_t kDefaultPriority = SD_EVENT_PRIORITY_NORMAL;
// Deferred destruction of finished sessions runs after everything else.
inline constexpr int64_t kReapPriority = SD_EVENT_PRIORITY_IDLE;

}  // namespace opencode::daemon
