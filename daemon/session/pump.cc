// The session data path (see pump.h). Reading rules, in one place:
//   AWAIT_START  RecvWithFd (MSG_CMSG_CLOEXEC); the first data segment must carry
//                exactly one descriptor, later ones none;
//   AWAIT_ENV    (START had kStartFlagEnv) the next frame must be ENV, no descriptor;
//   RUNNING      decode a frame only if its effect has room: INPUT needs room
//                in the input queue, control frames need room for a notice;
//                otherwise stop reading the connection (EPOLLIN off);
//   PTY          read only when a whole OUTPUT frame fits the output queue.
// Writing to the client: notices go first at frame boundaries, OUTPUT frames
// in order, the terminal envelope strictly last.
#include "daemon/session/pump.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/frame.h"
#include "common/scm_rights.h"
#include "common/utf8.h"
#include "daemon/base/async_close.h"
#include "daemon/base/status_macros.h"

namespace opencode::daemon {
namespace {

constexpr size_t kHeader = limits::kFrameHeaderBytes;
constexpr size_t kFullOutputFrame = kHeader + limits::kMaxOutputPayload;

// A source waiting for nothing is disabled: epoll reports EPOLLHUP/EPOLLERR
// even with an empty event mask, which would spin the loop on a hung-up peer
// that we deliberately stopped reading.
void SetIo(sd_event_source* s, uint32_t events) noexcept {
  if (s == nullptr) return;
  if (events == 0) {
    sd_event_source_set_enabled(s, SD_EVENT_OFF);
    return;
  }
  sd_event_source_set_io_events(s, events);
  sd_event_source_set_enabled(s, SD_EVENT_ON);
}

bool IoEnabledFor(sd_event_source* s, uint32_t event) noexcept {
  if (s == nullptr) return false;
  int enabled = SD_EVENT_OFF;
  uint32_t events = 0;
  sd_event_source_get_enabled(s, &enabled);
  sd_event_source_get_io_events(s, &events);
  return enabled != SD_EVENT_OFF && (events & event) != 0;
}

// Bytes still to write of the frame at the head of `q` after `n` more bytes
// of it were written, given `left` bytes of that frame were unwritten before.
// Frame boundaries come from frame.h's decoder (these are our own frames).
size_t AdvanceFrames(const ByteQueue& q, size_t left, size_t n) noexcept {
  if (n <= left) return left - n;
  std::span<const uint8_t> rest = q.readable().subspan(left);
  n -= left;
  while (n > 0) {
    DecodeResult d = DecodeFrame(Direction::kFromSupervisor, rest);
    if (d.status != DecodeResult::Status::kFrame) return 0;  // cannot happen: we encoded them
    if (n < d.consumed) return d.consumed - n;
    n -= d.consumed;
    rest = rest.subspan(d.consumed);
  }
  return 0;
}

// Appends one frame of `type` carrying `payload` to `q`, all or nothing.
bool PutFrame(ByteQueue& q, FrameType type, std::span<const uint8_t> payload) noexcept {
  size_t need = kHeader + payload.size();
  if (q.free() < need) return false;
  std::span<uint8_t> dst = q.writable(need);
  if (dst.size() < need) return false;
  EncodeHeader(type, static_cast<uint32_t>(payload.size()), dst.data());
  std::memcpy(dst.data() + kHeader, payload.data(), payload.size());
  q.commit(need);
  return true;
}

std::span<const uint8_t> Bytes(std::string_view s) noexcept {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

size_t FirstFrameSize(const ByteQueue& q) noexcept {
  DecodeResult d = DecodeFrame(Direction::kFromSupervisor, q.readable());
  return d.status == DecodeResult::Status::kFrame ? d.consumed : q.size();
}

}  // namespace

Pump::Pump(sd_event* event, UniqueFd conn, Delegate* delegate)
    : event_(event), conn_(std::move(conn)), delegate_(delegate) {}

// The sources leave epoll before their descriptors go to the closer; the
// client connection and the PTY stream are both writable by unprivileged
// processes, so neither is closed on the loop (async_close.h).
Pump::~Pump() {
  conn_source_.reset();
  pty_source_.reset();
  AsyncClose(std::move(conn_));
  AsyncClose(std::move(pty_));
  AsyncClose(std::move(start_fd_));
}

absl::Status Pump::Init() {
  sd_event_source* s = nullptr;
  int r = sd_event_add_io(event_, &s, conn_.get(), 0, &Pump::OnConnIo, this);
  if (r < 0) return SdError(r, "sd_event_add_io(connection)");
  conn_source_.reset(s);
  sd_event_source_set_priority(s, kPumpPriority);
  r = sd_event_add_defer(event_, &s, &Pump::OnKick, this);
  if (r < 0) return SdError(r, "sd_event_add_defer(pump)");
  kick_.reset(s);
  sd_event_source_set_priority(s, kPumpPriority);
  sd_event_source_set_enabled(s, SD_EVENT_OFF);
  Update();
  return absl::OkStatus();
}

absl::Status Pump::AttachPty(UniqueFd stream) {
  sd_event_source* s = nullptr;
  int r = sd_event_add_io(event_, &s, stream.get(), 0, &Pump::OnPtyIo, this);
  if (r < 0) return SdError(r, "sd_event_add_io(pty stream)");
  pty_ = std::move(stream);
  pty_source_.reset(s);
  sd_event_source_set_priority(s, kPumpPriority);
  Update();
  return absl::OkStatus();
}

void Pump::DetachPty() noexcept {
  pty_source_.reset();
  AsyncClose(std::move(pty_));
  in_.clear();
  pty_detached_ = true;
  output_complete_sent_ = true;  // no EOF will be seen; nothing is "complete"
  Update();
}

void Pump::SetMode(Mode mode) noexcept {
  mode_ = mode;
  if (mode == Mode::kRunning || mode == Mode::kAwaitEnv) Kick();  // frames that arrived early
  Update();
}

void Pump::PauseInput(bool paused) noexcept {
  paused_ = paused;
  if (!paused) Kick();
  Update();
}

void Pump::Kick() noexcept {
  if (kick_) sd_event_source_set_enabled(kick_.get(), SD_EVENT_ONESHOT);
}

int Pump::OnKick(sd_event_source* /*s*/, void* userdata) noexcept {
  auto* self = static_cast<Pump*>(userdata);
  if (self->mode_ == Mode::kRunning) self->ProcessFrames();
  if (self->mode_ == Mode::kAwaitEnv) self->ProcessEnv();
  return 0;
}

bool Pump::QueueEnvelope(std::string_view json) noexcept {
  if (json.size() < 2 || json.size() > limits::kMaxEnvelopeBytes || !conn_) return false;
  if (!PutFrame(env_, FrameType::kEvent, Bytes(json))) return false;
  Update();
  return true;
}

void Pump::QueueTerminal(std::string_view json) noexcept {
  if (terminal_queued_) return;
  static constexpr std::string_view kFallback =
      R"({"type":"error","code":"internal","message":"envelope too large"})";
  if (json.size() < 2 || json.size() > limits::kMaxEnvelopeBytes) json = kFallback;
  terminal_.reserve(kHeader + json.size());
  terminal_.resize(kHeader);
  EncodeHeader(FrameType::kEvent, static_cast<uint32_t>(json.size()),
               reinterpret_cast<uint8_t*>(terminal_.data()));
  terminal_.append(json);
  terminal_queued_ = true;
  mode_ = Mode::kDraining;
  WipeRx();
  Update();
}

void Pump::CloseConnection() noexcept { AsyncClose(ReleaseConnection()); }

UniqueFd Pump::ReleaseConnection() noexcept {
  conn_source_.reset();
  UniqueFd conn = std::move(conn_);
  WipeRx();
  env_.clear();
  out_.clear();
  std::string().swap(terminal_);
  current_ = Current::kNone;
  current_left_ = 0;
  client_gone_ = true;
  Update();
  return conn;
}

size_t Pump::MemoryBytes() const noexcept {
  return rx_.allocated() + in_.allocated() + out_.allocated() + env_.allocated() +
         terminal_.capacity() + (ring_ ? ring_->allocated() : 0);
}

bool Pump::pty_reading() const noexcept { return IoEnabledFor(pty_source_.get(), EPOLLIN); }
bool Pump::conn_reading() const noexcept { return IoEnabledFor(conn_source_.get(), EPOLLIN); }

// POLLHUP on a stream socket: the peer's side is shut in both directions,
// which its last close does. Asked directly, not through conn_source_: the
// source may be off (a half-closed client waiting for its exit envelope).
bool Pump::PeerHungUp() const noexcept {
  if (!conn_) return true;
  struct pollfd p = {.fd = conn_.get(), .events = 0, .revents = 0};
  return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)) != 0;
}

void Pump::Update() noexcept {
  if (conn_source_) {
    uint32_t ev = 0;
    if (!client_eof_ && !client_gone_) {
      switch (mode_) {
        case Mode::kHold:
          ev = EPOLLRDHUP;
          break;
        case Mode::kAwaitStart:
        case Mode::kAwaitEnv:
          ev = EPOLLIN | EPOLLRDHUP;
          break;
        case Mode::kRunning:
          ev = EPOLLRDHUP;
          if (!paused_ && !blocked_ && rx_.free() > 0) ev |= EPOLLIN;
          break;
        case Mode::kDraining:
          ev = EPOLLIN | EPOLLRDHUP;
          break;
      }
    }
    bool want_out = !env_.empty() || !out_.empty() ||
                    (terminal_queued_ && terminal_written_ < terminal_.size());
    if (want_out && !client_gone_) ev |= EPOLLOUT;
    SetIo(conn_source_.get(), ev);
  }
  if (pty_source_) {
    uint32_t ev = 0;
    if (PtyReadable()) ev |= EPOLLIN;
    if (!in_.empty() && !pty_input_dead_) ev |= EPOLLOUT;
    SetIo(pty_source_.get(), ev);
  }
}

// ------------------------------------------------------------- connection

int Pump::OnConnIo(sd_event_source* /*s*/, int /*fd*/, uint32_t revents, void* userdata) noexcept {
  static_cast<Pump*>(userdata)->HandleConn(revents);
  return 0;
}

void Pump::HandleConn(uint32_t revents) noexcept {
  // A full hang-up or error: nothing can be delivered any more; frames still
  // unread are moot because the session ends with the connection.
  if (revents & (EPOLLHUP | EPOLLERR)) return ClientGone();
  if (revents & EPOLLOUT) {
    WriteConn();
    if (client_gone_) return;
  }
  if (revents & EPOLLIN) {
    switch (mode_) {
      case Mode::kAwaitStart:
        return ReadStart();
      case Mode::kAwaitEnv:
        return ReadEnv();
      case Mode::kRunning:
        return ReadRunning();
      case Mode::kDraining:
        return Discard();
      case Mode::kHold:
        break;
    }
  }
  // Half-close seen while not reading (holding, paused or blocked): the
  // client ended the session; what it sent after the blockage is moot.
  if ((revents & EPOLLRDHUP) && !client_eof_) {
    client_eof_ = true;
    Update();
    delegate_->OnClientEof();
  }
}

void Pump::ReadStart() noexcept {
  std::span<uint8_t> w = rx_.writable(rx_.free());
  if (w.empty()) return ClientError(ErrorCode::kInternal);
  RecvFdResult r = RecvWithFd(conn_.get(), w.data(), w.size(), 0, &AsyncCloseDiscard);
  if (r.bytes < 0) {
    if (r.bytes == -EAGAIN || r.bytes == -EINTR) return;
    return ClientGone();
  }
  if (r.error != ErrorCode::kOk) return ClientError(r.error);
  if (r.bytes == 0) {
    client_eof_ = true;
    Update();
    return delegate_->OnClientEof();
  }
  if (!got_first_segment_) {
    got_first_segment_ = true;
    start_fd_ = std::move(r.fd);  // valid iff the first segment carried one
  } else if (r.fd) {
    AsyncClose(std::move(r.fd));
    return ClientError(ErrorCode::kExtraDescriptor);
  }
  rx_.commit(static_cast<size_t>(r.bytes));
  // The first frame's type says whether its first segment had to carry the
  // directory: START does (no_descriptor), LIST and ATTACH must not.
  std::span<const uint8_t> got = rx_.readable();
  if (got.size() < 2) return;
  bool session_request = got[1] == uint8_t(FrameType::kList) || got[1] == uint8_t(FrameType::kAttach);
  if (!session_request && !start_fd_) return ClientError(ErrorCode::kNoDescriptor);
  if (session_request && start_fd_) {
    AsyncClose(std::move(start_fd_));
    return ClientError(ErrorCode::kExtraDescriptor);
  }
  DecodeResult d = DecodeFrame(Direction::kFromClient, got);
  if (d.status == DecodeResult::Status::kError) return ClientError(d.error);
  if (d.status == DecodeResult::Status::kNeedMore) return;
  if (d.type != FrameType::kStart && !session_request) return ClientError(ErrorCode::kProtocolState);
  size_t consumed = d.consumed;
  mode_ = Mode::kHold;  // nothing more is read until the unit runs (or the request is answered)
  Update();
  if (session_request)
    delegate_->OnSessionRequest(d.type, d.payload);
  else
    delegate_->OnStartFrame(d.payload, std::move(start_fd_));
  // Bytes after START (sent early) stay buffered for RUNNING.
  rx_.consume(consumed);
  Update();
}

// What the client sent may hold its environment overlay: zeroed, then freed.
void Pump::WipeRx() noexcept {
  std::span<const uint8_t> r = rx_.readable();
  if (!r.empty()) explicit_bzero(const_cast<uint8_t*>(r.data()), r.size());
  rx_.clear();
}

void Pump::ReadEnv() noexcept {
  std::span<uint8_t> w = rx_.writable(rx_.free());
  if (w.empty()) return ClientError(ErrorCode::kInternal);  // an ENV frame always fits
  if (ReadFrames(w)) ProcessEnv();
}

// One read of the client's frames into `w` (rx_'s free space); no descriptor
// may come with them. True if bytes were added; otherwise nothing has come
// yet, or the client's end or error has been handled (the pump may be gone).
bool Pump::ReadFrames(std::span<uint8_t> w) noexcept {
  RecvFdResult r = RecvWithFd(conn_.get(), w.data(), w.size(), 0, &AsyncCloseDiscard);
  if (r.bytes < 0) {
    if (r.bytes != -EAGAIN && r.bytes != -EINTR) ClientGone();
    return false;
  }
  if (r.error != ErrorCode::kOk) {
    ClientError(r.error);
    return false;
  }
  if (r.fd) {
    AsyncClose(std::move(r.fd));
    ClientError(ErrorCode::kExtraDescriptor);
    return false;
  }
  if (r.bytes == 0) {
    client_eof_ = true;
    Update();
    delegate_->OnClientEof();
    return false;
  }
  rx_.commit(static_cast<size_t>(r.bytes));
  return true;
}

void Pump::ProcessEnv() noexcept {
  if (mode_ != Mode::kAwaitEnv || !conn_ || client_gone_) return;
  DecodeResult d = DecodeFrame(Direction::kFromClient, rx_.readable());
  if (d.status == DecodeResult::Status::kError) return ClientError(d.error);
  if (d.status == DecodeResult::Status::kNeedMore) return;
  if (d.type != FrameType::kEnv) return ClientError(ErrorCode::kProtocolState);
  size_t consumed = d.consumed;
  mode_ = Mode::kHold;  // nothing more is read until the unit runs
  Update();
  delegate_->OnEnvFrame(d.payload);
  // The overlay's bytes do not stay behind in the heap once used (a failure
  // inside the callback already wiped the whole buffer).
  if (rx_.size() >= consumed) explicit_bzero(const_cast<uint8_t*>(rx_.readable().data()), consumed);
  rx_.consume(consumed);
  Update();
}

void Pump::ReadRunning() noexcept {
  std::span<uint8_t> w = rx_.writable(rx_.free());
  if (w.empty()) return Update();
  if (ReadFrames(w)) ProcessFrames();
}

void Pump::Discard() noexcept {
  uint8_t sink[4096];
  RecvFdResult r = RecvWithFd(conn_.get(), sink, sizeof(sink), 0, &AsyncCloseDiscard);
  AsyncClose(std::move(r.fd));
  if (r.bytes < 0 && r.bytes != -EAGAIN && r.bytes != -EINTR) return ClientGone();
  if (r.bytes == 0) {
    client_eof_ = true;
    Update();
  }
}

// A control frame may queue one notice: it is taken only while the notice
// queue has room for one (the terminal envelope has its own reserve); else
// decoding stops (blocked) until the client has read.
bool Pump::RoomForNotice() noexcept {
  if (env_.free() >= kTerminalReserve) return true;
  blocked_ = true;
  return false;
}

void Pump::ProcessFrames() noexcept {
  blocked_ = false;
  while (mode_ == Mode::kRunning && !paused_ && conn_ && !client_gone_) {
    DecodeResult d = DecodeFrame(Direction::kFromClient, rx_.readable());
    if (d.status == DecodeResult::Status::kNeedMore) break;
    if (d.status == DecodeResult::Status::kError) return ClientError(d.error);
    switch (d.type) {
      case FrameType::kInput: {
        if (input_eof_) return ClientError(ErrorCode::kProtocolState);
        if (!IsValidUtf8(d.payload)) return ClientError(ErrorCode::kBadUtf8);
        if (!pty_input_dead_ && !pty_detached_) {
          if (in_.free() < d.payload.size()) {
            blocked_ = true;
            break;
          }
          in_.append(d.payload);
        }
        rx_.consume(d.consumed);
        continue;
      }
      case FrameType::kSignal: {
        uint8_t signo = d.payload[0];
        if (SignalName(signo).empty()) return ClientError(ErrorCode::kBadSignal);
        if (!RoomForNotice()) break;
        rx_.consume(d.consumed);
        delegate_->OnControlFrame(FrameType::kSignal, signo);
        continue;
      }
      case FrameType::kStop:
      case FrameType::kEof: {
        FrameType type = d.type;
        if (type == FrameType::kEof && input_eof_) return ClientError(ErrorCode::kProtocolState);
        if (!RoomForNotice()) break;
        rx_.consume(d.consumed);
        if (type == FrameType::kEof) {
          input_eof_ = true;
          MaybeShutdownPtyInput();
        }
        delegate_->OnControlFrame(type, 0);
        continue;
      }
      case FrameType::kResize: {
        // No notice and no queue: the session keeps only the latest size,
        // so any number of these in one read costs O(1).
        uint16_t cols = 0, rows = 0;
        if (ErrorCode e = ParseResizePayload(d.payload, &cols, &rows); e != ErrorCode::kOk)
          return ClientError(e);
        rx_.consume(d.consumed);
        delegate_->OnResize(cols, rows);
        continue;
      }
      case FrameType::kStart:
      case FrameType::kEnv:  // only right after a START that announced it
        return ClientError(ErrorCode::kProtocolState);
      default:
        return ClientError(ErrorCode::kUnknownType);
    }
    break;  // blocked
  }
  if (!in_.empty()) WritePty();
  Update();
}

void Pump::WriteConn() noexcept {
  // Bounded work per wakeup: a few sends, then back to the loop.
  for (int round = 0; round < 4 && conn_ && !client_gone_; ++round) {
    const uint8_t* data = nullptr;
    size_t len = 0;
    ByteQueue* q = nullptr;
    if (current_ == Current::kNone) {
      if (!env_.empty()) {
        current_ = Current::kEnvelope;
        current_left_ = FirstFrameSize(env_);
      } else if (!out_.empty()) {
        current_ = Current::kOutput;
        current_left_ = FirstFrameSize(out_);
      }
    }
    if (current_ == Current::kEnvelope) {
      q = &env_;
    } else if (current_ == Current::kOutput) {
      q = &out_;
    } else if (terminal_queued_ && terminal_written_ < terminal_.size()) {
      data = reinterpret_cast<const uint8_t*>(terminal_.data()) + terminal_written_;
      len = terminal_.size() - terminal_written_;
    } else {
      break;
    }
    if (q != nullptr) {
      // Envelopes: the current frame only, so the next notice can still go
      // first. Output: everything queued (whole frames, in order).
      data = q->readable().data();
      len = q == &env_ ? current_left_ : q->size();
    }
    ssize_t n = send(conn_.get(), data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      return ClientGone();
    }
    size_t written = static_cast<size_t>(n);
    if (q != nullptr) {
      current_left_ = AdvanceFrames(*q, current_left_, written);
      q->consume(written);
      if (current_left_ == 0) current_ = Current::kNone;
    } else {
      terminal_written_ += written;
      if (terminal_written_ == terminal_.size() && !flushed_sent_) {
        flushed_sent_ = true;
        Update();
        delegate_->OnFlushed();
        return;
      }
    }
    if (written < len) break;  // socket buffer full
  }
  if (ring_ && out_.free() >= kFullOutputFrame) FrameFromRing();
  if (blocked_ && mode_ == Mode::kRunning) Kick();
  CheckOutputComplete();
  Update();
}

// ------------------------------------------------------------- PTY stream

int Pump::OnPtyIo(sd_event_source* /*s*/, int /*fd*/, uint32_t revents, void* userdata) noexcept {
  static_cast<Pump*>(userdata)->HandlePty(revents);
  return 0;
}

void Pump::HandlePty(uint32_t revents) noexcept {
  if (revents & EPOLLHUP) {
    // Both directions are shut: the unit can take no more input.
    pty_input_dead_ = true;
    in_.clear();
  }
  if ((revents & EPOLLOUT) && !pty_input_dead_) WritePty();
  if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) ReadPty();
  Update();
}

// Ordinary: read when a whole OUTPUT frame fits the output queue, while the
// client is there. Ring: while attached, read while the ring has room that
// holds no byte not yet framed for the client; while detached, always (the
// oldest bytes are dropped: a detached session never blocks its command).
bool Pump::PtyReadable() const noexcept {
  if (!pty_ || pty_eof_) return false;
  if (!ring_) return !client_gone_ && out_.free() >= kFullOutputFrame;
  if (detached_) return true;
  return !client_gone_ && ring_->next() - sent_ < ring_->capacity();
}

void Pump::ReadPty() noexcept {
  if (!PtyReadable()) return;
  if (ring_) return ReadPtyIntoRing();
  std::span<uint8_t> w = out_.writable(kFullOutputFrame);
  if (w.size() < kFullOutputFrame) return;
  size_t n = RecvPty(w.subspan(kHeader, limits::kMaxOutputPayload));
  if (n == 0) return;
  EncodeHeader(FrameType::kOutput, static_cast<uint32_t>(n), w.data());
  out_.commit(kHeader + static_cast<size_t>(n));
  WriteConn();  // latency: try now, the socket is usually writable
}

// One read of the PTY stream into `into`: the bytes read, or 0 when there
// was nothing (EAGAIN) or the stream ended (then EOF is handled here).
// recvmsg with room for descriptors: a process in the unit that holds the
// stream's other end may send some; they are closed off the loop and the
// bytes they came with are output like any other.
size_t Pump::RecvPty(std::span<uint8_t> into) noexcept {
  RecvFdResult r = RecvWithFd(pty_.get(), into.data(), into.size(), MSG_DONTWAIT, &AsyncCloseDiscard);
  AsyncClose(std::move(r.fd));
  if (r.bytes > 0) return static_cast<size_t>(r.bytes);
  if (r.bytes == -EAGAIN || r.bytes == -EINTR) return 0;
  // 0, or ECONNRESET and friends: the unit's side is gone, same as EOF.
  pty_eof_ = true;
  Update();
  CheckOutputComplete();
  return 0;
}

void Pump::ReadPtyIntoRing() noexcept {
  size_t room = limits::kMaxOutputPayload;
  if (!detached_) room = std::min<uint64_t>(room, ring_->capacity() - (ring_->next() - sent_));
  std::span<uint8_t> w = ring_->Writable(room);
  if (w.empty()) return;
  size_t n = RecvPty(w);
  if (n == 0) return;
  ring_->Commit(n);
  if (detached_) return;
  FrameFromRing();
  WriteConn();
}

// Cuts OUTPUT frames from the ring's bytes not yet framed, as far as the
// output queue has room (a replay after an attach goes the same way).
void Pump::FrameFromRing() noexcept {
  if (!ring_ || detached_ || !conn_ || client_gone_ || terminal_queued_) return;
  while (sent_ < ring_->next() && out_.free() > kHeader) {
    std::span<const uint8_t> src =
        ring_->Readable(sent_, std::min(limits::kMaxOutputPayload, out_.free() - kHeader));
    if (src.empty() || !PutFrame(out_, FrameType::kOutput, src)) return;
    sent_ += src.size();
  }
}

void Pump::EnableRing(size_t capacity) noexcept {
  ring_ = std::make_unique<OutputRing>(capacity);
  sent_ = 0;
}

UniqueFd Pump::DetachConnection() noexcept {
  UniqueFd conn = ReleaseConnection();
  detached_ = true;
  blocked_ = false;  // what blocked it was this connection's frames
  Update();
  return conn;
}

absl::Status Pump::AttachConnection(UniqueFd conn, uint64_t from) noexcept {
  sd_event_source* s = nullptr;
  int r = sd_event_add_io(event_, &s, conn.get(), 0, &Pump::OnConnIo, this);
  if (r < 0) {
    AsyncClose(std::move(conn));
    return SdError(r, "sd_event_add_io(connection)");
  }
  conn_ = std::move(conn);
  conn_source_.reset(s);
  sd_event_source_set_priority(s, kPumpPriority);
  detached_ = false;
  client_gone_ = false;
  client_eof_ = false;
  flushed_sent_ = false;
  terminal_written_ = 0;
  if (ring_) sent_ = std::clamp(from, ring_->first(), ring_->next());
  // Completeness is judged again for this connection: the replay comes first.
  output_complete_sent_ = false;
  mode_ = Mode::kRunning;
  FrameFromRing();  // the replay; envelopes queued next still go first
  Kick();
  Update();
  return absl::OkStatus();
}

bool Pump::QueueListEntry(std::string_view json) noexcept {
  if (json.size() < 2 || json.size() > limits::kMaxEnvelopeBytes || !conn_) return false;
  if (!PutFrame(out_, FrameType::kEvent, Bytes(json))) return false;
  Update();
  return true;
}

void Pump::WritePty() noexcept {
  if (!pty_ || pty_input_dead_) return;
  if (!in_.empty()) {
    std::span<const uint8_t> src = in_.readable();
    ssize_t n = send(pty_.get(), src.data(), src.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno != EAGAIN && errno != EINTR) {
        // The unit no longer reads its stdin (it exited or closed it): input
        // has nowhere to go, and the exit is reported by the unit's state.
        pty_input_dead_ = true;
        in_.clear();
      }
      Update();
      return;
    }
    in_.consume(static_cast<size_t>(n));
    if (blocked_) Kick();
  }
  MaybeShutdownPtyInput();
  Update();
}

void Pump::EndPtyInput() noexcept {
  pty_input_dead_ = true;
  in_.clear();
  if (blocked_) Kick();  // an INPUT frame that waited for room is discarded now
  Update();
}

void Pump::MaybeShutdownPtyInput() noexcept {
  // EOF from the client becomes a half-close of the PTY stream once every
  // byte before it was written; script turns that into ^D for the command.
  if (input_eof_ && in_.empty() && pty_ && !pty_shut_wr_ && !pty_input_dead_) {
    shutdown(pty_.get(), SHUT_WR);
    pty_shut_wr_ = true;
  }
}

void Pump::CheckOutputComplete() noexcept {
  // Detached, the ring holds the output: it is complete at the PTY's EOF.
  if (output_complete_sent_ || !(pty_eof_ || pty_detached_)) return;
  if (detached_ || (!client_gone_ && output_complete())) {
    output_complete_sent_ = true;
    delegate_->OnOutputComplete();
  }
}

void Pump::ClientError(ErrorCode code) noexcept {
  blocked_ = false;
  delegate_->OnClientError(code);
}

void Pump::ClientGone() noexcept {
  if (client_gone_) return;
  client_gone_ = true;
  Update();
  delegate_->OnClientGone();
}

}  // namespace opencode::daemon
