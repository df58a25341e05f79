// The MainPID of the client unit as systemd named it in its latest identity
// answer, kept only to turn a connection away cheaply at admission while the
// pending handshakes are near their cap (issue #21 point 3). Invariant: it can
// only ever reject. A peer whose pid matches is still authenticated in full
// (peer_auth.cc); before the first answer it rejects nothing. A stale value
// (the application restarted) can only turn the new MainPID away while the
// handshakes are at kHandshakePressure, and every handshake admitted below
// that mark brings a fresh answer within one D-Bus round trip.
#pragma once

#include <sys/types.h>


namespace opencode::daemon {

class MainPidCache {
 public:
  // systemd answered MainPID = `main_pid` (0: not running).
  void Record(pid_t main_pid) noexcept {
    main_pid_ = main_pid;
    known_ = true;
  }
  // True only if the latest answer named a process other than `peer`. A pid
  // from SO_PEERCRED may be stale or reused; a reused pid equal to the cached
  // one is not rejected here and goes through the full check.
  bool NamesAnotherProcess(pid_t peer) const noexcept { return known_ && peer != main_pid_; }

 private:
  pid_t main_pid_ = 0;
  bool known_ = false;
};

}  // namespace opencode::daemon
