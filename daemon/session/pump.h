// The data path of one session: the client connection and the PTY stream,
// their bounded queues, frame decoding and encoding. Invariants: no queue ever
// grows past its limits.h capacity (the whole session stays under
// kSessionMemoryCap); backpressure is only ever "stop reading the side that is
// ahead" by toggling EPOLLIN/EPOLLOUT (a source with nothing to wait for is
// disabled so a hang-up cannot spin the loop); the terminal envelope is always
// written last and always has room.
#pragma once

#include <systemd/sd-event.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/errors.h"
#include "common/frame.h"
#include "common/limits.h"
#include "common/unique_fd.h"
#include "daemon/base/sd_ptr.h"
#include "daemon/session/byte_queue.h"
#include "daemon/session/output_ring.h"

namespace opencode::daemon {

class Pump {
 public:
  // Callbacks into the session. None may destroy the Pump synchronously.
  class Delegate {
   public:
    // The complete START frame and the one descriptor that came with it.
    virtual void OnStartFrame(std::span<const uint8_t> payload, UniqueFd dir) noexcept = 0;
    // The complete ENV frame (Mode::kAwaitEnv). Its bytes are zeroed in the
    // buffer once this returns: the overlay carries secrets.
    virtual void OnEnvFrame(std::span<const uint8_t> payload) noexcept = 0;
    // SIGNAL (arg = allowed signal number), STOP or EOF (arg 0) in RUNNING.
    virtual void OnControlFrame(FrameType type, uint8_t arg) noexcept = 0;
    // RESIZE in RUNNING, size already validated (1..1000 each). Must not
    // block: the session only stores it (coalescing, unit_channel.h).
    virtual void OnResize(uint16_t cols, uint16_t rows) noexcept = 0;
    // LIST or ATTACH (payload not yet parsed) instead of START, no descriptor
    // (docs/PROTOCOL.md section 10.4). Mode is kHold when this is called.
    virtual void OnSessionRequest(FrameType type, std::span<const uint8_t> payload) noexcept = 0;
    // The client broke the protocol; the session ends with `code`.
    virtual void OnClientError(ErrorCode code) noexcept = 0;
    // The client shut down its sending side (it may still read).
    virtual void OnClientEof() noexcept = 0;
    // The client is gone: nothing more can be delivered.
    virtual void OnClientGone() noexcept = 0;
    // The PTY stream reached EOF and every byte read from it was written to
    // the client socket.
    virtual void OnOutputComplete() noexcept = 0;
    // The terminal envelope and everything before it were written.
    virtual void OnFlushed() noexcept = 0;

   protected:
    ~Delegate() = default;
  };

  enum class Mode {
    kHold,        // read nothing; notice a hang-up (authenticating, starting)
    kAwaitStart,  // read the START frame and its descriptor
    kAwaitEnv,    // read the ENV frame (no descriptor); any other frame is protocol_state
    kRunning,     // pump both ways
    kDraining,    // after the terminal envelope: read and discard
  };

  Pump(sd_event* event, UniqueFd conn, Delegate* delegate);
  ~Pump();
  Pump(const Pump&) = delete;
  Pump& operator=(const Pump&) = delete;

  absl::Status Init();
  void SetMode(Mode mode) noexcept;
  Mode mode() const noexcept { return mode_; }

  // The supervisor's end of the PTY stream (nonblocking, close-on-exec).
  absl::Status AttachPty(UniqueFd stream);
  // Closes the PTY stream (what was read stays queued for the client).
  void DetachPty() noexcept;

  // A detachable session (docs/PROTOCOL.md section 10): from now on every
  // byte read from the PTY goes into a ring of `capacity` bytes, and OUTPUT
  // frames are cut from the ring. Call before AttachPty.
  void EnableRing(size_t capacity) noexcept;
  const OutputRing* ring() const noexcept { return ring_.get(); }
  // Detach: the connection is handed to the caller (to close) with nothing
  // queued for it; the PTY is read into the ring with no backpressure (the
  // oldest bytes are dropped) until AttachConnection.
  UniqueFd DetachConnection() noexcept;
  bool detached() const noexcept { return detached_; }
  // Attach `conn`: OUTPUT resumes from cursor `from` (first() <= from <=
  // next()), after the envelopes queued next (attached goes first).
  absl::Status AttachConnection(UniqueFd conn, uint64_t from) noexcept;
  // A queued envelope that may be larger than the notice queue holds (LIST's
  // entries): written into the output queue, in order with OUTPUT.
  bool QueueListEntry(std::string_view json) noexcept;

  // A non-terminal envelope (started, notice). False if its reserve is full;
  // the pump stops decoding control frames before that can happen.
  bool QueueEnvelope(std::string_view json) noexcept;
  // The last envelope (exit or error): written after all queued output and
  // envelopes, then OnFlushed(); reading switches to discard.
  void QueueTerminal(std::string_view json) noexcept;

  // The command ended: queued input is dropped and INPUT frames are read and
  // discarded from now on (the session still decodes control frames).
  void EndPtyInput() noexcept;

  // Stops decoding client frames (a control request is in flight).
  void PauseInput(bool paused) noexcept;
  // True once the connection's other end is shut in both directions: every
  // holder closed it (or shut it down), so nothing more can come or be
  // delivered, whether or not the hang-up's event has been dispatched yet.
  bool PeerHungUp() const noexcept;
  // Drops the client connection (after OnFlushed or OnClientGone).
  void CloseConnection() noexcept;
  // The same, but hands the connection to the caller (a lingering close).
  UniqueFd ReleaseConnection() noexcept;

  bool connected() const noexcept { return conn_.valid(); }
  bool output_complete() const noexcept {
    return (pty_eof_ || pty_detached_) && out_.empty() && (!ring_ || sent_ == ring_->next());
  }
  // Heap bytes held by this session's buffers right now.
  size_t MemoryBytes() const noexcept;
  size_t output_queued() const noexcept { return out_.size(); }
  size_t input_queued() const noexcept { return in_.size(); }
  bool pty_reading() const noexcept;
  bool conn_reading() const noexcept;

  // Capacity of the non-terminal envelope queue: the terminal envelope's room
  // is carved out of kEnvelopeQueueBytes so it can always be queued.
  static constexpr size_t kTerminalReserve = limits::kFrameHeaderBytes + limits::kMaxEnvelopeBytes;
  static constexpr size_t kNoticeQueueBytes = limits::kEnvelopeQueueBytes - kTerminalReserve;

 private:
  static int OnConnIo(sd_event_source* s, int fd, uint32_t revents, void* userdata) noexcept;
  static int OnPtyIo(sd_event_source* s, int fd, uint32_t revents, void* userdata) noexcept;
  static int OnKick(sd_event_source* s, void* userdata) noexcept;
  void Kick() noexcept;
  void HandleConn(uint32_t revents) noexcept;
  void HandlePty(uint32_t revents) noexcept;
  void ReadStart() noexcept;
  void ReadEnv() noexcept;
  bool ReadFrames(std::span<uint8_t> w) noexcept;
  void ProcessEnv() noexcept;
  void WipeRx() noexcept;
  void ReadRunning() noexcept;
  void Discard() noexcept;
  bool RoomForNotice() noexcept;
  void ProcessFrames() noexcept;
  void WriteConn() noexcept;
  void ReadPty() noexcept;
  size_t RecvPty(std::span<uint8_t> into) noexcept;
  void ReadPtyIntoRing() noexcept;
  void FrameFromRing() noexcept;
  bool PtyReadable() const noexcept;
  void WritePty() noexcept;
  void MaybeShutdownPtyInput() noexcept;
  void CheckOutputComplete() noexcept;
  void ClientError(ErrorCode code) noexcept;
  void ClientGone() noexcept;
  void Update() noexcept;

  sd_event* event_;
  UniqueFd conn_;
  UniqueFd pty_;
  Delegate* delegate_;
  EventSourcePtr conn_source_;
  EventSourcePtr pty_source_;
  // Decodes frames already buffered when input resumes (after a pause or the
  // switch to RUNNING) from the loop, never from inside a caller's callback.
  EventSourcePtr kick_;
  Mode mode_ = Mode::kHold;

  // Client -> supervisor: undecoded bytes (one START or ENV frame fits).
  ByteQueue rx_{limits::kFrameHeaderBytes + limits::kMaxFramePayload};
  // INPUT payloads waiting for the PTY.
  ByteQueue in_{limits::kInputQueueBytes};
  // OUTPUT frames waiting for the client.
  ByteQueue out_{limits::kOutputQueueBytes};
  // EVENT frames (started, notices) waiting for the client.
  ByteQueue env_{kNoticeQueueBytes};
  // A detachable session's output (null otherwise) and the cursor of the
  // next ring byte to be framed into out_.
  std::unique_ptr<OutputRing> ring_;
  uint64_t sent_ = 0;
  bool detached_ = false;
  // The terminal EVENT frame, at most kTerminalReserve bytes.
  std::string terminal_;
  size_t terminal_written_ = 0;
  bool terminal_queued_ = false;

  // Which queue the frame being written belongs to, and its unwritten bytes.
  enum class Current { kNone, kEnvelope, kOutput } current_ = Current::kNone;
  size_t current_left_ = 0;

  bool got_first_segment_ = false;  // AWAIT_START: the descriptor's segment
  UniqueFd start_fd_;
  bool paused_ = false;
  bool blocked_ = false;      // a decoded frame waits for queue room
  bool client_eof_ = false;   // the client's sending side is shut
  bool client_gone_ = false;
  bool pty_eof_ = false;
  bool pty_input_dead_ = false;  // the unit stopped reading its stdin
  bool input_eof_ = false;       // the client sent EOF
  bool pty_shut_wr_ = false;
  bool pty_detached_ = false;
  bool output_complete_sent_ = false;
  bool flushed_sent_ = false;
};

}  // namespace opencode::daemon
