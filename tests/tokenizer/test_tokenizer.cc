// Tests of wte::Tokenizer (include/wte/tokenizer.h) and `wte tokenize`: GPT-2's own ids with GPT-2's files,
// the pre-tokenizer regex, byte-exact round trips of arbitrary bytes, hand-derived training merges,
// GPT-2's file format, and timings on the KJV (when datasets/ has been generated).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "wte/error.h"
#include "wte/tokenizer.h"
#include "src/tokenizer/quoted_excerpt.h"
#include "tests/test_util.h"

namespace wte {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::run;
using test::temp_dir;

const std::string kGpt2Dir = std::string(WTE_SOURCE_DIR) + "/datasets/gpt2";
const std::string kKjvPath = std::string(WTE_SOURCE_DIR) + "/datasets/kjv/kjv.txt";

bool have_gpt2() {
  return fs::exists(kGpt2Dir + "/encoder.json") && fs::exists(kGpt2Dir + "/vocab.bpe");
}

#define SKIP_WITHOUT_GPT2()                                                              \
  if (!have_gpt2())                                                                      \
  GTEST_SKIP() << "GPT-2's vocabulary is not in " << kGpt2Dir                            \
               << "; run datasets/fetch_gpt2_vocab.sh"

const Tokenizer& gpt2() {
  static const Tokenizer tok = Tokenizer::load(kGpt2Dir);
  return tok;
}

std::string show(const std::vector<std::string_view>& v) {
  std::string s;
  for (auto p : v) {
    s += '[';
    s.append(p);
    s += ']';
  }
  return s;
}

// Random byte strings built from nasty parts: invalid UTF-8, NULs, \r\n, long whitespace runs,
// emoji, CJK, contractions, digits.
std::vector<std::string> random_texts(size_t count, uint32_t seed) {
  const std::vector<std::string> parts = {
      "hello", " world", "Bank", " bank", "'s", "'ll", "'S", " 123", "4567", "\n", "\r\n",
      "\n\n", "\t", "   ", std::string(40, ' '), std::string(3, '\0'), "\xff", "\xc3", "\xe4\xb8",
      "\xed\xa0\x80", "\xc0\xaf", "\xf4\x90\x80\x80", "\x80\x80", "😀", "👍🏽", "中文字", "日本語",
      "é", "ü", " Ω", "!!", "...", " —", "\xe2\x80\xa8", "\xc2\xa0", "\x0b", "\x1f", "a", " "};
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    std::string s;
    const size_t n = rng() % 30;
    for (size_t k = 0; k < n; ++k) {
      if (rng() % 4 == 0) {
        s += static_cast<char>(rng() % 256);  // any byte at all
      } else {
        s += parts[rng() % parts.size()];
      }
    }
    out.push_back(s);
  }
  return out;
}

// ------------------------------------------------------------------------------------------------
// GPT-2's own vocabulary

TEST(Gpt2, KnownIds) {
  SKIP_WITHOUT_GPT2();
  const Tokenizer& tok = gpt2();
  EXPECT_EQ(tok.size(), 50257u);
  EXPECT_EQ(tok.num_merges(), 50000u);
  EXPECT_EQ(tok.encode(" cat"), (std::vector<int32_t>{3797}));
  EXPECT_EQ(tok.encode(" bank"), (std::vector<int32_t>{3331}));
  EXPECT_EQ(tok.encode("Bank"), (std::vector<int32_t>{28650}));
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(tok.encode(""), (std::vector<int32_t>{}));
  for (const char* s : {"The bank was muddy", "The bank was closed"}) {
    const auto ids = tok.encode(s);
    ASSERT_GE(ids.size(), 2u) << s;
    EXPECT_EQ(ids[1], 3331) << s;
    EXPECT_EQ(tok.piece(ids[1]), " bank");
  }
  // "<|endoftext|>" is id 50256, a piece that plain text never encodes to.
  EXPECT_EQ(tok.piece(50256), "<|endoftext|>");
  EXPECT_EQ(tok.id_of("<|endoftext|>"), 50256);
  const auto eot = tok.encode("<|endoftext|>");
  EXPECT_GT(eot.size(), 1u);
  for (int32_t id : eot) EXPECT_NE(id, 50256);
  // Byte tokens in bytes_to_unicode order: '!' = 0, 'A' = 32, ' ' = 220, '\n' = 198.
  EXPECT_EQ(tok.encode("!"), (std::vector<int32_t>{0}));
  EXPECT_EQ(tok.id_of("A"), 32);
  EXPECT_EQ(tok.id_of(" "), 220);
  EXPECT_EQ(tok.id_of("\n"), 198);
  EXPECT_EQ(tok.merge(0), std::make_pair(tok.id_of(" "), tok.id_of("t")));  // "Ġ t"
}

TEST(Gpt2, MoreKnownEncodings) {
  SKIP_WITHOUT_GPT2();
  const Tokenizer& tok = gpt2();
  // Contractions split off; a second space before a word stands alone (220).
  EXPECT_EQ(tok.encode("I'm here"), (std::vector<int32_t>{40, 1101, 994}));
  EXPECT_EQ(tok.encode("a  b"), (std::vector<int32_t>{64, 220, 275}));
  EXPECT_EQ(tok.encode("Hello, world!"), (std::vector<int32_t>{15496, 11, 995, 0}));
}

TEST(Gpt2, DecodeEncodeRoundTrip) {
  SKIP_WITHOUT_GPT2();
  const Tokenizer& tok = gpt2();
  for (const std::string& s : {std::string("The bank was muddy."), std::string("naïve café 中文 😀"),
                               std::string("line one\r\nline two\n\n\n  indented\tand tabs  ")}) {
    EXPECT_EQ(tok.decode(tok.encode(s)), s);
  }
  for (const std::string& s : random_texts(2000, 1)) {
    const auto ids = tok.encode(s);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < 50257);
    ASSERT_EQ(tok.decode(ids), s) << "ids: " << ids.size();
  }
}

TEST(Gpt2, SaveReproducesFilesByteForByte) {
  SKIP_WITHOUT_GPT2();
  const std::string dir = temp_dir("tokenizer_gpt2_copy");
  gpt2().save(dir);
  EXPECT_TRUE(test::slurp(dir + "/encoder.json") == test::slurp(kGpt2Dir + "/encoder.json"));
  EXPECT_TRUE(test::slurp(dir + "/vocab.bpe") == test::slurp(kGpt2Dir + "/vocab.bpe"));
}

// ------------------------------------------------------------------------------------------------
// Pre-tokenizer (GPT-2's regex; the expected splits follow from its alternatives in order, and
// from \s+(?!\S) giving up the last space before a word so that the word keeps it).

struct PretokCase {
  std::string text;
  std::vector<std::string> want;
};

TEST(Pretokenize, Gpt2RegexSemantics) {
  const std::vector<PretokCase> cases = {
      {"I'm here", {"I", "'m", " here"}},
      {"  two spaces", {" ", " two", " spaces"}},
      {"hello   ", {"hello", "   "}},
      {"a\n\nb", {"a", "\n", "\n", "b"}},
      {"a \n b", {"a", " \n", " b"}},
      {"don't we'll they've you'd", {"don", "'t", " we", "'ll", " they", "'ve", " you", "'d"}},
      {"IT'S", {"IT", "'", "S"}},  // the contractions are lower case only
      {"Hello, world!", {"Hello", ",", " world", "!"}},
      {"123abc 42", {"123", "abc", " 42"}},
      {"x...y?!", {"x", "...", "y", "?!"}},
      {" ", {" "}},
      {"", {}},
      {"naïve café", {"naïve", " café"}},
      {"中文 字", {"中文", " 字"}},
      {"hi 😀😀", {"hi", " 😀😀"}},
      {"tab\there", {"tab", "\t", "here"}},
      {"\r\n\r\nx", {"\r\n\r", "\n", "x"}},
      // Invalid UTF-8: each bad byte alone, the regex on the valid runs around it.
      {"x\xffy", {"x", "\xff", "y"}},
      {"ab\xc3 cd", {"ab", "\xc3", " cd"}},
      {"\xe4\xb8", {"\xe4", "\xb8"}},
      {std::string("a\0b", 3), {"a", std::string(1, '\0'), "b"}},
  };
  for (const PretokCase& c : cases) {
    const auto got = Tokenizer::pretokenize(c.text);
    std::vector<std::string_view> want(c.want.begin(), c.want.end());
    EXPECT_EQ(got, want) << "text: \"" << c.text << "\" got " << show(got) << " want "
                         << show(want);
  }
}

TEST(Pretokenize, ConcatenationIsTheInput) {
  for (const std::string& s : random_texts(2000, 2)) {
    std::string joined;
    for (auto p : Tokenizer::pretokenize(s)) {
      ASSERT_FALSE(p.empty());
      joined += p;
    }
    ASSERT_EQ(joined, s);
  }
}

// Texts of the characters whose classes the ASCII fast path decides on or hands to PCRE2: every
// ASCII byte, contractions, whitespace runs before letters, non-ASCII letters, digits and spaces.
std::vector<std::string> ascii_heavy_texts(size_t count, uint32_t seed) {
  const std::vector<std::string> parts = {
      "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'x", "'", " '", "  ", " ", "\n", "\n\n", "\r\n",
      "\t", "\x0b", "\x0c", "a", "Zq", " the", "09", " 7", "!", "?!", " ...", "é", " é", "\xc2\xa0",
      "\xe2\x80\x83", "\xc2\x85", "\xd9\xa3", "\xe2\x85\xa0", "中", "😀", "\xff"};
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    std::string s;
    const size_t n = rng() % 24;
    for (size_t k = 0; k < n; ++k)
      s += rng() % 5 == 0 ? std::string(1, static_cast<char>(rng() % 128)) : parts[rng() % parts.size()];
    out.push_back(s);
  }
  return out;
}

TEST(Pretokenize, AsciiFastPathSplitsAsPcre2) {
  for (const std::string& s : ascii_heavy_texts(20000, 3)) {
    const auto fast = Tokenizer::pretokenize(s);
    const auto slow = Tokenizer::pretokenize_pcre2_only(s);
    ASSERT_EQ(fast, slow) << "text: \"" << escape_piece(s) << "\"";
  }
  for (const std::string& s : random_texts(2000, 4))
    ASSERT_EQ(Tokenizer::pretokenize(s), Tokenizer::pretokenize_pcre2_only(s))
        << "text: \"" << escape_piece(s) << "\"";
}

// A text cut at safe_cut_before points and encoded piece by piece with one cache gives the ids
// of the whole text, with a trained vocabulary and with GPT-2's.
TEST(Encode, PiecesCutAtSafePointsGiveTheWholeTextsIds) {
  std::string corpus;
  for (const std::string& s : ascii_heavy_texts(3000, 5)) corpus += s;
  std::vector<const Tokenizer*> toks;
  const Tokenizer trained = Tokenizer::train(corpus, 600);
  toks.push_back(&trained);
  if (have_gpt2()) toks.push_back(&gpt2());
  for (const Tokenizer* tok : toks) {
    const std::vector<int32_t> whole = tok->encode(corpus);
    for (size_t piece : {7u, 64u, 1000u}) {
      EncodeCache cache;
      std::vector<int32_t> ids;
      size_t start = 0, cuts = 0;
      while (start < corpus.size()) {
        const std::string_view rest = std::string_view(corpus).substr(start);
        // The last safe point in the next `piece` bytes (or twice as many, ... when there is none).
        size_t cut = 0;
        for (size_t reach = piece; cut == 0 && reach < rest.size(); reach *= 2)
          cut = Tokenizer::safe_cut_before(rest, reach);
        if (cut == 0) cut = rest.size();
        tok->encode_append(rest.substr(0, cut), cache, ids);
        start += cut;
        ++cuts;
      }
      EXPECT_GT(cuts, corpus.size() / (16 * piece)) << "too few cuts to test anything";
      ASSERT_EQ(ids, whole) << "vocabulary of " << tok->size() << ", pieces of about " << piece;
    }
  }
}

TEST(Encode, SafeCutBeforeFindsTheLastAsciiWordEnd) {
  EXPECT_EQ(Tokenizer::safe_cut_before("ab cd", 4), 2u);
  EXPECT_EQ(Tokenizer::safe_cut_before("ab  cd", 3), 2u);   // after 'b', not between the spaces
  EXPECT_EQ(Tokenizer::safe_cut_before("ab\n\ncd", 6), 2u);
  EXPECT_EQ(Tokenizer::safe_cut_before("abcd", 3), 0u);
  EXPECT_EQ(Tokenizer::safe_cut_before("\xc3\xa9 x", 3), 0u);  // "é x": é is not ASCII
  EXPECT_EQ(Tokenizer::safe_cut_before("a\xc2\xa0" "b", 3), 0u);  // U+00A0 is not ASCII whitespace
  EXPECT_EQ(Tokenizer::safe_cut_before("", 0), 0u);
}

// A cache used with one vocabulary and then another gives the second one's ids.
TEST(Encode, CacheFollowsTheTokenizer) {
  const std::string text = "the cat sat on the mat, the cat sat on the hat";
  const Tokenizer a = Tokenizer::train(text, 280), b = Tokenizer::train(text + text, 300);
  EncodeCache cache;
  std::vector<int32_t> ids_a, ids_b;
  a.encode_append(text, cache, ids_a);
  b.encode_append(text, cache, ids_b);
  EXPECT_EQ(ids_a, a.encode(text));
  EXPECT_EQ(ids_b, b.encode(text));
}

// ------------------------------------------------------------------------------------------------
// Training

// "hello hello hello help": pre-tokens "hello" x1, " hello" x2, " help" x1. Byte ids (GPT-2
// order): ' '=220 e=68 h=71 l=75 o=78 p=79. Derived by hand:
//   counts (h,e)=4 (e,l)=4 (l,l)=3 (l,o)=3 (' ',h)=3 (l,p)=1
//   1. tie at 4: (e,l)=(68,75) < (h,e)=(71,68)         -> "el"     = 256
//   2. (h,el)=4                                        -> "hel"    = 257
//   3. tie at 3: (l,o)=(75,78) < (' ',hel)=(220,257) < (hel,l)=(257,75) -> "lo" = 258
//   4. tie at 3: (' ',hel)=(220,257) < (hel,lo)=(257,258) -> " hel" = 259
//   5. (" hel",lo)=2                                   -> " hello" = 260
//   6. tie at 1: (hel,lo)=(257,258) < (" hel",p)=(259,79) -> "hello" = 261
//   7. (" hel",p)=1                                    -> " help"  = 262
// and then no pair is left, so training stops at 263 tokens although 1000 were asked.
TEST(Train, HandDerivedMerges) {
  const Tokenizer tok = Tokenizer::train("hello hello hello help", 1000);
  ASSERT_EQ(tok.size(), 263u);
  ASSERT_EQ(tok.num_merges(), 7u);
  EXPECT_EQ(tok.id_of(" "), 220);
  EXPECT_EQ(tok.id_of("e"), 68);
  EXPECT_EQ(tok.id_of("l"), 75);
  const std::vector<std::pair<int32_t, int32_t>> want_merges = {
      {68, 75}, {71, 256}, {75, 78}, {220, 257}, {259, 258}, {257, 258}, {259, 79}};
  const std::vector<std::string> want_pieces = {"el",     "hel",   "lo",   " hel",
                                                " hello", "hello", " help"};
  for (size_t r = 0; r < 7; ++r) {
    EXPECT_EQ(tok.merge(r), want_merges[r]) << "merge " << r;
    EXPECT_EQ(tok.piece(static_cast<int32_t>(256 + r)), want_pieces[r]) << "id " << 256 + r;
  }
  EXPECT_EQ(tok.encode("hello hello help"), (std::vector<int32_t>{261, 260, 262}));
  EXPECT_EQ(tok.encode(" hell"), (std::vector<int32_t>{259, 75}));
  EXPECT_THROW(tok.merge(7), Error);
}

TEST(Train, TieBrokenBySmallestIds) {
  // "ab cd": pairs (a,b)=(64,65), (' ',c)=(220,66), (c,d)=(66,67), all count 1.
  const Tokenizer tok = Tokenizer::train("ab cd", 300);
  ASSERT_EQ(tok.num_merges(), 3u);
  EXPECT_EQ(tok.piece(256), "ab");
  EXPECT_EQ(tok.piece(257), "cd");
  EXPECT_EQ(tok.piece(258), " cd");
}

TEST(Train, RepeatedSymbolsMergeLeftToRight) {
  // "aaaaa": (a,a) has count 4 (overlapping occurrences are all counted); merging left to right
  // gives aa aa a, then the tie (aa,a)=(256,64) < (aa,aa)=(256,256) -> "aaa" = 257, leaving
  // aa aaa -> "aaaaa" = 258.
  const Tokenizer tok = Tokenizer::train("aaaaa", 1000);
  const int32_t a = tok.id_of("a");
  ASSERT_EQ(a, 64);
  ASSERT_EQ(tok.num_merges(), 3u);
  EXPECT_EQ(tok.piece(256), "aa");
  EXPECT_EQ(tok.piece(257), "aaa");
  EXPECT_EQ(tok.piece(258), "aaaaa");
  EXPECT_EQ(tok.encode("aaa"), (std::vector<int32_t>{257}));
  EXPECT_EQ(tok.encode("aaaa"), (std::vector<int32_t>{256, 256}));
  // 7 a: aa aa aa a -> (aa,a) -> aa aa aaa -> (aa,aaa) -> aa aaaaa
  EXPECT_EQ(tok.encode("aaaaaaa"), (std::vector<int32_t>{256, 258}));
}

std::string corpus() {
  // A few hundred KB of varied text: the KJV if generated, else synthetic.
  if (fs::exists(kKjvPath)) return test::slurp(kKjvPath).substr(0, 300000);
  std::string s;
  for (const std::string& t : random_texts(3000, 3)) s += t + " the bank of the river\n";
  return s;
}

TEST(Train, ExactSizeDeterministicAndSaveLoadRoundTrip) {
  const std::string text = corpus();
  const Tokenizer a = Tokenizer::train(text, 700);
  const Tokenizer b = Tokenizer::train(text, 700);
  EXPECT_EQ(a.size(), 700u);
  EXPECT_TRUE(a.encoder_json() == b.encoder_json());
  EXPECT_TRUE(a.vocab_bpe() == b.vocab_bpe());
  // Ids come in merge order: id 256 + r is merge r's result.
  for (size_t r = 0; r < a.num_merges(); ++r) {
    const auto [l, rr] = a.merge(r);
    ASSERT_EQ(a.piece(static_cast<int32_t>(256 + r)), a.piece(l) + a.piece(rr)) << "merge " << r;
  }

  const std::string dir = temp_dir("tokenizer_trained");
  a.save(dir);
  const Tokenizer c = Tokenizer::load(dir);
  EXPECT_EQ(c.size(), a.size());
  EXPECT_EQ(c.num_merges(), a.num_merges());
  EXPECT_TRUE(c.encoder_json() == a.encoder_json());
  EXPECT_TRUE(c.vocab_bpe() == a.vocab_bpe());
  const std::string dir2 = temp_dir("tokenizer_trained2");
  c.save(dir2);
  EXPECT_TRUE(test::slurp(dir + "/encoder.json") == test::slurp(dir2 + "/encoder.json"));
  EXPECT_TRUE(test::slurp(dir + "/vocab.bpe") == test::slurp(dir2 + "/vocab.bpe"));
  EXPECT_EQ(c.encode(text), a.encode(text));
  EXPECT_EQ(a.decode(a.encode(text)), text);

  // Round trip of arbitrary bytes with the small trained vocabulary.
  for (const std::string& s : random_texts(2000, 4)) ASSERT_EQ(c.decode(c.encode(s)), s);
  // Encoding compresses the text it was trained on.
  EXPECT_LT(a.encode(text).size(), text.size() / 2);
}

// The definition, written the slow way: recount every pair over the whole word table before each
// merge. Returns the merges as (left bytes, right bytes).
std::vector<std::pair<std::string, std::string>> naive_train(const std::string& text,
                                                             size_t merges) {
  const Tokenizer bytes;
  std::map<std::string, int64_t> count;
  for (auto p : Tokenizer::pretokenize(text)) ++count[std::string(p)];
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> n;
  for (const auto& [w, c] : count) {
    words.emplace_back();
    for (char ch : w) words.back().push_back(bytes.id_of(std::string(1, ch)));
    n.push_back(c);
  }
  std::vector<std::string> piece;
  for (int32_t i = 0; i < 256; ++i) piece.push_back(bytes.piece(i));
  std::vector<std::pair<std::string, std::string>> out;
  while (out.size() < merges) {
    std::map<std::pair<int32_t, int32_t>, int64_t> pairs;  // ordered: ties -> smallest first
    for (size_t w = 0; w < words.size(); ++w)
      for (size_t i = 0; i + 1 < words[w].size(); ++i) pairs[{words[w][i], words[w][i + 1]}] += n[w];
    if (pairs.empty()) break;
    auto best = pairs.begin();
    for (auto it = pairs.begin(); it != pairs.end(); ++it)
      if (it->second > best->second) best = it;
    const auto [a, b] = best->first;
    out.emplace_back(piece[a], piece[b]);
    const int32_t c = static_cast<int32_t>(piece.size());
    piece.push_back(piece[a] + piece[b]);
    for (auto& word : words) {
      std::vector<int32_t> merged;
      for (size_t i = 0; i < word.size();) {
        if (i + 1 < word.size() && word[i] == a && word[i + 1] == b) {
          merged.push_back(c);
          i += 2;
        } else {
          merged.push_back(word[i++]);
        }
      }
      word = merged;
    }
  }
  return out;
}

TEST(Train, MatchesNaiveDefinition) {
  std::string text = corpus().substr(0, 20000);
  for (const std::string& t : random_texts(100, 5)) text += t;  // plus odd bytes and ties
  const size_t merges = 300;
  const auto want = naive_train(text, merges);
  const Tokenizer tok = Tokenizer::train(text, 256 + merges);
  ASSERT_EQ(tok.num_merges(), want.size());
  for (size_t r = 0; r < want.size(); ++r) {
    const auto [l, rr] = tok.merge(r);
    ASSERT_EQ(tok.piece(l), want[r].first) << "merge " << r;
    ASSERT_EQ(tok.piece(rr), want[r].second) << "merge " << r;
  }
}

TEST(Train, ByteIdsAgreeWithGpt2) {
  SKIP_WITHOUT_GPT2();
  const Tokenizer empty;
  for (int32_t id = 0; id < 256; ++id) EXPECT_EQ(empty.piece(id), gpt2().piece(id)) << id;
}

TEST(Train, RejectsTooSmallVocab) {
  EXPECT_THROW(Tokenizer::train("abc", 255), Error);
  const Tokenizer t = Tokenizer::train("abc", 256);
  EXPECT_EQ(t.size(), 256u);
  EXPECT_EQ(t.num_merges(), 0u);
}

// ------------------------------------------------------------------------------------------------
// File format errors name the file and what is wrong

TEST(Format, Errors) {
  const std::string missing = (temp_dir("tokenizer_missing") / "nope").string();
  EXPECT_NE(error_of([&] { Tokenizer::load(missing); }).find(missing), std::string::npos);

  const Tokenizer base = Tokenizer::train("hello hello", 300);
  const std::string enc = base.encoder_json(), bpe = base.vocab_bpe();
  EXPECT_NO_THROW(Tokenizer::from_strings(enc, bpe, "ok"));

  std::string msg = error_of([&] { Tokenizer::from_strings("{\"a\": 0,", bpe, "dirX"); });
  EXPECT_NE(msg.find("dirX/encoder.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("JSON"), std::string::npos) << msg;

  msg = error_of([&] { Tokenizer::from_strings(enc, bpe + "zz q\n", "dirY"); });
  EXPECT_NE(msg.find("dirY/vocab.bpe line "), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a token"), std::string::npos) << msg;

  msg = error_of([&] { Tokenizer::from_strings(enc, bpe + "abc\n", "d"); });
  EXPECT_NE(msg.find("line " + std::to_string(base.num_merges() + 2)), std::string::npos) << msg;

  msg = error_of([&] { Tokenizer::from_strings(enc, "h e\n", "d"); });
  EXPECT_NE(msg.find("line 1"), std::string::npos) << msg;

  msg = error_of([&] { Tokenizer::from_strings("{\"a\": 0}", "#version: 0.2\n", "d"); });
  EXPECT_NE(msg.find("single-byte token"), std::string::npos) << msg;

  EXPECT_THROW(base.piece(-1), Error);
  EXPECT_THROW(base.piece(static_cast<int32_t>(base.size())), Error);
  EXPECT_THROW(base.decode({0, 1, 100000}), Error);
}

// A hostile file's text echoed in an error is escaped (a terminal escape code shows as \x1b, a
// NUL as \x00) and cut: a first line of 10000 bytes is shown by its first 80.
TEST(Format, ErrorsEscapeAndCutTheFilesText) {
  const Tokenizer base = Tokenizer::train("hello hello", 300);
  const std::string enc = base.encoder_json(), bpe = base.vocab_bpe();
  const std::string hostile = std::string("\x1b]0;owned\x07\x1b[2J\x1b[31mred") + '\0' +
                              std::string(10000, 'A');
  for (const std::string& vocab_bpe : {hostile + "\n", bpe + hostile + "\n"}) {
    const std::string msg = error_of([&] { Tokenizer::from_strings(enc, vocab_bpe, "d"); });
    EXPECT_EQ(msg.find('\x1b'), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\x07'), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\0'), std::string::npos) << msg;
    EXPECT_NE(msg.find("\\x1b]0;owned\\x07\\x1b[2J\\x1b[31mred\\x00AAA"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(its first 80 of 10023 bytes)"), std::string::npos) << msg;
    EXPECT_LT(msg.size(), 400u) << msg;
  }
  // encoder.json's keys too.
  const std::string msg =
      error_of([&] { Tokenizer::from_strings("{\"\\u001b[31mx\": \"y\"}", bpe, "d"); });
  EXPECT_EQ(msg.find('\x1b'), std::string::npos) << msg;
  EXPECT_NE(msg.find("\\x1b[31mx"), std::string::npos) << msg;
  EXPECT_EQ(quoted_excerpt("ab\x1b", 2), "\"ab\" (its first 2 of 3 bytes)");
  EXPECT_EQ(quoted_excerpt("a\tb"), "\"a\\tb\"");
}

TEST(Format, EscapePiece) {
  EXPECT_EQ(escape_piece(" bank"), " bank");
  EXPECT_EQ(escape_piece("a\n\r\t\"\\b"), "a\\n\\r\\t\\\"\\\\b");
  EXPECT_EQ(escape_piece(std::string("\x00\x01\x1f\x7f", 4)), "\\x00\\x01\\x1f\\x7f");
  // Complete UTF-8 characters (2, 3 and 4 bytes) stay; anything else is \xHH byte by byte:
  // a lone lead byte, a truncated character, an overlong form, a surrogate, a byte above 0xF4.
  const std::string chars = "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";  // "é €" and an emoji
  EXPECT_EQ(escape_piece(chars), chars);
  EXPECT_EQ(escape_piece("\xc3"), "\\xc3");
  EXPECT_EQ(escape_piece("\xe2\x82"), "\\xe2\\x82");
  EXPECT_EQ(escape_piece("\xe0\x80\x80"), "\\xe0\\x80\\x80");
  EXPECT_EQ(escape_piece("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(escape_piece("\xf5\x80\x80\x80"), "\\xf5\\x80\\x80\\x80");
  EXPECT_EQ(escape_piece(""), "");
}

TEST(Format, UnicodeForm) {
  EXPECT_EQ(Tokenizer::to_unicode_form(" bank"), "\u0120bank");
  EXPECT_EQ(Tokenizer::from_unicode_form("\u0120bank"), " bank");
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(Tokenizer::from_unicode_form(Tokenizer::to_unicode_form(all)), all);
  EXPECT_THROW(Tokenizer::from_unicode_form("\u4e2d"), Error);
}

// ------------------------------------------------------------------------------------------------
// `wte tokenize`

TEST(Cli, PrintsIds) {
  SKIP_WITHOUT_GPT2();
  std::string out, json;
  const int rc =
      run(std::string(WTE_CLI) + " tokenize --vocab " + kGpt2Dir + " ' bank' 'The bank was muddy'",
          &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("3331  \" bank\""), std::string::npos) << out;
  EXPECT_NE(out.find("464  \"The\""), std::string::npos) << out;
  const int rc2 = run(std::string(WTE_CLI) + " tokenize --json --vocab " + kGpt2Dir +
                          " 'Hello world'", &json);
  EXPECT_EQ(rc2, 0) << json;
  EXPECT_NE(json.find("\"ids\":[15496,995]"), std::string::npos) << json;
}

TEST(Cli, MissingVocabDir) {
  const std::string missing = (temp_dir("tokenizer_cli") / "no_such_vocab").string();
  std::string out, out2;
  const int rc = run(std::string(WTE_CLI) + " tokenize --vocab " + missing + " hi", &out);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find(missing), std::string::npos) << out;
  EXPECT_NE(out.find("fetch_gpt2_vocab.sh"), std::string::npos) << out;
  const int rc2 = run(std::string(WTE_CLI) + " tokenize --no-such-option", &out2);
  EXPECT_EQ(rc2, 2) << out2;
}

// ------------------------------------------------------------------------------------------------
// Timings on the whole KJV (needs datasets/make_kjv.sh): training to 4096 and encoding.

TEST(Kjv, TrainAndEncodeTimes) {
  if (!fs::exists(kKjvPath)) GTEST_SKIP() << kKjvPath << " is absent; run datasets/make_kjv.sh";
  const std::string text = test::slurp(kKjvPath);
  using clock = std::chrono::steady_clock;
  auto secs = [](clock::time_point t0) {
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  auto t0 = clock::now();
  const Tokenizer tok = Tokenizer::train(text, 4096);
  const double train_s = secs(t0);
  EXPECT_EQ(tok.size(), 4096u);
  t0 = clock::now();
  const auto ids = tok.encode(text);
  const double enc_s = secs(t0);
  EXPECT_EQ(tok.decode(ids), text);
  std::printf("KJV (%zu bytes): train to 4096 in %.2f s; encode with it in %.2f s -> %zu tokens\n",
              text.size(), train_s, enc_s, ids.size());
  EXPECT_LT(train_s, 30.0);
  EXPECT_LT(enc_s, 10.0);
  if (have_gpt2()) {
    gpt2();  // loaded outside the timing
    t0 = clock::now();
    const auto g = gpt2().encode(text);
    const double g_s = secs(t0);
    std::printf("KJV: encode with GPT-2's vocabulary in %.2f s -> %zu tokens\n", g_s, g.size());
    EXPECT_EQ(gpt2().decode(g), text);
    EXPECT_LT(g_s, 10.0);
  }
}

}  // namespace
}  // namespace wte
