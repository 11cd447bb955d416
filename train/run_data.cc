// The data of a run: the corpus split and encoded (or token files read), the tokenizer (trained,
// loaded, or a checkpoint's), every id checked, and on resume the streams compared with the
// checkpoint's (train/run_state.h, prepare_data).
#include <cinttypes>
#include <cstdio>
#include <string>

#include "train/run_state.h"
#include "train/signals.h"
#include "wte/checkpoint.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/tokenizer.h"

namespace wte {
namespace {

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

// Splits, tokenizes (or reads token files) and checks every id before any compute. Resuming, the
// checkpoint's tokenizer is always the one used, and the data must hash as the checkpoint's.
// With --init-from (ckpt set, opts.resume empty) the checkpoint's tokenizer is used the same way
// (its ids index the checkpoint's wte), but the data may be any.
RunData prepare_data(const Config& cfg, const RunOptions& opts, const CheckpointInfo* ckpt,
                     const Say& say) {
  const bool resuming = !opts.resume.empty();
  const std::string source = resuming ? opts.resume : opts.init_from;
  const std::string cannot = resuming ? "cannot resume from '" + source + "'"
                                      : "cannot start from --init-from '" + source + "'";
  const size_t T = cfg.data.seq_len, V = cfg.model.vocab_size;
  const bool from_token_files = !cfg.data.train_tokens.empty();
  RunData d;
  d.t_prep = Clock::now();
  if (ckpt != nullptr) {
    // The checkpoint's tokenizer, always: a tokenizer directory must hold the same one; with
    // data.tokenizer = train, BPE is not trained again.
    d.tokenizer = Tokenizer::from_strings(ckpt->encoder_json, ckpt->vocab_bpe,
                                          "the tokenizer stored in '" + source + "'");
    if (cfg.data.tokenizer != "train") {
      const Tokenizer dir_tok = Tokenizer::load(cfg.data.tokenizer);
      if (dir_tok.encoder_json() != ckpt->encoder_json || dir_tok.vocab_bpe() != ckpt->vocab_bpe)
        throw Error(cannot + ": tokenizer: data.tokenizer '" +
                    cfg.data.tokenizer + "' holds another vocabulary than the checkpoint's (" +
                    std::to_string(dir_tok.size()) + " tokens, " +
                    std::to_string(dir_tok.num_merges()) + " merges, vs " +
                    std::to_string(d.tokenizer.size()) + " tokens, " +
                    std::to_string(d.tokenizer.num_merges()) + " merges, or the same sizes with "
                    "other contents)");
    }
  }
  if (from_token_files) {
    if (ckpt == nullptr) d.tokenizer = Tokenizer::load(cfg.data.tokenizer);
    d.train_ids = TokenStream::open(cfg.data.train_tokens, "data.train_tokens");
    d.val_ids = TokenStream::open(cfg.data.val_tokens, "data.val_tokens");
    throw_if_stop_requested("data preparation (reading the token files)");
    say("data: %zu train tokens from %s, %zu validation tokens from %s\n", d.train_ids.size(),
        cfg.data.train_tokens.c_str(), d.val_ids.size(), cfg.data.val_tokens.c_str());
  } else {
    const std::string text = read_text_file(cfg.data.text);
    const TextSplit split = split_documents(text, cfg.data.val_fraction);
    throw_if_stop_requested("data preparation (reading data.text)");
    say("data: %s, %zu bytes, %zu train / %zu validation documents\n", cfg.data.text.c_str(),
        text.size(), split.train_documents, split.val_documents);
    if (ckpt != nullptr) {
      say("tokenizer: the checkpoint's (%zu tokens)\n", d.tokenizer.size());
    } else if (cfg.data.tokenizer == "train") {
      say("tokenizer: training byte-level BPE to vocab_size %zu on the train split...\n", V);
      // Checked every 256 merges: Ctrl-C need not wait for the whole BPE training.
      d.tokenizer = Tokenizer::train(split.train, V, [](size_t, size_t) {
        throw_if_stop_requested("data preparation (training the BPE tokenizer)");
      });
    } else {
      d.tokenizer = Tokenizer::load(cfg.data.tokenizer);
    }
    d.train_bytes = split.train.size();
    if (d.tokenizer.size() == V) {
      d.train_ids = TokenStream(d.tokenizer.encode(split.train));
      d.val_ids = TokenStream(d.tokenizer.encode(split.val));
      throw_if_stop_requested("data preparation (encoding the corpus)");
    }
  }
  if (d.tokenizer.size() != V)
    throw Error("the tokenizer has " + std::to_string(d.tokenizer.size()) +
                " tokens but model.vocab_size = " + std::to_string(V) +
                "; they must be equal (set model.vocab_size = " +
                std::to_string(d.tokenizer.size()) + ")");
  check_token_ids(d.train_ids, V,
                  from_token_files ? "data.train_tokens '" + cfg.data.train_tokens + "'"
                                   : std::string("the encoded train split"));
  check_token_ids(d.val_ids, V,
                  from_token_files ? "data.val_tokens '" + cfg.data.val_tokens + "'"
                                   : std::string("the encoded validation split"));
  if (d.val_ids.size() < T + 1)
    throw Error("the validation split has " + std::to_string(d.val_ids.size()) +
                " tokens, fewer than data.seq_len + 1 = " + std::to_string(T + 1));
  d.train_hash = fnv1a64(d.train_ids);
  d.val_hash = fnv1a64(d.val_ids);
  if (ckpt != nullptr && resuming) {
    const ResumeState& rs = ckpt->resume;
    std::string diffs;
    auto compare = [&](const char* which, uint64_t n_then, uint64_t h_then, uint64_t n_now,
                       uint64_t h_now) {
      if (n_then != n_now || h_then != h_now)
        diffs += std::string("\n  dataset (") + which + " tokens): checkpoint " +
                 std::to_string(n_then) + " tokens, fnv1a64 " + hex64(h_then) + ", now " +
                 std::to_string(n_now) + " tokens, fnv1a64 " + hex64(h_now);
    };
    compare("train", rs.train_tokens, rs.train_tokens_fnv1a64, d.train_ids.size(), d.train_hash);
    compare("validation", rs.val_tokens, rs.val_tokens_fnv1a64, d.val_ids.size(), d.val_hash);
    if (!diffs.empty())
      throw Error("cannot resume from '" + opts.resume +
                  "': the data differs from the data the checkpoint was trained on:" + diffs);
  }
  return d;
}

}  // namespace wte
