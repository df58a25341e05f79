// A session's data path kept busy from other threads: one Pump in RUNNING on
// real socketpairs, with threads that write OUTPUT into its PTY stream and
// INPUT frames into its connection as fast as they can, and read both back.
// Its sources are ready on almost every loop iteration, which is what a
// streaming terminal (`yes`, a build log, a paste) does to the supervisor.
#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/frame.h"
#include "common/limits.h"
#include "daemon/session/pump.h"

namespace opencode::daemon::testing {

class StreamingLoad final : public Pump::Delegate {
 public:
  explicit StreamingLoad(sd_event* event) {
    int c[2], p[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c);
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p);
    for (int fd : {c[0], p[0]}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    client_ = UniqueFd(c[1]);
    unit_ = UniqueFd(p[1]);
    pump_ = std::make_unique<Pump>(event, UniqueFd(c[0]), this);
    ok_ = pump_->Init().ok() && pump_->AttachPty(UniqueFd(p[0])).ok();
    pump_->SetMode(Pump::Mode::kRunning);
    std::string input;
    AppendFrame(FrameType::kInput, std::string(limits::kMaxInputPayload, 'i'), &input);
    std::string output(limits::kMaxOutputPayload, 'o');
    threads_.emplace_back([this, output] { Write(unit_.get(), output); });
    threads_.emplace_back([this, input] { Write(client_.get(), input); });
    threads_.emplace_back([this] { Read(client_.get()); });
    threads_.emplace_back([this] { Read(unit_.get()); });
  }
  ~StreamingLoad() {
    stop_ = true;
    // Unblocks the threads' reads and writes.
    shutdown(client_.get(), SHUT_RDWR);
    shutdown(unit_.get(), SHUT_RDWR);
    for (auto& t : threads_) t.join();
  }
  bool ok() const { return ok_; }
  bool failed() const { return failed_; }
  size_t bytes_read() const { return read_.load(); }

 private:
  void Write(int fd, const std::string& data) {
    while (!stop_ && send(fd, data.data(), data.size(), MSG_NOSIGNAL) > 0) {
    }
  }
  void Read(int fd) {
    std::vector<char> buf(256 * 1024);
    ssize_t n;
    while (!stop_ && (n = recv(fd, buf.data(), buf.size(), 0)) > 0) read_ += size_t(n);
  }
  void OnStartFrame(std::span<const uint8_t>, UniqueFd) noexcept override { failed_ = true; }
  void OnEnvFrame(std::span<const uint8_t>) noexcept override { failed_ = true; }
  void OnControlFrame(FrameType, uint8_t) noexcept override { failed_ = true; }
  void OnResize(uint16_t, uint16_t) noexcept override { failed_ = true; }
  void OnSessionRequest(FrameType, std::span<const uint8_t>) noexcept override { failed_ = true; }
  void OnClientError(ErrorCode) noexcept override { failed_ = true; }
  void OnClientEof() noexcept override {}
  void OnClientGone() noexcept override {}
  void OnOutputComplete() noexcept override {}
  void OnFlushed() noexcept override {}

  UniqueFd client_, unit_;
  std::unique_ptr<Pump> pump_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> read_{0};
  bool ok_ = false;
  bool failed_ = false;
};

}  // namespace opencode::daemon::testing
