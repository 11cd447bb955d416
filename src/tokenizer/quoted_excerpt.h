// Untrusted text in error messages: the lines and keys of a tokenizer file, or any file content
// a message echoes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace wte {

/// `text` for an error message: its first `max_bytes` bytes escaped by escape_piece
/// (include/wte/tokenizer.h) between `quote`s, so control bytes and terminal escape codes show as
/// \xHH and a hostile file cannot drive the terminal that shows the message, followed by
/// " (its first N of M bytes)" when it was cut. Never throws (except std::bad_alloc).
std::string quoted_excerpt(std::string_view text, size_t max_bytes = 80, char quote = '"');

}  // namespace wte
