// Peer authentication (see peer_auth.h). Order matters and is the proof:
//   1. SO_PEERCRED + SO_PEERPIDFD: the kernel recorded the process that
//      called connect() in the socket; the pidfd is that process, whatever
//      happened to its pid since;
//   2. /proc/<pid>/cgroup, then check the pidfd is still alive: a process
//      that has not exited keeps its pid, so the file was that process's;
//   3. GetUnit(kClientUnit) -> GetAll(Unit), GetAll(Service), and on 253+
//      GetUnitByPIDFD(pidfd), all asynchronous;
//   4. pure checks (identity.cc), then the pidfd must STILL be alive: the
//      connecting process held its pid from connect() until after systemd
//      answered, so MainPID == pid names that very process.
// Step 1 is why Linux 6.5 is required: pidfd_open(pid) at accept time pins
// whichever process holds the pid then, which may be a later one (the
// connecting process exited and its pid was reused). There is no fallback.
#include "daemon/auth/peer_auth.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <optional>

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/systemd/constants.h"
#include "daemon/systemd/systemd_api.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // Linux 6.5; Debian 12's headers predate it
#endif

namespace opencode::daemon {

absl::StatusOr<PeerCredentials> ReadPeerCred(int sock) {
  PeerCredentials out;
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
    return Errno(errno, "getsockopt(SO_PEERCRED)");
  if (len != sizeof(cred) || cred.pid <= 0)
    return absl::FailedPreconditionError("SO_PEERCRED has no peer process");
  out.pid = cred.pid;
  out.uid = cred.uid;
  out.gid = cred.gid;
  return out;
}

absl::StatusOr<PeerCredentials> ReadPeerCredentials(int sock) {
  ASSIGN_OR_RETURN(PeerCredentials out, ReadPeerCred(sock));
  int pidfd = -1;
  socklen_t len = sizeof(pidfd);
  // The kernel creates this descriptor O_CLOEXEC (pidfds always are).
  if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0) {
    // Kernels before 6.5 do not know the option. 6.5+ answer EINVAL when the
    // peer process has already exited (no task behind its pid).
    if (errno == ENOPROTOOPT)
      return absl::UnimplementedError("this kernel has no SO_PEERPIDFD (Linux 6.5 or later is required)");
    return Errno(errno, "getsockopt(SO_PEERPIDFD)");
  }
  if (len != sizeof(pidfd) || pidfd < 0) {
    if (pidfd >= 0) close(pidfd);
    return absl::FailedPreconditionError("SO_PEERPIDFD gave no descriptor");
  }
  out.pidfd.reset(pidfd);
  return out;
}

absl::Status ProbePeerPidfd() {
  // Only a refusal can come from the environment (see peer_auth.h).
  const char* test = getenv(kTestNoPeerPidfdEnv);
  if (test != nullptr && std::string_view(test) == "1")
    return absl::UnimplementedError(absl::StrCat(
        "SO_PEERPIDFD treated as missing (test switch ", kTestNoPeerPidfdEnv, "=1)"));
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return Errno(errno, "socketpair");
  UniqueFd a(sv[0]), b(sv[1]);
  ASSIGN_OR_RETURN(PeerCredentials creds, ReadPeerCredentials(a.get()));
  if (creds.pid != getpid() || !PidfdAlive(creds.pidfd.get()))
    return absl::InternalError("SO_PEERPIDFD of our own socketpair is not this live process");
  return absl::OkStatus();
}

absl::StatusOr<std::string> ParseCgroupFile(std::string_view contents) {
  // cgroup v2 only: exactly one "0::/path" line is what systemd's ControlGroup
  // describes; a v1 hierarchy line is ignored, a missing v2 line is an error.
  std::optional<std::string> found;
  while (!contents.empty()) {
    size_t nl = contents.find('\n');
    std::string_view line = contents.substr(0, nl);
    contents = nl == std::string_view::npos ? std::string_view() : contents.substr(nl + 1);
    if (line.substr(0, 3) != "0::") continue;
    if (found) return absl::InvalidArgumentError("two cgroup v2 lines");
    std::string_view path = line.substr(3);
    if (path.empty() || path[0] != '/') return absl::InvalidArgumentError("cgroup path not absolute");
    found = std::string(path);
  }
  if (!found) return absl::NotFoundError("no cgroup v2 line");
  return *found;
}

absl::StatusOr<std::string> ReadCgroup(pid_t pid) {
  std::string path = absl::StrCat("/proc/", pid, "/cgroup");
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY));
  if (!fd) return Errno(errno, "open /proc/<pid>/cgroup");
  // A cgroup path is at most a few hundred bytes; 4 KiB of lines is a bound
  // on what we parse, and anything longer is refused rather than truncated.
  char buf[4096];
  size_t have = 0;
  for (;;) {
    ssize_t n = read(fd.get(), buf + have, sizeof(buf) - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(errno, "read /proc/<pid>/cgroup");
    if (n == 0) break;
    have += static_cast<size_t>(n);
    if (have == sizeof(buf)) return absl::OutOfRangeError("/proc/<pid>/cgroup too long");
  }
  return ParseCgroupFile(std::string_view(buf, have));
}

bool PidfdAlive(int pidfd) {
  struct pollfd p {pidfd, POLLIN, 0};
  int r;
  do r = poll(&p, 1, 0);
  while (r < 0 && errno == EINTR);
  // An error is treated as "not provably alive": fail closed.
  return r == 0;
}

namespace {

// One authentication in flight. It is its own PendingCall: destroying it
// cancels every outstanding D-Bus call (their slots are members).
class BusAuth final : public PendingCall {
 public:
  BusAuth(const BusSource* source, BusAuthConfig config, AuthDone done)
      : source_(source), config_(config), done_(std::move(done)) {}

  // May finish synchronously (refusal from kernel facts alone).
  void Start(int sock) {
    // SO_PEERCRED alone first, for the journal's PEER_PID/PEER_UID.
    auto cred = ReadPeerCred(sock);
    if (!cred.ok()) return Finish(ErrorCode::kUnauthenticated, cred.status().ToString());
    peer_.pid = cred->pid;
    peer_.uid = cred->uid;
    if (!config_.peer_pidfd)
      return Finish(ErrorCode::kKernelUnsupported,
                    "this kernel has no SO_PEERPIDFD (Linux 6.5 or later is required; "
                    "see the LOG_CRIT line at start): nothing is accepted without it");
    auto creds = ReadPeerCredentials(sock);
    if (absl::IsUnimplemented(creds.status()))
      return Finish(ErrorCode::kKernelUnsupported, creds.status().ToString());
    if (!creds.ok()) return Finish(ErrorCode::kUnauthenticated, creds.status().ToString());
    creds_ = std::move(*creds);
    peer_.pid = creds_.pid;
    peer_.uid = creds_.uid;
    facts_.pid = creds_.pid;
    facts_.uid = creds_.uid;
    // Refuse uid 0 before asking anyone anything.
    if (creds_.uid == 0) return Finish(ErrorCode::kRootRefused, "peer uid is 0");
    auto cgroup = ReadCgroup(creds_.pid);
    if (!cgroup.ok()) return Finish(ErrorCode::kUnauthenticated, cgroup.status().ToString());
    if (!PidfdAlive(creds_.pidfd.get()))
      return Finish(ErrorCode::kUnauthenticated, "peer exited before its cgroup was read");
    facts_.cgroup = std::move(*cgroup);

    // All three questions at once, on the object path of the one client unit
    // (computed here, as sd-bus encodes it): no GetUnit round trip first. If
    // the unit is not loaded, systemd loads it to answer (MainPID 0, so the
    // identity check refuses, as GetUnit's NoSuchUnit did).
    auto unit_path = UnitObjectPath(kClientUnit);
    if (!unit_path.ok()) return Finish(ErrorCode::kInternal, unit_path.status().ToString());
    SendIdentityCalls(*unit_path);
  }

 private:
  void SendIdentityCalls(const std::string& unit_path) {
    auto unit_call = NewGetAllCall(source_->bus(), unit_path.c_str(), kUnitInterface);
    auto service_call = NewGetAllCall(source_->bus(), unit_path.c_str(), kServiceInterface);
    auto pidfd_call = NewManagerCall(source_->bus(), "GetUnitByPIDFD");
    if (!unit_call.ok() || !service_call.ok() || !pidfd_call.ok())
      return Unasked("cannot build identity calls");
    // sd-bus duplicates the pidfd into the message; the message is dropped at
    // the end of this function.
    if (sd_bus_message_append(pidfd_call->get(), "h", creds_.pidfd.get()) < 0)
      return Finish(ErrorCode::kInternal, "append pidfd");

    auto a = CallAsync(source_->bus(), unit_call->get(), [this](sd_bus_message* m) {
      unit_call_.reset();
      unit_reply_.reset(sd_bus_message_ref(m));
      MaybeDecide();
    });
    auto b = CallAsync(source_->bus(), service_call->get(), [this](sd_bus_message* m) {
      service_call_.reset();
      service_reply_.reset(sd_bus_message_ref(m));
      MaybeDecide();
    });
    auto c = CallAsync(source_->bus(), pidfd_call->get(), [this](sd_bus_message* m) {
      pidfd_call_.reset();
      pidfd_reply_.reset(sd_bus_message_ref(m));
      MaybeDecide();
    });
    if (!a.ok() || !b.ok() || !c.ok()) return Unasked("cannot send identity calls");
    unit_call_ = std::move(*a);
    service_call_ = std::move(*b);
    pidfd_call_ = std::move(*c);
  }

  // systemd could not be asked. On a connection that is closing (a re-exec
  // or reload of systemd, before the reconnection) the identity cannot be
  // proven, exactly as when systemd answers with an error: unauthenticated.
  // Only a failure on an open connection is the supervisor's own (internal).
  void Unasked(std::string_view what) {
    sd_bus* bus = source_->bus();
    if (bus == nullptr || sd_bus_is_open(bus) <= 0)
      return Finish(ErrorCode::kUnauthenticated,
                    std::string(what) + ": systemd's connection is closed; the identity cannot be proven");
    Finish(ErrorCode::kInternal, std::string(what));
  }

  void MaybeDecide() {
    if (!unit_reply_ || !service_reply_ || !pidfd_reply_) return;
    if (auto st = ReplyStatus(unit_reply_.get()); !st.ok())
      return Finish(ErrorCode::kUnauthenticated, absl::StrCat("GetAll(Unit): ", st.message()));
    if (auto st = ReplyStatus(service_reply_.get()); !st.ok())
      return Finish(ErrorCode::kUnauthenticated, absl::StrCat("GetAll(Service): ", st.message()));
    auto identity = DecodeIdentity(unit_reply_.get(), service_reply_.get());
    if (!identity.ok()) return Finish(ErrorCode::kUnauthenticated, identity.status().ToString());
    // systemd's current answer, for the admission's fast refusal only.
    if (config_.main_pid_cache)
      config_.main_pid_cache->Record(static_cast<pid_t>(identity->main_pid));

    std::string why;
    if (ReplyIsError(pidfd_reply_.get(), "org.freedesktop.DBus.Error.UnknownMethod")) {
      // systemd 252 has no GetUnitByPIDFD. The MainPID check below plus the
      // live pidfd from SO_PEERPIDFD suffices on its own (SECURITY.md, "What
      // proves each pid conversion"); the method only adds a second witness.
    } else if (auto st = ReplyStatus(pidfd_reply_.get()); !st.ok()) {
      return Finish(ErrorCode::kUnauthenticated, absl::StrCat("GetUnitByPIDFD: ", st.message()));
    } else {
      auto by_pidfd = DecodeUnitByPidfd(pidfd_reply_.get());
      if (!by_pidfd.ok()) return Finish(ErrorCode::kUnauthenticated, by_pidfd.status().ToString());
      if (ErrorCode c = CheckPidfdUnit(*by_pidfd, *identity, &why); c != ErrorCode::kOk)
        return Finish(c, why);
      peer_.pidfd_witness = true;
    }
    // Liveness is sampled after every answer has arrived.
    facts_.alive_after = PidfdAlive(creds_.pidfd.get());
    ErrorCode code = CheckIdentity(*identity, facts_, &why);
    peer_.client_invocation = HexId(identity->invocation_id);
    if (code != ErrorCode::kOk) return Finish(code, why);
    Finish(ErrorCode::kOk, "");
  }

  void Finish(ErrorCode code, std::string why) {
    if (!done_) return;
    AuthDone done = std::move(done_);
    done_ = nullptr;
    AuthResult result{code, std::move(why), peer_};
    done(std::move(result));  // may destroy *this
  }

  const BusSource* source_;
  BusAuthConfig config_;
  AuthDone done_;
  PeerCredentials creds_;
  PeerFacts facts_;
  AuthenticatedPeer peer_;
  Pending unit_call_, service_call_, pidfd_call_;
  MessagePtr unit_reply_, service_reply_, pidfd_reply_;
};

class BusAuthenticator final : public Authenticator {
 public:
  BusAuthenticator(const BusSource* source, BusAuthConfig config) : source_(source), config_(config) {}
  std::unique_ptr<PendingCall> Authenticate(int sock, AuthDone done) override {
    auto auth = std::make_unique<BusAuth>(source_, config_, std::move(done));
    auth->Start(sock);
    return auth;
  }

 private:
  const BusSource* source_;
  BusAuthConfig config_;
};

}  // namespace

std::unique_ptr<Authenticator> NewBusAuthenticator(const BusSource* source, BusAuthConfig config) {
  return std::make_unique<BusAuthenticator>(source, config);
}

}  // namespace opencode::daemon
