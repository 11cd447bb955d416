// `wte geometry --checkpoint C [--checkpoint C ...] [--tokens LIST] [--labels FILE] [--out DIR]`:
// measures and draws the geometry of wte in one checkpoint or a series (a run's snapshots).
#include <boost/program_options.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/data.h"
#include "wte/error.h"
#include "src/analysis/geometry.h"
#include "wte/model.h"
#include "src/io/snapshot.h"
#include "src/analysis/svg.h"
#include "wte/tokenizer.h"
#include "train/cli_util.h"
#include "train/commands.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace wte::cli {
namespace {

struct Snapshot {
  std::string path;
  int64_t step = 0;
  std::vector<float> wte;   // (V, C)
};

struct Labels {
  std::vector<int32_t> ids;          // labelled token ids, file order
  std::vector<int> cls;              // class index per labelled id
  std::vector<std::string> names;    // class index -> name
};

// One step's measures.
struct Measures {
  int64_t step = 0;
  Anisotropy aniso;
  double eff_rank = 0, mean_norm = 0, purity = -1, silhouette = -2;
};

// A token shown as  " the" (259): its bytes escaped by escape_piece (include/wte/tokenizer.h).
std::string show(const Tokenizer& tok, int32_t id) {
  std::string out = "\"";  // (append, not operator+: GCC 12 warns falsely with -Wrestrict on that)
  out += escape_piece(tok.piece(id));
  out += "\" (" + std::to_string(id) + ")";
  return out;
}

std::vector<std::string> expand_checkpoints(const std::vector<std::string>& args) {
  std::vector<std::pair<uint64_t, std::string>> found;
  std::vector<std::string> out;
  for (const std::string& a : args) {
    if (fs::is_directory(a)) {
      auto list = list_snapshots(a);
      if (list.empty()) list = list_snapshots(a, "checkpoint_");
      if (list.empty())
        throw Error("--checkpoint " + a + ": the directory has no snapshot_<step>.h5 or " +
                    "checkpoint_<step>.h5 files (train with --train.snapshot_steps=0,10,100,...)");
      for (auto& [step, path] : list) out.push_back(path);
    } else if (fs::is_regular_file(a)) {
      out.push_back(a);
    } else {
      throw Error("--checkpoint " + a + ": no such file or directory");
    }
  }
  return out;
}

Labels read_labels(const std::string& path, const Tokenizer& tok) {
  std::ifstream in(path);
  if (!in) throw Error("--labels " + path + ": cannot open the file");
  Labels labels;
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

std::vector<int32_t> parse_tokens(const std::string& list, const Tokenizer& tok) {
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
        throw Error("--tokens: " + item + " is outside [0, vocab_size=" +
                    std::to_string(tok.size()) + ")");
      ids.push_back(static_cast<int32_t>(id));
      continue;
    }
    const std::vector<int32_t> enc = tok.encode(item);
    if (enc.size() != 1) {
      std::string parts;
      for (int32_t id : enc) {
        if (!parts.empty()) parts += ' ';
        parts += show(tok, id);
      }
      throw Error("--tokens: '" + item + "' is " + std::to_string(enc.size()) +
                  " tokens (" + parts + "), not one; give one token's text (a leading space " +
                  "counts: \" the\") or #ID");
    }
    ids.push_back(enc[0]);
  }
  return ids;
}

// Rows `ids` of w, gathered into a contiguous (n, C) buffer.
std::vector<float> gather(const std::vector<float>& w, size_t C, const std::vector<int32_t>& ids) {
  std::vector<float> out(ids.size() * C);
  for (size_t i = 0; i < ids.size(); ++i)
    std::copy_n(w.data() + size_t(ids[i]) * C, C, out.data() + i * C);
  return out;
}

void write_text(const fs::path& path, const std::string& text) {
  write_file_atomic(path.string(), text);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// XML-escaped text keeping its line breaks (svg::escape turns them into spaces).
std::string html_escape(const std::string& s) {
  std::string out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find('\n', pos);
    if (end == std::string::npos) end = s.size();
    out += svg::escape(s.substr(pos, end - pos));
    if (end < s.size()) out += '\n';
    pos = end + 1;
  }
  return out;
}

}  // namespace

int cmd_geometry(int argc, char** argv) {
  po::options_description opts("Options");
  // clang-format off
  opts.add_options()
      ("help,h", "print this help")
      ("checkpoint,c", po::value<std::vector<std::string>>(),
       "a checkpoint or snapshot .h5, or a run directory (its snapshot_<step>.h5 files, else its "
       "checkpoint_<step>.h5 files); repeat for a series")
      ("tokens", po::value<std::string>(),
       "comma-separated tokens whose nearest neighbours to show: each a token's text (a leading "
       "space counts: \" the\") or #ID")
      ("labels", po::value<std::string>(),
       "class labels, a TSV with header id<TAB>token<TAB>class (datasets/planted/labels.tsv): "
       "adds k-NN purity, silhouette and class colours")
      ("out,o", po::value<std::string>(),
       "directory for the pictures (SVG), geometry.csv and index.html (one page with all of them)")
      ("data", po::value<std::string>(),
       "int32 token file whose frequencies pick the most frequent tokens (default: train.bin "
       "beside the last checkpoint, as wte train writes it)")
      ("frequent", po::value<std::string>()->default_value("8"),
       "most frequent tokens to show, in [0, 2^24] (0: only --tokens)")
      ("neighbours", po::value<std::string>()->default_value("8"), "neighbours per token, in [1, 2^24]")
      ("k", po::value<std::string>()->default_value("5"),
       "k of the k-NN class purity, in [1, 2^24] (and below the number of labelled tokens)")
      ("max-points", po::value<std::string>()->default_value("5000"),
       "without labels, the PCA picture shows the rows of ids [0, max-points), in [1, 2^24]");
  // clang-format on
  const char* usage =
      "Usage: wte geometry --checkpoint C [--checkpoint C ...] [--tokens LIST] [--labels FILE]\n"
      "                    [--out DIR]\n\n"
      "Measures wte's geometry in each checkpoint (in step order): anisotropy (mean cosine of\n"
      "distinct pairs of rows, raw and after subtracting the mean row, exact over all pairs),\n"
      "effective rank (participation ratio (sum s^2)^2 / sum s^4 of the singular values), mean\n"
      "row norm, and with --labels the k-NN class purity and silhouette (cosine distance) over the\n"
      "labelled rows; prints the nearest neighbours by cosine of --tokens and of the most frequent\n"
      "tokens at the first and last step; with --out writes the pictures and DIR/index.html.\n\n";
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(opts).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "wte geometry: %s\n\n%s", e.what(), usage);
    std::cerr << opts;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << usage << opts
              << "\nExample:\n"
                 "  datasets/make_planted.py\n"
                 "  wte train --config configs/planted.ini --out runs/planted\n"
                 "  wte geometry --checkpoint runs/planted --labels datasets/planted/labels.tsv "
                 "--out runs/planted/geometry\n";
    return 0;
  }
  if (!vm.count("checkpoint")) {
    std::fprintf(stderr, "wte geometry: no --checkpoint given\n\n%s", usage);
    std::cerr << opts;
    return 2;
  }
  constexpr size_t kMaxCount = size_t{1} << 24;  // model.vocab_size's upper bound
  const size_t n_freq = whole_number_option(vm, "frequent", 0, kMaxCount),
               n_nb = whole_number_option(vm, "neighbours", 1, kMaxCount),
               k = whole_number_option(vm, "k", 1, kMaxCount),
               max_points = whole_number_option(vm, "max-points", 1, kMaxCount);
  // The output directory is created (and checked writable) before any checkpoint is read.
  if (vm.count("out")) prepare_output_dir("--out", vm["out"].as<std::string>());

  // --- Read every checkpoint (validated) before any output.
  const std::vector<std::string> paths = expand_checkpoints(vm["checkpoint"].as<std::vector<std::string>>());
  std::vector<Snapshot> snaps;
  Tokenizer tok;
  std::string encoder_json;
  size_t V = 0, C = 0;
  for (const std::string& path : paths) {
    const CheckpointInfo info = read_checkpoint_info(path);
    const Config cfg = parse_config(info.config_ini, path + " /config/ini");
    if (snaps.empty()) {
      tok = Tokenizer::from_strings(info.encoder_json, info.vocab_bpe, path + " /tokenizer");
      encoder_json = info.encoder_json;
      V = cfg.model.vocab_size, C = cfg.model.d_model;
    } else if (cfg.model.vocab_size != V || cfg.model.d_model != C ||
               info.encoder_json != encoder_json) {
      throw Error(path + ": wte is (" + std::to_string(cfg.model.vocab_size) + ", " +
                  std::to_string(cfg.model.d_model) + ") with its own tokenizer, but " +
                  snaps[0].path + " has (" + std::to_string(V) + ", " + std::to_string(C) +
                  "); a series must come from one run");
    }
    Model model(cfg.model);
    load_checkpoint(path, model, nullptr);
    Snapshot s;
    s.path = path;
    s.step = info.step;
    s.wte.assign(model.params().wte, model.params().wte + V * C);
    snaps.push_back(std::move(s));
  }
  std::stable_sort(snaps.begin(), snaps.end(),
                   [](const Snapshot& a, const Snapshot& b) { return a.step < b.step; });
  Labels labels;
  const bool has_labels = vm.count("labels") > 0;
  if (has_labels) labels = read_labels(vm["labels"].as<std::string>(), tok);
  if (has_labels && k >= labels.ids.size())
    throw Error("--k " + std::to_string(k) + " must be below the number of labelled tokens, " +
                std::to_string(labels.ids.size()));
  std::vector<int32_t> queries;
  if (vm.count("tokens")) queries = parse_tokens(vm["tokens"].as<std::string>(), tok);

  // Frequencies for "the most frequent tokens".
  std::string data_path = vm.count("data") ? vm["data"].as<std::string>()
                                           : (fs::path(snaps.back().path).parent_path() / "train.bin").string();
  std::vector<int32_t> frequent;
  std::vector<uint64_t> counts;
  if (fs::is_regular_file(data_path)) {
    const std::vector<int32_t> ids = read_token_file(data_path);
    check_token_ids(ids.data(), ids.size(), V, data_path);
    counts.assign(V, 0);
    for (int32_t id : ids) ++counts[id];
    std::vector<int32_t> order(V);
    for (size_t i = 0; i < V; ++i) order[i] = static_cast<int32_t>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return counts[a] > counts[b]; });
    for (size_t i = 0; i < std::min(n_freq, order.size()); ++i) frequent.push_back(order[i]);
  } else if (vm.count("data")) {
    throw Error("--data " + data_path + ": no such file");
  }

  // --- Measures per step.
  std::vector<Measures> series;
  const double chance = has_labels ? knn_purity_chance(labels.cls) : 0.0;
  for (const Snapshot& s : snaps) {
    const RowsView w{s.wte.data(), V, C};
    Measures m;
    m.step = s.step;
    m.aniso = anisotropy(w);
    m.eff_rank = effective_rank(w);
    const std::vector<double> norms = row_norms(w);
    for (double n : norms) m.mean_norm += n / double(V);
    if (has_labels) {
      const std::vector<float> rows = gather(s.wte, C, labels.ids);
      const RowsView lw{rows.data(), labels.ids.size(), C};
      m.purity = knn_purity(lw, labels.cls, k);
      if (labels.names.size() >= 2) m.silhouette = silhouette(lw, labels.cls);
    }
    series.push_back(m);
  }

  std::ostringstream report;
  report << "wte geometry: " << snaps.size() << " checkpoint" << (snaps.size() > 1 ? "s" : "")
         << "; wte (vocab_size " << V << ", d_model " << C << ")\n";
  if (has_labels)
    report << "labels: " << labels.ids.size() << " tokens in " << labels.names.size()
           << " classes; k-NN purity chance level " << fmt("%.4f", chance)
           << " (sum over classes of (n_c/N)(n_c-1)/(N-1))\n";
  report << "anisotropy = mean cosine of all distinct pairs of rows (raw; after subtracting the mean "
            "row); eff_rank = (sum s^2)^2 / sum s^4 of wte's singular values (max "
         << std::min(V, C) << ")\n\n";
  report << "  step  anisotropy  centred  eff_rank  mean_norm";
  if (has_labels) report << "  purity@" << k << "  silhouette";
  report << "  checkpoint\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const Measures& m = series[i];
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
  std::vector<int32_t> shown = queries;
  for (int32_t id : frequent)
    if (std::find(shown.begin(), shown.end(), id) == shown.end()) shown.push_back(id);
  if (!vm.count("tokens") && n_freq == 0)
    report << "\n(no --tokens and --frequent 0: no nearest neighbours shown)\n";
  else if (!vm.count("tokens") && frequent.empty())
    report << "\n(no --tokens, and no token file for frequencies: " << data_path
           << " does not exist; pass --data)\n";
  std::vector<size_t> nb_steps = {0};
  if (snaps.size() > 1) nb_steps.push_back(snaps.size() - 1);
  for (size_t si : nb_steps) {
    if (shown.empty()) break;
    const RowsView w{snaps[si].wte.data(), V, C};
    const auto nbs = nearest_neighbours(w, shown, n_nb);
    report << "\nnearest neighbours by cosine at step " << snaps[si].step << " ("
           << (vm.count("tokens") ? "--tokens, then " : "") << "the " << frequent.size()
           << " most frequent tokens of " << (frequent.empty() ? std::string("-") : data_path)
           << "):\n";
    for (size_t q = 0; q < shown.size(); ++q) {
      report << "  " << show(tok, shown[q]) << ":";
      for (const Neighbour& n : nbs[q]) report << "  " << show(tok, n.id) << " " << fmt("%.3f", n.cosine);
      report << "\n";
    }
  }
  // Row norm against id (merge order: low ids are the byte tokens, then merges in order).
  {
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
  }
  std::cout << report.str();

  if (!vm.count("out")) return 0;

  // --- Pictures and the page.
  const fs::path out = vm["out"].as<std::string>();  // created by prepare_output_dir above
  struct Figure {
    std::string file, caption;
  };
  std::vector<Figure> figures;
  auto step_name = [](int64_t step) {
    char b[32];
    std::snprintf(b, sizeof b, "%08lld", (long long)step);
    return std::string(b);
  };
  std::vector<size_t> pca_steps = nb_steps;
  for (size_t si : pca_steps) {
    const Snapshot& s = snaps[si];
    std::vector<svg::Point> points;
    std::vector<svg::LegendEntry> legend;
    std::string caption;
    Pca2 pca;
    if (has_labels) {
      const std::vector<float> rows = gather(s.wte, C, labels.ids);
      pca = pca_2d(RowsView{rows.data(), labels.ids.size(), C});
      for (size_t i = 0; i < labels.ids.size(); ++i)
        points.push_back({pca.x[i], pca.y[i], svg::category_colour(labels.cls[i]),
                          show(tok, labels.ids[i]) + " " + labels.names[labels.cls[i]]});
      for (size_t c = 0; c < labels.names.size(); ++c)
        legend.push_back({labels.names[c], svg::category_colour(c)});
      caption = "the " + std::to_string(labels.ids.size()) +
                " labelled rows on their first two principal components, coloured by class";
    } else {
      pca = pca_2d(RowsView{s.wte.data(), V, C});
      const size_t n = std::min(V, max_points);
      for (size_t i = 0; i < n; ++i)
        points.push_back({pca.x[i], pca.y[i], svg::sequential_colour(double(i) / double(V - 1)),
                          show(tok, static_cast<int32_t>(i))});
      legend = {{"id 0", svg::sequential_colour(0)},
                {"id " + std::to_string(V - 1), svg::sequential_colour(1)}};
      caption = "all rows' first two principal components; ids [0, " + std::to_string(n) +
                ") drawn, coloured by id (merge order)";
    }
    svg::Frame f{"wte at step " + std::to_string(s.step) + ": PCA", "PC1 (" +
                     fmt("%.1f", 100 * pca.explained[0]) + "% of variance)",
                 "PC2 (" + fmt("%.1f", 100 * pca.explained[1]) + "%)"};
    const std::string file = "pca_step_" + step_name(s.step) + ".svg";
    write_text(out / file, svg::scatter(f, points, legend, has_labels ? 5.0 : 2.0));
    figures.push_back({file, "Step " + std::to_string(s.step) + ": " + caption + "."});
  }
  {
    std::vector<svg::HistogramSeries> hs;
    for (size_t j = 0; j < nb_steps.size(); ++j) {
      const Snapshot& s = snaps[nb_steps[j]];
      hs.push_back({"step " + std::to_string(s.step), svg::category_colour(j),
                    pair_cosines(RowsView{s.wte.data(), V, C}, 200000, 1)});
    }
    svg::Frame f{"cosines of pairs of rows", "cosine", "share of pairs"};
    write_text(out / "cosines.svg", svg::histogram(f, hs, -1.0, 1.0, 80));
    figures.push_back({"cosines.svg", "Histogram of the cosines of pairs of distinct rows (all "
                                      "pairs, or 200000 random pairs), first and last step."});
  }
  {
    const std::vector<double> norms = row_norms(RowsView{snaps.back().wte.data(), V, C});
    std::vector<svg::Point> points;
    const size_t stride = std::max<size_t>(1, V / 20000);
    for (size_t i = 0; i < V; i += stride)
      points.push_back({double(i), norms[i], "#4e79a7", ""});
    svg::Frame f{"row norm against token id, step " + std::to_string(snaps.back().step),
                 "token id (merge order)", "|wte[id]|"};
    write_text(out / "norms.svg", svg::scatter(f, points, {}, 1.5));
    figures.push_back({"norms.svg", "Norm of each row of wte against its id" +
                                        (stride > 1 ? " (every " + std::to_string(stride) + "th id)"
                                                    : std::string()) +
                                        " at the last step."});
  }
  if (series.size() > 1) {
    std::vector<double> x;
    for (const Measures& m : series) x.push_back(double(m.step));
    auto col = [&](auto get) {
      std::vector<double> y;
      for (const Measures& m : series) y.push_back(get(m));
      return y;
    };
    if (has_labels) {
      std::vector<svg::LineSeries> ls = {
          {"k-NN purity (k=" + std::to_string(k) + ")", svg::category_colour(0), x,
           col([](const Measures& m) { return m.purity; })},
          {"silhouette", svg::category_colour(1), x,
           col([](const Measures& m) { return m.silhouette; })},
          {"chance purity", "#888888", {x.front(), x.back()}, {chance, chance}, true}};
      write_text(out / "series_purity.svg",
                 svg::line_chart({"class structure over training", "step", "score"}, ls));
      figures.push_back({"series_purity.svg",
                         "k-NN class purity and silhouette of the labelled rows at each step; "
                         "dashed: the purity of a table with no class structure."});
    }
    std::vector<svg::LineSeries> la = {
        {"raw", svg::category_colour(0), x, col([](const Measures& m) { return m.aniso.raw; })},
        {"mean-centred", svg::category_colour(1), x,
         col([](const Measures& m) { return m.aniso.centred; })}};
    write_text(out / "series_anisotropy.svg",
               svg::line_chart({"anisotropy over training", "step", "mean cosine of pairs"}, la));
    figures.push_back({"series_anisotropy.svg",
                       "Anisotropy (mean cosine of distinct pairs of rows) at each step, raw and "
                       "after subtracting the mean row."});
    std::vector<svg::LineSeries> lr = {
        {"effective rank", svg::category_colour(2), x, col([](const Measures& m) { return m.eff_rank; })}};
    write_text(out / "series_rank.svg",
               svg::line_chart({"effective rank over training", "step",
                                "participation ratio (max " + std::to_string(std::min(V, C)) + ")"},
                               lr));
    figures.push_back({"series_rank.svg",
                       "Effective rank (participation ratio of the singular values) at each step."});
  }
  {
    std::ostringstream csv;
    csv << "step,anisotropy_raw,anisotropy_centred,effective_rank,mean_norm,knn_purity,silhouette,"
           "checkpoint\n";
    for (size_t i = 0; i < series.size(); ++i) {
      const Measures& m = series[i];
      csv.precision(9);
      csv << m.step << ',' << m.aniso.raw << ',' << m.aniso.centred << ',' << m.eff_rank << ','
          << m.mean_norm << ',';
      if (has_labels) csv << m.purity << ',' << m.silhouette;
      else csv << ',';
      csv << ',' << snaps[i].path << '\n';
    }
    write_text(out / "geometry.csv", csv.str());
  }
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       << "<title>wte geometry</title>\n<style>body{font-family:sans-serif;max-width:1400px;"
          "margin:1em auto;padding:0 1em}figure{display:inline-block;margin:0.5em;vertical-align:"
          "top;max-width:660px}figcaption{font-size:0.9em}pre{font-size:0.85em;overflow-x:auto;"
          "background:#f6f6f6;padding:0.5em}</style>\n</head>\n<body>\n"
       << "<h1>wte geometry</h1>\n<p>Rows of wte from " << snaps.size()
       << " checkpoint(s), steps " << snaps.front().step << " to " << snaps.back().step
       << ". Written by <code>wte geometry</code>.</p>\n";
  for (const Figure& fig : figures)
    html << "<figure><img src=\"" << html_escape(fig.file) << "\" alt=\"" << html_escape(fig.file)
         << "\" width=\"640\" height=\"440\"><figcaption>" << html_escape(fig.caption)
         << "</figcaption></figure>\n";
  html << "<h2>Numbers</h2>\n<pre>" << html_escape(report.str()) << "</pre>\n</body>\n</html>\n";
  write_text(out / "index.html", html.str());
  std::printf("\nwrote %zu pictures, geometry.csv and %s\n", figures.size(),
              (out / "index.html").string().c_str());
  return 0;
}

}  // namespace wte::cli
