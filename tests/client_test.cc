// Tests of opencode-pty-client, the fixed helper: it is spawned exactly as the
// application spawns it (fd 3 = one end of a real AF_UNIX socketpair, fd 4 = an
// opened directory, nothing else), and the other end is read with the common
// codec (RecvWithFd, DecodeFrame, ParseStartPayload). The syscall audit runs
// the same binary under strace -f.
#include <elf.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/frame.h"
#include "common/limits.h"
#include "common/scm_rights.h"
#include "common/unique_fd.h"
#include "tests/temp_listener.h"

namespace {

using opencode::UniqueFd;
namespace limits = opencode::limits;

// Exit statuses of the helper (client/main.cc, docs/PROTOCOL.md section 9).
constexpr int kOk = 0, kSocketMissing = 10, kNotSocket = 11, kSocketFamily = 12,
              kSocketType = 13, kNotConnected = 14, kDirMissing = 15, kNotDirectory = 16,
              kExtraFd = 18, kFdAudit = 19, kUsage = 20, kBadSize = 21, kArgc = 22, kArgTooLong = 23,
              kArgvTooLong = 24, kEmptyCommand = 25, kPeerClosed = 27, kBadDetach = 29,
              kBadScrollback = 30;

struct Spawn {
  std::vector<std::string> args;   // the helper's arguments (after argv[0])
  int fd3 = -1;                    // descriptor placed at 3 in the child; -1: closed
  int fd4 = -1;                    // descriptor placed at 4; -1: closed
  std::vector<int> extra;          // further descriptors (copies of stdin) at these numbers
  rlim_t nofile_soft = 0, nofile_hard = 0;  // RLIMIT_NOFILE for the child, if set
  std::string strace_log;          // non-empty: run under strace -f -o this file
};

struct Result {
  int status = -1;
  std::string err;   // the helper's stderr
  int code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

// Starts the helper with exactly the descriptors `s` describes and waits for it.
Result RunHelper(const Spawn& s) {
  std::vector<std::string> argv_s;
  if (!s.strace_log.empty()) argv_s = {"/usr/bin/strace", "-f", "-qq", "-o", s.strace_log};
  argv_s.push_back(CLIENT_PATH);
  argv_s.insert(argv_s.end(), s.args.begin(), s.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  char* envp[] = {nullptr};

  Result r;
  int errpipe[2];
  if (pipe2(errpipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << strerror(errno);
    return r;
  }
  UniqueFd err_r(errpipe[0]), err_w(errpipe[1]);
  pid_t pid = fork();
  if (pid == 0) {
    // Child: only async-signal-safe calls until execve.
    if (dup2(err_w.get(), 2) < 0) _exit(250);
    int s3 = s.fd3 >= 0 ? fcntl(s.fd3, F_DUPFD_CLOEXEC, 500) : -1;
    int s4 = s.fd4 >= 0 ? fcntl(s.fd4, F_DUPFD_CLOEXEC, 500) : -1;
    if ((s.fd3 >= 0 && s3 < 0) || (s.fd4 >= 0 && s4 < 0)) _exit(250);
    if (s3 >= 0 ? dup2(s3, 3) < 0 : (close(3), false)) _exit(250);
    if (s4 >= 0 ? dup2(s4, 4) < 0 : (close(4), false)) _exit(250);
    // Whatever the test process holds (gtest, ctest) is not the helper's.
    if (close_range(5, ~0U, 0) != 0) _exit(250);
    for (int target : s.extra)
      if (dup2(0, target) < 0) _exit(251);
    if (s.nofile_hard != 0) {
      struct rlimit rl = {s.nofile_soft, s.nofile_hard};
      if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(252);
    }
    execve(argv[0], argv.data(), envp);
    _exit(253);
  }
  err_w.reset();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << strerror(errno);
    return r;
  }
  char buf[4096];
  ssize_t n;
  while ((n = read(err_r.get(), buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) r.err.append(buf, size_t(n));
  while (waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {}
  return r;
}

// What arrived on the application's end of the socket.
struct Received {
  std::string bytes;
  int descriptors = 0;        // descriptors over all segments
  int descriptor_segment = -1;
  opencode::ErrorCode error = opencode::ErrorCode::kOk;
  UniqueFd fd;                // the first descriptor
};

// Reads until EOF (the helper holds the only other reference to the peer).
Received ReadAll(int sock, size_t chunk = 65536) {
  Received out;
  std::vector<char> buf(chunk);
  for (int segment = 0;; ++segment) {
    struct pollfd p = {sock, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) {
      ADD_FAILURE() << "no EOF within 10 s";
      break;
    }
    opencode::RecvFdResult r = opencode::RecvWithFd(sock, buf.data(), buf.size());
    if (r.bytes <= 0) break;
    if (r.error != opencode::ErrorCode::kOk) out.error = r.error;
    if (r.fd.valid()) {
      if (++out.descriptors == 1) {
        out.fd = std::move(r.fd);
        out.descriptor_segment = segment;
      }
    }
    out.bytes.append(buf.data(), size_t(r.bytes));
  }
  return out;
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/opencode-client-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_path_ = tmpl;
    dir_ = UniqueFd(open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(dir_.valid());
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    app_.reset(sv[0]);
    helper_end_.reset(sv[1]);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_path_, ec);
  }

  // Runs the helper with fd 3 = our socketpair, fd 4 = the directory, then
  // drops our copy of its end so that its exit is an EOF here.
  Result Run(std::vector<std::string> args, Spawn s = {}) {
    s.args = std::move(args);
    if (s.fd3 == -1) s.fd3 = helper_end_.get();
    if (s.fd4 == -1) s.fd4 = dir_.get();
    Result r = RunHelper(s);
    helper_end_.reset();
    return r;
  }

  // Each command line fails with its status and one line on stderr; nothing
  // reaches the socket.
  void ExpectEachFails(const std::vector<std::pair<std::vector<std::string>, int>>& cases) {
    for (auto& [args, expected] : cases) {
      Spawn s;
      s.args = args;
      s.fd3 = helper_end_.get();
      s.fd4 = dir_.get();
      Result r = RunHelper(s);
      std::string shown;
      for (auto& a : args) shown += "[" + a + "]";
      EXPECT_EQ(r.code(), expected) << shown << ": " << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << shown << ": " << r.err;
    }
    ExpectNothingSent();
  }
  // The helper failed: nothing (no byte, no descriptor) may have arrived.
  void ExpectNothingSent() {
    helper_end_.reset();
    Received got = ReadAll(app_.get());
    EXPECT_EQ(got.bytes.size(), 0u);
    EXPECT_EQ(got.descriptors, 0);
  }

  // Decodes what arrived as exactly one START frame plus exactly the directory.
  opencode::StartRequest ExpectOneStartFrame(Received& got) {
    opencode::StartRequest req;
    EXPECT_EQ(got.error, opencode::ErrorCode::kOk);
    EXPECT_EQ(got.descriptors, 1);
    EXPECT_EQ(got.descriptor_segment, 0) << "the descriptor travels with the first byte";
    if (!got.fd.valid()) {
      ADD_FAILURE() << "no descriptor";
      return req;
    }
    struct stat passed, received;
    EXPECT_EQ(fstat(dir_.get(), &passed), 0);
    EXPECT_EQ(fstat(got.fd.get(), &received), 0);
    EXPECT_TRUE(S_ISDIR(received.st_mode));
    EXPECT_EQ(received.st_dev, passed.st_dev);
    EXPECT_EQ(received.st_ino, passed.st_ino);
    EXPECT_EQ(fcntl(got.fd.get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    auto span = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(got.bytes.data()), got.bytes.size());
    opencode::DecodeResult d = opencode::DecodeFrame(opencode::Direction::kFromClient, span);
    EXPECT_EQ(d.status, opencode::DecodeResult::Status::kFrame);
    if (d.status != opencode::DecodeResult::Status::kFrame) return req;
    EXPECT_EQ(d.type, opencode::FrameType::kStart);
    EXPECT_EQ(d.consumed, got.bytes.size()) << "exactly one frame, nothing after it";
    EXPECT_EQ(opencode::ParseStartPayload(d.payload, &req), opencode::ErrorCode::kOk);
    return req;
  }

  std::string dir_path_;
  UniqueFd dir_, app_, helper_end_;
};

// ---------------------------------------------------------------------------
// The frame and the descriptor.

TEST_F(ClientTest, SendsOneStartFrameWithExactlyTheDirectory) {
  std::vector<std::string> cmd = {"ls", "-l", "with space", "", "$(x)", "line\nbreak", "\xff\xfe"};
  std::vector<std::string> args = {"--cols", "120", "--rows", "40", "--"};
  args.insert(args.end(), cmd.begin(), cmd.end());
  Result r = Run(args);
  EXPECT_EQ(r.code(), kOk) << r.err;
  EXPECT_EQ(r.err, "");
  Received got = ReadAll(app_.get());
  opencode::StartRequest req = ExpectOneStartFrame(got);
  EXPECT_EQ(req.cols, 120);
  EXPECT_EQ(req.rows, 40);
  EXPECT_EQ(req.argv, cmd);
}

TEST_F(ClientTest, DefaultSizeAndOptionOrder) {
  Result r = Run({"--", "sh"});
  EXPECT_EQ(r.code(), kOk) << r.err;
  Received got = ReadAll(app_.get());
  opencode::StartRequest req = ExpectOneStartFrame(got);
  EXPECT_EQ(req.cols, limits::kDefaultCols);
  EXPECT_EQ(req.rows, limits::kDefaultRows);
  EXPECT_EQ(req.argv, std::vector<std::string>{"sh"});
}

// --env (no value, once, anywhere before "--") sets only START's flag 0x1;
// without it the flag is clear. The helper sends nothing else: the ENV frame
// is the application's.
TEST_F(ClientTest, EnvOptionSetsTheStartFlagOnly) {
  Result r = Run({"--cols", "100", "--env", "--rows", "30", "--", "sh", "--env"});
  EXPECT_EQ(r.code(), kOk) << r.err;
  Received got = ReadAll(app_.get());
  opencode::StartRequest req = ExpectOneStartFrame(got);
  EXPECT_TRUE(req.env);
  EXPECT_EQ(req.cols, 100);
  EXPECT_EQ(req.rows, 30);
  EXPECT_EQ(req.argv, (std::vector<std::string>{"sh", "--env"}));
}

TEST_F(ClientTest, WithoutEnvTheFlagIsClear) {
  Result r = Run({"--", "sh"});
  EXPECT_EQ(r.code(), kOk) << r.err;
  Received got = ReadAll(app_.get());
  EXPECT_FALSE(ExpectOneStartFrame(got).env);
}

TEST_F(ClientTest, SizeBoundsAndReversedOptions) {
  Result r = Run({"--rows", "1000", "--cols", "1", "--", "--cols"});
  EXPECT_EQ(r.code(), kOk) << r.err;
  Received got = ReadAll(app_.get());
  opencode::StartRequest req = ExpectOneStartFrame(got);
  EXPECT_EQ(req.cols, 1);
  EXPECT_EQ(req.rows, 1000);
  EXPECT_EQ(req.argv, std::vector<std::string>{"--cols"});  // after "--" it is an argument
}

// A non-blocking socket (O_NONBLOCK is shared with the application's file
// description) with tiny buffers forces a short sendmsg and EAGAIN: the rest
// must follow with plain send and the descriptor must still arrive once.
TEST_F(ClientTest, PartialWriteOnNonBlockingSocketCompletesTheFrame) {
  int small = 1024;
  ASSERT_EQ(setsockopt(helper_end_.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
  ASSERT_EQ(setsockopt(app_.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
  ASSERT_EQ(fcntl(helper_end_.get(), F_SETFL, O_NONBLOCK), 0);
  std::vector<std::string> cmd = {"prog", std::string(limits::kMaxArgBytes, 'p'),
                                  std::string(limits::kMaxArgBytes - 4, 'q')};
  std::vector<std::string> args = {"--"};
  args.insert(args.end(), cmd.begin(), cmd.end());
  std::string log = dir_path_ + "/strace.log";
  Spawn s;
  s.strace_log = log;
  s.args = args;
  s.fd3 = helper_end_.get();
  s.fd4 = dir_.get();
  // Read slowly in a thread while the helper runs, so it must wait for room.
  Received got;
  std::thread reader([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    got = ReadAll(app_.get(), 512);
  });
  Result r = RunHelper(s);
  helper_end_.reset();
  reader.join();
  EXPECT_EQ(r.code(), kOk) << r.err;
  opencode::StartRequest req = ExpectOneStartFrame(got);
  EXPECT_EQ(req.argv, cmd);
  // The strace log proves the short-write path really ran.
  std::ifstream in(log);
  std::string line;
  int sendmsgs = 0, sends = 0, eagain = 0;
  while (std::getline(in, line)) {
    if (line.find(" sendmsg(") != std::string::npos) ++sendmsgs;
    if (line.find(" sendto(") != std::string::npos) ++sends;
    if (line.find("EAGAIN") != std::string::npos) ++eagain;
  }
  EXPECT_EQ(sendmsgs, 1) << "the descriptor went in ONE sendmsg";
  EXPECT_GE(sends, 1) << "the rest went with send()";
  EXPECT_GE(eagain, 1) << "the helper had to wait for POLLOUT";
}

TEST_F(ClientTest, PeerGoneIsItsOwnStatus) {
  app_.reset();  // the supervisor end closed before the helper sends
  Result r = Run({"--", "sh"});
  EXPECT_EQ(r.code(), kPeerClosed) << r.err;
}

// ---------------------------------------------------------------------------
// Wrong descriptors: each has its own status and nothing is sent.

TEST_F(ClientTest, Fd3Missing) {
  Spawn s;
  s.fd3 = -1;
  s.args = {"--", "sh"};
  s.fd4 = dir_.get();
  Result r = RunHelper(s);
  EXPECT_EQ(r.code(), kSocketMissing) << r.err;
  EXPECT_NE(r.err.find("fd 3 is not open"), std::string::npos) << r.err;
  ExpectNothingSent();
}

TEST_F(ClientTest, Fd3NotASocket) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  UniqueFd pr(p[0]), pw(p[1]);
  UniqueFd file(open((dir_path_ + "/f").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  for (int fd : {pw.get(), file.get(), dir_.get()}) {
    Spawn s;
    s.fd3 = fd;
    s.fd4 = dir_.get();
    s.args = {"--", "sh"};
    Result r = RunHelper(s);
    EXPECT_EQ(r.code(), kNotSocket) << r.err;
  }
  ExpectNothingSent();
}

TEST_F(ClientTest, Fd3WrongFamily) {
  UniqueFd inet(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  UniqueFd inet6(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(inet.valid());
  for (int fd : {inet.get(), inet6.get()}) {
    if (fd < 0) continue;  // no IPv6 in this kernel: the IPv4 case still ran
    Spawn s;
    s.fd3 = fd;
    s.fd4 = dir_.get();
    s.args = {"--", "sh"};
    Result r = RunHelper(s);
    EXPECT_EQ(r.code(), kSocketFamily) << r.err;
  }
  ExpectNothingSent();
}

TEST_F(ClientTest, Fd3WrongType) {
  for (int type : {SOCK_DGRAM, SOCK_SEQPACKET}) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv), 0);
    UniqueFd a(sv[0]), b(sv[1]);
    Spawn s;
    s.fd3 = b.get();
    s.fd4 = dir_.get();
    s.args = {"--", "sh"};
    Result r = RunHelper(s);
    EXPECT_EQ(r.code(), kSocketType) << r.err;
    char byte;
    EXPECT_EQ(recv(a.get(), &byte, 1, MSG_DONTWAIT), -1) << "nothing may arrive";
  }
  ExpectNothingSent();
}

TEST_F(ClientTest, Fd3NotConnected) {
  UniqueFd unbound(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  opencode::TempListener listening(1);
  ASSERT_TRUE(listening.ok());
  for (int fd : {unbound.get(), listening.fd()}) {
    Spawn s;
    s.fd3 = fd;
    s.fd4 = dir_.get();
    s.args = {"--", "sh"};
    Result r = RunHelper(s);
    EXPECT_EQ(r.code(), kNotConnected) << r.err;
  }
  ExpectNothingSent();
}

TEST_F(ClientTest, Fd4Missing) {
  Spawn s;
  s.fd3 = helper_end_.get();
  s.fd4 = -1;
  s.args = {"--", "sh"};
  Result r = RunHelper(s);
  EXPECT_EQ(r.code(), kDirMissing) << r.err;
  ExpectNothingSent();
}

TEST_F(ClientTest, Fd4NotADirectory) {
  UniqueFd file(open((dir_path_ + "/f").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  UniqueFd pr(p[0]), pw(p[1]);
  for (int fd : {file.get(), pr.get(), app_.get()}) {
    Spawn s;
    s.fd3 = helper_end_.get();
    s.fd4 = fd;
    s.args = {"--", "sh"};
    Result r = RunHelper(s);
    EXPECT_EQ(r.code(), kNotDirectory) << r.err;
  }
  ExpectNothingSent();
}

// Any descriptor >= 5 is a leak by the caller: refused wherever it sits.
TEST_F(ClientTest, ExtraDescriptorAnywhereIsRefused) {
  struct rlimit rl;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  ASSERT_GT(rl.rlim_max, 1100u);
  // 5 and 6: the first slots; 1028/1029: the last of the first poll batch and
  // the first of the second; rlim_max - 1: the last descriptor that can exist.
  for (int fd : {5, 6, 100, 1028, 1029, int(rl.rlim_max - 1)}) {
    Spawn s;
    s.extra = {fd};
    s.args = {"--", "sh"};
    s.fd3 = helper_end_.get();
    s.fd4 = dir_.get();
    Result r = RunHelper(s);
    EXPECT_EQ(r.code(), kExtraFd) << "fd " << fd << ": " << r.err;
    EXPECT_NE(r.err.find("a descriptor >= 5 is open"), std::string::npos);
  }
  ExpectNothingSent();
}

TEST_F(ClientTest, ExtraDescriptorFoundWithSmallSoftLimit) {
  // A soft limit of 7 makes every poll batch 7 entries; the scan still covers
  // up to the hard limit.
  Spawn s;
  s.extra = {4095};
  s.nofile_soft = 7;
  s.nofile_hard = 4096;
  s.args = {"--", "sh"};
  s.fd3 = helper_end_.get();
  s.fd4 = dir_.get();
  Result r = RunHelper(s);
  EXPECT_EQ(r.code(), kExtraFd) << r.err;
  // Control: the same limits without the leak pass.
  s.extra = {};
  Result ok = Run({"--", "sh"}, s);
  EXPECT_EQ(ok.code(), kOk) << ok.err;
  Received got = ReadAll(app_.get());
  ExpectOneStartFrame(got);
}

TEST_F(ClientTest, UnauditableDescriptorTableIsRefused) {
  // A soft limit of 0 leaves poll() no room for a single entry.
  Spawn s;
  s.nofile_soft = 0;
  s.nofile_hard = 4096;
  s.args = {"--", "sh"};
  s.fd3 = helper_end_.get();
  s.fd4 = dir_.get();
  Result r = RunHelper(s);
  EXPECT_EQ(r.code(), kFdAudit) << r.err;
  ExpectNothingSent();
}

// ---------------------------------------------------------------------------
// Command line and argv bounds.

TEST_F(ClientTest, UsageErrors) {
  std::vector<std::pair<std::vector<std::string>, int>> cases = {
      {{}, kUsage},
      {{"sh"}, kUsage},
      {{"--"}, kUsage},
      {{"--cols", "80"}, kUsage},
      {{"--cols", "80", "sh"}, kUsage},
      {{"--cols"}, kUsage},
      {{"--cols=80", "--", "sh"}, kUsage},
      {{"--foo", "--", "sh"}, kUsage},
      {{"-c", "80", "--", "sh"}, kUsage},
      {{"--cols", "80", "--cols", "90", "--", "sh"}, kUsage},
      {{"--rows", "24", "--rows", "24", "--", "sh"}, kUsage},
      {{"--env", "--env", "--", "sh"}, kUsage},
      {{"--env=1", "--", "sh"}, kUsage},
      {{"--env"}, kUsage},
      {{"--cols", "0", "--", "sh"}, kBadSize},
      {{"--cols", "1001", "--", "sh"}, kBadSize},
      {{"--cols", "080", "--", "sh"}, kBadSize},
      {{"--cols", "+80", "--", "sh"}, kBadSize},
      {{"--cols", "-1", "--", "sh"}, kBadSize},
      {{"--cols", "", "--", "sh"}, kBadSize},
      {{"--rows", "65536", "--", "sh"}, kBadSize},
      {{"--rows", "24x", "--", "sh"}, kBadSize},
      {{"--", ""}, kEmptyCommand},
  };
  ExpectEachFails(cases);
}

TEST_F(ClientTest, TooManyArguments) {
  std::vector<std::string> args = {"--", "prog"};
  while (args.size() - 1 < limits::kMaxArgs + 1) args.push_back("x");
  Spawn s;
  s.args = args;
  s.fd3 = helper_end_.get();
  s.fd4 = dir_.get();
  EXPECT_EQ(RunHelper(s).code(), kArgc);
  ExpectNothingSent();
}

TEST_F(ClientTest, MaxArgumentsAccepted) {
  std::vector<std::string> args = {"--", "prog"};
  while (args.size() - 1 < limits::kMaxArgs) args.push_back(std::to_string(args.size()));
  Result r = Run(args);
  EXPECT_EQ(r.code(), kOk) << r.err;
  Received got = ReadAll(app_.get());
  opencode::StartRequest req = ExpectOneStartFrame(got);
  EXPECT_EQ(req.argv.size(), limits::kMaxArgs);
  EXPECT_EQ(req.argv, std::vector<std::string>(args.begin() + 1, args.end()));
}

TEST_F(ClientTest, ArgumentTooLong) {
  Spawn s;
  s.args = {"--", "prog", std::string(limits::kMaxArgBytes + 1, 'a')};
  s.fd3 = helper_end_.get();
  s.fd4 = dir_.get();
  EXPECT_EQ(RunHelper(s).code(), kArgTooLong);
  ExpectNothingSent();
}

TEST_F(ClientTest, ArgvTooLongInTotal) {
  Spawn s;
  s.args = {"--", "p", std::string(limits::kMaxArgBytes, 'a'),
            std::string(limits::kMaxArgvTotalBytes - limits::kMaxArgBytes, 'b')};  // one over
  s.fd3 = helper_end_.get();
  s.fd4 = dir_.get();
  EXPECT_EQ(RunHelper(s).code(), kArgvTooLong);
  ExpectNothingSent();
}

TEST_F(ClientTest, ArgvAtTheBoundsAccepted) {
  std::vector<std::string> cmd = {"p", std::string(limits::kMaxArgBytes, 'a'),
                                  std::string(limits::kMaxArgvTotalBytes - limits::kMaxArgBytes - 1, 'b')};
  std::vector<std::string> args = {"--"};
  args.insert(args.end(), cmd.begin(), cmd.end());
  Result r = Run(args);
  EXPECT_EQ(r.code(), kOk) << r.err;
  Received got = ReadAll(app_.get());
  opencode::StartRequest req = ExpectOneStartFrame(got);
  EXPECT_EQ(req.argv, cmd);
  // (kMaxStartPayload also counts the detachable flag's 8 bytes, not sent here.)
  EXPECT_EQ(got.bytes.size(), limits::kFrameHeaderBytes + limits::kMaxStartPayload - limits::kStartDetachBytes -
                                  4 * (limits::kMaxArgs - 3));
}

// ---------------------------------------------------------------------------
// Detachable sessions (--detach / --scrollback, docs/PROTOCOL.md section 10.1).

// The START frame a test expects, byte for byte: header, cols, rows, flags,
// argc, each argument, then (detachable only) grace and scrollback.
std::string ExpectedStart(uint16_t cols, uint16_t rows, uint32_t flags, const std::vector<std::string>& argv,
                          uint32_t grace, uint32_t scrollback) {
  auto u16 = [](std::string* out, uint16_t v) { out->push_back(char(v >> 8)); out->push_back(char(v)); };
  auto u32 = [](std::string* out, uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out->push_back(char(v >> shift));
  };
  std::string payload;
  u16(&payload, cols);
  u16(&payload, rows);
  u32(&payload, flags);
  u32(&payload, uint32_t(argv.size()));
  for (auto& a : argv) {
    u32(&payload, uint32_t(a.size()));
    payload += a;
  }
  if (flags & opencode::kStartFlagDetachable) {
    u32(&payload, grace);
    u32(&payload, scrollback);
  }
  std::string frame = {char(1), char(opencode::FrameType::kStart), 0, 0};
  u32(&frame, uint32_t(payload.size()));
  return frame + payload;
}

TEST_F(ClientTest, DetachSetsTheFlagAndAppendsGraceAndScrollback) {
  Result r = Run({"--detach", "30", "--scrollback", "65536", "--", "sh", "-c", "x"});
  EXPECT_EQ(r.code(), kOk) << r.err;
  EXPECT_EQ(r.err, "");
  Received got = ReadAll(app_.get());
  std::string expected = ExpectedStart(80, 24, 0x2, {"sh", "-c", "x"}, 30, 65536);
  EXPECT_EQ(got.bytes, expected);
  // The 8 trailing bytes, spelled out: grace 30, scrollback 0x00010000.
  ASSERT_GE(got.bytes.size(), 8u);
  EXPECT_EQ(got.bytes.substr(got.bytes.size() - 8), std::string("\0\0\0\x1e\0\x01\0\0", 8));
  opencode::StartRequest req = ExpectOneStartFrame(got);
  EXPECT_FALSE(req.env);
  EXPECT_EQ(req.detach.grace_sec, 30u);
  EXPECT_EQ(req.detach.scrollback, 65536u);
  EXPECT_EQ(req.argv, (std::vector<std::string>{"sh", "-c", "x"}));
}

// With --env both flags are set (0x3); the options come in any order.
TEST_F(ClientTest, DetachWithEnvSetsBothFlags) {
  Result r = Run({"--scrollback", "2097152", "--env", "--cols", "100", "--detach", "3600", "--", "sh"});
  EXPECT_EQ(r.code(), kOk) << r.err;
  Received got = ReadAll(app_.get());
  EXPECT_EQ(got.bytes, ExpectedStart(100, 24, 0x3, {"sh"}, 3600, 2097152));
  opencode::StartRequest req = ExpectOneStartFrame(got);
  EXPECT_TRUE(req.env);
  EXPECT_EQ(req.detach.grace_sec, limits::kMaxDetachGraceSec);
  EXPECT_EQ(req.detach.scrollback, limits::kMaxScrollbackBytes);
}

TEST_F(ClientTest, DetachWithoutScrollbackTakesTheDefault) {
  Result r = Run({"--detach", "1", "--", "sh"});
  EXPECT_EQ(r.code(), kOk) << r.err;
  Received got = ReadAll(app_.get());
  EXPECT_EQ(got.bytes, ExpectedStart(80, 24, 0x2, {"sh"}, 1, 1048576));
  EXPECT_EQ(got.bytes.substr(got.bytes.size() - 4), std::string("\0\x10\0\0", 4));
  opencode::StartRequest req = ExpectOneStartFrame(got);
  EXPECT_EQ(req.detach.grace_sec, 1u);
  EXPECT_EQ(req.detach.scrollback, limits::kDefaultScrollbackBytes);
}

// Without --detach the payload is the one of section 3: no flag, no 8 bytes.
TEST_F(ClientTest, WithoutDetachNothingIsAppended) {
  Result r = Run({"--env", "--", "sh"});
  EXPECT_EQ(r.code(), kOk) << r.err;
  Received got = ReadAll(app_.get());
  EXPECT_EQ(got.bytes, ExpectedStart(80, 24, 0x1, {"sh"}, 0, 0));
  EXPECT_FALSE(ExpectOneStartFrame(got).detach.detachable());
}

// kMaxStartPayload counts the 8 bytes: the largest argv (kMaxArgs elements,
// kMaxArgvTotalBytes together) with --detach fills the helper's static buffer exactly.
TEST_F(ClientTest, LargestDetachableStartIsExactlyTheMaximum) {
  std::vector<std::string> cmd;
  while (cmd.size() < limits::kMaxArgs) cmd.push_back(std::string(limits::kMaxArgvTotalBytes / limits::kMaxArgs, 'a'));
  std::vector<std::string> args = {"--detach", "60", "--"};
  args.insert(args.end(), cmd.begin(), cmd.end());
  Result r = Run(args);
  EXPECT_EQ(r.code(), kOk) << r.err;
  Received got = ReadAll(app_.get());
  EXPECT_EQ(got.bytes.size(), limits::kFrameHeaderBytes + limits::kMaxStartPayload);
  opencode::StartRequest req = ExpectOneStartFrame(got);
  EXPECT_EQ(req.argv, cmd);
  EXPECT_EQ(req.detach.scrollback, limits::kDefaultScrollbackBytes);
}

TEST_F(ClientTest, DetachAndScrollbackErrors) {
  std::vector<std::pair<std::vector<std::string>, int>> cases = {
      {{"--detach", "0", "--", "sh"}, kBadDetach},
      {{"--detach", "3601", "--", "sh"}, kBadDetach},
      {{"--detach", "030", "--", "sh"}, kBadDetach},
      {{"--detach", "+30", "--", "sh"}, kBadDetach},
      {{"--detach", "-30", "--", "sh"}, kBadDetach},
      {{"--detach", "", "--", "sh"}, kBadDetach},
      {{"--detach", "30s", "--", "sh"}, kBadDetach},
      {{"--detach", " 30", "--", "sh"}, kBadDetach},
      {{"--detach", "99999999999999999999", "--", "sh"}, kBadDetach},
      {{"--detach", "30", "--scrollback", "65535", "--", "sh"}, kBadScrollback},
      {{"--detach", "30", "--scrollback", "2097153", "--", "sh"}, kBadScrollback},
      {{"--detach", "30", "--scrollback", "0", "--", "sh"}, kBadScrollback},
      {{"--detach", "30", "--scrollback", "065536", "--", "sh"}, kBadScrollback},
      {{"--detach", "30", "--scrollback", "+65536", "--", "sh"}, kBadScrollback},
      {{"--detach", "30", "--scrollback", "4294967296", "--", "sh"}, kBadScrollback},
      {{"--scrollback", "65536", "--", "sh"}, kBadScrollback},
      {{"--env", "--scrollback", "1048576", "--cols", "80", "--", "sh"}, kBadScrollback},
      {{"--detach", "30", "--detach", "30", "--", "sh"}, kUsage},
      {{"--detach", "30", "--scrollback", "65536", "--scrollback", "65536", "--", "sh"}, kUsage},
      {{"--detach=30", "--", "sh"}, kUsage},
      {{"--detach"}, kUsage},
      {{"--detach", "30"}, kUsage},
      {{"--detach", "30", "--"}, kUsage},
      {{"--scrollback", "65536", "--"}, kUsage},
  };
  ExpectEachFails(cases);
}

// The usage line names every option.
TEST_F(ClientTest, UsageLineNamesDetachAndScrollback) {
  Result r = Run({"--foo", "--", "sh"});
  EXPECT_EQ(r.code(), kUsage);
  EXPECT_EQ(r.err,
            "opencode-pty-client: usage: opencode-pty-client [--cols N] [--rows N] [--env] "
            "[--detach SECONDS [--scrollback BYTES]] -- PROGRAM [ARG...]\n");
}

// ---------------------------------------------------------------------------
// Syscall audit: every syscall of the helper, from its execve on, is on a
// fixed list (static glibc start-up, measured on Debian 12's glibc 2.36, plus
// the helper's own); arguments that name a descriptor or a path are checked too.

struct Syscall {
  std::string name, args;
};

std::vector<Syscall> ParseStrace(const std::string& path) {
  std::vector<Syscall> calls;
  std::ifstream in(path);
  std::string line;
  static const std::regex kCall(R"(^\d+\s+([a-z0-9_]+)\((.*)$)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, kCall)) calls.push_back({m[1], m[2]});
  }
  return calls;
}

// Returns a description of every call that breaks the rules; empty if none.
std::string Audit(const std::vector<Syscall>& calls) {
  std::string bad;
  auto starts = [](const std::string& s, const char* p) { return s.rfind(p, 0) == 0; };
  for (size_t i = 0; i < calls.size(); ++i) {
    const Syscall& c = calls[i];
    bool ok = false;
    if (c.name == "execve") {
      ok = i == 0 && starts(c.args, "\"" CLIENT_PATH "\"");
    } else if (c.name == "brk" || c.name == "arch_prctl" || c.name == "set_tid_address" ||
               c.name == "set_robust_list" || c.name == "rseq" || c.name == "mprotect" ||
               c.name == "getrandom" || c.name == "exit_group") {
      ok = true;  // static glibc start-up / exit: no descriptor, no path
    } else if (c.name == "prlimit64") {
      ok = starts(c.args, "0, RLIMIT_STACK, NULL,") || starts(c.args, "0, RLIMIT_NOFILE, NULL,");
    } else if (c.name == "readlink") {
      ok = starts(c.args, "\"/proc/self/exe\",");  // glibc's static start-up (_dl_non_dynamic_init)
    } else if (c.name == "newfstatat") {
      ok = starts(c.args, "3, \"\",") || starts(c.args, "4, \"\",");
    } else if (c.name == "getsockopt" || c.name == "getpeername") {
      ok = starts(c.args, "3,");
    } else if (c.name == "fcntl") {
      ok = starts(c.args, "3, F_SETFD, FD_CLOEXEC)") || starts(c.args, "4, F_SETFD, FD_CLOEXEC)");
    } else if (c.name == "poll") {
      ok = true;  // events=0 scan, or POLLOUT on fd 3
    } else if (c.name == "sendmsg" || c.name == "sendto") {
      ok = starts(c.args, "3,");
    } else if (c.name == "writev") {
      ok = starts(c.args, "2,");
    } else if (c.name == "close") {
      ok = starts(c.args, "3)") || starts(c.args, "4)");
    }
    if (!ok) bad += c.name + "(" + c.args.substr(0, 120) + "\n";
  }
  return bad;
}

std::set<std::string> Names(const std::vector<Syscall>& calls) {
  std::set<std::string> names;
  for (auto& c : calls) names.insert(c.name);
  return names;
}

TEST_F(ClientTest, SyscallAuditOfASuccessfulRun) {
  std::string log = dir_path_ + "/strace.log";
  Spawn s;
  s.strace_log = log;
  Result r = Run({"--cols", "100", "--", "sh", "-c", "echo hi"}, s);
  ASSERT_EQ(r.code(), kOk) << r.err;
  Received got = ReadAll(app_.get());
  ExpectOneStartFrame(got);
  std::vector<Syscall> calls = ParseStrace(log);
  ASSERT_GT(calls.size(), 10u);
  EXPECT_EQ(Audit(calls), "");
  std::set<std::string> names = Names(calls);
  for (const char* forbidden : {"open", "openat", "openat2", "connect", "socket", "socketpair", "bind",
                                "accept", "accept4", "listen", "clone", "clone3", "fork", "vfork",
                                "execveat", "readlinkat", "chdir", "fchdir"})
    EXPECT_EQ(names.count(forbidden), 0u) << forbidden;
  // Exactly one exec (strace's start of the helper) and ONE sendmsg.
  int execs = 0, sendmsgs = 0;
  for (auto& c : calls) {
    execs += c.name == "execve";
    sendmsgs += c.name == "sendmsg";
  }
  EXPECT_EQ(execs, 1);
  EXPECT_EQ(sendmsgs, 1);
  // Order: the descriptors are inspected before anything else the helper does
  // (everything before is libc start-up), and marked close-on-exec before the scan.
  size_t first_own = 0;
  while (first_own < calls.size() && calls[first_own].name != "newfstatat") ++first_own;
  ASSERT_LT(first_own, calls.size());
  EXPECT_EQ(calls[first_own].args.rfind("3, \"\",", 0), 0u);
  for (size_t i = 0; i < first_own; ++i)
    EXPECT_TRUE(calls[i].name != "poll" && calls[i].name != "fcntl" && calls[i].name != "sendmsg" &&
                calls[i].name != "writev") << calls[i].name;
  std::vector<std::string> own;
  for (size_t i = first_own; i < calls.size(); ++i)
    if (own.empty() || own.back() != calls[i].name) own.push_back(calls[i].name);
  std::vector<std::string> expected = {"newfstatat", "getsockopt", "getpeername", "newfstatat", "fcntl",
                                       "prlimit64", "poll", "sendmsg", "close", "exit_group"};
  EXPECT_EQ(own, expected);
}

TEST_F(ClientTest, SyscallAuditOfFailures) {
  std::string log = dir_path_ + "/strace.log";
  // A leaked descriptor, a usage error and a missing fd 3: still nothing but
  // the allowed calls, and no send at all.
  std::vector<Spawn> spawns(3);
  spawns[0].extra = {7};
  spawns[0].args = {"--", "sh"};
  spawns[1].args = {"--cols", "0", "--", "sh"};
  spawns[2].args = {"--", "sh"};
  std::vector<int> expected = {kExtraFd, kBadSize, kSocketMissing};
  for (size_t i = 0; i < spawns.size(); ++i) {
    Spawn& s = spawns[i];
    s.strace_log = log;
    s.fd3 = i == 2 ? -1 : helper_end_.get();
    s.fd4 = dir_.get();
    Result r = RunHelper(s);
    EXPECT_EQ(r.code(), expected[i]) << r.err;
    std::vector<Syscall> calls = ParseStrace(log);
    ASSERT_GT(calls.size(), 5u);
    EXPECT_EQ(Audit(calls), "") << "case " << i;
    EXPECT_EQ(Names(calls).count("sendmsg"), 0u);
    EXPECT_EQ(Names(calls).count("sendto"), 0u);
  }
  ExpectNothingSent();
}

// The helper is a static executable: no PT_INTERP, no PT_DYNAMIC.
TEST(ClientBinary, IsStaticallyLinked) {
  std::ifstream in(CLIENT_PATH, std::ios::binary);
  Elf64_Ehdr eh;
  ASSERT_TRUE(in.read(reinterpret_cast<char*>(&eh), sizeof eh));
  ASSERT_EQ(memcmp(eh.e_ident, ELFMAG, SELFMAG), 0);
  EXPECT_EQ(eh.e_type, ET_EXEC);
  ASSERT_GT(eh.e_phnum, 0);
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    in.seekg(std::streamoff(eh.e_phoff + uint64_t(i) * eh.e_phentsize));
    ASSERT_TRUE(in.read(reinterpret_cast<char*>(&ph), sizeof ph));
    EXPECT_NE(ph.p_type, uint32_t(PT_INTERP));
    EXPECT_NE(ph.p_type, uint32_t(PT_DYNAMIC));
  }
}

}  // namespace
