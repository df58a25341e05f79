// Authentication of one connection before a byte of it is read: the kernel's
// immutable peer credentials (SO_PEERCRED + the pidfd the kernel recorded at
// connect(), SO_PEERPIDFD) and the client unit's identity from systemd.
// Invariant: a connection is accepted only if its peer is, at the moment
// systemd answered and still afterwards, the running MainPID of kClientUnit
// with that unit's cgroup and a non-zero uid; on systemd >= 253
// GetUnitByPIDFD must agree too. Without SO_PEERPIDFD (Linux < 6.5) nothing
// is accepted: no pid-based fallback can tell the connecting process from a
// later one with the same pid (docs/SECURITY.md, "Kernel and systemd").
#pragma once

#include <sys/types.h>
#include <systemd/sd-bus.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/errors.h"
#include "common/unique_fd.h"
#include "daemon/auth/identity.h"
#include "daemon/auth/main_pid_cache.h"
#include "daemon/systemd/bus_call.h"

namespace opencode::daemon {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  UniqueFd pidfd;  // SO_PEERPIDFD: the process that called connect()
};

// SO_PEERCRED of a connected AF_UNIX socket (pid, uid, gid as of connect()).
absl::StatusOr<PeerCredentials> ReadPeerCred(int sock);
// SO_PEERCRED and SO_PEERPIDFD. There is no pidfd_open(pid) fallback: a
// kernel without SO_PEERPIDFD (ENOPROTOOPT) gives absl::UnimplementedError
// (kernel_unsupported); a peer that has already exited gives another error.
absl::StatusOr<PeerCredentials> ReadPeerCredentials(int sock);

// Asked once at start, on a socketpair of our own: does this kernel give a
// connection's pidfd (SO_PEERPIDFD, Linux 6.5)? OkStatus if so, else
// absl::UnimplementedError with the reason. The test-only switch
// OPENCODE_PTY_TEST_NO_PEERPIDFD=1 in the environment makes it answer no; it
// can only ever make the supervisor refuse (kTestNoPeerPidfdEnv).
inline constexpr char kTestNoPeerPidfdEnv[] = "OPENCODE_PTY_TEST_NO_PEERPIDFD";
absl::Status ProbePeerPidfd();

// The cgroup v2 path of `pid` ("0::<path>" line of /proc/<pid>/cgroup). This
// is the supervisor's one synchronous read on the event loop: procfs answers
// from memory and never blocks on I/O.
absl::StatusOr<std::string> ReadCgroup(pid_t pid);
// Parses the contents of /proc/<pid>/cgroup (pure; unit-tested).
absl::StatusOr<std::string> ParseCgroupFile(std::string_view contents);

// False once the process behind `pidfd` has exited (poll reports POLLIN).
bool PidfdAlive(int pidfd);

struct AuthenticatedPeer {
  pid_t pid = 0;
  uid_t uid = 0;
  std::string client_invocation;  // 32 hex, for the journal
  // systemd >= 253 confirmed the pidfd's unit and InvocationID as well.
  bool pidfd_witness = false;
};

// The outcome of one authentication: the peer, or the error code to send.
struct AuthResult {
  ErrorCode code = ErrorCode::kInternal;
  std::string why;  // one line for the journal
  AuthenticatedPeer peer;
};
using AuthDone = std::function<void(AuthResult)>;

// Authenticates connections; an interface so session tests can drive the
// state machine without a system bus (the real one is proven in vm-tests).
class Authenticator {
 public:
  virtual ~Authenticator() = default;
  // Starts authenticating `sock`. `done` runs exactly once unless the returned
  // handle is destroyed first.
  virtual std::unique_ptr<PendingCall> Authenticate(int sock, AuthDone done) = 0;
};

struct BusAuthConfig {
  // ProbePeerPidfd() succeeded; false refuses every connection with
  // kernel_unsupported before anything is asked of systemd.
  bool peer_pidfd = false;
  // Every identity answer records its MainPID here (nullable).
  MainPidCache* main_pid_cache = nullptr;
};

// The real one: kernel credentials + systemd over `source`'s connection.
std::unique_ptr<Authenticator> NewBusAuthenticator(const BusSource* source, BusAuthConfig config);

}  // namespace opencode::daemon
