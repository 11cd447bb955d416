#include "src/analysis/geometry_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "src/analysis/geometry.h"
#include "src/analysis/svg.h"
#include "wte/data.h"

namespace wte {

using nlohmann::json;

NeverSeenRows never_seen_rows(const GeometryReportInput& in) {
  NeverSeenRows r;
  r.count = in.never_seen.size();
  if (in.snaps == nullptr || in.snaps->empty()) return r;
  const std::vector<float>& w = in.snaps->back().wte;
  const std::vector<double> norms = row_norms(RowsView{w.data(), in.V, in.C});
  std::vector<char> unseen(in.V, 0);
  for (int32_t id : in.never_seen) unseen[static_cast<size_t>(id)] = 1;
  double sum = 0, other = 0;
  for (size_t i = 0; i < in.V; ++i) (unseen[i] ? sum : other) += norms[i];
  if (r.count > 0) r.mean_norm = sum / double(r.count);
  if (r.count < in.V) r.other_mean_norm = other / double(in.V - r.count);
  if (r.count >= 2) {
    const std::vector<float> rows = gather_rows(w, in.C, in.never_seen);
    r.mean_cosine = anisotropy(RowsView{rows.data(), r.count, in.C}).raw;
  }
  return r;
}

LossSummary summarize_loss(const std::vector<LossRow>& rows, const std::string& source) {
  LossSummary s;
  s.source = source;
  if (rows.empty()) return s;
  s.known = true;
  s.first_step = static_cast<int64_t>(rows.front().step), s.first = rows.front().train_loss;
  s.last_step = static_cast<int64_t>(rows.back().step), s.last = rows.back().train_loss;
  for (const LossRow& r : rows)
    if (std::isfinite(r.val_loss))
      s.has_val = true, s.val_step = static_cast<int64_t>(r.step), s.val_last = r.val_loss;
  return s;
}

std::vector<int32_t> neighbour_queries(const GeometryReportInput& in) {
  std::vector<int32_t> shown = in.queries;
  for (int32_t id : in.frequent)
    if (std::find(shown.begin(), shown.end(), id) == shown.end()) shown.push_back(id);
  return shown;
}

namespace {

json first_last(double first, double last) { return {{"first", first}, {"last", last}}; }

json token_json(const Tokenizer& tok, int32_t id) {
  return {{"id", id}, {"token", escape_piece(tok.piece(id))}};
}

// The neighbours of every query at the first and the last step.
json neighbours_json(const GeometryReportInput& in) {
  const std::vector<int32_t> queries = neighbour_queries(in);
  json out = json::array();
  if (queries.empty()) return out;
  const std::vector<WteSnapshot>& snaps = *in.snaps;
  const size_t V = in.V, C = in.C;
  const auto first = nearest_neighbours(RowsView{snaps.front().wte.data(), V, C}, queries, in.neighbours);
  const auto last = nearest_neighbours(RowsView{snaps.back().wte.data(), V, C}, queries, in.neighbours);
  for (size_t q = 0; q < queries.size(); ++q) {
    json row = token_json(*in.tok, queries[q]);
    for (const auto& [key, list] : {std::pair{"first", &first[q]}, std::pair{"last", &last[q]}}) {
      json nbs = json::array();
      for (const Neighbour& n : *list) {
        json e = token_json(*in.tok, n.id);
        e["cosine"] = n.cosine;
        nbs.push_back(e);
      }
      row[key] = nbs;
    }
    out.push_back(row);
  }
  return out;
}

}  // namespace

json geometry_json(const GeometryReportInput& in, const LossSummary& loss,
                   const std::vector<size_t>& strip) {
  const std::vector<WteSnapshot>& snaps = *in.snaps;
  const std::vector<GeometryMeasures>& series = *in.series;
  const GeometryMeasures& a = series.front();
  const GeometryMeasures& b = series.back();
  json j;
  j["vocab_size"] = in.V;
  j["d_model"] = in.C;
  j["checkpoints"] = snaps.size();
  j["first_step"] = snaps.front().step;
  j["last_step"] = snaps.back().step;
  if (loss.known) {
    j["loss"] = {{"source", loss.source},
                 {"first_step", loss.first_step},
                 {"first", loss.first},
                 {"last_step", loss.last_step},
                 {"last", loss.last}};
    if (loss.has_val) j["loss"]["val_step"] = loss.val_step, j["loss"]["val_last"] = loss.val_last;
  } else {
    j["loss"] = nullptr;
  }
  j["anisotropy"] = first_last(a.aniso.raw, b.aniso.raw);
  j["anisotropy_centred"] = first_last(a.aniso.centred, b.aniso.centred);
  j["effective_rank"] = first_last(a.eff_rank, b.eff_rank);
  j["effective_rank"]["max"] = std::min(in.V, in.C);
  j["mean_norm"] = first_last(a.mean_norm, b.mean_norm);
  if (in.labels != nullptr) {
    j["knn_purity"] = first_last(a.purity, b.purity);
    j["knn_purity"]["chance"] = knn_purity_chance(in.labels->cls);
    j["knn_purity"]["k"] = in.k;
    j["knn_purity"]["labelled"] = in.labels->ids.size();
    j["knn_purity"]["classes"] = in.labels->names.size();
  } else {
    j["knn_purity"] = nullptr;
  }
  if (in.counted) {
    const NeverSeenRows r = never_seen_rows(in);
    json ids = json::array();
    for (int32_t id : in.never_seen) ids.push_back(id);
    j["never_seen"] = {{"data", in.data_path},   {"count", r.count},
                       {"mean_norm", r.mean_norm}, {"other_mean_norm", r.other_mean_norm},
                       {"mean_cosine", r.mean_cosine}, {"ids", ids}};
  } else {
    j["never_seen"] = nullptr;
  }
  j["strip_steps"] = json::array();
  for (size_t i : strip) j["strip_steps"].push_back(series[i].step);
  j["steps"] = json::array();
  for (size_t i = 0; i < series.size(); ++i) {
    const GeometryMeasures& m = series[i];
    json s = {{"step", m.step},
              {"anisotropy", m.aniso.raw},
              {"anisotropy_centred", m.aniso.centred},
              {"effective_rank", m.eff_rank},
              {"mean_norm", m.mean_norm},
              {"checkpoint", snaps[i].path}};
    if (in.labels != nullptr) s["knn_purity"] = m.purity, s["silhouette"] = m.silhouette;
    j["steps"].push_back(s);
  }
  j["neighbours"] = neighbours_json(in);
  return j;
}

namespace {

// j's value at the dotted `key` ("loss.first").
const json& at_key(const json& j, const std::string& key) {
  const json* v = &j;
  size_t pos = 0;
  while (pos <= key.size()) {
    size_t end = key.find('.', pos);
    if (end == std::string::npos) end = key.size();
    v = &v->at(key.substr(pos, end - pos));
    pos = end + 1;
  }
  return *v;
}

// j's number at `key`, printed with `fmt` (a zero without its minus sign), in an element that
// names the key.
std::string num(const json& j, const std::string& key, const char* fmt) {
  const json& v = at_key(j, key);
  char buf[64];
  if (v.is_number_integer()) std::snprintf(buf, sizeof buf, "%lld", v.get<long long>());
  else if (v.is_number()) std::snprintf(buf, sizeof buf, fmt, v.get<double>());
  else std::snprintf(buf, sizeof buf, "n/a");
  std::string text = buf;
  // -4.96e-06 rounded to "-0.000" reads as a negative number: print "0.000".
  if (text[0] == '-' && text.find_first_not_of("-0.") == std::string::npos) text.erase(0, 1);
  return "<b data-key=\"" + key + "\">" + text + "</b>";
}

std::string esc(const std::string& s) { return svg::escape(s); }

}  // namespace

std::string summary_html(const json& j, const std::string& run) {
  std::string h = "<div class=\"summary\" id=\"summary\">\n<p><b>What this page shows.</b> wte is the "
                  "token-embedding table of a GPT-2 model: one learned row of d_model = " +
                  num(j, "d_model", "%g") + " numbers for each of the vocab_size = " +
                  num(j, "vocab_size", "%g") + " token ids. It starts as random noise; training "
                  "moves tokens that are used alike to point alike. This page follows its rows in " +
                  num(j, "checkpoints", "%g") + " checkpoints of " + esc(run) + ", from step " +
                  num(j, "first_step", "%g") + " to step " + num(j, "last_step", "%g") + ".</p>\n<ul>\n";
  if (!j["loss"].is_null()) {
    h += "<li><b>Loss</b> (nats/token, the training batch): " + num(j, "loss.first", "%.3f") +
         " at step " + num(j, "loss.first_step", "%g") + " &rarr; " + num(j, "loss.last", "%.3f") +
         " at step " + num(j, "loss.last_step", "%g");
    if (j["loss"].contains("val_last"))
      h += "; validation " + num(j, "loss.val_last", "%.3f") + " at step " +
           num(j, "loss.val_step", "%g");
    h += ".</li>\n";
  }
  h += "<li><b>Anisotropy</b> (mean cosine of two distinct rows): " + num(j, "anisotropy.first", "%.3f") +
       " &rarr; " + num(j, "anisotropy.last", "%.3f") + "; after subtracting the mean row " +
       num(j, "anisotropy_centred.first", "%.3f") + " &rarr; " +
       num(j, "anisotropy_centred.last", "%.3f") +
       ". A raw value far above the centred one: the rows share one common direction.</li>\n";
  h += "<li><b>Effective rank</b> (participation ratio of the singular values, at most " +
       num(j, "effective_rank.max", "%g") + "): " + num(j, "effective_rank.first", "%.1f") +
       " &rarr; " + num(j, "effective_rank.last", "%.1f") +
       ". Low: a few directions carry most of the table.</li>\n";
  if (!j["knn_purity"].is_null())
    h += "<li><b>k-NN class purity</b> (k = " + num(j, "knn_purity.k", "%g") + ", " +
         num(j, "knn_purity.labelled", "%g") + " labelled tokens in " +
         num(j, "knn_purity.classes", "%g") + " classes): " + num(j, "knn_purity.first", "%.3f") +
         " &rarr; " + num(j, "knn_purity.last", "%.3f") + " (chance " +
         num(j, "knn_purity.chance", "%.3f") + ").</li>\n";
  if (!j["never_seen"].is_null())
    h += "<li><b class=\"never\">Never-seen tokens</b>: " + num(j, "never_seen.count", "%g") +
         " ids never occur in " + esc(j["never_seen"]["data"].get<std::string>()) +
         ". Red in the pictures: their rows move together, to mean norm " +
         num(j, "never_seen.mean_norm", "%.2f") + " (the others " +
         num(j, "never_seen.other_mean_norm", "%.2f") + "; a band in the norms) and mean pairwise "
         "cosine " + num(j, "never_seen.mean_cosine", "%.3f") +
         " (a tight cluster in the PCA).</li>\n";
  h += "</ul>\n<p>Below: the nearest neighbours at the first and last step, the loss curve, the "
       "pictures of wte (hover a point for its token), and every number in text at the end "
       "(geometry.json and geometry.csv hold them for scripts). Written by "
       "<code>wte geometry</code>.</p>\n</div>\n";
  return h;
}

std::string neighbour_table_html(const json& j, size_t shown) {
  const json& nbs = j["neighbours"];
  if (nbs.empty()) return "";
  const std::string first = std::to_string(j["first_step"].get<int64_t>());
  const std::string last = std::to_string(j["last_step"].get<int64_t>());
  std::string h = "<table class=\"nb\" id=\"neighbours\">\n<caption style=\"text-align:left;"
                  "font-weight:bold;padding:2px 0\">Nearest neighbours by cosine, step " +
                  first + " | step " + last + " (the " + std::to_string(shown) +
                  " nearest; cosine in grey)</caption>\n<tr><th>token</th><th>step " + first +
                  "</th><th>step " + last + "</th></tr>\n";
  auto cell = [&](const json& list) {
    std::string c = "<td>";
    for (size_t i = 0; i < list.size() && i < shown; ++i) {
      char cos[32];
      std::snprintf(cos, sizeof cos, "%.2f", list[i]["cosine"].get<double>());
      c += (i ? ", " : "") + esc("\"" + list[i]["token"].get<std::string>() + "\"") +
           " <span class=\"c\">" + cos + "</span>";
    }
    return c + "</td>";
  };
  for (const json& row : nbs)
    h += "<tr><td class=\"q\">" + esc("\"" + row["token"].get<std::string>() + "\"") + "</td>" +
         cell(row["first"]) + cell(row["last"]) + "</tr>\n";
  return h + "</table>\n";
}

void write_geometry_json(const std::string& out, const json& j) {
  write_file_atomic((std::filesystem::path(out) / "geometry.json").string(),
                    j.dump(1, ' ', false, json::error_handler_t::replace) + "\n");
}

}  // namespace wte
