#include "wte/data.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "src/io/bounded_read.h"
#include "src/io/file_checks.h"
#include "wte/error.h"

namespace fs = std::filesystem;

namespace wte {

void check_token_ids(const int32_t* ids, size_t n, size_t vocab_size, const std::string& where) {
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || static_cast<size_t>(ids[i]) >= vocab_size) {
      throw Error("token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                  " of " + where + " is outside [0, vocab_size=" + std::to_string(vocab_size) +
                  ") (a tokenizer/config mismatch or a corrupt token file?)");
    }
  }
}

namespace {

// Reads at most max_bytes bytes of the open file `fd` (closed here), named `path` in errors.
std::string read_fd(int fd, const std::string& path, uint64_t max_bytes) {
  std::string bytes;
  char buf[1 << 16];
  while (bytes.size() < max_bytes) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(sizeof buf, max_bytes - bytes.size()));
    const ssize_t n = ::read(fd, buf, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw Error("error reading '" + path + "' (after " + std::to_string(bytes.size()) +
                  " bytes): " + std::strerror(err));
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

}  // namespace

std::string read_file_prefix(const std::string& path, uint64_t max_bytes) {
  // POSIX reads, so that a read error (EIO from a failing disk) is named with the path and errno
  // (an ifstream either throws libstdc++'s "basic_filebuf::underflow" without the path or ends
  // the read early as if the file were shorter).
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error("'" + path + "' is a directory, not a file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  return read_fd(fd, path, max_bytes);
}

std::string read_text_file(const std::string& path) {
  return read_file_prefix(path, UINT64_MAX);
}

std::string read_regular_file_prefix(const std::string& path, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO does not wait for a writer (it is refused below, never read).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("'" + path + "' is not a regular file (a directory, a device such as /dev/zero, "
                "a FIFO or a socket, perhaps behind a symbolic link); wte reads it only as a "
                "file it wrote");
  }
  return read_fd(fd, path, max_bytes);
}

namespace {
void fsync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) throw Error("cannot open '" + path + "' to fsync: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw Error("fsync of '" + path + "' failed: " + std::strerror(errno));
}
}  // namespace

void write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot create '" + tmp + "': " + std::strerror(errno));
    errno = 0;
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      const int err = errno;
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error("writing '" + tmp + "' failed: " +
                  (err != 0 ? std::string(std::strerror(err)) : std::string("I/O error")) +
                  (err == ENOSPC ? " (the disk is full)" : ""));
    }
  }
  commit_file(tmp, path);
}

void commit_file(const std::string& tmp, const std::string& path) {
  // The rename would replace a special file (/dev/null, a FIFO, a device) by the output: refuse,
  // and leave `path` as it is (callers remove tmp on error).
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec))
    throw Error("'" + path + "' exists and " + io::input_file_problem(path) + ": wte writes '" +
                tmp + "' and renames it into place, which would replace it");
  fsync_path(tmp, O_RDONLY);
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
  const fs::path dir = fs::path(path).parent_path();
  fsync_path(dir.empty() ? "." : dir.string(), O_RDONLY | O_DIRECTORY);
}

std::vector<int32_t> read_token_file(const std::string& path) {
  return read_token_file_prefix(path, UINT64_MAX);
}

std::vector<int32_t> read_token_file_prefix(const std::string& path, uint64_t max_ids) {
  const std::string bytes = read_file_prefix(
      path, max_ids > UINT64_MAX / sizeof(int32_t) ? UINT64_MAX : max_ids * sizeof(int32_t));
  if (bytes.size() % sizeof(int32_t) != 0)
    throw Error("token file '" + path + "' has " + std::to_string(bytes.size()) +
                " bytes, not a multiple of 4: it is not raw int32 ids");
  std::vector<int32_t> ids(bytes.size() / sizeof(int32_t));
  // x86-64 and the file are little-endian. An empty file has no buffer to copy into (memcpy
  // to null is undefined even for 0 bytes: found by fuzz_token_file under UBSan).
  if (!bytes.empty()) std::memcpy(ids.data(), bytes.data(), bytes.size());
  return ids;
}

void write_token_file(const std::string& path, const std::vector<int32_t>& ids) {
  write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(ids.data()),
                                           ids.size() * sizeof(int32_t)));
}

TextSplit split_documents(std::string_view text, double val_fraction) {
  // Documents: maximal runs of non-blank lines. A blank line is empty or holds only "\r", so
  // CRLF files split like LF files. A document keeps its own line ends, minus the final one.
  std::vector<std::string_view> docs;
  size_t doc_start = std::string_view::npos, doc_end = 0, pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view line = text.substr(pos, eol - pos);
    const bool blank = line.empty() || line == "\r";
    if (!blank) {
      if (doc_start == std::string_view::npos) doc_start = pos;
      doc_end = eol;
    } else if (doc_start != std::string_view::npos) {
      docs.push_back(text.substr(doc_start, doc_end - doc_start));
      doc_start = std::string_view::npos;
    }
    pos = eol + 1;
  }
  if (doc_start != std::string_view::npos) docs.push_back(text.substr(doc_start, doc_end - doc_start));
  TextSplit split;
  for (size_t i = 0; i < docs.size(); ++i) {
    const bool val = std::floor((i + 1) * val_fraction) > std::floor(i * val_fraction);
    std::string& dst = val ? split.val : split.train;
    if (!dst.empty()) dst += "\n\n";
    dst.append(docs[i]);
    (val ? split.val_documents : split.train_documents) += 1;
  }
  // With fewer than 2 documents no val_fraction gives both splits one: say what the corpus lacks.
  if (docs.size() < 2)
    throw Error(std::string("the corpus has ") +
                (docs.empty() ? "no documents (it is empty or holds only blank lines)"
                              : "1 document (no blank line separates documents)") +
                "; a train and a validation split need at least 2 documents separated by blank "
                "lines: give a larger corpus");
  if (split.train_documents == 0 || split.val_documents == 0)
    throw Error("the corpus has " + std::to_string(docs.size()) +
                " documents (separated by blank lines); with data.val_fraction = " +
                std::to_string(val_fraction) + " the " +
                (split.val_documents == 0 ? "validation" : "train") +
                " split is empty: use a larger corpus or another val_fraction");
  return split;
}

double unigram_cross_entropy(const std::vector<int32_t>& train, const std::vector<int32_t>& val,
                             size_t vocab_size) {
  std::vector<uint64_t> counts(vocab_size, 0);
  for (int32_t id : train) counts[static_cast<size_t>(id)] += 1;
  const double denom = static_cast<double>(train.size() + vocab_size);
  double total = 0.0;
  for (int32_t id : val) total -= std::log((counts[static_cast<size_t>(id)] + 1) / denom);
  return val.empty() ? 0.0 : total / static_cast<double>(val.size());
}

BatchLoader::BatchLoader(const std::vector<int32_t>* tokens, size_t T, bool shuffle, uint64_t seed)
    : BatchLoader(TokenStream::view(tokens), T, shuffle, seed) {}

BatchLoader::BatchLoader(const TokenStream& tokens, size_t T, bool shuffle, uint64_t seed)
    : tokens_(tokens), T_(T), shuffle_(shuffle), rng_(seed) {
  if (tokens_.size() < T + 1)
    throw Error("the token stream has " + std::to_string(tokens_.size()) +
                " tokens, fewer than seq_len + 1 = " + std::to_string(T + 1));
  num_samples_ = (tokens_.size() - 1) / T;
  if (num_samples_ > UINT32_MAX)
    throw Error("the token stream has " + std::to_string(num_samples_) + " sequences of seq_len " +
                std::to_string(T) + ", more than 2^32 - 1: raise data.seq_len or split the data");
  order_.resize(loader_order_words(num_samples_));
  start_epoch();
  epoch_ = 0;
}

void BatchLoader::start_epoch() {
  if (num_samples_ > kMaxStoredOrderSamples) {
    // The order's round keys; all zero without shuffle (then sample_at is the identity).
    for (size_t r = 0; r < 4; ++r) {
      const uint64_t key = shuffle_ ? rng_.next() : 0;
      order_[2 * r] = static_cast<uint32_t>(key);
      order_[2 * r + 1] = static_cast<uint32_t>(key >> 32);
    }
  } else {
    for (size_t i = 0; i < num_samples_; ++i) order_[i] = static_cast<uint32_t>(i);
    if (shuffle_) {
      for (size_t i = num_samples_ - 1; i > 0; --i) std::swap(order_[i], order_[rng_.below(i + 1)]);
    }
  }
  cursor_ = 0;
}

namespace {
// splitmix64's finalizer (Steele, Lea, Flood 2014): a bijective 64-bit mix.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
}  // namespace

uint32_t BatchLoader::sample_at(size_t position) const {
  if (num_samples_ <= kMaxStoredOrderSamples) return order_[position];
  if (!shuffle_) return static_cast<uint32_t>(position);
  // A balanced Feistel network on 2·half bits is a bijection of [0, 4^half) for any round
  // function; walking it from `position` until the value is below num_samples restricts it to a
  // bijection of [0, num_samples) (4^half < 4·num_samples, so under 4 steps on average).
  size_t half = 1;
  while ((uint64_t(1) << (2 * half)) < num_samples_) ++half;
  const uint64_t mask = (uint64_t(1) << half) - 1;
  uint64_t x = position;
  do {
    uint64_t left = x >> half, right = x & mask;
    for (size_t r = 0; r < 4; ++r) {
      const uint64_t key = order_[2 * r] | (static_cast<uint64_t>(order_[2 * r + 1]) << 32);
      const uint64_t next = left ^ (mix64(right ^ key) & mask);
      left = right;
      right = next;
    }
    x = (left << half) | right;
  } while (x >= num_samples_);
  return static_cast<uint32_t>(x);
}

void BatchLoader::next_batch(int32_t* inputs, int32_t* targets, size_t B,
                             std::vector<std::array<uint64_t, 2>>* served) {
  std::vector<uint32_t> samples;
  next_samples(B, &samples, served);
  copy_samples(samples.data(), B, inputs, targets);
}

void BatchLoader::next_samples(size_t B, std::vector<uint32_t>* samples,
                               std::vector<std::array<uint64_t, 2>>* served) {
  samples->resize(B);
  for (size_t b = 0; b < B; ++b) {
    if (cursor_ == num_samples_) {
      ++epoch_;
      start_epoch();
    }
    const uint32_t k = sample_at(cursor_++);
    if (served != nullptr) served->push_back({epoch_, k});
    (*samples)[b] = k;
  }
}

void BatchLoader::copy_samples(const uint32_t* samples, size_t count, int32_t* inputs,
                               int32_t* targets) const {
  std::vector<int32_t> window(T_ + 1);
  for (size_t b = 0; b < count; ++b) {
    const size_t pos = static_cast<size_t>(samples[b]) * T_;
    tokens_.read(pos, T_ + 1, window.data());
    tokens_.release(pos, T_ + 1);
    std::memcpy(inputs + b * T_, window.data(), T_ * sizeof(int32_t));
    std::memcpy(targets + b * T_, window.data() + 1, T_ * sizeof(int32_t));
  }
}

LoaderState BatchLoader::state() const {
  LoaderState s;
  s.epoch = epoch_;
  s.cursor = cursor_;
  s.num_samples = num_samples_;
  s.shuffle = shuffle_;
  s.rng_state = rng_.state();
  s.order = order_;
  return s;
}

void check_loader_state(const LoaderState& s, const std::string& where) {
  auto fail = [&](const std::string& what) { throw Error(where + ": data order " + what); };
  if (s.order.size() != loader_order_words(s.num_samples))
    fail("has " + std::to_string(s.order.size()) + " entries but num_samples = " +
         std::to_string(s.num_samples) + " needs " +
         std::to_string(loader_order_words(s.num_samples)));
  if (s.cursor > s.num_samples)
    fail("cursor " + std::to_string(s.cursor) + " exceeds num_samples = " +
         std::to_string(s.num_samples));
  if (s.rng_state == std::array<uint64_t, 4>{})
    fail("has an all-zero shuffle RNG state (not a state xoshiro256** can reach)");
  if (s.num_samples > kMaxStoredOrderSamples) return;  // any 8 words are keys of an order
  std::vector<bool> seen(s.num_samples, false);
  for (size_t i = 0; i < s.order.size(); ++i) {
    const uint32_t k = s.order[i];
    if (k >= s.num_samples || seen[k])
      fail("is not a permutation of [0, " + std::to_string(s.num_samples) + "): entry " +
           std::to_string(i) + " is " + std::to_string(k) +
           (k < s.num_samples ? ", which occurs twice" : ""));
    if (!s.shuffle && k != i)
      fail("is not the identity although shuffle is off: entry " + std::to_string(i) + " is " +
           std::to_string(k));
    seen[k] = true;
  }
}

void BatchLoader::restore(const LoaderState& s, const std::string& where) {
  check_loader_state(s, where);
  if (s.num_samples != num_samples_)
    throw Error(where + ": the data order is over " + std::to_string(s.num_samples) +
                " samples but this token stream has " + std::to_string(num_samples_) +
                " (another dataset or data.seq_len)");
  if (s.shuffle != shuffle_)
    throw Error(where + std::string(": the data order was saved with shuffle ") +
                (s.shuffle ? "on" : "off") + " but this loader has shuffle " +
                (shuffle_ ? "on" : "off"));
  epoch_ = s.epoch;
  cursor_ = s.cursor;
  rng_.set_state(s.rng_state);
  order_ = s.order;
}

uint64_t fnv1a64(const void* data, size_t n, uint64_t hash) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    hash ^= p[i];
    hash *= 1099511628211ULL;
  }
  return hash;
}

}  // namespace wte
