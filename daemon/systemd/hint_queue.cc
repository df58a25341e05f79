// Bounded coalescing of D-Bus signal hints (see hint_queue.h).
#include "daemon/systemd/hint_queue.h"

#include <algorithm>
#include <utility>

namespace opencode::daemon {

void HintQueue::Push(std::string_view unit) {
  if (std::find(units_.begin(), units_.end(), unit) != units_.end()) return;
  if (units_.size() >= capacity_) {
    overflowed_ = true;
    return;
  }
  units_.emplace_back(unit);
}

HintQueue::Batch HintQueue::Take() {
  Batch b{std::move(units_), overflowed_};
  units_.clear();
  overflowed_ = false;
  return b;
}

}  // namespace opencode::daemon
