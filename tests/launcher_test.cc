// Tests of opencode-pty-launcher, run the way systemd runs it in a PTY unit:
// fd 0 = fd 1 = one end of a real AF_UNIX stream socketpair, fd 2 = an opened
// directory, COLUMNS/LINES/HOME/USER/LOGNAME/SHELL in the environment (plus
// hostile extras), and -- when the tests run as root -- as uid/gid 65534. The
// "command" is either a real program (touch, sh, stty) or tests/probe, which
// reports what it received. Nothing is mocked: the real /usr/bin/script and
// /bin/sh run in between.
#include <elf.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/base64url.h"
#include "common/channel_message.h"
#include "common/launch.h"
#include "common/limits.h"
#include "common/scm_rights.h"
#include "common/size_message.h"
#include "common/unique_fd.h"

namespace {

using opencode::UniqueFd;
namespace limits = opencode::limits;
namespace fs = std::filesystem;

constexpr uid_t kNobody = 65534;

std::string Enc(std::string_view raw) {
  std::string s;
  opencode::EncodeArg(raw, &s);
  return s;
}

std::string Unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(char(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

struct Outcome {
  int status = -1;      // raw wait status
  std::string output;   // everything that came out of the PTY stream
  bool timed_out = false;
  UniqueFd channel;     // the supervisor's end of the resize channel
  int code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

// The probe's report, parsed.
struct Report {
  bool present = false;
  std::vector<std::string> args, env;
  std::string cwd, winsize, sigblk, sigign, uid, foreground;
  std::map<int, std::string> fds;    // fd -> readlink target
  std::map<int, std::string> ttys;   // fd -> ttyname or "-"
};

// What precedes everything else on the PTY stream (the supervisor's resize
// channel handoff, daemon/session/unit_channel.cc), and the broken variants.
enum class Handoff { kGood, kNone, kWrongByte, kNoFd, kTwoFds, kStreamSocket, kTwoBytes };

// How to start the launcher; the defaults are what systemd does in a PTY unit.
struct LaunchOptions {
  Handoff handoff = Handoff::kGood;
  // Called with the output so far after each read of the stream, and the
  // supervisor's end of the resize channel (live resize tests).
  std::function<void(const std::string& output, int channel)> on_output{};
  // The same, with our end of the PTY stream to type on.
  std::function<void(const std::string& output, int channel, int stream)> on_stream{};
  std::vector<std::string> env{};      // empty: LauncherTest::SystemdEnv()
  int fd2 = -1;                        // fd 2: -1 the work directory, -2 closed, else this fd
  std::vector<int> strays{};           // leaked copies of the stream/directory at these fds
  bool all_stdio_socket = false;       // fd 2 = the stream too (--exec mode tests)
  bool close_stdout = false;           // fd 1 closed
  bool careless_signals = false;       // start with blocked and ignored signals
  std::vector<std::string> wrapper{};  // e.g. strace and its options
  // Written on the stream first: the supervisor's go (the launcher execs
  // nothing before it), then whatever a test types.
  std::string input = std::string(1, opencode::kLaunchGoByte);
  bool close_input = false;            // then shut down our sending side (EOF)
  // pidfd_open(2) fails with ENOMEM in the launcher and everything it runs
  // (a seccomp filter set just before its exec): the monitor's failure path.
  bool deny_pidfd_open = false;
  // The command's process is killed (SIGSYS) at its first call after the
  // fork, setpgid(0, 0), before its execve: nothing else in the chain makes
  // that call (script uses setsid, sh's job control names its pid).
  bool kill_child_before_exec = false;
  // setsid() before the exec: the launcher leads its own session, as in a
  // unit (systemd starts every service in a session of its own).
  bool own_session = false;
  // The hang guard of the whole run (the launcher is killed after it).
  int deadline_s = 60;
  // What the supervisor writes into the unit channel before the unit starts:
  // the one 'V' packet (empty overlay by default); nothing if empty.
  std::string env_packet = std::string("V\0\0\0\0", 5);
};

// Kills (SECCOMP_RET_KILL_PROCESS) any process that calls setpgid(0, 0).
bool KillAtSetpgidZero() {
  struct sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setpgid, 0, 5),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof code / sizeof code[0], code};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0;
}

// Makes pidfd_open(2) fail with ENOMEM from now on, in this process and every
// process it execs. Async-signal-safe: it runs in a forked child.
bool DenyPidfdOpen() {
  struct sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pidfd_open, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOMEM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof code / sizeof code[0], code};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0;
}

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/opencode-launcher-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    if (geteuid() == 0) {
      ASSERT_EQ(chown(dir_.c_str(), kNobody, kNobody), 0);
    }
    ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
    dir_fd_ = UniqueFd(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(dir_fd_.valid());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // The environment systemd gives a User=nobody unit, plus values a hostile or
  // careless caller could have left: none of them may reach script or the command.
  std::vector<std::string> SystemdEnv() const {
    return {"COLUMNS=120", "LINES=40", "HOME=/nonexistent", "USER=nobody", "LOGNAME=nobody",
            "SHELL=/usr/sbin/nologin", "PATH=" + dir_ + ":/usr/bin", "LD_PRELOAD=/nonexistent/x.so",
            "TERM=dumb", "LANG=de_DE.UTF-8", "INVOCATION_ID=0123456789abcdef0123456789abcdef",
            "OPENCODE_PTY_ARGV=" + Enc("/usr/bin/touch") + " " + Enc(dir_ + "/caller-argv"),
            "ENV=" + dir_ + "/evil-env", "BASH_ENV=" + dir_ + "/evil-env"};
  }

  // Runs the launcher like systemd: fd 0 = fd 1 = one end of a socketpair,
  // fd 2 = the directory, then reads the other end to EOF.
  Outcome Run(const std::vector<std::string>& args, const LaunchOptions& opt = {}) {
    std::vector<std::string> env = opt.env;
    int fd2 = opt.fd2;
    const std::vector<int>& strays = opt.strays;
    bool all_stdio_socket = opt.all_stdio_socket, careless_signals = opt.careless_signals;
    const std::vector<std::string>& wrapper = opt.wrapper;
    if (env.empty()) env = SystemdEnv();
    std::vector<std::string> argv_s = wrapper;  // e.g. strace and its options
    argv_s.push_back(LAUNCHER_PATH);
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv, envp;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);

    int sv[2];
    Outcome out;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      ADD_FAILURE() << "socketpair: " << strerror(errno);
      return out;
    }
    UniqueFd mine(sv[0]), theirs(sv[1]);
    if (!SendHandoff(mine.get(), opt.handoff, &out.channel, opt.env_packet)) return out;
    int dir = fd2 == -1 ? dir_fd_.get() : fd2;
    bool drop = geteuid() == 0;
    pid_t pid = fork();
    if (pid == 0) {
      // Child: only async-signal-safe calls from here to execve.
      if (dup2(theirs.get(), 0) < 0 || dup2(theirs.get(), 1) < 0) _exit(250);
      if (opt.close_stdout) close(1);
      if (all_stdio_socket) {
        if (dup2(theirs.get(), 2) < 0) _exit(250);
      } else if (dir == -2) {
        close(2);
      } else if (dup2(dir, 2) < 0) {
        _exit(250);
      }
      for (size_t i = 0; i < strays.size(); ++i)  // alternate stream and directory duplicates
        if (dup2(i % 2 == 0 || dir == -2 ? 0 : 2, strays[i]) < 0) _exit(251);
      if (careless_signals) {  // a parent that blocked and ignored signals
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGUSR1);
        if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) _exit(254);
        if (signal(SIGINT, SIG_IGN) == SIG_ERR || signal(SIGQUIT, SIG_IGN) == SIG_ERR ||
            signal(SIGHUP, SIG_IGN) == SIG_ERR || signal(SIGPIPE, SIG_IGN) == SIG_ERR)
          _exit(254);
      }
      if (drop && (setgroups(0, nullptr) != 0 || setresgid(kNobody, kNobody, kNobody) != 0 ||
                   setresuid(kNobody, kNobody, kNobody) != 0))
        _exit(252);
      if (opt.deny_pidfd_open && !DenyPidfdOpen()) _exit(249);
      if (opt.kill_child_before_exec && !KillAtSetpgidZero()) _exit(249);
      if (opt.own_session && setsid() < 0) _exit(248);
      execve(argv[0], argv.data(), envp.data());
      _exit(253);
    }
    theirs.reset();
    if (pid < 0) {
      ADD_FAILURE() << "fork: " << strerror(errno);
      return out;
    }
    // A launcher that refused its arguments may be gone already (EPIPE).
    if (!opt.input.empty() && send(mine.get(), opt.input.data(), opt.input.size(), MSG_NOSIGNAL) < 0 &&
        errno != EPIPE && errno != ECONNRESET)
      ADD_FAILURE() << "send: " << strerror(errno);
    if (opt.close_input) shutdown(mine.get(), SHUT_WR);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(opt.deadline_s);
    char buf[65536];
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) { out.timed_out = true; break; }
      struct pollfd p = {mine.get(), POLLIN, 0};
      if (poll(&p, 1, int(left)) <= 0) continue;
      ssize_t n = read(mine.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      out.output.append(buf, size_t(n));
      if (opt.on_output) opt.on_output(out.output, out.channel.get());
      if (opt.on_stream) opt.on_stream(out.output, out.channel.get(), mine.get());
    }
    if (out.timed_out) kill(pid, SIGKILL);
    while (waitpid(pid, &out.status, 0) < 0 && errno == EINTR) {}
    EXPECT_FALSE(out.timed_out) << "launcher did not finish; output so far: " << out.output;
    return out;
  }

  // Sends `kind` of handoff on the stream; *channel = the supervisor's end.
  static bool SendHandoff(int stream, Handoff kind, UniqueFd* channel, const std::string& env_packet) {
    int cp[2];
    if (socketpair(AF_UNIX, (kind == Handoff::kStreamSocket ? SOCK_STREAM : SOCK_SEQPACKET) | SOCK_CLOEXEC,
                   0, cp) != 0) {
      ADD_FAILURE() << "socketpair: " << strerror(errno);
      return false;
    }
    channel->reset(cp[0]);
    UniqueFd unit_end(cp[1]);
    if (!env_packet.empty() &&
        send(cp[0], env_packet.data(), env_packet.size(), MSG_NOSIGNAL) != ssize_t(env_packet.size())) {
      ADD_FAILURE() << "env packet send: " << strerror(errno);
      return false;
    }
    ssize_t n = 0;
    switch (kind) {
      case Handoff::kNone:
        return true;
      case Handoff::kNoFd:
        n = send(stream, &opencode::kChannelHandoffByte, 1, MSG_NOSIGNAL);
        break;
      case Handoff::kWrongByte:
        n = opencode::SendWithFd(stream, "X", 1, unit_end.get());
        break;
      case Handoff::kTwoBytes: {  // handoff + fd, the go and a line of input at once: only the handoff and the go are the launcher's
        n = opencode::SendWithFd(stream, &opencode::kChannelHandoffByte, 1, unit_end.get());
        const std::string go_and_input = std::string(1, opencode::kLaunchGoByte) + "typed\n";
        if (n == 1 && send(stream, go_and_input.data(), go_and_input.size(), MSG_NOSIGNAL) != ssize_t(go_and_input.size()))
          n = -1;
        break;
      }
      case Handoff::kTwoFds: {
        int fds[2] = {unit_end.get(), unit_end.get()};
        char byte = opencode::kChannelHandoffByte;
        struct iovec iov = {&byte, 1};
        alignas(struct cmsghdr) char ctl[CMSG_SPACE(sizeof fds)] = {};
        struct msghdr mh = {};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = ctl;
        mh.msg_controllen = sizeof ctl;
        struct cmsghdr* c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof fds);
        memcpy(CMSG_DATA(c), fds, sizeof fds);
        n = sendmsg(stream, &mh, MSG_NOSIGNAL);
        break;
      }
      case Handoff::kGood:
      case Handoff::kStreamSocket:
        n = opencode::SendWithFd(stream, &opencode::kChannelHandoffByte, 1, unit_end.get());
        break;
    }
    if (n != 1) {
      ADD_FAILURE() << "handoff send: " << strerror(errno);
      return false;
    }
    return true;
  }

  // Encoded argv for `raw`, ready for Run().
  static std::vector<std::string> Encode(const std::vector<std::string>& raw) {
    std::vector<std::string> out;
    for (auto& r : raw) out.push_back(Enc(r));
    return out;
  }

  std::vector<std::string> TouchMarker() const { return Encode({"/usr/bin/touch", dir_ + "/marker"}); }
  bool Exists(const std::string& name) const { return fs::exists(dir_ + "/" + name); }

  Report ReadReport() const {
    Report r;
    std::ifstream in(dir_ + "/probe-report");
    if (!in) return r;
    std::string line;
    bool ended = false;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string key;
      ls >> key;
      std::string rest;
      std::getline(ls, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      if (key == "arg") r.args.push_back(Unhex(rest));
      else if (key == "env") r.env.push_back(Unhex(rest));
      else if (key == "cwd") r.cwd = Unhex(rest);
      else if (key == "fd") {
        std::istringstream fs(rest);
        int fd;
        std::string target;
        fs >> fd >> target;
        r.fds[fd] = Unhex(target);
      } else if (key == "tty") {
        std::istringstream ts(rest);
        int fd;
        std::string name;
        ts >> fd >> name;
        r.ttys[fd] = name;
      } else if (key == "winsize") r.winsize = rest;
      else if (key == "sigblk") r.sigblk = rest;
      else if (key == "sigign") r.sigign = rest;
      else if (key == "uid") r.uid = rest;
      else if (key == "pgrp-is-foreground") r.foreground = rest;
      else if (key == "end") ended = true;
    }
    r.present = ended;
    return r;
  }

  std::string dir_;
  UniqueFd dir_fd_;
};

// ---------------------------------------------------------------------------
// Positive control: the same harness runs a command, so "nothing ran" below
// is a real observation and not an artefact of the harness.

TEST_F(LauncherTest, ValidArgumentsRunTheCommand) {
  Outcome o = Run(TouchMarker());
  EXPECT_EQ(o.code(), 0) << o.output;
  EXPECT_TRUE(Exists("marker"));
}

// ---------------------------------------------------------------------------
// Non-canonical and hostile arguments: rejected before anything runs.

struct Hostile {
  const char* name;
  std::string token;
  int status;
  const char* reason;
};

std::vector<Hostile> HostileTokens() {
  return {
      {"Empty", "", opencode::kLaunchBadPrefix, "bad_prefix"},
      {"OtherPrefix", "bZm9v", opencode::kLaunchBadPrefix, "bad_prefix"},
      {"UpperPrefix", "AZm9v", opencode::kLaunchBadPrefix, "bad_prefix"},
      {"ExecFlag", "--exec", opencode::kLaunchBadPrefix, "bad_prefix"},
      {"LeadingDash", "-aZm9v", opencode::kLaunchBadPrefix, "bad_prefix"},
      {"LeadingSpace", " aZm9v", opencode::kLaunchBadPrefix, "bad_prefix"},
      {"RawPath", "/usr/bin/touch", opencode::kLaunchBadPrefix, "bad_prefix"},
      {"PaddingAfterQuad", "aZm9v=", opencode::kLaunchBadAlphabet, "bad_alphabet"},
      {"PaddingOne", "aZm8=", opencode::kLaunchBadAlphabet, "bad_alphabet"},
      {"PaddingTwo", "aZg==", opencode::kLaunchBadAlphabet, "bad_alphabet"},
      {"StandardPlus", "aZm9v+", opencode::kLaunchBadAlphabet, "bad_alphabet"},
      {"StandardSlash", "aZm9v/", opencode::kLaunchBadAlphabet, "bad_alphabet"},
      {"InnerSpace", "aZm 9v", opencode::kLaunchBadAlphabet, "bad_alphabet"},
      {"Newline", "aZm9v\n", opencode::kLaunchBadAlphabet, "bad_alphabet"},
      {"Tab", "aZm9v\t", opencode::kLaunchBadAlphabet, "bad_alphabet"},
      {"CommandSubstitution", "a$(touch pwned)", opencode::kLaunchBadAlphabet, "bad_alphabet"},
      {"Backticks", "a`touch pwned`", opencode::kLaunchBadAlphabet, "bad_alphabet"},
      {"Semicolon", "a;touch pwned", opencode::kLaunchBadAlphabet, "bad_alphabet"},
      {"Glob", "a*", opencode::kLaunchBadAlphabet, "bad_alphabet"},
      {"NonUtf8", "a\xff\xfe", opencode::kLaunchBadAlphabet, "bad_alphabet"},
      {"Utf8", "aZm9v\xc3\xa9", opencode::kLaunchBadAlphabet, "bad_alphabet"},
      {"Dot", "aZm9v.", opencode::kLaunchBadAlphabet, "bad_alphabet"},
      {"Tilde", "a~", opencode::kLaunchBadAlphabet, "bad_alphabet"},
      {"LengthOneMod4", "aZ", opencode::kLaunchBadLength, "bad_length"},
      {"LengthFive", "aZm9vY", opencode::kLaunchBadLength, "bad_length"},
      {"LengthNine", "aZm9vYmFyZ", opencode::kLaunchBadLength, "bad_length"},
      {"TrailingBitsOneByte", "aZh", opencode::kLaunchNonCanonical, "non_canonical"},
      {"TrailingBitsAfterQuad", "aZm9vYh", opencode::kLaunchNonCanonical, "non_canonical"},
      {"TrailingBitsTwoBytes", "aZm9vYmG", opencode::kLaunchNonCanonical, "non_canonical"},
      {"TrailingBitsZeroBytes", "aAB", opencode::kLaunchNonCanonical, "non_canonical"},
      {"TrailingBitsAAB", "aAAB", opencode::kLaunchNonCanonical, "non_canonical"},
      {"EncodedNul", "aAA", opencode::kLaunchNulByte, "NUL"},
      {"EncodedInnerNul", "aAGI", opencode::kLaunchNulByte, "NUL"},
  };
}

class LauncherRejects : public LauncherTest, public ::testing::WithParamInterface<Hostile> {};

TEST_P(LauncherRejects, BeforeAnythingRuns) {
  const Hostile& h = GetParam();
  // The hostile token comes last: a launcher that ran anything before decoding
  // every argument would have created the marker (and the injected commands).
  std::vector<std::string> args = TouchMarker();
  args.push_back(h.token);
  Outcome o = Run(args);
  EXPECT_EQ(o.code(), h.status) << o.output;
  EXPECT_NE(o.output.find(h.reason), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("opencode-pty-launcher: "), std::string::npos);
  EXPECT_EQ(std::count(o.output.begin(), o.output.end(), '\n'), 1) << "one line: " << o.output;
  EXPECT_FALSE(Exists("marker"));
  EXPECT_FALSE(Exists("pwned"));
  // And first: the same token as argv[0] is refused the same way.
  Outcome first = Run({h.token, Enc(dir_ + "/marker")});
  EXPECT_EQ(first.code(), h.status) << first.output;
  EXPECT_FALSE(Exists("marker"));
}

INSTANTIATE_TEST_SUITE_P(Tokens, LauncherRejects, ::testing::ValuesIn(HostileTokens()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST_F(LauncherTest, RejectsEmptyCommand) {
  Outcome o = Run({Enc(""), Enc(dir_ + "/marker")});
  EXPECT_EQ(o.code(), opencode::kLaunchEmptyCommand) << o.output;
  EXPECT_NE(o.output.find("empty command"), std::string::npos);
  EXPECT_FALSE(Exists("marker"));
}

TEST_F(LauncherTest, RejectsNoArguments) {
  Outcome o = Run({});
  EXPECT_EQ(o.code(), opencode::kLaunchArgc) << o.output;
}

TEST_F(LauncherTest, RejectsMoreThanMaxArgs) {
  std::vector<std::string> args = TouchMarker();
  while (args.size() < limits::kMaxArgs + 1) args.push_back(Enc("x"));
  Outcome o = Run(args);
  EXPECT_EQ(o.code(), opencode::kLaunchArgc) << o.output;
  EXPECT_FALSE(Exists("marker"));
}

TEST_F(LauncherTest, RejectsArgumentAboveMaxArgBytes) {
  std::vector<std::string> args = TouchMarker();
  args.push_back(Enc(std::string(limits::kMaxArgBytes + 1, 'x')));
  Outcome o = Run(args);
  EXPECT_EQ(o.code(), opencode::kLaunchArgTooLong) << o.output;
  EXPECT_FALSE(Exists("marker"));
}

TEST_F(LauncherTest, RejectsArgvAboveMaxTotalBytes) {
  std::vector<std::string> args = TouchMarker();
  size_t used = std::string("/usr/bin/touch").size() + (dir_ + "/marker").size();
  size_t left = limits::kMaxArgvTotalBytes - used;
  while (left >= limits::kMaxArgBytes) {
    args.push_back(Enc(std::string(limits::kMaxArgBytes, 'y')));
    left -= limits::kMaxArgBytes;
  }
  args.push_back(Enc(std::string(left + 1, 'z')));  // one byte over
  Outcome o = Run(args);
  EXPECT_EQ(o.code(), opencode::kLaunchArgvTooLong) << o.output;
  EXPECT_FALSE(Exists("marker"));
}

TEST_F(LauncherTest, RejectsEncodedArgvAboveBound) {
  // Long garbage is refused by its length before any decoding.
  std::vector<std::string> args = TouchMarker();
  for (int i = 0; i < 3; ++i) args.push_back("a" + std::string(40000, 'A'));
  Outcome o = Run(args);
  EXPECT_EQ(o.code(), opencode::kLaunchEncodedTooLong) << o.output;
  EXPECT_FALSE(Exists("marker"));
}

TEST_F(LauncherTest, RejectsStderrThatIsNotADirectory) {
  UniqueFd file(open((dir_ + "/plain").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(file.valid());
  Outcome o = Run(TouchMarker(), {.fd2 = file.get()});
  EXPECT_EQ(o.code(), opencode::kLaunchNotDirectory) << o.output;
  EXPECT_NE(o.output.find("fd 2 is not a directory"), std::string::npos) << o.output;
  EXPECT_FALSE(Exists("marker"));
  Outcome closed = Run(TouchMarker(), {.fd2 = -2});
  EXPECT_EQ(closed.code(), opencode::kLaunchNotDirectory) << closed.output;
  EXPECT_FALSE(Exists("marker"));
}

TEST_F(LauncherTest, RejectsADirectoryItCannotEnter) {
  // Opened by the test (as root, or as its owner), but not searchable by the
  // user the launcher runs as: fchdir fails and nothing runs.
  std::string locked = dir_ + "/locked";
  ASSERT_EQ(mkdir(locked.c_str(), 0755), 0);
  UniqueFd fd(open(locked.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  if (geteuid() == 0) {
    ASSERT_EQ(chown(locked.c_str(), 0, 0), 0);  // root-owned 0700: closed to 65534
    ASSERT_EQ(chmod(locked.c_str(), 0700), 0);
  } else {
    ASSERT_EQ(chmod(locked.c_str(), 0600), 0);  // no search bit for its own owner
  }
  Outcome o = Run(TouchMarker(), {.fd2 = fd.get()});
  EXPECT_EQ(o.code(), opencode::kLaunchChdir) << o.output;
  EXPECT_NE(o.output.find("cannot enter the directory on fd 2"), std::string::npos) << o.output;
  EXPECT_FALSE(Exists("marker"));
}

TEST_F(LauncherTest, RejectsAClosedStdout) {
  Outcome o = Run(TouchMarker(), {.close_stdout = true});
  EXPECT_EQ(o.code(), opencode::kLaunchDupStderr) << o.output;
  EXPECT_FALSE(Exists("marker"));
}

// Malformed values from the unit's environment are refused, not repaired.
TEST_F(LauncherTest, RejectsMalformedEnvironment) {
  struct Case { std::string var, value; int status; };
  std::vector<Case> cases = {
      {"COLUMNS", "0", opencode::kLaunchWindowSize},     {"COLUMNS", "1001", opencode::kLaunchWindowSize},
      {"COLUMNS", "080", opencode::kLaunchWindowSize},   {"COLUMNS", "+80", opencode::kLaunchWindowSize},
      {"COLUMNS", "", opencode::kLaunchWindowSize},      {"COLUMNS", "80x", opencode::kLaunchWindowSize},
      {"COLUMNS", "99999", opencode::kLaunchWindowSize}, {"LINES", "0", opencode::kLaunchWindowSize},
      {"LINES", "-1", opencode::kLaunchWindowSize},      {"LINES", "1001", opencode::kLaunchWindowSize},
      {"HOME", "relative/home", opencode::kLaunchHome},  {"HOME", "", opencode::kLaunchHome},
      {"HOME", "/home/x\ny", opencode::kLaunchHome},     {"HOME", "/" + std::string(5000, 'h'), opencode::kLaunchHome},
      {"USER", "a/b", opencode::kLaunchUserName},        {"USER", "", opencode::kLaunchUserName},
      {"USER", "-rf", opencode::kLaunchUserName},        {"USER", "name with space", opencode::kLaunchUserName},
      {"LOGNAME", "x;y", opencode::kLaunchUserName},     {"LOGNAME", std::string(300, 'n'), opencode::kLaunchUserName},
  };
  for (const Case& c : cases) {
    std::vector<std::string> env = SystemdEnv();
    for (auto& e : env)
      if (e.rfind(c.var + "=", 0) == 0) e = c.var + "=" + c.value;
    Outcome o = Run(TouchMarker(), {.env = env});
    EXPECT_EQ(o.code(), c.status) << c.var << "=" << c.value << ": " << o.output;
    EXPECT_FALSE(Exists("marker")) << c.var << "=" << c.value;
  }
}

// ---------------------------------------------------------------------------
// --exec mode refuses the same way (it is reachable by the session's user).

TEST_F(LauncherTest, ExecModeRejectsBeforeRunning) {
  std::string marker = dir_ + "/marker";
  std::string good = Enc("/usr/bin/touch") + " " + Enc(marker);
  struct Case { std::vector<std::string> env; int status; };
  std::vector<Case> cases = {
      {{"COLUMNS=80", "LINES=24"}, opencode::kLaunchNoArgv},
      {{"COLUMNS=80", "LINES=24", "OPENCODE_PTY_ARGV=" + Enc("/usr/bin/touch") + "  " + Enc(marker)}, opencode::kLaunchBadPrefix},
      {{"COLUMNS=80", "LINES=24", "OPENCODE_PTY_ARGV= " + good}, opencode::kLaunchBadPrefix},
      {{"COLUMNS=80", "LINES=24", "OPENCODE_PTY_ARGV=" + good + " "}, opencode::kLaunchBadPrefix},
      {{"COLUMNS=80", "LINES=24", "OPENCODE_PTY_ARGV=" + good + " aZm9v="}, opencode::kLaunchBadAlphabet},
      {{"COLUMNS=80", "LINES=24", "OPENCODE_PTY_ARGV=" + good + " aZh"}, opencode::kLaunchNonCanonical},
      {{"COLUMNS=80", "LINES=24", "OPENCODE_PTY_ARGV="}, opencode::kLaunchBadPrefix},
      {{"LINES=24", "OPENCODE_PTY_ARGV=" + good}, opencode::kLaunchWindowSize},   // required in --exec mode
      {{"COLUMNS=80", "OPENCODE_PTY_ARGV=" + good}, opencode::kLaunchWindowSize},
      {{"COLUMNS=80", "LINES=24", "OPENCODE_PTY_ARGV=" + good}, opencode::kLaunchNotTty},  // stdio is a socket here
  };
  for (const Case& c : cases) {
    std::vector<std::string> env = c.env;
    Outcome o = Run({"--exec"}, {.env = env, .all_stdio_socket = true});
    EXPECT_EQ(o.code(), c.status) << (env.empty() ? "" : env.back()) << ": " << o.output;
    EXPECT_FALSE(Exists("marker"));
  }
  // "--exec" with anything after it is outer mode, where it is not canonical.
  Outcome o = Run({"--exec", Enc("/usr/bin/touch")});
  EXPECT_EQ(o.code(), opencode::kLaunchBadPrefix) << o.output;
}

// ---------------------------------------------------------------------------
// What the command receives.

TEST_F(LauncherTest, ArgvRoundTripsByteExactForHostileVectors) {
  std::string big(4096, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = char(1 + i % 255);  // every byte but NUL
  std::vector<std::string> argv = {
      PROBE_PATH, "with space", "  leading and trailing  ", "'single'", "\"double\"",
      "$(touch pwned)", "`touch pwned`", "; touch pwned", "&& touch pwned", "| cat", "> out",
      "*", "?", "[a-z]", "~", "line1\nline2", "", "", "-", "--", "-rf", "--exec", "\\",
      "$HOME", "${IFS}", "%s%n", "\xff\xfe\x80", "\xc3\x28", "\xc3\xa9", "\x1b[31m", "\t", "\r\n",
      "a", "aZm9v", big, ""};
  Outcome o = Run(Encode(argv));
  EXPECT_EQ(o.code(), 0) << o.output;
  Report r = ReadReport();
  ASSERT_TRUE(r.present) << o.output;
  EXPECT_EQ(r.args, argv);
  EXPECT_FALSE(Exists("pwned"));
  EXPECT_FALSE(Exists("out"));
}

TEST_F(LauncherTest, ArgvRoundTripsOneThousandArguments) {
  std::vector<std::string> argv = {PROBE_PATH};
  for (int i = 0; i < 1000; ++i) argv.push_back(i % 7 == 0 ? std::string() : "arg " + std::to_string(i));
  Outcome o = Run(Encode(argv));
  EXPECT_EQ(o.code(), 0) << o.output;
  Report r = ReadReport();
  ASSERT_TRUE(r.present) << o.output;
  EXPECT_EQ(r.args, argv);
}

TEST_F(LauncherTest, ArgvAtEveryBoundIsAccepted) {
  // kMaxArgs elements.
  std::vector<std::string> argv = {PROBE_PATH};
  while (argv.size() < limits::kMaxArgs) argv.push_back("x");
  Outcome o = Run(Encode(argv));
  EXPECT_EQ(o.code(), 0) << o.output;
  EXPECT_EQ(ReadReport().args, argv);
  fs::remove(dir_ + "/probe-report");
  // One element of kMaxArgBytes, and kMaxArgvTotalBytes in total.
  argv = {PROBE_PATH, std::string(limits::kMaxArgBytes, 'm')};
  size_t used = argv[0].size() + argv[1].size();
  argv.push_back(std::string(limits::kMaxArgvTotalBytes - used, 'n'));
  o = Run(Encode(argv));
  EXPECT_EQ(o.code(), 0) << o.output;
  EXPECT_EQ(ReadReport().args, argv);
}

// The largest encoded argv an accepted start frame can produce: kMaxArgs
// arguments of 1 (mod 3) bytes each, kMaxArgvTotalBytes in total (the probe's
// path is padded with leading slashes to 1 mod 3). It joins to exactly
// kMaxEncodedArgvBytes (common/limits.h).
std::vector<std::string> LargestEncodedArgv() {
  std::vector<std::string> argv = {PROBE_PATH};
  while (argv[0].size() % 3 != 1) argv[0] = "/" + argv[0];
  size_t rest = limits::kMaxArgvTotalBytes - argv[0].size();
  size_t parts = limits::kMaxArgs - 1;
  size_t triples = (rest - parts) / 3;  // every part is 1 + 3k bytes
  for (size_t i = 0; i < parts; ++i)
    argv.push_back(std::string(1 + 3 * (triples / parts + (i < triples % parts ? 1 : 0)), char('a' + i % 26)));
  return argv;
}

size_t JoinedSize(const std::vector<std::string>& tokens) {
  size_t n = tokens.size() - 1;
  for (const auto& t : tokens) n += t.size();
  return n;
}

TEST_F(LauncherTest, EncodedArgvAtTheExactMaximumIsAccepted) {
  std::vector<std::string> argv = LargestEncodedArgv();
  size_t total = 0;
  for (const auto& a : argv) total += a.size();
  ASSERT_EQ(argv.size(), limits::kMaxArgs);
  ASSERT_EQ(total, limits::kMaxArgvTotalBytes);
  std::vector<std::string> tokens = Encode(argv);
  ASSERT_EQ(JoinedSize(tokens), limits::kMaxEncodedArgvBytes);
  Outcome o = Run(tokens);
  EXPECT_EQ(o.code(), 0) << o.output.substr(0, 300);
  EXPECT_EQ(ReadReport().args, argv);
}

TEST_F(LauncherTest, EncodedArgvOnePastTheMaximumIsRefused) {
  std::vector<std::string> tokens = Encode(LargestEncodedArgv());
  tokens.back() += "A";  // one byte more than any accepted argv encodes to
  ASSERT_EQ(JoinedSize(tokens), limits::kMaxEncodedArgvBytes + 1);
  Outcome o = Run(tokens);
  EXPECT_EQ(o.code(), opencode::kLaunchEncodedTooLong) << o.output.substr(0, 300);
  EXPECT_NE(o.output.find("encoded arguments too long"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ + "/probe-report"));
}

TEST_F(LauncherTest, EchoWith1023ArgumentsOf64BytesRuns) {
  // Issue #21 point 5: inside kMaxArgs and kMaxArgvTotalBytes, refused with
  // 104 while kMaxEncodedArgvBytes was 89,432.
  std::vector<std::string> argv = {"/bin/echo"};
  for (int i = 0; i < 1023; ++i) argv.push_back(std::string(64, char('a' + i % 26)));
  Outcome o = Run(Encode(argv));
  EXPECT_EQ(o.code(), 0) << o.output.substr(0, 300);
  EXPECT_NE(o.output.find(std::string(64, 'z')), std::string::npos);
}

// ---- the gate (issue #21 point 4): nothing runs before the supervisor's go

TEST_F(LauncherTest, NothingRunsWhenTheStreamEndsBeforeTheGo) {
  Outcome o = Run(TouchMarker(), {.input = "", .close_input = true});
  EXPECT_EQ(o.code(), opencode::kLaunchHandoff) << o.output;
  EXPECT_NE(o.output.find("no go from the supervisor"), std::string::npos) << o.output;
  EXPECT_FALSE(Exists("marker"));
}

TEST_F(LauncherTest, NothingRunsWhenTheFirstByteIsNotTheGo) {
  Outcome o = Run(TouchMarker(), {.input = "touch\n", .close_input = true});
  EXPECT_EQ(o.code(), opencode::kLaunchHandoff) << o.output;
  EXPECT_FALSE(Exists("marker"));
}

TEST_F(LauncherTest, TheGoByteIsConsumedAndInputAfterItReachesTheCommand) {
  // One read of one byte: what follows the go in the same segment is the
  // command's input, and the go itself never is.
  Outcome o = Run(Encode({"/bin/sh", "-c", "read x; echo \"got:$x.\""}),
                  {.input = std::string(1, opencode::kLaunchGoByte) + "abc\n"});
  EXPECT_EQ(o.code(), 0) << o.output;
  EXPECT_NE(o.output.find("got:abc."), std::string::npos) << o.output;
}

TEST_F(LauncherTest, CommandRunsOnATerminalInTheDirectoryWithTheFixedEnvironment) {
  std::ofstream(dir_ + "/evil-env") << "touch " << dir_ << "/env-ran\n";
  // Leaked duplicates of the stream and the directory must not reach the command.
  Outcome o = Run(Encode({PROBE_PATH}), {.strays = {3, 4, 9, 42}});
  EXPECT_EQ(o.code(), 0) << o.output;
  EXPECT_NE(o.output.find("probe-done"), std::string::npos) << o.output;
  Report r = ReadReport();
  ASSERT_TRUE(r.present) << o.output;

  // cwd is the passed directory (and the relative report landed there).
  EXPECT_EQ(fs::canonical(r.cwd), fs::canonical(dir_));

  // A terminal on 0, 1 and 2: the same /dev/pts/N.
  ASSERT_EQ(r.ttys.size(), 3u);
  EXPECT_EQ(r.ttys[0].rfind("/dev/pts/", 0), 0u) << r.ttys[0];
  EXPECT_EQ(r.ttys[1], r.ttys[0]);
  EXPECT_EQ(r.ttys[2], r.ttys[0]);

  // Exactly fds 0, 1, 2, all the terminal: neither fd 3 (the launcher) nor the
  // strays nor anything script or sh opened.
  std::set<int> fds;
  for (auto& [fd, target] : r.fds) {
    fds.insert(fd);
    EXPECT_EQ(target, r.ttys[0]) << "fd " << fd;
  }
  EXPECT_EQ(fds, (std::set<int>{0, 1, 2}));

  // The environment is exactly the allowlist: the temporary argv value, the
  // caller's PATH/LD_PRELOAD/ENV/TERM/LANG and systemd's extras are gone.
  std::vector<std::string> env = r.env;
  std::sort(env.begin(), env.end());
  // No COLUMNS/LINES: the size is the terminal's (it changes with resize).
  std::vector<std::string> expected = {"HOME=/nonexistent", "LANG=C.UTF-8",
                                       "LOGNAME=nobody", "PATH=/usr/local/bin:/usr/bin:/bin",
                                       "SHELL=/bin/sh", "TERM=xterm-256color", "USER=nobody"};
  EXPECT_EQ(env, expected);
  EXPECT_FALSE(Exists("env-ran"));       // ENV/BASH_ENV never reached a shell
  EXPECT_FALSE(Exists("caller-argv"));   // the caller's OPENCODE_PTY_ARGV was not used

  // Window size set on the terminal itself; default signal state; foreground.
  EXPECT_EQ(r.winsize, "40 120");
  EXPECT_EQ(r.sigblk, "0000000000000000");
  EXPECT_EQ(r.sigign, "0000000000000000");
  EXPECT_EQ(r.foreground, "1");
  if (geteuid() == 0) {
    EXPECT_EQ(r.uid, std::to_string(kNobody));
  }
}

// Ignored dispositions and the blocked mask survive execve (and script passes
// its own start-up mask to its child): the command must still start clean.
TEST_F(LauncherTest, CommandStartsWithDefaultSignalState) {
  Outcome o = Run(Encode({PROBE_PATH}), {.careless_signals = true});
  EXPECT_EQ(o.code(), 0) << o.output;
  Report r = ReadReport();
  ASSERT_TRUE(r.present) << o.output;
  EXPECT_EQ(r.sigblk, "0000000000000000");
  EXPECT_EQ(r.sigign, "0000000000000000");
  Outcome t = Run(Encode({"/bin/sh", "-c", "kill -TERM $$; sleep 5"}), {.careless_signals = true});
  EXPECT_EQ(t.code(), 128 + SIGTERM) << t.output;
}

TEST_F(LauncherTest, AbsentIdentityStaysAbsentAndSizeDefaults) {
  Outcome o = Run(Encode({PROBE_PATH}), {.env = {"PATH=/bin"}});
  EXPECT_EQ(o.code(), 0) << o.output;
  Report r = ReadReport();
  ASSERT_TRUE(r.present) << o.output;
  std::vector<std::string> env = r.env;
  std::sort(env.begin(), env.end());
  EXPECT_EQ(env, (std::vector<std::string>{"LANG=C.UTF-8",
                                           "PATH=/usr/local/bin:/usr/bin:/bin", "SHELL=/bin/sh",
                                           "TERM=xterm-256color"}));
  EXPECT_EQ(r.winsize, "24 80");
}

TEST_F(LauncherTest, SttySizeShowsTheRequestedSize) {
  std::vector<std::string> env = SystemdEnv();
  for (auto& e : env) {
    if (e.rfind("COLUMNS=", 0) == 0) e = "COLUMNS=132";
    if (e.rfind("LINES=", 0) == 0) e = "LINES=43";
  }
  Outcome o = Run(Encode({"stty", "size"}), {.env = env});
  EXPECT_EQ(o.code(), 0) << o.output;
  EXPECT_NE(o.output.find("43 132\r\n"), std::string::npos) << o.output;
  Outcome d = Run(Encode({"stty", "size"}), {.env = {"HOME=/nonexistent"}});
  EXPECT_EQ(d.code(), 0) << d.output;
  EXPECT_NE(d.output.find("24 80\r\n"), std::string::npos) << d.output;
  // The size is the terminal's only: COLUMNS/LINES do not reach the command
  // (they would override the terminal in tput and ncurses after a resize).
  Outcome m = Run(Encode({"/bin/sh", "-c", "stty size; echo \"${COLUMNS-unset} x ${LINES-unset}\"; tput cols"}),
                  {.env = {"COLUMNS=1000", "LINES=1"}});
  EXPECT_EQ(m.code(), 0) << m.output;
  EXPECT_NE(m.output.find("1 1000\r\nunset x unset\r\n1000\r\n"), std::string::npos) << m.output;
}

// ---------------------------------------------------------------------------
// Exit statuses come back through script -e unchanged.

TEST_F(LauncherTest, ExitStatusesComeBackFaithfully) {
  for (int code : {0, 1, 3, 255}) {
    Outcome o = Run(Encode({"/bin/sh", "-c", "exit " + std::to_string(code)}));
    ASSERT_TRUE(WIFEXITED(o.status)) << o.status;
    EXPECT_EQ(o.code(), code) << o.output;
  }
  Outcome f = Run(Encode({"false"}));  // found through the fixed PATH
  EXPECT_EQ(f.code(), 1) << f.output;
}

TEST_F(LauncherTest, NotFoundIs127) {
  Outcome o = Run(Encode({"opencode-no-such-command"}));
  EXPECT_EQ(o.code(), opencode::kCommandNotFound) << o.output;
  EXPECT_NE(o.output.find("opencode-pty-launcher: opencode-no-such-command: command not found\r\n"),
            std::string::npos) << o.output;
  Outcome p = Run(Encode({"./missing"}));
  EXPECT_EQ(p.code(), opencode::kCommandNotFound) << p.output;
  EXPECT_NE(p.output.find("./missing: No such file or directory"), std::string::npos) << p.output;
  // The caller's PATH (which names the work dir) is not used for the lookup.
  std::ofstream(dir_ + "/opencode-in-caller-path") << "#!/bin/sh\ntouch " << dir_ << "/marker\n";
  fs::permissions(dir_ + "/opencode-in-caller-path", fs::perms(0755));
  Outcome q = Run(Encode({"opencode-in-caller-path"}));
  EXPECT_EQ(q.code(), opencode::kCommandNotFound) << q.output;
  EXPECT_FALSE(Exists("marker"));
  // A hostile name is shown escaped, never raw on the terminal.
  Outcome e = Run(Encode({"no\x1b]2;x\x07such"}));
  EXPECT_EQ(e.code(), opencode::kCommandNotFound) << e.output;
  EXPECT_NE(e.output.find("no\\x1b]2;x\\x07such: command not found"), std::string::npos) << e.output;
}

TEST_F(LauncherTest, NotExecutableIs126) {
  std::ofstream(dir_ + "/not-executable") << "#!/bin/sh\nexit 0\n";
  fs::permissions(dir_ + "/not-executable", fs::perms(0644));
  Outcome o = Run(Encode({"./not-executable"}));
  EXPECT_EQ(o.code(), opencode::kCommandCannotExecute) << o.output;
  EXPECT_NE(o.output.find("./not-executable: Permission denied"), std::string::npos) << o.output;
  Outcome d = Run(Encode({"/tmp"}));  // a directory
  EXPECT_EQ(d.code(), opencode::kCommandCannotExecute) << d.output;
  // No #! line: execve says ENOEXEC and the launcher does NOT fall back to a shell.
  std::ofstream(dir_ + "/no-shebang") << "touch " << dir_ << "/marker\n";
  fs::permissions(dir_ + "/no-shebang", fs::perms(0755));
  Outcome n = Run(Encode({"./no-shebang"}));
  EXPECT_EQ(n.code(), opencode::kCommandCannotExecute) << n.output;
  EXPECT_NE(n.output.find("Exec format error"), std::string::npos) << n.output;
  EXPECT_FALSE(Exists("marker"));
}

TEST_F(LauncherTest, DeathBySignalIs128PlusN) {
  for (int sig : {SIGHUP, SIGINT, SIGKILL, SIGTERM}) {
    Outcome o = Run(Encode({"/bin/sh", "-c", "kill -" + std::to_string(sig) + " $$; sleep 5"}));
    ASSERT_TRUE(WIFEXITED(o.status)) << "script itself died: " << o.status;
    EXPECT_EQ(o.code(), 128 + sig) << "signal " << sig << ": " << o.output;
  }
}

// ---------------------------------------------------------------------------
// The exec chain, observed with strace -f -xx (every string in hex): exactly
// script with its fixed argv and the fixed environment plus the one temporary
// value, then sh, then the launcher from fd 3, then the command with argv and
// environment exactly as documented.

struct Exec {
  std::string path;
  std::vector<std::string> argv, env;
};

std::vector<std::string> HexStrings(const std::string& list) {
  std::vector<std::string> out;
  static const std::regex kString(R"re("((?:\\x[0-9a-f]{2})*)")re");
  for (std::sregex_iterator it(list.begin(), list.end(), kString), end; it != end; ++it) {
    std::string hex = (*it)[1], raw;
    for (size_t i = 0; i + 3 < hex.size() + 1; i += 4) raw.push_back(char(std::stoi(hex.substr(i + 2, 2), nullptr, 16)));
    out.push_back(raw);
  }
  return out;
}

std::vector<Exec> ExecsFromStrace(const std::string& path) {
  std::vector<Exec> execs;
  std::ifstream in(path);
  std::string line;
  static const std::regex kExecve(R"re(^\d+\s+execve\(("[^"]*"), \[([^\]]*)\], \[([^\]]*)\]\) = 0$)re");
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, kExecve)) continue;
    Exec e;
    e.path = HexStrings(m[1].str()).at(0);
    e.argv = HexStrings(m[2].str());
    e.env = HexStrings(m[3].str());
    std::sort(e.env.begin(), e.env.end());
    execs.push_back(e);
  }
  return execs;
}

TEST_F(LauncherTest, ExecChainIsExactlyScriptShLauncherCommand) {
  std::string log = dir_ + "/strace.log";
  std::vector<std::string> argv = {PROBE_PATH, "two words", "$(x)", ""};
  std::vector<std::string> encoded = Encode(argv);
  Outcome o = Run(encoded, {.wrapper = {"/usr/bin/strace", "-f", "-qq", "-xx", "-v", "-s", "1000000", "-e", "trace=execve", "-o", log}});
  EXPECT_EQ(o.code(), 0) << o.output;
  std::vector<Exec> execs = ExecsFromStrace(log);
  ASSERT_EQ(execs.size(), 6u) << "launcher, script, launcher -c (script's $SHELL), sh -i, launcher --exec, command";
  EXPECT_EQ(execs[0].path, LAUNCHER_PATH);

  std::string joined;
  for (auto& e : encoded) joined += (joined.empty() ? "" : " ") + e;
  EXPECT_EQ(execs[1].path, "/usr/bin/script");
  EXPECT_EQ(execs[1].argv, (std::vector<std::string>{"script", "-q", "-e", "-f", "-c",
                                                     "/bin/sh -i -c 'exec /proc/self/fd/3 --exec'", "/dev/null"}));
  // SHELL is the launcher on fd 3: script runs "$SHELL -c" with it, never the
  // user's login shell and never a `sh -c` that would stay in the chain. No
  // LANG: the chain runs in the C locale (script loads no locale files).
  EXPECT_EQ(execs[1].env, (std::vector<std::string>{"COLUMNS=120", "HOME=/nonexistent", "LINES=40",
                                                    "LOGNAME=nobody", "OPENCODE_PTY_ARGV=" + joined,
                                                    "PATH=/usr/local/bin:/usr/bin:/bin", "SHELL=/proc/self/fd/3",
                                                    "TERM=xterm-256color", "USER=nobody"}));
  EXPECT_EQ(execs[2].path, "/proc/self/fd/3");
  EXPECT_EQ(execs[2].argv, (std::vector<std::string>{"3", "-c", "/bin/sh -i -c 'exec /proc/self/fd/3 --exec'"}));
  EXPECT_EQ(execs[3].path, "/bin/sh");
  EXPECT_EQ(execs[3].argv, (std::vector<std::string>{"/bin/sh", "-i", "-c", "exec /proc/self/fd/3 --exec"}));
  EXPECT_EQ(execs[3].env, execs[1].env);  // the shell step passes script's environment on unchanged
  EXPECT_EQ(execs[4].path, "/proc/self/fd/3");
  EXPECT_EQ(execs[4].argv, (std::vector<std::string>{"/proc/self/fd/3", "--exec"}));
  EXPECT_EQ(execs[5].path, PROBE_PATH);
  EXPECT_EQ(execs[5].argv, argv);
  EXPECT_EQ(execs[5].env, (std::vector<std::string>{"HOME=/nonexistent", "LANG=C.UTF-8",
                                                    "LOGNAME=nobody", "PATH=/usr/local/bin:/usr/bin:/bin",
                                                    "SHELL=/bin/sh", "TERM=xterm-256color", "USER=nobody"}));
}

// Both helpers are static executables: no PT_INTERP, no PT_DYNAMIC.
bool IsStaticElf(const char* path) {
  std::ifstream in(path, std::ios::binary);
  Elf64_Ehdr eh;
  if (!in.read(reinterpret_cast<char*>(&eh), sizeof eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return false;
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    in.seekg(std::streamoff(eh.e_phoff + uint64_t(i) * eh.e_phentsize));
    if (!in.read(reinterpret_cast<char*>(&ph), sizeof ph)) return false;
    if (ph.p_type == PT_INTERP || ph.p_type == PT_DYNAMIC) return false;
  }
  return eh.e_type == ET_EXEC;
}

TEST(LauncherBinary, IsStaticallyLinked) { EXPECT_TRUE(IsStaticElf(LAUNCHER_PATH)); }
TEST(LauncherBinary, ProbeIsNotStaticSoTheCheckCanFail) { EXPECT_FALSE(IsStaticElf(PROBE_PATH)); }

}  // namespace

namespace {

// ---------------------------------------------------------------------------
// The unit channel handoff and live resize (docs/SECURITY.md "The unit channel
// and the monitor").

struct BadHandoff {
  const char* name;
  Handoff kind;
};

class LauncherRejectsHandoff : public LauncherTest, public ::testing::WithParamInterface<BadHandoff> {};

TEST_P(LauncherRejectsHandoff, BeforeAnythingRuns) {
  Outcome o = Run(TouchMarker(), {.handoff = GetParam().kind});
  EXPECT_EQ(o.code(), opencode::kLaunchHandoff) << o.output;
  EXPECT_NE(o.output.find("opencode-pty-launcher: "), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("unit channel"), std::string::npos) << o.output;
  EXPECT_FALSE(Exists("marker"));
}

INSTANTIATE_TEST_SUITE_P(Kinds, LauncherRejectsHandoff,
                         ::testing::Values(BadHandoff{"Missing", Handoff::kNone},
                                           BadHandoff{"WrongByte", Handoff::kWrongByte},
                                           BadHandoff{"ByteWithoutDescriptor", Handoff::kNoFd},
                                           BadHandoff{"TwoDescriptors", Handoff::kTwoFds},
                                           BadHandoff{"StreamSocketNotSeqpacket", Handoff::kStreamSocket}),
                         [](const auto& info) { return std::string(info.param.name); });

// --exec without the channel on fd 4 (the session's user ran it by hand on
// a terminal, with everything else right) refuses before running anything.
TEST_F(LauncherTest, ExecModeWithoutTheChannelRefuses) {
  std::string inner = "COLUMNS=80 LINES=24 OPENCODE_PTY_ARGV='" + Enc("/usr/bin/touch") + " " +
                      Enc(dir_ + "/marker") + "' exec " + LAUNCHER_PATH + " --exec";
  Outcome o = Run(Encode({"/bin/sh", "-c", inner}));
  EXPECT_EQ(o.code(), opencode::kLaunchHandoff) << o.output;
  EXPECT_NE(o.output.find("fd 4 is not the unit channel"), std::string::npos) << o.output;
  EXPECT_FALSE(Exists("marker"));
}

// The size messages reach the PTY in order and the command sees SIGWINCH
// each time (stty size in its WINCH trap).
TEST_F(LauncherTest, LiveResizeReachesTheCommandInOrder) {
  const char* script =
      "n=0; trap 'stty size; n=$((n+1)); if [ $n -ge 3 ]; then exit 0; fi' WINCH; "
      "stty size; while :; do sleep 0.05; done";
  struct Step { const char* seen; uint16_t cols, rows; };
  std::vector<Step> steps = {{"40 120", 100, 30}, {"30 100", 132, 50}, {"50 132", 80, 24}};
  size_t next = 0;
  auto step = [&](const std::string& out, int channel) {
    if (next < steps.size() && out.find(steps[next].seen) != std::string::npos) {
      uint8_t m[opencode::kChannelSizeBytes];
      opencode::EncodeWindowSize(steps[next].cols, steps[next].rows, m);
      EXPECT_EQ(send(channel, m, sizeof m, MSG_NOSIGNAL), 5);
      ++next;
    }
  };
  Outcome o = Run(Encode({"/bin/sh", "-c", script}), {.on_output = step});
  EXPECT_EQ(o.code(), 0) << o.output;
  size_t a = o.output.find("40 120"), b = o.output.find("30 100"), c = o.output.find("50 132"),
         d = o.output.find("24 80");
  EXPECT_TRUE(a != std::string::npos && b != std::string::npos && c != std::string::npos &&
              d != std::string::npos && a < b && b < c && c < d)
      << o.output;
}

// The command exits: the monitor, the only other holder of the channel's unit
// end, exits too (its pidfd became readable), so our end sees the hang-up.
// The command itself never had fd 4 (the probe test checks fds 0..2 only).
TEST_F(LauncherTest, MonitorEndsWithTheCommandAndHoldsNoStream) {
  Outcome o = Run(Encode({"/bin/sh", "-c", "sleep 0.2; exit 3"}));
  EXPECT_EQ(o.code(), 3) << o.output;  // and the stream reached EOF (Run returned)
  ASSERT_TRUE(o.channel.valid());
  struct pollfd p = {o.channel.get(), POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 10000), 1) << "the monitor still holds the channel";
  EXPECT_NE(p.revents & POLLHUP, 0);
}

// Input right behind the handoff and the go is the command's, not the launcher's.
TEST_F(LauncherTest, InputBehindTheHandoffReachesTheCommand) {
  static_assert(opencode::kLaunchGoByte == 'G');
  Outcome o = Run(Encode({"/bin/sh", "-c", "read l; echo \"got:$l\""}), {.handoff = Handoff::kTwoBytes, .input = ""});
  EXPECT_EQ(o.code(), 0) << o.output;
  EXPECT_NE(o.output.find("got:typed"), std::string::npos) << o.output;
}

// A malformed message ends the monitor's serving of the channel (it reads
// nothing more), not the session: a valid size right behind it is not applied
// (the command, 2 s later, still sees the start size) and the command exits
// normally, its end reported.
TEST_F(LauncherTest, MalformedSizeMessageEndsOnlyTheServing) {
  bool sent = false;
  auto step = [&](const std::string& out, int channel) {
    if (!sent && out.find("ready") != std::string::npos) {
      EXPECT_EQ(send(channel, "W\x00\x50\x00", 4, MSG_NOSIGNAL), 4);
      uint8_t m[opencode::kChannelSizeBytes];
      opencode::EncodeWindowSize(100, 30, m);
      EXPECT_EQ(send(channel, m, sizeof m, MSG_NOSIGNAL), 5);
      sent = true;
    }
  };
  Outcome o = Run(Encode({"/bin/sh", "-c", "echo ready; sleep 2; stty size"}), {.on_output = step});
  EXPECT_EQ(o.code(), 0) << o.output;
  EXPECT_TRUE(sent);
  EXPECT_NE(o.output.find("40 120"), std::string::npos) << o.output;
  EXPECT_EQ(o.output.find("30 100"), std::string::npos) << o.output;
}

// Control for the test above: the same valid size alone is applied.
TEST_F(LauncherTest, ValidSizeMessageIsApplied) {
  bool sent = false;
  auto step = [&](const std::string& out, int channel) {
    if (!sent && out.find("ready") != std::string::npos) {
      uint8_t m[opencode::kChannelSizeBytes];
      opencode::EncodeWindowSize(100, 30, m);
      EXPECT_EQ(send(channel, m, sizeof m, MSG_NOSIGNAL), 5);
      sent = true;
    }
  };
  Outcome o = Run(Encode({"/bin/sh", "-c", "echo ready; sleep 2; stty size"}), {.on_output = step});
  EXPECT_EQ(o.code(), 0) << o.output;
  EXPECT_NE(o.output.find("30 100"), std::string::npos) << o.output;
}

}  // namespace

namespace {

// ---------------------------------------------------------------------------
// The monitor (docs/SECURITY.md "The unit channel and the monitor"): the command
// is --exec's child; signals from the channel reach the command's process
// only; its exec and its exact end come back on the channel.

// Every packet the unit sent on the channel, in order (the launcher is gone:
// they are all in the socket).
std::vector<opencode::ChannelMessage> FromUnit(int channel, std::string* bad = nullptr) {
  std::vector<opencode::ChannelMessage> out;
  for (;;) {
    uint8_t b[opencode::kChannelMaxBytes + 1];
    ssize_t n = recv(channel, b, sizeof b, MSG_DONTWAIT);
    // The unit's end closed with the 'V' packet unread (a failure before
    // --exec): the kernel reports ECONNRESET once, then the queued packets.
    if (n < 0 && errno == ECONNRESET) continue;
    if (n <= 0) break;
    opencode::ChannelMessage m;
    if (opencode::ParseFromUnit(b, size_t(n), &m) != opencode::ErrorCode::kOk) {
      if (bad != nullptr) *bad += "malformed packet of " + std::to_string(n) + " bytes; ";
      continue;
    }
    out.push_back(m);
  }
  return out;
}

std::string Describe(const std::vector<opencode::ChannelMessage>& ms) {
  std::string s;
  for (const auto& m : ms) {
    s += char(m.kind);
    if (m.kind == opencode::ChannelKind::kExecuted) s += "(pid " + std::to_string(m.pid) + ")";
    if (m.kind == opencode::ChannelKind::kExited)
      s += "(" + std::string(1, char(m.how)) + " " + std::to_string(m.how == opencode::ExitHow::kExited ? m.status : m.signo) + ")";
    if (m.kind == opencode::ChannelKind::kLaunchFailed) s += "(" + std::to_string(m.status) + ")";
    if (m.kind == opencode::ChannelKind::kSignalDelivered) s += "(" + std::to_string(m.signo) + ")";
    s += " ";
  }
  return s;
}

void SendSignal(int channel, int signo) {
  uint8_t m[opencode::kChannelSignalBytes];
  opencode::EncodeSignal(uint8_t(signo), m);
  EXPECT_EQ(send(channel, m, sizeof m, MSG_NOSIGNAL), ssize_t(sizeof m));
}

// Exit statuses: E(pid) then X(exited, n), exactly two packets.
TEST_F(LauncherTest, TheMonitorReportsTheExecAndTheExactExit) {
  for (int code : {0, 3, 130, 255}) {
    Outcome o = Run(Encode({"/bin/sh", "-c", "exit " + std::to_string(code)}));
    EXPECT_EQ(o.code(), code) << o.output;
    auto ms = FromUnit(o.channel.get());
    ASSERT_EQ(ms.size(), 2u) << Describe(ms);
    EXPECT_EQ(ms[0].kind, opencode::ChannelKind::kExecuted);
    EXPECT_GT(ms[0].pid, 1);
    EXPECT_EQ(ms[1].kind, opencode::ChannelKind::kExited);
    EXPECT_EQ(ms[1].how, opencode::ExitHow::kExited);
    EXPECT_EQ(ms[1].status, code);
  }
}

// A command killed by a signal it raised itself: the signal, exactly (the
// unit's status is 128+n, which a command could also exit with).
TEST_F(LauncherTest, DeathBySignalIsReportedAsTheSignal) {
  for (int sig : {SIGHUP, SIGINT, SIGKILL, SIGTERM, SIGSEGV}) {
    Outcome o = Run(Encode({"/bin/sh", "-c", "kill -" + std::to_string(sig) + " $$; sleep 5"}));
    EXPECT_EQ(o.code(), 128 + sig) << o.output;
    auto ms = FromUnit(o.channel.get());
    ASSERT_EQ(ms.size(), 2u) << Describe(ms);
    EXPECT_EQ(ms[1].kind, opencode::ChannelKind::kExited);
    EXPECT_NE(ms[1].how, opencode::ExitHow::kExited) << Describe(ms);
    EXPECT_EQ(ms[1].signo, sig) << Describe(ms);
  }
}

// The reported pid is the command's: what `$$` prints.
TEST_F(LauncherTest, TheReportedPidIsTheCommands) {
  Outcome o = Run(Encode({"/bin/sh", "-c", "echo pid=$$"}));
  EXPECT_EQ(o.code(), 0) << o.output;
  auto ms = FromUnit(o.channel.get());
  ASSERT_FALSE(ms.empty());
  ASSERT_EQ(ms[0].kind, opencode::ChannelKind::kExecuted);
  EXPECT_NE(o.output.find("pid=" + std::to_string(ms[0].pid) + "\r\n"), std::string::npos) << o.output;
}

// 'K' signals the command's process only: a trapped USR1 runs the trap and
// the command goes on; TERM then ends it, reported as TERM. Before the
// monitor, a signal went to script too, which ended the session.
TEST_F(LauncherTest, ASignalFromTheChannelReachesTheCommandOnly) {
  int step = 0;
  auto on = [&](const std::string& out, int channel) {
    if (step == 0 && out.find("ready") != std::string::npos) { SendSignal(channel, SIGUSR1); step = 1; }
    if (step == 1 && out.find("got-usr1") != std::string::npos) { SendSignal(channel, SIGTERM); step = 2; }
  };
  Outcome o = Run(Encode({"/bin/sh", "-c", "trap 'echo got-usr1' USR1; echo ready; while :; do sleep 0.05; done"}),
                  {.on_output = on});
  EXPECT_EQ(step, 2) << o.output;
  EXPECT_EQ(o.output.find("Session terminated"), std::string::npos) << o.output;
  // E, the monitor's answer to each K (its kill() ran), then X.
  auto ms = FromUnit(o.channel.get());
  ASSERT_EQ(ms.size(), 4u) << Describe(ms);
  EXPECT_EQ(ms[1].kind, opencode::ChannelKind::kSignalDelivered) << Describe(ms);
  EXPECT_EQ(ms[1].signo, SIGUSR1) << Describe(ms);
  EXPECT_EQ(ms[2].kind, opencode::ChannelKind::kSignalDelivered) << Describe(ms);
  EXPECT_EQ(ms[2].signo, SIGTERM) << Describe(ms);
  EXPECT_EQ(ms[3].how, opencode::ExitHow::kKilled) << Describe(ms);
  EXPECT_EQ(ms[3].signo, SIGTERM) << Describe(ms);
}

// An interactive shell ignores SIGINT, as under node-pty: the session goes on
// and the shell's own exit status is reported. Before the monitor the signal
// also reached script, which ended the session (exit 0).
TEST_F(LauncherTest, SigintToAnInteractiveShellDoesNotEndTheSession) {
  int step = 0;
  auto on = [&](const std::string& out, int channel, int stream) {
    if (step == 0 && out.find("$ ") != std::string::npos) {
      SendSignal(channel, SIGINT);
      usleep(300 * 1000);  // the signal is delivered before the line below is typed
      EXPECT_EQ(send(stream, "echo alive; exit 4\n", 19, MSG_NOSIGNAL), 19);
      step = 1;
    }
  };
  Outcome o = Run(Encode({"/bin/sh", "-i"}), {.on_stream = on});
  EXPECT_EQ(step, 1) << o.output;
  EXPECT_EQ(o.code(), 4) << o.output;
  EXPECT_NE(o.output.find("alive"), std::string::npos) << o.output;
  auto ms = FromUnit(o.channel.get());
  ASSERT_EQ(ms.size(), 3u) << Describe(ms);
  EXPECT_EQ(ms[1].kind, opencode::ChannelKind::kSignalDelivered) << Describe(ms);
  EXPECT_EQ(ms[2].how, opencode::ExitHow::kExited);
  EXPECT_EQ(ms[2].status, 4);
}

// ^C typed on the terminal reaches the command's process group only: the
// command catches it and exits 3, and 3 is what is reported. With a `sh -c`
// between script and the command, that sh was in the foreground group and
// died of it: the unit said 130.
TEST_F(LauncherTest, KeyboardInterruptReachesTheCommandOnly) {
  bool typed = false;
  auto on = [&](const std::string& out, int, int stream) {
    if (!typed && out.find("ready") != std::string::npos) {
      EXPECT_EQ(send(stream, "\x03", 1, MSG_NOSIGNAL), 1);
      typed = true;
    }
  };
  Outcome o = Run(Encode({"/bin/sh", "-c", "trap 'echo caught; exit 3' INT; echo ready; while :; do sleep 0.05; done"}),
                  {.on_stream = on});
  EXPECT_TRUE(typed) << o.output;
  EXPECT_NE(o.output.find("caught"), std::string::npos) << o.output;
  EXPECT_EQ(o.code(), 3) << o.output;
  auto ms = FromUnit(o.channel.get());
  ASSERT_EQ(ms.size(), 2u) << Describe(ms);
  EXPECT_EQ(ms[1].how, opencode::ExitHow::kExited);
  EXPECT_EQ(ms[1].status, 3);
}

// ^Z stops the command only; CONT from the channel resumes it.
TEST_F(LauncherTest, KeyboardStopStopsTheCommandOnlyAndContResumesIt) {
  int step = 0;
  auto on = [&](const std::string& out, int channel, int stream) {
    if (step == 0 && out.find("tick") != std::string::npos) {
      EXPECT_EQ(send(stream, "\x1a", 1, MSG_NOSIGNAL), 1);
      usleep(500 * 1000);
      SendSignal(channel, SIGCONT);
      EXPECT_EQ(send(stream, "done\n", 5, MSG_NOSIGNAL), 5);
      step = 1;
    }
  };
  Outcome o = Run(Encode({"/bin/sh", "-c", "echo tick; read l; echo got:$l; exit 6"}), {.on_stream = on});
  EXPECT_EQ(step, 1) << o.output;
  EXPECT_EQ(o.code(), 6) << o.output;
  EXPECT_NE(o.output.find("got:done"), std::string::npos) << o.output;
}

// A launcher failure is told on the channel ('F' + status) and nothing ran:
// no 'E', no 'X'.
TEST_F(LauncherTest, ALauncherFailureIsReportedOnTheChannel) {
  Outcome o = Run({"a!!"});
  EXPECT_EQ(o.code(), opencode::kLaunchBadAlphabet) << o.output;
  auto ms = FromUnit(o.channel.get());
  ASSERT_EQ(ms.size(), 1u) << Describe(ms);
  EXPECT_EQ(ms[0].kind, opencode::ChannelKind::kLaunchFailed);
  EXPECT_EQ(ms[0].status, opencode::kLaunchBadAlphabet);
  EXPECT_EQ(opencode::LaunchFailureName(ms[0].status), "bad_alphabet");
}

// Without a pidfd of the command the monitor could neither serve the channel
// nor watch the command: it fails closed with launch.h's status 125
// (monitor) before the supervisor hears of an exec, and the command does not
// outlive it.
TEST_F(LauncherTest, AMonitorWithoutAPidfdFailsClosedWithItsStatus) {
  LaunchOptions opt;
  opt.deny_pidfd_open = true;
  Outcome o = Run(Encode({"/bin/sh", "-c", "sleep 1; touch " + dir_ + "/marker"}), opt);
  EXPECT_EQ(o.code(), int(opencode::kLaunchMonitor)) << o.output;
  auto ms = FromUnit(o.channel.get());
  ASSERT_EQ(ms.size(), 1u) << Describe(ms);
  EXPECT_EQ(ms[0].kind, opencode::ChannelKind::kLaunchFailed) << Describe(ms);
  EXPECT_EQ(opencode::LaunchFailureName(ms[0].status), "monitor") << Describe(ms);
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  EXPECT_FALSE(Exists("marker")) << "the command outlived the monitor";
}

// The command's process dies between the fork and its execve: the command
// never ran, so the monitor says no `E` (no command_started), only how that
// process ended.
TEST_F(LauncherTest, AChildThatDiesBeforeItsExecIsNeverReportedAsExecuted) {
  LaunchOptions opt;
  opt.kill_child_before_exec = true;
  Outcome o = Run(Encode({"/bin/sh", "-c", "touch " + dir_ + "/marker"}), opt);
  auto ms = FromUnit(o.channel.get());
  for (const auto& m : ms) EXPECT_NE(m.kind, opencode::ChannelKind::kExecuted) << Describe(ms);
  ASSERT_FALSE(ms.empty()) << o.output;
  EXPECT_EQ(ms.back().kind, opencode::ChannelKind::kExited) << Describe(ms);
  EXPECT_EQ(ms.back().signo, SIGSYS) << Describe(ms);
  EXPECT_FALSE(Exists("marker"));
}

// A command that cannot be found is the command's exit (127, as a shell
// says), not a launcher failure: no 'E' (it never ran), then 'X' 127.
TEST_F(LauncherTest, CommandNotFoundIsAnExactExitNotALaunchFailure) {
  Outcome o = Run(Encode({"opencode-no-such-command"}));
  EXPECT_EQ(o.code(), opencode::kCommandNotFound) << o.output;
  auto ms = FromUnit(o.channel.get());
  ASSERT_EQ(ms.size(), 1u) << Describe(ms);
  EXPECT_EQ(ms[0].kind, opencode::ChannelKind::kExited);
  EXPECT_EQ(ms[0].how, opencode::ExitHow::kExited);
  EXPECT_EQ(ms[0].status, opencode::kCommandNotFound);
}

// The shell step runs only the fixed line: anything else is refused
// (status 99) before a shell runs.
TEST_F(LauncherTest, TheShellStepRefusesAnyOtherCommandLine) {
  std::string inner = "exec " + std::string(LAUNCHER_PATH) + " -c 'touch " + dir_ + "/marker'";
  Outcome o = Run(Encode({"/bin/sh", "-c", inner}));
  EXPECT_EQ(o.code(), opencode::kLaunchShellStep) << o.output;
  EXPECT_NE(o.output.find("the shell step got another command line"), std::string::npos) << o.output;
  EXPECT_FALSE(Exists("marker"));
}

// script dies (the master side closes): the command's group gets SIGHUP, as
// when a terminal's session leader exits, and the monitor reports its end.
// The monitor ignores SIGHUP itself (the unit's stop sends one), so without
// this the command would run on with nobody to hang it up.
TEST_F(LauncherTest, WhenTheTerminalHangsUpTheCommandGetsSighup) {
  std::string marker = dir_ + "/hup";
  Outcome o = Run(Encode({"/bin/sh", "-c",
                          "trap 'touch " + marker + "; exit 0' HUP; echo ready; "
                          "kill -KILL $(cut -d' ' -f4 /proc/$PPID/stat); while :; do sleep 0.05; done"}));
  EXPECT_EQ(WTERMSIG(o.status), SIGKILL) << o.output;  // script was killed
  for (int i = 0; i < 100 && !Exists("hup"); ++i) usleep(50 * 1000);
  EXPECT_TRUE(Exists("hup")) << o.output;
  struct pollfd p = {o.channel.get(), POLLIN, 0};
  for (int i = 0; i < 100; ++i) {  // the monitor reports, then exits: the channel hangs up
    ASSERT_EQ(poll(&p, 1, 5000), 1);
    if (p.revents & POLLHUP) break;
    usleep(50 * 1000);
  }
  auto ms = FromUnit(o.channel.get());
  ASSERT_EQ(ms.size(), 2u) << Describe(ms);
  EXPECT_EQ(ms[1].how, opencode::ExitHow::kExited);
  EXPECT_EQ(ms[1].status, 0);
}

// ---------------------------------------------------------------------------
// The application's environment: the one 'V' packet --exec reads from the
// unit channel before it forks (common/env_overlay.h).

std::string EnvPacket(const std::vector<std::string>& entries, uint32_t count) {
  std::string out = "V";
  auto u32 = [&](uint32_t v) {
    char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
    out.append(b, 4);
  };
  u32(count);
  for (const std::string& e : entries) {
    u32(uint32_t(e.size()));
    out += e;
  }
  return out;
}
std::string EnvPacket(const std::vector<std::string>& entries) {
  return EnvPacket(entries, uint32_t(entries.size()));
}

TEST_F(LauncherTest, TheOverlayReachesTheCommandOverTheFixedEnvironment) {
  Outcome o = Run(Encode({PROBE_PATH}),
                  {.env_packet = EnvPacket({"OPENCODE_ENV_MARKER=m-42", "TERM=dumb", "LANG=de_DE.UTF-8",
                                            "INVOCATION_ID=bogus", "MONITOR_UNIT=x.service",
                                            "OPENCODE_PTY_ARGV=aZm9v", "EMPTY=", "WITH_EQ=a=b c\nd"})});
  EXPECT_EQ(o.code(), 0) << o.output;
  Report r = ReadReport();
  ASSERT_TRUE(r.present) << o.output;
  std::vector<std::string> env = r.env;
  std::sort(env.begin(), env.end());
  // The fixed variables an overlay names are replaced, the others stay; the
  // names of the application's unit are dropped here too.
  std::vector<std::string> expected = {"EMPTY=", "HOME=/nonexistent", "LANG=de_DE.UTF-8", "LOGNAME=nobody",
                                       "OPENCODE_ENV_MARKER=m-42", "PATH=/usr/local/bin:/usr/bin:/bin",
                                       "SHELL=/bin/sh", "TERM=dumb", "USER=nobody", "WITH_EQ=a=b c\nd"};
  EXPECT_EQ(env, expected);
}

// The chain before the command (script, the shell step, sh -i, the
// monitor's own exec) never holds the overlay: only the command's envp does.
TEST_F(LauncherTest, OnlyTheCommandHoldsTheOverlay) {
  std::string value = "only-the-command-" + std::to_string(getpid());
  std::string walk =
      "printf 'mine:%s\\n' \"$OPENCODE_ENV_MARKER\"; p=$PPID; while [ \"$p\" -gt 1 ]; do "
      "tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | sed 's/^/anc:/'; "
      "p=$(cut -d' ' -f4 /proc/$p/stat); done; echo walked";
  Outcome o = Run(Encode({"/bin/sh", "-c", walk}), {.env_packet = EnvPacket({"OPENCODE_ENV_MARKER=" + value})});
  EXPECT_EQ(o.code(), 0) << o.output;
  EXPECT_NE(o.output.find("mine:" + value), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("walked"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("anc:OPENCODE_PTY_ARGV="), std::string::npos) << "the walk saw the chain: " << o.output;
  EXPECT_EQ(o.output.find("anc:OPENCODE_ENV_MARKER"), std::string::npos) << o.output;
}

TEST_F(LauncherTest, AMissingOrBadEnvironmentPacketRunsNothing) {
  std::vector<std::string> many;
  for (size_t i = 0; i <= opencode::limits::kMaxEnvVars; ++i) many.push_back("V" + std::to_string(i) + "=");
  struct Case { const char* name; std::string packet; };
  std::vector<Case> cases = {
      {"no packet", ""},
      {"a window size first", std::string("W\0\x50\0\x18", 5)},
      {"kind only", "V"},
      {"truncated", EnvPacket({"A=1"}).substr(0, 8)},
      {"trailing bytes", EnvPacket({"A=1"}) + "x"},
      {"bad name", EnvPacket({"A-B=1"})},
      {"no equals sign", EnvPacket({"AB"})},
      {"NUL in a value", EnvPacket({std::string("A=x\0y", 5)})},
      {"a name twice", EnvPacket({"A=1", "A=2"})},
      {"too many", EnvPacket(many)},
      {"one entry too long", EnvPacket({"A=" + std::string(opencode::limits::kMaxEnvEntryBytes - 1, 'x')})},
      {"all too long", EnvPacket({"A=" + std::string(opencode::limits::kMaxEnvEntryBytes - 2, 'x'),
                                  "B=" + std::string(opencode::limits::kMaxEnvEntryBytes - 2, 'x'),
                                  "C=x"})},
      {"above the packet bound", "V" + std::string(opencode::limits::kMaxEnvPacketBytes, 'x')},
  };
  for (const Case& c : cases) {
    Outcome o = Run(TouchMarker(), {.env_packet = c.packet});
    EXPECT_EQ(o.code(), opencode::kLaunchEnv) << c.name << ": " << o.output;
    EXPECT_FALSE(Exists("marker")) << c.name;
    std::vector<opencode::ChannelMessage> ms = FromUnit(o.channel.get());
    ASSERT_EQ(ms.size(), 1u) << c.name;
    EXPECT_EQ(ms[0].kind, opencode::ChannelKind::kLaunchFailed) << c.name;
    EXPECT_EQ(ms[0].status, opencode::kLaunchEnv) << c.name;
  }
  EXPECT_EQ(opencode::LaunchFailureName(opencode::kLaunchEnv), "env");
}

// The monitor never takes a second 'V' for a size or a signal: it ends its
// serving and still reports the command's exit.
TEST_F(LauncherTest, TheMonitorRefusesASecondEnvironmentPacket) {
  opencode::ChannelMessage m;
  std::string v = EnvPacket({});
  EXPECT_EQ(opencode::ParseToUnit(reinterpret_cast<const uint8_t*>(v.data()), v.size(), &m),
            opencode::ErrorCode::kUnknownType);
  EXPECT_EQ(opencode::ParseFromUnit(reinterpret_cast<const uint8_t*>(v.data()), v.size(), &m),
            opencode::ErrorCode::kUnknownType);
}

}  // namespace

namespace {

std::string AutogroupOf(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/autogroup");
  std::string line;
  std::getline(in, line);
  return line;
}

// The command (a shell) waits until the monitor has set its group (the
// monitor writes after the exec report, so the command may look first, and
// on a machine where many sessions start at once each write waits its turn
// for the kernel's 100 ms slots: 4,000 looks 0.1 s apart, longer than the
// monitor's whole retry schedule, are a hang guard, not a figure), then
// prints its group and script's. script is the monitor's parent: field 4 of
// the monitor's stat.
std::string AutogroupProbe() {
  const std::string nice = " nice " + std::to_string(opencode::limits::kSessionAutogroupNice) + "$";
  return "s=$(cut -d' ' -f4 /proc/$PPID/stat); i=0; while [ $i -lt 4000 ]; do "
         "grep -q '" + nice + "' /proc/self/autogroup && break; sleep 0.1; i=$((i+1)); done; "
         "echo \"command: $(cat /proc/self/autogroup)\"; echo \"script: $(cat /proc/$s/autogroup)\"";
}

// The run's hang guard: above the probe's own 400 s.
constexpr int kProbeDeadlineS = 450;

std::string LineAfter(const std::string& output, const std::string& key) {
  size_t at = output.find(key);
  if (at == std::string::npos) return {};
  size_t end = output.find_first_of("\r\n", at);
  return output.substr(at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size());
}

}  // namespace

// Where the kernel groups tasks by session, once the command runs the
// monitor gives the command's session group the nice kSessionAutogroupNice
// (launcher/main.cc, AutogroupNice): streaming commands then weigh less than
// the supervisor and the application. script's group (the unit's session,
// which the launcher leads here as in a unit) keeps its weight, and so does
// the test's own.
TEST_F(LauncherTest, OnceTheCommandRunsItsAutogroupIsLighter) {
  if (access("/proc/self/autogroup", F_OK) != 0) GTEST_SKIP() << "this kernel has no autogroups";
  const std::string before = AutogroupOf("self");
  Outcome o = Run(Encode({"/bin/sh", "-c", AutogroupProbe()}), {.own_session = true, .deadline_s = kProbeDeadlineS});
  EXPECT_EQ(o.code(), 0) << o.output;
  const std::string nice = " nice " + std::to_string(opencode::limits::kSessionAutogroupNice);
  std::string command = LineAfter(o.output, "command: "), script = LineAfter(o.output, "script: ");
  EXPECT_TRUE(command.ends_with(nice)) << o.output;
  EXPECT_TRUE(script.ends_with(" nice 0")) << o.output;
  EXPECT_NE(command.substr(0, command.find(' ')), script.substr(0, script.find(' '))) << "two groups: " << o.output;
  EXPECT_NE(script.substr(0, script.find(' ')), before.substr(0, before.find(' '))) << o.output;
  EXPECT_EQ(AutogroupOf("self"), before);
}

// The kernel takes one autogroup write per 100 ms on the whole machine from a
// process without CAP_SYS_ADMIN. A blocker with that capability (the test,
// as root) writes its own group every millisecond, so the monitor's first
// write is refused (EAGAIN); the command stops the blocker a second after it
// started and then waits for its group's nice. strace shows the refused
// writes and the one that took: the monitor tried again. A run in which the
// blocker was off the CPU for the 100 ms around the monitor's first write
// proves nothing about the retry and is run again (at most 5 runs).
TEST_F(LauncherTest, AnAutogroupWriteTheKernelRefusedIsTriedAgain) {
  if (geteuid() != 0) GTEST_SKIP() << "the blocker needs CAP_SYS_ADMIN (root)";
  if (access("/proc/self/autogroup", F_OK) != 0) GTEST_SKIP() << "this kernel has no autogroups";
  const std::string nice = std::to_string(opencode::limits::kSessionAutogroupNice);
  const std::string call = "\"" + nice + "\", " + std::to_string(nice.size()) + ")";
  int refused = 0, taken = 0;
  for (int run = 0; run < 5 && refused == 0; ++run) {
    int ready[2];
    ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
    pid_t blocker = fork();
    if (blocker == 0) {
      if (setsid() < 0) _exit(1);
      int f = open("/proc/self/autogroup", O_WRONLY | O_CLOEXEC);
      if (f < 0 || write(f, "0", 1) != 1) _exit(2);
      (void)!write(ready[1], "r", 1);
      for (;;) {
        if (write(f, "0", 1) != 1) _exit(3);
        usleep(1000);
      }
    }
    ASSERT_GT(blocker, 0);
    close(ready[1]);
    char r = 0;
    ssize_t got = read(ready[0], &r, 1);
    close(ready[0]);
    bool stopped = false;
    auto on = [&](const std::string& out, int) {
      if (!stopped && out.find("stop-blocker") != std::string::npos) {
        kill(blocker, SIGKILL);
        stopped = true;
      }
    };
    const std::string log = dir_ + "/strace-autogroup.log";
    Outcome o = got == 1 ? Run(Encode({"/bin/sh", "-c", "sleep 1; echo stop-blocker; " + AutogroupProbe()}),
                               {.on_output = on,
                                .wrapper = {"/usr/bin/strace", "-f", "-qq", "-e", "trace=write", "-e",
                                            "signal=none", "-o", log},
                                .own_session = true,
                                .deadline_s = kProbeDeadlineS})
                         : Outcome{};
    kill(blocker, SIGKILL);
    int status = 0;
    waitpid(blocker, &status, 0);
    ASSERT_EQ(got, 1) << "the blocker did not start";
    EXPECT_TRUE(stopped) << o.output;
    EXPECT_TRUE(LineAfter(o.output, "command: ").ends_with(" nice " + nice)) << o.output;
    std::ifstream in(log);
    std::string line;
    refused = taken = 0;
    while (std::getline(in, line)) {
      if (line.find(call) == std::string::npos) continue;
      if (line.find("= -1 EAGAIN") != std::string::npos) ++refused;
      else if (line.ends_with("= " + std::to_string(nice.size()))) ++taken;
    }
    EXPECT_EQ(taken, 1) << "the write took once (run " << run << ")";
  }
  EXPECT_GE(refused, 1) << "in 5 runs the blocker never held the kernel's limit at the monitor's first write";
}
