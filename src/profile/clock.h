// The one wall clock of wte's timings (progress lines, read/write times, exchange and profile
// measurements): a monotonic clock, never adjusted, so a difference is a duration.
#pragma once

#include <chrono>

namespace wte {

using Clock = std::chrono::steady_clock;

/// Seconds from `t0` (a Clock::now() taken earlier) to now, as a double.
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace wte
