// Hints are never evidence: a UnitRemoved from systemd's own name -> exactly
// one query, stopped=false (the pilot's TestForgedUnitRemovedSignalCannot-
// ProveCleanup), the same for JobRemoved and PropertiesChanged; a signal from
// any other sender (:1.999) or a NameOwnerChanged not from the bus driver is
// no hint at all, also on a real dbus-daemon with the forger sending unicast
// to the supervisor's unique name; the Reaper's unref -> stop -> prove-gone
// sequence with its bounds (hints never spend it); systemd reappearing on the
// bus (NameOwnerChanged from the driver) re-queries every watched unit once.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "common/limits.h"
#include "daemon/journal.h"
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

// systemd's unique name in the tests below, and a local peer's.
constexpr char kSystemdOwner[] = ":1.1";
constexpr char kForger[] = ":1.999";

MessagePtr UnitRemovedFrom(MessageFactory& f, const char* sender) {
  return f.Signal("/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "UnitRemoved",
                  sender, [](sd_bus_message* m) { sd_bus_message_append(m, "so", kUnit, kPath); });
}

MessagePtr OwnerChanged(MessageFactory& f, const char* name, const char* new_owner,
                        const char* sender = "org.freedesktop.DBus") {
  return f.Signal("/org/freedesktop/DBus", "org.freedesktop.DBus", "NameOwnerChanged", sender,
                  [&](sd_bus_message* m) { sd_bus_message_append(m, "sss", name, ":1.1", new_owner); });
}

struct Fixture : ::testing::Test {
  // The bus driver announces systemd as kSystemdOwner before anything is watched.
  void SetUp() override {
    ASSERT_TRUE(tracker.Init().ok());
    auto m = OwnerChanged(f, "org.freedesktop.systemd1", kSystemdOwner);
    tracker.OnSignal(m.get());
    ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return tracker.systemd_appearances() == 1; }));
    ASSERT_EQ(tracker.systemd_owner(), kSystemdOwner);
  }
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
  for (const char* sender : {kForger, "org.freedesktop.systemd1", "org.freedesktop.DBus", ""}) {
    auto a = UnitRemovedFrom(f, sender);
    auto c = f.Signal(kPath, "org.freedesktop.DBus.Properties", "PropertiesChanged", sender,
                      [](sd_bus_message* m) {
                        sd_bus_message_append(m, "sa{sv}as", "org.freedesktop.systemd1.Unit", 1,
                                              "ActiveState", "s", "inactive", 0);
                      });
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
    auto c = f.Signal(kPath, "org.freedesktop.DBus.Properties", "PropertiesChanged", kSystemdOwner,
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
  EXPECT_EQ(tracker.systemd_appearances(), 2u);  // the fixture's first announcement, then this
  EXPECT_EQ(tracker.systemd_owner(), ":1.77");
  // From now on only :1.77 sends hints.
  auto old = UnitRemovedFrom(f, kSystemdOwner);
  tracker.OnSignal(old.get());
  EXPECT_EQ(tracker.queue_length(), 0u);
  EXPECT_EQ(systemd.Count("QueryUnit"), 1u) << "one query for the one watched unit";
  EXPECT_FALSE(stopped) << "an appearance proves nothing about a unit";
}

TEST_F(Watch, SystemdLeavingOrAnotherNameChangesNothing) {
  int appeared = 0;
  tracker.SetOnSystemdAppeared([&] { ++appeared; });
  ASSERT_TRUE(monitor->Start().ok());
  auto other = OwnerChanged(f, "org.freedesktop.login1", ":1.78");
  tracker.OnSignal(other.get());
  auto left = OwnerChanged(f, "org.freedesktop.systemd1", "");
  tracker.OnSignal(left.get());
  testing::RunFor(event.get(), 50);
  EXPECT_EQ(appeared, 0);
  EXPECT_EQ(systemd.Count("QueryUnit"), 0u);
  // systemd away: even its old name sends no hints.
  EXPECT_EQ(tracker.systemd_owner(), "");
  auto old = UnitRemovedFrom(f, kSystemdOwner);
  tracker.OnSignal(old.get());
  EXPECT_EQ(tracker.queue_length(), 0u);
}

TEST_F(Watch, NameOwnerChangedNotFromTheBusDriverChangesNothing) {
  int appeared = 0;
  tracker.SetOnSystemdAppeared([&] { ++appeared; });
  ASSERT_TRUE(monitor->Start().ok());
  for (const char* sender : {kForger, kSystemdOwner, "org.freedesktop.systemd1", ""}) {
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

// Issue #17's soak: systemd re-executed while a session was reaped; its
// UnrefUnit and StopUnit got NoReply, the unit stayed referenced and loaded,
// and queries alone could never prove it gone. The next hint sends both again.
TEST_F(ReaperTest, AnUnrefAndStopLostInAReexecAreSentAgainOnTheNextHint) {
  ASSERT_TRUE(reaper->Start().ok());
  absl::Status lost = absl::UnavailableError("org.freedesktop.DBus.Error.NoReply: Message recipient disconnected");
  ASSERT_TRUE(systemd.Answer("UnrefUnit", lost));
  ASSERT_TRUE(systemd.Answer("StopUnit", lost));
  ASSERT_TRUE(systemd.AnswerGone(false));  // still loaded: our reference holds it
  EXPECT_EQ(systemd.Count("UnrefUnit"), 1u);
  auto hint = UnitRemovedFrom(f, kSystemdOwner);  // systemd is back: any hint or tick
  tracker.OnSignal(hint.get());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("UnrefUnit") == 2; }));
  ASSERT_TRUE(systemd.Answer("UnrefUnit", absl::OkStatus()));
  ASSERT_TRUE(systemd.Answer("StopUnit", absl::OkStatus()));
  ASSERT_TRUE(systemd.AnswerGone(true));
  EXPECT_TRUE(done);
  EXPECT_TRUE(result.ok()) << result;
}

TEST_F(ReaperTest, UnitRemovedCostsOneQueryAndProvesNothing) {
  ASSERT_TRUE(reaper->Start().ok());
  ASSERT_TRUE(systemd.Answer("UnrefUnit", absl::OkStatus()));
  ASSERT_TRUE(systemd.Answer("StopUnit", absl::OkStatus()));
  ASSERT_TRUE(systemd.AnswerGone(false));  // still loaded (stopping)
  auto forged = UnitRemovedFrom(f, kSystemdOwner);
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

TEST_F(ReaperTest, HintsNeverSpendTheBudgetOnlyTheDeadlineEndsTheProof) {
  // Issue #21: 32 hints used to make the reaper give up ("still loaded after
  // 32 queries") while the unit was still stopping.
  ASSERT_TRUE(reaper->Start().ok());
  ASSERT_TRUE(systemd.Answer("UnrefUnit", absl::OkStatus()));
  ASSERT_TRUE(systemd.Answer("StopUnit", absl::OkStatus()));
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(systemd.AnswerGone(false)) << i;
    reaper->OnUnitHint();
  }
  EXPECT_EQ(systemd.Count("QueryGone"), 1001u);
  EXPECT_FALSE(done);
  ASSERT_TRUE(systemd.AnswerGone(true));
  EXPECT_TRUE(done);
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_TRUE(reaper->gone());
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

// ---- a real dbus-daemon: forged signals unicast to the supervisor's name

// A private dbus-daemon (session policy: every peer may send anything to
// anyone, like a local user on the system bus), on a socket in a temp dir.
class PrivateBus {
 public:
  PrivateBus() {
    char tmpl[] = "/tmp/opencode-bus-XXXXXX";
    dir_ = mkdtemp(tmpl);
    address_ = "unix:path=" + dir_ + "/bus";
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(p[1], 3);
      execl("/usr/bin/dbus-daemon", "dbus-daemon", "--session", "--nofork", "--nopidfile",
            ("--address=" + address_).c_str(), "--print-address=3", nullptr);
      _exit(127);
    }
    close(p[1]);
    char buf[512];
    ssize_t n = read(p[0], buf, sizeof buf);  // the daemon listens once it prints
    close(p[0]);
    ready_ = n > 0;
  }
  ~PrivateBus() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }
  bool ready() const { return ready_; }
  BusPtr Connect(sd_event* event) const {
    sd_bus* b = nullptr;
    sd_bus_new(&b);
    sd_bus_set_address(b, address_.c_str());
    sd_bus_set_bus_client(b, 1);
    if (sd_bus_start(b) < 0) {
      sd_bus_unref(b);
      return nullptr;
    }
    sd_bus_attach_event(b, event, 0);
    return BusPtr(b);
  }

 private:
  std::string dir_, address_;
  pid_t pid_ = -1;
  bool ready_ = false;
};

struct RealBus : ::testing::Test {
  void SetUp() override {
    ASSERT_TRUE(bus.ready()) << "dbus-daemon did not start";
    ASSERT_TRUE(tracker.Init().ok());
    fake_systemd = bus.Connect(event.get());
    supervisor = bus.Connect(event.get());
    forger = bus.Connect(event.get());
    ASSERT_TRUE(fake_systemd && supervisor && forger);
    // "systemd": owns the name and answers Subscribe.
    ASSERT_GE(sd_bus_request_name(fake_systemd.get(), "org.freedesktop.systemd1", 0), 0);
    sd_bus_slot* slot = nullptr;
    ASSERT_GE(sd_bus_add_object(fake_systemd.get(), &slot, "/org/freedesktop/systemd1",
                                [](sd_bus_message* m, void*, sd_bus_error*) -> int {
                                  if (sd_bus_message_is_method_call(m, "org.freedesktop.systemd1.Manager", "Subscribe"))
                                    return sd_bus_reply_method_return(m, nullptr);
                                  return 0;
                                },
                                nullptr),
              0);
    object.reset(slot);
    ASSERT_TRUE(tracker.AttachBus(supervisor.get(), [this](absl::Status st) { errors.push_back(st); }).ok());
    const char* unique = nullptr;
    sd_bus_get_unique_name(fake_systemd.get(), &unique);
    systemd_name = unique;
    sd_bus_get_unique_name(supervisor.get(), &unique);
    supervisor_name = unique;
    // The tracker learns systemd's name from the bus driver (one appearance).
    ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return tracker.systemd_appearances() == 1; }));
    ASSERT_EQ(tracker.systemd_owner(), systemd_name);
  }
  void TearDown() override {
    monitor.reset();
    object.reset();
  }
  // `from` sends `member` naming kUnit to `to` (unicast; "" broadcasts).
  static void Send(sd_bus* from, const char* to, const char* member) {
    sd_bus_message* raw = nullptr;
    if (std::string(member) == "NameOwnerChanged") {
      sd_bus_message_new_signal(from, &raw, "/org/freedesktop/DBus", "org.freedesktop.DBus", member);
      sd_bus_message_append(raw, "sss", "org.freedesktop.systemd1", "", ":1.999");
    } else if (std::string(member) == "PropertiesChanged") {
      sd_bus_message_new_signal(from, &raw, kPath, "org.freedesktop.DBus.Properties", member);
      sd_bus_message_append(raw, "sa{sv}as", "org.freedesktop.systemd1.Unit", 1, "ActiveState", "s",
                            "inactive", 0);
    } else if (std::string(member) == "JobRemoved") {
      sd_bus_message_new_signal(from, &raw, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", member);
      sd_bus_message_append(raw, "uoss", 7u, "/org/freedesktop/systemd1/job/7", kUnit, "done");
    } else {
      sd_bus_message_new_signal(from, &raw, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", member);
      sd_bus_message_append(raw, "so", kUnit, kPath);
    }
    MessagePtr m(raw);
    if (to[0] != '\0') sd_bus_message_set_destination(raw, to);
    ASSERT_GE(sd_bus_send(from, raw, nullptr), 0);
  }
  // Returns once the supervisor's connection has processed everything `from`
  // sent before (a Peer.Ping behind it on the same stream is answered).
  void Barrier(sd_bus* from) {
    bool answered = false;
    sd_bus_slot* slot = nullptr;
    ASSERT_GE(sd_bus_call_method_async(
                  from, &slot, supervisor_name.c_str(), "/", "org.freedesktop.DBus.Peer", "Ping",
                  [](sd_bus_message*, void* ud, sd_bus_error*) -> int {
                    *static_cast<bool*>(ud) = true;
                    return 0;
                  },
                  &answered, nullptr),
              0);
    SlotPtr owned(slot);
    ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return answered; }));
    testing::RunFor(event.get(), 50);  // the deferred hint dispatch
  }

  EventPtr event = testing::NewEvent();
  PrivateBus bus;
  UnitTracker tracker{event.get()};
  FakeSystemd systemd;
  BusPtr fake_systemd, supervisor, forger;
  SlotPtr object;
  std::string systemd_name, supervisor_name;
  std::vector<absl::Status> errors;
  bool stopped = false;
  std::unique_ptr<UnitMonitor> monitor = std::make_unique<UnitMonitor>(
      &systemd, &tracker, kUnit, [this](absl::StatusOr<UnitSnapshot> s) {
        if (s.ok() && IsUnitFinished(*s)) stopped = true;
      });
};

TEST_F(RealBus, AFloodOfForgedSignalsUnicastToTheSupervisorIsNoHint) {
  int appeared = 0;
  tracker.SetOnSystemdAppeared([&] { ++appeared; });
  ASSERT_TRUE(monitor->Start().ok());
  for (int i = 0; i < 500; ++i)
    for (const char* member : {"NameOwnerChanged", "UnitRemoved", "JobRemoved", "PropertiesChanged"}) {
      Send(forger.get(), supervisor_name.c_str(), member);
      Send(forger.get(), "", member);  // broadcast: the bus daemon's match filter applies
    }
  Barrier(forger.get());
  EXPECT_EQ(appeared, 0) << "no re-subscription";
  EXPECT_EQ(tracker.systemd_appearances(), 1u);
  EXPECT_EQ(systemd.Count("QueryUnit"), 0u) << "no query";
  EXPECT_EQ(tracker.systemd_owner(), systemd_name);
  EXPECT_EQ(tracker.foreign_signals(), 2000u) << "every unicast one arrived and was dropped";
  // systemd's own signal still is a hint: the path works.
  Send(fake_systemd.get(), "", "UnitRemoved");
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("QueryUnit") == 1; }));
  EXPECT_FALSE(stopped);
  EXPECT_TRUE(errors.empty());
}

TEST_F(RealBus, ANewSystemdIsLearntFromTheBusDriverAndTheOldNameIsNoLongerTrusted) {
  int appeared = 0;
  tracker.SetOnSystemdAppeared([&] { ++appeared; });
  BusPtr old = std::move(fake_systemd);
  std::string old_name = systemd_name;
  object.reset();
  ASSERT_GE(sd_bus_release_name(old.get(), "org.freedesktop.systemd1"), 0);
  BusPtr next = bus.Connect(event.get());
  ASSERT_TRUE(next);
  ASSERT_GE(sd_bus_request_name(next.get(), "org.freedesktop.systemd1", 0), 0);
  const char* unique = nullptr;
  sd_bus_get_unique_name(next.get(), &unique);
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return tracker.systemd_owner() == unique; }));
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return appeared == 1; }));
  ASSERT_TRUE(monitor->Start().ok());
  Send(old.get(), supervisor_name.c_str(), "UnitRemoved");
  Barrier(old.get());
  EXPECT_EQ(systemd.Count("QueryUnit"), 0u) << "the old name is just a peer now";
  Send(next.get(), "", "UnitRemoved");
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("QueryUnit") == 1; }));
}

// ---- the journal limiter every peer-triggered line goes through

TEST(LogLimiter, AllowsABurstPerIntervalAndCountsTheRest) {
  LogLimiter l;
  uint64_t dropped = 99;
  const uint64_t t0 = 1000;
  for (size_t i = 0; i < limits::kPeerLogBurst; ++i) {
    ASSERT_TRUE(l.Allow(t0 + i, &dropped)) << i;
    EXPECT_EQ(dropped, 0u);
  }
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(l.Allow(t0 + limits::kPeerLogIntervalUsec - 1, &dropped));
  EXPECT_EQ(l.dropped_total(), 1000u);
  // The next interval: a line again, and it carries the count.
  ASSERT_TRUE(l.Allow(t0 + limits::kPeerLogIntervalUsec, &dropped));
  EXPECT_EQ(dropped, 1000u);
  ASSERT_TRUE(l.Allow(t0 + limits::kPeerLogIntervalUsec + 1, &dropped));
  EXPECT_EQ(dropped, 0u);
}

}  // namespace
}  // namespace opencode::daemon
