// The session data path on real socketpairs and a private sd-event loop:
// backpressure keeps the session under kSessionMemoryCap with a client that
// never reads; output arrives whole and in order before the terminal
// envelope; INPUT is bounded and UTF-8; EOF half-closes the PTY stream; the
// START frame's descriptor rules.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/frame.h"
#include "common/limits.h"
#include "common/scm_rights.h"
#include "daemon/session/pump.h"
#include "tests/daemon_test_util.h"

namespace opencode::daemon {
namespace {

struct Recorder final : Pump::Delegate {
  void OnStartFrame(std::span<const uint8_t> payload, UniqueFd dir) noexcept override {
    start_payload.assign(payload.begin(), payload.end());
    start_fd = std::move(dir);
    ++starts;
  }
  void OnEnvFrame(std::span<const uint8_t> payload) noexcept override {
    env_payload.assign(payload.begin(), payload.end());
    ++envs;
  }
  void OnControlFrame(FrameType type, uint8_t arg) noexcept override {
    controls.emplace_back(type, arg);
  }
  void OnResize(uint16_t cols, uint16_t rows) noexcept override { resizes.emplace_back(cols, rows); }
  void OnSessionRequest(FrameType type, std::span<const uint8_t> payload) noexcept override {
    requests.emplace_back(type, std::vector<uint8_t>(payload.begin(), payload.end()));
  }
  void OnClientError(ErrorCode code) noexcept override { errors.push_back(code); }
  void OnClientEof() noexcept override { ++client_eof; }
  void OnClientGone() noexcept override { ++client_gone; }
  void OnOutputComplete() noexcept override { ++output_complete; }
  void OnFlushed() noexcept override { ++flushed; }

  int starts = 0, envs = 0;
  std::vector<uint8_t> start_payload, env_payload;
  UniqueFd start_fd;
  std::vector<std::pair<FrameType, uint8_t>> controls;
  std::vector<std::pair<uint16_t, uint16_t>> resizes;
  std::vector<std::pair<FrameType, std::vector<uint8_t>>> requests;
  std::vector<ErrorCode> errors;
  int client_eof = 0, client_gone = 0, output_complete = 0, flushed = 0;
};

std::pair<UniqueFd, UniqueFd> Pair(bool nonblock_first = true) {
  int sv[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  if (nonblock_first) fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
  return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

std::string Frame(FrameType t, std::string_view payload) {
  std::string out;
  AppendFrame(t, payload, &out);
  return out;
}

void SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    data.remove_prefix(static_cast<size_t>(n));
  }
}

using testing::ClientReader;

struct PumpTest : ::testing::Test {
  void Make(Pump::Mode mode) {
    auto [c_ours, c_theirs] = Pair();
    client = std::move(c_theirs);
    pump = std::make_unique<Pump>(event.get(), std::move(c_ours), &rec);
    ASSERT_TRUE(pump->Init().ok());
    pump->SetMode(mode);
  }
  void AttachPty() {
    auto [p_ours, p_theirs] = Pair();
    unit = std::move(p_theirs);
    ASSERT_TRUE(pump->AttachPty(std::move(p_ours)).ok());
  }
  EventPtr event = testing::NewEvent();
  Recorder rec;
  std::unique_ptr<Pump> pump;
  UniqueFd client, unit;
};

TEST_F(PumpTest, ClientThatNeverReadsKeepsMemoryUnderTheCap) {
  Make(Pump::Mode::kRunning);
  AttachPty();
  // The unit writes as fast as it can; the client reads nothing.
  fcntl(unit.get(), F_SETFL, fcntl(unit.get(), F_GETFL) | O_NONBLOCK);
  std::string chunk(65536, 'o');
  size_t written = 0, max_memory = 0;
  for (int round = 0; round < 400; ++round) {
    ssize_t n = send(unit.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n > 0) written += static_cast<size_t>(n);
    sd_event_run(event.get(), 1000);
    max_memory = std::max(max_memory, pump->MemoryBytes());
  }
  EXPECT_LE(max_memory, limits::kSessionMemoryCap);
  EXPECT_LE(pump->output_queued(), limits::kOutputQueueBytes);
  EXPECT_GT(pump->output_queued(), limits::kOutputQueueBytes - limits::kFrameHeaderBytes -
                                       limits::kMaxOutputPayload)
      << "the output queue fills before reading stops";
  EXPECT_FALSE(pump->pty_reading()) << "backpressure: the PTY stream is not read";
  // Nothing was lost: the client now reads all of it, in order.
  ClientReader reader(client.get());
  std::string got;
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    reader.Drain();
    // Keep the unit draining its own backlog too.
    return reader.output.size() == written;
  }));
  EXPECT_EQ(reader.output, std::string(written, 'o'));
}

TEST_F(PumpTest, OutputArrivesWholeAndInOrderBeforeTheTerminalEnvelope) {
  Make(Pump::Mode::kRunning);
  AttachPty();
  ASSERT_TRUE(pump->QueueEnvelope(R"({"type":"started"})"));
  // 10 MiB of a counting pattern from the unit, then it exits (EOF).
  const size_t total = 10 * 1024 * 1024;
  std::string data(total, '\0');
  for (size_t i = 0; i < total; ++i) data[i] = static_cast<char>('a' + i % 26);
  fcntl(unit.get(), F_SETFL, fcntl(unit.get(), F_GETFL) | O_NONBLOCK);
  size_t sent = 0;
  ClientReader reader(client.get());
  bool terminal_queued = false;
  ASSERT_TRUE(testing::RunUntil(
      event.get(),
      [&] {
        if (sent < total) {
          ssize_t n = send(unit.get(), data.data() + sent, total - sent, MSG_NOSIGNAL);
          if (n > 0) sent += static_cast<size_t>(n);
          if (sent == total) unit.reset();  // the unit's processes exit
        }
        reader.Drain();
        if (rec.output_complete && !terminal_queued) {
          // What the session does: exit envelope only after output is complete.
          pump->QueueTerminal(R"({"type":"exit","code":3,"signal":null})");
          terminal_queued = true;
        }
        // What the session does once the terminal envelope is out.
        if (rec.flushed == 1 && pump->connected()) pump->CloseConnection();
        return !pump->connected() && !reader.Drain();
      },
      60000));
  EXPECT_EQ(reader.output.size(), total);
  EXPECT_TRUE(reader.output == data);
  ASSERT_EQ(reader.events.size(), 2u);
  EXPECT_EQ(reader.order.front(), "event");  // started before any output
  EXPECT_EQ(reader.order.back(), "event");   // exit after all of it
  EXPECT_EQ(reader.output_at_event.back(), total);
  EXPECT_EQ(rec.output_complete, 1);
}

TEST_F(PumpTest, InputIsForwardedAndBoundedWhenThePtyDoesNotRead) {
  Make(Pump::Mode::kRunning);
  AttachPty();
  std::string frames;
  std::string payload(limits::kMaxInputPayload, 'i');
  for (int i = 0; i < 64; ++i) frames += Frame(FrameType::kInput, payload);
  fcntl(client.get(), F_SETFL, fcntl(client.get(), F_GETFL) | O_NONBLOCK);
  size_t off = 0, max_in = 0, max_memory = 0;
  for (int round = 0; round < 400; ++round) {
    ssize_t n = send(client.get(), frames.data() + off, frames.size() - off, MSG_NOSIGNAL);
    if (n > 0) off += static_cast<size_t>(n);
    sd_event_run(event.get(), 1000);
    max_in = std::max(max_in, pump->input_queued());
    max_memory = std::max(max_memory, pump->MemoryBytes());
  }
  EXPECT_LE(max_in, limits::kInputQueueBytes);
  EXPECT_LE(max_memory, limits::kSessionMemoryCap);
  EXPECT_FALSE(pump->conn_reading()) << "backpressure: the connection is not read";
  EXPECT_TRUE(rec.errors.empty());
  // The unit reads: every byte arrives.
  fcntl(unit.get(), F_SETFL, fcntl(unit.get(), F_GETFL) | O_NONBLOCK);
  size_t got = 0;
  char buf[65536];
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    if (off < frames.size()) {
      ssize_t n = send(client.get(), frames.data() + off, frames.size() - off, MSG_NOSIGNAL);
      if (n > 0) off += static_cast<size_t>(n);
    }
    ssize_t n = recv(unit.get(), buf, sizeof(buf), 0);
    if (n > 0) got += static_cast<size_t>(n);
    return got == 64 * limits::kMaxInputPayload;
  }));
}

TEST_F(PumpTest, InputAboveTheFrameMaximumIsRejectedFromItsHeader) {
  Make(Pump::Mode::kRunning);
  AttachPty();
  uint8_t header[limits::kFrameHeaderBytes];
  EncodeHeader(FrameType::kInput, limits::kMaxInputPayload + 1, header);
  SendAll(client.get(), std::string_view(reinterpret_cast<char*>(header), sizeof(header)));
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return !rec.errors.empty(); }));
  EXPECT_EQ(rec.errors[0], ErrorCode::kFrameTooLarge);
}

TEST_F(PumpTest, InvalidUtf8InputIsAnError) {
  Make(Pump::Mode::kRunning);
  AttachPty();
  SendAll(client.get(), Frame(FrameType::kInput, "ok\xc3("));
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return !rec.errors.empty(); }));
  EXPECT_EQ(rec.errors[0], ErrorCode::kBadUtf8);
}

TEST_F(PumpTest, EofHalfClosesThePtyStreamAfterPendingInput) {
  Make(Pump::Mode::kRunning);
  AttachPty();
  SendAll(client.get(), Frame(FrameType::kInput, "last line\n") + Frame(FrameType::kEof, ""));
  std::string got;
  char buf[256];
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    fcntl(unit.get(), F_SETFL, O_NONBLOCK);
    ssize_t n = recv(unit.get(), buf, sizeof(buf), 0);
    if (n > 0) got.append(buf, static_cast<size_t>(n));
    return n == 0;  // EOF after the input
  }));
  EXPECT_EQ(got, "last line\n");
  ASSERT_EQ(rec.controls.size(), 1u);
  EXPECT_EQ(rec.controls[0].first, FrameType::kEof);
  // INPUT after EOF is a protocol error.
  SendAll(client.get(), Frame(FrameType::kInput, "more"));
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return !rec.errors.empty(); }));
  EXPECT_EQ(rec.errors[0], ErrorCode::kProtocolState);
}

TEST_F(PumpTest, ControlFramesAndTheirChecks) {
  Make(Pump::Mode::kRunning);
  AttachPty();
  SendAll(client.get(), Frame(FrameType::kSignal, std::string(1, '\x02')) + Frame(FrameType::kStop, ""));
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return rec.controls.size() == 2; }));
  EXPECT_EQ(rec.controls[0], std::make_pair(FrameType::kSignal, uint8_t{2}));
  EXPECT_EQ(rec.controls[1].first, FrameType::kStop);
  SendAll(client.get(), Frame(FrameType::kSignal, std::string(1, '\x0b')));  // SEGV
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return !rec.errors.empty(); }));
  EXPECT_EQ(rec.errors[0], ErrorCode::kBadSignal);
}

TEST_F(PumpTest, PausedInputWaitsInTheSocket) {
  Make(Pump::Mode::kRunning);
  AttachPty();
  pump->PauseInput(true);
  SendAll(client.get(), Frame(FrameType::kSignal, std::string(1, '\x0f')));
  testing::RunFor(event.get(), 50);
  EXPECT_TRUE(rec.controls.empty());
  pump->PauseInput(false);
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return rec.controls.size() == 1; }));
}

TEST_F(PumpTest, SignalPayloadIsExactlyOneByte) {
  Make(Pump::Mode::kRunning);
  AttachPty();
  SendAll(client.get(), Frame(FrameType::kSignal, std::string(limits::kSignalPayload + 1, '\x02')));
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return !rec.errors.empty(); }));
  EXPECT_EQ(rec.errors[0], ErrorCode::kFrameTooLarge);
}

TEST_F(PumpTest, StartInRunningIsAProtocolError) {
  Make(Pump::Mode::kRunning);
  AttachPty();
  SendAll(client.get(), Frame(FrameType::kStart, std::string(12, '\0')));
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return !rec.errors.empty(); }));
  EXPECT_EQ(rec.errors[0], ErrorCode::kProtocolState);
}

TEST_F(PumpTest, HoldReadsNothingButNoticesAHangUp) {
  Make(Pump::Mode::kHold);
  SendAll(client.get(), Frame(FrameType::kInput, "early"));
  testing::RunFor(event.get(), 50);
  EXPECT_EQ(rec.errors.size(), 0u);
  EXPECT_FALSE(pump->conn_reading());
  client.reset();
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return rec.client_gone + rec.client_eof > 0; }));
}

// ---- AWAIT_START

std::string StartFrame() {
  const char* argv[] = {"true"};
  ErrorCode err;
  std::string out(StartFrameSize(1, argv, &err), '\0');
  EncodeStartFrame(80, 24, 1, argv, reinterpret_cast<uint8_t*>(out.data()), out.size(), &err);
  return out;
}

TEST_F(PumpTest, StartFrameWithItsDirectoryDescriptor) {
  Make(Pump::Mode::kAwaitStart);
  UniqueFd dir(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::string f = StartFrame();
  ASSERT_EQ(SendWithFd(client.get(), f.data(), f.size(), dir.get()), static_cast<ssize_t>(f.size()));
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return rec.starts == 1; }));
  EXPECT_TRUE(rec.start_fd.valid());
  EXPECT_TRUE(fcntl(rec.start_fd.get(), F_GETFD) & FD_CLOEXEC) << "received close-on-exec";
  EXPECT_EQ(rec.start_payload.size(), f.size() - limits::kFrameHeaderBytes);
  EXPECT_EQ(pump->mode(), Pump::Mode::kHold) << "nothing more is read until RUNNING";
}

TEST_F(PumpTest, StartWithoutDescriptor) {
  Make(Pump::Mode::kAwaitStart);
  SendAll(client.get(), StartFrame());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return !rec.errors.empty(); }));
  EXPECT_EQ(rec.errors[0], ErrorCode::kNoDescriptor);
}

TEST_F(PumpTest, StartWithTwoDescriptors) {
  Make(Pump::Mode::kAwaitStart);
  std::string f = StartFrame();
  UniqueFd dir(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  int fds[2] = {dir.get(), dir.get()};
  char control[CMSG_SPACE(sizeof(fds))] = {};
  iovec iov{f.data(), f.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(fds));
  memcpy(CMSG_DATA(c), fds, sizeof(fds));
  ASSERT_GT(sendmsg(client.get(), &msg, 0), 0);
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return !rec.errors.empty(); }));
  EXPECT_EQ(rec.errors[0], ErrorCode::kExtraDescriptor);
}

TEST_F(PumpTest, DescriptorOnALaterSegmentIsExtra) {
  Make(Pump::Mode::kAwaitStart);
  std::string f = StartFrame();
  UniqueFd dir(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_EQ(SendWithFd(client.get(), f.data(), 4, dir.get()), 4);
  testing::RunFor(event.get(), 20);
  ASSERT_EQ(SendWithFd(client.get(), f.data() + 4, f.size() - 4, dir.get()),
            static_cast<ssize_t>(f.size() - 4));
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return !rec.errors.empty(); }));
  EXPECT_EQ(rec.errors[0], ErrorCode::kExtraDescriptor);
}

TEST_F(PumpTest, OversizedStartRejectedFromTheHeader) {
  Make(Pump::Mode::kAwaitStart);
  uint8_t header[limits::kFrameHeaderBytes];
  EncodeHeader(FrameType::kStart, limits::kMaxStartPayload + 1, header);
  UniqueFd dir(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_EQ(SendWithFd(client.get(), header, sizeof(header), dir.get()), 8);
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return !rec.errors.empty(); }));
  EXPECT_EQ(rec.errors[0], ErrorCode::kFrameTooLarge);
}

TEST_F(PumpTest, LargestStartFrameFitsTheHandshakeBuffer) {
  Make(Pump::Mode::kAwaitStart);
  // kMaxArgs arguments whose bytes total kMaxArgvTotalBytes, detachable:
  // the largest START.
  std::vector<std::string> args(limits::kMaxArgs, std::string(limits::kMaxArgvTotalBytes / limits::kMaxArgs, 'x'));
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  ErrorCode err;
  DetachOptions detach{limits::kMaxDetachGraceSec, uint32_t{limits::kMaxScrollbackBytes}};
  size_t size = StartFrameSize(argv.size(), argv.data(), &err, detach);
  ASSERT_EQ(size, limits::kFrameHeaderBytes + limits::kMaxStartPayload);
  std::string f(size, '\0');
  ASSERT_EQ(EncodeStartFrame(80, 24, argv.size(), argv.data(), reinterpret_cast<uint8_t*>(f.data()),
                             f.size(), &err, 0, detach),
            size);
  UniqueFd dir(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ssize_t n = SendWithFd(client.get(), f.data(), f.size(), dir.get());
  ASSERT_GT(n, 0);
  size_t off = static_cast<size_t>(n);
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    if (off < f.size()) {
      ssize_t m = send(client.get(), f.data() + off, f.size() - off, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (m > 0) off += static_cast<size_t>(m);
    }
    return rec.starts == 1 || !rec.errors.empty();
  }));
  EXPECT_TRUE(rec.errors.empty());
  EXPECT_EQ(rec.start_payload.size(), limits::kMaxStartPayload);
  EXPECT_LE(pump->MemoryBytes(), limits::kSessionMemoryCap);
}

// SIGNAL, STOP and EOF may each queue a notice: while the notice queue has
// no room for one (the client does not read), they wait undecoded, and they
// are taken once the client has read.
TEST_F(PumpTest, AControlFrameWaitsUntilItsNoticeHasRoom) {
  Make(Pump::Mode::kRunning);
  AttachPty();
  // Output the client does not read fills its socket and then the output
  // queue (the pump stops reading the PTY): nothing more can be written.
  std::string chunk(65536, 'o');
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    (void)send(unit.get(), chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    return !pump->pty_reading();
  }));
  std::string big = R"({"type":"notice","code":")" + std::string(limits::kMaxEnvelopeBytes - 40, 'n') + "\"}";
  while (pump->QueueEnvelope(big)) {
  }
  SendAll(client.get(), Frame(FrameType::kSignal, std::string(1, '\x02')) + Frame(FrameType::kEof, ""));
  testing::RunFor(event.get(), 100);
  EXPECT_TRUE(rec.controls.empty()) << "no room for their notices: the frames wait";
  EXPECT_TRUE(rec.errors.empty());
  ClientReader reader(client.get());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    reader.Drain();
    return rec.controls.size() == 2;
  }));
  EXPECT_EQ(rec.controls[0], std::make_pair(FrameType::kSignal, uint8_t{2}));
  EXPECT_EQ(rec.controls[1].first, FrameType::kEof);
}

TEST_F(PumpTest, EnvelopeReserveAndTerminalAlwaysFits) {
  Make(Pump::Mode::kRunning);
  std::string big = R"({"type":"notice","code":")" + std::string(limits::kMaxEnvelopeBytes - 40, 'n') + "\"}";
  ASSERT_LE(big.size(), limits::kMaxEnvelopeBytes);
  int queued = 0;
  while (pump->QueueEnvelope(big)) ++queued;
  EXPECT_EQ(static_cast<size_t>(queued), Pump::kNoticeQueueBytes / (limits::kFrameHeaderBytes + big.size()));
  EXPECT_LE(pump->MemoryBytes(), limits::kEnvelopeQueueBytes);
  pump->QueueTerminal(R"({"type":"error","code":"internal","message":"x"})");
  EXPECT_LE(pump->MemoryBytes(), limits::kEnvelopeQueueBytes);
  ClientReader reader(client.get());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    reader.Drain();
    return rec.flushed == 1;
  }));
  reader.Drain();
  ASSERT_EQ(reader.events.size(), static_cast<size_t>(queued) + 1);
  EXPECT_NE(reader.events.back().find("\"error\""), std::string::npos);
}

// ---- the end of the connection

// A connection refused while its peer was authenticated goes to the lingerer
// (tests/lingerer_test.cc): the pump hands it over after the terminal
// envelope, open, with what the client sent still unread, instead of closing.
TEST_F(PumpTest, ReleasingTheConnectionHandsItOverOpenAfterTheTerminal) {
  Make(Pump::Mode::kHold);
  UniqueFd dir(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::string f = StartFrame();
  ASSERT_EQ(SendWithFd(client.get(), f.data(), f.size(), dir.get()), static_cast<ssize_t>(f.size()));
  pump->QueueTerminal(R"({"type":"error","code":"unauthenticated","message":"x"})");
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return rec.flushed == 1; }));
  UniqueFd conn = pump->ReleaseConnection();
  EXPECT_TRUE(conn.valid());
  EXPECT_FALSE(pump->connected());
  ClientReader reader(client.get());
  EXPECT_TRUE(reader.Drain()) << "no EOF: the connection is still open";
  ASSERT_EQ(reader.events.size(), 1u);
  EXPECT_NE(reader.events[0].find("unauthenticated"), std::string::npos);
  conn.reset();
  EXPECT_FALSE(reader.Drain()) << "the new owner's close is the client's EOF";
  EXPECT_EQ(rec.client_gone, 0);
  EXPECT_TRUE(rec.errors.empty());
}

TEST_F(PumpTest, AfterTheClientsEofTheTerminalIsStillFlushed) {
  Make(Pump::Mode::kHold);
  ASSERT_EQ(shutdown(client.get(), SHUT_WR), 0);
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return rec.client_eof == 1; }));
  pump->QueueTerminal(R"({"type":"error","code":"unauthenticated","message":"x"})");
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return rec.flushed == 1; }));
  ClientReader reader(client.get());
  reader.Drain();
  ASSERT_EQ(reader.events.size(), 1u);
}

TEST_F(PumpTest, TheTerminalIsFlushedWithoutWaitingForTheClient) {
  Make(Pump::Mode::kRunning);
  pump->QueueTerminal(R"({"type":"exit","code":0,"signal":null})");
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return rec.flushed == 1; }))
      << "an ended session does not wait for the client";
}

// ---- detachable sessions: the ring (docs/PROTOCOL.md section 10) ----

// Attached, a client that never reads stops the PTY reads once the ring
// holds a full ring of bytes not yet framed: nothing is overwritten, and
// every byte reaches the client in order once it reads.
TEST_F(PumpTest, AnAttachedRingNeverOverwritesWhatTheClientHasNotGot) {
  Make(Pump::Mode::kRunning);
  pump->EnableRing(limits::kMinScrollbackBytes);
  AttachPty();
  fcntl(unit.get(), F_SETFL, fcntl(unit.get(), F_GETFL) | O_NONBLOCK);
  std::string sent;
  for (int round = 0; round < 400; ++round) {
    std::string chunk(4096, char('a' + round % 26));
    ssize_t n = send(unit.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n > 0) sent.append(chunk, 0, size_t(n));
    sd_event_run(event.get(), 1000);
  }
  EXPECT_FALSE(pump->pty_reading()) << "backpressure: the ring is full of bytes the client has not got";
  EXPECT_LE(pump->MemoryBytes(), limits::kSessionMemoryCap + limits::kMinScrollbackBytes);
  ClientReader reader(client.get());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    reader.Drain();
    return reader.output.size() == sent.size();
  }, 20000));
  EXPECT_EQ(reader.output, sent);
  EXPECT_EQ(pump->ring()->next(), sent.size());
}

// Detached, the PTY is read without backpressure: the oldest bytes go, the
// command never blocks, and an attach replays exactly the held bytes from
// the cursor asked for, then live output.
TEST_F(PumpTest, ADetachedRingDropsTheOldestAndAnAttachReplaysFromTheCursor) {
  Make(Pump::Mode::kRunning);
  pump->EnableRing(limits::kMinScrollbackBytes);
  AttachPty();
  ClientReader first(client.get());
  SendAll(unit.get(), "before ");
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    first.Drain();
    return first.output == "before ";
  }));
  UniqueFd old = pump->DetachConnection();
  ASSERT_TRUE(old.valid());
  EXPECT_TRUE(pump->detached());
  EXPECT_FALSE(pump->connected());
  // Three rings' worth while detached: the unit is never blocked.
  std::string all = "before ";
  fcntl(unit.get(), F_SETFL, fcntl(unit.get(), F_GETFL) | O_NONBLOCK);
  for (int i = 0; all.size() < 7 + 3 * limits::kMinScrollbackBytes; ++i) {
    std::string chunk(1000 + i % 7, char('A' + i % 26));
    size_t off = 0;
    ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
      ssize_t n = send(unit.get(), chunk.data() + off, chunk.size() - off, MSG_NOSIGNAL);
      if (n > 0) off += size_t(n);
      return off == chunk.size();
    })) << "the unit blocked while detached";
    all += chunk;
  }
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return pump->ring()->next() == all.size(); }));
  uint64_t first_held = pump->ring()->first();
  EXPECT_EQ(first_held, all.size() - limits::kMinScrollbackBytes);
  EXPECT_EQ(rec.output_complete, 0);
  // Attach at a cursor inside the ring.
  auto [ours, theirs] = Pair();
  uint64_t cursor = first_held + 100;
  ASSERT_TRUE(pump->AttachConnection(std::move(ours), cursor).ok());
  ClientReader second(theirs.get());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    second.Drain();
    return second.output.size() == all.size() - cursor;
  }));
  EXPECT_EQ(second.output, all.substr(cursor));
  SendAll(unit.get(), "live");
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    second.Drain();
    return second.output.size() == all.size() - cursor + 4;
  }));
  EXPECT_EQ(second.output.substr(second.output.size() - 4), "live");
}

// The command's end while detached: output is complete at the PTY's EOF
// (the ring holds it); after an attach, complete again only once the replay
// has been written to the new connection.
TEST_F(PumpTest, ADetachedRingIsCompleteAtEofAndAgainAfterTheReplay) {
  Make(Pump::Mode::kRunning);
  pump->EnableRing(limits::kMinScrollbackBytes);
  AttachPty();
  UniqueFd old = pump->DetachConnection();
  SendAll(unit.get(), "last words");
  unit.reset();
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return rec.output_complete == 1; }));
  auto [ours, theirs] = Pair();
  ASSERT_TRUE(pump->AttachConnection(std::move(ours), 5).ok());
  EXPECT_FALSE(pump->output_complete());
  ClientReader reader(theirs.get());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] {
    reader.Drain();
    return rec.output_complete == 2;
  }));
  EXPECT_EQ(reader.output, "words");
}

// LIST and ATTACH come without a descriptor; START still needs its own.
TEST_F(PumpTest, ListAndAttachComeWithoutADescriptorAndStartStillNeedsOne) {
  struct Case { std::string frame; bool with_fd; ErrorCode error; size_t requests; };
  std::string attach;
  AppendAttachFrame(std::string(32, 'a'), 7, &attach);
  Case cases[] = {
      {Frame(FrameType::kList, ""), false, ErrorCode::kOk, 1},
      {attach, false, ErrorCode::kOk, 1},
      {Frame(FrameType::kList, ""), true, ErrorCode::kExtraDescriptor, 0},
      {attach, true, ErrorCode::kExtraDescriptor, 0},
      {Frame(FrameType::kInput, "x"), false, ErrorCode::kNoDescriptor, 0},
  };
  for (const Case& c : cases) {
    rec = Recorder();
    Make(Pump::Mode::kAwaitStart);
    UniqueFd dir(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (c.with_fd)
      ASSERT_GT(SendWithFd(client.get(), c.frame.data(), c.frame.size(), dir.get()), 0);
    else
      SendAll(client.get(), c.frame);
    ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return !rec.requests.empty() || !rec.errors.empty(); }));
    EXPECT_EQ(rec.requests.size(), c.requests);
    if (c.error != ErrorCode::kOk) {
      ASSERT_EQ(rec.errors.size(), 1u);
      EXPECT_EQ(rec.errors[0], c.error);
    } else {
      EXPECT_TRUE(rec.errors.empty());
      EXPECT_EQ(pump->mode(), Pump::Mode::kHold);
    }
  }
}

}  // namespace
}  // namespace opencode::daemon
