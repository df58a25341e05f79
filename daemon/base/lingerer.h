// The lingering close of a refused connection (docs/PROTOCOL.md section 1),
// one for the whole supervisor: the listener hands it the connections it turns
// away at admission, a session the connection it refused while its peer was
// authenticated, once the error envelope is out. Invariants: at most
// kMaxLingeringRefusals connections linger at a time, each for at most
// kRefusalLingerUsec; past the cap a connection goes to the closer at once. A
// lingering connection's sending side is shut (the client reads the envelope,
// then EOF, never a reset), what the client still sends is read only to be
// dropped (kLingerReadsPerWakeup segments per wakeup, descriptors to the
// closer), and its final close runs in the closer thread (async_close.h): at
// the client's EOF or hang-up, at the deadline, or when the lingerer is
// destroyed.
#pragma once

#include <systemd/sd-event.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "common/unique_fd.h"
#include "daemon/base/sd_ptr.h"

namespace opencode::daemon {

class Lingerer {
 public:
  explicit Lingerer(sd_event* event) noexcept : event_(event) {}
  // Hands every connection still lingering to the closer.
  ~Lingerer();
  Lingerer(const Lingerer&) = delete;
  Lingerer& operator=(const Lingerer&) = delete;

  // Takes a connection whose last envelope was written: it lingers, or, past
  // the cap (or if its event sources cannot be added), goes to the closer at
  // once, and whatever its client put in flight is purged there.
  void Close(UniqueFd conn) noexcept;
  // Connections lingering now.
  size_t size() const noexcept { return lingering_.size(); }

 private:
  struct Lingering {
    Lingerer* owner;
    UniqueFd conn;
    EventSourcePtr io, timer;
  };
  static int OnIo(sd_event_source* s, int fd, uint32_t revents, void* userdata) noexcept;
  static int OnTimer(sd_event_source* s, uint64_t usec, void* userdata) noexcept;
  bool Linger(UniqueFd* conn) noexcept;
  void End(Lingering* l) noexcept;

  sd_event* event_;
  // At most kMaxLingeringRefusals.
  std::map<Lingering*, std::unique_ptr<Lingering>> lingering_;
};

}  // namespace opencode::daemon
