// The closer thread (see async_close.h). Invariant: the loop thread only ever
// pushes to the queue under a lock that the closer holds for a pop and never
// across a close; the closer owns every queued descriptor and closes each
// exactly once.
#include "daemon/base/async_close.h"

#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#include "common/limits.h"
#include "common/scm_rights.h"
#include "daemon/base/status_macros.h"

namespace opencode::daemon {
namespace {

struct Closer {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<int> queue;  // owned descriptors, in the order they were handed over
  bool high = false;      // the backlog reached the pause mark since the last wake
  std::atomic<size_t> backlog{0};
  std::atomic<bool> defuse{true};
  UniqueFd wake;
  bool started = false;
};

// Never destroyed: the closer thread may be inside close() at exit.
Closer& Get() {
  static Closer* c = new Closer;
  return *c;
}

// The descriptors received while draining, waiting for their own defusing
// (closer thread only; RecvWithFd's discard is a plain function).
thread_local std::vector<UniqueFd>* drained = nullptr;

void KeepDrained(UniqueFd fd) noexcept {
  if (drained != nullptr && drained->size() < limits::kCloseDrainDescriptors) {
    drained->push_back(std::move(fd));
  }  // else: closed here, its own queue purged by the kernel
}

// Makes the final close of one socket as short as the kernel allows: it
// resets instead of lingering, and a unix socket's queue is read, so that
// the descriptors in flight on it come out here instead of being purged by
// close(). Returns false if `fd` is not a socket.
bool DefuseOne(int fd) noexcept {
  int type = 0;
  socklen_t len = sizeof type;
  // getsockopt, not fstat: fstat of a FUSE file asks its server.
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0) return false;
  struct linger abort_close = {1, 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_close, sizeof abort_close);
  int domain = 0;
  len = sizeof domain;
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0 || domain != AF_UNIX) return true;
  static thread_local uint8_t sink[64 * 1024];
  for (size_t i = 0; i < limits::kCloseDrainMessages; ++i) {
    RecvFdResult r = RecvWithFd(fd, sink, sizeof sink, MSG_DONTWAIT, &KeepDrained);
    if (r.bytes <= 0) break;  // empty, EOF, or a socket that cannot be read
    KeepDrained(std::move(r.fd));
  }
  return true;
}

// Defuses `fd` and everything in flight under it, depth first, within
// kCloseDrainDescriptors; closes all of it but `fd` itself.
void Defuse(int fd) noexcept {
  std::vector<UniqueFd> stack;
  drained = &stack;
  DefuseOne(fd);
  size_t budget = limits::kCloseDrainDescriptors;
  while (!stack.empty()) {
    UniqueFd next = std::move(stack.back());
    stack.pop_back();
    if (budget > 0) {
      --budget;
      DefuseOne(next.get());
    }
  }
  drained = nullptr;
}

void* Run(void*) {
  Closer& c = Get();
  for (;;) {
    int fd;
    {
      std::unique_lock<std::mutex> lock(c.mu);
      c.cv.wait(lock, [&c] { return !c.queue.empty(); });
      fd = c.queue.front();
      c.queue.pop_front();
    }
    if (c.defuse.load(std::memory_order_relaxed)) Defuse(fd);
    (void)close(fd);
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(c.mu);
      size_t left = c.backlog.fetch_sub(1) - 1;
      if (c.high && left < limits::kCloseBacklogResume) {
        c.high = false;
        wake = true;
      }
    }
    if (wake) (void)eventfd_write(c.wake.get(), 1);
  }
  return nullptr;
}

}  // namespace

absl::Status StartAsyncClose() {
  Closer& c = Get();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.started) return absl::OkStatus();
  UniqueFd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) return Errno(errno, "creating the closer's eventfd");
  c.wake = std::move(wake);
  // The closer takes no signal: SIGTERM and SIGINT are for the loop's
  // signalfd, and nothing else is meant for this process.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  pthread_t thread;
  int r = pthread_create(&thread, nullptr, &Run, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (r != 0) return Errno(r, "pthread_create(closer)");
  pthread_detach(thread);
  c.started = true;
  return absl::OkStatus();
}

void AsyncClose(UniqueFd fd) noexcept {
  if (!fd) return;
  Closer& c = Get();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.started) {
      c.queue.push_back(fd.release());
      size_t n = c.backlog.fetch_add(1) + 1;
      if (n >= limits::kCloseBacklogPause) c.high = true;
    }
  }
  if (fd) {
    // No closer thread: defuse and close here (tests, and a start that
    // failed before main gave up).
    if (c.defuse.load(std::memory_order_relaxed)) Defuse(fd.get());
    fd.reset();
    return;
  }
  c.cv.notify_one();
}

void AsyncCloseDiscard(UniqueFd fd) noexcept { AsyncClose(std::move(fd)); }

bool DiscardUntilEof(int conn, uint32_t revents) noexcept {
  // A bounded amount per wakeup: a peer that floods takes its turn.
  uint8_t sink[4096];
  for (int round = 0; round < limits::kLingerReadsPerWakeup; ++round) {
    RecvFdResult r = RecvWithFd(conn, sink, sizeof(sink), MSG_DONTWAIT, &AsyncCloseDiscard);
    AsyncClose(std::move(r.fd));
    if (r.bytes > 0 || r.bytes == -EINTR) continue;
    // EAGAIN on a live connection: the client may still send.
    return !(r.bytes == -EAGAIN && !(revents & (EPOLLHUP | EPOLLERR)));
  }
  return false;  // more is queued: the next wakeup reads on
}

size_t AsyncCloseBacklog() noexcept { return Get().backlog.load(); }

int AsyncCloseWakeFd() noexcept {
  Closer& c = Get();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.wake.get();
}

void AsyncCloseSetDefuseForTesting(bool defuse) noexcept { Get().defuse.store(defuse); }

}  // namespace opencode::daemon
