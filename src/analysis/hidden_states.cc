#include "src/analysis/hidden_states.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "src/analysis/geometry.h"
#include "src/io/hdf5_util.h"
#include "wte/data.h"
#include "wte/error.h"

namespace wte {

std::vector<EncodedText> encode_texts(const Tokenizer& tok, const std::vector<std::string>& texts,
                                      size_t n_ctx, size_t vocab_size) {
  std::vector<EncodedText> out;
  for (const std::string& t : texts) {
    EncodedText e;
    e.text = t;
    e.ids = tok.encode(t);
    if (e.ids.empty()) throw UsageError("--text \"" + t + "\" encodes to no tokens; give a non-empty text");
    if (e.ids.size() > n_ctx)
      throw UsageError("--text \"" + t + "\" is " + std::to_string(e.ids.size()) +
                  " tokens, more than the model's n_ctx = " + std::to_string(n_ctx) +
                  " position rows");
    check_token_ids(e.ids.data(), e.ids.size(), vocab_size,
                    "--text \"" + t + "\" (encoded with the checkpoint's tokenizer)");
    out.push_back(std::move(e));
  }
  return out;
}

void decode_hidden_states(Decoder& dec, const int32_t* ids, size_t T, float* const* layers,
                          float* logits) {
  const size_t L = hidden_state_layers(dec.n_layer()), C = dec.d_model();
  if (T == 0) throw Error("decode_hidden_states: no tokens (T = 0)");
  dec.reset();
  dec.prefill(ids, T, logits != nullptr);
  if (layers)
    for (size_t l = 0; l < L; ++l) {
      const float* r = l + 1 == L ? dec.final_rows() : dec.residual_rows(l);
      std::memcpy(layers[l], r, T * C * sizeof(float));
    }
  if (logits) std::memcpy(logits, dec.logits_rows(), T * dec.vocab_size() * sizeof(float));
}

void run_hidden_states(Decoder& dec, EncodedText& e, bool logits) {
  const size_t L = hidden_state_layers(dec.n_layer()), C = dec.d_model();
  const size_t T = e.ids.size();
  e.rows.assign(L, std::vector<float>(T * C));
  std::vector<float*> layers(L);
  for (size_t l = 0; l < L; ++l) layers[l] = e.rows[l].data();
  if (logits) e.logits.resize(T * dec.vocab_size());
  decode_hidden_states(dec, e.ids.data(), T, layers.data(), logits ? e.logits.data() : nullptr);
}

HiddenStateSample hidden_state_baseline_sample(const Model& model,
                                               const std::vector<EncodedText>& texts,
                                               const std::string& data_path, size_t n_rows) {
  if (!data_path.empty()) {
    const std::vector<int32_t> tokens = read_token_file(data_path);
    return sample_hidden_states(model, tokens, n_rows, model.config().n_ctx, data_path);
  }
  const size_t C = model.config().d_model;
  HiddenStateSample s;
  s.C = C;
  s.rows.resize(texts[0].rows.size());
  for (const EncodedText& e : texts)
    for (size_t i = 0; i < e.ids.size(); ++i) {
      s.ids.push_back(e.ids[i]);
      s.positions.push_back(static_cast<uint32_t>(i));
      for (size_t l = 0; l < s.rows.size(); ++l)
        s.rows[l].insert(s.rows[l].end(), e.rows[l].begin() + i * C, e.rows[l].begin() + (i + 1) * C);
    }
  return s;
}

LayerBaseline measure_baseline(const HiddenStateSample& s, const std::string& source) {
  LayerBaseline b;
  b.source = source;
  b.rows = s.ids.size();
  for (size_t l = 0; l < s.layers(); ++l) {
    b.centre.push_back(layer_mean(s, l, 0));
    b.anisotropy.push_back(anisotropy(RowsView{s.rows[l].data(), s.ids.size(), s.C}).raw);
  }
  return b;
}

size_t rows_equal_to_embedding(const Model& model, const EncodedText& e) {
  const size_t C = model.config().d_model;
  size_t rows_equal = 0;
  for (size_t i = 0; i < e.ids.size(); ++i) {
    bool equal = true;
    for (size_t c = 0; c < C; ++c) {
      const float want = model.params().wte[size_t(e.ids[i]) * C + c] + model.params().wpe[i * C + c];
      equal = equal && std::memcmp(&want, &e.rows[0][i * C + c], sizeof(float)) == 0;
    }
    rows_equal += equal;
  }
  return rows_equal;
}

namespace {

// Layer by layer, the rows at index i of texts a and b.
std::vector<SameIndexLayer> compare_rows(const EncodedText& a, const EncodedText& b, size_t i,
                                         const LayerBaseline& base, size_t n_layer, size_t C) {
  std::vector<SameIndexLayer> out;
  for (size_t l = 0; l < a.rows.size(); ++l) {
    const float* ra = a.rows[l].data() + i * C;
    const float* rb = b.rows[l].data() + i * C;
    SameIndexLayer m;
    m.identical = std::memcmp(ra, rb, C * sizeof(float)) == 0;
    m.context_free = l == 0 || n_layer == 0;
    for (size_t c = 0; c < C; ++c)
      m.max_diff = std::max(m.max_diff, std::fabs(double(ra[c]) - double(rb[c])));
    m.cosine = centred_cosine(ra, rb, nullptr, C);
    m.centred = centred_cosine(ra, rb, base.centre[l].data(), C);
    out.push_back(m);
  }
  return out;
}

}  // namespace

std::vector<TextPairComparison> compare_same_index(const std::vector<EncodedText>& texts,
                                                   const LayerBaseline& base, size_t n_layer) {
  std::vector<TextPairComparison> out;
  for (size_t a = 0; a < texts.size(); ++a)
    for (size_t b = a + 1; b < texts.size(); ++b) {
      const std::vector<int32_t>&ia = texts[a].ids, &ib = texts[b].ids;
      const size_t n = std::min(ia.size(), ib.size());
      const size_t L = texts[a].rows.size();
      const size_t C = L == 0 ? 0 : texts[a].rows[0].size() / ia.size();
      TextPairComparison p;
      p.a = a;
      p.b = b;
      while (p.first_diff < n && ia[p.first_diff] == ib[p.first_diff]) ++p.first_diff;
      for (size_t i = p.first_diff; i < n; ++i) p.later_shared = p.later_shared || ia[i] == ib[i];
      if (p.first_diff == 0 && !p.later_shared) continue;
      for (size_t i = 0; i < p.first_diff; ++i) {
        size_t identical_layers = 0;
        for (size_t l = 0; l < L; ++l)
          identical_layers += std::memcmp(texts[a].rows[l].data() + i * C,
                                          texts[b].rows[l].data() + i * C, C * sizeof(float)) == 0;
        p.prefix_identical_layers.push_back(identical_layers);
      }
      for (size_t i = p.first_diff; i < n; ++i)
        if (ia[i] == ib[i])
          p.shared.push_back({i, compare_rows(texts[a], texts[b], i, base, n_layer, C)});
      out.push_back(std::move(p));
    }
  return out;
}

std::vector<OtherIndexPair> compare_other_index(const std::vector<EncodedText>& texts,
                                                const float* wpe, size_t C) {
  std::vector<OtherIndexPair> out;
  for (size_t a = 0; a < texts.size(); ++a)
    for (size_t b = a; b < texts.size(); ++b)
      for (size_t i = 0; i < texts[a].ids.size(); ++i)
        for (size_t j = 0; j < texts[b].ids.size(); ++j) {
          if ((a == b && j <= i) || i == j || texts[a].ids[i] != texts[b].ids[j]) continue;
          OtherIndexPair p{a, i, b, j, 0, 0};
          for (size_t c = 0; c < C; ++c) {
            const double d = double(texts[a].rows[0][i * C + c]) - double(texts[b].rows[0][j * C + c]);
            const double q = double(wpe[i * C + c]) - double(wpe[j * C + c]);
            p.max_diff = std::max(p.max_diff, std::fabs(d));
            p.max_dev = std::max(p.max_dev, std::fabs(d - q));
          }
          out.push_back(p);
        }
  return out;
}

void write_hidden_states(const std::string& out, const std::string& checkpoint,
                         const std::vector<EncodedText>& texts, size_t n_layer, size_t C, size_t V) {
  const size_t L = texts.empty() ? 0 : texts[0].rows.size();  // hidden_state_layers(n_layer)
  // Reserved on disk before HDF5 writes (a full disk is then an error, not a crash inside
  // HDF5): every text's ids, rows, logits and text, and HDF5's metadata, estimated as the
  // checkpoint writer does (about 1 KiB per dataset; 2 KiB per dataset + 16 KiB reserved).
  uint64_t expected_bytes = (16 + 2 * 8) * uint64_t{1024};
  for (const EncodedText& e : texts) {
    const uint64_t T = e.ids.size();
    expected_bytes += 4 * T * (1 + uint64_t{L} * C + V) + e.text.size() + 2 * 4 * uint64_t{1024};
  }
  hdf5::write_file_atomic(
      out, "hidden states '" + out + "'",
      [&](H5::H5File& file, const std::string&) {
        H5::Group root = file.openGroup("/");
        hdf5::write_string_attr(root, "format", "wte-hidden-states");
        hdf5::write_string_attr(root, "checkpoint", checkpoint);
        hdf5::write_string_attr(root, "layers",
                                "hidden_states[l] (Hugging Face's list): [0] = wte[id] + wpe[index], "
                                "[l] = the input of block l, the last = ln_f of the last block's "
                                "output (a model with no blocks: [0] and ln_f of it); logits = "
                                "the last · lm_headᵀ");
        hdf5::write_int_attr(root, "n_layer", static_cast<int64_t>(n_layer));
        hdf5::write_int_attr(root, "d_model", static_cast<int64_t>(C));
        hdf5::write_int_attr(root, "vocab_size", static_cast<int64_t>(V));
        hdf5::write_int_attr(root, "texts", static_cast<int64_t>(texts.size()));
        for (size_t ti = 0; ti < texts.size(); ++ti) {
          const EncodedText& e = texts[ti];
          const size_t T = e.ids.size();
          H5::Group g = root.createGroup("text" + std::to_string(ti));
          hdf5::write_string(g, "text", e.text);
          const hsize_t dims[1] = {T};
          H5::DataSet ids = g.createDataSet("ids", H5::PredType::STD_I32LE, H5::DataSpace(1, dims));
          ids.write(e.ids.data(), H5::PredType::NATIVE_INT32);
          std::vector<float> hs;
          hs.reserve(L * T * C);
          for (size_t l = 0; l < L; ++l) hs.insert(hs.end(), e.rows[l].begin(), e.rows[l].end());
          hdf5::write_tensor(g, "hidden_states", {L, T, C}, hs.data());
          hdf5::write_tensor(g, "logits", {T, V}, e.logits.data());
        }
      },
      expected_bytes);
}

}  // namespace wte
