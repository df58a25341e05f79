// OutputRing: absolute cursors, the oldest bytes dropped only by new ones,
// reads across the wrap, storage only from the first write.
#include "daemon/session/output_ring.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace opencode::daemon {
namespace {

void Put(OutputRing& ring, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    std::span<uint8_t> w = ring.Writable(bytes.size() - off);
    ASSERT_FALSE(w.empty());
    std::memcpy(w.data(), bytes.data() + off, w.size());
    ring.Commit(w.size());
    off += w.size();
  }
}

std::string Get(const OutputRing& ring, uint64_t from) {
  std::string out;
  while (from < ring.next()) {
    std::span<const uint8_t> r = ring.Readable(from, 1000);
    if (r.empty()) break;
    out.append(reinterpret_cast<const char*>(r.data()), r.size());
    from += r.size();
  }
  return out;
}

TEST(OutputRing, CursorsStartAtZeroAndStorageComesWithTheFirstWrite) {
  OutputRing ring(16);
  EXPECT_EQ(ring.first(), 0u);
  EXPECT_EQ(ring.next(), 0u);
  EXPECT_EQ(ring.allocated(), 0u);
  EXPECT_TRUE(ring.Readable(0, 10).empty());
  Put(ring, "hello");
  EXPECT_EQ(ring.allocated(), 16u);
  EXPECT_EQ(ring.first(), 0u);
  EXPECT_EQ(ring.next(), 5u);
  EXPECT_EQ(Get(ring, 0), "hello");
  EXPECT_EQ(Get(ring, 3), "lo");
  EXPECT_EQ(Get(ring, 5), "");
}

TEST(OutputRing, TheOldestBytesAreDroppedAndEveryHeldByteReadsBackAcrossTheWrap) {
  OutputRing ring(16);
  std::string all;
  for (int i = 0; i < 10; ++i) {
    std::string chunk(7, char('a' + i));
    Put(ring, chunk);
    all += chunk;
    EXPECT_EQ(ring.next(), all.size());
    EXPECT_EQ(ring.first(), all.size() > 16 ? all.size() - 16 : 0);
    EXPECT_EQ(Get(ring, ring.first()), all.substr(ring.first())) << i;
  }
  // A cursor before first() or past next() reads nothing.
  EXPECT_TRUE(ring.Readable(ring.first() - 1, 10).empty());
  EXPECT_TRUE(ring.Readable(ring.next(), 10).empty());
  // A read stops at the wrap; the rest comes with the next call.
  std::span<const uint8_t> r = ring.Readable(ring.first(), 100);
  EXPECT_LE(r.size(), 16u);
  EXPECT_GT(r.size(), 0u);
}

TEST(OutputRing, WritableNeverSpansTheWrap) {
  OutputRing ring(10);
  Put(ring, "12345678");
  std::span<uint8_t> w = ring.Writable(100);
  EXPECT_EQ(w.size(), 2u);  // up to the end of the storage
  std::memcpy(w.data(), "90", 2);
  ring.Commit(2);
  w = ring.Writable(100);
  EXPECT_EQ(w.size(), 10u);
  std::memcpy(w.data(), "abc", 3);
  ring.Commit(3);
  EXPECT_EQ(ring.first(), 3u);
  EXPECT_EQ(Get(ring, 3), "4567890abc");
}

}  // namespace
}  // namespace opencode::daemon
