// No close() that a peer can make sleep runs on the loop: a loopback TCP
// socket with SO_LINGER {1, 30} and an unread send queue is put in flight on
// each path where the supervisor drops a peer's descriptor or connection, and
// a timer on the same loop must fire within seconds (the close would take
// 30). The closer's defusing is off in those tests, so the close really
// sleeps, in the closer thread; the defusing itself and the listener's pause
// behind a stuck closer are tested after them.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/frame.h"
#include "common/limits.h"
#include "common/scm_rights.h"
#include "daemon/base/async_close.h"
#include "daemon/listener.h"
#include "daemon/session/pump.h"
#include "tests/daemon_test_util.h"
#include "tests/temp_listener.h"

namespace opencode::daemon {
namespace {

using testing::LingeringSocket;
using testing::LoopAnswers;

struct Recorder final : Pump::Delegate {
  void OnStartFrame(std::span<const uint8_t>, UniqueFd dir) noexcept override {
    start_fd = std::move(dir);
    ++starts;
  }
  void OnEnvFrame(std::span<const uint8_t>) noexcept override {}
  void OnControlFrame(FrameType, uint8_t) noexcept override {}
  void OnResize(uint16_t, uint16_t) noexcept override {}
  void OnSessionRequest(FrameType, std::span<const uint8_t>) noexcept override {}
  void OnClientError(ErrorCode code) noexcept override { errors.push_back(code); }
  void OnClientEof() noexcept override { ++client_eof; }
  void OnClientGone() noexcept override { ++client_gone; }
  void OnOutputComplete() noexcept override {}
  void OnFlushed() noexcept override {}
  int starts = 0, client_eof = 0, client_gone = 0;
  UniqueFd start_fd;
  std::vector<ErrorCode> errors;
};

std::string Frame(FrameType t, std::string_view payload) {
  std::string out;
  AppendFrame(t, payload, &out);
  return out;
}

// Sends `data` with `fds` attached to its first byte (SCM_RIGHTS).
bool SendWithFds(int sock, std::string_view data, std::vector<int> fds) {
  alignas(struct cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
  struct iovec iov = {const_cast<char*>(data.data()), data.size()};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
  memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
  return sendmsg(sock, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
}

struct AsyncCloseTest : ::testing::Test {
  void SetUp() override {
    ASSERT_TRUE(StartAsyncClose().ok());
    AsyncCloseSetDefuseForTesting(false);
    ASSERT_TRUE(lingering.ok()) << strerror(errno);
  }
  void TearDown() override { AsyncCloseSetDefuseForTesting(true); }
  void MakePump(Pump::Mode mode) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
    client = UniqueFd(sv[1]);
    fcntl(client.get(), F_SETFL, fcntl(client.get(), F_GETFL) & ~O_NONBLOCK);
    pump = std::make_unique<Pump>(event.get(), UniqueFd(sv[0]), &rec);
    ASSERT_TRUE(pump->Init().ok());
    pump->SetMode(mode);
  }
  EventPtr event = testing::NewEvent();
  LingeringSocket lingering{30};
  Recorder rec;
  std::unique_ptr<Pump> pump;
  UniqueFd client;
};

TEST_F(AsyncCloseTest, AnExtraDescriptorWithTheStartFrameDoesNotStallTheLoop) {
  MakePump(Pump::Mode::kAwaitStart);
  UniqueFd dir(open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::string start = Frame(FrameType::kStart, "x");
  ASSERT_TRUE(SendWithFds(client.get(), start, {dir.get(), lingering.client()}));
  lingering.Release();
  EXPECT_TRUE(LoopAnswers(event.get()));
  ASSERT_EQ(rec.errors.size(), 1u);
  EXPECT_EQ(rec.errors[0], ErrorCode::kExtraDescriptor);
}

TEST_F(AsyncCloseTest, ADescriptorWithAnInputFrameDoesNotStallTheLoop) {
  MakePump(Pump::Mode::kRunning);
  ASSERT_TRUE(SendWithFds(client.get(), Frame(FrameType::kInput, "a"), {lingering.client()}));
  lingering.Release();
  EXPECT_TRUE(LoopAnswers(event.get()));
  ASSERT_EQ(rec.errors.size(), 1u);
  EXPECT_EQ(rec.errors[0], ErrorCode::kExtraDescriptor);
}

TEST_F(AsyncCloseTest, AConnectionClosedByItsClientWithTheMessageUnreadDoesNotStallTheLoop) {
  // Authenticating: nothing is read, the peer sends a descriptor and leaves.
  MakePump(Pump::Mode::kHold);
  ASSERT_TRUE(SendWithFds(client.get(), "x", {lingering.client()}));
  lingering.Release();
  client.reset();
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return rec.client_gone + rec.client_eof > 0; }));
  // What the supervisor does then, from its housekeeping: the pump and its
  // connection go; the unread message (and the descriptor in it) is purged
  // by that final close.
  sd_event_source* s = nullptr;
  ASSERT_GE(sd_event_add_defer(
                event.get(), &s,
                [](sd_event_source*, void* p) -> int {
                  static_cast<std::unique_ptr<Pump>*>(p)->reset();
                  return 0;
                },
                &pump),
            0);
  EventSourcePtr destroy(s);
  sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
  EXPECT_TRUE(LoopAnswers(event.get()));
  EXPECT_EQ(pump, nullptr);
}

TEST_F(AsyncCloseTest, AConnectionEndedWhileDrainingWithTheMessageUnreadDoesNotStallTheLoop) {
  MakePump(Pump::Mode::kRunning);
  pump->QueueTerminal(R"({"type":"exit"})");
  ASSERT_TRUE(SendWithFds(client.get(), "x", {lingering.client()}));
  lingering.Release();
  EXPECT_TRUE(LoopAnswers(event.get()));
  pump->CloseConnection();
  EXPECT_TRUE(LoopAnswers(event.get()));
}

// The listener refuses at the session cap, with the peer's message unread.
struct Full final : Listener::Delegate {
  size_t SessionCount() const noexcept override { return sessions; }
  size_t HandshakeCount() const noexcept override { return 0; }
  void OnConnection(UniqueFd conn) noexcept override { accepted.push_back(std::move(conn)); }
  size_t sessions = limits::kMaxSessions;
  std::vector<UniqueFd> accepted;
};

struct ListenerCloseTest : AsyncCloseTest {
  void SetUp() override {
    AsyncCloseTest::SetUp();
    ASSERT_TRUE(sock.ok());
    lingerer = std::make_unique<Lingerer>(event.get());
    listener = std::make_unique<Listener>(event.get(), sock.Take(), &admission, lingerer.get());
    ASSERT_TRUE(listener->Init().ok());
    listener->Enable(true);
  }
  void TearDown() override {
    listener.reset();
    lingerer.reset();
    AsyncCloseTest::TearDown();
  }
  UniqueFd Connect() {
    UniqueFd c = sock.Connect();
    EXPECT_TRUE(c.valid());
    return c;
  }
  TempListener sock{512};
  Full admission;
  std::unique_ptr<Lingerer> lingerer;
  std::unique_ptr<Listener> listener;
};

TEST_F(ListenerCloseTest, AConnectionRefusedAtAdmissionWithTheMessageUnreadDoesNotStallTheLoop) {
  UniqueFd c = Connect();
  ASSERT_TRUE(SendWithFds(c.get(), "x", {lingering.client()}));
  lingering.Release();
  EXPECT_TRUE(LoopAnswers(event.get()));
  // It was refused (the envelope, then EOF), not left waiting.
  testing::ClientReader r(c.get());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return !r.Drain(); }));
  EXPECT_EQ(r.events.size(), 1u);
}

TEST_F(ListenerCloseTest, AStuckCloserPausesAcceptingAndItsCatchingUpResumesIt) {
  // The closer sleeps in the lingering close; then it is handed
  // kCloseBacklogPause more descriptors and holds them all.
  UniqueFd c = Connect();
  ASSERT_TRUE(SendWithFds(c.get(), "x", {lingering.client()}));
  lingering.Release();
  EXPECT_TRUE(LoopAnswers(event.get()));
  c.reset();
  for (size_t i = 0; i < limits::kCloseBacklogPause; ++i)
    AsyncClose(UniqueFd(open("/dev/null", O_RDONLY | O_CLOEXEC)));
  ASSERT_GE(AsyncCloseBacklog(), limits::kCloseBacklogPause);
  // New peers wait in the backlog; the loop itself keeps answering.
  std::vector<UniqueFd> waiting;
  for (int i = 0; i < 4; ++i) waiting.push_back(Connect());
  EXPECT_TRUE(LoopAnswers(event.get()));
  for (auto& w : waiting) {
    char b;
    EXPECT_EQ(recv(w.get(), &b, 1, MSG_DONTWAIT), -1) << "refused while the closer was behind";
    EXPECT_EQ(errno, EAGAIN);
  }
  // The lingering close ends (its peer resets): the closer catches up, its
  // wake-up resumes the listener, and the waiting peers are served.
  lingering.ResetPeer();
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    for (auto& w : waiting) {
      char b;
      if (recv(w.get(), &b, 1, MSG_DONTWAIT | MSG_PEEK) <= 0) return false;
    }
    return true;
  }, 20000));
  EXPECT_TRUE(testing::RunUntil(event.get(), [] { return AsyncCloseBacklog() == 0; }, 10000));
}

TEST_F(AsyncCloseTest, TheWakeUpComesOnceTheBacklogIsBelowTheResumeMark) {
  int wake = AsyncCloseWakeFd();
  ASSERT_GE(wake, 0);
  eventfd_t stale;
  (void)eventfd_read(wake, &stale);
  // Stuck behind the lingering close, with kCloseBacklogPause queued.
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd ours(sv[0]), peer(sv[1]);
  ASSERT_TRUE(SendWithFds(peer.get(), "x", {lingering.client()}));
  lingering.Release();
  AsyncClose(std::move(ours));
  for (size_t i = 0; i < limits::kCloseBacklogPause; ++i)
    AsyncClose(UniqueFd(open("/dev/null", O_RDONLY | O_CLOEXEC)));
  struct pollfd p = {wake, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0) << "no wake-up while the closer is behind";
  lingering.ResetPeer();
  ASSERT_EQ(poll(&p, 1, 20000), 1);
  // Written after the backlog fell below the mark; nothing was added since.
  EXPECT_LT(AsyncCloseBacklog(), limits::kCloseBacklogResume);
}

// With defusing on (as shipped), the closer itself does not sleep either:
// the lingering socket is reset, also one nested inside a unix socket that
// is in flight on the connection being closed.
TEST(AsyncCloseDefuse, ALingeringSocketIsResetNotLingered) {
  ASSERT_TRUE(StartAsyncClose().ok());
  LingeringSocket lingering(30);
  ASSERT_TRUE(lingering.ok());
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd outer(sv[0]), carrier(sv[1]);
  // The lingering socket is in flight on `outer`'s queue, unread.
  ASSERT_TRUE(SendWithFds(carrier.get(), "x", {lingering.client()}));
  lingering.Release();
  // And `outer` itself is in flight on a connection the supervisor closes.
  int conn[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, conn), 0);
  UniqueFd ours(conn[0]), peer(conn[1]);
  ASSERT_TRUE(SendWithFds(peer.get(), "y", {outer.get()}));
  outer.reset();
  carrier.reset();
  AsyncClose(std::move(ours));
  // The closer is idle again long before the linger (30 s) could end.
  EventPtr event = testing::NewEvent();
  EXPECT_TRUE(testing::RunUntil(event.get(), [] { return AsyncCloseBacklog() == 0; }, 10000));
}

TEST(AsyncCloseDefuse, ASocketNestedDeepInFlightIsStillDefused) {
  ASSERT_TRUE(StartAsyncClose().ok());
  LingeringSocket lingering(30);
  ASSERT_TRUE(lingering.ok());
  // Each level: a unix socket whose queue holds the level below. The kernel
  // accepts this nesting (no depth limit on 6.18); the closer's work is
  // bounded by kCloseDrainDescriptors instead.
  constexpr size_t kLevels = 64;
  static_assert(kLevels < limits::kCloseDrainDescriptors);
  UniqueFd inner(dup(lingering.client()));
  lingering.Release();
  std::vector<UniqueFd> senders;
  for (size_t level = 0; level < kLevels; ++level) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    UniqueFd holder(sv[0]), sender(sv[1]);
    ASSERT_TRUE(SendWithFds(sender.get(), "n", {inner.get()})) << "level " << level << ": " << strerror(errno);
    inner = std::move(holder);
  }
  AsyncClose(std::move(inner));
  EventPtr event = testing::NewEvent();
  EXPECT_TRUE(testing::RunUntil(event.get(), [] { return AsyncCloseBacklog() == 0; }, 10000));
}

TEST(AsyncCloseDefuse, ADescriptorBehindManyQueuedMessagesIsStillDefused) {
  ASSERT_TRUE(StartAsyncClose().ok());
  LingeringSocket lingering(30);
  ASSERT_TRUE(lingering.ok());
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd ours(sv[0]), peer(sv[1]);
  // Messages that carry descriptors are never merged into one read: the
  // closer needs one receive per message, within kCloseDrainMessages.
  UniqueFd null(open("/dev/null", O_RDONLY | O_CLOEXEC));
  for (size_t i = 0; i + 1 < limits::kCloseDrainMessages / 4; ++i)
    ASSERT_TRUE(SendWithFds(peer.get(), "m", {null.get()}));
  ASSERT_TRUE(SendWithFds(peer.get(), "l", {lingering.client()}));
  lingering.Release();
  AsyncClose(std::move(ours));
  EventPtr event = testing::NewEvent();
  EXPECT_TRUE(testing::RunUntil(event.get(), [] { return AsyncCloseBacklog() == 0; }, 10000));
}

TEST(AsyncCloseDefuse, AnInvalidDescriptorIsNothingToClose) {
  ASSERT_TRUE(StartAsyncClose().ok());
  size_t before = AsyncCloseBacklog();
  AsyncClose(UniqueFd());
  EXPECT_EQ(AsyncCloseBacklog(), before);
}

}  // namespace
}  // namespace opencode::daemon
