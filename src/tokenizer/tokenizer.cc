// GPT-2's byte-level BPE (see tokenizer.h): bytes_to_unicode, the PCRE2 pre-tokenizer, bpe(),
// training, and GPT-2's encoder.json / vocab.bpe format.
#include "wte/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <queue>
#include <sstream>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "src/io/json_util.h"
#include "src/tokenizer/quoted_excerpt.h"
#include "wte/data.h"
#include "wte/error.h"

namespace wte {
namespace {

// ------------------------------------------------------------------------------------------------
// bytes_to_unicode (GPT-2's encoder.py): printable Latin-1 bytes map to themselves, the other 68
// bytes to U+0100.. in byte order. kByteOrder[i] is the byte whose token has id i in GPT-2.
struct ByteTables {
  std::array<uint8_t, 256> byte_order;     // id -> byte
  std::array<char32_t, 256> byte_to_char;  // byte -> code point
  std::array<int, 0x144> char_to_byte;     // code point -> byte, -1 if none (max code point 0x143)
};

const ByteTables& byte_tables() {
  static const ByteTables t = [] {
    ByteTables t{};
    std::array<bool, 256> printable{};
    size_t n = 0;
    auto add_range = [&](int lo, int hi) {
      for (int b = lo; b <= hi; ++b) {
        printable[b] = true;
        t.byte_order[n++] = static_cast<uint8_t>(b);
      }
    };
    add_range('!', '~');
    add_range(0xA1, 0xAC);
    add_range(0xAE, 0xFF);
    for (int b = 0; b < 256; ++b)
      if (!printable[b]) t.byte_order[n++] = static_cast<uint8_t>(b);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) t.byte_to_char[b] = printable[b] ? char32_t(b) : next++;
    t.char_to_byte.fill(-1);
    for (int b = 0; b < 256; ++b) t.char_to_byte[t.byte_to_char[b]] = b;
    return t;
  }();
  return t;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// Length of the valid UTF-8 sequence (RFC 3629: no overlongs, no surrogates, <= U+10FFFF; the
// same rules PCRE2 checks) starting at s[i], or 0 if the byte there does not start one.
size_t utf8_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const size_t left = s.size() - i;
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  auto cont = [&](size_t k) { return (b(k) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return left >= 2 && cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || !cont(i + 1) || !cont(i + 2)) return 0;
    if (c == 0xE0 && b(i + 1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(i + 1) >= 0xA0) return 0;  // UTF-16 surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || !cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    if (c == 0xF0 && b(i + 1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(i + 1) >= 0x90) return 0;  // > U+10FFFF
    return 4;
  }
  return 0;
}

// ------------------------------------------------------------------------------------------------
// The pre-tokenizer. The compiled pattern is shared (PCRE2 code is read-only after compiling);
// match data is per thread.
constexpr const char* kPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Regex {
  pcre2_code* code = nullptr;
  Regex() {
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                         PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw Error("compiling GPT-2's pre-tokenizer regex with PCRE2 failed at offset " +
                  std::to_string(err_offset) + ": " + reinterpret_cast<const char*>(msg));
    }
    // JIT is an optimization only: pcre2_match falls back to the interpreter without it.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  }
  ~Regex() { pcre2_code_free(code); }
};

const pcre2_code* regex() {
  static const Regex r;
  return r.code;
}

struct MatchData {
  pcre2_match_data* md;
  MatchData() : md(pcre2_match_data_create_from_pattern(regex(), nullptr)) {}
  ~MatchData() { pcre2_match_data_free(md); }
};

// The class of each ASCII byte under the pattern's \s, \p{L} and \p{N} (asked of PCRE2 itself,
// with the pattern's flags, so the fast path below cannot disagree with the regex about a byte).
enum ByteClass : uint8_t { kLetter, kNumber, kSpace, kOther, kNonAscii };

const std::array<ByteClass, 256>& byte_classes() {
  static const std::array<ByteClass, 256> table = [] {
    auto compile = [](const char* pattern) {
      int err = 0;
      PCRE2_SIZE off = 0;
      pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &err, &off, nullptr);
      if (code == nullptr) throw Error(std::string("compiling ") + pattern + " with PCRE2 failed");
      return code;
    };
    pcre2_code* space = compile(R"(\s)");
    pcre2_code* letter = compile(R"(\p{L})");
    pcre2_code* number = compile(R"(\p{N})");
    pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
    std::array<ByteClass, 256> t{};
    for (int b = 0; b < 256; ++b) {
      if (b >= 0x80) {
        t[b] = kNonAscii;
        continue;
      }
      const auto c = static_cast<unsigned char>(b);
      auto is = [&](pcre2_code* code) { return pcre2_match(code, &c, 1, 0, 0, md, nullptr) >= 0; };
      t[b] = is(letter) ? kLetter : is(number) ? kNumber : is(space) ? kSpace : kOther;
    }
    pcre2_match_data_free(md);
    pcre2_code_free(space);
    pcre2_code_free(letter);
    pcre2_code_free(number);
    return t;
  }();
  return table;
}

// The end of the regex's match at `pos` of `run`, found without PCRE2 when the ASCII bytes around
// decide it, or 0 when a non-ASCII character could change it (then PCRE2 decides). Follows the
// alternatives in the pattern's order:
//   's 't 're 've 'm 'll 'd; " ?" then a run of letters, of digits, or of other characters;
//   \s+(?!\S), a whitespace run minus its last character when a non-space follows;
//   \s+, the one whitespace character left before a non-space.
size_t ascii_match_end(std::string_view s, size_t pos) {
  const auto& cls = byte_classes();
  const size_t n = s.size();
  auto at = [&](size_t i) { return cls[static_cast<uint8_t>(s[i])]; };
  const char c = s[pos];
  if (c == '\'' && pos + 1 < n) {
    const char d = s[pos + 1];
    if (d == 's' || d == 't' || d == 'm' || d == 'd') return pos + 2;
    if (pos + 2 < n) {
      const char e = s[pos + 2];
      if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) return pos + 3;
    }
  }
  size_t i = pos;
  ByteClass k = at(pos);
  if (c == ' ' && pos + 1 < n && at(pos + 1) != kSpace) {
    i = pos + 1;
    k = at(i);
  }
  if (k == kNonAscii) return 0;
  if (k != kSpace) {  // a run of one class: letters, digits or other characters
    size_t j = i + 1;
    while (j < n && at(j) == k) ++j;
    return j < n && at(j) == kNonAscii ? 0 : j;
  }
  size_t j = pos + 1;
  while (j < n && at(j) == kSpace) ++j;
  if (j == n) return n;
  if (at(j) == kNonAscii) return 0;  // it may be a space (U+00A0, U+2003, ...)
  return j - pos >= 2 ? j - 1 : j;
}

// Calls emit(piece) for each pre-token of `run`, which must be valid UTF-8. With ascii_fast, the
// matches that ASCII bytes decide are found by ascii_match_end; PCRE2 finds the others.
template <bool ascii_fast, typename Emit>
void regex_split(std::string_view run, Emit&& emit) {
  thread_local MatchData data;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(run.data());
  size_t pos = 0;
  while (pos < run.size()) {
    if constexpr (ascii_fast) {
      const size_t end = ascii_match_end(run, pos);
      if (end != 0) {
        emit(run.substr(pos, end - pos));
        pos = end;
        continue;
      }
    }
    const int rc = pcre2_match(regex(), subject, run.size(), pos, PCRE2_NO_UTF_CHECK, data.md,
                               nullptr);
    if (rc < 0) {
      if (rc != PCRE2_ERROR_NOMATCH)
        throw Error("PCRE2 match failed with code " + std::to_string(rc) + " at byte " +
                    std::to_string(pos));
      emit(run.substr(pos));  // cannot happen (the last alternatives match anything), but be exact
      return;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.md);
    if (ov[0] > pos) emit(run.substr(pos, ov[0] - pos));  // likewise: keep every byte
    if (ov[1] == ov[0]) {  // empty match: cannot happen (every alternative consumes), never loop
      emit(run.substr(ov[0], utf8_len(run, ov[0])));
      pos = ov[0] + utf8_len(run, ov[0]);
      continue;
    }
    emit(run.substr(ov[0], ov[1] - ov[0]));
    pos = ov[1];
  }
}

// Splits any byte string into pre-tokens: the regex on maximal valid-UTF-8 runs, each invalid
// byte on its own.
template <bool ascii_fast = true, typename Emit>
void for_each_pretoken(std::string_view text, Emit&& emit) {
  size_t run_start = 0, i = 0;
  while (i < text.size()) {
    if (static_cast<uint8_t>(text[i]) < 0x80) {  // ASCII: valid on its own
      ++i;
      continue;
    }
    const size_t n = utf8_len(text, i);
    if (n > 0) {
      i += n;
      continue;
    }
    if (i > run_start) regex_split<ascii_fast>(text.substr(run_start, i - run_start), emit);
    emit(text.substr(i, 1));
    run_start = ++i;
  }
  if (i > run_start) regex_split<ascii_fast>(text.substr(run_start, i - run_start), emit);
}

// A fast hash of a short byte string for EncodeCache: 8 bytes at a time, each word mixed in by a
// multiply and xor-shift (the finalizer of MurmurHash3's 64-bit variant). Not cryptographic.
uint64_t hash_bytes(std::string_view s) {
  constexpr uint64_t k = 0x9E3779B97F4A7C15ULL;
  uint64_t h = s.size() * k;
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * k;
    h ^= h >> 32;
  }
  if (i < s.size()) {
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    h = (h ^ w) * k;
  }
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  return h;
}

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

std::string read_file(const std::string& path, const char* what) {
  if (::access(path.c_str(), R_OK) != 0)
    throw Error("cannot open " + std::string(what) + " " + path + ": " + std::strerror(errno) +
                " (GPT-2's files come from datasets/fetch_gpt2_vocab.sh)");
  try {
    return read_text_file(path);  // a read error names the path and errno
  } catch (const Error& e) {
    throw Error(std::string(what) + ": " + e.what());
  }
}

void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error("cannot write " + path + ": " + std::strerror(errno));
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  f.close();
  if (!f) throw Error("error writing " + path);
}

}  // namespace

std::string escape_piece(std::string_view bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c >= 0x20 && c < 0x7F) out += static_cast<char>(c);
    else if (c >= 0x80 && utf8_len(bytes, i) > 0) {  // a complete character (utf8_len >= 2 here)
      const size_t n = utf8_len(bytes, i);
      out.append(bytes.substr(i, n));
      i += n;
      continue;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
    ++i;
  }
  return out;
}

std::string quoted_excerpt(std::string_view text, size_t max_bytes, char quote) {
  std::string out = quote + escape_piece(text.substr(0, max_bytes)) + quote;
  if (text.size() > max_bytes)
    out += " (its first " + std::to_string(max_bytes) + " of " + std::to_string(text.size()) +
           " bytes)";
  return out;
}

// --------------------------------------------------------------------------------------------------
// bytes_to_unicode form

std::string Tokenizer::to_unicode_form(std::string_view bytes) {
  const ByteTables& t = byte_tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, t.byte_to_char[static_cast<uint8_t>(c)]);
  return out;
}

std::string Tokenizer::from_unicode_form(std::string_view text) {
  const ByteTables& t = byte_tables();
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_len(text, i);
    if (n == 0) throw Error("invalid UTF-8 at byte " + std::to_string(i));
    char32_t c = static_cast<uint8_t>(text[i]);
    if (n > 1) {
      c &= (0xFF >> (n + 1));
      for (size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<uint8_t>(text[i + k]) & 0x3F);
    }
    if (c >= t.char_to_byte.size() || t.char_to_byte[c] < 0) {
      char hex[16];
      std::snprintf(hex, sizeof hex, "U+%04X", static_cast<unsigned>(c));
      throw Error(std::string("character ") + hex + " at byte " + std::to_string(i) +
                  " is not one of bytes_to_unicode's 256 characters");
    }
    out += static_cast<char>(t.char_to_byte[c]);
    i += n;
  }
  return out;
}

// --------------------------------------------------------------------------------------------------
// Construction and lookup tables

Tokenizer::Tokenizer() {
  const ByteTables& t = byte_tables();
  pieces_.reserve(256);
  for (int i = 0; i < 256; ++i) pieces_.emplace_back(1, static_cast<char>(t.byte_order[i]));
  index("the byte vocabulary");
}

void Tokenizer::index(const std::string& origin) {
  piece_id_.clear();
  piece_id_.reserve(pieces_.size());
  for (size_t id = 0; id < pieces_.size(); ++id) {
    if (!piece_id_.emplace(pieces_[id], static_cast<int32_t>(id)).second) {
      throw Error(origin + ": token " + std::to_string(id) + " (\"" + to_unicode_form(pieces_[id]) +
                  "\") repeats token " + std::to_string(piece_id_[pieces_[id]]));
    }
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = piece_id_.find(std::string(1, static_cast<char>(b)));
    if (it == piece_id_.end()) {
      throw Error(origin + ": the single-byte token for byte " + std::to_string(b) + " (\"" +
                  to_unicode_form(std::string(1, static_cast<char>(b))) +
                  "\") is missing; every byte needs one");
    }
    byte_id_[b] = it->second;
  }
  merge_rank_.clear();
  merge_rank_.reserve(merges_.size());
  for (size_t r = 0; r < merges_.size(); ++r)
    merge_rank_.emplace(pair_key(merges_[r].first, merges_[r].second), static_cast<int32_t>(r));
}

const std::string& Tokenizer::piece(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) {
    throw Error("token id " + std::to_string(id) + " is outside [0, vocab_size=" +
                std::to_string(pieces_.size()) + ")");
  }
  return pieces_[id];
}

int32_t Tokenizer::id_of(std::string_view bytes) const {
  const auto it = piece_id_.find(std::string(bytes));
  return it == piece_id_.end() ? -1 : it->second;
}

std::pair<int32_t, int32_t> Tokenizer::merge(size_t rank) const {
  if (rank >= merges_.size()) {
    throw Error("merge rank " + std::to_string(rank) + " is outside [0, num_merges=" +
                std::to_string(merges_.size()) + ")");
  }
  return merges_[rank];
}

// --------------------------------------------------------------------------------------------------
// Pre-tokenizing, encoding, decoding

std::vector<std::string_view> Tokenizer::pretokenize(std::string_view text) {
  std::vector<std::string_view> out;
  for_each_pretoken(text, [&](std::string_view p) { out.push_back(p); });
  return out;
}

size_t Tokenizer::safe_cut_before(std::string_view text, size_t pos) {
  const auto& cls = byte_classes();
  for (size_t p = std::min(pos, text.size() == 0 ? 0 : text.size() - 1); p > 0; --p) {
    const ByteClass before = cls[static_cast<uint8_t>(text[p - 1])];
    if (cls[static_cast<uint8_t>(text[p])] == kSpace && before != kSpace && before != kNonAscii)
      return p;
  }
  return 0;
}

std::vector<std::string_view> Tokenizer::pretokenize_pcre2_only(std::string_view text) {
  std::vector<std::string_view> out;
  for_each_pretoken</*ascii_fast=*/false>(text, [&](std::string_view p) { out.push_back(p); });
  return out;
}

// GPT-2's bpe(): while some adjacent pair has a merge rank, take the lowest-ranked pair and merge
// all its occurrences left to right, then look again. Done here in O(n log n) instead of GPT-2's
// O(n^2): symbols form a linked list and a min-heap holds (rank, left position) of candidate
// pairs, popped in rank order and, within a rank, left to right, as GPT-2's scan. Pairs created by
// a merge wait until the current rank's round is over, so that a new pair with a lower rank (only
// possible in hand-made files) is taken after the round, as in GPT-2.
void Tokenizer::bpe(std::string_view word, std::vector<int32_t>& out) const {
  const size_t n = word.size();
  if (n == 1) {
    out.push_back(byte_id_[static_cast<uint8_t>(word[0])]);
    return;
  }
  std::vector<int32_t> id(n);
  std::vector<int32_t> next(n), prev(n);
  for (size_t i = 0; i < n; ++i) {
    id[i] = byte_id_[static_cast<uint8_t>(word[i])];
    next[i] = static_cast<int32_t>(i) + 1;  // n: end
    prev[i] = static_cast<int32_t>(i) - 1;  // -1: start
  }
  using Cand = std::pair<int32_t, int32_t>;  // (rank, left position)
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto rank_at = [&](int32_t left) -> int32_t {  // rank of the pair starting at `left`, or -1
    if (left < 0 || next[left] >= static_cast<int32_t>(n)) return -1;
    const auto it = merge_rank_.find(pair_key(id[left], id[next[left]]));
    return it == merge_rank_.end() ? -1 : it->second;
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(n); ++i) {
    const int32_t r = rank_at(i);
    if (r >= 0) heap.emplace(r, i);
  }
  std::vector<int32_t> pending;  // left positions of pairs created in the current round
  int32_t round = -1;            // the rank being merged
  while (true) {
    if (!pending.empty() && (heap.empty() || heap.top().first != round)) {  // round over
      for (int32_t p : pending) {
        if (prev[p] == -2) continue;
        const int32_t r = rank_at(p);
        if (r >= 0) heap.emplace(r, p);
      }
      pending.clear();
    }
    if (heap.empty()) break;
    const auto [rank, left] = heap.top();
    heap.pop();
    // A position is dead (prev == -2) once it was the right half of a merge; a live position
    // whose pair changed has a different rank now. Either way the entry is stale.
    if (prev[left] == -2 || rank_at(left) != rank) continue;
    round = rank;
    const int32_t right = next[left];
    id[left] = merge_result_[rank];
    next[left] = next[right];
    if (next[right] < static_cast<int32_t>(n)) prev[next[right]] = left;
    prev[right] = -2;
    if (prev[left] >= 0) pending.push_back(prev[left]);
    pending.push_back(left);
  }
  for (int32_t i = 0; i < static_cast<int32_t>(n); i = next[i]) out.push_back(id[i]);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 16);
  EncodeCache cache;
  encode_append(text, cache, ids);
  return ids;
}

void Tokenizer::encode_append(std::string_view text, EncodeCache& cache,
                              std::vector<int32_t>& ids) const {
  // A cache filled by another vocabulary would give that vocabulary's ids: start it afresh.
  if (cache.owner_ != this) {
    cache.clear();
    cache.owner_ = this;
  }
  for_each_pretoken(text, [&](std::string_view p) {
    const uint64_t hash = hash_bytes(p);
    if (cache.find(p, hash, ids)) return;
    const size_t start = ids.size();
    bpe(p, ids);
    cache.insert(p, hash, ids.data() + start, ids.size() - start);
  });
}

void EncodeCache::clear() {
  slots_.clear();
  used_ = 0;
  keys_.clear();
  ids_.clear();
}

bool EncodeCache::find(std::string_view key, uint64_t hash, std::vector<int32_t>& out) const {
  if (slots_.empty()) return false;
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.key_len == 0) return false;
    if (s.hash == hash && s.key_len == key.size() &&
        std::memcmp(keys_.data() + s.key_start, key.data(), key.size()) == 0) {
      out.insert(out.end(), ids_.begin() + s.ids_start, ids_.begin() + s.ids_start + s.ids_len);
      return true;
    }
  }
}

void EncodeCache::insert(std::string_view key, uint64_t hash, const int32_t* ids, size_t n) {
  if (ids_.size() + n > kMaxIds || keys_.size() + key.size() > (size_t(1) << 31)) clear();
  if (2 * (used_ + 1) > slots_.size()) {  // grow to keep the table at most half full
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(1024, 2 * old.size()), Slot{0, 0, 0, 0, 0});
    const size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.key_len == 0) continue;
      size_t i = s.hash & mask;
      while (slots_[i].key_len != 0) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }
  const size_t mask = slots_.size() - 1;
  size_t i = hash & mask;
  while (slots_[i].key_len != 0) i = (i + 1) & mask;
  slots_[i] = Slot{hash, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(key.size()),
                   static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(n)};
  keys_.append(key);
  ids_.insert(ids_.end(), ids, ids + n);
  ++used_;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) {
      throw Error("token id " + std::to_string(id) + " at position " + std::to_string(i) +
                  " is outside [0, vocab_size=" + std::to_string(pieces_.size()) + ")");
    }
    out += pieces_[id];
  }
  return out;
}

// --------------------------------------------------------------------------------------------------
// Training (Sennrich et al. 2016, on bytes). Words are the distinct pre-tokens with their counts.
// pair_count holds, for every adjacent pair, the sum over words of count * occurrences; a lazy
// max-heap of (count, pair) finds the best pair; where[pair] lists the words that may contain it.
// A merge re-tokenizes only those words and updates pair_count by their before/after difference,
// so a merge costs time in proportion to the words it touches. Measured (Release, one core): whole
// KJV (4.1 MB, 948k pre-tokens, 14k distinct) to vocab_size 4096 in 0.08-0.12 s, of which the
// pre-tokenizer (PCRE2 JIT) takes 0.05 s.

Tokenizer Tokenizer::train(std::string_view text, size_t vocab_size,
                           void (*progress)(size_t done, size_t total)) {
  if (vocab_size < 256 || vocab_size > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw Error("vocab_size " + std::to_string(vocab_size) +
                " is outside [256, 2^31-1]: a byte-level BPE vocabulary starts with 256 tokens");
  }
  Tokenizer tok;
  const size_t wanted = vocab_size - 256;

  std::unordered_map<std::string_view, int64_t> word_count;
  for_each_pretoken(text, [&](std::string_view p) { ++word_count[p]; });
  // Sorted so the word table, and with it every tie and list order, is independent of hashing.
  std::vector<std::pair<std::string_view, int64_t>> sorted(word_count.begin(), word_count.end());
  std::sort(sorted.begin(), sorted.end());
  word_count.clear();

  std::vector<std::vector<int32_t>> words(sorted.size());
  std::vector<int64_t> counts(sorted.size());
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where;
  for (size_t w = 0; w < sorted.size(); ++w) {
    counts[w] = sorted[w].second;
    for (char c : sorted[w].first) words[w].push_back(tok.byte_id_[static_cast<uint8_t>(c)]);
    for (size_t i = 0; i + 1 < words[w].size(); ++i) {
      const uint64_t k = pair_key(words[w][i], words[w][i + 1]);
      pair_count[k] += counts[w];
      auto& list = where[k];
      if (list.empty() || list.back() != w) list.push_back(static_cast<uint32_t>(w));
    }
  }

  // Max-heap on count, then the smallest pair. An entry is valid iff its count is the pair's
  // current count; an increase pushes a new entry, a stale entry is re-pushed when popped.
  using Entry = std::pair<int64_t, uint64_t>;
  auto worse = [](const Entry& a, const Entry& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(worse)> heap(worse);
  for (const auto& [k, c] : pair_count) heap.emplace(c, k);

  std::vector<uint32_t> seen(words.size(), UINT32_MAX);  // last merge that touched each word
  std::unordered_map<uint64_t, int64_t> delta;
  std::vector<int32_t> merged;
  while (tok.pieces_.size() < vocab_size && !heap.empty()) {
    const auto [count, key] = heap.top();
    heap.pop();
    const auto pc = pair_count.find(key);
    const int64_t now = pc == pair_count.end() ? 0 : pc->second;
    if (now != count) {
      if (now > 0) heap.emplace(now, key);
      continue;
    }
    const int32_t a = static_cast<int32_t>(key >> 32), b = static_cast<int32_t>(key & 0xFFFFFFFF);
    const std::string bytes = tok.pieces_[a] + tok.pieces_[b];
    int32_t c;
    if (const auto it = tok.piece_id_.find(bytes); it != tok.piece_id_.end()) {
      c = it->second;  // a second merge path to an existing string: reuse its id
    } else {
      c = static_cast<int32_t>(tok.pieces_.size());
      tok.pieces_.push_back(bytes);
      tok.piece_id_.emplace(bytes, c);
    }
    const uint32_t rank = static_cast<uint32_t>(tok.merges_.size());
    tok.merges_.emplace_back(a, b);
    tok.merge_result_.push_back(c);

    std::vector<uint32_t> list = std::move(where[key]);
    where.erase(key);
    delta.clear();
    for (uint32_t w : list) {
      if (seen[w] == rank) continue;
      seen[w] = rank;
      std::vector<int32_t>& word = words[w];
      merged.clear();
      bool changed = false;
      for (size_t i = 0; i < word.size();) {
        if (i + 1 < word.size() && word[i] == a && word[i + 1] == b) {
          merged.push_back(c);
          i += 2;
          changed = true;
        } else {
          merged.push_back(word[i++]);
        }
      }
      if (!changed) continue;  // a stale entry in where[key]
      const int64_t n = counts[w];
      for (size_t i = 0; i + 1 < word.size(); ++i) delta[pair_key(word[i], word[i + 1])] -= n;
      for (size_t i = 0; i + 1 < merged.size(); ++i) {
        const uint64_t k = pair_key(merged[i], merged[i + 1]);
        delta[k] += n;
        if (merged[i] == c || merged[i + 1] == c) {
          auto& wl = where[k];
          if (wl.empty() || wl.back() != w) wl.push_back(w);
        }
      }
      word.swap(merged);
    }
    // Apply in sorted order so heap pushes (and with them nothing observable, but still) are
    // deterministic.
    std::vector<std::pair<uint64_t, int64_t>> changes(delta.begin(), delta.end());
    std::sort(changes.begin(), changes.end());
    for (const auto& [k, d] : changes) {
      if (d == 0) continue;
      int64_t& v = pair_count[k];
      v += d;
      if (d > 0) heap.emplace(v, k);
      if (v == 0) pair_count.erase(k);
    }
    if (progress != nullptr && tok.merges_.size() % 256 == 0) progress(tok.merges_.size(), wanted);
  }
  tok.index("the trained vocabulary");
  if (progress != nullptr) progress(tok.merges_.size(), wanted);
  return tok;
}

// --------------------------------------------------------------------------------------------------
// GPT-2's file format

Tokenizer Tokenizer::load(const std::string& dir) {
  const std::string enc_path = (std::filesystem::path(dir) / "encoder.json").string();
  const std::string bpe_path = (std::filesystem::path(dir) / "vocab.bpe").string();
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec))
    throw Error("vocabulary directory '" + dir + "' is a file, not a directory (a tokenizer " +
                "directory holds encoder.json and vocab.bpe)");
  if (!std::filesystem::is_directory(dir)) {
    throw Error("vocabulary directory " + dir +
                " does not exist (GPT-2's files come from datasets/fetch_gpt2_vocab.sh)");
  }
  const std::string enc = read_file(enc_path, "encoder.json");
  const std::string bpe = read_file(bpe_path, "vocab.bpe");
  return from_strings(enc, bpe, dir);
}

Tokenizer Tokenizer::from_strings(const std::string& encoder_json, const std::string& vocab_bpe,
                                  const std::string& origin) {
  return from_strings(encoder_json, vocab_bpe, origin + "/encoder.json", origin + "/vocab.bpe");
}

Tokenizer Tokenizer::from_strings(const std::string& encoder_json, const std::string& vocab_bpe,
                                  const std::string& enc_name, const std::string& bpe_name) {
  Tokenizer tok;

  // encoder.json: {"token": id, ...}, ids exactly 0..N-1.
  const nlohmann::json j = json::parse(encoder_json, enc_name);
  if (!j.is_object() || j.empty())
    throw Error(enc_name + ": expected a non-empty JSON object {\"token\": id, ...}");
  const size_t n = j.size();
  std::vector<std::string> pieces(n);
  std::vector<bool> have(n, false);
  for (const auto& [key, value] : j.items()) {
    if (!value.is_number_integer()) {
      throw Error(enc_name + ": the value of " + quoted_excerpt(key) + " is " + json::brief(value) +
                  ", expected an integer id");
    }
    const int64_t id = value.get<int64_t>();
    if (id < 0 || static_cast<size_t>(id) >= n) {
      throw Error(enc_name + ": id " + std::to_string(id) + " of " + quoted_excerpt(key) + " is outside [0, " +
                  std::to_string(n) + ") (ids must be exactly 0..number of tokens - 1)");
    }
    if (have[id]) throw Error(enc_name + ": id " + std::to_string(id) + " is used twice");
    have[id] = true;
    try {
      pieces[id] = from_unicode_form(key);
    } catch (const Error& e) {
      throw Error(enc_name + ": token " + quoted_excerpt(key) + " (id " + std::to_string(id) +
                  "): " + e.what());
    }
  }
  tok.pieces_ = std::move(pieces);
  tok.index(enc_name);

  // vocab.bpe: "#version: 0.2", then "a b" per line in rank order; blank lines only at the end.
  size_t line_no = 0, pos = 0;
  bool blank_seen = false;
  size_t blank_line = 0;
  std::unordered_map<uint64_t, size_t> merge_line;
  while (pos < vocab_bpe.size()) {
    size_t end = vocab_bpe.find('\n', pos);
    if (end == std::string::npos) end = vocab_bpe.size();
    std::string_view line(vocab_bpe.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::string where = bpe_name + " line " + std::to_string(line_no);
    if (line_no == 1) {
      if (line.substr(0, 8) != "#version")
        throw Error(where + ": expected the header \"#version: 0.2\", got " +
                    quoted_excerpt(line));
      continue;
    }
    if (line.empty()) {
      if (!blank_seen) blank_line = line_no;
      blank_seen = true;
      continue;
    }
    if (blank_seen)
      throw Error(bpe_name + " line " + std::to_string(blank_line) +
                  ": blank line before the last merge");
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0 || sp + 1 == line.size() ||
        line.find(' ', sp + 1) != std::string_view::npos) {
      throw Error(where + ": expected a merge \"left right\" (two parts, one space), got " +
                  quoted_excerpt(line));
    }
    std::string parts[2];
    int32_t ids[2];
    for (int k = 0; k < 2; ++k) {
      const std::string_view s = k == 0 ? line.substr(0, sp) : line.substr(sp + 1);
      try {
        parts[k] = from_unicode_form(s);
      } catch (const Error& e) {
        throw Error(where + ": " + quoted_excerpt(s) + ": " + e.what());
      }
      const auto it = tok.piece_id_.find(parts[k]);
      if (it == tok.piece_id_.end())
        throw Error(where + ": " + quoted_excerpt(s) + " is not a token in " + enc_name);
      ids[k] = it->second;
    }
    const auto res = tok.piece_id_.find(parts[0] + parts[1]);
    if (res == tok.piece_id_.end()) {
      throw Error(where + ": the merge result \"" + to_unicode_form(parts[0] + parts[1]) +
                  "\" is not a token in " + enc_name);
    }
    const uint64_t k = pair_key(ids[0], ids[1]);
    if (const auto [it, fresh] = merge_line.emplace(k, line_no); !fresh) {
      throw Error(where + ": the merge " + quoted_excerpt(line) + " repeats line " +
                  std::to_string(it->second));
    }
    tok.merges_.emplace_back(ids[0], ids[1]);
    tok.merge_result_.push_back(res->second);
  }
  if (line_no == 0) throw Error(bpe_name + ": empty file, expected \"#version: 0.2\" and merges");
  tok.index(enc_name);
  return tok;
}

std::string Tokenizer::encoder_json() const {
  // As Python's json.dumps(encoder) (ensure_ascii): ", " and ": " separators, \uXXXX escapes.
  std::string out = "{";
  for (size_t id = 0; id < pieces_.size(); ++id) {
    if (id > 0) out += ", ";
    out += '"';
    const std::string s = to_unicode_form(pieces_[id]);
    for (size_t i = 0; i < s.size();) {
      const uint8_t c = static_cast<uint8_t>(s[i]);
      if (c < 0x80) {
        if (c == '"' || c == '\\') out += '\\';
        out += static_cast<char>(c);  // bytes_to_unicode never yields ASCII controls
        ++i;
        continue;
      }
      const size_t len = utf8_len(s, i);  // 2: every bytes_to_unicode character is < U+0800
      char32_t cp = c & (0xFF >> (len + 1));
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(cp));
      out += esc;
      i += len;
    }
    out += "\": " + std::to_string(id);
  }
  out += "}";
  return out;
}

std::string Tokenizer::vocab_bpe() const {
  std::string out = "#version: 0.2\n";
  for (const auto& [a, b] : merges_) {
    out += to_unicode_form(pieces_[a]);
    out += ' ';
    out += to_unicode_form(pieces_[b]);
    out += '\n';
  }
  return out;
}

void Tokenizer::save(const std::string& dir) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("cannot create directory " + dir + ": " + ec.message());
  write_file((std::filesystem::path(dir) / "encoder.json").string(), encoder_json());
  write_file((std::filesystem::path(dir) / "vocab.bpe").string(), vocab_bpe());
}

}  // namespace wte
