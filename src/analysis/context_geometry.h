// Contextual geometry: how the rows of the residual stream are spread, layer by layer, and how
// alike the same token's rows are in different contexts. Used by `wte geometry` (its "hidden
// states per layer" section) and `wte hidden-states` (each layer's baseline).
//
// Layers are Hugging Face's hidden_states list: entry l < n_layer is the residual stream entering
// block l (entry 0: wte[id] + wpe[t]), entry n_layer is what the unembedding reads (ln_f's output).
// A model with no blocks has two entries here, wte[id] + wpe[t] and ln_f's output (Hugging Face
// would list only the second).
//
// Measures (Ethayarajh 2019, "How Contextual are Contextualized Word Representations?", EMNLP):
//   anisotropy(l)     = the mean cosine of two random distinct rows of layer l (sec. 3.3: the
//                       baseline any cosine of that layer must be read against; near 1 when all
//                       rows crowd into one narrow cone)
//   self_similarity(l) = over tokens occurring at least min_count times, the mean of
//                       SelfSim(w) = mean cosine of distinct pairs of w's rows (eq. 1: the same
//                       token in different contexts); 1 means context changed nothing
//   both also after mean-centring (subtracting the layer's mean row first, Mu & Viswanath 2018),
//   which removes the common direction that makes raw cosines of late layers all read high.
// Means over pairs are exact, not sampled: for unit rows û_1..û_n, Σ_{i≠j} û_i·û_j = |Σ_i û_i|² - n.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "wte/decoder.h"  // hidden_state_layers
#include "wte/model.h"

namespace wte {

/// Rows of every layer for a sample of positions of a token stream.
struct HiddenStateSample {
  size_t C = 0;
  std::vector<std::string> layer_names;   // (L) "hidden_states[0]", ... "hidden_states[n] (ln_f)"
  std::vector<int32_t> ids;               // (N) the token of each row
  std::vector<uint32_t> positions;        // (N) its position in its window (0-based)
  std::vector<std::vector<float>> rows;   // (L) each (N, C)
  size_t layers() const { return rows.size(); }
};


/// Runs `model` (through the KV-cache Decoder, one position at a time: every row sees only the
/// tokens before it in its window) over windows of `window` tokens of `tokens`, evenly spaced over
/// the stream, until `n_rows` rows are collected (fewer if the stream is shorter), and keeps every
/// layer's rows. window is capped at n_ctx. Throws wte::Error if the stream has fewer than 2
/// tokens, window < 2, or an id is outside [0, vocab_size) (naming `where`).
HiddenStateSample sample_hidden_states(const Model& model, const std::vector<int32_t>& tokens,
                                       size_t n_rows, size_t window, const std::string& where);

/// One layer's measures.
struct LayerGeometry {
  double anisotropy_raw = 0, anisotropy_centred = 0;           // mean random-pair cosine
  double self_similarity_raw = 0, self_similarity_centred = 0; // mean over tokens of SelfSim
  double mean_norm = 0;                                        // mean row norm
  size_t rows = 0;         // rows used (position >= min_position)
  size_t tokens = 0;       // distinct tokens with >= min_count rows (the self-similarity's words)
};

/// Measures every layer of `s` over the rows whose position is >= min_position (a row at
/// position 0 sees no context: its rows are equal for every occurrence of its token). Tokens with
/// fewer than min_count (>= 2) such rows are left out of the self-similarity. Rows of norm 0 are
/// skipped. Throws wte::Error if fewer than 2 rows remain or no token has min_count rows.
std::vector<LayerGeometry> context_geometry(const HiddenStateSample& s, size_t min_position,
                                            size_t min_count);

/// The mean row (C), in double, of layer l over s's rows with position >= min_position: the
/// centre that the "centred" measures subtract. Throws wte::Error if there is no such row.
std::vector<double> layer_mean(const HiddenStateSample& s, size_t l, size_t min_position);

/// Cosine of rows a and b (C) after subtracting `centre` (C) from both (centre may be null: raw).
/// 0 if either has norm 0.
double centred_cosine(const float* a, const float* b, const double* centre, size_t C);

/// Cosines for the pictures, layer l: up to max_pairs random pairs of distinct rows
/// (`random_pairs`) and up to max_pairs pairs of rows of the same token (`same_token_pairs`, drawn
/// uniformly among all such pairs), both over rows with position >= min_position, raw or centred
/// on layer_mean. Deterministic (wte::Rng(seed)).
struct PairCosines {
  std::vector<double> random_pairs, same_token_pairs;
};
PairCosines layer_pair_cosines(const HiddenStateSample& s, size_t l, size_t min_position,
                               size_t max_pairs, bool centred, uint64_t seed);

}  // namespace wte
