// The supervisor's D-Bus call throttle over a real sd-bus peer-to-peer
// connection (socketpair) on a private sd-event loop: at most
// kMaxBusCallsInFlight calls wait for replies, the rest wait in FIFO order,
// every handler runs exactly once, and a cancelled call frees its place. When
// the connection ends (systemd re-executing), calls in flight and calls still
// queued all get an error reply, the queued ones from the loop, and nothing
// exits.
#include "daemon/systemd/bus_call.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include <vector>

#include "common/limits.h"

namespace opencode::daemon {
namespace {

struct Loop {
  sd_event* event = nullptr;
  sd_bus* server = nullptr;
  sd_bus* client = nullptr;
  std::vector<sd_bus_message*> held;  // calls the server has not answered yet
  std::vector<uint32_t> order;        // argument of each call, as received

  Loop() {
    EXPECT_GE(sd_event_new(&event), 0);
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
    sd_id128_t id;
    EXPECT_GE(sd_id128_randomize(&id), 0);
    EXPECT_GE(sd_bus_new(&server), 0);
    EXPECT_GE(sd_bus_set_fd(server, sv[0], sv[0]), 0);
    EXPECT_GE(sd_bus_set_server(server, 1, id), 0);
    EXPECT_GE(sd_bus_set_anonymous(server, 1), 0);
    EXPECT_GE(sd_bus_add_filter(server, nullptr, &Loop::OnCall, this), 0);
    EXPECT_GE(sd_bus_start(server), 0);
    EXPECT_GE(sd_bus_attach_event(server, event, 0), 0);
    EXPECT_GE(sd_bus_new(&client), 0);
    EXPECT_GE(sd_bus_set_fd(client, sv[1], sv[1]), 0);
    EXPECT_GE(sd_bus_set_anonymous(client, 1), 0);
    EXPECT_GE(sd_bus_start(client), 0);
    EXPECT_GE(sd_bus_attach_event(client, event, 0), 0);
  }
  ~Loop() {
    for (auto* m : held) sd_bus_message_unref(m);
    sd_bus_flush_close_unref(client);
    if (server != nullptr) sd_bus_flush_close_unref(server);
    sd_event_unref(event);
  }

  static int OnCall(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* self = static_cast<Loop*>(userdata);
    if (!sd_bus_message_is_method_call(m, nullptr, "Ping")) return 0;
    uint32_t n = 0;
    sd_bus_message_read(m, "u", &n);
    self->order.push_back(n);
    self->held.push_back(sd_bus_message_ref(m));
    return 1;
  }

  // Runs the loop until `done` holds (bounded number of iterations).
  template <typename F>
  bool RunUntil(F done) {
    for (int i = 0; i < 10000 && !done(); ++i) sd_event_run(event, 10 * 1000);
    return done();
  }

  void AnswerAll() {
    std::vector<sd_bus_message*> calls;
    calls.swap(held);
    for (auto* m : calls) {
      sd_bus_reply_method_return(m, nullptr);
      sd_bus_message_unref(m);
    }
  }
};

Pending Ping(Loop& l, uint32_t n, std::vector<uint32_t>* replied) {
  sd_bus_message* m = nullptr;
  EXPECT_GE(sd_bus_message_new_method_call(l.client, &m, nullptr, "/x", "t.T", "Ping"), 0);
  EXPECT_GE(sd_bus_message_append(m, "u", n), 0);
  auto p = CallAsync(l.client, m, [replied, n](sd_bus_message* reply) {
    EXPECT_TRUE(ReplyStatus(reply).ok());
    replied->push_back(n);
  });
  sd_bus_message_unref(m);
  EXPECT_TRUE(p.ok());
  return std::move(*p);
}

TEST(BusCallThrottle, AtMostTheLimitWaitForRepliesTheRestQueueInOrder) {
  Loop l;
  const size_t kCalls = limits::kMaxBusCallsInFlight + 36;
  std::vector<uint32_t> replied;
  std::vector<Pending> calls;
  for (uint32_t i = 0; i < kCalls; ++i) calls.push_back(Ping(l, i, &replied));
  EXPECT_EQ(BusCallsInFlight(), limits::kMaxBusCallsInFlight);
  EXPECT_EQ(BusCallsWaiting(), kCalls - limits::kMaxBusCallsInFlight);
  ASSERT_TRUE(l.RunUntil([&] { return l.held.size() == limits::kMaxBusCallsInFlight; }));
  // The server never sees more than the limit while it does not answer.
  for (int i = 0; i < 20; ++i) sd_event_run(l.event, 1000);
  EXPECT_EQ(l.held.size(), limits::kMaxBusCallsInFlight);
  // Answering frees places; the queued calls follow in FIFO order.
  while (replied.size() < kCalls) {
    l.AnswerAll();
    ASSERT_TRUE(l.RunUntil([&] { return !l.held.empty() || replied.size() == kCalls; }));
  }
  ASSERT_EQ(l.order.size(), kCalls);
  for (uint32_t i = 0; i < kCalls; ++i) EXPECT_EQ(l.order[i], i);
  EXPECT_EQ(replied.size(), kCalls);  // every handler ran exactly once
  EXPECT_EQ(BusCallsInFlight(), 0u);
  EXPECT_EQ(BusCallsWaiting(), 0u);
}

TEST(BusCallThrottle, CancellingFreesPlacesAndRemovesQueuedCalls) {
  Loop l;
  std::vector<uint32_t> replied;
  std::vector<Pending> calls;
  for (uint32_t i = 0; i < limits::kMaxBusCallsInFlight + 2; ++i) calls.push_back(Ping(l, i, &replied));
  EXPECT_EQ(BusCallsWaiting(), 2u);
  calls.back().reset();  // a queued call cancelled: it never reaches the bus
  EXPECT_EQ(BusCallsWaiting(), 1u);
  calls.front().reset();  // an in-flight call cancelled: the queued one takes its place
  EXPECT_EQ(BusCallsWaiting(), 0u);
  EXPECT_EQ(BusCallsInFlight(), limits::kMaxBusCallsInFlight);
  ASSERT_TRUE(l.RunUntil([&] { return l.order.size() == limits::kMaxBusCallsInFlight + 1; }));
  l.AnswerAll();
  ASSERT_TRUE(l.RunUntil([&] { return replied.size() == limits::kMaxBusCallsInFlight; }));
  for (uint32_t n : replied) {
    EXPECT_NE(n, 0u);                                // cancelled in flight: no callback
    EXPECT_NE(n, limits::kMaxBusCallsInFlight + 1);  // cancelled in the queue: never sent
  }
  for (uint32_t n : l.order) EXPECT_NE(n, limits::kMaxBusCallsInFlight + 1);
  calls.clear();
  EXPECT_EQ(BusCallsInFlight(), 0u);
}

TEST(BusCallThrottle, WhenTheConnectionEndsQueuedCallsGetAnErrorReplyToo) {
  Loop l;
  const size_t kCalls = limits::kMaxBusCallsInFlight + 3;
  std::vector<uint32_t> failed;
  std::vector<Pending> calls;
  for (uint32_t i = 0; i < kCalls; ++i) {
    sd_bus_message* m = nullptr;
    ASSERT_GE(sd_bus_message_new_method_call(l.client, &m, nullptr, "/x", "t.T", "Ping"), 0);
    ASSERT_GE(sd_bus_message_append(m, "u", i), 0);
    auto p = CallAsync(l.client, m, [&failed, i](sd_bus_message* reply) {
      EXPECT_FALSE(ReplyStatus(reply).ok());
      failed.push_back(i);
    });
    sd_bus_message_unref(m);
    ASSERT_TRUE(p.ok());
    calls.push_back(std::move(*p));
  }
  ASSERT_TRUE(l.RunUntil([&] { return l.held.size() == limits::kMaxBusCallsInFlight; }));
  EXPECT_EQ(BusCallsWaiting(), 3u);
  // The peer goes away without answering.
  for (auto* m : l.held) sd_bus_message_unref(m);
  l.held.clear();
  sd_bus_flush_close_unref(l.server);
  l.server = nullptr;
  ASSERT_TRUE(l.RunUntil([&] { return failed.size() == kCalls; }));
  EXPECT_EQ(sd_event_get_state(l.event), SD_EVENT_INITIAL) << "the loop goes on";
  int code = 0;
  EXPECT_LT(sd_event_get_exit_code(l.event, &code), 0) << "nobody asked the loop to exit";
  EXPECT_EQ(BusCallsInFlight(), 0u);
  EXPECT_EQ(BusCallsWaiting(), 0u);
  calls.clear();
}

}  // namespace
}  // namespace opencode::daemon
