// The listening socket from systemd (socket activation) and the admission of
// new connections. Invariant: every accepted descriptor is close-on-exec and
// nonblocking at birth (accept4), and a connection beyond kMaxSessions or
// kMaxPendingHandshakes gets one error envelope and is closed without a byte
// of it being read; nothing already accepted is affected.
#pragma once

#include <systemd/sd-event.h>

#include <cstddef>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "daemon/sd_ptr.h"

namespace opencode::daemon {

class Listener {
 public:
  class Delegate {
   public:
    virtual size_t SessionCount() const noexcept = 0;
    virtual size_t HandshakeCount() const noexcept = 0;
    // Takes ownership of an admitted connection.
    virtual void OnConnection(UniqueFd conn) noexcept = 0;

   protected:
    ~Delegate() = default;
  };

  // The one socket passed by opencode-pty-supervisor.socket (sd_listen_fds).
  static absl::StatusOr<UniqueFd> FromSystemd();

  Listener(sd_event* event, UniqueFd socket, Delegate* delegate);
  absl::Status Init();
  // Accepting starts after start-up recovery and stops at shutdown.
  void Enable(bool enabled) noexcept;

 private:
  static int OnReadable(sd_event_source* s, int fd, uint32_t revents, void* userdata) noexcept;
  void AcceptSome() noexcept;

  sd_event* event_;
  UniqueFd socket_;
  Delegate* delegate_;
  EventSourcePtr source_;
};

}  // namespace opencode::daemon
