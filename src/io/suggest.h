// "Did you mean": the closest of a set of names to one a user mistyped (an option, a config key, a
// command), for error messages. Header-only; not part of wte's public interface.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace wte::io {

/// The Damerau-Levenshtein (optimal string alignment) distance: insertions, deletions,
/// substitutions and swaps of two neighbouring characters each cost 1.
inline size_t edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

/// "; did you mean 'CANDIDATE'?" for the candidate closest to `typed` (within a third of its
/// length, at least 1 and at most 3 edits, or one that starts with it or that it starts with),
/// else "". Ties: the first in `candidates`.
inline std::string did_you_mean(const std::string& typed, const std::vector<std::string>& candidates) {
  if (typed.size() > 256) return "";  // a pasted file, not a typo
  const std::string* best = nullptr;
  size_t best_d = std::max<size_t>(1, std::min<size_t>(3, typed.size() / 3)) + 1;
  for (const std::string& c : candidates) {
    if (c.empty() || c == typed) continue;
    size_t d = edit_distance(typed, c);
    const bool prefix = typed.size() >= 3 && (c.rfind(typed, 0) == 0 || typed.rfind(c, 0) == 0);
    if (prefix) d = std::min<size_t>(d, 1);
    if (d < best_d) best = &c, best_d = d;
  }
  return best ? "; did you mean '" + *best + "'?" : "";
}

}  // namespace wte::io
