// Reading JSON that comes from files people share (a safetensors header, config.json,
// vocab.json/encoder.json, the tokenizer stored in a checkpoint): the nesting depth is bounded by
// a scan of the raw text before nlohmann builds anything, and values are quoted in messages by a
// renderer whose depth and length are bounded (nlohmann's dump() recurses once per level, so a
// value nested 100,000 deep overflows the stack). Every JSON reader of wte goes through here.
// Private to wte.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace wte::json {

/// The deepest nesting of arrays and objects wte reads. The files wte reads nest 3 levels at
/// most (a safetensors header: object, tensor, shape).
constexpr size_t kMaxDepth = 64;

/// Throws wte::Error "<origin>: JSON nested deeper than 64 levels of arrays and objects (byte
/// N opens level 65); ..." if `text` nests deeper than kMaxDepth. Brackets inside strings do not
/// count. Anything else (a syntax error) is left to the parser. Linear in the text, no recursion.
void check_depth(std::string_view text, const std::string& origin);

/// check_depth, then nlohmann::json::parse(text, callback). A syntax error is wte::Error
/// "<origin>: not valid JSON: <nlohmann's message>" (`what` replaces "not valid JSON" when given,
/// e.g. "the header (offset 8, 120 bytes) is not valid JSON").
nlohmann::json parse(std::string_view text, const std::string& origin,
                     const nlohmann::json::parser_callback_t& callback = nullptr,
                     const std::string& what = "not valid JSON");

/// A value as compact JSON for a message, at most `max_chars` characters ("..." when cut):
/// scalars as dump() writes them, arrays and objects down to 4 levels (deeper ones as [...] and
/// {...}). Never recurses deeper than that, whatever the value.
std::string brief(const nlohmann::json& value, size_t max_chars = 80);

}  // namespace wte::json
