// Token data: validation of ids, int32 token files, the train/validation split, batches.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "wte/rng.h"

namespace wte {

/// Throws wte::Error naming the first id outside [0, vocab_size), its position and `where`
/// ("token id -1 at position 7 of val split is outside [0, vocab_size=4096)"). O(n); call it once
/// before any compute so no kernel ever reads out of bounds.
void check_token_ids(const int32_t* ids, size_t n, size_t vocab_size, const std::string& where);

/// Reads a token file: raw little-endian int32 ids, no header. Throws wte::Error naming the path if
/// it is missing, unreadable, or its size is not a multiple of 4 bytes. Ids are NOT range-checked
/// here (the vocabulary is not known yet): call check_token_ids.
std::vector<int32_t> read_token_file(const std::string& path);
/// Writes ids as raw little-endian int32, atomically (temporary file, fsync, rename).
void write_token_file(const std::string& path, const std::vector<int32_t>& ids);

/// Makes a finished temporary file durable under its final name: fsync(tmp), rename(tmp, path),
/// fsync(directory). tmp must be in path's directory. Throws wte::Error naming both paths.
void commit_file(const std::string& tmp, const std::string& path);

/// Reads a whole file as bytes. Throws wte::Error naming the path (and errno's text) when it
/// cannot be opened or a read fails (EIO).
std::string read_text_file(const std::string& path);
/// Writes bytes atomically: PATH.tmp in the same directory, fsync, rename over PATH, fsync the dir.
/// A crash at any moment leaves either the old file or the new one, never a partial file at PATH.
void write_file_atomic(const std::string& path, std::string_view bytes);

/// FNV-1a, 64-bit (Fowler, Noll, Vo; offset basis 14695981039346656037, prime 1099511628211) of
/// `n` bytes, continuing from `hash` (pass the previous result to hash data in pieces). Not
/// cryptographic: it identifies a token stream or a config text in a checkpoint, so a resumed run
/// can tell that its data or settings differ from the ones the checkpoint was trained on.
inline constexpr uint64_t kFnv1a64Offset = 14695981039346656037ULL;
uint64_t fnv1a64(const void* data, size_t n, uint64_t hash = kFnv1a64Offset);
/// FNV-1a 64 of a token stream's bytes (int32 little-endian, as in a token file).
inline uint64_t fnv1a64(const std::vector<int32_t>& ids) {
  return fnv1a64(ids.data(), ids.size() * sizeof(int32_t));
}

/// llm.c's token shard (karpathy/llm.c, dev/data/data_common.py write_datafile; read by
/// llmc/dataloader.h): a header of 256 little-endian int32 (magic, version, token count, the rest
/// zero), then exactly that many tokens, little-endian: uint16 under magic 20240520 / version 1
/// (GPT-2's format, for vocab_size <= 65536), uint32 under magic 20240801 / version 7 (its
/// llama-3 format, for larger vocabularies). The count is an int32, so a shard holds at most
/// 2^31 - 1 tokens.
struct ShardFormat {
  int32_t magic;
  int32_t version;
  size_t token_bytes;  // 2 or 4
};
inline constexpr ShardFormat kShardU16{20240520, 1, 2};
inline constexpr ShardFormat kShardU32{20240801, 7, 4};
inline constexpr size_t kShardHeaderInts = 256;
inline constexpr size_t kShardMaxTokens = 2147483647;
/// The format for ids of a vocabulary of `vocab_size`: uint16 up to 65536, else uint32.
inline constexpr ShardFormat shard_format_for(size_t vocab_size) {
  return vocab_size <= 65536 ? kShardU16 : kShardU32;
}

/// Writes one shard, streaming: tokens go to PATH.tmp as they come; finish() writes the header's
/// count, fsyncs and renames PATH.tmp to PATH (so PATH is complete or absent). Destroyed
/// unfinished, it removes PATH.tmp. Throws wte::Error naming the path on a failed write (a full
/// disk included), on an id that does not fit the format, or past kShardMaxTokens tokens.
class ShardWriter {
 public:
  ShardWriter(const std::string& path, ShardFormat format);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;
  void append(const int32_t* ids, size_t n);
  size_t count() const { return count_; }
  void finish();

 private:
  std::string path_, tmp_;
  ShardFormat format_;
  int fd_ = -1;
  size_t count_ = 0;
  std::vector<unsigned char> buffer_;
  void flush();
};

/// A read-only sequence of token ids, as one stream: either ids in memory, or the concatenation of
/// token files, each memory-mapped (MAP_SHARED, read-only), so reading a window costs the pages it
/// touches and a stream of any size needs no memory of its own. Files are llm.c shards (uint16
/// or uint32, see ShardFormat, told apart by the header's magic) or wte's own token files (raw
/// little-endian int32, no header). Copies share the mapping. Ids are NOT range-checked here: call
/// check_token_ids.
class TokenStream {
 public:
  TokenStream();
  /// The stream of `ids` (owned).
  explicit TokenStream(std::vector<int32_t> ids);
  /// A stream reading `*ids`, which must outlive it and every copy.
  static TokenStream view(const std::vector<int32_t>* ids);
  /// Opens `spec`: a file, a directory (its *.bin files) or a glob pattern (e.g. "data/train_*.bin"),
  /// files in byte order of their names. `what` names the spec in errors (e.g. "data.train_tokens").
  /// Throws wte::Error naming the file and the value on: no file found, a file that cannot be
  /// opened or mapped, a shard whose version does not go with its magic, a negative count, or a
  /// size other than 1024 + count x token bytes (truncated or padded); an int32 file whose size is
  /// not a multiple of 4.
  static TokenStream open(const std::string& spec, const std::string& what);

  size_t size() const;
  /// True when the ids come from files (not from memory).
  bool mapped() const;
  /// The files, in stream order (empty for ids in memory).
  std::vector<std::string> files() const;
  /// Copies ids [pos, pos + n) to dst as int32. Throws wte::Error if the range is past the end.
  void read(size_t pos, size_t n, int32_t* dst) const;
  /// Gives back the pages holding ids [pos, pos + n) (madvise MADV_DONTNEED; the kernel keeps them
  /// in its page cache), so a pass over a mapped stream does not keep it resident. No-op in memory.
  void release(size_t pos, size_t n) const;
  /// Calls fn(ids, count, pos) on consecutive pieces of at most `chunk` ids covering the stream in
  /// order, releasing each piece's pages after it. One pass, O(chunk) memory.
  void for_each_chunk(size_t chunk,
                      const std::function<void(const int32_t* ids, size_t n, size_t pos)>& fn) const;
  /// "position P of FILE" for stream position pos (or "position P of WHERE" in memory).
  std::string locate(size_t pos, const std::string& where) const;

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
};

/// check_token_ids over a whole stream, in one pass that releases each piece's pages; an id outside
/// [0, vocab_size) is named with its file and position in the file (a uint32 shard's value as
/// stored). Throws wte::Error.
void check_token_ids(const TokenStream& ids, size_t vocab_size, const std::string& where);
/// fnv1a64 of the stream's ids as int32 little-endian bytes, as for a vector (one pass).
uint64_t fnv1a64(const TokenStream& ids);
/// Writes the stream as an int32 token file, atomically (as write_token_file), in one pass.
void write_token_file(const std::string& path, const TokenStream& ids);

class Tokenizer;

/// What prepare_shards reads and writes. Inputs are files, directories (every regular file under
/// them, recursively) and glob patterns, each expanded in byte order of the names, in the order
/// given; a file ending in .gz is gunzipped (zlib; any other file is read as it is).
struct PrepareOptions {
  std::vector<std::string> inputs;
  std::string out_dir;                       // created if needed; must hold no *.bin file yet
  double val_fraction = 0.1;                 // as data.val_fraction
  size_t shard_tokens = 100000000;           // tokens per shard (the last of a split: the rest)
  size_t threads = 1;                        // encoding threads
  size_t chunk_bytes = size_t(1) << 22;      // text per encoding task (a few MiB)
  /// Called every ~0.5 s and at the end with (text bytes read, input bytes read (compressed for
  /// .gz), input bytes in all, tokens written). May be empty.
  std::function<void(size_t text_bytes, size_t input_bytes, size_t input_total, size_t tokens)>
      progress;
};

struct PrepareSummary {
  size_t files = 0, text_bytes = 0;
  size_t train_documents = 0, val_documents = 0;
  size_t train_tokens = 0, val_tokens = 0;
  std::vector<std::string> train_shards, val_shards;
  ShardFormat format{};
};

/// Tokenizes a corpus into llm.c shards: OUT/train_000000.bin, ... and OUT/val_000000.bin, ...
/// (shard_format_for(tokenizer.size())). Documents are split at blank lines, as data.text is
/// (split_documents), in input order across all files (a document never spans two files), and
/// dealt into train and validation by the same rule: document i goes to validation when
/// floor((i+1)·f) > floor(i·f). Each split's stream is its documents joined by "\n\n" and its
/// ids are exactly tokenizer.encode(that text), whatever `threads`: the text is cut only where
/// Tokenizer::safe_cut_before allows, and pieces are written in order. Throws wte::Error naming
/// the file or value on an unreadable input, a corrupt .gz, an input that matches nothing, an
/// OUT that already holds shards, either split empty, or a failed write; shards written by a
/// failed run are removed.
PrepareSummary prepare_shards(const Tokenizer& tokenizer, const PrepareOptions& opts);

/// Splits a corpus into documents at blank lines (empty, or only "\r", so CRLF files work too),
/// then deals them into train and validation: document i (0-based) goes to validation when floor((i+1)·f) > floor(i·f), which
/// picks floor(count·f) documents spread evenly through the corpus. Deterministic; no RNG.
/// Each split is its documents joined with "\n\n". Throws wte::Error if either split is empty
/// (for fewer than 2 documents, saying so: no val_fraction can help then).
struct TextSplit {
  std::string train;
  std::string val;
  size_t train_documents = 0;
  size_t val_documents = 0;
};
TextSplit split_documents(std::string_view text, double val_fraction);

/// Cross-entropy in nats per token of `val` under the unigram distribution counted on `train`,
/// with add-one (Laplace) smoothing over all vocab_size ids so unseen tokens have finite cost:
///   p(v) = (count_train(v) + 1) / (N_train + vocab_size);  H = -mean_{x in val} ln p(x).
/// The baseline a model must beat: it is what predicting by frequency alone achieves.
double unigram_cross_entropy(const std::vector<int32_t>& train, const std::vector<int32_t>& val,
                             size_t vocab_size);
/// The same with the train counts taken in one pass over a stream.
double unigram_cross_entropy(const TokenStream& train, const std::vector<int32_t>& val,
                             size_t vocab_size);

/// The largest sample count whose epoch order a BatchLoader draws by Fisher-Yates and stores
/// (4 MiB of uint32). Above it the order is computed (see BatchLoader), so neither the loader's
/// memory nor a checkpoint grows with the corpus.
inline constexpr size_t kMaxStoredOrderSamples = size_t(1) << 20;
/// The words LoaderState::order holds for num_samples samples: num_samples (the stored order) up to
/// kMaxStoredOrderSamples, else 8 (the 4 round keys of the computed order, low word first).
inline constexpr size_t loader_order_words(size_t num_samples) {
  return num_samples <= kMaxStoredOrderSamples ? num_samples : 8;
}

/// Everything a BatchLoader's future depends on, so a resumed run serves the same batches in the
/// same order: the epoch, the cursor in this epoch's sample order, the order itself (a permutation
/// of [0, num_samples), or for more than kMaxStoredOrderSamples samples the keys that compute it)
/// and the state of the shuffle's Rng (xoshiro256**, 4 words) as it is after drawing this epoch's
/// order. num_samples and shuffle identify the stream and mode it belongs to.
struct LoaderState {
  uint64_t epoch = 0;
  uint64_t cursor = 0;                  // samples of this epoch already served, <= num_samples
  uint64_t num_samples = 0;
  bool shuffle = false;
  std::array<uint64_t, 4> rng_state{};
  std::vector<uint32_t> order;          // (loader_order_words(num_samples),)
};

/// Throws wte::Error naming `where` and the first problem if `s` is not a state a loader can have:
/// order not of size num_samples or not a permutation of [0, num_samples), cursor > num_samples,
/// an all-zero Rng state (xoshiro's one invalid state), or (shuffle off) an order that is not the
/// identity. A computed order (more than kMaxStoredOrderSamples samples) must have its 8 words.
void check_loader_state(const LoaderState& s, const std::string& where);

/// Serves (B,T) input/target batches from one token stream. Sample k is the window
/// tokens[k·T, k·T + T + 1): inputs its first T tokens, targets the last T (next-token). Consecutive
/// windows share only their boundary token (inputs never overlap), so an epoch visits each sample
/// exactly once; with shuffle on, the sample order of each epoch is a Fisher-Yates permutation
/// drawn from the loader's own Rng, or, above kMaxStoredOrderSamples samples, a keyed bijection
/// of [0, num_samples) computed per position: a 4-round Feistel network on the smallest
/// power-of-4 range holding num_samples, walked until it lands below num_samples (cycle walking;
/// Black and Rogaway 2002, "Ciphers with Arbitrary Finite Domains"), its round keys drawn from the
/// Rng at the epoch's start. A window of a memory-mapped stream is read and its pages released,
/// so the loader's resident memory does not grow with the stream.
class BatchLoader {
 public:
  /// Throws wte::Error if the stream has fewer than T + 1 tokens. `tokens` must outlive the loader.
  BatchLoader(const std::vector<int32_t>* tokens, size_t T, bool shuffle, uint64_t seed);
  /// The same over any stream (the loader keeps a copy, which shares the mapping).
  BatchLoader(const TokenStream& tokens, size_t T, bool shuffle, uint64_t seed);

  /// Fills inputs and targets (B,T) with the next B samples, starting a new epoch when needed.
  /// If `served` is not null, appends the (epoch, sample index) of each of the B samples to it.
  void next_batch(int32_t* inputs, int32_t* targets, size_t B,
                  std::vector<std::array<uint64_t, 2>>* served = nullptr);
  /// The next B samples (indices k of the windows above), the ones next_batch would copy, into
  /// `samples` (resized to B), starting a new epoch when needed; `served` as for next_batch.
  /// With copy_samples, a caller copies a part of the batch at a time (the training loop copies
  /// one micro-batch before its forward, so gradient accumulation holds one micro-batch's ids).
  void next_samples(size_t B, std::vector<uint32_t>* samples,
                    std::vector<std::array<uint64_t, 2>>* served = nullptr);
  /// Copies the windows of samples[0, count) into inputs and targets (count, T).
  /// Each sample must be below the stream's sample count (next_samples' output is).
  void copy_samples(const uint32_t* samples, size_t count, int32_t* inputs, int32_t* targets) const;

  /// The loader's position, for a checkpoint.
  LoaderState state() const;
  /// Continues from a saved position: the next batch is the one the saved loader would have served.
  /// Throws wte::Error (naming `where`, and both values) if the state is invalid
  /// (check_loader_state) or belongs to another stream or mode: num_samples or shuffle differ.
  /// On error the loader is unchanged.
  void restore(const LoaderState& s, const std::string& where);

  size_t num_samples() const { return num_samples_; }
  size_t epoch() const { return epoch_; }
  size_t cursor() const { return cursor_; }   // samples of this epoch already served

 private:
  void start_epoch();
  uint32_t sample_at(size_t position) const;  // the sample at `position` of this epoch's order
  TokenStream tokens_;
  size_t T_;
  bool shuffle_;
  Rng rng_;
  size_t num_samples_;
  std::vector<uint32_t> order_;
  size_t epoch_ = 0;
  size_t cursor_ = 0;
};

}  // namespace wte
