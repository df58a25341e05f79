// The listening socket from systemd (socket activation) and the admission of
// new connections. Invariants: every accepted descriptor is close-on-exec and
// nonblocking at birth (accept4); a connection beyond kMaxSessions or
// kMaxPendingHandshakes — or, from kHandshakePressure on, one whose peer pid
// is not the MainPID of systemd's latest answer — gets one error envelope and
// goes to the lingerer (base/lingerer.h): what the peer sent is read only to
// be dropped, never parsed; nothing already accepted is affected. The listener never spins: on EMFILE/ENFILE it pauses (timer with
// bounded backoff, or until a session frees its descriptors), and after a
// full burst it yields until idle-priority housekeeping has run. Connections
// it refuses are closed by the closer thread (async_close.h), and while that
// thread is kCloseBacklogPause descriptors behind it accepts nothing.
#pragma once

#include <systemd/sd-event.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/errors.h"
#include "common/unique_fd.h"
#include "daemon/auth/main_pid_cache.h"
#include "daemon/base/lingerer.h"
#include "daemon/base/sd_ptr.h"

namespace opencode::daemon {

class Listener {
 public:
  class Delegate {
   public:
    virtual size_t SessionCount() const noexcept = 0;
    virtual size_t HandshakeCount() const noexcept = 0;
    // The MainPID of the latest identity answer (nullable): used only to
    // refuse, never to admit.
    virtual const MainPidCache* main_pid_cache() const noexcept { return nullptr; }
    // Takes ownership of an admitted connection.
    virtual void OnConnection(UniqueFd conn) noexcept = 0;

   protected:
    ~Delegate() = default;
  };

  // The one socket passed by opencode-pty-supervisor.socket (sd_listen_fds).
  static absl::StatusOr<UniqueFd> FromSystemd();

  // `lingerer` takes the connections it refuses (it must outlive them).
  Listener(sd_event* event, UniqueFd socket, Delegate* delegate, Lingerer* lingerer);
  absl::Status Init();
  // Accepting starts after start-up recovery and stops at shutdown.
  void Enable(bool enabled) noexcept;
  // A session released its descriptors: a listener paused on EMFILE/ENFILE
  // tries again now instead of waiting for its timer.
  void DescriptorsFreed() noexcept;
  // Paused because accept4 ran out of descriptors (tests, STATUS=).
  bool paused() const noexcept { return paused_; }

 private:
  static int OnReadable(sd_event_source* s, int fd, uint32_t revents, void* userdata) noexcept;
  static int OnBackoff(sd_event_source* s, uint64_t usec, void* userdata) noexcept;
  static int OnYielded(sd_event_source* s, void* userdata) noexcept;
  static int OnCloserCaughtUp(sd_event_source* s, int fd, uint32_t revents, void* userdata) noexcept;
  void AcceptSome() noexcept;
  void Admit(UniqueFd conn) noexcept;
  void Refuse(UniqueFd conn, ErrorCode code, std::string_view message) noexcept;

  void Pause() noexcept;
  // The io source is on iff enabled, not paused and not yielding.
  void Apply() noexcept;

  sd_event* event_;
  UniqueFd socket_;
  Delegate* delegate_;
  Lingerer* lingerer_;
  EventSourcePtr source_, backoff_, yield_, closer_wake_;
  bool enabled_ = false;
  bool paused_ = false;    // EMFILE/ENFILE: waiting for the timer or a freed descriptor
  bool yielding_ = false;  // a full burst: waiting for the idle-priority turn
  bool closer_behind_ = false;  // the closer thread holds kCloseBacklogPause descriptors
  uint64_t backoff_usec_ = 0;
};

}  // namespace opencode::daemon
