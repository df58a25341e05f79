// Shared helpers of the daemon unit tests: a private sd-event loop runner,
// D-Bus messages built on an unconnected sd_bus (for the pure decoders), and
// FakeSystemd, the one injected stand-in (it counts and answers the
// supervisor's unit calls; systemd itself is exercised in vm-tests).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/frame.h"
#include "common/unique_fd.h"
#include "daemon/base/sd_ptr.h"
#include "daemon/systemd/bus_props.h"
#include "daemon/systemd/systemd_api.h"

namespace opencode::daemon::testing {

using ::opencode::UniqueFd;

inline uint64_t NowUsec(sd_event* e) {
  uint64_t now = 0;
  sd_event_now(e, CLOCK_MONOTONIC, &now);
  return now;
}

// Runs the loop until `done()` or `timeout_ms` of wall time; true if done.
inline bool RunUntil(sd_event* e, const std::function<bool()>& done, int timeout_ms = 5000) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (sd_event_run(e, 10 * 1000) < 0) return false;
  }
  return true;
}

// Runs the loop for `ms` milliseconds (to show that nothing more happens).
inline void RunFor(sd_event* e, int ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < deadline) sd_event_run(e, 5 * 1000);
}

inline EventPtr NewEvent() {
  sd_event* e = nullptr;
  sd_event_new(&e);
  return EventPtr(e);
}

// An sd_bus that can build messages without a bus daemon: sd-bus refuses to
// create messages on a bus that was never started, so it is "started" on one
// end of a socketpair nobody answers.
class MessageFactory {
 public:
  MessageFactory() {
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
    peer_ = sv[1];
    sd_bus* b = nullptr;
    sd_bus_new(&b);
    sd_bus_set_fd(b, sv[0], sv[0]);
    sd_bus_start(b);
    bus_ = b;
  }
  ~MessageFactory() {
    // Not BusPtr's flush: nobody reads the other end, a flush would block.
    sd_bus_close_unref(bus_);
    close(peer_);
  }
  sd_bus* bus() { return bus_; }

  // A sealed method return whose body `fill` writes; rewound for reading.
  MessagePtr Reply(const std::function<void(sd_bus_message*)>& fill) {
    sd_bus_message* call = nullptr;
    sd_bus_message_new_method_call(bus(), &call, "org.freedesktop.systemd1", "/x",
                                   "org.freedesktop.DBus.Properties", "GetAll");
    MessagePtr c(call);
    sd_bus_message_seal(call, ++cookie_, 0);
    sd_bus_message* reply = nullptr;
    sd_bus_message_new_method_return(call, &reply);
    MessagePtr r(reply);
    fill(reply);
    sd_bus_message_seal(reply, ++cookie_, 0);
    sd_bus_message_rewind(reply, 1);
    return r;
  }

  // A sealed signal from `sender`, rewound.
  MessagePtr Signal(const char* path, const char* interface, const char* member, const char* sender,
                    const std::function<void(sd_bus_message*)>& fill) {
    sd_bus_message* m = nullptr;
    sd_bus_message_new_signal(bus(), &m, path, interface, member);
    MessagePtr p(m);
    sd_bus_message_set_sender(m, sender);
    fill(m);
    sd_bus_message_seal(m, ++cookie_, 0);
    sd_bus_message_rewind(m, 1);
    return p;
  }

 private:
  sd_bus* bus_ = nullptr;
  int peer_ = -1;
  uint64_t cookie_ = 0;
};

// One a{sv} entry writer per type, for building GetAll replies by hand.
struct Prop {
  std::string name;
  std::function<void(sd_bus_message*)> write;  // appends the variant
};
inline Prop S(std::string name, std::string v) {
  return {std::move(name), [v](sd_bus_message* m) { sd_bus_message_append(m, "v", "s", v.c_str()); }};
}
inline Prop U(std::string name, uint32_t v) {
  return {std::move(name), [v](sd_bus_message* m) { sd_bus_message_append(m, "v", "u", v); }};
}
inline Prop T(std::string name, uint64_t v) {
  return {std::move(name), [v](sd_bus_message* m) { sd_bus_message_append(m, "v", "t", v); }};
}
inline Prop B(std::string name, bool v) {
  return {std::move(name), [v](sd_bus_message* m) { sd_bus_message_append(m, "v", "b", (int)v); }};
}
inline Prop Bytes(std::string name, std::vector<uint8_t> v) {
  return {std::move(name), [v](sd_bus_message* m) {
            sd_bus_message_open_container(m, 'v', "ay");
            sd_bus_message_append_array(m, 'y', v.data(), v.size());
            sd_bus_message_close_container(m);
          }};
}
inline void WriteProps(sd_bus_message* m, const std::vector<Prop>& props) {
  sd_bus_message_open_container(m, 'a', "{sv}");
  for (const Prop& p : props) {
    sd_bus_message_open_container(m, 'e', "sv");
    sd_bus_message_append_basic(m, 's', p.name.c_str());
    p.write(m);
    sd_bus_message_close_container(m);
  }
  sd_bus_message_close_container(m);
}

// The supervisor's unit calls, recorded and answered by the test.
class FakeSystemd final : public SystemdApi {
 public:
  struct Call {
    std::string method;
    std::string unit;
    int signo = 0;
    uint64_t weight = 0;  // SetCpuWeight
    int stream_fd = -1;  // StartUnit: a duplicate the test may use as the unit's end
    std::shared_ptr<UnitRequest> request;
    Done done;
    SnapshotDone snapshot;
    GoneDone gone;
    ListDone list;
    bool cancelled = false;
    bool answered = false;
  };
  using CallPtr = std::shared_ptr<Call>;

  ~FakeSystemd() override {
    for (auto& c : calls_)
      if (c->stream_fd >= 0) close(c->stream_fd);
  }

  // From now on every call of `method` fails at once, before anything is
  // sent, with `why` (as sd_bus_call_async does with ENOTCONN once systemd's
  // connection is closing); an OK status ends that.
  void FailSynchronously(const std::string& method, absl::Status why) {
    if (why.ok())
      sync_failures_.erase(method);
    else
      sync_failures_[method] = std::move(why);
  }

  absl::StatusOr<Pending> StartUnit(const UnitRequest& req, int stream_fd, int dir_fd,
                                    Done done) override {
    (void)dir_fd;
    if (auto f = sync_failures_.find("StartUnit"); f != sync_failures_.end()) return f->second;
    auto c = Record("StartUnit", req.unit_name);
    c->request = std::make_shared<UnitRequest>(req);
    c->stream_fd = fcntl(stream_fd, F_DUPFD_CLOEXEC, 3);
    c->done = std::move(done);
    return Handle(c);
  }
  absl::StatusOr<Pending> QueryUnit(const std::string& unit, SnapshotDone done) override {
    if (auto f = sync_failures_.find("QueryUnit"); f != sync_failures_.end()) return f->second;
    auto c = Record("QueryUnit", unit);
    c->snapshot = std::move(done);
    return Handle(c);
  }
  absl::StatusOr<Pending> QueryGone(const std::string& unit, GoneDone done) override {
    if (auto f = sync_failures_.find("QueryGone"); f != sync_failures_.end()) return f->second;
    auto c = Record("QueryGone", unit);
    c->gone = std::move(done);
    return Handle(c);
  }
  absl::StatusOr<Pending> StopUnit(const std::string& unit, Done done) override {
    if (auto f = sync_failures_.find("StopUnit"); f != sync_failures_.end()) return f->second;
    auto c = Record("StopUnit", unit);
    c->done = std::move(done);
    return Handle(c);
  }
  absl::StatusOr<Pending> ResetFailedUnit(const std::string& unit, Done done) override {
    if (auto f = sync_failures_.find("ResetFailedUnit"); f != sync_failures_.end()) return f->second;
    auto c = Record("ResetFailedUnit", unit);
    c->done = std::move(done);
    return Handle(c);
  }
  absl::StatusOr<Pending> SetCpuWeight(const std::string& unit, uint64_t weight, Done done) override {
    if (auto f = sync_failures_.find("SetCpuWeight"); f != sync_failures_.end()) return f->second;
    auto c = Record("SetCpuWeight", unit);
    c->weight = weight;
    c->done = std::move(done);
    return Handle(c);
  }
  absl::StatusOr<Pending> ListSessionUnits(ListDone done) override {
    auto c = Record("ListSessionUnits", "");
    c->list = std::move(done);
    return Handle(c);
  }

  size_t Count(const std::string& method) const {
    size_t n = 0;
    for (const auto& c : calls_)
      if (c->method == method) ++n;
    return n;
  }
  // The oldest unanswered, uncancelled call of `method`, or null.
  CallPtr Pending_(const std::string& method) const {
    for (const auto& c : calls_)
      if (c->method == method && !c->answered && !c->cancelled) return c;
    return nullptr;
  }
  bool Answer(const std::string& method, absl::Status st) {
    auto c = Take(method);
    if (!c) return false;
    auto done = c->done;
    done(st);
    return true;
  }
  // One proof step of a Reaper: its ResetFailedUnit (answered OK) if one is
  // pending, then its GetUnit (`gone`: NoSuchUnit).
  bool AnswerGone(bool gone) {
    Answer("ResetFailedUnit", absl::OkStatus());
    auto c = Take("QueryGone");
    if (!c) return false;
    auto done = c->gone;
    done(gone);
    return true;
  }
  bool AnswerSnapshot(absl::StatusOr<UnitSnapshot> s) {
    auto c = Take("QueryUnit");
    if (!c) return false;
    auto done = c->snapshot;
    done(std::move(s));
    return true;
  }
  const std::vector<CallPtr>& calls() const { return calls_; }

 private:
  class Handle_ final : public PendingCall {
   public:
    explicit Handle_(CallPtr c) : c_(std::move(c)) {}
    ~Handle_() override {
      if (!c_->answered) c_->cancelled = true;
    }

   private:
    CallPtr c_;
  };
  std::map<std::string, absl::Status> sync_failures_;
  CallPtr Record(const char* method, const std::string& unit) {
    auto c = std::make_shared<Call>();
    c->method = method;
    c->unit = unit;
    calls_.push_back(c);
    return c;
  }
  static absl::StatusOr<Pending> Handle(const CallPtr& c) {
    return Pending(std::make_unique<Handle_>(c));
  }
  CallPtr Take(const std::string& method) {
    auto c = Pending_(method);
    if (c) c->answered = true;
    return c;
  }
  std::vector<CallPtr> calls_;
};

// Reads every frame the pump writes to the client end.
struct ClientReader {
  explicit ClientReader(int fd) : fd(fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }
  // Drains what is available; returns false on EOF.
  bool Drain() {
    uint8_t buf[65536];
    for (;;) {
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n == 0) return false;
      if (n < 0) return true;
      pending.append(reinterpret_cast<char*>(buf), static_cast<size_t>(n));
      for (;;) {
        auto d = DecodeFrame(Direction::kFromSupervisor,
                             {reinterpret_cast<const uint8_t*>(pending.data()), pending.size()});
        if (d.status != DecodeResult::Status::kFrame) break;
        if (d.type == FrameType::kOutput) {
          output.append(reinterpret_cast<const char*>(d.payload.data()), d.payload.size());
          order.push_back("output");
        } else {
          events.emplace_back(reinterpret_cast<const char*>(d.payload.data()), d.payload.size());
          order.push_back("event");
          output_at_event.push_back(output.size());
        }
        pending.erase(0, d.consumed);
      }
    }
  }
  int fd;
  std::string pending, output;
  std::vector<std::string> events, order;
  std::vector<size_t> output_at_event;
};

// A loopback TCP connection whose client end's final close() sleeps for
// `linger_s` seconds: SO_LINGER {1, linger_s} and a send queue the peer never
// reads. What an unprivileged peer can put in flight to the supervisor.
// Handing it over: send `client` with SCM_RIGHTS, then Release() our copy, so
// that the receiver's close is the last one. The destructor resets the peer
// end, which ends any close still lingering (also at process exit).
class LingeringSocket {
 public:
  explicit LingeringSocket(int linger_s = 30) {
    UniqueFd l(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(l.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 || listen(l.get(), 1) < 0 ||
        getsockname(l.get(), reinterpret_cast<sockaddr*>(&a), &len) < 0)
      return;
    client_ = UniqueFd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (connect(client_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) return;
    server_ = UniqueFd(accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC));
    // Fill the send queue: the server end never reads.
    fcntl(client_.get(), F_SETFL, fcntl(client_.get(), F_GETFL) | O_NONBLOCK);
    std::string chunk(65536, 'x');
    while (send(client_.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL) > 0) {
    }
    struct linger lg = {1, linger_s};
    setsockopt(client_.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    ok_ = server_.valid();
  }
  ~LingeringSocket() { ResetPeer(); }
  // The peer end resets the connection: a close lingering on it ends now.
  void ResetPeer() {
    struct linger reset = {1, 0};
    if (server_) setsockopt(server_.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    server_.reset();
  }
  bool ok() const { return ok_; }
  int client() const { return client_.get(); }
  void Release() { client_.reset(); }

 private:
  UniqueFd client_, server_;
  bool ok_ = false;
};

// Whether the loop is free: a timer due in 50 ms fires before `bound_ms` of
// wall time have passed, far from the 30 s a lingering close would take.
inline bool LoopAnswers(sd_event* e, int bound_ms = 10000) {
  bool fired = false;
  sd_event_source* s = nullptr;
  sd_event_add_time_relative(
      e, &s, CLOCK_MONOTONIC, 50 * 1000, 0,
      [](sd_event_source*, uint64_t, void* fired) -> int {
        *static_cast<bool*>(fired) = true;
        return 0;
      },
      &fired);
  EventSourcePtr timer(s);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(bound_ms);
  while (!fired && std::chrono::steady_clock::now() < deadline) sd_event_run(e, 10 * 1000);
  return fired;
}

}  // namespace opencode::daemon::testing
