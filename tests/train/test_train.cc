// Tests of the configuration, data pipeline, optimizer schedule, checkpoints and the `wte train`
// command as a user runs it (through the built binary, WTE_CLI).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "wte/checkpoint.h"
#include "wte/config.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/model.h"
#include "wte/optimizer.h"
#include "wte/rng.h"
#include "wte/tokenizer.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using wte::Config;
using wte::Error;
using wte::test::error_of;
using wte::test::run;
using wte::test::slurp;
using wte::test::temp_dir;
using wte::test::tiny_corpus;
using wte::test::write;

namespace {

std::string tiny_config(const fs::path& corpus) {
  return "[model]\nvocab_size = 300\nd_model = 16\nn_ctx = 16\nn_layer = 0\n"
         "[data]\ntext = " + corpus.string() + "\nseq_len = 16\nval_fraction = 0.1\n"
         "[train]\nbatch_size = 4\nsteps = 30\neval_interval = 10\neval_tokens = 0\n"
         "snapshot_steps =\n"
         "log_interval = 10\n[optim]\nlr = 0.01\nmin_lr = 0.001\nwarmup_steps = 5\n"
         "[checkpoint]\ninterval = 20\n";
}

const std::string kCli = WTE_CLI;

// The model of the checkpoint tests: V 300 (a tokenizer trained on tiny_corpus() reaches it), C 8.
Config small_checkpoint_config() {
  return wte::load_config("", {"--model.vocab_size=300", "--model.d_model=8", "--model.n_ctx=4",
                               "--model.n_layer=0", "--data.seq_len=4"});
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Configuration

TEST(Config, DefaultsRoundTripThroughIni) {
  const Config a = wte::load_config("", {});
  const Config b = wte::parse_config(a.to_ini(), "round trip");
  EXPECT_EQ(a.to_ini(), b.to_ini());
  EXPECT_NE(a.to_ini().find("[model]\nvocab_size = 8192"), std::string::npos) << a.to_ini();
}

// Every string key's value reads back from config.ini unchanged, or is refused at start-up: the
// INI reader has no quoting, so a '#' would cut the value (a comment) and a newline would split it
// into injected keys, and no checkpoint of the run could then be resumed.
TEST(Config, EveryStringKeyReadsBackFromTheIniOrIsRefused) {
  const std::vector<std::string> keys = {"data.text", "data.train_tokens", "data.val_tokens",
                                         "data.tokenizer"};
  // Characters INI files often treat specially that our reader keeps as they are.
  const std::string odd = "/tmp/a b=c;d'e\"f\\g[h] \xc3\xa9\rx%$";
  std::vector<std::string> overrides;
  for (const std::string& k : keys) overrides.push_back("--" + k + "=" + odd + k);
  const Config a = wte::load_config("", overrides);
  const Config b = wte::parse_config(a.to_ini(), "round trip");
  EXPECT_EQ(b.data.text, odd + "data.text");
  EXPECT_EQ(b.data.train_tokens, odd + "data.train_tokens");
  EXPECT_EQ(b.data.val_tokens, odd + "data.val_tokens");
  EXPECT_EQ(b.data.tokenizer, odd + "data.tokenizer");
  EXPECT_EQ(a.to_ini(), b.to_ini());

  struct Bad {
    std::string value, why;
  };
  for (const std::string& k : keys)
    for (const Bad& bad : std::vector<Bad>{{"/tmp/dir#1/p.txt", "contains '#'"},
                                          {"/tmp/inj\nsteps = 3\nx", "contains a line break"},
                                          {"/tmp/p.txt ", "ends with a space"},
                                          {"/tmp/p.txt\t", "begins or ends with a space"}}) {
      try {
        wte::load_config("", {"--" + k + "=" + bad.value});
        ADD_FAILURE() << k << " = '" << bad.value << "' was accepted";
      } catch (const wte::ConfigValueError& e) {  // bad usage: exit 2
        const std::string msg = e.what();
        EXPECT_EQ(msg.rfind(k + " = '", 0), 0u) << msg;
        EXPECT_NE(msg.find(bad.why), std::string::npos) << msg;
        EXPECT_NE(msg.find("the command line (--" + k + ")"), std::string::npos) << msg;
        EXPECT_NE(msg.find("config.ini"), std::string::npos) << msg;
      }
    }
  // A relative path in a config file is resolved against the file's directory: a '#' there is
  // refused too, naming the value as written.
  const fs::path dir = temp_dir("config_hash") / "d#1";
  fs::create_directories(dir);
  write(dir / "c.ini", "[data]\ntext = p.txt\n");
  const std::string msg = error_of([&] { wte::load_config((dir / "c.ini").string(), {}); });
  EXPECT_NE(msg.find("(resolved from 'p.txt')"), std::string::npos) << msg;
  EXPECT_NE(msg.find("contains '#'"), std::string::npos) << msg;
}

TEST(Config, CommandLineOverridesFileAndPathsResolveAgainstTheFile) {
  const fs::path dir = temp_dir("config_override");
  write(dir / "c.ini", "[model]\nd_model = 32\n[data]\ntext = corpus.txt\n");
  const Config cfg = wte::load_config((dir / "c.ini").string(), {"--model.d_model=48"});
  EXPECT_EQ(cfg.model.d_model, 48u);
  EXPECT_EQ(cfg.data.text, (fs::absolute(dir) / "corpus.txt").lexically_normal().string());
  const Config cli = wte::load_config((dir / "c.ini").string(), {"--data.text=rel.txt"});
  EXPECT_EQ(cli.data.text, (fs::current_path() / "rel.txt").string());  // relative to the cwd
}

// A config file that starts with a UTF-8 byte order mark (as some editors save it) reads as
// without it: the mark is skipped, not reported as an invalid line '[model]'.
TEST(Config, AUtf8ByteOrderMarkIsSkipped) {
  const fs::path dir = temp_dir("config_bom");
  write(dir / "c.ini", "\xEF\xBB\xBF[model]\nd_model = 32\n");
  EXPECT_EQ(wte::load_config((dir / "c.ini").string(), {}).model.d_model, 32u);
  write(dir / "short.ini", "\n");  // shorter than a mark: read as it is
  EXPECT_EQ(wte::load_config((dir / "short.ini").string(), {}).model.d_model,
            wte::load_config("", {}).model.d_model);
}

TEST(Config, UnknownKeyInFileNamesKeyAndFile) {
  const fs::path dir = temp_dir("config_unknown");
  write(dir / "c.ini", "[model]\nd_modle = 32\n");
  const std::string msg = error_of([&] { wte::load_config((dir / "c.ini").string(), {}); });
  EXPECT_NE(msg.find("model.d_modle"), std::string::npos) << msg;
  EXPECT_NE(msg.find("c.ini"), std::string::npos) << msg;
}

TEST(Config, UnknownKeyOnCommandLineIsNamed) {
  const std::string msg = error_of([] { wte::load_config("", {"--train.stepz=3"}); });
  EXPECT_NE(msg.find("train.stepz"), std::string::npos) << msg;
}

TEST(Config, BadValuesNameKeyValueSourceAndAllowed) {
  struct Case {
    std::string arg, key, value;
  };
  for (const Case& c : std::vector<Case>{{"--model.d_model=abc", "model.d_model", "abc"},
                                        {"--model.vocab_size=-1", "model.vocab_size", "-1"},
                                        {"--model.vocab_size=100", "model.vocab_size", "100"},
                                        {"--optim.lr=nan", "optim.lr", "nan"},
                                        {"--optim.lr=0", "optim.lr", "0"},
                                        {"--model.ln_f=maybe", "model.ln_f", "maybe"},
                                        {"--train.steps=0", "train.steps", "0"},
                                        {"--data.val_fraction=0.9", "data.val_fraction", "0.9"}}) {
    const std::string msg = error_of([&] { wte::load_config("", {c.arg}); });
    EXPECT_NE(msg.find(c.key), std::string::npos) << c.arg << ": " << msg;
    EXPECT_NE(msg.find("'" + c.value + "'"), std::string::npos) << c.arg << ": " << msg;
    EXPECT_NE(msg.find("command line"), std::string::npos) << c.arg << ": " << msg;
    EXPECT_NE(msg.find("allowed"), std::string::npos) << c.arg << ": " << msg;
  }
}

TEST(Config, ContextLongerThanNCtxIsRejectedAtStartUp) {
  const std::string msg =
      error_of([] { wte::load_config("", {"--data.seq_len=65", "--model.n_ctx=64"}); });
  EXPECT_NE(msg.find("seq_len = 65"), std::string::npos) << msg;
  EXPECT_NE(msg.find("n_ctx = 64"), std::string::npos) << msg;
}

// A bad value is bad usage (ConfigValueError, exit 2) in the user's config file as on the command
// line, values that cannot be combined too; in a checkpoint's stored config it is a broken file
// (plain wte::Error).
TEST(Config, BadValuesInTheUsersFileAreConfigValueErrorsAndInAStoredConfigNot) {
  const fs::path dir = temp_dir("config_value_errors");
  auto kind = [](auto&& f) {
    try {
      f();
    } catch (const wte::ConfigValueError& e) {
      return std::string("value: ") + e.what();
    } catch (const Error& e) {
      return std::string("error: ") + e.what();
    }
    return std::string("none");
  };
  write(dir / "n.ini", "[model]\nd_model = -3\n");
  std::string k = kind([&] { wte::load_config((dir / "n.ini").string(), {}); });
  EXPECT_EQ(k.rfind("value: model.d_model = '-3' from config file '", 0), 0u) << k;
  write(dir / "x.ini", "[model]\nn_ctx = 8\n[data]\nseq_len = 16\n");
  k = kind([&] { wte::load_config((dir / "x.ini").string(), {}); });
  EXPECT_EQ(k.rfind("value: data.seq_len = 16", 0), 0u) << k;
  k = kind([] { wte::load_config("", {"--train.steps=0"}); });
  EXPECT_EQ(k.rfind("value: train.steps = '0' from the command line", 0), 0u) << k;
  k = kind([] { wte::parse_config("[model]\nd_model = -3\n", "the config stored in 'c.h5'"); });
  EXPECT_EQ(k.rfind("error: model.d_model = '-3' from the config stored in 'c.h5'", 0), 0u) << k;
  // The file itself (missing, not INI, an unknown key) stays a run-time error.
  write(dir / "u.ini", "[model]\nd_modle = 3\n");
  k = kind([&] { wte::load_config((dir / "u.ini").string(), {}); });
  EXPECT_EQ(k.rfind("error: ", 0), 0u) << k;
  k = kind([&] { wte::load_config((dir / "none.ini").string(), {}); });
  EXPECT_EQ(k.rfind("error: ", 0), 0u) << k;
}

// A binary file read as a config: the error shows its bytes escaped (\xNN) and cut short, never
// raw bytes on the terminal; UTF-8 text stays readable, but not C1 control characters (U+0080 to
// U+009F: 0x9B is a terminal's CSI) or ill-formed sequences (a surrogate).
TEST(Config, GarbageFileErrorsEscapeBytesAndAreShort) {
  const fs::path dir = temp_dir("config_garbage");
  std::string junk;
  wte::Rng rng(7);
  for (int i = 0; i < 4096; ++i) {
    auto b = static_cast<unsigned char>(rng.next() & 0xff);
    if (b >= 0xC0 && b <= 0xF7) b -= 0x40;  // no UTF-8 lead bytes: every byte >= 0x80 is escaped
    const char c = static_cast<char>(b);
    // No NUL either: a file holding one is refused as not text before it is parsed (below).
    junk += (c == '\n' || c == '\r' || c == '=' || c == '[' || c == '#' || c == ';' || c == '\0')
                ? 'x'
                : c;
  }
  for (const std::string& text : {junk,                                   // one invalid line
                                  "[model]\n" + junk.substr(0, 3000) + " = 1\n",  // unknown key
                                  "[model]\nln_f = " + junk.substr(0, 3000) + "\n"}) {  // bad value
    write(dir / "g.ini", text);
    const std::string msg = error_of([&] { wte::load_config((dir / "g.ini").string(), {}); });
    EXPECT_LT(msg.size(), 700u) << msg;
    EXPECT_NE(msg.find("\\x"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bytes in all)"), std::string::npos) << msg;
    for (unsigned char c : msg)
      ASSERT_TRUE(c >= 0x20 && c < 0x7f) << "byte " << int(c) << " in: " << msg;
  }
  {
    write(dir / "nul.ini", std::string("[model]\nvocab_size = 4\0\x04x\n", 26));
    const std::string msg = error_of([&] { wte::load_config((dir / "nul.ini").string(), {}); });
    EXPECT_NE(msg.find("holds a NUL byte at offset 22 (line 2): it is not a text file"),
              std::string::npos) << msg;
  }
  write(dir / "u.ini", "[model]\nln_f = ja\xc3\xa4\xc2\x9b\xed\xa0\x80\n");
  const std::string msg = error_of([&] { wte::load_config((dir / "u.ini").string(), {}); });
  EXPECT_NE(msg.find("'ja\xc3\xa4\\xc2\\x9b\\xed\\xa0\\x80'"), std::string::npos) << msg;
  // A literal backslash is escaped too, so "a\x1f" followed by the byte 0x1f reads unambiguously.
  write(dir / "b.ini", "[model]\nln_f = a\\x1f\x1f\n");
  const std::string b = error_of([&] { wte::load_config((dir / "b.ini").string(), {}); });
  EXPECT_NE(b.find("'a\\\\x1f\\x1f'"), std::string::npos) << b;
}

TEST(Config, MissingFileIsNamed) {
  const std::string msg = error_of([] { wte::load_config("/nonexistent/wte.ini", {}); });
  EXPECT_NE(msg.find("/nonexistent/wte.ini"), std::string::npos) << msg;
}

// ---------------------------------------------------------------------------------------------
// Data and schedule

TEST(Data, SplitIsDeterministicAndSpreadsValidationEvenly) {
  std::string text;
  for (int i = 0; i < 20; ++i) text += (i ? "\n\n" : "") + std::string("doc") + std::to_string(i);
  const wte::TextSplit s = wte::split_documents(text, 0.1);
  EXPECT_EQ(s.val_documents, 2u);
  EXPECT_EQ(s.train_documents, 18u);
  // floor((i+1)/10) > floor(i/10) at i = 9 and 19.
  EXPECT_EQ(s.val, "doc9\n\ndoc19");
  EXPECT_EQ(wte::split_documents(text, 0.1).train, s.train);
}

// An empty split: with 0 or 1 documents no val_fraction helps, so the error does not suggest one;
// with enough documents it does.
TEST(Data, EmptySplitErrorsSuggestOnlyWhatCanHelp) {
  for (const std::string text : {"", "\n\n\r\n", "one document\nof two lines\n"}) {
    const std::string msg = error_of([&] { wte::split_documents(text, 0.1); });
    EXPECT_NE(msg.find(text.find('o') == std::string::npos ? "the corpus has no documents"
                                                            : "the corpus has 1 document"),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("at least 2 documents"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("val_fraction"), std::string::npos) << msg;
  }
  const std::string msg = error_of([] { wte::split_documents("a\n\nb\n\nc", 0.1); });
  EXPECT_NE(msg.find("the validation split is empty: use a larger corpus or another val_fraction"),
            std::string::npos) << msg;
}

TEST(Data, CrlfBlankLinesSeparateDocumentsToo) {
  const wte::TextSplit s = wte::split_documents("a\r\nb\r\n\r\nc\r\n\r\n\r\nd\r\n", 0.5);
  EXPECT_EQ(s.train_documents + s.val_documents, 3u);
  EXPECT_EQ(s.train, "a\r\nb\r\n\nd\r");  // documents 0 and 2, joined with "\n\n"
  EXPECT_EQ(s.val, "c\r");
}

TEST(Data, UnigramBaselineExactValue) {
  // p(0) = (2 + 1) / (3 + 2) = 0.6 with add-one smoothing over V = 2.
  EXPECT_NEAR(wte::unigram_cross_entropy({0, 0, 1}, {0}, 2), -std::log(0.6), 1e-15);
  // Unseen id 2 of V = 3: p = 1 / (3 + 3).
  EXPECT_NEAR(wte::unigram_cross_entropy({0, 0, 1}, {2}, 3), std::log(6.0), 1e-15);
}

TEST(Data, LoaderServesEverySampleOncePerEpoch) {
  std::vector<int32_t> tokens(1 + 10 * 4);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i);
  wte::BatchLoader loader(&tokens, 4, /*shuffle=*/true, 99);
  ASSERT_EQ(loader.num_samples(), 10u);
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::set<int32_t> starts;
    for (int k = 0; k < 5; ++k) {
      int32_t x[8], y[8];
      loader.next_batch(x, y, 2);
      for (int b = 0; b < 2; ++b) {
        starts.insert(x[b * 4]);
        for (int t = 0; t < 4; ++t) EXPECT_EQ(y[b * 4 + t], x[b * 4 + t] + 1);  // next token
      }
    }
    EXPECT_EQ(starts.size(), 10u) << "epoch " << epoch;
  }
}

TEST(Data, TokenFileRoundTripAndBadSize) {
  const fs::path dir = temp_dir("token_file");
  const std::vector<int32_t> ids = {0, 5, -1, 2147483647};
  wte::write_token_file((dir / "t.bin").string(), ids);
  EXPECT_EQ(wte::read_token_file((dir / "t.bin").string()), ids);
  EXPECT_FALSE(fs::exists(dir / "t.bin.tmp"));
  write(dir / "odd.bin", "abcde");
  const std::string msg = error_of([&] { wte::read_token_file((dir / "odd.bin").string()); });
  EXPECT_NE(msg.find("odd.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("5 bytes"), std::string::npos) << msg;
}

TEST(Schedule, WarmupThenCosineToMinLr) {
  wte::OptimConfig o;
  o.lr = 1.0f;
  o.min_lr = 0.1f;
  o.warmup_steps = 4;
  EXPECT_FLOAT_EQ(wte::learning_rate(0, 14, o), 0.25f);
  EXPECT_FLOAT_EQ(wte::learning_rate(3, 14, o), 1.0f);
  EXPECT_FLOAT_EQ(wte::learning_rate(4, 14, o), 1.0f);   // cosine starts at the peak
  EXPECT_FLOAT_EQ(wte::learning_rate(13, 14, o), 0.1f);  // and ends at min_lr on the last step
  EXPECT_NEAR(wte::learning_rate(4 + 9 / 2, 14, o), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 4 / 9.0)),
              1e-6);
}

TEST(Optimizer, ClipGradNormScalesToMaxNorm) {
  wte::ModelConfig mc;
  mc.vocab_size = 256;
  mc.d_model = 2;
  mc.n_ctx = 1;
  wte::Model model(mc);
  model.grads().wte[0] = 3.0f;
  model.grads().wte[1] = 4.0f;
  EXPECT_DOUBLE_EQ(wte::clip_grad_norm(model, 1.0), 5.0);
  EXPECT_FLOAT_EQ(model.grads().wte[0], 0.6f);
  EXPECT_FLOAT_EQ(model.grads().wte[1], 0.8f);
  EXPECT_NEAR(wte::clip_grad_norm(model, 0.0), 1.0, 1e-7);  // 0: measure only
  EXPECT_FLOAT_EQ(model.grads().wte[0], 0.6f);                // and nothing changes
}

// Training's clipping (grad_norm, then AdamW with clip_scale inside: no pass rescales the
// gradients) gives the bits of clip_grad_norm (scaled in place) followed by a plain update, for a
// tied and an untied model, clipping and not, at 1 and 2 threads.
TEST(Optimizer, ClipFactorInsideAdamWEqualsClippingInPlace) {
  for (bool tied : {true, false}) {
    for (double max_norm : {1e-3, 1e6}) {
      for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        wte::ModelConfig mc;
        mc.vocab_size = 300;
        mc.d_model = 24;
        mc.n_ctx = 8;
        mc.tie_embeddings = tied;
        wte::Model a(mc), b(mc);
        a.init_weights(11);
        b.init_weights(11);
        wte::AdamW opt_a(a), opt_b(b);
        wte::OptimConfig oc;
        oc.weight_decay = 0.1f;
        oc.grad_clip = static_cast<float>(max_norm);
        const size_t B = 2, T = 8;
        std::vector<int32_t> inputs(B * T), targets(B * T);
        for (size_t i = 0; i < B * T; ++i) {
          inputs[i] = static_cast<int32_t>((i * 37) % 50);
          targets[i] = static_cast<int32_t>((i * 11) % 300);
        }
        for (int step = 0; step < 3; ++step) {
          a.zero_grad();
          a.forward(inputs.data(), targets.data(), B, T);
          a.backward();
          const double norm_a = wte::clip_grad_norm(a, max_norm);
          opt_a.update(a, 1e-2f, oc);
          b.zero_grad();
          b.forward(inputs.data(), targets.data(), B, T);
          b.backward();
          const double norm_b = wte::grad_norm(b, b.wte_grad_rows());
          EXPECT_EQ(norm_a, norm_b);
          if (max_norm < 1) {
            EXPECT_LT(wte::clip_scale(norm_b, max_norm), 1.0f);
          }
          opt_b.update(b, 1e-2f, oc, b.wte_grad_rows(), wte::clip_scale(norm_b, max_norm));
        }
        const size_t n = a.num_parameters();
        EXPECT_EQ(0, std::memcmp(a.param_data(), b.param_data(), n * sizeof(float)))
            << (tied ? "tied" : "untied") << " max_norm " << max_norm << " threads " << threads;
        EXPECT_EQ(0, std::memcmp(opt_a.m(), opt_b.m(), n * sizeof(float)));
        EXPECT_EQ(0, std::memcmp(opt_a.v(), opt_b.v(), n * sizeof(float)));
      }
    }
  }
  omp_set_num_threads(omp_get_num_procs());
}

TEST(Optimizer, ClipScaleIsOneUnlessTheNormExceedsTheMaximum) {
  EXPECT_EQ(wte::clip_scale(0.5, 1.0), 1.0f);
  EXPECT_EQ(wte::clip_scale(1.0, 1.0), 1.0f);
  EXPECT_EQ(wte::clip_scale(5.0, 0.0), 1.0f);  // 0: clipping off
  EXPECT_EQ(wte::clip_scale(5.0, 1.0), 0.2f);
}

// ---------------------------------------------------------------------------------------------
// Checkpoints

TEST(Checkpoint, RoundTripsParametersOptimizerTokenizerAndConfig) {
  const fs::path dir = temp_dir("checkpoint_round_trip");
  Config cfg = small_checkpoint_config();
  const wte::Tokenizer tok = wte::Tokenizer::train(tiny_corpus(), 300);
  wte::Model model(cfg.model);
  model.init_weights(3);
  wte::AdamW opt(model);
  for (size_t i = 0; i < opt.size(); ++i) {
    opt.m()[i] = 0.5f * static_cast<float>(i);
    opt.v()[i] = 0.25f * static_cast<float>(i);
  }
  opt.set_step(7);
  const std::string path = (dir / "c.h5").string();
  wte::save_checkpoint(path, model, &opt, tok, cfg, 42);
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  const wte::CheckpointInfo info = wte::read_checkpoint_info(path);
  EXPECT_EQ(info.step, 42);
  EXPECT_EQ(info.format_version, wte::kCheckpointVersion);
  EXPECT_EQ(info.config_ini, cfg.to_ini());
  EXPECT_EQ(info.encoder_json, tok.encoder_json());
  EXPECT_EQ(info.vocab_bpe, tok.vocab_bpe());

  wte::Model loaded(cfg.model);
  wte::AdamW loaded_opt(loaded);
  wte::load_checkpoint(path, loaded, &loaded_opt);
  EXPECT_EQ(0, std::memcmp(loaded.param_data(), model.param_data(),
                           model.num_parameters() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(loaded_opt.m(), opt.m(), opt.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(loaded_opt.v(), opt.v(), opt.size() * sizeof(float)));
  EXPECT_EQ(loaded_opt.step(), 7);

  // The model alone, built from the stored config, in the same single pass over the file.
  const wte::CheckpointModel ck = wte::load_checkpoint_model(path);
  EXPECT_EQ(ck.info.step, 42);
  EXPECT_EQ(ck.config.to_ini(), cfg.to_ini());
  ASSERT_EQ(ck.model->num_parameters(), model.num_parameters());
  EXPECT_EQ(0, std::memcmp(ck.model->param_data(), model.param_data(),
                           model.num_parameters() * sizeof(float)));
}

// wte inspect's parameter table lines up also for block tensors ("h0/attn/c_attn/w" is longer
// than the name column's 8 characters).
TEST(Checkpoint, InspectColumnsLineUpForLongTensorNames) {
  const fs::path dir = temp_dir("checkpoint_inspect_columns");
  Config cfg = wte::load_config("", {"--model.vocab_size=300", "--model.d_model=8",
                                     "--model.n_ctx=4", "--data.seq_len=4", "--model.n_layer=1",
                                     "--model.n_head=2"});
  const wte::Tokenizer tok = wte::Tokenizer::train(tiny_corpus(), 300);
  wte::Model model(cfg.model);
  model.init_weights(3);
  const std::string path = (dir / "c.h5").string();
  wte::save_checkpoint(path, model, nullptr, tok, cfg, 1);
  std::string out;
  ASSERT_EQ(run(kCli + " inspect " + path, &out), 0) << out;
  std::istringstream lines(out);
  std::string line;
  size_t rows = 0, float_col = std::string::npos, values_col = std::string::npos;
  bool long_name = false;
  while (std::getline(lines, line)) {
    const size_t f = line.find(" float32 "), v = line.find(" values ");
    if (f == std::string::npos || v == std::string::npos) continue;
    if (rows++ == 0) float_col = f, values_col = v;
    EXPECT_EQ(f, float_col) << line << "\n" << out;
    EXPECT_EQ(v, values_col) << line << "\n" << out;
    long_name |= line.find("h0/attn/c_attn/w") != std::string::npos;
  }
  EXPECT_EQ(rows, model.tensors().size()) << out;
  EXPECT_TRUE(long_name) << out;
}

TEST(Checkpoint, NonFiniteParametersAreRejectedWithTheirIndex) {
  const fs::path dir = temp_dir("checkpoint_nonfinite");
  Config cfg = small_checkpoint_config();
  const wte::Tokenizer tok = wte::Tokenizer::train(tiny_corpus(), 300);
  wte::Model model(cfg.model);
  model.init_weights(3);
  model.params().wte[1 * 8 + 3] = std::numeric_limits<float>::infinity();
  const std::string path = (dir / "inf.h5").string();
  wte::save_checkpoint(path, model, nullptr, tok, cfg, 1);
  wte::Model other(cfg.model);
  const std::string msg = error_of([&] { wte::load_checkpoint(path, other, nullptr); });
  EXPECT_NE(msg.find("'wte'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[1, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("inf"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { wte::read_checkpoint_info(path); }), "");
}

TEST(Checkpoint, BadFilesFailLoudlyAndLeaveTheModelUntouched) {
  const fs::path dir = temp_dir("checkpoint_bad");
  Config cfg = small_checkpoint_config();
  const wte::Tokenizer tok = wte::Tokenizer::train(tiny_corpus(), 300);
  wte::Model model(cfg.model);
  model.init_weights(3);
  const std::string good = (dir / "good.h5").string();
  wte::save_checkpoint(good, model, nullptr, tok, cfg, 1);

  write(dir / "text.h5", "this is not HDF5\n");
  const std::string good_bytes = slurp(good);
  write(dir / "truncated.h5", good_bytes.substr(0, good_bytes.size() / 2));

  wte::Model other(cfg.model);
  other.init_weights(4);
  const std::vector<float> before(other.param_data(), other.param_data() + other.num_parameters());
  for (const char* name : {"text.h5", "truncated.h5", "missing.h5"}) {
    const std::string path = (dir / name).string();
    const std::string msg = error_of([&] { wte::load_checkpoint(path, other, nullptr); });
    EXPECT_NE(msg.find(path), std::string::npos) << name << ": " << msg;
    EXPECT_EQ(0, std::memcmp(before.data(), other.param_data(), before.size() * sizeof(float)))
        << name;
    const std::string model_msg = error_of([&] { wte::load_checkpoint_model(path); });
    EXPECT_NE(model_msg.find(path), std::string::npos) << name << ": " << model_msg;
  }
  // A model of another shape: the error names the tensor and both shapes.
  Config wide = cfg;
  wide.model.d_model = 9;
  wte::Model wrong(wide.model);
  const std::string msg = error_of([&] { wte::load_checkpoint(good, wrong, nullptr); });
  EXPECT_NE(msg.find("'wte'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(300, 8)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(300, 9)"), std::string::npos) << msg;
}

// ---------------------------------------------------------------------------------------------
// `wte train` as a user runs it

class TrainCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    write(dir_ / "corpus.txt", tiny_corpus());
    write(dir_ / "tiny.ini", tiny_config(dir_ / "corpus.txt"));
  }
  std::string train(const std::string& out, const std::string& extra, int* code) {
    std::string output;
    *code = run(kCli + " train --config '" + (dir_ / "tiny.ini").string() + "' --out '" +
                    (dir_ / out).string() + "' --train.threads=2 " + extra,
                &output);
    return output;
  }
  fs::path dir_;
};

TEST_F(TrainCli, TrainsWritesMetricsCheckpointsAndBeatsTheUnigramBaseline) {
  int code = 0;
  const std::string out = train("run", "", &code);
  ASSERT_EQ(code, 0) << out;
  // Progress lines and the final comparison.
  EXPECT_NE(out.find("tok/s"), std::string::npos) << out;
  EXPECT_NE(out.find("ETA"), std::string::npos) << out;
  double val = 0, base = 0;
  const size_t at = out.find("final validation loss ");
  ASSERT_NE(at, std::string::npos) << out;
  ASSERT_EQ(std::sscanf(out.c_str() + at, "final validation loss %lf", &val), 1);
  const size_t bat = out.find("unigram baseline ", at);
  ASSERT_NE(bat, std::string::npos) << out;
  ASSERT_EQ(std::sscanf(out.c_str() + bat, "unigram baseline %lf", &base), 1);
  EXPECT_LT(val, base) << out;

  // metrics.csv: header with step, train_loss, val_loss; one row per step.
  std::ifstream metrics(dir_ / "run" / "metrics.csv");
  std::string header, line;
  std::getline(metrics, header);
  EXPECT_EQ(header.rfind("step,train_loss,val_loss,", 0), 0u) << header;
  int rows = 0;
  while (std::getline(metrics, line)) ++rows;
  EXPECT_EQ(rows, 30);

  // Checkpoints at step 20 and at the end; the last one holds wte (V, C) and loads.
  for (const char* name : {"checkpoint_00000020.h5", "checkpoint_00000030.h5", "config.ini",
                           "tokenizer/encoder.json", "tokenizer/vocab.bpe", "train.bin",
                           "val.bin"})
    EXPECT_TRUE(fs::exists(dir_ / "run" / name)) << name;
  const std::string ckpt = (dir_ / "run" / "checkpoint_00000030.h5").string();
  EXPECT_EQ(wte::read_checkpoint_info(ckpt).step, 30);
  if (std::system("command -v h5ls > /dev/null 2>&1") == 0) {
    std::string listing;
    ASSERT_EQ(run("h5ls '" + ckpt + "'", &listing), 0) << listing;
    EXPECT_NE(listing.find("wte                      Dataset {300, 16}"), std::string::npos)
        << listing;
  }
}

TEST_F(TrainCli, SameConfigSeedAndThreadsGiveIdenticalCheckpoints) {
  int code_a = 0, code_b = 0;
  const std::string out_a = train("a", "--train.steps=12 --checkpoint.interval=0", &code_a);
  const std::string out_b = train("b", "--train.steps=12 --checkpoint.interval=0", &code_b);
  ASSERT_EQ(code_a, 0) << out_a;
  ASSERT_EQ(code_b, 0) << out_b;
  Config cfg = wte::load_config((dir_ / "a" / "config.ini").string(), {});
  wte::Model a(cfg.model), b(cfg.model);
  wte::load_checkpoint((dir_ / "a" / "checkpoint_00000012.h5").string(), a, nullptr);
  wte::load_checkpoint((dir_ / "b" / "checkpoint_00000012.h5").string(), b, nullptr);
  EXPECT_EQ(0, std::memcmp(a.param_data(), b.param_data(), a.num_parameters() * sizeof(float)));
  // Different seed: different parameters.
  int code_c = 0;
  const std::string out_c =
      train("c", "--train.steps=12 --checkpoint.interval=0 --train.seed=2", &code_c);
  ASSERT_EQ(code_c, 0) << out_c;
  wte::Model c(cfg.model);
  wte::load_checkpoint((dir_ / "c" / "checkpoint_00000012.h5").string(), c, nullptr);
  EXPECT_NE(0, std::memcmp(a.param_data(), c.param_data(), a.num_parameters() * sizeof(float)));
}

TEST_F(TrainCli, AFreshRunNeverMixesWithAnEarlierRunsCheckpoints) {
  int code = 0;
  std::string out = train("run", "--train.steps=4 --checkpoint.interval=2", &code);
  ASSERT_EQ(code, 0) << out;
  const fs::path run_dir = dir_ / "run";
  const std::string before = slurp(run_dir / "checkpoint_00000004.h5");
  out = train("run", "--train.steps=2", &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("already holds"), std::string::npos) << out;
  EXPECT_NE(out.find("--overwrite"), std::string::npos) << out;
  EXPECT_EQ(slurp(run_dir / "checkpoint_00000004.h5"), before) << "nothing may be lost";
  out = train("run", "--train.steps=2 --overwrite", &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_TRUE(fs::exists(run_dir / "checkpoint_00000002.h5"));
  EXPECT_FALSE(fs::exists(run_dir / "checkpoint_00000004.h5")) << "the earlier run's is gone";
}

// A fresh run into a directory that holds files a run writes, which no earlier wte run wrote,
// refuses (exit 2) before any work, naming the directory and the files; the input config is never
// the output, not even with --overwrite. An earlier run's files (config.ini written by wte, no
// checkpoint: a run stopped before its first one) and an empty directory pass.
TEST_F(TrainCli, AFreshRunNeverReplacesFilesItDidNotWrite) {
  const fs::path proj = dir_ / "proj";
  fs::create_directories(proj);
  const std::string user_ini = "# my settings\n" + tiny_config(dir_ / "corpus.txt");
  write(proj / "config.ini", user_ini);
  std::string out;
  // The report's repro: wte train -c config.ini -o . --train.steps=1 (in proj).
  const std::string in_proj = "cd '" + proj.string() + "' && " + kCli +
                              " train -c config.ini -o . --train.steps=1 --train.threads=2";
  for (const char* extra : {"", " --overwrite"}) {
    EXPECT_EQ(run(in_proj + extra, &out), 2) << extra << out;
    EXPECT_NE(out.find("--config 'config.ini' is the run directory's config.ini (--out '.')"),
              std::string::npos) << extra << out;
    EXPECT_EQ(slurp(proj / "config.ini"), user_ini) << extra;
    EXPECT_FALSE(fs::exists(proj / "metrics.csv")) << extra << ": nothing may be written";
  }
  // --resume auto without --config would take that config.ini as the run's and replace it.
  EXPECT_EQ(run("cd '" + proj.string() + "' && " + kCli + " train --resume auto -o .", &out), 2)
      << out;
  EXPECT_NE(out.find("--resume auto: '.' holds no checkpoint, and its config.ini is not one wte "
                     "train wrote"), std::string::npos) << out;
  EXPECT_EQ(slurp(proj / "config.ini"), user_ini);
  // Another program's metrics.csv and tokenizer/: refused (naming both), kept; --overwrite
  // replaces them.
  const fs::path other = dir_ / "other";
  fs::create_directories(other / "tokenizer");
  write(other / "metrics.csv", "my numbers\n");
  int code = 0;
  out = train("other", "--train.steps=1", &code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("run directory (--out) '" + other.string() + "' holds metrics.csv, tokenizer, "
                     "which a run writes, and no config.ini of an earlier wte run"),
            std::string::npos) << out;
  EXPECT_NE(out.find("Choose another --out, remove them, or pass --overwrite"), std::string::npos)
      << out;
  EXPECT_EQ(slurp(other / "metrics.csv"), "my numbers\n");
  EXPECT_FALSE(fs::exists(other / "config.ini")) << "nothing may be written";
  out = train("other", "--train.steps=1 --overwrite", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(slurp(other / "metrics.csv").rfind("step,train_loss,", 0), 0u);
  // A run stopped before its first checkpoint left its own files: a fresh run replaces them.
  for (const auto& e : fs::directory_iterator(other))
    if (e.path().extension() == ".h5") fs::remove(e.path());
  out = train("other", "--train.steps=1", &code);
  EXPECT_EQ(code, 0) << out;
  // An empty directory that exists is fine.
  fs::create_directories(dir_ / "empty");
  out = train("empty", "--train.steps=1", &code);
  EXPECT_EQ(code, 0) << out;
}

// What a run directory holds is checked before any work (data preparation included), for fresh
// and resumed runs alike, and bad usage exits 2.
TEST_F(TrainCli, TheRunDirectoryIsCheckedBeforeAnyWorkForFreshAndResumedRuns) {
  const std::string four = "--train.steps=4 --checkpoint.interval=2 --train.eval_interval=0";
  int code = 0;
  std::string out = train("run", four, &code);
  ASSERT_EQ(code, 0) << out;
  const fs::path run_dir = dir_ / "run";
  const std::string c2 = (run_dir / "checkpoint_00000002.h5").string();
  const std::string metrics = slurp(run_dir / "metrics.csv");

  // A fresh run into a directory with checkpoints: exit 2 before the data is prepared.
  out = train("run", four, &code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("run directory (--out) '" + run_dir.string() + "' already holds 2 "
                     "checkpoint/snapshot file(s) of an earlier run (checkpoint_00000002.h5, "
                     "checkpoint_00000004.h5)"), std::string::npos) << out;
  EXPECT_EQ(out.find("tokens:"), std::string::npos) << "data was prepared first: " << out;

  // --resume CKPT -o DIR into a directory holding the user's own files.
  const fs::path own = dir_ / "own";
  fs::create_directories(own);
  write(own / "config.ini", "my own notes\n");
  write(own / "metrics.csv", "my,data\n");
  const std::string resume_own = kCli + " train --resume '" + c2 + "' --out '" + own.string() + "'";
  EXPECT_EQ(run(resume_own, &out), 2) << out;
  EXPECT_NE(out.find("holds config.ini, metrics.csv, which a run writes, and no config.ini of an "
                     "earlier wte run: a run resumed into it would replace them"),
            std::string::npos) << out;
  EXPECT_EQ(slurp(own / "config.ini"), "my own notes\n");
  EXPECT_EQ(slurp(own / "metrics.csv"), "my,data\n");
  // With --overwrite they are replaced, and metrics.csv holds the resumed run's rows only.
  EXPECT_EQ(run(resume_own + " --overwrite", &out), 0) << out;
  const std::string resumed = slurp(own / "metrics.csv");
  EXPECT_EQ(resumed.rfind("step,train_loss,", 0), 0u) << resumed;
  EXPECT_EQ(resumed.find("my,data"), std::string::npos) << resumed;
  EXPECT_NE(resumed.find("\n3,"), std::string::npos) << resumed;
  EXPECT_EQ(resumed.find("\n2,"), std::string::npos) << resumed;

  // A copy of a run's config.ini (byte for byte what wte writes) given as --config in
  // the directory it is read from is the input, never the output; also as a hard link.
  const fs::path copy = dir_ / "copy";
  fs::create_directories(copy);
  fs::copy_file(run_dir / "config.ini", copy / "config.ini");
  const std::string ini = slurp(copy / "config.ini");
  for (const std::string& extra : {std::string(""), std::string(" --overwrite")}) {
    EXPECT_EQ(run(kCli + " train -c '" + (copy / "config.ini").string() + "' -o '" +
                      (copy / "." ).string() + "' --train.steps=1" + extra, &out), 2) << out;
    EXPECT_NE(out.find("is the run directory's config.ini"), std::string::npos) << out;
    EXPECT_EQ(slurp(copy / "config.ini"), ini);
  }
  fs::create_hard_link(copy / "config.ini", dir_ / "linked.ini");
  EXPECT_EQ(run(kCli + " train -c '" + (dir_ / "linked.ini").string() + "' -o '" + copy.string() +
                    "' --train.steps=1", &out), 2) << out;
  EXPECT_EQ(slurp(copy / "config.ini"), ini);

  // Resuming an older checkpoint in its own directory, beside later checkpoints.
  const std::string resume_old = kCli + " train --resume '" + c2 + "' --stop-at=3";
  EXPECT_EQ(run(resume_old, &out), 2) << out;
  EXPECT_NE(out.find("--resume '" + c2 + "' is the checkpoint of step 2, but its run directory '" +
                     run_dir.string() + "' also holds 1 checkpoint(s) of later steps "
                     "(checkpoint_00000004.h5)"), std::string::npos) << out;
  EXPECT_EQ(slurp(run_dir / "metrics.csv"), metrics);
  // --overwrite deletes them: one history, metrics.csv to step 3, and --resume auto continues it.
  EXPECT_EQ(run(resume_old + " --overwrite", &out), 0) << out;
  EXPECT_FALSE(fs::exists(run_dir / "checkpoint_00000004.h5")) << out;
  EXPECT_TRUE(fs::exists(run_dir / "checkpoint_00000003.h5")) << out;
  EXPECT_EQ(run(kCli + " train --resume auto --out '" + run_dir.string() + "'", &out), 0) << out;
  EXPECT_NE(out.find("at step 3"), std::string::npos) << out;
  const std::string after = slurp(run_dir / "metrics.csv");
  EXPECT_EQ(std::count(after.begin(), after.end(), '\n'), 5) << after;  // the header and 4 rows
}

// A malformed metrics.csv row that the resumed run keeps is found at start-up, not when the loss
// curve is drawn after every step has trained; a torn row after the checkpoint's step (a run killed
// while writing it) is dropped.
TEST_F(TrainCli, AMalformedMetricsRowIsFoundBeforeAResumedRunTrains) {
  int code = 0;
  std::string out = train("run", "--train.steps=4 --checkpoint.interval=2 --train.eval_interval=0 "
                          "--stop-at=2", &code);
  ASSERT_EQ(code, 0) << out;
  const fs::path metrics = dir_ / "run" / "metrics.csv";
  const std::string good = slurp(metrics);
  const size_t row1 = good.find('\n') + 1, end1 = good.find('\n', row1);
  write(metrics, good.substr(0, end1) + ",x" + good.substr(end1));  // row of step 1: 9 fields
  const std::string resume = kCli + " train --resume auto --out '" + (dir_ / "run").string() + "'";
  EXPECT_EQ(run(resume, &out), 1) << out;
  EXPECT_NE(out.find(metrics.string() + " line 2: 9 fields, the header has 8; resuming at step 2 "
                     "keeps metrics.csv's rows up to that step"), std::string::npos) << out;
  EXPECT_EQ(out.find("tokens:"), std::string::npos) << "data was prepared first: " << out;
  EXPECT_FALSE(fs::exists(dir_ / "run" / "checkpoint_00000004.h5")) << out;
  // A row cut in mid-write (no newline) is dropped, also when what is left reads as an earlier
  // step ("1" of "17,...").
  write(metrics, good + "1");
  EXPECT_EQ(run(resume, &out), 0) << out;
  EXPECT_EQ(slurp(metrics).find("\n1\n"), std::string::npos) << slurp(metrics);
  EXPECT_TRUE(fs::exists(dir_ / "run" / "checkpoint_00000004.h5")) << out;
}

TEST_F(TrainCli, BadTokenIdsStopBeforeAnyComputeAndWriteNothing) {
  int code = 0;
  const std::string prep = train("prep", "--train.steps=1", &code);
  ASSERT_EQ(code, 0) << prep;
  const std::vector<int32_t> train_ids = wte::read_token_file((dir_ / "prep" / "train.bin").string());
  for (int32_t bad : {300, -1}) {
    std::vector<int32_t> corrupt = train_ids;
    corrupt[17] = bad;
    const fs::path tokens = dir_ / ("corrupt_" + std::to_string(bad) + ".bin");
    wte::write_token_file(tokens.string(), corrupt);
    const std::string out_name = "out_" + std::to_string(bad);
    const std::string out = train(
        out_name,
        "--data.train_tokens='" + tokens.string() + "' --data.val_tokens='" +
            (dir_ / "prep" / "val.bin").string() + "' --data.tokenizer='" +
            (dir_ / "prep" / "tokenizer").string() + "'",
        &code);
    EXPECT_NE(code, 0) << out;
    EXPECT_NE(out.find("token id " + std::to_string(bad) + " at position 17"), std::string::npos)
        << out;
    EXPECT_NE(out.find("vocab_size=300"), std::string::npos) << out;
    EXPECT_NE(out.find(tokens.string()), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(dir_ / out_name)) << "nothing may be written: " << out;
  }
  // A tokenizer/config mismatch names both sizes.
  const std::string out = train("mismatch",
                                "--model.vocab_size=512 --data.tokenizer='" +
                                    (dir_ / "prep" / "tokenizer").string() + "'",
                                &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("tokenizer has 300 tokens but model.vocab_size = 512"), std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(dir_ / "mismatch"));
}

// The README's shorter runs of the default config (--train.steps below its snapshot steps, an
// empty --train.snapshot_steps=) work as written.
TEST_F(TrainCli, ShortRunsOfTheDefaultConfigWorkAsTheReadmeShows) {
  const fs::path corpus = fs::path(WTE_SOURCE_DIR) / "datasets" / "kjv" / "kjv.txt";
  if (!fs::exists(corpus)) GTEST_SKIP() << "run datasets/make_kjv.sh first";
  const std::string config = (fs::path(WTE_SOURCE_DIR) / "configs" / "default.ini").string();
  std::string out;
  int code = run(kCli + " train --config '" + config + "' --train.steps=2 --train.eval_interval=0 "
                 "--train.threads=2 -q --out '" + (dir_ / "short").string() + "'", &out);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("will not be saved"), std::string::npos) << out;  // snapshots past step 2
  EXPECT_TRUE(fs::exists(dir_ / "short" / "snapshot_00000000.h5"));
  EXPECT_TRUE(fs::exists(dir_ / "short" / "checkpoint_00000002.h5"));
  code = run(kCli + " train --config '" + config + "' --train.steps=2 --train.eval_interval=0 "
             "--train.snapshot_steps= --train.threads=2 -q --out '" + (dir_ / "none").string() + "'",
             &out);
  ASSERT_EQ(code, 0) << out;
  EXPECT_FALSE(fs::exists(dir_ / "none" / "snapshot_00000000.h5"));
}

TEST_F(TrainCli, UserErrorsAreNamedAndWriteNothing) {
  struct Case {
    std::string args, expect;
  };
  for (const Case& c : std::vector<Case>{
           {"--data.text=/nonexistent/corpus.txt", "/nonexistent/corpus.txt"},
           {"--model.bogus=1", "model.bogus"},
           {"--data.seq_len=17", "n_ctx = 16"},
           {"--data.tokenizer=/nonexistent/vocab", "/nonexistent/vocab/encoder.json"}}) {
    int code = 0;
    const std::string out = train("never", c.args, &code);
    EXPECT_NE(code, 0) << c.args << ": " << out;
    EXPECT_NE(out.find(c.expect), std::string::npos) << c.args << ": " << out;
    EXPECT_FALSE(fs::exists(dir_ / "never")) << c.args;
  }
  // The parents of --out that the failed start-up created go too.
  {
    int code = 0;
    const std::string out = train("newp/a/b", "--data.text=/nonexistent/corpus.txt", &code);
    EXPECT_EQ(code, 1) << out;
    EXPECT_FALSE(fs::exists(dir_ / "newp")) << out;
    // "keep/new/..": removing what it created must never remove keep, which existed.
    fs::create_directories(dir_ / "keep");
    write(dir_ / "keep" / "mine.txt", "mine\n");
    const std::string dots = train("keep/new/..", "--data.text=/nonexistent/corpus.txt", &code);
    EXPECT_EQ(code, 1) << dots;
    EXPECT_EQ(slurp(dir_ / "keep" / "mine.txt"), "mine\n") << dots;
  }
  std::string out;
  EXPECT_EQ(run(kCli + " train --config /nonexistent.ini", &out), 1);
  EXPECT_NE(out.find("/nonexistent.ini"), std::string::npos) << out;
  EXPECT_EQ(run(kCli + " train --help", &out), 0);
  EXPECT_NE(out.find("--model.vocab_size"), std::string::npos) << out;
  EXPECT_NE(out.find("allowed"), std::string::npos) << out;
}
