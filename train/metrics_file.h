// Reading a run's metrics.csv back (a resumed run keeps its rows up to the resumed step): bounded
// by what those rows can take, and only from a regular file.
#pragma once

#include <cstdint>
#include <string>

namespace wte {

/// The most bytes one metrics.csv row wte writes can take (a step and seven numbers, each well
/// under 32 characters), with room to spare: it bounds every read of a run's metrics.csv.
constexpr uint64_t kMetricsRowBytes = 512;

/// The part of the metrics.csv at `path` that a run resumed at `step` keeps: at most the header's
/// and `step` rows' bytes (kMetricsRowBytes each) are read (rows past the step follow them and
/// are dropped anyway), without a torn last line (without_torn_line, train/metrics.h). ""
/// if `path` does not exist. Throws wte::Error naming the path if it is not a regular file (a
/// link to /dev/zero or a FIFO is refused, not read).
std::string read_resumed_metrics(const std::string& path, uint64_t step);

}  // namespace wte
