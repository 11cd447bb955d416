#include "src/analysis/context_geometry.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "wte/decoder.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/rng.h"

namespace wte {

size_t hidden_state_layers(size_t n_layer) { return n_layer == 0 ? 2 : n_layer + 1; }

namespace {

// The decoder's row of entry l of the layer list.
const float* layer_row(const Decoder& dec, size_t l) {
  return l + 1 == hidden_state_layers(dec.n_layer()) ? dec.final_hidden() : dec.residual(l);
}

// Unit vector of (row - centre) in double; false if its norm is 0.
bool unit(const float* row, const double* centre, size_t C, std::vector<double>& out) {
  out.resize(C);
  double n2 = 0;
  for (size_t c = 0; c < C; ++c) {
    out[c] = double(row[c]) - (centre ? centre[c] : 0.0);
    n2 += out[c] * out[c];
  }
  if (n2 == 0) return false;
  const double inv = 1.0 / std::sqrt(n2);
  for (double& v : out) v *= inv;
  return true;
}

// Mean cosine of distinct pairs of the rows `idx` of `rows` (N, C), centred or raw: exact,
// (|Σ û|² - n) / (n (n - 1)). Rows of norm 0 are left out. Returns NaN if fewer than 2 remain.
double mean_pair_cosine(const std::vector<float>& rows, size_t C, const std::vector<size_t>& idx,
                        const double* centre) {
  std::vector<double> sum(C, 0.0), u;
  size_t n = 0;
  for (size_t i : idx) {
    if (!unit(rows.data() + i * C, centre, C, u)) continue;
    for (size_t c = 0; c < C; ++c) sum[c] += u[c];
    ++n;
  }
  if (n < 2) return NAN;
  double s2 = 0;
  for (double v : sum) s2 += v * v;
  return (s2 - double(n)) / (double(n) * double(n - 1));
}

// Rows with position >= min_position, and those rows grouped by token.
std::vector<size_t> used_rows(const HiddenStateSample& s, size_t min_position) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < s.ids.size(); ++i)
    if (s.positions[i] >= min_position) idx.push_back(i);
  return idx;
}
std::map<int32_t, std::vector<size_t>> rows_by_token(const HiddenStateSample& s,
                                                     const std::vector<size_t>& idx) {
  std::map<int32_t, std::vector<size_t>> groups;
  for (size_t i : idx) groups[s.ids[i]].push_back(i);
  return groups;
}

}  // namespace

HiddenStateSample sample_hidden_states(const Model& model, const std::vector<int32_t>& tokens,
                                       size_t n_rows, size_t window, const std::string& where) {
  if (tokens.size() < 2)
    throw Error(where + ": " + std::to_string(tokens.size()) +
                " tokens; the hidden-state sample needs at least 2");
  check_token_ids(tokens.data(), tokens.size(), model.config().vocab_size, where);
  window = std::min({window, model.config().n_ctx, tokens.size()});
  if (window < 2) throw Error(where + ": windows of " + std::to_string(window) +
                              " tokens; the hidden-state sample needs at least 2");
  n_rows = std::max<size_t>(n_rows, 2);
  Decoder dec(model);
  HiddenStateSample s;
  s.C = model.config().d_model;
  const size_t L = hidden_state_layers(dec.n_layer());
  for (size_t l = 0; l < L; ++l) {
    std::string name = "hidden_states[" + std::to_string(l) + "]";
    if (l + 1 == L) name += dec.n_layer() == 0 ? " (ln_f of hidden_states[0])" : " (after ln_f)";
    s.layer_names.push_back(name);
  }
  s.rows.resize(L);
  // Windows evenly spaced over the stream (start w · (len - window) / (W - 1)).
  const size_t W = std::min((n_rows + window - 1) / window, tokens.size() - window + 1);
  for (size_t w = 0; w < W && s.ids.size() < n_rows; ++w) {
    const size_t start = W == 1 ? 0 : w * (tokens.size() - window) / (W - 1);
    dec.reset();
    for (size_t t = 0; t < window && s.ids.size() < n_rows; ++t) {
      dec.step_hidden(tokens[start + t]);
      s.ids.push_back(tokens[start + t]);
      s.positions.push_back(static_cast<uint32_t>(t));
      for (size_t l = 0; l < L; ++l) {
        const float* r = layer_row(dec, l);
        s.rows[l].insert(s.rows[l].end(), r, r + s.C);
      }
    }
  }
  return s;
}

std::vector<double> layer_mean(const HiddenStateSample& s, size_t l, size_t min_position) {
  const std::vector<size_t> idx = used_rows(s, min_position);
  if (idx.empty())
    throw Error("no hidden-state rows at position >= " + std::to_string(min_position));
  std::vector<double> mean(s.C, 0.0);
  for (size_t i : idx)
    for (size_t c = 0; c < s.C; ++c) mean[c] += s.rows[l][i * s.C + c];
  for (double& v : mean) v /= double(idx.size());
  return mean;
}

double centred_cosine(const float* a, const float* b, const double* centre, size_t C) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t c = 0; c < C; ++c) {
    const double x = double(a[c]) - (centre ? centre[c] : 0.0);
    const double y = double(b[c]) - (centre ? centre[c] : 0.0);
    ab += x * y, aa += x * x, bb += y * y;
  }
  return aa == 0 || bb == 0 ? 0.0 : ab / std::sqrt(aa * bb);
}

std::vector<LayerGeometry> context_geometry(const HiddenStateSample& s, size_t min_position,
                                            size_t min_count) {
  if (min_count < 2) throw Error("context_geometry: min_count must be at least 2");
  const std::vector<size_t> idx = used_rows(s, min_position);
  if (idx.size() < 2)
    throw Error("context_geometry: " + std::to_string(idx.size()) + " rows at position >= " +
                std::to_string(min_position) + "; at least 2 needed");
  std::vector<std::vector<size_t>> words;
  for (auto& [id, g] : rows_by_token(s, idx))
    if (g.size() >= min_count) words.push_back(g);
  if (words.empty())
    throw Error("context_geometry: no token occurs " + std::to_string(min_count) +
                " times among the " + std::to_string(idx.size()) +
                " sampled rows; sample more tokens");
  std::vector<LayerGeometry> out;
  for (size_t l = 0; l < s.layers(); ++l) {
    LayerGeometry g;
    const std::vector<double> centre = layer_mean(s, l, min_position);
    g.rows = idx.size();
    g.anisotropy_raw = mean_pair_cosine(s.rows[l], s.C, idx, nullptr);
    g.anisotropy_centred = mean_pair_cosine(s.rows[l], s.C, idx, centre.data());
    double raw = 0, cen = 0;
    size_t n = 0;
    for (const std::vector<size_t>& w : words) {
      const double r = mean_pair_cosine(s.rows[l], s.C, w, nullptr);
      const double c = mean_pair_cosine(s.rows[l], s.C, w, centre.data());
      if (std::isnan(r) || std::isnan(c)) continue;
      raw += r, cen += c, ++n;
    }
    g.tokens = n;
    g.self_similarity_raw = n ? raw / double(n) : NAN;
    g.self_similarity_centred = n ? cen / double(n) : NAN;
    for (size_t i : idx) {
      double n2 = 0;
      for (size_t c = 0; c < s.C; ++c) n2 += double(s.rows[l][i * s.C + c]) * s.rows[l][i * s.C + c];
      g.mean_norm += std::sqrt(n2) / double(idx.size());
    }
    out.push_back(g);
  }
  return out;
}

PairCosines layer_pair_cosines(const HiddenStateSample& s, size_t l, size_t min_position,
                               size_t max_pairs, bool centred, uint64_t seed) {
  const std::vector<size_t> idx = used_rows(s, min_position);
  PairCosines pc;
  if (idx.size() < 2) return pc;
  std::vector<double> centre;
  if (centred) centre = layer_mean(s, l, min_position);
  const double* cp = centred ? centre.data() : nullptr;
  const float* rows = s.rows[l].data();
  const size_t C = s.C;
  Rng rng(seed);
  for (size_t p = 0; p < max_pairs; ++p) {
    const size_t i = rng.below(idx.size());
    size_t j = rng.below(idx.size() - 1);
    if (j >= i) ++j;
    pc.random_pairs.push_back(centred_cosine(rows + idx[i] * C, rows + idx[j] * C, cp, C));
  }
  // Same-token pairs: all if few enough, else uniform among all (group ∝ its pair count).
  std::vector<std::vector<size_t>> groups;
  std::vector<double> cum;   // cumulative pair counts
  double total = 0;
  for (auto& [id, g] : rows_by_token(s, idx))
    if (g.size() >= 2) {
      total += double(g.size()) * double(g.size() - 1) / 2;
      groups.push_back(g);
      cum.push_back(total);
    }
  if (groups.empty()) return pc;
  if (total <= double(max_pairs)) {
    for (const auto& g : groups)
      for (size_t a = 0; a < g.size(); ++a)
        for (size_t b = a + 1; b < g.size(); ++b)
          pc.same_token_pairs.push_back(centred_cosine(rows + g[a] * C, rows + g[b] * C, cp, C));
  } else {
    for (size_t p = 0; p < max_pairs; ++p) {
      const double u = rng.uniform() * total;
      const size_t gi = std::min<size_t>(
          std::upper_bound(cum.begin(), cum.end(), u) - cum.begin(), groups.size() - 1);
      const std::vector<size_t>& g = groups[gi];
      const size_t a = rng.below(g.size());
      size_t b = rng.below(g.size() - 1);
      if (b >= a) ++b;
      pc.same_token_pairs.push_back(centred_cosine(rows + g[a] * C, rows + g[b] * C, cp, C));
    }
  }
  return pc;
}

}  // namespace wte
