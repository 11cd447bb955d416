// Loads a model written by `wte train` through the installed package (wte::load_model: config,
// parameters and tokenizer in one call), runs it on a sentence and prints what it read (the test
// compares wte[1][0] with h5dump's).
// Usage: app CHECKPOINT.h5 | RUN_DIRECTORY (its newest checkpoint)
#include <wte/checkpoint.h>
#include <wte/config.h>
#include <wte/error.h>
#include <wte/model.h>
#include <wte/tokenizer.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CHECKPOINT.h5|RUN_DIRECTORY\n", argv[0]);
    return 2;
  }
  try {
    wte::LoadedModel loaded = wte::load_model(argv[1]);
    const wte::CheckpointInfo& info = loaded.info;
    const wte::Config& config = loaded.config;
    wte::Model& model = *loaded.model;
    const wte::Tokenizer& tokenizer = loaded.tokenizer;

    const std::vector<int32_t> ids = tokenizer.encode("the king said");
    const size_t T = ids.size() < config.model.n_ctx ? ids.size() : config.model.n_ctx;
    const float* logits = model.forward_logits(ids.data(), 1, T);  // (1, T, V)
    const size_t V = config.model.vocab_size, C = config.model.d_model;
    bool finite = true;
    for (size_t i = 0; i < T * V; ++i) finite = finite && std::isfinite(logits[i]);

    std::printf("step %lld vocab_size %zu d_model %zu tokens %zu\n",
                static_cast<long long>(info.step), V, C, T);
    std::printf("wte[1][0] %.9g\n", model.params().wte[1 * C + 0]);
    std::printf("logits finite %s\n", finite ? "yes" : "no");
    return finite ? 0 : 1;
  } catch (const wte::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
