// Tests of the token streams and shards (include/wte/data.h): llm.c's shard format written and
// read, directories and globs of shards as one stream, hostile shards named with their file and
// value, the batch loader over a memory-mapped stream (same batches as in memory; the computed
// order of large streams, a permutation that resumes), and prepare_shards: the ids of
// Tokenizer::encode over each split's whole text, whatever the thread count.
#include <gtest/gtest.h>
#include <zlib.h>

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "wte/data.h"
#include "wte/error.h"
#include "wte/tokenizer.h"

namespace wte {
namespace {

namespace fs = std::filesystem;
using test::error_of;

const std::string kGpt2Dir = std::string(WTE_SOURCE_DIR) + "/datasets/gpt2";
const std::string kKjvPath = std::string(WTE_SOURCE_DIR) + "/datasets/kjv/kjv.txt";

// A shard as llm.c's write_datafile writes it, with header fields as given.
std::string shard_bytes(int32_t magic, int32_t version, int32_t count,
                        const std::vector<uint32_t>& ids, size_t width) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = count;
  std::string s(reinterpret_cast<const char*>(header.data()), 1024);
  for (uint32_t id : ids) s.append(reinterpret_cast<const char*>(&id), width);
  return s;
}

std::vector<int32_t> all_ids(const TokenStream& s) {
  std::vector<int32_t> out(s.size());
  s.read(0, s.size(), out.data());
  return out;
}

TEST(Shards, WriterWritesLlmcFormatAndStreamReadsIt) {
  const fs::path dir = test::temp_dir("shards_writer");
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 5000; ++i) ids.push_back((i * 7919) % 65536);
  {
    ShardWriter w((dir / "a.bin").string(), kShardU16);
    w.append(ids.data(), ids.size());
    w.finish();
  }
  const std::string bytes = test::slurp(dir / "a.bin");
  ASSERT_EQ(bytes.size(), 1024 + 2 * ids.size());
  int32_t header[3];
  std::memcpy(header, bytes.data(), sizeof header);
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], 5000);
  EXPECT_EQ(bytes.substr(12, 1012), std::string(1012, '\0')) << "header words 3..255 must be zero";
  EXPECT_EQ(all_ids(TokenStream::open((dir / "a.bin").string(), "test")), ids);
  // uint32 (llm.c's llama-3 format) for ids past 65535.
  std::vector<int32_t> big = {0, 65536, 100000, 2000000000};
  {
    ShardWriter w((dir / "b.bin").string(), kShardU32);
    w.append(big.data(), big.size());
    w.finish();
  }
  std::memcpy(header, test::slurp(dir / "b.bin").data(), sizeof header);
  EXPECT_EQ(header[0], 20240801);
  EXPECT_EQ(header[1], 7);
  EXPECT_EQ(all_ids(TokenStream::open((dir / "b.bin").string(), "test")), big);
  // An id that does not fit uint16 is refused, and an unfinished shard leaves no file.
  {
    ShardWriter w((dir / "c.bin").string(), kShardU16);
    const int32_t bad = 65536;
    EXPECT_NE(error_of([&] { w.append(&bad, 1); }).find("65536"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(dir / "c.bin"));
  EXPECT_FALSE(fs::exists(dir / "c.bin.tmp"));
}

TEST(Shards, DirectoryAndGlobAreOneStreamInNameOrder) {
  const fs::path dir = test::temp_dir("shards_glob");
  std::vector<int32_t> expect;
  // Written out of order; mixed formats: uint16 shards, a uint32 shard, an int32 token file.
  const std::vector<std::string> names = {"d_02.bin", "d_00.bin", "d_01.bin", "d_03.bin"};
  std::vector<std::vector<int32_t>> parts(4);
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 1000 + 37 * k; ++i) parts[k].push_back((k * 1000 + i) % 50257);
  test::write(dir / "d_00.bin", [&] {
    std::vector<uint32_t> v(parts[0].begin(), parts[0].end());
    return shard_bytes(20240520, 1, static_cast<int32_t>(v.size()), v, 2);
  }());
  test::write(dir / "d_01.bin", [&] {
    std::vector<uint32_t> v(parts[1].begin(), parts[1].end());
    return shard_bytes(20240801, 7, static_cast<int32_t>(v.size()), v, 4);
  }());
  test::write(dir / "d_02.bin", std::string(reinterpret_cast<const char*>(parts[2].data()),
                                            4 * parts[2].size()));
  test::write(dir / "d_03.bin", [&] {
    std::vector<uint32_t> v(parts[3].begin(), parts[3].end());
    return shard_bytes(20240520, 1, static_cast<int32_t>(v.size()), v, 2);
  }());
  test::write(dir / "notes.txt", "not a shard");
  for (const auto& p : parts) expect.insert(expect.end(), p.begin(), p.end());
  for (const std::string& spec : {(dir).string(), (dir / "d_*.bin").string()}) {
    const TokenStream s = TokenStream::open(spec, "test");
    ASSERT_EQ(s.files().size(), 4u) << spec;
    EXPECT_EQ(all_ids(s), expect) << spec;
    // Reads across file boundaries.
    std::vector<int32_t> window(300);
    s.read(900, 300, window.data());
    EXPECT_EQ(window, std::vector<int32_t>(expect.begin() + 900, expect.begin() + 1200));
    EXPECT_EQ(fnv1a64(s), fnv1a64(expect));
    EXPECT_NO_THROW(check_token_ids(s, 50257, "test"));
  }
  EXPECT_NE(error_of([&] { TokenStream::open((dir / "x_*.bin").string(), "data.train_tokens"); })
                .find("no file matches"),
            std::string::npos);
}

// Every hostile shard is refused at open or by the id check, naming the file and the value.
TEST(Shards, HostileShardsNameTheFileAndValue) {
  const fs::path dir = test::temp_dir("shards_hostile");
  const std::vector<uint32_t> ids = {1, 2, 3, 4};
  struct Case {
    std::string name, bytes, expect;
  };
  const std::vector<Case> cases = {
      {"version.bin", shard_bytes(20240520, 2, 4, ids, 2), "header version 2"},
      {"negative.bin", shard_bytes(20240520, 1, -5, ids, 2), "-5 is negative"},
      {"truncated.bin", shard_bytes(20240520, 1, 9, ids, 2), "truncated"},
      {"padded.bin", shard_bytes(20240520, 1, 2, ids, 2), "extra bytes"},
      {"short.bin", shard_bytes(20240520, 1, 0, {}, 2).substr(0, 500), "less than its 1024-byte"},
      {"odd.bin", shard_bytes(20240520, 1, 4, ids, 2).substr(0, 1024) + "abc", "truncated"},
      {"u32version.bin", shard_bytes(20240801, 1, 4, ids, 4), "header version 1"},
  };
  for (const Case& c : cases) {
    test::write(dir / c.name, c.bytes);
    const std::string e = error_of([&] { TokenStream::open((dir / c.name).string(), "data.train_tokens"); });
    EXPECT_NE(e.find(c.name), std::string::npos) << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.name << ": " << e;
  }
  // Ids at or past vocab_size: named with the shard and the position in it.
  test::write(dir / "ok.bin", shard_bytes(20240520, 1, 4, ids, 2));
  test::write(dir / "big16.bin", shard_bytes(20240520, 1, 4, {1, 2, 65535, 4}, 2));
  test::write(dir / "big32.bin", shard_bytes(20240801, 7, 3, {1, 4000000000u, 3}, 4));
  std::string e = error_of([&] {
    check_token_ids(TokenStream::open((dir / "big16.bin").string(), "w"), 50257, "data.train_tokens");
  });
  EXPECT_NE(e.find("token id 65535 at position 2 of shard '"), std::string::npos) << e;
  EXPECT_NE(e.find("big16.bin"), std::string::npos) << e;
  e = error_of([&] {
    check_token_ids(TokenStream::open((dir / "big32.bin").string(), "w"), 50257, "data.train_tokens");
  });
  EXPECT_NE(e.find("token id 4000000000 at position 1 of shard '"), std::string::npos) << e;
  // A file with a wrong magic reads as int32 ids; its first "id" is the magic, and the error says so.
  test::write(dir / "magic.bin", shard_bytes(20240521, 1, 4, ids, 2));
  e = error_of([&] {
    check_token_ids(TokenStream::open((dir / "magic.bin").string(), "w"), 50257, "data.train_tokens");
  });
  EXPECT_NE(e.find("token id 20240521 at position 0 of token file '"), std::string::npos) << e;
  EXPECT_NE(e.find("not the magic 20240520"), std::string::npos) << e;
}

// A loader over a mapped stream serves the batches of a loader over the same ids in memory.
TEST(Shards, LoaderOverMappedStreamServesTheSameBatches) {
  const fs::path dir = test::temp_dir("shards_loader");
  std::vector<int32_t> ids(20000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 31) % 1000);
  for (int k = 0; k < 3; ++k) {
    ShardWriter w((dir / ("s_" + std::to_string(k) + ".bin")).string(), kShardU16);
    const size_t a = k * ids.size() / 3, b = (k + 1) * ids.size() / 3;
    w.append(ids.data() + a, b - a);
    w.finish();
  }
  const TokenStream mapped = TokenStream::open((dir / "s_*.bin").string(), "test");
  BatchLoader mem(&ids, 16, true, 7), map(mapped, 16, true, 7);
  std::vector<int32_t> in1(8 * 16), tg1(8 * 16), in2(8 * 16), tg2(8 * 16);
  for (int step = 0; step < 400; ++step) {  // several epochs, windows across shard boundaries
    mem.next_batch(in1.data(), tg1.data(), 8);
    map.next_batch(in2.data(), tg2.data(), 8);
    ASSERT_EQ(in1, in2) << "step " << step;
    ASSERT_EQ(tg1, tg2) << "step " << step;
  }
}

// Above kMaxStoredOrderSamples samples the order is computed: each epoch a permutation, different
// epochs different, the state small, and a restored loader continues identically.
TEST(Shards, ComputedOrderIsAPermutationAndResumes) {
  const size_t n = kMaxStoredOrderSamples + 1234;
  std::vector<int32_t> ids(n + 1);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i % 1000);
  BatchLoader loader(&ids, 1, true, 99);
  ASSERT_EQ(loader.num_samples(), n);
  std::vector<uint32_t> first, second;
  loader.next_samples(n, &first);
  std::vector<bool> seen(n, false);
  for (uint32_t k : first) {
    ASSERT_LT(k, n);
    ASSERT_FALSE(seen[k]) << "sample " << k << " twice in one epoch";
    seen[k] = true;
  }
  size_t in_place = 0;
  for (size_t i = 0; i < n; ++i) in_place += first[i] == i;
  EXPECT_LT(in_place, 100u) << "an order that leaves many samples in place is no shuffle";
  loader.next_samples(1000, &second);
  const LoaderState s = loader.state();
  EXPECT_EQ(s.order.size(), 8u);
  EXPECT_NE(std::vector<uint32_t>(first.begin(), first.begin() + 1000), second);
  std::vector<uint32_t> a, b;
  loader.next_samples(5000, &a);
  BatchLoader resumed(&ids, 1, true, 12345);
  resumed.restore(s, "test");
  resumed.next_samples(5000, &b);
  EXPECT_EQ(a, b);
}

// Resident memory (RSS, /proc/self/statm's second field) in bytes.
size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

// A pass over a 96 MiB mapped shard (id check, hash) and thousands of windows leave the resident
// memory nearly as it was: pages are given back after each piece and each window.
TEST(Shards, PassesAndWindowsDoNotKeepTheStreamResident) {
  const fs::path dir = test::temp_dir("shards_rss");
  const size_t n = size_t(48) << 20;  // 48 Mi uint16 ids
  {
    ShardWriter w((dir / "big.bin").string(), kShardU16);
    std::vector<int32_t> block(1 << 20);
    for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<int32_t>(i % 50000);
    for (size_t k = 0; k < n / block.size(); ++k) w.append(block.data(), block.size());
    w.finish();
  }
  const TokenStream s = TokenStream::open((dir / "big.bin").string(), "test");
  ASSERT_EQ(s.size(), n);
  const size_t before = resident_bytes();
  check_token_ids(s, 50257, "test");
  EXPECT_NE(fnv1a64(s), 0u);
  BatchLoader loader(s, 128, true, 3);
  std::vector<int32_t> in(16 * 128), tg(16 * 128);
  for (int step = 0; step < 2000; ++step) loader.next_batch(in.data(), tg.data(), 16);
  const size_t grown = resident_bytes() - std::min(before, resident_bytes());
  // Bound: the 4 MiB read buffer and one 2 MiB piece, with room for the allocator; the stream
  // itself is 96 MiB.
  EXPECT_LT(grown, size_t(16) << 20) << "resident memory grew by " << (grown >> 20) << " MiB";
}

// --- prepare_shards -----------------------------------------------------------------------------

std::vector<int32_t> read_split(const fs::path& dir, const std::string& split) {
  return all_ids(TokenStream::open((dir / (split + "_*.bin")).string(), split));
}

void gzip_file(const fs::path& path, const std::string& text) {
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  gzclose(gz);
}

// Files, a directory with a .gz and CRLF text, many threads and tiny chunks: the ids of encode()
// over the split text that data.text would give for the files' documents in order.
TEST(Prepare, SameIdsAsEncodingEachSplitWhole) {
  const fs::path dir = test::temp_dir("prepare_ids");
  std::string a, b, c;
  for (int i = 0; i < 300; ++i) {
    a += "Chapter " + std::to_string(i) + " of a, with  two spaces and 'quotes'.\nline two\n\n";
    if (i % 3 == 0) a += "\n\n";  // extra blank lines
    b += "Dok " + std::to_string(i) + " caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87\r\n\r\nnext\r\n\r\n";
    c += "  indented " + std::to_string(i) + "  \ntrailing   \n\n";
  }
  test::write(dir / "a.txt", a);
  fs::create_directories(dir / "more");
  gzip_file(dir / "more" / "b.txt.gz", b);
  test::write(dir / "more" / "c.txt", c);
  const Tokenizer tok = Tokenizer::train(a + b + c, 500);
  // The documents in input order: a, then the directory's files by name (b.txt.gz, c.txt).
  const TextSplit split = split_documents(a + "\n\n" + b + "\n\n" + c, 0.1);
  for (size_t threads : {1u, 2u, 3u}) {
    PrepareOptions p;
    p.inputs = {(dir / "a.txt").string(), (dir / "more").string()};
    p.out_dir = (dir / ("out" + std::to_string(threads))).string();
    p.threads = threads;
    p.chunk_bytes = 700;     // many pieces
    p.shard_tokens = 3000;   // many shards
    const PrepareSummary s = prepare_shards(tok, p);
    EXPECT_EQ(s.files, 3u);
    EXPECT_EQ(s.train_documents, split.train_documents);
    EXPECT_EQ(s.val_documents, split.val_documents);
    EXPECT_GT(s.train_shards.size(), 3u);
    EXPECT_EQ(read_split(p.out_dir, "train"), tok.encode(split.train)) << threads << " threads";
    EXPECT_EQ(read_split(p.out_dir, "val"), tok.encode(split.val)) << threads << " threads";
  }
  // The output directory must not already hold shards.
  PrepareOptions again;
  again.inputs = {(dir / "a.txt").string()};
  again.out_dir = (dir / "out1").string();
  EXPECT_NE(error_of([&] { prepare_shards(tok, again); }).find("already holds"), std::string::npos);
  // A corrupt .gz names the file, and leaves no shard behind.
  std::string gz = test::slurp(dir / "more" / "b.txt.gz");
  gz.resize(gz.size() / 2);
  fs::create_directories(dir / "bad");
  test::write(dir / "bad" / "b.txt.gz", gz);
  PrepareOptions bad;
  bad.inputs = {(dir / "a.txt").string(), (dir / "bad").string()};
  bad.out_dir = (dir / "out_bad").string();
  bad.shard_tokens = 100;
  const std::string e = error_of([&] { prepare_shards(tok, bad); });
  EXPECT_NE(e.find("b.txt.gz"), std::string::npos) << e;
  EXPECT_TRUE(fs::is_empty(bad.out_dir)) << "shards of a failed run are removed";
}

// GPT-2's vocabulary on the KJV: 1 and 2 threads give the ids of encode() over each whole split.
TEST(Prepare, KjvWithGpt2VocabularyOneAndTwoThreads) {
  if (!fs::exists(kKjvPath) || !fs::exists(kGpt2Dir + "/encoder.json"))
    GTEST_SKIP() << "needs datasets/kjv (datasets/make_kjv.sh) and datasets/gpt2 "
                    "(datasets/fetch_gpt2_vocab.sh)";
  const fs::path dir = test::temp_dir("prepare_kjv");
  const Tokenizer tok = Tokenizer::load(kGpt2Dir);
  const TextSplit split = split_documents(test::slurp(kKjvPath), 0.1);
  const std::vector<int32_t> train = tok.encode(split.train), val = tok.encode(split.val);
  for (size_t threads : {1u, 2u}) {
    PrepareOptions p;
    p.inputs = {kKjvPath};
    p.out_dir = (dir / ("t" + std::to_string(threads))).string();
    p.threads = threads;
    p.chunk_bytes = 1 << 16;
    prepare_shards(tok, p);
    EXPECT_EQ(read_split(p.out_dir, "train"), train) << threads << " threads";
    EXPECT_EQ(read_split(p.out_dir, "val"), val) << threads << " threads";
  }
}

}  // namespace
}  // namespace wte
