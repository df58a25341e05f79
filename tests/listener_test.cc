// Admission control on a real listening socket: below both caps a connection
// is handed on unread; at kMaxSessions or kMaxPendingHandshakes it gets one
// error envelope and is closed, and nothing already accepted is touched.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>

#include "common/envelope.h"
#include "common/limits.h"
#include "daemon/listener.h"
#include "tests/daemon_test_util.h"

namespace opencode::daemon {
namespace {

struct Admission final : Listener::Delegate {
  size_t SessionCount() const noexcept override { return sessions; }
  size_t HandshakeCount() const noexcept override { return handshakes; }
  void OnConnection(UniqueFd conn) noexcept override {
    EXPECT_TRUE(fcntl(conn.get(), F_GETFD) & FD_CLOEXEC);
    EXPECT_TRUE(fcntl(conn.get(), F_GETFL) & O_NONBLOCK);
    accepted.push_back(std::move(conn));
    ++sessions;
    ++handshakes;
  }
  size_t sessions = 0, handshakes = 0;
  std::vector<UniqueFd> accepted;
};

struct ListenerTest : ::testing::Test {
  void SetUp() override {
    ASSERT_NE(mkdtemp(dir), nullptr);
    path = std::string(dir) + "/s";
    // Blocking, as systemd passes it: the listener must not block the loop.
    UniqueFd l(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    addr.sun_family = AF_UNIX;
    strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(bind(l.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(listen(l.get(), 64), 0);
    listener = std::make_unique<Listener>(event.get(), std::move(l), &admission);
    ASSERT_TRUE(listener->Init().ok());
    listener->Enable(true);
  }
  void TearDown() override {
    unlink(path.c_str());
    rmdir(dir);
  }
  UniqueFd Connect() {
    UniqueFd c(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_EQ(connect(c.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    return c;
  }
  // The refusal a client reads: one EVENT envelope, then EOF.
  std::string RefusalCode(int fd) {
    testing::ClientReader r(fd);
    EXPECT_TRUE(testing::RunUntil(event.get(), [&] { return !r.Drain(); }));
    EXPECT_EQ(r.events.size(), 1u);
    Envelope e;
    if (r.events.empty() || ParseEnvelope(r.events[0], &e) != ErrorCode::kOk) return "";
    return std::get<std::string>(e.fields["code"]);
  }
  char dir[32] = "/tmp/opencode-listen-XXXXXX";
  std::string path;
  sockaddr_un addr{};
  EventPtr event = testing::NewEvent();
  Admission admission;
  std::unique_ptr<Listener> listener;
};

TEST_F(ListenerTest, AcceptsUpToThePendingHandshakeCapThenRefuses) {
  std::vector<UniqueFd> clients;
  for (size_t i = 0; i < limits::kMaxPendingHandshakes; ++i) clients.push_back(Connect());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    return admission.accepted.size() == limits::kMaxPendingHandshakes;
  }));
  UniqueFd extra = Connect();
  EXPECT_EQ(RefusalCode(extra.get()), "too_many_handshakes");
  EXPECT_EQ(admission.accepted.size(), limits::kMaxPendingHandshakes) << "nothing accepted is lost";
  // One handshake completes: the next connection is admitted again.
  --admission.handshakes;
  UniqueFd next = Connect();
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    return admission.accepted.size() == limits::kMaxPendingHandshakes + 1;
  }));
}

TEST_F(ListenerTest, RefusesAtTheSessionCap) {
  admission.sessions = limits::kMaxSessions;
  UniqueFd c = Connect();
  EXPECT_EQ(RefusalCode(c.get()), "too_many_sessions");
  EXPECT_TRUE(admission.accepted.empty());
}

TEST_F(ListenerTest, AcceptBurstIsBounded) {
  // More pending connections than one wakeup admits: all are admitted over
  // several wakeups, kAcceptBurst at a time.
  admission.handshakes = 0;
  std::vector<UniqueFd> clients;
  for (size_t i = 0; i < limits::kAcceptBurst + 4; ++i) clients.push_back(Connect());
  size_t first = 0;
  sd_event_run(event.get(), 100 * 1000);
  first = admission.accepted.size();
  EXPECT_LE(first, limits::kAcceptBurst);
  admission.handshakes = 0;
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    admission.handshakes = 0;  // pretend each one finished its handshake
    return admission.accepted.size() == limits::kAcceptBurst + 4;
  }));
}

TEST_F(ListenerTest, DisabledListenerAcceptsNothing) {
  listener->Enable(false);
  UniqueFd c = Connect();
  testing::RunFor(event.get(), 50);
  EXPECT_TRUE(admission.accepted.empty());
}

}  // namespace
}  // namespace opencode::daemon
