// The loop is fair while sessions stream: with busy data paths (threads
// writing and reading both directions of several sessions as fast as they
// can), any other source that becomes pending is dispatched within one
// dispatch of every source that was pending before it (daemon/base/sd_ptr.h).
// Counted in loop iterations (sd-event dispatches one source per iteration),
// not timed, so that no host is too slow for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "daemon/base/sd_ptr.h"
#include "tests/daemon_test_util.h"
#include "tests/streaming_load.h"

namespace opencode::daemon {
namespace {

constexpr size_t kSessions = 3;
// A Pump has three sources (connection, PTY stream, its decode kick).
constexpr uint64_t kSourcesPerSession = 3;
// The stated bound: every source pending before ours once, then ours.
constexpr uint64_t kBound = kSessions * kSourcesPerSession + 1;
// How long to wait for a starved source before calling it starved.
constexpr uint64_t kGiveUpIterations = 200000;
constexpr int kProbes = 300;

uint64_t Iteration(sd_event* e) {
  uint64_t i = 0;
  sd_event_get_iteration(e, &i);
  return i;
}

struct LoopFairnessTest : ::testing::Test {
  void SetUp() override {
    for (size_t i = 0; i < kSessions; ++i) {
      load.push_back(std::make_unique<testing::StreamingLoad>(event.get()));
      ASSERT_TRUE(load.back()->ok());
    }
    // Let the data paths get going.
    for (int i = 0; i < 1000; ++i) sd_event_run(event.get(), 1000);
  }
  void TearDown() override {
    for (auto& l : load) EXPECT_FALSE(l->failed());
    size_t moved = 0;
    for (auto& l : load) moved += l->bytes_read();
    EXPECT_GT(moved, 0u) << "the sessions did stream";
  }
  // Runs the loop until `*done` or kGiveUpIterations; returns the
  // iterations it took.
  uint64_t RunUntilDone(const bool* done) {
    uint64_t start = Iteration(event.get());
    while (!*done && Iteration(event.get()) - start < kGiveUpIterations) sd_event_run(event.get(), 100 * 1000);
    return Iteration(event.get()) - start;
  }
  EventPtr event = testing::NewEvent();
  std::vector<std::unique_ptr<testing::StreamingLoad>> load;
};

int SetTrue(sd_event_source*, void* done) {
  *static_cast<bool*>(done) = true;
  return 0;
}

TEST_F(LoopFairnessTest, ADeferredSourceRunsWithinOneDispatchOfEverySourceAheadOfIt) {
  uint64_t worst = 0;
  for (int probe = 0; probe < kProbes; ++probe) {
    bool done = false;
    sd_event_source* s = nullptr;
    ASSERT_GE(sd_event_add_defer(event.get(), &s, &SetTrue, &done), 0);
    EventSourcePtr defer(s);
    sd_event_source_set_priority(s, kDefaultPriority);
    worst = std::max(worst, RunUntilDone(&done));
    ASSERT_TRUE(done) << "starved for " << kGiveUpIterations << " iterations";
  }
  std::printf("worst wait: %lu iterations (bound %lu)\n", static_cast<unsigned long>(worst),
              static_cast<unsigned long>(kBound));
  EXPECT_LE(worst, kBound);
}

TEST_F(LoopFairnessTest, AnElapsedTimerRunsWithinOneDispatchOfEverySourceAheadOfIt) {
  uint64_t worst = 0;
  for (int probe = 0; probe < kProbes; ++probe) {
    bool done = false;
    sd_event_source* s = nullptr;
    // Due now: pending from the next iteration's timer pass on.
    ASSERT_GE(sd_event_add_time_relative(
                  event.get(), &s, CLOCK_MONOTONIC, 0, 0,
                  [](sd_event_source*, uint64_t, void* d) -> int { return SetTrue(nullptr, d); }, &done),
              0);
    EventSourcePtr timer(s);
    worst = std::max(worst, RunUntilDone(&done));
    ASSERT_TRUE(done) << "starved for " << kGiveUpIterations << " iterations";
  }
  std::printf("worst wait: %lu iterations (bound %lu)\n", static_cast<unsigned long>(worst),
              static_cast<unsigned long>(kBound + 1));
  // One more than the defer: the timer becomes pending in the timer pass of
  // the iteration after it was added.
  EXPECT_LE(worst, kBound + 1);
}

}  // namespace
}  // namespace opencode::daemon
