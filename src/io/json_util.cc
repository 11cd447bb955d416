#include "src/io/json_util.h"

#include "wte/error.h"

namespace wte::json {

void check_depth(std::string_view text, const std::string& origin) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth)
        throw Error(origin + ": JSON nested deeper than " + std::to_string(kMaxDepth) +
                    " levels of arrays and objects (byte " + std::to_string(i) + ", '" + c +
                    "', opens level " + std::to_string(depth) +
                    "); wte reads JSON nested at most " + std::to_string(kMaxDepth) + " deep");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

nlohmann::json parse(std::string_view text, const std::string& origin,
                     const nlohmann::json::parser_callback_t& callback, const std::string& what) {
  check_depth(text, origin);
  try {
    return nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::exception& e) {
    throw Error(origin + ": " + what + ": " + e.what());
  }
}

namespace {

constexpr int kBriefDepth = 4;

void render(const nlohmann::json& v, int depth, size_t max_chars, std::string& out) {
  if (out.size() > max_chars) return;
  if (v.is_array()) {
    if (depth >= kBriefDepth) {
      out += v.empty() ? "[]" : "[...]";
      return;
    }
    out += '[';
    bool first = true;
    for (const nlohmann::json& e : v) {
      if (out.size() > max_chars) return;
      if (!first) out += ',';
      first = false;
      render(e, depth + 1, max_chars, out);
    }
    out += ']';
  } else if (v.is_object()) {
    if (depth >= kBriefDepth) {
      out += v.empty() ? "{}" : "{...}";
      return;
    }
    out += '{';
    bool first = true;
    for (const auto& [k, e] : v.items()) {
      if (out.size() > max_chars) return;
      if (!first) out += ',';
      first = false;
      out += nlohmann::json(k).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      out += ':';
      render(e, depth + 1, max_chars, out);
    }
    out += '}';
  } else {
    out += v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // a scalar
  }
}

}  // namespace

std::string brief(const nlohmann::json& value, size_t max_chars) {
  std::string s;
  render(value, 0, max_chars, s);
  return s.size() > max_chars ? s.substr(0, max_chars - 3) + "..." : s;
}

}  // namespace wte::json
