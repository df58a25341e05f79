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

// sd-event priorities: one for every source, so that the loop is fair by
// construction. sd-event dispatches one source per iteration, the
// highest-priority pending one first and, among equals, the one pending
// longest; a source that runs again goes to the back. So a source that
// becomes pending is dispatched after at most one dispatch of every other
// source pending at that moment, however busy the data path is: a streaming
// session cannot hold back another session's keystrokes, a deadline, the
// MainPID's exit, SIGTERM, systemd's replies or the listener (each pump
// dispatch does bounded work: its queues are bounded, common/limits.h).
// A higher priority for the pump would let a session whose data is ready on
// every iteration starve everything below it. The names say what each
// source is; tests/loop_fairness_test.cc counts the bound.
inline constexpr int64_t kPumpPriority = SD_EVENT_PRIORITY_NORMAL;
inline constexpr int64_t kBusPriority = SD_EVENT_PRIORITY_NORMAL;
inline constexpr int64_t kDefaultPriority = SD_EVENT_PRIORITY_NORMAL;
// Deferred destruction of finished sessions: in turn like everything else
// (a lower priority would wait for a moment in which nothing streams).
inline constexpr int64_t kReapPriority = SD_EVENT_PRIORITY_NORMAL;

}  // namespace opencode::daemon
