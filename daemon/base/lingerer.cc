// The lingering close of refused connections (see lingerer.h).
#include "daemon/base/lingerer.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include "common/limits.h"
#include "daemon/base/async_close.h"

namespace opencode::daemon {

Lingerer::~Lingerer() {
  // A lingering connection may still hold descriptors its client sent, whose
  // final close can sleep: it runs in the closer, never here (docs/SECURITY.md
  // "Closing what a peer supplied").
  for (auto& [key, l] : lingering_) {
    l->io.reset();
    l->timer.reset();
    AsyncClose(std::move(l->conn));
  }
}

void Lingerer::Close(UniqueFd conn) noexcept {
  if (!Linger(&conn)) AsyncClose(std::move(conn));
}

bool Lingerer::Linger(UniqueFd* conn) noexcept {
  if (lingering_.size() >= limits::kMaxLingeringRefusals) return false;
  auto l = std::make_unique<Lingering>();
  l->owner = this;
  sd_event_source* io = nullptr;
  if (sd_event_add_io(event_, &io, conn->get(), EPOLLIN | EPOLLRDHUP, &Lingerer::OnIo, l.get()) < 0)
    return false;
  l->io.reset(io);
  uint64_t now = 0;
  sd_event_source* timer = nullptr;
  if (sd_event_now(event_, CLOCK_MONOTONIC, &now) < 0 ||
      sd_event_add_time(event_, &timer, CLOCK_MONOTONIC, now + limits::kRefusalLingerUsec, 0,
                        &Lingerer::OnTimer, l.get()) < 0)
    return false;
  l->timer.reset(timer);
  (void)shutdown(conn->get(), SHUT_WR);
  l->conn = std::move(*conn);
  Lingering* key = l.get();
  lingering_.emplace(key, std::move(l));
  return true;
}

int Lingerer::OnIo(sd_event_source* /*s*/, int fd, uint32_t revents, void* userdata) noexcept {
  auto* l = static_cast<Lingering*>(userdata);
  if (DiscardUntilEof(fd, revents)) l->owner->End(l);
  return 0;
}

int Lingerer::OnTimer(sd_event_source* /*s*/, uint64_t /*usec*/, void* userdata) noexcept {
  auto* l = static_cast<Lingering*>(userdata);
  l->owner->End(l);
  return 0;
}

void Lingerer::End(Lingering* l) noexcept {
  auto it = lingering_.find(l);
  if (it == lingering_.end()) return;
  UniqueFd conn = std::move(it->second->conn);
  lingering_.erase(it);  // disables and unrefs both sources
  AsyncClose(std::move(conn));
}

}  // namespace opencode::daemon
