// GPT-2's byte-level BPE tokenizer: training, encoding, decoding, and GPT-2's own file format.
//
// Source of the method: Radford et al. 2019, "Language Models are Unsupervised Multitask Learners",
// section 2.2, and GPT-2's released encoder.py (bytes_to_unicode, the pre-tokenizer regex, bpe()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace wte {

class Tokenizer;

/// The ids of pre-tokens already encoded, so a pre-token seen before costs one hash lookup instead
/// of a BPE pass. One cache per thread (it is not thread-safe); reuse it across
/// Tokenizer::encode_append calls on many pieces of a corpus. It holds at most kMaxIds ids (and
/// the pre-tokens they came from) and starts afresh when full, or when used with another
/// Tokenizer; it never changes an id, only how fast ids are found.
class EncodeCache {
 public:
  static constexpr size_t kMaxIds = size_t(1) << 22;
  void clear();

 private:
  friend class Tokenizer;
  // Open addressing with linear probing over a power-of-two table, at most half full. A slot with
  // key_len 0 is empty (a pre-token is never empty).
  struct Slot {
    uint64_t hash;
    uint32_t key_start, key_len;  // the pre-token's bytes in keys_
    uint32_t ids_start, ids_len;  // its ids in ids_
  };
  // The ids of `key` (hashed to `hash`) appended to `out`, or false if it is not cached.
  bool find(std::string_view key, uint64_t hash, std::vector<int32_t>& out) const;
  void insert(std::string_view key, uint64_t hash, const int32_t* ids, size_t n);
  const Tokenizer* owner_ = nullptr;
  std::vector<Slot> slots_;
  size_t used_ = 0;
  std::string keys_;
  std::vector<int32_t> ids_;
};

/// A byte-level BPE vocabulary. Ids 0..255 are the 256 single-byte tokens, in GPT-2's
/// bytes_to_unicode order (as in GPT-2's encoder.json: '!'..'~', '¡'..'¬', '®'..'ÿ', then the
/// other bytes 0x00.., so byte 'A' is id 32 in a trained vocabulary and in GPT-2's alike); id 256 + i
/// is the result of merge i, so ids come out in merge order (low ids: frequent, short pieces). A
/// vocabulary loaded from GPT-2's files keeps those files' ids exactly.
///
/// Special tokens: GPT-2's "<|endoftext|>" (id 50256) is kept as an ordinary piece whose bytes are the
/// 13 characters "<|endoftext|>". No merge produces it, so encode() never emits it: the text
/// "<|endoftext|>" encodes to ordinary pieces ("<", "|", "end", ...). decode() and piece() of 50256
/// give the 13 characters. Callers that want a document separator insert the id themselves.
///
/// Pre-tokenization is GPT-2's regex (compiled with PCRE2, Unicode properties on):
///   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
/// so a leading space belongs to the word (" bank" and "Bank" are different tokens). Bytes that are
/// not valid UTF-8 become pre-tokens of their own, so any byte string encodes and decodes exactly.
/// The regex runs separately on each maximal valid-UTF-8 run (lookahead does not see past an invalid
/// byte). Encoding applies GPT-2's bpe() to each pre-token: repeatedly merge every occurrence (left
/// to right) of the adjacent pair with the lowest merge rank (Sennrich et al. 2016, "Neural Machine
/// Translation of Rare Words with Subword Units", applied to bytes as in GPT-2 sec. 2.2).
///
/// A Tokenizer is immutable after construction; const methods are safe to call from many threads.
class Tokenizer {
 public:
  Tokenizer();  // empty: only the 256 byte tokens, no merges

  /// Trains on `text` (any bytes): pre-tokenizes, counts distinct pre-tokens, then repeatedly
  /// merges the most frequent adjacent pair (never across pre-token boundaries; frequency = sum of
  /// the counts of the pre-tokens it occurs in, each occurrence counted) until `vocab_size` tokens
  /// exist. Ties in count are broken by the smallest (left id, right id) pair, so training is
  /// deterministic. Stops early, with fewer tokens, only when no adjacent pair is left.
  /// If a merge's bytes already exist as a token (two merge paths to one string; GPT-2's own files
  /// have none), the merge is recorded with that existing id and no new id is used.
  /// Cost: whole KJV (4.1 MB) to vocab_size 4096 in 0.08-0.12 s on one core (incremental pair
  /// counts with a lazy max-heap; see tokenizer.cc).
  /// Throws wte::Error if vocab_size < 256 or vocab_size > 2^31 - 1.
  /// `progress` (may be null) is called every 256 merges and at the end with (merges done, merges
  /// wanted = vocab_size - 256); an exception it throws ends the training and propagates (wte
  /// train's Ctrl-C before step 1).
  static Tokenizer train(std::string_view text, size_t vocab_size,
                         void (*progress)(size_t done, size_t total) = nullptr);

  /// Loads GPT-2's format: DIR/encoder.json (token string -> id, strings in bytes_to_unicode form)
  /// and DIR/vocab.bpe ("#version" line, then one merge "a b" per line, in merge order).
  /// Throws wte::Error naming the path on a missing or malformed file: unreadable file, bad JSON,
  /// ids not exactly 0..N-1, a string with a character outside bytes_to_unicode's 256, a missing
  /// single-byte token, or (with its line number) a merge line that is not two parts, a part or
  /// a result not in encoder.json, or a repeated merge.
  static Tokenizer load(const std::string& dir);
  /// Same, from the two files' contents (as stored in a checkpoint); `origin` names them in errors.
  static Tokenizer from_strings(const std::string& encoder_json, const std::string& vocab_bpe,
                                const std::string& origin);
  /// Same, with each file named in errors as given (e.g. "tokenizer file 'gpt2/vocab.json'"):
  /// for files under other names than encoder.json and vocab.bpe.
  static Tokenizer from_strings(const std::string& encoder_json, const std::string& vocab_bpe,
                                const std::string& encoder_name, const std::string& vocab_bpe_name);

  /// Writes DIR/encoder.json and DIR/vocab.bpe in GPT-2's format (creates DIR). Throws wte::Error
  /// naming the path on failure. Saving a tokenizer loaded from GPT-2's files reproduces them byte
  /// for byte.
  void save(const std::string& dir) const;
  /// The contents save() writes: encoder.json as Python's json.dumps writes it ({"!": 0, ...} in id
  /// order, non-ASCII as \uXXXX, no final newline); vocab.bpe as "#version: 0.2\n" + "a b\n" lines.
  std::string encoder_json() const;
  std::string vocab_bpe() const;

  /// Encodes any byte string. Every id is in [0, size()). Memoizes bpe() per distinct pre-token
  /// within one call; to encode a corpus piece by piece, use encode_append with one cache.
  std::vector<int32_t> encode(std::string_view text) const;
  /// Appends the ids of `text` to `ids`, remembering pre-tokens in `cache` (see EncodeCache).
  /// The ids are encode(text)'s. A text cut into pieces gives encode(whole)'s ids only when each
  /// cut falls where the pre-tokenizer would end a pre-token whatever follows (see
  /// safe_cut_before).
  void encode_append(std::string_view text, EncodeCache& cache, std::vector<int32_t>& ids) const;
  /// Decodes ids back to bytes; decode(encode(s)) == s for every byte string s.
  /// Throws wte::Error on an id outside [0, size()).
  std::string decode(const std::vector<int32_t>& ids) const;
  /// The bytes of one token. Throws wte::Error on an id outside [0, size()).
  const std::string& piece(int32_t id) const;
  /// The id of the token whose bytes are `bytes`, or -1 if there is none.
  int32_t id_of(std::string_view bytes) const;

  size_t size() const { return pieces_.size(); }   // vocabulary size
  size_t num_merges() const { return merges_.size(); }
  /// Merge `rank` as (left id, right id). Throws wte::Error on a rank outside [0, num_merges()).
  std::pair<int32_t, int32_t> merge(size_t rank) const;

  /// GPT-2's pre-tokenizer on its own: the pieces the BPE then splits (exposed for tests and tools).
  /// The views point into `text`; concatenated they give `text` back.
  static std::vector<std::string_view> pretokenize(std::string_view text);
  /// The same split found by PCRE2 alone, without the ASCII fast path pretokenize() takes where
  /// ASCII bytes decide a match: the reference that fast path is tested against.
  static std::vector<std::string_view> pretokenize_pcre2_only(std::string_view text);
  /// The largest p in (0, pos] (pos <= text.size() - 1) at which `text` can be cut so that encoding
  /// text[0, p) and text[p, end) apart gives the ids of the whole: text[p - 1] is an ASCII
  /// character that is not whitespace and text[p] is ASCII whitespace. No pre-token spans such a p
  /// (a run of letters, digits or other characters ends at whitespace, and the regex looks only
  /// ahead, never behind), and the whitespace after p decides nothing before it. 0 if there is none.
  static size_t safe_cut_before(std::string_view text, size_t pos);

  /// GPT-2's bytes_to_unicode form of a byte string (as used in encoder.json and vocab.bpe):
  /// e.g. " bank" -> "Ġbank". Inverse: from_unicode_form, which throws wte::Error on a
  /// character outside the 256 the mapping uses (or on invalid UTF-8).
  static std::string to_unicode_form(std::string_view bytes);
  static std::string from_unicode_form(std::string_view text);

 private:
  // Fills the lookup tables from pieces_, merges_ and merge_result_; `origin` names errors.
  void index(const std::string& origin);
  // GPT-2's bpe() on one pre-token, appending its ids to `out`.
  void bpe(std::string_view word, std::vector<int32_t>& out) const;

  std::vector<std::string> pieces_;                     // id -> bytes
  std::vector<std::pair<int32_t, int32_t>> merges_;     // merge rank -> (left id, right id)
  std::vector<int32_t> merge_result_;                   // merge rank -> id of the merged token
  std::unordered_map<uint64_t, int32_t> merge_rank_;    // (left<<32 | right) -> rank
  std::unordered_map<std::string, int32_t> piece_id_;   // bytes -> id
  int32_t byte_id_[256];                                // byte value -> id of its single-byte token
};

/// A token's bytes (or any byte string) made printable, for showing between double quotes: \n \r
/// \t \" \\ are escaped C-style; other control bytes, DEL, and bytes that are not part of a
/// complete valid UTF-8 character (RFC 3629, as the pre-tokenizer checks; a byte-level token can hold
/// half of one) become \xHH (two lower-case hex digits); printable ASCII and complete non-ASCII
/// characters are kept as they are. E.g. " bank\n" -> ` bank\n` (a space, "bank", a backslash, "n").
/// Never throws (except std::bad_alloc). Used by `wte tokenize`, `wte geometry` and
/// `wte hidden-states`, so a token prints the same everywhere.
std::string escape_piece(std::string_view bytes);

}  // namespace wte
