// `wte geometry`'s measures of a series of wte tables (one per checkpoint) and its text report.
// The command (cli/cmd_geometry.cc) reads options and, through src/analysis/geometry_series.h, the
// checkpoints, and calls these; the pictures and the page are in src/analysis/geometry_page.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "src/analysis/geometry.h"
#include "wte/tokenizer.h"

namespace wte {

/// wte of one checkpoint.
struct WteSnapshot {
  std::string path;
  int64_t step = 0;
  std::vector<float> wte;   // (V, C)
};

/// Class labels of some tokens (a TSV id<TAB>token<TAB>class, datasets/planted/labels.tsv).
struct TokenLabels {
  std::vector<int32_t> ids;          // labelled token ids, file order
  std::vector<int> cls;              // class index per labelled id
  std::vector<std::string> names;    // class index -> name
};

/// One step's measures.
struct GeometryMeasures {
  int64_t step = 0;
  Anisotropy aniso;
  double eff_rank = 0, mean_norm = 0;
  double purity = -1, silhouette = -2;   // with labels only
};

/// A token shown as  " the" (259): its bytes escaped by escape_piece (include/wte/tokenizer.h).
std::string show_token(const Tokenizer& tok, int32_t id);

/// Reads a labels TSV (header "id\ttoken\tclass"), checking every id against `tok` (the token text
/// must be the id's piece in GPT-2's unicode form). Throws wte::Error naming the file and line.
TokenLabels read_token_labels(const std::string& path, const Tokenizer& tok);

/// Parses a comma-separated token list: each item a token's text (one token, a leading space
/// counts) or #ID. Throws wte::Error (naming --tokens) for an item that is not exactly one token.
std::vector<int32_t> parse_token_list(const std::string& list, const Tokenizer& tok);

/// Rows `ids` of w (V, C), gathered into a contiguous (ids.size(), C) buffer.
std::vector<float> gather_rows(const std::vector<float>& w, size_t C, const std::vector<int32_t>& ids);

/// The `n` most frequent ids of `counts` (count per id), most frequent first, ties by lower id.
std::vector<int32_t> most_frequent(const std::vector<uint64_t>& counts, size_t n);

/// Measures of every snapshot (V, C each): anisotropy, effective rank, mean row norm and, when
/// `labels` is not null, k-NN purity with `k` and the silhouette of the labelled rows.
std::vector<GeometryMeasures> measure_geometry(const std::vector<WteSnapshot>& snaps, size_t V,
                                               size_t C, const TokenLabels* labels, size_t k);

/// What the text report shows besides the measures.
struct GeometryReportInput {
  const std::vector<WteSnapshot>* snaps = nullptr;      // step order
  const std::vector<GeometryMeasures>* series = nullptr;
  const Tokenizer* tok = nullptr;
  size_t V = 0, C = 0;
  const TokenLabels* labels = nullptr;   // null: no labels
  size_t k = 5;
  std::vector<int32_t> queries;          // --tokens
  bool has_queries = false;              // --tokens given (possibly empty)
  std::vector<int32_t> frequent;         // most frequent tokens of data_path
  size_t n_frequent = 0;                 // --frequent
  std::string data_path;
  size_t neighbours = 8;
  bool counted = false;                  // data_path was read: never_seen is known
  std::vector<int32_t> never_seen;       // ids that never occur in data_path, ascending
};

/// The ids in [0, counts.size()) whose count is 0, ascending.
std::vector<int32_t> never_seen_ids(const std::vector<uint64_t>& counts);

/// The report `wte geometry` prints: the measures per step, nearest neighbours at the first and
/// last step, row norm against id.
std::string geometry_report(const GeometryReportInput& in);

/// The snapshots whose nearest neighbours and PCA are shown: the first and the last (one if equal).
std::vector<size_t> first_and_last(size_t n);

}  // namespace wte
