// Hints are never evidence: the pilot's TestForgedUnitRemovedSignalCannot-
// ProveCleanup (a forged UnitRemoved from :1.999 -> exactly one cleanup query,
// stopped=false), the same for JobRemoved and PropertiesChanged, and the
// Reaper's unref -> stop -> prove-gone sequence with its bounds; systemd
// reappearing on the bus (NameOwnerChanged) re-queries every watched unit once.
#include <gtest/gtest.h>

#include "common/limits.h"
#include "daemon/unit_manager.h"
#include "daemon/unit_state.h"
#include "tests/daemon_test_util.h"

namespace opencode::daemon {
namespace {

using testing::FakeSystemd;
using testing::MessageFactory;

constexpr char kUnit[] = "opencode-pty-0123456789abcdef0123456789abcdef.service";
constexpr char kPath[] =
    "/org/freedesktop/systemd1/unit/opencode_2dpty_2d0123456789abcdef0123456789abcdef_2eservice";

UnitSnapshot Snapshot(const char* active, uint32_t job = 0) {
  UnitSnapshot s;
  s.unit["ActiveState"] = std::string(active);
  s.unit["Job"] = JobRef{job, ObjectPath{job ? "/org/freedesktop/systemd1/job/1" : "/"}};
  s.service["ExecMainCode"] = int32_t{1};
  s.service["ExecMainStatus"] = int32_t{0};
  s.service["Result"] = std::string("success");
  return s;
}

MessagePtr ForgedUnitRemoved(MessageFactory& f) {
  return f.Signal("/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "UnitRemoved",
                  ":1.999", [](sd_bus_message* m) { sd_bus_message_append(m, "so", kUnit, kPath); });
}

struct Fixture : ::testing::Test {
  void SetUp() override { ASSERT_TRUE(tracker.Init().ok()); }
  EventPtr event = testing::NewEvent();
  UnitTracker tracker{event.get()};
  FakeSystemd systemd;
  MessageFactory f;
};

// The session's view of its unit: stopped only once a query says so.
struct Watch : Fixture {
  bool stopped = false;
  int snapshots = 0;
  std::unique_ptr<UnitMonitor> monitor = std::make_unique<UnitMonitor>(
      &systemd, &tracker, kUnit, [this](absl::StatusOr<UnitSnapshot> s) {
        ++snapshots;
        if (s.ok() && IsUnitFinished(*s)) stopped = true;
      });
};

TEST_F(Watch, ForgedUnitRemovedFrom1999GivesExactlyOneQueryAndStoppedFalse) {
  ASSERT_TRUE(monitor->Start().ok());
  auto forged = ForgedUnitRemoved(f);
  ASSERT_STREQ(sd_bus_message_get_sender(forged.get()), ":1.999");
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

TEST_F(Watch, TheQueryNotTheSignalMarksAUnitStopped) {
  ASSERT_TRUE(monitor->Start().ok());
  auto forged = ForgedUnitRemoved(f);
  tracker.OnSignal(forged.get());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("QueryUnit") == 1; }));
  ASSERT_TRUE(systemd.AnswerSnapshot(Snapshot("inactive")));
  EXPECT_TRUE(stopped);
}

TEST_F(Watch, ManyForgedSignalsOfEveryKindCoalesceIntoOneQuery) {
  ASSERT_TRUE(monitor->Start().ok());
  for (int i = 0; i < 1000; ++i) {
    auto a = ForgedUnitRemoved(f);
    auto b = f.Signal("/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                      "JobRemoved", ":1.999", [](sd_bus_message* m) {
                        sd_bus_message_append(m, "uoss", 7u, "/org/freedesktop/systemd1/job/7",
                                              kUnit, "done");
                      });
    auto c = f.Signal(kPath, "org.freedesktop.DBus.Properties", "PropertiesChanged", ":1.999",
                      [](sd_bus_message* m) {
                        sd_bus_message_append(m, "sa{sv}as", "org.freedesktop.systemd1.Unit", 1,
                                              "ActiveState", "s", "inactive", 0);
                      });
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
      static_cast<int>(limits::kRequeryIntervalUsec / 1000) + 1000));
}

TEST_F(Watch, DestroyingTheMonitorCancelsItsQuery) {
  ASSERT_TRUE(monitor->Start().ok());
  monitor->QueryNow();
  monitor.reset();
  EXPECT_TRUE(systemd.calls().back()->cancelled);
}

MessagePtr OwnerChanged(MessageFactory& f, const char* name, const char* new_owner) {
  return f.Signal("/org/freedesktop/DBus", "org.freedesktop.DBus", "NameOwnerChanged",
                  "org.freedesktop.DBus", [&](sd_bus_message* m) {
                    sd_bus_message_append(m, "sss", name, ":1.1", new_owner);
                  });
}

TEST_F(Watch, SystemdReappearingRequeriesEveryWatchedUnitOnceAndCallsBack) {
  int appeared = 0;
  tracker.SetOnSystemdAppeared([&] { ++appeared; });
  ASSERT_TRUE(monitor->Start().ok());
  // A thousand announcements coalesce into one round.
  for (int i = 0; i < 1000; ++i) {
    auto m = OwnerChanged(f, "org.freedesktop.systemd1", ":1.77");
    tracker.OnSignal(m.get());
  }
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return appeared == 1; }));
  testing::RunFor(event.get(), 50);
  EXPECT_EQ(appeared, 1);
  EXPECT_EQ(tracker.systemd_appearances(), 1u);
  EXPECT_EQ(systemd.Count("QueryUnit"), 1u) << "one query for the one watched unit";
  EXPECT_FALSE(stopped) << "an appearance proves nothing about a unit";
}

TEST_F(Watch, SystemdLeavingOrAnotherNameChangesNothing) {
  int appeared = 0;
  tracker.SetOnSystemdAppeared([&] { ++appeared; });
  ASSERT_TRUE(monitor->Start().ok());
  auto left = OwnerChanged(f, "org.freedesktop.systemd1", "");
  tracker.OnSignal(left.get());
  auto other = OwnerChanged(f, "org.freedesktop.login1", ":1.78");
  tracker.OnSignal(other.get());
  testing::RunFor(event.get(), 50);
  EXPECT_EQ(appeared, 0);
  EXPECT_EQ(systemd.Count("QueryUnit"), 0u);
}

// ---- Reaper

struct ReaperTest : Fixture {
  absl::Status result = absl::UnknownError("not done");
  bool done = false;
  std::unique_ptr<Reaper> reaper = std::make_unique<Reaper>(
      &systemd, &tracker, event.get(), kUnit, [this](absl::Status st) {
        done = true;
        result = st;
      });
};

TEST_F(ReaperTest, UnrefThenStopThenProof) {
  ASSERT_TRUE(reaper->Start().ok());
  // The reference goes first (systemd's match-rule budget, see Reaper::Unref).
  ASSERT_EQ(systemd.Count("UnrefUnit"), 1u);
  ASSERT_EQ(systemd.Count("StopUnit"), 0u);
  ASSERT_TRUE(systemd.Answer("UnrefUnit", absl::OkStatus()));
  ASSERT_TRUE(systemd.Answer("StopUnit", absl::OkStatus()));
  ASSERT_EQ(systemd.Count("QueryGone"), 1u);
  ASSERT_TRUE(systemd.AnswerGone(true));
  EXPECT_TRUE(done);
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_TRUE(reaper->gone());
}

TEST_F(ReaperTest, ForgedUnitRemovedCostsOneQueryAndProvesNothing) {
  ASSERT_TRUE(reaper->Start().ok());
  ASSERT_TRUE(systemd.Answer("UnrefUnit", absl::OkStatus()));
  ASSERT_TRUE(systemd.Answer("StopUnit", absl::OkStatus()));
  ASSERT_TRUE(systemd.AnswerGone(false));  // still loaded (stopping)
  auto forged = ForgedUnitRemoved(f);
  tracker.OnSignal(forged.get());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("QueryGone") == 2; }));
  ASSERT_TRUE(systemd.AnswerGone(false));
  testing::RunFor(event.get(), 50);
  EXPECT_EQ(systemd.Count("QueryGone"), 2u);
  EXPECT_FALSE(done);
  EXPECT_FALSE(reaper->gone());
}

TEST_F(ReaperTest, NoSuchUnitAndNotReferencedAreNotErrors) {
  ASSERT_TRUE(reaper->Start().ok());
  ASSERT_TRUE(systemd.Answer("UnrefUnit", absl::FailedPreconditionError(
                                              "org.freedesktop.systemd1.NotReferenced: not referenced")));
  ASSERT_TRUE(systemd.Answer("StopUnit", absl::NotFoundError(
                                             "org.freedesktop.systemd1.NoSuchUnit: Unit x not loaded.")));
  ASSERT_TRUE(systemd.AnswerGone(true));
  EXPECT_TRUE(result.ok()) << result;
}

TEST_F(ReaperTest, GivesUpAfterMaxCleanupQueries) {
  ASSERT_TRUE(reaper->Start().ok());
  ASSERT_TRUE(systemd.Answer("UnrefUnit", absl::OkStatus()));
  ASSERT_TRUE(systemd.Answer("StopUnit", absl::OkStatus()));
  for (unsigned i = 0; i < limits::kMaxCleanupQueries; ++i) {
    ASSERT_TRUE(systemd.AnswerGone(false)) << i;
    reaper->OnUnitHint();
  }
  EXPECT_EQ(systemd.Count("QueryGone"), limits::kMaxCleanupQueries);
  EXPECT_TRUE(done);
  EXPECT_FALSE(result.ok());
  EXPECT_FALSE(reaper->gone());
}

TEST_F(ReaperTest, GivesUpAtTheCleanupDeadline) {
  ASSERT_TRUE(reaper->Start().ok());
  ASSERT_TRUE(systemd.Answer("UnrefUnit", absl::OkStatus()));
  ASSERT_TRUE(systemd.Answer("StopUnit", absl::OkStatus()));
  // Answer "still there" to every (tick-driven) query until the deadline.
  ASSERT_TRUE(testing::RunUntil(
      event.get(),
      [&] {
        while (systemd.Pending_("QueryGone")) systemd.AnswerGone(false);
        return done;
      },
      static_cast<int>(limits::kCleanupDeadlineUsec / 1000) + 3000));
  EXPECT_EQ(result.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_GE(systemd.Count("QueryGone"), 2u) << "ticks re-ask without any signal";
}

}  // namespace
}  // namespace opencode::daemon
