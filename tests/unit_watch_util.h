// What the tests of watching a PTY unit share (unit_tracker_test,
// reaper_test, systemd_connection_test): one unit's name and object path, a
// snapshot of it, the signals systemd or a forger sends, and a UnitTracker
// that has seen systemd appear on a fake connection.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "daemon/base/sd_ptr.h"
#include "daemon/systemd/systemd_api.h"
#include "daemon/systemd/unit_tracker.h"
#include "tests/daemon_test_util.h"

namespace opencode::daemon::testing {

inline constexpr char kUnit[] = "opencode-pty-0123456789abcdef0123456789abcdef.service";
inline constexpr char kPath[] =
    "/org/freedesktop/systemd1/unit/opencode_2dpty_2d0123456789abcdef0123456789abcdef_2eservice";

inline UnitSnapshot Snapshot(const char* active, uint32_t job = 0) {
  UnitSnapshot s;
  s.unit["ActiveState"] = std::string(active);
  s.unit["Job"] = JobRef{job, ObjectPath{job ? "/org/freedesktop/systemd1/job/1" : "/"}};
  s.service["ExecMainCode"] = int32_t{1};
  s.service["ExecMainStatus"] = int32_t{0};
  s.service["Result"] = std::string("success");
  return s;
}

// The sender systemd sets on its direct connections, and a local peer's name.
inline constexpr char kSystemdOwner[] = "org.freedesktop.systemd1";
inline constexpr char kForger[] = ":1.999";

inline MessagePtr UnitRemovedFrom(MessageFactory& f, const char* sender) {
  return f.Signal("/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "UnitRemoved",
                  sender, [](sd_bus_message* m) { sd_bus_message_append(m, "so", kUnit, kPath); });
}

// The unit's ActiveState turning "inactive", sent by `sender`.
inline MessagePtr InactiveFrom(MessageFactory& f, const char* sender) {
  return f.Signal(kPath, "org.freedesktop.DBus.Properties", "PropertiesChanged", sender,
                  [](sd_bus_message* m) {
                    sd_bus_message_append(m, "sa{sv}as", "org.freedesktop.systemd1.Unit", 1,
                                          "ActiveState", "s", "inactive", 0);
                  });
}

inline MessagePtr OwnerChanged(MessageFactory& f, const char* name, const char* new_owner,
                               const char* sender = "org.freedesktop.DBus") {
  return f.Signal("/org/freedesktop/DBus", "org.freedesktop.DBus", "NameOwnerChanged", sender,
                  [&](sd_bus_message* m) { sd_bus_message_append(m, "sss", name, ":1.1", new_owner); });
}

struct TrackerFixture : ::testing::Test {
  // The connection to systemd is up before anything is watched.
  void SetUp() override {
    ASSERT_TRUE(tracker.Init().ok());
    tracker.SystemdConnected();
    ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return tracker.systemd_appearances() == 1; }));
    ASSERT_EQ(tracker.systemd_owner(), kSystemdOwner);
  }
  EventPtr event = testing::NewEvent();
  UnitTracker tracker{event.get()};
  FakeSystemd systemd;
  MessageFactory f;
};

}  // namespace opencode::daemon::testing
