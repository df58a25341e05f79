// Asynchronous D-Bus calls against a real sd-bus peer (a peer-to-peer
// connection on a socketpair, served by sd-bus in this process): error replies
// keep their D-Bus error name, a call systemd never answers ends after
// kBusCallTimeoutUsec, and destroying the handle cancels the callback.
#include <sys/socket.h>
#include <systemd/sd-id128.h>

#include <gtest/gtest.h>

#include <chrono>

#include "common/limits.h"
#include "daemon/systemd/bus_call.h"
#include "daemon/systemd/constants.h"
#include "tests/daemon_test_util.h"

namespace opencode::daemon {
namespace {

struct BusPair : ::testing::Test {
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
    sd_id128_t id;
    sd_id128_randomize(&id);
    sd_bus* s = nullptr;
    sd_bus_new(&s);
    sd_bus_set_fd(s, sv[0], sv[0]);
    sd_bus_set_server(s, 1, id);
    sd_bus_set_anonymous(s, 1);
    ASSERT_GE(sd_bus_start(s), 0);
    server.reset(s);
    sd_bus* c = nullptr;
    sd_bus_new(&c);
    sd_bus_set_fd(c, sv[1], sv[1]);
    sd_bus_set_anonymous(c, 1);
    ASSERT_GE(sd_bus_start(c), 0);
    client.reset(c);
    sd_bus_attach_event(server.get(), event.get(), 0);
    sd_bus_attach_event(client.get(), event.get(), 0);
    sd_bus_slot* slot = nullptr;
    ASSERT_GE(sd_bus_add_object(server.get(), &slot, kSystemdPath, &BusPair::Serve, this), 0);
    object.reset(slot);
  }
  void TearDown() override {
    object.reset();
    sd_bus_close_unref(client.release());
    sd_bus_close_unref(server.release());
  }
  // GetUnit: NoSuchUnit; Subscribe: a plain return; anything else: never answered.
  static int Serve(sd_bus_message* m, void* userdata, sd_bus_error* error) {
    auto* self = static_cast<BusPair*>(userdata);
    ++self->served;
    if (sd_bus_message_is_method_call(m, kManagerInterface, "GetUnit"))
      return sd_bus_reply_method_errorf(m, "org.freedesktop.systemd1.NoSuchUnit", "Unit %s not loaded.", "x");
    if (sd_bus_message_is_method_call(m, kManagerInterface, "Subscribe"))
      return sd_bus_reply_method_return(m, nullptr);
    (void)error;
    return 1;  // handled, no reply: a systemd that never answers
  }
  absl::StatusOr<Pending> Call(const char* member, absl::Status* out, bool* called) {
    auto m = NewManagerCall(client.get(), member);
    if (!m.ok()) return m.status();
    if (std::string(member) == "GetUnit") sd_bus_message_append(m->get(), "s", "x.service");
    return CallAsync(client.get(), m->get(), [out, called](sd_bus_message* reply) {
      *called = true;
      *out = ReplyStatus(reply);
    });
  }
  EventPtr event = testing::NewEvent();
  std::unique_ptr<sd_bus, void (*)(sd_bus*)> server{nullptr, [](sd_bus* b) { sd_bus_close_unref(b); }};
  std::unique_ptr<sd_bus, void (*)(sd_bus*)> client{nullptr, [](sd_bus* b) { sd_bus_close_unref(b); }};
  SlotPtr object;
  int served = 0;
};

TEST_F(BusPair, ErrorRepliesKeepTheirName) {
  absl::Status st;
  bool called = false;
  auto pending = Call("GetUnit", &st, &called);
  ASSERT_TRUE(pending.ok()) << pending.status();
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return called; }));
  EXPECT_TRUE(IsBusError(st, "org.freedesktop.systemd1.NoSuchUnit")) << st;
  EXPECT_FALSE(IsBusError(st, "org.freedesktop.systemd1.NoSuch"));
  EXPECT_FALSE(IsBusError(absl::OkStatus(), "org.freedesktop.systemd1.NoSuchUnit"));
}

TEST_F(BusPair, MethodReturnIsOk) {
  absl::Status st = absl::UnknownError("unset");
  bool called = false;
  auto pending = Call("Subscribe", &st, &called);
  ASSERT_TRUE(pending.ok());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return called; }));
  EXPECT_TRUE(st.ok()) << st;
}

TEST_F(BusPair, DestroyingTheHandleCancelsTheCallback) {
  absl::Status st;
  bool called = false;
  auto pending = Call("GetUnit", &st, &called);
  ASSERT_TRUE(pending.ok());
  pending->reset();
  testing::RunFor(event.get(), 100);
  EXPECT_EQ(served, 1) << "the call went out";
  EXPECT_FALSE(called) << "but nobody is told";
}

TEST_F(BusPair, UnansweredCallEndsAfterTheBusCallTimeout) {
  absl::Status st;
  bool called = false;
  auto t0 = std::chrono::steady_clock::now();
  auto pending = Call("StopUnit", &st, &called);
  ASSERT_TRUE(pending.ok());
  ASSERT_TRUE(testing::RunUntil(event.get(), [&] { return called; },
                                static_cast<int>(limits::kBusCallTimeoutUsec / 1000) + 30000));
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_GE(waited.count(), static_cast<long>(limits::kBusCallTimeoutUsec / 1000) - 100);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(IsBusError(st, "org.freedesktop.DBus.Error.NoReply")) << st;
}

}  // namespace
}  // namespace opencode::daemon
