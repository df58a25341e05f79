// opencode-pty-client: the fixed helper the application spawns once per PTY.
// Owns exactly two descriptors it did not create: fd 3 (a duplicate of the
// application's connected AF_UNIX SOCK_STREAM socket) and fd 4 (the approved
// working directory). Invariant: it sends ONE START frame carrying ONE
// SCM_RIGHTS descriptor (fd 4) and exits; it never creates a socket, never
// connects, never opens or resolves a path and never executes anything, and it
// fails closed with a distinct status (docs/SECURITY.md) on the first surprise.
//
// Usage: opencode-pty-client [--cols N] [--rows N] [--env]
//            [--detach SECONDS [--scrollback BYTES]] -- PROGRAM [ARG...]
// --env sets START's flag "an ENV frame follows": the application itself then
// sends the ENV frame on its socket after this helper exited 0; the helper
// never sees the environment overlay. --detach sets START's flag "detachable"
// and appends the grace period and the ring size (--scrollback, default
// kDefaultScrollbackBytes) to the payload (docs/PROTOCOL.md section 10.1).

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/dimension.h"
#include "common/errors.h"
#include "common/frame.h"
#include "common/limits.h"
#include "common/scm_rights.h"
#include "common/unique_fd.h"

namespace {

using opencode::ErrorCode;
using opencode::UniqueFd;
namespace limits = opencode::limits;

// Exit statuses: one per failure, stable (the Node module maps each to an
// error; docs/PROTOCOL.md section 9 and docs/SECURITY.md list them).
enum Exit : int {
  kExitOk = 0,               // the whole START frame (and fd 4 with it) is out
  kExitSocketMissing = 10,   // fd 3 is not open
  kExitNotSocket = 11,       // fd 3 is not a socket
  kExitSocketFamily = 12,    // fd 3 is not AF_UNIX
  kExitSocketType = 13,      // fd 3 is not SOCK_STREAM
  kExitNotConnected = 14,    // fd 3 has no peer
  kExitDirMissing = 15,      // fd 4 is not open
  kExitNotDirectory = 16,    // fd 4 is not a directory
  kExitCloexec = 17,         // FD_CLOEXEC could not be set on fd 3 or fd 4
  kExitExtraFd = 18,         // a descriptor >= 5 is open: the caller leaked it
  kExitFdAudit = 19,         // the descriptor table could not be audited
  kExitUsage = 20,           // command line is not the documented grammar
  kExitBadSize = 21,         // --cols/--rows not a decimal in 1..1000
  kExitArgc = 22,            // PROGRAM + ARGs more than kMaxArgs
  kExitArgTooLong = 23,      // one argument above kMaxArgBytes
  kExitArgvTooLong = 24,     // all arguments above kMaxArgvTotalBytes
  kExitEmptyCommand = 25,    // PROGRAM is the empty string
  kExitEncode = 26,          // the codec refused for another reason (a bug)
  kExitPeerClosed = 27,      // the supervisor end is gone (EPIPE/ECONNRESET)
  kExitSend = 28,            // sendmsg/send/poll failed otherwise
  kExitBadDetach = 29,       // --detach not a decimal in 1..kMaxDetachGraceSec
  kExitBadScrollback = 30,   // --scrollback not a decimal in kMin..kMaxScrollbackBytes, or without --detach
};

constexpr char kUsage[] =
    "usage: opencode-pty-client [--cols N] [--rows N] [--env] "
    "[--detach SECONDS [--scrollback BYTES]] -- PROGRAM [ARG...]";

constexpr int kSocketFd = 3;
constexpr int kDirFd = 4;
constexpr int kFirstForeignFd = 5;

// Descriptors are audited up to RLIMIT_NOFILE's hard limit (systemd's default
// for services is 524288). Above 2^20 (the kernel's default fs.nr_open) the
// scan would take seconds, so such a limit is refused rather than half-checked.
constexpr rlim_t kMaxAuditedFds = rlim_t{1} << 20;
// poll() takes at most RLIMIT_NOFILE (soft) entries per call; 1024 is the
// soft default, and 8 KiB of pollfd keeps the scan at a few hundred calls.
constexpr size_t kPollBatch = 1024;

// Static: the helper needs no heap. Header + the largest START payload.
uint8_t frame[limits::kFrameHeaderBytes + limits::kMaxStartPayload];
struct pollfd scan[kPollBatch];

// One line on stderr, best effort: the exit status is the real report.
int Fail(int status, const char* what) {
  static const char kPrefix[] = "opencode-pty-client: ";
  struct iovec iov[3] = {{const_cast<char*>(kPrefix), sizeof kPrefix - 1},
                         {const_cast<char*>(what), strlen(what)},
                         {const_cast<char*>("\n"), 1}};
  (void)!writev(STDERR_FILENO, iov, 3);
  return status;
}

// fd 3 must be the application's connected AF_UNIX stream socket.
int CheckSocket() {
  struct stat st;
  if (fstat(kSocketFd, &st) < 0)
    return errno == EBADF ? Fail(kExitSocketMissing, "fd 3 is not open")
                          : Fail(kExitNotSocket, "fd 3 cannot be inspected");
  if (!S_ISSOCK(st.st_mode)) return Fail(kExitNotSocket, "fd 3 is not a socket");
  int value = 0;
  socklen_t len = sizeof value;
  if (getsockopt(kSocketFd, SOL_SOCKET, SO_DOMAIN, &value, &len) < 0 || value != AF_UNIX)
    return Fail(kExitSocketFamily, "fd 3 is not an AF_UNIX socket");
  len = sizeof value;
  if (getsockopt(kSocketFd, SOL_SOCKET, SO_TYPE, &value, &len) < 0 || value != SOCK_STREAM)
    return Fail(kExitSocketType, "fd 3 is not a SOCK_STREAM socket");
  struct sockaddr_storage peer;
  len = sizeof peer;
  if (getpeername(kSocketFd, reinterpret_cast<struct sockaddr*>(&peer), &len) < 0)
    return Fail(kExitNotConnected, "fd 3 is not connected");
  return kExitOk;
}

// fd 4 must be a directory (the supervisor checks it again on receipt).
int CheckDirectory() {
  struct stat st;
  if (fstat(kDirFd, &st) < 0)
    return errno == EBADF ? Fail(kExitDirMissing, "fd 4 is not open")
                          : Fail(kExitNotDirectory, "fd 4 cannot be inspected");
  if (!S_ISDIR(st.st_mode)) return Fail(kExitNotDirectory, "fd 4 is not a directory");
  return kExitOk;
}

// No descriptor >= 5 may be open. The helper may not open /proc/self/fd, so it
// asks poll(): a closed descriptor answers POLLNVAL, an open one never does.
int CheckNoForeignFds() {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) < 0) return Fail(kExitFdAudit, "getrlimit failed");
  if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > kMaxAuditedFds)
    return Fail(kExitFdAudit, "RLIMIT_NOFILE hard limit too large to audit");
  size_t batch = rl.rlim_cur < kPollBatch ? size_t(rl.rlim_cur) : kPollBatch;
  if (batch == 0) return Fail(kExitFdAudit, "RLIMIT_NOFILE soft limit is zero");
  for (rlim_t base = kFirstForeignFd; base < rl.rlim_max; base += batch) {
    size_t n = rl.rlim_max - base < batch ? size_t(rl.rlim_max - base) : batch;
    for (size_t i = 0; i < n; ++i) scan[i] = {int(base + i), 0, 0};
    int ready;
    do {
      ready = poll(scan, n, 0);
    } while (ready < 0 && errno == EINTR);
    if (ready < 0) return Fail(kExitFdAudit, "poll failed");
    for (size_t i = 0; i < n; ++i)
      if (!(scan[i].revents & POLLNVAL)) return Fail(kExitExtraFd, "a descriptor >= 5 is open");
  }
  return kExitOk;
}

// The one spelling of --detach's and --scrollback's values: decimal, no sign,
// no leading zero, within [min, max] (common/dimension.h's rule, wider range).
// Digits are counted so that no value can overflow the accumulator.
bool ParseBounded(const char* s, uint32_t min, uint32_t max, uint32_t* out) {
  if (s[0] < '1' || s[0] > '9') return false;
  uint64_t v = 0;
  for (const char* p = s; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9' || p - s >= 10) return false;
    v = v * 10 + uint64_t(*p - '0');
  }
  if (v < min || v > max) return false;
  *out = uint32_t(v);
  return true;
}

int ExitForCodec(ErrorCode e) {
  switch (e) {
    case ErrorCode::kBadArgc: return Fail(kExitArgc, "too many arguments");
    case ErrorCode::kArgTooLong: return Fail(kExitArgTooLong, "an argument is too long");
    case ErrorCode::kArgvTooLong: return Fail(kExitArgvTooLong, "arguments too long in total");
    case ErrorCode::kEmptyCommand: return Fail(kExitEmptyCommand, "PROGRAM is empty");
    default: return Fail(kExitEncode, "start frame encoding failed");
  }
}

// Waits until the socket accepts data: only reached if the application handed
// over a non-blocking socket (O_NONBLOCK is shared with its file description).
// No timeout, exactly like a blocking send: the supervisor's START deadline
// closes the connection, which ends the wait with an error.
bool WaitWritable(int fd) {
  struct pollfd p = {fd, POLLOUT, 0};
  int r;
  do {
    r = poll(&p, 1, -1);
  } while (r < 0 && errno == EINTR);
  return r == 1;
}

int SendFailed(int err) {
  if (err == EPIPE || err == ECONNRESET) return Fail(kExitPeerClosed, "the supervisor closed the connection");
  return Fail(kExitSend, "sending the start frame failed");
}

// The descriptor travels with the first byte in ONE sendmsg; a stream socket
// may take less than the whole frame, so the rest follows with plain send().
int SendFrame(int sock, int dir, const uint8_t* data, size_t len) {
  ssize_t n;
  for (;;) {
    n = opencode::SendWithFd(sock, data, len, dir);  // retries EINTR itself
    if (n != -EAGAIN && n != -EWOULDBLOCK) break;
    if (!WaitWritable(sock)) return SendFailed(errno);
  }
  if (n < 0) return SendFailed(int(-n));
  if (n == 0) return SendFailed(EPIPE);  // the descriptor must have gone with a byte
  for (size_t sent = size_t(n); sent < len;) {
    n = send(sock, data + sent, len - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!WaitWritable(sock)) return SendFailed(errno);
      continue;
    }
    if (n <= 0) return SendFailed(n < 0 ? errno : EPIPE);
    sent += size_t(n);
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // Descriptors first: nothing else happens until the inherited table is known.
  if (int r = CheckSocket(); r != kExitOk) return r;
  if (int r = CheckDirectory(); r != kExitOk) return r;
  UniqueFd sock(kSocketFd);
  UniqueFd dir(kDirFd);
  // The helper never executes anything; close-on-exec is set anyway so that no
  // future change can hand the application's socket to another program.
  if (fcntl(sock.get(), F_SETFD, FD_CLOEXEC) < 0 || fcntl(dir.get(), F_SETFD, FD_CLOEXEC) < 0)
    return Fail(kExitCloexec, "cannot set FD_CLOEXEC on fd 3/4");
  if (int r = CheckNoForeignFds(); r != kExitOk) return r;

  uint16_t cols = limits::kDefaultCols, rows = limits::kDefaultRows;
  opencode::DetachOptions detach;  // grace_sec 0: not detachable
  bool have_cols = false, have_rows = false, env = false, have_scrollback = false;
  int i = 1;
  for (; i < argc; i += 2) {
    if (strcmp(argv[i], "--") == 0) break;
    if (strcmp(argv[i], "--env") == 0 && !env) {  // no value
      env = true;
      --i;
      continue;
    }
    bool is_cols = strcmp(argv[i], "--cols") == 0;
    bool is_rows = strcmp(argv[i], "--rows") == 0;
    bool is_detach = strcmp(argv[i], "--detach") == 0;
    bool is_scrollback = strcmp(argv[i], "--scrollback") == 0;
    if ((!is_cols && !is_rows && !is_detach && !is_scrollback) || (is_cols && have_cols) ||
        (is_rows && have_rows) || (is_detach && detach.detachable()) || (is_scrollback && have_scrollback))
      return Fail(kExitUsage, kUsage);
    if (i + 1 >= argc) return Fail(kExitUsage, "option needs a value");
    if (is_detach) {
      if (!ParseBounded(argv[i + 1], 1, limits::kMaxDetachGraceSec, &detach.grace_sec))
        return Fail(kExitBadDetach, "--detach must be a decimal 1..3600");
      continue;
    }
    if (is_scrollback) {
      if (!ParseBounded(argv[i + 1], limits::kMinScrollbackBytes, limits::kMaxScrollbackBytes, &detach.scrollback))
        return Fail(kExitBadScrollback, "--scrollback must be a decimal 65536..2097152");
      have_scrollback = true;
      continue;
    }
    if (!opencode::ParseDimension(argv[i + 1], is_cols ? limits::kMaxCols : limits::kMaxRows,
                   is_cols ? &cols : &rows))
      return Fail(kExitBadSize, "--cols/--rows must be a decimal 1..1000");
    (is_cols ? have_cols : have_rows) = true;
  }
  if (i >= argc) return Fail(kExitUsage, kUsage);
  ++i;  // skip "--"
  if (i >= argc) return Fail(kExitUsage, "PROGRAM is missing");
  // Any order is allowed, so the pairing is checked once every option is read.
  if (have_scrollback && !detach.detachable())
    return Fail(kExitBadScrollback, "--scrollback needs --detach");
  if (detach.detachable() && !have_scrollback) detach.scrollback = limits::kDefaultScrollbackBytes;

  ErrorCode error = ErrorCode::kOk;
  size_t len = opencode::EncodeStartFrame(cols, rows, size_t(argc - i), argv + i, frame,
                                          sizeof frame, &error, env ? opencode::kStartFlagEnv : 0, detach);
  if (len == 0) return ExitForCodec(error);
  return SendFrame(sock.get(), dir.get(), frame, len);
}
