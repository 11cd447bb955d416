#include "src/analysis/geometry_report.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "src/io/file_checks.h"
#include "wte/data.h"
#include "wte/error.h"

namespace wte {

std::string show_token(const Tokenizer& tok, int32_t id) {
  return "\"" + escape_piece(tok.piece(id)) + "\" (" + std::to_string(id) + ")";
}

TokenLabels read_token_labels(const std::string& path, const Tokenizer& tok) {
  io::require_input_file("--labels " + path + ": ", path);  // a directory, a FIFO: named
  std::istringstream in([&] {
    try {
      return read_text_file(path);  // a read error (EIO) names the file, not a short file
    } catch (const Error& e) {
      throw Error("--labels " + path + ": " + e.what());
    }
  }());
  TokenLabels labels;
  std::map<std::string, int> index;
  std::string line;
  size_t line_no = 0;
  std::vector<bool> seen(tok.size(), false);
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1) {
      if (line != "id\ttoken\tclass")
        throw Error("--labels " + path + ": line 1 must be the header 'id<TAB>token<TAB>class'");
      continue;
    }
    if (line.empty()) continue;
    const size_t t1 = line.find('\t'), t2 = line.find('\t', t1 == std::string::npos ? 0 : t1 + 1);
    const std::string where = "--labels " + path + " line " + std::to_string(line_no);
    if (t1 == std::string::npos || t2 == std::string::npos || line.find('\t', t2 + 1) != std::string::npos)
      throw Error(where + ": expected 3 tab-separated fields id, token, class");
    long id = -1;
    try {
      size_t used = 0;
      id = std::stol(line.substr(0, t1), &used);
      if (used != t1) id = -1;
    } catch (const std::exception&) {
    }
    if (id < 0 || static_cast<size_t>(id) >= tok.size())
      throw Error(where + ": id '" + line.substr(0, t1) + "' is not a token id in [0, " +
                  std::to_string(tok.size()) + ")");
    const std::string token = line.substr(t1 + 1, t2 - t1 - 1);
    const std::string expected = Tokenizer::to_unicode_form(tok.piece(static_cast<int32_t>(id)));
    if (token != expected)
      throw Error(where + ": token " + std::to_string(id) + " is '" + expected +
                  "' in the checkpoint's tokenizer, not '" + token +
                  "' (labels made for another vocabulary?)");
    if (seen[id]) throw Error(where + ": token " + std::to_string(id) + " is labelled twice");
    seen[id] = true;
    const std::string cls = line.substr(t2 + 1);
    if (cls.empty()) throw Error(where + ": empty class");
    const auto it = index.emplace(cls, static_cast<int>(labels.names.size())).first;
    if (it->second == static_cast<int>(labels.names.size())) labels.names.push_back(cls);
    labels.ids.push_back(static_cast<int32_t>(id));
    labels.cls.push_back(it->second);
  }
  if (labels.ids.size() < 2) throw Error("--labels " + path + ": fewer than 2 labelled tokens");
  return labels;
}

std::vector<int32_t> parse_token_list(const std::string& list, const Tokenizer& tok) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    const std::string item = list.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    if (item[0] == '#' && item.size() > 1 &&
        item.find_first_not_of("0123456789", 1) == std::string::npos) {
      const long id = std::stol(item.substr(1));
      if (id < 0 || static_cast<size_t>(id) >= tok.size())
        throw Error("--query: " + item + " is outside [0, vocab_size=" +
                    std::to_string(tok.size()) + ")");
      ids.push_back(static_cast<int32_t>(id));
      continue;
    }
    const std::vector<int32_t> enc = tok.encode(item);
    if (enc.size() != 1) {
      std::string parts;
      for (int32_t id : enc) {
        if (!parts.empty()) parts += ' ';
        parts += show_token(tok, id);
      }
      throw Error("--query: '" + item + "' is " + std::to_string(enc.size()) +
                  " tokens (" + parts + "), not one; give one token's text (a leading space " +
                  "counts: \" the\") or #ID");
    }
    ids.push_back(enc[0]);
  }
  return ids;
}

std::vector<float> gather_rows(const std::vector<float>& w, size_t C, const std::vector<int32_t>& ids) {
  std::vector<float> out(ids.size() * C);
  for (size_t i = 0; i < ids.size(); ++i)
    std::copy_n(w.data() + size_t(ids[i]) * C, C, out.data() + i * C);
  return out;
}

std::vector<int32_t> most_frequent(const std::vector<uint64_t>& counts, size_t n) {
  std::vector<int32_t> order(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return counts[a] > counts[b]; });
  order.resize(std::min(n, order.size()));
  return order;
}

std::vector<int32_t> never_seen_ids(const std::vector<uint64_t>& counts) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < counts.size(); ++i)
    if (counts[i] == 0) ids.push_back(static_cast<int32_t>(i));
  return ids;
}

std::vector<GeometryMeasures> measure_geometry(const std::vector<WteSnapshot>& snaps, size_t V,
                                               size_t C, const TokenLabels* labels, size_t k) {
  std::vector<GeometryMeasures> series;
  for (const WteSnapshot& s : snaps) {
    const RowsView w{s.wte.data(), V, C};
    GeometryMeasures m;
    m.step = s.step;
    m.aniso = anisotropy(w);
    m.eff_rank = effective_rank(w);
    const std::vector<double> norms = row_norms(w);
    for (double n : norms) m.mean_norm += n / double(V);
    if (labels != nullptr) {
      const std::vector<float> rows = gather_rows(s.wte, C, labels->ids);
      const RowsView lw{rows.data(), labels->ids.size(), C};
      m.purity = knn_purity(lw, labels->cls, k);
      if (labels->names.size() >= 2) m.silhouette = silhouette(lw, labels->cls);
    }
    series.push_back(m);
  }
  return series;
}

std::vector<size_t> first_and_last(size_t n) {
  std::vector<size_t> out = {0};
  if (n > 1) out.push_back(n - 1);
  return out;
}

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

std::string geometry_report(const GeometryReportInput& in) {
  const std::vector<WteSnapshot>& snaps = *in.snaps;
  const std::vector<GeometryMeasures>& series = *in.series;
  const Tokenizer& tok = *in.tok;
  const size_t V = in.V, C = in.C;
  const bool has_labels = in.labels != nullptr;
  std::ostringstream report;
  report << "wte geometry: " << snaps.size() << " checkpoint" << (snaps.size() > 1 ? "s" : "")
         << "; wte (vocab_size " << V << ", d_model " << C << ")\n";
  if (has_labels)
    report << "labels: " << in.labels->ids.size() << " tokens in " << in.labels->names.size()
           << " classes; k-NN purity chance level " << fmt("%.4f", knn_purity_chance(in.labels->cls))
           << " (sum over classes of (n_c/N)(n_c-1)/(N-1))\n";
  report << "anisotropy = mean cosine of all distinct pairs of rows (raw; after subtracting the mean "
            "row); eff_rank = (sum s^2)^2 / sum s^4 of wte's singular values (max "
         << std::min(V, C) << ")\n\n";
  report << "  step  anisotropy  centred  eff_rank  mean_norm";
  if (has_labels) report << "  purity@" << in.k << "  silhouette";
  report << "  checkpoint\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const GeometryMeasures& m = series[i];
    char line[256];
    std::snprintf(line, sizeof line, "%6lld  %10.4f  %7.4f  %8.2f  %9.4f", (long long)m.step,
                  m.aniso.raw, m.aniso.centred, m.eff_rank, m.mean_norm);
    report << line;
    if (has_labels) {
      std::snprintf(line, sizeof line, "  %8.4f  %10.4f", m.purity, m.silhouette);
      report << line;
    }
    report << "  " << snaps[i].path << "\n";
  }

  // Nearest neighbours at the first and last step.
  std::vector<int32_t> shown = in.queries;
  for (int32_t id : in.frequent)
    if (std::find(shown.begin(), shown.end(), id) == shown.end()) shown.push_back(id);
  if (!in.has_queries && in.n_frequent == 0)
    report << "\n(No --query and --frequent 0: no nearest neighbours are shown.)\n";
  else if (!in.has_queries && in.frequent.empty())
    report << "\n(No --query, and no token file to count frequencies in: " << in.data_path
           << " does not exist; pass --data FILE.)\n";
  for (size_t si : first_and_last(snaps.size())) {
    if (shown.empty()) break;
    const RowsView w{snaps[si].wte.data(), V, C};
    const auto nbs = nearest_neighbours(w, shown, in.neighbours);
    std::string which;
    if (in.has_queries) which = "the --query tokens";
    if (!in.frequent.empty())
      which += (which.empty() ? "the " : ", then the ") + std::to_string(in.frequent.size()) +
               " most frequent tokens of " + in.data_path;
    report << "\nnearest neighbours by cosine at step " << snaps[si].step << " (" << which
           << "):\n";
    for (size_t q = 0; q < shown.size(); ++q) {
      report << "  " << show_token(tok, shown[q]) << ":";
      for (const Neighbour& n : nbs[q])
        report << "  " << show_token(tok, n.id) << " " << fmt("%.3f", n.cosine);
      report << "\n";
    }
  }
  // Row norm against id (merge order: low ids are the byte tokens, then merges in order).
  const std::vector<double> norms = row_norms(RowsView{snaps.back().wte.data(), V, C});
  report << "\nrow norm against token id at step " << snaps.back().step
         << " (mean norm per tenth of the ids; ids >= 256 are BPE merges in merge order):\n ";
  for (size_t d = 0; d < 10; ++d) {
    const size_t lo = V * d / 10, hi = V * (d + 1) / 10;
    double s = 0;
    for (size_t i = lo; i < hi; ++i) s += norms[i];
    report << " [" << lo << "," << hi << ") " << fmt("%.3f", hi > lo ? s / double(hi - lo) : 0.0);
  }
  report << "\n";
  return report.str();
}

}  // namespace wte
