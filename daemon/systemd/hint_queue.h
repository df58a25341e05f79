// The bounded, coalescing queue of unit names that D-Bus signals hinted at.
// Invariant: it never holds more than `capacity` names and never holds a name
// twice; when a hint does not fit, the overflow flag is set instead, which
// makes the consumer re-query every unit it waits for. A hint is never
// evidence of anything: it only schedules a query.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace opencode::daemon {

class HintQueue {
 public:
  explicit HintQueue(size_t capacity) : capacity_(capacity) {}

  // Adds `unit` unless it is already queued; sets the overflow flag if full.
  void Push(std::string_view unit);

  // Marks the queue as if it had overflowed: the consumer re-queries every
  // unit it waits for (used when systemd itself reappeared on the bus).
  void RequeryAll() noexcept { overflowed_ = true; }

  // Takes everything queued (in arrival order) and the overflow flag.
  struct Batch {
    std::vector<std::string> units;
    bool overflowed = false;
  };
  Batch Take();

  size_t size() const noexcept { return units_.size(); }
  bool overflowed() const noexcept { return overflowed_; }
  size_t capacity() const noexcept { return capacity_; }

 private:
  const size_t capacity_;
  // A vector is the right structure: capacity is small (limits.h) and the
  // linear duplicate check costs less than a hash of a 50-byte name would.
  std::vector<std::string> units_;
  bool overflowed_ = false;
};

}  // namespace opencode::daemon
