// The lingering close (daemon/base/lingerer.h) on real socketpairs and a real
// sd-event loop: the client reads what was written, then EOF, never a reset;
// what it sends meanwhile is read and dropped, descriptors included; the
// connection is closed at the client's EOF or hang-up, at kRefusalLingerUsec
// if it never closes, at once past kMaxLingeringRefusals, and in the closer
// thread when the lingerer goes with connections still lingering.
#include "daemon/base/lingerer.h"

#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/limits.h"
#include "common/scm_rights.h"
#include "daemon/base/async_close.h"
#include "tests/daemon_test_util.h"

namespace opencode::daemon {
namespace {

struct Pair {
  UniqueFd server, client;
};

Pair NewPair() {
  int sv[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
  return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

// What the client reads until EOF (true) or until nothing more is there.
bool ReadToEof(int fd, std::string* got) {
  char buf[4096];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0) return false;
    got->append(buf, static_cast<size_t>(n));
  }
}

struct LingererTest : ::testing::Test {
  EventPtr event = testing::NewEvent();
  std::unique_ptr<Lingerer> lingerer = std::make_unique<Lingerer>(event.get());
};

TEST_F(LingererTest, TheClientReadsTheEnvelopeThenEofAndItsBytesAreDroppedUntilItCloses) {
  Pair p = NewPair();
  ASSERT_EQ(send(p.server.get(), "envelope", 8, MSG_NOSIGNAL), 8);
  // More than one wakeup reads (kLingerReadsPerWakeup segments of 4 KiB), and
  // a descriptor in flight goes to the closer with its segment.
  std::string blob((limits::kLingerReadsPerWakeup + 2) * 4096, 'u');
  ASSERT_EQ(send(p.client.get(), blob.data(), blob.size(), MSG_NOSIGNAL), static_cast<ssize_t>(blob.size()));
  UniqueFd carried(dup(STDIN_FILENO));
  ASSERT_EQ(SendWithFd(p.client.get(), "x", 1, carried.get()), 1);
  lingerer->Close(std::move(p.server));
  EXPECT_EQ(lingerer->size(), 1u);
  std::string got;
  ASSERT_TRUE(ReadToEof(p.client.get(), &got)) << "our sending side is shut at once";
  EXPECT_EQ(got, "envelope");
  // Not closed while the client may still send (what it sent is read).
  testing::RunFor(event.get(), 100);
  EXPECT_EQ(lingerer->size(), 1u);
  ASSERT_EQ(shutdown(p.client.get(), SHUT_WR), 0);
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return lingerer->size() == 0; }));
  int err = -1;
  socklen_t len = sizeof err;
  ASSERT_EQ(getsockopt(p.client.get(), SOL_SOCKET, SO_ERROR, &err, &len), 0);
  EXPECT_EQ(err, 0) << "no reset: what the client sent was read before the close";
}

TEST_F(LingererTest, AClientThatHangsUpEndsItsLinger) {
  Pair p = NewPair();
  lingerer->Close(std::move(p.server));
  ASSERT_EQ(lingerer->size(), 1u);
  p.client.reset();
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return lingerer->size() == 0; }));
}

TEST_F(LingererTest, PastTheCapAConnectionClosesAtOnceAndTheDeadlineEndsTheRest) {
  std::vector<UniqueFd> clients;
  for (size_t i = 0; i < limits::kMaxLingeringRefusals; ++i) {
    Pair p = NewPair();
    lingerer->Close(std::move(p.server));
    clients.push_back(std::move(p.client));
  }
  ASSERT_EQ(lingerer->size(), limits::kMaxLingeringRefusals);
  Pair extra = NewPair();
  ASSERT_EQ(send(extra.server.get(), "envelope", 8, MSG_NOSIGNAL), 8);
  lingerer->Close(std::move(extra.server));
  EXPECT_EQ(lingerer->size(), limits::kMaxLingeringRefusals);
  std::string got;
  EXPECT_TRUE(ReadToEof(extra.client.get(), &got)) << "closed at once";
  EXPECT_EQ(got, "envelope") << "still with what was written";
  // None of the others closes: the deadline ends every one.
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return lingerer->size() == 0; },
                                static_cast<int>(limits::kRefusalLingerUsec / 1000) + 30000));
  for (const UniqueFd& c : clients) {
    std::string rest;
    EXPECT_TRUE(ReadToEof(c.get(), &rest));
  }
}

// The supervisor's shutdown: a lingerer destroyed with a connection still
// lingering hands it to the closer. The client's unread descriptor is a
// lingering TCP socket whose final close sleeps (the closer's defusing is off
// here), so an inline close would hold the destructor for 30 s.
TEST_F(LingererTest, DestroyingTheLingererClosesInTheCloser) {
  ASSERT_TRUE(StartAsyncClose().ok());
  AsyncCloseSetDefuseForTesting(false);
  testing::LingeringSocket lingering(30);
  ASSERT_TRUE(lingering.ok());
  Pair p = NewPair();
  lingerer->Close(std::move(p.server));
  ASSERT_EQ(lingerer->size(), 1u);
  // In flight and unread: the lingerer goes before its next wakeup.
  ASSERT_EQ(SendWithFd(p.client.get(), "x", 1, lingering.client()), 1);
  lingering.Release();
  size_t before = AsyncCloseBacklog();
  lingerer.reset();
  EXPECT_GE(AsyncCloseBacklog(), before + 1) << "the close waits in the closer, not in the destructor";
  lingering.ResetPeer();
  AsyncCloseSetDefuseForTesting(true);
}

}  // namespace
}  // namespace opencode::daemon
