// libFuzzer target: the token-file readers of data.train_tokens: the memory-mapped TokenStream
// (llm.c shards, uint16 and uint32, or raw int32) with check_token_ids, fnv1a64 and a BatchLoader
// reading windows, as `wte train` uses it; the whole-file int32 reader (read_token_file); and the
// text batch reader of `wte grad` (read_token_batch). The first input byte picks the reader and a
// vocab_size; the rest is the file.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "wte/data.h"
#include "wte/error.h"
#include "src/analysis/gradcheck.h"

namespace {

std::string scratch_path() {
  static const std::string path = "/dev/shm/wte_fuzz_tokens_" + std::to_string(::getpid());
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string path = scratch_path();
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return 0;
    std::fwrite(data + 1, 1, size - 1, f);
    std::fclose(f);
  }
  const size_t vocab = (mode & 0x80) ? 50257 : 256 + (mode & 0x3f);
  try {
    if (mode & 1) {
      const wte::TokenBatch batch = wte::read_token_batch(path, vocab, 64);
      if (batch.inputs.size() != batch.B * batch.T || batch.targets.size() != batch.B * batch.T)
        __builtin_trap();
      wte::check_token_ids(batch.inputs.data(), batch.inputs.size(), vocab, "fuzz batch");
    } else if (mode & 2) {
      const wte::TokenStream stream = wte::TokenStream::open(path, "fuzz shard");
      wte::check_token_ids(stream, vocab, "fuzz shard");
      (void)wte::fnv1a64(stream);
      if (stream.size() >= 5) {
        wte::BatchLoader loader(stream, 4, true, 1);
        std::vector<int32_t> in(8), tg(8);
        loader.next_batch(in.data(), tg.data(), 2);
        for (int32_t id : in)
          if (id < 0 || static_cast<size_t>(id) >= vocab) __builtin_trap();
      }
    } else {
      const std::vector<int32_t> ids = wte::read_token_file(path);
      wte::check_token_ids(ids.data(), ids.size(), vocab, "fuzz token file");
    }
  } catch (const wte::Error&) {
  }
  std::remove(path.c_str());
  return 0;
}
