#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace jcm {

// Milliseconds between two stamps' events (waits for the later one); nullopt if either is unknown.
std::optional<float> timer_elapsed_ms(int64_t start_slot, int64_t end_slot);

// Timer events held for `device` (resource counts).
size_t timer_event_count(int device);

}  // namespace jcm
