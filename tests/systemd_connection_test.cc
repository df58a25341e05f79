// On a real direct connection (SystemdConnection against a stand-in systemd
// server on a Unix socket): the peer must be the expected process, systemd's
// signals are hints, and when the server drops the connection the supervisor
// reconnects, re-attaches and re-queries every watched unit.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/limits.h"
#include "daemon/systemd/systemd_connection.h"
#include "daemon/systemd/unit_monitor.h"
#include "daemon/systemd/unit_tracker.h"
#include "tests/daemon_test_util.h"
#include "tests/unit_watch_util.h"

namespace opencode::daemon {
namespace {

using testing::FakeSystemd;
using testing::kPath;
using testing::kUnit;
using testing::Snapshot;

// Listens on a socket in a temp dir like systemd's /run/systemd/private; each
// accepted connection is an sd-bus server that names itself
// org.freedesktop.systemd1 (as systemd does on its direct connections),
// answers Subscribe and can emit UnitRemoved.
class StandInSystemd {
 public:
  explicit StandInSystemd(sd_event* event) : event_(event) {
    char tmpl[] = "/tmp/opencode-sd-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/private";
    ok_ = Listen();
  }
  // Binds and listens on the path (again, after StopListening).
  bool Listen() {
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path_.c_str());
    if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
        listen(listen_fd_, 16) != 0)
      return false;
    sd_event_source* s = nullptr;
    if (sd_event_add_io(event_, &s, listen_fd_, EPOLLIN, &StandInSystemd::OnAccept, this) < 0) return false;
    source_.reset(s);
    return true;
  }
  // The socket is gone for a while (a restarting systemd).
  void StopListening() {
    source_.reset();
    close(listen_fd_);
    listen_fd_ = -1;
    unlink(path_.c_str());
  }
  ~StandInSystemd() {
    conns_.clear();
    source_.reset();
    if (listen_fd_ >= 0) close(listen_fd_);
    std::filesystem::remove_all(dir_);
  }
  bool ok() const { return ok_; }
  std::string address() const { return "unix:path=" + path_; }
  size_t accepted() const { return accepted_; }
  size_t subscribes() const { return subscribes_; }
  void EmitUnitRemoved() {
    ASSERT_FALSE(conns_.empty());
    ASSERT_GE(sd_bus_emit_signal(conns_.back().get(), "/org/freedesktop/systemd1",
                                 "org.freedesktop.systemd1.Manager", "UnitRemoved", "so", kUnit, kPath),
              0);
  }
  // What a re-executing systemd does to its direct connections.
  void DropAll() { conns_.clear(); }

 private:
  static int OnAccept(sd_event_source*, int fd, uint32_t, void* userdata) {
    auto* self = static_cast<StandInSystemd*>(userdata);
    int c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) return 0;
    sd_bus* b = nullptr;
    sd_id128_t id;
    sd_id128_randomize(&id);
    sd_bus_new(&b);
    sd_bus_set_fd(b, c, c);
    sd_bus_set_server(b, 1, id);
    sd_bus_set_sender(b, "org.freedesktop.systemd1");
    sd_bus_add_filter(b, nullptr, &StandInSystemd::OnCall, self);
    sd_bus_start(b);
    sd_bus_attach_event(b, self->event_, 0);
    self->conns_.emplace_back(b);
    ++self->accepted_;
    return 0;
  }
  static int OnCall(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* self = static_cast<StandInSystemd*>(userdata);
    if (!sd_bus_message_is_method_call(m, "org.freedesktop.systemd1.Manager", "Subscribe")) return 0;
    ++self->subscribes_;
    sd_bus_reply_method_return(m, nullptr);
    return 1;
  }

  sd_event* event_;
  std::string dir_, path_;
  int listen_fd_ = -1;
  bool ok_ = false;
  EventSourcePtr source_;
  std::vector<BusPtr> conns_;
  size_t accepted_ = 0, subscribes_ = 0;
};

struct Direct : ::testing::Test {
  void SetUp() override {
    ASSERT_TRUE(server.ok());
    ASSERT_TRUE(tracker.Init().ok());
  }
  EventPtr event = testing::NewEvent();
  StandInSystemd server{event.get()};
  UnitTracker tracker{event.get()};
  FakeSystemd systemd;
  std::vector<absl::Status> errors;
  std::unique_ptr<UnitMonitor> monitor = std::make_unique<UnitMonitor>(
      &systemd, &tracker, kUnit, [](absl::StatusOr<UnitSnapshot>) {});
};

TEST_F(Direct, ThePeerMustBeTheExpectedProcess) {
  SystemdConnection wrong_pid(event.get(), server.address(), getpid() + 1, geteuid());
  absl::Status st = wrong_pid.Connect();
  EXPECT_TRUE(absl::IsPermissionDenied(st)) << st;
  EXPECT_NE(std::string(st.message()).find("not systemd"), std::string::npos) << st;
  SystemdConnection wrong_uid(event.get(), server.address(), getpid(), geteuid() + 1);
  EXPECT_TRUE(absl::IsPermissionDenied(wrong_uid.Connect()));
  SystemdConnection nobody_there(event.get(), "unix:path=/nonexistent/private", getpid(), geteuid());
  EXPECT_FALSE(nobody_there.Connect().ok());
}

TEST_F(Direct, ReconnectionIsRetriedUntilSystemdListensAgain) {
  SystemdConnection conn(event.get(), server.address(), getpid(), geteuid());
  ASSERT_TRUE(conn.Connect().ok());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return server.accepted() == 1; }));
  server.StopListening();
  server.DropAll();
  // Every attempt fails (nothing listens) and is retried every interval.
  testing::RunFor(event.get(), static_cast<int>(limits::kSystemdReconnectIntervalUsec / 1000) * 6);
  EXPECT_FALSE(conn.connected());
  EXPECT_EQ(conn.reconnections(), 0u);
  int code = 0;
  EXPECT_LT(sd_event_get_exit_code(event.get(), &code), 0) << "well before the deadline: no exit";
  ASSERT_TRUE(server.Listen());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    return conn.reconnections() == 1 && sd_bus_is_ready(conn.bus()) > 0;
  }));
  EXPECT_TRUE(conn.connected());
  EXPECT_EQ(server.accepted(), 2u);
  // A re-exec of a loaded system takes seconds: the deadline is far above
  // one bus call's timeout (then the supervisor exits for its restart).
  EXPECT_GE(limits::kSystemdReconnectDeadlineUsec, 10 * limits::kBusCallTimeoutUsec);
}

TEST_F(Direct, SystemdsSignalsAreHintsAndADroppedConnectionIsReopened) {
  SystemdConnection conn(event.get(), server.address(), getpid(), geteuid());
  ASSERT_TRUE(conn.Connect().ok());
  int appeared = 0;
  tracker.SetOnSystemdAppeared([&] { ++appeared; });
  ASSERT_TRUE(tracker.AttachBus(conn.bus(), [this](absl::Status st) { errors.push_back(st); }).ok());
  conn.SetOnReconnected([&] {
    ASSERT_TRUE(tracker.AttachBus(conn.bus(), [this](absl::Status st) { errors.push_back(st); }).ok());
  });
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return appeared == 1 && server.subscribes() == 1; }));
  ASSERT_TRUE(monitor->Start().ok());
  server.EmitUnitRemoved();
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("QueryUnit") == 1; }))
      << "systemd's own signal is a hint";
  ASSERT_TRUE(systemd.AnswerSnapshot(Snapshot("active")));
  // systemd re-executes: every connection is dropped.
  sd_bus* before = conn.bus();
  server.DropAll();
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    return conn.reconnections() == 1 && appeared == 2 && server.subscribes() == 2;
  }));
  EXPECT_TRUE(conn.connected());
  EXPECT_NE(conn.bus(), before);
  EXPECT_EQ(server.accepted(), 2u);
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("QueryUnit") == 2; }))
      << "the watched unit is re-queried after the reconnection";
  ASSERT_TRUE(systemd.AnswerSnapshot(Snapshot("active")));
  // Hints flow on the new connection.
  server.EmitUnitRemoved();
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd.Count("QueryUnit") == 3; }));
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(tracker.foreign_signals(), 0u);
}

}  // namespace
}  // namespace opencode::daemon
