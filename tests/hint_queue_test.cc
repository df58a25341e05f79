// The bounded, coalescing signal queue: the pilot's TestBoundedSignalHandler-
// DropsFlood (10,000 signals into a handler of capacity 1 -> queue length
// exactly 1), and the same flood through the real match handler.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "daemon/systemd/hint_queue.h"
#include "daemon/systemd/unit_tracker.h"
#include "tests/daemon_test_util.h"

namespace opencode::daemon {
namespace {

using testing::MessageFactory;

std::string UnitName(int i) {
  std::string hex = absl::StrCat(absl::Hex(i, absl::kZeroPad8));
  return absl::StrCat("opencode-pty-", std::string(24, '0'), hex, ".service");
}

TEST(HintQueue, TenThousandSignalsIntoCapacityOneLeaveExactlyOne) {
  HintQueue q(1);
  for (int i = 0; i < 10000; ++i) q.Push(UnitName(i));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_TRUE(q.overflowed());
  HintQueue::Batch b = q.Take();
  EXPECT_EQ(b.units.size(), 1u);
  EXPECT_TRUE(b.overflowed);
  EXPECT_EQ(q.size(), 0u);
  EXPECT_FALSE(q.overflowed());
}

TEST(HintQueue, SameUnitCoalesces) {
  HintQueue q(limits::kSignalQueueCapacity);
  for (int i = 0; i < 10000; ++i) q.Push(UnitName(7));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_FALSE(q.overflowed());
}

TEST(HintQueue, CapacityIsTheLimitsHeaderBound) {
  HintQueue q(limits::kSignalQueueCapacity);
  for (size_t i = 0; i < limits::kSignalQueueCapacity + 100; ++i) q.Push(UnitName(static_cast<int>(i)));
  EXPECT_EQ(q.size(), limits::kSignalQueueCapacity);
  EXPECT_TRUE(q.overflowed());
}

struct CountingWatcher final : UnitWatcher {
  void OnUnitHint() noexcept override { ++hints; }
  int hints = 0;
};

// The bus driver names :1.1 as systemd; only its signals are hints.
void AnnounceSystemd(UnitTracker& tracker, MessageFactory& /*f*/) {
  tracker.SystemdConnected();
  tracker.DispatchHints();
}

TEST(UnitTracker, FloodThroughTheMatchHandlerIsBoundedAndEveryoneReQueries) {
  auto event = testing::NewEvent();
  UnitTracker tracker(event.get(), /*capacity=*/1);
  ASSERT_TRUE(tracker.Init().ok());
  MessageFactory f;
  AnnounceSystemd(tracker, f);
  CountingWatcher a, b;
  auto wa = tracker.Add(UnitName(1), &a);
  auto wb = tracker.Add(UnitName(2), &b);
  ASSERT_TRUE(wa.ok() && wb.ok());
  for (int i = 0; i < 10000; ++i) {
    auto m = f.Signal("/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                      "UnitRemoved", "org.freedesktop.systemd1", [&](sd_bus_message* s) {
                        sd_bus_message_append(s, "so", UnitName(1 + i % 2).c_str(), "/x");
                      });
    tracker.OnSignal(m.get());
  }
  EXPECT_EQ(tracker.queue_length(), 1u);
  EXPECT_TRUE(tracker.queue_overflowed());
  tracker.DispatchHints();
  // Overflow lost a hint: every watcher asks again, once.
  EXPECT_EQ(a.hints, 1);
  EXPECT_EQ(b.hints, 1);
  EXPECT_EQ(tracker.queue_length(), 0u);
}

TEST(UnitTracker, SignalsForUnwatchedOrForeignUnitsCostNothing) {
  auto event = testing::NewEvent();
  UnitTracker tracker(event.get(), 1);
  ASSERT_TRUE(tracker.Init().ok());
  MessageFactory f;
  AnnounceSystemd(tracker, f);
  for (const char* unit : {"opencode-pty-supervisor.service", "sshd.service",
                           "opencode-pty-0123456789abcdef0123456789abcdef.service"}) {
    auto m = f.Signal("/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                      "UnitRemoved", "org.freedesktop.systemd1",
                      [&](sd_bus_message* s) { sd_bus_message_append(s, "so", unit, "/x"); });
    tracker.OnSignal(m.get());
  }
  EXPECT_EQ(tracker.queue_length(), 0u);
}

}  // namespace
}  // namespace opencode::daemon
