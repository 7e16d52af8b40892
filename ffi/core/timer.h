#pragma once

#include <cstdint>
#include <optional>

namespace jcm {

// Milliseconds between two stamps' events (waits for the later one); nullopt if either is unknown.
std::optional<float> timer_elapsed_ms(int64_t start_slot, int64_t end_slot);

}  // namespace jcm
