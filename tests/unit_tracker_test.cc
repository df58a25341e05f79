// Hints are never evidence: a UnitRemoved from systemd -> exactly one query,
// stopped=false (the pilot's TestForgedUnitRemovedSignalCannotProveCleanup),
// the same for JobRemoved and PropertiesChanged; a signal with any other
// sender (:1.999) or a NameOwnerChanged is no hint at all; a (re)connection to
// systemd re-queries every watched unit once. UnitTracker turns signals into
// hints, the UnitMonitor it drives turns hints into queries.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/limits.h"
#include "daemon/systemd/unit_monitor.h"
#include "daemon/systemd/unit_state.h"
#include "daemon/systemd/unit_tracker.h"
#include "tests/daemon_test_util.h"
#include "tests/unit_watch_util.h"

namespace opencode::daemon {
namespace {

using testing::TrackerFixture;
using testing::kForger;
using testing::kPath;
using testing::kSystemdOwner;
using testing::kUnit;
using testing::OwnerChanged;
using testing::Snapshot;
using testing::InactiveFrom;
using testing::UnitRemovedFrom;

// The session's view of its unit: stopped only once a query says so.
struct Watch : TrackerFixture {
  bool stopped = false;
  int snapshots = 0;
  std::unique_ptr<UnitMonitor> monitor = std::make_unique<UnitMonitor>(
      &systemd, &tracker, kUnit, [this](absl::StatusOr<UnitSnapshot> s) {
        ++snapshots;
        if (s.ok() && IsUnitFinished(*s)) stopped = true;
      });
};

TEST_F(Watch, UnitRemovedFromSystemdGivesExactlyOneQueryAndStoppedFalse) {
  ASSERT_TRUE(monitor->Start().ok());
  auto forged = UnitRemovedFrom(f, kSystemdOwner);
  tracker.OnSignal(forged.get());
  EXPECT_EQ(systemd.Count("QueryUnit"), 0u) << "a signal alone queries nothing synchronously";
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("QueryUnit") == 1; }));
  // systemd's answer, not the signal, decides: the unit is still running.
  ASSERT_TRUE(systemd.AnswerSnapshot(Snapshot("active")));
  testing::RunFor(event.get(), 50);
  EXPECT_EQ(systemd.Count("QueryUnit"), 1u);
  EXPECT_EQ(snapshots, 1);
  EXPECT_FALSE(stopped);
}

TEST_F(Watch, SignalsFromAnyOtherSenderAreNoHints) {
  ASSERT_TRUE(monitor->Start().ok());
  for (const char* sender : {kForger, ":1.1", "org.freedesktop.DBus", ""}) {
    auto a = UnitRemovedFrom(f, sender);
    auto c = InactiveFrom(f, sender);
    tracker.OnSignal(a.get());
    tracker.OnSignal(c.get());
  }
  EXPECT_EQ(tracker.queue_length(), 0u);
  EXPECT_EQ(tracker.foreign_signals(), 8u);
  testing::RunFor(event.get(), 50);
  EXPECT_EQ(systemd.Count("QueryUnit"), 0u);
}

TEST_F(Watch, TheQueryNotTheSignalMarksAUnitStopped) {
  ASSERT_TRUE(monitor->Start().ok());
  auto forged = UnitRemovedFrom(f, kSystemdOwner);
  tracker.OnSignal(forged.get());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("QueryUnit") == 1; }));
  ASSERT_TRUE(systemd.AnswerSnapshot(Snapshot("inactive")));
  EXPECT_TRUE(stopped);
}

TEST_F(Watch, ManyForgedSignalsOfEveryKindCoalesceIntoOneQuery) {
  ASSERT_TRUE(monitor->Start().ok());
  for (int i = 0; i < 1000; ++i) {
    auto a = UnitRemovedFrom(f, kSystemdOwner);
    auto b = f.Signal("/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                      "JobRemoved", kSystemdOwner, [](sd_bus_message* m) {
                        sd_bus_message_append(m, "uoss", 7u, "/org/freedesktop/systemd1/job/7",
                                              kUnit, "done");
                      });
    auto c = InactiveFrom(f, kSystemdOwner);
    tracker.OnSignal(a.get());
    tracker.OnSignal(b.get());
    tracker.OnSignal(c.get());
  }
  EXPECT_EQ(tracker.queue_length(), 1u);
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("QueryUnit") == 1; }));
  ASSERT_TRUE(systemd.AnswerSnapshot(Snapshot("active")));
  testing::RunFor(event.get(), 50);
  EXPECT_EQ(systemd.Count("QueryUnit"), 1u);
  EXPECT_FALSE(stopped);
}

// A starting session's watch (issue #16): the unit's PropertiesChanged are
// no hints (each would cost systemd two GetAll during the start job); its
// JobRemoved and UnitRemoved are, and so is an overflow. Switched off, the
// PropertiesChanged count again.
TEST_F(Watch, JobHintsOnlySkipsPropertiesChangedButNotTheJobsEnd) {
  ASSERT_TRUE(monitor->Start().ok());
  monitor->SetJobHintsOnly(true);
  auto changed = [&] {
    return f.Signal(kPath, "org.freedesktop.DBus.Properties", "PropertiesChanged", kSystemdOwner,
                    [](sd_bus_message* m) {
                      sd_bus_message_append(m, "sa{sv}as", "org.freedesktop.systemd1.Unit", 1, "ActiveState", "s",
                                            "activating", 0);
                    });
  };
  for (int i = 0; i < 5; ++i) tracker.OnSignal(changed().get());
  EXPECT_EQ(tracker.queue_length(), 0u);
  EXPECT_EQ(tracker.property_signals_skipped(), 5u);
  testing::RunFor(event.get(), 50);
  EXPECT_EQ(systemd.Count("QueryUnit"), 0u);

  auto job = f.Signal("/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "JobRemoved", kSystemdOwner,
                      [](sd_bus_message* m) {
                        sd_bus_message_append(m, "uoss", 7u, "/org/freedesktop/systemd1/job/7", kUnit, "done");
                      });
  tracker.OnSignal(job.get());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("QueryUnit") == 1; }));
  ASSERT_TRUE(systemd.AnswerSnapshot(Snapshot("active")));

  auto removed = UnitRemovedFrom(f, kSystemdOwner);
  tracker.OnSignal(removed.get());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("QueryUnit") == 2; }));
  ASSERT_TRUE(systemd.AnswerSnapshot(Snapshot("active")));

  monitor->SetJobHintsOnly(false);
  tracker.OnSignal(changed().get());
  EXPECT_EQ(tracker.property_signals_skipped(), 5u);
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("QueryUnit") == 3; }));
}

// Hints that do not come from a signal still reach a job-hints-only watch: a
// reconnection (every watched unit asked again) and the poll tick.
TEST_F(Watch, JobHintsOnlyStillRequeriesOnAReconnectionAndTheTick) {
  ASSERT_TRUE(monitor->Start().ok());
  monitor->SetJobHintsOnly(true);
  tracker.SystemdConnected();
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("QueryUnit") == 1; }));
  ASSERT_TRUE(systemd.AnswerSnapshot(Snapshot("activating", 7)));
  monitor->SetPolling(true);
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("QueryUnit") == 2; }, 3000));
}

TEST_F(Watch, HintDuringAQueryCoalescesIntoOneMore) {
  ASSERT_TRUE(monitor->Start().ok());
  monitor->QueryNow();
  monitor->QueryNow();
  monitor->QueryNow();
  EXPECT_EQ(systemd.Count("QueryUnit"), 1u);
  ASSERT_TRUE(systemd.AnswerSnapshot(Snapshot("active")));
  EXPECT_EQ(systemd.Count("QueryUnit"), 2u);
  ASSERT_TRUE(systemd.AnswerSnapshot(Snapshot("active")));
  EXPECT_EQ(systemd.Count("QueryUnit"), 2u);
}

TEST_F(Watch, PollingReQueriesWithoutAnySignal) {
  ASSERT_TRUE(monitor->Start().ok());
  monitor->SetPolling(true);
  ASSERT_TRUE(testing::RunUntil(
      event.get(), [&] { return systemd.Count("QueryUnit") == 1; },
      static_cast<int>(limits::kRequeryIntervalUsec / 1000) + 30000));
}

// systemd starts its jobs only when no request is pending in its loop: a
// tick that asked every polling unit again while earlier calls were still
// unanswered kept systemd answering GetAll without a pause, and a mass STOP
// of 256 sessions on systemd 257 started no stop job for 20 s
// (vm.scale.trixie under load). The tick now waits for the answers.
TEST_F(Watch, ThePollTickAsksNothingWhileCallsToSystemdAreUnanswered) {
  bool answered = false;
  tracker.SetCallsAnswered([&] { return answered; });
  ASSERT_TRUE(monitor->Start().ok());
  monitor->SetPolling(true);
  const int guard_ms = static_cast<int>(3 * limits::kRequeryIntervalUsec / 1000) + 30000;
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return tracker.ticks_deferred() >= 2; }, guard_ms));
  EXPECT_EQ(systemd.Count("QueryUnit"), 0u) << "two ticks passed while calls were unanswered";
  answered = true;
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("QueryUnit") == 1; }, guard_ms));
}

// The wait is bounded: calls that are never all answered (a steady stream of
// other sessions' calls) delay a poll by kRequeryQuietWaitUsec at most.
TEST_F(Watch, ThePollTickAsksAnywayAfterTheQuietWaitBound) {
  tracker.SetCallsAnswered([] { return false; });
  ASSERT_TRUE(monitor->Start().ok());
  uint64_t t0 = 0;
  ASSERT_GE(sd_event_now(event.get(), CLOCK_MONOTONIC, &t0), 0);
  monitor->SetPolling(true);
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("QueryUnit") == 1; },
                                static_cast<int>(limits::kRequeryQuietWaitUsec / 1000) + 30000));
  uint64_t t1 = 0;
  ASSERT_GE(sd_event_now(event.get(), CLOCK_MONOTONIC, &t1), 0);
  EXPECT_GE(t1 - t0, limits::kRequeryQuietWaitUsec);
  EXPECT_GE(tracker.ticks_deferred(), 1u);
}

TEST_F(Watch, DestroyingTheMonitorCancelsItsQuery) {
  ASSERT_TRUE(monitor->Start().ok());
  monitor->QueryNow();
  monitor.reset();
  EXPECT_TRUE(systemd.calls().back()->cancelled);
}

// Found by issue #17's 60-minute soak (bookworm, seed 3214152189, round 27:
// the supervisor died of SIGSEGV in a daemon-reexec). A query was answered
// while a re-query was pending (a hint came meanwhile); systemd's connection
// was closing, so the re-query failed before it was sent; that failure went
// to the owner at once, from inside the answer's callback; the owner (a
// starting session) failed and destroyed the monitor, and the callback went
// on to read the destroyed monitor. Now a re-query that cannot be sent is
// not reported by itself (the next hint or tick asks again, and a
// reconnection re-queries every watched unit): the owner gets the answer
// it waited for, once.
TEST_F(Watch, AReQueryThatCannotBeSentDoesNotCallTheOwnerFromInsideAnAnswer) {
  std::vector<absl::StatusOr<UnitSnapshot>> seen;
  monitor = std::make_unique<UnitMonitor>(&systemd, &tracker, kUnit,
                                          [&](absl::StatusOr<UnitSnapshot> s) {
                                            seen.push_back(s);
                                            monitor.reset();  // as a session that ends does
                                          });
  ASSERT_TRUE(monitor->Start().ok());
  monitor->QueryNow();
  monitor->QueryNow();  // coalesced: one more after the answer
  ASSERT_EQ(systemd.Count("QueryUnit"), 1u);
  systemd.FailSynchronously("QueryUnit", absl::UnavailableError(
                                             "sd_bus_call_async: Transport endpoint is not connected"));
  ASSERT_TRUE(systemd.AnswerSnapshot(Snapshot("activating", 7)));
  ASSERT_EQ(seen.size(), 1u) << "one callback: the answer, not the re-query's failure before it";
  EXPECT_TRUE(seen[0].ok()) << seen[0].status();
  EXPECT_EQ(monitor, nullptr);
}

// The same failure while the owner keeps the monitor: no callback for the
// unsent re-query, and the next hint asks again (once the connection is back).
TEST_F(Watch, AReQueryThatCannotBeSentIsAskedAgainOnTheNextHint) {
  ASSERT_TRUE(monitor->Start().ok());
  monitor->QueryNow();
  monitor->QueryNow();
  systemd.FailSynchronously("QueryUnit", absl::UnavailableError("not connected"));
  ASSERT_TRUE(systemd.AnswerSnapshot(Snapshot("active")));
  EXPECT_EQ(snapshots, 1);
  EXPECT_EQ(systemd.Count("QueryUnit"), 1u);
  systemd.FailSynchronously("QueryUnit", absl::OkStatus());
  monitor->OnUnitHint();
  EXPECT_EQ(systemd.Count("QueryUnit"), 2u);
  ASSERT_TRUE(systemd.AnswerSnapshot(Snapshot("inactive")));
  EXPECT_EQ(snapshots, 2);
  EXPECT_TRUE(stopped);
}

TEST_F(Watch, ReconnectingRequeriesEveryWatchedUnitOnceAndCallsBack) {
  int appeared = 0;
  tracker.SetOnSystemdAppeared([&] { ++appeared; });
  ASSERT_TRUE(monitor->Start().ok());
  // A thousand (re)connections in one loop iteration coalesce into one round.
  for (int i = 0; i < 1000; ++i) tracker.SystemdConnected();
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return appeared == 1; }));
  testing::RunFor(event.get(), 50);
  EXPECT_EQ(appeared, 1);
  EXPECT_EQ(tracker.systemd_appearances(), 2u);  // the fixture's connection, then this
  EXPECT_EQ(systemd.Count("QueryUnit"), 1u) << "one query for the one watched unit";
  EXPECT_FALSE(stopped) << "a reconnection proves nothing about a unit";
}

TEST_F(Watch, NameOwnerChangedIsNeverAHint) {
  // No bus driver on a direct connection: a NameOwnerChanged, from any sender
  // (even the bus driver's name), changes nothing.
  int appeared = 0;
  tracker.SetOnSystemdAppeared([&] { ++appeared; });
  ASSERT_TRUE(monitor->Start().ok());
  for (const char* sender : {"org.freedesktop.DBus", kForger, kSystemdOwner, ""}) {
    auto m = OwnerChanged(f, "org.freedesktop.systemd1", ":1.66", sender);
    tracker.OnSignal(m.get());
    auto gone = OwnerChanged(f, "org.freedesktop.systemd1", "", sender);
    tracker.OnSignal(gone.get());
  }
  testing::RunFor(event.get(), 50);
  EXPECT_EQ(appeared, 0);
  EXPECT_EQ(tracker.systemd_owner(), kSystemdOwner);
  EXPECT_EQ(systemd.Count("QueryUnit"), 0u);
}

}  // namespace
}  // namespace opencode::daemon
