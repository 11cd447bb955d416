// Reads bounded by what the caller needs, for inputs whose useful size is known before reading:
// `wte eval --max-tokens` reads only the start of its --tokens or --text file, and a run's
// metrics.csv is read only as far as its rows can reach. A far larger file, or a device such as
// /dev/zero behind a symbolic link, is never read without limit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wte {

/// The first `max_bytes` bytes of the file `path` (all of it if it is shorter); the rest is never
/// read. Errors as read_text_file (include/wte/data.h), which is read_file_prefix(path, no limit).
std::string read_file_prefix(const std::string& path, uint64_t max_bytes);

/// read_file_prefix of a regular file. Throws wte::Error naming the path if it is not a regular
/// file once symbolic links are followed (a directory, a device such as /dev/zero, a FIFO: opened
/// without waiting for a writer, never read).
std::string read_regular_file_prefix(const std::string& path, uint64_t max_bytes);

/// The first `max_ids` ids of a token file (read_token_file, include/wte/data.h, reads all of
/// them); the rest is never read. Same errors.
std::vector<int32_t> read_token_file_prefix(const std::string& path, uint64_t max_ids);

}  // namespace wte
