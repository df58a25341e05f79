// Admission control on a real listening socket: below both caps a connection
// is handed on unread; at kMaxSessions or kMaxPendingHandshakes it gets one
// error envelope and is closed, and nothing already accepted is touched. And
// the listener never spins or starves the loop: EMFILE pauses it (issue #21
// point 2), a full burst yields to idle-priority housekeeping, and near the
// handshake cap only the MainPID of systemd's latest answer gets a slot
// (issue #21 point 3).
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>

#include "common/envelope.h"
#include "common/limits.h"
#include "common/scm_rights.h"
#include "daemon/base/async_close.h"
#include "daemon/listener.h"
#include "tests/daemon_test_util.h"
#include "tests/temp_listener.h"

namespace opencode::daemon {
namespace {

struct Admission final : Listener::Delegate {
  size_t SessionCount() const noexcept override { return sessions; }
  size_t HandshakeCount() const noexcept override { return handshakes; }
  const MainPidCache* main_pid_cache() const noexcept override { return &cache; }
  void OnConnection(UniqueFd conn) noexcept override {
    EXPECT_TRUE(fcntl(conn.get(), F_GETFD) & FD_CLOEXEC);
    EXPECT_TRUE(fcntl(conn.get(), F_GETFL) & O_NONBLOCK);
    accepted.push_back(std::move(conn));
    ++sessions;
    ++handshakes;
  }
  size_t sessions = 0, handshakes = 0;
  std::vector<UniqueFd> accepted;
  MainPidCache cache;
};

struct ListenerTest : ::testing::Test {
  void SetUp() override {
    // Blocking, as systemd passes it: the listener must not block the loop.
    ASSERT_TRUE(sock.ok());
    listener = std::make_unique<Listener>(event.get(), sock.Take(), &admission, &lingerer);
    ASSERT_TRUE(listener->Init().ok());
    listener->Enable(true);
  }
  UniqueFd Connect() {
    UniqueFd c = sock.Connect();
    EXPECT_TRUE(c.valid());
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
  TempListener sock;
  EventPtr event = testing::NewEvent();
  Admission admission;
  Lingerer lingerer{event.get()};
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

// A refusal at admission ends with the lingerer's close (docs/PROTOCOL.md
// section 1; the lingerer's own cap, deadline and shutdown are
// tests/lingerer_test.cc): envelope and EOF for the client, the descriptor held
// until the client's own close, nothing it sent left unread.
TEST_F(ListenerTest, ARefusalAtAdmissionLingersUntilTheClientCloses) {
  admission.sessions = limits::kMaxSessions;
  UniqueFd c = Connect();
  std::string blob(3 * 4096, 'u');
  ASSERT_EQ(send(c.get(), blob.data(), blob.size(), MSG_NOSIGNAL), static_cast<ssize_t>(blob.size()));
  EXPECT_EQ(RefusalCode(c.get()), "too_many_sessions");
  EXPECT_EQ(lingerer.size(), 1u);
  ASSERT_EQ(shutdown(c.get(), SHUT_WR), 0);
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return lingerer.size() == 0; }));
  int err = -1;
  socklen_t len = sizeof err;
  ASSERT_EQ(getsockopt(c.get(), SOL_SOCKET, SO_ERROR, &err, &len), 0);
  EXPECT_EQ(err, 0) << "no reset: what the client sent was read before the close";
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

// Fills this process's descriptor table (RLIMIT_NOFILE lowered to 64 above
// the lowest free descriptor) until accept4 fails with EMFILE; the
// destructor frees everything and restores the limit, also on a failed ASSERT.
struct FullFdTable {
  FullFdTable() {
    getrlimit(RLIMIT_NOFILE, &old);
    probe = UniqueFd(open("/dev/null", O_RDONLY | O_CLOEXEC));
    struct rlimit low = old;
    low.rlim_cur = static_cast<rlim_t>(probe.get()) + 64;
    limited = setrlimit(RLIMIT_NOFILE, &low) == 0;
    for (;;) {
      UniqueFd fd(fcntl(probe.get(), F_DUPFD_CLOEXEC, 0));
      if (!fd) break;
      filler.push_back(std::move(fd));
    }
    full = errno == EMFILE;
  }
  ~FullFdTable() {
    filler.clear();
    probe.reset();
    if (limited) setrlimit(RLIMIT_NOFILE, &old);
  }
  struct rlimit old {};
  bool limited = false, full = false;
  UniqueFd probe;  // held: closing it would free a descriptor
  std::vector<UniqueFd> filler;
};

// Issue #21 point 2. The descriptor table is full: accept4 fails with EMFILE
// while the peer waits in the backlog and the socket stays readable. Over 200
// loop iterations the listener may wake only a few times (its backoff timer),
// not once per iteration; a freed descriptor lets the waiting peer in.
TEST_F(ListenerTest, EmfilePausesTheListenerInsteadOfSpinningAndRecovers) {
  UniqueFd client = Connect();  // waits in the backlog
  FullFdTable table;
  ASSERT_TRUE(table.limited && table.full);
  size_t dispatched = 0;
  for (int i = 0; i < 200; ++i)
    if (sd_event_run(event.get(), 0) > 0) ++dispatched;
  EXPECT_TRUE(admission.accepted.empty());
  EXPECT_TRUE(listener->paused());
  // Backoff from kAcceptBackoffMinUsec (10 ms) doubling: within even 2.5 s
  // of iterations at most 8 timer wakeups, against one wakeup per iteration
  // when spinning.
  static_assert(limits::kAcceptBackoffMinUsec << 8 > 2500ULL * 1000);
  EXPECT_LE(dispatched, 8u) << "the listener spins on EMFILE";
  // A session ends and frees descriptors: the peer is admitted at once.
  table.filler.resize(table.filler.size() - 8);
  listener->DescriptorsFreed();
  EXPECT_FALSE(listener->paused());
  for (int i = 0; i < 10 && admission.accepted.empty(); ++i) sd_event_run(event.get(), 0);
  EXPECT_EQ(admission.accepted.size(), 1u);
}

// Without a DescriptorsFreed() call the backoff timer alone recovers.
TEST_F(ListenerTest, EmfileRecoversFromTheBackoffTimer) {
  UniqueFd client = Connect();
  {
    FullFdTable table;
    ASSERT_TRUE(table.limited && table.full);
    for (int i = 0; i < 20; ++i) sd_event_run(event.get(), 0);
    EXPECT_TRUE(listener->paused());
    EXPECT_TRUE(admission.accepted.empty());
  }
  // The timer is due after at most kAcceptBackoffMaxUsec.
  EXPECT_TRUE(testing::RunUntil(event.get(), [&] { return admission.accepted.size() == 1; },
                                static_cast<int>(limits::kAcceptBackoffMaxUsec / 1000) + 30000));
}

// Issue #21 point 2, the other half: a listening socket that stays readable
// (a connect loop) must not keep idle-priority housekeeping (the Supervisor's
// destruction of finished sessions, kReapPriority) from running. sd-event
// dispatches the highest-priority pending source first, so without the
// yield the idle source runs only once the backlog is empty.
TEST_F(ListenerTest, AFullBurstYieldsToIdlePriorityHousekeeping) {
  constexpr size_t kWaiting = 4 * limits::kAcceptBurst;  // the test's listen backlog is 64
  std::vector<UniqueFd> clients;
  for (size_t i = 0; i < kWaiting; ++i) clients.push_back(Connect());
  size_t accepted_at_first_idle_run = SIZE_MAX;
  struct Idle {
    Admission* admission;
    size_t* seen;
  } idle{&admission, &accepted_at_first_idle_run};
  sd_event_source* raw = nullptr;
  ASSERT_GE(sd_event_add_defer(event.get(), &raw, [](sd_event_source*, void* u) noexcept -> int {
              auto* i = static_cast<Idle*>(u);
              if (*i->seen == SIZE_MAX) *i->seen = i->admission->accepted.size();
              return 0;
            }, &idle), 0);
  EventSourcePtr housekeeping(raw);
  sd_event_source_set_priority(raw, kReapPriority);
  sd_event_source_set_enabled(raw, SD_EVENT_ONESHOT);
  for (int i = 0; i < 100 && admission.accepted.size() < kWaiting; ++i) {
    admission.handshakes = 0;  // each admitted connection finished its handshake
    sd_event_run(event.get(), 100 * 1000);
  }
  EXPECT_EQ(admission.accepted.size(), kWaiting);
  // Scheduled before the first burst, it runs within the first two.
  EXPECT_LE(accepted_at_first_idle_run, 2 * limits::kAcceptBurst)
      << "housekeeping starved until the backlog was empty";
}

// Issue #21 point 3. Another process (same uid, not the MainPID) connects in
// a loop and never finishes a handshake. From kHandshakePressure on its
// connections are turned away at accept without a slot, so the MainPID (this
// process, as systemd's latest answer names it) still gets in; the cache only
// refuses, the admitted MainPID connection still goes to full authentication.
TEST_F(ListenerTest, TheMainPidGetsInDuringAConnectLoopOfAnotherProcess) {
  admission.cache.Record(getpid());
  constexpr int kLoop = 3 * static_cast<int>(limits::kMaxPendingHandshakes);
  int ready[2];
  ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
  pid_t child = fork();
  if (child == 0) {
    std::vector<UniqueFd> held;
    for (int i = 0; i < kLoop; ++i) {
      held.push_back(sock.Connect());
      if (!held.back().valid()) _exit(1);
    }
    char b = 1;
    (void)write(ready[1], &b, 1);
    pause();  // holds its connections until killed
    _exit(0);
  }
  close(ready[1]);
  char b = 0;
  ASSERT_EQ(read(ready[0], &b, 1), 1);
  close(ready[0]);
  // Every connection of the loop reaches admission (accepted or refused).
  testing::RunFor(event.get(), 200);
  size_t from_loop = admission.accepted.size();
  UniqueFd mine = Connect();
  bool in = testing::RunUntil(event.get(), [&] { return admission.accepted.size() > from_loop; }, 2000);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(from_loop, limits::kHandshakePressure) << "the loop holds only the slots below the pressure mark";
  EXPECT_TRUE(in) << "the MainPID got too_many_handshakes during the connect loop";
  EXPECT_EQ(admission.accepted.size(), from_loop + 1);
}

TEST(MainPidCache, OnlyAnAnswerNamingAnotherProcessRejects) {
  MainPidCache cache;
  EXPECT_FALSE(cache.NamesAnotherProcess(42)) << "no answer yet: rejects nothing";
  cache.Record(42);
  EXPECT_FALSE(cache.NamesAnotherProcess(42));
  EXPECT_TRUE(cache.NamesAnotherProcess(43));
  cache.Record(43);  // the application restarted: the next answer names it
  EXPECT_FALSE(cache.NamesAnotherProcess(43));
  cache.Record(0);  // the unit is not running: nobody can be its MainPID
  EXPECT_TRUE(cache.NamesAnotherProcess(42));
}

TEST(ListenerOptions, ThePassOptionsOfTheListeningSocketAreCleared) {
  // What a drop-in with PassCredentials=, PassSecurity= and PassPIDFD= makes
  // systemd hand over.
  TempListener sock(8);
  ASSERT_TRUE(sock.ok());
  UniqueFd l = sock.Take();
  constexpr int kSoPassPidfd = 76;
  int on = 1;
  ASSERT_EQ(setsockopt(l.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on), 0);
  ASSERT_EQ(setsockopt(l.get(), SOL_SOCKET, kSoPassPidfd, &on, sizeof on), 0) << "Linux 6.5+";
  UniqueFd watch(fcntl(l.get(), F_DUPFD_CLOEXEC, 0));
  EventPtr event = testing::NewEvent();
  Admission admission;
  Lingerer lingerer(event.get());
  Listener listener(event.get(), std::move(l), &admission, &lingerer);
  ASSERT_TRUE(listener.Init().ok());
  listener.Enable(true);
  for (int option : {SO_PASSCRED, SO_PASSSEC, kSoPassPidfd}) {
    int value = -1;
    socklen_t len = sizeof value;
    ASSERT_EQ(getsockopt(watch.get(), SOL_SOCKET, option, &value, &len), 0);
    EXPECT_EQ(value, 0) << "option " << option;
  }
  // A connection accepted from it inherits the cleared flags: a message sent
  // on it carries no control data.
  UniqueFd c = sock.Connect();
  ASSERT_TRUE(c.valid());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return !admission.accepted.empty(); }));
  ASSERT_EQ(send(c.get(), "x", 1, 0), 1);
  char b;
  bool refused = true;
  EXPECT_EQ(RecvPacket(admission.accepted[0].get(), &b, 1, 0, &refused), 1);
  EXPECT_FALSE(refused) << "no SCM_CREDENTIALS or SCM_PIDFD came with the byte";
}

TEST_F(ListenerTest, DisabledListenerAcceptsNothing) {
  listener->Enable(false);
  UniqueFd c = Connect();
  testing::RunFor(event.get(), 50);
  EXPECT_TRUE(admission.accepted.empty());
}

}  // namespace
}  // namespace opencode::daemon
