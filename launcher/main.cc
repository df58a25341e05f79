// opencode-pty-launcher: the program systemd starts in each PTY unit, and the
// last step before the user's command inside the PTY (docs/SECURITY.md).
// Owns: the unit's stdio (fd 0 = fd 1 = the PTY stream, fd 2 = the approved
// directory), fd 3, which it deliberately hands down (itself), and fd 4, the
// unit's end of the session's unit channel, received on the stream and handed
// down to --exec, whose monitor keeps it and the command never gets it.
// Invariant: every argument is decoded from its single canonical encoding
// before anything runs; the command gets exactly the argv the start frame
// carried, a fixed environment overlaid with the application's (the 'V'
// packet, --exec only: no step before the command ever holds it), fds 0..2 on
// the PTY and nothing else, and it is never interpreted by a shell. The first surprise ends the launcher with a
// distinct status, a one-line reason on the PTY stream and, once it holds the
// channel, the status on the channel ('F').
//
// Outer mode:   opencode-pty-launcher aENC... (one canonical argument per argv element)
// Shell step:   /proc/self/fd/3 -c CMD        (script's "$SHELL -c CMD"; CMD must be the fixed line)
// Inner mode:   /proc/self/fd/3 --exec        (run by /bin/sh inside script's PTY)
// Monitor:      --exec itself after it forked the command: the command's parent,
//               which applies window sizes and signals from the channel and
//               reports the command's exec and exit on it, then exits with it.

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "common/base64url.h"
#include "common/channel_message.h"
#include "common/dimension.h"
#include "common/env_overlay.h"
#include "common/errors.h"
#include "common/launch.h"
#include "common/limits.h"
#include "common/scm_rights.h"
#include "common/size_message.h"
#include "common/unique_fd.h"

namespace {

using opencode::ErrorCode;
using opencode::UniqueFd;
namespace limits = opencode::limits;

constexpr int kSelfFd = 3;
// The unit's end of the unit channel, from the outer launcher to --exec.
constexpr int kChannelFd = 4;
constexpr char kScript[] = "/usr/bin/script";
// Inner shell: -i makes it take the terminal's foreground process group (the
// monitor then gives the foreground to the command's own group); `exec`
// replaces it with the launcher on fd 3.
constexpr char kScriptCommand[] = "/bin/sh -i -c 'exec /proc/self/fd/3 --exec'";
// script runs "$SHELL -c <its command>" in its child. SHELL = the launcher on
// fd 3 makes that step this executable (RunShellStep), which runs exactly the
// fixed line's argv below, so no shell stays between script and the command
// (a `sh -c` there sat in the foreground group and died of ^C).
constexpr char kScriptShell[] = "SHELL=/proc/self/fd/3";
constexpr const char* kShellStepArgv[] = {"/bin/sh", "-i", "-c", "exec /proc/self/fd/3 --exec", nullptr};

// The fixed part of the command's environment. kPath and kPathDirs are the
// same list: the second is how --exec looks a bare command name up.
constexpr char kPath[] = "PATH=/usr/local/bin:/usr/bin:/bin";
constexpr const char* kPathDirs[] = {"/usr/local/bin", "/usr/bin", "/bin"};
constexpr char kTerm[] = "TERM=xterm-256color";
constexpr char kLang[] = "LANG=C.UTF-8";
// The command's SHELL: the user's login shell never reaches the chain, and
// the command gets the shell that a POSIX "sh -c" would be.
constexpr char kShell[] = "SHELL=/bin/sh";

// HOME is a path (PATH_MAX); USER/LOGNAME a login name (LOGIN_NAME_MAX).
constexpr size_t kMaxHomeBytes = PATH_MAX - 1;
constexpr size_t kMaxUserBytes = LOGIN_NAME_MAX - 1;

// Decoded argv: bytes + NUL per element, and the pointer vector for execve.
char arena[limits::kMaxArgvTotalBytes + limits::kMaxArgs];
char* args[limits::kMaxArgs + 1];
std::string_view tokens[limits::kMaxArgs];

// "NAME=value" strings of the environment being built, and the vector.
char env_argv[sizeof opencode::kArgvEnvName + 1 + limits::kMaxEncodedArgvBytes];
char env_home[sizeof "HOME=" + kMaxHomeBytes];
char env_user[sizeof "USER=" + kMaxUserBytes];
char env_logname[sizeof "LOGNAME=" + kMaxUserBytes];
static_assert(limits::kMaxCols <= 9999 && limits::kMaxRows <= 9999, "a size has at most four digits");
char env_columns[sizeof opencode::kColumnsEnvName + 1 + 4];
char env_lines[sizeof opencode::kLinesEnvName + 1 + 4];
// The fixed part has at most kFixedEnvSlots entries; the overlay follows.
constexpr size_t kFixedEnvSlots = 16;
const char* envp[kFixedEnvSlots + limits::kMaxEnvVars + 1];

// The application's overlay (--exec only): the one 'V' packet as received,
// its entries copied out NUL-terminated, and their pointers.
uint8_t env_packet[limits::kMaxEnvPacketBytes + 1];
char overlay_bytes[limits::kMaxEnvTotalBytes + limits::kMaxEnvVars];
const char* overlay[limits::kMaxEnvVars];
size_t overlay_count = 0;

// The unit channel once this process holds it (fd 4, checked), else -1: a
// launcher failure from then on is also told to the supervisor ('F').
int channel = -1;

// One line on `fd`: "opencode-pty-launcher: <what>\n", and 'F' + status on
// the channel when there is one. Best effort both: the unit's exit status
// carries the same number.
int Report(int fd, int status, const char* what, std::string_view detail = {}) {
  static const char kPrefix[] = "opencode-pty-launcher: ";
  struct iovec iov[4] = {{const_cast<char*>(kPrefix), sizeof kPrefix - 1},
                         {const_cast<char*>(detail.data()), detail.size()},
                         {const_cast<char*>(what), strlen(what)},
                         {const_cast<char*>("\n"), 1}};
  (void)!writev(fd, iov, 4);
  if (channel >= 0) {  // -1 in the command's child: its 126/127 are the command's exit
    uint8_t m[opencode::kChannelFailedBytes];
    opencode::EncodeLaunchFailed(uint8_t(status), m);
    (void)!send(channel, m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  return status;
}
// After dup2(1, 2) (and always in --exec mode) stderr is the PTY side.
int Fail(int status, const char* what) { return Report(STDERR_FILENO, status, what); }

// ---- argument codec ----

int ExitForCodec(ErrorCode e) {
  switch (e) {
    case ErrorCode::kBadPrefix: return Fail(opencode::kLaunchBadPrefix, "argument rejected: bad_prefix");
    case ErrorCode::kBadAlphabet: return Fail(opencode::kLaunchBadAlphabet, "argument rejected: bad_alphabet");
    case ErrorCode::kBadLength: return Fail(opencode::kLaunchBadLength, "argument rejected: bad_length");
    case ErrorCode::kNonCanonical: return Fail(opencode::kLaunchNonCanonical, "argument rejected: non_canonical");
    default: return Fail(opencode::kLaunchNonCanonical, "argument rejected");  // DecodeArg has no other code
  }
}

// Decodes tokens[0..n) into `args`, enforcing every argv bound of the start
// frame again: what the supervisor put in ExecStart= is re-checked here.
int DecodeAll(size_t n) {
  if (n == 0 || n > limits::kMaxArgs) return Fail(opencode::kLaunchArgc, "argument count out of bounds");
  size_t encoded = n - 1;  // the separators of the joined form
  for (size_t i = 0; i < n; ++i) encoded += tokens[i].size();
  if (encoded > limits::kMaxEncodedArgvBytes) return Fail(opencode::kLaunchEncodedTooLong, "encoded arguments too long");
  std::string raw;
  size_t used = 0;
  for (size_t i = 0; i < n; ++i) {
    // The decoded size follows from the encoded one: refuse before decoding.
    if (tokens[i].size() > opencode::EncodedArgLength(limits::kMaxArgBytes))
      return Fail(opencode::kLaunchArgTooLong, "argument too long");
    if (ErrorCode e = opencode::DecodeArg(tokens[i], &raw); e != ErrorCode::kOk) return ExitForCodec(e);
    if (raw.size() > limits::kMaxArgBytes) return Fail(opencode::kLaunchArgTooLong, "argument too long");
    if (used + raw.size() - i > limits::kMaxArgvTotalBytes)  // `used` counts i NULs
      return Fail(opencode::kLaunchArgvTooLong, "arguments too long in total");
    if (i == 0 && raw.empty()) return Fail(opencode::kLaunchEmptyCommand, "empty command");
    if (raw.find('\0') != std::string::npos) return Fail(opencode::kLaunchNulByte, "argument contains NUL");
    args[i] = arena + used;
    memcpy(arena + used, raw.data(), raw.size());
    used += raw.size();
    arena[used++] = '\0';
  }
  args[n] = nullptr;
  return 0;
}

// ---- the environment systemd gave the unit ----

// An absolute path of printable bytes (no control characters).
bool ValidHome(const char* s) {
  size_t n = strnlen(s, kMaxHomeBytes + 1);
  if (n == 0 || n > kMaxHomeBytes || s[0] != '/') return false;
  for (size_t i = 0; i < n; ++i)
    if (uint8_t(s[i]) < 0x20 || s[i] == 0x7f) return false;
  return true;
}

// A plain login name: [A-Za-z0-9_][A-Za-z0-9._@-]*, bounded.
bool ValidUserName(const char* s) {
  size_t n = strnlen(s, kMaxUserBytes + 1);
  if (n == 0 || n > kMaxUserBytes) return false;
  for (size_t i = 0; i < n; ++i) {
    char c = s[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!alnum && (i == 0 || (c != '.' && c != '@' && c != '-'))) return false;
  }
  return true;
}

void Set(char* buf, size_t cap, const char* name, const char* value) {
  size_t n = strlen(name), v = strlen(value);
  if (n + 1 + v + 1 > cap) abort();  // callers validated the bound; cannot happen
  memcpy(buf, name, n);
  buf[n] = '=';
  memcpy(buf + n + 1, value, v + 1);
}

void SetNumber(char* buf, size_t cap, const char* name, uint16_t value) {
  char digits[6];
  size_t n = sizeof digits - 1;
  digits[n] = '\0';
  do {
    digits[--n] = char('0' + value % 10);
    value /= 10;
  } while (value != 0);
  Set(buf, cap, name, digits + n);
}

struct Carried {
  uint16_t cols = limits::kDefaultCols;
  uint16_t rows = limits::kDefaultRows;
  bool home = false, user = false, logname = false;
};

// Validates and copies COLUMNS, LINES, HOME, USER and LOGNAME out of the
// environment (before it is cleared). A malformed value is refused; an absent
// identity value stays absent; an absent size is the default in outer mode and
// an error in --exec mode (where the outer launcher always set it).
int ReadCarried(bool require_size, Carried* c) {
  const char* cols = getenv(opencode::kColumnsEnvName);
  const char* rows = getenv(opencode::kLinesEnvName);
  if (require_size && (cols == nullptr || rows == nullptr))
    return Fail(opencode::kLaunchWindowSize, "COLUMNS/LINES missing");
  if ((cols != nullptr && !opencode::ParseDimension(cols, limits::kMaxCols, &c->cols)) ||
      (rows != nullptr && !opencode::ParseDimension(rows, limits::kMaxRows, &c->rows)))
    return Fail(opencode::kLaunchWindowSize, "COLUMNS/LINES must be decimal 1..1000");
  // Re-spelled from the parsed numbers: canonical either way.
  SetNumber(env_columns, sizeof env_columns, opencode::kColumnsEnvName, c->cols);
  SetNumber(env_lines, sizeof env_lines, opencode::kLinesEnvName, c->rows);
  if (const char* home = getenv("HOME"); home != nullptr) {
    if (!ValidHome(home)) return Fail(opencode::kLaunchHome, "HOME is not a valid absolute path");
    Set(env_home, sizeof env_home, "HOME", home);
    c->home = true;
  }
  if (const char* user = getenv("USER"); user != nullptr) {
    if (!ValidUserName(user)) return Fail(opencode::kLaunchUserName, "USER is not a valid user name");
    Set(env_user, sizeof env_user, "USER", user);
    c->user = true;
  }
  if (const char* logname = getenv("LOGNAME"); logname != nullptr) {
    if (!ValidUserName(logname)) return Fail(opencode::kLaunchUserName, "LOGNAME is not a valid user name");
    Set(env_logname, sizeof env_logname, "LOGNAME", logname);
    c->logname = true;
  }
  return 0;
}

// The fixed environment (docs/SECURITY.md lists each value and its source),
// plus `extra` (the temporary argv value, outer mode only). Outer mode (for
// script and --exec) carries COLUMNS/LINES, which --exec needs for the start
// size, and SHELL = the launcher on fd 3 (the shell step); the command (inner
// mode) gets SHELL=/bin/sh and no COLUMNS/LINES: they would pin every program
// that honours them (ncurses, tput) to the start size after a live resize.
// LANG is the command's only: the chain (script, the shell step, sh -i) runs
// in the C locale, so script loads no locale (setlocale(LC_ALL, "") with
// LANG=C.UTF-8 opened 57 files per session; issue #16). It copies bytes and
// prints nothing with -q, and dash has no locale: nothing else changes.
// The command's (for_command) is then overlaid with the application's
// variables (ReadOverlay): one of the same name replaces the fixed one, the
// others are added. The chain before the command never sees the overlay.
bool Overlaid(const char* fixed) {
  std::string_view name = opencode::EnvEntryName(fixed);
  for (size_t i = 0; i < overlay_count; ++i)
    if (opencode::EnvEntryName(overlay[i]) == name) return true;
  return false;
}

void BuildEnv(const Carried& c, const char* extra, bool for_command) {
  const char* fixed[kFixedEnvSlots];
  size_t f = 0;
  fixed[f++] = kPath;
  fixed[f++] = kTerm;
  if (for_command) fixed[f++] = kLang;
  if (c.home) fixed[f++] = env_home;
  if (c.user) fixed[f++] = env_user;
  if (c.logname) fixed[f++] = env_logname;
  if (for_command) {
    fixed[f++] = kShell;
  } else {
    fixed[f++] = kScriptShell;
    fixed[f++] = env_columns;
    fixed[f++] = env_lines;
  }
  if (extra != nullptr) fixed[f++] = extra;
  size_t n = 0;
  for (size_t i = 0; i < f; ++i)
    if (!for_command || !Overlaid(fixed[i])) envp[n++] = fixed[i];
  if (for_command)
    for (size_t i = 0; i < overlay_count; ++i) envp[n++] = overlay[i];
  envp[n] = nullptr;
}

// ---- the unit channel ----

// True if `fd` is an AF_UNIX SOCK_SEQPACKET socket (what the supervisor made).
bool IsChannel(int fd) {
  int domain = 0, type = 0;
  socklen_t dl = sizeof domain, tl = sizeof type;
  return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dl) == 0 && domain == AF_UNIX &&
         getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_SEQPACKET;
}

// The supervisor sent exactly one byte kChannelHandoffByte with one SCM_RIGHTS descriptor on
// the stream before it asked systemd for the unit, so it is already waiting
// (MSG_DONTWAIT: a missing handoff fails, never blocks). RecvWithFd receives
// with MSG_CMSG_CLOEXEC and rejects no fd, two or more, MSG_CTRUNC and foreign
// control messages, closing whatever arrived. Taken first of all, so that no
// failure below leaves it unread (closing a stream socket with unread data
// resets the peer's end, and the reason line could be lost). The descriptor
// goes to fd 4 without FD_CLOEXEC: the one handoff through script and sh to
// --exec. Reports on fd 1: fd 2 is still the directory here.
int TakeChannel() {
  char byte = 0;
  opencode::RecvFdResult r = opencode::RecvWithFd(STDIN_FILENO, &byte, 1, MSG_DONTWAIT);
  if (r.bytes != 1 || byte != opencode::kChannelHandoffByte || r.error != ErrorCode::kOk || !r.fd)
    return Report(STDOUT_FILENO, opencode::kLaunchHandoff, "the stream did not start with the unit channel handoff");
  if (!IsChannel(r.fd.get()))
    return Report(STDOUT_FILENO, opencode::kLaunchHandoff, "the unit channel is not an AF_UNIX SOCK_SEQPACKET socket");
  if (r.fd.get() == kChannelFd) {
    if (fcntl(kChannelFd, F_SETFD, 0) < 0) return Report(STDOUT_FILENO, opencode::kLaunchHandoff, "cannot bind fd 4");
    (void)r.fd.release();  // fd 4 now belongs to the exec'd chain
  } else if (dup2(r.fd.get(), kChannelFd) < 0) {  // a stray on fd 4 would be closed below anyway
    return Report(STDOUT_FILENO, opencode::kLaunchHandoff, "cannot bind fd 4");
  }
  channel = kChannelFd;
  return 0;
}

// ---- outer mode: systemd -> launcher -> script ----

// The supervisor's go: one byte (kLaunchGoByte) on the stream, written only
// after systemd's read-back of this unit passed. Exactly one byte is read, so
// nothing the client sends after it is consumed here. EOF (the supervisor
// refused the unit and closed its end) or any other byte ends the launcher;
// a stop of the unit kills it while it waits.
int AwaitGo() {
  for (;;) {
    struct pollfd p = {STDIN_FILENO, POLLIN, 0};
    if (poll(&p, 1, -1) < 0) {
      if (errno == EINTR) continue;
      return Fail(opencode::kLaunchHandoff, "cannot wait for the supervisor's go");
    }
    char b = 0;
    ssize_t n = read(STDIN_FILENO, &b, 1);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n == 1 && b == opencode::kLaunchGoByte) return 0;
    return Fail(opencode::kLaunchHandoff, "no go from the supervisor");
  }
}

int RunOuter(int argc, char** argv) {
  if (int r = TakeChannel(); r != 0) return r;
  // fd 2 is the approved directory: it becomes the working directory and then
  // stops being a descriptor of ours. Until dup2 succeeds, report on fd 1.
  struct stat st;
  if (fstat(STDERR_FILENO, &st) < 0 || !S_ISDIR(st.st_mode))
    return Report(STDOUT_FILENO, opencode::kLaunchNotDirectory, "fd 2 is not a directory");
  if (fchdir(STDERR_FILENO) < 0) return Report(STDOUT_FILENO, opencode::kLaunchChdir, "cannot enter the directory on fd 2");
  if (dup2(STDOUT_FILENO, STDERR_FILENO) < 0) return Report(STDOUT_FILENO, opencode::kLaunchDupStderr, "dup2(1, 2) failed");

  if (argc < 1) return Fail(opencode::kLaunchArgc, "argument count out of bounds");
  size_t n = size_t(argc - 1);
  if (n > limits::kMaxArgs) return Fail(opencode::kLaunchArgc, "argument count out of bounds");
  for (size_t i = 0; i < n; ++i) tokens[i] = argv[i + 1];
  if (int r = DecodeAll(n); r != 0) return r;
  Carried carried;
  if (int r = ReadCarried(/*require_size=*/false, &carried); r != 0) return r;

  // The canonical encoded argv, joined by single spaces, is the one value
  // that crosses script and sh (bounded by kMaxEncodedArgvBytes above).
  size_t len = strlen(opencode::kArgvEnvName);
  memcpy(env_argv, opencode::kArgvEnvName, len);
  env_argv[len++] = '=';
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) env_argv[len++] = ' ';
    memcpy(env_argv + len, tokens[i].data(), tokens[i].size());
    len += tokens[i].size();
  }
  env_argv[len] = '\0';

  // Nothing systemd (or anyone before it) left open goes further, except
  // the unit channel on fd 4.
  static_assert(kChannelFd == kSelfFd + 1, "fd 3 is rebound below; only fd 4 is kept");
  if (close(kSelfFd) < 0 && errno != EBADF) return Fail(opencode::kLaunchCloseFds, "close(3) failed");
  if (close_range(kChannelFd + 1, ~0U, 0) < 0) return Fail(opencode::kLaunchCloseFds, "close_range failed");
  clearenv();

  // fd 3 = this reviewed executable, so that the inner step runs it from the
  // descriptor (no path lookup). dup2 clears FD_CLOEXEC on fd 3: the one
  // descriptor inherited on purpose; if open() already returned 3 (0..2 are
  // open, everything else was just closed) the flag is cleared explicitly.
  UniqueFd self(open("/proc/self/exe", O_PATH | O_CLOEXEC));
  if (!self) return Fail(opencode::kLaunchSelf, "cannot open /proc/self/exe");
  if (self.get() == kSelfFd) {
    if (fcntl(kSelfFd, F_SETFD, 0) < 0) return Fail(opencode::kLaunchSelf, "cannot bind fd 3");
    (void)self.release();  // fd 3 now belongs to the exec'd chain
  } else if (dup2(self.get(), kSelfFd) < 0) {
    return Fail(opencode::kLaunchSelf, "cannot bind fd 3");
  }

  BuildEnv(carried, env_argv, /*for_command=*/false);
  // Nothing of the command runs before the supervisor's verdict on the unit.
  if (int r = AwaitGo(); r != 0) return r;
  static const char* const script_argv[] = {"script", "-q", "-e", "-f", "-c", kScriptCommand, "/dev/null", nullptr};
  execve(kScript, const_cast<char* const*>(script_argv), const_cast<char* const*>(envp));
  return Fail(opencode::kLaunchExecScript, "cannot execute /usr/bin/script");
}

// ---- inner mode: script -> launcher -c -> sh -i -> launcher --exec -> command ----

// Writes "<name>: <reason>" (err 0: "command not found") with the name's non-printable bytes escaped and
// cut, so a hostile argv[0] cannot drive the terminal through the message.
int ExecFailed(int status, const char* name, int err) {
  static char shown[256];
  size_t n = 0;
  for (const uint8_t* p = reinterpret_cast<const uint8_t*>(name); *p != 0 && n + 5 < sizeof shown; ++p) {
    if (*p >= 0x20 && *p < 0x7f) {
      shown[n++] = char(*p);
    } else {
      static const char kHex[] = "0123456789abcdef";
      shown[n++] = '\\';
      shown[n++] = 'x';
      shown[n++] = kHex[*p >> 4];
      shown[n++] = kHex[*p & 15];
    }
  }
  shown[n++] = ':';
  shown[n++] = ' ';
  const char* reason = err == 0 ? "command not found" : strerrordesc_np(err);
  return Report(STDERR_FILENO, status, reason != nullptr ? reason : "cannot execute",
                std::string_view(shown, n));
}

// execve(argv) exactly; a name without '/' is tried in each fixed PATH
// directory like execvp (but never handed to a shell on ENOEXEC).
int ExecCommand() {
  const char* file = args[0];
  char* const* av = args;
  char* const* ev = const_cast<char* const*>(envp);
  if (strchr(file, '/') != nullptr) {
    execve(file, av, ev);
    int err = errno;
    return ExecFailed(err == ENOENT || err == ENOTDIR ? opencode::kCommandNotFound : opencode::kCommandCannotExecute, file, err);
  }
  size_t flen = strlen(file);
  if (flen > NAME_MAX) return ExecFailed(opencode::kCommandNotFound, file, 0);
  static char path[PATH_MAX];
  bool denied = false;
  for (const char* dir : kPathDirs) {
    size_t dlen = strlen(dir);
    memcpy(path, dir, dlen);
    path[dlen] = '/';
    memcpy(path + dlen + 1, file, flen + 1);
    execve(path, av, ev);
    int err = errno;
    if (err == EACCES) { denied = true; continue; }
    if (err == ENOENT || err == ENOTDIR) continue;
    return ExecFailed(opencode::kCommandCannotExecute, file, err);  // found, but it does not run
  }
  return denied ? ExecFailed(opencode::kCommandCannotExecute, file, EACCES) : ExecFailed(opencode::kCommandNotFound, file, 0);
}

// ---- the shell step: script -> "$SHELL -c CMD" ----

// script's child runs $SHELL -c CMD; SHELL is this executable on fd 3. Only
// the fixed line is accepted, and it runs as the argv a POSIX shell parses
// from it (kShellStepArgv); no other string is ever interpreted. The
// environment is script's, which the outer launcher built.
int RunShellStep(const char* command) {
  if (IsChannel(kChannelFd)) channel = kChannelFd;  // for the failure report
  if (strcmp(command, kScriptCommand) != 0) return Fail(opencode::kLaunchShellStep, "the shell step got another command line");
  execve(kShellStepArgv[0], const_cast<char* const*>(kShellStepArgv), environ);
  return Fail(opencode::kLaunchShellStep, "cannot execute /bin/sh");
}

// ---- the application's environment: the 'V' packet ----

// The supervisor wrote exactly one 'V' packet into the channel before it
// asked systemd for the unit, so it is waiting (MSG_DONTWAIT: a missing one
// fails, never blocks). Everything is checked again here (bounds, names, no
// NUL, no name twice: CheckEnvList), and the deny list is applied again:
// what the supervisor vetted is re-vetted by the same code. Reading it here,
// once, leaves nothing of it for the monitor, which never accepts 'V'.
int ReadOverlay() {
  bool refused = false;
  ssize_t n = opencode::RecvPacket(kChannelFd, env_packet, sizeof env_packet, MSG_DONTWAIT, &refused);
  if (n <= 0 || refused) return Fail(opencode::kLaunchEnv, "no environment packet on the unit channel");
  if (env_packet[0] != uint8_t(opencode::ChannelKind::kEnvironment))
    return Fail(opencode::kLaunchEnv, "the unit channel did not start with the environment packet");
  const uint8_t* list = env_packet + 1;
  size_t len = size_t(n) - 1;
  if (ErrorCode e = opencode::CheckEnvList(list, len); e != ErrorCode::kOk)
    return Report(STDERR_FILENO, opencode::kLaunchEnv, opencode::ErrorCodeName(e).data(), "environment packet rejected: ");
  size_t used = 0;
  overlay_count = 0;
  opencode::ForEachEnvEntry(list, len, [&](std::string_view entry) {
    if (opencode::DeniedEnvName(opencode::EnvEntryName(entry))) return;
    // CheckEnvList bounded count and bytes: both arrays have room.
    memcpy(overlay_bytes + used, entry.data(), entry.size());
    overlay_bytes[used + entry.size()] = '\0';
    overlay[overlay_count++] = overlay_bytes + used;
    used += entry.size() + 1;
  });
  explicit_bzero(env_packet, sizeof env_packet);
  return 0;
}

// ---- the command's weight where the kernel groups tasks by session ----

// With kernel.sched_autogroup_enabled=1 (the default of Debian's kernels) a
// task in the root cpu cgroup is scheduled as part of its session's
// autogroup, and every autogroup weighs as much as any other. Where the cpu
// controller is not systemd's (a cgroup v1 host, or cgroup v2 before a unit
// turns it on), 50 streaming sessions were 100 groups beside the
// supervisor's one and the application's one, and every terminal's echo
// queued behind them (bench/results/20261206T113002Z.md). So once the
// command runs, the monitor sets the nice of its session's group (the
// command's: script's child called setsid) to kSessionAutogroupNice, as the
// supervisor lowers the unit's CPUWeight= at the same moment where the
// controller is systemd's. Only the command's group: script's relay wakes
// only for what the command wrote, and the relay of a terminal being typed
// into keeps its weight (with script's group lighter too, that relay waited
// 10 ms per key next to 50 streaming sessions instead of 1.3 ms:
// bench/results/20261207T220558Z.md). A higher nice needs no privilege; the
// kernel takes one such write per 100 ms on the whole machine, so a refused
// one (EAGAIN) is tried again, later each time. Best effort and a default,
// not a bound: a group not set weighs as any other, and the command may set
// its own back (docs/SECURITY.md "CPU between sessions").
class AutogroupNice {
 public:
  // After the command's fork: the command never holds the file. Without
  // autogroups (no file) there is nothing to do.
  void Open() {
    file_ = UniqueFd(open("/proc/self/autogroup", O_WRONLY | O_CLOEXEC | O_NOCTTY));
    next_try_ms_ = NowMs();
  }
  // Writes once it is due; the poll timeout until the next try, or -1 when
  // there is nothing left to write.
  int Poll() {
    if (!file_.valid()) return -1;
    int64_t now = NowMs();
    if (now < next_try_ms_) return int(next_try_ms_ - now);
    static_assert(limits::kSessionAutogroupNice > 0 && limits::kSessionAutogroupNice <= 19,
                  "lighter than a service's group, and a nice value");
    char value[4];
    size_t len = size_t(snprintf(value, sizeof value, "%d", limits::kSessionAutogroupNice));
    ssize_t n;
    while ((n = write(file_.get(), value, len)) < 0 && errno == EINTR) {}
    // Written, or refused for good (nothing a later try would change), or
    // tried kAutogroupNiceAttempts times.
    if (n >= 0 || errno != EAGAIN || ++attempts_ == limits::kAutogroupNiceAttempts) {
      file_.reset();
      return -1;
    }
    int64_t delay = int64_t{limits::kAutogroupNiceFirstRetryMs} << (attempts_ < 7 ? attempts_ - 1 : 6);
    next_try_ms_ = now + delay;
    return int(delay);
  }

 private:
  static int64_t NowMs() {
    struct timespec ts {};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
  }
  UniqueFd file_;
  int attempts_ = 0;
  int64_t next_try_ms_ = 0;
};

// ---- the monitor: --exec after the fork ----

// Sends one packet to the supervisor. Never blocks: the monitor sends at most
// two small packets, far below any socket buffer; a failure (the supervisor
// is gone) leaves the unit's exit status as the only report.
void Tell(const uint8_t* m, size_t n) { (void)!send(kChannelFd, m, n, MSG_NOSIGNAL | MSG_DONTWAIT); }

// The child: the command's process from fork to execve. Its own process
// group in the terminal's foreground, so the keyboard's signals (^C, ^\, ^Z)
// reach its group and never the monitor; SIGTTOU is blocked around tcsetpgrp
// (from a background group it would stop us) and the mask is empty again
// before execve. One byte on `report` says why it did not execve; EOF
// (close-on-exec) says it did.
// The child's name until its execve: the kernel names an executed process
// after its file's basename, which never holds a '/'. So a child still named
// this after the report pipe's EOF died before its execve (a SIGKILL in
// between, from the unit's stop or another process of the user), and the
// monitor does not say `E`.
constexpr std::string_view kPreExecName = "pty/pre-exec";
constexpr std::string_view kMonitorName = "pty-monitor";

// Whether `pid` (an unreaped child: its /proc entry stays, also as a zombie)
// got as far as its execve. Unknown (no /proc) counts as no: `E` is a claim.
bool Executed(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/comm";
  UniqueFd f(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!f.valid()) return false;
  char name[32];
  ssize_t n;
  while ((n = read(f.get(), name, sizeof name)) < 0 && errno == EINTR) {}
  if (n <= 0) return false;
  std::string_view comm(name, size_t(n));
  if (!comm.empty() && comm.back() == '\n') comm.remove_suffix(1);
  return comm != kPreExecName;
}

[[noreturn]] void RunChild(int report) {
  channel = -1;  // fd 4 is close-on-exec; the child never speaks on it
  sigset_t ttou, none;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  sigemptyset(&none);
  uint8_t status = 0;
  if (setpgid(0, 0) < 0 || sigprocmask(SIG_BLOCK, &ttou, nullptr) < 0 ||
      tcsetpgrp(STDIN_FILENO, getpid()) < 0 || sigprocmask(SIG_SETMASK, &none, nullptr) < 0) {
    status = uint8_t(Fail(opencode::kLaunchMonitor, "cannot give the command the terminal's foreground"));
  } else {
    status = uint8_t(ExecCommand());  // returns only when execve failed (126/127), having said why
  }
  (void)!write(report, &status, 1);
  _exit(status);
}

// Reaps the command and reports how it ended ('X'), unless the child already
// reported a launcher failure. Exits as a shell would: the command's status,
// or 128+n for a signal (the unit's view; the channel has the exact one).
[[noreturn]] void ReapAndExit(pid_t pid, bool report) {
  siginfo_t si{};
  while (waitid(P_PID, pid, &si, WEXITED) < 0)
    if (errno != EINTR) _exit(opencode::kLaunchMonitor);
  uint8_t m[opencode::kChannelExitedBytes];
  int status = 0;
  if (si.si_code == CLD_EXITED) {
    status = si.si_status & 0xff;
    opencode::EncodeExited(opencode::ExitHow::kExited, uint8_t(status), m);
  } else {
    status = 128 + si.si_status;
    opencode::EncodeExited(si.si_code == CLD_DUMPED ? opencode::ExitHow::kDumped : opencode::ExitHow::kKilled,
                           uint8_t(si.si_status), m);
  }
  if (report) Tell(m, sizeof m);
  _exit(status);
}

// The monitor's whole life after the fork: fd 0 = the terminal (for sizes),
// fd 4 = the channel, a pidfd of the command, and /proc/self/autogroup until
// it is written; nothing else is open and nothing is allocated. 'W' becomes
// TIOCSWINSZ on the terminal (the kernel sends SIGWINCH to the foreground
// group), 'K' a signal to the command's process only. The first malformed
// packet, EOF or hang-up ends the serving (nothing more is read) but never
// the watching: the command's end is always reaped and reported. A hang-up
// of the terminal becomes SIGHUP (and SIGCONT) to the command's process
// group, as the kernel does for a dying session leader. The monitor cannot
// outlive the command, and holds no descriptor the command's processes could
// keep alive: the session ends when the command does.
[[noreturn]] void RunMonitor(pid_t pid, int pidfd, AutogroupNice& nice) {
  bool serve = true, hung_up = false;
  while (pidfd >= 0) {
    struct pollfd p[3] = {{pidfd, POLLIN, 0},
                          {serve ? kChannelFd : -1, POLLIN, 0},
                          {hung_up ? -1 : STDIN_FILENO, 0, 0}};
    int r = poll(p, 3, nice.Poll());
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (r == 0) continue;  // only the autogroup's next try was due
    if (p[0].revents != 0) break;  // the command exited
    if (p[2].revents != 0) {
      // The terminal hung up (script is gone). The kernel would send SIGHUP
      // to the foreground group when the session leader exits; the session
      // leader is this process, which stays to report, so it sends it.
      hung_up = true;
      (void)kill(-pid, SIGHUP);
      (void)kill(-pid, SIGCONT);
    }
    if (p[1].revents == 0) continue;
    if ((p[1].revents & POLLIN) == 0) { serve = false; continue; }  // the supervisor is gone
    uint8_t msg[opencode::kChannelMaxBytes + 1];
    // A descriptor sent to us is discarded by the kernel and the packet
    // refused, as malformed as a long packet.
    bool refused = false;
    ssize_t n = opencode::RecvPacket(kChannelFd, msg, sizeof msg, MSG_DONTWAIT, &refused);
    if (n == -EINTR || n == -EAGAIN) continue;
    opencode::ChannelMessage m;
    if (n <= 0 || refused || opencode::ParseToUnit(msg, size_t(n), &m) != ErrorCode::kOk) {
      serve = false;
      continue;
    }
    if (m.kind == opencode::ChannelKind::kWindowSize) {
      struct winsize ws = {m.rows, m.cols, 0, 0};
      (void)ioctl(STDIN_FILENO, TIOCSWINSZ, &ws);  // fails only once the terminal is gone
    } else {
      // Unreaped, the child's pid cannot name another process. The answer
      // is what makes the supervisor say signal_sent: a 'K' it could write
      // proves nothing once this monitor is gone (script still holds fd 4).
      if (kill(pid, m.signo) == 0) {
        uint8_t d[opencode::kChannelDeliveredBytes];
        opencode::EncodeSignalDelivered(m.signo, d);
        Tell(d, sizeof d);
      }
    }
  }
  ReapAndExit(pid, true);
}

int RunExec() {
  if (IsChannel(kChannelFd)) channel = kChannelFd;  // for failure reports; checked again below
  const char* joined = getenv(opencode::kArgvEnvName);
  if (joined == nullptr) return Fail(opencode::kLaunchNoArgv, "OPENCODE_PTY_ARGV is missing");
  size_t total = strnlen(joined, limits::kMaxEncodedArgvBytes + 1);
  if (total > limits::kMaxEncodedArgvBytes) return Fail(opencode::kLaunchEncodedTooLong, "encoded arguments too long");
  // Split on single spaces; an empty token (two spaces, a leading or trailing
  // space) fails decoding as bad_prefix, exactly like an empty argument would.
  size_t n = 0;
  for (const char* p = joined;; ++n) {
    if (n == limits::kMaxArgs) return Fail(opencode::kLaunchArgc, "argument count out of bounds");
    const char* space = strchr(p, ' ');
    size_t len = space != nullptr ? size_t(space - p) : strlen(p);
    tokens[n] = std::string_view(p, len);
    if (space == nullptr) { ++n; break; }
    p = space + 1;
  }
  if (int r = DecodeAll(n); r != 0) return r;
  Carried carried;
  if (int r = ReadCarried(/*require_size=*/true, &carried); r != 0) return r;
  clearenv();  // the temporary value and whatever script and sh added

  for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; ++fd)
    if (!isatty(fd)) return Fail(opencode::kLaunchNotTty, "fd 0, 1 or 2 is not a terminal");
  // script starts the PTY at 0x0 (its stdin is a socket): set the size the
  // start frame asked for on the terminal itself.
  struct winsize ws = {carried.rows, carried.cols, 0, 0};
  if (ioctl(STDIN_FILENO, TIOCSWINSZ, &ws) < 0) return Fail(opencode::kLaunchWinsize, "TIOCSWINSZ failed");

  // The command starts like a fresh login: no blocked and no ignored signal
  // (ignored dispositions survive execve; the shells before us set some).
  sigset_t none;
  sigemptyset(&none);
  if (sigprocmask(SIG_SETMASK, &none, nullptr) < 0) return Fail(opencode::kLaunchSignals, "sigprocmask failed");
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction sa;
    if (sigaction(sig, nullptr, &sa) < 0 || sa.sa_handler != SIG_IGN) continue;
    sa.sa_handler = SIG_DFL;
    if (sigaction(sig, &sa, nullptr) < 0) return Fail(opencode::kLaunchSignals, "cannot reset a signal");
  }

  // The channel stays with the monitor (close-on-exec: the command never has it).
  if (!IsChannel(kChannelFd)) return Fail(opencode::kLaunchHandoff, "fd 4 is not the unit channel");
  if (fcntl(kChannelFd, F_SETFD, FD_CLOEXEC) < 0) return Fail(opencode::kLaunchHandoff, "cannot mark fd 4 close-on-exec");
  // fd 3 (this executable) and anything script or sh left open stay behind.
  if (close(kSelfFd) < 0 && errno != EBADF) return Fail(opencode::kLaunchCloseFds, "close(3) failed");
  if (close_range(kChannelFd + 1, ~0U, 0) < 0) return Fail(opencode::kLaunchCloseFds, "close_range failed");
  if (int r = ReadOverlay(); r != 0) return r;
  BuildEnv(carried, nullptr, /*for_command=*/true);

  // The command is this process's child, so that its exact wait status is
  // known here; it execs at once, the monitor's set-up runs beside it.
  int rp[2];
  if (pipe2(rp, O_CLOEXEC) < 0) return Fail(opencode::kLaunchMonitor, "pipe failed");
  UniqueFd report_r(rp[0]), report_w(rp[1]);
  // The child is born with kPreExecName (no moment of it has another name
  // before its execve); the monitor then takes its own.
  (void)prctl(PR_SET_NAME, kPreExecName.data(), 0, 0, 0);
  pid_t pid = fork();
  if (pid < 0) return Fail(opencode::kLaunchMonitor, "fork failed");
  if (pid == 0) {
    report_r.reset();
    RunChild(report_w.get());
  }
  (void)prctl(PR_SET_NAME, kMonitorName.data(), 0, 0, 0);
  report_w.reset();
  // The keyboard's signals go to the command's group; the unit's stop
  // signals (TERM, HUP) must not end the monitor before it reported the
  // command's end (script's SIGKILL, 2 s after a stop, still can).
  for (int sig : {SIGINT, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGHUP, SIGTERM, SIGPIPE}) signal(sig, SIG_IGN);
  // pidfds are close-on-exec at birth; this one names an unreaped child.
  // Without it the monitor could neither watch the command nor serve the
  // channel: fail closed, before the supervisor hears of an exec, and leave
  // no command behind (unreaped, pid and its group can name nothing else).
  UniqueFd pidfd(int(syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd.valid()) {
    (void)kill(-pid, SIGKILL);
    (void)kill(pid, SIGKILL);
    siginfo_t si{};
    while (waitid(P_PID, pid, &si, WEXITED) < 0 && errno == EINTR) {}
    return Fail(opencode::kLaunchMonitor, "pidfd_open failed");
  }
  uint8_t why = 0;
  ssize_t got = 0;
  while ((got = read(report_r.get(), &why, 1)) < 0 && errno == EINTR) {}
  report_r.reset();
  bool failed = got == 1 && why != opencode::kCommandCannotExecute && why != opencode::kCommandNotFound;
  AutogroupNice nice;
  if (got == 0 && Executed(pid)) {
    uint8_t m[opencode::kChannelExecutedBytes];
    opencode::EncodeExecuted(pid, m);
    Tell(m, sizeof m);
    nice.Open();
  } else if (failed) {
    uint8_t m[opencode::kChannelFailedBytes];
    opencode::EncodeLaunchFailed(why, m);
    Tell(m, sizeof m);
  }
  close(STDOUT_FILENO);  // the terminal stays open once, on fd 0
  close(STDERR_FILENO);
  if (failed) ReapAndExit(pid, false);
  RunMonitor(pid, pidfd.get(), nice);
}

}  // namespace

int main(int argc, char** argv) {
  // "--exec" can never be an outer argument: every outer argument starts with 'a'.
  if (argc == 2 && strcmp(argv[1], "--exec") == 0) return RunExec();
  // Nor "-c": script's "$SHELL -c CMD" with SHELL = this executable on fd 3.
  if (argc == 3 && strcmp(argv[1], "-c") == 0) return RunShellStep(argv[2]);
  return RunOuter(argc, argv);
}
