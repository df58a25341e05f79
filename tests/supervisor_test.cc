// The Supervisor without a bus (FakeSystemd + a fixed Authenticator injected):
// nothing is accepted before start-up recovery proved every leftover unit
// gone; SIGTERM ends every session, stops their units and exits 0 once all are
// proven gone; a unit that cannot be proven gone ends the process after
// kShutdownDeadlineUsec with a failure status; a unit not proven gone within
// its bound stays on the retry list, holds a session slot and is proven gone
// by a later attempt (the retry timer, or systemd reappearing on the bus);
// readiness is declared once, after every leftover had its attempt, even when
// a leftover's reaper cannot start.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/limits.h"
#include "common/scm_rights.h"
#include "daemon/supervisor.h"
#include "tests/daemon_test_util.h"

namespace opencode::daemon {
namespace {

using testing::FakeSystemd;

class FixedAuth final : public Authenticator {
 public:
  std::unique_ptr<PendingCall> Authenticate(int /*sock*/, AuthDone done) override {
    AuthResult r;
    r.code = ErrorCode::kOk;
    r.peer.pid = 4242;
    r.peer.uid = 1000;
    done(std::move(r));
    return nullptr;
  }
};

struct SupervisorTest : ::testing::Test {
  void SetUp() override {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, nullptr);  // sd_event_add_signal needs them blocked
    ASSERT_NE(mkdtemp(dir), nullptr);
    path = std::string(dir) + "/s";
    UniqueFd l(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    addr.sun_family = AF_UNIX;
    strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(bind(l.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(listen(l.get(), 16), 0);
    supervisor = std::make_unique<Supervisor>(event.get(), std::move(l));
    auto fake = std::make_unique<FakeSystemd>();
    systemd = fake.get();
    absl::Status st = supervisor->StartWith(std::move(fake), std::make_unique<FixedAuth>());
    ASSERT_TRUE(st.ok()) << st;
  }
  void TearDown() override {
    supervisor.reset();
    unlink(path.c_str());
    rmdir(dir);
  }
  UniqueFd Connect() {
    UniqueFd c(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    EXPECT_EQ(connect(c.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    return c;
  }
  bool Finished() {
    int state = sd_event_get_state(event.get());
    return state == SD_EVENT_FINISHED || state == SD_EVENT_EXITING;
  }
  void Recover(std::vector<std::string> leftovers) {
    ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd->Pending_("ListSessionUnits") != nullptr; }));
    auto list = systemd->Pending_("ListSessionUnits");
    list->answered = true;
    list->list(std::move(leftovers));
  }
  void ReapOne() {
    ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd->Pending_("StopUnit") != nullptr; }));
    ASSERT_TRUE(systemd->Answer("StopUnit", absl::OkStatus()));
    ASSERT_TRUE(systemd->AnswerGone(true));
  }
  // A session in RUNNING: START with a directory, StartUnit, a good snapshot.
  void RunningSession(int client, bool answer_start = true) {
    std::string f;
    const char* argv[] = {"true"};
    ErrorCode err;
    f.resize(StartFrameSize(1, argv, &err));
    EncodeStartFrame(80, 24, 1, argv, reinterpret_cast<uint8_t*>(f.data()), f.size(), &err);
    UniqueFd d(open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_EQ(SendWithFd(client, f.data(), f.size(), d.get()), static_cast<ssize_t>(f.size()));
    ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return systemd->Pending_("StartUnit") != nullptr; }));
    if (answer_start) systemd->Answer("StartUnit", absl::OkStatus());
  }

  char dir[32] = "/tmp/opencode-mgr-XXXXXX";
  std::string path;
  sockaddr_un addr{};
  EventPtr event = testing::NewEvent();
  std::unique_ptr<Supervisor> supervisor;
  FakeSystemd* systemd = nullptr;
};

TEST_F(SupervisorTest, NothingIsAcceptedBeforeRecoveryProvedLeftoversGone) {
  UniqueFd early = Connect();
  Recover({"opencode-pty-0123456789abcdef0123456789abcdef.service"});
  testing::RunFor(event.get(), 50);
  EXPECT_EQ(supervisor->SessionCount(), 0u) << "still recovering";
  ReapOne();
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return supervisor->SessionCount() == 1; }));
  EXPECT_EQ(supervisor->HandshakeCount(), 1u);
}

TEST_F(SupervisorTest, SigtermEndsSessionsStopsUnitsAndExitsZero) {
  Recover({});
  UniqueFd c = Connect();
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return supervisor->HandshakeCount() == 1; }));
  RunningSession(c.get());
  kill(getpid(), SIGTERM);
  ReapOne();  // the unit whose StartTransientUnit was answered
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return Finished(); }));
  int code = -1;
  sd_event_get_exit_code(event.get(), &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(supervisor->SessionCount(), 0u);
}

TEST_F(SupervisorTest, ShutdownDeadlineEndsTheProcessWhenASessionCannotFinish) {
  Recover({});
  UniqueFd c = Connect();
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return supervisor->HandshakeCount() == 1; }));
  // systemd never answers StartTransientUnit: the session may not end before
  // it knows whether a unit exists, so only the shutdown bound ends the wait.
  RunningSession(c.get(), /*answer_start=*/false);
  auto t0 = std::chrono::steady_clock::now();
  kill(getpid(), SIGTERM);
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return Finished(); },
                                static_cast<int>(limits::kShutdownDeadlineUsec / 1000) + 30000));
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  int code = -1;
  sd_event_get_exit_code(event.get(), &code);
  EXPECT_EQ(code, EXIT_FAILURE);
  EXPECT_GE(waited.count(), static_cast<long>(limits::kShutdownDeadlineUsec / 1000) - 100);
  EXPECT_EQ(supervisor->SessionCount(), 1u);
}

// Answers every cleanup call the way an unreachable systemd would (errors and
// "still loaded") until `done`.
template <typename Pred>
bool SystemdAway(sd_event* e, FakeSystemd* systemd, Pred done, int ms) {
  return testing::RunUntil(
      e,
      [&] {
        while (systemd->Answer("StopUnit", absl::UnavailableError("systemd away"))) {}
        while (systemd->Answer("ResetFailedUnit", absl::UnavailableError("systemd away"))) {}
        while (systemd->AnswerGone(false)) {}
        return done();
      },
      ms);
}

constexpr char kLeftover[] = "opencode-pty-0123456789abcdef0123456789abcdef.service";

TEST_F(SupervisorTest, LeftoverNotProvenGoneIsRetriedWhenSystemdIsBackAndHoldsASlotMeanwhile) {
  Recover({kLeftover});
  const int bound_ms = static_cast<int>(limits::kCleanupDeadlineUsec / 1000) + 30000;
  ASSERT_TRUE(SystemdAway(event.get(), systemd, [&] { return !supervisor->unproven().empty(); }, bound_ms));
  EXPECT_EQ(supervisor->unproven().count(kLeftover), 1u) << "not forgotten";
  EXPECT_EQ(supervisor->SessionCount(), 1u) << "the unit may still run: it holds a slot";
  // Ready anyway (the bound was hit and logged): a new connection is served.
  UniqueFd c = Connect();
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return supervisor->HandshakeCount() == 1; }));
  // systemd is back (what the NameOwnerChanged hint and the timer both call).
  const size_t stops = systemd->Count("StopUnit");
  supervisor->RetryUnproven();
  supervisor->RetryUnproven();  // a second trigger while one attempt runs adds none
  EXPECT_EQ(systemd->Count("StopUnit"), stops + 1);
  ReapOne();
  EXPECT_TRUE(supervisor->unproven().empty());
  EXPECT_EQ(supervisor->SessionCount(), 1u) << "only the live connection";
}

// Every datagram sd_notify sent to `sock` so far, in order.
std::vector<std::string> Notifications(int sock) {
  std::vector<std::string> out;
  char buf[4096];
  for (;;) {
    ssize_t n = recv(sock, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0) break;
    out.emplace_back(buf, static_cast<size_t>(n));
  }
  return out;
}

// A leftover whose reaper cannot start goes on the retry list at once. The
// loop has finished, so no reaper can add its cleanup deadline (the same
// failure path as ENOMEM): the first leftover's failure must not declare the
// supervisor ready while the recovery loop has not yet tried the second.
TEST_F(SupervisorTest, ReadinessWaitsForEveryLeftoverEvenWhenAReaperCannotStart) {
  const std::string notify_path = std::string(dir) + "/notify";
  UniqueFd notify(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_un na{};
  na.sun_family = AF_UNIX;
  strncpy(na.sun_path, notify_path.c_str(), sizeof(na.sun_path) - 1);
  ASSERT_EQ(bind(notify.get(), reinterpret_cast<sockaddr*>(&na), sizeof(na)), 0);
  ASSERT_EQ(setenv("NOTIFY_SOCKET", notify_path.c_str(), 1), 0);

  auto list = systemd->Pending_("ListSessionUnits");
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(sd_event_exit(event.get(), 0), 0);
  ASSERT_GE(sd_event_loop(event.get()), 0);
  ASSERT_EQ(sd_event_get_state(event.get()), SD_EVENT_FINISHED);
  list->answered = true;
  list->list(std::vector<std::string>{
      "opencode-pty-0123456789abcdef0123456789abcdef.service",
      "opencode-pty-fedcba9876543210fedcba9876543210.service"});

  std::vector<std::string> sent = Notifications(notify.get());
  unsetenv("NOTIFY_SOCKET");
  unlink(notify_path.c_str());
  EXPECT_EQ(supervisor->unproven().size(), 2u) << "both leftovers are kept on the retry list";
  size_t ready = 0, at = sent.size();
  for (size_t i = 0; i < sent.size(); ++i)
    if (sent[i] == "READY=1") ++ready, at = i;
  std::string all;
  for (const std::string& m : sent) all += "[" + m + "] ";
  ASSERT_EQ(ready, 1u) << all;
  ASSERT_LT(at + 1, sent.size()) << all;
  EXPECT_EQ(sent[at + 1], "STATUS=0 sessions, 0 handshakes, 2 units not proven gone (retrying)")
      << "READY=1 came before every leftover had its attempt: " << all;
}

TEST_F(SupervisorTest, SessionUnitNotProvenGoneIsRetriedByTheTimer) {
  Recover({});
  UniqueFd c = Connect();
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return supervisor->HandshakeCount() == 1; }));
  RunningSession(c.get());
  const std::string unit = systemd->calls().back()->unit;
  c.reset();  // the client leaves; systemd does not answer the cleanup
  const int bound_ms = static_cast<int>(limits::kCleanupDeadlineUsec / 1000) + 30000;
  ASSERT_TRUE(SystemdAway(event.get(), systemd, [&] { return !supervisor->unproven().empty(); }, bound_ms));
  EXPECT_EQ(supervisor->unproven().count(unit), 1u);
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return supervisor->SessionCount() == 1; }))
      << "the session is gone, its unit still holds a slot";
  // The retry timer starts a new attempt without any outside trigger.
  const size_t stops = systemd->Count("StopUnit");
  ASSERT_TRUE(testing::RunUntil(
      event.get(), [&] { return systemd->Count("StopUnit") > stops; },
      static_cast<int>(limits::kUnprovenRetryIntervalUsec / 1000) + 30000));
  EXPECT_EQ(systemd->Pending_("StopUnit")->unit, unit);
  ReapOne();
  EXPECT_TRUE(supervisor->unproven().empty());
  EXPECT_EQ(supervisor->SessionCount(), 0u);
}

}  // namespace
}  // namespace opencode::daemon
