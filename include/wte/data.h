// Token data: validation of ids, int32 token files, the train/validation split, batches.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
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

/// Everything a BatchLoader's future depends on, so a resumed run serves the same batches in the
/// same order: the epoch, the cursor in this epoch's sample order, the order itself (a permutation
/// of [0, num_samples)) and the state of the shuffle's Rng (xoshiro256**, 4 words) as it is after
/// drawing this epoch's order. num_samples and shuffle identify the stream and mode it belongs to.
struct LoaderState {
  uint64_t epoch = 0;
  uint64_t cursor = 0;                  // samples of this epoch already served, <= num_samples
  uint64_t num_samples = 0;
  bool shuffle = false;
  std::array<uint64_t, 4> rng_state{};
  std::vector<uint32_t> order;          // (num_samples,) sample index at each position of the epoch
};

/// Throws wte::Error naming `where` and the first problem if `s` is not a state a loader can have:
/// order not of size num_samples or not a permutation of [0, num_samples), cursor > num_samples,
/// an all-zero Rng state (xoshiro's one invalid state), or (shuffle off) an order that is not the
/// identity.
void check_loader_state(const LoaderState& s, const std::string& where);

/// Serves (B,T) input/target batches from one token stream. Sample k is the window
/// tokens[k·T, k·T + T + 1): inputs its first T tokens, targets the last T (next-token). Consecutive
/// windows share only their boundary token (inputs never overlap), so an epoch visits each sample
/// exactly once; with shuffle on, the sample order of
/// each epoch is a Fisher-Yates permutation drawn from the loader's own Rng.
class BatchLoader {
 public:
  /// Throws wte::Error if the stream has fewer than T + 1 tokens.
  BatchLoader(const std::vector<int32_t>* tokens, size_t T, bool shuffle, uint64_t seed);

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
  const std::vector<int32_t>* tokens_;
  size_t T_;
  bool shuffle_;
  Rng rng_;
  size_t num_samples_;
  std::vector<uint32_t> order_;
  size_t epoch_ = 0;
  size_t cursor_ = 0;
};

}  // namespace wte
