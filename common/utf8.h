// Strict UTF-8 validation (RFC 3629) for INPUT frames. Invariant: accepts only
// shortest-form scalar values U+0000..U+10FFFF excluding surrogates; a sequence
// cut at the end of the buffer is invalid (each INPUT frame stands alone).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace opencode {

bool IsValidUtf8(std::span<const uint8_t> bytes) noexcept;

}  // namespace opencode
