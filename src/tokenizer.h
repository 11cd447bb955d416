// GPT-2's byte-level BPE tokenizer: training, encoding, decoding, and GPT-2's own file format.
//
// Source of the method: Radford et al. 2019, "Language Models are Unsupervised Multitask Learners",
// section 2.2, and GPT-2's released encoder.py (bytes_to_unicode, the pre-tokenizer regex, bpe()).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace wte {

/// A byte-level BPE vocabulary. Ids 0..255 are the 256 single-byte tokens, in GPT-2's
/// bytes_to_unicode order (as in GPT-2's encoder.json); id 256 + i is the result of merge i, so ids
/// come out in merge order (low ids: frequent, short pieces). A vocabulary loaded from GPT-2's files
/// keeps those files' ids exactly (including <|endoftext|> = 50256 in GPT-2's).
///
/// Pre-tokenization is GPT-2's regex (compiled with PCRE2, Unicode properties on):
///   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
/// so a leading space belongs to the word (" bank" and "Bank" are different tokens). Bytes that are
/// not valid UTF-8 become pre-tokens of their own, so any byte string encodes and decodes exactly.
class Tokenizer {
 public:
  Tokenizer();  // empty: only the 256 byte tokens, no merges

  /// Trains on `text`: pre-tokenizes, counts distinct pre-tokens, then repeatedly merges the most
  /// frequent adjacent pair (never across pre-token boundaries) until `vocab_size` tokens exist.
  /// Ties in count are broken by the smallest (left id, right id) pair, so training is
  /// deterministic. Stops early, with fewer tokens, only when no adjacent pair is left.
  /// Throws wte::Error if vocab_size < 256.
  /// `progress` (may be null) is called every few hundred merges with (merges done, merges wanted).
  static Tokenizer train(std::string_view text, size_t vocab_size,
                         void (*progress)(size_t done, size_t total) = nullptr);

  /// Loads GPT-2's format: DIR/encoder.json (token string -> id, strings in bytes_to_unicode form)
  /// and DIR/vocab.bpe ("#version" line, then one merge "a b" per line, in merge order).
  /// Throws wte::Error naming the path on a missing or malformed file.
  static Tokenizer load(const std::string& dir);
  /// Same, from the two files' contents (as stored in a checkpoint); `origin` names them in errors.
  static Tokenizer from_strings(const std::string& encoder_json, const std::string& vocab_bpe,
                                const std::string& origin);

  /// Writes DIR/encoder.json and DIR/vocab.bpe in GPT-2's format (creates DIR). Throws wte::Error.
  void save(const std::string& dir) const;
  std::string encoder_json() const;  // the contents save() writes
  std::string vocab_bpe() const;

  /// Encodes any byte string. Every id is in [0, size()).
  std::vector<int32_t> encode(std::string_view text) const;
  /// Decodes ids back to bytes; decode(encode(s)) == s for every byte string s.
  /// Throws wte::Error on an id outside [0, size()).
  std::string decode(const std::vector<int32_t>& ids) const;
  /// The bytes of one token. Throws wte::Error on an id outside [0, size()).
  const std::string& piece(int32_t id) const;

  size_t size() const { return pieces_.size(); }   // vocabulary size
  size_t num_merges() const { return merges_.size(); }

  /// GPT-2's pre-tokenizer on its own: the pieces the BPE then splits (exposed for tests and tools).
  static std::vector<std::string_view> pretokenize(std::string_view text);

 private:
  std::vector<std::string> pieces_;                     // id -> bytes
  std::vector<std::pair<int32_t, int32_t>> merges_;     // merge rank -> (left id, right id)
  // Implementation details (merge rank lookup, bytes -> id map, encode cache) are private to
  // tokenizer.cc; add members as needed.
  std::unordered_map<uint64_t, int32_t> merge_rank_;    // (left<<32 | right) -> rank
  std::unordered_map<std::string, int32_t> piece_id_;   // bytes -> id
};

}  // namespace wte
