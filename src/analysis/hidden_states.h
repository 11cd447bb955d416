// Every layer's rows of a few texts (Hugging Face's hidden_states list, see context_geometry.h),
// and the measures `wte hidden-states` prints: each layer's baseline, the check that layer 0 is
// wte[id] + wpe[index], and the same token at the same (or another) index in two texts, compared
// layer by layer. A causal model's row sees only the tokens at or before its index, so texts equal
// up to an index give equal rows there at every layer; texts that differ before it share only
// the context-free layer 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "src/analysis/context_geometry.h"
#include "wte/decoder.h"
#include "wte/model.h"
#include "wte/tokenizer.h"

namespace wte {

/// One text, its token ids and every layer's rows.
struct EncodedText {
  std::string text;
  std::vector<int32_t> ids;               // (T)
  std::vector<std::vector<float>> rows;   // (L) each (T, C): hidden_states[l]
  std::vector<float> logits;              // (T, V), only when asked for
};

/// Encodes every text with `tok` (rows still empty). Throws wte::UsageError naming the text
/// (as `--text "..."`) if it encodes to no tokens, to more than n_ctx tokens, or to an id outside
/// [0, vocab_size). All texts are checked before any is run.
std::vector<EncodedText> encode_texts(const Tokenizer& tok, const std::vector<std::string>& texts,
                                      size_t n_ctx, size_t vocab_size);

/// Every layer's rows (L = hidden_state_layers(dec.n_layer()) entries, each (T, C) floats) of
/// e.ids through the KV-cache decoder's prefill: each row has the bits of decoding the text one
/// position at a time (a row sees only the tokens at or before it). With `logits`, also each
/// position's logits (T, vocab_size), the unembedding being skipped otherwise. Resets `dec`.
/// e.ids must be non-empty, at most n_ctx long and valid ids (encode_texts checks them).
void run_hidden_states(Decoder& dec, EncodedText& e, bool logits);

/// The baseline rows: with a non-empty data_path, n_rows rows of windows of n_ctx tokens of that
/// int32 token file (sample_hidden_states; its errors, and read_token_file's, naming the path);
/// without one, every row of the texts' own rows (C floats each, positions = token indices).
HiddenStateSample hidden_state_baseline_sample(const Model& model,
                                               const std::vector<EncodedText>& texts,
                                               const std::string& data_path, size_t n_rows);

/// Per layer: the baseline (mean cosine of random distinct rows, exact over the sample) and the
/// centre (mean row, in double) the centred cosine subtracts.
struct LayerBaseline {
  std::vector<double> anisotropy;          // (L) in [-1, 1]
  std::vector<std::vector<double>> centre; // (L) each (C)
  size_t rows = 0;                         // rows of the sample
  std::string source;                      // where the rows came from, for the printout
};

/// Measures every layer of `s` (all its rows). Throws wte::Error if s has no rows.
LayerBaseline measure_baseline(const HiddenStateSample& s, const std::string& source);

/// How many of e's layer-0 rows are bit for bit the float sum wte[id] + wpe[index] of the
/// model's stored tables (of e.ids.size() rows; C = d_model).
size_t rows_equal_to_embedding(const Model& model, const EncodedText& e);

/// One layer of the same token at the same index in two texts.
struct SameIndexLayer {
  bool identical = false;     // the two rows are bit-identical
  bool context_free = false;  // layer 0, or any layer of a model with no blocks: must be identical
  double max_diff = 0;        // max |a - b| over the C values
  double cosine = 0;          // raw cosine of the two rows
  double centred = 0;         // cosine after subtracting the layer's baseline centre
};

/// A token shared by two texts at an index at or after their first difference.
struct SharedToken {
  size_t index = 0;
  std::vector<SameIndexLayer> layers;  // (L)
};

/// Texts a < b compared at the same indices.
struct TextPairComparison {
  size_t a = 0, b = 0;
  size_t first_diff = 0;      // the texts' ids are equal at every index before this
  bool later_shared = false;  // some index >= first_diff holds the same id in both
  std::vector<size_t> prefix_identical_layers;  // (first_diff) bit-identical layers per index
  std::vector<SharedToken> shared;              // the indices >= first_diff of equal ids
};

/// Every pair of texts (a < b, in order) that share a token at some index, compared layer by
/// layer against `base` (its centres); pairs sharing none are left out. n_layer is the model's
/// block count (0: every layer is context-free). Texts must have their rows (run_hidden_states).
std::vector<TextPairComparison> compare_same_index(const std::vector<EncodedText>& texts,
                                                   const LayerBaseline& base, size_t n_layer);

/// The same token at index i of text a and index j of text b, i != j (a <= b; in one text,
/// i < j): layer-0 rows differ by up to max_diff, and (row_i - row_j) - (wpe[i] - wpe[j]) is at
/// most max_dev (float rounding of the sums).
struct OtherIndexPair {
  size_t a = 0, i = 0, b = 0, j = 0;
  double max_diff = 0, max_dev = 0;
};

/// Every such pair over all texts, in order of (a, b, i, j). wpe is the model's position table
/// (n_ctx, C).
std::vector<OtherIndexPair> compare_other_index(const std::vector<EncodedText>& texts,
                                                const float* wpe, size_t C);

/// Writes `out` atomically (an HDF5 file: attributes format, checkpoint, layers, n_layer,
/// d_model, vocab_size, texts; per text /textN/text, /textN/ids (T,) int32, /textN/hidden_states
/// (L, T, C) and /textN/logits (T, V) float32). Texts must have rows and logits. Disk space is
/// reserved first; throws wte::Error naming `out` if it cannot be written (nothing is left
/// half-written).
void write_hidden_states(const std::string& out, const std::string& checkpoint,
                         const std::vector<EncodedText>& texts, size_t n_layer, size_t C, size_t V);

}  // namespace wte
