// The unit channel over a real SOCK_SEQPACKET socketpair and a private
// sd-event loop: the handoff is exactly one byte (kChannelHandoffByte) with one descriptor;
// sizes are written from the loop (one write for any burst of requests, the
// last size wins); a full channel keeps one pending size and writes
// it once the peer reads; one signal at a time, before the size; a peer that
// is gone breaks the channel, not the loop; what comes from the unit is read
// at most kUnitReports times, once per kind, in order, and nothing else.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/env_overlay.h"
#include "common/limits.h"
#include "common/scm_rights.h"
#include "common/size_message.h"
#include "daemon/session/unit_channel.h"
#include "tests/daemon_test_util.h"

namespace opencode::daemon {
namespace {

struct UnitChannelTest : ::testing::Test, UnitChannel::Delegate {
  void OnCommandExecuted(pid_t pid) noexcept override { pids.push_back(pid); }
  void OnSignalHandled(uint8_t signo, bool written) noexcept override { handled.emplace_back(signo, written); }
  void OnSignalDelivered(uint8_t signo) noexcept override { delivered.push_back(signo); }
  void OnCommandEnded() noexcept override { ++ended; }
  int ended = 0;
  std::vector<pid_t> pids;
  std::vector<int> delivered;
  std::vector<std::pair<int, bool>> handled;

  void SetUp() override {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
    stream_ours.reset(sv[0]);
    stream_unit.reset(sv[1]);
    uint8_t empty[kChannelEmptyEnvBytes];
    EncodeEmptyEnvironment(empty);
    absl::StatusOr<UniqueFd> ch = CreateUnitChannel(stream_ours.get(), empty);
    ASSERT_TRUE(ch.ok()) << ch.status();
    char byte = 0;
    RecvFdResult r = RecvWithFd(stream_unit.get(), &byte, 1, MSG_DONTWAIT);
    ASSERT_EQ(r.bytes, 1);
    ASSERT_EQ(byte, kChannelHandoffByte);
    ASSERT_TRUE(r.fd.valid());
    peer = std::move(r.fd);
    // The 'V' packet is already waiting, first, exactly as written.
    uint8_t v[16];
    ASSERT_EQ(recv(peer.get(), v, sizeof v, MSG_DONTWAIT), ssize_t(sizeof empty));
    ASSERT_EQ(memcmp(v, empty, sizeof empty), 0);
    channel = std::make_unique<UnitChannel>(event.get(), std::move(*ch), this);
    ASSERT_TRUE(channel->Init().ok());
  }
  std::vector<std::pair<int, int>> Read() {
    std::vector<std::pair<int, int>> out;
    uint8_t m[8];
    ssize_t n;
    while ((n = recv(peer.get(), m, sizeof m, MSG_DONTWAIT)) > 0) {
      ChannelMessage msg;
      EXPECT_EQ(ParseToUnit(m, size_t(n), &msg), ErrorCode::kOk);
      if (msg.kind == ChannelKind::kWindowSize) out.emplace_back(msg.cols, msg.rows);
      else out.emplace_back(-1, msg.signo);  // a signal, in the order it was written
    }
    return out;
  }
  bool Wait(const std::function<bool()>& f) { return testing::RunUntil(event.get(), f); }

  EventPtr event = testing::NewEvent();
  UniqueFd stream_ours, stream_unit, peer;
  std::unique_ptr<UnitChannel> channel;
};

TEST_F(UnitChannelTest, HandoffIsOneByteOneDescriptorAndNothingElse) {
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

TEST_F(UnitChannelTest, ABurstOfRequestsIsOneWriteOfTheLastSize) {
  for (int i = 1; i <= 10000; ++i) channel->RequestSize(uint16_t(1 + i % 1000), uint16_t(1 + i % 300));
  channel->RequestSize(132, 40);
  EXPECT_TRUE(channel->has_pending_size());
  EXPECT_TRUE(Read().empty());  // nothing written from inside Request()
  ASSERT_TRUE(Wait([&] { return !channel->has_pending_size(); }));
  EXPECT_EQ(Read(), (std::vector<std::pair<int, int>>{{132, 40}}));
  EXPECT_EQ(channel->sizes_written(), 1u);
  testing::RunFor(event.get(), 30);  // and the source is off again
  EXPECT_EQ(channel->sizes_written(), 1u);
}

// One pending size: has_pending_size() is one bool and one size, nothing queues.
TEST_F(UnitChannelTest, FullChannelKeepsOnePendingSizeAndRetriesOnWritable) {
  // Fill the channel through the channel itself until the kernel refuses
  // (the peer does not read).
  int filled = 0;
  while (true) {
    channel->RequestSize(uint16_t(1 + filled % 1000), 1);
    testing::RunFor(event.get(), 2);
    if (channel->has_pending_size()) break;  // EAGAIN: the size stays pending
    ++filled;
    ASSERT_LT(filled, 100000);
  }
  ASSERT_GT(filled, 0);
  // A flood while full replaces the pending size; memory is one size.
  for (int i = 0; i < 10000; ++i) channel->RequestSize(7, 8);
  channel->RequestSize(132, 40);
  testing::RunFor(event.get(), 20);
  EXPECT_TRUE(channel->has_pending_size());
  EXPECT_EQ(channel->sizes_written(), size_t(filled));
  EXPECT_FALSE(channel->broken());
  // The peer reads: EPOLLOUT, and the pending size goes out last.
  std::vector<std::pair<int, int>> got = Read();
  ASSERT_TRUE(Wait([&] {
    for (auto s : Read()) got.push_back(s);
    return !channel->has_pending_size() && !got.empty() && got.back() == std::make_pair(132, 40);
  }));
  EXPECT_EQ(got.size(), size_t(filled) + 1);
  EXPECT_EQ(channel->sizes_written(), size_t(filled) + 1);
}

TEST_F(UnitChannelTest, APeerThatIsGoneBreaksTheChannelOnly) {
  peer.reset();
  channel->RequestSize(80, 24);
  ASSERT_TRUE(Wait([&] { return channel->broken(); }));
  EXPECT_FALSE(channel->has_pending_size());
  channel->RequestSize(100, 30);  // dropped, no crash, no write
  testing::RunFor(event.get(), 20);
  EXPECT_EQ(channel->sizes_written(), 0u);
}

TEST(UnitChannelHandoff, FailsCleanlyOnAClosedStream) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd a(sv[0]);
  close(sv[1]);
  uint8_t empty[kChannelEmptyEnvBytes];
  EncodeEmptyEnvironment(empty);
  absl::StatusOr<UniqueFd> ch = CreateUnitChannel(a.get(), empty);
  EXPECT_FALSE(ch.ok());
}

// A launcher that fails before --exec leaves the 'V' packet unread when the
// unit's end closes: the kernel then reports ECONNRESET once on our end, and
// the failure report ('F') queued before it is still read.
TEST_F(UnitChannelTest, AFailureReportBehindAnUnreadEnvironmentPacketIsRead) {
  uint8_t v[] = {'V', 0, 0, 0, 1, 0, 0, 0, 3, 'A', '=', '1'};
  absl::StatusOr<UniqueFd> ch = CreateUnitChannel(stream_ours.get(), v);
  ASSERT_TRUE(ch.ok()) << ch.status();
  char byte = 0;
  RecvFdResult r = RecvWithFd(stream_unit.get(), &byte, 1, MSG_DONTWAIT);
  ASSERT_TRUE(r.fd.valid());
  UnitChannel second(event.get(), std::move(*ch), this);
  ASSERT_TRUE(second.Init().ok());
  uint8_t f[kChannelFailedBytes];
  EncodeLaunchFailed(105, f);
  ASSERT_EQ(send(r.fd.get(), f, sizeof f, MSG_NOSIGNAL), ssize_t(sizeof f));
  r.fd.reset();  // closed with 'V' unread
  second.Drain();
  ASSERT_TRUE(second.launch_failure().has_value());
  EXPECT_EQ(*second.launch_failure(), 105);
}

// The largest 'V' packet (kMaxEnvPacketBytes) is queued at creation, before
// anyone reads the unit's end, and arrives whole as one packet: SO_SNDBUF
// (kUnitChannelSendBufferBytes) holds it whatever wmem_default is.
TEST(UnitChannelCreate, TheLargestEnvironmentPacketWaitsWholeForTheUnit) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd ours(sv[0]), unit(sv[1]);
  std::string packet(1, 'V');
  packet.append("\0\0\4\0", 4);  // count 1,024
  for (size_t i = 0; i < limits::kMaxEnvVars; ++i) {
    std::string name = "V" + std::to_string(10000 + i);  // 6 bytes
    std::string entry = name + "=" + std::string(limits::kMaxEnvTotalBytes / limits::kMaxEnvVars - 7, 'x');
    uint32_t n = uint32_t(entry.size());
    char len[4] = {char(n >> 24), char(n >> 16), char(n >> 8), char(n)};
    packet.append(len, 4);
    packet += entry;
  }
  ASSERT_EQ(packet.size(), limits::kMaxEnvPacketBytes);
  ASSERT_EQ(CheckEnvList(reinterpret_cast<const uint8_t*>(packet.data()) + 1, packet.size() - 1), ErrorCode::kOk);
  absl::StatusOr<UniqueFd> ch = CreateUnitChannel(
      ours.get(), std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(packet.data()), packet.size()));
  ASSERT_TRUE(ch.ok()) << ch.status();
  int sndbuf = 0;
  socklen_t sl = sizeof sndbuf;
  ASSERT_EQ(getsockopt(ch->get(), SOL_SOCKET, SO_SNDBUF, &sndbuf, &sl), 0);
  EXPECT_LE(size_t(sndbuf), 2 * limits::kUnitChannelSendBufferBytes);  // the kernel doubles it
  EXPECT_LE(size_t(sndbuf), limits::kSocketSendBufferBytes);             // the memory bound's premise
  char byte = 0;
  RecvFdResult r = RecvWithFd(unit.get(), &byte, 1, MSG_DONTWAIT);
  ASSERT_TRUE(r.fd.valid());
  std::string got(limits::kMaxEnvPacketBytes + 1, '\0');
  ASSERT_EQ(recv(r.fd.get(), got.data(), got.size(), MSG_DONTWAIT), ssize_t(packet.size()));
  got.resize(packet.size());
  EXPECT_EQ(got, packet);
}

// Only a 'V' packet within its bound is written at creation.
TEST(UnitChannelCreate, RefusesAnythingButAnEnvironmentPacket) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd ours(sv[0]), unit(sv[1]);
  const uint8_t w[5] = {'W', 0, 80, 0, 24};
  EXPECT_FALSE(CreateUnitChannel(ours.get(), w).ok());
  const uint8_t shortv[4] = {'V', 0, 0, 0};
  EXPECT_FALSE(CreateUnitChannel(ours.get(), shortv).ok());
  std::vector<uint8_t> big(limits::kMaxEnvPacketBytes + 1, 0);
  big[0] = 'V';
  EXPECT_FALSE(CreateUnitChannel(ours.get(), big).ok());
  char byte;
  EXPECT_EQ(recv(unit.get(), &byte, 1, MSG_DONTWAIT), -1);  // no handoff was sent
}

// One signal at a time: a second while one is pending is refused; the
// pending one is written before a pending size, and the delegate hears of it.
TEST_F(UnitChannelTest, OneSignalAtATimeWrittenBeforeTheSize) {
  EXPECT_TRUE(channel->RequestSignal(2));
  EXPECT_FALSE(channel->RequestSignal(15));
  channel->RequestSize(100, 30);
  ASSERT_TRUE(Wait([&] { return !channel->has_pending_signal() && !channel->has_pending_size(); }));
  EXPECT_EQ(Read(), (std::vector<std::pair<int, int>>{{-1, 2}, {100, 30}}));
  EXPECT_EQ(handled, (std::vector<std::pair<int, bool>>{{2, true}}));
}

// One pending signal (RequestSignal refuses a second) and kUnitReports = 2
// are what the class keeps.
static_assert(limits::kUnitReports == 2);

TEST_F(UnitChannelTest, APendingSignalToAGoneMonitorIsHandledAsNotWritten) {
  EXPECT_TRUE(channel->RequestSignal(10));
  peer.reset();
  ASSERT_TRUE(Wait([&] { return !handled.empty(); }));
  EXPECT_EQ(handled, (std::vector<std::pair<int, bool>>{{10, false}}));
  EXPECT_TRUE(channel->broken());
  EXPECT_FALSE(channel->RequestSignal(10));  // refused at once, no callback
  testing::RunFor(event.get(), 20);
  EXPECT_EQ(handled.size(), 1u);
}

// Written is not delivered: only the monitor's answer 'D' to a written 'K'
// says its kill() ran; an answer nobody asked for stops the reading.
TEST_F(UnitChannelTest, AWrittenSignalIsDeliveredOnlyWhenTheMonitorAnswers) {
  EXPECT_TRUE(channel->RequestSignal(2));
  ASSERT_TRUE(Wait([&] { return !handled.empty(); }));
  EXPECT_EQ(handled, (std::vector<std::pair<int, bool>>{{2, true}}));
  EXPECT_TRUE(delivered.empty());
  uint8_t d[kChannelDeliveredBytes];
  EncodeSignalDelivered(2, d);
  ASSERT_EQ(send(peer.get(), d, sizeof d, 0), ssize_t(sizeof d));
  ASSERT_TRUE(Wait([&] { return !delivered.empty(); }));
  EXPECT_EQ(delivered, std::vector<int>{2});
  // A second answer: no signal is waiting for one.
  ASSERT_EQ(send(peer.get(), d, sizeof d, 0), ssize_t(sizeof d));
  ASSERT_TRUE(Wait([&] { return channel->refused() == 1; }));
  EXPECT_EQ(delivered.size(), 1u);
}

TEST_F(UnitChannelTest, AnAnswerWithoutASignalIsRefused) {
  uint8_t d[kChannelDeliveredBytes];
  EncodeSignalDelivered(15, d);
  ASSERT_EQ(send(peer.get(), d, sizeof d, 0), ssize_t(sizeof d));
  ASSERT_TRUE(Wait([&] { return channel->refused() == 1; }));
  EXPECT_TRUE(delivered.empty());
}

TEST_F(UnitChannelTest, TheUnitsReportIsReadOnceAndInOrder) {
  uint8_t e[kChannelExecutedBytes], x[kChannelExitedBytes];
  EncodeExecuted(4242, e);
  EncodeExited(ExitHow::kKilled, 15, x);
  ASSERT_EQ(send(peer.get(), e, sizeof e, 0), ssize_t(sizeof e));
  ASSERT_TRUE(Wait([&] { return !pids.empty(); }));
  EXPECT_EQ(pids, std::vector<pid_t>{4242});
  ASSERT_EQ(send(peer.get(), x, sizeof x, 0), ssize_t(sizeof x));
  ASSERT_TRUE(Wait([&] { return channel->command_exit().has_value(); }));
  EXPECT_EQ(channel->command_exit()->how, ExitHow::kKilled);
  EXPECT_EQ(channel->command_exit()->signo, 15);
  // Anything after the exit is not read at all (the reading is over).
  ASSERT_EQ(send(peer.get(), e, sizeof e, 0), ssize_t(sizeof e));
  testing::RunFor(event.get(), 20);
  channel->Drain();
  EXPECT_EQ(pids.size(), 1u);
  EXPECT_EQ(channel->refused(), 0u);
}

// A flood from inside the unit costs at most kUnitReports + 1 reads: the
// first packet out of order or malformed ends the reading for good.
TEST_F(UnitChannelTest, AFloodFromInsideTheUnitIsReadAtMostThreeTimes) {
  uint8_t e[kChannelExecutedBytes];
  EncodeExecuted(4242, e);
  int sent = 0;
  while (send(peer.get(), e, sizeof e, MSG_DONTWAIT) == ssize_t(sizeof e) && sent < 10000) ++sent;
  ASSERT_GT(sent, 3);
  testing::RunFor(event.get(), 50);
  channel->Drain();
  EXPECT_EQ(pids.size(), 1u);
  EXPECT_EQ(channel->refused(), 1u);
  EXPECT_FALSE(channel->command_exit().has_value());
  // The rest stays unread in the kernel's buffer (bounded by its limit).
  char probe;
  EXPECT_GT(recv(peer.get(), &probe, 1, MSG_DONTWAIT | MSG_PEEK), -2);
}

TEST_F(UnitChannelTest, ADescriptorFromInsideTheUnitIsRefused) {
  uint8_t x[kChannelExitedBytes];
  EncodeExited(ExitHow::kExited, 0, x);
  UniqueFd dir(open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_EQ(SendWithFd(peer.get(), reinterpret_cast<const char*>(x), sizeof x, dir.get()), ssize_t(sizeof x));
  testing::RunFor(event.get(), 30);
  channel->Drain();
  EXPECT_FALSE(channel->command_exit().has_value());
  EXPECT_EQ(channel->refused(), 1u);
}

TEST_F(UnitChannelTest, ALaunchFailureEndsTheReport) {
  uint8_t f[kChannelFailedBytes], x[kChannelExitedBytes];
  EncodeLaunchFailed(105, f);
  EncodeExited(ExitHow::kExited, 0, x);
  ASSERT_EQ(send(peer.get(), f, sizeof f, 0), ssize_t(sizeof f));
  ASSERT_EQ(send(peer.get(), x, sizeof x, 0), ssize_t(sizeof x));
  peer.reset();
  ASSERT_TRUE(Wait([&] { return channel->broken(); }));
  ASSERT_TRUE(channel->launch_failure().has_value());
  EXPECT_EQ(*channel->launch_failure(), 105);
  EXPECT_FALSE(channel->command_exit().has_value());
}

}  // namespace
}  // namespace opencode::daemon
