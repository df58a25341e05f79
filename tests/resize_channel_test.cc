// The resize channel over a real SOCK_SEQPACKET socketpair and a private
// sd-event loop: the handoff is exactly one byte 'R' with one descriptor;
// sizes are written from the loop (one write for any burst of requests, the
// last size wins); a full channel keeps kPendingResizes = 1 size and writes
// it once the peer reads; a peer that is gone breaks the channel, not the loop.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <functional>
#include <utility>
#include <vector>

#include "common/limits.h"
#include "common/scm_rights.h"
#include "common/size_message.h"
#include "daemon/resize_channel.h"
#include "tests/daemon_test_util.h"

namespace opencode::daemon {
namespace {

struct ResizeChannelTest : ::testing::Test {
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
    stream_ours.reset(sv[0]);
    stream_unit.reset(sv[1]);
    absl::StatusOr<UniqueFd> ch = CreateResizeChannel(stream_ours.get());
    ASSERT_TRUE(ch.ok()) << ch.status();
    char byte = 0;
    RecvFdResult r = RecvWithFd(stream_unit.get(), &byte, 1, MSG_DONTWAIT);
    ASSERT_EQ(r.bytes, 1);
    ASSERT_EQ(byte, 'R');
    ASSERT_TRUE(r.fd.valid());
    peer = std::move(r.fd);
    channel = std::make_unique<ResizeChannel>(event.get(), std::move(*ch));
    ASSERT_TRUE(channel->Init().ok());
  }
  std::vector<std::pair<int, int>> Read() {
    std::vector<std::pair<int, int>> out;
    uint8_t m[8];
    ssize_t n;
    while ((n = recv(peer.get(), m, sizeof m, MSG_DONTWAIT)) > 0) {
      uint16_t c = 0, r = 0;
      EXPECT_EQ(ParseSizeMessage(m, size_t(n), &c, &r), ErrorCode::kOk);
      out.emplace_back(c, r);
    }
    return out;
  }
  bool Wait(const std::function<bool()>& f) { return testing::RunUntil(event.get(), f); }

  EventPtr event = testing::NewEvent();
  UniqueFd stream_ours, stream_unit, peer;
  std::unique_ptr<ResizeChannel> channel;
};

TEST_F(ResizeChannelTest, HandoffIsOneByteOneDescriptorAndNothingElse) {
  // Nothing follows the handoff on the stream, and the unit's end is a
  // blocking, close-on-exec SOCK_SEQPACKET socket connected to ours.
  char more;
  EXPECT_EQ(recv(stream_unit.get(), &more, 1, MSG_DONTWAIT), -1);
  EXPECT_EQ(errno, EAGAIN);
  int type = 0;
  socklen_t len = sizeof type;
  ASSERT_EQ(getsockopt(peer.get(), SOL_SOCKET, SO_TYPE, &type, &len), 0);
  EXPECT_EQ(type, SOCK_SEQPACKET);
  EXPECT_EQ(fcntl(peer.get(), F_GETFL) & O_NONBLOCK, 0);
  EXPECT_EQ(fcntl(peer.get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
}

TEST_F(ResizeChannelTest, ABurstOfRequestsIsOneWriteOfTheLastSize) {
  for (int i = 1; i <= 10000; ++i) channel->Request(uint16_t(1 + i % 1000), uint16_t(1 + i % 300));
  channel->Request(132, 40);
  EXPECT_TRUE(channel->has_pending());
  EXPECT_TRUE(Read().empty());  // nothing written from inside Request()
  ASSERT_TRUE(Wait([&] { return !channel->has_pending(); }));
  EXPECT_EQ(Read(), (std::vector<std::pair<int, int>>{{132, 40}}));
  EXPECT_EQ(channel->sizes_written(), 1u);
  testing::RunFor(event.get(), 30);  // and the source is off again
  EXPECT_EQ(channel->sizes_written(), 1u);
}

// kPendingResizes = 1: has_pending() is one bool and one size, nothing queues.
static_assert(limits::kPendingResizes == 1);

TEST_F(ResizeChannelTest, FullChannelKeepsOnePendingSizeAndRetriesOnWritable) {
  // Fill the channel through the channel itself until the kernel refuses
  // (the peer does not read).
  int filled = 0;
  while (true) {
    channel->Request(uint16_t(1 + filled % 1000), 1);
    testing::RunFor(event.get(), 2);
    if (channel->has_pending()) break;  // EAGAIN: the size stays pending
    ++filled;
    ASSERT_LT(filled, 100000);
  }
  ASSERT_GT(filled, 0);
  // A flood while full replaces the pending size; memory is one size.
  for (int i = 0; i < 10000; ++i) channel->Request(7, 8);
  channel->Request(132, 40);
  testing::RunFor(event.get(), 20);
  EXPECT_TRUE(channel->has_pending());
  EXPECT_EQ(channel->sizes_written(), size_t(filled));
  EXPECT_FALSE(channel->broken());
  // The peer reads: EPOLLOUT, and the pending size goes out last.
  std::vector<std::pair<int, int>> got = Read();
  ASSERT_TRUE(Wait([&] {
    for (auto s : Read()) got.push_back(s);
    return !channel->has_pending() && !got.empty() && got.back() == std::make_pair(132, 40);
  }));
  EXPECT_EQ(got.size(), size_t(filled) + 1);
  EXPECT_EQ(channel->sizes_written(), size_t(filled) + 1);
}

TEST_F(ResizeChannelTest, APeerThatIsGoneBreaksTheChannelOnly) {
  peer.reset();
  channel->Request(80, 24);
  ASSERT_TRUE(Wait([&] { return channel->broken(); }));
  EXPECT_FALSE(channel->has_pending());
  channel->Request(100, 30);  // dropped, no crash, no write
  testing::RunFor(event.get(), 20);
  EXPECT_EQ(channel->sizes_written(), 0u);
}

TEST(ResizeHandoff, FailsCleanlyOnAClosedStream) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd a(sv[0]);
  close(sv[1]);
  absl::StatusOr<UniqueFd> ch = CreateResizeChannel(a.get());
  EXPECT_FALSE(ch.ok());
}

}  // namespace
}  // namespace opencode::daemon
